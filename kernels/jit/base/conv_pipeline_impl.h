// The output pipeline body, written once over a vector-traits type V
// (AVX-512: 16 lanes with k-masks; AVX2: 8 lanes, tails through a small
// buffer). Included by conv_pipeline_avx512.cpp and conv_pipeline_avx2.cpp
// after their `#pragma GCC target`; everything here has internal linkage.
// Include only after <immintrin.h>, <cmath>, <cstring> and conv_pipeline.h.
#pragma once

namespace qconv::jit {
namespace {

template <typename V>
typename V::vec eltwise_v(const pipeline_op &op, typename V::vec x) {
    using vec = typename V::vec;
    const vec al = V::set1(op.alpha), be = V::set1(op.beta);
    switch (op.alg) {
    case eltwise_alg::relu: return V::select(V::gt(x, V::zero()), x, V::mul(x, al));
    case eltwise_alg::clip: return V::fmin(V::fmax(x, al), be);
    case eltwise_alg::linear: return V::fmadd(x, al, be);
    case eltwise_alg::hardswish: {
        vec t = V::add(V::div(x, V::set1(6.f)), V::set1(0.5f));
        t = V::fmin(V::fmax(t, V::zero()), V::set1(1.f));
        return V::mul(x, t);
    }
    case eltwise_alg::abs: return V::abs(x);
    case eltwise_alg::sqrt: return V::sqrt(x);
    case eltwise_alg::square: return V::mul(x, x);
    case eltwise_alg::round: return V::rne(x);
    default: {
        // Transcendental: the reference function itself, element by element.
        alignas(64) float v[V::lanes];
        V::store(v, x);
        for (float &e : v) e = eltwise_ref(op.alg, op.alpha, op.beta, e);
        return V::load(v);
    }
    }
}

template <typename V>
typename V::vec binary_v(binary_alg a, typename V::vec x, typename V::vec y) {
    switch (a) {
    case binary_alg::add: return V::add(x, y);
    case binary_alg::sub: return V::sub(x, y);
    case binary_alg::mul: return V::mul(x, y);
    case binary_alg::div: return V::div(x, y);
    case binary_alg::max: return V::fmax(x, y);
    case binary_alg::min: return V::fmin(x, y);
    }
    return x;
}

// dst[off, off + n) ← y in dst's type (docs/semantics.md §4, Store): f32 as is;
// integers take NaN as 0 and round half to even, s32 saturating at ±2^31,
// s8/u8 clamped to their range.
template <typename V>
void store_dst(dtype dt, void *dst, int64_t off, int n, typename V::vec y) {
    if (dt == dtype::f32) return V::store_f32(static_cast<float *>(dst) + off, n, y);
    y = V::select(V::ordered(y), y, V::zero());
    if (dt == dtype::s32) return V::store_s32(static_cast<int32_t *>(dst) + off, n, V::rne(y));
    const float lo = dt == dtype::u8 ? 0.f : -128.f, hi = dt == dtype::u8 ? 255.f : 127.f;
    V::store_x8(dt == dtype::u8, static_cast<uint8_t *>(dst) + off, n,
                V::min_raw(V::max_raw(y, V::set1(lo)), V::set1(hi)));
}

template <typename V>
void run_pipeline_t(const pipeline &pp, const tile &t, const int32_t *comp, const float *bias, void *dst,
                    const exec_args &args) {
    using K = lowered_op::kind;
    using vec = typename V::vec;
    constexpr int L = V::lanes;
    for (int jc = 0; jc < t.nc; jc += L) {
        const int n = t.nc - jc < L ? t.nc - jc : L;
        const int64_t c = t.c0 + jc;
        // Per-OC arrays are padded by 16, the tile by whole vectors: full loads are safe.
        const typename V::ivec cmp = V::iload(comp + c);
        const vec sc = V::load(pp.scale.data() + c);
        const vec bi = pp.with_bias ? V::load(bias + c) : V::zero();
        const vec zp = V::set1(pp.dst_zp);
        for (int i = 0; i < t.npix; ++i) {
            const int64_t off = t.dst_off0 + i * pp.oc + jc;
            // madd(acc, scale, bias or +0): one rounding, +0 for a zero product.
            vec y = V::fmadd(V::cvt(V::iadd(V::iload(t.acc + i * t.acc_stride + jc), cmp)), sc, bi);
            vec prev = V::zero();
            if (pp.has_sum) prev = V::load_dst(pp.dst_dt, dst, off, n);
            for (const pipeline_op &op : pp.ops) {
                switch (op.k) {
                case K::eltwise: y = eltwise_v<V>(op, y); break;
                case K::binary: {
                    const vec r = op.full ? V::load_n(args.binary[op.full_index] + off, n) : V::load(op.a.data() + c);
                    y = binary_v<V>(op.balg, y, r);
                    break;
                }
                case K::prelu:
                case K::depthwise_prelu:
                    y = V::select(V::ge(y, V::zero()), y, V::mul(y, V::load(op.a.data() + c)));
                    break;
                case K::sum: {
                    const vec d = V::sub(prev, V::set1(op.sum_zp));
                    y = V::fmadd(d, V::set1(op.sum_scale), y);
                    break;
                }
                case K::depthwise_scale_shift:
                    y = V::fmadd(y, V::load(op.a.data() + c), V::load(op.b.data() + c));
                    break;
                case K::quantization:
                    // std::min(std::max(y, cl), ch) == minps(ch, maxps(cl, y)), NaN y kept.
                    y = V::max_raw(V::load(op.q[0].data() + c), y);
                    y = V::min_raw(V::load(op.q[1].data() + c), y);
                    y = V::fmadd(y, V::load(op.q[2].data() + c), V::load(op.q[3].data() + c));
                    if (op.round) y = V::rne(y);
                    if (op.dequantize) y = V::fmadd(y, V::load(op.q[4].data() + c), V::load(op.q[5].data() + c));
                    break;
                default: break;
                }
            }
            store_dst<V>(pp.dst_dt, dst, off, n, V::add(y, zp));
        }
    }
}

} // namespace
} // namespace qconv::jit
