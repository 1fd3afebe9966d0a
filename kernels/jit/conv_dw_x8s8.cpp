// Depthwise int8 convolution (groups == IC == OC), any kernel size, stride,
// padding and dilation, both zero-point kinds and every post-op.
//
// Design: the source is copied once per execution into a padded NHWC buffer
// whose pixels hold the channels rounded up to 16 (padded taps: zp bytes,
// 0x80 for s8 sources — i.e. 0 after the +128 shift — or 0; padded channels
// 0). The same compensation argument as conv_x8s8.h makes this exact:
// comp[c] = zp_compensation (legacy zp) − 128·Σw (s8 source), added in int32.
// The micro-kernel (conv_ukernel in depthwise mode) keeps ur_w pixels × nb
// channel vectors of int32 accumulators, unrolls every tap, widens the u8
// source with vpmovzxbd and multiplies by int32-stored s16 weights with
// vpdpwssd (VNNI) or vpmaddwd + vpaddd — exact, no int16 saturation — and
// then runs the same fused output pipeline as the dense kernels (or stores
// the int32 tile for the C++ pipeline on AVX2 / transcendental chains).
// Threads split (mb, row, channel block); results do not depend on them.
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>

#include "kernels/jit/conv_pipeline.h"
#include "kernels/jit/conv_x8s8.h"

namespace qconv::jit {
namespace {

int64_t rnd_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

struct dw_packed : impl::packed {
    std::vector<int32_t> wei;  // [kh][kw][cpad]
    std::vector<int32_t> comp; // C + 16
    std::vector<float> bias;   // C + 16 (empty without bias)
};

class conv_dw_kernel : public impl::conv_kernel {
public:
    conv_dw_kernel(conv_isa isa, const conv_problem &p, const attr_set &a)
        : isa_(isa), p_(p), a_(a), pipe_(pipeline::build(p, a)) {
        plan();
    }
    std::shared_ptr<const impl::packed> pack(const int8_t *wei, const float *bias) const override;
    void execute(const impl::packed &w, const void *src, void *dst, const exec_args &args) const override;

private:
    void plan();
    int ur_w_for(int nb) const {
        const int64_t mx = std::min(24, max_accumulators_dw(isa_, static_cast<int>(p_.desc.kw)) / nb);
        const int64_t ow = p_.desc.ow;
        if (ow <= mx) return static_cast<int>(ow);
        const int64_t calls = (ow + mx - 1) / mx;
        return static_cast<int>((ow + calls - 1) / calls);
    }
    // Key: (u, nb, last_n, row mask, first valid column, end of valid columns).
    using key_t = std::tuple<int, int, int, uint64_t, int, int>;
    key_t key(int u, int nb, int last_n, int64_t oh, int64_t ow0) const;
    const conv_ukernel &ukernel(const key_t &k) const { return *kernels_.at(k); }

    conv_isa isa_;
    conv_problem p_;
    attr_set a_;
    pipeline pipe_;
    int lanes_ = 16;
    int64_t c_ = 0, cpad_ = 0, nvec_ = 0, rows_ = 0, cols_ = 0;
    int nb_big_ = 1;
    int64_t n_ob_ = 1;
    bool fused_ = false;
    // Direct mode: u8 source without zero point on zmm ISAs reads the source
    // in place; taps in the padding are skipped (they would contribute 0).
    bool direct_ = false;
    std::vector<uint8_t> pad_pixel_;
    std::map<key_t, std::unique_ptr<conv_ukernel>> kernels_;
    // Resolved entry points: [block kind (0: full OC block, 1: last)][row · blocks + block].
    std::vector<conv_ukernel_fn> fns_[2];
    int64_t n_blk_[2] = {0, 0}; // pixel blocks per row, per block kind (their widths differ)
};

void conv_dw_kernel::plan() {
    const conv_desc &d = p_.desc;
    lanes_ = oc_lanes(isa_);
    c_ = d.oc;
    cpad_ = rnd_up(c_, 16);
    nvec_ = rnd_up(c_, lanes_) / lanes_;
    nb_big_ = static_cast<int>(std::min<int64_t>(
        std::min(max_oc_vectors(isa_), max_accumulators_dw(isa_, static_cast<int>(d.kw))), nvec_));
    n_ob_ = (nvec_ + nb_big_ - 1) / nb_big_;
    rows_ = (d.oh - 1) * d.sh + (d.kh - 1) * d.dh + 1;
    cols_ = (d.ow - 1) * d.sw + (d.kw - 1) * d.dw + 1;

    int n_full = 0;
    bool transcendental = false;
    for (const auto &op : a_.ops) {
        if (op.k == lowered_op::kind::binary && op.bcast == broadcast::full) ++n_full;
        if (op.k == lowered_op::kind::eltwise && is_transcendental(op.alg)) transcendental = true;
    }
    const char *env = std::getenv("QCONV_JIT_CONV_FUSED");
    fused_ = isa_ != conv_isa::avx2 && !transcendental && n_full <= max_fused_full &&
             !(env && std::strcmp(env, "0") == 0);

    const char *dv = std::getenv("QCONV_JIT_CONV_DW_DIRECT");
    direct_ = p_.src_dt == dtype::u8 && a_.zp == zp_mechanism::none && isa_ != conv_isa::avx2 &&
              d.kh <= 64 && !(dv && std::strcmp(dv, "0") == 0);
    const int last_nb = static_cast<int>(nvec_ - (n_ob_ - 1) * nb_big_);
    const int last_lanes = static_cast<int>(c_ - (nvec_ - 1) * lanes_);
    const std::pair<int, int> blocks[2] = {{nb_big_, n_ob_ > 1 ? lanes_ : last_lanes}, {last_nb, last_lanes}};
    for (const auto &[nb, ln] : blocks) {
        const int ur = ur_w_for(nb);
        // Every (row class, block) that execute() will ask for.
        std::vector<key_t> keys;
        for (int64_t oh = 0; oh < (direct_ ? d.oh : 1); ++oh)
            for (int64_t ow0 = 0; ow0 < d.ow; ow0 += ur)
                keys.push_back(key(static_cast<int>(std::min<int64_t>(ur, d.ow - ow0)), nb, ln, oh, ow0));
        for (const key_t &k : keys) {
            if (kernels_.count(k)) continue;
            const int u = std::get<0>(k), last_n = std::get<2>(k);
            conv_ukernel_cfg c;
            c.dw_direct = direct_;
            c.dw_row_mask = std::get<3>(k);
            c.dw_col_lo = std::get<4>(k);
            c.dw_col_hi = std::get<5>(k);
            c.isa = isa_;
            c.depthwise = true;
            c.ur_w = u;
            c.nb = nb;
            c.kh = static_cast<int>(d.kh);
            c.kw = static_cast<int>(d.kw);
            c.pix_stride = direct_ ? c_ : cpad_;
            c.row_stride = direct_ ? d.iw * c_ : cols_ * cpad_;
            c.sw = static_cast<int>(d.sw);
            c.dh = static_cast<int>(d.dh);
            c.dw = static_cast<int>(d.dw);
            c.dw_cpad = cpad_;
            c.pipe = fused_ ? &pipe_ : nullptr;
            c.last_n = last_n;
            kernels_[k] = std::make_unique<conv_ukernel>(c);
        }
    }
    // Entry points per (block kind, row, pixel block): no lookup in execute().
    for (int kind = 0; kind < 2; ++kind) {
        const int nb = kind == 0 ? nb_big_ : last_nb;
        const int ln = kind == 0 && n_ob_ > 1 ? lanes_ : last_lanes;
        const int ur = ur_w_for(nb);
        n_blk_[kind] = (d.ow + ur - 1) / ur;
        fns_[kind].clear();
        for (int64_t oh = 0; oh < d.oh; ++oh)
            for (int64_t bi = 0; bi < n_blk_[kind]; ++bi) {
                const int64_t ow0 = bi * ur;
                const int u = static_cast<int>(std::min<int64_t>(ur, d.ow - ow0));
                fns_[kind].push_back(ukernel(key(u, nb, ln, direct_ ? oh : 0, ow0)).fn());
            }
    }
    pad_pixel_.assign(static_cast<size_t>(cpad_), 0);
    for (int64_t c = 0; c < c_; ++c) {
        if (a_.zp == zp_mechanism::legacy_per_channel) {
            const auto &z = a_.zp_values;
            pad_pixel_[c] = static_cast<uint8_t>(z.size() == 1 ? z[0] : z[c]);
        } else if (p_.src_dt == dtype::s8) {
            pad_pixel_[c] = 0x80;
        }
    }
}

conv_dw_kernel::key_t conv_dw_kernel::key(int u, int nb, int last_n, int64_t oh, int64_t ow0) const {
    const conv_desc &d = p_.desc;
    const int ln = fused_ || direct_ ? last_n : 16;
    if (!direct_) return {u, nb, ln, ~uint64_t(0), 0, 1 << 30};
    uint64_t mask = 0;
    for (int64_t kh = 0; kh < d.kh; ++kh) {
        const int64_t ih = oh * d.sh - d.pt + kh * d.dh;
        if (ih >= 0 && ih < d.ih) mask |= uint64_t(1) << kh;
    }
    const int64_t span = (u - 1) * d.sw + (d.kw - 1) * d.dw + 1;
    const int64_t x0 = ow0 * d.sw - d.pl; // source column of j = 0
    const int lo = static_cast<int>(std::max<int64_t>(0, -x0));
    const int hi = static_cast<int>(std::min<int64_t>(span, d.iw - x0));
    // Blocks that read no padding column share one kernel.
    if (lo == 0 && hi == span) return {u, nb, ln, mask, 0, 1 << 30};
    return {u, nb, ln, mask, lo, std::max(lo, hi)};
}

std::shared_ptr<const impl::packed> conv_dw_kernel::pack(const int8_t *wei, const float *bias) const {
    const conv_desc &d = p_.desc;
    if (!wei) fail("wei", "is null");
    if (p_.with_bias && !bias) fail("bias", "with_bias is set but no bias was given");
    auto pk = std::make_shared<dw_packed>();
    pk->wei.assign(static_cast<size_t>(d.kh * d.kw * cpad_), 0);
    for (int64_t c = 0; c < c_; ++c)
        for (int64_t kh = 0; kh < d.kh; ++kh)
            for (int64_t kw = 0; kw < d.kw; ++kw)
                pk->wei[(kh * d.kw + kw) * cpad_ + c] = wei[(c * d.kh + kh) * d.kw + kw];
    pk->comp.assign(static_cast<size_t>(c_ + 16), 0);
    if (a_.zp == zp_mechanism::legacy_per_channel) {
        const std::vector<int32_t> comp = zp_compensation(d, wei, a_.zp_values);
        std::copy(comp.begin(), comp.end(), pk->comp.begin());
    }
    if (p_.src_dt == dtype::s8)
        for (int64_t c = 0; c < c_; ++c) {
            int32_t s = 0;
            for (int64_t k = 0; k < d.kh * d.kw; ++k) s += wei[c * d.kh * d.kw + k];
            pk->comp[c] += -128 * s;
        }
    if (p_.with_bias) {
        pk->bias.assign(static_cast<size_t>(c_ + 16), 0.f);
        std::copy(bias, bias + c_, pk->bias.begin());
    }
    return pk;
}

void conv_dw_kernel::execute(const impl::packed &w, const void *src, void *dst, const exec_args &args) const {
    const conv_desc &d = p_.desc;
    if (!src) fail("src", "is null");
    if (!dst) fail("dst", "is null");
    std::vector<int> full_idx;
    for (const auto &op : a_.ops)
        if (op.k == lowered_op::kind::binary && op.bcast == broadcast::full) {
            if (op.full_index < 0 || op.full_index >= static_cast<int>(args.binary.size()) ||
                !args.binary[op.full_index])
                fail("binary", "full-tensor operand #" + std::to_string(op.full_index) +
                                   " not passed in exec_args::binary");
            full_idx.push_back(op.full_index);
        }
    const auto &pk = dynamic_cast<const dw_packed &>(w);
    const int threads = args.threads > 0 ? args.threads : omp_get_max_threads();

    // Padded u8 copy (s8 shifted by +128), unless the source is read in place.
    std::vector<uint8_t> buf(direct_ ? 0 : static_cast<size_t>(d.mb * rows_ * cols_ * cpad_ + 64));
    const uint8_t flip = p_.src_dt == dtype::s8 ? 0x80 : 0x00;
    const uint8_t *s = static_cast<const uint8_t *>(src);
    const int64_t dst_bytes = p_.dst_dt == dtype::f32 || p_.dst_dt == dtype::s32 ? 4 : 1;
    const int64_t work = d.mb * d.oh * n_ob_;
    const float *bias = p_.with_bias ? pk.bias.data() : nullptr;
    // One parallel region: the source copy (unless in place), a barrier, the convolution.
#pragma omp parallel num_threads(threads)
    {
        if (!direct_) {
#pragma omp for collapse(2) schedule(static)
        for (int64_t n = 0; n < d.mb; ++n)
            for (int64_t r = 0; r < rows_; ++r) {
                uint8_t *row = buf.data() + (n * rows_ + r) * cols_ * cpad_;
                const int64_t ih = r - d.pt;
                for (int64_t col = 0; col < cols_; ++col) {
                    uint8_t *px = row + col * cpad_;
                    const int64_t iw = col - d.pl;
                    if (ih < 0 || ih >= d.ih || iw < 0 || iw >= d.iw) {
                        std::memcpy(px, pad_pixel_.data(), static_cast<size_t>(cpad_));
                        continue;
                    }
                    const uint8_t *x = s + ((n * d.ih + ih) * d.iw + iw) * c_;
                    if (!flip && cpad_ == c_) { // same layout: the whole valid run at once
                        const int64_t run = std::min(d.iw - iw, cols_ - col);
                        std::memcpy(px, x, static_cast<size_t>(run * c_));
                        col += run - 1;
                        continue;
                    }
                    if (flip)
                        for (int64_t c = 0; c < c_; ++c) px[c] = static_cast<uint8_t>(x[c] ^ flip);
                    else
                        std::memcpy(px, x, static_cast<size_t>(c_));
                    std::memset(px + c_, 0, static_cast<size_t>(cpad_ - c_));
                }
            }
        }
        alignas(64) int32_t acc[25 * 16 + 16];
#pragma omp for schedule(static) nowait
        for (int64_t it = 0; it < work; ++it) {
            const int64_t ob = it % n_ob_;
            const int64_t oh = (it / n_ob_) % d.oh;
            const int64_t n = it / n_ob_ / d.oh;
            const int64_t c0 = ob * nb_big_ * lanes_;
            const int nb = static_cast<int>(std::min<int64_t>(nb_big_, nvec_ - ob * nb_big_));
            const int nc = static_cast<int>(std::min<int64_t>(nb * lanes_, c_ - c0));
            const int ur = ur_w_for(nb);
            conv_call call{};
            call.wei = reinterpret_cast<const int8_t *>(pk.wei.data() + c0);
            call.acc = acc;
            call.comp = pk.comp.data() + c0;
            call.bias = bias ? bias + c0 : nullptr;
            call.c_off = c0 * 4;
            for (int64_t ow = 0; ow < d.ow; ow += ur) {
                const int u = static_cast<int>(std::min<int64_t>(ur, d.ow - ow));
                if (direct_) {
                    // Origin (oh·sh − pt, ow·sw − pl) may lie in the padding; the
                    // kernel reads only offsets inside the image.
                    const int64_t o = ((n * d.ih + oh * d.sh - d.pt) * d.iw + ow * d.sw - d.pl) * c_ + c0;
                    call.src = reinterpret_cast<const uint8_t *>(reinterpret_cast<uintptr_t>(s) + o);
                } else {
                    call.src = buf.data() + ((n * rows_ + oh * d.sh) * cols_ + ow * d.sw) * cpad_ + c0;
                }
                const int64_t off0 = ((n * d.oh + oh) * d.ow + ow) * c_ + c0;
                if (fused_) {
                    call.dst = static_cast<uint8_t *>(dst) + off0 * dst_bytes;
                    for (size_t f = 0; f < full_idx.size(); ++f) call.full[f] = args.binary[full_idx[f]] + off0;
                }
                const int kind = ob == n_ob_ - 1 ? 1 : 0;
                fns_[kind][oh * n_blk_[kind] + ow / ur](&call);
                if (fused_) continue;
                tile t;
                t.acc = acc;
                t.acc_stride = nb * lanes_;
                t.npix = u;
                t.c0 = c0;
                t.nc = nc;
                t.dst_off0 = off0;
                if (isa_ == conv_isa::avx2) run_pipeline_avx2(pipe_, t, pk.comp.data(), bias, dst, args);
                else run_pipeline_avx512(pipe_, t, pk.comp.data(), bias, dst, args);
            }
        }
    }
}

isa required(conv_isa i) {
    switch (i) {
    case conv_isa::avx512_vnni: return isa::avx512_core_vnni;
    case conv_isa::avx512_core: return isa::avx512_core;
    case conv_isa::avx2: return isa::avx2;
    }
    return isa::avx512_core_amx;
}

} // namespace

std::string conv_dw_impl_name(conv_isa i) { return std::string("jit:conv_dw_x8s8:") + to_string(i); }

bool conv_dw_supports(conv_isa i, const conv_problem &p, const attr_set &a, const impl::platform &pl,
                      std::string *why) {
    using impl::reject;
    const conv_desc &d = p.desc;
    if (!pl.has(required(i))) return reject(why, std::string("needs ") + to_string(required(i)));
    if (!d.is_depthwise()) return reject(why, "not depthwise (needs groups == IC == OC)");
    if (d.kh * d.kw > 121 || max_accumulators_dw(i, static_cast<int>(d.kw)) < 1)
        return reject(why, "kernel wider than the registers allow (every tap is unrolled)");
    // Everything else (types, zero points, post-ops) as the dense kernels.
    return conv_supports(i, false, p, a, pl, why);
}

std::shared_ptr<const impl::conv_kernel> conv_dw_create(conv_isa i, const conv_problem &p, const attr_set &a) {
    return std::make_shared<conv_dw_kernel>(i, p, a);
}

} // namespace qconv::jit
