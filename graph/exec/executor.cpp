// The graph executor (graph/exec/): compile (one implementation per node) and run.
//
// Compile works on a private, inferred clone of the graph and walks its nodes
// in topological order (compile.h gives the phases):
//  * a MatMul whose weights are a decompression subgraph becomes ONE
//    qconv::matmul primitive, its bias Add fused (compressed_matmul.h);
//  * every other node asks the step table (step_table.cpp): the first row
//    that takes it builds its step — a QConvolution one qconv::convolution
//    (the public primitive, created once through the dispatcher), an f32
//    Convolution the f32 convolution primitive (qconv::convolution_f32:
//    oneDNN's f32 convolution, else the reference; weights known at compile
//    time are reordered once, others per run), any other op graph/ops'
//    evaluation (elementwise loops with numpy broadcast, Transpose/Reshape
//    copies, f32 MatMul loops, ...); a node whose inputs are all known at
//    compile time is folded (constant-folded decompression is what a plain
//    f32 Convolution gets);
//  * then the buffer lifetimes and layouts are decided once (buffers.cpp,
//    f32_islands.cpp): NHWC between int8 convolutions, f32 islands.
// Values are typed tensors (their node's type); what each op computes is
// graph/ops/eval.cpp's (detail::eval_node). Each kind of step is its own type
// (steps.h) that runs itself; run calls them in order on an arena of tensors
// kept between runs (program.h).
#include <algorithm>
#include <chrono>
#include <mutex>

#include "core/memory.h"
#include "core/verbose.h"
#include "graph/exec/compile.h"
#include "graph/exec/program.h"
#include "graph/ir/detail.h"
#include "qconv/graph.h"

namespace qconv::graph {

// A compilation (graph/exec/program.h).
struct compiled_graph::state : exec::program {};

// A graph with `?`: the graph as given, and one compilation per value of
// `?` seen by run() (at most `keep`, the oldest dropped first), all sharing
// the run-time-M MatMuls of `pool`.
struct compiled_graph::dynamic {
    static constexpr size_t keep = 8;
    std::unique_ptr<graph> source;
    compile_options opt;
    std::mutex mu;
    exec::matmul_pool pool;
    std::vector<std::pair<int64_t, std::shared_ptr<const state>>> compiled; // oldest first
};

compiled_graph::compiled_graph(const graph &g, int threads) : compiled_graph(g, compile_options{threads, true}) {}

compiled_graph::compiled_graph(const graph &gin, const compile_options &opt) {
    if (gin.is_dynamic()) {
        d_ = std::make_unique<dynamic>();
        d_->source = gin.clone();
        d_->opt = opt;
        s_ = compile(gin, opt, d_.get(), gin.dynamic_value());
        d_->compiled.push_back({gin.dynamic_value(), s_});
        return;
    }
    s_ = compile(gin, opt, nullptr, 1);
}

std::shared_ptr<const compiled_graph::state> compiled_graph::compile(const graph &gin, const compile_options &opt,
                                                                     dynamic *dyn, int64_t dynamic_value) {
    auto s = std::make_shared<state>();
    state &S = *s;
    S.threads = opt.threads;
    // Work on a private, inferred clone (the caller's graph stays untouched).
    auto g = gin.clone();
    if (g->is_dynamic()) g->bind_dynamic(dynamic_value);
    g->infer();
    check_run_memory(*g); // before any tensor is allocated
    const auto order = g->topo_order();
    exec::compile_context cx{*g, S, opt};
    for (const node *n : order) cx.slot[n] = static_cast<int>(cx.slot.size());
    S.slots = cx.slot.size();
    S.consts.resize(S.slots);
    S.known.assign(S.slots, false);
    // 1. Compressed MatMuls and the nodes they absorb; the f32 convolutions'
    // epilogues; elementwise regions.
    exec::find_compressed(*g, order, opt.dynamic_quantization, dyn ? &dyn->pool : nullptr, &cx.mms, &cx.fused_into);
    exec::find_conv_epilogues(order, cx);
    if (opt.elementwise_regions) exec::find_elementwise_regions(*g, order, cx);
    // 2. Steps from the step table, folding whatever is known at compile time.
    for (node *n : order) exec::build_step(cx, *n);
    exec::drop_unread_values(S);
    for (const node *p : g->parameters()) S.params.push_back(cx.slot.at(p));
    for (const node *r : g->results()) S.results.push_back(cx.slot.at(r));
    // 3. The layouts and buffer lifetimes.
    exec::fold_dequantize_means(*g, S);
    const std::vector<bool> keep = exec::plan_buffers(*g, S);
    exec::mark_f32_islands(*g, S, cx.slot, keep);
    S.owner = std::move(g);
    if (impl::verbose_level() >= 1)
        for (const auto &[id, chosen] : S.impls) impl::verbose_print("graph,compile," + id + "," + chosen);
    return s;
}

compiled_graph::~compiled_graph() = default;

// The value of `?` the inputs give: the same at every `?` of every Parameter.
int64_t compiled_graph::dynamic_value_of(const std::vector<tensor> &inputs) const {
    const auto params = d_->source->parameters();
    if (inputs.size() != params.size())
        fail("inputs", "expected " + std::to_string(params.size()) + " tensors, got " + std::to_string(inputs.size()));
    int64_t v = 0;
    std::string first;
    for (size_t p = 0; p < params.size(); ++p) {
        const shape_t &want = params[p]->attr.shape, &got = inputs[p].shape;
        if (want.size() != got.size())
            fail("inputs", "Parameter '" + params[p]->id + "' has rank " + std::to_string(want.size()) + ", got " +
                               to_string(got));
        for (size_t i = 0; i < want.size(); ++i) {
            if (want[i] != dynamic_dim) continue;
            if (v == 0) {
                v = got[i];
                first = "'" + params[p]->id + "' dim " + std::to_string(i);
            } else if (got[i] != v) {
                fail("inputs", "every '?' takes one value: " + first + " is " + std::to_string(v) + ", '" +
                                   params[p]->id + "' dim " + std::to_string(i) + " is " + std::to_string(got[i]));
            }
        }
    }
    if (v < 1)
        fail("inputs", "the run-time dimension '?' must be positive (" + first + " is " + std::to_string(v) + ")");
    return v;
}

std::vector<tensor> compiled_graph::run_profiled(const std::vector<tensor> &inputs,
                                                 std::vector<std::pair<std::string, double>> *ms) const {
    if (d_) fail("inputs", "run_profiled: a graph with a run-time dimension '?' is profiled through run()");
    return run_state(*s_, inputs, ms);
}

std::vector<tensor> compiled_graph::run(const std::vector<tensor> &inputs) const {
    if (!d_) return run_state(*s_, inputs);
    const int64_t v = dynamic_value_of(inputs);
    std::shared_ptr<const state> st;
    {
        std::lock_guard<std::mutex> lock(d_->mu);
        for (const auto &[value, c] : d_->compiled)
            if (value == v) st = c;
        if (!st) {
            // Compiled under the lock: concurrent runs of a new value wait for one compilation.
            st = compile(*d_->source, d_->opt, d_.get(), v);
            if (d_->compiled.size() >= dynamic::keep) d_->compiled.erase(d_->compiled.begin());
            d_->compiled.push_back({v, st});
        }
    }
    return run_state(*st, inputs);
}

namespace {

// The graph's boundary: each Parameter's value in its type (converted as a
// Convert does when another type is given) and in plain layout; the caller's
// tensor itself when it is both.
void bind_inputs(const exec::program &P, const std::vector<tensor> &inputs, exec::run_context &c) {
    const auto params = P.owner->parameters();
    for (size_t p = 0; p < P.params.size(); ++p) {
        const node &pn = *params[p];
        const tensor &t = inputs[p];
        if (t.shape != pn.out_shape || static_cast<int64_t>(t.bytes.size()) != storage_bytes(t.type, t.elems()))
            fail("inputs", "Parameter '" + pn.id + "' expects " + to_string(pn.out_shape) + ", got " +
                               to_string(t.shape) + " with " + std::to_string(t.bytes.size()) + " bytes of " +
                               ir_name(t.type));
        if (t.order == layout::plain && t.type == pn.out_type) {
            c.given[P.params[p]] = &t;
            continue;
        }
        tensor &d = c.v[P.params[p]];
        d = t.order == layout::plain ? t : t.to_layout(layout::plain);
        if (d.type != pn.out_type) {
            tensor cv(pn.out_type, d.shape);
            for (int64_t i = 0; i < cv.elems(); ++i) cv.set(i, d.get(i));
            d = std::move(cv);
        }
    }
}

// The per-step profile: each step's milliseconds, from its start to the next
// one's (nothing is timed without a list to fill).
class step_timer {
public:
    explicit step_timer(std::vector<std::pair<std::string, double>> *ms) : ms_(ms) {}
    void lap(const exec::step *next) {
        if (ms_ && prev_) {
            const clock::time_point t1 = clock::now();
            ms_->push_back({prev_->n->id, std::chrono::duration<double, std::milli>(t1 - t0_).count()});
            t0_ = t1;
        } else if (ms_) {
            t0_ = clock::now();
        }
        prev_ = next;
    }

private:
    using clock = std::chrono::steady_clock;
    std::vector<std::pair<std::string, double>> *ms_;
    clock::time_point t0_ = clock::now();
    const exec::step *prev_ = nullptr;
};

} // namespace

std::vector<tensor> compiled_graph::run_state(const state &S, const std::vector<tensor> &inputs,
                                              std::vector<std::pair<std::string, double>> *ms) {
    if (inputs.size() != S.params.size())
        fail("inputs",
             "expected " + std::to_string(S.params.size()) + " tensors, got " + std::to_string(inputs.size()));
    // This run's arena: one left by an earlier run, else a new one (given
    // back however the run ends).
    struct lease {
        const state &S;
        std::unique_ptr<exec::arena> a;
        explicit lease(const state &s) : S(s), a(s.take_arena()) {}
        ~lease() { S.give_arena(std::move(a)); }
    } held(S);
    exec::arena &A = *held.a;
    A.v.resize(S.slots);
    for (tensor &t : A.v) A.give(t); // what a run stopped by an error left
    exec::run_context c{S.consts, S.known, A, A.v, std::vector<const tensor *>(S.slots, nullptr), S.threads, {}};
    bind_inputs(S, inputs, c);
    step_timer timer(ms);
    for (const auto &st : S.steps) {
        timer.lap(st.get());
        st->run(c);
        for (int i : st->frees) A.give(A.v[i]);
    }
    timer.lap(nullptr);
    std::vector<tensor> out;
    for (int r : S.results) out.push_back(c.get(r));
    for (tensor &t : A.v) A.give(t);
    return out;
}

std::vector<std::pair<std::string, std::string>> compiled_graph::impls() const { return s_->impls; }

double run_bytes(const graph &g) {
    double bytes = 0;
    for (const auto &n : g.nodes()) {
        const double f32 = double(elems_of(n->out_shape)) * 4;
        bytes += f32;                                                        // the executor's tensor
        if (n->kind == op::Parameter || n->kind == op::Result) bytes += f32; // the caller's input, the output returned
        if (n->kind == op::Constant) bytes += double(storage_bytes(n->attr.type, elems_of(n->attr.shape)));
    }
    return bytes;
}

void check_run_memory(const graph &g) {
    const node *largest = nullptr;
    for (const auto &n : g.nodes())
        if (!largest || elems_of(n->out_shape) > elems_of(largest->out_shape)) largest = n.get();
    if (!largest) return;
    impl::check_memory(run_bytes(g), largest->where(),
                       "running the graph (largest tensor: '" + largest->id + "' " + ir_name(largest->out_type) +
                           to_string(largest->out_shape) + ", " +
                           impl::bytes_text(double(elems_of(largest->out_shape)) * 4) + " in f32)",
                       double(max_run_bytes), "the graph limit of " + impl::bytes_text(double(max_run_bytes)));
}

std::vector<tensor> random_inputs(const graph &g, uint64_t seed, int64_t dynamic_value) {
    std::vector<tensor> r;
    detail::rng rng(seed);
    const int64_t v = dynamic_value > 0 ? dynamic_value : g.dynamic_value();
    std::vector<shape_t> shapes;
    double bytes = 0;
    for (const node *p : g.parameters()) {
        shape_t s = p->attr.shape;
        for (int64_t &d : s)
            if (d == dynamic_dim) d = v;
        check_shape(s, "inputs");
        bytes += double(elems_of(s)) * 4;
        shapes.push_back(s);
    }
    impl::check_memory(bytes, "inputs", "random inputs for every Parameter");
    size_t i = 0;
    for (const node *p : g.parameters()) {
        const shape_t &s = shapes[i++];
        tensor t(p->attr.type, s);
        for (int64_t e = 0; e < t.elems(); ++e)
            t.set(e, is_integer(t.type)
                         ? static_cast<double>(rng.integer(std::max<int64_t>(detail::type_min(t.type), -128),
                                                           std::min<int64_t>(detail::type_max(t.type), 127)))
                         : static_cast<double>(static_cast<float>(rng.uniform() * 2.0 - 1.0)));
        r.push_back(std::move(t));
    }
    return r;
}

} // namespace qconv::graph
