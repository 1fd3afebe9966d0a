// Test data for convolution problems, shared by the test suites, the driver
// and the benches (the static target qconv_testdata; not in libqconv.so).
//
// `random` data keeps the whole f32 output pipeline exact, so every
// implementation must match the reference bit for bit:
//   src        u8 in [0, 15], s8 in [-8, 7]
//   weights    s8 in [-4, 4]
//   bias       integers in [-8, 8]
//   scales     powers of two 2^-6 .. 2^-2
//   zero point u8 source: [0, 15]; s8 source: [-8, 7]
//   full binary tensors and dst (for sum) small values, binary operands
//   non-zero powers of two (so div is exact too)
// `extreme` data saturates: u8 src mostly 255, s8 src −128/127, weights
// −128/127 (whole output channels of 127, of −128, and mixed), zero points 0
// and 255 (u8) or −128/127 (s8): accumulators reach ±255·128·IC·KH·KW.
//
// Everything is deterministic in (problem, kind, seed).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qconv/conv.h"
#include "qconv/matmul.h"

namespace qconv::testdata {

enum class data_kind { random, extreme };
data_kind parse_data_kind(const std::string &s); // "random" | "extreme", else qconv::error("data: ...")
const char *to_string(data_kind k);

// A small deterministic generator (xorshift-multiply), independent of the
// standard library's distributions so sequences are the same everywhere.
class rng {
public:
    explicit rng(uint64_t seed);
    uint32_t next();
    int32_t uniform(int32_t lo, int32_t hi); // inclusive
    bool chance(int one_in);                 // true with probability 1/one_in

private:
    uint64_t s_;
};

// Bytes of n elements of dt (4-bit types round up).
size_t bytes_of(dtype dt, int64_t n);

// NHWC source of p.src_dt (u8 or s8), p.desc.src_elems() bytes.
std::vector<uint8_t> make_src(const conv_problem &p, data_kind k, uint32_t seed);
// Plain [G·OCg][ICg][KH][KW] s8 weights.
std::vector<int8_t> make_weights(const conv_desc &d, data_kind k, uint32_t seed);
// OC small integer biases.
std::vector<float> make_bias(const conv_desc &d, uint32_t seed);
// OC (or 1 when per_tensor) powers of two.
std::vector<float> make_scales(int64_t oc, bool per_tensor, uint32_t seed);
// Zero-point spec: "none", "tensor:V", "tensor:random", "channel:V" (IC equal
// values, i.e. effectively per-tensor), "channel:random". Random values follow
// the data kind (see above). Throws qconv::error("zp: ...") on a bad spec.
zero_point make_zp(const std::string &spec, int64_t ic, dtype src_dt, data_kind k, uint32_t seed);
// A post-op chain from the text form of qconv::parse_post_ops, where an item
// may leave its values out to have them generated (deterministic in
// (text, oc, seed), chosen so the f32 pipeline stays exact;
// testdata_post_ops.cpp lists the sets):
//   add|sub|mul|div|max|min[:per_tensor|per_oc]   scale_shift[:per_tensor|per_oc]
//   prelu[:per_tensor|per_oc]   fq[:per_tensor|per_channel[:levels]]
//   dw[:STRIDE[:MID_DT[:bias|nobias[:random|extreme]]]]   (a fused 3x3 depthwise)
// Items with values, and every other item, pass through as written.
post_ops make_post_ops(const std::string &text, int64_t oc, uint32_t seed);
// One f32 NHWC tensor of dst's shape per `full` binary post-op, in chain order.
std::vector<std::vector<float>> make_binary_tensors(const conv_problem &p, uint32_t seed);
// Initial destination (what a sum post-op reads), bytes of p.dst_dt.
std::vector<uint8_t> make_dst(const conv_problem &p, uint32_t seed);

// ---------------------------------------------------------- compressed MatMul
// Integer range of a weight type: u8 [0, 255], s8 [-128, 127], u4 [0, 15], s4 [-8, 7].
void weight_range(dtype dt, int32_t *lo, int32_t *hi);
// Sets element i of a packed weight tensor (u4/s4: element 2i in the low nibble of byte i).
void set_weight(std::vector<uint8_t> &w, dtype dt, int64_t i, int32_t v);

// A compressed-MatMul problem with its data: weights and zero points uniform
// over the weight type's range, scales in [0.01, 0.1], bias in [-2, 2], x in
// [-1, 1]. Real-valued, so f32 results are compared with matmul_error_bound().
struct matmul_data {
    matmul_desc d;
    std::vector<uint8_t> wei;
    std::vector<float> scale, bias, x; // scale: the f32 values (f16 values when scale_dt is f16)
    std::vector<uint16_t> scale_f16;   // the same scales in IEEE half, iff scale_dt is f16
    std::vector<int32_t> zp;
    matmul_weights weights() const;
};
matmul_data make_matmul_data(const matmul_desc &d, uint32_t seed);

// Per-output bound on |y − ref::matmul| (docs/matmul_wc.md):
//   1e-5 · (Σ_k |x·deq(W)| + |bias|)
// and, with dynamic quantization, + Σ_k |deq(W)| · sx/2 where sx is the row's
// int8 step in that group, max_{k in group} |x| / 127.
std::vector<double> matmul_error_bound(const matmul_data &c, bool dynamic_quantization);

} // namespace qconv::testdata
