// Emitters of the fused output pipeline shared by the int8 conv JIT kernels
// (the micro-kernel in conv_x8s8_ukernel.cpp, the depthwise row kernel in
// conv_dw_x8s8.cpp). Per output vector they emit, in the order of
// ref::apply_pipeline (see conv_pipeline.h): float(acc + comp)·scale + bias →
// lowered post-ops → + dst_zp → the saturating store; plus the constant pool
// and the addressing of the pipeline's per-OC arrays.
//
// A kernel derives from conv_epilogue_gen, which fixes the registers the
// epilogue uses: rax (scratch), rbx (dst), r11 (c0 · 4), r12 (full-tensor
// operand), r13 (bias + c0), r14 (comp + c0), r15 (scale + c0); zmm30/31
// scratch, four consecutive parameter registers (comp, scale, bias, zero)
// and one spare zmm named by the kernel; k1 = channel-tail mask, k2/k3
// scratch. The kernel says which vectors are channel tails and where its
// full-tensor operands are.
//
// Every y·a + b of the pipeline is one vfmadd: the reference's madd(), one
// rounding, so the results are the reference's bits on any data.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/jit/conv_pipeline.h"
#include "kernels/jit/jit_base.h"

namespace qconv::jit {

class conv_epilogue_gen : public jit_generator {
protected:
    // param_reg0: zmm of comp, then scale, bias and zero; spare: one more free zmm.
    conv_epilogue_gen(size_t code_size, const pipeline *pipe, int param_reg0, int spare)
        : jit_generator(code_size), zmm_comp(param_reg0), zmm_scale(param_reg0 + 1), zmm_bias(param_reg0 + 2),
          zmm_zero(param_reg0 + 3), zmm_spare(spare), epi_pipe_(pipe) {}

    // Whether OC vector b of the current tile is a masked (k1) channel tail.
    virtual bool tail(int b) const = 0;
    // Loads the pointer of full-tensor operand i into reg_full and returns
    // the address of its vector (pixel w, OC vector b).
    virtual Xbyak::Address full_operand(int i, int w, int b) = 0;

    const Xbyak::Reg64 reg_tmp = rax, reg_dst = rbx, reg_coff = r11, reg_full = r12, reg_bias = r13,
                       reg_comp = r14, reg_pbase = r15;
    const Xbyak::Zmm zmm_comp, zmm_scale, zmm_bias, zmm_zero, zmm_spare;
    const Xbyak::Zmm zmm_u = Xbyak::Zmm(30), zmm_t = Xbyak::Zmm(31);
    static constexpr int cmp_unord = 3, cmp_ord = 7, cmp_ngt_uq = 10, cmp_nge_uq = 9, cmp_ge_oq = 29;

    // Destination element bytes.
    int dsz() const {
        const dtype t = epi_pipe_->dst_dt;
        return t == dtype::f32 || t == dtype::s32 ? 4 : 1;
    }

    // ------------------------------------------------------------ constants
    Xbyak::Label l_const;
    std::vector<float> consts_;
    int cidx(float v) {
        for (size_t i = 0; i < consts_.size(); ++i)
            if (std::memcmp(&consts_[i], &v, 4) == 0) return static_cast<int>(i);
        consts_.push_back(v);
        return static_cast<int>(consts_.size() - 1);
    }
    static float bits_float(uint32_t bits) {
        float v;
        std::memcpy(&v, &bits, 4);
        return v;
    }
    Xbyak::Address cst(float v) { return ptr_b[rip + l_const + cidx(v) * 4]; }       // {1to16} operand
    Xbyak::Address cst_plain(float v) { return ptr[rip + l_const + cidx(v) * 4]; } // scalar load
    // The pool itself (after the code; the caller aligns it).
    void emit_const_pool() {
        L(l_const);
        for (float v : consts_) {
            uint32_t bits;
            std::memcpy(&bits, &v, 4);
            dd(bits);
        }
    }

    // Address of a per-OC array of the pipeline at vector b of this tile:
    // relative to reg_pbase (= scale + c0) when the distance fits a 32-bit
    // displacement, else through reg_tmp (so use one such address at a time).
    Xbyak::Address oc_arr(const std::vector<float> &v, int b) {
        const int64_t diff = reinterpret_cast<intptr_t>(v.data()) -
                             reinterpret_cast<intptr_t>(epi_pipe_->scale.data()) + b * 64;
        if (diff > -(int64_t(1) << 31) + 4096 && diff < (int64_t(1) << 31) - 4096)
            return ptr[reg_pbase + static_cast<int32_t>(diff)];
        mov(reg_tmp, reinterpret_cast<uintptr_t>(v.data()));
        add(reg_tmp, reg_coff);
        return ptr[reg_tmp + b * 64];
    }

    // ------------------------------------------------------------ pipeline
    // comp, scale and bias of OC vector b, hoisted out of the pixel loop.
    void emit_load_params(int b) {
        const pipeline &pp = *epi_pipe_;
        if (!pp.comp_is_zero) vmovdqu32(zmm_comp, ptr[reg_comp + b * 64]);
        vmovups(zmm_scale, oc_arr(pp.scale, b));
        if (pp.with_bias) vmovups(zmm_bias, ptr[reg_bias + b * 64]);
    }

    // A ReLU (alpha 0) that ends the chain of an integer destination with
    // dst_zp 0 is the store's own clamp at 0: y and max(y, 0) differ only in
    // −0 / NaN, which both store as 0.
    bool relu_is_store_clamp() const {
        const pipeline &pp = *epi_pipe_;
        return pp.dst_dt != dtype::f32 && pp.dst_zp == 0.f && !pp.ops.empty() &&
               pp.ops.back().k == lowered_op::kind::eltwise && pp.ops.back().alg == eltwise_alg::relu &&
               pp.ops.back().alpha == 0.f;
    }

    // Accumulator y (pixel w, OC vector b; zmm_zero = 0 and the vector's
    // parameters loaded) → the value to store: acc·scale + bias with one
    // rounding, the post-ops, + dst_zp. pix: dst bytes between pixels.
    void emit_pixel_pipeline(const Xbyak::Zmm &y, int w, int b, int64_t pix) {
        const pipeline &pp = *epi_pipe_;
        if (!pp.comp_is_zero) vpaddd(y, y, zmm_comp);
        vcvtdq2ps(y, y);
        if (pp.with_bias) vfmadd213ps(y, zmm_scale, zmm_bias);
        else vfmadd213ps(y, zmm_scale, zmm_zero); // madd(acc, scale, +0): +0, never −0
        const bool relu_last = relu_is_store_clamp();
        int full_i = 0;
        for (size_t i = 0; i < pp.ops.size(); ++i) {
            if (relu_last && i + 1 == pp.ops.size()) {
                if (pp.dst_dt != dtype::u8) vmaxps(y, y, zmm_zero); // u8: the store clamps
                break;
            }
            emit_op(pp.ops[i], y, w, b, full_i, pix);
        }
        // + dst_zp; adding 0 only turns −0 into +0, invisible in integers.
        if (!(pp.dst_dt != dtype::f32 && pp.dst_zp == 0.f)) vaddps(y, y, cst(pp.dst_zp));
    }

    // y = fmax(y, v) / fmin(y, v): the non-NaN operand when one is NaN.
    void emit_fmaxmin(const Xbyak::Zmm &y, const Xbyak::Zmm &v, bool is_max, const Xbyak::Zmm &t) {
        if (is_max) vmaxps(t, y, v);
        else vminps(t, y, v);
        vcmpps(k2, v, v, cmp_unord);
        vmovaps(t | k2, y);
        vmovaps(y, t);
    }

    // v = float(destination vector at a) (the sum post-op's previous value).
    void emit_load_dst_f32(const Xbyak::Zmm &v, const Xbyak::Address &a, bool tl, dtype dt) {
        const Xbyak::Zmm vz = tl ? (v | k1 | T_z) : v;
        switch (dt) {
        case dtype::f32: vmovups(vz, a); break;
        case dtype::s32: vmovdqu32(vz, a); vcvtdq2ps(v, v); break;
        case dtype::s8: vpmovsxbd(vz, a); vcvtdq2ps(v, v); break;
        default: vpmovzxbd(vz, a); vcvtdq2ps(v, v); break;
        }
    }

    // y = madd(y, a[c], b[c]) over per-OC arrays a, b.
    void emit_madd_oc(const Xbyak::Zmm &y, const std::vector<float> &a, const std::vector<float> &bv, int b) {
        vmovups(zmm_t, oc_arr(a, b));
        vfmadd213ps(y, zmm_t, oc_arr(bv, b));
    }

    void emit_op(const pipeline_op &op, const Xbyak::Zmm &y, int w, int b, int &full_i, int64_t pix) {
        using K = lowered_op::kind;
        const Xbyak::Zmm &t = zmm_t, &u = zmm_u;
        switch (op.k) {
        case K::eltwise:
            switch (op.alg) {
            case eltwise_alg::relu:
                vcmpps(k2, y, zmm_zero, cmp_ngt_uq);
                vmulps(y | k2, y, cst(op.alpha));
                break;
            case eltwise_alg::clip:
                vbroadcastss(t, cst_plain(op.alpha));
                emit_fmaxmin(y, t, true, u);
                vbroadcastss(t, cst_plain(op.beta));
                emit_fmaxmin(y, t, false, u);
                break;
            case eltwise_alg::linear: // madd(y, alpha, beta)
                vbroadcastss(t, cst_plain(op.alpha));
                vfmadd213ps(y, t, cst(op.beta));
                break;
            case eltwise_alg::hardswish:
                vdivps(u, y, cst(6.f));
                vaddps(u, u, cst(0.5f));
                vxorps(t, t, t);
                emit_fmaxmin(u, t, true, zmm_spare);
                vbroadcastss(t, cst_plain(1.f));
                emit_fmaxmin(u, t, false, zmm_spare);
                vmulps(y, y, u);
                break;
            case eltwise_alg::abs: vandps(y, y, cst(bits_float(0x7fffffffu))); break;
            case eltwise_alg::sqrt: vsqrtps(y, y); break;
            case eltwise_alg::square: vmulps(y, y, y); break;
            case eltwise_alg::round: vrndscaleps(y, y, 0x08); break;
            default: fail("post_ops", "transcendental eltwise is not fused");
            }
            break;
        case K::binary: {
            if (op.full) {
                const Xbyak::Address a = full_operand(full_i++, w, b);
                if (tail(b)) vmovups(t | k1 | T_z, a);
                else vmovups(t, a);
            } else {
                vmovups(t, oc_arr(op.a, b));
            }
            switch (op.balg) {
            case binary_alg::add: vaddps(y, y, t); break;
            case binary_alg::sub: vsubps(y, y, t); break;
            case binary_alg::mul: vmulps(y, y, t); break;
            case binary_alg::div: vdivps(y, y, t); break;
            case binary_alg::max: emit_fmaxmin(y, t, true, u); break;
            case binary_alg::min: emit_fmaxmin(y, t, false, u); break;
            }
            break;
        }
        case K::prelu:
        case K::depthwise_prelu:
            vcmpps(k2, y, zmm_zero, cmp_nge_uq);
            vmulps(y | k2, y, oc_arr(op.a, b));
            break;
        case K::sum: // madd(prev − zp, scale, y)
            emit_load_dst_f32(t, ptr[reg_dst + w * pix + b * 16 * dsz()], tail(b), epi_pipe_->dst_dt);
            vsubps(t, t, cst(op.sum_zp));
            vfmadd231ps(y, t, cst(op.sum_scale));
            break;
        case K::depthwise_scale_shift: emit_madd_oc(y, op.a, op.b, b); break;
        case K::quantization:
            vmovups(t, oc_arr(op.q[0], b));
            vmaxps(y, t, y); // std::max(y, cl): cl > y ? cl : y
            vmovups(t, oc_arr(op.q[1], b));
            vminps(y, t, y); // std::min(., ch): ch < y ? ch : y
            emit_madd_oc(y, op.q[2], op.q[3], b);
            if (op.round) vrndscaleps(y, y, 0x08);
            if (op.dequantize) emit_madd_oc(y, op.q[4], op.q[5], b);
            break;
        default: fail("post_ops", "lowered post-op not supported by the fused epilogue");
        }
    }

    // Store y at a: f32 as is; s32 / s8 / u8: NaN → 0, round half to even
    // (MXCSR / vrndscaleps), saturate. tl: channel tail (k1).
    void emit_store(const Xbyak::Zmm &y, const Xbyak::Address &a, bool tl, dtype dt) {
        const Xbyak::Zmm &t = zmm_t;
        if (dt == dtype::f32) {
            if (tl) vmovups(a | k1, y);
            else vmovups(a, y);
            return;
        }
        if (dt != dtype::u8) { // u8: vmaxps with 0 below turns NaN into 0
            vcmpps(k2, y, y, cmp_ord);
            vmovaps(y | k2 | T_z, y);
        }
        if (dt == dtype::s32) {
            vrndscaleps(y, y, 0x08);
            vcmpps(k3, y, cst(2147483648.f), cmp_ge_oq);
            vcvtps2dq(y, y); // too large → INT_MIN, fixed below
            vpbroadcastd(t, cst_plain(bits_float(0x7fffffffu)));
            vmovdqa32(y | k3, t);
            if (tl) vmovdqu32(a | k1, y);
            else vmovdqu32(a, y);
            return;
        }
        if (dt == dtype::u8) {
            // max(y, 0) (NaN → 0), convert (≥ 2^31 gives 0x80000000), then
            // unsigned saturation: 255.5+ and 0x80000000 both store 255.
            vmaxps(y, y, zmm_zero);
            vcvtps2dq(y, y);
            if (tl) vpmovusdb(a | k1, y);
            else vpmovusdb(a, y);
            return;
        }
        vmaxps(y, y, cst(-128.f)); // NaN was zeroed above
        vminps(y, y, cst(127.f));
        vcvtps2dq(y, y);
        if (tl) vpmovdb(a | k1, y);
        else vpmovdb(a, y);
    }

private:
    const pipeline *epi_pipe_;
};

} // namespace qconv::jit
