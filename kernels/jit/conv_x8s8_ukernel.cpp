// The accumulation micro-kernel of the int8 conv family (see conv_x8s8.h).
//
// Register plan (AVX-512 VNNI, zmm):
//   zmm0 .. zmm(ur_w·nb − 1)  int32 accumulators, pixel-major
//   zmm25 .. zmm(24 + nb)     weights of the current 4-IC step (nb blocks of 16 OC)
//   zmm29, zmm30              broadcast source dwords (alternating)
//   zmm31                     0x80 bytes for the s8 → u8 shift (xor_src only)
// Loops: kh (runtime) → kw (unrolled) → ICg/4 (runtime) → pixels (unrolled)
//        → OC blocks (unrolled) with one vpdpbusd per (pixel, block).
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

struct conv_ukernel::gen : public jit_generator {
    explicit gen(const conv_ukernel_cfg &c) : jit_generator(64 * 1024 + 256 * c.kw * c.ur_w * c.nb), cfg(c) {
        name_ = std::string("jit:conv_x8s8_ukernel:") + to_string(c.isa) + ":ur" + std::to_string(c.ur_w) +
                "x" + std::to_string(c.nb);
    }
    const char *name() const override { return name_.c_str(); }

    conv_ukernel_cfg cfg;
    std::string name_;

    // Arguments and loop registers.
    const Xbyak::Reg64 reg_src = rdi, reg_wei = rsi, reg_acc = rdx;
    const Xbyak::Reg64 reg_kh = r8, reg_aux = r9, reg_ic = r10;

    Xbyak::Zmm acc(int w, int b) const { return Xbyak::Zmm(w * cfg.nb + b); }
    Xbyak::Zmm wreg(int b) const { return Xbyak::Zmm(25 + b); }

    void emit_zero_acc() {
        for (int i = 0; i < cfg.ur_w * cfg.nb; ++i) vpxord(Xbyak::Zmm(i), Xbyak::Zmm(i), Xbyak::Zmm(i));
        if (cfg.xor_src) {
            mov(eax, 0x80808080u);
            vpbroadcastd(zmm31, eax);
        }
    }

    // One 4-IC step for all pixels: loads weights, broadcasts sources, vpdpbusd.
    void emit_ic_step() {
        for (int b = 0; b < cfg.nb; ++b) vmovdqu32(wreg(b), ptr[reg_wei + b * 64]);
        for (int w = 0; w < cfg.ur_w; ++w) {
            const Xbyak::Zmm s = (w & 1) ? zmm30 : zmm29;
            vpbroadcastd(s, ptr[reg_aux + w * cfg.sw * cfg.pix_stride]);
            if (cfg.xor_src) vpxord(s, s, zmm31);
            for (int b = 0; b < cfg.nb; ++b) vpdpbusd(acc(w, b), s, wreg(b));
        }
    }

    void emit_kw_loop() {
        for (int kw = 0; kw < cfg.kw; ++kw) {
            Xbyak::Label l_ic;
            lea(reg_aux, ptr[reg_src + kw * cfg.dw * cfg.pix_stride]);
            mov(reg_ic, cfg.ic4);
            L(l_ic);
            emit_ic_step();
            add(reg_aux, 4);
            add(reg_wei, cfg.nb * 64);
            dec(reg_ic);
            jnz(l_ic, T_NEAR);
        }
    }

    void emit_store_acc() {
        for (int w = 0; w < cfg.ur_w; ++w)
            for (int b = 0; b < cfg.nb; ++b)
                vmovdqu32(ptr[reg_acc + (w * cfg.nb + b) * 64], acc(w, b));
    }

    void generate() override {
        Xbyak::Label l_kh;
        emit_zero_acc();
        mov(reg_kh, cfg.kh);
        L(l_kh);
        emit_kw_loop();
        if (cfg.dh * cfg.row_stride > 0x7fffffff) {
            mov(rax, cfg.dh * cfg.row_stride);
            add(reg_src, rax);
        } else {
            add(reg_src, static_cast<uint32_t>(cfg.dh * cfg.row_stride));
        }
        dec(reg_kh);
        jnz(l_kh, T_NEAR);
        emit_store_acc();
        vzeroupper();
        ret();
    }
};

conv_ukernel::conv_ukernel(const conv_ukernel_cfg &cfg) : cfg_(cfg) {
    if (cfg.isa != conv_isa::avx512_vnni) fail("isa", std::string("no micro-kernel for ") + to_string(cfg.isa));
    if (cfg.nb < 1 || cfg.nb > 4 || cfg.ur_w < 1 || cfg.ur_w * cfg.nb > 25)
        fail("ur_w", "register blocking out of range");
    gen_ = std::make_unique<gen>(cfg);
    gen_->create();
    fn_ = gen_->entry<conv_ukernel_fn>();
}

conv_ukernel::~conv_ukernel() = default;

} // namespace qconv::jit
