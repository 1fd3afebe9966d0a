// qconv::convolution: validation, the dispatcher's choice (or the tuned one),
// the cached kernel, its own packed weights, and checked execution.
#include <memory>
#include <optional>

#include "core/memory.h"
#include "dispatch/dispatcher.h"
#include "dispatch/environment.h"
#include "dispatch/host_platform.h"
#include "dispatch/tuning.h"
#include "dispatch/verbose.h"

namespace qconv {

using impl::verbose_level;
using impl::verbose_print;

namespace {
// Every implementation keeps a packed copy of the weights. A descriptor can be
// valid (each size within the limits) and still need more memory than the
// machine has: refuse it here, before any allocation, rather than let
// std::bad_alloc (or a sanitizer's allocation abort) surface from a kernel.
void check_fits_in_memory(const conv_desc &d) {
    // Packed copies are at most int32-wide per weight.
    impl::check_memory(double(d.wei_elems()) * 4, "wei", "packing " + std::to_string(d.wei_elems()) + " weights");
}
} // namespace

convolution::convolution(const conv_problem &p, const int8_t *weights, const float *bias, const conv_hints &hints) {
    const double t0 = impl::now_ms();
    p.validate();
    if (!weights) fail("weights", "null pointer");
    if (p.with_bias && !bias) fail("bias", "null pointer while with_bias is set");
    check_fits_in_memory(p.desc);
    impl::check_openmp_threads();

    const impl::platform plat = impl::host_platform();
    const impl::conv_choice choice = impl::is_auto(hints.impl) && impl::tuned_dispatch(hints)
                                         ? impl::tuned_choice(p, plat, hints, weights, bias)
                                         : impl::select_conv(p, plat, hints);
    auto prim = std::make_unique<impl::conv_primitive>();
    prim->problem = p;
    prim->name = choice.name;
    prim->attr_id = choice.attr_id;
    prim->attr = choice.attr;
    bool hit = false;
    prim->kernel = impl::cached_conv_kernel(choice, p, plat, &hit);
    prim->weights = prim->kernel->pack(weights, p.with_bias ? bias : nullptr);
    if (verbose_level() >= 1) {
        prim->verbose_desc = impl::verbose_problem(p);
        verbose_print(std::string("create,") + (hit ? "cache_hit," : "cache_miss,") + prim->name + ",attr[" +
                      std::to_string(prim->attr_id) + "]," + prim->verbose_desc + "," +
                      impl::verbose_ms(impl::now_ms() - t0));
    }
    p_ = std::move(prim);
}

convolution::~convolution() = default;
convolution::convolution(convolution &&) noexcept = default;
convolution &convolution::operator=(convolution &&) noexcept = default;

void convolution::execute(const void *src, void *dst, const exec_args &args) const {
    if (!p_) fail("convolution", "moved-from primitive");
    if (!src) fail("src", "null pointer");
    if (!dst) fail("dst", "null pointer");
    impl::check_threads_argument(args.threads);
    const int full = count_full_binary(p_->problem.ops);
    if (static_cast<int>(args.binary.size()) < full)
        fail("binary", "the chain has " + std::to_string(full) + " full-tensor binary post-op(s) but " +
                           std::to_string(args.binary.size()) + " tensor(s) were given");
    for (int i = 0; i < full; ++i)
        if (!args.binary[static_cast<size_t>(i)]) fail("binary", "null tensor #" + std::to_string(i));
    std::optional<threadpool_scope> on_pool;
    if (args.pool) on_pool.emplace(args.pool);
    impl::verbose_exec(
        p_->name, [&] { p_->kernel->execute(*p_->weights, src, dst, args); },
        [&] { return p_->verbose_desc.empty() ? impl::verbose_problem(p_->problem) : p_->verbose_desc; });
}

const std::string &convolution::impl_name() const { return p_->name; }
int convolution::attr_id() const { return p_->attr_id; }
bool convolution::exact() const { return p_->kernel->exact(); }
const conv_problem &convolution::problem() const { return p_->problem; }

std::vector<std::string> conv_implementations() {
    std::vector<std::string> names;
    for (const auto &e : impl::conv_list()) names.push_back(e.name);
    return names;
}

} // namespace qconv
