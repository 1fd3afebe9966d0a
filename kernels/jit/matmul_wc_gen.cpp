// Code generator of the weight-compressed MatMul kernels: one template over
// the register width (Xbyak::Ymm for avx2, Xbyak::Zmm for avx512). See
// matmul_wc.h for the layout and the computation.
#include <cstddef>
#include <string>
#include <type_traits>

#include "kernels/jit/matmul_wc.h"

namespace qconv::jit {
namespace {

using namespace Xbyak;

template <typename Vmm>
class matmul_wc_generator : public jit_generator {
public:
    static constexpr bool is_zmm = std::is_same<Vmm, Zmm>::value;
    static constexpr int vl = is_zmm ? 16 : 8;
    static constexpr int nv = 4; // vectors per panel

    explicit matmul_wc_generator(const matmul_wc_config &c) : jit_generator(64 * 1024), c_(c) {
        name_ = std::string("jit:matmul_wc_") + (c.four_bit() ? "x4" : "x8") + (is_zmm ? ":avx512" : ":avx2");
    }
    const char *name() const override { return name_.c_str(); }

protected:
    void generate() override {
        preamble();
        load_args();
        zero_out();
        Label group_loop;
        mov(r_group, c_.n_groups);
        L(group_loop);
        {
            emit_group();
            add(r_param, c_.param_floats() * 4);
            dec(r_group);
            jnz(group_loop, T_NEAR);
        }
        postamble();
    }

private:
    // ---- registers
    const Reg64 r_arg = rdi, r_w = r8, r_param = r9, r_out = r11, r_k = rax, r_cnt = rcx, r_group = rdx;
    const Reg64 &row(int m) const {
        static const Reg64 rows[6] = {r10, rsi, r12, r13, r14, r15};
        return rows[m];
    }
    // Vector registers: accumulators from 0 up, temporaries at the top.
    static constexpr int n_regs = is_zmm ? 32 : 16;
    Vmm vmask() const { return Vmm(n_regs - 1); }
    Vmm vt0() const { return Vmm(n_regs - 2); }
    Vmm vt1() const { return Vmm(n_regs - 3); }
    Vmm vxb() const { return Vmm(n_regs - 4); } // broadcast x (ymm only)
    Vmm acc(int s, int m, int v) const { return Vmm((s * c_.mb + m) * nv + v); }

    int row_bytes() const { return c_.panel(); }    // bytes per k-slice of a panel
    int k_per_step() const { return c_.four_bit() ? 2 : 1; }

    void load_args() {
        mov(r_w, ptr[r_arg + offsetof(matmul_wc_call, w)]);
        mov(r_param, ptr[r_arg + offsetof(matmul_wc_call, params)]);
        mov(row(0), ptr[r_arg + offsetof(matmul_wc_call, x)]);
        mov(r_out, ptr[r_arg + offsetof(matmul_wc_call, out)]);
        if (c_.mb > 1) mov(rbx, c_.x_stride * 4);
        for (int m = 1; m < c_.mb; ++m) {
            mov(row(m), row(m - 1));
            add(row(m), rbx);
        }
        xor_(r_k, r_k);
        if (c_.four_bit()) {
            mov(ebx, 0x0F);
            if (is_zmm) {
                vpbroadcastd(vmask(), ebx);
            } else {
                vmovd(Xmm(vmask().getIdx()), ebx);
                vpbroadcastd(vmask(), Xmm(vmask().getIdx()));
            }
        }
    }

    Address out_addr(int m, int v) const { return ptr[r_out + (m * c_.panel() + v * vl) * 4]; }
    Address scale_addr(int v) const { return ptr[r_param + v * vl * 4]; }
    Address zp_addr(int v) const { return ptr[r_param + (c_.panel() + v * vl) * 4]; }
    Address w_addr(int step, int v) const { return ptr[r_w + step * row_bytes() + v * vl]; }
    int x_disp(int step, int half) const { return (step * k_per_step() + half) * 4; }

    void zero_out() {
        vxorps(vt0(), vt0(), vt0());
        for (int m = 0; m < c_.mb; ++m)
            for (int v = 0; v < nv; ++v) vmovups(out_addr(m, v), vt0());
    }

    void zero_accs() {
        for (int s = 0; s < c_.sets(); ++s)
            for (int m = 0; m < c_.mb; ++m)
                for (int v = 0; v < nv; ++v) vxorps(acc(s, m, v), acc(s, m, v), acc(s, m, v));
    }

    // acc += w · x[m][k]; x addressed as [row_m + r_k + disp].
    void fma_x(const Vmm &a, const Vmm &w, int m, int disp) {
        if constexpr (is_zmm) {
            vfmadd231ps(a, w, ptr_b[row(m) + r_k + disp]);
        } else {
            vbroadcastss(vxb(), ptr[row(m) + r_k + disp]);
            vfmadd231ps(a, w, vxb());
        }
    }

    void widen(const Vmm &dst, const Address &src) {
        if (c_.wei_dt == dtype::u8 || c_.wei_dt == dtype::u4)
            vpmovzxbd(dst, src);
        else
            vpmovsxbd(dst, src);
    }

    // int32 lanes → f32, minus the zero point (exact: small integers).
    void to_f32(const Vmm &v_reg, int v) {
        vcvtdq2ps(v_reg, v_reg);
        if (c_.zp) vsubps(v_reg, v_reg, zp_addr(v));
    }

    void vand(const Vmm &d, const Vmm &a, const Vmm &b) {
        if constexpr (is_zmm)
            vpandd(d, a, b);
        else
            vpand(d, a, b);
    }

    // One k-slice (8-bit) or two (4-bit) of all mb rows and nv vectors.
    void emit_step(int step, int parity) {
        const int s0 = c_.sets() == 2 ? parity : 0;
        if (c_.prefetch && (step * row_bytes()) % 64 == 0)
            prefetcht0(ptr[r_w + step * row_bytes() + prefetch_distance]);
        for (int v = 0; v < nv; ++v) {
            if (!c_.four_bit()) {
                widen(vt0(), w_addr(step, v));
                to_f32(vt0(), v);
                for (int m = 0; m < c_.mb; ++m) fma_x(acc(s0, m, v), vt0(), m, x_disp(step, 0));
                continue;
            }
            // 4-bit: low nibble = k, high nibble = k + 1.
            const int s1 = c_.sets() == 2 ? 1 : 0;
            widen(vt0(), w_addr(step, v));
            if (c_.wei_dt == dtype::u4) {
                vand(vt1(), vt0(), vmask());
                vpsrld(vt0(), vt0(), 4);
            } else {
                vpslld(vt1(), vt0(), 28);
                vpsrad(vt1(), vt1(), 28);
                vpsrad(vt0(), vt0(), 4);
            }
            to_f32(vt1(), v);
            for (int m = 0; m < c_.mb; ++m) fma_x(acc(0, m, v), vt1(), m, x_disp(step, 0));
            to_f32(vt0(), v);
            for (int m = 0; m < c_.mb; ++m) fma_x(acc(s1, m, v), vt0(), m, x_disp(step, 1));
        }
    }

    void advance(int steps) {
        add(r_w, steps * row_bytes());
        add(r_k, steps * k_per_step() * 4);
    }

    // Σ over the group's k-slices, then out += part · scale.
    void emit_group() {
        zero_accs();
        const int unroll = c_.four_bit() ? 4 : 8;
        const int64_t iters = c_.steps_per_group / unroll;
        const int rem = static_cast<int>(c_.steps_per_group % unroll);
        if (iters > 0) {
            Label loop;
            mov(r_cnt, iters);
            L(loop);
            for (int u = 0; u < unroll; ++u) emit_step(u, u & 1);
            advance(unroll);
            dec(r_cnt);
            jnz(loop, T_NEAR);
        }
        if (rem > 0) {
            for (int u = 0; u < rem; ++u) emit_step(u, u & 1);
            advance(rem);
        }
        if (c_.sets() == 2)
            for (int m = 0; m < c_.mb; ++m)
                for (int v = 0; v < nv; ++v) vaddps(acc(0, m, v), acc(0, m, v), acc(1, m, v));
        for (int v = 0; v < nv; ++v) {
            vmovups(vt1(), scale_addr(v));
            for (int m = 0; m < c_.mb; ++m) {
                vmovups(vt0(), out_addr(m, v));
                vfmadd231ps(vt0(), acc(0, m, v), vt1());
                vmovups(out_addr(m, v), vt0());
            }
        }
    }

    static constexpr int prefetch_distance = 2048;
    matmul_wc_config c_;
    std::string name_;
};

} // namespace

std::unique_ptr<jit_generator> make_matmul_wc_generator(const matmul_wc_config &c) {
    std::unique_ptr<jit_generator> g;
    if (c.zmm)
        g = std::make_unique<matmul_wc_generator<Zmm>>(c);
    else
        g = std::make_unique<matmul_wc_generator<Ymm>>(c);
    g->create();
    return g;
}

} // namespace qconv::jit
