// The accumulation micro-kernel of the int8 conv family (see conv_x8s8.h),
// one template for four register widths / instruction families.
//
// avx512_core_vnni (zmm, 16 OC lanes) / avx2_vnni (ymm, 8 OC lanes, VEX-encoded
//   vpdpbusd of AVX-VNNI): source u8 bytes, weights [ic4][oc][4] s8; one
//   vpdpbusd per (pixel, OC vector) and 4-IC step.
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
//        acc 0..(15 − nb − 2), weights, bcast, ymm15 = 0x80 bytes (avx2_vnni).
// Loops: kh (runtime) → kw (unrolled) → ICg/4 (runtime) → [pair] → pixels
// (unrolled) → OC vectors (unrolled); with taps_inner: ICg/4 (runtime) →
// every tap (unrolled) → ..., where a tap_mask drops (pixel, tap) pairs that
// read padding (direct mode).
// Fused epilogue: acc·scale + bias as one vfmadd (the reference's madd);
// u8 destinations with 4 full OC vectors store each pixel's 64 channels
// with vpackusdw / vpackuswb / vpermd instead of four vpmovusdb.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/jit/conv_epilogue_gen.h"
#include "kernels/jit/conv_pipeline.h"
#include "kernels/jit/conv_x8s8.h"
#include "kernels/jit/jit_base.h"

namespace qconv::jit {

const char *to_string(conv_isa i) {
    switch (i) {
    case conv_isa::avx512_core_vnni: return "avx512_core_vnni";
    case conv_isa::avx512_core: return "avx512_core";
    case conv_isa::avx2: return "avx2";
    case conv_isa::avx2_vnni: return "avx2_vnni";
    }
    return "?";
}

int oc_lanes(conv_isa i) { return is_ymm(i) ? 8 : 16; }
int max_oc_vectors(conv_isa i) { return is_ymm(i) ? 2 : 4; }
// ymm: at most 12 accumulators, so that the fused epilogue has ymm12..15.
int max_accumulators(conv_isa i, int nb) {
    if (!is_ymm(i)) return 25;
    return std::min(12, 16 - nb - (is_vnni(i) ? 2 : 3)); // weights, bcast, 0x80 / two temporaries
}
int src_elem_bytes(conv_isa i) { return is_vnni(i) ? 1 : 2; }
int max_accumulators_dw(conv_isa i, int kw) {
    // KW weights, two sources, a temporary (not with vpdpwssd on ymm).
    if (is_ymm(i)) return std::min(12, 16 - kw - (is_vnni(i) ? 2 : 3));
    return std::min(25, 32 - kw - 3);
}

// Fused epilogue registers: zmm25..28 comp, scale, bias, zero; zmm29 spare
// (the weight and broadcast registers are dead by then); ymm: ymm12..15.
struct conv_ukernel::gen : public conv_epilogue_gen {
    explicit gen(const conv_ukernel_cfg &c)
        : conv_epilogue_gen(64 * 1024 + 512 * c.kw * c.ur_w * c.nb, c.pipe, 25, 29, is_ymm(c.isa)), cfg(c) {
        name_ = std::string("jit:conv_x8s8_ukernel:") + to_string(c.isa) + ":ur" + std::to_string(c.ur_w) + "x" +
                std::to_string(c.nb);
        vnni = is_vnni(c.isa);
        zmm_ = !is_ymm(c.isa);
        vbytes = zmm_ ? 64 : 32;
        lanes = oc_lanes(c.isa);
        const int n_acc = cfg.ur_w * cfg.nb;
        wbase = zmm_ ? 25 : n_acc;
        bcast0 = zmm_ ? 29 : wbase + cfg.nb;
        tmp0 = zmm_ ? 30 : bcast0 + 1;
        x80 = zmm_ ? 31 : 15;
        // Bytes of weights per 4-IC step and OC vector.
        wstep = vnni ? lanes * 4 : lanes * 8;
    }
    const char *name() const override { return name_.c_str(); }

    conv_ukernel_cfg cfg;
    std::string name_;
    bool vnni = true, zmm_ = true;
    int vbytes = 64, lanes = 16, wbase = 25, bcast0 = 29, tmp0 = 30, x80 = 31, wstep = 64;

    // rdi: conv_call *; loop registers; epilogue pointers.
    const Xbyak::Reg64 reg_args = rdi, reg_src = rsi, reg_wei = rdx, reg_acc = rcx;
    const Xbyak::Reg64 reg_kh = r8, reg_aux = r9, reg_ic = r10; // reg_coff = r11 (epilogue)

    Xbyak::Xmm vreg(int i) const {
        if (zmm_) return Xbyak::Zmm(i);
        return Xbyak::Ymm(i);
    }
    Xbyak::Xmm acc(int w, int b) const { return vreg(w * cfg.nb + b); }
    // Full-vector moves (EVEX for zmm, VEX for ymm).
    void vload(const Xbyak::Xmm &r, const Xbyak::Address &a) {
        if (zmm_) vmovdqu32(r, a);
        else vmovdqu(r, a);
    }
    void vstore(const Xbyak::Address &a, const Xbyak::Xmm &r) {
        if (zmm_) vmovdqu32(a, r);
        else vmovdqu(a, r);
    }
    Xbyak::Xmm wreg(int b) const { return vreg(wbase + b); }

    void emit_zero_acc() {
        for (int i = 0; i < cfg.ur_w * cfg.nb; ++i) {
            if (zmm_) vpxord(vreg(i), vreg(i), vreg(i));
            else vpxor(vreg(i), vreg(i), vreg(i));
        }
        if (cfg.xor_src) {
            mov(eax, 0x80808080u);
            if (zmm_) {
                vpbroadcastd(Xbyak::Zmm(x80), eax);
            } else { // no GPR broadcast without AVX-512
                vmovd(Xbyak::Xmm(x80), eax);
                vpbroadcastd(Xbyak::Ymm(x80), Xbyak::Xmm(x80));
            }
        }
    }
    // acc += u8 s · s8 w, four products per lane (EVEX on zmm, VEX on ymm).
    void dpbusd(const Xbyak::Xmm &a, const Xbyak::Xmm &s, const Xbyak::Xmm &w) {
        if (zmm_) vpdpbusd(Xbyak::Zmm(a.getIdx()), Xbyak::Zmm(s.getIdx()), Xbyak::Zmm(w.getIdx()));
        else vpdpbusd(Xbyak::Ymm(a.getIdx()), Xbyak::Ymm(s.getIdx()), Xbyak::Ymm(w.getIdx()), Xbyak::VexEncoding);
    }
    void dpwssd(const Xbyak::Xmm &a, const Xbyak::Xmm &s, const Xbyak::Xmm &w) {
        if (zmm_) vpdpwssd(Xbyak::Zmm(a.getIdx()), Xbyak::Zmm(s.getIdx()), Xbyak::Zmm(w.getIdx()));
        else vpdpwssd(Xbyak::Ymm(a.getIdx()), Xbyak::Ymm(s.getIdx()), Xbyak::Ymm(w.getIdx()), Xbyak::VexEncoding);
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
            const Xbyak::Xmm s = vreg(zmm_ && (k++ & 1) ? 30 : bcast0);
            vpbroadcastd(s, src_at(w, 0));
            if (cfg.xor_src) {
                if (zmm_) vpxord(s, s, vreg(x80));
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
                const Xbyak::Xmm s = vreg(bcast0);
                vpbroadcastd(s, src_at(w, pair * 4));
                for (int b = 0; b < cfg.nb; ++b) {
                    const Xbyak::Xmm t = vreg(tmp0 + (b & 1));
                    vpmaddwd(t, s, wreg(b));
                    vpaddd(acc(w, b), acc(w, b), t);
                }
            }
        }
    }

    void emit_kw_loop() {
        const int es = src_elem_bytes(cfg.isa);
        for (int kw = 0; kw < cfg.kw; ++kw) {
            Xbyak::Label l_ic;
            lea(reg_aux, ptr[reg_src + kw * cfg.dw * cfg.pix_stride]);
            mov(reg_ic, cfg.ic4);
            L(l_ic);
            if (vnni) emit_ic_step_vnni();
            else emit_ic_step_wide();
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
        const int es = src_elem_bytes(cfg.isa);
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
            if (vnni) emit_ic_step_vnni();
            else emit_ic_step_wide();
        }
        tap_off_ = wei_off_ = 0;
        tap_ = -1;
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
        if (src_tail && zmm_) {
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
                    const Xbyak::Xmm x = vreg(xr0 + (flip++ & 1));
                    const Xbyak::Address sa = ptr[reg_src + kh * cfg.dh * cfg.row_stride + j * cfg.pix_stride + b * vb];
                    if (src_tail && b == cfg.nb - 1 && zmm_) {
                        vpmovzxbd(Xbyak::Zmm(x.getIdx()) | k1 | T_z, sa);
                    } else if (src_tail && b == cfg.nb - 1) { // ymm: last_n bytes, nothing read past them
                        const Xbyak::Xmm xx(x.getIdx());
                        lea(rax, sa);
                        vpxor(xx, xx, xx);
                        for (int i = 0; i < cfg.last_n; ++i) vpinsrb(xx, xx, ptr[rax + i], i);
                        vpmovzxbd(x, xx);
                    } else {
                        vpmovzxbd(x, sa);
                    }
                    for (int kw = 0; kw < cfg.kw; ++kw) {
                        const int r = j - kw * cfg.dw;
                        if (r < 0 || r % cfg.sw != 0 || r / cfg.sw >= cfg.ur_w) continue;
                        const int w = r / cfg.sw;
                        if (vnni) {
                            dpwssd(acc(w, b), x, vreg(wb0 + kw));
                        } else {
                            vpmaddwd(vreg(tmp), x, vreg(wb0 + kw));
                            vpaddd(acc(w, b), acc(w, b), vreg(tmp));
                        }
                    }
                }
            }
    }

    void generate() override {
        Xbyak::Label l_kh;
        mov(reg_src, ptr[reg_args + offsetof(conv_call, src)]);
        mov(reg_wei, ptr[reg_args + offsetof(conv_call, wei)]);
        emit_zero_acc();
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
        mov(rax, cfg.dh * cfg.row_stride);
        add(reg_src, rax);
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
    // The pipeline itself is conv_epilogue_gen's; here the call's pointers,
    // the tail mask and the u8 packed store. Accumulators hold y.
    void emit_constants() {
        align(64);
        emit_const_pool();
        if (use_perm_) {
            align(64);
            L(l_perm);
            if (zmm_)
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
        if (zmm_ && cfg.last_n < 16) {
            mov(eax, (1u << cfg.last_n) - 1u);
            kmovw(k1, eax);
        }
        if (zmm_) vxorps(zmm_zero, zmm_zero, zmm_zero);
        // u8 destination with 4 full OC vectors: the 64 channels of a pixel
        // are packed with saturating packs and stored as one vector.
        // ymm: 2 full OC vectors, 16 channels per store (255 in ymm15, reloaded
        // after each pixel when a binary max / min uses that register).
        const bool packed = pp.dst_dt == dtype::u8 && cfg.last_n == lanes &&
                            (zmm_ ? cfg.nb == 4 && cfg.ur_w * cfg.nb <= 24 : cfg.nb == 2);
        const bool spare_used = std::any_of(pp.ops.begin(), pp.ops.end(), [](const pipeline_op &op) {
            return op.k == lowered_op::kind::binary && (op.balg == binary_alg::max || op.balg == binary_alg::min);
        });
        const Xbyak::Xmm r255 = zmm_ ? Xbyak::Xmm(zmm_255) : v_spare();
        if (packed) vbroadcastss(r255, cst_plain(255.f));
        const int64_t pix = pp.oc * dsz();
        for (int b = 0; b < cfg.nb; ++b) {
            emit_load_params(b);
            for (int w = 0; w < cfg.ur_w; ++w) {
                const Xbyak::Xmm y = acc(w, b);
                emit_pixel_pipeline(y, w, b, pix);
                if (packed) {
                    // min(255, y) keeps NaN (→ 0x80000000 → 0 in the packs);
                    // negatives saturate to 0 in vpackusdw.
                    if (!zmm_ && spare_used) vbroadcastss(r255, cst_plain(255.f));
                    vminps(y, r255, y);
                    vcvtps2dq(y, y);
                    continue;
                }
                emit_store(y, ptr[reg_dst + w * pix + b * lanes * dsz()], tail(b), pp.dst_dt);
            }
        }
        if (packed && zmm_) emit_store_u8_packed(pix);
        if (packed && !zmm_) emit_store_u8_packed_ymm(pix);
        pop(r15);
        pop(r14);
        pop(r13);
        pop(r12);
        pop(rbx);
    }
    // u8 store of 64 channels per pixel: the accumulators of pixel w hold
    // int32 values ≤ 255 (or 0x80000000 for NaN / −large); vpackusdw
    // saturates them to [0, 65535] ⊇ [0, 255], vpackuswb to bytes; the packs
    // work per 128-bit lane, so dword 4·L + k of the result holds OC vector
    // k's channels 4·L..4·L+3 and vpermd restores channel order.
    Xbyak::Label l_perm;
    bool use_perm_ = false;
    void emit_store_u8_packed(int64_t pix) {
        use_perm_ = true;
        const Xbyak::Zmm perm(25), t0(30), t1(31);
        vmovdqu32(perm, ptr[rip + l_perm]);
        for (int w = 0; w < cfg.ur_w; ++w) {
            vpackusdw(t0, Xbyak::Zmm(acc(w, 0).getIdx()), Xbyak::Zmm(acc(w, 1).getIdx()));
            vpackusdw(t1, Xbyak::Zmm(acc(w, 2).getIdx()), Xbyak::Zmm(acc(w, 3).getIdx()));
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
        const Xbyak::Ymm perm(v_u().getIdx()), t0(v_t().getIdx());
        vmovdqu(perm, ptr[rip + l_perm]);
        for (int w = 0; w < cfg.ur_w; ++w) {
            vpackusdw(t0, Xbyak::Ymm(acc(w, 0).getIdx()), Xbyak::Ymm(acc(w, 1).getIdx()));
            vpackuswb(t0, t0, t0);
            vpermd(t0, perm, t0);
            vmovdqu(ptr[reg_dst + w * pix], Xbyak::Xmm(t0.getIdx()));
        }
    }
    const Xbyak::Zmm zmm_255 = Xbyak::Zmm(24);
};

conv_ukernel::conv_ukernel(const conv_ukernel_cfg &cfg) : cfg_(cfg) {
    const int max_acc = cfg.depthwise ? max_accumulators_dw(cfg.isa, cfg.kw) : max_accumulators(cfg.isa, cfg.nb);
    if (cfg.nb < 1 || cfg.nb > max_oc_vectors(cfg.isa) || cfg.ur_w < 1 || cfg.ur_w * cfg.nb > max_acc)
        fail("ur_w", "register blocking out of range");
    if (cfg.xor_src && !is_vnni(cfg.isa)) fail("xor_src", "only the VNNI kernels shift in place");
    if (cfg.pipe && is_ymm(cfg.isa) && cfg.ur_w * cfg.nb > 12) fail("pipe", "the ymm epilogue needs ymm12..15");
    if (cfg.dw_direct && (!cfg.depthwise || cfg.kh > 64))
        fail("dw_direct", "needs the depthwise kernel and at most 64 kernel rows");
    if (!cfg.pix_off.empty() && (cfg.depthwise || static_cast<int>(cfg.pix_off.size()) != cfg.ur_w))
        fail("pix_off", "needs one offset per pixel (dense kernels only)");
    if (!cfg.tap_mask.empty() && (!is_vnni(cfg.isa) || !cfg.taps_inner || cfg.depthwise ||
                                  static_cast<int>(cfg.tap_mask.size()) != cfg.ur_w || cfg.kh * cfg.kw > 64))
        fail("tap_mask", "needs the VNNI taps-inner kernel and one mask per pixel");
    if (!cfg.tap_corr.empty() && (cfg.tap_mask.size() != cfg.tap_corr.size() || cfg.corr_stride <= 0))
        fail("tap_corr", "needs one entry per pixel of a tap mask and a row stride");
    for (int r : cfg.tap_corr)
        if (r >= 0 && (r * cfg.corr_stride + cfg.nb * 64 >= (int64_t(1) << 31)))
            fail("tap_corr", "correction table too large for 32-bit displacements");
    gen_ = std::make_unique<gen>(cfg);
    gen_->create();
    fn_ = gen_->entry<conv_ukernel_fn>();
}

conv_ukernel::~conv_ukernel() = default;

} // namespace qconv::jit
