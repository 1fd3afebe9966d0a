// The depthwise row kernel's code generator: dw_row_gen (the row-kernel
// design is at the top of conv_dw_row_gen.h).
#include "kernels/jit/conv_dw/conv_dw_row_gen.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/jit/base/conv_epilogue_injector.h"
#include "kernels/jit/base/jit_traits.h"

namespace qconv::jit::dw {

namespace {

// Fused epilogue registers: zmm26..29 comp, scale, bias, zero; zmm25 spare.
class dw_row_gen : public jit_generator, public epilogue_host, public epilogue_reg_names {
public:
    using traits = isa_traits<conv_isa::avx512_core_vnni>; // zmm, VNNI (and VBMI)
    // The epilogue's registers: rax, rbx, r11..r15; zmm26..29 its
    // parameters, zmm25 spare.
    static epilogue_regs epi_regs() {
        namespace u = Xbyak::util;
        epilogue_regs r(u::rax, u::rbx, u::r11, u::r12, u::r13, u::r14, u::r15, 26, 25);
        return r;
    }
    explicit dw_row_gen(const dw_row_cfg &c)
        : jit_generator(code_size(c)), epilogue_reg_names(traits{}, epi_regs()), cfg(c),
          epi_(traits{}, *this, *this, c.pipe, epi_regs()) {}
    const char *name() const override { return "jit:conv_dw_x8s8_rows:avx512_core_vnni"; }

private:
    static size_t code_size(const dw_row_cfg &c) {
        size_t n = 16384;
        const size_t ops = c.pipe ? c.pipe->ops.size() : 0;
        for (const dw_run &r : c.runs) {
            const size_t span = static_cast<size_t>((r.u - 1) * c.sw + (c.kw - 1) * c.dw + 1);
            n += 12 * static_cast<size_t>(dw_chunks(c.kh) * c.kw * c.nb) + 64;
            n += 14 * span * static_cast<size_t>(dw_chunks(c.kh) * c.nb) * (4 + c.kw);
            n += 12 * static_cast<size_t>(r.u * c.nb) * (24 + 10 * ops) + 1024;
            if (c.native) n += 12 * static_cast<size_t>(c.kh * c.kw * 4) + 10 * span * static_cast<size_t>(c.kh);
        }
        // Full and tail channel blocks; row pairs emit two epilogues per block.
        return (c.pair ? 4 : 2) * n;
    }

    dw_row_cfg cfg;
    conv_epilogue_injector epi_;
    // The epilogue injector and its registers (rax, rbx, r11..r15).
    const Xbyak::Reg64 reg_args = rdi, reg_src = rsi, reg_wei = rdx, reg_cnt = r8, reg_foff = r9, reg_acc = r10,
                       reg_ch = rcx, reg_blk = rbp;
    Xbyak::Label l_idx, l_pack_idx, l_nat_shuf;
    // Current channel block: vectors, lanes of the last vector.
    int nbv_ = 1, lastn_ = 16;
    // Epilogue of the second row of a pair: first accumulator, dst pixel offset.
    int acc_base_ = 0;
    int64_t pix_base_ = 0;

    Xbyak::Zmm acc(int w, int k) const { return Xbyak::Zmm(w * cfg.nb + k); }
    int wbase() const { return 28 - dw_chunks(cfg.kh) * cfg.kw * cfg.nb; }
    Xbyak::Zmm wreg(int ch, int kw, int k) const { return Xbyak::Zmm(wbase() + (ch * cfg.kw + kw) * cfg.nb + k); }
    const Xbyak::Zmm zmm_idx = Xbyak::Zmm(28), zmm_tmp = Xbyak::Zmm(31);

    // Valid rows (bit p: kernel row 3·ch + p inside the image) of chunk ch.
    unsigned chunk_rows(int ch) const {
        unsigned v = 0;
        for (int p = 0; p < 3 && 3 * ch + p < cfg.kh; ++p)
            if ((cfg.row_mask >> (3 * ch + p)) & 1u) v |= 1u << p;
        return v;
    }
    static uint64_t byte_mask(unsigned pos) {
        uint64_t m = 0;
        for (int i = 0; i < 16; ++i)
            for (int p = 0; p < 4; ++p)
                if ((pos >> p) & 1u) m |= uint64_t(1) << (4 * i + p);
        return m;
    }
    void set_mask(const Xbyak::Opmask &k, uint64_t m) {
        mov(reg_tmp, m);
        kmovq(k, reg_tmp);
    }
    // Masks k1..k3 (single rows 0, 1 and rows 0+2) if some chunk needs them.
    void set_edge_masks() {
        bool m0 = false, m1 = false, m02 = false;
        for (int ch = 0; ch < dw_chunks(cfg.kh); ++ch) {
            const unsigned v = chunk_rows(ch);
            if (v == 5u) m02 = true;
            else if (v != 7u && v != 3u && v != 0u) {
                m0 = m0 || (v & 1u);
                m1 = m1 || (v & 2u);
            }
        }
        if (m0) set_mask(k2, byte_mask(1));
        if (m1) set_mask(k1, byte_mask(2));
        if (m02) set_mask(k3, byte_mask(5));
    }
    Xbyak::Opmask pos_mask(int p) const { return p == 0 ? k2 : p == 1 ? k1 : p == 2 ? k7 : k3; }

    // Byte p of every dword of x from row operand p, for each row p set in v
    // (bits 0..rows−1): one vpermb per row, the first zero-masked so the bytes
    // of rows outside v stay 0. with_operand(p, f) calls f with row p's operand.
    template <class WithOperand>
    void gather_rows(const Xbyak::Zmm &x, unsigned v, int rows, WithOperand with_operand) {
        bool first = true;
        for (int p = 0; p < rows; ++p) {
            if (!((v >> p) & 1u)) continue;
            with_operand(p, [&](const Xbyak::Operand &o) {
                if (first) vpermb(x | pos_mask(p) | T_z, zmm_idx, o);
                else vpermb(x | pos_mask(p), zmm_idx, o);
            });
            first = false;
        }
    }

    void generate() override {
        preamble();
        set_mask(k5, 0xffff);
        if (cfg.native && cfg.tail_bytes > 0) set_mask(k6, (uint64_t(1) << cfg.tail_bytes) - 1);
        else if (cfg.last_nb > 0) set_mask(k6, (uint64_t(1) << cfg.last_n) - 1);
        set_mask(k7, byte_mask(4));
        set_mask(k4, byte_mask(3));
        mov(reg_wei, ptr[reg_args + offsetof(dw_call, wei)]);
        xor_(reg_ch, reg_ch);
        Xbyak::Label l_full, l_tail, l_end;
        mov(reg_blk, ptr[reg_args + offsetof(dw_call, n_full)]);
        test(reg_blk, reg_blk);
        jz(l_tail, T_NEAR);
        L(l_full);
        emit_channel_block(cfg.nb, 16);
        dec(reg_blk);
        jnz(l_full, T_NEAR);
        L(l_tail);
        if (cfg.last_nb > 0) {
            cmp(qword[reg_args + offsetof(dw_call, last)], 0);
            je(l_end, T_NEAR);
            emit_channel_block(cfg.last_nb, cfg.last_n);
        }
        L(l_end);
        postamble();
        emit_constants();
    }

    // One output row of one channel block (reg_ch: its channel offset).
    void emit_channel_block(int nbv, int lastn) {
        nbv_ = nbv;
        lastn_ = lastn;
        mov(reg_src, ptr[reg_args + offsetof(dw_call, src)]);
        add(reg_src, reg_ch);
        if (cfg.pipe) {
            mov(reg_dst, ptr[reg_args + offsetof(dw_call, dst)]);
            if (epi_.dsz() == 4) lea(reg_dst, ptr[reg_dst + reg_ch * 4]);
            else add(reg_dst, reg_ch);
            mov(reg_comp, ptr[reg_args + offsetof(dw_call, comp)]);
            lea(reg_comp, ptr[reg_comp + reg_ch * 4]);
            mov(reg_bias, ptr[reg_args + offsetof(dw_call, bias)]);
            lea(reg_bias, ptr[reg_bias + reg_ch * 4]);
            mov(reg_coff, ptr[reg_args + offsetof(dw_call, c_off)]);
            lea(reg_coff, ptr[reg_coff + reg_ch * 4]);
            mov(reg_pbase, reinterpret_cast<uintptr_t>(cfg.pipe->scale.data()));
            add(reg_pbase, reg_coff);
            lea(reg_foff, ptr[reg_ch * 4]);
        } else {
            mov(reg_acc, ptr[reg_args + offsetof(dw_call, acc)]);
        }
        for (const dw_run &r : cfg.runs) {
            if (r.count == 1) {
                emit_any_block(r);
                continue;
            }
            Xbyak::Label l_loop;
            mov(reg_cnt, r.count);
            L(l_loop);
            emit_any_block(r);
            dec(reg_cnt);
            jnz(l_loop, T_NEAR);
        }
        add(reg_wei, cfg.blk_wbytes);
        add(reg_ch, cfg.nb * 16);
    }

    bool tap(const dw_run &r, int j, int kw, int *w) const {
        const int q = j - kw * cfg.dw;
        if (q < 0 || q % cfg.sw != 0 || q / cfg.sw >= r.u) return false;
        *w = q / cfg.sw;
        return true;
    }

    // Builds the source register of (chunk ch, column j, vector k).
    void emit_build(const Xbyak::Zmm &x, int ch, int j, int k, unsigned v) {
        const bool tl = k == nbv_ - 1 && lastn_ < 16;
        auto addr = [&](int p) {
            return ptr[reg_src + (3 * ch + p) * cfg.dh * cfg.row_stride + j * cfg.pix_stride + 16 * k];
        };
        auto masked = [&](int p) { return 3 * ch + p == cfg.masked_kh; };
        auto load = [&](const Xbyak::Zmm &r, int p) {
            if (masked(p)) vmovdqu8(r | (tl ? k6 : k5) | T_z, addr(p));
            else vmovdqu8(r, addr(p));
        };
        // Second operand of a permute: memory, or a masked load of the last image row.
        auto with_operand = [&](int p, auto f) {
            if (!masked(p)) {
                f(addr(p));
            } else {
                load(zmm_tmp, p);
                f(zmm_tmp);
            }
        };
        if (v == 7u) {
            load(x, 0);
            with_operand(1, [&](const Xbyak::Operand &o) { vpermt2b(x, zmm_idx, o); });
            with_operand(2, [&](const Xbyak::Operand &o) { vpermb(x | k7, zmm_idx, o); });
        } else if (v == 3u || v == 5u) {
            load(x, 0);
            const Xbyak::Opmask m = v == 3u ? k4 : k3;
            with_operand(v == 3u ? 1 : 2, [&](const Xbyak::Operand &o) { vpermt2b(x | m | T_z, zmm_idx, o); });
        } else {
            gather_rows(x, v, 3, with_operand);
        }
    }

    // One block of r.u pixels: accumulate, finish, advance the pointers.
    void emit_block(const dw_run &r) {
        const int nbv = nbv_;
        for (int i = 0; i < r.u * cfg.nb; ++i)
            if (i % cfg.nb < nbv) vpxord(Xbyak::Zmm(i), Xbyak::Zmm(i), Xbyak::Zmm(i));
        const int nch = dw_chunks(cfg.kh);
        for (int ch = 0; ch < nch; ++ch)
            for (int kw = 0; kw < cfg.kw; ++kw)
                for (int k = 0; k < nbv; ++k)
                    vmovdqu8(wreg(ch, kw, k), ptr[reg_wei + ((ch * cfg.kw + kw) * cfg.nb + k) * 64]);
        vmovdqu8(zmm_idx, ptr[rip + l_idx]);
        set_edge_masks();
        const int span = (r.u - 1) * cfg.sw + (cfg.kw - 1) * cfg.dw + 1;
        int flip = 0;
        for (int j = std::max(0, r.lo); j < std::min(span, r.hi); ++j) {
            bool used = false;
            int w = 0;
            for (int kw = 0; kw < cfg.kw && !used; ++kw) used = tap(r, j, kw, &w);
            if (!used) continue;
            for (int ch = 0; ch < nch; ++ch) {
                const unsigned v = chunk_rows(ch);
                if (!v) continue;
                for (int k = 0; k < nbv; ++k) {
                    const Xbyak::Zmm x(29 + (flip++ & 1));
                    emit_build(x, ch, j, k, v);
                    for (int kw = 0; kw < cfg.kw; ++kw)
                        if (tap(r, j, kw, &w)) vpdpbusd(acc(w, k), x, wreg(ch, kw, k));
                }
            }
        }
        if (cfg.pipe) {
            emit_epilogue(r.u);
            add(reg_dst, r.u * cfg.pipe->oc * epi_.dsz());
            if (has_full()) add(reg_foff, r.u * cfg.pipe->oc * 4);
        } else {
            for (int w = 0; w < r.u; ++w)
                for (int k = 0; k < nbv; ++k) vmovdqu32(ptr[reg_acc + w * cfg.acc_pix + k * 64], acc(w, k));
            add(reg_acc, r.u * cfg.acc_pix);
        }
        add(reg_src, r.u * cfg.sw * cfg.pix_stride);
    }

    void emit_any_block(const dw_run &r) {
        if (cfg.native) emit_block_native(r);
        else if (cfg.pair) emit_block_pair(r);
        else emit_block(r);
    }

    // Pair: accumulators row 0 = zmm0..u−1, row 1 = zmm u..2u−1; weights
    // A (w0, w1, w2, 0) and B (0, w0, w1, w2) per kernel column below zmm28.
    Xbyak::Zmm pwreg(int set, int kw) const { return Xbyak::Zmm(28 - 2 * cfg.kw + set * cfg.kw + kw); }
    void emit_block_pair(const dw_run &r) {
        for (int i = 0; i < 2 * r.u; ++i) vpxord(Xbyak::Zmm(i), Xbyak::Zmm(i), Xbyak::Zmm(i));
        for (int set = 0; set < 2; ++set)
            for (int kw = 0; kw < cfg.kw; ++kw) vmovdqu8(pwreg(set, kw), ptr[reg_wei + (set * cfg.kw + kw) * 64]);
        vmovdqu8(zmm_idx, ptr[rip + l_idx]);
        const unsigned v = static_cast<unsigned>(cfg.row_mask & 15u);
        if (v & 1u) set_mask(k2, byte_mask(1));
        if (v & 2u) set_mask(k1, byte_mask(2));
        if (v & 8u) set_mask(k3, byte_mask(8));
        const bool tl = lastn_ < 16;
        const int span = (r.u - 1) * cfg.sw + (cfg.kw - 1) * cfg.dw + 1;
        int flip = 0, w = 0;
        for (int j = std::max(0, r.lo); j < std::min(span, r.hi) && v; ++j) {
            bool used = false;
            for (int kw = 0; kw < cfg.kw && !used; ++kw) used = tap(r, j, kw, &w);
            if (!used) continue;
            const Xbyak::Zmm x(29 + (flip++ & 1));
            auto addr = [&](int p) { return ptr[reg_src + p * cfg.row_stride + j * cfg.pix_stride]; };
            auto with_operand = [&](int p, auto f) {
                if (p != cfg.masked_kh) {
                    f(addr(p));
                } else {
                    vmovdqu8(zmm_tmp | (tl ? k6 : k5) | T_z, addr(p));
                    f(zmm_tmp);
                }
            };
            if (v == 15u) {
                if (cfg.masked_kh == 0) vmovdqu8(x | (tl ? k6 : k5) | T_z, addr(0));
                else vmovdqu8(x, addr(0));
                with_operand(1, [&](const Xbyak::Operand &o) { vpermt2b(x, zmm_idx, o); });
                with_operand(2, [&](const Xbyak::Operand &o) { vpermb(x | k7, zmm_idx, o); });
                with_operand(3, [&](const Xbyak::Operand &o) { vpermb(x | k3, zmm_idx, o); });
            } else {
                gather_rows(x, v, 4, with_operand);
            }
            for (int kw = 0; kw < cfg.kw; ++kw)
                if (tap(r, j, kw, &w)) {
                    vpdpbusd(Xbyak::Zmm(w), x, pwreg(0, kw));
                    vpdpbusd(Xbyak::Zmm(r.u + w), x, pwreg(1, kw));
                }
        }
        emit_epilogue(r.u);
        acc_base_ = r.u;
        pix_base_ = cfg.row_pix;
        emit_epilogue(r.u);
        acc_base_ = 0;
        pix_base_ = 0;
        add(reg_dst, r.u * cfg.pipe->oc * epi_.dsz());
        if (has_full()) add(reg_foff, r.u * cfg.pipe->oc * 4);
        add(reg_src, r.u * cfg.sw * cfg.pix_stride);
    }

    // Native: weights of one kernel row (KW · 4 registers) below zmm30,
    // sources zmm30/31; the tail group loads its bytes masked (k6).
    Xbyak::Zmm nwreg(int kw, int q) const { return Xbyak::Zmm(30 - 4 * cfg.kw + kw * 4 + q); }
    void emit_block_native(const dw_run &r) {
        const bool tl = lastn_ < 16; // the tail group (emit_channel_block(4, 0))
        for (int i = 0; i < r.u * 4; ++i) vpxord(Xbyak::Zmm(i), Xbyak::Zmm(i), Xbyak::Zmm(i));
        const int span = (r.u - 1) * cfg.sw + (cfg.kw - 1) * cfg.dw + 1;
        int flip = 0, w = 0;
        for (int kh = 0; kh < cfg.kh; ++kh) {
            if (!((cfg.row_mask >> kh) & 1u)) continue;
            bool any = false;
            for (int j = std::max(0, r.lo); j < std::min(span, r.hi) && !any; ++j)
                for (int kw = 0; kw < cfg.kw && !any; ++kw) any = tap(r, j, kw, &w);
            if (!any) continue;
            for (int kw = 0; kw < cfg.kw; ++kw)
                for (int q = 0; q < 4; ++q) vmovdqu8(nwreg(kw, q), ptr[reg_wei + ((kh * cfg.kw + kw) * 4 + q) * 64]);
            for (int j = std::max(0, r.lo); j < std::min(span, r.hi); ++j) {
                bool used = false;
                for (int kw = 0; kw < cfg.kw && !used; ++kw) used = tap(r, j, kw, &w);
                if (!used) continue;
                const Xbyak::Zmm x(30 + (flip++ & 1));
                const Xbyak::Address a = ptr[reg_src + kh * cfg.dh * cfg.row_stride + j * cfg.pix_stride];
                if (tl) vmovdqu8(x | k6 | T_z, a);
                else vmovdqu8(x, a);
                for (int kw = 0; kw < cfg.kw; ++kw)
                    if (tap(r, j, kw, &w))
                        for (int q = 0; q < 4; ++q) vpdpbusd(acc(w, q), x, nwreg(kw, q));
            }
        }
        emit_epilogue_native(r.u, tl);
        add(reg_dst, r.u * cfg.pipe->oc);
        add(reg_src, r.u * cfg.sw * cfg.pix_stride);
    }

    // Pipeline per accumulator (permuted per-OC arrays), then bytes
    // y0 | y1 << 8 | y2 << 16 | y3 << 24 = channels 4i..4i+3 in order.
    void emit_epilogue_native(int u, bool tl) {
        const pipeline &pp = *cfg.pipe;
        vxorps(zmm_zero, zmm_zero, zmm_zero);
        for (int q = 0; q < 4; ++q) {
            epi_.emit_load_params<traits>(q);
            for (int w = 0; w < u; ++w) {
                const Xbyak::Zmm y = acc(w, q);
                epi_.emit_pixel_pipeline<traits>(y, w, q, 0); // u8 / s8 only: no sum, no full-tensor operand
                emit_to_int8_range(y, pp.dst_dt, pp.dst_dt == dtype::u8);
            }
        }
        if (pp.dst_dt == dtype::u8) {
            // The packs (they saturate: see emit_to_int8_range), then
            // within each 16-byte lane byte 4m + q ← byte 4q + m.
            vmovdqu8(Xbyak::Zmm(25), ptr[rip + l_nat_shuf]);
            for (int w = 0; w < u; ++w) {
                vpackssdw(zmm_t, acc(w, 0), acc(w, 1));
                vpackssdw(zmm_u, acc(w, 2), acc(w, 3));
                vpackuswb(zmm_t, zmm_t, zmm_u);
                vpshufb(zmm_t, zmm_t, Xbyak::Zmm(25));
                const Xbyak::Address a = ptr[reg_dst + w * pp.oc];
                if (tl) vmovdqu8(a | k6, zmm_t);
                else vmovdqu8(a, zmm_t);
            }
            return;
        }
        for (int w = 0; w < u; ++w) {
            if (pp.dst_dt == dtype::s8)
                for (int q = 0; q < 3; ++q)
                    vpandd(acc(w, q), acc(w, q), epi_.cst<traits>(conv_epilogue_injector::bits_float(0xffu)));
            vpslld(acc(w, 1), acc(w, 1), 8);
            vpslld(acc(w, 2), acc(w, 2), 16);
            vpslld(acc(w, 3), acc(w, 3), 24);
            vpternlogd(acc(w, 0), acc(w, 1), acc(w, 2), 0xfe); // a | b | c
            vpord(acc(w, 0), acc(w, 0), acc(w, 3));
            const Xbyak::Address a = ptr[reg_dst + w * pp.oc];
            if (tl) vmovdqu8(a | k6, acc(w, 0));
            else vmovdqu8(a, acc(w, 0));
        }
    }

    bool has_full() const {
        for (const auto &op : cfg.pipe->ops)
            if (op.k == lowered_op::kind::binary && op.full) return true;
        return false;
    }

    // Permutation index: byte p of dword i selects byte i of the first table
    // (p = 0, 3) or of the second (p = 1, 2; vpermb reads only the low 6 bits).
    void emit_constants() {
        align(64);
        L(l_idx);
        for (int i = 0; i < 16; ++i) {
            db(i);
            db(64 + i);
            db(64 + i);
            db(i);
        }
        L(l_nat_shuf); // per 16-byte lane: byte 4m + q ← byte 4q + m
        for (int lane = 0; lane < 4; ++lane)
            for (int m = 0; m < 4; ++m)
                for (int q = 0; q < 4; ++q) db(4 * q + m);
        L(l_pack_idx); // dword 4q + L ← dword 4L + q
        for (int q = 0; q < 4; ++q)
            for (int l = 0; l < 4; ++l) dd(4 * l + q);
        epi_.emit_const_pool<traits>();
    }
    // ------------------------------------------------------------ fused epilogue
    // The pipeline itself is the epilogue injector's (single-rounding vfmadd for
    // every y·a + b, like the reference's madd()); here the pixel grouping and
    // the packed 8-bit stores. k1 = channel tail, k2/k3 scratch.
    bool tail(int b) const override { return !cfg.native && b == nbv_ - 1 && lastn_ < 16; }
    Xbyak::Address full_operand(int i, int w, int b) override {
        mov(reg_full, ptr[reg_args + offsetof(dw_call, full) + 8 * i]);
        return ptr[reg_full + reg_foff + w * cfg.pipe->oc * 4 + b * 64];
    }

    void emit_epilogue(int u) {
        const pipeline &pp = *cfg.pipe;
        vxorps(zmm_zero, zmm_zero, zmm_zero);
        if (lastn_ < 16) {
            mov(eax, (1u << lastn_) - 1u);
            kmovw(k1, eax);
        }
        const int64_t pix = pp.oc * epi_.dsz();
        // u8 / s8: four pixels of a full vector are clamped and converted,
        // then packed together (vpackus/ss + vpermd) and stored as 4 × 16 bytes.
        const bool packable = pp.dst_dt == dtype::u8 || pp.dst_dt == dtype::s8;
        for (int b = 0; b < nbv_; ++b) {
            epi_.emit_load_params<traits>(b);
            for (int w = 0; w < u;) {
                const int group = packable && !tail(b) && w + 4 <= u ? 4 : 1;
                for (int q = 0; q < group; ++q) {
                    const Xbyak::Zmm y = acc(acc_base_ + w + q, b);
                    epi_.emit_pixel_pipeline<traits>(y, pix_base_ + w + q, b, pix);
                    if (group == 1)
                        epi_.emit_store<traits>(y, ptr[reg_dst + (pix_base_ + w + q) * pix + b * 16 * epi_.dsz()],
                                                tail(b), pp.dst_dt);
                    else emit_to_int8_range(y, pp.dst_dt, true);
                }
                if (group == 4) emit_pack_store(acc_base_ + w, pix_base_ + w, b, pix, pp.dst_dt);
                w += group;
            }
        }
    }

    // NaN → 0, clamp to the 8-bit range in f32, convert (round half to even).
    // u8 before the packs (packed = true, vpackssdw + vpackuswb): the
    // conversion suffices for every y below 2^31 — NaN, −∞ and negatives
    // become INT_MIN or negative and saturate to 0, values above 255 to 255
    // — so min(32767, y) (NaN stays NaN) comes first only where y < 2^31 is
    // not known (cfg.bounded_u8).
    void emit_to_int8_range(const Xbyak::Zmm &y, dtype dt, bool packed = false) {
        if (dt == dtype::u8 && packed) {
            if (!cfg.bounded_u8) {
                vbroadcastss(zmm_t, epi_.cst_plain<traits>(32767.f));
                vminps(y, zmm_t, y);
            }
        } else if (dt == dtype::u8) {
            vmaxps(y, y, zmm_zero); // NaN → 0
            vminps(y, y, epi_.cst<traits>(255.f));
        } else {
            vcmpps(k2, y, y, conv_epilogue_injector::cmp_ord);
            vmovaps(y | k2 | T_z, y);
            vmaxps(y, y, epi_.cst<traits>(-128.f));
            vminps(y, y, epi_.cst<traits>(127.f));
        }
        vcvtps2dq(y, y);
    }

    // Pixels w..w+3 of vector b: int32 in the 8-bit range → 4 × 16 bytes.
    void emit_pack_store(int w, int pw, int b, int64_t pix, dtype dt) {
        const Xbyak::Zmm t = zmm_t, v = zmm_u, idx = Xbyak::Zmm(25);
        if (dt == dtype::u8) {
            vpackssdw(t, acc(w, b), acc(w + 1, b));
            vpackssdw(v, acc(w + 2, b), acc(w + 3, b));
            vpackuswb(t, t, v);
        } else {
            vpackssdw(t, acc(w, b), acc(w + 1, b));
            vpackssdw(v, acc(w + 2, b), acc(w + 3, b));
            vpacksswb(t, t, v);
        }
        // Lane L of the packs holds channels 4L..4L+3 of the four pixels.
        vmovdqu32(idx, ptr[rip + l_pack_idx]);
        vpermd(t, idx, t);
        vmovdqu8(ptr[reg_dst + pw * pix + b * 16], Xbyak::Xmm(t.getIdx()));
        for (int q = 1; q < 4; ++q) vextracti32x4(ptr[reg_dst + (pw + q) * pix + b * 16], t, q);
    }
};

} // namespace

std::unique_ptr<jit_generator> make_dw_row_gen(const dw_row_cfg &c) { return std::make_unique<dw_row_gen>(c); }

} // namespace qconv::jit::dw
