// The depthwise row kernel (conv_dw_row_kernel, avx512_core_vnni with VBMI).
// plan_rows() is the pure planner the table row runs in supports(): the
// variant (kernel-row chunks, row pairs or the byte layout), the source
// (read in place, or a padded copy: of the whole source first, or of one
// output row's source rows at a time), the channel blocking and the pixels per
// block. The kernel builds from that plan: the row classes and pixel-block
// runs, one dw_row_gen per row class (and per row-pair class), the weights
// in the variant's layout, and the split of the rows over the threads.
// row_kernel_fits() is the register check of its table row.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "core/buffers.h"
#include "core/parallel.h"
#include "kernels/jit/base/conv_pipeline.h"
#include "kernels/jit/conv/conv_plan.h"
#include "kernels/jit/conv/conv_ukernel.h"
#include "kernels/jit/conv_dw/conv_dw_common.h"
#include "kernels/jit/conv_dw/conv_dw_row_gen.h"

namespace qconv::jit::dw {

// Whether the row kernel's registers fit the kernel: the weights of a
// 16-channel block plus one accumulator (VBMI is the row's declared feature).
bool row_kernel_fits(const conv_desc &d) {
    return d.kh <= 64 && dw_max_acc(1, static_cast<int>(d.kh), static_cast<int>(d.kw)) >= 1;
}

std::string rows_geometry::str() const {
    const char *variant = native ? "bytes" : pair ? "row_pairs" : "row_chunks";
    return std::string("variant=") + variant + " source=" +
           (direct     ? "direct"
            : row_copy ? "row_copy"
                       : "padded_copy") +
           " oc_blocks=" + std::to_string(nb) + " pixels=" + std::to_string(ur) +
           (pair ? "+" + std::to_string(ur_pair) : std::string()) + " pipeline=" + (fused ? "fused" : "tile");
}

namespace {

enum class rows_variant { chunks, pairs, bytes };

// Pixels per block the registers allow with nb 16-channel vectors.
int ur_max(const conv_desc &d, rows_variant v, int nb) {
    const int kh = static_cast<int>(d.kh), kw = static_cast<int>(d.kw);
    switch (v) {
    case rows_variant::bytes: return dw_native_max_acc(kw) / 4;
    case rows_variant::pairs: return std::min(25, 28 - 2 * kw) / 2;
    case rows_variant::chunks: return dw_max_acc(nb, kh, kw) / nb;
    }
    return 1;
}
// The row's pixels in the fewest blocks the registers allow, balanced.
int ur_for(const conv_desc &d, rows_variant v, int nb) {
    return static_cast<int>(balanced_block(d.ow, ur_max(d, v, nb)));
}

// The byte-layout variant: strided rows (QCONV_JIT_CONV_DW_NATIVE=1: any
// stride, =0: never), u8 / s8 dst, fused, no position-dependent operand.
bool native_eligible(const conv_problem &p, const attr_set &a, const conv_knobs &k, bool fused) {
    const conv_desc &d = p.desc;
    if (k.dw_native == 0) return false;
    const bool forced = k.dw_native == 1;
    if (!fused || (p.dst_dt != dtype::u8 && p.dst_dt != dtype::s8)) return false;
    if (dw_native_max_acc(static_cast<int>(d.kw)) < 4) return false;
    for (const auto &op : a.ops)
        if (op.k == lowered_op::kind::sum || (op.k == lowered_op::kind::binary && op.bcast == broadcast::full))
            return false;
    return forced || d.sw >= 2;
}

} // namespace

rows_geometry plan_rows(const conv_problem &p, const attr_set &a, const conv_knobs &k) {
    const conv_desc &d = p.desc;
    rows_geometry g;
    g.fused = pipeline_fusable(a, k);
    g.direct = p.src_dt == dtype::u8 && a.zp == zp_mechanism::none && k.dw_direct;
    g.native = native_eligible(p, a, k, g.fused);
    g.pair = g.fused && !g.native && d.kh == 3 && d.sh == 1 && d.sw == 1 && d.dh == 1 && d.oh >= 2 &&
             28 - 2 * d.kw >= 2 && k.dw_pair;
    // A copied source of strided rows, copied row by row: the whole copy
    // (stride 2: 4x the output's pixels) no longer passes through L2 twice.
    g.row_copy = !g.direct && !g.pair && d.sh >= 2 && k.dw_row_copy;
    // Native: 64-channel groups. Otherwise the widest channel block whose
    // pixel block still covers the row (fewer passes over the row), else 16
    // channels with the longest pixel blocks (and 16 for row pairs).
    const rows_variant single = g.native ? rows_variant::bytes : rows_variant::chunks;
    g.nb = g.native ? 4 : 1;
    if (!g.native && !g.pair)
        for (int nb : {4, 2})
            if (ur_max(d, single, nb) >= d.ow && (d.oc + 15) / 16 >= nb) {
                g.nb = nb;
                break;
            }
    g.ur = ur_for(d, single, g.nb);
    if (g.pair) g.ur_pair = ur_for(d, rows_variant::pairs, 1);
    return g;
}

namespace {

class conv_dw_row_kernel : public impl::conv_kernel {
public:
    conv_dw_row_kernel(const conv_problem &p, const attr_set &a, const rows_geometry &g)
        : p_(p), a_(a), pipe_(pipeline::build(p, a)), pc_(p, a), c_(p.desc.oc), nb_(g.nb), fused_(g.fused),
          direct_(g.direct), row_copy_(g.row_copy), native_(g.native), pair_(g.pair),
          u8_bound_(g.fused ? bounded_u8_store(pipe_, p.desc.kh * p.desc.kw) : u8_store_bound{}) {
        const conv_desc &d = p_.desc;
        n_full_ = c_ / (16 * nb_);
        tail_ = c_ % (16 * nb_) != 0;
        n_ob_ = n_full_ + (tail_ ? 1 : 0);
        blk_wbytes_ = native_ ? d.kh * d.kw * 4 * 64 : int64_t(dw_chunks(static_cast<int>(d.kh))) * d.kw * nb_ * 64;
        if (native_) order_pipeline_natively();
        if (pair_) build_pair_kernels(row_runs(g.ur_pair));
        build_row_kernels(row_runs(g.ur));
    }
    std::shared_ptr<const impl::packed> pack(const int8_t *wei, const float *bias) const override;
    void execute(const impl::packed &w, const void *src, void *dst, const exec_args &args) const override;

private:
    void order_pipeline_natively();
    void build_pair_kernels(const std::vector<dw_run> &runs);
    void build_row_kernels(const std::vector<dw_run> &runs);
    std::pair<uint64_t, int> row_class(int64_t oh) const;
    std::vector<dw_run> row_runs(int ur) const;
    // Channels in the last (partial) block.
    int rem() const { return static_cast<int>(c_ - n_full_ * 16 * nb_); }

    conv_problem p_;
    attr_set a_;
    pipeline pipe_;
    padded_copy pc_;
    int64_t c_;
    int nb_;
    bool fused_, direct_, row_copy_, native_, pair_;
    u8_store_bound u8_bound_; // u8 stores without the clamp before the packs (bounded_u8_store())
    int64_t n_full_ = 0, n_ob_ = 0, blk_wbytes_ = 0;
    bool tail_ = false;
    int64_t pair_wbytes_ = 0;
    std::vector<dw_row_fn> fns_pair_; // per pair of output rows (2p, 2p + 1)
    pipeline pipe_nat_;               // pipe_ with per-OC arrays in the native lane order
    std::vector<std::unique_ptr<jit_generator>> gens_;
    std::vector<dw_row_fn> fns_; // per output row
};

// (kernel rows inside the image, kernel row reading the image's last row).
std::pair<uint64_t, int> conv_dw_row_kernel::row_class(int64_t oh) const {
    const conv_desc &d = p_.desc;
    if (!direct_) return {~uint64_t(0), -1};
    uint64_t mask = 0;
    int last = -1;
    for (int64_t kh = 0; kh < d.kh; ++kh) {
        const int64_t ih = oh * d.sh - d.pt + kh * d.dh;
        if (ih >= 0 && ih < d.ih) mask |= uint64_t(1) << kh;
        if (ih == d.ih - 1) last = static_cast<int>(kh);
    }
    return {mask, last};
}

// Pixel blocks of one output row grouped into runs of equal width and column class.
std::vector<dw_run> conv_dw_row_kernel::row_runs(int ur) const {
    const conv_desc &d = p_.desc;
    std::vector<dw_run> runs;
    for (int64_t ow0 = 0; ow0 < d.ow; ow0 += ur) {
        dw_run r;
        r.u = static_cast<int>(std::min<int64_t>(ur, d.ow - ow0));
        const int64_t span = (r.u - 1) * d.sw + (d.kw - 1) * d.dw + 1;
        r.lo = 0;
        r.hi = 1 << 30;
        if (direct_) {
            const int64_t x0 = ow0 * d.sw - d.pl; // source column of the block's j = 0
            const int lo = static_cast<int>(std::max<int64_t>(0, -x0));
            const int hi = static_cast<int>(std::min<int64_t>(span, d.iw - x0));
            if (!(lo == 0 && hi == span)) {
                r.lo = lo;
                r.hi = std::max(lo, hi);
            }
        }
        if (!runs.empty() && runs.back().u == r.u && runs.back().lo == r.lo && runs.back().hi == r.hi)
            ++runs.back().count;
        else runs.push_back(r);
    }
    return runs;
}

// The pipeline's per-OC arrays in the byte layout's lane order.
void conv_dw_row_kernel::order_pipeline_natively() {
    pipe_nat_ = pipe_;
    pipe_nat_.scale = native_order(pipe_.scale, c_);
    for (auto &op : pipe_nat_.ops) {
        op.a = native_order(op.a, c_);
        op.b = native_order(op.b, c_);
        for (auto &v : op.q) v = native_order(v, c_);
    }
}

// One kernel per class of output-row pairs (2p, 2p + 1): 16-channel blocks;
// the single-row kernels serve only an odd last row.
void conv_dw_row_kernel::build_pair_kernels(const std::vector<dw_run> &pruns) {
    const conv_desc &d = p_.desc;
    const int rem = this->rem();
    pair_wbytes_ = 2 * d.kw * 64;
    std::map<std::pair<uint64_t, int>, dw_row_fn> pmade;
    fns_pair_.assign(static_cast<size_t>(d.oh / 2), nullptr);
    for (int64_t pr = 0; pr < d.oh / 2; ++pr) {
        uint64_t mask = 15;
        int last = -1;
        if (direct_) {
            mask = 0;
            for (int p = 0; p < 4; ++p) {
                const int64_t ih = 2 * pr - d.pt + p;
                if (ih >= 0 && ih < d.ih) mask |= uint64_t(1) << p;
                if (ih == d.ih - 1) last = p;
            }
        }
        auto it = pmade.find({mask, last});
        if (it == pmade.end()) {
            dw_row_cfg c;
            c.nb = 1;
            c.last_nb = tail_ ? 1 : 0;
            c.last_n = tail_ ? rem : 16;
            c.kh = 3;
            c.kw = static_cast<int>(d.kw);
            c.sw = 1;
            c.dh = 1;
            c.dw = static_cast<int>(d.dw);
            c.pix_stride = direct_ ? c_ : pc_.cpad;
            c.row_stride = direct_ ? d.iw * c_ : pc_.cols * pc_.cpad;
            c.row_mask = mask;
            c.masked_kh = last;
            c.runs.insert(c.runs.end(), pruns.begin(), pruns.end());
            c.pipe = &pipe_;
            c.blk_wbytes = pair_wbytes_;
            c.pair = true;
            c.row_pix = d.ow;
            c.bounded_u8 = u8_bound_.bounded;
            gens_.push_back(make_dw_row_gen(c));
            gens_.back()->create();
            it = pmade.emplace(std::make_pair(mask, last), gens_.back()->entry<dw_row_fn>()).first;
        }
        fns_pair_[pr] = it->second;
    }
}

// One kernel per row class (kernel rows inside the image, last image row).
void conv_dw_row_kernel::build_row_kernels(const std::vector<dw_run> &runs) {
    const conv_desc &d = p_.desc;
    const int rem = this->rem();
    std::map<std::pair<uint64_t, int>, dw_row_fn> made;
    fns_.assign(static_cast<size_t>(d.oh), nullptr);
    for (int64_t oh = 0; oh < d.oh; ++oh) {
        const auto cls = row_class(oh);
        auto it = made.find(cls);
        if (it == made.end()) {
            dw_row_cfg c;
            c.nb = nb_;
            c.last_nb = tail_ ? (native_ ? 4 : (rem + 15) / 16) : 0;
            c.last_n = tail_ ? (native_ ? 0 : rem - 16 * (c.last_nb - 1)) : 16;
            c.native = native_;
            c.tail_bytes = native_ && tail_ ? rem : 0;
            c.kh = static_cast<int>(d.kh);
            c.kw = static_cast<int>(d.kw);
            c.sw = static_cast<int>(d.sw);
            c.dh = static_cast<int>(d.dh);
            c.dw = static_cast<int>(d.dw);
            c.pix_stride = direct_ ? c_ : pc_.cpad;
            c.row_stride = direct_ ? d.iw * c_ : pc_.cols * pc_.cpad;
            c.row_mask = cls.first;
            c.masked_kh = cls.second;
            c.runs = runs;
            c.pipe = !fused_ ? nullptr : native_ ? &pipe_nat_ : &pipe_;
            c.acc_pix = nb_ * 64;
            c.blk_wbytes = blk_wbytes_;
            c.bounded_u8 = u8_bound_.bounded;
            gens_.push_back(make_dw_row_gen(c));
            gens_.back()->create();
            it = made.emplace(cls, gens_.back()->entry<dw_row_fn>()).first;
        }
        fns_[oh] = it->second;
    }
}

// Weights: per channel block, [chunk][kw][vector k][64 bytes]: dword i of
// vector k holds w[c][3·chunk + p][kw] (c = c0 + 16k + i) in byte p (0..2),
// 0 in byte 3 and for rows or channels beyond the kernel.
std::shared_ptr<const impl::packed> conv_dw_row_kernel::pack(const int8_t *wei, const float *bias) const {
    const conv_desc &d = p_.desc;
    auto pk = new_packed(p_, wei, bias);
    pk->wei8.assign(static_cast<size_t>(n_ob_ * blk_wbytes_), 0);
    if (native_) {
        // [group][kh][kw][q][64 bytes]: w[g·64 + 4i + q] in byte 4i + q of vector q.
        for (int64_t c = 0; c < c_; ++c) {
            const int64_t g = c / 64, r = c % 64, q = r % 4;
            for (int64_t t = 0; t < d.kh * d.kw; ++t)
                pk->wei8[static_cast<size_t>(g * blk_wbytes_ + (t * 4 + q) * 64 + r)] =
                    static_cast<uint8_t>(wei[c * d.kh * d.kw + t]);
        }
        fill_comp_bias(*pk, p_, a_, wei, bias);
        if (u8_bound_.clamp_bias) bound_bias(pk->bias);
        pk->comp_nat = native_order(pk->comp, c_);
        pk->bias_nat = native_order(pk->bias, c_);
        return pk;
    }
    for (int64_t c = 0; c < c_; ++c) {
        const int64_t ob = c / (nb_ * 16), r = c % (nb_ * 16), k = r / 16, i = r % 16;
        for (int64_t kh = 0; kh < d.kh; ++kh)
            for (int64_t kw = 0; kw < d.kw; ++kw) {
                const int64_t ch = kh / 3, p = kh % 3;
                const int64_t off = ob * blk_wbytes_ + ((ch * d.kw + kw) * nb_ + k) * 64 + 4 * i + p;
                pk->wei8[static_cast<size_t>(off)] = static_cast<uint8_t>(wei[(c * d.kh + kh) * d.kw + kw]);
            }
    }
    if (pair_) {
        // [block][set][kw][64 bytes]: set 0 holds w[c][p][kw] in byte p of
        // dword i (c = c0 + i), set 1 in byte p + 1.
        pk->wei8_pair.assign(static_cast<size_t>(n_ob_ * pair_wbytes_), 0);
        for (int64_t c = 0; c < c_; ++c)
            for (int64_t set = 0; set < 2; ++set)
                for (int64_t p = 0; p < 3; ++p)
                    for (int64_t kw = 0; kw < d.kw; ++kw)
                        pk->wei8_pair[static_cast<size_t>((c / 16) * pair_wbytes_ + (set * d.kw + kw) * 64 +
                                                          4 * (c % 16) + p + set)] =
                            static_cast<uint8_t>(wei[(c * d.kh + p) * d.kw + kw]);
    }
    fill_comp_bias(*pk, p_, a_, wei, bias);
    if (u8_bound_.clamp_bias) bound_bias(pk->bias);
    return pk;
}

void conv_dw_row_kernel::execute(const impl::packed &w, const void *src, void *dst, const exec_args &args) const {
    const conv_desc &d = p_.desc;
    dw_exec e(p_, a_, pc_, !direct_ && !row_copy_, w, src, dst, args);
    const int64_t span = (d.kh - 1) * d.dh + 1; // source rows of one output row
    const int64_t copy_row = pc_.cols * pc_.cpad;
    std::atomic<bool> failed{false};
    // Work: (image, row, group of channel blocks); one group per row unless
    // the rows are too few for the threads. Unfused: one block per call.
    int64_t groups = 1;
    if (!fused_) groups = n_ob_;
    else if (e.threads > 1) groups = std::min<int64_t>(n_ob_, (4 * e.threads + d.mb * d.oh - 1) / (d.mb * d.oh));
    const int64_t per_group = (n_ob_ + groups - 1) / groups;
    // Row units: pairs of output rows (pair mode; an odd last row alone) or rows.
    const int64_t units = pair_ ? (d.oh + 1) / 2 : d.oh;
    const int64_t work = d.mb * units * groups;
    // The source copy (if any), every thread done with it, then the convolution.
    std::function<void(int, int)> copy;
    if (e.buf)
        copy = [&](int ithr, int nthr) {
            impl::for_range(d.mb * pc_.rows, ithr, nthr, [&](int64_t nr) { pc_.row(e.src, e.buf, nr); });
        };
    impl::parallel_phases(e.threads, copy, [&](int ithr, int nthr) {
        uint8_t *rows = nullptr; // row copy: this thread's padded rows of one output row
        if (row_copy_) {
            rows = impl::try_thread_scratch(impl::scratch_use::dw_row_copy, static_cast<size_t>(span * copy_row + 64));
            if (!rows) failed.store(true, std::memory_order_relaxed);
        }
        std::vector<int32_t> rowacc(fused_ ? 0 : static_cast<size_t>(d.ow * nb_ * 16 + 16));
        int64_t it_b, it_e;
        impl::balance(work, ithr, nthr, it_b, it_e);
        for (int64_t it = it_b; it < it_e; ++it) {
            const int64_t g = it % groups;
            const int64_t unit = (it / groups) % units;
            const int64_t n = it / groups / units;
            const int64_t oh = pair_ ? 2 * unit : unit;
            const bool two = pair_ && oh + 1 < d.oh;
            const int64_t b0 = g * per_group, b1 = std::min(n_ob_, b0 + per_group);
            if (b0 >= b1 || (row_copy_ && !rows)) continue;
            const int64_t c0 = b0 * nb_ * 16;
            dw_call call{};
            if (direct_) {
                // The row origin (oh·sh − pt, −pl) may lie in the padding; the
                // kernel reads only offsets inside the image.
                const int64_t o = ((n * d.ih + oh * d.sh - d.pt) * d.iw - d.pl) * c_ + c0;
                call.src = reinterpret_cast<const uint8_t *>(reinterpret_cast<uintptr_t>(e.src) + o);
            } else if (row_copy_) {
                // The channels of this item's blocks only (several groups split a row).
                const int64_t c1 = b1 == n_ob_ ? pc_.cpad : b1 * nb_ * 16;
                for (int64_t r = 0; r < span; ++r) pc_.row_into(e.src, rows + r * copy_row, n, oh * d.sh + r, c0, c1);
                call.src = rows + c0;
            } else {
                call.src = e.buf + (n * pc_.rows + oh * d.sh) * copy_row + c0;
            }
            call.wei = reinterpret_cast<const int8_t *>(two ? e.pk.wei8_pair.data() + b0 * pair_wbytes_
                                                            : e.pk.wei8.data() + b0 * blk_wbytes_);
            call.comp = (native_ ? e.pk.comp_nat.data() : e.pk.comp.data()) + c0;
            call.bias = e.bias ? (native_ ? e.pk.bias_nat.data() : e.bias) + c0 : nullptr;
            call.c_off = c0 * 4;
            call.acc = rowacc.data();
            const int64_t off0 = (n * d.oh + oh) * d.ow * c_ + c0;
            call.dst = static_cast<uint8_t *>(dst) + off0 * e.dst_bytes;
            for (size_t f = 0; f < e.full_idx.size() && f < max_fused_full; ++f)
                call.full[f] = args.binary[e.full_idx[f]] + off0;
            call.n_full = std::max<int64_t>(0, std::min(b1, n_full_) - b0);
            call.last = tail_ && b1 == n_ob_ ? 1 : 0;
            (two ? fns_pair_[unit] : fns_[oh])(&call);
            if (fused_) continue;
            tile t;
            t.acc = rowacc.data();
            t.acc_stride = nb_ * 16;
            t.npix = static_cast<int>(d.ow);
            t.c0 = c0;
            t.nc = static_cast<int>(std::min<int64_t>(nb_ * 16, c_ - c0));
            t.dst_off0 = off0;
            run_pipeline_avx512(pipe_, t, e.pk.comp.data(), e.bias, dst, args);
        }
    });
    if (failed.load()) throw std::bad_alloc();
}

} // namespace

std::shared_ptr<const impl::conv_kernel> make_dw_row_kernel(const conv_problem &p, const attr_set &a,
                                                            const rows_geometry &g) {
    return std::make_shared<conv_dw_row_kernel>(p, a, g);
}

} // namespace qconv::jit::dw
