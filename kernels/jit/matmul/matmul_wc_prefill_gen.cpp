// Code generator of the prefill FMA kernel of the weight-compressed MatMul
// (matmul_wc.h, "The prefill shape"): an mb x nv block of accumulators swept
// over an unpacked f32 chunk of weights, one template over the register width
// (jit_traits.h: avx2 ymm, avx512_core zmm).
//
// Per k: nv weight vectors loaded once, each row's x broadcast (zmm: the
// FMA's embedded broadcast; ymm: vbroadcastss into one of two registers) and
// mb·nv FMAs. Per group: the accumulators start at 0 (or from part), run
// over k_group k in increasing order, then out += acc · scale (or are stored
// to part when the group continues in the next chunk).
#include <cstddef>
#include <string>

#include "kernels/jit/base/jit_traits.h"
#include "kernels/jit/matmul/matmul_wc.h"
#include "kernels/jit/matmul/matmul_wc_common.h"

namespace qconv::jit {
namespace {

using namespace Xbyak;

template <class T>
class matmul_wc_prefill_generator : public jit_generator {
public:
    using Vmm = typename T::Vmm;
    static constexpr bool evex = T::evex;
    static constexpr int vl = T::lanes;
    static constexpr int n_regs = T::n_vregs;

    explicit matmul_wc_prefill_generator(const matmul_wc_prefill_config &c) : jit_generator(32 * 1024), c_(c) {
        if (c.mb < 1 || c.mb > 12 || c.nv < 2 || c.mb * c.nv + c.nv + (evex ? 0 : 2) > n_regs || c.k_group < 1)
            fail("jit", "matmul_wc_prefill: mb " + std::to_string(c.mb) + " x nv " + std::to_string(c.nv) +
                            " exceeds the register budget");
        name_ = std::string("jit:matmul_wc_prefill:") + to_string(T::isa);
    }
    const char *name() const override { return name_.c_str(); }

protected:
    void generate() override {
        preamble();
        load_args();
        emit_groups();
        postamble();
    }

private:
    // ---- registers
    const Reg64 r_arg = rdi, r_b = r8, r_scale = r9, r_out = r11, r_part = r15, r_cnt = rcx, r_group = rdx;
    const Reg64 r_x = rax; // x of the block packed k-major: x[k][m], mb floats per k
    // Accumulators from 0 up; weight vectors and broadcast x at the top.
    Vmm acc(int m, int v) const { return Vmm(m * c_.nv + v); }
    Vmm wv(int v) const { return Vmm(n_regs - 1 - v); }
    Vmm xb(int m) const { return Vmm(n_regs - 1 - c_.nv - (m & 1)); } // ymm only

    void load_args() {
        mov(r_b, ptr[r_arg + offsetof(matmul_wc_prefill_call, b)]);
        mov(r_scale, ptr[r_arg + offsetof(matmul_wc_prefill_call, scale)]);
        mov(r_out, ptr[r_arg + offsetof(matmul_wc_prefill_call, out)]);
        mov(r_part, ptr[r_arg + offsetof(matmul_wc_prefill_call, part)]);
        mov(r_x, ptr[r_arg + offsetof(matmul_wc_prefill_call, x)]);
    }

    Address out_addr(const Reg64 &base, int m, int v) const {
        return ptr[base + (int64_t(m) * c_.out_stride + v * vl) * 4];
    }

    void init_accs() {
        for (int m = 0; m < c_.mb; ++m)
            for (int v = 0; v < c_.nv; ++v) {
                if (c_.part_in) vmovups(acc(m, v), out_addr(r_part, m, v));
                else vxorps(acc(m, v), acc(m, v), acc(m, v));
            }
    }

    // One k: the weight vectors, then every row's FMAs.
    void emit_k(int u) {
        for (int v = 0; v < c_.nv; ++v) vmovups(wv(v), ptr[r_b + (int64_t(u) * c_.b_stride + v * vl) * 4]);
        for (int m = 0; m < c_.mb; ++m) {
            const RegExp xm = r_x + (u * c_.mb + m) * 4;
            if constexpr (evex) {
                for (int v = 0; v < c_.nv; ++v) vfmadd231ps(acc(m, v), wv(v), ptr_b[xm]);
            } else {
                vbroadcastss(xb(m), ptr[xm]);
                for (int v = 0; v < c_.nv; ++v) vfmadd231ps(acc(m, v), wv(v), xb(m));
            }
        }
    }

    void advance(int ks) {
        add(r_b, ks * c_.b_stride * 4);
        add(r_x, ks * c_.mb * 4);
    }

    // out += acc · scale per vector (the weight registers are free here).
    void finish_group() {
        if (c_.part_out) {
            for (int m = 0; m < c_.mb; ++m)
                for (int v = 0; v < c_.nv; ++v) vmovups(out_addr(r_part, m, v), acc(m, v));
            return;
        }
        const Vmm s = wv(0), t = wv(1);
        for (int v = 0; v < c_.nv; ++v) {
            vmovups(s, ptr[r_scale + v * vl * 4]);
            for (int m = 0; m < c_.mb; ++m) {
                vmovups(t, out_addr(r_out, m, v));
                vfmadd231ps(t, acc(m, v), s);
                vmovups(out_addr(r_out, m, v), t);
            }
        }
    }

    void emit_groups() {
        mov(r_group, ptr[r_arg + offsetof(matmul_wc_prefill_call, n_groups)]);
        Label loop;
        L(loop);
        init_accs();
        const int unroll = 8;
        emit_unrolled_steps(
            *this, r_cnt, c_.k_group, unroll, [this](int u) { emit_k(u); }, [this](int ks) { advance(ks); });
        finish_group();
        add(r_scale, c_.param_stride * 4);
        dec(r_group);
        jnz(loop, T_NEAR);
    }

    matmul_wc_prefill_config c_;
    std::string name_;
};

} // namespace

std::unique_ptr<jit_generator> make_matmul_wc_prefill_generator(const matmul_wc_prefill_config &c) {
    std::unique_ptr<jit_generator> g;
    if (c.zmm) g = std::make_unique<matmul_wc_prefill_generator<isa_traits<conv_isa::avx512_core>>>(c);
    else g = std::make_unique<matmul_wc_prefill_generator<isa_traits<conv_isa::avx2>>>(c);
    g->create();
    return g;
}

} // namespace qconv::jit
