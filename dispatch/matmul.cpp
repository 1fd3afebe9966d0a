// qconv::matmul: validation (including the dequantized range), the
// dispatcher's choice, the cached kernel, its own packed weights, and checked
// execution.
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "dispatch/dispatcher.h"
#include "dispatch/host_platform.h"
#include "dispatch/verbose.h"

namespace qconv {

using impl::verbose_level;
using impl::verbose_print;

namespace {
// docs/semantics.md §7: every dequantized weight f32(w − zp)·scale must be
// finite for every w of the type. The fused kernels apply the scale once per
// group sum, so an infinite or overflowing scale would give them other values
// than the definition (finite where it gives inf, or inf where w == zp gives
// NaN); such scales are refused here instead (the graph executor then runs
// the decompression unfused, as written). A NaN scale is data: it makes its
// outputs NaN in both forms.
void check_dequantized_range(const matmul_desc &d, const matmul_weights &w) {
    int64_t lo = 0, hi = 255;
    switch (d.wei_dt) {
    case dtype::s8: lo = -128, hi = 127; break;
    case dtype::u4: lo = 0, hi = 15; break;
    case dtype::s4: lo = -8, hi = 7; break;
    default: break;
    }
    const int64_t ng = d.n_groups();
    for (int64_t i = 0; i < d.scale_elems(); ++i) {
        const float s = w.scale[i];
        const int64_t zp = d.zp == matmul_desc::zp_kind::none ? 0 : w.zp[d.zp_elems() == 1 ? 0 : i];
        const double widest = double(std::max(std::llabs(hi - zp), std::llabs(lo - zp)));
        if (std::isnan(s)) continue;
        if (std::isinf(s) || std::fabs(double(s)) * widest > double(FLT_MAX))
            fail("scale", "value " + std::to_string(s) + " at n=" + std::to_string(i / ng) + " group " +
                              std::to_string(i % ng) + ": (w - zp)*scale is not finite for every weight of type " +
                              to_string(d.wei_dt));
    }
}
} // namespace

matmul::matmul(const matmul_desc &d, const matmul_weights &w, const matmul_hints &hints) {
    const double t0 = impl::now_ms();
    d.validate();
    if (!w.wei) fail("wei", "null pointer");
    if (!w.scale) fail("scale", "null pointer");
    if (d.zp_elems() > 0 && !w.zp) fail("zp", "null pointer while a zero point is declared");
    if (d.with_bias && !w.bias) fail("bias", "null pointer while with_bias is set");
    check_dequantized_range(d, w);

    const impl::platform plat = impl::host_platform();
    const impl::matmul_choice choice = impl::select_matmul(d, hints, plat);
    auto prim = std::make_unique<impl::matmul_primitive>();
    prim->desc = d;
    prim->name = choice.name;
    bool hit = false;
    prim->kernel = impl::cached_matmul_kernel(choice, d, hints, plat, &hit);
    prim->weights = prim->kernel->pack(w);
    if (verbose_level() >= 1) {
        prim->verbose_desc = impl::verbose_problem(d, hints);
        verbose_print(std::string("create,") + (hit ? "cache_hit," : "cache_miss,") + prim->name + ",attr[0]," +
                      prim->verbose_desc + "," + impl::verbose_ms(impl::now_ms() - t0));
    }
    p_ = std::move(prim);
}

matmul::~matmul() = default;
matmul::matmul(matmul &&) noexcept = default;
matmul &matmul::operator=(matmul &&) noexcept = default;

void matmul::execute(const float *x, float *y, int threads) const {
    if (!p_) fail("matmul", "moved-from primitive");
    if (!x) fail("x", "null pointer");
    if (!y) fail("y", "null pointer");
    impl::verbose_exec(
        p_->name, [&] { p_->kernel->execute(*p_->weights, x, y, threads); },
        [&] { return p_->verbose_desc.empty() ? impl::verbose_problem(p_->desc, {}) : p_->verbose_desc; });
}

const std::string &matmul::impl_name() const { return p_->name; }
const matmul_desc &matmul::desc() const { return p_->desc; }

std::vector<std::string> matmul_implementations() {
    std::vector<std::string> names;
    for (const auto &e : impl::matmul_list()) names.push_back(e.name);
    return names;
}

} // namespace qconv
