// The lowered convolution's own consistency (graph/ir/qconv_spec.h).
#include "graph/ir/qconv_spec.h"

#include <algorithm>

#include "core/lowering.h"

namespace qconv::graph::detail {

void qconv_spec::check(const std::string &where) const {
    try {
        p.validate();
        if (p.with_bias != !bias.empty()) fail("qconv: bias", "with_bias and the bias values disagree");
        if (p.with_bias && static_cast<int64_t>(bias.size()) != p.desc.oc)
            fail("qconv: bias", "expected " + std::to_string(p.desc.oc) + " values");
        const int sums = static_cast<int>(
            std::count_if(p.ops.begin(), p.ops.end(), [](const post_op &o) { return o.k == post_op::kind::sum; }));
        if ((residual && !sum) != (count_full_binary(p.ops) == 1))
            fail("qconv: residual", "add needs exactly one add:full post-op");
        if (sum != (sums == 1)) fail("qconv: residual", "sum needs exactly one sum post-op");
        if (sum && !residual) fail("qconv: residual", "sum needs the residual input");
    } catch (const error &e) {
        fail(where, e.what());
    }
}

} // namespace qconv::graph::detail
