// Weight-compressed MatMul: packing, the threaded driver of the generated
// kernels (matmul_wc_gen.cpp) and the implementation-table rows.
#include "kernels/jit/matmul/matmul_wc.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/parallel.h"
#include "kernels/jit/matmul/matmul_wc.h"
#include "kernels/jit/matmul/matmul_wc_common.h"

namespace qconv::impl {
namespace {

using jit::matmul_wc_call;
using jit::matmul_wc_config;
using jit::matmul_wc_fn;
using jit::matmul_wc_prefill_call;
using jit::matmul_wc_prefill_config;
using jit::matmul_wc_prefill_fn;

// n f16 / bf16 values to f32, exactly (F16C's vcvtph2ps; bf16: the bits
// shifted up by 16). Every CPU the rows run on has AVX2 and F16C.
__attribute__((target("avx2,f16c"))) void x16_to_f32(dtype dt, const uint16_t *s, float *d, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i));
        if (dt == dtype::f16) _mm256_storeu_ps(d + i, _mm256_cvtph_ps(h));
        else _mm256_storeu_si256(reinterpret_cast<__m256i *>(d + i), _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    for (; i < n; ++i) d[i] = dt == dtype::f16 ? _cvtsh_ss(s[i]) : bf16_to_f32(s[i]);
}

// Row m of X (K elements of type dt) as f32: the row itself, or converted into buf (K floats).
const float *x_row_f32(const void *x, dtype dt, int64_t m, int64_t K, float *buf) {
    if (dt == dtype::f32) return static_cast<const float *>(x) + m * K;
    x16_to_f32(dt, static_cast<const uint16_t *>(x) + m * K, buf, K);
    return buf;
}

// Index of an activation type in the kernels' tables: f32, f16, bf16.
int x_index(dtype dt) { return dt == dtype::f16 ? 1 : dt == dtype::bf16 ? 2 : 0; }
constexpr dtype x_types[] = {dtype::f32, dtype::f16, dtype::bf16};

// Raw bits of element i (a byte, or a nibble for 4-bit types).
uint8_t raw_element(const uint8_t *w, dtype dt, int64_t i) {
    if (!four_bit(dt)) return w[i];
    return (w[i / 2] >> (4 * (i % 2))) & 0xF;
}

// Sizes of the packed layout for a descriptor and register width.
struct wc_layout {
    int64_t panel = 64, n_panels = 0;
    int64_t k_slices = 0;        // per panel (K, or ceil(K/2) for 4-bit)
    int64_t k_padded = 0;        // K rounded up to the slices (x stride)
    int64_t steps_per_group = 0; // k-slices per group
    int64_t n_groups = 1;
    int64_t param_floats = 0;                                // per panel per group
    bool lut = false;                                        // 4-bit table lookup (matmul_wc_config::lut)
    bool lut8 = false;                                       // ... with the 8-k block layout (matmul_wc_config::lut8)
    int col_bytes = 1;                                       // bytes per column and step
    bool zp_vec = false;                                     // a zp vector follows each scale vector
    int64_t panel_bytes() const { return k_slices * panel; } // k_slices: bytes per column
    int64_t panel_params() const { return n_groups * param_floats; }
};

wc_layout make_layout(const matmul_desc &d, bool zmm) {
    wc_layout l;
    l.panel = zmm ? 64 : 32;
    l.n_panels = (d.n + l.panel - 1) / l.panel;
    const bool fb = four_bit(d.wei_dt);
    l.n_groups = d.n_groups();
    // Table kernels for every 4-bit zmm case: f32(v − zp) for a tensor zp,
    // the identity and a zp vector subtraction for a per-column zp.
    l.lut = zmm && fb;
    l.lut8 = l.lut && (l.n_groups == 1 || d.group_size() % 8 == 0);
    l.col_bytes = l.lut8 ? 4 : 1;
    // k per step: 8-bit 1, 4-bit 2, lut8 8; K is padded to whole steps.
    const int64_t kps = l.lut8 ? 8 : fb ? 2 : 1;
    l.k_padded = (d.k + kps - 1) / kps * kps;
    l.k_slices = l.k_padded / kps * l.col_bytes;
    l.steps_per_group = l.n_groups == 1 ? l.k_padded / kps : d.group_size() / kps;
    l.zp_vec = l.lut ? d.zp == matmul_desc::zp_kind::per_group : d.zp != matmul_desc::zp_kind::none;
    l.param_floats = (l.zp_vec ? 2 : 1) * l.panel;
    return l;
}

struct wc_packed : packed {
    alignas(64) float lut[16] = {}; // f32(v − zp) per nibble value v (lut kernels)
    aligned_buffer<uint8_t> wei;
    aligned_buffer<float> params;
    std::vector<float> bias;
};

class matmul_wc_kernel : public matmul_kernel {
public:
    matmul_wc_kernel(const matmul_desc &d, const matmul_wc_plan &pl)
        : d_(d), zmm_(pl.width == wc_width::zmm), l_(make_layout(d, zmm_)) {
        const bool zmm = zmm_;
        if (pl.prefill()) {
            prefill_ = true;
            streaming_ = false;
            plan_prefill();
            return;
        }
        // Streaming: one block of all M rows over whole panels, pc panels per
        // call. Blocked: blocks of blocked_mb rows (and one tail block) over
        // half panels.
        const bool streaming = pl.s == matmul_wc_plan::shape::streaming;
        streaming_ = streaming;
        block_m_ = streaming ? static_cast<int>(d.m) : jit::matmul_wc_blocked_mb(zmm);
        nv_ = streaming ? 4 : 2;
        pc_ = streaming ? pl.pc : 1;
        n_calls_ = (l_.n_panels + pc_ - 1) / pc_;
        // Streaming: one kernel per type of x (the kernel reads f16 / bf16
        // rows itself); blocked: x is packed (and converted) by the driver.
        for (int xi = 0; xi < 3; ++xi) {
            fns_[xi].assign(static_cast<size_t>(block_m_ + 1), nullptr);
            if (xi > 0 && !streaming) continue;
            for (int mb : {block_m_, static_cast<int>(d.m % block_m_)}) {
                if (mb == 0 || mb > d.m || fns_[xi][mb]) continue;
                matmul_wc_config c;
                c.wei_dt = d.wei_dt;
                c.lut = l_.lut;
                c.lut8 = l_.lut8;
                c.zp = l_.zp_vec;
                c.zmm = zmm;
                c.mb = mb;
                c.nv = nv_;
                c.pc = pc_;
                c.panel_bytes = l_.panel_bytes();
                c.panel_params = l_.panel_params();
                c.steps_per_group = l_.steps_per_group;
                c.n_groups = l_.n_groups;
                c.x_stride = l_.k_padded;
                c.prefetch = streaming;
                c.x_packed = !streaming;
                c.x_dt = x_types[xi];
                gens_.push_back(jit::make_matmul_wc_generator(c));
                fns_[xi][mb] = gens_.back()->entry<matmul_wc_fn>();
            }
        }
    }

    // Panels per streaming call (weight streams per core): as many as ~24
    // (zmm) / 12 (ymm) accumulators allow, at most 4 (zmm) / 3 (ymm). The
    // lut8 kernels are bound by vector µops rather than by the memory, so
    // for one row they read 2 panels: 8 accumulators in two sets (the low
    // and high nibbles in independent FMA chains) beside the 8 x registers.
    static int streams(const matmul_desc &d, bool zmm, const wc_layout &l) {
        const int most = l.lut8 && d.m == 1 ? 2 : zmm ? 4 : 3;
        return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(most, (zmm ? 24 : 12) / (4 * d.m))));
    }

    // The panels a packing holds: whole calls of pc panels for every pc in 1..4.
    static int64_t padded_panels(int64_t np) {
        int64_t most = np;
        for (int64_t pc = 1; pc <= 4; ++pc) most = std::max(most, (np + pc - 1) / pc * pc);
        return most;
    }

    // The packed layout depends on K, N, the types and the register width,
    // never on M (make_layout, padded_panels).
    std::string packing() const override { return zmm_ ? "wc:zmm" : "wc:ymm"; }

    std::shared_ptr<const packed> pack(const matmul_weights &w) const override {
        check_wc_weights(d_, w);
        auto p = std::make_shared<wc_packed>();
        // Whole calls of pc panels for every pc an M may give (1..4), so that
        // the kernels of every M share one packing (packing()); the extra
        // panels stay zero (scale 0, never stored). lut8 loads read up to 3
        // bytes past a vector's block: 64 bytes of slack.
        const int64_t panels = padded_panels(l_.n_panels);
        p->wei = alloc_aligned<uint8_t>(static_cast<size_t>(panels * l_.panel_bytes() + 64));
        p->params = alloc_aligned<float>(static_cast<size_t>(panels * l_.panel_params()));
        if (d_.with_bias) p->bias.assign(w.bias, w.bias + d_.n);
        const int32_t zp = d_.zp == matmul_desc::zp_kind::per_tensor ? w.zp[0] : 0;
        for (int v = 0; v < 16; ++v)
            p->lut[v] = static_cast<float>((d_.wei_dt == dtype::s4 && v >= 8 ? v - 16 : v) - zp);
        const int64_t np = l_.n_panels;
        const bool big = np > 1 && np * l_.panel_bytes() > (1 << 20);
        impl::parallel((big) ? 0 : 1, [&](int ithr_, int nthr_) {
            int64_t pi_b, pi_e;
            impl::balance(np, ithr_, nthr_, pi_b, pi_e);
            for (int64_t pi = pi_b; pi < pi_e; ++pi) pack_panel(w, pi, *p);
        });
        return p;
    }

    void execute(const packed &pk, const float *x, float *y, int threads) const override {
        execute_x(pk, x, dtype::f32, y, threads);
    }

    // f16 / bf16 X: the streaming kernels read it (converted where they load
    // it); the blocked and prefill shapes convert it in the driver's packing
    // of x (k-major), which is a pass over X anyway.
    bool takes_x(dtype x_dt) const override { return x_dt == dtype::f32 || x_dt == dtype::f16 || x_dt == dtype::bf16; }

    void execute_x(const packed &pk, const void *x, dtype x_dt, float *y, int threads) const override {
        if (!takes_x(x_dt)) fail("x", std::string("no kernel for activations of type ") + to_string(x_dt));
        const auto &p = static_cast<const wc_packed &>(pk);
        if (prefill_) return execute_prefill(p, x, x_dt, y, threads);
        const int64_t M = d_.m, N = d_.n, K = d_.k, P = l_.panel;
        const size_t es = x_dt == dtype::f32 ? 4 : 2; // bytes per element of x
        // 4-bit weights with odd K read one x column past K: give them a zero
        // (a zero word is 0 in f16 and bf16 too).
        std::vector<uint8_t> xpad;
        const void *xs = x;
        if (l_.k_padded != K && streaming_) {
            xpad.assign(static_cast<size_t>(M * l_.k_padded) * es, 0);
            for (int64_t m = 0; m < M; ++m)
                std::memcpy(&xpad[m * l_.k_padded * es], static_cast<const uint8_t *>(x) + m * K * es, K * es);
            xs = xpad.data();
        }
        // Blocked shape: each row block's x packed k-major (x[k][m]), the
        // block of rows m0.. at xs + m0·k_padded.
        const int max_threads = impl::resolve_threads(threads);
        std::vector<float> xt;
        if (!streaming_) {
            const int64_t Kp = l_.k_padded;
            xt.assign(static_cast<size_t>(M * Kp), 0.f); // k >= K stays 0
            const int64_t n_blocks = (M + block_m_ - 1) / block_m_;
            float *xtp = xt.data();
            impl::parallel(static_cast<int>(std::min<int64_t>(n_blocks, max_threads)), [&](int ithr_, int nthr_) {
                int64_t b_b, b_e;
                impl::balance(n_blocks, ithr_, nthr_, b_b, b_e);
                std::vector<float> row(x_dt == dtype::f32 ? 0 : static_cast<size_t>(K)); // a converted row
                for (int64_t b = b_b; b < b_e; ++b) {
                    const int64_t m0 = b * block_m_, mb = std::min<int64_t>(block_m_, M - m0);
                    float *dst = xtp + m0 * Kp;
                    for (int64_t m = 0; m < mb; ++m) {
                        const float *src = x_row_f32(x, x_dt, m0 + m, K, row.data());
                        for (int64_t k = 0; k < K; ++k) dst[k * mb + m] = src[k];
                    }
                }
            });
            xs = xtp;
        }
        const matmul_wc_fn *fns = fns_[x_index(streaming_ ? x_dt : dtype::f32)].data();
        const int vl = zmm_ ? 16 : 8;
        const int64_t part = nv_ * vl;  // columns of a panel per call
        const int64_t parts = P / part; // calls per panel and row block
        const int64_t m_blocks = (M + block_m_ - 1) / block_m_;
        const int64_t per_call = parts * m_blocks;
        const int64_t items = n_calls_ * per_call;
        const int nt = static_cast<int>(std::min<int64_t>(items, max_threads));
        const float *bias = d_.with_bias ? p.bias.data() : nullptr;
        // Items in (panel group, part, row block) order: a thread's consecutive
        // items reuse the same weights from its cache.
        impl::parallel(nt, [&](int ithr_, int nthr_) {
            int64_t it_b, it_e;
            impl::balance(items, ithr_, nthr_, it_b, it_e);
            for (int64_t it = it_b; it < it_e; ++it) {
                const int64_t p0 = (it / per_call) * pc_, h = (it % per_call) / m_blocks;
                const int64_t m0 = (it % m_blocks) * block_m_;
                if (p0 * P + h * part >= N) continue;
                const int mb = static_cast<int>(std::min<int64_t>(block_m_, M - m0));
                alignas(64) float out[16 * 64];
                matmul_wc_call call;
                call.w = p.wei.get() + p0 * l_.panel_bytes() + h * part * l_.col_bytes;
                call.params = p.params.get() + p0 * l_.panel_params() + h * part;
                call.x = reinterpret_cast<const float *>(static_cast<const uint8_t *>(xs) +
                                                         m0 * l_.k_padded * (streaming_ ? es : 4));
                call.out = out;
                call.lut = p.lut;
                fns[mb](&call);
                for (int j = 0; j < pc_; ++j) {
                    const int64_t n0 = (p0 + j) * P + h * part;
                    if (n0 >= N) break;
                    const int64_t cols = std::min<int64_t>(part, N - n0);
                    for (int m = 0; m < mb; ++m) {
                        float *yr = y + (m0 + m) * N + n0;
                        const float *o = out + (m * pc_ + j) * P;
                        if (bias)
                            for (int64_t c = 0; c < cols; ++c) yr[c] = o[c] + bias[n0 + c];
                        else std::memcpy(yr, o, cols * sizeof(float));
                    }
                }
            }
        });
    }

private:
    // ---- the prefill shape (matmul_wc.h)
    // A K-chunk: whole groups [g0, g0 + n_groups), or the part [k0, k0 + k_len)
    // of group g0 (part_in: not its first chunk; part_out: not its last).
    struct prefill_chunk {
        int64_t k0 = 0, k_len = 0, g0 = 0, n_groups = 1;
        matmul_wc_fn unpack = nullptr;
        matmul_wc_prefill_fn fma[8] = {}; // by rows of the block (1..6)
    };
    // k per chunk: the unpacked chunk (256 k x 64 columns, 64 KB) stays in L2.
    static constexpr int64_t prefill_chunk_k = 256;
    // Rows swept over one unpacked chunk (at most; see execute_prefill).
    static constexpr int64_t prefill_range_rows = 256;

    void plan_prefill() {
        const int64_t kps = l_.lut8 ? 8 : four_bit(d_.wei_dt) ? 2 : 1;
        const int64_t gk = l_.steps_per_group * kps; // k per group (per channel: K padded)
        const int mr = jit::matmul_wc_prefill_mb(zmm_);
        pf_blocks_ = (d_.m + mr - 1) / mr;
        pf_nv_ = jit::matmul_wc_prefill_nv(zmm_);
        std::map<std::tuple<int64_t, int64_t>, matmul_wc_fn> unpacks;
        std::map<std::tuple<int, int64_t, bool, bool>, matmul_wc_prefill_fn> fmas;
        auto add_chunk = [&](int64_t k0, int64_t k_len, int64_t g0, int64_t ng, bool in, bool out) {
            prefill_chunk ch;
            ch.k0 = k0, ch.k_len = k_len, ch.g0 = g0, ch.n_groups = ng;
            auto &u = unpacks[{ng, k_len}];
            if (!u) {
                matmul_wc_config c;
                c.wei_dt = d_.wei_dt;
                c.lut = l_.lut;
                c.lut8 = l_.lut8;
                c.zp = l_.zp_vec;
                c.zmm = zmm_;
                c.mb = 0;
                c.nv = 4;
                c.unpack = true;
                c.prefetch = true;
                c.steps_per_group = k_len / ng / kps;
                c.n_groups = ng;
                c.panel_bytes = l_.panel_bytes();
                c.panel_params = l_.panel_params();
                gens_.push_back(jit::make_matmul_wc_generator(c));
                u = gens_.back()->entry<matmul_wc_fn>();
            }
            ch.unpack = u;
            for (int mb :
                 {static_cast<int>(d_.m / pf_blocks_), static_cast<int>((d_.m + pf_blocks_ - 1) / pf_blocks_)}) {
                if (mb == 0) continue;
                auto &f = fmas[{mb, k_len / ng, in, out}];
                if (!f) {
                    matmul_wc_prefill_config c;
                    c.zmm = zmm_;
                    c.mb = mb;
                    c.nv = pf_nv_;
                    c.k_group = k_len / ng;
                    c.b_stride = l_.panel;
                    c.out_stride = l_.panel;
                    c.param_stride = l_.param_floats;
                    c.part_in = in;
                    c.part_out = out;
                    gens_.push_back(jit::make_matmul_wc_prefill_generator(c));
                    f = gens_.back()->entry<matmul_wc_prefill_fn>();
                }
                ch.fma[mb] = f;
            }
            chunks_.push_back(ch);
        };
        if (gk <= prefill_chunk_k) {
            const int64_t per = prefill_chunk_k / gk;
            for (int64_t g = 0; g < l_.n_groups; g += per) {
                const int64_t ng = std::min(per, l_.n_groups - g);
                add_chunk(g * gk, ng * gk, g, ng, false, false);
            }
        } else {
            for (int64_t g = 0; g < l_.n_groups; ++g)
                for (int64_t j = 0; j < gk; j += prefill_chunk_k) {
                    const int64_t len = std::min(prefill_chunk_k, gk - j);
                    add_chunk(g * gk + j, len, g, 1, j > 0, j + len < gk);
                }
        }
        for (const auto &ch : chunks_) pf_chunk_max_ = std::max(pf_chunk_max_, ch.k_len);
    }

    // Rows of block b: the M rows cut into pf_blocks_ blocks of nearly equal size.
    void block_rows(int64_t b, int64_t &m0, int &mb) const {
        const int64_t base = d_.m / pf_blocks_, extra = d_.m % pf_blocks_;
        m0 = b * base + std::min(b, extra);
        mb = static_cast<int>(base + (b < extra ? 1 : 0));
    }

    // Threads split the panels (and the row blocks when there are fewer
    // panels than threads); each thread unpacks its panels chunk by chunk
    // into its own buffer and sweeps its row blocks over each chunk. An
    // output's sums do not depend on the split.
    void execute_prefill(const wc_packed &p, const void *x, dtype x_dt, float *y, int threads) const {
        const int64_t M = d_.m, N = d_.n, K = d_.k, P = l_.panel, Kp = l_.k_padded;
        const int max_threads = impl::resolve_threads(threads);
        // Each row block's x packed k-major (x[k][m]) at xs + m0·Kp; k >= K is 0.
        std::vector<float> xt(static_cast<size_t>(M * Kp), 0.f);
        float *xs = xt.data();
        impl::parallel(static_cast<int>(std::min<int64_t>(pf_blocks_, max_threads)), [&](int ithr_, int nthr_) {
            int64_t b_b, b_e;
            impl::balance(pf_blocks_, ithr_, nthr_, b_b, b_e);
            std::vector<float> row(x_dt == dtype::f32 ? 0 : static_cast<size_t>(K)); // a converted row
            for (int64_t b = b_b; b < b_e; ++b) {
                int64_t m0;
                int mb;
                block_rows(b, m0, mb);
                float *dst = xs + m0 * Kp;
                for (int64_t m = 0; m < mb; ++m) {
                    const float *src = x_row_f32(x, x_dt, m0 + m, K, row.data());
                    for (int64_t k = 0; k < K; ++k) dst[k * mb + m] = src[k];
                }
            }
        });
        const int64_t np = l_.n_panels;
        // Row ranges per panel: enough for every thread, and at most ~256 rows
        // each, so a range's output and x stay in L2 (the chunk is unpacked
        // once per range).
        const int64_t per_range =
            (prefill_range_rows + jit::matmul_wc_prefill_mb(zmm_) - 1) / jit::matmul_wc_prefill_mb(zmm_); // row blocks
        const int64_t splits = std::min<int64_t>(
            pf_blocks_, std::max<int64_t>((pf_blocks_ + per_range - 1) / per_range, (max_threads + np - 1) / np));
        const int64_t items = np * splits;
        const int nt = static_cast<int>(std::min<int64_t>(items, max_threads));
        const float *bias = d_.with_bias ? p.bias.data() : nullptr;
        const int64_t part_cols = pf_nv_ * (zmm_ ? 16 : 8);
        impl::parallel(nt, [&](int ithr_, int nthr_) {
            int64_t it_b, it_e;
            impl::balance(items, ithr_, nthr_, it_b, it_e);
            if (it_b >= it_e) return;
            auto bbuf = alloc_aligned<float>(static_cast<size_t>(pf_chunk_max_ * P));
            // Rows of the largest range: blocks of at most ceil(M / pf_blocks_) rows.
            const int64_t range_rows = (pf_blocks_ + splits - 1) / splits * ((M + pf_blocks_ - 1) / pf_blocks_);
            auto cbuf = alloc_aligned<float>(static_cast<size_t>(range_rows * P));
            auto pbuf = alloc_aligned<float>(static_cast<size_t>(range_rows * P));
            for (int64_t it = it_b; it < it_e; ++it) {
                const int64_t pi = it / splits, s = it % splits;
                int64_t blk_b, blk_e;
                impl::balance(pf_blocks_, static_cast<int>(s), static_cast<int>(splits), blk_b, blk_e);
                int64_t r0, r1;
                int mb;
                block_rows(blk_b, r0, mb);
                block_rows(blk_e - 1, r1, mb);
                r1 += mb;
                std::memset(cbuf.get(), 0, static_cast<size_t>((r1 - r0) * P) * sizeof(float));
                for (const auto &ch : chunks_) {
                    matmul_wc_call u;
                    u.w = p.wei.get() + pi * l_.panel_bytes() + unpack_offset(ch.k0);
                    u.params = p.params.get() + pi * l_.panel_params() + ch.g0 * l_.param_floats;
                    u.x = nullptr;
                    u.out = bbuf.get();
                    u.lut = p.lut;
                    ch.unpack(&u);
                    for (int64_t b = blk_b; b < blk_e; ++b) {
                        int64_t m0;
                        block_rows(b, m0, mb);
                        for (int64_t h = 0; h < P / part_cols; ++h) {
                            matmul_wc_prefill_call c;
                            c.x = xs + m0 * Kp + ch.k0 * mb;
                            c.b = bbuf.get() + h * part_cols;
                            c.out = cbuf.get() + (m0 - r0) * P + h * part_cols;
                            c.part = pbuf.get() + (m0 - r0) * P + h * part_cols;
                            c.scale = u.params + h * part_cols;
                            c.n_groups = ch.n_groups;
                            ch.fma[mb](&c);
                        }
                    }
                }
                const int64_t n0 = pi * P, cols = std::min<int64_t>(P, N - n0);
                for (int64_t m = r0; m < r1; ++m) {
                    float *yr = y + m * N + n0;
                    const float *o = cbuf.get() + (m - r0) * P;
                    if (bias)
                        for (int64_t c = 0; c < cols; ++c) yr[c] = o[c] + bias[n0 + c];
                    else std::memcpy(yr, o, cols * sizeof(float));
                }
            }
        });
    }

    // Bytes from a panel's start to k-step k0 / k_per_step.
    int64_t unpack_offset(int64_t k0) const {
        const int64_t kps = l_.lut8 ? 8 : four_bit(d_.wei_dt) ? 2 : 1;
        return k0 / kps * l_.panel * l_.col_bytes;
    }

    void pack_panel(const matmul_weights &w, int64_t pi, wc_packed &p) const {
        const int64_t P = l_.panel, K = d_.k, NG = l_.n_groups;
        const int64_t n0 = pi * P, cols = std::min<int64_t>(P, d_.n - n0);
        uint8_t *dst = p.wei.get() + pi * l_.panel_bytes();
        const bool fb = four_bit(d_.wei_dt);
        for (int64_t c = 0; c < cols; ++c) {
            const int64_t base = (n0 + c) * K;
            if (!fb) {
                for (int64_t k = 0; k < K; ++k) dst[k * P + c] = w.wei[base + k];
            } else if (l_.lut8) {
                // Block b of 8 k: 16-column vectors of 64 bytes, 4 bytes per column.
                uint8_t *col = dst + (c / 16) * 64 + (c % 16) * 4;
                for (int64_t k = 0; k < K; ++k)
                    col[(k / 8) * 4 * P + (k % 8) / 2] |=
                        static_cast<uint8_t>(raw_element(w.wei, d_.wei_dt, base + k) << (4 * (k % 2)));
            } else {
                for (int64_t k = 0; k < K; ++k)
                    dst[(k / 2) * P + c] |=
                        static_cast<uint8_t>(raw_element(w.wei, d_.wei_dt, base + k) << (4 * (k % 2)));
            }
        }
        float *prm = p.params.get() + pi * l_.panel_params();
        for (int64_t g = 0; g < NG; ++g) {
            float *s = prm + g * l_.param_floats;
            for (int64_t c = 0; c < cols; ++c) {
                const int64_t n = n0 + c;
                s[c] = w.scale[n * NG + g];
                if (!l_.zp_vec) continue;
                if (d_.zp == matmul_desc::zp_kind::per_tensor) s[P + c] = static_cast<float>(w.zp[0]);
                if (d_.zp == matmul_desc::zp_kind::per_group) s[P + c] = static_cast<float>(w.zp[n * NG + g]);
            }
        }
    }

    matmul_desc d_;
    bool zmm_;
    wc_layout l_;
    bool streaming_ = true; // streaming shape (else register-blocked, x packed k-major)
    int block_m_ = 1;       // rows per call (the tail block has fewer)
    int nv_ = 4;            // vectors per panel and call
    int pc_ = 1;            // panels per call
    int64_t n_calls_ = 0;   // panel groups (of pc_ panels)
    bool prefill_ = false;  // the prefill shape (below: chunks_ ...)
    std::vector<prefill_chunk> chunks_;
    int64_t pf_blocks_ = 1;    // row blocks of M
    int pf_nv_ = 4;            // vectors per FMA call
    int64_t pf_chunk_max_ = 0; // longest chunk (k)
    std::vector<std::unique_ptr<jit::jit_generator>> gens_;
    std::vector<matmul_wc_fn> fns_[3]; // by type of x (x_index), then rows of the call
};

bool wc_supports(const matmul_desc &d, bool x4, std::string *why) {
    const bool fb = four_bit(d.wei_dt);
    if (x4 && !fb) return reject(why, std::string("takes u4/s4 weights, got ") + to_string(d.wei_dt));
    if (!x4 && d.wei_dt != dtype::u8 && d.wei_dt != dtype::s8)
        return reject(why, std::string("takes u8/s8 weights, got ") + to_string(d.wei_dt));
    if (!wc_shape_ok(d, why)) return false;
    if (fb && d.n_groups() > 1 && d.group_size() % 2 != 0)
        return reject(why, "4-bit groups must have an even size (a byte holds two k)");
    return true;
}

} // namespace

std::string matmul_wc_plan::str() const {
    switch (s) {
    case shape::streaming: return "streaming pc=" + std::to_string(pc);
    case shape::blocked: return "blocked";
    case shape::prefill: return "prefill";
    }
    return "?";
}

matmul_wc_plan plan_matmul_wc(const matmul_desc &d, wc_width width, matmul_wc_plan::shape s) {
    matmul_wc_plan p;
    p.width = width;
    p.s = s;
    const bool zmm = width == wc_width::zmm;
    // Streaming: as many panels per call as ~24 (zmm) / 12 (ymm) accumulators allow.
    if (s == matmul_wc_plan::shape::streaming) p.pc = matmul_wc_kernel::streams(d, zmm, make_layout(d, zmm));
    return p;
}

matmul_wc_plan plan_matmul_wc(const matmul_desc &d, wc_width width, wc_bits bits) {
    const bool zmm = width == wc_width::zmm, x4 = bits == wc_bits::x4;
    using shape = matmul_wc_plan::shape;
    const shape s = d.m >= jit::matmul_wc_prefill_min_m(zmm, x4) ? shape::prefill
                    : d.m <= jit::matmul_wc_streaming_max_m(zmm) ? shape::streaming
                                                                 : shape::blocked;
    return plan_matmul_wc(d, width, s);
}

matmul_entry matmul_wc_row(const std::string &name, wc_width width, wc_bits bits) {
    const bool zmm = width == wc_width::zmm, x4 = bits == wc_bits::x4;
    const std::string canonical = std::string("jit:matmul_wc_") + (x4 ? "x4" : "x8") + (zmm ? ":avx512_core" : ":avx2");
    matmul_entry e = impl::named_entry<matmul_entry>(name, canonical, impl::row_family::jit);
    e.weight_bits = x4 ? 4 : 8;
    e.needs = zmm ? feature_set{cpu_feature::avx512_core} : feature_set{cpu_feature::avx2};
    e.decide = [x4, width, bits](const matmul_desc &d, const matmul_hints &, const platform &,
                                 std::string *why) -> plan_ptr {
        if (!wc_supports(d, x4, why)) return nullptr;
        return std::make_shared<matmul_wc_plan>(plan_matmul_wc(d, width, bits));
    };
    e.build = [](const matmul_desc &d, const matmul_hints &, const plan &pl) -> std::shared_ptr<const matmul_kernel> {
        return std::make_shared<matmul_wc_kernel>(d, dynamic_cast<const matmul_wc_plan &>(pl));
    };
    return e;
}

} // namespace qconv::impl
