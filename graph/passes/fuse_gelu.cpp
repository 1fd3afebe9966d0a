// Gelu fusion (docs/graph.md, "Gelu fusion"): the forms exporters write Gelu
// in, made of the IR's elementwise ops, become one Gelu node.
//
//   erf form:  a = Erf(x / √2)  (Divide, or Multiply by 1/√2 in either order)
//   tanh form: a = Tanh(√(2/π) · (x + 0.044715 · x·(x·x)))  (every product and
//              the sum in either operand order; the cube also as (x·x)·x)
//   then       a + 1 (either order), · x and · 0.5 in one of three orders:
//              (x·(1+a))·0.5, ((1+a)·0.5)·x, (x·0.5)·(1+a).
//
// The constants are one-element floating-point Constants within 1e-3
// (relative) of those values. Every value inside the pattern must be read by
// the pattern alone (a Result or another node reading one keeps the pattern as
// written), and the result must have x's shape and type. The pattern's last
// node becomes the Gelu (gelu_tanh for the tanh form) in place, keeping its id,
// friendly name and rt_info, so a graph that read the pattern as one Gelu node
// reads the same; the inner nodes are pruned.
#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <vector>

#include "qconv/graph.h"

namespace qconv::graph {

namespace {

constexpr double sqrt_2_over_pi = 0.7978845608028654; // √(2/π)

bool floating(dtype t) { return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16; }

// Whether c is a one-element floating-point Constant within 1e-3 of `want` (> 0).
bool near(const node *c, double want) {
    if (c->kind != op::Constant || !c->data || elems_of(c->attr.shape) != 1 || !floating(c->attr.type)) return false;
    return std::fabs(c->value(0) - want) <= 1e-3 * want;
}

// The input of binary node n that is not v (v itself when both are).
node *other(const node *n, const node *v) { return n->inputs[0] == v ? n->inputs[1] : n->inputs[0]; }

// Of a Multiply reading a Constant near `want`: the other input, else null.
node *times_constant(const node *m, double want) {
    if (m->kind != op::Multiply) return nullptr;
    if (near(m->inputs[1], want)) return m->inputs[0];
    if (near(m->inputs[0], want)) return m->inputs[1];
    return nullptr;
}

class gelu_matcher {
public:
    explicit gelu_matcher(graph &g) : g_(g) {
        for (const auto &n : g.nodes())
            for (node *in : n->inputs) readers_[in].push_back(n.get());
    }

    int run() {
        int fused = 0;
        for (node *n : g_.topo_order()) {
            if (n->kind != op::Erf && n->kind != op::Tanh) continue;
            node *x = n->kind == op::Erf ? erf_input(n) : tanh_input(n);
            node *last = x ? tail(n, x) : nullptr;
            if (!last || last->out_shape != x->out_shape || last->out_type != x->out_type || !floating(x->out_type))
                continue;
            replace(last, x, n->kind == op::Tanh);
            ++fused;
        }
        return fused;
    }

private:
    // Whether v has one reader (one input edge in the whole graph).
    bool single(const node *v) const {
        const auto it = readers_.find(v);
        return it != readers_.end() && it->second.size() == 1;
    }
    // The only reader of v when it is of kind k, else null.
    node *only_reader(const node *v, op k) const {
        if (!single(v)) return nullptr;
        node *r = readers_.at(v)[0];
        return r->kind == k ? r : nullptr;
    }

    // Erf(x / √2) or Erf(x · (1/√2)): x, else null.
    node *erf_input(const node *e) const {
        const node *s = e->inputs[0];
        if (!single(s)) return nullptr;
        if (s->kind == op::Divide && near(s->inputs[1], std::sqrt(2.0))) return s->inputs[0];
        return times_constant(s, std::sqrt(0.5));
    }

    // Whether c is x·(x·x) or (x·x)·x, each product read once.
    bool is_cube(const node *c, const node *x) const {
        if (c->kind != op::Multiply || !single(c)) return false;
        const node *s = c->inputs[0] == x ? c->inputs[1] : c->inputs[1] == x ? c->inputs[0] : nullptr;
        return s && s->kind == op::Multiply && s->inputs[0] == x && s->inputs[1] == x && single(s);
    }

    // Tanh(√(2/π) · (x + 0.044715 · x³)): x, else null.
    node *tanh_input(const node *t) const {
        const node *u = t->inputs[0];
        const node *v = single(u) ? times_constant(u, sqrt_2_over_pi) : nullptr;
        if (!v || v->kind != op::Add || !single(v)) return nullptr;
        for (int i = 0; i < 2; ++i) {
            node *x = v->inputs[i];
            const node *w = v->inputs[1 - i];
            const node *cube = single(w) ? times_constant(w, 0.044715) : nullptr;
            if (cube && is_cube(cube, x)) return x;
        }
        return nullptr;
    }

    // a + 1, then · x and · 0.5 in one of three orders: the last node, else null.
    node *tail(const node *a, const node *x) const {
        const node *add = only_reader(a, op::Add);
        if (!add || !near(other(add, a), 1.0)) return nullptr;
        node *m1 = only_reader(add, op::Multiply);
        if (!m1) return nullptr;
        const node *o1 = other(m1, add);
        if (o1 == x) { // (x·(1+a))·0.5
            node *m2 = only_reader(m1, op::Multiply);
            return m2 && near(other(m2, m1), 0.5) ? m2 : nullptr;
        }
        if (near(o1, 0.5)) { // ((1+a)·0.5)·x
            node *m2 = only_reader(m1, op::Multiply);
            return m2 && other(m2, m1) == x ? m2 : nullptr;
        }
        // (x·0.5)·(1+a)
        if (!single(o1) || times_constant(o1, 0.5) != x) return nullptr;
        return m1;
    }

    // The pattern's last node becomes Gelu(x); the readers index follows.
    void replace(node *last, node *x, bool tanh) {
        for (node *in : last->inputs) {
            auto &r = readers_[in];
            r.erase(std::find(r.begin(), r.end(), last));
        }
        last->kind = op::Gelu;
        last->inputs = {x};
        last->attr = attributes{};
        last->attr.gelu_tanh = tanh;
        readers_[x].push_back(last);
        infer_node(*last, g_.dynamic_value());
    }

    graph &g_;
    std::unordered_map<const node *, std::vector<node *>> readers_; // one entry per input edge
};

} // namespace

int fuse_gelu(graph &g) {
    const int fused = gelu_matcher(g).run();
    if (fused) g.prune();
    return fused;
}

} // namespace qconv::graph
