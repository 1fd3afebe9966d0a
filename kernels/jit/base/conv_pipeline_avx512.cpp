// AVX-512 instantiation of the conv output pipeline (conv_pipeline_impl.h).
// Everything after the target pragma is compiled for AVX-512 F/BW/DQ/VL and
// has internal linkage except run_pipeline_avx512(), which the kernels call
// only on AVX-512 machines. Standard headers are included before the pragma.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/jit/base/conv_pipeline.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl")
// GCC 12 warns about the intentionally undefined pass-through operand of
// unmasked AVX-512 intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// The pipeline body (templates over the vector type defined below).
#include "kernels/jit/base/conv_pipeline_impl.h"

namespace qconv::jit {
namespace {

struct v512 {
    static constexpr int lanes = 16;
    using vec = __m512;
    using ivec = __m512i;
    using mask = __mmask16;
    static __mmask16 nmask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
    static vec zero() { return _mm512_setzero_ps(); }
    static vec set1(float v) { return _mm512_set1_ps(v); }
    static vec load(const float *p) { return _mm512_loadu_ps(p); }
    static vec load_n(const float *p, int n) { return _mm512_maskz_loadu_ps(nmask(n), p); }
    static void store(float *p, vec v) { _mm512_storeu_ps(p, v); }
    static ivec iload(const int32_t *p) { return _mm512_loadu_si512(p); }
    static ivec iadd(ivec a, ivec b) { return _mm512_add_epi32(a, b); }
    static vec cvt(ivec a) { return _mm512_cvtepi32_ps(a); }
    static vec add(vec a, vec b) { return _mm512_add_ps(a, b); }
    static vec sub(vec a, vec b) { return _mm512_sub_ps(a, b); }
    static vec mul(vec a, vec b) { return _mm512_mul_ps(a, b); }
    static vec fmadd(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); } // a·b + c, one rounding
    static vec div(vec a, vec b) { return _mm512_div_ps(a, b); }
    static vec sqrt(vec a) { return _mm512_sqrt_ps(a); }
    static vec abs(vec a) { return _mm512_abs_ps(a); }
    static vec rne(vec a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
    static vec max_raw(vec a, vec b) { return _mm512_max_ps(a, b); } // a > b ? a : b
    static vec min_raw(vec a, vec b) { return _mm512_min_ps(a, b); } // a < b ? a : b
    static mask gt(vec a, vec b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
    static mask ge(vec a, vec b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
    static vec select(mask m, vec t, vec f) { return _mm512_mask_blend_ps(m, f, t); }
    // fmax/fmin: the other operand when one is NaN.
    static vec fmax(vec x, vec y) {
        return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q), _mm512_max_ps(x, y), x);
    }
    static vec fmin(vec x, vec y) {
        return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q), _mm512_min_ps(x, y), x);
    }
    static vec load_dst(dtype dt, const void *dst, int64_t off, int n) {
        const mask m = nmask(n);
        switch (dt) {
        case dtype::f32: return _mm512_maskz_loadu_ps(m, static_cast<const float *>(dst) + off);
        case dtype::s32:
            return _mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(m, static_cast<const int32_t *>(dst) + off));
        case dtype::s8:
            return _mm512_cvtepi32_ps(
                _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, static_cast<const int8_t *>(dst) + off)));
        default:
            return _mm512_cvtepi32_ps(
                _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, static_cast<const uint8_t *>(dst) + off)));
        }
    }
    static mask ordered(vec a) { return _mm512_cmp_ps_mask(a, a, _CMP_ORD_Q); }
    static void store_f32(float *p, int n, vec y) { _mm512_mask_storeu_ps(p, nmask(n), y); }
    static void store_s32(int32_t *p, int n, vec r) {
        __m512i i = _mm512_cvtps_epi32(r); // too large → INT_MIN
        i = _mm512_mask_mov_epi32(i, _mm512_cmp_ps_mask(r, set1(2147483648.f), _CMP_GE_OQ),
                                  _mm512_set1_epi32(INT32_MAX));
        _mm512_mask_storeu_epi32(p, nmask(n), i);
    }
    // y is within the 8-bit type's range; the low byte of each lane is stored.
    static void store_x8(bool, uint8_t *p, int n, vec y) {
        _mm512_mask_cvtepi32_storeu_epi8(p, nmask(n), _mm512_cvtps_epi32(y));
    }
};

} // namespace

const pipeline_fn run_pipeline_avx512 = run_pipeline_t<v512>;

} // namespace qconv::jit

#pragma GCC pop_options
