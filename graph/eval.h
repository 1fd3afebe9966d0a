// What the executor takes from the op evaluation (graph/eval.cpp) besides
// detail::eval_node: the f32 convolution of a node through a primitive it
// keeps, evaluation into an output whose layout it chose, and the 8-bit NHWC
// paths between lowered convolutions.
#pragma once

#include <vector>

#include "qconv/conv_desc.h"
#include "qconv/conv_f32.h"
#include "qconv/graph.h"

namespace qconv::graph::detail {

// The descriptor of an f32 Convolution / GroupConvolution node (NCHW values).
conv_desc f32_conv_desc(const node &n);
// Runs `c` (created from f32_conv_desc) on the NCHW value x into o, rounding
// to o's type (f32, f16 or bf16).
void run_f32_conv(const convolution_f32 &c, const tensor &x, tensor &o, int threads);
// A ConvTranspose (kernel = stride, no pads) run as the 1x1 convolution `c`
// to OC·sh·sw channels, each pixel's channels then put in its sh x sw block
// of the plain f32 output o.
void run_deconv_as_1x1(const convolution_f32 &c, const tensor &x, tensor &o, int threads);
// eval_node into an output the caller allocated: plain, or NHWC for a
// QuantizeLinear that qdq_takes_nhwc (inputs in another layout are made plain,
// except a DequantizeLinear's NHWC input).
void eval_node_into(const node &n, const std::vector<const tensor *> &in, tensor &o);
// Whether a QuantizeLinear / DequantizeLinear between f32 and u8/i8 of rank 4
// works on NHWC values as they are (per tensor, or per axis along C).
bool qdq_takes_nhwc(const node &n);
// MaxPool of a u8/i8 NHWC value into NHWC o.
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
