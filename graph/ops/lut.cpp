// Table lookups on 8-bit integers (graph/ops/lut.h). The unary lookup uses
// AVX-512 VBMI's byte permutes (four 64-entry tables) where the CPU has them,
// a plain loop elsewhere; the binary lookup gathers 16 entries of its 64 KiB
// table at once with AVX-512 (b per element or one per row), else a loop;
// the NHWC lookup with a table per channel gathers the same way.
#include "graph/ops/lut.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "core/parallel.h"

namespace qconv::graph::detail {

namespace {

constexpr int64_t kParallelMin = 1 << 16; // elements below which one thread does it
constexpr int64_t kChunk = 1 << 14;       // elements per parallel task

void lut_unary_plain(const uint8_t *x, int64_t n, const uint8_t *t, uint8_t *y) {
    for (int64_t i = 0; i < n; ++i) y[i] = t[x[i]];
}

__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void lut_unary_vbmi(const uint8_t *x, int64_t n,
                                                                           const uint8_t *t, uint8_t *y) {
    const __m512i t0 = _mm512_loadu_si512(t), t1 = _mm512_loadu_si512(t + 64);
    const __m512i t2 = _mm512_loadu_si512(t + 128), t3 = _mm512_loadu_si512(t + 192);
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512i v = _mm512_loadu_si512(x + i);
        // Entries 0..127 from t0:t1, 128..255 from t2:t3 (the permute reads the low 7 bits).
        const __m512i lo = _mm512_permutex2var_epi8(t0, v, t1);
        const __m512i hi = _mm512_permutex2var_epi8(t2, v, t3);
        const __mmask64 high = _mm512_movepi8_mask(v); // bit 7 set: 128..255
        _mm512_storeu_si512(y + i, _mm512_mask_blend_epi8(high, lo, hi));
    }
    lut_unary_plain(x + i, n - i, t, y + i);
}

// 16 lookups at once: the table read as dwords (index >> 2, so no read
// passes its end), the byte picked by a shift of 8·(index & 3).
__attribute__((target("avx512f,avx512bw"))) inline __m128i lookup16(const uint8_t *table, __m512i idx) {
    const __m512i words = _mm512_i32gather_epi32(_mm512_srli_epi32(idx, 2), table, 4);
    const __m512i shift = _mm512_slli_epi32(_mm512_and_si512(idx, _mm512_set1_epi32(3)), 3);
    return _mm512_cvtepi32_epi8(_mm512_srlv_epi32(words, shift));
}

// y[i] = table[a[i]·256 + b[i·b_step]] for b_step 1 (b per element) or 0 (one b).
__attribute__((target("avx512f,avx512bw"))) void
lut_binary_row_avx512(const uint8_t *a, const uint8_t *b, int64_t b_step, int64_t n, const uint8_t *table, uint8_t *y) {
    int64_t i = 0;
    const __m512i one_b = _mm512_set1_epi32(b[0]);
    for (; i + 16 <= n; i += 16) {
        const __m512i hi = _mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(a + i))), 8);
        const __m512i lo = b_step ? _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(b + i))) : one_b;
        _mm_storeu_si128((__m128i *)(y + i), lookup16(table, _mm512_or_si512(hi, lo)));
    }
    for (; i < n; ++i) y[i] = table[(unsigned(a[i]) << 8) | b[i * b_step]];
}

// y[i] = table[hi[i] + x[i]] (hi: a table's offset per element, a multiple of 256).
__attribute__((target("avx512f,avx512bw"))) void lut_offset_rows_avx512(const uint8_t *x, const int32_t *hi, int64_t n,
                                                                        const uint8_t *table, uint8_t *y) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(x + i)));
        _mm_storeu_si128((__m128i *)(y + i), lookup16(table, _mm512_or_si512(_mm512_loadu_si512(hi + i), lo)));
    }
    for (; i < n; ++i) y[i] = table[hi[i] + x[i]];
}

bool has_avx512bw() {
    static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    return yes;
}

bool has_vbmi() {
    static const bool yes = __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bw");
    return yes;
}

} // namespace

void lut_unary(const uint8_t *x, int64_t n, const uint8_t *table, uint8_t *y) {
    const bool vbmi = has_vbmi();
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    impl::parallel_for_if(n >= kParallelMin, chunks, [&](int64_t c) {
        const int64_t b = c * kChunk, e = b + kChunk < n ? b + kChunk : n;
        if (vbmi) lut_unary_vbmi(x + b, e - b, table, y + b);
        else lut_unary_plain(x + b, e - b, table, y + b);
    });
}

void lut_per_channel(const uint8_t *x, int64_t outer, int64_t C, int64_t inner, bool nhwc, const uint8_t *table,
                     uint8_t *y) {
    const bool vbmi = has_vbmi();
    if (!nhwc) { // a plane per channel: the unary lookup with that channel's table
        impl::parallel_for_if(outer * C * inner >= kParallelMin, outer * C, [&](int64_t p) {
            const uint8_t *t = table + (p % C) * 256;
            if (vbmi) lut_unary_vbmi(x + p * inner, inner, t, y + p * inner);
            else lut_unary_plain(x + p * inner, inner, t, y + p * inner);
        });
        return;
    }
    const int64_t pixels = outer * inner;
    if (has_avx512bw()) { // pixels in tasks of ~4096 elements, each element's table offset from one pattern
        const int64_t per_task = std::max<int64_t>(1, 4096 / C);
        std::vector<int32_t> offset(static_cast<size_t>(per_task * C));
        for (size_t i = 0; i < offset.size(); ++i) offset[i] = static_cast<int32_t>((i % C) * 256);
        const int64_t tasks = (pixels + per_task - 1) / per_task;
        impl::parallel_for_if(pixels * C >= kParallelMin, tasks, [&](int64_t t) {
            const int64_t p = t * per_task, n = std::min(per_task, pixels - p) * C;
            lut_offset_rows_avx512(x + p * C, offset.data(), n, table, y + p * C);
        });
        return;
    }
    impl::parallel_for_if(pixels * C >= kParallelMin, pixels, [&](int64_t p) {
        const uint8_t *xp = x + p * C;
        uint8_t *yp = y + p * C;
        for (int64_t c = 0; c < C; ++c) yp[c] = table[c * 256 + xp[c]];
    });
}

void lut_binary(const uint8_t *a, const uint8_t *b, const lut2_geometry &g, const uint8_t *table, uint8_t *y) {
    const int64_t rows = g.outer * g.mid, inner = g.inner;
    const bool wide = has_avx512bw();
    impl::parallel_for_if(rows * inner >= kParallelMin, rows, [&](int64_t r) {
        const int64_t o = r / g.mid, m = r % g.mid;
        const uint8_t *ar = a + r * inner;
        const uint8_t *br = b + o * g.b_outer + m * g.b_mid;
        uint8_t *yr = y + r * inner;
        if (wide && (g.b_inner == 0 || g.b_inner == 1)) {
            lut_binary_row_avx512(ar, br, g.b_inner, inner, table, yr);
        } else if (g.b_inner == 1) {
            for (int64_t i = 0; i < inner; ++i) yr[i] = table[(unsigned(ar[i]) << 8) | br[i]];
        } else if (g.b_inner == 0) {
            const uint8_t *row = table + (unsigned(br[0]));
            for (int64_t i = 0; i < inner; ++i) yr[i] = row[unsigned(ar[i]) << 8];
        } else {
            for (int64_t i = 0; i < inner; ++i) yr[i] = table[(unsigned(ar[i]) << 8) | br[i * g.b_inner]];
        }
    });
}

} // namespace qconv::graph::detail
