// Activation conversions (core/convert.h): scalar definitions and AVX-512 loops.
#include "core/convert.h"

#include <immintrin.h>

#include <cstring>

namespace qconv::detail {

namespace {

// GCC 12 warns -Wmaybe-uninitialized / -Wuninitialized inside its own
// unmasked AVX-512 intrinsics (their undefined pass-through operand).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

__attribute__((target("avx512f"))) void f16_to_f32_avx512(const uint16_t *s, float *d, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(s + i))));
    for (; i < n; ++i) d[i] = f16_to_f32(s[i]);
}

// vcvtps2ph with round to nearest even; MXCSR's DAZ/FTZ are off in qconv's
// threads (the default), so denormals convert as in the scalar form.
__attribute__((target("avx512f"))) void f32_to_f16_avx512(const float *s, uint16_t *d, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(d + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; ++i) d[i] = f32_to_f16(s[i]);
}

__attribute__((target("avx512f"))) void bf16_to_f32_avx512(const uint16_t *s, float *d, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(s + i)));
        _mm512_storeu_si512(d + i, _mm512_slli_epi32(h, 16));
    }
    for (; i < n; ++i) d[i] = bf16_to_f32(s[i]);
}

// The scalar f32_to_bf16 on 16 lanes: x + 0x7FFF + lsb, NaN quieted.
__attribute__((target("avx512f,avx512bw"))) void f32_to_bf16_avx512(const float *s, uint16_t *d, int64_t n) {
    int64_t i = 0;
    const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), inf = _mm512_set1_epi32(0x7F800000);
    const __m512i bias = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x400000);
    for (; i + 16 <= n; i += 16) {
        const __m512i x = _mm512_loadu_si512(s + i);
        const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, abs_mask), inf);
        __m512i r = _mm512_add_epi32(x, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(x, 16), one)));
        r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(x, quiet));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(d + i), _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
    }
    for (; i < n; ++i) d[i] = f32_to_bf16(s[i]);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

} // namespace

void to_f32(dtype from, const void *src, float *dst, int64_t n, bool avx512) {
    const auto *h = static_cast<const uint16_t *>(src);
    switch (from) {
    case dtype::f32: std::memcpy(dst, src, size_t(n) * sizeof(float)); return;
    case dtype::f16:
        if (avx512) return f16_to_f32_avx512(h, dst, n);
        for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(h[i]);
        return;
    case dtype::bf16:
        if (avx512) return bf16_to_f32_avx512(h, dst, n);
        for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
        return;
    default: fail("dt", std::string("no activation conversion from ") + to_string(from));
    }
}

void from_f32(dtype to, const float *src, void *dst, int64_t n, bool avx512) {
    auto *h = static_cast<uint16_t *>(dst);
    switch (to) {
    case dtype::f32: std::memcpy(dst, src, size_t(n) * sizeof(float)); return;
    case dtype::f16:
        if (avx512) return f32_to_f16_avx512(src, h, n);
        for (int64_t i = 0; i < n; ++i) h[i] = f32_to_f16(src[i]);
        return;
    case dtype::bf16:
        if (avx512) return f32_to_bf16_avx512(src, h, n);
        for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
        return;
    default: fail("dt", std::string("no activation conversion to ") + to_string(to));
    }
}

} // namespace qconv::detail
