// The fused depthwise convolution (post_op::kind::dw_conv) as two ordinary
// convolutions (docs/semantics.md §5): the one place where a chain with a dw
// item is cut into its halves. The reference runs the halves in sequence,
// the composite row runs them as two primitives, the fused JIT rows run
// them band by band; all three start from split_dw().
#pragma once

#include <cstdint>
#include <vector>

#include "core/lowering.h"
#include "qconv/conv.h"

namespace qconv {

struct dw_halves {
    // The 1x1: the problem's source, zero point, scales, bias and the items
    // before the dw item; dst_dt is the intermediate type, dst_zp 0.
    conv_problem pw;
    // The depthwise: g = ic = oc = OC, 3x3, padding 1, the item's stride,
    // source = the intermediate (no zero point), the item's scales and bias,
    // the items after it, the problem's dst_dt and dst_zp.
    conv_problem dw;
    std::vector<int8_t> dw_wei; // the item's weights, [OC][1][3][3]
    std::vector<float> dw_bias; // the item's bias (empty: none)
};

// The depthwise's shape over a 1x1's output shape `pw` (stride 1 or 2).
conv_desc dw_desc_over(const conv_desc &pw, int stride);
// Precondition: p.dw() is non-null and p is valid.
dw_halves split_dw(const conv_problem &p);
// A lowered attribute set of such a problem cut at its dw_conv marker: the
// 1x1's (the set's zero point, the ops before) and the depthwise's (no zero
// point, the ops after). Either lowering of the whole chain cuts into the
// lowerings of its halves (an FQ before the marker rounds; the store would).
void split_dw(const attr_set &a, attr_set *pw, attr_set *dw);

} // namespace qconv
