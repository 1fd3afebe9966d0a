// The accumulation micro-kernel of the int8 conv family (see conv_x8s8.h),
// one template for three register widths / instruction families.
//
// avx512_vnni (zmm, 16 OC lanes): source u8 bytes, weights [ic4][oc][4] s8;
//   one vpdpbusd per (pixel, OC vector) and 4-IC step.
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
//   ymm: acc 0..(15 − nb − 3), weights, bcast, two temporaries.
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

#include "kernels/jit/conv_pipeline.h"
#include "kernels/jit/conv_x8s8.h"
#include "kernels/jit/jit_base.h"

namespace qconv::jit {

const char *to_string(conv_isa i) {
    switch (i) {
    case conv_isa::avx512_vnni: return "avx512_vnni";
    case conv_isa::avx512_core: return "avx512_core";
    case conv_isa::avx2: return "avx2";
    }
    return "?";
}

int oc_lanes(conv_isa i) { return i == conv_isa::avx2 ? 8 : 16; }
int max_oc_vectors(conv_isa i) { return i == conv_isa::avx2 ? 2 : 4; }
int max_accumulators(conv_isa i, int nb) { return i == conv_isa::avx2 ? 16 - nb - 3 : 25; }
int src_elem_bytes(conv_isa i) { return i == conv_isa::avx512_vnni ? 1 : 2; }
int max_accumulators_dw(conv_isa i, int kw) { return std::min(25, (i == conv_isa::avx2 ? 16 : 32) - kw - 3); }

struct conv_ukernel::gen : public jit_generator {
    explicit gen(const conv_ukernel_cfg &c)
        : jit_generator(64 * 1024 + 512 * c.kw * c.ur_w * c.nb), cfg(c) {
        name_ = std::string("jit:conv_x8s8_ukernel:") + to_string(c.isa) + ":ur" + std::to_string(c.ur_w) +
                "x" + std::to_string(c.nb);
        vnni = c.isa == conv_isa::avx512_vnni;
        zmm_ = c.isa != conv_isa::avx2;
        vbytes = zmm_ ? 64 : 32;
        lanes = oc_lanes(c.isa);
        const int n_acc = cfg.ur_w * cfg.nb;
        wbase = zmm_ ? 25 : n_acc;
        bcast0 = zmm_ ? 29 : wbase + cfg.nb;
        tmp0 = zmm_ ? 30 : bcast0 + 1;
        // Bytes of weights per 4-IC step and OC vector.
        wstep = vnni ? 64 : lanes * 8;
    }
    const char *name() const override { return name_.c_str(); }

    conv_ukernel_cfg cfg;
    std::string name_;
    bool vnni = true, zmm_ = true;
    int vbytes = 64, lanes = 16, wbase = 25, bcast0 = 29, tmp0 = 30, wstep = 64;

    // rdi: conv_call *; loop registers; epilogue pointers.
    const Xbyak::Reg64 reg_args = rdi, reg_src = rsi, reg_wei = rdx, reg_acc = rcx;
    const Xbyak::Reg64 reg_kh = r8, reg_aux = r9, reg_ic = r10, reg_coff = r11;

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
            vpbroadcastd(zmm31, eax);
        }
    }

    Xbyak::Address src_at(int w, int byte_off) const {
        const int64_t off = cfg.pix_off.empty() ? w * cfg.sw * cfg.pix_stride : cfg.pix_off[w];
        if (cfg.taps_inner) return ptr[reg_src + tap_off_ + off + byte_off];
        return ptr[reg_aux + off + byte_off];
    }

    void emit_ic_step_vnni() {
        for (int b = 0; b < cfg.nb; ++b) vmovdqu32(wreg(b), ptr[reg_wei + wei_off_ + b * 64]);
        for (int w = 0, k = 0; w < cfg.ur_w; ++w) {
            if (!pixel_reads(w)) continue;
            const Xbyak::Zmm s = (k++ & 1) ? zmm30 : zmm29;
            vpbroadcastd(s, src_at(w, 0));
            if (cfg.xor_src) vpxord(s, s, zmm31);
            for (int b = 0; b < cfg.nb; ++b) vpdpbusd(Xbyak::Zmm(acc(w, b).getIdx()), s, Xbyak::Zmm(wreg(b).getIdx()));
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
            for (int b = 0; b < cfg.nb; ++b) {
                const Xbyak::Zmm a(acc(w, b).getIdx());
                vpaddd(a, a, ptr[rax + cfg.tap_corr[w] * cfg.corr_stride + b * 64]);
            }
        }
    }
    int64_t tap_off_ = 0, wei_off_ = 0;
    int tap_ = -1; // tap being emitted (taps-inner loop)
    bool pixel_reads(int w) const {
        return cfg.tap_mask.empty() || tap_ < 0 || ((cfg.tap_mask[w] >> tap_) & 1u);
    }

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
        if (src_tail) {
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
                    if (src_tail && b == cfg.nb - 1) vpmovzxbd(Xbyak::Zmm(x.getIdx()) | k1 | T_z, sa);
                    else vpmovzxbd(x, sa);
                    for (int kw = 0; kw < cfg.kw; ++kw) {
                        const int r = j - kw * cfg.dw;
                        if (r < 0 || r % cfg.sw != 0 || r / cfg.sw >= cfg.ur_w) continue;
                        const int w = r / cfg.sw;
                        if (vnni) {
                            vpdpwssd(Xbyak::Zmm(acc(w, b).getIdx()), Xbyak::Zmm(x.getIdx()),
                                     Xbyak::Zmm(wb0 + kw));
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
    // Order and semantics exactly as ref::apply_pipeline (see conv_pipeline.h).
    // Registers: accumulators hold y; zmm25..31 are free (weights/broadcasts
    // are dead), k1 = tail mask, k2..k4 scratch.
    Xbyak::Label l_const;
    std::vector<float> consts_;
    int cidx(float v) {
        for (size_t i = 0; i < consts_.size(); ++i)
            if (std::memcmp(&consts_[i], &v, 4) == 0) return static_cast<int>(i);
        consts_.push_back(v);
        return static_cast<int>(consts_.size() - 1);
    }
    int cidx_bits(uint32_t bits) {
        float v;
        std::memcpy(&v, &bits, 4);
        return cidx(v);
    }
    Xbyak::Address cst(int idx) { return ptr_b[rip + l_const + idx * 4]; }      // {1to16} operand
    Xbyak::Address cst_plain(int idx) { return ptr[rip + l_const + idx * 4]; } // scalar load
    void emit_constants() {
        align(64);
        L(l_const);
        for (float v : consts_) {
            uint32_t b;
            std::memcpy(&b, &v, 4);
            dd(b);
        }
        if (use_perm_) {
            align(64);
            L(l_perm);
            for (int j = 0; j < 16; ++j) dd(static_cast<uint32_t>((j % 4) * 4 + j / 4));
        }
    }

    const Xbyak::Reg64 reg_dst = rbx, reg_tmp = rax, reg_full = r12, reg_bias = r13, reg_comp = r14;

    // Address of a per-OC array of the pipeline at vector b of this tile:
    // relative to reg_pbase (= scale + c0) when the distance fits a 32-bit
    // displacement, else through reg_tmp.
    const Xbyak::Reg64 reg_pbase = r15;
    Xbyak::Address oc_arr(const std::vector<float> &v, int b) {
        const int64_t diff = reinterpret_cast<intptr_t>(v.data()) -
                             reinterpret_cast<intptr_t>(cfg.pipe->scale.data()) + b * 64;
        if (diff > -(int64_t(1) << 31) + 4096 && diff < (int64_t(1) << 31) - 4096)
            return ptr[reg_pbase + static_cast<int32_t>(diff)];
        mov(reg_tmp, reinterpret_cast<uintptr_t>(v.data()));
        add(reg_tmp, reg_coff);
        return ptr[reg_tmp + b * 64];
    }
    bool tail(int b) const { return b == cfg.nb - 1 && cfg.last_n < 16; }

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
        if (cfg.last_n < 16) {
            mov(eax, (1u << cfg.last_n) - 1u);
            kmovw(k1, eax);
        }
        vxorps(zmm_zero, zmm_zero, zmm_zero);
        const int dsz = pp.dst_dt == dtype::f32 || pp.dst_dt == dtype::s32 ? 4 : 1;
        // u8 destination with 4 full OC vectors: the 64 channels of a pixel
        // are packed with saturating packs and stored as one vector.
        const bool packed = pp.dst_dt == dtype::u8 && cfg.nb == 4 && cfg.last_n == 16 && cfg.ur_w * cfg.nb <= 24;
        if (packed) vbroadcastss(zmm_255, cst_plain(cidx(255.f)));
        const int64_t pix = pp.oc * dsz;
        for (int b = 0; b < cfg.nb; ++b) {
            // Per-vector parameters hoisted out of the pixel loop.
            if (!pp.comp_is_zero) vmovdqu32(zmm_comp, ptr[reg_comp + b * 64]);
            vmovups(zmm_scale, oc_arr(pp.scale, b));
            if (pp.with_bias) vmovups(zmm_bias, ptr[reg_bias + b * 64]);
            for (int w = 0; w < cfg.ur_w; ++w) {
                const Xbyak::Zmm y(acc(w, b).getIdx());
                if (!pp.comp_is_zero) vpaddd(y, y, zmm_comp);
                vcvtdq2ps(y, y);
                // acc·scale + bias with one rounding, as the reference's madd().
                if (pp.with_bias) vfmadd213ps(y, zmm_scale, zmm_bias);
                else vmulps(y, y, zmm_scale);
                int full_i = 0;
                // A ReLU (alpha 0) that ends the chain of an integer destination
                // with dst_zp 0 is the store's own clamp at 0: y and max(y, 0)
                // differ only in −0 / NaN, which both store as 0.
                const bool int_dst = pp.dst_dt != dtype::f32;
                const bool relu_last = int_dst && pp.dst_zp == 0.f && !pp.ops.empty() &&
                                       pp.ops.back().k == lowered_op::kind::eltwise &&
                                       pp.ops.back().alg == eltwise_alg::relu && pp.ops.back().alpha == 0.f;
                for (size_t i = 0; i < pp.ops.size(); ++i) {
                    if (relu_last && i + 1 == pp.ops.size()) {
                        if (pp.dst_dt != dtype::u8) vmaxps(y, y, zmm_zero); // u8: the store clamps
                        break;
                    }
                    emit_op(pp.ops[i], y, w, b, full_i, pix, dsz);
                }
                // + dst_zp; adding 0 only turns −0 into +0, invisible in integers.
                if (!(int_dst && pp.dst_zp == 0.f)) vaddps(y, y, cst(cidx(pp.dst_zp)));
                if (packed) {
                    // min(255, y) keeps NaN (→ 0x80000000 → 0 in the packs);
                    // negatives saturate to 0 in vpackusdw.
                    vminps(y, zmm_255, y);
                    vcvtps2dq(y, y);
                    continue;
                }
                emit_store(y, ptr[reg_dst + w * pix + b * 16 * dsz], tail(b), pp.dst_dt);
            }
        }
        if (packed) emit_store_u8_packed(pix);
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
    const Xbyak::Zmm zmm_255 = Xbyak::Zmm(24);
    // Epilogue registers (the weight registers are dead by then).
    const Xbyak::Zmm zmm_comp = Xbyak::Zmm(25), zmm_scale = Xbyak::Zmm(26), zmm_bias = Xbyak::Zmm(27),
                     zmm_zero = Xbyak::Zmm(28);

    // y = fmax(y, v) / fmin(y, v): the non-NaN operand when one is NaN.
    void emit_fmaxmin(const Xbyak::Zmm &y, const Xbyak::Zmm &v, bool is_max) {
        const Xbyak::Zmm t(30);
        if (is_max) vmaxps(t, y, v);
        else vminps(t, y, v);
        vcmpps(k2, v, v, _CMP_UNORD_Q_);
        vmovaps(t | k2, y);
        vmovaps(y, t);
    }
    static constexpr int _CMP_UNORD_Q_ = 3, _CMP_ORD_Q_ = 7, _CMP_NGT_UQ_ = 10, _CMP_NGE_UQ_ = 9,
                         _CMP_GE_OQ_ = 29;

    void emit_load_dst_f32(const Xbyak::Zmm &v, const Xbyak::Address &a, bool tl, dtype dt) {
        const Xbyak::Zmm vz = tl ? (v | k1 | T_z) : v;
        switch (dt) {
        case dtype::f32: vmovups(vz, a); break;
        case dtype::s32: vmovdqu32(vz, a); vcvtdq2ps(v, v); break;
        case dtype::s8: vpmovsxbd(vz, a); vcvtdq2ps(v, v); break;
        default: vpmovzxbd(vz, a); vcvtdq2ps(v, v); break;
        }
    }

    void emit_op(const pipeline_op &op, const Xbyak::Zmm &y, int w, int b, int &full_i, int64_t pix, int dsz) {
        using K = lowered_op::kind;
        const Xbyak::Zmm t(31), u(29);
        switch (op.k) {
        case K::eltwise:
            switch (op.alg) {
            case eltwise_alg::relu:
                vcmpps(k2, y, zmm_zero, _CMP_NGT_UQ_);
                vmulps(y | k2, y, cst(cidx(op.alpha)));
                break;
            case eltwise_alg::clip:
                vbroadcastss(t, cst_plain(cidx(op.alpha)));
                emit_fmaxmin(y, t, true);
                vbroadcastss(t, cst_plain(cidx(op.beta)));
                emit_fmaxmin(y, t, false);
                break;
            case eltwise_alg::linear:
                vmulps(y, y, cst(cidx(op.alpha)));
                vaddps(y, y, cst(cidx(op.beta)));
                break;
            case eltwise_alg::hardswish:
                vdivps(u, y, cst(cidx(6.f)));
                vaddps(u, u, cst(cidx(0.5f)));
                vxorps(t, t, t);
                emit_fmaxmin(u, t, true);
                vbroadcastss(t, cst_plain(cidx(1.f)));
                emit_fmaxmin(u, t, false);
                vmulps(y, y, u);
                break;
            case eltwise_alg::abs: vandps(y, y, cst(cidx_bits(0x7fffffffu))); break;
            case eltwise_alg::sqrt: vsqrtps(y, y); break;
            case eltwise_alg::square: vmulps(y, y, y); break;
            case eltwise_alg::round: vrndscaleps(y, y, 0x08); break;
            default: fail("post_ops", "transcendental eltwise is not fused");
            }
            break;
        case K::binary: {
            if (op.full) {
                mov(reg_full, ptr[reg_args + offsetof(conv_call, full) + 8 * full_i]);
                const Xbyak::Address a = ptr[reg_full + w * pp_oc() * 4 + b * 64];
                if (tail(b)) vmovups(t | k1 | T_z, a);
                else vmovups(t, a);
                ++full_i;
            } else {
                vmovups(t, oc_arr(op.a, b));
            }
            switch (op.balg) {
            case binary_alg::add: vaddps(y, y, t); break;
            case binary_alg::sub: vsubps(y, y, t); break;
            case binary_alg::mul: vmulps(y, y, t); break;
            case binary_alg::div: vdivps(y, y, t); break;
            case binary_alg::max: emit_fmaxmin(y, t, true); break;
            case binary_alg::min: emit_fmaxmin(y, t, false); break;
            }
            break;
        }
        case K::prelu:
        case K::depthwise_prelu:
            vcmpps(k2, y, zmm_zero, _CMP_NGE_UQ_);
            vmulps(y | k2, y, oc_arr(op.a, b));
            break;
        case K::sum:
            emit_load_dst_f32(t, ptr[reg_dst + w * pix + b * 16 * dsz], tail(b), cfg.pipe->dst_dt);
            vsubps(t, t, cst(cidx(op.sum_zp)));
            vmulps(t, t, cst(cidx(op.sum_scale)));
            vaddps(y, y, t);
            break;
        case K::depthwise_scale_shift:
            vmulps(y, y, oc_arr(op.a, b));
            vaddps(y, y, oc_arr(op.b, b));
            break;
        case K::quantization:
            vmovups(t, oc_arr(op.q[0], b));
            vmaxps(y, t, y); // std::max(y, cl): cl > y ? cl : y
            vmovups(t, oc_arr(op.q[1], b));
            vminps(y, t, y); // std::min(., ch): ch < y ? ch : y
            vmulps(y, y, oc_arr(op.q[2], b));
            vaddps(y, y, oc_arr(op.q[3], b));
            if (op.round) vrndscaleps(y, y, 0x08);
            if (op.dequantize) {
                vmulps(y, y, oc_arr(op.q[4], b));
                vaddps(y, y, oc_arr(op.q[5], b));
            }
            break;
        default: fail("post_ops", "lowered post-op not supported by the fused epilogue");
        }
    }
    int64_t pp_oc() const { return cfg.pipe->oc; }

    void emit_store(const Xbyak::Zmm &y, const Xbyak::Address &a, bool tl, dtype dt) {
        const Xbyak::Zmm t(31);
        if (dt == dtype::f32) {
            if (tl) vmovups(a | k1, y);
            else vmovups(a, y);
            return;
        }
        // NaN → 0 (for u8 the vmaxps with 0 below already returns 0 for NaN).
        if (dt != dtype::u8) {
            vcmpps(k2, y, y, _CMP_ORD_Q_);
            vmovaps(y | k2 | T_z, y);
        }
        if (dt == dtype::s32) {
            vrndscaleps(y, y, 0x08);
            vcmpps(k3, y, cst(cidx(2147483648.f)), _CMP_GE_OQ_);
            vcvtps2dq(y, y); // too large → INT_MIN, fixed below
            vpbroadcastd(t, cst_plain(cidx_bits(0x7fffffffu)));
            vmovdqa32(y | k3, t);
            if (tl) vmovdqu32(a | k1, y);
            else vmovdqu32(a, y);
            return;
        }
        if (dt == dtype::u8) {
            // max(y, 0) (NaN → 0), convert (≥ 2^31 gives 0x80000000), then
            // unsigned saturation: 255.5+ and 0x80000000 both store 255.
            vmaxps(y, y, zmm_zero);
            vcvtps2dq(y, y); // MXCSR: round half to even
            if (tl) vpmovusdb(a | k1, y);
            else vpmovusdb(a, y);
            return;
        }
        vmaxps(y, y, cst(cidx(-128.f))); // NaN was zeroed above
        vminps(y, y, cst(cidx(127.f)));
        vcvtps2dq(y, y);
        if (tl) vpmovdb(a | k1, y);
        else vpmovdb(a, y);
    }
};

conv_ukernel::conv_ukernel(const conv_ukernel_cfg &cfg) : cfg_(cfg) {
    const int max_acc = cfg.depthwise ? max_accumulators_dw(cfg.isa, cfg.kw) : max_accumulators(cfg.isa, cfg.nb);
    if (cfg.nb < 1 || cfg.nb > max_oc_vectors(cfg.isa) || cfg.ur_w < 1 || cfg.ur_w * cfg.nb > max_acc)
        fail("ur_w", "register blocking out of range");
    if (cfg.xor_src && cfg.isa != conv_isa::avx512_vnni) fail("xor_src", "only the VNNI kernel shifts in place");
    if (cfg.pipe && cfg.isa == conv_isa::avx2) fail("pipe", "the fused epilogue needs zmm registers");
    if (cfg.dw_direct && (!cfg.depthwise || cfg.isa == conv_isa::avx2 || cfg.kh > 64))
        fail("dw_direct", "needs the zmm depthwise kernel (masked loads) and at most 64 kernel rows");
    if (!cfg.pix_off.empty() && (cfg.depthwise || static_cast<int>(cfg.pix_off.size()) != cfg.ur_w))
        fail("pix_off", "needs one offset per pixel (dense kernels only)");
    if (!cfg.tap_mask.empty() && (cfg.isa != conv_isa::avx512_vnni || !cfg.taps_inner || cfg.depthwise ||
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
