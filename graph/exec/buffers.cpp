// What compile decides about the values once every step is built (compile.h):
// the compile-time values kept, the DequantizeLinear a global average pool
// reads through, and the buffer lifetimes.
#include <set>

#include "graph/exec/compile.h"
#include "graph/exec/steps.h"
#include "graph/ops/ops.h"

namespace qconv::graph::exec {

namespace {

// Whether `mean` (a ReduceMean) over the DequantizeLinear `dq` can take it
// over: dq feeds it alone (no Result either), u8/i8 in, f32 out, a constant
// per-tensor scale and zero point; the mean reduces H and W of NCHW, no more
// than detail::dequantize_mean_max_hw pixels (where the fold is exact).
bool dq_mean_foldable(const graph &g, const node &dq, const node &mean, const std::vector<bool> &known,
                      const std::vector<tensor> &consts, const std::vector<int> &dq_in) {
    if (dq.kind != op::DequantizeLinear || dq.out_type != dtype::f32) return false;
    const dtype xt = dq.inputs[0]->out_type;
    if (xt != dtype::u8 && xt != dtype::s8) return false;
    if (g.consumers(&dq).size() != 1) return false; // a Result reading dq is a consumer too
    for (size_t k = 1; k < dq_in.size(); ++k)
        if (!known[dq_in[k]] || consts[dq_in[k]].elems() != 1) return false;
    if (dq_in.size() > 2) { // a zero point within x's type: |x − zp| ≤ 255
        const double zp = consts[dq_in[2]].get(0);
        if (zp < (xt == dtype::u8 ? 0 : -128) || zp > (xt == dtype::u8 ? 255 : 127)) return false;
    }
    const shape_t &x = dq.out_shape;
    if (x.size() != 4 || mean.out_type != dtype::f32 || elems_of(mean.out_shape) != x[0] * x[1]) return false;
    std::set<int64_t> axes;
    for (int64_t a : mean.attr.axes) axes.insert(a < 0 ? a + 4 : a);
    return axes == std::set<int64_t>{2, 3} && x[2] * x[3] <= detail::dequantize_mean_max_hw && x[2] * x[3] > 0;
}

} // namespace

void drop_unread_values(program &P) {
    std::vector<bool> needed(P.slots, false);
    for (const auto &st : P.steps)
        for (size_t k = 0; k < st->in.size(); ++k)
            if (!(k == 1 && st->holds_weights()))
                needed[st->in[k]] = true; // oneDNN / the compressed primitive hold their own weights
    for (size_t i = 0; i < P.slots; ++i)
        if (P.known[i] && !needed[i]) aligned_vector<uint8_t>().swap(P.consts[i].bytes);
}

// The pool's step becomes a dequantize_mean_step reading the DequantizeLinear's
// inputs, the DequantizeLinear's a folded_step (kept: the profile lists it).
void fold_dequantize_means(const graph &g, program &P) {
    std::map<int, size_t> producer;
    for (size_t k = 0; k < P.steps.size(); ++k) producer[P.steps[k]->out] = k;
    std::set<size_t> folded;
    for (auto &st : P.steps) {
        if (st->n->kind != op::ReduceMean || st->in.empty()) continue;
        const auto it = producer.find(st->in[0]);
        if (it == producer.end()) continue;
        std::unique_ptr<step> &dq = P.steps[it->second];
        if (folded.count(it->second) || !dq_mean_foldable(g, *dq->n, *st->n, P.known, P.consts, dq->in)) continue;
        folded.insert(it->second);
        for (auto &[id, impl] : P.impls) {
            if (id == dq->n->id) impl = "graph:dequantize_linear (read by " + st->n->id + ")";
            if (id == st->n->id) impl = "graph:dequantize_mean_" + std::string(ir_name(dq->n->inputs[0]->out_type));
        }
        st = std::make_unique<dequantize_mean_step>(st->n, dq->in, st->out);
        dq = std::make_unique<folded_step>(dq->n, dq->in, dq->out);
    }
}

std::vector<bool> plan_buffers(const graph &g, program &P) {
    std::vector<int> last(P.slots, -1);
    std::vector<bool> keep(P.known); // constants, Parameters and Results live through the run
    for (int p : P.params) keep[p] = true;
    for (int r : P.results) keep[r] = true;
    for (size_t k = 0; k < P.steps.size(); ++k)
        for (int i : P.steps[k]->in) last[i] = static_cast<int>(k);
    for (size_t k = 0; k < P.steps.size(); ++k) {
        step &st = *P.steps[k];
        std::set<int> dying;
        for (int i : st.in)
            if (last[i] == static_cast<int>(k) && !keep[i]) dying.insert(i);
        st.frees.assign(dying.begin(), dying.end());
        st.settle(g, dying, keep);
    }
    return keep;
}

} // namespace qconv::graph::exec
