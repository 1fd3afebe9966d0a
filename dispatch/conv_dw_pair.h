// The composite row for a fused depthwise item (post_op::kind::dw_conv):
// `composite:conv_1x1_dw` runs the 1x1 and then the depthwise as two
// qconv::convolution primitives, each chosen by the normal dispatch (so each
// half gets the fastest exact row for it), through an intermediate tensor.
// It is the path every ISA has for a chain a fused row does not take; it
// lives in dispatch/ because it creates primitives.
#pragma once

#include "rows/row.h"

namespace qconv::impl {

conv_entry conv_dw_pair_row();

} // namespace qconv::impl
