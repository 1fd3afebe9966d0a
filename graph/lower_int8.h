// The lowered int8 convolution of the graph layer (graph/lower_int8.cpp):
// what a QConvolution node runs, written into one text attribute
// (attributes::qconv) so that to_text/parse keep it.
//
//   desc=<benchdnn>;src=u8;dst=u8;zp=none|tensor:V|channel:V,..;scales=..;bias=..|none;
//   dst_zp=N;residual=none|add|sum;ops=<post-op text, full form>
//
// Inputs of the node: the quantized source (u8/i8, NCHW dims), the s8 weights
// (a Constant [G·OCg, ICg, KH, KW]) and, with residual=add, the f32 tensor the
// `add:full` post-op reads; with residual=sum, the skip's integers (of the
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

    std::string encode() const;
    // Throws qconv::error starting with `where` on bad text.
    static qconv_spec decode(const std::string &text, const std::string &where);
};

} // namespace qconv::graph::detail
