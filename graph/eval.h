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

} // namespace qconv::graph::detail
