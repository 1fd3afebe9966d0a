// The int8 lowering's matching (lowering.h): the activation, weight and
// quantization patterns a candidate is read from, and the Constants the
// matching folds.
#include <algorithm>
#include <cmath>
#include <map>

#include "graph/ir/detail.h"
#include "graph/ops/ops.h"
#include "graph/passes/lower_int8/lowering.h"

namespace qconv::graph::int8 {

bool is_const_f32(const node *n) { return n->kind == op::Constant && n->out_type == dtype::f32; }

std::vector<double> per_channel(const node *c, int64_t C, bool rank2, bool allow_1d) {
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

bool same_constant(const node *a, const node *b) {
    if (a == b) return true;
    if (a->kind != op::Constant || b->kind != op::Constant || a->out_type != b->out_type ||
        elems_of(a->out_shape) != elems_of(b->out_shape))
        return false;
    for (int64_t i = 0; i < elems_of(a->out_shape); ++i)
        if (a->value(i) != b->value(i)) return false;
    return true;
}

bool same_qdq_params(const node *q, const node *d) {
    const bool per_channel =
        elems_of(q->inputs[1]->out_shape) > 1 || (q->inputs.size() > 2 && elems_of(q->inputs[2]->out_shape) > 1);
    return q->inputs.size() == d->inputs.size() && same_constant(q->inputs[1], d->inputs[1]) &&
           (q->inputs.size() < 3 || same_constant(q->inputs[2], d->inputs[2])) &&
           (!per_channel || q->attr.axis == d->attr.axis);
}

// ------------------------------------------------------------------ nodes

node *lowerer::add(op k, std::vector<node *> in, attributes a, const std::string &id, const node *from) {
    node *n = g_.add(k, std::move(in), std::move(a), g_.unique_id(id));
    if (from) {
        n->friendly_name = from->friendly_name;
        n->rt_info = from->rt_info;
    }
    infer_node(*n, g_.dynamic_value());
    return n;
}

node *lowerer::single_consumer(node *n) const {
    auto cs = g_.consumers(n);
    return cs.size() == 1 ? cs[0] : nullptr;
}

node *lowerer::fconst(const std::vector<float> &v, const shape_t &s, const std::string &id) {
    node *n = g_.constant_f32(s, v, g_.unique_id(id));
    infer_node(*n);
    return n;
}

// x when it is a Constant; a Constant of x's value when x is computed
// from Constants only (the reader's Convert → Subtract → Multiply of an
// int32 bias, a product of two scales), evaluated node by node as the
// executor's compile-time folding evaluates it — the values the graph as
// written uses; otherwise x itself.
node *lowerer::constant_of(node *x) {
    if (x->kind == op::Constant) return x;
    if (auto it = folded_.find(x); it != folded_.end()) return it->second;
    node *r = x;
    std::map<const node *, tensor> vals;
    if (detail::fold_constant(x, {17, kFoldElems}, &vals)) {
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

// ------------------------------------------------------- quantization patterns

// A per-tensor QDQ dequantization: DequantizeLinear(q u8/i8, scale[, zp]).
bool lowerer::qdq_of(const node *a, quant *q) {
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
bool lowerer::channel_zp_of(const node *a, quant *q) {
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

// The residual Add after QuantizeLinear q → DequantizeLinear with the same
// per-tensor scale and zero point (each read once) when its other input is
// an f32 tensor of the Add's shape; else null.
node *lowerer::requantized_residual(node *q) {
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

// QuantizeLinear q(s, z) → DequantizeLinear(s, z) → Relu | Clamp → QuantizeLinear(s, z),
// each read once: the last QuantizeLinear, else null. It stores what Relu | Clamp →
// QuantizeLinear(s, z) of q's input stores (docs/graph.md, "requantized activation"):
// for a monotone f, Q(f(DQ(Q(x)))) = Q(f(x)) when (q − z)·s / s rounds back to q − z.
node *lowerer::requantized_activation(node *q) {
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

// Whether the f32 value `a` is a dequantization of integers some node
// holds (a lowered convolution's output, a QDQ pair), also through
// MaxPool and Concat: max and concatenation commute with a dequantization
// of positive scale, so MaxPool(q) / Concat(q, ...) hold the integers
// (Concat only where every input has the same quantization).
bool lowerer::int8_of(node *a, quant *q) {
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
node *lowerer::requantized_concat(node *cat, const quant &d) {
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

// ------------------------------------------------- activation and weights

// per_channel_scales: the convolution's output channels each read one
// input channel (icg = 1), so a scale per input channel is one per output
// channel of the int8 convolution's scales.
std::string lowerer::activation(node *a, int64_t C, quant *q, const node **fq, bool per_channel_scales) {
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
        if (s.empty() || (s.size() > 1 && !axis1)) return "activation: DequantizeLinear is not per tensor or axis 1";
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
std::string lowerer::weights(node *w, const shape_t &ws, int64_t OC, std::vector<int8_t> *w8, std::vector<double> *sw) {
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

} // namespace qconv::graph::int8
