// What each op computes on tensors (graph/ops/): the evaluation of one node
// (eval_node: what folding, the lowering and the executor share), the
// data-movement ops, the f32 convolution of a node through a primitive, the
// executor's evaluation into an output whose layout it chose, and the 8-bit
// NHWC paths between lowered convolutions (glue_kernels.cpp).
#pragma once

#include <map>
#include <vector>

#include "graph/ir/detail.h"
#include "qconv/conv_desc.h"
#include "qconv/conv_f32.h"
#include "qconv/graph.h"

namespace qconv::graph::detail {

// o = the op applied to x, on typed storage (o's type, shape and storage set;
// Resize linear computes in f32 and rounds to o's type).
void slice(const node &n, const tensor &x, tensor &o);
void pad(const node &n, const tensor &x, tensor &o);
void resize(const node &n, const tensor &x, tensor &o);
// x and o both plain or both NHWC.
void depth_to_space(const node &n, const tensor &x, tensor &o);

// An elementwise region (graph/exec/elementwise_regions.cpp): `nodes` in
// topological order, each an f32 Add, Subtract, Multiply, Divide, Relu, Clamp
// or Sigmoid of o's [N, C, H, W] shape whose inputs are earlier nodes or
// values in `ext` (region_operand's shapes: o's shape in o's layout, one
// value, one per channel, one per image and channel). Evaluated chunk by
// chunk with each op's own evaluation (eval_node's arithmetic, element for
// element), the last node into o (plain or NHWC): the values the nodes
// give one after the other, without the intermediate tensors.
void eval_region(const std::vector<const node *> &nodes, const std::map<const node *, const tensor *> &ext, tensor &o);
// Whether a value of shape s may be an operand of a region of output shape out.
bool region_operand(const shape_t &s, const shape_t &out);

// The executor's evaluation of one node (graph/ops/eval.cpp): what its
// compile-time folding computes for a node whose inputs are known. The
// low-precision lowering reads constant subgraphs (a bias or scale written as
// Convert → Subtract → Multiply of Constants) through it, so the values it
// fuses are the ones the graph as written uses.
void eval_node(const node &n, const std::vector<const tensor *> &in, tensor &o);

// Constant folding as every stage does it (the reader's dequantized
// weights, the lowering's biases and scales, the executor's compile-time
// operands): whether x is a Constant or computed from Constants only — at
// most `levels` computed nodes deep, none of them above max_elems elements,
// no Parameter or QConvolution on the way — and, given memo, the value of x
// and of every node on the way by eval_node (memo also holds what an earlier
// call evaluated).
struct fold_limits {
    int levels;
    int64_t max_elems;
};
bool fold_constant(const node *x, const fold_limits &lim, std::map<const node *, tensor> *memo);

// The u8/i8 glue between lowered convolutions (graph/ops/glue_kernels.cpp),
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

// The descriptor of an f32 Convolution / GroupConvolution node (NCHW values).
conv_desc f32_conv_desc(const node &n);
// Runs `c` (created from f32_conv_desc) on the NCHW value x into o, rounding
// to o's type (f32, f16 or bf16).
void run_f32_conv(const convolution_f32 &c, const tensor &x, tensor &o, int threads);
// eval_node into an output the caller allocated: plain, or NHWC for a
// QuantizeLinear that qdq_takes_nhwc (inputs in another layout are made plain,
// except a DequantizeLinear's NHWC input).
void eval_node_into(const node &n, const std::vector<const tensor *> &in, tensor &o);
// Whether a QuantizeLinear / DequantizeLinear between f32 and u8/i8 of rank 4
// works on NHWC values as they are (per tensor, or per axis along C).
bool qdq_takes_nhwc(const node &n);
// MaxPool of a u8/i8 or f32 NHWC value into NHWC o (f32: the plain loop's
// maximum per channel, element for element).
void max_pool_nhwc_node(const node &n, const tensor &x, tensor &o);

// The dims of t's storage read as row-major NHWC ([N, H, W, C]): an NHWC
// tensor, or a plain one of rank <= 4 whose C dim (right-aligned to 4-D) or
// H·W is 1 (the same bytes in either layout; a per-channel or scalar
// operand). Empty when t's storage is not such a view.
shape_t nhwc_dims(const tensor &t);
// An elementwise f32 op (unary, or Add/Subtract/Multiply/Divide with numpy
// broadcast) on f32 inputs that nhwc_dims views, into the f32 NHWC output o:
// each element the same operation on the same operands as the plain op.
void eval_elementwise_nhwc(const node &n, const std::vector<const tensor *> &in, tensor &o);
// A ReduceMean of an f32 4-D value over axes {2, 3} (a global average pool).
bool reduce_mean_takes_nhwc(const node &n);
// That mean of an NHWC x into o (N·C values): per channel the pixels summed
// in order in double and divided by H·W, as the plain loop does.
void reduce_mean_hw_nhwc(const tensor &x, tensor &o);
// Concat along C of NHWC inputs into NHWC o (bytes, types of 8 bits or more).
void concat_nhwc(const std::vector<const tensor *> &in, tensor &o);

} // namespace qconv::graph::detail
