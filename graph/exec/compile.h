// The executor's compilation (graph/exec/), in the order compiled_graph::compile
// runs it:
//  1. the compressed MatMuls and the nodes they absorb (compressed_matmul.cpp),
//     the elementwise regions (elementwise_regions.cpp);
//  2. one implementation per node, from the step table (step_table.cpp): the
//     first row that takes the node builds its step (or none: a constant, an
//     input, a value folded at compile time, a node fused into another's step)
//     and names its implementation;
//  3. the compile-time values nothing reads at run time dropped, a global
//     average pool of a DequantizeLinear made one step, the buffer lifetimes
//     (buffers.cpp), the f32 islands (f32_islands.cpp).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graph/exec/compressed_matmul.h"
#include "graph/exec/program.h"
#include "qconv/conv_f32.h"

namespace qconv::graph::exec {

// One op an f32 convolution's primitive absorbs (graph/exec/conv_epilogue.cpp):
// folded into its weights and bias — a bias Add, a BatchNormalization's
// Multiply / Add (kind, one value per output channel) — or one of its
// post-ops (post; a hard-swish is four nodes).
struct conv_epilogue_op {
    std::vector<node *> nodes; // the nodes it absorbs, the last one's value its result
    op kind = op::Add;
    std::vector<float> values;
    std::optional<f32_post_op> post;
};

// What the step table's rows see: the graph being compiled, the program the
// steps go into, the nodes' slots, and what earlier rows decided.
struct compile_context {
    compile_context(graph &g, program &P, const compile_options &opt) : g(g), P(P), opt(opt) {}
    graph &g;
    program &P;
    const compile_options &opt;
    std::map<const node *, int> slot;               // every node's output slot (topological order)
    std::map<const node *, compressed> mms;         // the compressed MatMuls, by MatMul node
    std::map<const node *, std::string> fused_into; // nodes another node's step computes → its id
    std::map<const node *, region> regions;         // the elementwise regions, by root
    std::map<const node *, std::vector<conv_epilogue_op>> conv_epilogues; // by f32 convolution (find_conv_epilogues)
    // The node being built: its inputs' slots and its output's slot.
    std::vector<int> in;
    int out = -1;
};

// What a row built for a node: its step (none for a node that needs no run
// time) and the implementation impls() reports for it.
struct built {
    std::unique_ptr<step> s;
    std::string impl;
};

// One row of the step table: which nodes it takes, and how it builds them.
struct step_row {
    const char *name;
    bool (*takes)(const compile_context &, const node &);
    built (*build)(compile_context &, node &);
};

// The rows in the order they are asked (step_table.cpp).
const std::vector<step_row> &step_table();
// The step (if any) and the implementation of n, from the first row that takes it.
void build_step(compile_context &cx, node &n);

// The f32 convolutions' epilogues: per convolution the ops after it that its
// primitive takes (conv_epilogue.cpp), found once before the elementwise regions
// (which leave them out) and consumed by the convolution's step where its
// weights are known at compile time (else they run as their own steps).
void find_conv_epilogues(const std::vector<node *> &order, compile_context &cx);

// The elementwise regions of the graph: cx.regions by root, their other nodes
// in cx.fused_into (elementwise_regions.cpp).
void find_elementwise_regions(graph &g, const std::vector<node *> &order, compile_context &cx);
// The step of a region's root.
built elementwise_region(compile_context &cx, node &n);

// Whether x is computed from Constants alone (up to 9 nodes deep, none above
// 2^20 elements: detail::fold_constant), and its value.
bool constant_subgraph(const node *x, tensor *value = nullptr);

// The compile-time values no step reads at run time (nor a primitive that
// holds its weights) freed: e.g. the f32 copy of compressed weights when only
// the decompression chain used them.
void drop_unread_values(program &P);
// A global average pool of a DequantizeLinear reads the bytes itself
// (MobileNet's and ResNet's heads): no f32 tensor, one pass, the same values.
void fold_dequantize_means(const graph &g, program &P);
// The buffer lifetimes: each slot's last reader frees it, the decisions each
// step makes from them (settle()); returns the slots that live through the run.
std::vector<bool> plan_buffers(const graph &g, program &P);
// Which f32 outputs stay NHWC (f32_islands.cpp).
void mark_f32_islands(const graph &g, program &P, const std::map<const node *, int> &slot,
                      const std::vector<bool> &keep);

} // namespace qconv::graph::exec
