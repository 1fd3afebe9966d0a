// Quantized constant weights (dequantized_weights.h).
#include "graph/passes/dequantized_weights.h"

#include <algorithm>

#include "graph/ir/detail.h"

namespace qconv::graph::passes {

bool constant_bytes(const node *n) { return n->kind == op::Constant && n->data && bits_of(n->out_type) >= 8; }

namespace {

// x as Convert(c) of an integer Constant c: c, else null.
node *converted_integers(node *x) {
    if (x->kind != op::Convert || !constant_bytes(x->inputs[0]) || !is_integer(x->inputs[0]->out_type)) return nullptr;
    return x->inputs[0];
}

// One value, or `count` along `axis` of a rank-r value (right-aligned).
bool along(const node *v, size_t r, int axis, int64_t count) {
    const shape_t &s = v->out_shape;
    if (elems_of(s) == 1) return true;
    if (elems_of(s) != count || s.size() > r) return false;
    for (size_t i = 0; i < s.size(); ++i) {
        const size_t d = r - s.size() + i; // the dim of w it broadcasts along
        if (s[i] != (static_cast<int>(d) == axis ? count : 1)) return false;
    }
    return true;
}

} // namespace

dequantized dequantized_weights(node *w, int axis, int64_t count) {
    const size_t r = w->out_shape.size();
    auto fits = [&](const node *v) { return constant_bytes(v) && along(v, r, axis, count); };
    if (w->kind == op::DequantizeLinear) {
        const int64_t a = w->attr.axis < 0 ? w->attr.axis + static_cast<int64_t>(r) : w->attr.axis;
        const bool per_tensor = elems_of(w->inputs[1]->out_shape) == 1;
        if (!constant_bytes(w->inputs[0]) || !constant_bytes(w->inputs[1]) ||
            (!per_tensor && (a != axis || elems_of(w->inputs[1]->out_shape) != count)))
            return {};
        if (w->inputs.size() > 2 &&
            (!constant_bytes(w->inputs[2]) || elems_of(w->inputs[2]->out_shape) != elems_of(w->inputs[1]->out_shape)))
            return {};
        return {w->inputs[0], w->inputs[1], w->inputs.size() > 2 ? w->inputs[2] : nullptr};
    }
    if (w->kind != op::Multiply) return {};
    for (int k = 0; k < 2; ++k) {
        node *a = w->inputs[k], *s = w->inputs[1 - k];
        if (s->out_type != dtype::f32 || !fits(s)) continue;
        if (node *q = converted_integers(a)) return {q, s, nullptr};
        if (a->kind != op::Subtract) continue;
        node *q = converted_integers(a->inputs[0]), *z = converted_integers(a->inputs[1]);
        if (q && z && z->out_type == q->out_type && fits(z)) return {q, s, z};
    }
    return {};
}

node *constant_like(graph &g, const node &like, const shape_t &s, std::vector<uint8_t> bytes, const char *suffix) {
    auto d = std::make_shared<constant_data>();
    d->bytes = std::move(bytes);
    node *c = g.constant(like.out_type, s, d, g.unique_id(like.id + suffix));
    infer_node(*c);
    return c;
}

node *constant_repeated(graph &g, node *v, int64_t count, const char *suffix) {
    if (count == 1) return v;
    const int64_t e = elems_of(v->out_shape);
    const tensor t = detail::constant_value(*v);
    const size_t es = t.bytes.size() / static_cast<size_t>(e);
    std::vector<uint8_t> out;
    for (int64_t k = 0; k < count; ++k)
        out.insert(out.end(), t.bytes.begin() + (k % e) * es, t.bytes.begin() + (k % e + 1) * es);
    return constant_like(g, *v, {count}, std::move(out), suffix);
}

} // namespace qconv::graph::passes
