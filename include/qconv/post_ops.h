// Zero points and post-ops.
//
// A user describes what should happen after the convolution as a *logical*
// chain (post_op) and a source zero point. The dispatcher lowers them into
// one or two attribute sets — legacy mechanisms (attr[0]) and stock ones
// (attr[1]) — that compute the same values (docs/semantics.md §5–§6); that
// lowering is internal (core/lowering.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qconv/types.h"

namespace qconv {

// ---------------------------------------------------------------- zero point
struct zero_point {
    enum class kind { none, per_tensor, per_channel };
    kind k = kind::none;
    std::vector<int32_t> values; // 1 (per_tensor) or IC (per_channel) values

    static zero_point none() { return {}; }
    static zero_point tensor(int32_t v) { return {kind::per_tensor, {v}}; }
    static zero_point channel(std::vector<int32_t> v) { return {kind::per_channel, std::move(v)}; }

    // per_channel whose values are all equal is per_tensor.
    kind effective_kind() const;
    // Value for input channel ic (0 when none).
    int32_t at(int64_t ic) const;
    bool operator==(const zero_point &o) const { return k == o.k && values == o.values; }
};
const char *to_string(zero_point::kind k);

// ------------------------------------------------------------ logical chain
enum class eltwise_alg {
    relu,
    clip,
    linear,
    gelu_erf,
    gelu_tanh,
    swish,
    hardswish,
    mish,
    logistic,
    tanh,
    elu,
    abs,
    sqrt,
    square,
    exp,
    round
};
enum class binary_alg { add, sub, mul, div, max, min };
// How a parameter tensor of a post-op broadcasts over the NHWC destination.
enum class broadcast { per_tensor, per_oc, full };

const char *to_string(eltwise_alg a);
const char *to_string(binary_alg a);
const char *to_string(broadcast b);
eltwise_alg parse_eltwise_alg(const std::string &s);
binary_alg parse_binary_alg(const std::string &s);
// True for the algorithms computed with exp/erf/tanh/log (tolerance applies).
bool is_transcendental(eltwise_alg a);
// The eltwise function itself, in f32 (reference definition):
//   relu: x>0 ? x : alpha·x   clip: clamp(x, alpha, beta)   linear: alpha·x+beta
//   swish: x·sigmoid(alpha·x) elu: x>0 ? x : alpha(e^x−1)   round: half to even
//   hardswish: x·clamp(x/6+0.5, 0, 1) (alpha, beta ignored)
float eltwise_ref(eltwise_alg a, float alpha, float beta, float x);
float binary_ref(binary_alg a, float x, float y);

struct post_op {
    enum class kind { eltwise, binary, sum, scale_shift, prelu, fake_quantize, dw_conv };
    kind k = kind::eltwise;

    // eltwise
    eltwise_alg alg = eltwise_alg::relu;
    float alpha = 0.f, beta = 0.f;
    // binary: values has 1 (per_tensor) or OC (per_oc) elements; a `full`
    // tensor (f32, NHWC, shape of dst) is passed at execution time.
    binary_alg balg = binary_alg::add;
    broadcast bcast = broadcast::per_tensor;
    // sum: y += sum_scale·(dst_prev − sum_zp)
    float sum_scale = 1.f;
    int32_t sum_zp = 0;
    // scale_shift: y = y·scale[c] + shift[c]; prelu: y = y ≥ 0 ? y : y·scale[c]
    // binary per_tensor/per_oc operand also lives in `scale`.
    std::vector<float> scale, shift;
    // fake_quantize: each of 1 (per-tensor) or OC values
    int levels = 256;
    std::vector<float> in_lo, in_hi, out_lo, out_hi;
    // dw_conv: a 3x3 depthwise convolution (padding 1, stride dw_stride) over
    // the conv's output, stored first as dw_mid_dt (docs/semantics.md §5).
    // The items before it are the 1x1's post-ops, the items after it the
    // depthwise's; the problem's dst_dt and dst_zp are the depthwise's.
    int dw_stride = 1;            // 1 or 2
    dtype dw_mid_dt = dtype::u8;  // the intermediate: u8 or s8
    std::vector<int8_t> dw_wei;   // OC·9 s8, plain [OC][1][3][3]
    std::vector<float> dw_bias;   // empty (no bias) or OC values
    std::vector<float> dw_scales; // empty (1.0), 1 or OC values

    static post_op eltwise(eltwise_alg a, float alpha = 0.f, float beta = 0.f);
    static post_op relu(float alpha = 0.f) { return eltwise(eltwise_alg::relu, alpha); }
    static post_op binary(binary_alg a, broadcast b, std::vector<float> values = {});
    static post_op sum(float scale = 1.f, int32_t zp = 0);
    static post_op scale_shift_op(std::vector<float> scale, std::vector<float> shift);
    static post_op prelu(std::vector<float> slope);
    static post_op fake_quantize(int levels, std::vector<float> il, std::vector<float> ih, std::vector<float> ol,
                                 std::vector<float> oh);
    // A fused 3x3 depthwise conv after a 1x1 conv (docs/semantics.md §5).
    static post_op dw_conv(int stride, dtype mid_dt, std::vector<int8_t> wei, std::vector<float> bias = {},
                           std::vector<float> scales = {});

    bool operator==(const post_op &o) const;
};
using post_ops = std::vector<post_op>;

// Text form, ';'-separated items with every value written out (lists are
// ','-separated: 1 value, or OC values one per output channel):
//   relu  relu:0.1  clip:0:6  linear:2:1  gelu_erf  swish:1  ...   (eltwise)
//   add:per_tensor:2  mul:per_oc:1,2,..  max:full                    (binary)
//   sum  sum:0.5  sum:0.5:3
//   scale_shift:SCALES:SHIFTS  prelu:SLOPES
//   fq:LEVELS:IN_LO:IN_HI:OUT_LO:OUT_HI
//   dw:STRIDE:MID_DT:WEIGHTS:BIAS:SCALES   (WEIGHTS 9·OC values, BIAS OC
//       values or none, SCALES 1 or OC values or none; items after it are
//       the depthwise's post-ops)
// Throws qconv::error naming the item or field on bad text or values.
post_ops parse_post_ops(const std::string &text, int64_t oc);
// The full form: parse_post_ops(to_text(ops), oc) == ops.
std::string to_text(const post_ops &ops);
// The short form, without per-channel values (names in logs and verbose
// output): add:per_oc, scale_shift, fq:per_channel:16, ...
std::string to_string(const post_ops &ops);
// Throws qconv::error naming the post-op (index and field) if sizes/values are bad.
void validate(const post_ops &ops, int64_t oc);
// Whether the stock form of the chain needs binary post-ops (per-channel FQ,
// scale_shift, prelu with OC slopes, or an explicit binary).
bool needs_binary(const post_ops &ops);
bool has_legacy(const post_ops &ops); // scale_shift, prelu, fake_quantize, dw_conv
// The number of full-tensor binary post-ops: the tensors exec_args::binary holds.
int count_full_binary(const post_ops &ops);

} // namespace qconv
