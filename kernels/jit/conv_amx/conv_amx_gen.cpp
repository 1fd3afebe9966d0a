// Code generators of the AMX conv micro-kernel (see conv_amx.h): the block
// kernel (tilezero, the K loop of tileloadd + tdpbusd/tdpbssd, tilestored,
// then, when fused, the output pipeline of the epilogue injector over the 32
// pixel rows of the int32 buffer) and the two helpers that load and release
// the tile configuration.
//
// Registers: rdi = call, rbp = end of the calls; K loop: rsi/rdx = A of pixels 0 / 16, rcx = A
// stride, r8 = B, r9 = 64 (B stride), r10 = chunk counter; store: r10 = C,
// r9 = C stride (also for the C load of a K range); epilogue: r8 = row offsets, rsi = the row's offset, rdx =
// dst at c0, and the registers it gives the epilogue injector (rax, rbx, r11..r15); zmm0 = y,
// zmm24..27 the vector parameters, zmm28 spare.
#include <cstring>
#include <string>

#include "kernels/jit/base/conv_epilogue_injector.h"
#include "kernels/jit/base/jit_base.h"
#include "kernels/jit/base/jit_traits.h"
#include "kernels/jit/conv_amx/conv_amx.h"
#include "qconv/types.h"

namespace qconv::jit {
namespace {

constexpr int c_row_bytes = 32 * 4; // C buffer: 32 int32 per pixel

constexpr const char *amx_row = "jit:conv_x8s8:avx512_core_amx"; // the row these kernels serve

class amx_block_gen : public jit_generator, public epilogue_host, public epilogue_reg_names {
public:
    using traits = amx_traits; // tile accumulators, zmm epilogue
    static_assert(traits::acc == acc_kind::tiles, "the tile products are stored, then the zmm epilogue reloads them");
    explicit amx_block_gen(const amx_ukernel_cfg &cfg)
        : jit_generator(256 * 1024 + cfg.tap_off.size() * 64), epilogue_reg_names(traits{}, epi_regs(cfg)), cfg_(cfg),
          epi_(traits{}, *this, *this, cfg.pipe, epi_regs(cfg)) {}
    const char *name() const override { return amx_row; }

protected:
    // fn(calls, n): for call i: the tile products of block i are issued, then
    // the epilogue of block i − 1 runs from its buffer (vector work while the
    // tile unit computes), then block i's C tiles are stored; the last
    // block's epilogue follows the loop.
    void generate() override {
        for (const auto &r : {rbx, rbp, r12, r13, r14, r15}) push(r);
        push(reg_param); // [rsp]: the first call
        imul(reg_end, abi_param(1), static_cast<int>(sizeof(amx_call)));
        add(reg_end, reg_param);
        if (packs()) load_pack_constants();
        Xbyak::Label l_block, l_first;
        L(l_block);
        if (cfg_.k_ranges) start_c();
        load_args();
        if (!cfg_.k_ranges)
            for (int i = 0; i < 4; ++i) tilezero(c_tile(i));
        compute_block();
        if (cfg_.pipe) {
            cmp(reg_param, ptr[rsp]);
            je(l_first, T_NEAR);
            sub(reg_param, static_cast<int>(sizeof(amx_call)));
            post_ops_if_last_k();
            add(reg_param, static_cast<int>(sizeof(amx_call)));
            L(l_first);
        }
        store();
        add(reg_param, static_cast<int>(sizeof(amx_call)));
        cmp(reg_param, reg_end);
        jb(l_block, T_NEAR);
        if (cfg_.pipe) {
            sub(reg_param, static_cast<int>(sizeof(amx_call)));
            post_ops_if_last_k();
            vzeroupper();
        }
        pop(reg_param);
        for (const auto &r : {r15, r14, r13, r12, rbp, rbx}) pop(r);
        ret();
        if (cfg_.pipe) {
            align(64);
            epi_.emit_const_pool<traits>();
        }
        if (packs()) {
            align(64);
            L(l_perm_);
            for (uint32_t j = 0; j < 16; ++j) dd((j % 4) * 4 + j / 4);
        }
    }

private:
    // Tiles: C 0..3 ([pixel half][OC half]), A 4/5 (pixel halves), B 6/7 (OC halves).
    Xbyak::Tmm c_tile(int i) const { return Xbyak::Tmm(i); }
    Xbyak::Tmm a_tile(int i) const { return Xbyak::Tmm(4 + i); }
    Xbyak::Tmm b_tile(int i) const { return Xbyak::Tmm(6 + i); }

    void load_args() {
        mov(reg_a0, ptr[reg_param + offsetof(amx_call, a)]);
        mov(reg_stride, ptr[reg_param + offsetof(amx_call, a_stride)]);
        mov(reg_b, ptr[reg_param + offsetof(amx_call, b)]);
        mov(reg_a1, reg_stride);
        shl(reg_a1, 4);
        add(reg_a1, reg_a0); // pixel 16
        mov(reg_b_stride, 64);
    }

    int64_t b_tile_bytes() const { return int64_t(cfg_.kc) / 4 * 64; }

    // B tiles of tap t (both OC halves) of the current chunk.
    void load_weights(size_t t) {
        for (int h = 0; h < 2; ++h) {
            const int64_t off = (int64_t(t) * 2 + h) * b_tile_bytes();
            tileloadd(b_tile(h), ptr[reg_b + reg_b_stride + static_cast<uint32_t>(off)]);
        }
        if (cfg_.prefetch_bytes > 0)
            for (int64_t l = 0; l < 2 * b_tile_bytes(); l += 64) {
                prefetcht0(
                    ptr[reg_b + static_cast<uint32_t>(int64_t(t) * 2 * b_tile_bytes() + l + cfg_.prefetch_bytes)]);
            }
    }

    void load_source(size_t t) {
        const auto off = static_cast<uint32_t>(cfg_.tap_off[t]);
        tileloadd(a_tile(0), ptr[reg_a0 + reg_stride + off]);
        tileloadd(a_tile(1), ptr[reg_a1 + reg_stride + off]);
    }

    void multiply(const Xbyak::Tmm &c, const Xbyak::Tmm &a, const Xbyak::Tmm &b) {
        if (cfg_.s8_src) tdpbssd(c, a, b);
        else tdpbusd(c, a, b);
    }

    // The call's C buffer: reg_c, its row stride in reg_c_stride; C tile
    // (pixel half p, OC half h) at c + p·16 rows + h·64 bytes.
    void load_c_buffer() {
        mov(reg_c, ptr[reg_param + offsetof(amx_call, c)]);
        mov(reg_c_stride, c_row_bytes);
    }
    Xbyak::Address c_buffer(int p, int h) { return ptr[reg_c + reg_c_stride + (p * 16 * c_row_bytes + h * 64)]; }

    // K ranges: the C tiles from zero (the block's first range) or from the
    // call's C buffer, where the previous range left them.
    void start_c() {
        Xbyak::Label l_zero, l_done;
        test(dword[reg_param + offsetof(amx_call, flags)], amx_call::load_c);
        jz(l_zero, T_NEAR);
        load_c_buffer();
        for (int p = 0; p < 2; ++p)
            for (int h = 0; h < 2; ++h) tileloadd(c_tile(p * 2 + h), c_buffer(p, h));
        jmp(l_done, T_NEAR);
        L(l_zero);
        for (int i = 0; i < 4; ++i) tilezero(c_tile(i));
        L(l_done);
    }

    // The pipeline of the call at reg_param (K ranges: only if it ends its block's K).
    void post_ops_if_last_k() {
        Xbyak::Label l_skip;
        if (cfg_.k_ranges) {
            test(dword[reg_param + offsetof(amx_call, flags)], amx_call::last_k);
            jz(l_skip, T_NEAR);
        }
        apply_post_ops();
        L(l_skip);
    }

    // K loop: nk chunks (runtime loop; the call's own count with K ranges) × every tap (unrolled).
    void compute_block() {
        Xbyak::Label l_chunk;
        if (cfg_.k_ranges) mov(reg_k.cvt32(), dword[reg_param + offsetof(amx_call, nk)]);
        else mov(reg_k, cfg_.nk);
        L(l_chunk);
        for (size_t t = 0; t < cfg_.tap_off.size(); ++t) {
            load_source(t);
            load_weights(t);
            multiply(c_tile(0), a_tile(0), b_tile(0));
            multiply(c_tile(1), a_tile(0), b_tile(1));
            multiply(c_tile(2), a_tile(1), b_tile(0));
            multiply(c_tile(3), a_tile(1), b_tile(1));
        }
        add(reg_a0, cfg_.kc);
        add(reg_a1, cfg_.kc);
        add(reg_b, static_cast<uint32_t>(int64_t(cfg_.tap_off.size()) * 2 * b_tile_bytes()));
        dec(reg_k);
        jnz(l_chunk, T_NEAR);
    }

    // The C tiles to the call's buffer.
    void store() {
        load_c_buffer();
        for (int p = 0; p < 2; ++p)
            for (int h = 0; h < 2; ++h) tilestored(c_buffer(p, h), c_tile(p * 2 + h));
    }

    // ------------------------------------------------------- fused epilogue
    // Every vector is masked by k1, loaded per vector from the call (the
    // block's channel count is a runtime value).
    bool tail(int) const override { return true; }
    Xbyak::Address full_operand(int i, int w, int b) override {
        mov(reg_full, ptr[reg_param + offsetof(amx_call, full) + 8 * i]);
        const int64_t row = consecutive_ ? w * cfg_.dst_pixel_elems * 4 : 0;
        return ptr[reg_full + reg_row * 4 + static_cast<int32_t>(row + b * 64)];
    }

    void load_epilogue_args() {
        mov(reg_dst_base, ptr[reg_param + offsetof(amx_call, dst)]);
        mov(reg_rows, ptr[reg_param + offsetof(amx_call, row_off)]);
        mov(reg_comp, ptr[reg_param + offsetof(amx_call, comp)]);
        mov(reg_bias, ptr[reg_param + offsetof(amx_call, bias)]);
        mov(reg_coff, ptr[reg_param + offsetof(amx_call, c_off)]);
        mov(reg_pbase, reinterpret_cast<uintptr_t>(cfg_.pipe->scale.data()));
        add(reg_pbase, reg_coff);
        mov(reg_c, ptr[reg_param + offsetof(amx_call, c)]);
        vxorps(zmm_zero, zmm_zero, zmm_zero);
    }

    // The pipeline over the block's buffer: consecutive outputs (no row
    // table: one address per block, no per-row test) or through the table.
    void apply_post_ops() {
        load_epilogue_args();
        Xbyak::Label l_table, l_done;
        test(reg_rows, reg_rows);
        jnz(l_table, T_NEAR);
        mov(reg_row, ptr[reg_param + offsetof(amx_call, row0)]);
        epilogue_rows(true);
        jmp(l_done, T_NEAR);
        L(l_table);
        epilogue_rows(false);
        L(l_done);
    }

    // Per OC vector (parameters hoisted), per pixel row of the buffer: y = C
    // row → pipeline → dst; through the table, rows whose offset is negative
    // are skipped.
    void epilogue_rows(bool consecutive) {
        consecutive_ = consecutive;
        const Xbyak::Zmm y(0);
        const int dsz_ = epi_.dsz();
        const Xbyak::RegExp dst_row = dsz_ == 1 ? reg_dst_base + reg_row : reg_dst_base + reg_row * 4;
        const int64_t pix = consecutive ? cfg_.dst_pixel_elems * dsz_ : 0; // dst bytes between rows
        if (consecutive) lea(reg_dst, ptr[dst_row]);
        for (int b = 0; b < 2; ++b) {
            Xbyak::Label l_none, l_rows_done;
            kmovw(k1, ptr[reg_param + offsetof(amx_call, mask) + 2 * b]);
            kortestw(k1, k1);
            jz(l_none, T_NEAR); // no channel in this vector
            epi_.emit_load_params<traits>(b);
            epi_.emit_hoist_oc_params<traits>(b);
            if (consecutive && packs()) {
                Xbyak::Label l_one;
                kortestw(k1, k1);
                jnc(l_one, T_NEAR); // a channel tail: one masked store a row
                packed_rows(b, pix);
                jmp(l_rows_done, T_NEAR);
                L(l_one);
            }
            for (int w = 0; w < 32; ++w) {
                Xbyak::Label l_skip;
                if (!consecutive) {
                    mov(reg_row, ptr[reg_rows + w * 8]);
                    test(reg_row, reg_row);
                    js(l_skip, T_NEAR);
                    lea(reg_dst, ptr[dst_row]);
                }
                const int wr = consecutive ? w : 0;
                vmovdqu32(y, ptr[reg_c + w * c_row_bytes + b * 64]);
                epi_.emit_pixel_pipeline<traits>(y, wr, b, pix);
                epi_.emit_store<traits>(y, ptr[reg_dst + static_cast<int32_t>(wr * pix + b * 16 * dsz_)], tail(b),
                                        cfg_.pipe->dst_dt);
                if (!consecutive) L(l_skip);
            }
            L(l_rows_done);
            epi_.drop_hoisted();
            L(l_none);
        }
    }

    // u8 stores of a full OC vector over consecutive rows (cfg.pack_u8):
    // four rows' rounded int32 values (0x80000000 for NaN and ±2^31 and
    // beyond, which min(255, y) or bounded_u8 leave only below 0) go
    // through vpackssdw and vpackuswb, the store's saturation; the packs
    // work per 128-bit lane, so dword 4·L + r holds row r's channels
    // 4·L..4·L+3 and vpermd gathers each row's 16 bytes into lane r. Row 0
    // is stored from the low lane, rows 1..3 after a vextracti32x4 (16-byte
    // stores never split a cache line; masked stores of the whole vector
    // placed 16·r bytes early did, and lost on 1 KiB rows). Per 16 outputs
    // 1.75 shuffle uops instead of vmaxps + vpmovusdb's two.
    bool packs() const { return cfg_.pipe && cfg_.pack_u8; }
    const Xbyak::Zmm zmm_perm = Xbyak::Zmm(23), zmm_255 = Xbyak::Zmm(29);
    Xbyak::Label l_perm_;
    void load_pack_constants() {
        vmovdqu32(zmm_perm, ptr[rip + l_perm_]);
        if (!cfg_.bounded_u8) vbroadcastss(zmm_255, epi_.cst_plain<traits>(255.f));
    }
    void packed_rows(int b, int64_t pix) {
        const Xbyak::Zmm y[4] = {Xbyak::Zmm(0), Xbyak::Zmm(20), Xbyak::Zmm(21), Xbyak::Zmm(22)};
        for (int w = 0; w < 32; w += 4) {
            for (int r = 0; r < 4; ++r) {
                vmovdqu32(y[r], ptr[reg_c + (w + r) * c_row_bytes + b * 64]);
                epi_.emit_pixel_pipeline<traits>(y[r], w + r, b, pix);
                if (!cfg_.bounded_u8) vminps(y[r], zmm_255, y[r]); // keeps NaN: → 0x80000000 → 0
                vcvtps2dq(y[r], y[r]);
            }
            vpackssdw(y[0], y[0], y[1]);
            vpackssdw(y[2], y[2], y[3]);
            vpackuswb(y[0], y[0], y[2]);
            vpermd(y[0], zmm_perm, y[0]);
            vmovdqu(ptr[reg_dst + static_cast<int32_t>(w * pix + b * 16)], Xbyak::Xmm(y[0].getIdx()));
            for (int r = 1; r < 4; ++r) {
                const Xbyak::Xmm row(y[r].getIdx());
                vextracti32x4(row, y[0], static_cast<uint8_t>(r));
                vmovdqu32(ptr[reg_dst + static_cast<int32_t>((w + r) * pix + b * 16)], row);
            }
        }
    }

    // The epilogue's registers: rax, rbx, r11..r15; zmm24..27 its parameters,
    // zmm28 spare; the tile products use no vector register, so zmm1..23 hold
    // the chain's per-OC parameters across the 32 pixel rows of an OC vector.
    static epilogue_regs epi_regs(const amx_ukernel_cfg &cfg) {
        namespace u = Xbyak::util;
        epilogue_regs r(u::rax, u::rbx, u::r11, u::r12, u::r13, u::r14, u::r15, 24, 28);
        if (cfg.hoist) // zmm20..23 are the packed stores' (packed_rows)
            for (int i = 1; i <= (cfg.pipe && cfg.pack_u8 ? 19 : 23); ++i) r.hoist.push_back(i);
        return r;
    }

    bool consecutive_ = false;
    const amx_ukernel_cfg cfg_;
    conv_epilogue_injector epi_;
    const Xbyak::Reg64 reg_param = rdi, reg_a0 = rsi, reg_a1 = rdx, reg_stride = rcx, reg_b = r8, reg_b_stride = r9,
                       reg_k = r10, reg_c = r10, reg_c_stride = r9;
    const Xbyak::Reg64 reg_rows = r8, reg_row = rsi, reg_dst_base = rdx, reg_end = rbp;
};

} // namespace

struct amx_ukernel::gens {
    explicit gens(const amx_ukernel_cfg &cfg)
        : block(cfg), load(amx_tile_helper::op::load_config, amx_row), release(amx_tile_helper::op::release, amx_row) {}
    amx_block_gen block;
    amx_tile_helper load, release;
};

amx_ukernel::amx_ukernel(const amx_ukernel_cfg &cfg) {
    if (cfg.kc < 4 || cfg.kc > 64 || cfg.kc % 4 != 0) fail("kc", "must be a multiple of 4 in [4, 64]");
    if (cfg.tap_off.empty() || cfg.nk < 1) fail("taps", "at least one tap and one K chunk");
    gens_ = std::make_unique<gens>(cfg);
    gens_->block.create();
    fn_ = gens_->block.entry<amx_ukernel_fn>();
    // Palette 1: C tiles 16 rows × 64 bytes, A 16 rows × kc bytes, B kc/4 rows × 64 bytes.
    std::memset(tilecfg_, 0, sizeof(tilecfg_));
    tilecfg_[0] = 1;
    auto set = [this](int t, int rows, int colsb) {
        const uint16_t cb = static_cast<uint16_t>(colsb);
        std::memcpy(tilecfg_ + 16 + 2 * t, &cb, 2);
        tilecfg_[48 + t] = static_cast<uint8_t>(rows);
    };
    for (int t = 0; t < 4; ++t) set(t, 16, 64);
    for (int t = 4; t < 6; ++t) set(t, 16, cfg.kc);
    for (int t = 6; t < 8; ++t) set(t, cfg.kc / 4, 64);
}

amx_ukernel::~amx_ukernel() = default;

void amx_ukernel::configure() const { gens_->load.entry<void (*)(const void *)>()(tilecfg_); }
void amx_ukernel::release() const { gens_->release.entry<void (*)()>()(); }

} // namespace qconv::jit
