// The depthwise micro-kernel path (conv_dw_kernel, every ISA: avx512_core,
// avx2, avx2_vnni and avx512_core_vnni without VBMI): conv_ukernel in
// depthwise mode, one call per pixel block, vpmovzxbd-widened source and
// int32-stored s16 weights, vpdpwssd (VNNI) or vpmaddwd + vpaddd. The source
// is read in place or from the padded copy (conv_dw_common.h); the output
// pipeline is fused into the kernel or run on its int32 tile.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "core/parallel.h"
#include "kernels/jit/base/conv_pipeline.h"
#include "kernels/jit/conv/conv_plan.h"
#include "kernels/jit/conv/conv_ukernel.h"
#include "kernels/jit/conv_dw/conv_dw_common.h"

namespace qconv::jit::dw {
namespace {

class conv_dw_kernel : public impl::conv_kernel {
public:
    conv_dw_kernel(conv_isa isa, const conv_problem &p, const attr_set &a, const ukernel_geometry &g)
        : isa_(isa), p_(p), a_(a), g_(g), pipe_(pipeline::build(p, a)), run_pipe_(pipeline_for(isa)), pc_(p, a),
          lanes_(g.lanes), nb_big_(g.nb_big), n_ob_(g.n_ob), fused_(g.fused), direct_(g.direct) {
        compile();
    }
    std::shared_ptr<const impl::packed> pack(const int8_t *wei, const float *bias) const override;
    void execute(const impl::packed &w, const void *src, void *dst, const exec_args &args) const override;

private:
    void compile();
    int ur_w_for(int nb) const { return nb == nb_big_ ? g_.ur_big : g_.ur_last; }
    // Key: (u, nb, last_n, row mask, first valid column, end of valid columns).
    using key_t = std::tuple<int, int, int, uint64_t, int, int>;
    key_t key(int u, int nb, int last_n, int64_t oh, int64_t ow0) const;
    const conv_ukernel &ukernel(const key_t &k) const { return *kernels_.at(k); }

    conv_isa isa_;
    conv_problem p_;
    attr_set a_;
    ukernel_geometry g_;
    pipeline pipe_;
    pipeline_fn run_pipe_; // the unfused pipeline body of this ISA
    padded_copy pc_;
    int lanes_ = 16;
    int nb_big_ = 1;
    int64_t n_ob_ = 1;
    bool fused_ = false;
    // Direct mode: a u8 source without zero point is read in place; taps in
    // the padding are skipped (they would contribute 0); the channel tail is
    // a masked load (zmm) or byte inserts (ymm), nothing is read past it.
    bool direct_ = false;
    int64_t c_ = 0, cpad_ = 0, nvec_ = 0, rows_ = 0, cols_ = 0; // channels, padded; vectors; copy rows/cols
    std::map<key_t, std::unique_ptr<conv_ukernel>> kernels_;
    // Resolved entry points: [block kind (0: full OC block, 1: last)][row · blocks + block].
    std::vector<conv_ukernel_fn> fns_[2];
    int64_t n_blk_[2] = {0, 0}; // pixel blocks per row, per block kind (their widths differ)
};

} // namespace

std::string ukernel_geometry::str() const {
    return std::string("source=") + (direct ? "direct" : "padded_copy") + " oc_blocks=" + std::to_string(nb_big) + "x" +
           std::to_string(n_ob) + " pixels=" + std::to_string(ur_big) + "/" + std::to_string(ur_last) +
           " pipeline=" + (fused ? "fused" : "tile");
}

ukernel_geometry plan_ukernel(conv_isa isa, const conv_problem &p, const attr_set &a, const conv_knobs &k) {
    const conv_desc &d = p.desc;
    ukernel_geometry g;
    g.lanes = oc_lanes(isa);
    const int64_t nvec = rnd_up(d.oc, g.lanes) / g.lanes;
    const int acc = max_accumulators_dw(isa, static_cast<int>(d.kw));
    g.nb_big = static_cast<int>(std::min<int64_t>(std::min(max_oc_vectors(isa), acc), nvec));
    g.n_ob = (nvec + g.nb_big - 1) / g.nb_big;
    const int last_nb = static_cast<int>(nvec - (g.n_ob - 1) * g.nb_big);
    auto ur = [&](int nb) { return static_cast<int>(balanced_block(d.ow, std::min(24, acc / nb))); };
    g.ur_big = ur(g.nb_big);
    g.ur_last = ur(last_nb);
    g.fused = pipeline_fusable(a, k);
    g.direct = p.src_dt == dtype::u8 && a.zp == zp_mechanism::none && d.kh <= 64 && k.dw_direct;
    return g;
}

namespace {

void conv_dw_kernel::compile() {
    const conv_desc &d = p_.desc;
    c_ = d.oc;
    cpad_ = rnd_up(c_, 16);
    nvec_ = rnd_up(c_, lanes_) / lanes_;
    rows_ = (d.oh - 1) * d.sh + (d.kh - 1) * d.dh + 1;
    cols_ = (d.ow - 1) * d.sw + (d.kw - 1) * d.dw + 1;
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
    auto pk = new_packed(p_, wei, bias);
    pk->wei.assign(static_cast<size_t>(d.kh * d.kw * cpad_), 0);
    for (int64_t c = 0; c < c_; ++c)
        for (int64_t kh = 0; kh < d.kh; ++kh)
            for (int64_t kw = 0; kw < d.kw; ++kw)
                pk->wei[(kh * d.kw + kw) * cpad_ + c] = wei[(c * d.kh + kh) * d.kw + kw];
    fill_comp_bias(*pk, p_, a_, wei, bias);
    return pk;
}

void conv_dw_kernel::execute(const impl::packed &w, const void *src, void *dst, const exec_args &args) const {
    const conv_desc &d = p_.desc;
    dw_exec e(p_, a_, pc_, !direct_, w, src, dst, args);
    const int64_t work = d.mb * d.oh * n_ob_;
    // The source copy (unless in place), every thread done with it, then the convolution.
    std::function<void(int, int)> copy;
    if (!direct_)
        copy = [&](int ithr, int nthr) {
            impl::for_range(d.mb * rows_, ithr, nthr, [&](int64_t nr) { pc_.row(e.src, e.buf, nr); });
        };
    impl::parallel_phases(e.threads, copy, [&](int ithr, int nthr) {
        alignas(64) int32_t acc[25 * 16 + 16];
        int64_t it_b, it_e;
        impl::balance(work, ithr, nthr, it_b, it_e);
        for (int64_t it = it_b; it < it_e; ++it) {
            const int64_t ob = it % n_ob_;
            const int64_t oh = (it / n_ob_) % d.oh;
            const int64_t n = it / n_ob_ / d.oh;
            const int64_t c0 = ob * nb_big_ * lanes_;
            const int nb = static_cast<int>(std::min<int64_t>(nb_big_, nvec_ - ob * nb_big_));
            const int nc = static_cast<int>(std::min<int64_t>(nb * lanes_, c_ - c0));
            const int ur = ur_w_for(nb);
            conv_call call{};
            call.wei = reinterpret_cast<const int8_t *>(e.pk.wei.data() + c0);
            call.acc = acc;
            call.comp = e.pk.comp.data() + c0;
            call.bias = e.bias ? e.bias + c0 : nullptr;
            call.c_off = c0 * 4;
            for (int64_t ow = 0; ow < d.ow; ow += ur) {
                const int u = static_cast<int>(std::min<int64_t>(ur, d.ow - ow));
                if (direct_) {
                    // Origin (oh·sh − pt, ow·sw − pl) may lie in the padding; the
                    // kernel reads only offsets inside the image.
                    const int64_t o = ((n * d.ih + oh * d.sh - d.pt) * d.iw + ow * d.sw - d.pl) * c_ + c0;
                    call.src = reinterpret_cast<const uint8_t *>(reinterpret_cast<uintptr_t>(e.src) + o);
                } else {
                    call.src = e.buf + ((n * rows_ + oh * d.sh) * cols_ + ow * d.sw) * cpad_ + c0;
                }
                const int64_t off0 = ((n * d.oh + oh) * d.ow + ow) * c_ + c0;
                if (fused_) {
                    call.dst = static_cast<uint8_t *>(dst) + off0 * e.dst_bytes;
                    for (size_t f = 0; f < e.full_idx.size(); ++f) call.full[f] = args.binary[e.full_idx[f]] + off0;
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
                run_pipe_(pipe_, t, e.pk.comp.data(), e.bias, dst, args);
            }
        }
    });
}

} // namespace

std::shared_ptr<const impl::conv_kernel> make_dw_ukernel(conv_isa isa, const conv_problem &p, const attr_set &a,
                                                         const ukernel_geometry &g) {
    return std::make_shared<conv_dw_kernel>(isa, p, a, g);
}

} // namespace qconv::jit::dw
