// Code generator of the weight-compressed MatMul kernels: one template over
// the traits of the register width (jit_traits.h: avx2 ymm, avx512_core zmm;
// f32 FMAs, so the VNNI variants add nothing here). See
// matmul_wc.h for the layout and the computation.
#include <cstddef>
#include <string>

#include "kernels/jit/base/jit_traits.h"
#include "kernels/jit/matmul/matmul_wc.h"
#include "kernels/jit/matmul/matmul_wc_common.h"

namespace qconv::jit {
namespace {

using namespace Xbyak;

template <class T>
class matmul_wc_generator : public jit_generator {
public:
    static_assert(T::acc == acc_kind::vregs, "the MatMul kernel accumulates in vector registers");
    using Vmm = typename T::Vmm;
    static constexpr bool evex = T::evex;
    static constexpr int vl = T::lanes;

    explicit matmul_wc_generator(const matmul_wc_config &c) : jit_generator(64 * 1024), c_(c) {
        if (c.lut && (!evex || !c.four_bit())) fail("jit", "matmul_wc: lut needs zmm and 4-bit weights");
        if (c.lut8 && !c.lut) fail("jit", "matmul_wc: lut8 needs lut");
        if (c.sets() * c.mb * c.vectors() > c.acc_budget() || c.mb > 12 || (c.nv != 2 && c.nv != 4) ||
            (c.pc > 1 && c.nv != 4) || (c.unpack && (c.mb != 0 || c.nv != 4 || c.pc != 1)))
            fail("jit", "matmul_wc: mb " + std::to_string(c.mb) + " x nv " + std::to_string(c.nv) +
                            " exceeds the register budget");
        if (c.x_dt != dtype::f32 &&
            ((c.x_dt != dtype::f16 && c.x_dt != dtype::bf16) || c.x_packed || c.unpack || row_bases_for(c.mb) > 3))
            fail("jit", std::string("matmul_wc: x of type ") + to_string(c.x_dt) + " only in rows");
        name_ = std::string("jit:matmul_wc_") + (c.four_bit() ? "x4" : "x8") + (c.unpack ? "_unpack:" : ":") +
                to_string(T::isa);
    }
    const char *name() const override { return name_.c_str(); }

protected:
    void generate() override {
        preamble();
        if (typed_x()) { // the scratch of converted x: mb rows of scratch_k floats, aligned
            mov(rbp, rsp);
            sub(rsp, c_.mb * scratch_row);
            and_(rsp, -64);
        }
        load_args();
        zero_out();
        emit_counted_loop(*this, r_group, c_.n_groups, [this] {
            emit_group();
            add(r_param, c_.param_floats() * 4);
        });
        if (typed_x()) mov(rsp, rbp);
        postamble();
    }

private:
    // ---- registers
    const Reg64 r_arg = rdi, r_w = r8, r_param = r9, r_out = r11, r_cnt = rcx, r_group = rdx;
    // x rows: row_at() of matmul_wc_common.h, r_stride = one row; packed x: one stream.
    const Reg64 r_stride = r14;
    const Reg64 &x_base(int j) const { return row_base(j); }
    int n_bases() const { return c_.x_packed ? 1 : row_bases_for(c_.mb); }
    // Vector registers: accumulators from 0 up, temporaries at the top.
    static constexpr int n_regs = T::n_vregs;
    Vmm vmask() const { return Vmm(n_regs - 1); }
    Vmm vt0() const { return Vmm(n_regs - 2); }
    Vmm vt1() const { return Vmm(n_regs - 3); }
    Vmm vxb() const { return Vmm(n_regs - 4); } // broadcast x (ymm only)
    Vmm acc(int s, int m, int v) const { return Vmm((s * c_.mb + m) * c_.vectors() + v); }

    int row_bytes() const { return c_.panel() * c_.col_bytes(); } // bytes per step of a panel
    int k_per_step() const { return c_.k_per_step(); }

    void load_args() {
        mov(r_w, ptr[r_arg + offsetof(matmul_wc_call, w)]);
        mov(r_param, ptr[r_arg + offsetof(matmul_wc_call, params)]);
        mov(x_base(0), ptr[r_arg + offsetof(matmul_wc_call, x)]);
        mov(r_out, ptr[r_arg + offsetof(matmul_wc_call, out)]);
        mov(r_stride, c_.x_stride * x_bytes());
        emit_row_bases(*this, r_stride, n_bases());
        if (c_.lut) {
            mov(rbx, ptr[r_arg + offsetof(matmul_wc_call, lut)]);
            vmovups(vmask(), ptr[rbx]); // the table lives in the mask register
        } else if (c_.four_bit()) {
            broadcast_dword(vmask(), ebx, 0x0F);
        }
    }

    // Vector v is vector v % nv of panel v / nv of the call.
    Address out_addr(int m, int v) const {
        return ptr[r_out + (m * c_.pc * c_.panel() + (v / c_.nv) * c_.panel() + (v % c_.nv) * vl) * 4];
    }
    int64_t param_off(int v) const { return ((v / c_.nv) * c_.panel_params + (v % c_.nv) * vl) * 4; }
    Address scale_addr(int v) const { return ptr[r_param + param_off(v)]; }
    Address zp_addr(int v) const { return ptr[r_param + param_off(v) + c_.panel() * 4]; }
    Address w_addr(int step, int v, int byte = 0) const {
        return ptr[r_w + (v / c_.nv) * c_.panel_bytes + step * row_bytes() + (v % c_.nv) * vl * c_.col_bytes() + byte];
    }
    int x_disp(int step, int half) const { return (step * k_per_step() + half) * 4; }

    // unpack: k-row kk of the step, vector v of the panel.
    void store_unpacked(const Vmm &w, int step, int v, int kk) {
        if (c_.unpack) vmovups(ptr[r_out + ((step * k_per_step() + kk) * c_.panel() + v * vl) * 4], w);
    }

    void zero_out() {
        vxorps(vt0(), vt0(), vt0());
        for (int m = 0; m < c_.mb; ++m)
            for (int v = 0; v < c_.vectors(); ++v) vmovups(out_addr(m, v), vt0());
    }

    void zero_accs() {
        for (int s = 0; s < c_.sets(); ++s)
            for (int m = 0; m < c_.mb; ++m)
                for (int v = 0; v < c_.vectors(); ++v) vxorps(acc(s, m, v), acc(s, m, v), acc(s, m, v));
    }

    // x[m][k] (as f32) with k given as a byte displacement (of f32) from the current bases.
    RegExp x_at(int m, int disp) const {
        if (c_.x_packed) return x_base(0) + (disp / 4 * c_.mb + m) * 4; // x[k][m], one stream
        if (typed_x()) return r_scr + m * scratch_row + disp;           // converted by convert_x
        return row_at(m, r_stride, disp);
    }

    // ---- f16 / bf16 rows of x (matmul_wc_config::x_dt)
    bool typed_x() const { return c_.x_dt != dtype::f32; }
    int x_bytes() const { return typed_x() ? 2 : 4; }
    // x is converted scratch_k k at a time (at most: a group's k, then its
    // tail), so that most of the FMAs' loads from the scratch come long after
    // the stores that wrote it: converting each 8-k block just before its
    // FMAs measured 1 % (zmm) to 4 % (ymm) slower than X converted first at
    // M = 1, pieces of 64 k 0-1.5 %, of 256 k within the noise (±1 %). Each
    // call converts all of K again (a call covers pc panels, not all N).
    static constexpr int scratch_k = 256;
    static constexpr int scratch_row = scratch_k * 4; // bytes
    const Reg64 r_scr = r15;                          // the current block's x in the scratch
    const Reg64 r_piece = r13;                        // counts the scratch_k pieces of a group

    // n 16-bit values of x from src to f32 at dst (exact), with the vector
    // temporary in the register width w (4: xmm, 8: ymm, 16: zmm).
    void convert_piece(const RegExp &src, const RegExp &dst, int n) {
        const int t = vt0().getIdx();
        const Xmm x(t);
        const Ymm y(t);
        if (n == 1) {
            movzx(eax, word[src]);
            if (c_.x_dt == dtype::bf16) {
                shl(eax, 16);
                mov(dword[dst], eax);
                return;
            }
            vmovd(x, eax);
            vcvtph2ps(x, x);
            vmovss(ptr[dst], x);
            return;
        }
        if (n == 2) {
            vmovd(x, ptr[src]);
            if (c_.x_dt == dtype::f16) vcvtph2ps(x, x);
            else {
                vpmovzxwd(x, x);
                vpslld(x, x, 16);
            }
            vmovq(ptr[dst], x);
            return;
        }
        auto conv = [&](const Xmm &r, const Address &a) {
            if (c_.x_dt == dtype::f16) vcvtph2ps(r, a);
            else {
                vpmovzxwd(r, a);
                vpslld(r, r, 16);
            }
            vmovups(ptr[dst], r);
        };
        if (n == 4) conv(x, qword[src]);
        else if (n == 8) conv(y, xword[src]);
        else conv(Zmm(t), yword[src]);
    }

    // The k values of the next steps of every row into the scratch (at most scratch_k).
    void convert_x(int steps) {
        const int n = steps * k_per_step();
        for (int m = 0; m < c_.mb; ++m)
            for (int o = 0; o < n;) {
                const int left = n - o;
                const int piece = left >= 16 && evex ? 16 : left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
                convert_piece(row_at(m, r_stride, o * 2), rsp + m * scratch_row + o * 4, piece);
                o += piece;
            }
        mov(r_scr, rsp);
    }

    // acc += w · x[m][k].
    void fma_x(const Vmm &a, const Vmm &w, int m, int disp) {
        if constexpr (evex) {
            vfmadd231ps(a, w, ptr_b[x_at(m, disp)]);
        } else {
            vbroadcastss(vxb(), ptr[x_at(m, disp)]);
            vfmadd231ps(a, w, vxb());
        }
    }

    void widen(const Vmm &dst, const Address &src) {
        if (c_.wei_dt == dtype::u8 || c_.wei_dt == dtype::u4) vpmovzxbd(dst, src);
        else vpmovsxbd(dst, src);
    }

    // int32 lanes → f32, minus the zero point (exact: small integers).
    void to_f32(const Vmm &v_reg, int v) {
        vcvtdq2ps(v_reg, v_reg);
        if (c_.zp) vsubps(v_reg, v_reg, zp_addr(v));
    }

    void vand(const Vmm &d, const Vmm &a, const Vmm &b) {
        if constexpr (evex) vpandd(d, a, b);
        else vpand(d, a, b);
    }

    // lut8: a block of 8 k. Lane c of the 64-byte load at byte offset j holds
    // bytes j..j+3 of column c's block; its low 4 bits are k = 2j, after a
    // shift by 4 they are k = 2j + 1 (vpermps reads only the low 4 bits).
    // One row: the block's 8 x values are broadcast once into registers
    // (below the temporaries) when they fit beside the accumulators.
    bool x_in_regs() const { return c_.lut8 && c_.mb == 1 && c_.sets() * c_.vectors() + 8 <= n_regs - 4; }
    Vmm vx(int i) const { return Vmm(n_regs - 4 - i); }

    void fma_lut8(const Vmm &a, const Vmm &w, int m, int step, int k) {
        if (x_in_regs()) vfmadd231ps(a, w, vx(k));
        else fma_x(a, w, m, x_disp(step, k));
    }

    // dst = table[index & 15] (vpermps), minus the per-column zero point if
    // there is one (the table is then the identity; exact small integers).
    void lookup(const Vmm &dst, const Vmm &index, int v) {
        vpermps(dst, index, vmask());
        if (c_.zp) vsubps(dst, dst, zp_addr(v));
    }

    // Software prefetch, one per cache line of the weight streams, issued
    // just before the first load from the line (prefetch_distance ahead):
    // spread through the step rather than bunched at its start, which
    // measured 3-7 % more weight bandwidth cold (u8 and u4, two threads).
    void prefetch_before(int step, int v) {
        if (!c_.prefetch) return;
        const int64_t in_panel = int64_t(step) * row_bytes() + (v % c_.nv) * vl * c_.col_bytes();
        if (in_panel % 64 != 0) return;
        prefetcht0(ptr[r_w + (v / c_.nv) * c_.panel_bytes + in_panel + c_.prefetch_distance]);
    }

    void emit_step_lut8(int step) {
        const int s1 = c_.sets() == 2 ? 1 : 0;
        if (x_in_regs())
            for (int k = 0; k < 8; ++k) vbroadcastss(vx(k), ptr[x_at(0, x_disp(step, k))]);
        // Vector outer (measured faster than byte offset outer, although a
        // vector's 8 FMAs of the block form one chain).
        for (int v = 0; v < c_.vectors(); ++v) {
            prefetch_before(step, v);
            for (int j = 0; j < 4; ++j) {
                vmovdqu32(vt0(), w_addr(step, v, j));
                lookup(vt1(), vt0(), v);
                store_unpacked(vt1(), step, v, 2 * j);
                for (int m = 0; m < c_.mb; ++m) fma_lut8(acc(0, m, v), vt1(), m, step, 2 * j);
                vpsrld(vt0(), vt0(), 4);
                lookup(vt0(), vt0(), v);
                store_unpacked(vt0(), step, v, 2 * j + 1);
                for (int m = 0; m < c_.mb; ++m) fma_lut8(acc(s1, m, v), vt0(), m, step, 2 * j + 1);
            }
        }
    }

    // One step of all mb rows and nv vectors: a k-slice (8-bit), two (4-bit)
    // or a block of 8 k (lut8).
    void emit_step(int step, int parity) {
        const int s0 = c_.sets() == 2 ? parity : 0;
        if (c_.lut8) {
            emit_step_lut8(step);
            return;
        }
        for (int v = 0; v < c_.vectors(); ++v) {
            prefetch_before(step, v);
            if (!c_.four_bit()) {
                widen(vt0(), w_addr(step, v));
                to_f32(vt0(), v);
                store_unpacked(vt0(), step, v, 0);
                for (int m = 0; m < c_.mb; ++m) fma_x(acc(s0, m, v), vt0(), m, x_disp(step, 0));
                continue;
            }
            // 4-bit: low nibble = k, high nibble = k + 1.
            const int s1 = c_.sets() == 2 ? 1 : 0;
            widen(vt0(), w_addr(step, v));
            if (c_.lut) {
                lookup(vt1(), vt0(), v);
                store_unpacked(vt1(), step, v, 0);
                for (int m = 0; m < c_.mb; ++m) fma_x(acc(0, m, v), vt1(), m, x_disp(step, 0));
                vpsrld(vt0(), vt0(), 4);
                lookup(vt0(), vt0(), v);
                store_unpacked(vt0(), step, v, 1);
                for (int m = 0; m < c_.mb; ++m) fma_x(acc(s1, m, v), vt0(), m, x_disp(step, 1));
                continue;
            }
            if (c_.wei_dt == dtype::u4) {
                vand(vt1(), vt0(), vmask());
                vpsrld(vt0(), vt0(), 4);
            } else {
                vpslld(vt1(), vt0(), 28);
                vpsrad(vt1(), vt1(), 28);
                vpsrad(vt0(), vt0(), 4);
            }
            to_f32(vt1(), v);
            store_unpacked(vt1(), step, v, 0);
            for (int m = 0; m < c_.mb; ++m) fma_x(acc(0, m, v), vt1(), m, x_disp(step, 0));
            to_f32(vt0(), v);
            store_unpacked(vt0(), step, v, 1);
            for (int m = 0; m < c_.mb; ++m) fma_x(acc(s1, m, v), vt0(), m, x_disp(step, 1));
        }
    }

    void advance(int steps) {
        add(r_w, steps * row_bytes());
        const int x_row = c_.x_packed ? c_.mb : 1; // elements per k
        for (int j = 0; j < n_bases(); ++j) add(x_base(j), steps * k_per_step() * x_bytes() * x_row);
        if (c_.unpack) add(r_out, steps * k_per_step() * c_.panel() * 4);
        if (typed_x()) add(r_scr, steps * k_per_step() * 4);
    }

    // Σ over the group's k-slices, then out += part · scale.
    void emit_group() {
        zero_accs();
        // The next group's parameters (scales, zero points) of every panel,
        // a group ahead: their loads at the group's end no longer wait on
        // DRAM (u4 g128 + zp, M = 1, cold, 1 thread: +3 % best of 2 A/B
        // rounds; hot and 8-bit unchanged). Past the last group it reads
        // nothing (a prefetch never faults).
        if (c_.prefetch && c_.n_groups > 1)
            for (int j = 0; j < c_.pc; ++j)
                for (int64_t l = 0; l < c_.param_floats() * 4; l += 64)
                    prefetcht0(ptr[r_param + j * c_.panel_params * 4 + c_.param_floats() * 4 + l]);
        const int unroll = c_.lut8 ? 2 : c_.four_bit() ? 4 : 8;
        auto step = [this](int u) { emit_step(u, u & 1); };
        auto adv = [this](int steps) { advance(steps); };
        if (!typed_x()) {
            emit_unrolled_steps(*this, r_cnt, c_.steps_per_group, unroll, step, adv);
        } else {
            // Pieces of scratch_k k: convert (x bases at the piece), then its steps.
            const int64_t per = scratch_k / k_per_step(), n = c_.steps_per_group / per;
            const int64_t rem = c_.steps_per_group % per;
            auto piece = [&](int64_t steps) {
                convert_x(static_cast<int>(steps));
                emit_unrolled_steps(*this, r_cnt, steps, unroll, step, adv);
            };
            if (n == 1) piece(per);
            else if (n > 1) emit_counted_loop(*this, r_piece, n, [&] { piece(per); });
            if (rem > 0) piece(rem);
        }
        if (c_.unpack) return; // the scales are applied by the prefill kernel
        if (c_.sets() == 2)
            for (int m = 0; m < c_.mb; ++m)
                for (int v = 0; v < c_.vectors(); ++v) vaddps(acc(0, m, v), acc(0, m, v), acc(1, m, v));
        for (int v = 0; v < c_.vectors(); ++v) {
            vmovups(vt1(), scale_addr(v));
            for (int m = 0; m < c_.mb; ++m) {
                vmovups(vt0(), out_addr(m, v));
                vfmadd231ps(vt0(), acc(0, m, v), vt1());
                vmovups(out_addr(m, v), vt0());
            }
        }
    }

    matmul_wc_config c_;
    std::string name_;
};

} // namespace

std::unique_ptr<jit_generator> make_matmul_wc_generator(const matmul_wc_config &c) {
    std::unique_ptr<jit_generator> g;
    if (c.zmm) g = std::make_unique<matmul_wc_generator<isa_traits<conv_isa::avx512_core>>>(c);
    else g = std::make_unique<matmul_wc_generator<isa_traits<conv_isa::avx2>>>(c);
    g->create();
    return g;
}

} // namespace qconv::jit
