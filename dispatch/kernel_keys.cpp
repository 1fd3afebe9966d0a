// The kernel cache keys of the two primitives (see dispatcher.h): everything
// a kernel depends on — the problem, the attribute set, the platform, the row
// and its plan (which carries the tuning knobs).
#include "dispatch/cache.h"
#include "dispatch/dispatcher.h"

namespace qconv::impl {

std::shared_ptr<const conv_kernel> cached_conv_kernel(const conv_choice &c, const conv_problem &p, const platform &plat,
                                                      bool *hit) {
    const std::string key = "conv|" + p.key() + "|" + std::to_string(c.attr.id) + ":" + c.attr.str() + "|" +
                            plat.key() + "|" + c.name + "|" + c.plan->str();
    return kernel_cache::global().get_or_create_as<conv_kernel>(
        key, [&] { return c.entry->create(p, c.attr, *c.plan); }, hit);
}

std::shared_ptr<const matmul_kernel> cached_matmul_kernel(const matmul_choice &c, const matmul_desc &d,
                                                          const matmul_hints &h, const platform &plat, bool *hit) {
    const std::string key = "matmul|" + d.key() + "|dq=" + std::to_string(h.dynamic_quantization) + "|" + plat.key() +
                            "|" + c.name + "|" + c.plan->str();
    return kernel_cache::global().get_or_create_as<matmul_kernel>(
        key, [&] { return c.entry->create(d, h, *c.plan); }, hit);
}

} // namespace qconv::impl
