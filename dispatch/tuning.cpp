// The opt-in tuned dispatch (docs/dispatch.md): every row auto could pick is
// timed once per (problem, platform, thread count) and the fastest kept.
#include "dispatch/tuning.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "core/parallel.h"
#include "dispatch/attr_builder.h"
#include "dispatch/verbose.h"

namespace qconv::impl {

bool tuned_dispatch_from_env() {
    const char *v = std::getenv("QCONV_DISPATCH");
    if (!v || !*v || std::strcmp(v, "default") == 0) return false;
    if (std::strcmp(v, "tune") == 0) return true;
    fail("QCONV_DISPATCH", std::string("unknown value '") + v + "' (valid: default, tune)");
}

bool tuned_dispatch(const conv_hints &hints) {
    static const bool env = tuned_dispatch_from_env();
    return hints.tune || env;
}

namespace {
// The winner per (problem, platform, thread count), decided once per
// process by timing every accepting row. Recursive: timing the composite
// row (a fused dw item) creates its two halves' primitives, which are tuned
// too, on the same thread.
std::recursive_mutex tuned_mu;
std::map<std::string, std::string> tuned_winner;
} // namespace

conv_choice tuned_choice(const conv_problem &p, const platform &plat, const conv_hints &hints, const int8_t *weights,
                         const float *bias) {
    const std::vector<attr_set> attrs = build_attrs(p, plat, hints);
    const std::vector<conv_choice> cands = accepting_conv(conv_list(), attrs, p, plat);
    if (cands.size() <= 1) return select_conv(p, plat, hints);
    const std::string key = p.key() + "|" + plat.str() + "|t" + std::to_string(default_threads());
    std::lock_guard<std::recursive_mutex> lock(tuned_mu); // one problem tuned at a time: timings do not overlap
    const auto known = tuned_winner.find(key);
    if (known != tuned_winner.end())
        for (const auto &c : cands)
            if (c.name == known->second) return c;

    // Data of the problem's shape: a byte ramp as the source, zeros elsewhere.
    const conv_desc &d = p.desc;
    std::vector<uint8_t> src(static_cast<size_t>(d.src_elems()));
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
    std::vector<uint8_t> dst(static_cast<size_t>(d.dst_elems()) * 4);
    std::vector<float> full(static_cast<size_t>(d.dst_elems()), 0.f);
    exec_args args;
    args.binary.assign(static_cast<size_t>(count_full_binary(p.ops)), full.data());

    size_t win = 0;
    double best = 0;
    for (size_t i = 0; i < cands.size(); ++i) {
        bool hit = false;
        const auto kernel = cached_conv_kernel(cands[i], p, plat, &hit);
        const auto packed = kernel->pack(weights, p.with_bias ? bias : nullptr);
        kernel->execute(*packed, src.data(), dst.data(), args); // warm-up
        double ms = 1e30;
        for (int rep = 0; rep < 3; ++rep) {
            const double t0 = now_ms();
            kernel->execute(*packed, src.data(), dst.data(), args);
            ms = std::min(ms, now_ms() - t0);
        }
        if (verbose_level() >= 2)
            verbose_print("tune," + cands[i].name + ",attr[" + std::to_string(cands[i].attr_id) + "]," +
                          verbose_problem(p) + "," + verbose_ms(ms));
        if (i == 0 || ms < best) best = ms, win = i;
    }
    tuned_winner[key] = cands[win].name;
    return cands[win];
}

} // namespace qconv::impl
