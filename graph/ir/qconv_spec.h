// The lowered int8 convolution of the graph layer: what a QConvolution node
// runs, held by the node as an immutable typed payload (attributes::qconv)
// made by the low-precision lowering (graph/passes/lower_int8/). Its text
// form exists only in the text format (graph/io/qconv_text.h).
//
// Inputs of the node: the quantized source (u8/i8, NCHW dims), the s8 weights
// (a Constant [G·OCg, ICg, KH, KW]) and, with residual (not sum), the f32 tensor
// the `add:full` post-op reads; with sum, the skip's integers (of the
// destination's type), copied into the destination before the sum post-op reads it.
#pragma once

#include <string>
#include <vector>

#include "qconv/conv.h"

namespace qconv::graph::detail {

struct qconv_spec {
    conv_problem p;
    std::vector<float> bias; // OC values iff p.with_bias
    bool residual = false;   // input 2 is the residual: an add:full post-op reads it (f32), or
    bool sum = false;        // with sum, it holds the skip's integers (dst's type) and a sum post-op adds them

    // Throws qconv::error starting with `where` unless the problem is valid,
    // the bias has OC values and the residual agrees with the post-ops.
    void check(const std::string &where) const;
};

} // namespace qconv::graph::detail
