// `qconv-driver conv`: int8 convolution problems on one, several or all
// implementations, in correctness (C), performance (P) or both (CP) modes.
//
// For each problem the selected implementations run one after the other
// (forced by name through conv_hints::impl, or "auto"), and one line per
// implementation is printed once the problem is done, so the ratio against
// the baseline (the fastest oneDNN brgconv entry that ran, else onednn:any)
// can be on every line. In P mode the baseline runs even when not selected
// (--baseline=none to skip; such added runs are shown only when they ran). After the last problem a total line per
// implementation sums the times, weighting each layer by its `*N` count.
// With --report=table the lines go to a log and a table is printed instead
// (tools/table_report.cpp).
#include <algorithm>
#include <memory>

#include "qconv/conv.h"
#include "rows/row.h"
#include "tools/conv_case.h"

namespace qconv::driver {

namespace {
// Multiply-adds ×2 of the whole problem: with a fused dw item, both convolutions.
double problem_ops(const conv_problem &p) { return p.desc.ops() + (p.dw() ? p.dst_desc().ops() : 0.0); }
} // namespace

namespace {

struct run_result {
    std::string requested; // "auto" or a name
    std::string impl;      // the implementation that ran (name when unimplemented)
    int attr = -1;
    bool exact = true;  // false: a peer known to saturate (never a baseline)
    std::string status; // ok | mismatch | inexact | unimplemented | failed
    std::string why;
    int64_t errors = 0;
    double ms = -1;
    int reps = 0;
};

bool is_baseline_candidate(const std::string &name) { return name.rfind("onednn:brgconv", 0) == 0; }

void print_list() {
    const auto names = conv_implementations();
    const auto &table = impl::conv_list();
    for (size_t i = 0; i < names.size(); ++i) {
        bool peer = false;
        for (const auto &e : table)
            if (e.name == names[i]) peer = e.peer;
        out_line()
            .add("op", "conv")
            .add("impl", names[i])
            .add_int("index", static_cast<int64_t>(i))
            .add("peer", peer ? "1" : "0")
            .print();
    }
}

// Baseline implementations to add in P mode when none was selected.
std::vector<std::string> baseline_impls(const conv_settings &s, const std::vector<std::string> &names,
                                        const std::vector<std::string> &selected) {
    std::vector<std::string> cands;
    if (s.baseline == "none") return {};
    if (s.baseline != "auto") {
        if (std::find(names.begin(), names.end(), s.baseline) == names.end())
            throw usage_error("--baseline: unknown implementation '" + s.baseline + "'");
        cands = {s.baseline};
    } else {
        for (const auto &n : names)
            if (is_baseline_candidate(n) || n == "onednn:any") cands.push_back(n);
    }
    std::vector<std::string> extra;
    for (const auto &c : cands)
        if (std::find(selected.begin(), selected.end(), c) == selected.end()) extra.push_back(c);
    return extra;
}

// The baseline run of one problem: an explicit --baseline, else the fastest
// brgconv entry that passed, else onednn:any — never a run of a kernel known
// to be inexact (exact=0), whose speed comes from saturating arithmetic.
// Returns its index in `runs`, -1 when there is none.
int baseline_run(const std::vector<run_result> &runs, const conv_settings &s) {
    int best = -1;
    auto ok = [](const run_result &r) { return r.status == "ok" && r.ms > 0 && r.exact; };
    for (size_t i = 0; i < runs.size(); ++i) {
        const run_result &r = runs[i];
        if (!ok(r) || r.requested == "auto") continue; // only runs forced by name
        const bool cand = s.baseline == "auto" ? is_baseline_candidate(r.impl) : r.impl == s.baseline;
        if (cand && (best < 0 || r.ms < runs[best].ms)) best = static_cast<int>(i);
    }
    if (best < 0 && s.baseline == "auto")
        for (size_t i = 0; i < runs.size(); ++i)
            if (ok(runs[i]) && runs[i].requested == "onednn:any") best = static_cast<int>(i);
    return best;
}

struct conv_run_context {
    const common_options &co;
    const conv_settings &s;
    int dump_index = 0;
};

run_result run_one(const conv_case &c, const std::string &requested, conv_run_context &ctx) {
    run_result r;
    r.requested = requested;
    r.impl = requested;
    conv_hints hints;
    hints.impl = requested;
    std::unique_ptr<convolution> conv;
    try {
        conv = std::make_unique<convolution>(c.p, c.wei.data(), c.bias.empty() ? nullptr : c.bias.data(), hints);
    } catch (const std::exception &e) {
        r.status = "unimplemented";
        r.why = e.what();
        return r;
    }
    r.impl = conv->impl_name();
    r.attr = conv->attr_id();
    r.exact = conv->exact();
    const exec_args args = c.args(ctx.co.threads);

    aligned_vector<uint8_t> dst = c.dst_init;
    try {
        conv->execute(c.src.data(), dst.data(), args);
    } catch (const std::exception &e) {
        r.status = "failed";
        r.why = std::string("execute: ") + e.what();
        return r;
    }
    r.status = "ok";
    if (ctx.co.correctness()) {
        c.reference();
        if (!c.ref_error.empty()) {
            r.status = "failed";
            r.why = "reference: " + c.ref_error;
        } else {
            r.errors = compare_dst(c, dst, &r.why);
            // A row labelled exact=0 (oneDNN below VNNI, brgconv on AMX) is a
            // peer known to differ: its differences are counted, not a failure.
            if (r.errors) r.status = r.exact ? "mismatch" : "inexact";
        }
    }
    if (!ctx.co.dump_dir.empty()) dump_run(ctx.co.dump_dir, ctx.dump_index++, c, ctx.s, r.impl, r.attr, r.status, dst);
    if (ctx.co.performance()) {
        aligned_vector<uint8_t> scratch = c.dst_init;
        const timing t = measure([&] { conv->execute(c.src.data(), scratch.data(), args); }, ctx.co.reps,
                                 ctx.co.budget_ms, ctx.co.correctness(), ctx.co.cold);
        r.ms = t.median_ms;
        r.reps = t.reps;
    }
    return r;
}

std::string no_spaces(std::string s) {
    s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
    return s.empty() ? "none" : s;
}

out_line make_line(const conv_case &c, const conv_settings &s, const run_result &r, double base_ms, bool perf) {
    out_line l;
    l.add("op", "conv").add("impl", r.impl).add("desc", c.p.desc.str()).add("dt", s.dt_text).add("zp", s.zp_text);
    l.add("post_ops", no_spaces(s.post_ops_text));
    if (s.data == data_kind::extreme) l.add("data", "extreme");
    l.add("status", r.status);
    if (r.attr >= 0) l.add_int("attr", r.attr);
    if (!r.exact) l.add("exact", "0");
    if (r.errors) l.add_int("errors", r.errors);
    if (perf && r.ms > 0) {
        l.add("ms", r.ms, 4).add("gops", problem_ops(c.p) / (r.ms * 1e6), 2);
        if (base_ms > 0) l.add("ratio", base_ms / r.ms, 3);
        l.add_int("reps", r.reps);
    }
    if (!r.why.empty()) l.why(r.why);
    return l;
}

report_problem to_report(const conv_case &c, const std::vector<run_result> &runs, int baseline) {
    report_problem p;
    p.layer = c.p.desc.name.empty() ? c.p.desc.str() : c.p.desc.name;
    p.ops = problem_ops(c.p);
    p.count = c.count;
    p.baseline = baseline;
    for (const auto &r : runs) p.runs.push_back({r.impl, r.requested == "auto", r.status, r.exact, r.ms, r.why});
    return p;
}

} // namespace

int conv_mode(const std::vector<std::string> &args) {
    const options o(args);
    const common_options co = parse_common(o);
    const conv_settings s = parse_conv_settings(o);
    const std::vector<problem_text> texts = collect_problems(o);
    report rep(o, "conv", true, "the ratio= baseline");
    o.check_all_used();

    const std::vector<std::string> names = conv_implementations();
    if (co.impl == "list") {
        print_list();
        return exit_ok;
    }
    if (texts.empty()) throw usage_error("conv: no problem given (DESC... or --batch=FILE)");
    // Every descriptor is parsed before anything runs: bad input never runs half a batch.
    for (const auto &t : texts) {
        try {
            conv_desc d = conv_desc::parse(t.text);
            if (s.mb > 0) d.mb = s.mb;
            d.validate();
            check_conv_memory(d, s);
        } catch (const qconv::error &e) {
            throw usage_error(t.origin + ": " + e.what());
        }
    }
    const std::vector<std::string> selected = selected_impls(co.impl, names);
    const std::vector<std::string> extra =
        co.performance() ? baseline_impls(s, names, selected) : std::vector<std::string>{};

    conv_run_context ctx{co, s};
    totals tot;
    bool failed = false;
    for (size_t i = 0; i < texts.size(); ++i) {
        conv_case c;
        try {
            c = make_conv_case(texts[i], s, co.seed + static_cast<uint32_t>(i));
        } catch (const qconv::error &e) {
            throw usage_error(texts[i].origin + ": " + e.what());
        }
        rep.progress(i + 1, texts.size(), c.p.desc.name.empty() ? c.text : c.p.desc.name);
        std::vector<run_result> runs;
        for (const auto &n : selected) runs.push_back(run_one(c, n, ctx));
        for (const auto &n : extra) {
            // A baseline added only for the ratio is shown when it could run.
            run_result r = run_one(c, n, ctx);
            if (r.status != "unimplemented") runs.push_back(std::move(r));
        }
        const int base_run = co.performance() ? baseline_run(runs, s) : -1;
        const double base = base_run >= 0 ? runs[base_run].ms : -1;
        for (const auto &r : runs) {
            rep.line(make_line(c, s, r, base, co.performance()));
            const std::string key = r.requested == "auto" ? "auto" : r.impl;
            tot.add(key, r.status, problem_ops(c.p), r.ms, base, c.count);
            failed = failed || r.status == "mismatch" || r.status == "failed";
        }
        rep.add(to_report(c, runs, base_run));
    }
    for (const auto &l : tot.lines("conv", co.performance())) rep.line(l);
    rep.finish(co.performance(), co.threads);
    return failed ? exit_fail : exit_ok;
}

} // namespace qconv::driver
