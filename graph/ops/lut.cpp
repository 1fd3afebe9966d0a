// Table lookups on 8-bit integers (graph/ops/lut.h). The unary lookup uses
// AVX-512 VBMI's byte permutes (four 64-entry tables) where the CPU has them,
// a plain loop elsewhere; the binary lookup reads its 64 KiB table per element.
#include "graph/ops/lut.h"

#include <immintrin.h>

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

void lut_binary(const uint8_t *a, const uint8_t *b, const lut2_geometry &g, const uint8_t *table, uint8_t *y) {
    const int64_t rows = g.outer * g.mid, inner = g.inner;
    impl::parallel_for_if(rows * inner >= kParallelMin, rows, [&](int64_t r) {
        const int64_t o = r / g.mid, m = r % g.mid;
        const uint8_t *ar = a + r * inner;
        const uint8_t *br = b + o * g.b_outer + m * g.b_mid;
        uint8_t *yr = y + r * inner;
        if (g.b_inner == 1) {
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
