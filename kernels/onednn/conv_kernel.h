// The kernel of the oneDNN int8 convolution wrapper (internal to
// kernels/onednn/): a oneDNN convolution primitive per thread count (oneDNN
// fixes the split at creation), weights reordered once by pack() into the
// layout the implementation asks for, and execution with the runtime zero
// point, the post-op operands and a per-thread scratchpad.
#pragma once

#include <memory>

#include "kernels/onednn/conv_select.h"

namespace qconv::impl::onednn {

// The kernel for a recipe and the primitive descriptor select_pd() returned
// for `threads` threads (throws dnnl::error when oneDNN refuses it).
std::shared_ptr<const conv_kernel> make_conv_kernel(const selector &sel, const conv_problem &p, const recipe &r,
                                                    const pd_t &pd, int threads);

} // namespace qconv::impl::onednn
