// AVX2 instantiation of the conv output pipeline (conv_pipeline_impl.h).
// Tails (fewer than 8 channels) of dst and full binary tensors go through a
// small buffer; everything else is full 8-lane vectors. Standard headers are
// included before the target pragma.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/jit/base/conv_pipeline.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma")

// The pipeline body (templates over the vector type defined below).
#include "kernels/jit/base/conv_pipeline_impl.h"

namespace qconv::jit {
namespace {

struct v256 {
    static constexpr int lanes = 8;
    using vec = __m256;
    using ivec = __m256i;
    using mask = __m256;
    static vec zero() { return _mm256_setzero_ps(); }
    static vec set1(float v) { return _mm256_set1_ps(v); }
    static vec load(const float *p) { return _mm256_loadu_ps(p); }
    static vec load_n(const float *p, int n) {
        if (n == 8) return load(p);
        alignas(32) float b[8] = {};
        std::memcpy(b, p, sizeof(float) * n);
        return _mm256_load_ps(b);
    }
    static void store(float *p, vec v) { _mm256_storeu_ps(p, v); }
    static ivec iload(const int32_t *p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)); }
    static ivec iadd(ivec a, ivec b) { return _mm256_add_epi32(a, b); }
    static vec cvt(ivec a) { return _mm256_cvtepi32_ps(a); }
    static vec add(vec a, vec b) { return _mm256_add_ps(a, b); }
    static vec sub(vec a, vec b) { return _mm256_sub_ps(a, b); }
    static vec mul(vec a, vec b) { return _mm256_mul_ps(a, b); }
    static vec fmadd(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); } // a·b + c, one rounding
    static vec div(vec a, vec b) { return _mm256_div_ps(a, b); }
    static vec sqrt(vec a) { return _mm256_sqrt_ps(a); }
    static vec abs(vec a) { return _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); }
    static vec rne(vec a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
    static vec max_raw(vec a, vec b) { return _mm256_max_ps(a, b); }
    static vec min_raw(vec a, vec b) { return _mm256_min_ps(a, b); }
    static mask gt(vec a, vec b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
    static mask ge(vec a, vec b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
    static vec select(mask m, vec t, vec f) { return _mm256_blendv_ps(f, t, m); }
    static vec fmax(vec x, vec y) {
        return _mm256_blendv_ps(_mm256_max_ps(x, y), x, _mm256_cmp_ps(y, y, _CMP_UNORD_Q));
    }
    static vec fmin(vec x, vec y) {
        return _mm256_blendv_ps(_mm256_min_ps(x, y), x, _mm256_cmp_ps(y, y, _CMP_UNORD_Q));
    }
    static vec load_dst(dtype dt, const void *dst, int64_t off, int n) {
        alignas(32) float b[8] = {};
        for (int i = 0; i < n; ++i) {
            switch (dt) {
            case dtype::f32: b[i] = static_cast<const float *>(dst)[off + i]; break;
            case dtype::s32: b[i] = static_cast<float>(static_cast<const int32_t *>(dst)[off + i]); break;
            case dtype::s8: b[i] = static_cast<const int8_t *>(dst)[off + i]; break;
            default: b[i] = static_cast<const uint8_t *>(dst)[off + i]; break;
            }
        }
        return _mm256_load_ps(b);
    }
    static mask ordered(vec a) { return _mm256_cmp_ps(a, a, _CMP_ORD_Q); }
    static void store_f32(float *p, int n, vec y) {
        if (n == 8) return _mm256_storeu_ps(p, y);
        alignas(32) float b[8];
        _mm256_store_ps(b, y);
        std::memcpy(p, b, sizeof(float) * n);
    }
    static void store_s32(int32_t *p, int n, vec r) {
        __m256i i = _mm256_cvtps_epi32(r); // too large → INT_MIN
        const __m256 big = _mm256_cmp_ps(r, set1(2147483648.f), _CMP_GE_OQ);
        i = _mm256_castps_si256(
            _mm256_blendv_ps(_mm256_castsi256_ps(i), _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MAX)), big));
        if (n == 8) return _mm256_storeu_si256(reinterpret_cast<__m256i *>(p), i);
        alignas(32) int32_t b[8];
        _mm256_store_si256(reinterpret_cast<__m256i *>(b), i);
        std::memcpy(p, b, sizeof(int32_t) * n);
    }
    // y is within the 8-bit type's range: the saturating packs are exact.
    static void store_x8(bool is_unsigned, uint8_t *p, int n, vec y) {
        const __m256i i32 = _mm256_cvtps_epi32(y);
        const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(i32), _mm256_extracti128_si256(i32, 1));
        const __m128i b8 = is_unsigned ? _mm_packus_epi16(w16, w16) : _mm_packs_epi16(w16, w16);
        if (n == 8) return _mm_storel_epi64(reinterpret_cast<__m128i *>(p), b8);
        alignas(16) uint8_t t[16];
        _mm_store_si128(reinterpret_cast<__m128i *>(t), b8);
        std::memcpy(p, t, static_cast<size_t>(n));
    }
};

} // namespace

const pipeline_fn run_pipeline_avx2 = run_pipeline_t<v256>;

} // namespace qconv::jit

#pragma GCC pop_options
