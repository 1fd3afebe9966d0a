// Code generator of the AMX-BF16 weight-compressed MatMul kernel (one chunk
// of one panel for all rows; layout and scheme in matmul_wc_amx.h), and the
// tile configuration helpers.
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "kernels/jit/matmul/matmul_wc_amx.h"
#include "kernels/jit/matmul/matmul_wc_common.h"

namespace qconv::jit {
namespace {

using namespace Xbyak;

constexpr int tile_bytes = 1024;   // 16 rows × 64 bytes
constexpr int acc_row_bytes = 128; // 32 f32 columns per panel

class matmul_wc_amx_generator : public jit_generator {
public:
    explicit matmul_wc_amx_generator(const matmul_wc_amx_config &c) : jit_generator(128 * 1024), c_(c) {
        if (c.k_steps < 1 || c.m_tiles < 1 || c.a_rows < 1 || c.a_rows > 16 || (c.m_tiles > 1 && c.a_rows != 16))
            fail("jit", "matmul_wc_amx: bad tile shape");
    }
    const char *name() const override {
        return c_.four_bit ? "jit:matmul_wc_x4:avx512_core_amx" : "jit:matmul_wc_x8:avx512_core_amx";
    }

protected:
    // Decompression of the next chunk is spread over the tile operations of
    // this one (the tile unit and the vector ports then work at once): its
    // rows go between the multiplies of the first unrolled_blocks blocks.
    void generate() override {
        preamble();
        load_args();
        if (c_.decompress_only) {
            emit_rows(rows_total());
        } else {
            mov(r_aa, r_a);
            mov(r_accb, r_acc);
            std::vector<int> blocks(static_cast<size_t>(c_.m_tiles / 2), 2);
            if (c_.m_tiles % 2) blocks.push_back(1);
            const size_t unrolled = std::min<size_t>(blocks.size(), unrolled_blocks);
            int mults = 0;
            for (size_t i = 0; i < unrolled; ++i) mults += blocks[i] * 2 * c_.k_steps;
            rows_per_multiply_ = (rows_total() + mults - 1) / mults;
            for (size_t i = 0; i < unrolled; ++i) block(blocks[i]);
            emit_rows(rows_total() - next_row_);
            rows_per_multiply_ = 0;
            const size_t loop_pairs = blocks.size() - unrolled - (blocks.size() > unrolled && blocks.back() == 1);
            if (loop_pairs > 0) emit_counted_loop(*this, r_cnt, static_cast<int64_t>(loop_pairs), [this] { block(2); });
            if (blocks.size() > unrolled && blocks.back() == 1) block(1);
        }
        postamble();
        emit_constants();
    }

    static constexpr size_t unrolled_blocks = 4;

    // One block of `tiles` m tiles: compute, drain, advance.
    void block(int tiles) {
        compute_block(tiles);
        store(tiles);
        add(r_aa, tiles * a_tile_stride());
        add(r_accb, tiles * 16 * acc_row_bytes);
    }

private:
    // ---- registers
    const Reg64 r_arg = rdi, r_w = r8, r_prm = r9, r_a = r10, r_acc = r11, r_b = rsi, r_tmp = rdx;
    const Reg64 r_s64 = rcx, r_cnt = rax, r_aa = r12, r_accb = r13, r_bout = r14, r_zprm = r15;
    // Vector registers: zp' (8-bit: 4 dword vectors; 4-bit: 2 word vectors),
    // the scales of the two tiles, the 4-bit mask and table, temporaries.
    Zmm zp_vec(int t, int h) const { return Zmm(t * 2 + h); }
    Zmm scale_vec(int t) const { return Zmm(4 + t); }
    const Zmm z_mask = zmm6, z_table = zmm7;
    Zmm tmp(int i) const { return Zmm(8 + i % 24); }
    // Tiles: C (m tile i, n tile t) tmm0..3, A hi / lo tmm4 / tmm5, B tmm6 / tmm7.
    Tmm c_tile(int i, int t) const { return Tmm(2 * i + t); }
    Label l_table_, l_mask_;
    int next_row_ = 0;          // the next row of B to decompress
    int rows_per_multiply_ = 0; // rows emitted after each multiply()

    int64_t a_tile_bytes() const { return int64_t(c_.a_rows) * 64; }
    // Bytes from one m tile's activations to the next one's.
    int64_t a_tile_stride() const { return c_.k_tiles * 2 * a_tile_bytes(); }

    void load_args() {
        mov(r_w, ptr[r_arg + offsetof(matmul_wc_amx_call, w)]);
        mov(r_prm, ptr[r_arg + offsetof(matmul_wc_amx_call, params)]);
        mov(r_a, ptr[r_arg + offsetof(matmul_wc_amx_call, a)]);
        mov(r_acc, ptr[r_arg + offsetof(matmul_wc_amx_call, acc)]);
        mov(r_b, ptr[r_arg + offsetof(matmul_wc_amx_call, b)]);
        mov(r_bout, ptr[r_arg + offsetof(matmul_wc_amx_call, b_out)]);
        mov(r_zprm, ptr[r_arg + offsetof(matmul_wc_amx_call, zp_params)]);
        mov(r_tmp, ptr[r_arg + offsetof(matmul_wc_amx_call, scratch)]);
        mov(r_s64, 64);
        for (int t = 0; t < 2; ++t) vmovups(scale_vec(t), ptr[r_prm + 64 * t]);
        if (c_.zp)
            for (int t = 0; t < 2; ++t)
                for (int h = 0; h < (c_.four_bit ? 1 : 2); ++h)
                    vmovups(zp_vec(t, h), ptr[r_zprm + 128 + (c_.four_bit ? 64 * t : 128 * t + 64 * h)]);
        if (c_.four_bit) {
            vmovups(z_table, ptr[rip + l_table_]);
            vpbroadcastd(z_mask, ptr[rip + l_mask_]);
        }
    }

    int rows_total() const { return c_.k_steps * 2 * 16; }

    // The next n rows of the next chunk's B tiles (k_steps × 2 tiles × 16
    // rows) from r_w into r_bout.
    void emit_rows(int n) {
        for (; n > 0 && next_row_ < rows_total(); --n, ++next_row_) {
            const int q = next_row_, t = (q / 16) % 2;
            if (c_.four_bit) decompress_row4(q, t);
            else decompress_row8(q, t);
        }
    }

    // 32 bytes [n][j] -> 32 bf16 [n][j]: widen, − zp', convert (exact).
    void decompress_row8(int q, int t) {
        const Zmm lo = tmp(2 * q), hi = tmp(2 * q + 1);
        vpmovzxbd(lo, ptr[r_w + q * 32]);
        vpmovzxbd(hi, ptr[r_w + q * 32 + 16]);
        if (c_.zp) {
            vpsubd(lo, lo, zp_vec(t, 0));
            vpsubd(hi, hi, zp_vec(t, 1));
        }
        vcvtdq2ps(lo, lo);
        vcvtdq2ps(hi, hi);
        vcvtne2ps2bf16(lo, hi, lo); // words 0..15 from lo (n 0..7), 16..31 from hi
        vmovaps(ptr[r_bout + q * 64], lo);
    }

    // 16 bytes, two nibbles each -> 32 bf16 [n][j]: dword n = low | high << 16,
    // − zp' in words, then the table bf16(v) for v mod 32 in [−16, 15].
    void decompress_row4(int q, int t) {
        const Zmm v = tmp(2 * q), s = tmp(2 * q + 1);
        vpmovzxbd(v, ptr[r_w + q * 16]);
        vpslld(s, v, 12);
        vpternlogd(v, s, z_mask, 0xA8); // (v | s) & mask
        if (c_.zp) vpsubw(v, v, zp_vec(t, 0));
        vpermw(v, v, z_table);
        vmovaps(ptr[r_bout + q * 64], v);
    }

    // C tiles of `tiles` m tiles (at r_aa) × 2 n tiles over the chunk. Two
    // m tiles: the hi pass of both, then the lo pass, so that four tdpbf16ps
    // separate two on the same C tile. One m tile: the lo pass into its own
    // C tiles (tmm2, tmm3), summed when drained.
    void compute_block(int tiles) {
        for (int i = 0; i < 4; ++i) tilezero(Tmm(i));
        for (int s = 0; s < c_.k_steps; ++s) {
            tileloadd(tmm6, ptr[r_b + r_s64 + (2 * s) * tile_bytes]);
            tileloadd(tmm7, ptr[r_b + r_s64 + (2 * s + 1) * tile_bytes]);
            if (tiles == 2) {
                for (int part = 0; part < 2; ++part)
                    for (int i = 0; i < 2; ++i) multiply(Tmm(4 + i), a_offset(i, s, part), c_tile(i, 0), c_tile(i, 1));
            } else {
                multiply(tmm4, a_offset(0, s, 0), tmm0, tmm1);
                multiply(tmm5, a_offset(0, s, 1), tmm2, tmm3);
            }
        }
    }

    // Byte offset of the A tile of m tile i, k-step s, part 0 (hi) / 1 (lo).
    int64_t a_offset(int i, int s, int part) const { return i * a_tile_stride() + (s * 2 + part) * a_tile_bytes(); }

    // a = the A tile at r_aa + off; c0 += a · B0, c1 += a · B1.
    void multiply(const Tmm &a, int64_t off, const Tmm &c0, const Tmm &c1) {
        tileloadd(a, ptr[r_aa + r_s64 + off]);
        tdpbf16ps(c0, a, tmm6);
        tdpbf16ps(c1, a, tmm7);
        emit_rows(rows_per_multiply_);
    }

    // acc = fma(C, scale, acc) for the block's C tiles (through the scratch);
    // one m tile: C = C_hi + C_lo.
    void store(int tiles) {
        for (int i = 0; i < 4; ++i) tilestored(ptr[r_tmp + r_s64 + i * tile_bytes], Tmm(i));
        int n = 0;
        for (int i = 0; i < tiles; ++i)
            for (int t = 0; t < 2; ++t)
                for (int r = 0; r < c_.a_rows; ++r, n += 2) {
                    const Zmm a = tmp(n), c = tmp(n + 1);
                    const int64_t at = (int64_t(i) * 16 + r) * acc_row_bytes + t * 64;
                    const int64_t row = (2 * i + t) * tile_bytes + r * 64;
                    vmovups(a, ptr[r_accb + at]);
                    if (tiles == 1) {
                        vmovups(c, ptr[r_tmp + row]);
                        vaddps(c, c, ptr[r_tmp + row + 2 * tile_bytes]);
                        vfmadd231ps(a, scale_vec(t), c);
                    } else {
                        vfmadd231ps(a, scale_vec(t), ptr[r_tmp + row]);
                    }
                    vmovups(ptr[r_accb + at], a);
                }
    }

    void emit_constants() {
        align(64);
        L(l_table_);
        for (int i = 0; i < 32; ++i) {
            const float v = static_cast<float>(i < 16 ? i : i - 32);
            uint32_t bits;
            std::memcpy(&bits, &v, 4);
            dw(static_cast<uint16_t>(bits >> 16));
        }
        L(l_mask_);
        dd(0x000F000F);
    }

    matmul_wc_amx_config c_;
};

template <typename G, typename... A>
std::unique_ptr<jit_generator> created(A &&...a) {
    auto g = std::make_unique<G>(std::forward<A>(a)...);
    g->create();
    return g;
}

} // namespace

void matmul_wc_amx_tile_config(const matmul_wc_amx_config &c, uint8_t cfg[64]) {
    std::memset(cfg, 0, 64);
    cfg[0] = 1; // palette 1
    for (int t = 0; t < 8; ++t) {
        const uint16_t colsb = 64;
        std::memcpy(cfg + 16 + 2 * t, &colsb, 2);
        cfg[48 + t] = static_cast<uint8_t>(t < 6 ? c.a_rows : 16);
    }
}

std::unique_ptr<jit_generator> make_matmul_wc_amx_generator(const matmul_wc_amx_config &c) {
    return created<matmul_wc_amx_generator>(c);
}

int64_t matmul_wc_amx_chunk(int64_t k_pad, int64_t gs, bool per_oc) {
    for (int64_t c = 128; c >= 32; c -= 32) {
        if (!per_oc && gs % c != 0) continue;
        const int64_t k = per_oc ? (k_pad + c - 1) / c * c : k_pad;
        if (matmul_wc_amx_epsilon(k, c) <= matmul_wc_amx_max_epsilon) return c;
    }
    return 32;
}

double matmul_wc_amx_epsilon(int64_t k_pad, int64_t chunk) {
    const double chunks = std::ceil(double(k_pad) / double(chunk));
    return std::ldexp(1.0, -17) + (2.0 * double(chunk) + chunks + 3.0) * std::ldexp(1.0, -24);
}

} // namespace qconv::jit
