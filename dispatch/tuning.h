// The opt-in tuned dispatch (QCONV_DISPATCH=tune or conv_hints::tune; see
// docs/dispatch.md): the creation of a convolution times every row "auto"
// could pick for the problem and keeps the fastest, once per process for each
// (problem, platform, OpenMP thread count).
#pragma once

#include "dispatch/dispatcher.h"

namespace qconv::impl {

// Whether tuned dispatch is on: conv_hints::tune or QCONV_DISPATCH=tune (read once).
bool tuned_dispatch(const conv_hints &hints);
// QCONV_DISPATCH as it is now: false when unset, empty or "default", true for
// "tune"; anything else is an error naming the variable.
bool tuned_dispatch_from_env();
// The fastest accepting row for p on plat (timed with the user's weights on
// data of the problem's shape), or select_conv()'s choice when only one row
// accepts.
conv_choice tuned_choice(const conv_problem &p, const platform &plat, const conv_hints &hints, const int8_t *weights,
                         const float *bias);

} // namespace qconv::impl
