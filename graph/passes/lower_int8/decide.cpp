// The int8 lowering's decision (lowering.h; the contract is written at its
// top): a candidate's descriptor, the problem finished from what matching and
// the chain found, the QConvolution node in place of the pattern, and the
// records of lower_low_precision.
#include <cmath>
#include <map>
#include <sstream>

#include "core/lowering.h"
#include "core/verbose.h"
#include "graph/passes/lower_int8/lowering.h"

namespace qconv::graph::int8 {

rewrite_record lowerer::visit(node *c) {
    rewrite_record r{c->id, false, ""};
    try {
        r.reason = try_lower(c, &r.rewritten);
    } catch (const error &e) {
        r.rewritten = false;
        r.reason = std::string("not expressible: ") + e.what();
    }
    return r;
}

// The convolution (or [M,K] x [N,K]ᵀ MatMul: a 1x1 convolution of M
// images of 1x1 pixels) as a descriptor; the reason when it is none.
std::string lowerer::describe(const node *c, conv_desc *d) const {
    const shape_t &xs = c->inputs[0]->out_shape, &ws = c->inputs[1]->out_shape, &ys = c->out_shape;
    if (c->kind == op::MatMul) {
        if (xs.size() != 2 || ws.size() != 2 || c->attr.transpose_a || !c->attr.transpose_b)
            return "MatMul is not [M,K] x [N,K] with transpose_b";
        d->mb = xs[0], d->ic = xs[1], d->ih = d->iw = 1;
        d->oc = ws[0], d->oh = d->ow = 1, d->kh = d->kw = 1;
    } else {
        d->g = c->kind == op::GroupConvolution ? ws[0] : 1;
        d->mb = xs[0], d->ic = xs[1], d->ih = xs[2], d->iw = xs[3];
        d->oc = ys[1], d->oh = ys[2], d->ow = ys[3];
        d->kh = ws[ws.size() - 2], d->kw = ws[ws.size() - 1];
        d->sh = c->attr.strides[0], d->sw = c->attr.strides[1];
        d->dh = c->attr.dilations[0], d->dw = c->attr.dilations[1];
        d->pt = c->pads_b[0], d->pl = c->pads_b[1];
        d->pb = (d->oh - 1) * d->sh + d->kh_extent() - d->ih - d->pt;
        d->pr = (d->ow - 1) * d->sw + d->kw_extent() - d->iw - d->pl;
    }
    d->validate();
    return "";
}

// The problem's types, zero point and scales; the residual as a sum
// post-op when it is integers of the destination's type; the two
// rewrites of the chain (docs/graph.md): clamps left to the saturation,
// the output scale folded.
void lowerer::finish_problem(chain_walk &w, const quant &in, const std::vector<double> &sw, dtype dt) {
    conv_problem &p = w.sp.p;
    const int64_t IC = p.desc.ic, OC = p.desc.oc;
    p.src_dt = in.type == dtype::u8 ? dtype::u8 : dtype::s8;
    p.dst_dt = dt == dtype::u8 ? dtype::u8 : dtype::s8;
    if (in.zp.size() > 1) p.src_zp = zero_point::channel(in.zp);
    else if (in.zp[0] != 0) p.src_zp = zero_point::tensor(in.zp[0]);
    p.scales.resize(OC);
    for (int64_t o = 0; o < OC; ++o)
        p.scales[o] = static_cast<float>((in.scales.empty() ? in.scale : in.scales[o / (OC / IC)]) * sw[o]);
    w.sp.residual = w.residual != nullptr;
    // An int8 skip of the destination's type with one zero point: the
    // integers go into the destination and a sum post-op adds
    // s·(q − zp) (OpenVINO's sum fusion); otherwise the f32 tensor.
    quant rb;
    if (w.residual && int8_of(w.residual, &rb) && rb.zp.size() == 1 && rb.scales.empty() && rb.type == dt &&
        rb.q != nullptr) {
        p.ops[w.residual_op] = post_op::sum(static_cast<float>(rb.scale), rb.zp[0]);
        w.sp.sum = true;
        w.residual = rb.q;
        w.text += "(sum)";
    }
    // A ReLU or Clamp that the destination's saturation enforces costs
    // the kernel two instructions a vector and changes nothing (ReLU6
    // before a QuantizeLinear of scale 6/255 is [0, 255] already).
    if (drop_saturated_clamps(p.ops, OC, p.dst_dt, p.dst_zp) > 0) w.text += " (clamp left to the saturation)";
    // An output scale right after the bias joins the convolution's own:
    // acc·(s·a) + bias·a in one step where the chain would round
    // acc·s + bias and then ·a (docs/semantics.md §10: exact with
    // power-of-two scales, a few ulps otherwise), one multiply a vector less.
    if (!p.ops.empty() && p.ops[0].k == post_op::kind::eltwise && p.ops[0].alg == eltwise_alg::linear &&
        p.ops[0].beta == 0.f && p.ops[0].alpha > 0.f && std::isfinite(p.ops[0].alpha)) {
        const float a = p.ops[0].alpha;
        for (float &s : p.scales) s *= a;
        for (float &b : w.sp.bias) b *= a;
        p.ops.erase(p.ops.begin());
        w.text += " (output scale folded)";
    }
    p.validate();
}

// The source integers of a FakeQuantize activation: FakeQuantize(x, il,
// ih, qlo, qhi) → Convert, the integers j (u8) or j − 128 (s8).
node *lowerer::fq_source(quant &in, const node *in_fq) {
    const float lo = in.type == dtype::u8 ? 0.f : -128.f, hi = in.type == dtype::u8 ? 255.f : 127.f;
    node *f = const_cast<node *>(in_fq);
    attributes fa;
    fa.levels = 256;
    node *ql = fconst({lo}, {}, f->id + "_qlo"), *qh = fconst({hi}, {}, f->id + "_qhi");
    node *fi = add(op::FakeQuantize, {f->inputs[0], f->inputs[1], f->inputs[2], ql, qh}, fa, f->id + "_int", f);
    attributes ca;
    ca.type = in.type;
    node *src = add(op::Convert, {fi}, ca, f->id + "_q", f);
    in.q = src;
    known_[f] = {in, ""};
    return src;
}

// The QConvolution node in place of c and its chain: its readers read the
// integers (a QuantizeLinear output) or their dequantization (a
// FakeQuantize output).
void lowerer::build(node *c, chain_walk &w, quant &in, const node *in_fq, const std::vector<int8_t> &w8, dtype dt,
                    const fq_info &of, const std::string &out_usable) {
    const conv_desc &d = w.sp.p.desc;
    const bool mm = c->kind == op::MatMul;
    node *src = in.q ? in.q : fq_source(in, in_fq);
    auto wd = std::make_shared<constant_data>();
    wd->bytes.assign(reinterpret_cast<const uint8_t *>(w8.data()),
                     reinterpret_cast<const uint8_t *>(w8.data()) + w8.size());
    node *wn = g_.constant(dtype::s8, {d.oc, d.icg(), d.kh, d.kw}, wd, g_.unique_id(c->id + "_w8"));
    infer_node(*wn);
    attributes qa;
    qa.type = dt;
    qa.qconv = std::make_shared<const qconv_spec>(w.sp);
    auto reshape = [&](node *x, shape_t to, const std::string &id) {
        attributes ra;
        ra.target = std::move(to);
        return add(op::Reshape, {x}, ra, id, c);
    };
    node *residual = w.residual;
    if (mm) src = reshape(src, {d.mb, d.ic, 1, 1}, c->id + "_src4d");
    if (mm && residual) residual = reshape(residual, {d.mb, d.oc, 1, 1}, c->id + "_res4d");
    std::vector<node *> ins{src, wn};
    if (residual) ins.push_back(residual);
    node *L = add(op::QConvolution, ins, qa, c->id + "_int8", c);
    origin_[L] = c->id;
    if (mm) L = reshape(L, c->out_shape, c->id + "_int8_2d");
    const node *out_q = w.out_q;
    if (out_q->kind != op::FakeQuantize) {
        g_.replace_uses(const_cast<node *>(out_q), L);
        return;
    }
    // The f32 values the graph had: FakeQuantize(Convert(y), qlo, qhi − 1/2, ol, oh).
    // Levels 0 … 254 go through the formula as in the graph; the top
    // level is above the input range and gives oh itself, as a
    // saturated input does in the graph (docs/semantics.md §10).
    const float lo = dt == dtype::u8 ? 0.f : -128.f, hi = dt == dtype::u8 ? 254.5f : 126.5f;
    attributes ca;
    ca.type = dtype::f32;
    node *cv = add(op::Convert, {L}, ca, out_q->id + "_f32", out_q);
    attributes fa;
    fa.levels = 256;
    node *ql = fconst({lo}, {}, out_q->id + "_qlo"), *qh = fconst({hi}, {}, out_q->id + "_qhi");
    node *deq = add(op::FakeQuantize, {cv, ql, qh, out_q->inputs[3], out_q->inputs[4]}, fa, out_q->id + "_deq", out_q);
    g_.replace_uses(const_cast<node *>(out_q), deq);
    quant oq = of.qt;
    oq.q = L;
    oq.type = dt;
    known_[deq] = {oq, out_usable.empty() ? "" : "activation: " + out_usable};
}

// Matching (activation, weights, chain, output), the decision (the
// problem validates), then the nodes.
std::string lowerer::try_lower(node *c, bool *done) {
    if (c->out_type != dtype::f32) return "element type is not f32";
    if (g_.is_dynamic()) return "graph has a run-time dimension";
    rank2_ = c->kind == op::MatMul; // until try_lower returns
    const struct rank2_reset {
        bool &on;
        ~rank2_reset() { on = false; }
    } reset{rank2_};
    chain_walk w;
    conv_problem &p = w.sp.p;
    if (std::string why = describe(c, &p.desc); !why.empty()) return why;
    const conv_desc &d = p.desc;
    quant in;
    const node *in_fq = nullptr;
    const bool depthwise_scales = c->kind == op::GroupConvolution && d.icg() == 1;
    if (std::string why = activation(c->inputs[0], d.ic, &in, &in_fq, depthwise_scales); !why.empty()) return why;
    std::vector<int8_t> w8;
    std::vector<double> sw;
    if (std::string why = weights(c->inputs[1], c->inputs[1]->out_shape, d.oc, &w8, &sw); !why.empty()) return why;
    if (std::string why = walk_chain(c, d.oc, w); !why.empty()) return why;
    w.flush_ss();
    dtype dt = dtype::u8;
    fq_info of;
    std::string out_usable;
    if (std::string why = output_quantization(w, d.oc, c->out_shape, &dt, &of, &out_usable); !why.empty()) return why;
    finish_problem(w, in, sw, dt);
    build(c, w, in, in_fq, w8, dt, of, out_usable);
    *done = true;
    std::ostringstream why;
    why << "lowered: src=" << qconv::to_string(p.src_dt) << " zp=" << to_string(p.src_zp.effective_kind())
        << (in_fq ? " (FakeQuantize)" : " (DequantizeLinear)") << " dst=" << qconv::to_string(p.dst_dt)
        << " chain:" << w.text << " post_ops=" << to_string(p.ops);
    return why.str();
}

} // namespace qconv::graph::int8

namespace qconv::graph {

std::vector<rewrite_record> lower_low_precision(graph &g) {
    g.infer();
    int8::lowerer lw(g);
    std::vector<rewrite_record> records;
    // Candidates: every Convolution / GroupConvolution, and every MatMul
    // (ONNX Gemm) whose activation is quantized (FakeQuantize or
    // DequantizeLinear): it runs as a 1x1 convolution.
    for (node *n : g.topo_order()) {
        const op k0 = n->inputs.empty() ? op::Parameter : n->inputs[0]->kind;
        if (n->kind == op::Convolution || n->kind == op::GroupConvolution ||
            (n->kind == op::MatMul && (k0 == op::FakeQuantize || k0 == op::DequantizeLinear)))
            records.push_back(lw.visit(n));
    }
    g.prune();
    g.infer();
    if (int8::pool_and_requantize_on_integers(g) > 0) {
        g.prune();
        g.infer();
    }
    int8::fuse_dw(g, lw.origin_, records);
    g.prune();
    g.infer();
    if (impl::verbose_level() >= 2)
        for (const auto &r : records)
            impl::verbose_print("graph,lower_int8," + r.conv + "," + (r.rewritten ? "lowered" : "kept") + "," +
                                r.reason);
    return records;
}

} // namespace qconv::graph
