// Which oneDNN implementation a wrapper row takes (internal to
// kernels/onednn/): stepping through oneDNN's implementations with
// next_impl() until the selector accepts one that is not known wrong and
// whose primitive can be created.
#pragma once

#include <optional>
#include <string>

#include "kernels/onednn/conv_recipe.h"
#include "kernels/onednn/onednn_conv.h"

namespace qconv::impl::onednn {

using pd_t = dnnl::convolution_forward::primitive_desc;

// Whether the selector's row takes oneDNN's implementation `info`; *wrong is
// set when it is refused as known wrong or untrusted.
bool accepts(const selector &sel, const std::string &info, const recipe &r, std::string *wrong);
// The primitive descriptor positioned on the selector's implementation, with
// oneDNN planning for `threads` threads, or nullopt with the reason (what
// oneDNN offered and why each was passed over).
std::optional<pd_t> select_pd(const selector &sel, const recipe &r, int threads, std::string *why);
// Whether the selector's row takes the attribute set at all.
bool attr_allowed(const selector &sel, const attr_set &attr, std::string *why);

} // namespace qconv::impl::onednn
