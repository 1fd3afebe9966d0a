// The fused 1x1 → 3x3 depthwise convolution (post_op::kind::dw_conv) on the
// JIT kernels of both halves (docs/jit_conv.md, "The fused depthwise item").
//
// Design
//  * split_dw() cuts the problem into the 1x1 and the depthwise; each half
//    runs on the existing kernels of the row's ISA (conv_x8s8 dense for the
//    1x1, conv_dw_x8s8 for the depthwise), built for *bands* of rows instead
//    of whole images, so nothing new is generated and both halves keep their
//    zero-point mechanisms, post-ops and exactness.
//  * Work items are (image, band of `band` depthwise output rows). For a band
//    the depthwise needs intermediate rows [r0·s − 1, (r0 + n − 1)·s + 1]
//    (clipped to the image). They live in a per-thread ring: the rows the
//    previous band of the same image already computed (2 at stride 1, 1 at
//    stride 2) are moved to its front, the 1x1 kernel writes the rest after
//    them (a 1x1 stride-1 unpadded convolution of k rows is one call over k
//    contiguous source rows), then the depthwise kernel runs over the ring
//    with top padding only in the first band. The intermediate is never
//    written whole: a ring holds (band − 1)·s + 3 rows.
//  * Kernels are built at creation for every row count a band can need (the
//    first, steady and last bands, from scratch or continuing), a handful per
//    problem; pack() packs the weights of each.
//  * Threads take contiguous ranges of work items; a range starts a band
//    from scratch. Every intermediate and output value is computed by the
//    same exact arithmetic whatever the split, so the bytes are identical for
//    any thread count.

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/buffers.h"
#include "core/dw_fusion.h"
#include "core/parallel.h"
#include "kernels/jit/conv/conv_rows.h"

namespace qconv::jit {
namespace {

// The depthwise half's problem of a band: (ring rows, output rows, first band).
using dw_key = std::tuple<int64_t, int64_t, bool>;

// What the row decides in supports(): the band, and the plan of every
// problem a band can run — the 1x1 over k rows (from scratch, or after the
// previous band) and the depthwise over a band's ring rows — which the
// kernel builds without deciding again.
struct fused_plan : impl::plan {
    conv_isa isa = conv_isa::avx2;
    conv_knobs knobs;
    int band = 0;                                           // depthwise output rows per band
    std::map<int64_t, std::shared_ptr<const conv_plan>> pw; // 1x1 rows → its plan
    std::map<dw_key, std::shared_ptr<const conv_plan>> dw;  // band problem → its plan
    // "1x1_dw:avx2 band=34 pw=2 dw=2 1x1=<the first 1x1 plan> dw=<the first depthwise plan>".
    std::string str() const override {
        std::string s = std::string("1x1_dw:") + to_string(isa) + " band=" + std::to_string(band) +
                        " pw=" + std::to_string(pw.size()) + " dw=" + std::to_string(dw.size());
        if (!pw.empty()) s += " [1x1 " + pw.begin()->second->str() + "]";
        if (!dw.empty()) s += " [dw " + dw.begin()->second->str() + "]";
        return s;
    }
};

// Rows of the intermediate a band [r0, r0 + n) of depthwise output rows reads.
struct band_rows {
    int64_t lo, hi;
};
band_rows rows_of(int64_t r0, int64_t n, int64_t s, int64_t h) {
    return {std::max<int64_t>(0, r0 * s - 1), std::min<int64_t>(h, (r0 + n - 1) * s + 2)};
}

// The 1x1 over k contiguous rows of one image.
conv_problem pw_rows(const conv_problem &pw, int64_t k) {
    conv_problem q = pw;
    q.desc.mb = 1;
    q.desc.ih = q.desc.oh = k;
    q.desc.pb = 0;
    q.desc.name.clear();
    return q;
}

// The depthwise over `rows` ring rows producing n output rows, with top
// padding iff the band is the image's first.
conv_problem dw_rows(const conv_problem &dw, int64_t rows, int64_t n, bool first) {
    conv_problem q = dw;
    conv_desc &d = q.desc;
    d.mb = 1;
    d.ih = rows;
    d.oh = n;
    d.pt = first ? 1 : 0;
    d.pb = (n - 1) * d.sh + 3 - rows - d.pt;
    d.name.clear();
    return q;
}

int default_band(const conv_problem &p, int s, const conv_knobs &k) {
    if (k.dw_band > 0) return k.dw_band;
    // About 256 KiB of ring: 34 rows of the MobileNet blocks at stride 1, 17
    // at stride 2. Each band costs two kernel calls, which cost about what the
    // ring saves: bands of 2, 8, 16 and whole images measured 0.91, 0.98,
    // 1.01, 0.98x the composite at stride 1, bands of 4, 8, 16, 32 at stride 2
    // 0.95, 0.98, 1.00, 1.00x (docs/perf_log.md, issue #27).
    const int64_t row = p.desc.ow * p.desc.oc;
    const int64_t rows = std::max<int64_t>(3, (256 << 10) / std::max<int64_t>(1, row));
    return static_cast<int>(std::max<int64_t>(1, (rows - 3) / s + 1));
}

struct fused_packed : impl::packed {
    std::vector<std::shared_ptr<const impl::packed>> pw, dw; // one per kernel, in the kernels' order
};

class fused_kernel : public impl::conv_kernel {
public:
    fused_kernel(const conv_problem &p, const attr_set &a, const fused_plan &pl) : h_(split_dw(p)), band_(pl.band) {
        split_dw(a, &a1_, &a2_);
        s_ = h_.dw.desc.sh;
        H_ = h_.pw.desc.oh;
        OH_ = h_.dw.desc.oh;
        n_bands_ = (OH_ + band_ - 1) / band_;
        row_bytes_ = h_.pw.desc.ow * h_.pw.desc.oc;
        for (const auto &[k, plan] : pl.pw) {
            pw_idx_[k] = pw_k_.size();
            pw_k_.push_back(conv_create(pw_rows(h_.pw, k), a1_, *plan));
        }
        for (const auto &[key, plan] : pl.dw) {
            dw_idx_[key] = dw_k_.size();
            const auto &[rows, n, first] = key;
            dw_k_.push_back(conv_dw_create(dw_rows(h_.dw, rows, n, first), a2_, *plan));
        }
        max_rows_ = (band_ - 1) * s_ + 3;
    }

    std::shared_ptr<const impl::packed> pack(const int8_t *wei, const float *bias) const override {
        auto pk = std::make_shared<fused_packed>();
        for (const auto &k : pw_k_) pk->pw.push_back(k->pack(wei, bias));
        const float *db = h_.dw_bias.empty() ? nullptr : h_.dw_bias.data();
        for (const auto &k : dw_k_) pk->dw.push_back(k->pack(h_.dw_wei.data(), db));
        return pk;
    }

    void execute(const impl::packed &w, const void *src, void *dst, const exec_args &args) const override {
        const auto &pk = static_cast<const fused_packed &>(w);
        const conv_desc &pd = h_.pw.desc, &dd = h_.dw.desc;
        const int64_t work = pd.mb * n_bands_;
        const int threads = static_cast<int>(std::min<int64_t>(work, impl::resolve_threads(args.threads)));
        const int64_t src_row = pd.iw * pd.ic; // bytes (u8/s8)
        const int64_t dst_es = h_.dw.dst_dt == dtype::f32 || h_.dw.dst_dt == dtype::s32 ? 4 : 1;
        const int64_t out_row = dd.ow * dd.oc; // elements
        std::vector<int> full_idx;
        for (const auto &op : a2_.ops)
            if (op.k == lowered_op::kind::binary && op.bcast == broadcast::full) full_idx.push_back(op.full_index);
        impl::parallel(threads, [&](int ithr, int nthr) {
            const int64_t t = ithr, nt = nthr;
            const int64_t w0 = work * t / nt, w1 = work * (t + 1) / nt;
            uint8_t *ring =
                impl::thread_scratch(impl::scratch_use::dw_ring, static_cast<size_t>(max_rows_ * row_bytes_ + 64));
            exec_args one;
            one.threads = 1;
            exec_args two;
            two.threads = 1;
            two.binary.assign(args.binary.size(), nullptr);
            band_rows have{0, 0}; // intermediate rows in the ring, of image have_n
            int64_t have_n = -1;
            for (int64_t it = w0; it < w1; ++it) {
                const int64_t n = it / n_bands_, b = it % n_bands_;
                const int64_t r0 = b * band_, nr = std::min<int64_t>(band_, OH_ - r0);
                const band_rows need = rows_of(r0, nr, s_, H_);
                int64_t kept = 0;
                if (have_n == n && have.hi > need.lo && have.lo <= need.lo) {
                    kept = have.hi - need.lo;
                    std::memmove(ring, ring + (need.lo - have.lo) * row_bytes_, static_cast<size_t>(kept * row_bytes_));
                }
                const int64_t k = need.hi - need.lo - kept;
                if (k > 0) {
                    const size_t i = pw_idx_.at(k);
                    const auto *s = static_cast<const uint8_t *>(src) + ((n * pd.ih) + need.lo + kept) * src_row;
                    pw_k_[i]->execute(*pk.pw[i], s, ring + kept * row_bytes_, one);
                }
                have = need;
                have_n = n;
                const size_t j = dw_idx_.at(std::make_tuple(need.hi - need.lo, nr, b == 0));
                const int64_t out_off = (n * OH_ + r0) * out_row;
                for (size_t f = 0; f < full_idx.size(); ++f) {
                    const auto fi = static_cast<size_t>(full_idx[f]);
                    two.binary[fi] = args.binary[fi] + out_off;
                }
                dw_k_[j]->execute(*pk.dw[j], ring, static_cast<uint8_t *>(dst) + out_off * dst_es, two);
            }
        });
    }

private:
    dw_halves h_;
    attr_set a1_, a2_;
    int64_t band_, s_ = 1, H_ = 0, OH_ = 0, n_bands_ = 0, row_bytes_ = 0, max_rows_ = 0;
    std::vector<std::shared_ptr<const impl::conv_kernel>> pw_k_, dw_k_;
    std::map<int64_t, size_t> pw_idx_;
    std::map<dw_key, size_t> dw_idx_;
};

// The two halves of a problem and its attribute set.
struct halves {
    dw_halves h;
    attr_set a1, a2;
};

// Whether the row takes (p, a); its halves in *out.
bool fused_supports(conv_isa i, const conv_problem &p, const attr_set &a, const conv_knobs &k, halves *out,
                    std::string *why) {
    using impl::reject;
    const post_op *item = p.dw();
    if (!item) return reject(why, "no fused dw conv item");
    if (p.desc.sh != 1 || p.desc.sw != 1) return reject(why, "the 1x1 is strided (the composite row takes it)");
    out->h = split_dw(p);
    split_dw(a, &out->a1, &out->a2);
    if (!conv_supports(i, true, out->h.pw, out->a1, why)) return false;
    // The depthwise over a band: its shape and chain are the whole one's.
    if (!conv_dw_supports(i, false, out->h.dw, out->a2, k, why)) return false;
    return true;
}

// The plan: the band, then every band's problems, each planned once.
std::shared_ptr<fused_plan> plan_bands(conv_isa i, const conv_problem &p, const halves &hv, const conv_knobs &k) {
    auto pl = std::make_shared<fused_plan>();
    pl->isa = i;
    pl->knobs = k;
    pl->band = default_band(p, p.dw()->dw_stride, k);
    const dw_halves &h = hv.h;
    const attr_set &a1 = hv.a1, &a2 = hv.a2;
    const int64_t s = h.dw.desc.sh, H = h.pw.desc.oh, OH = h.dw.desc.oh, band = pl->band;
    auto add_pw = [&](int64_t rows) {
        if (rows > 0 && !pl->pw.count(rows)) pl->pw[rows] = conv_dense_plan(i, pw_rows(h.pw, rows), a1, k);
    };
    // Every row count a band can need: from scratch, or after the previous band.
    for (int64_t r0 = 0; r0 < OH; r0 += band) {
        const int64_t n = std::min<int64_t>(band, OH - r0);
        const band_rows cur = rows_of(r0, n, s, H);
        add_pw(cur.hi - cur.lo);
        if (r0 > 0) add_pw(cur.hi - std::max(rows_of(r0 - band, band, s, H).hi, cur.lo));
        const dw_key key{cur.hi - cur.lo, n, r0 == 0};
        if (!pl->dw.count(key)) pl->dw[key] = conv_dw_plan(i, dw_rows(h.dw, cur.hi - cur.lo, n, r0 == 0), a2, k);
    }
    return pl;
}

} // namespace

impl::conv_entry conv_1x1_dw_row(const std::string &name, conv_isa i) {
    const std::string canonical = std::string("jit:conv_1x1_dw_x8s8:") + to_string(i);
    impl::conv_entry e = impl::named_entry<impl::conv_entry>(name, canonical, impl::row_family::jit);
    e.only_1x1 = true;
    e.only_dw_item = true;
    e.needs = required_features(i);
    e.decide = [i](const conv_problem &p, const attr_set &a, const impl::platform &,
                   std::string *why) -> impl::plan_ptr {
        const conv_knobs k = conv_knobs::from_env();
        halves hv;
        if (!fused_supports(i, p, a, k, &hv, why)) return nullptr;
        return plan_bands(i, p, hv, k);
    };
    // With AVX-512 the composite row's halves run on the zmm rows (and AMX),
    // faster than both halves on ymm here (docs/perf_log.md, issue #27).
    e.defer = [](const conv_problem &, const attr_set &, const impl::platform &pl, const impl::plan &) -> std::string {
        return pl.has(impl::cpu_feature::avx512_core) ? "AVX-512: the composite row's halves on the zmm rows are faster"
                                                      : "";
    };
    e.build = [](const conv_problem &p, const attr_set &a,
                 const impl::plan &pl) -> std::shared_ptr<const impl::conv_kernel> {
        return std::make_shared<fused_kernel>(p, a, dynamic_cast<const fused_plan &>(pl));
    };
    return e;
}

} // namespace qconv::jit
