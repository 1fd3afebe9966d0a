// The compressed MatMul's recognition and its primitive (compressed_matmul.h).
#include "graph/exec/compressed_matmul.h"

#include <algorithm>
#include <set>

#include "graph/ir/decompression.h"
#include "graph/ir/detail.h"

namespace qconv::graph::exec {

namespace {

dtype to_qconv(dtype t) {
    switch (t) {
    case dtype::f32: return dtype::f32;
    case dtype::f16: return dtype::f16;
    case dtype::bf16: return dtype::bf16;
    case dtype::u8: return dtype::u8;
    case dtype::s8: return dtype::s8;
    case dtype::u4: return dtype::u4;
    case dtype::s4: return dtype::s4;
    default: return dtype::undef;
    }
}

// Creates the primitive (constant weights) or a probe with zero weights
// (weights from a Parameter: the primitive is then created per run; the
// dispatcher's choice depends on the descriptor only). False when no row
// takes the problem.
bool create_primitive(compressed *c, bool dq, matmul_pool *pool) {
    matmul_weights w;
    if (c->desc.scale_dt == dtype::f16) w.scale_f16 = c->scale_f16.data();
    else w.scale = c->scale.data();
    w.zp = c->zp.empty() ? nullptr : c->zp.data();
    w.bias = c->bias.empty() ? nullptr : c->bias.data();
    std::string name;
    matmul_hints h;
    h.dynamic_quantization = dq;
    c->hints = h;
    try {
        if (c->wq->kind == op::Constant) {
            w.wei = c->wq->data->bytes.data();
            std::shared_ptr<matmul> *shared = nullptr;
            if (pool) shared = &(*pool)[c->mm->id + "|" + c->desc.key() + "|dq=" + std::to_string(dq)];
            if (shared && *shared) c->prim = *shared;
            else c->prim = std::make_shared<matmul>(c->desc, w, h);
            if (shared) *shared = c->prim;
            name = c->prim->impl_name();
        } else {
            const std::vector<uint8_t> zeros(c->desc.wei_bytes(), 0);
            w.wei = zeros.data();
            name = matmul(c->desc, w, h).impl_name() + " (weights from a Parameter)";
        }
    } catch (const error &) {
        return false;
    }
    const matmul_desc &d = c->desc;
    c->impl = name + " " + d.str() + " " + qconv::to_string(d.wei_dt) +
              (d.group ? " group" + std::to_string(d.group) : " per_oc") + " zp:" + to_string(d.zp) +
              (d.with_bias ? " bias" : "") + (d.scale_dt == dtype::f16 ? " scale:f16" : "") +
              (d.src_dt != dtype::f32 ? std::string(" x:") + qconv::to_string(d.src_dt) : "");
    return true;
}

bool recognize(const graph &g, node *mm, compressed *c) {
    if (mm->kind != op::MatMul || !mm->attr.transpose_b || mm->attr.transpose_a) return false;
    // The activation type T: f32, f16 or bf16 (X, Y and the decompression chain).
    const dtype T = mm->out_type;
    if (T != dtype::f32 && T != dtype::f16 && T != dtype::bf16) return false;
    if (mm->inputs[1]->out_shape.size() != 2) return false;
    const int64_t N = mm->inputs[1]->out_shape[0], K = mm->inputs[1]->out_shape[1];
    detail::decompression dc;
    if (!detail::match_decompression(mm->inputs[1], T, &dc)) return false;
    node *w = dc.mul, *s = dc.scale, *sub = dc.sub, *zp = dc.zp, *x = dc.cw, *q = dc.wq;
    if (s->out_type == dtype::f16) c->desc.scale_dt = dtype::f16;
    const dtype dt = to_qconv(q->out_type);
    if (dt != dtype::u8 && dt != dtype::s8 && dt != dtype::u4 && dt != dtype::s4) return false;
    const shape_t &D = x->out_shape; // the decompression shape
    if (w->out_shape != D || (sub && sub->out_shape != D)) return false;
    if (D.empty() || D[0] != N || elems_of(D) != N * K) return false;

    int64_t G = detail::group_of(*s, D);
    if (zp) G = std::min(G, detail::group_of(*zp, D));
    if (K % G) return false;
    std::vector<double> sv, zv;
    if (!detail::group_table(*s, D, G, &sv)) return false;
    if (zp && !detail::group_table(*zp, D, G, &zv)) return false;

    c->mm = mm;
    c->wq = q;
    c->chain = dc.chain();
    c->rows = elems_of(mm->out_shape) / N;
    c->desc.m = g.is_dynamic() ? matmul_desc::runtime_m : c->rows;
    c->desc.k = K;
    c->desc.n = N;
    c->desc.wei_dt = dt;
    c->desc.src_dt = c->desc.dst_dt = to_qconv(T);
    c->desc.group = G == K ? 0 : G;
    c->scale.assign(sv.begin(), sv.end());
    if (c->desc.scale_dt == dtype::f16)
        for (float v : c->scale) c->scale_f16.push_back(f32_to_f16(v)); // exact: the values are f16
    if (zp) {
        const int64_t lo = detail::type_min(q->out_type), hi = detail::type_max(q->out_type);
        for (double v : zv)
            if (v < lo || v > hi) return false; // zp outside the weight type: not expressible
        const bool uniform = std::all_of(zv.begin(), zv.end(), [&](double v) { return v == zv[0]; });
        c->desc.zp = uniform ? matmul_desc::zp_kind::per_tensor : matmul_desc::zp_kind::per_group;
        if (uniform) c->zp = {static_cast<int32_t>(zv[0])};
        else c->zp.assign(zv.begin(), zv.end());
    }
    // A bias Add with a [..., N] Constant right after.
    auto cons = g.consumers(mm);
    if (cons.size() == 1 && cons[0]->kind == op::Add && cons[0]->out_shape == mm->out_shape) {
        node *add = cons[0];
        node *b = add->inputs[0] == mm ? add->inputs[1] : add->inputs[0];
        if (b->kind == op::Constant && b->out_type == T && elems_of(b->out_shape) == N && b->out_shape.back() == N) {
            c->bias_add = add;
            c->bias.resize(N);
            for (int64_t i = 0; i < N; ++i) c->bias[i] = static_cast<float>(b->value(i));
        }
    }
    c->desc.with_bias = c->bias_add != nullptr;
    return true;
}

} // namespace

void find_compressed(const graph &g, const std::vector<node *> &order, bool dq, matmul_pool *pool,
                     std::map<const node *, compressed> *found, std::map<const node *, std::string> *fused_into) {
    for (node *n : order) {
        compressed c;
        if (!recognize(g, n, &c)) continue;
        if (!create_primitive(&c, dq, pool)) continue; // e.g. a group size no row takes: runs unfused
        // A chain node is absorbed only if nothing outside the chain reads it.
        std::set<const node *> inside(c.chain.begin(), c.chain.end());
        inside.insert(n);
        for (node *ch : c.chain) {
            bool only = true;
            for (node *u : g.consumers(ch)) only &= inside.count(u) > 0;
            if (only) (*fused_into)[ch] = n->id;
        }
        if (c.bias_add) (*fused_into)[c.bias_add] = n->id;
        found->emplace(n, std::move(c));
    }
}

} // namespace qconv::graph::exec
