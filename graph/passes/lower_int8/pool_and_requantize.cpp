// The integer pooling and requantization pass of the int8 lowering
// (lowering.h; docs/graph.md, "MaxPool, nearest Resize and Concat stay on the integers"),
// run once every candidate is decided.
#include <cmath>

#include "graph/passes/lower_int8/lowering.h"

namespace qconv::graph::int8 {

namespace {

// A u8/i8 DequantizeLinear of a 4-D tensor with Constant parameters, per
// tensor or along axis 1, every scale positive and normal: nondecreasing in
// the integer, and (q − z)·s / s rounds back to q − z.
bool monotone_dequantize(const node *d) {
    if (d->kind != op::DequantizeLinear || d->out_type != dtype::f32 || d->inputs.size() < 2) return false;
    const node *x = d->inputs[0], *s = d->inputs[1];
    if ((x->out_type != dtype::u8 && x->out_type != dtype::s8) || x->out_shape.size() != 4 || !is_const_f32(s) ||
        (d->inputs.size() > 2 && d->inputs[2]->kind != op::Constant))
        return false;
    const int64_t ns = elems_of(s->out_shape);
    if (ns != 1 && !((d->attr.axis == 1 || d->attr.axis == -3) && ns == x->out_shape[1])) return false;
    for (int64_t i = 0; i < ns; ++i)
        if (!(s->value(i) >= std::ldexp(1.0, -118) && s->value(i) <= std::ldexp(1.0, 118))) return false;
    return true;
}

} // namespace

// After the lowering, on the integers a lowered convolution left:
// MaxPool(DequantizeLinear(q)) → DequantizeLinear(MaxPool(q)) (max commutes
// with a nondecreasing map; the window skips positions outside the input),
// the same for a nearest Resize (it copies elements, which commutes with any
// map of the channel's values),
// and QuantizeLinear(DequantizeLinear(q, s, z), s, z) → q (the level comes
// back). Per-channel scales too: a network whose activations feed f32
// convolutions (no single source scale) pools its integers and keeps its
// f32 only where a convolution needs it. Returns how many were rewritten.
int pool_and_requantize_on_integers(graph &g) {
    int n = 0;
    for (node *m : g.topo_order()) {
        const bool moves = m->kind == op::MaxPool || (m->kind == op::Resize && m->attr.resize_mode == "nearest");
        if (moves && m->out_type == dtype::f32 && monotone_dequantize(m->inputs[0])) {
            node *d = m->inputs[0];
            node *mp = g.add(m->kind, {d->inputs[0]}, m->attr, g.unique_id(m->id + "_int8"));
            mp->rt_info = m->rt_info;
            infer_node(*mp, g.dynamic_value());
            std::vector<node *> in = d->inputs;
            in[0] = mp;
            node *nd = g.add(op::DequantizeLinear, in, d->attr, g.unique_id(m->id + "_dq"));
            nd->rt_info = m->rt_info;
            infer_node(*nd, g.dynamic_value());
            g.replace_uses(m, nd);
            ++n;
        } else if (m->kind == op::QuantizeLinear && monotone_dequantize(m->inputs[0])) {
            node *d = m->inputs[0];
            if (d->inputs[0]->out_type != m->out_type || !same_qdq_params(m, d)) continue;
            g.replace_uses(m, d->inputs[0]);
            ++n;
        }
    }
    return n;
}

} // namespace qconv::graph::int8
