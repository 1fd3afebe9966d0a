// AVX-512 implementation of the conv output pipeline (see conv_pipeline.h).
// Compiled for AVX-512 F/BW/DQ/VL via target attributes; only called after
// the dispatcher has established the ISA.
#include "kernels/jit/conv_pipeline.h"

#include <immintrin.h>

// GCC 12 warns about the intentionally undefined pass-through operand of
// unmasked AVX-512 intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cmath>
#include <cstring>
#include <string>

namespace qconv::jit {

namespace {

std::vector<float> per_oc(const std::vector<float> &v, int64_t oc, const char *field) {
    if (v.size() != 1 && static_cast<int64_t>(v.size()) != oc)
        fail(field, "needs 1 or OC=" + std::to_string(oc) + " values, got " + std::to_string(v.size()));
    std::vector<float> r(static_cast<size_t>(oc + 16), 0.f);
    for (int64_t c = 0; c < oc; ++c) r[c] = lowered_op::at(v, c);
    return r;
}

} // namespace

pipeline pipeline::build(const conv_problem &p, const attr_set &a) {
    pipeline pp;
    const int64_t oc = p.desc.oc;
    pp.dst_dt = p.dst_dt;
    pp.oc = oc;
    pp.scale.assign(static_cast<size_t>(oc + 16), 0.f);
    for (int64_t c = 0; c < oc; ++c) pp.scale[c] = p.scale(c);
    pp.with_bias = p.with_bias;
    pp.dst_zp = static_cast<float>(p.dst_zp);
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
        case K::prelu: case K::depthwise_prelu: q.a = per_oc(op.a, oc, "prelu"); break;
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
    return pp;
}

#define QCONV_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

namespace {

QCONV_AVX512 inline __m512 ld(const std::vector<float> &v, int64_t c, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, v.data() + c);
}

QCONV_AVX512 inline __m512 rne(__m512 y) {
    return _mm512_roundscale_ps(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// fmax(x, y): the non-NaN operand if one is NaN.
QCONV_AVX512 inline __m512 fmax_v(__m512 x, __m512 y) {
    const __m512 r = _mm512_max_ps(x, y); // y when either is NaN
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q), r, x);
}
QCONV_AVX512 inline __m512 fmin_v(__m512 x, __m512 y) {
    const __m512 r = _mm512_min_ps(x, y);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q), r, x);
}

QCONV_AVX512 __m512 scalar_eltwise(const pipeline_op &op, __m512 y) {
    alignas(64) float v[16];
    _mm512_store_ps(v, y);
    for (float &x : v) x = eltwise_ref(op.alg, op.alpha, op.beta, x);
    return _mm512_load_ps(v);
}

QCONV_AVX512 __m512 eltwise(const pipeline_op &op, __m512 x) {
    const __m512 al = _mm512_set1_ps(op.alpha), be = _mm512_set1_ps(op.beta);
    switch (op.alg) {
    case eltwise_alg::relu:
        return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ),
                                    _mm512_mul_ps(x, al), x);
    case eltwise_alg::clip: return fmin_v(fmax_v(x, al), be);
    case eltwise_alg::linear: return _mm512_add_ps(_mm512_mul_ps(x, al), be);
    case eltwise_alg::hardswish: {
        __m512 t = _mm512_add_ps(_mm512_div_ps(x, _mm512_set1_ps(6.f)), _mm512_set1_ps(0.5f));
        t = fmin_v(fmax_v(t, _mm512_setzero_ps()), _mm512_set1_ps(1.f));
        return _mm512_mul_ps(x, t);
    }
    case eltwise_alg::abs: return _mm512_abs_ps(x);
    case eltwise_alg::sqrt: return _mm512_sqrt_ps(x);
    case eltwise_alg::square: return _mm512_mul_ps(x, x);
    case eltwise_alg::round: return rne(x);
    default: return scalar_eltwise(op, x);
    }
}

QCONV_AVX512 __m512 binary(binary_alg a, __m512 x, __m512 y) {
    switch (a) {
    case binary_alg::add: return _mm512_add_ps(x, y);
    case binary_alg::sub: return _mm512_sub_ps(x, y);
    case binary_alg::mul: return _mm512_mul_ps(x, y);
    case binary_alg::div: return _mm512_div_ps(x, y);
    case binary_alg::max: return fmax_v(x, y);
    case binary_alg::min: return fmin_v(x, y);
    }
    return x;
}

QCONV_AVX512 __m512 load_dst(dtype dt, const void *dst, int64_t off, __mmask16 m) {
    switch (dt) {
    case dtype::f32: return _mm512_maskz_loadu_ps(m, static_cast<const float *>(dst) + off);
    case dtype::s32:
        return _mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(m, static_cast<const int32_t *>(dst) + off));
    case dtype::s8:
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
            _mm_maskz_loadu_epi8(m, static_cast<const int8_t *>(dst) + off)));
    default:
        return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
            _mm_maskz_loadu_epi8(m, static_cast<const uint8_t *>(dst) + off)));
    }
}

QCONV_AVX512 void store_dst(dtype dt, void *dst, int64_t off, __mmask16 m, __m512 y) {
    if (dt == dtype::f32) {
        _mm512_mask_storeu_ps(static_cast<float *>(dst) + off, m, y);
        return;
    }
    // NaN stores as 0.
    y = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(y, y, _CMP_ORD_Q), y);
    if (dt == dtype::s32) {
        const __m512 r = rne(y);
        __m512i i = _mm512_cvtps_epi32(r); // out of range → INT_MIN
        i = _mm512_mask_mov_epi32(i, _mm512_cmp_ps_mask(r, _mm512_set1_ps(2147483648.f), _CMP_GE_OQ),
                                  _mm512_set1_epi32(INT32_MAX));
        _mm512_mask_storeu_epi32(static_cast<int32_t *>(dst) + off, m, i);
        return;
    }
    const float lo = dt == dtype::u8 ? 0.f : -128.f, hi = dt == dtype::u8 ? 255.f : 127.f;
    y = _mm512_min_ps(_mm512_max_ps(y, _mm512_set1_ps(lo)), _mm512_set1_ps(hi));
    const __m512i i = _mm512_cvtps_epi32(y); // MXCSR default: round half to even
    _mm512_mask_cvtepi32_storeu_epi8(static_cast<int8_t *>(dst) + off, m, i);
}

} // namespace

QCONV_AVX512 void run_pipeline_avx512(const pipeline &pp, const tile &t, const int32_t *comp,
                                      const float *bias, void *dst, const exec_args &args) {
    using K = lowered_op::kind;
    for (int jc = 0; jc < t.nc; jc += 16) {
        const int n = t.nc - jc < 16 ? t.nc - jc : 16;
        const __mmask16 m = static_cast<__mmask16>((1u << n) - 1u);
        const int64_t c = t.c0 + jc;
        const __m512i cmp = _mm512_maskz_loadu_epi32(m, comp + c);
        const __m512 sc = ld(pp.scale, c, m);
        const __m512 bi = pp.with_bias ? _mm512_maskz_loadu_ps(m, bias + c) : _mm512_setzero_ps();
        const __m512 zp = _mm512_set1_ps(pp.dst_zp);
        for (int i = 0; i < t.npix; ++i) {
            const int64_t off = t.dst_off0 + i * pp.oc + jc;
            const __m512i a = _mm512_add_epi32(_mm512_loadu_si512(t.acc + i * t.acc_stride + jc), cmp);
            __m512 y = _mm512_mul_ps(_mm512_cvtepi32_ps(a), sc);
            if (pp.with_bias) y = _mm512_add_ps(y, bi);
            __m512 prev = _mm512_setzero_ps();
            if (pp.has_sum) prev = load_dst(pp.dst_dt, dst, off, m);
            for (const pipeline_op &op : pp.ops) {
                switch (op.k) {
                case K::eltwise: y = eltwise(op, y); break;
                case K::binary: {
                    const __m512 r = op.full ? _mm512_maskz_loadu_ps(m, args.binary[op.full_index] + off)
                                             : ld(op.a, c, m);
                    y = binary(op.balg, y, r);
                    break;
                }
                case K::prelu:
                case K::depthwise_prelu:
                    y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(y, _mm512_setzero_ps(), _CMP_GE_OQ),
                                             _mm512_mul_ps(y, ld(op.a, c, m)), y);
                    break;
                case K::sum: {
                    const __m512 d = _mm512_sub_ps(prev, _mm512_set1_ps(op.sum_zp));
                    y = _mm512_add_ps(y, _mm512_mul_ps(_mm512_set1_ps(op.sum_scale), d));
                    break;
                }
                case K::depthwise_scale_shift:
                    y = _mm512_add_ps(_mm512_mul_ps(y, ld(op.a, c, m)), ld(op.b, c, m));
                    break;
                case K::quantization:
                    // std::min(std::max(y, cl), ch): maxps(cl, y), minps(ch, .) keep NaN y.
                    y = _mm512_max_ps(ld(op.q[0], c, m), y);
                    y = _mm512_min_ps(ld(op.q[1], c, m), y);
                    y = _mm512_add_ps(_mm512_mul_ps(y, ld(op.q[2], c, m)), ld(op.q[3], c, m));
                    if (op.round) y = rne(y);
                    if (op.dequantize) y = _mm512_add_ps(_mm512_mul_ps(y, ld(op.q[4], c, m)), ld(op.q[5], c, m));
                    break;
                default: break;
                }
            }
            y = _mm512_add_ps(y, zp);
            store_dst(pp.dst_dt, dst, off, m, y);
        }
    }
}

} // namespace qconv::jit
