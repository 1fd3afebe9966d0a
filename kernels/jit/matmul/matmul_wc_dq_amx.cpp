// Dynamic-quantization MatMul on AMX-INT8 (opt-in: matmul_hints::dynamic_quantization):
// jit:matmul_wc_dq:avx512_core_amx. The numbers are those of
// jit:matmul_wc_dq:avx512_core_vnni (matmul_wc_dq.cpp): every row of X is
// quantized per group of K with the same dq_quantize(), the products are
// exact integers, so the bound is the same (docs/semantics.md §7):
//   y[m,n] = Σ_chunks sx[m,g] · scale[n,g] · (Σ_{k in chunk} q[m,k]·b[n,k] − zp'[n,g] · Σ_{k in chunk} q[m,k]) + bias[n]
//
// Tiles: A = q (s8, 16 rows × 64 k), B = the weights in VNNI-4 (16 rows of
// k-quads × 16 columns × 4 bytes), C = int32 16 × 16; per chunk (a group,
// or 256 k per output channel) and panel of 32 columns the four C tiles of
// two 16-row blocks, then the drain acc += float(C − zp'·Σq) · (sx·scale).
//   8-bit: B is the packed weights themselves (u8: tdpbsud, s8: tdpbssd);
//          a zero point is the zp'·Σq term (exact in int32).
//   4-bit: B = code − zp' (|b| <= 15, s8: tdpbssd) decompressed per chunk
//          from nibbles into an L1 buffer; no zp' term.
// Packed layout: per panel and k-tile of 64 k, tile 0 then tile 1; 8-bit
// 16 rows × 64 bytes ([n][j] = w(n, 4r + j)), 4-bit 16 rows × 32 bytes
// (byte i holds tile bytes 2i in its low and 2i + 1 in its high nibble,
// signed codes + 8). K is padded with zero weights and zero q.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "kernels/jit/matmul/matmul_wc.h"
#include "kernels/jit/matmul/matmul_wc_common.h"

namespace qconv {
namespace jit {
namespace {

using namespace Xbyak;

constexpr int tile_bytes = 1024;
constexpr int c_row_bytes = 128; // 32 int32 columns per panel

struct dq_amx_call {
    const int8_t *a; // q tiles of the chunk's first k-tile, m tile 0
    const int8_t *b; // the chunk's B tiles: k_steps × 2 × 1 KB
    int32_t *c;      // [m_tiles · a_rows][32] int32
};
using dq_amx_fn = void (*)(const dq_amx_call *);

struct dq_amx_config {
    int k_steps = 1;     // k-tiles of 64 k per chunk
    int64_t m_tiles = 1; // 16-row tiles (a_rows rows when M < 16)
    int a_rows = 16;
    int64_t k_tiles = 1; // k-tiles of the padded K (the A stride between m tiles)
    bool signed_b = false;
};

// One chunk of one panel for all rows: per block of two m tiles, zero the C
// tiles, multiply over the chunk's k-tiles, store C.
class dq_amx_generator : public jit_generator {
public:
    explicit dq_amx_generator(const dq_amx_config &c) : jit_generator(64 * 1024), c_(c) {}
    const char *name() const override { return "jit:matmul_wc_dq:avx512_core_amx"; }

protected:
    void generate() override {
        mov(r_a, ptr[abi_param(0) + offsetof(dq_amx_call, a)]);
        mov(r_b, ptr[abi_param(0) + offsetof(dq_amx_call, b)]);
        mov(r_c, ptr[abi_param(0) + offsetof(dq_amx_call, c)]);
        mov(r_s64, 64);
        mov(r_s128, c_row_bytes);
        for (int64_t mt = 0; mt < c_.m_tiles; mt += 2) {
            const int tiles = mt + 1 < c_.m_tiles ? 2 : 1;
            compute_block(mt, tiles);
            store(mt, tiles);
        }
        ret();
    }

private:
    const Reg64 r_a = rsi, r_b = rdx, r_c = rcx, r_s64 = r8, r_s128 = r9;
    // C (block tile i, n tile t) tmm0..3, A tmm4/5, B tmm6/7.
    static Tmm c_tile(int i, int t) { return Tmm(2 * i + t); }

    int64_t a_tile_bytes() const { return int64_t(c_.a_rows) * 64; }

    void compute_block(int64_t mt, int tiles) {
        for (int i = 0; i < 2 * tiles; ++i) tilezero(Tmm(i));
        for (int s = 0; s < c_.k_steps; ++s) {
            load_weights(s);
            for (int i = 0; i < tiles; ++i) {
                const int64_t off = (mt + i) * c_.k_tiles * a_tile_bytes() + s * a_tile_bytes();
                tileloadd(Tmm(4 + i), ptr[r_a + r_s64 + static_cast<uint32_t>(off)]);
                multiply(c_tile(i, 0), Tmm(4 + i), tmm6);
                multiply(c_tile(i, 1), Tmm(4 + i), tmm7);
            }
        }
    }

    void load_weights(int s) {
        tileloadd(tmm6, ptr[r_b + r_s64 + (2 * s) * tile_bytes]);
        tileloadd(tmm7, ptr[r_b + r_s64 + (2 * s + 1) * tile_bytes]);
    }

    void multiply(const Tmm &c, const Tmm &a, const Tmm &b) {
        if (c_.signed_b) tdpbssd(c, a, b);
        else tdpbsud(c, a, b);
    }

    void store(int64_t mt, int tiles) {
        for (int i = 0; i < tiles; ++i)
            for (int t = 0; t < 2; ++t) {
                const int64_t off = (mt + i) * c_.a_rows * c_row_bytes + t * 64;
                tilestored(ptr[r_c + r_s128 + static_cast<uint32_t>(off)], c_tile(i, t));
            }
    }

    dq_amx_config c_;
};

} // namespace
} // namespace jit

namespace impl {
namespace {

constexpr int64_t panel = 32;
// Below this M the VNNI dynamic-quantization row is as fast or faster
// (K = N = 4096, 1 thread, AMX vs VNNI ms: u8 per-OC M = 10 0.70 / 0.69,
// M = 12 0.71 / 0.81, M = 16 0.81 / 1.20; u4 g128 + zp M = 10 0.76 / 0.73,
// M = 12 0.85 / 0.87, M = 16 0.85 / 1.13; M = 1 to 8 the VNNI row is up to
// 1.8x faster: the tile set-up and the drain per chunk do not pay).
constexpr int64_t amx_dq_min_m = 12;

struct dq_amx_layout {
    bool x4 = false, zp_term = false;
    int64_t gs = 0, ng = 1, chunk = 0, k_pad = 0, k_tiles = 0, n_chunks = 0, n_panels = 0;
    int64_t m_tiles = 1;
    int a_rows = 16;
    int64_t tile_row_bytes() const { return x4 ? 32 : 64; }
    int64_t panel_bytes() const { return k_tiles * 2 * 16 * tile_row_bytes(); }
    int64_t chunk_tiles() const { return chunk / 64; }
};

dq_amx_layout make_layout(const matmul_desc &d) {
    dq_amx_layout l;
    l.x4 = four_bit(d.wei_dt);
    l.ng = d.n_groups();
    if (l.ng == 1) { // per output channel: one X scale per row, chunks of 256 k
        l.chunk = std::min<int64_t>(256, (d.k + 63) / 64 * 64);
        l.k_pad = (d.k + l.chunk - 1) / l.chunk * l.chunk;
        l.gs = l.k_pad;
    } else {
        l.gs = d.group_size();
        l.chunk = l.gs;
        while (l.chunk > 256) l.chunk = l.chunk % 2 == 0 && (l.chunk / 2) % 64 == 0 ? l.chunk / 2 : 64;
        l.k_pad = d.k;
    }
    l.k_tiles = l.k_pad / 64;
    l.n_chunks = l.k_pad / l.chunk;
    l.n_panels = (d.n + panel - 1) / panel;
    l.m_tiles = (d.m + 15) / 16;
    l.a_rows = d.m < 16 ? static_cast<int>(d.m) : 16;
    l.zp_term = !l.x4 && d.zp != matmul_desc::zp_kind::none;
    return l;
}

// What the row decides in supports(): the tile layout; the kernel is built from it.
struct dq_amx_plan : plan {
    dq_amx_layout l;
    // "amx_int8 chunk=256 k_tiles=64 panels=128 m_tiles=2".
    std::string str() const override {
        return "amx_int8 chunk=" + std::to_string(l.chunk) + " k_tiles=" + std::to_string(l.k_tiles) +
               " panels=" + std::to_string(l.n_panels) + " m_tiles=" + std::to_string(l.m_tiles);
    }
};

struct dq_amx_packed : packed {
    aligned_buffer<uint8_t> wei; // n_panels × panel_bytes
    std::vector<float> scale;    // [ng][n_panels · 32]
    std::vector<int32_t> zp;     // [ng][n_panels · 32]: zp' (the weight's zero point; 4-bit: + 8 if signed)
    std::vector<float> bias;
};

class dq_amx_kernel : public matmul_kernel {
public:
    dq_amx_kernel(const matmul_desc &d, const dq_amx_layout &l) : d_(d), l_(l) {
        jit::dq_amx_config c;
        c.k_steps = static_cast<int>(l_.chunk_tiles());
        c.m_tiles = l_.m_tiles;
        c.a_rows = l_.a_rows;
        c.k_tiles = l_.k_tiles;
        c.signed_b = l_.x4 || d.wei_dt == dtype::s8;
        gen_ = std::make_unique<jit::dq_amx_generator>(c);
        gen_->create();
        const char *row = "jit:matmul_wc_dq:avx512_core_amx";
        load_ = std::make_unique<jit::amx_tile_helper>(jit::amx_tile_helper::op::load_config, row);
        release_ = std::make_unique<jit::amx_tile_helper>(jit::amx_tile_helper::op::release, row);
        // Palette 1: C and A a_rows × 64 bytes, B 16 × 64 bytes.
        std::memset(cfg_, 0, sizeof cfg_);
        cfg_[0] = 1;
        for (int t = 0; t < 8; ++t) {
            const uint16_t colsb = 64;
            std::memcpy(cfg_ + 16 + 2 * t, &colsb, 2);
            cfg_[48 + t] = static_cast<uint8_t>(t < 6 ? l_.a_rows : 16);
        }
    }

    // The panels, chunks and parameters depend on K, N, the group and the
    // types, not on M (the M tiling lives in each execute()'s q buffer).
    std::string packing() const override { return "dq_amx"; }

    std::shared_ptr<const packed> pack(const matmul_weights &w) const override {
        check_wc_weights(d_, w);
        auto p = std::make_shared<dq_amx_packed>();
        p->wei = alloc_aligned<uint8_t>(static_cast<size_t>(l_.n_panels * l_.panel_bytes()));
        const int64_t np32 = l_.n_panels * panel;
        p->scale.assign(static_cast<size_t>(l_.ng * np32), 0.f);
        p->zp.assign(static_cast<size_t>(l_.ng * np32), 0);
        const int32_t shift = l_.x4 && d_.wei_dt == dtype::s4 ? 8 : 0;
        for (int64_t g = 0; g < l_.ng; ++g)
            for (int64_t n = 0; n < d_.n; ++n) {
                int32_t zp = 0;
                if (d_.zp == matmul_desc::zp_kind::per_tensor) zp = w.zp[0];
                if (d_.zp == matmul_desc::zp_kind::per_group) zp = w.zp[n * l_.ng + g];
                p->scale[g * np32 + n] = w.scale[n * l_.ng + g];
                p->zp[g * np32 + n] = zp + shift;
            }
        if (d_.with_bias) p->bias.assign(w.bias, w.bias + d_.n);
        impl::parallel((l_.n_panels > 1 && d_.n * d_.k > (1 << 20)) ? 0 : 1, [&](int ithr_, int nthr_) {
            int64_t pi_b, pi_e;
            impl::balance(l_.n_panels, ithr_, nthr_, pi_b, pi_e);
            for (int64_t pi = pi_b; pi < pi_e; ++pi) pack_panel(w, pi, *p);
        });
        return p;
    }

    void execute(const packed &pk, const float *x, float *y, int threads) const override {
        const auto &p = static_cast<const dq_amx_packed &>(pk);
        const int nt_all = impl::resolve_threads(threads);
        const int64_t rows = l_.m_tiles * l_.a_rows;
        // q as A tiles, sx per (group, row) and Σq per (chunk, row).
        std::unique_ptr<int8_t[]> a(new int8_t[static_cast<size_t>(rows * l_.k_pad)]);
        std::vector<float> sx(static_cast<size_t>(l_.ng * rows), 0.f);
        std::vector<int32_t> sumq(static_cast<size_t>(l_.n_chunks * rows), 0);
        impl::parallel((d_.m * d_.k > (1 << 16)) ? nt_all : 1, [&](int ithr_, int nthr_) {
            int64_t m_b, m_e;
            impl::balance(rows, ithr_, nthr_, m_b, m_e);
            for (int64_t m = m_b; m < m_e; ++m) quantize_row(x, m, a.get(), sx.data(), sumq.data());
        });
        const int nt = static_cast<int>(std::min<int64_t>(nt_all, l_.n_panels));
        impl::parallel(nt, [&](int ithr, int nthr) {
            const int64_t t = ithr, n_t = nthr;
            run_panels(p, a.get(), sx.data(), sumq.data(), y, l_.n_panels * t / n_t, l_.n_panels * (t + 1) / n_t);
        });
    }

private:
    // Row m of X into the A tiles (zero rows and k padding past M and K).
    void quantize_row(const float *x, int64_t m, int8_t *a, float *sx, int32_t *sumq) const {
        const int64_t rows = l_.m_tiles * l_.a_rows, mt = m / l_.a_rows, r = m % l_.a_rows;
        auto at = [&](int64_t kt) { return a + ((mt * l_.k_tiles + kt) * l_.a_rows + r) * 64; };
        for (int64_t kt = 0; kt < l_.k_tiles; ++kt) std::memset(at(kt), 0, 64);
        if (m >= d_.m) return;
        const float *xr = x + m * d_.k;
        const int64_t gs_real = l_.ng == 1 ? d_.k : l_.gs;
        for (int64_t g = 0; g < l_.ng; ++g) {
            const float amax = dq_abs_max(xr + g * gs_real, gs_real);
            const float inv = amax > 0.f ? 127.f / amax : 0.f;
            sx[g * rows + m] = amax / 127.f;
            for (int64_t k0 = g * l_.gs; k0 < g * l_.gs + gs_real; k0 += 64) {
                const int64_t n = std::min<int64_t>(64, g * l_.gs + gs_real - k0);
                sumq[(k0 / l_.chunk) * rows + m] += dq_quantize(xr + k0, n, inv, at(k0 / 64));
            }
        }
    }

    // Panels [p0, p1): per panel, the chunks in order into one accumulator block.
    void run_panels(const dq_amx_packed &p, const int8_t *a, const float *sx, const int32_t *sumq, float *y, int64_t p0,
                    int64_t p1) const {
        const int64_t rows = l_.m_tiles * l_.a_rows;
        std::unique_ptr<int32_t[]> c_buf(new int32_t[static_cast<size_t>(rows * panel + 16)]);
        std::vector<float> acc(static_cast<size_t>(rows * panel));
        std::unique_ptr<int8_t[]> b_buf(new int8_t[static_cast<size_t>(l_.chunk_tiles() * 2 * 1024 + 64)]);
        int32_t *c = align64(c_buf.get());
        int8_t *b4 = align64(b_buf.get());
        load_->entry<void (*)(const void *)>()(cfg_);
        const auto fn = gen_->entry<jit::dq_amx_fn>();
        for (int64_t pi = p0; pi < p1; ++pi) {
            std::fill(acc.begin(), acc.end(), 0.f);
            for (int64_t ch = 0; ch < l_.n_chunks; ++ch) {
                const int64_t kt0 = ch * l_.chunk_tiles(), g = ch * l_.chunk / l_.gs;
                const uint8_t *w = p.wei.get() + pi * l_.panel_bytes() + kt0 * 2 * 16 * l_.tile_row_bytes();
                jit::dq_amx_call call;
                call.a = a + kt0 * l_.a_rows * 64;
                call.b = reinterpret_cast<const int8_t *>(w);
                if (l_.x4) {
                    decompress(w, p.zp.data() + g * l_.n_panels * panel + pi * panel, b4);
                    call.b = b4;
                }
                call.c = c;
                fn(&call);
                drain(p, pi, g, c, sx + g * rows, sumq + ch * rows, acc.data());
            }
            store_panel(p, pi, acc.data(), y);
        }
        release_->entry<void (*)()>()();
    }

    template <typename T>
    static T *align64(T *p) {
        return reinterpret_cast<T *>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t(63));
    }

    // 4-bit chunk → s8 B tiles: byte 2i / 2i + 1 from the low / high nibble of
    // packed byte i, minus zp' of its column.
    __attribute__((target("avx512f,avx512bw"))) void decompress(const uint8_t *w, const int32_t *zp,
                                                                int8_t *out) const {
        __m512i zpv[2];
        for (int t = 0; t < 2; ++t) {
            alignas(64) int8_t z[64];
            for (int n = 0; n < 16; ++n)
                for (int j = 0; j < 4; ++j) z[n * 4 + j] = static_cast<int8_t>(zp[t * 16 + n]);
            zpv[t] = _mm512_load_si512(z);
        }
        const __m512i mask = _mm512_set1_epi16(0x0F0F);
        const int64_t rows = l_.chunk_tiles() * 2 * 16;
        for (int64_t r = 0; r < rows; ++r) {
            const __m512i v = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(w + r * 32)));
            const __m512i b = _mm512_and_si512(_mm512_or_si512(v, _mm512_slli_epi16(v, 4)), mask);
            _mm512_store_si512(out + r * 64, _mm512_sub_epi8(b, zpv[(r / 16) % 2]));
        }
    }

    // acc[m][n] += float(C − zp'·Σq) · (sx[m] · scale[n]) for the chunk.
    // (The zero-masked conversion: GCC 12 warns -Wuninitialized on the unmasked one.)
    __attribute__((target("avx512f"))) void drain(const dq_amx_packed &p, int64_t pi, int64_t g, const int32_t *c,
                                                  const float *sx, const int32_t *sumq, float *acc) const {
        const int64_t base = g * l_.n_panels * panel + pi * panel;
        __m512 scale[2];
        __m512i zp[2];
        for (int h = 0; h < 2; ++h) {
            scale[h] = _mm512_loadu_ps(p.scale.data() + base + 16 * h);
            zp[h] = _mm512_loadu_si512(p.zp.data() + base + 16 * h);
        }
        for (int64_t m = 0; m < d_.m; ++m) {
            const __m512 s = _mm512_set1_ps(sx[m]);
            for (int h = 0; h < 2; ++h) {
                __m512i v = _mm512_loadu_si512(c + m * panel + 16 * h);
                if (l_.zp_term) v = _mm512_sub_epi32(v, _mm512_mullo_epi32(zp[h], _mm512_set1_epi32(sumq[m])));
                float *o = acc + m * panel + 16 * h;
                _mm512_storeu_ps(o, _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, v), _mm512_mul_ps(s, scale[h]),
                                                    _mm512_loadu_ps(o)));
            }
        }
    }

    void store_panel(const dq_amx_packed &p, int64_t pi, const float *acc, float *y) const {
        const int64_t n0 = pi * panel, cols = std::min<int64_t>(panel, d_.n - n0);
        for (int64_t m = 0; m < d_.m; ++m) {
            float *yr = y + m * d_.n + n0;
            const float *o = acc + m * panel;
            for (int64_t c = 0; c < cols; ++c) yr[c] = d_.with_bias ? o[c] + p.bias[n0 + c] : o[c];
        }
    }

    // 8-bit: the weight byte; 4-bit: the nibble, + 8 when signed.
    uint8_t code(const matmul_weights &w, int64_t n, int64_t k) const {
        const int32_t v = weight_at(w.wei, d_.wei_dt, n * d_.k + k);
        if (!l_.x4) return static_cast<uint8_t>(v);
        return static_cast<uint8_t>(v + (d_.wei_dt == dtype::s4 ? 8 : 0));
    }

    void pack_panel(const matmul_weights &w, int64_t pi, dq_amx_packed &p) const {
        uint8_t *dst = p.wei.get() + pi * l_.panel_bytes();
        const int64_t n0 = pi * panel, cols = std::min<int64_t>(panel, d_.n - n0), rb = l_.tile_row_bytes();
        for (int64_t col = 0; col < cols; ++col) {
            const int64_t t = col / 16, n = col % 16;
            for (int64_t k = 0; k < d_.k; ++k) {
                const int64_t kt = k / 64, r = (k % 64) / 4, j = k % 4, byte = n * 4 + j;
                uint8_t *row = dst + ((kt * 2 + t) * 16 + r) * rb;
                const uint8_t v = code(w, n0 + col, k);
                if (!l_.x4) row[byte] = v;
                else row[byte / 2] |= static_cast<uint8_t>(v << (4 * (byte % 2)));
            }
            // 4-bit K padding decompresses to −zp': its q is 0, so it adds nothing.
        }
    }

    matmul_desc d_;
    dq_amx_layout l_;
    std::unique_ptr<jit::jit_generator> gen_, load_, release_;
    alignas(64) uint8_t cfg_[64];
};

bool dq_amx_supports(const matmul_desc &d, const matmul_hints &h, const std::string &name, std::string *why) {
    if (!h.dynamic_quantization) return reject(why, "dynamic quantization not requested (opt-in hint)");
    if (!wc_shape_ok(d, why)) return false;
    if (d.wei_dt != dtype::u8 && d.wei_dt != dtype::s8 && !four_bit(d.wei_dt))
        return reject(why, std::string("takes u8/s8/u4/s4 weights, got ") + to_string(d.wei_dt));
    if (d.n_groups() > 1 && d.group_size() % 64 != 0)
        return reject(why, "group size " + std::to_string(d.group_size()) +
                               " is not a multiple of 64 (a tile's K; the VNNI row takes it)");
    if (d.m < amx_dq_min_m && h.impl != name)
        return reject(why, "m < " + std::to_string(amx_dq_min_m) +
                               ": the VNNI dynamic-quantization row is faster there (docs/matmul_wc.md)");
    return true;
}

} // namespace

matmul_entry matmul_wc_dq_amx_row(const std::string &name) {
    matmul_entry e = impl::named_entry<matmul_entry>(name, "jit:matmul_wc_dq:avx512_core_amx", impl::row_family::jit);
    e.dynamic_quantization = true;
    e.needs = {cpu_feature::avx512_core, cpu_feature::avx512_core_vnni, cpu_feature::amx_int8};
    e.decide = [name](const matmul_desc &d, const matmul_hints &h, const platform &, std::string *why) -> plan_ptr {
        if (!dq_amx_supports(d, h, name, why)) return nullptr;
        auto pl = std::make_shared<dq_amx_plan>();
        pl->l = make_layout(d);
        return pl;
    };
    e.build = [](const matmul_desc &d, const matmul_hints &, const plan &pl) -> std::shared_ptr<const matmul_kernel> {
        return std::make_shared<dq_amx_kernel>(d, dynamic_cast<const dq_amx_plan &>(pl).l);
    };
    return e;
}

} // namespace impl
} // namespace qconv
