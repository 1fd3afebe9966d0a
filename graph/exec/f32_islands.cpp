// The f32 islands: which f32 outputs stay NHWC. An output stays NHWC when
// every reader takes an NHWC f32 input — an f32 convolution (its source), a per-tensor QuantizeLinear into u8/i8 that
// writes NHWC, a global average pool (ReduceMean over H, W), a layout-free
// elementwise op, nearest Resize, Concat along C or DepthToSpace whose output
// stays NHWC — and it comes from an f32 convolution, a 4-D DequantizeLinear, a
// layout-free op, a nearest Resize, a Concat along C or a DepthToSpace. Results and Parameters stay
// plain. A float model's islands start at its first f32 convolution and run
// through its BatchNormalization Multiply / Add (per-channel operands),
// activations and squeeze-excitation blocks. At run time an island step keeps
// NHWC only when its inputs allow it (keeps_nhwc), else it runs plain on
// plain copies. Each step says what it writes and reads (steps.h:
// may_write_nhwc, reads_nhwc).
#include <algorithm>
#include <cstdlib>

#include "graph/exec/compile.h"
#include "graph/exec/steps.h"
#include "graph/ops/ops.h"

namespace qconv::graph::exec {

// An elementwise f32 op that runs on NHWC storage as it is: a unary op, or
// Add / Subtract / Multiply / Divide whose operands have the output's shape
// or are the same bytes in either layout (rank <= 4 with C or H·W equal to 1
// once right-aligned to 4-D: a scalar, a per-channel [C,1,1] / [1,C,1,1]
// Constant such as a BatchNormalization's, a pooled [N,C,1,1] value); the
// NHWC op then broadcasts them along the matching dims of [N,H,W,C]
// (detail::eval_elementwise_nhwc, the same operations on the same operands).
bool layout_free(const node *n) {
    if (n->out_type != dtype::f32 || n->out_shape.size() != 4) return false;
    switch (n->kind) {
    case op::Relu:
    case op::Clamp:
    case op::Sigmoid:
    case op::Gelu: return true;
    case op::Add:
    case op::Subtract:
    case op::Multiply:
    case op::Divide:
        for (const node *i : n->inputs) {
            const shape_t &s = i->out_shape;
            if (i->out_type != dtype::f32 || s.size() > 4) return false;
            if (s == n->out_shape) continue;
            shape_t a(4 - s.size(), 1);
            a.insert(a.end(), s.begin(), s.end());
            if (a[1] != 1 && a[2] * a[3] != 1) return false;
        }
        return true;
    default: return false;
    }
}

// An f32 op that moves NHWC values as they are: a 4-D nearest Resize (each
// pixel's channels copied), a Concat along C of 4-D values or a DepthToSpace
// (each block position's channels copied).
bool moves_nhwc(const node *n) {
    if (n->out_type != dtype::f32 || n->out_shape.size() != 4) return false;
    if (n->kind == op::Resize) return n->attr.resize_mode == "nearest" && n->inputs[0]->out_shape.size() == 4;
    if (n->kind == op::DepthToSpace) return true;
    if (n->kind == op::Concat) {
        for (const node *i : n->inputs)
            if (i->out_type != dtype::f32 || i->out_shape.size() != 4) return false;
        return n->attr.axis == 1 || n->attr.axis == -3;
    }
    return false;
}

bool dequantize_to_nhwc(const node *n) {
    return n->kind == op::DequantizeLinear && n->out_type == dtype::f32 && n->out_shape.size() == 4 &&
           detail::qdq_takes_nhwc(*n);
}

// At run time: whether an island step keeps NHWC with these inputs — a
// DequantizeLinear or a Resize of an NHWC value, a Concat of NHWC values, an
// elementwise op whose inputs nhwc_dims all views, one NHWC.
bool keeps_nhwc(const node &n, const std::vector<const tensor *> &ins) {
    if (n.kind == op::DequantizeLinear || n.kind == op::Resize || n.kind == op::DepthToSpace)
        return ins[0]->order == layout::nhwc;
    bool any = false, all = true;
    for (const tensor *t : ins) {
        any = any || t->order == layout::nhwc;
        all = all && (n.kind == op::Concat ? t->order == layout::nhwc : !detail::nhwc_dims(*t).empty());
    }
    return any && all;
}

bool first_only(const node &u, const node &value) {
    return u.inputs[0] == &value && std::count(u.inputs.begin(), u.inputs.end(), &value) == 1;
}

void mark_f32_islands(const graph &g, program &P, const std::map<const node *, int> &slot,
                      const std::vector<bool> &keep) {
    // QCONV_GRAPH_F32_NHWC=0: every f32 output plain (the layout the graph's
    // ops define; the same values, tests compare the two).
    if (const char *v = std::getenv("QCONV_GRAPH_F32_NHWC"); v && std::string(v) == "0") return;
    std::map<const node *, const step *> by_node;
    std::map<int, const node *> node_of;
    for (const auto &st : P.steps) {
        by_node[st->n] = st.get();
        for (const node *c : st->covered()) by_node[c] = st.get(); // a region's other nodes
    }
    for (const auto &[nd, i] : slot) node_of[i] = nd;
    // Steps in reverse order: an op's readers are decided before the op.
    for (auto it = P.steps.rbegin(); it != P.steps.rend(); ++it) {
        step &st = **it;
        if (!st.may_write_nhwc() || keep[st.out]) continue;
        const node *out_node = node_of.at(st.out); // the fused bias Add for a convolution with one
        bool all = true;
        for (const node *u : g.consumers(out_node)) {
            const auto r = by_node.find(u);
            all = all && r != by_node.end() && r->second->reads_nhwc(*out_node);
        }
        if (!all) continue;
        st.write_nhwc();
        for (auto &[id, impl] : P.impls)
            if (id == st.n->id) impl += " (f32 NHWC)";
    }
}

} // namespace qconv::graph::exec
