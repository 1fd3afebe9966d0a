// A MatMul of an activation [M, K] by quantized constant weights [K, N]
// (transpose_b off, as Gemm with transB = 0 and MatMul write them) becomes
// the same MatMul of the weights transposed to [N, K] with transpose_b:
// DequantizeLinear(qᵀ, s, z) axis 0 — the same numbers (q − z)·s, each
// product and the sum over K as before — in the form the int8 lowering takes
// (an [M, K] x [N, K]ᵀ MatMul is a 1x1 convolution; docs/graph.md).
#include "graph/ir/detail.h"
#include "graph/passes/dequantized_weights.h"
#include "qconv/graph.h"

namespace qconv::graph {

namespace {

// v (one value or N of them) as a flat [N], or as it is.
node *flat(graph &g, node *v) {
    const int64_t e = elems_of(v->out_shape);
    return e == 1 ? v : passes::constant_repeated(g, v, e, "_flat");
}

bool rewrite(graph &g, node *mm) {
    const shape_t &ws = mm->inputs[1]->out_shape;
    if (mm->attr.transpose_a || mm->attr.transpose_b || ws.size() != 2 || mm->inputs[0]->out_shape.size() != 2)
        return false;
    const int64_t K = ws[0], N = ws[1];
    const passes::dequantized dq = passes::dequantized_weights(mm->inputs[1], 1, N);
    if (!dq.q) return false;
    const tensor q = detail::constant_value(*dq.q);
    std::vector<uint8_t> qt(q.bytes.size());
    detail::permute(dq.q->out_type, q.bytes.data(), {K, N}, {1, 0}, qt.data());
    std::vector<node *> in = {passes::constant_like(g, *dq.q, {N, K}, std::move(qt), "_nk"), flat(g, dq.s)};
    if (dq.z) in.push_back(flat(g, dq.z));
    attributes da;
    da.axis = 0;
    node *w = g.add(op::DequantizeLinear, in, da, g.unique_id(mm->inputs[1]->id + "_nk"));
    infer_node(*w);
    attributes ma = mm->attr;
    ma.transpose_b = true;
    node *y = g.add(op::MatMul, {mm->inputs[0], w}, ma, g.unique_id(mm->id + "_nk"));
    y->friendly_name = mm->friendly_name;
    y->rt_info = mm->rt_info;
    infer_node(*y);
    g.replace_uses(mm, y);
    return true;
}

} // namespace

int matmul_weights_to_nk(graph &g) {
    int n = 0;
    for (node *mm : g.topo_order())
        if (mm->kind == op::MatMul && mm->inputs.size() == 2) n += rewrite(g, mm);
    if (n) {
        g.prune();
        g.infer();
    }
    return n;
}

} // namespace qconv::graph
