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

// ---- chain_upper_bound: interval arithmetic over the chain (in double;
// ±inf for no bound). Every non-NaN value an op gives lies in its span; a
// NaN stays NaN, stores as 0 (u8) on either path, or becomes an operand of
// a max / min / clip that the span holds.
constexpr double unbounded = HUGE_VAL;
struct span {
    double lo, hi;
};
// One f32 rounding of a result in s moves it by at most 2^-24 of itself
// (v + 2^-22·|v| increases with v, so the ends bound the rounded values).
span rounded(span s) { return {s.lo - std::fabs(s.lo) * 0x1p-22, s.hi + std::fabs(s.hi) * 0x1p-22}; }
double prod0(double a, double x) { return a == 0 || x == 0 ? 0.0 : a * x; } // 0 · ±inf bounds nothing but 0
// The hull of a·x over a in [a0, a1] and x in s.
span times(span s, double a0, double a1) {
    const double p[4] = {prod0(a0, s.lo), prod0(a0, s.hi), prod0(a1, s.lo), prod0(a1, s.hi)};
    return {*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
}
span plus(span s, double b0, double b1) { return {s.lo + b0, s.hi + b1}; }
// One fused multiply-add s·a + b (a single rounding) over ranges of a and b.
span madd(span s, span a, span b) { return rounded(plus(times(s, a.lo, a.hi), b.lo, b.hi)); }
// Round half to even: the integers between.
span integers(span s) { return {std::floor(s.lo), std::ceil(s.hi)}; }
span hull(span a, span b) { return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)}; }
// The first n values' range, NaNs left out (they make NaN or leave y as it
// is); an empty range (all NaN) bounds nothing.
span range_of(const std::vector<float> &v, int64_t n) {
    span r{unbounded, -unbounded};
    for (int64_t i = 0; i < n && i < static_cast<int64_t>(v.size()); ++i)
        if (!std::isnan(v[static_cast<size_t>(i)])) r = hull(r, {v[static_cast<size_t>(i)], v[static_cast<size_t>(i)]});
    return r.lo <= r.hi ? r : span{-unbounded, unbounded};
}
// x ≤ 0 ? a·x : x with a in slopes (relu, prelu).
span piecewise(span s, span slopes) {
    span r{unbounded, -unbounded};
    if (s.hi > 0) r = hull(r, {std::max(s.lo, 0.0), s.hi});
    if (s.lo <= 0) r = hull(r, rounded(times({s.lo, std::min(s.hi, 0.0)}, slopes.lo, slopes.hi)));
    return r;
}
span after_eltwise(const pipeline_op &op, span s) {
    switch (op.alg) {
    case eltwise_alg::relu: return piecewise(s, {op.alpha, op.alpha});
    case eltwise_alg::clip: // vmaxps / vminps with constants; a NaN bound is no bound
        if (!std::isnan(op.alpha)) s = {std::max(s.lo, double(op.alpha)), std::max(s.hi, double(op.alpha))};
        if (!std::isnan(op.beta)) s = {std::min(s.lo, double(op.beta)), std::min(s.hi, double(op.beta))};
        return s;
    case eltwise_alg::linear: return madd(s, {op.alpha, op.alpha}, {op.beta, op.beta});
    case eltwise_alg::round: return integers(s);
    case eltwise_alg::abs: {
        const double m = std::max(std::fabs(s.lo), std::fabs(s.hi));
        return {s.lo <= 0 && s.hi >= 0 ? 0.0 : std::min(std::fabs(s.lo), std::fabs(s.hi)), m};
    }
    case eltwise_alg::square: {
        const double m = std::max(std::fabs(s.lo), std::fabs(s.hi));
        return rounded({0.0, m * m});
    }
    case eltwise_alg::sqrt: return rounded({0.0, std::sqrt(std::max(s.hi, 0.0))});
    case eltwise_alg::hardswish: return rounded({-0.375, std::max(s.hi, 0.0)}); // x·clamp(x/6 + 1/2, 0, 1) ≤ max(x, 0)
    default: return {-unbounded, unbounded};
    }
}
span after_binary(const pipeline_op &op, span s, int64_t oc) {
    if (op.full) return {-unbounded, unbounded}; // a tensor's values are not known here
    const span a = range_of(op.a, oc);
    switch (op.balg) {
    case binary_alg::add: return rounded(plus(s, a.lo, a.hi));
    case binary_alg::sub: return rounded(plus(s, -a.hi, -a.lo));
    case binary_alg::mul: return rounded(times(s, a.lo, a.hi));
    case binary_alg::div:
        if (a.lo <= 0 && a.hi >= 0) return {-unbounded, unbounded};
        return rounded(times(s, 1.0 / a.hi, 1.0 / a.lo)); // the reciprocals' hull holds every 1/a
    case binary_alg::max: return {std::max(s.lo, a.lo), std::max(s.hi, a.hi)};
    case binary_alg::min: return {std::min(s.lo, a.lo), std::min(s.hi, a.hi)};
    }
    return {-unbounded, unbounded};
}
span after_quantization(const pipeline_op &op, span s, int64_t oc) {
    if (op.crop) { // per channel max(y, cl) then min(., ch)
        const span cl = range_of(op.q[0], oc), ch = range_of(op.q[1], oc);
        s = {std::min(std::max(s.lo, cl.lo), ch.lo), std::min(std::max(s.hi, cl.hi), ch.hi)};
    }
    s = madd(s, range_of(op.q[2], oc), range_of(op.q[3], oc));
    if (op.round) s = integers(s);
    if (op.dequantize) s = madd(s, range_of(op.q[4], oc), range_of(op.q[5], oc));
    return s;
}
span after_op(const pipeline &pp, const pipeline_op &op, span s) {
    using K = lowered_op::kind;
    switch (op.k) {
    case K::eltwise: return after_eltwise(op, s);
    case K::binary: return after_binary(op, s, pp.oc);
    case K::prelu:
    case K::depthwise_prelu: return piecewise(s, range_of(op.a, pp.oc));
    case K::depthwise_scale_shift: return madd(s, range_of(op.a, pp.oc), range_of(op.b, pp.oc));
    case K::sum: { // y + (prev − zp)·scale, prev in the destination type's range
        span prev{-unbounded, unbounded};
        if (pp.dst_dt == dtype::u8) prev = {0, 255};
        else if (pp.dst_dt == dtype::s8) prev = {-128, 127};
        else if (pp.dst_dt == dtype::s32) prev = {-2147483648.0, 2147483647.0};
        const span t = times(plus(prev, -op.sum_zp, -op.sum_zp), op.sum_scale, op.sum_scale);
        return rounded(plus(s, t.lo, t.hi));
    }
    case K::quantization: return after_quantization(op, s, pp.oc);
    default: return {-unbounded, unbounded};
    }
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

u8_store_bound bounded_u8_store(const pipeline &pp, int64_t K) {
    u8_store_bound r;
    if (pp.dst_dt != dtype::u8) return r;
    if (chain_upper_bound(pp) < 1073741824.0) { // 2^30
        r.bounded = true;
        return r;
    }
    if (pp.dst_zp != 0.f || pp.ops.size() > 1) return r;
    if (!pp.ops.empty() && (pp.ops[0].k != lowered_op::kind::eltwise || pp.ops[0].alg != eltwise_alg::round))
        return r; // nothing after the fma but the store's own rounding
    float max_scale = 0.f;
    for (int64_t c = 0; c < pp.oc; ++c) {
        const float a = std::fabs(pp.scale[static_cast<size_t>(c)]);
        if (!(a <= 1e30f)) return r; // NaN, inf
        max_scale = std::max(max_scale, a);
    }
    r.bounded = r.clamp_bias = static_cast<double>(K) * 131072.0 * max_scale < 268435456.0; // 2^17, 2^28
    return r;
}

double chain_upper_bound(const pipeline &pp) {
    span y{-unbounded, unbounded}; // the fma's value: any
    for (const pipeline_op &op : pp.ops) {
        y = after_op(pp, op, y);
        if (std::isnan(y.lo) || std::isnan(y.hi)) return unbounded;
    }
    y = rounded({y.lo + pp.dst_zp, y.hi + pp.dst_zp});
    return std::isnan(y.hi) ? unbounded : y.hi;
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
