// The injector of the fused output pipeline shared by the int8 conv JIT
// kernels (the micro-kernel in conv_x8s8_ukernel.cpp, the depthwise row
// kernel in conv_dw_row_gen.cpp, the AMX block kernel in conv_amx_gen.cpp).
// Per output vector it emits, in the order of ref::apply_pipeline (see
// conv_pipeline.h): float(acc + comp)·scale + bias → lowered post-ops →
// + dst_zp → the saturating store; plus the constant pool and the addressing
// of the pipeline's per-OC arrays.
//
// A kernel holds a conv_epilogue_injector as a member and gives it its code
// generator, itself as the epilogue_host (which vectors are channel tails,
// where its full-tensor operands are) and the registers it leaves to the
// epilogue (epilogue_regs): today every host gives rax (scratch), rbx (dst),
// r11 (c0 · 4), r12 (full-tensor operand), r13 (bias + c0), r14 (comp + c0),
// r15 (scale + c0), zmm30/31 scratch, four consecutive parameter registers
// (comp, scale, bias, zero), one spare zmm, and (AMX) the registers that may
// hold per-OC parameters across pixel rows; k1 = channel-tail mask, k2/k3
// scratch.
//
// Every y·a + b of the pipeline is one vfmadd: the reference's madd(), one
// rounding, so the results are the reference's bits on any data.
//
// Every emitter is a template over the kernel's traits (jit_traits.h): the
// EVEX kernels (zmm) use k-masks and embedded broadcasts; the VEX kernels
// (avx2 / avx2_vnni; AVX2 + FMA instructions only, registers 0..15, no mask
// registers) keep the scale in ymm12 and use ymm13/14/15 as scratch;
// comp, bias and the constants are memory operands (the pool holds every
// constant as a whole 32-byte vector); masked operations become compare +
// vblendvps; channel tails use vmaskmovps (4-byte elements) or byte
// inserts / extracts (u8, s8). The kernel keeps at most 12 accumulators.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/jit/base/conv_pipeline.h"
#include "kernels/jit/base/jit_base.h"
#include "kernels/jit/base/jit_traits.h"

namespace qconv::jit {

// The registers an epilogue may use, chosen by its host kernel: general
// registers for a scratch value, the destination, the channel offset (c0 ·
// 4), a full-tensor operand and the bias, compensation and scale arrays at
// c0; EVEX: the first of four consecutive vector registers for comp, scale,
// bias and zero, one spare, two scratch, and those left to per-OC parameters
// (emit_hoist_oc_params). VEX kernels use registers 12..15 whatever is given.
struct epilogue_regs {
    epilogue_regs(const Xbyak::Reg64 &tmp_, const Xbyak::Reg64 &dst_, const Xbyak::Reg64 &coff_,
                  const Xbyak::Reg64 &full_, const Xbyak::Reg64 &bias_, const Xbyak::Reg64 &comp_,
                  const Xbyak::Reg64 &pbase_, int param_reg0_, int spare_)
        : tmp(tmp_), dst(dst_), coff(coff_), full(full_), bias(bias_), comp(comp_), pbase(pbase_),
          param_reg0(param_reg0_), spare(spare_) {}
    Xbyak::Reg64 tmp, dst, coff, full, bias, comp, pbase;
    int param_reg0, spare, u = 30, t = 31;
    std::vector<int> hoist;
};

// What an epilogue asks its host while it emits: whether OC vector b of the
// current tile is a masked (k1) channel tail, the address of full-tensor
// operand i at (pixel w, OC vector b) (the host may load the operand's
// pointer into regs.full), and the lanes of a channel tail (VEX byte tails
// are stored lane by lane).
class epilogue_host {
public:
    virtual ~epilogue_host() = default;
    virtual bool tail(int b) const = 0;
    virtual Xbyak::Address full_operand(int i, int w, int b) = 0;
    virtual int tail_lanes() const { return 16; }
};

// The registers of an epilogue_regs under the names the emitters and their
// hosts use (VEX kernels: registers 12..15 whatever is given). A host derives
// from it with the epilogue_regs it gives its injector.
struct epilogue_reg_names {
    template <class T>
    epilogue_reg_names(T, const epilogue_regs &r)
        : reg_tmp(r.tmp), reg_dst(r.dst), reg_coff(r.coff), reg_full(r.full), reg_bias(r.bias), reg_comp(r.comp),
          reg_pbase(r.pbase), zmm_comp(T::evex ? r.param_reg0 : 12), zmm_scale(T::evex ? r.param_reg0 + 1 : 12),
          zmm_bias(T::evex ? r.param_reg0 + 2 : 12), zmm_zero(T::evex ? r.param_reg0 + 3 : 12),
          zmm_spare(T::evex ? r.spare : 15), zmm_u(T::evex ? r.u : 14), zmm_t(T::evex ? r.t : 13),
          hoist_regs_(r.hoist) {}
    const Xbyak::Reg64 reg_tmp, reg_dst, reg_coff, reg_full, reg_bias, reg_comp, reg_pbase;
    // The zmm registers (EVEX); their indices name the ymm registers of VEX kernels.
    const Xbyak::Zmm zmm_comp, zmm_scale, zmm_bias, zmm_zero, zmm_spare;
    const Xbyak::Zmm zmm_u, zmm_t;
    const std::vector<int> hoist_regs_;
};

// The injector: a member of its host kernel, emitting into the host's code
// with the host's registers.
class conv_epilogue_injector : public epilogue_reg_names {
public:
    // T: the host's traits, which its calls of the emitters repeat.
    template <class T>
    conv_epilogue_injector(T t, Xbyak::CodeGenerator &h, epilogue_host &host, const pipeline *pipe,
                           const epilogue_regs &r)
        : epilogue_reg_names(t, r), h_(h), host_(host), epi_pipe_(pipe) {
        static_assert(T::lanes == 8 || T::lanes == 16, "the epilogue is written for ymm and zmm");
    }
    conv_epilogue_injector(const conv_epilogue_injector &) = delete;
    conv_epilogue_injector &operator=(const conv_epilogue_injector &) = delete;

    // The same registers at the kernel's width.
    template <class T>
    static typename T::Vmm vr(const Xbyak::Zmm &z) {
        return typename T::Vmm(z.getIdx());
    }
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
    // {1to16} operand (EVEX) or a whole 32-byte vector (VEX: the pool
    // holds each constant eight times).
    template <class T>
    Xbyak::Address cst(float v) {
        if constexpr (T::evex) return h_.ptr_b[h_.rip + l_const + cidx(v) * 4];
        else return h_.ptr[h_.rip + l_const + cidx(v) * 32];
    }
    template <class T>
    Xbyak::Address cst_plain(float v) { // scalar load
        return h_.ptr[h_.rip + l_const + cidx(v) * (T::evex ? 4 : 32)];
    }
    // VEX: lanes 0..tail_lanes()−1 all ones (vmaskmovps), loaded into m.
    Xbyak::Label l_tmask;
    bool use_tmask_ = false;
    void load_tail_mask(const Xbyak::Xmm &m) {
        use_tmask_ = true;
        h_.vmovups(m, h_.ptr[h_.rip + l_tmask]);
    }
    // The pool itself (after the code; the caller aligns it).
    template <class T>
    void emit_const_pool() {
        h_.L(l_const);
        for (float v : consts_) {
            uint32_t bits;
            std::memcpy(&bits, &v, 4);
            for (int i = 0; i < (T::evex ? 1 : 8); ++i) h_.dd(bits);
        }
        if (use_tmask_) {
            h_.L(l_tmask);
            for (int i = 0; i < 8; ++i) h_.dd(i < host_.tail_lanes() ? 0xffffffffu : 0u);
        }
    }

    // Address of a per-OC array of the pipeline at vector b of this tile:
    // relative to reg_pbase (= scale + c0) when the distance fits a 32-bit
    // displacement, else through reg_tmp (so use one such address at a time).
    template <class T>
    Xbyak::Address oc_arr(const std::vector<float> &v, int b) {
        const int64_t diff =
            reinterpret_cast<intptr_t>(v.data()) - reinterpret_cast<intptr_t>(epi_pipe_->scale.data()) + b * T::vbytes;
        if (diff > -(int64_t(1) << 31) + 4096 && diff < (int64_t(1) << 31) - 4096)
            return h_.ptr[reg_pbase + static_cast<int32_t>(diff)];
        h_.mov(reg_tmp, reinterpret_cast<uintptr_t>(v.data()));
        h_.add(reg_tmp, reg_coff);
        return h_.ptr[reg_tmp + b * T::vbytes];
    }

    // ------------------------------------------------------------ pipeline
    // comp, scale and bias of OC vector b, hoisted out of the pixel loop.
    template <class T>
    void emit_load_params(int b) {
        const pipeline &pp = *epi_pipe_;
        if constexpr (!T::evex) { // comp and bias are memory operands
            h_.vmovups(vr<T>(zmm_scale), oc_arr<T>(pp.scale, b));
        } else {
            if (!pp.comp_is_zero) h_.vmovdqu32(zmm_comp, h_.ptr[reg_comp + b * 64]);
            h_.vmovups(zmm_scale, oc_arr<T>(pp.scale, b));
            if (pp.with_bias) h_.vmovups(zmm_bias, h_.ptr[reg_bias + b * 64]);
        }
    }

    // Per-OC arrays of the chain held in registers across pixel rows. A
    // host with free vector registers names them in epilogue_regs::hoist (EVEX); per
    // OC vector, emit_hoist_oc_params<T>(b) loads the chain's per-OC arrays
    // (FakeQuantize bounds and scales, scale-shift, PReLU slopes, per-OC
    // binary operands) into them once, and the emitters read them there
    // instead of loading them for every pixel; drop_hoisted() ends that. The
    // same operations on the same values: the same bits. Without registers
    // (the default) the code is what it was.
    std::vector<std::pair<const float *, int>> hoisted_; // array, register
    template <class T>
    void emit_hoist_oc_params(int b) {
        hoisted_.clear();
        if constexpr (T::evex) {
            auto take = [&](const std::vector<float> &v) {
                if (v.empty() || hoisted_reg(v) >= 0 || hoisted_.size() >= hoist_regs_.size()) return;
                const int r = hoist_regs_[hoisted_.size()];
                h_.vmovups(Xbyak::Zmm(r), oc_arr<T>(v, b));
                hoisted_.emplace_back(v.data(), r);
            };
            using K = lowered_op::kind;
            for (const pipeline_op &op : epi_pipe_->ops) {
                if (op.k == K::quantization) {
                    for (int i = op.crop ? 0 : 2; i < (op.dequantize ? 6 : 4); ++i) take(op.q[i]);
                } else if (op.k == K::depthwise_scale_shift) {
                    take(op.a);
                    take(op.b);
                } else if (op.k == K::prelu || op.k == K::depthwise_prelu || (op.k == K::binary && !op.full)) {
                    take(op.a);
                }
            }
        }
    }
    void drop_hoisted() { hoisted_.clear(); }
    int hoisted_reg(const std::vector<float> &v) const {
        for (const auto &h : hoisted_)
            if (h.first == v.data()) return h.second;
        return -1;
    }
    // v's vector b: its register, else loaded into t.
    template <class T>
    Xbyak::Xmm oc_vec(const std::vector<float> &v, int b, const Xbyak::Xmm &t) {
        if (const int r = hoisted_reg(v); r >= 0) return vr<T>(Xbyak::Zmm(r));
        h_.vmovups(t, oc_arr<T>(v, b));
        return t;
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

    // A last `round` (round half to even) before an integer store without
    // dst_zp: every store to u8 / s8 / s32 clamps to integer bounds (which
    // commutes with rounding: both are monotone and the bounds are integers)
    // and converts with vcvtps2dq under the default MXCSR, itself round half
    // to even, so round(y) and y store the same integer (NaN: the same path).
    bool round_is_store_conversion() const {
        const pipeline &pp = *epi_pipe_;
        return pp.dst_dt != dtype::f32 && pp.dst_zp == 0.f && !pp.ops.empty() &&
               pp.ops.back().k == lowered_op::kind::eltwise && pp.ops.back().alg == eltwise_alg::round;
    }

    // The index of a `linear:a:0` that only a last round (or nothing) follows
    // before an integer store without dst_zp, else npos. madd(y, a, +0) and
    // y·a are the same rounding of the same product; they differ only when
    // that product is exactly zero (+0 against a possible −0), and the store
    // turns both zeros into 0: one multiply with a broadcast operand instead
    // of a broadcast and an FMA.
    static constexpr size_t none_index = ~size_t(0);
    size_t last_scale_index() const {
        const pipeline &pp = *epi_pipe_;
        if (pp.dst_dt == dtype::f32 || pp.dst_zp != 0.f || pp.ops.empty()) return none_index;
        size_t i = pp.ops.size() - 1;
        if (round_is_store_conversion()) {
            if (i == 0) return none_index;
            --i;
        }
        const pipeline_op &op = pp.ops[i];
        const bool scale = op.k == lowered_op::kind::eltwise && op.alg == eltwise_alg::linear && op.beta == 0.f;
        return scale ? i : none_index;
    }

    // Accumulator y (pixel w, OC vector b; zmm_zero = 0 and the vector's
    // parameters loaded) → the value to store: acc·scale + bias with one
    // rounding, the post-ops, + dst_zp. pix: dst bytes between pixels.
    template <class T>
    void emit_pixel_pipeline(const Xbyak::Xmm &y, int w, int b, int64_t pix) {
        const pipeline &pp = *epi_pipe_;
        if constexpr (!T::evex) {
            if (!pp.comp_is_zero) h_.vpaddd(y, y, h_.ptr[reg_comp + b * 32]);
            h_.vcvtdq2ps(y, y);
            if (pp.with_bias) h_.vfmadd213ps(y, vr<T>(zmm_scale), h_.ptr[reg_bias + b * 32]);
            else h_.vfmadd213ps(y, vr<T>(zmm_scale), cst<T>(0.f));
        } else {
            if (!pp.comp_is_zero) h_.vpaddd(y, y, zmm_comp);
            h_.vcvtdq2ps(y, y);
            if (pp.with_bias) h_.vfmadd213ps(y, zmm_scale, zmm_bias);
            else h_.vfmadd213ps(y, zmm_scale, zmm_zero); // madd(acc, scale, +0): +0, never −0
        }
        const bool relu_last = relu_is_store_clamp();
        const bool round_last = round_is_store_conversion();
        const size_t scale_at = last_scale_index();
        int full_i = 0;
        for (size_t i = 0; i < pp.ops.size(); ++i) {
            if (round_last && i + 1 == pp.ops.size()) break;
            if (i == scale_at) { // linear:a:0 as y·a (see last_scale_index)
                h_.vmulps(y, y, cst<T>(pp.ops[i].alpha));
                continue;
            }
            if (relu_last && i + 1 == pp.ops.size()) {
                if (pp.dst_dt != dtype::u8) { // u8: the store clamps
                    if constexpr (T::evex) h_.vmaxps(y, y, zmm_zero);
                    else h_.vmaxps(y, y, cst<T>(0.f));
                }
                break;
            }
            emit_op<T>(pp.ops[i], y, w, b, full_i, pix);
        }
        // + dst_zp; adding 0 only turns −0 into +0, invisible in integers.
        if (!(pp.dst_dt != dtype::f32 && pp.dst_zp == 0.f)) h_.vaddps(y, y, cst<T>(pp.dst_zp));
    }

    // y = fmax(y, v) / fmin(y, v): the non-NaN operand when one is NaN.
    // VEX: t2 receives the NaN mask of v.
    template <class T>
    void emit_fmaxmin(const Xbyak::Xmm &y, const Xbyak::Xmm &v, bool is_max, const Xbyak::Xmm &t,
                      const Xbyak::Xmm *t2 = nullptr) {
        if (is_max) h_.vmaxps(t, y, v);
        else h_.vminps(t, y, v);
        if constexpr (!T::evex) {
            h_.vcmpps(*t2, v, v, cmp_unord);
            h_.vblendvps(y, t, y, *t2); // v NaN ? y : max/min
        } else {
            h_.vcmpps(h_.k2, v, v, cmp_unord);
            h_.vmovaps(t | h_.k2, y);
            h_.vmovaps(y, t);
        }
    }
    // y = fmax(y, c) / fmin(y, c) for a constant c: one vmaxps / vminps with
    // c second (returned when y is NaN); a NaN c leaves y.
    template <class T>
    void emit_fmaxmin_const(const Xbyak::Xmm &y, float c, bool is_max) {
        if (c != c) return;
        if (is_max) h_.vmaxps(y, y, cst<T>(c));
        else h_.vminps(y, y, cst<T>(c));
    }

    // v = float(destination vector at a) (the sum post-op's previous value).
    // VEX tails: m is clobbered (the lane mask).
    template <class T>
    void emit_load_dst_f32(const Xbyak::Xmm &v, const Xbyak::Address &a, bool tl, dtype dt, const Xbyak::Xmm &m) {
        if constexpr (!T::evex) {
            const bool four = dt == dtype::f32 || dt == dtype::s32;
            if (!tl) {
                if (dt == dtype::f32) h_.vmovups(v, a);
                else if (dt == dtype::s32) h_.vmovdqu(v, a);
                else if (dt == dtype::s8) h_.vpmovsxbd(v, a);
                else h_.vpmovzxbd(v, a);
            } else if (four) {
                load_tail_mask(m);
                h_.vmaskmovps(v, m, a);
            } else { // bytes lane by lane (nothing read past the tail)
                const Xbyak::Xmm xv(v.getIdx());
                h_.lea(reg_tmp, a);
                h_.vpxor(xv, xv, xv);
                for (int i = 0; i < host_.tail_lanes(); ++i) h_.vpinsrb(xv, xv, h_.ptr[reg_tmp + i], i);
                if (dt == dtype::s8) h_.vpmovsxbd(v, xv);
                else h_.vpmovzxbd(v, xv);
            }
            if (dt != dtype::f32) h_.vcvtdq2ps(v, v);
        } else {
            const Xbyak::Xmm vz = tl ? (v | h_.k1 | Xbyak::util::T_z) : v;
            switch (dt) {
            case dtype::f32: h_.vmovups(vz, a); break;
            case dtype::s32:
                h_.vmovdqu32(vz, a);
                h_.vcvtdq2ps(v, v);
                break;
            case dtype::s8:
                h_.vpmovsxbd(vz, a);
                h_.vcvtdq2ps(v, v);
                break;
            default:
                h_.vpmovzxbd(vz, a);
                h_.vcvtdq2ps(v, v);
                break;
            }
        }
    }

    // y = madd(y, a[c], b[c]) over per-OC arrays a, b.
    template <class T>
    void emit_madd_oc(const Xbyak::Xmm &y, const std::vector<float> &a, const std::vector<float> &bv, int b) {
        const int ra = hoisted_reg(a), rb = hoisted_reg(bv);
        if (ra < 0) h_.vmovups(vr<T>(zmm_t), oc_arr<T>(a, b));
        const Xbyak::Xmm va = ra < 0 ? Xbyak::Xmm(vr<T>(zmm_t)) : Xbyak::Xmm(vr<T>(Xbyak::Zmm(ra)));
        if (rb < 0) h_.vfmadd213ps(y, va, oc_arr<T>(bv, b));
        else h_.vfmadd213ps(y, va, vr<T>(Xbyak::Zmm(rb)));
    }

    template <class T>
    void emit_op(const pipeline_op &op, const Xbyak::Xmm &y, int w, int b, int &full_i, int64_t pix) {
        using K = lowered_op::kind;
        const Xbyak::Xmm t = vr<T>(zmm_t), u = vr<T>(zmm_u), sp = vr<T>(zmm_spare);
        switch (op.k) {
        case K::eltwise:
            switch (op.alg) {
            case eltwise_alg::relu:
                if constexpr (!T::evex) {
                    h_.vmulps(t, y, cst<T>(op.alpha));
                    h_.vcmpps(u, y, cst<T>(0.f), cmp_ngt_uq);
                    h_.vblendvps(y, y, t, u);
                    break;
                }
                h_.vcmpps(h_.k2, y, zmm_zero, cmp_ngt_uq);
                h_.vmulps(y | h_.k2, y, cst<T>(op.alpha));
                break;
            case eltwise_alg::clip: // constant bounds: one vmaxps / vminps each (fmax / fmin semantics)
                emit_fmaxmin_const<T>(y, op.alpha, true);
                emit_fmaxmin_const<T>(y, op.beta, false);
                break;
            case eltwise_alg::linear: // madd(y, alpha, beta)
                h_.vbroadcastss(t, cst_plain<T>(op.alpha));
                h_.vfmadd213ps(y, t, cst<T>(op.beta));
                break;
            case eltwise_alg::hardswish:
                h_.vdivps(u, y, cst<T>(6.f));
                h_.vaddps(u, u, cst<T>(0.5f));
                if constexpr (!T::evex) {
                    emit_fmaxmin_const<T>(u, 0.f, true);
                    emit_fmaxmin_const<T>(u, 1.f, false);
                    h_.vmulps(y, y, u);
                    break;
                }
                h_.vxorps(t, t, t);
                emit_fmaxmin<T>(u, t, true, zmm_spare);
                h_.vbroadcastss(t, cst_plain<T>(1.f));
                emit_fmaxmin<T>(u, t, false, zmm_spare);
                h_.vmulps(y, y, u);
                break;
            case eltwise_alg::abs: h_.vandps(y, y, cst<T>(bits_float(0x7fffffffu))); break;
            case eltwise_alg::sqrt: h_.vsqrtps(y, y); break;
            case eltwise_alg::square: h_.vmulps(y, y, y); break;
            case eltwise_alg::round: emit_round<T>(y); break;
            default: fail("post_ops", "transcendental eltwise is not fused");
            }
            break;
        case K::binary: {
            if (op.full) {
                const Xbyak::Address a = host_.full_operand(full_i++, w, b);
                if (!host_.tail(b)) {
                    h_.vmovups(t, a);
                } else if constexpr (T::evex) {
                    h_.vmovups(t | h_.k1 | Xbyak::util::T_z, a);
                } else {
                    load_tail_mask(u);
                    h_.vmaskmovps(t, u, a);
                }
            } else if (hoisted_reg(op.a) < 0) {
                h_.vmovups(t, oc_arr<T>(op.a, b));
            }
            const int r = op.full ? -1 : hoisted_reg(op.a);
            const Xbyak::Xmm v = r < 0 ? t : Xbyak::Xmm(vr<T>(Xbyak::Zmm(r)));
            switch (op.balg) {
            case binary_alg::add: h_.vaddps(y, y, v); break;
            case binary_alg::sub: h_.vsubps(y, y, v); break;
            case binary_alg::mul: h_.vmulps(y, y, v); break;
            case binary_alg::div: h_.vdivps(y, y, v); break;
            case binary_alg::max: emit_fmaxmin<T>(y, v, true, u, &sp); break;
            case binary_alg::min: emit_fmaxmin<T>(y, v, false, u, &sp); break;
            }
            break;
        }
        case K::prelu:
        case K::depthwise_prelu:
            if constexpr (!T::evex) {
                h_.vmulps(t, y, oc_arr<T>(op.a, b));
                h_.vcmpps(u, y, cst<T>(0.f), cmp_nge_uq);
                h_.vblendvps(y, y, t, u);
                break;
            }
            h_.vcmpps(h_.k2, y, zmm_zero, cmp_nge_uq);
            if (const int r = hoisted_reg(op.a); r >= 0) h_.vmulps(y | h_.k2, y, Xbyak::Zmm(r));
            else h_.vmulps(y | h_.k2, y, oc_arr<T>(op.a, b));
            break;
        case K::sum: // madd(prev − zp, scale, y)
            emit_load_dst_f32<T>(t, h_.ptr[reg_dst + w * pix + b * T::lanes * dsz()], host_.tail(b), epi_pipe_->dst_dt,
                                 u);
            h_.vsubps(t, t, cst<T>(op.sum_zp));
            h_.vfmadd231ps(y, t, cst<T>(op.sum_scale));
            break;
        case K::depthwise_scale_shift: emit_madd_oc<T>(y, op.a, op.b, b); break;
        case K::quantization:
            if (op.crop) {
                h_.vmaxps(y, oc_vec<T>(op.q[0], b, t), y); // std::max(y, cl): cl > y ? cl : y
                h_.vminps(y, oc_vec<T>(op.q[1], b, t), y); // std::min(., ch): ch < y ? ch : y
            }
            emit_madd_oc<T>(y, op.q[2], op.q[3], b);
            if (op.round) emit_round<T>(y);
            if (op.dequantize) emit_madd_oc<T>(y, op.q[4], op.q[5], b);
            break;
        default: fail("post_ops", "lowered post-op not supported by the fused epilogue");
        }
    }

    // Round half to even.
    template <class T>
    void emit_round(const Xbyak::Xmm &y) {
        if constexpr (!T::evex) h_.vroundps(y, y, 0x08);
        else h_.vrndscaleps(y, y, 0x08);
    }

    // Store y at a: f32 as is; s32 / s8 / u8: NaN → 0, round half to even
    // (MXCSR / vrndscaleps), saturate. tl: channel tail (k1 on EVEX).
    template <class T>
    void emit_store(const Xbyak::Xmm &y, const Xbyak::Address &a, bool tl, dtype dt) {
        if constexpr (T::evex) emit_store_evex<T>(y, a, tl, dt);
        else emit_store_vex<T>(y, a, tl, dt);
    }

    // VEX, 4-byte lanes: the channel tail through the lane mask (into t),
    // else the whole vector (f32 or int32 move).
    template <class T>
    void emit_store_dwords_vex(const Xbyak::Xmm &y, const Xbyak::Address &a, bool tl, const Xbyak::Xmm &t,
                               bool is_float) {
        if (tl) {
            load_tail_mask(t);
            h_.vmaskmovps(a, t, y);
        } else if (is_float) {
            h_.vmovups(a, y);
        } else {
            h_.vmovdqu(a, y);
        }
    }

    // VEX: the same conversions as emit_store_evex without mask registers;
    // u8 / s8 values clamped to their range in float, converted (MXCSR: round
    // half to even) and packed (exact: the values fit).
    template <class T>
    void emit_store_vex(const Xbyak::Xmm &y, const Xbyak::Address &a, bool tl, dtype dt) {
        static_assert(!T::evex);
        const Xbyak::Xmm t = vr<T>(zmm_t);
        if (dt == dtype::f32) {
            emit_store_dwords_vex<T>(y, a, tl, t, true);
            return;
        }
        if (dt != dtype::u8) { // NaN → 0 (u8: vmaxps with 0 below)
            h_.vcmpps(t, y, y, cmp_ord);
            h_.vandps(y, y, t);
        }
        if (dt == dtype::s32) {
            h_.vroundps(y, y, 0x08);
            h_.vcmpps(t, y, cst<T>(2147483648.f), cmp_ge_oq);
            h_.vcvtps2dq(y, y); // too large → INT_MIN, replaced below
            h_.vblendvps(y, y, cst<T>(bits_float(0x7fffffffu)), t);
            emit_store_dwords_vex<T>(y, a, tl, t, false);
            return;
        }
        h_.vmaxps(y, y, cst<T>(dt == dtype::u8 ? 0.f : -128.f));
        h_.vminps(y, y, cst<T>(dt == dtype::u8 ? 255.f : 127.f));
        h_.vcvtps2dq(y, y);
        const Xbyak::Xmm xy(y.getIdx()), xt(t.getIdx());
        h_.vextracti128(xt, Xbyak::Ymm(y.getIdx()), 1);
        h_.vpackssdw(xy, xy, xt);
        if (dt == dtype::u8) h_.vpackuswb(xy, xy, xy);
        else h_.vpacksswb(xy, xy, xy);
        if (!tl) {
            h_.vmovq(a, xy);
            return;
        }
        h_.lea(reg_tmp, a);
        for (int i = 0; i < host_.tail_lanes(); ++i) h_.vpextrb(h_.ptr[reg_tmp + i], xy, i);
    }

    template <class T>
    void emit_store_evex(const Xbyak::Xmm &y, const Xbyak::Address &a, bool tl, dtype dt) {
        static_assert(T::evex);
        const Xbyak::Zmm &t = zmm_t;
        if (dt == dtype::f32) {
            if (tl) h_.vmovups(a | h_.k1, y);
            else h_.vmovups(a, y);
            return;
        }
        if (dt != dtype::u8) { // u8: vmaxps with 0 below turns NaN into 0
            h_.vcmpps(h_.k2, y, y, cmp_ord);
            h_.vmovaps(y | h_.k2 | Xbyak::util::T_z, y);
        }
        if (dt == dtype::s32) {
            h_.vrndscaleps(y, y, 0x08);
            h_.vcmpps(h_.k3, y, cst<T>(2147483648.f), cmp_ge_oq);
            h_.vcvtps2dq(y, y); // too large → INT_MIN, fixed below
            h_.vpbroadcastd(t, cst_plain<T>(bits_float(0x7fffffffu)));
            h_.vmovdqa32(y | h_.k3, t);
            if (tl) h_.vmovdqu32(a | h_.k1, y);
            else h_.vmovdqu32(a, y);
            return;
        }
        if (dt == dtype::u8) {
            // max(y, 0) (NaN → 0), convert (≥ 2^31 gives 0x80000000), then
            // unsigned saturation: 255.5+ and 0x80000000 both store 255.
            h_.vmaxps(y, y, zmm_zero);
            h_.vcvtps2dq(y, y);
            if (tl) h_.vpmovusdb(a | h_.k1, y);
            else h_.vpmovusdb(a, y);
            return;
        }
        h_.vmaxps(y, y, cst<T>(-128.f)); // NaN was zeroed above
        h_.vminps(y, y, cst<T>(127.f));
        h_.vcvtps2dq(y, y);
        if (tl) h_.vpmovdb(a | h_.k1, y);
        else h_.vpmovdb(a, y);
    }

private:
    Xbyak::CodeGenerator &h_;
    epilogue_host &host_;
    const pipeline *epi_pipe_;
};

} // namespace qconv::jit
