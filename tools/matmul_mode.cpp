// `qconv-driver matmul`: weight-compressed MatMul problems (DESIGN §4) on one,
// several or all implementations, in correctness (C), performance (P) or both.
//
//   qconv-driver matmul [--wei=u8|s8|u4|s4] [--group=per_oc|N] [--zp=none|tensor|per_oc|per_group]
//                       [--bias] [--dq] [common options] m1k4096n4096 ... | --batch=FILE
//
// Data (seeded): random weights over the type's range, scales in [0.01, 0.1),
// zero points over the type's range (per_oc: one value per output channel,
// repeated over its groups), x in [-1, 1), bias in [-2, 2). --dq requests
// dynamic quantization (matmul_hints::dynamic_quantization).
// Correctness: |y − y_ref| <= 1e-5 · (Σ_k |x·deq(W)| + |bias|) per element
// against ref::matmul (the bound of tests/test_matmul.cpp); with --dq the
// dynamic-quantization term Σ_k |deq(W)|·sx/2 is added (matmul_wc_dq.cpp).
// Output: one line per implementation: op=matmul impl= desc= wei= group= zp=
// bias= status= [errors=] [ms= gflops= gbps= (compressed weight bytes per
// second) ratio= (against the first implementation listed) reps=] [why=].
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "qconv/matmul.h"
#include "reference/reference.h"
#include "tools/driver.h"

namespace qconv::driver {
namespace {

using zpk = matmul_desc::zp_kind;

struct matmul_settings {
    dtype wei = dtype::u8;
    std::string group_text = "per_oc";
    int64_t group = 0;
    std::string zp_text = "none";
    bool zp_per_oc = false;
    zpk zp = zpk::none;
    bool bias = false;
    bool dq = false;
};

matmul_settings parse_settings(const options &o) {
    matmul_settings s;
    s.wei = parse_dtype(o.get("wei", "u8"), "--wei");
    if (s.wei != dtype::u8 && s.wei != dtype::s8 && s.wei != dtype::u4 && s.wei != dtype::s4)
        throw usage_error("--wei: expected u8, s8, u4 or s4");
    s.group_text = o.get("group", "per_oc");
    if (s.group_text != "per_oc") {
        char *end = nullptr;
        const long long g = std::strtoll(s.group_text.c_str(), &end, 10);
        if (!end || *end || g <= 0) throw usage_error("--group: expected per_oc or a positive size");
        s.group = g;
    }
    s.zp_text = o.get("zp", "none");
    if (s.zp_text == "none") s.zp = zpk::none;
    else if (s.zp_text == "tensor" || s.zp_text == "per_tensor") s.zp = zpk::per_tensor;
    else if (s.zp_text == "per_group") s.zp = zpk::per_group;
    else if (s.zp_text == "per_oc") s.zp = zpk::per_group, s.zp_per_oc = true;
    else throw usage_error("--zp: expected none, tensor, per_oc or per_group");
    s.bias = o.has("bias") && o.get("bias", "1") != "0";
    s.dq = o.has("dq") && o.get("dq", "1") != "0";
    return s;
}

void wrange(dtype dt, int *lo, int *hi) {
    switch (dt) {
    case dtype::u8: *lo = 0, *hi = 255; break;
    case dtype::s8: *lo = -128, *hi = 127; break;
    case dtype::u4: *lo = 0, *hi = 15; break;
    default: *lo = -8, *hi = 7; break;
    }
}

struct matmul_case {
    matmul_desc d;
    std::vector<uint8_t> wei;
    std::vector<float> scale, bias, x;
    std::vector<int32_t> zp;
    int64_t count = 1;

    matmul_weights weights() const {
        matmul_weights w;
        w.wei = wei.data();
        w.scale = scale.data();
        w.zp = zp.empty() ? nullptr : zp.data();
        w.bias = bias.empty() ? nullptr : bias.data();
        return w;
    }
};

matmul_case make_case(const problem_text &t, const matmul_settings &s, uint32_t seed) {
    matmul_case c;
    c.d = matmul_desc::parse(t.text);
    c.d.wei_dt = s.wei;
    c.d.group = s.group;
    c.d.zp = s.zp;
    c.d.with_bias = s.bias;
    c.d.validate();
    c.count = t.count;
    std::mt19937 rng(seed);
    int lo, hi;
    wrange(s.wei, &lo, &hi);
    std::uniform_int_distribution<int> wd(lo, hi);
    c.wei.resize(static_cast<size_t>(c.d.wei_bytes()));
    const bool four = s.wei == dtype::u4 || s.wei == dtype::s4;
    for (auto &b : c.wei) b = four ? static_cast<uint8_t>((wd(rng) & 0xF) | (wd(rng) & 0xF) << 4) : static_cast<uint8_t>(wd(rng));
    std::uniform_real_distribution<float> sd(0.01f, 0.1f), xd(-1.f, 1.f), bd(-2.f, 2.f);
    c.scale.resize(static_cast<size_t>(c.d.scale_elems()));
    for (auto &v : c.scale) v = sd(rng);
    c.zp.resize(static_cast<size_t>(c.d.zp_elems()));
    for (auto &v : c.zp) v = wd(rng);
    if (s.zp_per_oc)
        for (int64_t n = 0; n < c.d.n; ++n)
            for (int64_t g = 1; g < c.d.n_groups(); ++g) c.zp[n * c.d.n_groups() + g] = c.zp[n * c.d.n_groups()];
    if (s.bias) {
        c.bias.resize(static_cast<size_t>(c.d.n));
        for (auto &v : c.bias) v = bd(rng);
    }
    c.x.resize(static_cast<size_t>(c.d.m * c.d.k));
    for (auto &v : c.x) v = xd(rng);
    return c;
}

// Per-element bound 1e-5 · (Σ_k |x·deq(W)| + |bias|); with dynamic
// quantization plus Σ_k |deq(W)| · sx[m,g]/2, sx = max_{k in g} |x[m,k]| / 127.
std::vector<double> bounds(const matmul_case &c, bool dq) {
    const matmul_desc &d = c.d;
    const int64_t gs = d.group_size(), ng = d.n_groups();
    std::vector<double> half_sx(static_cast<size_t>(d.m * ng), 0.0);
    if (dq)
        for (int64_t m = 0; m < d.m; ++m)
            for (int64_t k = 0; k < d.k; ++k) {
                double &h = half_sx[m * ng + k / gs];
                h = std::max(h, std::fabs(double(c.x[m * d.k + k])) / 127.0 / 2.0);
            }
    std::vector<double> b(static_cast<size_t>(d.m * d.n));
    std::vector<double> w(static_cast<size_t>(d.k));
    for (int64_t n = 0; n < d.n; ++n) {
        for (int64_t k = 0; k < d.k; ++k) {
            const int64_t g = k / gs;
            const int32_t zp = d.zp == zpk::none ? 0 : d.zp == zpk::per_tensor ? c.zp[0] : c.zp[n * ng + g];
            w[k] = std::fabs(double(weight_at(c.wei.data(), d.wei_dt, n * d.k + k) - zp) * c.scale[n * ng + g]);
        }
        for (int64_t m = 0; m < d.m; ++m) {
            double s = d.with_bias ? std::fabs(c.bias[n]) : 0.0;
            double q = 0.0;
            for (int64_t k = 0; k < d.k; ++k) {
                s += w[k] * std::fabs(c.x[m * d.k + k]);
                if (dq) q += w[k] * half_sx[m * ng + k / gs];
            }
            b[m * d.n + n] = 1e-5 * s + q;
        }
    }
    return b;
}

struct run_result {
    std::string requested, impl, status, why;
    int64_t errors = 0;
    double ms = -1;
    int reps = 0;
};

run_result run_one(const matmul_case &c, const std::string &name, const common_options &co, const matmul_settings &s,
                   const std::vector<float> *ref, const std::vector<double> *bound) {
    run_result r;
    r.requested = r.impl = name;
    matmul_hints h;
    h.impl = name;
    h.dynamic_quantization = s.dq;
    std::unique_ptr<matmul> mm;
    try {
        mm = std::make_unique<matmul>(c.d, c.weights(), h);
    } catch (const std::exception &e) {
        r.status = "unimplemented";
        r.why = e.what();
        return r;
    }
    r.impl = mm->impl_name();
    std::vector<float> y(static_cast<size_t>(c.d.m * c.d.n), 0.f);
    try {
        mm->execute(c.x.data(), y.data(), co.threads);
    } catch (const std::exception &e) {
        r.status = "failed";
        r.why = std::string("execute: ") + e.what();
        return r;
    }
    r.status = "ok";
    if (ref) {
        for (size_t i = 0; i < y.size(); ++i) {
            if (std::fabs(double(y[i]) - double((*ref)[i])) <= (*bound)[i]) continue;
            if (!r.errors)
                r.why = "first at m=" + std::to_string(i / c.d.n) + " n=" + std::to_string(i % c.d.n) + ": got " +
                        format_double(y[i], 6) + " want " + format_double((*ref)[i], 6);
            ++r.errors;
        }
        if (r.errors) r.status = "mismatch";
    }
    if (co.performance()) {
        const timing t = measure([&] { mm->execute(c.x.data(), y.data(), co.threads); }, co.reps, co.budget_ms,
                                 co.correctness());
        r.ms = t.median_ms;
        r.reps = t.reps;
    }
    return r;
}

std::vector<std::string> selected_impls(const std::string &impl, const std::vector<std::string> &names) {
    if (impl == "all") return names;
    std::vector<std::string> out;
    size_t b = 0;
    for (;;) {
        const size_t e = impl.find(',', b);
        const std::string n = impl.substr(b, e == std::string::npos ? std::string::npos : e - b);
        if (n != "auto" && std::find(names.begin(), names.end(), n) == names.end()) {
            std::string valid;
            for (const auto &x : names) valid += " " + x;
            throw usage_error("--impl: unknown implementation '" + n + "' (valid: auto all list" + valid + ")");
        }
        out.push_back(n);
        if (e == std::string::npos) return out;
        b = e + 1;
    }
}

} // namespace

int matmul_mode(const std::vector<std::string> &args) {
    const options o(args);
    const common_options co = parse_common(o);
    const matmul_settings s = parse_settings(o);
    const std::vector<problem_text> texts = collect_problems(o);
    o.check_all_used();

    const std::vector<std::string> names = matmul_implementations();
    if (co.impl == "list") {
        for (size_t i = 0; i < names.size(); ++i)
            out_line().add("op", "matmul").add("impl", names[i]).add_int("index", static_cast<int64_t>(i)).print();
        return exit_ok;
    }
    if (texts.empty()) throw usage_error("matmul: no problem given (DESC... or --batch=FILE)");
    std::vector<matmul_case> cases;
    for (size_t i = 0; i < texts.size(); ++i) cases.push_back(make_case(texts[i], s, co.seed + static_cast<uint32_t>(i)));
    const std::vector<std::string> selected = selected_impls(co.impl, names);

    totals tot;
    bool failed = false;
    for (const matmul_case &c : cases) {
        std::vector<float> ref;
        std::vector<double> bound;
        if (co.correctness()) {
            ref.resize(static_cast<size_t>(c.d.m * c.d.n));
            ref::matmul(c.d, c.weights(), c.x.data(), ref.data());
            bound = bounds(c, s.dq);
        }
        std::vector<run_result> runs;
        for (const auto &n : selected)
            runs.push_back(run_one(c, n, co, s, co.correctness() ? &ref : nullptr, &bound));
        const double base = runs.empty() ? -1 : runs.front().ms;
        for (const auto &r : runs) {
            out_line l;
            l.add("op", "matmul").add("impl", r.impl).add("desc", c.d.str()).add("wei", to_string(c.d.wei_dt));
            l.add("group", s.group_text).add("zp", s.zp_text).add("bias", s.bias ? "1" : "0");
            if (s.dq) l.add("dq", "1");
            l.add("status", r.status);
            if (r.errors) l.add_int("errors", r.errors);
            if (r.ms > 0) {
                l.add("ms", r.ms, 4).add("gflops", c.d.flops() / (r.ms * 1e6), 2);
                l.add("gbps", double(c.d.wei_bytes()) / (r.ms * 1e6), 2);
                if (base > 0) l.add("ratio", base / r.ms, 3);
                l.add_int("reps", r.reps);
            }
            if (!r.why.empty()) l.why(r.why);
            l.print();
            tot.add(r.requested == "auto" ? "auto" : r.impl, r.status, c.d.flops(), r.ms, base, c.count);
            failed = failed || r.status == "mismatch" || r.status == "failed";
        }
    }
    tot.print("matmul", co.performance());
    return failed ? exit_fail : exit_ok;
}

} // namespace qconv::driver
