// The text form of a lowered convolution's problem (graph/io/qconv_text.cpp),
// the value of the text format's qconv="..." attribute:
//
//   desc=<benchdnn>;src=u8;dst=u8;zp=none|tensor:V|channel:V,..;scales=..;bias=..|none;
//   dst_zp=N;residual=none|add|sum;ops=<post-op text, full form>
#pragma once

#include <string>

#include "graph/ir/qconv_spec.h"

namespace qconv::graph::detail {

std::string qconv_text(const qconv_spec &s);
// Throws qconv::error starting with `where` on bad text or a spec that fails check().
qconv_spec parse_qconv_text(const std::string &text, const std::string &where);

} // namespace qconv::graph::detail
