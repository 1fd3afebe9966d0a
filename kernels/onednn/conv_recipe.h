// The recipe of the oneDNN int8 convolution wrapper (internal to
// kernels/onednn/): everything needed to create the primitive for (problem,
// attribute set) — the convolution descriptor on NHWC source and destination
// with weights in format_tag::any, output scales, the stock per-tensor source
// zero point as a runtime value, the post-op chain (conv_post_ops.h) and the
// destination zero point as a final per-tensor binary add.
//
// Bias order. qconv defines y = madd(acc, scale[c], bias[c]) (one rounding);
// oneDNN 2.6 computes scale[c]·(acc + bias[c]) for int8 convolutions. When
// every scale is a power of two the wrapper passes bias[c]/scale[c] as
// oneDNN's bias: the division is exact and scaling by a power of two commutes
// with rounding, so round(acc + bias/scale)·scale == round(acc·scale + bias)
// bit for bit (tests/test_onednn_conv.cpp proves it over the shape sweep).
// With any other scale the bias becomes a per-OC binary add, the first
// post-op: round(round(acc·scale) + bias), at most one rounding step away
// from the contract (integers within 1, as docs/semantics.md §8 allows for inexact data).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernels/onednn/conv_post_ops.h"

namespace qconv::impl::onednn {

// Everything needed to create the primitive, derived from (problem, attr).
struct recipe {
    dnnl::convolution_forward::desc desc;
    dnnl::primitive_attr attr;
    std::vector<operand> operands;
    bool bias_arg = false;     // oneDNN bias = bias[c] / scale[c]
    bool bias_post_op = false; // bias as the first post-op (binary add)
    bool src_zp = false;
    int32_t src_zp_value = 0;
    md_t src_md, dst_md, plain_wei_md;
    bool grouped = false;
    conv_desc shape;         // the problem's geometry (known_wrong() reads it)
    bool binary_ops = false; // the oneDNN chain has a binary post-op
    bool sum_op = false;     // the oneDNN chain has a sum post-op
};

// The plain ([G·OCg][ICg][KH][KW]) or `any` weights descriptor of d.
md_t weights_md(const conv_desc &d, tag_t tag);
// The recipe, or nullopt with the reason in *why.
std::optional<recipe> make_recipe(const conv_problem &p, const attr_set &attr, std::string *why);

} // namespace qconv::impl::onednn
