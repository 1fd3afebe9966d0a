// The dispatcher and the primitive classes (see dispatcher.h).
#include "dispatch/dispatcher.h"

#include <omp.h>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include <unistd.h>

#include "dispatch/attr_builder.h"
#include "dispatch/cache.h"
#include "dispatch/verbose.h"

namespace qconv::impl {
namespace {

template <class Entry>
std::string valid_names(const std::vector<Entry> &list) {
    std::string s = "auto";
    for (const auto &e : list) s += ", " + e.name;
    return s;
}

template <class Entry>
const Entry *find_entry(const std::vector<Entry> &list, const std::string &name) {
    for (const auto &e : list)
        if (e.name == name) return &e;
    fail("impl", "unknown implementation '" + name + "' (valid: " + valid_names(list) + ")");
}

std::string join(const std::vector<std::string> &v) {
    std::string s;
    for (const auto &x : v) s += (s.empty() ? "" : "; ") + x;
    return s;
}

// Records one rejection (and prints it at verbose level 2).
void note_skip(std::vector<std::string> &out, const std::string &name, int attr_id, const std::string &why) {
    const std::string attr = attr_id >= 0 ? "attr[" + std::to_string(attr_id) + "]" : "-";
    const std::string reason = why.empty() ? "not supported" : why;
    if (verbose_level() >= 2) verbose_print("skip," + name + "," + attr + "," + reason);
    out.push_back(name + " " + attr + ": " + reason);
}

bool is_auto(const std::string &impl) { return impl.empty() || impl == "auto"; }

} // namespace

// ------------------------------------------------------------------ entries

namespace {
// The row's feature check, then its own decision.
template <class Entry, class... Args>
plan_ptr decide_on(const Entry &e, const platform &pl, std::string *why, const Args &...args) {
    if (!pl.has_all(e.needs)) {
        reject(why, "needs " + e.needs.str() + "; platform " + pl.str() + " lacks " + pl.features.missing(e.needs));
        return nullptr;
    }
    return e.decide(args..., pl, why);
}
} // namespace

plan_ptr conv_entry::supports(const conv_problem &p, const attr_set &attr, const platform &pl, std::string *why) const {
    return decide_on(*this, pl, why, p, attr);
}

plan_ptr matmul_entry::supports(const matmul_desc &d, const matmul_hints &h, const platform &pl,
                                std::string *why) const {
    return decide_on(*this, pl, why, d, h);
}

// ------------------------------------------------------------------ select

namespace {
// The plan of an accepted candidate, at verbose level 2.
void note_plan(const std::string &name, int attr_id, const plan &pl) {
    if (verbose_level() < 2) return;
    const std::string attr = attr_id >= 0 ? "attr[" + std::to_string(attr_id) + "]" : "-";
    verbose_print("plan," + name + "," + attr + "," + pl.str());
}
} // namespace

conv_choice select_conv_in(const std::vector<conv_entry> &list, const std::vector<attr_set> &attrs,
                           const conv_problem &p, const platform &plat, const conv_hints &hints,
                           std::vector<std::string> *rejections) {
    std::vector<std::string> skipped;
    const bool forced = !is_auto(hints.impl);
    const conv_entry *only = forced ? find_entry(list, hints.impl) : nullptr;
    for (const auto &e : list) {
        if (only && &e != only) continue;
        if (!forced && e.peer) {
            note_skip(skipped, e.name, -1, "peer: runs only when forced by name");
            continue;
        }
        for (size_t a = 0; a < attrs.size(); ++a) {
            std::string why;
            if (plan_ptr pl = e.supports(p, attrs[a], plat, &why)) {
                const std::string deferred = !forced && e.defer ? e.defer(p, attrs[a]) : std::string();
                if (deferred.empty()) {
                    note_plan(e.name, static_cast<int>(a), *pl);
                    if (rejections) *rejections = std::move(skipped);
                    return {&e, e.name, static_cast<int>(a), attrs[a], std::move(pl)};
                }
                why = "deferred to the rows below: " + deferred;
            }
            note_skip(skipped, e.name, static_cast<int>(a), why);
        }
    }
    if (rejections) *rejections = skipped;
    if (forced)
        fail("impl", "'" + hints.impl + "' does not support this problem on " + plat.str() + ": " + join(skipped));
    fail("impl", "no implementation supports this problem on " + plat.str() + ": " + join(skipped));
}

conv_choice select_conv(const conv_problem &p, const platform &plat, const conv_hints &hints,
                        std::vector<std::string> *rejections) {
    const bool forced_peer = !is_auto(hints.impl) && find_entry(conv_list(), hints.impl)->peer;
    return select_conv_in(conv_list(), forced_peer ? build_attrs_for_peer(p, plat, hints) : build_attrs(p, plat, hints),
                          p, plat, hints, rejections);
}

std::vector<conv_choice> accepting_conv(const std::vector<conv_entry> &list, const std::vector<attr_set> &attrs,
                                        const conv_problem &p, const platform &plat) {
    std::vector<conv_choice> out;
    for (const auto &e : list) {
        if (e.peer) continue;
        for (size_t a = 0; a < attrs.size(); ++a)
            if (plan_ptr pl = e.supports(p, attrs[a], plat, nullptr)) {
                out.push_back({&e, e.name, static_cast<int>(a), attrs[a], std::move(pl)});
                break;
            }
    }
    return out;
}

bool tuned_dispatch(const conv_hints &hints) {
    static const bool env = [] {
        const char *v = std::getenv("QCONV_DISPATCH");
        if (!v || !*v || std::strcmp(v, "default") == 0) return false;
        if (std::strcmp(v, "tune") == 0) return true;
        fail("QCONV_DISPATCH", std::string("unknown value '") + v + "' (valid: default, tune)");
    }();
    return hints.tune || env;
}

matmul_choice select_matmul_in(const std::vector<matmul_entry> &list, const matmul_desc &d, const matmul_hints &hints,
                               const platform &plat, std::vector<std::string> *rejections) {
    std::vector<std::string> skipped;
    const bool forced = !is_auto(hints.impl);
    const matmul_entry *only = forced ? find_entry(list, hints.impl) : nullptr;
    for (const auto &e : list) {
        if (only && &e != only) continue;
        if (!forced && e.peer) {
            note_skip(skipped, e.name, -1, "peer: runs only when forced by name");
            continue;
        }
        std::string why;
        if (plan_ptr pl = e.supports(d, hints, plat, &why)) {
            note_plan(e.name, -1, *pl);
            if (rejections) *rejections = std::move(skipped);
            return {&e, e.name, std::move(pl)};
        }
        note_skip(skipped, e.name, -1, why);
    }
    if (rejections) *rejections = skipped;
    if (forced)
        fail("impl", "'" + hints.impl + "' does not support this problem on " + plat.str() + ": " + join(skipped));
    fail("impl", "no implementation supports this problem on " + plat.str() + ": " + join(skipped));
}

matmul_choice select_matmul(const matmul_desc &d, const matmul_hints &hints, const platform &plat,
                            std::vector<std::string> *rejections) {
    return select_matmul_in(matmul_list(), d, hints, plat, rejections);
}

// ------------------------------------------------------------------- cache

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

// ------------------------------------------------------------ public API
namespace qconv {

using impl::verbose_level;
using impl::verbose_print;

namespace {
std::string ms_str(double ms) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4f", ms);
    return buf;
}

bool is_auto_impl(const std::string &impl) { return impl.empty() || impl == "auto"; }

int count_full_binary(const post_ops &ops) {
    int n = 0;
    for (const auto &op : ops)
        if (op.k == post_op::kind::binary && op.bcast == broadcast::full) ++n;
    return n;
}
} // namespace

namespace {
// Every implementation keeps a packed copy of the weights. A descriptor can be
// valid (each size within the limits) and still need more memory than the
// machine has: refuse it here, before any allocation, rather than let
// std::bad_alloc (or a sanitizer's allocation abort) surface from a kernel.
void check_fits_in_memory(const conv_desc &d) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return;
    const double limit = double(pages) * double(page);
    const double bytes = double(d.wei_elems()) * 4; // packed copies are at most int32-wide per weight
    if (bytes > limit)
        fail("wei", "packing " + std::to_string(d.wei_elems()) + " weights needs about " +
                        std::to_string(int64_t(bytes / double(1 << 30))) + " GiB, more than this machine's " +
                        std::to_string(int64_t(limit / double(1 << 30))) + " GiB of memory");
}
} // namespace

namespace {
// Tuned dispatch: the winner per (problem, platform, thread count), decided
// once per process by timing every accepting row.
std::mutex tuned_mu;
std::map<std::string, std::string> tuned_winner;

impl::conv_choice tuned_choice(const conv_problem &p, const impl::platform &plat, const conv_hints &hints,
                               const int8_t *weights, const float *bias) {
    const std::vector<attr_set> attrs = impl::build_attrs(p, plat, hints);
    const std::vector<impl::conv_choice> cands = impl::accepting_conv(impl::conv_list(), attrs, p, plat);
    if (cands.size() <= 1) return impl::select_conv(p, plat, hints);
    const std::string key = p.key() + "|" + plat.str() + "|t" + std::to_string(omp_get_max_threads());
    std::lock_guard<std::mutex> lock(tuned_mu); // one problem tuned at a time: timings do not overlap
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
        const auto kernel = impl::cached_conv_kernel(cands[i], p, plat, &hit);
        const auto packed = kernel->pack(weights, p.with_bias ? bias : nullptr);
        kernel->execute(*packed, src.data(), dst.data(), args); // warm-up
        double ms = 1e30;
        for (int rep = 0; rep < 3; ++rep) {
            const double t0 = impl::now_ms();
            kernel->execute(*packed, src.data(), dst.data(), args);
            ms = std::min(ms, impl::now_ms() - t0);
        }
        if (verbose_level() >= 2)
            verbose_print("tune," + cands[i].name + ",attr[" + std::to_string(cands[i].attr_id) + "]," +
                          impl::verbose_problem(p) + "," + ms_str(ms));
        if (i == 0 || ms < best) best = ms, win = i;
    }
    tuned_winner[key] = cands[win].name;
    return cands[win];
}
} // namespace

convolution::convolution(const conv_problem &p, const int8_t *weights, const float *bias, const conv_hints &hints) {
    const double t0 = impl::now_ms();
    p.validate();
    if (!weights) fail("weights", "null pointer");
    if (p.with_bias && !bias) fail("bias", "null pointer while with_bias is set");
    check_fits_in_memory(p.desc);

    const impl::platform plat = impl::host_platform();
    const impl::conv_choice choice = is_auto_impl(hints.impl) && impl::tuned_dispatch(hints)
                                         ? tuned_choice(p, plat, hints, weights, bias)
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
                      std::to_string(prim->attr_id) + "]," + prim->verbose_desc + "," + ms_str(impl::now_ms() - t0));
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
    const int full = count_full_binary(p_->problem.ops);
    if (static_cast<int>(args.binary.size()) < full)
        fail("binary", "the chain has " + std::to_string(full) + " full-tensor binary post-op(s) but " +
                           std::to_string(args.binary.size()) + " tensor(s) were given");
    for (int i = 0; i < full; ++i)
        if (!args.binary[static_cast<size_t>(i)]) fail("binary", "null tensor #" + std::to_string(i));
    if (verbose_level() < 1) {
        p_->kernel->execute(*p_->weights, src, dst, args);
        return;
    }
    const double t0 = impl::now_ms();
    p_->kernel->execute(*p_->weights, src, dst, args);
    const double ms = impl::now_ms() - t0;
    const std::string desc = p_->verbose_desc.empty() ? impl::verbose_problem(p_->problem) : p_->verbose_desc;
    verbose_print("exec," + p_->name + "," + desc + "," + ms_str(ms));
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
                      prim->verbose_desc + "," + ms_str(impl::now_ms() - t0));
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
    if (verbose_level() < 1) {
        p_->kernel->execute(*p_->weights, x, y, threads);
        return;
    }
    const double t0 = impl::now_ms();
    p_->kernel->execute(*p_->weights, x, y, threads);
    const double ms = impl::now_ms() - t0;
    const std::string desc = p_->verbose_desc.empty() ? impl::verbose_problem(p_->desc, {}) : p_->verbose_desc;
    verbose_print("exec," + p_->name + "," + desc + "," + ms_str(ms));
}

const std::string &matmul::impl_name() const { return p_->name; }
const matmul_desc &matmul::desc() const { return p_->desc; }

std::vector<std::string> matmul_implementations() {
    std::vector<std::string> names;
    for (const auto &e : impl::matmul_list()) names.push_back(e.name);
    return names;
}

} // namespace qconv
