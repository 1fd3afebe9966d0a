// Weight-compressed MatMul on AMX-BF16: packing, the split of X into bf16
// hi/lo tiles, the threaded driver of the chunk kernels (matmul_wc_amx_gen.cpp)
// and the table rows jit:matmul_wc_{x8,x4}:avx512_core_amx.
#include "kernels/jit/matmul/matmul_wc_amx.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/parallel.h"
#include "kernels/jit/matmul/matmul_wc.h"
#include "kernels/jit/matmul/matmul_wc_common.h"

namespace qconv::impl {
namespace {

using jit::matmul_wc_amx_call;
using jit::matmul_wc_amx_config;
using jit::matmul_wc_amx_fn;

constexpr int64_t panel = 32;            // columns per panel: two B tiles
constexpr int64_t scratch_floats = 1024; // four drained C tiles
// Below this M the AVX-512 f32 rows are as fast or faster (docs/matmul_wc.md,
// measured at K = N = 4096, 1 thread): 4-bit from M = 3; 8-bit from M = 5 (at
// M = 4 the two are level, and the f32 row's bound is the tighter one).
int64_t amx_min_m(bool x4) { return x4 ? 3 : 5; }

// Sizes of the packed layout and of the calls.
struct amx_layout {
    bool x4 = false, per_oc = true, zp = false;
    int64_t k_pad = 0, gs = 0, chunk = 0, k_tiles = 0, n_chunks = 0, n_panels = 0;
    int64_t m_tiles = 1;
    int a_rows = 16;
    int row_bytes = 32;
    int64_t panel_bytes() const { return k_tiles * 2 * 16 * row_bytes; }
    int64_t param_bytes() const { return 128 + (x4 ? 128 : 256); } // per panel and group
    int64_t n_groups() const { return per_oc ? 1 : k_pad / gs; }
};

amx_layout make_layout(const matmul_desc &d) {
    amx_layout l;
    l.x4 = four_bit(d.wei_dt);
    l.per_oc = d.n_groups() == 1;
    l.k_pad = (d.k + 31) / 32 * 32;
    l.chunk = jit::matmul_wc_amx_chunk(l.k_pad, d.group_size(), l.per_oc);
    if (l.per_oc) l.k_pad = (d.k + l.chunk - 1) / l.chunk * l.chunk; // whole chunks
    l.gs = l.per_oc ? l.k_pad : d.group_size();
    l.k_tiles = l.k_pad / 32;
    l.n_chunks = (l.k_pad + l.chunk - 1) / l.chunk;
    l.n_panels = (d.n + panel - 1) / panel;
    l.m_tiles = (d.m + 15) / 16;
    l.a_rows = d.m < 16 ? static_cast<int>(d.m) : 16;
    l.row_bytes = l.x4 ? 16 : 32;
    const bool is_signed = d.wei_dt == dtype::s8 || d.wei_dt == dtype::s4;
    l.zp = is_signed || d.zp != matmul_desc::zp_kind::none;
    return l;
}

// What the row decides in supports(): the tile layout (K chunks, panels, M
// tiles); the kernel is built from it.
struct amx_matmul_plan : plan {
    amx_layout l;
    // "amx_bf16 chunk=256 k_tiles=128 panels=128 m_tiles=2".
    std::string str() const override {
        return "amx_bf16 chunk=" + std::to_string(l.chunk) + " k_tiles=" + std::to_string(l.k_tiles) +
               " panels=" + std::to_string(l.n_panels) + " m_tiles=" + std::to_string(l.m_tiles);
    }
};

struct amx_packed : packed {
    aligned_buffer<uint8_t> wei;    // n_panels × panel_bytes
    aligned_buffer<uint8_t> params; // n_panels × n_groups × param_bytes
    std::vector<float> bias;
};

// x = hi + lo (+ e): hi = bf16(x) (truncated where rounding would overflow
// to inf), lo = bf16(x − hi), lo = 0 where x is inf or NaN.
// (The zero-masked forms throughout: GCC 12's unmasked ones warn -Wuninitialized.)
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16"))) void split16(const float *x, __mmask16 valid,
                                                                                      uint16_t *hi, uint16_t *lo) {
    constexpr __mmask16 all = 0xFFFF;
    const __m512 v = _mm512_maskz_loadu_ps(valid, x);
    __m512i h = _mm512_maskz_cvtepu16_epi32(all, (__m256i)_mm512_cvtneps_pbh(v));
    const __mmask16 x_bad = _mm512_fpclass_ps_mask(v, 0x99); // NaN or inf
    __m512 hf = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all, h, 16));
    const __mmask16 overflow = _mm512_fpclass_ps_mask(hf, 0x18) & ~x_bad;
    h = _mm512_mask_srli_epi32(h, overflow, _mm512_castps_si512(v), 16);
    hf = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all, h, 16));
    const __m512 r = _mm512_maskz_sub_ps(static_cast<__mmask16>(~x_bad), v, hf);
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(hi), _mm512_maskz_cvtepi32_epi16(all, h));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(lo), (__m256i)_mm512_cvtneps_pbh(r));
}

// A tiles (matmul_wc_amx.h): every element, padding rows and k included (0).
void convert_a(const matmul_desc &d, const amx_layout &l, const float *x, uint16_t *a, int threads) {
    const int64_t rows = l.m_tiles * l.a_rows, K = d.k, tile = int64_t(l.a_rows) * 32;
    impl::parallel_for(
        rows,
        [&](int64_t m) {
            const int64_t mt = m / l.a_rows, r = m % l.a_rows;
            for (int64_t k = 0; k < l.k_pad; k += 16) {
                const int64_t kt = k / 32;
                uint16_t *hi = a + ((mt * l.k_tiles + kt) * 2) * tile + r * 32 + k % 32;
                const int64_t left = m < d.m ? std::max<int64_t>(0, std::min<int64_t>(16, K - k)) : 0;
                const __mmask16 valid = static_cast<__mmask16>((1u << left) - 1);
                split16(left ? x + m * K + k : x, valid, hi, hi + tile);
            }
        },
        true, threads);
}

class matmul_wc_amx_kernel : public matmul_kernel {
public:
    matmul_wc_amx_kernel(const matmul_desc &d, const amx_layout &l) : d_(d), l_(l) {
        matmul_wc_amx_config c;
        c.four_bit = l_.x4;
        c.zp = l_.zp;
        c.m_tiles = l_.m_tiles;
        c.a_rows = l_.a_rows;
        c.k_tiles = l_.k_tiles;
        c.k_steps = static_cast<int>(l_.chunk / 32);
        jit::matmul_wc_amx_tile_config(c, cfg_);
        b_bytes_ = c.k_steps * 2 * 1024;
        gens_.push_back(jit::make_matmul_wc_amx_generator(c));
        main_ = gens_.back()->entry<matmul_wc_amx_fn>();
        c.decompress_only = true;
        gens_.push_back(jit::make_matmul_wc_amx_generator(c));
        first_ = gens_.back()->entry<matmul_wc_amx_fn>();
        const std::string row = gens_.back()->name(); // the chunk kernel is named after its row
        gens_.push_back(std::make_unique<jit::amx_tile_helper>(jit::amx_tile_helper::op::load_config, row));
        load_cfg_ = gens_.back()->entry<jit::matmul_wc_amx_cfg_fn>();
        gens_.push_back(std::make_unique<jit::amx_tile_helper>(jit::amx_tile_helper::op::release, row));
        release_ = gens_.back()->entry<void (*)()>();
    }

    // Panels and parameters depend on K, N and the types, not on M (the
    // M tiling lives in the A buffer of each execute()).
    std::string packing() const override { return "amx"; }

    std::shared_ptr<const packed> pack(const matmul_weights &w) const override {
        check_wc_weights(d_, w);
        auto p = std::make_shared<amx_packed>();
        p->wei = alloc_aligned<uint8_t>(static_cast<size_t>(l_.n_panels * l_.panel_bytes()));
        p->params = alloc_aligned<uint8_t>(static_cast<size_t>(l_.n_panels * l_.n_groups() * l_.param_bytes()));
        if (d_.with_bias) p->bias.assign(w.bias, w.bias + d_.n);
        const bool big = l_.n_panels > 1 && l_.n_panels * l_.panel_bytes() > (1 << 20);
        impl::parallel_for(
            l_.n_panels,
            [&](int64_t pi) {
                pack_weights(w, pi, *p);
                pack_params(w, pi, *p);
            },
            big);
        return p;
    }

    void execute(const packed &pk, const float *x, float *y, int threads) const override {
        const auto &p = static_cast<const amx_packed &>(pk);
        const int max_threads = impl::resolve_threads(threads);
        const size_t a_bytes = static_cast<size_t>(l_.m_tiles * l_.k_tiles * 2 * l_.a_rows * 64);
        auto *a = reinterpret_cast<uint16_t *>(thread_scratch(scratch_use::matmul_a, a_bytes));
        convert_a(d_, l_, x, a, static_cast<int>(std::min<int64_t>(max_threads, l_.m_tiles * l_.a_rows)));
        const int nt = static_cast<int>(std::min<int64_t>(max_threads, l_.n_panels));
        std::atomic<bool> failed{false};
        // The team may be smaller than nt (nested inside another parallel
        // region): the panels are split over the threads it has.
        impl::parallel(nt, [&](int ithr, int nthr) {
            if (!run_panels(p, a, y, ithr, nthr)) failed.store(true, std::memory_order_relaxed);
        });
        if (failed.load()) throw std::bad_alloc();
    }

private:
    int64_t acc_floats() const { return l_.m_tiles * 16 * panel; } // per panel

    // Thread t of nt: panels [p0, p1), its own tile configuration,
    // accumulators and buffers. K is cut into blocks of activations that
    // stay in L2 (~256 KB), each run over all the thread's panels; every
    // output sums its chunks in the same order whatever the thread count.
    // Call j computes chunk j from buffer j % 2 and decompresses chunk j + 1
    // into buffer (j + 1) % 2 (the last one into a spare third buffer).
    bool run_panels(const amx_packed &p, const uint16_t *a, float *y, int t, int nt) const {
        const int64_t p0 = l_.n_panels * t / nt, p1 = l_.n_panels * (t + 1) / nt, np = p1 - p0;
        const size_t bytes = static_cast<size_t>((np * acc_floats() + scratch_floats) * 4 + 3 * b_bytes_);
        uint8_t *buf = try_thread_scratch(scratch_use::matmul_panels, bytes);
        if (!buf || np == 0) return buf != nullptr;
        uint16_t *b[3];
        for (int i = 0; i < 3; ++i) b[i] = reinterpret_cast<uint16_t *>(buf + i * b_bytes_);
        float *scratch = reinterpret_cast<float *>(buf + 3 * b_bytes_);
        float *acc = scratch + scratch_floats;
        std::memset(acc, 0, static_cast<size_t>(np * acc_floats()) * 4);
        const int64_t a_chunk_bytes = l_.m_tiles * l_.a_rows * l_.chunk * 4;
        const int64_t per_block = std::max<int64_t>(1, (256 << 10) / a_chunk_bytes);
        std::vector<std::pair<int64_t, int64_t>> order; // (panel, chunk) of each call
        order.reserve(static_cast<size_t>(np * l_.n_chunks));
        for (int64_t c0 = 0; c0 < l_.n_chunks; c0 += per_block)
            for (int64_t pi = p0; pi < p1; ++pi)
                for (int64_t c = c0; c < std::min(l_.n_chunks, c0 + per_block); ++c) order.emplace_back(pi, c);
        load_cfg_(cfg_);
        matmul_wc_amx_call call{};
        call.scratch = scratch;
        set_next(p, order[0], b[0], &call);
        call.params = call.zp_params;
        first_(&call);
        for (size_t j = 0; j < order.size(); ++j) {
            const auto [pi, c] = order[j];
            const int64_t kt0 = c * l_.chunk / 32;
            call.params = params_of(p, pi, c);
            call.b = b[j % 2];
            call.a = a + kt0 * 2 * l_.a_rows * 32;
            call.acc = acc + (pi - p0) * acc_floats();
            if (j + 1 < order.size()) set_next(p, order[j + 1], b[(j + 1) % 2], &call);
            else set_next(p, order[j], b[2], &call);
            main_(&call);
        }
        for (int64_t pi = p0; pi < p1; ++pi) store_panel(p, pi, acc + (pi - p0) * acc_floats(), y);
        release_();
        return true;
    }

    const uint8_t *params_of(const amx_packed &p, int64_t pi, int64_t c) const {
        return p.params.get() + (pi * l_.n_groups() + c * l_.chunk / l_.gs) * l_.param_bytes();
    }

    // The chunk a call decompresses: (panel, chunk) into `out`.
    void set_next(const amx_packed &p, std::pair<int64_t, int64_t> pc, uint16_t *out, matmul_wc_amx_call *call) const {
        const int64_t kt0 = pc.second * l_.chunk / 32;
        call->w = p.wei.get() + pc.first * l_.panel_bytes() + kt0 * 2 * 16 * l_.row_bytes;
        call->zp_params = params_of(p, pc.first, pc.second);
        call->b_out = out;
    }

    void store_panel(const amx_packed &p, int64_t pi, const float *acc, float *y) const {
        const int64_t n0 = pi * panel, cols = std::min<int64_t>(panel, d_.n - n0);
        for (int64_t m = 0; m < d_.m; ++m) {
            float *yr = y + m * d_.n + n0;
            const float *o = acc + m * panel;
            if (d_.with_bias)
                for (int64_t c = 0; c < cols; ++c) yr[c] = o[c] + p.bias[n0 + c];
            else std::memcpy(yr, o, static_cast<size_t>(cols) * 4);
        }
    }

    // The code of element (n, k): unsigned (signed types with the sign bit flipped).
    uint8_t code(const matmul_weights &w, int64_t n, int64_t k) const {
        const int64_t i = n * d_.k + k;
        if (!l_.x4) return static_cast<uint8_t>(w.wei[i] ^ (d_.wei_dt == dtype::s8 ? 0x80 : 0));
        const uint8_t v = (w.wei[i / 2] >> (4 * (i % 2))) & 0xF;
        return static_cast<uint8_t>(v ^ (d_.wei_dt == dtype::s4 ? 0x8 : 0));
    }

    void pack_weights(const matmul_weights &w, int64_t pi, amx_packed &p) const {
        uint8_t *dst = p.wei.get() + pi * l_.panel_bytes();
        const int64_t n0 = pi * panel, cols = std::min<int64_t>(panel, d_.n - n0);
        for (int64_t c = 0; c < cols; ++c) {
            const int64_t t = c / 16, n = c % 16;
            for (int64_t k = 0; k < d_.k; ++k) {
                const int64_t kt = k / 32, r = (k % 32) / 2, j = k % 2;
                uint8_t *row = dst + ((kt * 2 + t) * 16 + r) * l_.row_bytes;
                if (l_.x4) row[n] |= static_cast<uint8_t>(code(w, n0 + c, k) << (4 * j));
                else row[n * 2 + j] = code(w, n0 + c, k);
            }
        }
    }

    void pack_params(const matmul_weights &w, int64_t pi, amx_packed &p) const {
        const int64_t n0 = pi * panel, cols = std::min<int64_t>(panel, d_.n - n0), ng = l_.n_groups();
        const int32_t off = d_.wei_dt == dtype::s8 ? 128 : d_.wei_dt == dtype::s4 ? 8 : 0;
        for (int64_t g = 0; g < ng; ++g) {
            uint8_t *prm = p.params.get() + (pi * ng + g) * l_.param_bytes();
            float *scale = reinterpret_cast<float *>(prm);
            for (int64_t c = 0; c < cols; ++c) {
                const int64_t n = n0 + c;
                scale[c] = w.scale[n * ng + g];
                int32_t zp = off;
                if (d_.zp == matmul_desc::zp_kind::per_tensor) zp += w.zp[0];
                if (d_.zp == matmul_desc::zp_kind::per_group) zp += w.zp[n * ng + g];
                for (int j = 0; j < 2; ++j) {
                    if (l_.x4) reinterpret_cast<int16_t *>(prm + 128)[c * 2 + j] = static_cast<int16_t>(zp);
                    else reinterpret_cast<int32_t *>(prm + 128)[c * 2 + j] = zp;
                }
            }
        }
    }

    matmul_desc d_;
    amx_layout l_;
    alignas(64) uint8_t cfg_[64];
    int64_t b_bytes_ = 0; // one decompression buffer
    std::vector<std::unique_ptr<jit::jit_generator>> gens_;
    matmul_wc_amx_fn main_ = nullptr, first_ = nullptr; // a chunk; the first decompression alone
    jit::matmul_wc_amx_cfg_fn load_cfg_ = nullptr;
    void (*release_)() = nullptr;
};

// Whether the row takes d; the layout it would run with in *out.
bool amx_supports(const matmul_desc &d, const matmul_hints &h, bool x4, const std::string &name, amx_layout *out,
                  std::string *why) {
    if (x4 && !four_bit(d.wei_dt)) return reject(why, std::string("takes u4/s4 weights, got ") + to_string(d.wei_dt));
    if (!x4 && d.wei_dt != dtype::u8 && d.wei_dt != dtype::s8)
        return reject(why, std::string("takes u8/s8 weights, got ") + to_string(d.wei_dt));
    if (!wc_shape_ok(d, why)) return false;
    if (d.n_groups() > 1 && d.group_size() % 32 != 0)
        return reject(why, "group size " + std::to_string(d.group_size()) +
                               " is not a multiple of 32 (a tile's K is 32 bf16; per-OC takes any K)");
    const amx_layout l = make_layout(d);
    *out = l;
    const double eps = jit::matmul_wc_amx_epsilon(l.k_pad, l.chunk);
    if (eps > jit::matmul_wc_amx_max_epsilon)
        return reject(why, "k " + std::to_string(d.k) + " gives an error bound of " + std::to_string(eps) +
                               " > 3e-5 of sum |x*deq(w)| (docs/semantics.md 7)");
    // The M rule orders the rows; naming the row runs it at any M.
    if (d.m < amx_min_m(x4) && h.impl != name)
        return reject(why, "m < " + std::to_string(amx_min_m(x4)) +
                               ": the AVX-512 f32 row is faster there (docs/matmul_wc.md, AMX-BF16 rows)");
    return true;
}

} // namespace

matmul_entry matmul_wc_amx_row(const std::string &name, wc_bits bits) {
    const bool x4 = bits == wc_bits::x4;
    const std::string canonical = std::string("jit:matmul_wc_") + (x4 ? "x4" : "x8") + ":avx512_core_amx";
    matmul_entry e = impl::named_entry<matmul_entry>(name, canonical, impl::row_family::jit);
    e.weight_bits = x4 ? 4 : 8;
    e.needs = feature_set{cpu_feature::avx512_core, cpu_feature::avx512_bf16, cpu_feature::amx_bf16};
    e.decide = [x4, name](const matmul_desc &d, const matmul_hints &h, const platform &, std::string *why) {
        auto pl = std::make_shared<amx_matmul_plan>();
        return amx_supports(d, h, x4, name, &pl->l, why) ? plan_ptr(pl) : nullptr;
    };
    e.build = [](const matmul_desc &d, const matmul_hints &, const plan &pl) -> std::shared_ptr<const matmul_kernel> {
        return std::make_shared<matmul_wc_amx_kernel>(d, dynamic_cast<const amx_matmul_plan &>(pl).l);
    };
    return e;
}

} // namespace qconv::impl
