// The executor's u8/i8 glue between lowered convolutions, written on SSE2
// (every x86-64 CPU; the library is built for the baseline ISA, where the
// compiler does not vectorize these loops by itself: std::nearbyint is a libm
// call and the u8 max loop is reloaded through char pointers). Each gives the
// values of the executor's general loops bit for bit (docs/graph.md,
// "Executor"): tests/test_graph_ops.cpp compares them on odd channel counts,
// padding and extreme values. The image input's quantization (f32 NCHW in,
// 3 channels NHWC out) also has an AVX-512 loop and a byte shuffle, chosen at
// run time under the ISA cap: the same values.
#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <immintrin.h>
#endif

#include "core/parallel.h"
#include "graph/ops/ops.h"
#include "qconv/types.h"

namespace qconv::graph::detail {

namespace {

constexpr int64_t kParallelMin = 1 << 16;
constexpr int64_t kChunk = 1 << 14; // elements per task of the plain Q/DQ loops

// dst[c] = max over the k rows of rows[r][c], c in [0, C). Signed bytes are
// compared as unsigned after flipping their sign bit (x ^ 0x80 is monotone).
template <bool is_signed>
void max_rows(uint8_t *__restrict dst, const uint8_t *const *rows, int64_t k, int64_t C) {
    int64_t c = 0;
#if defined(__SSE2__)
    const __m128i flip = _mm_set1_epi8(is_signed ? static_cast<char>(0x80) : 0);
    for (; c + 64 <= C; c += 64) {
        const uint8_t *p = rows[0] + c;
        __m128i a0 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)), flip);
        __m128i a1 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 16)), flip);
        __m128i a2 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 32)), flip);
        __m128i a3 = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 48)), flip);
        for (int64_t r = 1; r < k; ++r) {
            const uint8_t *q = rows[r] + c;
            a0 = _mm_max_epu8(a0, _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(q)), flip));
            a1 = _mm_max_epu8(a1, _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(q + 16)), flip));
            a2 = _mm_max_epu8(a2, _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(q + 32)), flip));
            a3 = _mm_max_epu8(a3, _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(q + 48)), flip));
        }
        _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + c), _mm_xor_si128(a0, flip));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + c + 16), _mm_xor_si128(a1, flip));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + c + 32), _mm_xor_si128(a2, flip));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + c + 48), _mm_xor_si128(a3, flip));
    }
    for (; c + 16 <= C; c += 16) {
        __m128i a = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(rows[0] + c)), flip);
        for (int64_t r = 1; r < k; ++r)
            a = _mm_max_epu8(a, _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(rows[r] + c)), flip));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + c), _mm_xor_si128(a, flip));
    }
#endif
    using T = std::conditional_t<is_signed, int8_t, uint8_t>;
    for (; c < C; ++c) {
        T m = static_cast<T>(rows[0][c]);
        for (int64_t r = 1; r < k; ++r) m = std::max(m, static_cast<T>(rows[r][c]));
        dst[c] = static_cast<uint8_t>(m);
    }
}

template <bool is_signed>
void max_pool_nhwc_impl(const pool_geometry &p, const uint8_t *src, uint8_t *out) {
    const int64_t C = p.C, H = p.H, W = p.W, OH = p.OH, OW = p.OW;
    const bool par = p.N * OH * OW * C * p.KH * p.KW >= kParallelMin;
    impl::parallel_for_2d(
        p.N, OH,
        [&](int64_t b, int64_t oh) {
            std::vector<const uint8_t *> rows(static_cast<size_t>(p.KH * p.KW));
            const int64_t ha = std::max<int64_t>(oh * p.SH - p.PT, 0), hb = std::min(oh * p.SH - p.PT + p.KH, H);
            for (int64_t ow = 0; ow < OW; ++ow) {
                const int64_t wa = std::max<int64_t>(ow * p.SW - p.PL, 0), wb = std::min(ow * p.SW - p.PL + p.KW, W);
                uint8_t *dst = out + ((b * OH + oh) * OW + ow) * C;
                if (ha >= hb || wa >= wb) {
                    std::memset(dst, 0, static_cast<size_t>(C));
                    continue;
                }
                int64_t k = 0;
                for (int64_t h = ha; h < hb; ++h)
                    for (int64_t w = wa; w < wb; ++w) rows[k++] = src + ((b * H + h) * W + w) * C;
                max_rows<is_signed>(dst, rows.data(), k, C);
            }
        },
        par);
}

#if defined(__SSE2__)
// GCC 12's AVX-512 intrinsic headers warn -Wmaybe-uninitialized on their own
// undefined pass-through operands (as in core/convert.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
// quantize_run on 16 lanes: the quotient rounded by vrndscaleps (round half
// to even, every magnitude: nearbyint itself, so no clamp before it), then
// the zero point and the clamp as quantize_run; returns the elements done.
__attribute__((target("avx512f,avx512bw"))) int64_t quantize_run_avx512(const float *x, int64_t n, float sc, float zf,
                                                                        bool u8, uint8_t *y) {
    const float lo = u8 ? 0.f : -128.f, hi = u8 ? 255.f : 127.f;
    const __m512 vs = _mm512_set1_ps(sc), vz = _mm512_set1_ps(zf), vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_div_ps(_mm512_loadu_ps(x + i), vs);
        const __mmask16 num = _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q);
        __m512 q = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(q, vz), vlo), vhi);
        const __m512i r = _mm512_maskz_mov_epi32(num, _mm512_cvtps_epi32(q));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(y + i), _mm512_cvtepi32_epi8(r)); // in range: the low byte
    }
    return i;
}

// f32((x − zp) · sc) of 16 bytes at p; then its halves as doubles.
__attribute__((target("avx512f,avx512bw"))) inline __m512 dq16(const uint8_t *p, bool u8, __m512i vz, __m512 vs) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p));
    const __m512i d = u8 ? _mm512_cvtepu8_epi32(b) : _mm512_cvtepi8_epi32(b);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(d, vz)), vs);
}
__attribute__((target("avx512f,avx512bw"))) inline __m512d pd_lo(__m512 v) {
    return _mm512_cvtps_pd(_mm512_castps512_ps256(v));
}
__attribute__((target("avx512f,avx512bw"))) inline __m512d pd_hi(__m512 v) {
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

// acc[c] = Σ_p f32((x[p·C + c] − zp) · sc) over the pixels p in [0, HW), the
// channels in blocks of 16 (a double vector per 8): returns the channels done.
__attribute__((target("avx512f,avx512bw"))) int64_t dq_sum_nhwc_avx512(const uint8_t *x, bool u8, int64_t C, int64_t HW,
                                                                       float sc, int32_t zp, double *acc) {
    const __m512 vs = _mm512_set1_ps(sc);
    const __m512i vz = _mm512_set1_epi32(zp);
    int64_t c = 0;
    for (; c + 32 <= C; c += 32) {
        __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t p = 0; p < HW; ++p) {
            const __m512 v0 = dq16(x + p * C + c, u8, vz, vs), v1 = dq16(x + p * C + c + 16, u8, vz, vs);
            a0 = _mm512_add_pd(a0, pd_lo(v0));
            a1 = _mm512_add_pd(a1, pd_hi(v0));
            a2 = _mm512_add_pd(a2, pd_lo(v1));
            a3 = _mm512_add_pd(a3, pd_hi(v1));
        }
        _mm512_storeu_pd(acc + c, a0);
        _mm512_storeu_pd(acc + c + 8, a1);
        _mm512_storeu_pd(acc + c + 16, a2);
        _mm512_storeu_pd(acc + c + 24, a3);
    }
    for (; c + 16 <= C; c += 16) {
        __m512d a0 = _mm512_setzero_pd(), a1 = a0;
        for (int64_t p = 0; p < HW; ++p) {
            const __m512 v = dq16(x + p * C + c, u8, vz, vs);
            a0 = _mm512_add_pd(a0, pd_lo(v));
            a1 = _mm512_add_pd(a1, pd_hi(v));
        }
        _mm512_storeu_pd(acc + c, a0);
        _mm512_storeu_pd(acc + c + 8, a1);
    }
    return c;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// interleave_fixed<3> for 16 pixels: three planes of 16 bytes into 48.
__attribute__((target("ssse3"))) void interleave3_16(const uint8_t *a, const uint8_t *b, const uint8_t *c,
                                                     uint8_t *out) {
    // Output byte k of vector v (k = 16v + i) is plane k % 3's byte k / 3.
    alignas(16) static const uint8_t masks[3][3][16] = {
        {{0, 128, 128, 1, 128, 128, 2, 128, 128, 3, 128, 128, 4, 128, 128, 5},
         {128, 0, 128, 128, 1, 128, 128, 2, 128, 128, 3, 128, 128, 4, 128, 128},
         {128, 128, 0, 128, 128, 1, 128, 128, 2, 128, 128, 3, 128, 128, 4, 128}},
        {{128, 128, 6, 128, 128, 7, 128, 128, 8, 128, 128, 9, 128, 128, 10, 128},
         {5, 128, 128, 6, 128, 128, 7, 128, 128, 8, 128, 128, 9, 128, 128, 10},
         {128, 5, 128, 128, 6, 128, 128, 7, 128, 128, 8, 128, 128, 9, 128, 128}},
        {{128, 11, 128, 128, 12, 128, 128, 13, 128, 128, 14, 128, 128, 15, 128, 128},
         {128, 128, 11, 128, 128, 12, 128, 128, 13, 128, 128, 14, 128, 128, 15, 128},
         {10, 128, 128, 11, 128, 128, 12, 128, 128, 13, 128, 128, 14, 128, 128, 15}}};
    const __m128i p[3] = {_mm_loadu_si128(reinterpret_cast<const __m128i *>(a)),
                          _mm_loadu_si128(reinterpret_cast<const __m128i *>(b)),
                          _mm_loadu_si128(reinterpret_cast<const __m128i *>(c))};
    for (int v = 0; v < 3; ++v) {
        __m128i o = _mm_setzero_si128();
        for (int pl = 0; pl < 3; ++pl)
            o = _mm_or_si128(o,
                             _mm_shuffle_epi8(p[pl], _mm_load_si128(reinterpret_cast<const __m128i *>(masks[v][pl]))));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(out + 16 * v), o);
    }
}
#endif

bool use_avx512() { return max_cpu_isa() >= isa::avx512_core; }

// y[i] = saturate(nearbyint(x[i] / sc) + zp) (NaN → 0), i in [0, n).
// Vector lanes: the quotient is clamped to [lo − zp − 1, hi − zp + 1] first
// (rounding is monotone, so the saturated result is the same), which keeps
// it within ±2^22, where adding and subtracting 1.5·2^23 rounds to the
// nearest integer, ties to even, exactly as nearbyint in the default mode.
void quantize_run(const float *x, int64_t n, float sc, float zf, bool u8, uint8_t *y) {
    const float lo = u8 ? 0.f : -128.f, hi = u8 ? 255.f : 127.f;
    int64_t i = 0;
#if defined(__SSE2__)
    const int64_t nv = std::fabs(zf) <= 1048576.f ? n : 0; // the clamp below needs |zp| ≤ 2^20
    if (nv >= 16 && use_avx512()) i = quantize_run_avx512(x, nv, sc, zf, u8, y);
    const __m128 vs = _mm_set1_ps(sc), vz = _mm_set1_ps(zf), vlo = _mm_set1_ps(lo), vhi = _mm_set1_ps(hi);
    const __m128 qlo = _mm_set1_ps(lo - zf - 1.f), qhi = _mm_set1_ps(hi - zf + 1.f);
    const __m128 magic = _mm_set1_ps(12582912.f);
    auto one = [&](const float *p) {
        const __m128 v = _mm_div_ps(_mm_loadu_ps(p), vs);
        const __m128 nan = _mm_cmpunord_ps(v, v);
        __m128 q = _mm_min_ps(_mm_max_ps(v, qlo), qhi);
        q = _mm_sub_ps(_mm_add_ps(q, magic), magic);
        q = _mm_min_ps(_mm_max_ps(_mm_add_ps(q, vz), vlo), vhi);
        return _mm_andnot_si128(_mm_castps_si128(nan), _mm_cvtps_epi32(q));
    };
    for (; i + 16 <= nv; i += 16) {
        const __m128i a = _mm_packs_epi32(one(x + i), one(x + i + 4));
        const __m128i b = _mm_packs_epi32(one(x + i + 8), one(x + i + 12));
        const __m128i r = u8 ? _mm_packus_epi16(a, b) : _mm_packs_epi16(a, b);
        _mm_storeu_si128(reinterpret_cast<__m128i *>(y + i), r);
    }
#endif
    for (; i < n; ++i) {
        float q = std::nearbyint(x[i] / sc);
        q = std::isnan(q) ? 0.f : std::min(std::max(q + zf, lo), hi);
        y[i] = u8 ? static_cast<uint8_t>(q) : static_cast<uint8_t>(static_cast<int8_t>(q));
    }
}

// y[i] = (x[i] − zp) · sc in f32, i in [0, n).
void dequantize_run(const uint8_t *x, int64_t n, float sc, int32_t zp, bool u8, float *y) {
    int64_t i = 0;
#if defined(__SSE2__)
    const __m128 vs = _mm_set1_ps(sc);
    const __m128i vz = _mm_set1_epi32(zp), zero = _mm_setzero_si128();
    for (; i + 16 <= n; i += 16) {
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(x + i));
        __m128i w0, w1;
        if (u8) {
            w0 = _mm_unpacklo_epi8(b, zero);
            w1 = _mm_unpackhi_epi8(b, zero);
        } else {
            w0 = _mm_srai_epi16(_mm_unpacklo_epi8(b, b), 8);
            w1 = _mm_srai_epi16(_mm_unpackhi_epi8(b, b), 8);
        }
        const __m128i d[4] = {
            _mm_srai_epi32(_mm_unpacklo_epi16(w0, w0), 16), _mm_srai_epi32(_mm_unpackhi_epi16(w0, w0), 16),
            _mm_srai_epi32(_mm_unpacklo_epi16(w1, w1), 16), _mm_srai_epi32(_mm_unpackhi_epi16(w1, w1), 16)};
        for (int k = 0; k < 4; ++k)
            _mm_storeu_ps(y + i + 4 * k, _mm_mul_ps(_mm_cvtepi32_ps(_mm_sub_epi32(d[k], vz)), vs));
    }
#endif
    for (; i < n; ++i) {
        const int32_t v = u8 ? int32_t(x[i]) : int32_t(static_cast<int8_t>(x[i]));
        y[i] = static_cast<float>(v - zp) * sc;
    }
}

// t[16·j + i] = rows[i·stride + j], i, j < 16: a 16x16 tile of bytes transposed.
void transpose16x16(const uint8_t *rows, int64_t stride, uint8_t *t) {
#if defined(__SSE2__)
    __m128i r[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i *>(rows + i * stride));
    // Rows are interleaved in pairs, quads, eights and sixteens: bytes, then
    // words, dwords and qwords. a[h][m]: columns 8h..8h+7 of rows 2m, 2m+1.
    __m128i a[2][8], b[2][4][2], d[2][2][2][2];
    for (int m = 0; m < 8; ++m) {
        a[0][m] = _mm_unpacklo_epi8(r[2 * m], r[2 * m + 1]);
        a[1][m] = _mm_unpackhi_epi8(r[2 * m], r[2 * m + 1]);
    }
    // b[h][q][g]: columns 8h + 4g .. +3 of rows 4q .. 4q+3.
    for (int h = 0; h < 2; ++h)
        for (int q = 0; q < 4; ++q) {
            b[h][q][0] = _mm_unpacklo_epi16(a[h][2 * q], a[h][2 * q + 1]);
            b[h][q][1] = _mm_unpackhi_epi16(a[h][2 * q], a[h][2 * q + 1]);
        }
    // d[h][g][o][k]: columns 8h + 4g + 2k, +1 of rows 8o .. 8o+7.
    for (int h = 0; h < 2; ++h)
        for (int g = 0; g < 2; ++g)
            for (int o = 0; o < 2; ++o) {
                d[h][g][o][0] = _mm_unpacklo_epi32(b[h][2 * o][g], b[h][2 * o + 1][g]);
                d[h][g][o][1] = _mm_unpackhi_epi32(b[h][2 * o][g], b[h][2 * o + 1][g]);
            }
    for (int h = 0; h < 2; ++h)
        for (int g = 0; g < 2; ++g)
            for (int k = 0; k < 2; ++k) {
                const int col = 8 * h + 4 * g + 2 * k;
                _mm_storeu_si128(reinterpret_cast<__m128i *>(t + 16 * col),
                                 _mm_unpacklo_epi64(d[h][g][0][k], d[h][g][1][k]));
                _mm_storeu_si128(reinterpret_cast<__m128i *>(t + 16 * (col + 1)),
                                 _mm_unpackhi_epi64(d[h][g][0][k], d[h][g][1][k]));
            }
#else
    for (int j = 0; j < 16; ++j)
        for (int i = 0; i < 16; ++i) t[16 * j + i] = rows[i * stride + j];
#endif
}

// out[p·C + c] = planes[c·stride + p] for p < len: C planes of bytes into
// pixels (a compile-time C for the images' 1, 3 and 4 channels).
template <int CC>
void interleave_fixed(const uint8_t *planes, int64_t stride, int64_t len, uint8_t *__restrict out) {
    int64_t p = 0;
#if defined(__SSE2__)
    if constexpr (CC == 3) // SSSE3: below sse41, qconv's lowest ISA level
        for (; p + 16 <= len; p += 16)
            interleave3_16(planes + p, planes + stride + p, planes + 2 * stride + p, out + 3 * p);
#endif
    for (; p < len; ++p)
        for (int c = 0; c < CC; ++c) out[p * CC + c] = planes[c * stride + p];
}
void interleave(const uint8_t *planes, int64_t stride, int64_t C, int64_t len, uint8_t *out) {
    switch (C) {
    case 1: std::memcpy(out, planes, static_cast<size_t>(len)); return;
    case 3: interleave_fixed<3>(planes, stride, len, out); return;
    case 4: interleave_fixed<4>(planes, stride, len, out); return;
    default:
        for (int64_t p = 0; p < len; ++p)
            for (int64_t c = 0; c < C; ++c) out[p * C + c] = planes[c * stride + p];
    }
}

// The plain (NCHW) layout in runs of one channel, cut in chunks: run(offset,
// length, channel) per chunk, in parallel (a per-tensor scale is one run).
template <class Run>
void channel_runs(const quant_params &q, Run run) {
    const int64_t NC = q.outer * q.C, inner = q.inner, chunks = (inner + kChunk - 1) / kChunk;
    impl::parallel_for_2d(
        NC, chunks,
        [&](int64_t nc, int64_t k) { run(nc * inner + k * kChunk, std::min(kChunk, inner - k * kChunk), nc % q.C); },
        NC * inner >= kParallelMin);
}

} // namespace

void max_pool_nhwc_8bit(const pool_geometry &p, bool is_signed, const uint8_t *src, uint8_t *dst) {
    if (is_signed) max_pool_nhwc_impl<true>(p, src, dst);
    else max_pool_nhwc_impl<false>(p, src, dst);
}

void quantize_f32(const float *x, const quant_params &q, bool u8, bool nhwc, uint8_t *y) {
    const int64_t N = q.outer, C = q.C, inner = q.inner, total = N * C * inner;
    auto sc = [&](int64_t c) { return q.scale[q.per_axis ? c : 0]; };
    auto zf = [&](int64_t c) { return static_cast<float>(q.zp[q.per_axis ? c : 0]); };
    if (!nhwc) {
        channel_runs(
            q, [&](int64_t off, int64_t len, int64_t c) { quantize_run(x + off, len, sc(c), zf(c), u8, y + off); });
        return;
    }
    // NCHW in, NHWC out: each block of B pixels is quantized plane by plane
    // into a small buffer and interleaved from there.
    constexpr int64_t B = 256;
    const int64_t blocks = (inner + B - 1) / B;
    impl::parallel_for_2d(
        N, blocks,
        [&](int64_t n, int64_t blk) {
            const int64_t i0 = blk * B, len = std::min(B, inner - i0);
            std::vector<uint8_t> tmp(static_cast<size_t>(C * B));
            for (int64_t c = 0; c < C; ++c)
                quantize_run(x + (n * C + c) * inner + i0, len, sc(c), zf(c), u8, tmp.data() + c * B);
            interleave(tmp.data(), B, C, len, y + (n * inner + i0) * C);
        },
        total >= kParallelMin);
}

// The sums of every (n, c) are exact in double (detail.h), so
// their order is free: channel vectors over NHWC pixels here, the general
// ReduceMean's order there, the same doubles.
void dequantize_mean(const uint8_t *x, bool u8, bool nhwc, int64_t N, int64_t C, int64_t HW, float sc, int32_t zp,
                     float *y) {
    auto value = [&](uint8_t b) {
        const int32_t q = u8 ? int32_t(b) : int32_t(static_cast<int8_t>(b));
        return static_cast<double>(static_cast<float>(q - zp) * sc);
    };
    impl::parallel_for(
        N,
        [&](int64_t n) {
            std::vector<double> acc(static_cast<size_t>(C), 0.0);
            const uint8_t *xn = x + n * C * HW;
            if (nhwc) {
                int64_t c0 = 0;
#if defined(__SSE2__)
                if (use_avx512()) c0 = dq_sum_nhwc_avx512(xn, u8, C, HW, sc, zp, acc.data());
#endif
                for (int64_t p = 0; p < HW; ++p)
                    for (int64_t c = c0; c < C; ++c) acc[c] += value(xn[p * C + c]);
            } else {
                for (int64_t c = 0; c < C; ++c)
                    for (int64_t p = 0; p < HW; ++p) acc[c] += value(xn[c * HW + p]);
            }
            for (int64_t c = 0; c < C; ++c) y[n * C + c] = static_cast<float>(acc[c] / static_cast<double>(HW));
        },
        N * C * HW >= kParallelMin);
}

void dequantize_to_f32(const uint8_t *x, const quant_params &q, bool u8, bool nhwc, float *y) {
    const int64_t N = q.outer, C = q.C, inner = q.inner, total = N * C * inner;
    auto sc = [&](int64_t c) { return q.scale[q.per_axis ? c : 0]; };
    auto zp = [&](int64_t c) { return static_cast<int32_t>(q.zp[q.per_axis ? c : 0]); };
    if (!nhwc) {
        channel_runs(
            q, [&](int64_t off, int64_t len, int64_t c) { dequantize_run(x + off, len, sc(c), zp(c), u8, y + off); });
        return;
    }
    // NHWC in, NCHW out: blocks of pixels, channel by channel (the block's
    // rows of C bytes stay in the cache while every plane takes its part);
    // full 16x16 tiles of bytes are transposed first and converted 16 at a time.
    constexpr int64_t B = 16;
    const int64_t blocks = (inner + B - 1) / B;
    impl::parallel_for_2d(
        N, blocks,
        [&](int64_t n, int64_t blk) {
            const int64_t i0 = blk * B, len = std::min(B, inner - i0);
            const uint8_t *in = x + (n * inner + i0) * C;
            int64_t c0 = 0;
            if (len == B)
                for (; c0 + 16 <= C; c0 += 16) {
                    uint8_t t[16 * 16];
                    transpose16x16(in + c0, C, t);
                    for (int64_t j = 0; j < 16; ++j)
                        dequantize_run(t + 16 * j, 16, sc(c0 + j), zp(c0 + j), u8, y + (n * C + c0 + j) * inner + i0);
                }
            for (int64_t c = c0; c < C; ++c) {
                const float s = sc(c);
                const int32_t z = zp(c);
                float *o = y + (n * C + c) * inner + i0;
                if (u8)
                    for (int64_t p = 0; p < len; ++p) o[p] = static_cast<float>(int32_t(in[p * C + c]) - z) * s;
                else
                    for (int64_t p = 0; p < len; ++p)
                        o[p] = static_cast<float>(int32_t(static_cast<int8_t>(in[p * C + c])) - z) * s;
            }
        },
        total >= kParallelMin);
}

void dequantize_nhwc_f32(const uint8_t *x, const quant_params &q, bool u8, float *y) {
    const int64_t C = q.C, pixels = q.outer * q.inner;
    std::vector<float> sc(static_cast<size_t>(C));
    std::vector<int32_t> zp(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) sc[c] = q.scale[c], zp[c] = static_cast<int32_t>(q.zp[c]);
    impl::parallel_for_if(pixels * C >= kParallelMin, pixels, [&](int64_t p) {
        const uint8_t *in = x + p * C;
        float *o = y + p * C;
        if (u8)
            for (int64_t c = 0; c < C; ++c) o[c] = static_cast<float>(int32_t(in[c]) - zp[c]) * sc[c];
        else
            for (int64_t c = 0; c < C; ++c)
                o[c] = static_cast<float>(int32_t(static_cast<int8_t>(in[c])) - zp[c]) * sc[c];
    });
}

} // namespace qconv::graph::detail
