// ConvTranspose whose kernel is its stride → a 1x1 Convolution and a
// DepthToSpace (docs/graph.md, "ConvTranspose as a convolution"; the
// contract: docs/semantics.md §10).
//
// With kernel (sh, sw) equal to the strides, no pads, no output padding,
// dilation 1 and one group, each output pixel takes exactly one tap:
//   y[oc, i·sh + a, j·sw + b] = Σ_ic x[ic, i, j] · w[ic, oc, a, b],
// a 1x1 convolution of x to sh·sw·OC channels — channel (a·sw + b)·OC + oc
// holding the weights w[·, oc, a, b] — then DepthToSpace DCR with the block
// (sh, sw). The weights are rewritten where they are written: a Constant is
// permuted; quantized weights — DequantizeLinear(q, s [, z]) of Constants or
// the reader's Multiply(Convert(q) [− Convert(z)], s), per tensor or per
// output channel — become DequantizeLinear(q', s', z') axis 0 with q permuted
// and s, z repeated per block position: the same values ((q − z)·s in f32),
// and what the int8 lowering takes as a convolution's quantized weights;
// anything else is Reshape(Transpose(w)). The DepthToSpace then moves past what commutes with
// it, through single consumers: a bias Add of per-channel values (repeated per
// block position) and a per-tensor QuantizeLinear. A QDQ ConvTranspose thus
// becomes Q(Conv(DQ(x), DQ(w'))) — lowered to an int8 convolution — followed
// by a move of its 8-bit output.
#include <algorithm>

#include "graph/ir/detail.h"
#include "graph/passes/dequantized_weights.h"
#include "qconv/graph.h"

namespace qconv::graph {

namespace {

bool kernel_is_stride(const node &n) {
    if (n.kind != op::ConvTranspose || n.inputs.size() != 2) return false;
    const attributes &a = n.attr;
    const shape_t &x = n.inputs[0]->out_shape, &w = n.inputs[1]->out_shape;
    if (a.group != 1 || x.size() != 4 || w.size() != 4) return false;
    for (int i = 0; i < 2; ++i)
        if (a.strides[i] != w[2 + i] || a.dilations[i] != 1 || a.pads_begin[i] || a.pads_end[i] || a.output_padding[i])
            return false;
    return true;
}

// w [C, OC, sh, sw] as [sh, sw, OC, C] (= [sh·sw·OC, C, 1, 1]).
node *permuted(graph &g, const node &w) {
    const shape_t &s = w.out_shape;
    const tensor v = detail::constant_value(w);
    std::vector<uint8_t> out(v.bytes.size());
    detail::permute(w.out_type, v.bytes.data(), s, {2, 3, 1, 0}, out.data());
    return passes::constant_like(g, w, {s[2] * s[3] * s[1], s[0], 1, 1}, std::move(out), "_1x1");
}

// The 1x1 convolution's weights [sh·sw·OC, C, 1, 1] from w [C, OC, sh, sw].
node *weights_1x1(graph &g, node *w) {
    const shape_t &s = w->out_shape;
    const int64_t OC = s[1], blocks = s[2] * s[3];
    if (passes::constant_bytes(w)) return permuted(g, *w);
    const passes::dequantized dq = passes::dequantized_weights(w, 1, OC);
    if (dq.q) {
        // Per output channel when either the scale or the zero point is (both then one per channel).
        const bool per_c = elems_of(dq.s->out_shape) != 1 || (dq.z && elems_of(dq.z->out_shape) != 1);
        const int64_t count = per_c ? blocks * OC : 1;
        std::vector<node *> in = {permuted(g, *dq.q), passes::constant_repeated(g, dq.s, count, "_repeated")};
        if (dq.z) in.push_back(passes::constant_repeated(g, dq.z, count, "_repeated"));
        attributes a;
        a.axis = 0;
        node *d = g.add(op::DequantizeLinear, in, a, g.unique_id(w->id + "_1x1"));
        infer_node(*d);
        return d;
    }
    attributes t;
    t.order = {2, 3, 1, 0};
    node *wt = g.add(op::Transpose, {w}, t, g.unique_id(w->id + "_transposed"));
    infer_node(*wt);
    attributes r;
    r.target = {blocks * OC, s[0], 1, 1};
    node *w1 = g.add(op::Reshape, {wt}, r, g.unique_id(w->id + "_1x1"));
    infer_node(*w1);
    return w1;
}

// The other operand of Add u (from `from`) when it is one value or one per
// channel of C ([C,1,1], [1,C,1,1]); null otherwise.
node *per_channel_operand(const node *u, const node *from, int64_t C) {
    if (u->kind != op::Add || u->inputs.size() != 2 || u->inputs[0] == u->inputs[1]) return nullptr;
    node *b = u->inputs[0] == from ? u->inputs[1] : u->inputs[0];
    const shape_t &s = b->out_shape;
    if (elems_of(s) == 1 && s.size() <= 4) return b;
    const bool per_c = (s == shape_t{C, 1, 1} || s == shape_t{1, C, 1, 1});
    return per_c && b->out_type == u->out_type ? b : nullptr;
}

bool per_tensor_quantize(const node *u, const node *from) {
    return u->kind == op::QuantizeLinear && u->inputs[0] == from && elems_of(u->inputs[1]->out_shape) == 1;
}

// ConvTranspose ct → its 1x1 convolution, the ops that commute moved before
// the DepthToSpace, which takes the place of the last one.
void rewrite(graph &g, node *ct) {
    const shape_t &ws = ct->inputs[1]->out_shape;
    const int64_t OC = ws[1], sh = ws[2], sw = ws[3];
    attributes ca;
    node *tail =
        g.add(op::Convolution, {ct->inputs[0], weights_1x1(g, ct->inputs[1])}, ca, g.unique_id(ct->id + "_as_conv"));
    tail->friendly_name = ct->friendly_name;
    infer_node(*tail);
    node *last = ct; // the original node the DepthToSpace replaces
    for (;;) {
        const std::vector<node *> cs = g.consumers(last);
        if (cs.size() != 1) break;
        node *u = cs[0];
        std::vector<node *> in;
        if (node *b = per_channel_operand(u, last, OC)) {
            node *rb = b;
            if (elems_of(b->out_shape) != 1) {
                attributes c;
                c.axis = -3;
                rb = g.add(op::Concat, std::vector<node *>(static_cast<size_t>(sh * sw), b), c,
                           g.unique_id(b->id + "_repeated"));
                infer_node(*rb);
            }
            in = {tail, rb};
        } else if (per_tensor_quantize(u, last)) {
            in = u->inputs;
            in[0] = tail;
        } else break;
        tail = g.add(u->kind, in, u->attr, g.unique_id(u->id + "_before_d2s"));
        tail->friendly_name = u->friendly_name;
        tail->rt_info = u->rt_info;
        infer_node(*tail);
        last = u;
    }
    attributes d;
    d.block = {sh, sw};
    node *d2s = g.add(op::DepthToSpace, {tail}, d, g.unique_id(last->id + "_d2s"));
    d2s->friendly_name = last->friendly_name;
    infer_node(*d2s);
    g.replace_uses(last, d2s);
}

} // namespace

int conv_transpose_to_conv(graph &g) {
    int n = 0;
    for (node *ct : g.topo_order())
        if (kernel_is_stride(*ct)) {
            rewrite(g, ct);
            ++n;
        }
    if (n) {
        g.prune();
        g.infer();
    }
    return n;
}

} // namespace qconv::graph
