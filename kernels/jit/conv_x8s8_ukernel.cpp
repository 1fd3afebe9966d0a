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
// (unrolled) → OC vectors (unrolled).
#include <string>

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

    const Xbyak::Reg64 reg_src = rdi, reg_wei = rsi, reg_acc = rdx;
    const Xbyak::Reg64 reg_kh = r8, reg_aux = r9, reg_ic = r10;

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
        return ptr[reg_aux + w * cfg.sw * cfg.pix_stride + byte_off];
    }

    void emit_ic_step_vnni() {
        for (int b = 0; b < cfg.nb; ++b) vmovdqu32(wreg(b), ptr[reg_wei + b * 64]);
        for (int w = 0; w < cfg.ur_w; ++w) {
            const Xbyak::Zmm s = (w & 1) ? zmm30 : zmm29;
            vpbroadcastd(s, src_at(w, 0));
            if (cfg.xor_src) vpxord(s, s, zmm31);
            for (int b = 0; b < cfg.nb; ++b) vpdpbusd(Xbyak::Zmm(acc(w, b).getIdx()), s, Xbyak::Zmm(wreg(b).getIdx()));
        }
    }

    // Widened path: two IC pairs per 4-IC step, vpmaddwd + vpaddd.
    void emit_ic_step_wide() {
        for (int pair = 0; pair < 2; ++pair) {
            for (int b = 0; b < cfg.nb; ++b) vload(wreg(b), ptr[reg_wei + (pair * cfg.nb + b) * vbytes]);
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

    void emit_store_acc() {
        for (int w = 0; w < cfg.ur_w; ++w)
            for (int b = 0; b < cfg.nb; ++b) vstore(ptr[reg_acc + (w * cfg.nb + b) * vbytes], acc(w, b));
    }

    void generate() override {
        Xbyak::Label l_kh;
        emit_zero_acc();
        mov(reg_kh, cfg.kh);
        L(l_kh);
        emit_kw_loop();
        mov(rax, cfg.dh * cfg.row_stride);
        add(reg_src, rax);
        dec(reg_kh);
        jnz(l_kh, T_NEAR);
        emit_store_acc();
        vzeroupper();
        ret();
    }
};

conv_ukernel::conv_ukernel(const conv_ukernel_cfg &cfg) : cfg_(cfg) {
    if (cfg.nb < 1 || cfg.nb > max_oc_vectors(cfg.isa) || cfg.ur_w < 1 ||
        cfg.ur_w * cfg.nb > max_accumulators(cfg.isa, cfg.nb))
        fail("ur_w", "register blocking out of range");
    if (cfg.xor_src && cfg.isa != conv_isa::avx512_vnni) fail("xor_src", "only the VNNI kernel shifts in place");
    gen_ = std::make_unique<gen>(cfg);
    gen_->create();
    fn_ = gen_->entry<conv_ukernel_fn>();
}

conv_ukernel::~conv_ukernel() = default;

} // namespace qconv::jit
