// `qconv-driver graph FILE [--save=FILE] [--dq] [--dim=N] [--shape=NAME=D,D,...] [--input=NAME=FILE.npy] [--output-dir=DIR]`:
// loads a graph (the text format, or an ONNX model for a name ending in .onnx), runs it as written and after the passes (conv1x1 → MatMul rewrite,
// Transpose cancellation) on the same random inputs, and prints
//   one `graph=before|after node=ID op=OP impl="..."` line per node,
//   one `rewrite conv=ID rewritten=0|1 why="..."` line per candidate Convolution,
//   one `lower conv=ID lowered=0|1 why="..."` line per candidate of the int8 lowering,
//   and a summary line: op=graph file= rewritten= lowered=N/M nodes_before= nodes_after=
//   before_ms= after_ms= speedup= after_best_ms= max_abs_diff= max_rel_diff= status=ok|mismatch
//   (medians of the --reps runs; after_best_ms the fastest run after the passes).
// max_rel_diff is max|after − before| / max|before| over every output; the
// runs agree when it is at most --tol (1e-4; 1e-2 with --dq or f16 inputs,
// 5e-2 with bf16 inputs: default_tolerance()). --report=table adds a table of the
// graph after the passes: per node its time, share, implementation and lowering
// decision, heaviest first. --dq turns on the compressed MatMuls'
// opt-in dynamic quantization in the rewritten graph. --dim gives the value of the graph's
// run-time dimension `?` (default 1). --shape (ONNX models) binds an input's symbolic dims at load, as
// do the shapes of --input's files: every dim then has its value and the model may have several
// (batch, height, width); a dim or rank that contradicts the model is refused (exit 2). --save writes the rewritten graph of a .qg file, and
// the graph as read of an ONNX model (its import, in the text format). --input gives a
// Parameter's values (by its name) from a NumPy file, the others stay random; --output-dir
// writes each Result of the rewritten run as DIR/NAME.npy (f32). --tol-steps=N[:F] compares in
// quantization steps instead (quantized networks, where the lowering's exactness contract,
// docs/semantics.md §10, allows a value one step off and the flips carry through the layers):
// each output of the graph as written must be a DequantizeLinear with one scale (the step);
// the runs agree when no element differs by more than N steps and at most the share F
// (default 1) of the elements differ; the summary adds max_steps= and differ=.
// Exit status 1 on a mismatch.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "core/memory.h"
#include "qconv/graph.h"
#include "qconv/graph_onnx.h"
#include "tools/driver.h"

namespace qconv::driver {

namespace {

void print_impls(const char *phase, const graph::graph &g, const graph::compiled_graph &cg) {
    for (const auto &[id, impl] : cg.impls()) {
        const graph::node *n = g.find(id);
        out_line l;
        l.add("graph", phase).add("node", id).add("op", n ? graph::to_string(n->kind) : "?");
        std::string q = impl;
        std::replace(q.begin(), q.end(), '"', '\'');
        l.add("impl", "\"" + q + "\"");
        l.print();
    }
}

std::string sci(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
}

// The agreement bound on max_rel_diff: 1e-4 for f32 activations, 1e-2 with
// --dq (int8 activations); f16 and bf16 inputs 1e-2 and 5e-2 (the graph as
// written rounds every node to that type, the rewritten MatMul decompresses
// exactly: the FFN examples differ by 7.7e-4 in f16 and 6.1e-3 in bf16).
double default_tolerance(const graph::graph &g, bool dq) {
    double tol = dq ? 1e-2 : 1e-4;
    for (const graph::node *p : g.parameters()) {
        if (p->out_type == graph::dtype::f16) tol = std::max(tol, 1e-2);
        if (p->out_type == graph::dtype::bf16) tol = std::max(tol, 5e-2);
    }
    return tol;
}

bool is_onnx(const std::string &file) { return file.size() > 5 && file.compare(file.size() - 5, 5, ".onnx") == 0; }

// A file name for an output's name: letters, digits, '_', '-', '.' kept.
std::string file_name(const std::string &name) {
    std::string r;
    for (char c : name) r += std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ? c : '_';
    if (r.empty() || r[0] == '.') r = "_" + r;
    return r;
}

// A shape with `?` for the run-time dimension.
std::string shape_text(const graph::shape_t &s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i)
        r += (i ? "," : "") + (s[i] == graph::dynamic_dim ? std::string("?") : std::to_string(s[i]));
    return r + "]";
}

// --input=NAME=FILE.npy: (Parameter index, tensor) per option.
std::vector<std::pair<size_t, graph::tensor>> read_inputs(const std::vector<std::string> &specs,
                                                          const graph::graph &g) {
    std::vector<std::pair<size_t, graph::tensor>> r;
    const auto params = g.parameters();
    for (const auto &spec : specs) {
        const auto eq = spec.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
            throw usage_error("--input: expected NAME=FILE.npy (got '" + spec + "')");
        const std::string name = spec.substr(0, eq), file = spec.substr(eq + 1);
        size_t idx = params.size();
        for (size_t i = 0; i < params.size(); ++i)
            if (params[i]->friendly_name == name || params[i]->id == name) idx = i;
        if (idx == params.size()) {
            std::string names;
            for (const auto *p : params) names += (names.empty() ? "" : ", ") + p->friendly_name;
            throw usage_error("--input: the graph has no input '" + name + "' (inputs: " + names + ")");
        }
        for (const auto &[i, t] : r)
            if (i == idx) throw usage_error("--input: '" + name + "' is given twice");
        graph::tensor t = graph::read_npy(file);
        const graph::node &p = *params[idx];
        if (t.type != p.attr.type)
            throw usage_error("--input: '" + name + "' is " + graph::ir_name(p.attr.type) + " in the graph, '" + file +
                              "' holds " + graph::ir_name(t.type));
        const graph::shape_t &want = p.attr.shape;
        bool fits = want.size() == t.shape.size();
        for (size_t d = 0; fits && d < want.size(); ++d) fits = want[d] == graph::dynamic_dim || want[d] == t.shape[d];
        if (!fits)
            throw usage_error("--input: '" + name + "' is " + shape_text(want) + " in the graph, '" + file +
                              "' holds " + graph::to_string(t.shape));
        r.emplace_back(idx, std::move(t));
    }
    return r;
}

// The value of `?` the given inputs imply (0: none is at a `?`).
int64_t dim_of(const std::vector<std::pair<size_t, graph::tensor>> &given, const graph::graph &g) {
    int64_t v = 0;
    const auto params = g.parameters();
    for (const auto &[i, t] : given)
        for (size_t d = 0; d < t.shape.size(); ++d) {
            if (params[i]->attr.shape[d] != graph::dynamic_dim) continue;
            if (v && v != t.shape[d])
                throw usage_error("--input: the run-time dimension '?' is " + std::to_string(v) + " in one file and " +
                                  std::to_string(t.shape[d]) + " in another");
            v = t.shape[d];
        }
    return v;
}

// --report=table: every node of the graph after the passes with its time,
// its share, its implementation and, for convolutions, the lowering decision;
// heaviest first. The times are laps of the executor's own loop (a clock read
// between two nodes, nothing synchronised that a plain run does not), taken
// from the fastest of `runs` profiled runs, so the total is the time of one
// real run and compares with the summary's after_best_ms (the line after the
// table states both).
void print_table(const graph::graph &g, const graph::compiled_graph &cg, const std::vector<graph::tensor> &inputs,
                 const std::vector<graph::rewrite_record> &lowered, const std::vector<graph::rewrite_record> &rewrites,
                 int runs, double after_best_ms) {
    if (g.is_dynamic()) return;
    std::vector<std::pair<std::string, double>> best;
    double best_total = 0;
    for (int rep = 0; rep < runs; ++rep) {
        std::vector<std::pair<std::string, double>> ms;
        cg.run_profiled(inputs, &ms);
        double t = 0;
        for (const auto &lap : ms) t += lap.second;
        if (rep == 0 || t < best_total) best_total = t, best = std::move(ms);
    }
    std::map<std::string, double> times;
    std::vector<std::string> order;
    for (const auto &[id, t] : best) {
        if (!times.count(id)) order.push_back(id);
        times[id] += t;
    }
    std::map<std::string, std::string> impl, decision;
    for (const auto &[id, im] : cg.impls()) impl[id] = im;
    // A lowered convolution's node is ID_int8; a kept one keeps its id.
    for (const auto &r : lowered)
        decision[r.rewritten ? r.conv + "_int8" : r.conv] = r.rewritten ? "lowered" : "kept: " + r.reason;
    for (const auto &r : rewrites)
        if (r.rewritten) decision[r.conv + "_matmul"] = "conv1x1->MatMul";
    struct row {
        std::string id, op;
        double ms;
    };
    std::vector<row> rows;
    double total = 0;
    for (const auto &id : order) {
        const graph::node *n = g.find(id);
        rows.push_back({id, n ? graph::to_string(n->kind) : "?", times[id]});
        total += rows.back().ms;
    }
    std::stable_sort(rows.begin(), rows.end(), [](const row &a, const row &b) { return a.ms > b.ms; });
    std::printf("%-28s %-18s %10s %6s  %s\n", "node", "op", "ms", "%", "implementation / lowering");
    for (const auto &r : rows) {
        std::string what = impl[r.id];
        if (decision.count(r.id)) what += "  [" + decision[r.id] + "]";
        std::printf("%-28s %-18s %10.4f %5.1f%%  %s\n", r.id.c_str(), r.op.c_str(), r.ms,
                    total > 0 ? 100 * r.ms / total : 0.0, what.c_str());
    }
    std::printf("%-28s %-18s %10.4f %5.1f%%\n", "total", "", total, 100.0);
    std::printf("per-node total %.4f ms (the fastest of %d profiled runs) against after_best_ms %.4f ms (the fastest "
                "plain run): %+.1f%%\n",
                total, runs, after_best_ms, after_best_ms > 0 ? 100 * (total / after_best_ms - 1) : 0.0);
}

// The graph mode's own options (parse_common has read the common ones).
struct graph_settings {
    std::string file, save, output_dir, report_kind, tol_text, steps_text;
    bool dq = false, conv_post_ops = true;
    double tol = -1, tol_steps = -1, tol_share = 1;
    int64_t dim = 0;
    std::vector<std::string> input_specs, shape_specs;
};

// A non-negative number, or -1.
double number_or_negative(const std::string &text) {
    try {
        size_t pos = 0;
        const double v = std::stod(text, &pos);
        return pos == text.size() ? v : -1;
    } catch (const std::exception &) {
        return -1;
    }
}

graph_settings parse_graph_options(const options &o) {
    graph_settings s;
    s.save = o.get("save", "");
    s.dq = o.get_bool("dq", false);
    s.conv_post_ops = o.get_bool("conv-post-ops", true);
    s.tol_text = o.get("tol", "");
    if (!s.tol_text.empty() && !((s.tol = number_or_negative(s.tol_text)) >= 0))
        throw usage_error("--tol: expected a non-negative number (got '" + s.tol_text + "')");
    s.steps_text = o.get("tol-steps", "");
    if (!s.steps_text.empty()) {
        const size_t colon = s.steps_text.find(':');
        s.tol_steps = number_or_negative(s.steps_text.substr(0, colon));
        if (colon != std::string::npos) s.tol_share = number_or_negative(s.steps_text.substr(colon + 1));
        if (!(s.tol_steps >= 0) || !(s.tol_share >= 0 && s.tol_share <= 1))
            throw usage_error("--tol-steps: expected N or N:F, N ≥ 0 steps and F in [0, 1] (got '" + s.steps_text +
                              "')");
    }
    s.report_kind = o.get("report", "kv");
    if (s.report_kind != "kv" && s.report_kind != "table")
        throw usage_error("--report: expected kv or table (got '" + s.report_kind + "')");
    const std::string dim_text = o.get("dim", "");
    if (!dim_text.empty()) {
        try {
            size_t pos = 0;
            s.dim = std::stoll(dim_text, &pos);
            if (pos != dim_text.size()) s.dim = 0;
        } catch (const std::exception &) {
        }
        if (s.dim < 1) throw usage_error("--dim: expected a positive integer (got '" + dim_text + "')");
    }
    s.input_specs = o.all("input");
    s.shape_specs = o.all("shape");
    s.output_dir = o.get("output-dir", "");
    o.check_all_used();
    if (o.words().size() != 1)
        throw usage_error("graph: expected one graph file (got " + std::to_string(o.words().size()) + ")");
    s.file = o.words()[0];
    return s;
}

// --shape=NAME=D,D,... and the shapes of --input=NAME=FILE.npy: the input
// shapes an ONNX model is read with (its symbolic dims bound at load).
graph::onnx_options onnx_shapes(const graph_settings &s) {
    graph::onnx_options o;
    for (const auto &spec : s.shape_specs) {
        const auto eq = spec.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
            throw usage_error("--shape: expected NAME=D,D,... (got '" + spec + "')");
        const std::string name = spec.substr(0, eq), dims = spec.substr(eq + 1);
        graph::shape_t shape;
        size_t at = 0;
        for (;;) {
            const size_t comma = dims.find(',', at);
            const std::string d = dims.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
            const double v = number_or_negative(d);
            if (d.empty() || d.find_first_not_of("0123456789") != std::string::npos || !(v >= 1 && v <= (1ll << 31)))
                throw usage_error("--shape: '" + name + "': dim '" + d + "' is not an integer in [1, 2^31]");
            shape.push_back(static_cast<int64_t>(v));
            if (comma == std::string::npos) break;
            at = comma + 1;
        }
        if (o.input_shapes.count(name)) throw usage_error("--shape: '" + name + "' is given twice");
        o.input_shapes[name] = shape;
    }
    for (const auto &spec : s.input_specs) {
        const auto eq = spec.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) continue; // read_inputs says it
        const std::string name = spec.substr(0, eq);
        const graph::shape_t shape = graph::read_npy(spec.substr(eq + 1)).shape;
        const auto it = o.input_shapes.find(name);
        if (it != o.input_shapes.end() && it->second != shape)
            throw usage_error("--shape: '" + name + "' is " + graph::to_string(it->second) + ", --input's file holds " +
                              graph::to_string(shape));
        o.input_shapes[name] = shape;
    }
    return o;
}

// The graph file: an ONNX model read with the input shapes given, or the text format.
std::unique_ptr<graph::graph> load_graph(const graph_settings &gs) {
    if (!is_onnx(gs.file) && !gs.shape_specs.empty())
        throw usage_error("--shape: for ONNX models only ('" + gs.file + "' is read as the text format; use --dim)");
    return is_onnx(gs.file) ? graph::load_onnx(gs.file, onnx_shapes(gs)) : graph::load_file(gs.file);
}

// The step of each output of the graph as written (its DequantizeLinear's one
// scale); empty when some output has none (with `why` naming it).
std::vector<double> output_steps(const graph::graph &g, std::string *why) {
    std::vector<double> steps;
    for (const graph::node *r : g.results()) {
        const graph::node *d = r->inputs.empty() ? nullptr : r->inputs[0];
        if (!d || d->kind != graph::op::DequantizeLinear || d->inputs[1]->kind != graph::op::Constant ||
            graph::elems_of(d->inputs[1]->out_shape) != 1) {
            *why = "output '" + r->friendly_name + "' is not a DequantizeLinear with one scale";
            return {};
        }
        steps.push_back(d->inputs[1]->value(0));
    }
    return steps;
}

// The bound of the check: --tol, --tol-steps, or by default steps for a
// quantized network (every output a DequantizeLinear of one scale: the
// lowering's contract, docs/semantics.md §10, allows a level one step off per
// layer, carried through the layers) and the relative f32 tolerance otherwise.
constexpr double default_tol_steps = 8;

void choose_bound(graph_settings &s, const graph::graph &before, std::vector<double> &steps) {
    std::string why;
    if (!s.steps_text.empty()) {
        steps = output_steps(before, &why);
        if (steps.empty()) throw usage_error("--tol-steps: " + why);
        return;
    }
    if (s.tol_text.empty()) {
        steps = output_steps(before, &why);
        if (!steps.empty()) {
            s.tol_steps = default_tol_steps;
            s.steps_text = format_double(default_tol_steps, 0);
            return;
        }
        s.tol = default_tolerance(before, s.dq);
    }
}

} // namespace

int graph_mode(const std::vector<std::string> &args) {
    options o(args);
    const common_options c = parse_common(o);
    graph_settings gs = parse_graph_options(o);
    const std::string &file = gs.file, &save = gs.save, &output_dir = gs.output_dir;
    const bool dq = gs.dq;
    int64_t dim = gs.dim;

    auto before = load_graph(gs);
    const auto given = read_inputs(gs.input_specs, *before);
    if (const int64_t v = dim_of(given, *before)) {
        if (dim && dim != v)
            throw usage_error("--dim=" + std::to_string(dim) + " differs from the inputs' run-time dimension " +
                              std::to_string(v));
        dim = v;
    }
    if (dim) {
        if (!before->is_dynamic()) throw usage_error("--dim: '" + file + "' has no run-time dimension '?'");
        before->bind_dynamic(dim);
        before->infer();
    }
    std::vector<double> steps;
    choose_bound(gs, *before, steps);
    graph::check_run_memory(*before); // again with --dim's value of `?`
    auto after = before->clone();
    std::vector<graph::rewrite_record> lowered;
    const auto records = graph::run_passes(*after, {}, &lowered);
    // Both graphs are compiled and run side by side: refused, naming the file,
    // when together they need more than this process may use.
    impl::check_memory(graph::run_bytes(*before) + graph::run_bytes(*after), file,
                       "running the graph as written and rewritten");
    if (!save.empty()) graph::save_file(is_onnx(file) ? *before : *after, save);

    auto inputs = graph::random_inputs(*before, c.seed);
    for (const auto &[i, t] : given) inputs[i] = t;
    graph::compile_options co;
    co.threads = c.threads;
    co.conv_post_ops = gs.conv_post_ops;
    graph::compiled_graph cb(*before, co);
    co.dynamic_quantization = dq; // opt-in, for the rewritten graph's compressed MatMuls
    graph::compiled_graph ca(*after, co);
    print_impls("before", *before, cb);
    print_impls("after", *after, ca);
    int rewritten = 0;
    for (const auto &r : records) {
        rewritten += r.rewritten;
        out_line().add("rewrite", "conv").add("conv", r.conv).add_int("rewritten", r.rewritten).why(r.reason).print();
    }

    int n_lowered = 0;
    for (const auto &r : lowered) {
        n_lowered += r.rewritten;
        out_line().add("lower", "conv").add("conv", r.conv).add_int("lowered", r.rewritten).why(r.reason).print();
    }

    std::vector<graph::tensor> yb, ya;
    const timing tb = measure([&] { yb = cb.run(inputs); }, c.reps, c.budget_ms, false);
    const timing ta = measure([&] { ya = ca.run(inputs); }, c.reps, c.budget_ms, false);

    double max_abs = 0, max_ref = 0, max_steps = 0;
    int64_t differ = 0, total = 0;
    bool same_shape = yb.size() == ya.size();
    for (size_t r = 0; same_shape && r < yb.size(); ++r) {
        same_shape = yb[r].shape == ya[r].shape;
        const std::vector<double> vb = same_shape ? yb[r].values() : std::vector<double>();
        const std::vector<double> va = same_shape ? ya[r].values() : std::vector<double>();
        for (size_t i = 0; same_shape && i < vb.size(); ++i) {
            const double a = va[i], b = vb[i];
            // Equal values (also equal infinities) and NaN on both sides agree.
            const double d = a == b || (std::isnan(a) && std::isnan(b)) ? 0.0 : std::fabs(a - b);
            max_abs = std::isnan(d) ? INFINITY : std::max(max_abs, d);
            if (!steps.empty()) {
                const double st = std::isnan(d) ? INFINITY : d / steps[r];
                max_steps = std::max(max_steps, st);
                differ += d != 0;
                ++total;
            }
            if (std::isfinite(b)) max_ref = std::max(max_ref, std::fabs(b));
        }
    }
    if (!output_dir.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(output_dir, ec);
        if (ec) throw usage_error("--output-dir: cannot create '" + output_dir + "': " + ec.message());
        const auto results = after->results();
        std::set<std::string> used;
        for (size_t r = 0; r < ya.size() && r < results.size(); ++r) {
            std::string name = file_name(results[r]->friendly_name);
            while (!used.insert(name).second) name += "_";
            graph::write_npy(output_dir + "/" + name + ".npy", ya[r]);
        }
    }

    const double max_rel = max_abs == 0 ? 0 : max_ref > 0 ? max_abs / max_ref : INFINITY;
    const double share = total ? static_cast<double>(differ) / static_cast<double>(total) : 0.0;
    // Steps: the difference of two levels is a whole number of steps (up to f32 rounding).
    const bool ok =
        same_shape && (steps.empty() ? max_rel <= gs.tol : max_steps <= gs.tol_steps + 1e-3 && share <= gs.tol_share);

    if (gs.report_kind == "table") print_table(*after, ca, inputs, lowered, records, std::max(5, c.reps), ta.best_ms);

    out_line l;
    l.add("op", "graph")
        .add("file", file)
        .add("rewritten", std::to_string(rewritten) + "/" + std::to_string(records.size()))
        .add("lowered", std::to_string(n_lowered) + "/" + std::to_string(lowered.size()));
    if (before->is_dynamic()) l.add_int("dim", before->dynamic_value());
    l.add_int("nodes_before", static_cast<int64_t>(before->size()))
        .add_int("nodes_after", static_cast<int64_t>(after->size()));
    l.add("before_ms", tb.median_ms, 4).add("after_ms", ta.median_ms, 4);
    l.add("speedup", ta.median_ms > 0 ? tb.median_ms / ta.median_ms : 0.0, 3);
    l.add("after_best_ms", ta.best_ms, 4);
    l.add("max_abs_diff", sci(max_abs)).add("max_rel_diff", sci(max_rel));
    if (steps.empty()) l.add("tol", sci(gs.tol));
    else l.add("max_steps", max_steps, 2).add("differ", share, 4).add("tol", "steps:" + gs.steps_text);
    l.add("status", ok ? "ok" : "mismatch");
    if (!same_shape) l.why("outputs differ in count or shape");
    l.print();
    return ok ? exit_ok : exit_fail;
}

} // namespace qconv::driver
