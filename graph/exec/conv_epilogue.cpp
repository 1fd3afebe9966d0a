// What an f32 convolution's primitive takes from the nodes after it, through
// single readers (docs/graph.md, "f32 convolution post-ops"):
//  1. folded into its weights and bias: a bias Add of per-channel values (the
//     same f32 addition: oneDNN adds the bias to each output), then a
//     Multiply by per-channel values and an optional Add of them — a
//     BatchNormalization as the reader writes it — or, with
//     compile_options::conv_post_ops, of per-tensor ones (PP-OCR's
//     learnable scale-shift): w·a, b·a + t, each rounded once where the
//     graph rounds the convolution's output, then the product and the sum;
//  2. then, with compile_options::conv_post_ops, its post-ops (qconv::f32_post_op):
//     Relu, Clamp, a hard-swish — x·Clip(x + 3, 0, 6)/6 or the reader's
//     HardSwish x·Clip(x·(1/6) + 0.5, 0, 1), four nodes each —, and Add /
//     Subtract / Multiply by per-channel or per-tensor constants (one f32
//     operation each, as written).
#include <algorithm>

#include "graph/exec/compile.h"
#include "graph/ops/ops.h"

namespace qconv::graph::exec {

namespace {

// The values of a constant operand b of an f32 4-D convolution's output of C
// channels: C values ([C,1,1] or [1,C,1,1]) or, with
// compile_options::conv_post_ops, one value ([], [1], [1,1,1,1], ...),
// computed from Constants; else empty.
std::vector<float> constant_operand(const compile_context &cx, const node *b, int64_t C) {
    const shape_t &bs = b->out_shape;
    const bool one = elems_of(bs) == 1 && bs.size() <= 4 && cx.opt.conv_post_ops;
    const bool shaped = elems_of(bs) == C && bs.size() >= 3 && bs.size() <= 4 && bs[bs.size() - 3] == C &&
                        bs[bs.size() - 1] == 1 && bs[bs.size() - 2] == 1 && (bs.size() == 3 || bs[0] == 1);
    if (!(shaped || one) || b->out_type != dtype::f32) return {};
    tensor v;
    std::vector<float> r;
    if (cx.slot.count(b) && cx.P.known[cx.slot.at(b)]) r = cx.P.consts[cx.slot.at(b)].to_f32();
    else if (constant_subgraph(b, &v)) r = v.to_f32();
    return r;
}

// The one value of a per-tensor constant operand, if it is one.
std::optional<float> scalar_constant(const compile_context &cx, const node *b) {
    const std::vector<float> v = constant_operand(cx, b, 1);
    if (v.size() != 1) return std::nullopt;
    return v[0];
}

// u's operand other than t (nullptr when both are t).
const node *other(const node *u, const node *t) {
    if (u->inputs.size() != 2 || u->inputs[0] == u->inputs[1]) return nullptr;
    return u->inputs[0] == t ? u->inputs[1] : u->inputs[0];
}

// The single reader of t of t's shape and type, else nullptr.
node *single_reader(const compile_context &cx, const node *t) {
    const auto cs = cx.g.consumers(t);
    if (cs.size() != 1 || cs[0]->out_shape != t->out_shape || cs[0]->out_type != dtype::f32) return nullptr;
    return cs[0];
}

// Stage 1: what folds into the weights and the bias after t, the
// convolution n's output.
std::vector<conv_epilogue_op> folded_ops(const compile_context &cx, node *n) {
    std::vector<conv_epilogue_op> chain;
    const int64_t C = n->out_shape[1];
    node *t = n;
    for (int stage = 0; stage < 3; ++stage) {
        node *u = single_reader(cx, t);
        if (!u) break;
        const bool add = u->kind == op::Add, mul = u->kind == op::Multiply;
        if ((stage < 2 && !add && !mul) || (stage == 2 && !add)) break;
        if (stage == 1 && add && chain.back().kind == op::Add) break; // bias Add, then an Add: not a BatchNormalization
        if (stage == 2 && chain.back().kind != op::Multiply) break;
        const node *b = other(u, t);
        std::vector<float> v = b ? constant_operand(cx, b, C) : std::vector<float>();
        if (v.empty()) break;
        if (v.size() == 1) v.assign(static_cast<size_t>(C), v[0]); // folded per channel
        chain.push_back({{u}, u->kind, std::move(v), std::nullopt});
        t = u;
    }
    return chain;
}

// Whether c is Clamp(0, hi) read by m alone, m's operand other than t, and m
// of t's shape: the Clip and the outer Multiply of either hard-swish form.
bool clamp_into(const compile_context &cx, const node *c, double hi, const node *m, const node *t) {
    return c && c->kind == op::Clamp && c->attr.clamp_min == 0 && c->attr.clamp_max == hi && other(m, t) == c &&
           cx.g.consumers(c).size() == 1 && m->out_shape == t->out_shape;
}

// The hard-swish post-op absorbing these nodes (the last one's value its result).
conv_epilogue_op hard_swish_post_op(std::vector<node *> nodes) {
    f32_post_op p;
    p.k = f32_post_op::kind::hardswish;
    const op last = nodes.back()->kind;
    return conv_epilogue_op{std::move(nodes), last, {}, p};
}

// A hard-swish of t as paddle2onnx and many exporters write it:
// Divide(Multiply(t, Clamp(Add(t, 3), 0, 6)), 6), the Multiply's operands in
// either order; t read by the Add and the Multiply only.
std::optional<conv_epilogue_op> hard_swish(const compile_context &cx, const node *t) {
    const auto cs = cx.g.consumers(t);
    if (cs.size() != 2) return std::nullopt;
    node *a = cs[0]->kind == op::Add ? cs[0] : cs[1], *m = a == cs[0] ? cs[1] : cs[0];
    if (a->kind != op::Add || m->kind != op::Multiply || a->out_shape != t->out_shape) return std::nullopt;
    const node *three = other(a, t);
    if (!three || scalar_constant(cx, three) != 3.f) return std::nullopt;
    node *c = single_reader(cx, a);
    if (!clamp_into(cx, c, 6, m, t)) return std::nullopt;
    node *d = single_reader(cx, m);
    if (!d || d->kind != op::Divide || d->inputs[0] != m || scalar_constant(cx, d->inputs[1]) != 6.f)
        return std::nullopt;
    return hard_swish_post_op({a, c, m, d});
}

// A hard-swish of t as the ONNX reader writes HardSwish (opset 14):
// Multiply(t, Clamp(Add(Multiply(t, 1/6), 0.5), 0, 1)), each operand order;
// t read by the two Multiplies only.
std::optional<conv_epilogue_op> hard_swish_op(const compile_context &cx, const node *t) {
    const auto cs = cx.g.consumers(t);
    if (cs.size() != 2 || cs[0]->kind != op::Multiply || cs[1]->kind != op::Multiply) return std::nullopt;
    for (int first = 0; first < 2; ++first) {
        node *s = cs[first], *m = cs[1 - first];
        const node *sixth = other(s, t);
        if (!sixth || scalar_constant(cx, sixth) != 1.f / 6.f || s->out_shape != t->out_shape) continue;
        node *a = single_reader(cx, s);
        if (!a || a->kind != op::Add || !other(a, s) || scalar_constant(cx, other(a, s)) != 0.5f) continue;
        node *c = single_reader(cx, a);
        if (clamp_into(cx, c, 1, m, t)) return hard_swish_post_op({s, a, c, m});
    }
    return std::nullopt;
}

// Stage 2: the next post-op after t, else nothing.
std::optional<conv_epilogue_op> post_op(const compile_context &cx, node *t, int64_t C) {
    if (auto h = hard_swish(cx, t)) return h;
    if (auto h = hard_swish_op(cx, t)) return h;
    node *u = single_reader(cx, t);
    if (!u) return std::nullopt;
    f32_post_op p;
    using k = f32_post_op::kind;
    if (u->kind == op::Relu) p.k = k::relu;
    else if (u->kind == op::Clamp) {
        p.k = k::clip;
        p.lo = static_cast<float>(u->attr.clamp_min);
        p.hi = static_cast<float>(u->attr.clamp_max);
    } else if (u->kind == op::Add || u->kind == op::Multiply || u->kind == op::Subtract) {
        // t − c is t + (−c), the same f32 sum; c − t is not taken.
        const node *b = other(u, t);
        if (!b || (u->kind == op::Subtract && u->inputs[0] != t)) return std::nullopt;
        std::vector<float> v = constant_operand(cx, b, C); // one value or one per channel
        if (v.empty()) return std::nullopt;
        if (u->kind == op::Subtract)
            for (float &x : v) x = -x;
        p.k = u->kind == op::Multiply ? k::multiply : k::add;
        p.values = std::move(v);
    } else {
        return std::nullopt;
    }
    if (p.k == k::clip && !(p.lo <= p.hi)) return std::nullopt;
    return conv_epilogue_op{{u}, u->kind, {}, p};
}

std::vector<conv_epilogue_op> f32_conv_epilogue(const compile_context &cx, node *n) {
    if (n->out_type != dtype::f32 || n->out_shape.size() != 4) return {};
    std::vector<conv_epilogue_op> chain = folded_ops(cx, n);
    if (!cx.opt.conv_post_ops) return chain;
    node *t = chain.empty() ? n : chain.back().nodes.back();
    while (auto p = post_op(cx, t, n->out_shape[1])) {
        chain.push_back(std::move(*p));
        t = chain.back().nodes.back();
    }
    return chain;
}

} // namespace

void find_conv_epilogues(const std::vector<node *> &order, compile_context &cx) {
    for (node *c : order)
        if ((c->kind == op::Convolution || c->kind == op::GroupConvolution) && !is_integer(c->out_type))
            if (auto chain = f32_conv_epilogue(cx, c); !chain.empty()) cx.conv_epilogues[c] = std::move(chain);
}

} // namespace qconv::graph::exec
