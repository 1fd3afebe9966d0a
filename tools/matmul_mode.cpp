// `qconv-driver matmul`: weight-compressed MatMul problems (docs/semantics.md
// §7) on one, several or all implementations, in correctness (C), performance
// (P) or both.
//
//   qconv-driver matmul [--wei=u8|s8|u4|s4] [--group=per_oc|N] [--zp=none|tensor|per_oc|per_group]
//                       [--bias] [--dq] [--scale-dt=f32|f16] [--dt=T|X:Y] [common options] m1k4096n4096 ...
//                       | --batch=FILE
//
// Data (seeded): random weights over the type's range, scales in [0.01, 0.1),
// zero points over the type's range (per_oc: one value per output channel,
// repeated over its groups), x in [-1, 1), bias in [-2, 2). --dq requests
// dynamic quantization (matmul_hints::dynamic_quantization). --scale-dt=f16 hands the
// scales over in IEEE half (matmul_desc::scale_dt; the values rounded to f16 first). --dt gives
// the activation types (f32, f16, bf16; one for X and Y, or X:Y): x is rounded to its type, Y
// compared with the bound plus half an ulp of its type.
// Correctness: |y − y_ref| <= 1e-5 · (Σ_k |x·deq(W)| + |bias|) per element
// against ref::matmul (the bound of tests/test_matmul.cpp; 3e-5 for the
// AMX-BF16 rows, docs/semantics.md §7); with --dq the
// dynamic-quantization term Σ_k |deq(W)|·sx/2 is added (matmul_wc_dq.cpp).
// Output: one line per implementation: op=matmul impl= desc= wei= group= zp=
// bias= status= [errors=] [ms= gflops= gbps= (compressed weight bytes per
// second) ratio= (against the first implementation listed) reps=] [why=].
//
// --dump=DIR writes DIR/NNNN/ per run, enough to judge it alone:
//   problem.txt  key=value lines: desc, m k n, wei, group (0: per OC), zp kind,
//                bias, dq, impl, status, seed, and the comparison bound
//                (bound=1e-5*(sum|x*deq(w)|+|bias|), plus the dq term with dq=1)
//   x.bin        f32 [M][K]                 w.bin     W as given to the API: [N][K]
//                                                     bytes, 4-bit types two per
//                                                     byte (element 2i low nibble)
//   scale.bin    f32 [N][K/G]               zp.bin    s32, 1 or [N][K/G] (with a zp)
//   bias.bin     f32 [N] (with bias)        y.bin     f32 [M][N], the implementation's
//   y_ref.bin    f32 [M][N], the reference's (in C mode)
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/convert.h"
#include "qconv/matmul.h"
#include "reference/reference.h"
#include "tests/support/testdata.h"
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
    dtype scale_dt = dtype::f32;
    dtype src_dt = dtype::f32, dst_dt = dtype::f32;
};

matmul_settings parse_settings(const options &o) {
    matmul_settings s;
    s.wei = parse_dtype(o.get("wei", "u8"), "--wei");
    if (s.wei != dtype::u8 && s.wei != dtype::s8 && s.wei != dtype::u4 && s.wei != dtype::s4)
        throw usage_error("--wei: expected u8, s8, u4 or s4");
    s.group_text = o.get("group", "per_oc");
    if (s.group_text != "per_oc") {
        const std::string &g = s.group_text;
        if (g.empty() || g.find_first_not_of("0123456789") != std::string::npos ||
            g.find_first_not_of('0') == std::string::npos)
            throw usage_error("--group: expected per_oc or a positive size (got '" + g + "')");
        errno = 0;
        const long long v = std::strtoll(g.c_str(), nullptr, 10);
        if (errno == ERANGE) throw usage_error("--group: " + g + " is out of range (it overflows a 64-bit integer)");
        s.group = v;
    }
    s.zp_text = o.get("zp", "none");
    if (s.zp_text == "none") s.zp = zpk::none;
    else if (s.zp_text == "tensor" || s.zp_text == "per_tensor") s.zp = zpk::per_tensor;
    else if (s.zp_text == "per_group") s.zp = zpk::per_group;
    else if (s.zp_text == "per_oc") s.zp = zpk::per_group, s.zp_per_oc = true;
    else throw usage_error("--zp: expected none, tensor, per_oc or per_group");
    s.bias = o.get_bool("bias", false);
    s.dq = o.get_bool("dq", false);
    s.scale_dt = parse_dtype(o.get("scale-dt", "f32"), "--scale-dt");
    if (s.scale_dt != dtype::f32 && s.scale_dt != dtype::f16) throw usage_error("--scale-dt: expected f32 or f16");
    const std::string dt = o.get("dt", "f32");
    const size_t colon = dt.find(':');
    s.src_dt = parse_dtype(dt.substr(0, colon), "--dt");
    s.dst_dt = colon == std::string::npos ? s.src_dt : parse_dtype(dt.substr(colon + 1), "--dt");
    for (dtype t : {s.src_dt, s.dst_dt})
        if (t != dtype::f32 && t != dtype::f16 && t != dtype::bf16)
            throw usage_error("--dt: expected f32, f16 or bf16 (or X:Y)");
    return s;
}

// A problem of the batch with its data (tests/support/testdata.h) and its count (*N).
struct matmul_case : testdata::matmul_data {
    int64_t count = 1;
    std::vector<uint16_t> x16; // x in src_dt when that is f16 or bf16
};

// What the driver holds for a problem (x, y, the reference, the bound, the weights
// and their packed copy), checked before anything is generated.
void check_matmul_memory(const matmul_desc &d, const matmul_settings &s) {
    const double mk = double(d.m) * double(d.k), mn = double(d.m) * double(d.n);
    const bool x16 = s.src_dt != dtype::f32, y16 = s.dst_dt != dtype::f32;
    check_problem_memory({
        // x in f32, its 16-bit copy and the f32 copy execute_typed() makes of it
        {"x", mk * (x16 ? 4 + 2 + 4 : 4)},
        // y, the reference (f32), the bound (f64), a dump copy, the 16-bit y and its f32 copy
        {"y", mn * (4 + 4 + 8 + 4 + (y16 ? 2 + 4 : 0))},
        {"wei", double(d.wei_bytes()) + double(d.k) * double(d.n) * 4},
        {"scale", double(d.n) * double(d.n_groups()) * (4 + 2 + 4)},
    });
}

// The problem's descriptor with the settings applied, validated and checked
// against the memory limits (nothing allocated).
matmul_desc make_desc(const problem_text &t, const matmul_settings &s) {
    matmul_desc d = matmul_desc::parse(t.text);
    if (d.runtime()) fail("m", "the driver runs a given M ('" + t.text + "' leaves it to run time)");
    d.wei_dt = s.wei;
    d.group = s.group;
    d.zp = s.zp;
    d.with_bias = s.bias;
    d.scale_dt = s.scale_dt;
    d.src_dt = s.src_dt;
    d.dst_dt = s.dst_dt;
    d.validate();
    check_matmul_memory(d, s);
    return d;
}

matmul_case make_case(const problem_text &t, const matmul_settings &s, uint32_t seed) {
    const matmul_desc d = make_desc(t, s);
    matmul_case c;
    static_cast<testdata::matmul_data &>(c) = testdata::make_matmul_data(d, seed);
    c.count = t.count;
    if (d.src_dt != dtype::f32) { // x rounded to its type: the reference sees the same values
        c.x16.resize(c.x.size());
        detail::from_f32(d.src_dt, c.x.data(), c.x16.data(), int64_t(c.x.size()), false);
        detail::to_f32(d.src_dt, c.x16.data(), c.x.data(), int64_t(c.x.size()), false);
    }
    if (s.zp_per_oc) // one zero point per output channel, repeated over its groups
        for (int64_t n = 0; n < d.n; ++n)
            for (int64_t g = 1; g < d.n_groups(); ++g) c.zp[n * d.n_groups() + g] = c.zp[n * d.n_groups()];
    return c;
}

struct run_result {
    std::string requested, impl, status, why;
    int64_t errors = 0;
    double ms = -1;
    int reps = 0;
    std::vector<float> y; // the first execution's output
};

template <typename T>
void write_vec(const std::string &path, const std::vector<T> &v) {
    write_file(path, v.data(), v.size() * sizeof(T));
}

void dump_run(const std::string &root, int index, const matmul_case &c, const matmul_settings &s, uint32_t seed,
              const run_result &r, const std::vector<float> *ref) {
    char num[16];
    std::snprintf(num, sizeof num, "%04d", index);
    const std::string dir = root + "/" + num;
    make_dirs(dir, "--dump");
    const matmul_desc &d = c.d;
    std::ofstream t(dir + "/problem.txt");
    t << "desc=" << d.str() << "\n"
      << "m=" << d.m << "\nk=" << d.k << "\nn=" << d.n << "\n"
      << "wei=" << to_string(d.wei_dt) << "\n"
      << "group=" << d.group << "\n"
      << "zp=" << s.zp_text << "\n"
      << "bias=" << (d.with_bias ? 1 : 0) << "\n"
      << "scale_dt=" << to_string(d.scale_dt) << "\n"
      << "dt=" << to_string(d.src_dt) << ":" << to_string(d.dst_dt) << "\n"
      << "dq=" << (s.dq ? 1 : 0) << "\n"
      << "impl=" << r.impl << "\n"
      << "status=" << r.status << "\n"
      << "seed=" << seed << "\n"
      << "bound=1e-5*(sum|x*deq(w)|+|bias|)" << (s.dq ? "+sum|deq(w)|*sx/2" : "") << "\n";
    if (!t) throw usage_error("--dump: cannot write '" + dir + "/problem.txt'");
    write_vec(dir + "/x.bin", c.x);
    write_vec(dir + "/w.bin", c.wei);
    write_vec(dir + "/scale.bin", c.scale);
    if (!c.zp.empty()) write_vec(dir + "/zp.bin", c.zp);
    if (d.with_bias) write_vec(dir + "/bias.bin", c.bias);
    if (!r.y.empty()) write_vec(dir + "/y.bin", r.y);
    if (ref) write_vec(dir + "/y_ref.bin", *ref);
}

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
    std::vector<uint16_t> y16(c.d.dst_dt == dtype::f32 ? 0 : y.size());
    const void *xin = c.x16.empty() ? static_cast<const void *>(c.x.data()) : c.x16.data();
    void *yout = y16.empty() ? static_cast<void *>(y.data()) : y16.data();
    try {
        mm->execute_typed(xin, yout, 0, co.threads);
        if (!y16.empty()) detail::to_f32(c.d.dst_dt, y16.data(), y.data(), int64_t(y.size()), false);
    } catch (const std::exception &e) {
        r.status = "failed";
        r.why = std::string("execute: ") + e.what();
        return r;
    }
    r.status = "ok";
    if (!co.dump_dir.empty()) r.y = y;
    if (ref) {
        // The AMX-BF16 rows are held to at most 3e-5 instead of 1e-5 (docs/semantics.md §7).
        const double widen = r.impl.find("_amx") != std::string::npos ? 3.0 : 1.0;
        // A 16-bit Y adds its rounding, at most u·|y| ≤ u·(|ref| + bound) with the unit
        // roundoff u = 2^-8 (bf16) or 2^-11 (f16).
        const double ulp = c.d.dst_dt == dtype::bf16 ? 0x1p-8 : c.d.dst_dt == dtype::f16 ? 0x1p-11 : 0.0;
        for (size_t i = 0; i < y.size(); ++i) {
            const double tol = widen * (*bound)[i] * (1 + ulp) + ulp * std::fabs(double((*ref)[i]));
            if (std::fabs(double(y[i]) - double((*ref)[i])) <= tol) continue;
            if (!r.errors)
                r.why = "first at m=" + std::to_string(i / c.d.n) + " n=" + std::to_string(i % c.d.n) + ": got " +
                        format_double(y[i], 6) + " want " + format_double((*ref)[i], 6);
            ++r.errors;
        }
        if (r.errors) r.status = "mismatch";
    }
    if (co.performance()) {
        const timing t = measure([&] { mm->execute_typed(xin, yout, 0, co.threads); }, co.reps, co.budget_ms,
                                 co.correctness(), co.cold);
        r.ms = t.median_ms;
        r.reps = t.reps;
    }
    return r;
}

// The table's view of a problem: its oneDNN row is the fastest oneDNN run
// that matched (the key=value lines' ratio= compares with the first run).
report_problem to_report(const matmul_case &c, const std::vector<run_result> &runs) {
    report_problem p;
    p.layer = c.d.str();
    p.ops = c.d.flops();
    p.count = c.count;
    for (size_t i = 0; i < runs.size(); ++i) {
        const run_result &r = runs[i];
        p.runs.push_back({r.impl, r.requested == "auto", r.status, true, r.ms, r.why});
        const bool onednn = r.requested != "auto" && r.impl.rfind("onednn:", 0) == 0;
        if (onednn && r.status == "ok" && r.ms > 0 && (p.baseline < 0 || r.ms < runs[p.baseline].ms))
            p.baseline = static_cast<int>(i);
    }
    return p;
}

} // namespace

int matmul_mode(const std::vector<std::string> &args) {
    const options o(args);
    const common_options co = parse_common(o);
    const matmul_settings s = parse_settings(o);
    const std::vector<problem_text> texts = collect_problems(o);
    report rep(o, "matmul", false, "the fastest oneDNN run that matched");
    o.check_all_used();

    const std::vector<std::string> names = matmul_implementations();
    if (co.impl == "list") {
        for (size_t i = 0; i < names.size(); ++i)
            out_line().add("op", "matmul").add("impl", names[i]).add_int("index", static_cast<int64_t>(i)).print();
        return exit_ok;
    }
    if (texts.empty()) throw usage_error("matmul: no problem given (DESC... or --batch=FILE)");
    // Every problem is checked before anything runs (bad input never runs half a
    // batch); each one's data is generated when its turn comes.
    for (const auto &t : texts) {
        try {
            (void)make_desc(t, s);
        } catch (const qconv::error &e) {
            throw usage_error(t.origin + ": " + e.what());
        }
    }
    const std::vector<std::string> selected = selected_impls(co.impl, names);

    totals tot;
    bool failed = false;
    int dump_index = 0;
    for (size_t ci = 0; ci < texts.size(); ++ci) {
        const matmul_case c = make_case(texts[ci], s, co.seed + static_cast<uint32_t>(ci));
        rep.progress(ci + 1, texts.size(), c.d.str());
        std::vector<float> ref;
        std::vector<double> bound;
        if (co.correctness()) {
            ref.resize(static_cast<size_t>(c.d.m * c.d.n));
            matmul_desc f = c.d; // the f32 definition on the (rounded) x
            f.src_dt = f.dst_dt = dtype::f32;
            ref::matmul(f, c.weights(), c.x.data(), ref.data());
            bound = testdata::matmul_error_bound(c, s.dq);
        }
        std::vector<run_result> runs;
        for (const auto &n : selected) runs.push_back(run_one(c, n, co, s, co.correctness() ? &ref : nullptr, &bound));
        const double base = runs.empty() ? -1 : runs.front().ms;
        for (const auto &r : runs) {
            if (!co.dump_dir.empty() && r.status != "unimplemented")
                dump_run(co.dump_dir, dump_index++, c, s, co.seed + static_cast<uint32_t>(ci), r,
                         co.correctness() ? &ref : nullptr);
            out_line l;
            l.add("op", "matmul").add("impl", r.impl).add("desc", c.d.str()).add("wei", to_string(c.d.wei_dt));
            l.add("group", s.group_text).add("zp", s.zp_text).add("bias", s.bias ? "1" : "0");
            if (s.dq) l.add("dq", "1");
            if (s.scale_dt != dtype::f32) l.add("scale_dt", to_string(s.scale_dt));
            if (s.src_dt != dtype::f32 || s.dst_dt != dtype::f32)
                l.add("dt", std::string(to_string(s.src_dt)) + ":" + to_string(s.dst_dt));
            l.add("status", r.status);
            if (r.errors) l.add_int("errors", r.errors);
            if (r.ms > 0) {
                l.add("ms", r.ms, 4).add("gflops", c.d.flops() / (r.ms * 1e6), 2);
                l.add("gbps", double(c.d.wei_bytes()) / (r.ms * 1e6), 2);
                if (base > 0) l.add("ratio", base / r.ms, 3);
                l.add_int("reps", r.reps);
            }
            if (!r.why.empty()) l.why(r.why);
            rep.line(l);
            tot.add(r.requested == "auto" ? "auto" : r.impl, r.status, c.d.flops(), r.ms, base, c.count);
            failed = failed || r.status == "mismatch" || r.status == "failed";
        }
        rep.add(to_report(c, runs));
    }
    for (const auto &l : tot.lines("matmul", co.performance())) rep.line(l);
    rep.finish(co.performance(), co.threads);
    return failed ? exit_fail : exit_ok;
}

} // namespace qconv::driver
