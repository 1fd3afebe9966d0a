// The accumulation micro-kernel of the int8 conv family (conv_ukernel.h; the dense family in conv_x8s8.cpp),
// one template over the traits of four register widths / instruction
// families (jit_traits.h).
//
// avx512_core_vnni (zmm, 16 OC lanes) / avx2_vnni (ymm, 8 OC lanes, VEX-encoded
//   vpdpbusd of AVX-VNNI): source u8 bytes, weights [ic4][oc][4] s8; one
//   vpdpbusd per (pixel, OC vector) and 4-IC step.
// avx2_pairs (ymm, 8 OC lanes, AVX2): the VNNI layout, each vpdpbusd done as
//   vpmaddubsw (u8·s8 pair sums in 16 bits) + vpmaddwd by 1s + vpaddd; exact
//   only for weights no pair of which can overflow 16 bits, which the avx2
//   row checks when it packs (pairs_cannot_overflow, conv_x8s8.cpp).
// avx512_core (zmm) / avx2 (ymm, 8 OC lanes): exact without VNNI. The source
//   copy holds u16 values (0..255) and the weights are pre-widened to s16 at
//   packing as [ic4][pair][oc][2]; vpmaddwd multiplies one IC pair and adds
//   the two products into int32 (|sum| ≤ 2·255·128, no saturation possible,
//   unlike vpmaddubsw), then vpaddd accumulates.
//
// Register plan: accumulators first (pixel-major), then nb weight vectors,
// then the broadcast source and the temporaries:
//   zmm: acc 0..24, weights 25..28, bcast 29/30 (VNNI) or 29 + tmp 30/31
//        (and zmm31 = 0x80 bytes for the in-kernel s8 shift, VNNI only);
//   ymm: acc 0..(15 − nb − 3), weights, bcast, two temporaries (avx2);
//        acc 0..(15 − nb − 2), weights, bcast, ymm15 = 0x80 bytes (avx2_vnni);
//        acc 0..(15 − nb − 4), weights, bcast, a temporary, ymm14 = 16-bit 1s,
//        ymm15 = 0x80 bytes (avx2_pairs).
// Loops: kh (runtime) → kw (unrolled) → ICg/4 (runtime) → [pair] → pixels
// (unrolled) → OC vectors (unrolled); with taps_inner: ICg/4 (runtime) →
// every tap (unrolled) → ..., where a tap_mask drops (pixel, tap) pairs that
// read padding (direct mode).
// Fused epilogue: acc·scale + bias as one vfmadd (the reference's madd);
// u8 destinations with 4 full OC vectors store each pixel's 64 channels
// with vpackssdw / vpackuswb / vpermd instead of four vpmovusdb.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/jit/base/conv_epilogue_injector.h"
#include "kernels/jit/base/conv_pipeline.h"
#include "kernels/jit/base/jit_base.h"
#include "kernels/jit/base/jit_traits.h"
#include "kernels/jit/conv/conv_ukernel.h"

namespace qconv::jit {

namespace {

// Fused epilogue registers: rax, rbx, r11..r15; zmm25..28 comp, scale, bias,
// zero; zmm29 spare (the weight and broadcast registers are dead by then);
// ymm: ymm12..15.
template <class T>
struct ukernel_gen : public jit_generator, public epilogue_host, public epilogue_reg_names {
    static_assert(T::acc == acc_kind::vregs, "the vector micro-kernel accumulates in registers");
    using Vmm = typename T::Vmm;
    static constexpr bool evex = T::evex, vnni = T::vnni, pairs16 = T::pairs16;
    static constexpr int vbytes = T::vbytes, lanes = T::lanes;
    // Bytes of weights per 4-IC step and OC vector; source bytes per
    // element (u8, or u16 widened by the copy).
    static constexpr int wstep = vnni ? lanes * 4 : lanes * 8;
    static constexpr int es = vnni ? 1 : 2;

    explicit ukernel_gen(const conv_ukernel_cfg &c)
        : jit_generator(64 * 1024 + 512 * c.kw * c.ur_w * c.nb), epilogue_reg_names(T{}, epi_regs()), cfg(c),
          epi_(T{}, *this, *this, c.pipe, epi_regs()) {
        // The row family's name, then the blocking: jit:conv_x8s8:avx2:ur4x2.
        name_ = std::string(c.depthwise ? "jit:conv_dw_x8s8:" : "jit:conv_x8s8:") + to_string(T::isa) + ":ur" +
                std::to_string(c.ur_w) + "x" + std::to_string(c.nb);
        const int n_acc = cfg.ur_w * cfg.nb;
        wbase = evex ? 25 : n_acc;
        bcast0 = evex ? 29 : wbase + cfg.nb;
        tmp0 = evex ? 30 : bcast0 + 1;
    }
    const char *name() const override { return name_.c_str(); }
    static epilogue_regs epi_regs() {
        namespace u = Xbyak::util;
        epilogue_regs r(u::rax, u::rbx, u::r11, u::r12, u::r13, u::r14, u::r15, 25, 29);
        return r;
    }

    conv_ukernel_cfg cfg;
    conv_epilogue_injector epi_;
    std::string name_;
    int wbase = 25, bcast0 = 29, tmp0 = 30;
    static constexpr int x80 = evex ? 31 : 15;
    static constexpr int ones16 = 14; // pairs16: 16-bit 1s (vpmaddwd's widening sum)

    // rdi: conv_call *; loop registers; epilogue pointers.
    const Xbyak::Reg64 reg_args = rdi, reg_src = rsi, reg_wei = rdx, reg_acc = rcx;
    const Xbyak::Reg64 reg_kh = r8, reg_aux = r9, reg_ic = r10; // reg_coff = r11 (epilogue)
    const Xbyak::Reg64 reg_pf = rax; // the accumulation loops only (the epilogue's scratch after them)

    static Vmm vreg(int i) { return Vmm(i); }
    Vmm acc(int w, int b) const { return vreg(w * cfg.nb + b); }
    // Full-vector moves (EVEX for zmm, VEX for ymm).
    void vload(const Vmm &r, const Xbyak::Address &a) {
        if constexpr (evex) vmovdqu32(r, a);
        else vmovdqu(r, a);
    }
    void vstore(const Xbyak::Address &a, const Vmm &r) {
        if constexpr (evex) vmovdqu32(a, r);
        else vmovdqu(a, r);
    }
    Vmm wreg(int b) const { return vreg(wbase + b); }

    void emit_zero_acc() {
        for (int i = 0; i < cfg.ur_w * cfg.nb; ++i) {
            if constexpr (evex) vpxord(vreg(i), vreg(i), vreg(i));
            else vpxor(vreg(i), vreg(i), vreg(i));
        }
        if (pairs16 && !cfg.depthwise) broadcast_dword(vreg(ones16), eax, 0x00010001u);
        if (cfg.xor_src) broadcast_dword(vreg(x80), eax, 0x80808080u);
    }
    // acc += u8 s · s8 w, four products per lane (EVEX on zmm, VEX on ymm;
    // pairs16: two 16-bit pair sums, then widened and added).
    void dpbusd(const Vmm &a, const Vmm &s, const Vmm &w) {
        if constexpr (pairs16) {
            const Vmm t = vreg(tmp0);
            vpmaddubsw(t, s, w);
            vpmaddwd(t, t, vreg(ones16));
            vpaddd(a, a, t);
        } else if constexpr (evex) {
            vpdpbusd(a, s, w);
        } else {
            vpdpbusd(a, s, w, Xbyak::VexEncoding);
        }
    }
    void dpwssd(const Vmm &a, const Vmm &s, const Vmm &w) {
        if constexpr (evex) vpdpwssd(a, s, w);
        else vpdpwssd(a, s, w, Xbyak::VexEncoding);
    }

    Xbyak::Address src_at(int w, int byte_off) const {
        const int64_t off = cfg.pix_off.empty() ? w * cfg.sw * cfg.pix_stride : cfg.pix_off[w];
        if (cfg.taps_inner) return ptr[reg_src + tap_off_ + off + byte_off];
        return ptr[reg_aux + off + byte_off];
    }

    void emit_ic_step_vnni() {
        for (int b = 0; b < cfg.nb; ++b) vload(wreg(b), ptr[reg_wei + wei_off_ + b * vbytes]);
        for (int w = 0, k = 0; w < cfg.ur_w; ++w) {
            if (!pixel_reads(w)) continue;
            // zmm: alternate zmm29 / zmm30; ymm: one register (renamed).
            const Vmm s = vreg(evex && (k++ & 1) ? 30 : bcast0);
            vpbroadcastd(s, src_at(w, 0));
            if (cfg.xor_src) {
                if constexpr (evex) vpxord(s, s, vreg(x80));
                else vpxor(s, s, vreg(x80));
            }
            for (int b = 0; b < cfg.nb; ++b) dpbusd(acc(w, b), s, wreg(b));
        }
    }

    // Widened path: two IC pairs per 4-IC step, vpmaddwd + vpaddd.
    void emit_ic_step_wide() {
        for (int pair = 0; pair < 2; ++pair) {
            for (int b = 0; b < cfg.nb; ++b) vload(wreg(b), ptr[reg_wei + wei_off_ + (pair * cfg.nb + b) * vbytes]);
            for (int w = 0; w < cfg.ur_w; ++w) {
                const Vmm s = vreg(bcast0);
                vpbroadcastd(s, src_at(w, pair * 4));
                for (int b = 0; b < cfg.nb; ++b) {
                    const Vmm t = vreg(tmp0 + (b & 1));
                    vpmaddwd(t, s, wreg(b));
                    vpaddd(acc(w, b), acc(w, b), t);
                }
            }
        }
    }

    // The next steps' weights on their way to L1 (cfg.prefetch_bytes ahead).
    void emit_weight_prefetch(int step_bytes) {
        if (cfg.prefetch_bytes > 0)
            for (int l = 0; l < step_bytes; l += 64)
                prefetcht0(ptr[reg_wei + static_cast<uint32_t>(cfg.prefetch_bytes + l)]);
        if (cfg.prefetch_next_lines > 0) { // this step's share of the next OC block, into L2
            for (int l = 0; l < cfg.prefetch_next_lines; ++l) prefetcht1(ptr[reg_pf + l * 64]);
            add(reg_pf, cfg.prefetch_next_lines * 64);
        }
    }

    void emit_kw_loop() {
        for (int kw = 0; kw < cfg.kw; ++kw) {
            Xbyak::Label l_ic;
            lea(reg_aux, ptr[reg_src + kw * cfg.dw * cfg.pix_stride]);
            mov(reg_ic, cfg.ic4);
            L(l_ic);
            if constexpr (vnni) emit_ic_step_vnni();
            else emit_ic_step_wide();
            emit_weight_prefetch(cfg.nb * wstep);
            add(reg_aux, 4 * es);
            add(reg_wei, cfg.nb * wstep);
            dec(reg_ic);
            jnz(l_ic, T_NEAR);
        }
    }

    // ICg/4 loop outside, every tap (kh, kw) unrolled inside: the source
    // of tap (kh, kw) is a constant displacement from the step's base, the
    // weights of one 4-IC step are [kh][kw][nb·wstep] bytes.
    void emit_taps_inner_loop() {
        const int taps = cfg.kh * cfg.kw;
        Xbyak::Label l_ic;
        mov(reg_ic, cfg.ic4);
        L(l_ic);
        for (int t = 0; t < taps; ++t) {
            const int kh = t / cfg.kw, kw = t % cfg.kw;
            tap_off_ = kh * cfg.dh * cfg.row_stride + kw * cfg.dw * cfg.pix_stride;
            wei_off_ = t * cfg.nb * wstep;
            tap_ = t;
            if (!cfg.tap_mask.empty() &&
                std::none_of(cfg.tap_mask.begin(), cfg.tap_mask.end(), [t](uint64_t m) { return (m >> t) & 1u; }))
                continue; // every pixel of the block reads padding here
            if constexpr (vnni) emit_ic_step_vnni();
            else emit_ic_step_wide();
        }
        tap_off_ = wei_off_ = 0;
        tap_ = -1;
        emit_weight_prefetch(taps * cfg.nb * wstep);
        add(reg_src, 4 * es);
        add(reg_wei, taps * cfg.nb * wstep);
        dec(reg_ic);
        jnz(l_ic, T_NEAR);
    }
    // acc(w, ·) += corr row tap_corr[w] at channel c0 (rax: row 0 at c0).
    void emit_tap_corr() {
        if (cfg.tap_corr.empty()) return;
        mov(rax, ptr[reg_args + offsetof(conv_call, corr)]);
        add(rax, ptr[reg_args + offsetof(conv_call, c_off)]);
        for (int w = 0; w < cfg.ur_w; ++w) {
            if (cfg.tap_corr[w] < 0) continue;
            for (int b = 0; b < cfg.nb; ++b)
                vpaddd(acc(w, b), acc(w, b), ptr[rax + cfg.tap_corr[w] * cfg.corr_stride + b * vbytes]);
        }
    }
    int64_t tap_off_ = 0, wei_off_ = 0;
    int tap_ = -1; // tap being emitted (taps-inner loop)
    bool pixel_reads(int w) const { return cfg.tap_mask.empty() || tap_ < 0 || ((cfg.tap_mask[w] >> tap_) & 1u); }

    void emit_store_acc() {
        for (int w = 0; w < cfg.ur_w; ++w)
            for (int b = 0; b < cfg.nb; ++b) vstore(ptr[reg_acc + (w * cfg.nb + b) * vbytes], acc(w, b));
    }

    // Depthwise: every tap unrolled; u8 → int32 (vpmovzxbd), weights int32
    // holding an s16 value, so the word products are x·w + 0·(sign word) =
    // x·w exactly: vpdpwssd (VNNI) or vpmaddwd + vpaddd.
    // Each widened source vector (input column j of a kernel row) feeds every
    // (pixel w, tap kw) with w·sw + kw·dw = j, so with stride 1 a load serves
    // up to KW multiply-adds; the KW weights of (kh, vector b) stay in
    // registers: acc 0..n−1, weights n..n+KW−1, then two sources and a temp.
    void emit_dw_body() {
        const int vb = lanes; // source bytes per vector
        const int n_acc = cfg.ur_w * cfg.nb;
        const int wb0 = n_acc, xr0 = n_acc + cfg.kw, tmp = xr0 + 2;
        const int span = (cfg.ur_w - 1) * cfg.sw + (cfg.kw - 1) * cfg.dw + 1;
        int flip = 0;
        const bool src_tail = cfg.dw_direct && cfg.last_n < lanes;
        if (src_tail && evex) {
            mov(eax, (1u << cfg.last_n) - 1u);
            kmovw(k1, eax);
        }
        for (int kh = 0; kh < cfg.kh; ++kh)
            for (int b = 0; b < cfg.nb; ++b) {
                if (!((cfg.dw_row_mask >> kh) & 1u)) continue; // row in the padding
                for (int kw = 0; kw < cfg.kw; ++kw) {
                    const int64_t woff = (static_cast<int64_t>(kh) * cfg.kw + kw) * cfg.dw_cpad * 4;
                    vload(vreg(wb0 + kw), ptr[reg_wei + woff + b * vbytes]);
                }
                for (int j = 0; j < span; ++j) {
                    bool used = false;
                    for (int kw = 0; kw < cfg.kw && !used; ++kw) {
                        const int r = j - kw * cfg.dw;
                        used = r >= 0 && r % cfg.sw == 0 && r / cfg.sw < cfg.ur_w;
                    }
                    if (!used || j < cfg.dw_col_lo || j >= cfg.dw_col_hi) continue; // column in the padding
                    const Vmm x = vreg(xr0 + (flip++ & 1));
                    const Xbyak::Address sa = ptr[reg_src + kh * cfg.dh * cfg.row_stride + j * cfg.pix_stride + b * vb];
                    if (src_tail && b == cfg.nb - 1) load_src_tail(x, sa);
                    else vpmovzxbd(x, sa);
                    for (int kw = 0; kw < cfg.kw; ++kw) {
                        const int r = j - kw * cfg.dw;
                        if (r < 0 || r % cfg.sw != 0 || r / cfg.sw >= cfg.ur_w) continue;
                        const int w = r / cfg.sw;
                        if constexpr (vnni && !pairs16) {
                            dpwssd(acc(w, b), x, vreg(wb0 + kw));
                        } else {
                            vpmaddwd(vreg(tmp), x, vreg(wb0 + kw));
                            vpaddd(acc(w, b), acc(w, b), vreg(tmp));
                        }
                    }
                }
            }
    }

    // x = the last_n source bytes at sa widened to int32, nothing read past them.
    void load_src_tail(const Vmm &x, const Xbyak::Address &sa) {
        if constexpr (evex) {
            vpmovzxbd(x | k1 | T_z, sa);
        } else {
            const Xbyak::Xmm xx(x.getIdx());
            lea(rax, sa);
            vpxor(xx, xx, xx);
            for (int i = 0; i < cfg.last_n; ++i) vpinsrb(xx, xx, ptr[rax + i], i);
            vpmovzxbd(x, xx);
        }
    }

    void generate() override {
        Xbyak::Label l_kh;
        mov(reg_src, ptr[reg_args + offsetof(conv_call, src)]);
        mov(reg_wei, ptr[reg_args + offsetof(conv_call, wei)]);
        emit_zero_acc();
        if (cfg.prefetch_next_lines > 0) mov(reg_pf, ptr[reg_args + offsetof(conv_call, pf)]);
        if (cfg.depthwise) {
            emit_dw_body();
            emit_finish();
            return;
        }
        if (cfg.taps_inner) {
            emit_taps_inner_loop();
            emit_tap_corr();
            emit_finish();
            return;
        }
        mov(reg_kh, cfg.kh);
        L(l_kh);
        emit_kw_loop();
        const int64_t row_step = cfg.dh * cfg.row_stride;
        if (row_step == static_cast<int32_t>(row_step)) {
            add(reg_src, static_cast<int32_t>(row_step));
        } else { // reg_aux is set again by the next kw loop
            mov(reg_aux, row_step);
            add(reg_src, reg_aux);
        }
        dec(reg_kh);
        jnz(l_kh, T_NEAR);
        emit_finish();
    }

    // Epilogue (fused pipeline or int32 tile), return, constant pool.
    void emit_finish() {
        if (cfg.pipe) {
            emit_epilogue();
        } else {
            mov(reg_acc, ptr[reg_args + offsetof(conv_call, acc)]);
            emit_store_acc();
        }
        vzeroupper();
        ret();
        emit_constants();
    }

    // ------------------------------------------------------------ fused epilogue
    // The pipeline itself is the epilogue injector's; here the call's pointers,
    // the tail mask and the u8 packed store. Accumulators hold y.
    void emit_constants() {
        align(64);
        epi_.emit_const_pool<T>();
        if (use_perm_) {
            align(64);
            L(l_perm);
            if constexpr (evex)
                for (int j = 0; j < 16; ++j) dd(static_cast<uint32_t>((j % 4) * 4 + j / 4));
            else
                for (uint32_t j : {0u, 4u, 1u, 5u, 2u, 6u, 3u, 7u}) dd(j);
        }
    }

    bool tail(int b) const override { return b == cfg.nb - 1 && cfg.last_n < lanes; }
    int tail_lanes() const override { return cfg.last_n; }
    Xbyak::Address full_operand(int i, int w, int b) override {
        mov(reg_full, ptr[reg_args + offsetof(conv_call, full) + 8 * i]);
        return ptr[reg_full + w * cfg.pipe->oc * 4 + b * vbytes];
    }

    void emit_epilogue() {
        const pipeline &pp = *cfg.pipe;
        push(rbx);
        push(r12);
        push(r13);
        push(r14);
        push(r15);
        mov(reg_dst, ptr[reg_args + offsetof(conv_call, dst)]);
        mov(reg_comp, ptr[reg_args + offsetof(conv_call, comp)]);
        mov(reg_bias, ptr[reg_args + offsetof(conv_call, bias)]);
        mov(reg_coff, ptr[reg_args + offsetof(conv_call, c_off)]);
        mov(reg_pbase, reinterpret_cast<uintptr_t>(pp.scale.data()));
        add(reg_pbase, reg_coff);
        if (evex && cfg.last_n < 16) {
            mov(eax, (1u << cfg.last_n) - 1u);
            kmovw(k1, eax);
        }
        if constexpr (evex) vxorps(zmm_zero, zmm_zero, zmm_zero);
        // u8 destination with 4 full OC vectors: the 64 channels of a pixel
        // are packed with saturating packs and stored as one vector.
        // ymm: 2 full OC vectors, 16 channels per store (255 in ymm15, reloaded
        // after each pixel when a binary max / min uses that register).
        // zmm with 1 or 2 OC vectors that are the pixel's every channel
        // (OC 16 / 32): 4 / 2 consecutive pixels are 64 consecutive bytes,
        // packed the same way (a block's last pixels that do not fill a
        // group are stored one vector at a time).
        const bool whole_pixel = cfg.nb * lanes == pp.oc;
        const int grp = evex ? (cfg.nb == 4 ? 1 : (cfg.nb == 1 || cfg.nb == 2) && whole_pixel ? 4 / cfg.nb : 0) : 1;
        const bool packed = pp.dst_dt == dtype::u8 && cfg.last_n == lanes && grp > 0 &&
                            (evex ? cfg.ur_w * cfg.nb <= 24 && cfg.ur_w >= grp : cfg.nb == 2);
        const int n_packed = packed ? cfg.ur_w / grp * grp : 0; // pixels stored by the packs
        const bool spare_used = std::any_of(pp.ops.begin(), pp.ops.end(), [](const pipeline_op &op) {
            return op.k == lowered_op::kind::binary && (op.balg == binary_alg::max || op.balg == binary_alg::min);
        });
        const Vmm r255 = evex ? vreg(zmm_255.getIdx()) : conv_epilogue_injector::vr<T>(zmm_spare);
        const bool clamp = !cfg.bounded_u8; // min(255, y) before the packs
        if (packed && clamp) vbroadcastss(r255, epi_.cst_plain<T>(255.f));
        const int64_t pix = pp.oc * epi_.dsz();
        for (int b = 0; b < cfg.nb; ++b) {
            epi_.emit_load_params<T>(b);
            for (int w = 0; w < cfg.ur_w; ++w) {
                const Vmm y = acc(w, b);
                epi_.emit_pixel_pipeline<T>(y, w, b, pix);
                if (w < n_packed) {
                    // min(255, y) keeps NaN (→ 0x80000000 → 0 in the packs),
                    // and is left out where y < 2^31 is known (bounded_u8):
                    // the packs saturate every other int32 as the store does.
                    if (clamp) {
                        if (!evex && spare_used) vbroadcastss(r255, epi_.cst_plain<T>(255.f));
                        vminps(y, r255, y);
                    }
                    vcvtps2dq(y, y);
                    continue;
                }
                epi_.emit_store<T>(y, ptr[reg_dst + w * pix + b * lanes * epi_.dsz()], tail(b), pp.dst_dt);
            }
        }
        if (packed) {
            if constexpr (evex) emit_store_u8_packed_zmm(pix, grp, n_packed);
            else emit_store_u8_packed_ymm(pix);
        }
        pop(r15);
        pop(r14);
        pop(r13);
        pop(r12);
        pop(rbx);
    }
    // u8 store of 64 consecutive bytes from four accumulators, in the
    // destination's order: one pixel's 4 OC vectors, 2 pixels' 2 or 4
    // pixels' 1 (grp pixels, the first n_packed of the block). They hold
    // the rounded int32 values (0x80000000 for NaN and ±2^31 and beyond,
    // which min(255, y) or bounded_u8 leave only below 0); vpackssdw
    // saturates them to int16, vpackuswb to [0, 255]: the store's
    // saturation. The packs work per 128-bit lane, so dword 4·L + k of the
    // result holds source k's elements 4·L..4·L+3 and vpermd restores
    // their order.
    Xbyak::Label l_perm;
    bool use_perm_ = false;
    void emit_store_u8_packed_zmm(int64_t pix, int grp, int n_packed) {
        use_perm_ = true;
        const Xbyak::Zmm perm(25), t0(30), t1(31);
        vmovdqu32(perm, ptr[rip + l_perm]);
        auto src = [&](int w, int k) { return Xbyak::Zmm(acc(w + k / cfg.nb, k % cfg.nb).getIdx()); };
        for (int w = 0; w < n_packed; w += grp) {
            vpackssdw(t0, src(w, 0), src(w, 1));
            vpackssdw(t1, src(w, 2), src(w, 3));
            vpackuswb(t0, t0, t1);
            vpermd(t0, perm, t0);
            vmovdqu8(ptr[reg_dst + w * pix], t0);
        }
    }
    // ymm: 16 channels per pixel from 2 OC vectors; after the packs dword
    // 4·L + k holds vector k's channels 4·L..4·L+3, vpermd [0, 4, 1, 5]
    // puts the 16 bytes in order in the low half.
    void emit_store_u8_packed_ymm(int64_t pix) {
        use_perm_ = true;
        const Xbyak::Ymm perm(zmm_u.getIdx()), t0(zmm_t.getIdx());
        vmovdqu(perm, ptr[rip + l_perm]);
        for (int w = 0; w < cfg.ur_w; ++w) {
            vpackssdw(t0, Xbyak::Ymm(acc(w, 0).getIdx()), Xbyak::Ymm(acc(w, 1).getIdx()));
            vpackuswb(t0, t0, t0);
            vpermd(t0, perm, t0);
            vmovdqu(ptr[reg_dst + w * pix], Xbyak::Xmm(t0.getIdx()));
        }
    }
    const Xbyak::Zmm zmm_255 = Xbyak::Zmm(24);
};

} // namespace

conv_ukernel::conv_ukernel(const conv_ukernel_cfg &cfg) : cfg_(cfg) {
    const int max_acc = cfg.depthwise ? max_accumulators_dw(cfg.isa, cfg.kw) : max_accumulators(cfg.isa, cfg.nb);
    if (cfg.nb < 1 || cfg.nb > max_oc_vectors(cfg.isa) || cfg.ur_w < 1 || cfg.ur_w * cfg.nb > max_acc)
        fail("ur_w", "register blocking out of range");
    const isa_fact_set f = isa_facts(cfg.isa);
    if (cfg.xor_src && !f.vnni) fail("xor_src", "only the VNNI kernels shift in place");
    if (cfg.pipe && !f.evex && cfg.ur_w * cfg.nb > 12) fail("pipe", "the ymm epilogue needs ymm12..15");
    if (cfg.dw_direct && (!cfg.depthwise || cfg.kh > 64))
        fail("dw_direct", "needs the depthwise kernel and at most 64 kernel rows");
    if (!cfg.pix_off.empty() && (cfg.depthwise || static_cast<int>(cfg.pix_off.size()) != cfg.ur_w))
        fail("pix_off", "needs one offset per pixel (dense kernels only)");
    if (!cfg.tap_mask.empty() && (!f.vnni || !cfg.taps_inner || cfg.depthwise ||
                                  static_cast<int>(cfg.tap_mask.size()) != cfg.ur_w || cfg.kh * cfg.kw > 64))
        fail("tap_mask", "needs the VNNI taps-inner kernel and one mask per pixel");
    if (!cfg.tap_corr.empty() && (cfg.tap_mask.size() != cfg.tap_corr.size() || cfg.corr_stride <= 0))
        fail("tap_corr", "needs one entry per pixel of a tap mask and a row stride");
    for (int r : cfg.tap_corr)
        if (r >= 0 && (r * cfg.corr_stride + cfg.nb * 64 >= (int64_t(1) << 31)))
            fail("tap_corr", "correction table too large for 32-bit displacements");
    gen_ = with_traits(cfg.isa, [&](auto t) -> std::unique_ptr<jit_generator> {
        return std::make_unique<ukernel_gen<decltype(t)>>(cfg);
    });
    gen_->create();
    fn_ = gen_->entry<conv_ukernel_fn>();
}

conv_ukernel::~conv_ukernel() = default;

} // namespace qconv::jit
