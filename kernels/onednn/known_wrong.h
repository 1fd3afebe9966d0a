// The oneDNN 2.6.3 implementations the wrapper does not trust (internal to
// kernels/onednn/): the ones known to compute some problems wrong, every
// rule with its reproducer (docs/dispatch.md lists them), and which ones
// return the reference's int32 sums for every input.
#pragma once

#include <string>

#include "kernels/onednn/conv_recipe.h"

namespace qconv::impl::onednn {

// The reason oneDNN's implementation `info` computes the recipe's problem
// wrong, or "" when it is not known to. Every row passes over such an
// implementation (a brgconv row then has no implementation; the `onednn:any`
// peer takes oneDNN's next choice).
std::string known_wrong(const std::string &info, const recipe &r);

// Whether `info` is one of oneDNN's brgconv implementations on AMX, which are
// untrusted: wrong results that depend on the thread count (below).
bool brgconv_on_amx(const std::string &info);
extern const char *const brgconv_amx_untrusted;

// Whether `info` returns the reference's int32 sums for every input.
bool exact_impl(const std::string &info);

} // namespace qconv::impl::onednn
