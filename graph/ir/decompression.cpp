#include "graph/ir/decompression.h"

#include <algorithm>
#include <utility>

#include "graph/ir/detail.h"

namespace qconv::graph::detail {

namespace {

bool fail_with(std::string *why, std::string what) {
    if (why) *why = std::move(what);
    return false;
}

bool f16_scale(const node *n) {
    return n->kind == op::Convert && n->inputs[0]->kind == op::Constant && n->inputs[0]->out_type == dtype::f16;
}

// The scale's Constant when `n` is one in type T (or an f16 one converted to T).
node *scale_of(node *n, dtype T) {
    if (n->kind == op::Constant && n->out_type == T) return n;
    if (f16_scale(n) && n->out_type == T) return n->inputs[0];
    return nullptr;
}

} // namespace

std::vector<node *> decompression::chain() const {
    std::vector<node *> c;
    if (reshape) c.push_back(reshape);
    c.push_back(mul);
    if (cscale) c.push_back(cscale);
    if (sub) {
        c.push_back(sub);
        c.push_back(cz);
    }
    c.push_back(cw);
    if (wq_reshape) c.push_back(wq_reshape);
    return c;
}

bool match_decompression(node *w, dtype T, decompression *d, std::string *why) {
    *d = decompression{};
    if (w->kind == op::Reshape) {
        d->reshape = w;
        w = w->inputs[0];
    }
    if (w->kind != op::Multiply)
        return fail_with(why, "weights are not a decompression subgraph (no Multiply by a scale)");
    d->mul = w;
    node *x = w->inputs[0], *s = w->inputs[1];
    if (!scale_of(s, T) && (scale_of(x, T) || x->kind == op::Constant || f16_scale(x))) std::swap(x, s);
    d->scale = scale_of(s, T);
    if (!d->scale) {
        if (s->kind != op::Constant && !f16_scale(s))
            return fail_with(why, "scale is not a Constant (" + std::string(to_string(s->kind)) + ")");
        return fail_with(why, std::string("scale is not ") + ir_name(T) + " (nor Convert(f16 Constant))");
    }
    if (d->scale != s) d->cscale = s;
    if (x->kind == op::Subtract) {
        node *cz = x->inputs[1];
        if (cz->kind != op::Convert || cz->out_type != T || cz->inputs[0]->kind != op::Constant ||
            !is_integer(cz->inputs[0]->out_type))
            return fail_with(why, "zero point is not Convert(integer Constant)");
        d->sub = x;
        d->cz = cz;
        d->zp = cz->inputs[0];
        x = x->inputs[0];
    }
    if (x->kind != op::Convert || x->out_type != T)
        return fail_with(why, "weights are not Convert(integer Constant or Parameter)");
    d->cw = x;
    node *q = x->inputs[0];
    if (q->kind == op::Reshape) {
        d->wq_reshape = q;
        q = q->inputs[0];
    }
    if (q->kind != op::Constant && q->kind != op::Parameter)
        return fail_with(why, "compressed weights are neither Constant nor Parameter");
    if (!is_integer(q->out_type)) return fail_with(why, "compressed weights are not an integer type");
    d->wq = q;
    return true;
}

// The (n, group) → value table of a broadcast constant `c` against the
// decompression shape D, where row n spans K = elems(D)/N and groups have G
// elements. Returns false when c is not constant within each group.
bool group_table(const node &c, const shape_t &D, int64_t G, std::vector<double> *out) {
    const int64_t N = D[0], K = elems_of(D) / N, NG = K / G;
    if (c.out_shape.size() > D.size()) return false;
    const auto cs = bstrides(c.out_shape, D);
    const auto ds = strides_of(D);
    // Constant within each group of G consecutive flat elements: every dim
    // along which c varies must have a D-stride that is a multiple of G.
    for (size_t i = 1; i < D.size(); ++i)
        if (cs[i] != 0 && ds[i] % G != 0) return false;
    out->resize(N * NG);
    for (int64_t n = 0; n < N; ++n)
        for (int64_t g = 0; g < NG; ++g) {
            int64_t flat = n * K + g * G, off = 0;
            for (size_t i = 0; i < D.size(); ++i) {
                off += (flat / ds[i]) * cs[i];
                flat %= ds[i];
            }
            (*out)[n * NG + g] = c.value(off);
        }
    return true;
}

// Smallest group size (a divisor of K) along which c is constant: K, or the
// product of D's dims after the last dim (≥ 1) along which c varies.
int64_t group_of(const node &c, const shape_t &D) {
    const int64_t K = elems_of(D) / D[0];
    const auto cs = bstrides(c.out_shape, D);
    const auto ds = strides_of(D);
    int64_t g = K;
    for (size_t i = 1; i < D.size(); ++i)
        if (cs[i] != 0) g = std::min(g, ds[i]);
    return g;
}

} // namespace qconv::graph::detail
