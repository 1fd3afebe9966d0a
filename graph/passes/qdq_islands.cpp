// 8-bit elementwise islands as tables (docs/graph.md, "8-bit elementwise
// islands"; the contract: docs/semantics.md §10).
//
// An island is what a QDQ network writes around an elementwise op it keeps
// in f32: QuantizeLinear(f(DequantizeLinear(a) [, DequantizeLinear(b)]))
// with f a tree of elementwise f32 ops (Add, Subtract, Multiply, Divide,
// Relu, Clamp, Sigmoid, Sqrt, Gelu, PRelu with a scalar slope) whose other
// operands are scalar f32 Constants, every quantization per tensor. Its
// output is then a function of the one or two 8-bit inputs only, so the
// island becomes LookupTable(a [, b], table): the table holds the island's
// value for every input (256 or 65536 of them), computed by evaluating the
// island's own nodes (detail::eval_node) on those inputs — the values the
// graph as written gives, bit for bit. The second input may broadcast (a
// per-channel operand, as a squeeze-excite scale); the first has the
// output's shape.
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "graph/ir/detail.h"
#include "graph/ops/ops.h"
#include "graph/passes/qdq_islands.h"
#include "qconv/graph.h"

namespace qconv::graph::detail {

namespace {

constexpr int kMaxIslandNodes = 16;

bool is_8bit(dtype t) { return t == dtype::u8 || t == dtype::s8; }

// A QuantizeLinear / DequantizeLinear with one Constant scale and a Constant
// zero point (or none).
bool per_tensor_constant_params(const node *n) {
    return elems_of(n->inputs[1]->out_shape) == 1 && n->inputs[1]->kind == op::Constant &&
           (n->inputs.size() < 3 || n->inputs[2]->kind == op::Constant);
}

bool per_tensor_8bit_q(const node *n) {
    return is_8bit(n->out_type) && n->inputs[0]->out_type == dtype::f32 && per_tensor_constant_params(n);
}

bool per_tensor_8bit_dq(const node *n) {
    return n->kind == op::DequantizeLinear && n->out_type == dtype::f32 && is_8bit(n->inputs[0]->out_type) &&
           per_tensor_constant_params(n);
}

// A value of one element computed from Constants only (a Constant, or a
// dequantized or converted one): the same for every input of the island.
bool constant_only(const node *n, int depth) {
    if (n->kind == op::Constant) return n->data != nullptr;
    if (n->kind == op::Parameter || n->inputs.empty() || depth > 8) return false;
    return std::all_of(n->inputs.begin(), n->inputs.end(), [&](const node *i) { return constant_only(i, depth + 1); });
}
bool scalar_f32_constant(const node *n) {
    return n->out_type == dtype::f32 && elems_of(n->out_shape) == 1 && constant_only(n, 0);
}
// A per-channel f32 value from Constants: [1, C, 1, 1] or [C, 1, 1]; its C, else 0.
int64_t channel_f32_constant(const node *n) {
    const shape_t &s = n->out_shape;
    const bool shaped =
        (s.size() == 4 && s[0] == 1 && s[2] == 1 && s[3] == 1) || (s.size() == 3 && s[1] == 1 && s[2] == 1);
    if (n->out_type != dtype::f32 || !shaped || !constant_only(n, 0)) return 0;
    return s[s.size() - 3];
}

bool elementwise(op k) {
    switch (k) {
    case op::Add:
    case op::Subtract:
    case op::Multiply:
    case op::Divide:
    case op::Relu:
    case op::Clamp:
    case op::Sigmoid:
    case op::Sqrt:
    case op::Gelu:
    case op::PRelu: return true;
    default: return false;
    }
}

// The island under q: its interior nodes (topological order) and its
// DequantizeLinear leaves (at most two). False when q does not top one.
struct island {
    std::vector<node *> interior; // f32 elementwise nodes, inputs before users
    std::vector<node *> leaves;   // DequantizeLinear nodes
    int64_t channels = 0;         // > 0: a per-channel constant operand of C values (one leaf only)
};

bool collect(node *n, island *is) {
    if (scalar_f32_constant(n)) return true;
    if (const int64_t c = channel_f32_constant(n)) {
        if (is->channels && is->channels != c) return false;
        is->channels = c;
        return true;
    }
    if (per_tensor_8bit_dq(n)) {
        if (std::find(is->leaves.begin(), is->leaves.end(), n) == is->leaves.end()) is->leaves.push_back(n);
        return is->leaves.size() <= 2;
    }
    if (!elementwise(n->kind) || n->out_type != dtype::f32) return false;
    if (std::find(is->interior.begin(), is->interior.end(), n) != is->interior.end()) return true;
    for (node *i : n->inputs)
        if (!collect(i, is)) return false;
    if (static_cast<int>(is->interior.size()) >= kMaxIslandNodes) return false;
    is->interior.push_back(n);
    return true;
}

// Every interior node's consumers are interior nodes or the top.
bool closed(const graph &g, const island &is, const node *top) {
    for (const node *n : is.interior)
        for (const node *c : g.consumers(n))
            if (c != top && std::find(is.interior.begin(), is.interior.end(), c) == is.interior.end()) return false;
    return true;
}

// How the second input broadcasts onto the first (the output's shape):
// equal, scalar, or one value per channel ([N, C, 1, 1] / [1, C, 1, 1]).
bool broadcast_fits(const shape_t &out, const shape_t &b) {
    if (b == out || elems_of(b) == 1) return true;
    if (out.size() != 4 || b.size() != 4) return false;
    return (b[0] == out[0] || b[0] == 1) && b[1] == out[1] && b[2] == 1 && b[3] == 1;
}

// Every input value in order (i & 255; the high byte i >> 8 for the first of two).
tensor input_values(dtype t, const shape_t &s, bool high) {
    tensor v(t, s);
    for (int64_t i = 0; i < elems_of(s); ++i) v.bytes[i] = static_cast<uint8_t>(high ? i >> 8 : i & 255);
    return v;
}

// The island evaluated on every input: a copy of its nodes over [256] or
// [65536] inputs (the first input's byte the high one), through eval_node.
std::vector<uint8_t> tabulate(const island &is, node *top) {
    const int64_t n = is.leaves.size() == 1 ? 256 : 65536;
    // Per channel: the input [1, C, 1, 256] (each channel's 256 values), so the
    // [1, C, 1, 1] operands broadcast onto it as in the graph.
    const shape_t in_shape = is.channels ? shape_t{1, is.channels, 1, 256} : shape_t{n};
    graph m;
    std::map<const node *, node *> copy;
    std::map<const node *, tensor> vals;
    // The copy of x in m, its inputs first (the Constants' data shared).
    std::function<node *(node *)> mirror = [&](node *x) -> node * {
        if (copy.count(x)) return copy[x];
        std::vector<node *> in;
        for (node *i : x->inputs) in.push_back(mirror(i));
        node *y =
            x->kind == op::Constant ? m.constant(x->out_type, x->out_shape, x->data) : m.add(x->kind, in, x->attr);
        return copy[x] = y;
    };
    for (size_t k = 0; k < is.leaves.size(); ++k) {
        node *dq = is.leaves[k];
        const dtype t = dq->inputs[0]->out_type;
        node *p = m.parameter(t, in_shape);
        copy[dq->inputs[0]] = p;
        vals[p] = input_values(t, in_shape, k == 0 && n == 65536);
    }
    node *q = mirror(top);
    m.infer();
    for (node *x : m.topo_order()) {
        if (vals.count(x)) continue;
        if (x->kind == op::Constant) {
            vals[x] = constant_value(*x);
            continue;
        }
        std::vector<const tensor *> in;
        for (node *i : x->inputs) in.push_back(&vals.at(i));
        eval_node(*x, in, vals[x]);
    }
    const tensor &t = vals.at(q);
    return std::vector<uint8_t>(t.bytes.begin(), t.bytes.end());
}

} // namespace

int tabulate_qdq_islands(graph &g) {
    int done = 0;
    for (node *q : g.topo_order()) {
        if (q->kind != op::QuantizeLinear || !per_tensor_8bit_q(q)) continue;
        island is;
        if (!collect(q->inputs[0], &is) || is.leaves.empty() || !closed(g, is, q)) continue;
        if (is.channels && (is.leaves.size() != 1 || q->out_shape.size() != 4 || q->out_shape[1] != is.channels))
            continue; // a table per channel: one 4-D input
        if (is.leaves.size() == 2) {
            const shape_t &out = q->out_shape;
            if (is.leaves[0]->out_shape != out) std::swap(is.leaves[0], is.leaves[1]);
            if (is.leaves[0]->out_shape != out || !broadcast_fits(out, is.leaves[1]->out_shape)) continue;
        } else if (is.leaves[0]->out_shape != q->out_shape) {
            continue;
        }
        const std::vector<uint8_t> table = tabulate(is, q);
        auto data = std::make_shared<constant_data>();
        data->bytes = table;
        const shape_t ts = is.channels ? shape_t{is.channels, 256} : shape_t{static_cast<int64_t>(table.size())};
        node *t = g.constant(q->out_type, ts, data, g.unique_id(q->id + "_table"));
        infer_node(*t, g.dynamic_value());
        std::vector<node *> in;
        for (node *dq : is.leaves) in.push_back(dq->inputs[0]);
        in.push_back(t);
        node *lut = g.add(op::LookupTable, in, {}, g.unique_id(q->id + "_lut"));
        lut->friendly_name = q->friendly_name;
        lut->rt_info = q->rt_info;
        infer_node(*lut, g.dynamic_value());
        g.replace_uses(q, lut);
        ++done;
    }
    return done;
}

} // namespace qconv::graph::detail
