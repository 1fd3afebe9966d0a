// The low-precision lowering (docs/graph.md, "Low-precision lowering";
// the contract: docs/semantics.md §10).
//
// A candidate is every f32 Convolution / GroupConvolution. It is lowered
// when, read from the convolution outwards:
//   activation  FakeQuantize(x, il, ih, ol, oh) levels=256 (per tensor or per
//               channel, one scale (oh − ol)/255 for every channel, zero point
//               −ol/scale an integer in [0, 255]), or DequantizeLinear(q u8/i8,
//               scale, [zp]) (per tensor, or per channel on axis 1 with one
//               scale; per-channel zero points need u8), or the dequantized
//               output of a convolution lowered before;
//   weights     Multiply(Convert(W) [− Convert(Z) | − Z], S) (either operand
//               order) or DequantizeLinear(W, S [, Z]) axis=0, W an i8/u8
//               Constant, S f32 per output channel, W − Z within s8;
//   output      through single consumers: [bias Add of a per-OC Constant or
//               DequantizeLinear(i32 Constant)] [per-channel Multiply / Add]
//               [Relu | PRelu | Clamp] [residual Add of another f32 tensor]
//               [Relu | Clamp], then FakeQuantize levels=256 or QuantizeLinear.
// It becomes QConvolution(q, W8 [, residual]) whose problem is
//   src u8/s8 with the zero point per tensor (stock) or per channel (legacy),
//   scales[oc] = s_act · s_w[oc], the bias, the chain as post-ops (eltwise,
//   scale_shift, prelu, add:full), and the output quantization as a
//   fq post-op (FakeQuantize) or linear / scale_shift + dst_zp (QuantizeLinear)
//   with an integer destination.
// A FakeQuantize output is replaced by its dequantization
// FakeQuantize(Convert(y, f32), qlo, qhi − 1/2, ol, oh) — the f32 values the
// graph had, level for level — and the next lowered convolution reads y itself; a QuantizeLinear
// output is y. Anything else stays as written, with the reason in its record.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include "core/lowering.h"
#include "core/verbose.h"
#include "graph/ir/detail.h"
#include "graph/ir/qconv_spec.h"
#include "graph/ops/ops.h"
#include "qconv/graph.h"

namespace qconv::graph {

// ------------------------------------------------------------------ pass
namespace {

using detail::qconv_spec;

// The quantization of an activation: value = (q − zp[c]) · scale, q stored as `type`.
struct quant {
    node *q = nullptr; // the node holding the integers (may be created later)
    dtype type = dtype::u8;
    double scale = 0;
    std::vector<int32_t> zp; // 1 or C values (in the stored type's terms)
    // C values when the scale differs per channel (a DequantizeLinear axis=1
    // read by a convolution whose output channels each read one input
    // channel: a depthwise one), else empty and `scale` is every channel's.
    std::vector<double> scales;
    // A per-tensor FakeQuantize's output bounds (fq) or a QDQ pair's scale:
    // what a requantization must repeat to be the identity on the levels.
    bool fq = false;
    double lo = 0, hi = 0;
    bool same(const quant &o) const {
        return type == o.type && zp == o.zp && fq == o.fq && scales == o.scales &&
               (fq ? lo == o.lo && hi == o.hi : scale == o.scale);
    }
};

bool is_const_f32(const node *n) { return n->kind == op::Constant && n->out_type == dtype::f32; }

// Values of a Constant broadcast against an NCHW tensor of C channels: 1
// value, or C values along the channel dim ([C,1,1], [1,C,1,1]; with
// allow_1d also [C]). Empty when it is neither.
// For a MatMul's [M,K] → [M,N] (rank2: the channel is the last dim) [C] and
// [1,C] are per channel too.
std::vector<double> per_channel(const node *c, int64_t C, bool rank2, bool allow_1d = false) {
    const int64_t n = elems_of(c->out_shape);
    std::vector<double> v;
    if (n == 1) return {c->value(0)};
    const shape_t &s = c->out_shape;
    bool ok = false;
    if ((allow_1d || rank2) && s.size() == 1 && s[0] == C) ok = true;
    if (rank2 && s.size() == 2 && s[0] == 1 && s[1] == C) ok = true;
    if (s.size() >= 3 && s.size() <= 4 && s[s.size() - 3] == C && n == C) ok = true;
    if (!ok) return v;
    for (int64_t i = 0; i < C; ++i) v.push_back(c->value(i));
    return v;
}
std::vector<float> expand(const std::vector<double> &v, int64_t C) {
    std::vector<float> r(C);
    for (int64_t i = 0; i < C; ++i) r[i] = static_cast<float>(v.size() == 1 ? v[0] : v[i]);
    return r;
}
bool all_equal(const std::vector<double> &v) {
    return std::all_of(v.begin(), v.end(), [&](double x) { return x == v[0]; });
}

// A FakeQuantize levels=256 as the quantization of C channels: one scale,
// integer zero points in [0, 255]. The stored type: s8 when per tensor with
// zero point 128, else u8. Empty string when it fits.
struct fq_info {
    std::vector<double> il, ih, ol, oh;
    quant qt;
    bool per_channel = false;
};
std::string analyze_fq(const node *f, int64_t C, bool rank2, fq_info *r) {
    if (f->attr.levels != 256) return "FakeQuantize levels=" + std::to_string(f->attr.levels) + " is not 256";
    for (int i = 1; i <= 4; ++i)
        if (!is_const_f32(f->inputs[i])) return "FakeQuantize bounds are not f32 Constants";
    r->il = per_channel(f->inputs[1], C, rank2);
    r->ih = per_channel(f->inputs[2], C, rank2);
    r->ol = per_channel(f->inputs[3], C, rank2);
    r->oh = per_channel(f->inputs[4], C, rank2);
    if (r->il.empty() || r->ih.empty() || r->ol.empty() || r->oh.empty())
        return "FakeQuantize bounds are neither per tensor nor per channel";
    const int64_t n = std::max({r->il.size(), r->ih.size(), r->ol.size(), r->oh.size()});
    r->per_channel = n > 1;
    std::vector<double> sc, zp;
    for (int64_t c = 0; c < n; ++c) {
        auto at = [&](const std::vector<double> &v) { return v.size() == 1 ? v[0] : v[c]; };
        if (!(at(r->il) < at(r->ih))) return "FakeQuantize input_low is not below input_high";
        const double s = (static_cast<double>(static_cast<float>(at(r->oh) - at(r->ol)))) / 255.0;
        if (!(s > 0)) return "FakeQuantize output range is empty or reversed";
        sc.push_back(s);
        zp.push_back(-at(r->ol) / s);
    }
    // One scale for every channel: bounds written in f32 give scales that
    // differ in the last bits; within 2^-20 relative they are one scale.
    for (double v : sc)
        if (std::fabs(v - sc[0]) > std::ldexp(sc[0], -20))
            return "per-channel activation scales differ (one int8 convolution takes one source scale)";
    r->qt.scale = sc[0];
    if (!r->per_channel && r->il[0] == r->ol[0] && r->ih[0] == r->oh[0]) {
        r->qt.fq = true;
        r->qt.lo = r->ol[0];
        r->qt.hi = r->oh[0];
    }
    for (double z : zp) {
        const double zr = std::nearbyint(z);
        if (std::fabs(z - zr) > 1e-3 || zr < 0 || zr > 255)
            return "FakeQuantize zero point " + detail::fmt_double(z) + " is not an integer in [0, 255]";
    }
    std::vector<int32_t> zi;
    for (double z : zp) zi.push_back(static_cast<int32_t>(std::nearbyint(z)));
    const bool tensor_zp = std::all_of(zi.begin(), zi.end(), [&](int32_t z) { return z == zi[0]; });
    if (tensor_zp) zi.resize(1);
    if (tensor_zp && zi[0] == 128) {
        r->qt.type = dtype::s8;
        r->qt.zp = {0};
    } else {
        r->qt.type = dtype::u8;
        r->qt.zp = zi;
    }
    return "";
}

// The same node, or Constants of one type holding the same values (a
// quantization's scale or zero point, per tensor or per channel).
bool same_constant(const node *a, const node *b) {
    if (a == b) return true;
    if (a->kind != op::Constant || b->kind != op::Constant || a->out_type != b->out_type ||
        elems_of(a->out_shape) != elems_of(b->out_shape))
        return false;
    for (int64_t i = 0; i < elems_of(a->out_shape); ++i)
        if (a->value(i) != b->value(i)) return false;
    return true;
}

// QuantizeLinear q and DequantizeLinear d take the same parameters (scale,
// zero point, axis when per channel).
bool same_qdq_params(const node *q, const node *d) {
    const bool per_channel =
        elems_of(q->inputs[1]->out_shape) > 1 || (q->inputs.size() > 2 && elems_of(q->inputs[2]->out_shape) > 1);
    return q->inputs.size() == d->inputs.size() && same_constant(q->inputs[1], d->inputs[1]) &&
           (q->inputs.size() < 3 || same_constant(q->inputs[2], d->inputs[2])) &&
           (!per_channel || q->attr.axis == d->attr.axis);
}

class lowerer {
public:
    explicit lowerer(graph &g) : g_(g) {}

    rewrite_record visit(node *c) {
        rewrite_record r{c->id, false, ""};
        try {
            r.reason = try_lower(c, &r.rewritten);
        } catch (const error &e) {
            r.rewritten = false;
            r.reason = std::string("not expressible: ") + e.what();
        }
        return r;
    }

private:
    node *add(op k, std::vector<node *> in, attributes a, const std::string &id, const node *from) {
        node *n = g_.add(k, std::move(in), std::move(a), g_.unique_id(id));
        if (from) {
            n->friendly_name = from->friendly_name;
            n->rt_info = from->rt_info;
        }
        infer_node(*n, g_.dynamic_value());
        return n;
    }
    node *single_consumer(node *n) const {
        auto cs = g_.consumers(n);
        return cs.size() == 1 ? cs[0] : nullptr;
    }
    // x when it is a Constant; a Constant of x's value when x is computed
    // from Constants only (the reader's Convert → Subtract → Multiply of an
    // int32 bias, a product of two scales), evaluated node by node as the
    // executor's compile-time folding evaluates it — the values the graph as
    // written uses; otherwise x itself.
    node *constant_of(node *x) {
        if (x->kind == op::Constant) return x;
        if (auto it = folded_.find(x); it != folded_.end()) return it->second;
        node *r = x;
        std::map<const node *, tensor> vals;
        if (evaluate(x, &vals, 0)) {
            auto d = std::make_shared<constant_data>();
            const auto &b = vals.at(x).bytes;
            d->bytes.assign(b.begin(), b.end());
            r = g_.constant(x->out_type, x->out_shape, d, g_.unique_id(x->id + "_folded"));
            r->friendly_name = x->friendly_name;
            r->rt_info = x->rt_info;
            infer_node(*r);
        }
        folded_[x] = r;
        return r;
    }
    static constexpr int64_t kFoldElems = 1 << 16; // a bias or a table, not weights
    bool evaluate(const node *x, std::map<const node *, tensor> *vals, int depth) const {
        if (vals->count(x)) return true;
        if (depth > 16 || x->kind == op::Parameter || x->kind == op::QConvolution ||
            elems_of(x->out_shape) > kFoldElems)
            return false;
        if (x->kind == op::Constant) {
            if (!x->data) return false;
            tensor t(x->out_type, x->out_shape);
            t.bytes.assign(x->data->bytes.begin(), x->data->bytes.end());
            (*vals)[x] = std::move(t);
            return true;
        }
        for (const node *i : x->inputs)
            if (!evaluate(i, vals, depth + 1)) return false;
        std::vector<const tensor *> in;
        for (const node *i : x->inputs) in.push_back(&vals->at(i));
        tensor o;
        detail::eval_node(*x, in, o);
        (*vals)[x] = std::move(o);
        return true;
    }

    // The residual Add after QuantizeLinear q → DequantizeLinear with the same
    // per-tensor scale and zero point (each read once) when its other input is
    // an f32 tensor of the Add's shape; else null.
    node *requantized_residual(node *q) {
        if (q->kind != op::QuantizeLinear) return nullptr;
        node *dq = single_consumer(q);
        quant iq;
        if (!dq || dq->kind != op::DequantizeLinear || dq->inputs[0] != q || !qdq_of(dq, &iq)) return nullptr;
        if (q->inputs.size() != dq->inputs.size() || !same_value(q->inputs[1], dq->inputs[1]) ||
            (q->inputs.size() > 2 && !same_value(q->inputs[2], dq->inputs[2])))
            return nullptr;
        node *add = single_consumer(dq);
        if (!add || add->kind != op::Add || add->inputs[0] == add->inputs[1]) return nullptr;
        node *other = add->inputs[0] == dq ? add->inputs[1] : add->inputs[0];
        if (other->out_type != dtype::f32 || other->out_shape != dq->out_shape || add->out_shape != dq->out_shape ||
            constant_of(other)->kind == op::Constant)
            return nullptr;
        return add;
    }
    static bool same_value(const node *x, const node *y) { return same_constant(x, y); }
    static bool same_params(const node *q, const node *d) { return same_qdq_params(q, d); }

    // QuantizeLinear q(s, z) → DequantizeLinear(s, z) → Relu | Clamp → QuantizeLinear(s, z),
    // each read once: the last QuantizeLinear, else null. It stores what Relu | Clamp →
    // QuantizeLinear(s, z) of q's input stores (docs/graph.md, "requantized activation"):
    // for a monotone f, Q(f(DQ(Q(x)))) = Q(f(x)) when (q − z)·s / s rounds back to q − z.
    node *requantized_activation(node *q) {
        if (q->kind != op::QuantizeLinear || q->inputs.size() < 2 || !is_const_f32(q->inputs[1])) return nullptr;
        node *dq = single_consumer(q);
        if (!dq || dq->kind != op::DequantizeLinear || dq->inputs[0] != q || !same_params(q, dq)) return nullptr;
        node *f = single_consumer(dq);
        if (!f || (f->kind != op::Relu && f->kind != op::Clamp) || f->inputs[0] != dq) return nullptr;
        if (f->kind == op::Clamp && !(f->attr.clamp_min <= f->attr.clamp_max)) return nullptr;
        node *q2 = single_consumer(f);
        if (!q2 || q2->kind != op::QuantizeLinear || q2->inputs[0] != f || q2->out_type != q->out_type ||
            q2->inputs.size() != q->inputs.size() || !same_value(q->inputs[1], q2->inputs[1]) ||
            (q->inputs.size() > 2 && !same_value(q->inputs[2], q2->inputs[2])) || q2->attr.axis != q->attr.axis)
            return nullptr;
        // (q − z)·s must be a normal f32 for every level: s in [2^-118, 2^118].
        const node *sc = q->inputs[1];
        for (int64_t i = 0; i < elems_of(sc->out_shape); ++i) {
            const double v = sc->value(i);
            if (!(v >= std::ldexp(1.0, -118) && v <= std::ldexp(1.0, 118))) return nullptr;
        }
        return q2;
    }

    node *fconst(const std::vector<float> &v, const shape_t &s, const std::string &id) {
        node *n = g_.constant_f32(s, v, g_.unique_id(id));
        infer_node(*n);
        return n;
    }

    // The activation's quantization; the quantizing node is made by make_src.
    // A per-tensor QDQ dequantization: DequantizeLinear(q u8/i8, scale[, zp]).
    static bool qdq_of(const node *a, quant *q) {
        if (a->kind != op::DequantizeLinear) return false;
        const node *x = a->inputs[0];
        if ((x->out_type != dtype::u8 && x->out_type != dtype::s8) || !is_const_f32(a->inputs[1]) ||
            elems_of(a->inputs[1]->out_shape) != 1)
            return false;
        if (a->inputs.size() > 2 && (a->inputs[2]->kind != op::Constant || elems_of(a->inputs[2]->out_shape) != 1))
            return false;
        q->q = const_cast<node *>(x);
        q->type = x->out_type;
        q->scale = static_cast<float>(a->inputs[1]->value(0));
        q->zp = {a->inputs.size() > 2 ? static_cast<int32_t>(a->inputs[2]->value(0)) : 0};
        q->fq = false;
        return q->scale > 0;
    }

    // A u8 dequantization along axis 1 with one scale and a zero point per
    // channel (the legacy per-channel zero point's form): DequantizeLinear(q,
    // scale [1] or [C] of one value, zp [C]) of a rank-4 q.
    static bool channel_zp_of(const node *a, quant *q) {
        if (a->kind != op::DequantizeLinear || a->inputs.size() < 3 || (a->attr.axis != 1 && a->attr.axis != -3))
            return false;
        const node *x = a->inputs[0], *s = a->inputs[1], *z = a->inputs[2];
        if (x->out_type != dtype::u8 || x->out_shape.size() != 4 || !is_const_f32(s) || z->kind != op::Constant)
            return false;
        const int64_t C = x->out_shape[1], ns = elems_of(s->out_shape);
        if ((ns != 1 && ns != C) || elems_of(z->out_shape) != C) return false;
        for (int64_t i = 1; i < ns; ++i)
            if (s->value(i) != s->value(0)) return false;
        q->q = const_cast<node *>(x);
        q->type = dtype::u8;
        q->scale = static_cast<float>(s->value(0));
        q->zp.clear();
        for (int64_t i = 0; i < C; ++i) q->zp.push_back(static_cast<int32_t>(z->value(i)));
        if (std::all_of(q->zp.begin(), q->zp.end(), [&](int32_t v) { return v == q->zp[0]; })) q->zp.resize(1);
        q->scales.clear();
        q->fq = false;
        return q->scale > 0;
    }

    // Whether the f32 value `a` is a dequantization of integers some node
    // holds (a lowered convolution's output, a QDQ pair), also through
    // MaxPool and Concat: max and concatenation commute with a dequantization
    // of positive scale, so MaxPool(q) / Concat(q, ...) hold the integers
    // (Concat only where every input has the same quantization).
    bool int8_of(node *a, quant *q) {
        if (auto it = known_.find(a); it != known_.end()) {
            if (!it->second.second.empty()) return false;
            *q = it->second.first;
            return q->q != nullptr;
        }
        if (auto it = passthrough_.find(a); it != passthrough_.end()) {
            *q = it->second;
            return true;
        }
        if (qdq_of(a, q)) return true;
        if (a->kind == op::DequantizeLinear && channel_zp_of(a, q)) return true;
        if (a->kind == op::MaxPool) {
            quant b;
            if (!int8_of(a->inputs[0], &b)) return false;
            b.q = add(op::MaxPool, {b.q}, a->attr, a->id + "_int8", a);
            passthrough_[a] = b;
            *q = b;
            return true;
        }
        if (a->kind == op::Concat) {
            std::vector<node *> ins;
            quant first;
            for (node *i : a->inputs) {
                quant b;
                if (!int8_of(i, &b) || b.zp.size() != 1 || (!ins.empty() && !b.same(first))) return false;
                if (ins.empty()) first = b;
                ins.push_back(b.q);
            }
            first.q = add(op::Concat, ins, a->attr, a->id + "_int8", a);
            passthrough_[a] = first;
            *q = first;
            return true;
        }
        return false;
    }

    // A Concat whose inputs are per-tensor dequantizations of integers (a
    // lowered convolution's output, a QDQ pair) with different scales or
    // zero points, requantized as a whole by `d` (QuantizeLinear →
    // DequantizeLinear with d's parameters): the Concat of the integers, each
    // input whose quantization is not d's requantized on its own slice by the
    // same two ops (DequantizeLinear with its parameters, QuantizeLinear with
    // d's: elementwise, so the same values as on the concatenation). Null when
    // an input is not held in integers or every input already has d's.
    node *requantized_concat(node *cat, const quant &d) {
        if (cat->kind != op::Concat) return nullptr;
        std::vector<quant> in;
        bool differ = false;
        for (node *i : cat->inputs) {
            quant b;
            if (!int8_of(i, &b) || b.fq || b.zp.size() != 1 || !b.scales.empty()) return nullptr;
            differ = differ || !b.same(d);
            in.push_back(b);
        }
        if (!differ) return nullptr;
        std::vector<node *> ins;
        for (size_t k = 0; k < in.size(); ++k) {
            const quant &b = in[k];
            if (b.same(d)) {
                ins.push_back(b.q);
                continue;
            }
            const std::string id = cat->inputs[k]->id + "_requant";
            node *bs = fconst({static_cast<float>(b.scale)}, {}, id + "_in_scale");
            node *bz = g_.constant_int(b.type, {}, {b.zp[0]}, g_.unique_id(id + "_in_zp"));
            infer_node(*bz);
            node *ds = fconst({static_cast<float>(d.scale)}, {}, id + "_scale");
            node *dz = g_.constant_int(d.type, {}, {d.zp[0]}, g_.unique_id(id + "_zp"));
            infer_node(*dz);
            node *deq = add(op::DequantizeLinear, {b.q, bs, bz}, {}, id + "_dq", cat);
            ins.push_back(add(op::QuantizeLinear, {deq, ds, dz}, {}, id, cat));
        }
        return add(op::Concat, ins, cat->attr, cat->id + "_int8", cat);
    }

    // per_channel_scales: the convolution's output channels each read one
    // input channel (icg = 1), so a scale per input channel is one per output
    // channel of the int8 convolution's scales.
    std::string activation(node *a, int64_t C, quant *q, const node **fq, bool per_channel_scales) {
        if (auto it = known_.find(a); it != known_.end()) {
            if (!it->second.second.empty()) return it->second.second;
            *q = it->second.first;
            return "";
        }
        if (a->kind == op::FakeQuantize) {
            fq_info fi;
            if (std::string why = analyze_fq(a, C, rank2_, &fi); !why.empty()) return "activation: " + why;
            // A requantization with the same bounds of integers held in int8
            // (through MaxPool / Concat) is the identity on the levels.
            quant b;
            if (fi.qt.fq && int8_of(a->inputs[0], &b) && b.same(fi.qt)) {
                *q = b;
                return "";
            }
            *q = fi.qt;
            *fq = a;
            return "";
        }
        if (a->kind == op::DequantizeLinear && a->inputs[0]->kind == op::QuantizeLinear) {
            // DequantizeLinear(QuantizeLinear(y, s, z), s, z) of a y held in int8
            // with the same s and z: the identity on the levels.
            quant d, b;
            node *ql = a->inputs[0];
            const bool same = same_params(ql, a);
            if (same && (qdq_of(a, &d) || channel_zp_of(a, &d)) && int8_of(ql->inputs[0], &b) && b.same(d)) {
                *q = b;
                return "";
            }
            if (same && qdq_of(a, &d) && d.scales.empty() && d.zp.size() == 1)
                if (node *c = requantized_concat(ql->inputs[0], d)) {
                    *q = d;
                    q->q = c;
                    return "";
                }
        }
        if (a->kind == op::DequantizeLinear) {
            node *x = a->inputs[0];
            if (x->out_type != dtype::u8 && x->out_type != dtype::s8)
                return "activation: DequantizeLinear of " + std::string(ir_name(x->out_type));
            if (!is_const_f32(a->inputs[1])) return "activation: DequantizeLinear scale is not an f32 Constant";
            const bool axis1 = a->attr.axis == 1 || a->attr.axis == -3;
            const auto s = per_channel(a->inputs[1], C, rank2_, true);
            if (s.empty() || (s.size() > 1 && !axis1))
                return "activation: DequantizeLinear is not per tensor or axis 1";
            if (!all_equal(s)) {
                if (!per_channel_scales)
                    return "per-channel activation scales differ (one int8 convolution takes one source scale; "
                           "only one whose output channels each read one input channel, a depthwise one, takes a "
                           "scale per channel)";
                q->scales = s;
                for (double v : s)
                    if (!(v > 0)) return "activation: scale is not positive";
            }
            q->q = x;
            q->type = x->out_type;
            q->scale = static_cast<float>(s[0]);
            q->zp = {0};
            if (a->inputs.size() > 2) {
                if (a->inputs[2]->kind != op::Constant) return "activation: zero point is not a Constant";
                const auto z = per_channel(a->inputs[2], C, rank2_, true);
                if (z.empty()) return "activation: zero point is not per tensor or per channel";
                q->zp.clear();
                for (double v : z) q->zp.push_back(static_cast<int32_t>(v));
                if (all_equal(z)) q->zp.resize(1);
                if (q->zp.size() > 1 && q->type != dtype::u8)
                    return "activation: per-channel zero points of an i8 source (the legacy mechanism takes u8)";
            }
            if (!(q->scale > 0)) return "activation: scale is not positive";
            return "";
        }
        return "activation is not quantized (" + std::string(to_string(a->kind)) + ")";
    }

    // Integer weights and per-OC scales from the weights' dequantization.
    std::string weights(node *w, const shape_t &ws, int64_t OC, std::vector<int8_t> *w8, std::vector<double> *sw) {
        node *wq = nullptr, *zp = nullptr, *sc = nullptr;
        if (w->kind == op::DequantizeLinear) {
            wq = w->inputs[0];
            sc = w->inputs[1];
            zp = w->inputs.size() > 2 ? w->inputs[2] : nullptr;
            if (elems_of(sc->out_shape) > 1 && w->attr.axis != 0) return "weights: DequantizeLinear axis is not 0";
        } else if (w->kind == op::Multiply) {
            node *a = w->inputs[0], *b = w->inputs[1];
            if (a->kind == op::Constant) std::swap(a, b);
            sc = constant_of(b);
            if (a->kind == op::Subtract) {
                zp = a->inputs[1];
                if (zp->kind == op::Convert) zp = zp->inputs[0];
                a = a->inputs[0];
            }
            if (a->kind != op::Convert) return "weights: no Convert of integer weights";
            wq = a->inputs[0];
        } else {
            return "weights are not dequantized i8/u8 (" + std::string(to_string(w->kind)) + ")";
        }
        if (wq->kind != op::Constant || (wq->out_type != dtype::s8 && wq->out_type != dtype::u8))
            return "weights: not an i8/u8 Constant";
        if (!is_const_f32(sc)) return "weights: scale is not an f32 Constant";
        if (zp) zp = constant_of(zp);
        if (zp && zp->kind != op::Constant) return "weights: zero point is not a Constant";
        const int64_t total = elems_of(ws), per = total / OC;
        if (wq->out_shape != ws) return "weights: dequantization changes the shape";
        // Scale / zero point: 1 value, or constant within each output channel
        // (OC values in a leading dim; a grouped conv's [G,OCg,1,..] too).
        auto per_oc = [&](const node *k, std::vector<double> *v) {
            const int64_t n = elems_of(k->out_shape);
            v->assign(OC, 0);
            if (n == 1) {
                for (auto &x : *v) x = k->value(0);
                return true;
            }
            if (n != OC) return false;
            const shape_t &s = k->out_shape;
            // dims beyond the first (two for a grouped conv) must be 1, right-aligned to the weights' rank
            if (s.size() != ws.size() && !(w->kind == op::DequantizeLinear && s.size() == 1)) return false;
            for (int64_t i = 0; i < OC; ++i) (*v)[i] = k->value(i);
            return true;
        };
        std::vector<double> z(OC, 0);
        if (!per_oc(sc, sw)) return "weights: scale is not per output channel";
        if (zp && !per_oc(zp, &z)) return "weights: zero point is not per output channel";
        w8->resize(total);
        // The Constant's bytes read directly (25 M weights in a ResNet-50):
        // w − zp per output channel, which must stay in s8.
        const uint8_t *raw = wq->data->bytes.data();
        const bool is_u8 = wq->out_type == dtype::u8;
        for (int64_t oc = 0; oc < OC; ++oc) {
            const int zc = static_cast<int>(z[oc]);
            if (zc != z[oc]) return "weights: zero point is not an integer";
            for (int64_t i = oc * per; i < (oc + 1) * per; ++i) {
                const int d = (is_u8 ? int(raw[i]) : int(static_cast<int8_t>(raw[i]))) - zc;
                if (d < -128 || d > 127) return "weights: w − zero point leaves s8";
                (*w8)[i] = static_cast<int8_t>(d);
            }
        }
        for (double s : *sw)
            if (!std::isfinite(s) || s == 0) return "weights: a scale is zero or not finite";
        return "";
    }

    // The convolution (or [M,K] x [N,K]ᵀ MatMul: a 1x1 convolution of M
    // images of 1x1 pixels) as a descriptor; the reason when it is none.
    std::string describe(const node *c, conv_desc *d) const {
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

    // The output chain read from the convolution through single consumers,
    // as post-ops, up to the output quantization (docs/graph.md, the
    // pattern table).
    struct chain_walk {
        qconv_spec sp;
        node *t = nullptr; // the last node taken
        node *residual = nullptr;
        size_t residual_op = 0;
        std::string text;
        const node *out_q = nullptr; // the output FakeQuantize / QuantizeLinear
        // 0: start, 1: after bias / mul / add, 2: after an activation, 3: after
        // the residual, 4: after an activation after it
        int stage = 0;
        std::vector<float> ss_scale, ss_shift; // a pending scale_shift
        bool have_ss = false;
        void flush_ss() {
            if (!have_ss) return;
            sp.p.ops.push_back(post_op::scale_shift_op(ss_scale, ss_shift));
            have_ss = false;
        }
    };

    std::string walk_chain(node *c, int64_t OC, chain_walk &w) {
        w.t = c;
        for (;;) {
            node *u = single_consumer(w.t);
            if (!u) {
                const auto n = g_.consumers(w.t).size();
                return n == 0
                           ? "output is not read"
                           : "output '" + w.t->id + "' is read by " + std::to_string(n) + " nodes (not quantized once)";
            }
            if (u->kind == op::FakeQuantize || u->kind == op::QuantizeLinear) {
                if (u->inputs[0] != w.t) return "output feeds a quantization bound";
                if (take_requantized_residual(u, w)) continue;
                take_output(u, w);
                return "";
            }
            if (std::string why = take_op(u, OC, c->out_shape, w); !why.empty()) return why;
            w.t = u;
        }
    }

    // QuantizeLinear(s, z) → DequantizeLinear(s, z) → residual Add (ONNX's QDQ
    // form of a residual block): the level the graph rounds to, dequantized —
    // round(y / s) saturated to the type's range less z, times s, as the graph
    // computes (q − z)·s — then the residual and the rest of the chain.
    bool take_requantized_residual(node *u, chain_walk &w) {
        node *add = requantized_residual(u);
        if (!add || w.stage > 2 || w.residual) return false;
        conv_problem &p = w.sp.p;
        quant iq;
        qdq_of(single_consumer(u), &iq);
        w.flush_ss();
        const double qlo = iq.type == dtype::u8 ? 0 : -128, qhi = iq.type == dtype::u8 ? 255 : 127;
        p.ops.push_back(post_op::eltwise(eltwise_alg::linear, 1.f / static_cast<float>(iq.scale), 0.f));
        p.ops.push_back(post_op::eltwise(eltwise_alg::round));
        p.ops.push_back(post_op::eltwise(eltwise_alg::clip, static_cast<float>(qlo - iq.zp[0]),
                                         static_cast<float>(qhi - iq.zp[0])));
        p.ops.push_back(post_op::eltwise(eltwise_alg::linear, static_cast<float>(iq.scale), 0.f));
        w.residual = add->inputs[0] == single_consumer(u) ? add->inputs[1] : add->inputs[0];
        w.residual_op = p.ops.size();
        p.ops.push_back(post_op::binary(binary_alg::add, broadcast::full));
        w.text += " requantize residual";
        w.stage = 3;
        w.t = add;
        return true;
    }

    // The output quantization u; Q(s, z) → DQ(s, z) → Relu | Clamp → Q(s, z)
    // is the activation before the quantization, the last QuantizeLinear the output.
    void take_output(node *u, chain_walk &w) {
        if (node *q2 = requantized_activation(u)) {
            const node *f = single_consumer(single_consumer(u));
            w.flush_ss();
            if (f->kind == op::Relu) w.sp.p.ops.push_back(post_op::relu());
            else
                w.sp.p.ops.push_back(post_op::eltwise(eltwise_alg::clip, static_cast<float>(f->attr.clamp_min),
                                                      static_cast<float>(f->attr.clamp_max)));
            w.text += std::string(" requantized ") + to_string(f->kind);
            u = q2;
        }
        w.out_q = u;
    }

    // One op of the chain before the output quantization: the bias, a
    // per-channel Multiply / Add, an activation, the residual Add.
    std::string take_op(node *u, int64_t OC, const shape_t &ys, chain_walk &w) {
        conv_problem &p = w.sp.p;
        node *other = nullptr;
        if (u->kind == op::Add || u->kind == op::Multiply)
            other = constant_of(u->inputs[0] == w.t ? u->inputs[1] : u->inputs[0]);
        if (u->kind == op::Add && w.stage == 0 &&
            (other->kind == op::Constant ||
             (other->kind == op::DequantizeLinear && other->inputs[0]->kind == op::Constant)))
            return take_bias(u, other, OC, ys, w);
        if ((u->kind == op::Multiply || u->kind == op::Add) && w.stage <= 1 && is_const_f32(other))
            return take_scale_shift(u, other, OC, ys, w);
        if ((u->kind == op::Relu || u->kind == op::Clamp || u->kind == op::PRelu) && (w.stage <= 1 || w.stage == 3)) {
            w.flush_ss();
            if (u->kind == op::Relu) p.ops.push_back(post_op::relu());
            else if (u->kind == op::Clamp)
                p.ops.push_back(post_op::eltwise(eltwise_alg::clip, static_cast<float>(u->attr.clamp_min),
                                                 static_cast<float>(u->attr.clamp_max)));
            else {
                if (!is_const_f32(u->inputs[1])) return "PRelu slope is not an f32 Constant";
                const auto v = per_channel(u->inputs[1], OC, rank2_, true);
                if (v.empty()) return "PRelu slope is not per channel";
                p.ops.push_back(post_op::prelu(expand(v, OC)));
            }
            w.text += std::string(" ") + to_string(u->kind);
            w.stage = w.stage == 3 ? 4 : 2;
            return "";
        }
        if (u->kind == op::Add && w.stage <= 3 && other->kind != op::Constant && other->out_type == dtype::f32 &&
            other->out_shape == ys && u->out_shape == ys && !w.residual) {
            w.flush_ss();
            w.residual = other;
            w.residual_op = p.ops.size();
            p.ops.push_back(post_op::binary(binary_alg::add, broadcast::full));
            w.text += " residual";
            w.stage = 3;
            return "";
        }
        return "chain stops at " + std::string(to_string(u->kind)) + " '" + u->id + "' before a quantization";
    }

    std::string take_bias(node *u, node *other, int64_t OC, const shape_t &ys, chain_walk &w) {
        std::vector<double> b;
        if (other->kind == op::Constant && other->out_type == dtype::f32) {
            b = per_channel(other, OC, rank2_);
        } else if (other->kind == op::DequantizeLinear && other->inputs[0]->kind == op::Constant &&
                   other->inputs[0]->out_type == dtype::s32 && is_const_f32(other->inputs[1]) &&
                   elems_of(other->inputs[1]->out_shape) == 1 && other->inputs.size() == 2) {
            // float(b) · s, as DequantizeLinear computes it
            const auto bi = per_channel(other->inputs[0], OC, rank2_, true);
            const float s = static_cast<float>(other->inputs[1]->value(0));
            for (double v : bi) b.push_back(static_cast<float>(v) * s);
        }
        if (b.empty() || u->out_shape != ys) return "bias Add is not per output channel";
        w.sp.bias = expand(b, OC);
        w.sp.p.with_bias = true;
        w.text += " bias";
        w.stage = 1;
        return "";
    }

    std::string take_scale_shift(node *u, node *other, int64_t OC, const shape_t &ys, chain_walk &w) {
        const auto v = per_channel(other, OC, rank2_);
        if (v.empty() || u->out_shape != ys) return std::string(to_string(u->kind)) + " is not per channel";
        auto restart = [&]() { w.flush_ss(), w.ss_scale.assign(OC, 1.f), w.ss_shift.assign(OC, 0.f); };
        auto any_not = [](const std::vector<float> &x, float v0) {
            return std::any_of(x.begin(), x.end(), [&](float y) { return y != v0; });
        };
        if (!w.have_ss) w.ss_scale.assign(OC, 1.f), w.ss_shift.assign(OC, 0.f);
        if (u->kind == op::Multiply) {
            if (w.have_ss && any_not(w.ss_shift, 0.f)) restart();
            if (w.have_ss && any_not(w.ss_scale, 1.f)) restart();
            w.ss_scale = expand(v, OC);
        } else {
            if (w.have_ss && any_not(w.ss_shift, 0.f)) restart();
            w.ss_shift = expand(v, OC);
        }
        w.have_ss = true;
        w.text += u->kind == op::Multiply ? " mul" : " add";
        w.stage = 1;
        return "";
    }

    // The output quantization as post-ops and the destination type: a
    // FakeQuantize as an fq post-op, a QuantizeLinear as linear / scale_shift,
    // round and the zero point. out_usable: why the output cannot feed a
    // lowered convolution ("" when it can).
    std::string output_quantization(chain_walk &w, int64_t OC, const shape_t &ys, dtype *dt, fq_info *of,
                                    std::string *out_usable) {
        conv_problem &p = w.sp.p;
        const node *out_q = w.out_q;
        if (out_q->kind == op::FakeQuantize) {
            if (out_q->out_shape != ys) return "output FakeQuantize broadcasts beyond the output";
            if (std::string why = analyze_fq(out_q, OC, rank2_, of); !why.empty()) {
                // Still an int8 destination when the bounds are per tensor/channel with 256 levels.
                if (out_q->attr.levels != 256 || of->il.empty() || of->ol.empty() || of->ih.empty() || of->oh.empty())
                    return "output: " + why;
                *out_usable = why;
                of->qt.type = dtype::u8;
            }
            *dt = of->qt.type;
            const float lo = *dt == dtype::u8 ? 0.f : -128.f, hi = *dt == dtype::u8 ? 255.f : 127.f;
            p.ops.push_back(post_op::fake_quantize(256, expand(of->il, of->il.size() == 1 ? 1 : OC),
                                                   expand(of->ih, of->ih.size() == 1 ? 1 : OC),
                                                   std::vector<float>(1, lo), std::vector<float>(1, hi)));
            w.text += " fq";
        } else {
            *dt = out_q->out_type;
            node *oscale = constant_of(out_q->inputs[1]);
            if (!is_const_f32(oscale)) return "output QuantizeLinear scale is not an f32 Constant";
            const bool axis1 = out_q->attr.axis == 1 || out_q->attr.axis == -3;
            const auto s = per_channel(oscale, OC, rank2_, true);
            std::vector<double> z{0};
            if (out_q->inputs.size() > 2) {
                if (out_q->inputs[2]->kind != op::Constant) return "output zero point is not a Constant";
                z = per_channel(out_q->inputs[2], OC, rank2_, true);
            }
            if (s.empty() || z.empty() || ((s.size() > 1 || z.size() > 1) && !axis1))
                return "output QuantizeLinear is not per tensor or axis 1";
            std::vector<float> inv;
            for (double v : s) inv.push_back(1.f / static_cast<float>(v));
            // QuantizeLinear rounds y / s (half to even) and then adds the
            // zero point: the round is its own post-op, so an odd zero point
            // cannot move a tie (the store would round y / s + zp).
            if (s.size() == 1) p.ops.push_back(post_op::eltwise(eltwise_alg::linear, inv[0], 0.f));
            else
                p.ops.push_back(post_op::scale_shift_op(expand(std::vector<double>(inv.begin(), inv.end()), OC),
                                                        std::vector<float>(OC, 0.f)));
            p.ops.push_back(post_op::eltwise(eltwise_alg::round));
            if (z.size() == 1) p.dst_zp = static_cast<int32_t>(z[0]);
            else p.ops.push_back(post_op::scale_shift_op(std::vector<float>(OC, 1.f), expand(z, OC)));
            w.text += " quantize_linear";
        }
        return "";
    }

    // The problem's types, zero point and scales; the residual as a sum
    // post-op when it is integers of the destination's type; the two
    // rewrites of the chain (docs/graph.md): clamps left to the saturation,
    // the output scale folded.
    void finish_problem(chain_walk &w, const quant &in, const std::vector<double> &sw, dtype dt) {
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
    node *fq_source(quant &in, const node *in_fq) {
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
    void build(node *c, chain_walk &w, quant &in, const node *in_fq, const std::vector<int8_t> &w8, dtype dt,
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
        node *deq =
            add(op::FakeQuantize, {cv, ql, qh, out_q->inputs[3], out_q->inputs[4]}, fa, out_q->id + "_deq", out_q);
        g_.replace_uses(const_cast<node *>(out_q), deq);
        quant oq = of.qt;
        oq.q = L;
        oq.type = dt;
        known_[deq] = {oq, out_usable.empty() ? "" : "activation: " + out_usable};
    }

    // Matching (activation, weights, chain, output), the decision (the
    // problem validates), then the nodes.
    std::string try_lower(node *c, bool *done) {
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
        if (std::string why = output_quantization(w, d.oc, c->out_shape, &dt, &of, &out_usable); !why.empty())
            return why;
        finish_problem(w, in, sw, dt);
        build(c, w, in, in_fq, w8, dt, of, out_usable);
        *done = true;
        std::ostringstream why;
        why << "lowered: src=" << qconv::to_string(p.src_dt) << " zp=" << to_string(p.src_zp.effective_kind())
            << (in_fq ? " (FakeQuantize)" : " (DequantizeLinear)") << " dst=" << qconv::to_string(p.dst_dt)
            << " chain:" << w.text << " post_ops=" << to_string(p.ops);
        return why.str();
    }
    graph &g_;
    // Dequantized activations whose integers a node holds; the string says
    // why one cannot be a source ("" when it can).
    std::map<const node *, std::pair<quant, std::string>> known_;
    std::map<const node *, quant> passthrough_; // MaxPool / Concat made on the integers
    std::map<const node *, node *> folded_;     // constant_of's answers
    // While a MatMul is lowered: its per-channel constants are [C] or [1,C]
    // (per_channel's rank2).
    bool rank2_ = false;

public:
    std::map<const node *, std::string> origin_; // QConvolution → the convolution it lowers
};

} // namespace

namespace {

// A lowered 1x1 whose only reader is a lowered 3x3 depthwise (padding 1,
// stride 1 or 2, no source zero point) becomes one QConvolution with the
// depthwise as its fused dw item (docs/semantics.md §5): the 1x1's output
// pipeline with its destination type as the intermediate (its zero point must
// be 0), then the depthwise's weights, bias, scales, post-ops, destination.
// The same numbers as the two convolutions; rows that fuse keep only a few
// rows of the intermediate.
void fuse_dw(graph &g, std::map<const node *, std::string> &origin, std::vector<rewrite_record> &records) {
    auto record = [&](const node *n) -> rewrite_record * {
        for (auto &r : records)
            if (origin.count(n) && r.conv == origin[n]) return &r;
        return nullptr;
    };
    for (node *n1 : g.topo_order()) {
        if (n1->kind != op::QConvolution) continue;
        const auto cs = g.consumers(n1);
        if (cs.size() != 1 || cs[0]->kind != op::QConvolution || cs[0]->inputs[0] != n1) continue;
        node *n2 = cs[0];
        const qconv_spec &a = *n1->attr.qconv;
        const qconv_spec &b = *n2->attr.qconv;
        const conv_desc &d1 = a.p.desc, &d2 = b.p.desc;
        const bool pw = d1.kh == 1 && d1.kw == 1 && d1.g == 1 && d1.pt == 0 && d1.pl == 0 && d1.pb <= 0 && d1.pr <= 0 &&
                        !a.residual && a.p.dst_zp == 0 && a.p.dw() == nullptr;
        const bool dw = d2.is_depthwise() && d2.kh == 3 && d2.kw == 3 && d2.pt == 1 && d2.pl == 1 && d2.sh == d2.sw &&
                        (d2.sh == 1 || d2.sh == 2) && d2.dh == 1 && d2.dw == 1 &&
                        d2.oh == (d2.ih + 2 - 3) / d2.sh + 1 && d2.ow == (d2.iw + 2 - 3) / d2.sw + 1 &&
                        b.p.src_zp.effective_kind() == zero_point::kind::none && b.p.dw() == nullptr;
        if (!pw || !dw) continue;
        qconv_spec f = a;
        const node *w2 = n2->inputs[1];
        std::vector<int8_t> wd(w2->data->bytes.begin(), w2->data->bytes.end());
        f.p.ops.push_back(post_op::dw_conv(static_cast<int>(d2.sh), a.p.dst_dt, wd,
                                           b.p.with_bias ? b.bias : std::vector<float>{}, b.p.scales));
        for (const auto &o : b.p.ops) f.p.ops.push_back(o);
        f.p.dst_dt = b.p.dst_dt;
        f.p.dst_zp = b.p.dst_zp;
        f.residual = b.residual;
        f.sum = b.sum;
        try {
            f.p.validate();
        } catch (const error &) {
            continue;
        }
        attributes at = n2->attr;
        at.qconv = std::make_shared<const qconv_spec>(f);
        std::vector<node *> ins{n1->inputs[0], n1->inputs[1]};
        if (b.residual) ins.push_back(n2->inputs[2]);
        node *fused = g.add(op::QConvolution, ins, at, g.unique_id(n1->id + "_dw"));
        fused->friendly_name = n2->friendly_name;
        fused->rt_info = n2->rt_info;
        infer_node(*fused);
        g.replace_uses(n2, fused);
        if (auto *r = record(n1)) r->reason += " + fused dw item (" + origin[n2] + ")";
        if (auto *r = record(n2)) r->reason += "; fused into " + origin[n1] + " as its dw item";
        origin[fused] = origin[n1];
    }
}

} // namespace

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

// After the lowering, on the integers a lowered convolution left:
// MaxPool(DequantizeLinear(q)) → DequantizeLinear(MaxPool(q)) (max commutes
// with a nondecreasing map; the window skips positions outside the input),
// and QuantizeLinear(DequantizeLinear(q, s, z), s, z) → q (the level comes
// back). Per-channel scales too: a network whose activations feed f32
// convolutions (no single source scale) pools its integers and keeps its
// f32 only where a convolution needs it. Returns how many were rewritten.
int pool_and_requantize_on_integers(graph &g) {
    int n = 0;
    for (node *m : g.topo_order()) {
        if (m->kind == op::MaxPool && m->out_type == dtype::f32 && monotone_dequantize(m->inputs[0])) {
            node *d = m->inputs[0];
            node *mp = g.add(op::MaxPool, {d->inputs[0]}, m->attr, g.unique_id(m->id + "_int8"));
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

} // namespace

std::vector<rewrite_record> lower_low_precision(graph &g) {
    g.infer();
    lowerer lw(g);
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
    if (pool_and_requantize_on_integers(g) > 0) {
        g.prune();
        g.infer();
    }
    fuse_dw(g, lw.origin_, records);
    g.prune();
    g.infer();
    if (impl::verbose_level() >= 2)
        for (const auto &r : records)
            impl::verbose_print("graph,lower_int8," + r.conv + "," + (r.rewritten ? "lowered" : "kept") + "," +
                                r.reason);
    return records;
}

} // namespace qconv::graph
