// Dynamic-quantization MatMul (opt-in: matmul_hints::dynamic_quantization),
// AVX-512 VNNI: jit:matmul_wc_dq:avx512_core_vnni.
//
// At run time every row of X is quantized per group of K (the weights'
// groups) to int8, symmetrically:
//   sx[m,g] = max_{k in g} |x[m,k]| / 127,   q[m,k] = rne(x[m,k] / sx[m,g])  (|q| <= 127)
// and the inner products run on integers with vpdpbusd (u8 weights × s8 q,
// exact int32 per group):
//   y[m,n] = Σ_g sx[m,g] · scale[n,g] · (Σ_{k in g} w'[n,k]·q[m,k] − zp'[n,g] · Σ_{k in g} q[m,k]) + bias[n]
// Signed weights are made unsigned at pack time (s8: w' = w + 128, s4: w' = w + 8,
// and the same shift of the zero point), so (w' − zp') = (w − zp) exactly.
//
// Error: only the quantization of X is inexact: |x − sx·q| <= sx/2, so
//   |y − y_exact| <= Σ_k |deq(W)[n,k]| · sx[m, g(k)] / 2   (+ f32 rounding, ~1e-6 relative)
// which tests/test_matmul.cpp asserts (with a 1e-5 relative f32 allowance).
//
// Layout (pack): panels of 64 columns (four zmm). 8-bit: per k-quad a panel
// stores [64 columns][4 k] (256 bytes), so one zmm load holds 4 consecutive k
// of 16 columns in each dword: the vpdpbusd operand. 4-bit: per k-octet
// [64 columns][4 bytes], byte j of a column = w'[k0+j] | w'[k0+4+j] << 4;
// the low nibbles are k0..k0+3, the high nibbles k0+4..k0+7. Per panel and
// group follow scale[64] and zp'[64] as f32. K (and each group) is padded
// with zero weights and zero q. Shapes as in matmul_wc.h: streaming (M <= 4,
// whole panel per call) and blocked (12 rows × half a panel per call).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include <immintrin.h>

#include "core/parallel.h"
#include "kernels/jit/matmul/matmul_wc.h"
#include "kernels/jit/matmul/matmul_wc_common.h"

namespace qconv {
namespace jit {
namespace {

using namespace Xbyak;

struct dq_call {
    const uint8_t *w;    // panel start (+ column offset · 4 bytes)
    const float *params; // group 0 of the panel: scale[64], zp'[64] (+ column offset)
    const int8_t *q;     // row 0 of the block, rows q_stride bytes apart
    const float *sx;     // [NG][M] per row scale of q, at row 0 of the block
    const float *sumq;   // [NG][M] Σ q over the group, at row 0 of the block
    float *out;          // mb rows of 64 floats
    uintptr_t pf;        // blocked shape: weights of a later panel, prefetched to L2 (pf_lines per step)
};
using dq_fn = void (*)(const dq_call *);

struct dq_config {
    bool four_bit = false;
    int mb = 1, nv = 4;
    int64_t steps_per_group = 0; // k-quads (8-bit) / k-octets (4-bit) per group
    int64_t n_groups = 1;
    int64_t q_stride = 0; // bytes between rows of q
    int64_t m_total = 1;  // rows of sx/sumq per group
    int pf_lines = 0;     // lines of dq_call::pf prefetched per step (0: none)
};

class dq_generator : public jit_generator {
public:
    explicit dq_generator(const dq_config &c) : jit_generator(64 * 1024), c_(c) {
        if (c.mb * c.nv > 24 || c.mb > 12) fail("jit", "matmul_wc_dq: block too large for the registers");
    }
    const char *name() const override { return "jit:matmul_wc_dq:avx512_core_vnni"; }

protected:
    void generate() override {
        preamble();
        mov(r_w, ptr[rdi + offsetof(dq_call, w)]);
        mov(r_param, ptr[rdi + offsetof(dq_call, params)]);
        mov(q_base(0), ptr[rdi + offsetof(dq_call, q)]);
        mov(r_sx, ptr[rdi + offsetof(dq_call, sx)]);
        mov(r_sum, ptr[rdi + offsetof(dq_call, sumq)]);
        mov(r_out, ptr[rdi + offsetof(dq_call, out)]);
        if (c_.pf_lines) mov(r_pf, ptr[rdi + offsetof(dq_call, pf)]);
        mov(r_stride, c_.q_stride);
        emit_row_bases(*this, r_stride, n_bases());
        if (c_.four_bit) {
            mov(ebx, 0x0F0F0F0F);
            vpbroadcastd(vmask, ebx);
        }
        vxorps(vt0, vt0, vt0);
        for (int m = 0; m < c_.mb; ++m)
            for (int v = 0; v < c_.nv; ++v) vmovups(out_addr(m, v), vt0);
        emit_counted_loop(*this, r_group, c_.n_groups, [this] {
            emit_group();
            add(r_param, 2 * 64 * 4);
            add(r_sx, c_.m_total * 4);
            add(r_sum, c_.m_total * 4);
        });
        postamble();
    }

private:
    const Reg64 r_w = r8, r_param = r9, r_out = r11, r_cnt = rcx, r_group = rdx, r_sx = rax, r_sum = rbp,
                r_stride = r14, r_pf = r15;
    // q rows: row_at() of matmul_wc_common.h, r_stride = one row.
    const Reg64 &q_base(int j) const { return row_base(j); }
    int n_bases() const { return row_bases_for(c_.mb); }
    const Zmm vmask = Zmm(31), vt0 = Zmm(30), vt1 = Zmm(29), vt2 = Zmm(28);
    Zmm acc(int m, int v) const { return Zmm(m * c_.nv + v); }

    int step_bytes() const { return 256; } // one k-quad / k-octet of a panel
    int k_per_step() const { return c_.four_bit ? 8 : 4; }
    Address out_addr(int m, int v) const { return ptr[r_out + (m * 64 + v * 16) * 4]; }
    Address w_addr(int step, int v) const { return ptr[r_w + step * step_bytes() + v * 64]; }
    void dot(const Zmm &a, const Zmm &w, int m, int disp) {
        vpdpbusd(a, w, ptr_b[row_at(m, r_stride, disp)], EvexEncoding);
    }

    void emit_step(int step) {
        const int d0 = step * k_per_step();
        for (int i = 0; i < c_.pf_lines; ++i) prefetcht1(ptr[r_pf + (step * c_.pf_lines + i) * 64]);
        for (int v = 0; v < c_.nv; ++v) {
            vmovdqu32(vt0, w_addr(step, v));
            if (!c_.four_bit) {
                for (int m = 0; m < c_.mb; ++m) dot(acc(m, v), vt0, m, d0);
                continue;
            }
            vpandd(vt1, vt0, vmask);
            vpsrlw(vt0, vt0, 4);
            vpandd(vt0, vt0, vmask);
            for (int m = 0; m < c_.mb; ++m) dot(acc(m, v), vt1, m, d0);
            for (int m = 0; m < c_.mb; ++m) dot(acc(m, v), vt0, m, d0 + 4);
        }
    }

    void advance(int steps) {
        add(r_w, steps * step_bytes());
        if (c_.pf_lines) add(r_pf, steps * c_.pf_lines * 64);
        for (int j = 0; j < n_bases(); ++j) add(q_base(j), steps * k_per_step());
    }

    void emit_group() {
        for (int m = 0; m < c_.mb; ++m)
            for (int v = 0; v < c_.nv; ++v) vpxord(acc(m, v), acc(m, v), acc(m, v));
        emit_unrolled_steps(
            *this, r_cnt, c_.steps_per_group, 4, [this](int u) { emit_step(u); },
            [this](int steps) { advance(steps); });
        // out += (f32(acc) − zp'·Σq) · (scale · sx)
        for (int v = 0; v < c_.nv; ++v) {
            vmovups(vt1, ptr[r_param + (64 + v * 16) * 4]); // zp'
            for (int m = 0; m < c_.mb; ++m) {
                const Zmm a = acc(m, v);
                vcvtdq2ps(a, a);
                vfnmadd231ps(a, vt1, ptr_b[r_sum + m * 4]);
                vmovups(vt2, ptr[r_param + v * 16 * 4]);
                vmulps(vt2, vt2, ptr_b[r_sx + m * 4]);
                vmovups(vt0, out_addr(m, v));
                vfmadd231ps(vt0, a, vt2);
                vmovups(out_addr(m, v), vt0);
            }
        }
    }

    dq_config c_;
};

} // namespace
} // namespace jit

namespace impl {
namespace {

bool is_signed(dtype dt) { return dt == dtype::s8 || dt == dtype::s4; }

// Sizes: K is cut into groups; each group into steps of 4 (8-bit) or 8 (4-bit) k.
struct dq_layout {
    int64_t kstep = 4, gs = 0, ng = 1, steps_per_group = 0, kq = 0; // kq: padded K of q
    int64_t n_panels = 0;
    int64_t panel_bytes() const { return ng * steps_per_group * 256; }
    int64_t panel_params() const { return ng * 128; }
};

dq_layout make_dq_layout(const matmul_desc &d) {
    dq_layout l;
    l.kstep = four_bit(d.wei_dt) ? 8 : 4;
    l.gs = d.group_size();
    l.ng = d.n_groups();
    l.steps_per_group = (l.gs + l.kstep - 1) / l.kstep;
    l.kq = l.ng * l.steps_per_group * l.kstep;
    l.n_panels = (d.n + 63) / 64;
    return l;
}

struct dq_packed : packed {
    aligned_buffer<uint8_t> wei;
    aligned_buffer<float> params;
    std::vector<float> bias;
};

// The quantization of X in AVX-512 (the row runs on VNNI machines only),
// 16 values at a time with masked tails; the same arithmetic as the scalar
// definition: amax = max |x| (NaN ignored), q = clamp(rne(x · inv), ±127)
// (NaN → −127, as std::max(−127, NaN) gives), Σ q.
// (GCC 12's intrinsic headers trip -Wmaybe-uninitialized on their own
// _mm512_undefined_ps(); GCC bug 105593.)

// What the row decides in supports(): the shape at the descriptor's M,
// streaming (all rows in one block over whole panels) or blocked.
struct dq_plan : plan {
    bool streaming = true;
    std::string str() const override { return streaming ? "streaming" : "blocked"; }
};

class dq_kernel : public matmul_kernel {
public:
    dq_kernel(const matmul_desc &d, const dq_plan &pl) : d_(d), l_(make_dq_layout(d)) {
        const bool streaming = pl.streaming;
        block_m_ = streaming ? static_cast<int>(d.m) : 12;
        nv_ = streaming ? 4 : 2;
        pf_lines_ = streaming ? 0 : pf_lines();
        fns_.assign(static_cast<size_t>(block_m_ + 1), nullptr);
        for (int mb : {block_m_, static_cast<int>(d.m % block_m_)}) {
            if (mb == 0 || mb > d.m || fns_[mb]) continue;
            jit::dq_config c;
            c.four_bit = four_bit(d.wei_dt);
            c.mb = mb;
            c.nv = nv_;
            c.steps_per_group = l_.steps_per_group;
            c.n_groups = l_.ng;
            c.q_stride = l_.kq;
            c.m_total = d.m;
            c.pf_lines = pf_lines_;
            gens_.push_back(std::make_unique<jit::dq_generator>(c));
            gens_.back()->create();
            fns_[mb] = gens_.back()->entry<jit::dq_fn>();
        }
    }

    // Blocked shape: a thread runs the calls of one panel (two halves × the
    // row blocks) from L2 after the first has brought its weights in; each
    // call also prefetches its share of the thread's next panel into L2
    // (prefetcht1), so that panel's first call does not wait on memory alone.
    // Lines per step so that the calls of a panel cover a whole panel.
    int pf_lines() const {
        const int64_t calls = 2 * ((d_.m + block_m_ - 1) / block_m_); // two halves × the row blocks
        const int64_t lines = l_.panel_bytes() / 64, steps = l_.ng * l_.steps_per_group;
        const int64_t per_call = (lines + calls - 1) / calls;
        return static_cast<int>(std::min<int64_t>(4, (per_call + steps - 1) / steps));
    }

    // make_dq_layout does not read M.
    std::string packing() const override { return "dq"; }

    std::shared_ptr<const packed> pack(const matmul_weights &w) const override {
        check_wc_weights(d_, w);
        auto p = std::make_shared<dq_packed>();
        p->wei = alloc_aligned<uint8_t>(static_cast<size_t>(l_.n_panels * l_.panel_bytes()));
        p->params = alloc_aligned<float>(static_cast<size_t>(l_.n_panels * l_.panel_params()));
        if (d_.with_bias) p->bias.assign(w.bias, w.bias + d_.n);
        const int64_t np = l_.n_panels;
        impl::parallel((np > 1 && d_.n * d_.k > (1 << 20)) ? 0 : 1, [&](int ithr_, int nthr_) {
            int64_t pi_b, pi_e;
            impl::balance(np, ithr_, nthr_, pi_b, pi_e);
            for (int64_t pi = pi_b; pi < pi_e; ++pi) pack_panel(w, pi, *p);
        });
        return p;
    }

    void execute(const packed &pk, const float *x, float *y, int threads) const override {
        const auto &p = static_cast<const dq_packed &>(pk);
        const int64_t M = d_.m, N = d_.n;
        const int nt_all = impl::resolve_threads(threads);
        // Quantize X: q [M][kq], sx and Σq as [NG][M].
        std::vector<int8_t> q(static_cast<size_t>(M * l_.kq), 0);
        std::vector<float> sx(static_cast<size_t>(l_.ng * M)), sumq(static_cast<size_t>(l_.ng * M));
        impl::parallel((M * d_.k > (1 << 16)) ? nt_all : 1, [&](int ithr_, int nthr_) {
            int64_t m_b, m_e;
            impl::balance(M, ithr_, nthr_, m_b, m_e);
            for (int64_t m = m_b; m < m_e; ++m) quantize_row(x + m * d_.k, m, q.data(), sx.data(), sumq.data());
        });

        const int64_t part = nv_ * 16, parts = 64 / part;
        const int64_t m_blocks = (M + block_m_ - 1) / block_m_;
        const int64_t per_panel = parts * m_blocks, items = l_.n_panels * per_panel;
        const int nt = static_cast<int>(std::min<int64_t>(items, nt_all));
        const float *bias = d_.with_bias ? p.bias.data() : nullptr;
        impl::parallel(nt, [&](int ithr_, int nthr_) {
            int64_t it_b, it_e;
            impl::balance(items, ithr_, nthr_, it_b, it_e);
            for (int64_t it = it_b; it < it_e; ++it) {
                const int64_t pi = it / per_panel, h = (it % per_panel) / m_blocks;
                const int64_t m0 = (it % m_blocks) * block_m_, n0 = pi * 64 + h * part;
                if (n0 >= N) continue;
                const int mb = static_cast<int>(std::min<int64_t>(block_m_, M - m0));
                alignas(64) float out[12 * 64];
                jit::dq_call call;
                call.w = p.wei.get() + pi * l_.panel_bytes() + h * part * 4;
                call.params = p.params.get() + pi * l_.panel_params() + h * part;
                call.q = q.data() + m0 * l_.kq;
                call.sx = sx.data() + m0;
                call.sumq = sumq.data() + m0;
                call.out = out;
                // The part of panel pi + 1 this call prefetches (past the last
                // panel the addresses are only hints: prefetches do not fault).
                const int64_t region = int64_t(pf_lines_) * 64 * l_.ng * l_.steps_per_group;
                call.pf = reinterpret_cast<uintptr_t>(p.wei.get()) +
                          uintptr_t((pi + 1) * l_.panel_bytes() + (it % per_panel) * region);
                fns_[mb](&call);
                const int64_t cols = std::min<int64_t>(part, N - n0);
                for (int m = 0; m < mb; ++m) {
                    float *yr = y + (m0 + m) * N + n0;
                    const float *o = out + m * 64;
                    for (int64_t c = 0; c < cols; ++c) yr[c] = bias ? o[c] + bias[n0 + c] : o[c];
                }
            }
        });
    }

private:
    void quantize_row(const float *xr, int64_t m, int8_t *q, float *sx, float *sumq) const {
        for (int64_t g = 0; g < l_.ng; ++g) {
            const float *xg = xr + g * l_.gs;
            const float amax = dq_abs_max(xg, l_.gs);
            const float s = amax / 127.f;
            const float inv = amax > 0.f ? 127.f / amax : 0.f;
            int8_t *qg = q + m * l_.kq + g * l_.steps_per_group * l_.kstep;
            const int32_t sum = dq_quantize(xg, l_.gs, inv, qg);
            sx[g * d_.m + m] = s;
            sumq[g * d_.m + m] = static_cast<float>(sum);
        }
    }

    // Unsigned weight w' (signed types shifted by 128 / 8).
    uint8_t wprime(const matmul_weights &w, int64_t i) const {
        const int32_t shift = is_signed(d_.wei_dt) ? (four_bit(d_.wei_dt) ? 8 : 128) : 0;
        return static_cast<uint8_t>(weight_at(w.wei, d_.wei_dt, i) + shift);
    }

    void pack_panel(const matmul_weights &w, int64_t pi, dq_packed &p) const {
        const int64_t n0 = pi * 64, cols = std::min<int64_t>(64, d_.n - n0);
        const int32_t shift = is_signed(d_.wei_dt) ? (four_bit(d_.wei_dt) ? 8 : 128) : 0;
        uint8_t *dst = p.wei.get() + pi * l_.panel_bytes();
        const bool fb = four_bit(d_.wei_dt);
        for (int64_t c = 0; c < cols; ++c) {
            const int64_t n = n0 + c;
            for (int64_t g = 0; g < l_.ng; ++g)
                for (int64_t kk = 0; kk < l_.gs; ++kk) {
                    const int64_t step = g * l_.steps_per_group + kk / l_.kstep, j = kk % l_.kstep;
                    const uint8_t v = wprime(w, n * d_.k + g * l_.gs + kk);
                    uint8_t &b = dst[step * 256 + c * 4 + (j % 4)];
                    if (!fb) b = v;
                    else b |= static_cast<uint8_t>(v << (j < 4 ? 0 : 4));
                }
        }
        float *prm = p.params.get() + pi * l_.panel_params();
        for (int64_t g = 0; g < l_.ng; ++g)
            for (int64_t c = 0; c < cols; ++c) {
                const int64_t n = n0 + c;
                int32_t zp = 0;
                if (d_.zp == matmul_desc::zp_kind::per_tensor) zp = w.zp[0];
                if (d_.zp == matmul_desc::zp_kind::per_group) zp = w.zp[n * l_.ng + g];
                prm[g * 128 + c] = w.scale[n * l_.ng + g];
                prm[g * 128 + 64 + c] = static_cast<float>(zp + shift);
            }
    }

    matmul_desc d_;
    dq_layout l_;
    int block_m_ = 1, nv_ = 4, pf_lines_ = 0;
    std::vector<std::unique_ptr<jit::jit_generator>> gens_;
    std::vector<jit::dq_fn> fns_;
};

} // namespace

// The quantization of X shared with the AMX-INT8 row (matmul_wc_common.h).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
__attribute__((target("avx512f,avx512bw"))) float dq_abs_max(const float *x, int64_t n) {
    __m512 m = _mm512_setzero_ps();
    for (int64_t k = 0; k < n; k += 16) {
        const __mmask16 live = n - k >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - k)) - 1);
        const __m512 a = _mm512_abs_ps(_mm512_maskz_loadu_ps(live, x + k));
        m = _mm512_max_ps(a, m); // a NaN lane keeps m (the second operand)
    }
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, m);
    float r = 0.f;
    for (float v : lanes) r = std::max(r, v);
    return r;
}

__attribute__((target("avx512f,avx512bw"))) int32_t dq_quantize(const float *x, int64_t n, float inv, int8_t *q) {
    const __m512 vinv = _mm512_set1_ps(inv), lo = _mm512_set1_ps(-127.f), hi = _mm512_set1_ps(127.f);
    __m512i sum = _mm512_setzero_si512();
    for (int64_t k = 0; k < n; k += 16) {
        const __mmask16 live = n - k >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - k)) - 1);
        __m512 r = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(live, x + k), vinv),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        r = _mm512_min_ps(_mm512_max_ps(r, lo), hi); // max(NaN, −127) = −127
        const __m512i v = _mm512_cvtps_epi32(r);
        _mm512_mask_cvtepi32_storeu_epi8(q + k, live, v);
        sum = _mm512_add_epi32(sum, v); // masked-off lanes loaded 0 → q = 0
    }
    alignas(64) int32_t lanes[16];
    _mm512_store_si512(lanes, sum);
    int32_t r = 0;
    for (int32_t v : lanes) r += v;
    return r;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace {
// The row's checks.
bool dq_supports(const matmul_desc &d, const matmul_hints &h, std::string *why) {
    if (!h.dynamic_quantization) return reject(why, "dynamic quantization not requested (opt-in hint)");
    if (!wc_shape_ok(d, why)) return false;
    const int64_t gs = d.group_size();
    if (d.n_groups() > 1 && gs % (four_bit(d.wei_dt) ? 8 : 4) != 0)
        return reject(why, "groups must be a multiple of 4 k (8-bit) or 8 k (4-bit)");
    if (gs > 65536) return reject(why, "group longer than 65536 k could overflow the int32 sums");
    if (d.wei_dt != dtype::u8 && d.wei_dt != dtype::s8 && !four_bit(d.wei_dt))
        return reject(why, std::string("takes u8/s8/u4/s4 weights, got ") + to_string(d.wei_dt));
    return true;
}
} // namespace

matmul_entry matmul_wc_dq_row(const std::string &name) {
    matmul_entry e = impl::named_entry<matmul_entry>(name, "jit:matmul_wc_dq:avx512_core_vnni", impl::row_family::jit);
    e.dynamic_quantization = true;
    e.needs = {cpu_feature::avx512_core, cpu_feature::avx512_core_vnni};
    e.decide = [](const matmul_desc &d, const matmul_hints &h, const platform &, std::string *why) -> plan_ptr {
        if (!dq_supports(d, h, why)) return nullptr;
        auto pl = std::make_shared<dq_plan>();
        pl->streaming = d.m <= jit::matmul_wc_streaming_max_m(true);
        return pl;
    };
    e.build = [](const matmul_desc &d, const matmul_hints &, const plan &pl) -> std::shared_ptr<const matmul_kernel> {
        return std::make_shared<dq_kernel>(d, dynamic_cast<const dq_plan &>(pl));
    };
    return e;
}

} // namespace impl
} // namespace qconv
