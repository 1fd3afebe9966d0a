// conv pipeline: expansion of the lowered post-ops into per-OC arrays.
#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/jit/base/conv_pipeline.h"

#include "core/convert.h"

namespace qconv::jit {

namespace {

std::vector<float> per_oc(const std::vector<float> &v, int64_t oc, const char *field) {
    if (v.size() != 1 && static_cast<int64_t>(v.size()) != oc)
        fail(field, "needs 1 or OC=" + std::to_string(oc) + " values, got " + std::to_string(v.size()));
    std::vector<float> r(static_cast<size_t>(oc + 16), 0.f);
    for (int64_t c = 0; c < oc; ++c) r[c] = lowered_op::at(v, c);
    return r;
}

// Whether the last op's crop is left to the store's saturation (pipeline_op::crop).
bool crop_saturates(const pipeline &pp) {
    if (pp.ops.empty() || (pp.dst_dt != dtype::u8 && pp.dst_dt != dtype::s8)) return false;
    const pipeline_op &q = pp.ops.back();
    if (q.k != lowered_op::kind::quantization) return false;
    const float lo = pp.dst_dt == dtype::u8 ? 0.f : -128.f, hi = pp.dst_dt == dtype::u8 ? 255.f : 127.f;
    // A bound through the op (fused multiply-adds, round half to even) and
    // the store (+ dst_zp, round half to even).
    auto stored = [&](float v, int64_t c) {
        v = madd(v, q.q[2][c], q.q[3][c]);
        if (q.round) v = std::nearbyint(v);
        if (q.dequantize) v = madd(v, q.q[4][c], q.q[5][c]);
        return std::nearbyint(v + pp.dst_zp);
    };
    for (int64_t c = 0; c < pp.oc; ++c) {
        const float cl = q.q[0][c], ch = q.q[1][c];
        if (!(cl <= ch) || !(q.q[2][c] > 0.f) || (q.dequantize && !(q.q[4][c] > 0.f))) return false;
        if (!(stored(cl, c) <= lo) || !(stored(ch, c) >= hi)) return false;
    }
    return true;
}

} // namespace

bool pipeline::takes(const attr_set &a, std::string *why) {
    for (const lowered_op &op : a.ops) {
        switch (op.k) {
        case lowered_op::kind::eltwise:
        case lowered_op::kind::binary:
        case lowered_op::kind::prelu:
        case lowered_op::kind::sum:
        case lowered_op::kind::depthwise_scale_shift:
        case lowered_op::kind::depthwise_prelu:
        case lowered_op::kind::quantization: break;
        case lowered_op::kind::dw_conv:
            if (why) *why = "a fused dw conv item (the fused 1x1+dw rows and the composite row take it)";
            return false;
        default:
            if (why) *why = "lowered post-op kind not implemented";
            return false;
        }
    }
    return true;
}

bool bounded_u8_store(const pipeline &pp, int64_t K) {
    if (pp.dst_dt != dtype::u8 || pp.dst_zp != 0.f || pp.ops.size() > 1) return false;
    if (!pp.ops.empty() && (pp.ops[0].k != lowered_op::kind::eltwise || pp.ops[0].alg != eltwise_alg::round))
        return false; // nothing after the fma but the store's own rounding
    float max_scale = 0.f;
    for (int64_t c = 0; c < pp.oc; ++c) {
        const float a = std::fabs(pp.scale[static_cast<size_t>(c)]);
        if (!(a <= 1e30f)) return false; // NaN, inf
        max_scale = std::max(max_scale, a);
    }
    return static_cast<double>(K) * 131072.0 * max_scale < 268435456.0; // 2^17, 2^28
}

pipeline pipeline::build(const conv_problem &p, const attr_set &a) {
    pipeline pp;
    const int64_t oc = p.desc.oc;
    pp.dst_dt = p.dst_dt;
    pp.oc = oc;
    pp.scale.assign(static_cast<size_t>(oc + 16), 0.f);
    for (int64_t c = 0; c < oc; ++c) pp.scale[c] = p.scale(c);
    pp.with_bias = p.with_bias;
    pp.dst_zp = static_cast<float>(p.dst_zp);
    pp.comp_is_zero = p.src_dt == dtype::u8 && a.zp == zp_mechanism::none;
    using K = lowered_op::kind;
    for (const lowered_op &op : a.ops) {
        pipeline_op q;
        q.k = op.k;
        q.alg = op.alg;
        q.alpha = op.alpha;
        q.beta = op.beta;
        q.balg = op.balg;
        q.full = op.bcast == broadcast::full;
        q.full_index = op.full_index;
        q.sum_scale = op.sum_scale;
        q.sum_zp = static_cast<float>(op.sum_zp);
        q.round = op.round;
        q.dequantize = op.dequantize;
        switch (op.k) {
        case K::binary:
            if (!q.full) q.a = per_oc(op.a, oc, "binary");
            break;
        case K::prelu:
        case K::depthwise_prelu: q.a = per_oc(op.a, oc, "prelu"); break;
        case K::depthwise_scale_shift:
            q.a = per_oc(op.a, oc, "scale_shift");
            q.b = per_oc(op.b, oc, "scale_shift");
            break;
        case K::quantization: {
            const std::vector<float> *src[6] = {&op.cl, &op.ch, &op.isc, &op.ish, &op.osc, &op.osh};
            for (int i = 0; i < 6; ++i) q.q[i] = per_oc(*src[i], oc, "fake_quantize");
            break;
        }
        case K::sum: pp.has_sum = true; break;
        case K::eltwise: break;
        default: fail("post_ops", "lowered post-op not supported by the JIT conv pipeline");
        }
        pp.ops.push_back(std::move(q));
    }
    if (crop_saturates(pp)) pp.ops.back().crop = false;
    return pp;
}

} // namespace qconv::jit
