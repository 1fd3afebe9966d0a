// The executor's compiled form (graph/exec/): the steps a compilation made, in
// execution order, and what they run on — the values known at compile time,
// the caller's Parameters and the run's arena of tensors. Each kind of step
// is its own type (graph/exec/steps.h) that runs itself; compile builds them
// from the step table (graph/exec/step_table.cpp), run calls them in order.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "qconv/graph.h"

namespace qconv::graph::exec {

// The storage of one run: a tensor per slot and the buffers not in use, by
// size. Kept between runs (after the first run of a compilation no step
// allocates, zero-fills or page-faults its output); a run takes an arena from
// its program (a new one when all are in use by other threads) and gives it
// back.
struct arena {
    std::vector<tensor> v;
    std::map<size_t, std::vector<aligned_vector<uint8_t>>> spare;
    // t's storage goes back to the spares.
    void give(tensor &t) {
        if (t.bytes.empty()) return;
        aligned_vector<uint8_t> b;
        b.swap(t.bytes);
        spare[b.size()].push_back(std::move(b));
    }
    // t becomes a tensor of the given type, shape and layout on a spare
    // buffer of its size (contents: whatever was there) or a new one.
    void take(tensor &t, dtype type, const shape_t &shape, layout order) {
        give(t);
        t.type = type;
        t.shape = shape;
        t.order = order;
        const size_t nb = static_cast<size_t>(storage_bytes(type, elems_of(shape)));
        auto it = spare.find(nb);
        if (it != spare.end() && !it->second.empty()) {
            t.bytes.swap(it->second.back());
            it->second.pop_back();
        } else {
            t.bytes.assign(nb, 0);
        }
    }
};

// What a step sees while it runs: every slot's value (a compile-time value,
// a Parameter read from the caller's tensor, else the arena's tensor), the
// arena its outputs are taken from, and the thread count.
struct run_context {
    const std::vector<tensor> &consts;
    const std::vector<bool> &known;
    arena &A;
    std::vector<tensor> &v;            // A.v: the run's tensors, by slot
    std::vector<const tensor *> given; // Parameters read from the caller's tensors
    int threads = 0;
    std::vector<const tensor *> ins; // gather()'s list, reused from step to step

    const tensor &get(int i) const { return known[i] ? consts[i] : given[i] ? *given[i] : v[i]; }
    // The values of these slots, in order.
    const std::vector<const tensor *> &gather(const std::vector<int> &slots) {
        ins.clear();
        for (int i : slots) ins.push_back(&get(i));
        return ins;
    }
};

// An elementwise region (elementwise_regions.cpp): its nodes in topological
// order (the last one its root) and the values from outside they read.
struct region {
    std::vector<const node *> nodes;
    std::vector<const node *> operands;
};

// One step of a compiled graph: a node (for a fused pattern, the node it is
// named after), the slots it reads and the slot it writes. run() computes the
// output from the inputs; the other members answer the compile-time questions
// of the buffer lifetimes (graph/exec/buffers.cpp) and the f32 islands
// (graph/exec/f32_islands.cpp), which each kind answers for itself.
struct step {
    step(const node *n, std::vector<int> in, int out) : n(n), in(std::move(in)), out(out) {}
    virtual ~step() = default;
    step(const step &) = delete;
    step &operator=(const step &) = delete;

    virtual void run(run_context &c) const = 0;
    // Whether the step's primitive holds input 1 (the weights) itself, so that
    // the compile-time value need not be kept.
    virtual bool holds_weights() const { return false; }
    // The decisions made once every slot's last reader is known: `dying` are
    // the slots whose last reader this step is, `keep` the slots that live
    // through the run (constants, Parameters, Results).
    virtual void settle(const graph &, const std::set<int> & /*dying*/, const std::vector<bool> & /*keep*/) {}
    // Whether the step may write its f32 output NHWC (when every reader takes
    // it so), and makes it do so.
    virtual bool may_write_nhwc() const { return false; }
    virtual void write_nhwc() {}
    // Whether the step takes `value`, one of its inputs, as an NHWC f32 tensor.
    virtual bool reads_nhwc(const node & /*value*/) const { return false; }
    // The nodes the step computes besides n (fused into it) whose inputs it reads.
    virtual std::vector<const node *> covered() const { return {}; }

    const node *n;
    std::vector<int> in;
    int out;
    std::vector<int> frees; // the slots whose last reader this step is: back to the arena after it
};

// A compilation: the steps in execution order and what they run on.
struct program {
    std::vector<tensor> consts; // per slot, compile-time values
    std::vector<bool> known;    // slot value known at compile time
    std::vector<std::unique_ptr<step>> steps;
    std::vector<int> params, results;
    std::vector<std::pair<std::string, std::string>> impls; // (node id, implementation), in node order
    size_t slots = 0;
    int threads = 0;
    std::unique_ptr<graph> owner; // the compiled clone (steps point into it)

    // An arena left by an earlier run, else a new one; and giving it back.
    std::unique_ptr<arena> take_arena() const {
        std::lock_guard<std::mutex> lock(arenas_mu);
        if (arenas.empty()) return std::make_unique<arena>();
        std::unique_ptr<arena> a = std::move(arenas.back());
        arenas.pop_back();
        return a;
    }
    void give_arena(std::unique_ptr<arena> a) const {
        std::lock_guard<std::mutex> lock(arenas_mu);
        arenas.push_back(std::move(a));
    }

private:
    mutable std::mutex arenas_mu;
    mutable std::vector<std::unique_ptr<arena>> arenas;
};

} // namespace qconv::graph::exec
