// The int8 lowering's chain building (lowering.h): the nodes from the
// convolution to its output quantization, read through single consumers,
// as the problem's bias and post-ops (docs/graph.md, the pattern table).
#include <algorithm>
#include <cmath>

#include "graph/passes/lower_int8/lowering.h"

namespace qconv::graph::int8 {

std::string lowerer::walk_chain(node *c, int64_t OC, chain_walk &w) {
    w.t = c;
    for (;;) {
        node *u = single_consumer(w.t);
        if (!u) {
            const auto n = g_.consumers(w.t).size();
            return n == 0 ? "output is not read"
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
bool lowerer::take_requantized_residual(node *u, chain_walk &w) {
    node *add = requantized_residual(u);
    if (!add || w.stage > 2 || w.residual) return false;
    conv_problem &p = w.sp.p;
    quant iq;
    qdq_of(single_consumer(u), &iq);
    w.flush_ss();
    const double qlo = iq.type == dtype::u8 ? 0 : -128, qhi = iq.type == dtype::u8 ? 255 : 127;
    p.ops.push_back(post_op::eltwise(eltwise_alg::linear, 1.f / static_cast<float>(iq.scale), 0.f));
    p.ops.push_back(post_op::eltwise(eltwise_alg::round));
    p.ops.push_back(
        post_op::eltwise(eltwise_alg::clip, static_cast<float>(qlo - iq.zp[0]), static_cast<float>(qhi - iq.zp[0])));
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
void lowerer::take_output(node *u, chain_walk &w) {
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
std::string lowerer::take_op(node *u, int64_t OC, const shape_t &ys, chain_walk &w) {
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

std::string lowerer::take_bias(node *u, node *other, int64_t OC, const shape_t &ys, chain_walk &w) {
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

std::string lowerer::take_scale_shift(node *u, node *other, int64_t OC, const shape_t &ys, chain_walk &w) {
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
std::string lowerer::output_quantization(chain_walk &w, int64_t OC, const shape_t &ys, dtype *dt, fq_info *of,
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
                                               expand(of->ih, of->ih.size() == 1 ? 1 : OC), std::vector<float>(1, lo),
                                               std::vector<float>(1, hi)));
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

} // namespace qconv::graph::int8
