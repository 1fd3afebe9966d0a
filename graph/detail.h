// Internal helpers of the graph layer: half-precision conversion, element
// packing (u4/i4 two per byte, element 2i in the low nibble of byte i), the
// deterministic generator behind random(...) constants, and error helpers.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "qconv/graph.h"

namespace qconv::graph::detail {

uint16_t f32_to_f16(float f); // round to nearest even, saturates to inf
float f16_to_f32(uint16_t h);
inline float round_f16(float f) { return f16_to_f32(f32_to_f16(f)); }

// Range of an integer element type.
int64_t type_min(dtype t);
int64_t type_max(dtype t);
// Rounds (half to even) and saturates a value into type t; floats: f16/bf16 rounding.
double to_type(dtype t, double v);

// Element i of packed storage as double / writes element i.
double load(dtype t, const uint8_t *base, int64_t i);
void store(dtype t, uint8_t *base, int64_t i, double v);

// splitmix64: a portable generator (identical sequences on every platform).
struct rng {
    uint64_t s;
    explicit rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); } // [0,1)
    // Uniform in [lo, hi] (spans up to 2^64 − 1 computed in unsigned arithmetic).
    int64_t integer(int64_t lo, int64_t hi) {
        const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;
        const uint64_t off = span ? next() % span : next();
        return static_cast<int64_t>(static_cast<uint64_t>(lo) + off);
    }
};

std::string fmt_double(double v); // shortest text that parses back to the same double

// The whole of a regular file of at most `limit` bytes (graph/file_io.cpp): a
// directory ("is a directory, not <kind>"), a device or a pipe, a larger file
// ("is larger than <limit_text>") or a failed read is a qconv::error on the
// field "file" naming the path.
std::string read_regular_file(const std::string &path, int64_t limit, const std::string &limit_text,
                              const std::string &kind);

// Shape and type inference of every node as graph::infer(), except that a
// Constant without data yet (its generator not run) only has its shape
// checked: the text reader infers every shape before generating any data.
void infer_shapes(graph &g);

// Row-major strides of a shape, and the strides of `in` broadcast
// (right-aligned, numpy) to `out`: 0 where `in` has size 1 (graph/tensor.cpp).
std::vector<int64_t> strides_of(const shape_t &s);
std::vector<int64_t> bstrides(const shape_t &in, const shape_t &out);

// dst = src (packed elements of type t, row-major dims `in`) with its dims
// permuted: dst's dims are in[perm[0]], in[perm[1]], ... (graph/tensor.cpp).
void permute(dtype t, const uint8_t *src, const shape_t &in, const std::vector<int64_t> &perm, uint8_t *dst);

// Slice (graph/data_movement.cpp): per dim of the input `in`, the first index
// taken and the step, and the output shape; throws qconv::error naming the
// node for attributes that do not fit or an empty result.
struct slice_geometry {
    std::vector<int64_t> first, step;
    shape_t out;
};
slice_geometry slice_of(const node &n, const shape_t &in);
// Pad and Resize: the output shape of input shape `in`, the attributes
// checked (qconv::error naming the node).
shape_t pad_shape(const node &n, const shape_t &in);
shape_t resize_shape(const node &n, const shape_t &in);
// o = the op applied to x, on typed storage (o's type, shape and storage set;
// Resize linear computes in f32 and rounds to o's type).
void slice(const node &n, const tensor &x, tensor &o);
void pad(const node &n, const tensor &x, tensor &o);
void resize(const node &n, const tensor &x, tensor &o);

// The executor's evaluation of one node (graph/eval.cpp): what its
// compile-time folding computes for a node whose inputs are known. The
// low-precision lowering reads constant subgraphs (a bias or scale written as
// Convert → Subtract → Multiply of Constants) through it, so the values it
// fuses are the ones the graph as written uses.
void eval_node(const node &n, const std::vector<const tensor *> &in, tensor &o);

// The u8/i8 glue between lowered convolutions (graph/glue_kernels.cpp),
// vectorized, with the values of the executor's general loops.
struct pool_geometry {
    int64_t N, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL;
};
// MaxPool of 8-bit integers held NHWC, output NHWC: the maximum over the
// window's positions inside the input (0 for a window without any).
void max_pool_nhwc_8bit(const pool_geometry &p, bool is_signed, const uint8_t *src, uint8_t *dst);
// Quantization parameters of a tensor seen as [outer][C][inner] (plain
// order): one scale and zero point, or one per C (per_axis).
struct quant_params {
    int64_t outer = 1, C = 1, inner = 1;
    bool per_axis = false;
    const float *scale = nullptr;
    const int64_t *zp = nullptr;
};
// QuantizeLinear of f32 (plain) into u8/i8: nearbyint(x / scale) + zp,
// saturated, NaN → 0; nhwc: the output in NHWC order ([outer][inner][C]).
void quantize_f32(const float *x, const quant_params &q, bool u8, bool nhwc, uint8_t *y);
// DequantizeLinear of u8/i8 into f32 (plain): (x − zp) · scale; nhwc: the
// input is in NHWC order.
void dequantize_to_f32(const uint8_t *x, const quant_params &q, bool u8, bool nhwc, float *y);
// DequantizeLinear of NHWC u8/i8 into NHWC f32, the scale and zero point per
// channel (the innermost dim, q.C values).
void dequantize_nhwc_f32(const uint8_t *x, const quant_params &q, bool u8, float *y);
// ReduceMean over H and W of DequantizeLinear(x) with a per-tensor scale and
// zero point, without the f32 tensor: y[n·C + c] = f32(Σ_p f32((x − zp)·sc) /
// HW), the sum in double as the general ReduceMean takes it. Every addend is
// a multiple of ulp(sc) below 2^32 of them (|x − zp| ≤ 255), so with HW ≤
// dequantize_mean_max_hw the sums are exact in double and the result is the
// unfused one bit for bit, whatever the order. x: [N][C][HW], or NHWC.
constexpr int64_t dequantize_mean_max_hw = int64_t(1) << 20;
void dequantize_mean(const uint8_t *x, bool u8, bool nhwc, int64_t N, int64_t C, int64_t HW, float sc, int32_t zp,
                     float *y);

} // namespace qconv::graph::detail
