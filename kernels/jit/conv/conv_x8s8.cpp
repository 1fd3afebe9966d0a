// The dense JIT rows (jit:conv_x8s8:<isa>): the int8 direct convolution
// (u8/s8 source, s8 weights) built from a JIT accumulation micro-kernel
// (conv_ukernel.h) and a vectorised output pipeline: the kernel object (weight
// packing, source padding, threading), the family's checks and its row.
//
// Design
//  * Source NHWC. A padded source on VNNI (ICg a multiple of 4, ≤ 64 taps)
//    is read in place ("direct"): each pixel block's micro-kernel knows
//    which (pixel, tap) pairs fall into the padding and skips them; with a
//    zero point or an s8 source the skipped taps' Σ w·v (v = zp + shift) is
//    added back per pixel from correction rows computed at pack(), so the
//    int32 sums equal the padded copy's. Otherwise, when the convolution has
//    padding, or ICg is not a multiple of 4, or the ISA widens the source,
//    execute() first builds a padded copy of the source (in a buffer kept
//    per calling thread) with every group's channels rounded up to 4: padded
//    pixels hold pad_byte() = zp + shift (shift = 128 for an s8 source, 0
//    for u8; zp 0 without a zero point); padded channels hold 0 (their
//    weights are 0). The micro-kernel then needs no boundary logic.
//  * Exactness of the padding scheme: the kernel sums w·(x + shift) over
//    *all* taps of the padded source (an s8 x is read as the u8 x + 128),
//    and comp[c] = −Σ_all w·(zp + shift) (int32, computed once at pack() by
//    core/compensation.h: zp_compensation() plus −128·Σw for s8) is added, so a padded
//    tap contributes w·(zp + shift) − w·(zp + shift) = 0 and a valid tap
//    w·(x − zp), for u8 and s8 sources, with or without a zero point.
//    Sums are int32 with wrap-around, so the result equals the reference's
//    int32 value whenever that value is representable.
//  * Weights are packed at pack() per (group, OC block of nb vectors) as
//    [kh][kw][ICg/4][oc lanes·nb][4 ic] bytes, the vpdpbusd operand layout
//    (VNNI), or pre-widened to s16 as [kh][kw][ICg/4][pair][oc][2] for the
//    vpmaddwd variants (avx512_core, avx2; their source copy is u16). With
//    up to 64 taps the order is [ICg/4][kh][kw]...: the micro-kernel runs
//    one ICg/4 loop with every tap unrolled inside (partial sums stay in
//    registers over the whole KH·KW·ICg reduction).
//    OCg is padded to the lane count and ICg to 4 with zeros.
//  * The micro-kernel computes ur_w output pixels × nb·16 channels in
//    registers and writes the int32 tile; the output pipeline (docs/semantics.md §4:
//    acc·scale + bias → lowered post-ops in order → + dst_zp → store with
//    round-half-to-even and saturation) then runs on that tile in L1.
//  * 1x1 stride-1 unpadded convolutions are run as one long row (a GEMM
//    with rows = output pixels), short rows (OW < 16) as one pixel list;
//    such lists are cut into the fewest blocks of ≤ ur_w pixels, sizes
//    differing by at most one.
//  * Threads split (mb, group, OC block, row, row chunk); every output is
//    computed by the same code whatever the thread count, so results are
//    identical for any number of threads.
//  * avx2 (no VNNI) has two variants, chosen when the weights are packed:
//    the widened one (vpmaddwd on u16 / s16, exact for every weight) and
//    avx2_pairs (the VNNI byte layout, vpmaddubsw + vpmaddwd: half the
//    vector adds), exact where no pair of weights that vpmaddubsw sums in 16
//    bits can overflow them for any u8 source (pairs_cannot_overflow).
#include "kernels/jit/conv/conv_rows.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "core/buffers.h"
#include "core/compensation.h"
#include "core/parallel.h"
#include "kernels/jit/base/conv_pipeline.h"
#include "kernels/jit/conv/conv_x8s8_plan.h"

namespace qconv::jit {
namespace {

// Three-channel pixels (first layers) widened to four bytes, the fourth 0,
// XORed with `flip` (0x80 per channel for s8 sources): four pixels per
// 16-byte shuffle while 18 source bytes remain (the load never passes the
// run), the rest one by one. Every CPU the kernels run on has SSSE3.
__attribute__((target("ssse3"))) void widen3to4(const uint8_t *x, uint8_t *o, int64_t n, uint8_t flip) {
    const __m128i shuf = _mm_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1);
    const __m128i fl = _mm_set1_epi32(static_cast<int>(uint32_t(flip) * 0x010101u));
    int64_t k = 0;
    for (; k + 6 <= n; k += 4) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(x + 3 * k));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(o + 4 * k), _mm_xor_si128(_mm_shuffle_epi8(v, shuf), fl));
    }
    for (; k < n; ++k) {
        const uint32_t v = (uint32_t(x[3 * k]) | uint32_t(x[3 * k + 1]) << 8 | uint32_t(x[3 * k + 2]) << 16) ^
                           (uint32_t(flip) * 0x010101u);
        std::memcpy(o + 4 * k, &v, 4);
    }
}

struct jit_packed : impl::packed {
    explicit jit_packed(size_t bytes) : wei(impl::alloc_aligned<int8_t>(bytes)) {}
    impl::aligned_buffer<int8_t> wei; // zeroed
    std::vector<int32_t> comp;        // OC + padding
    std::vector<int32_t> corr;        // direct mode: [mask][OC + padding] = Σ over the mask's missing taps of w·v
    std::vector<float> bias;          // OC + padding (empty without bias)
};

class conv_x8s8_kernel : public impl::conv_kernel {
public:
    conv_x8s8_kernel(conv_isa isa, const conv_problem &p, const attr_set &a, const conv_knobs &k,
                     const conv_geometry &g)
        : isa_(isa), p_(p), a_(a), knobs_(k), pipe_(pipeline::build(p, a)), run_pipe_(pipeline_for(isa)), g_(g),
          u8_bound_(bounded_u8_store(pipe_, g.icg * g.kh * g.kw)) {
        plan_padding();
        plan_row_classes();
        for (int k = 0; k < 2; ++k) {
            plan_blocks(k);
            if (k == 0) plan_prefetch_next();
            compile_blocks(k);
        }
    }

    std::shared_ptr<const impl::packed> pack(const int8_t *wei, const float *bias) const override;
    void execute(const impl::packed &w, const void *src, void *dst, const exec_args &args) const override;

private:
    // The builder: what the plan (conv_x8s8_plan.h) implies for this kernel.
    void plan_padding();       // the value of a padded source pixel
    void plan_row_classes();   // direct mode: rows sharing their valid kernel rows
    void plan_blocks(int k);   // pixel blocks and thread chunks of OC-block kind k
    void plan_prefetch_next(); // lines of the next OC block each 4-IC step prefetches
    void compile_blocks(int k);
    // Valid taps (bit kh·KW + kw) of output pixel (oh, ow) (direct mode).
    uint64_t tap_bits(int64_t oh, int64_t ow) const;
    conv_ukernel_cfg ukernel_cfg(int u, int nb, int last_n, int col0, const std::vector<uint64_t> &masks) const;
    template <typename T>
    void make_padded_source_t(const void *src, T *buf, int ithr, int nthr) const;
    void make_padded_source(const void *src, uint8_t *buf, int ithr, int nthr) const;

    conv_isa isa_;
    conv_problem p_;
    attr_set a_;
    conv_knobs knobs_;
    pipeline pipe_;
    pipeline_fn run_pipe_; // the unfused pipeline body of this ISA
    conv_geometry g_;
    // (ur_w, nb, last_n, start column or −1) → micro-kernel
    // (+ valid-tap masks per pixel in direct mode)
    std::map<std::tuple<int, int, int, int, std::vector<uint64_t>>, std::unique_ptr<conv_ukernel>> kernels_;
    // Pixel blocks of a row (or of the pixel list) for one OC-block kind:
    // block i covers [start[i], start[i+1]) and runs fn[i]; chunk c (one work
    // item) covers blocks [chunk[c], chunk[c+1]).
    struct block_schedule {
        std::vector<int64_t> start, chunk;
        std::vector<std::vector<conv_ukernel_fn>> fn; // [row class][block]
    };
    std::vector<int> row_cls_;         // row class of each iterated output row (direct mode)
    std::vector<uint64_t> cls_mask_;   // valid kernel rows of each row class
    std::vector<uint64_t> corr_masks_; // direct mode with a nonzero pad value: masks with a correction row
    block_schedule bp_[2];             // full OC block, last OC block
    int64_t n_chunks_ = 1;
    int pf_lines_ = 0;     // conv_ukernel_cfg::prefetch_next_lines
    int64_t pf_slice_ = 0; // bytes of the next block one call prefetches
    // How one execution's items are grouped and split over its threads.
    struct work_split {
        int64_t n_chunks = 1;
        bool regrouped = false;        // chunks below, else the block plans' own
        std::vector<int64_t> chunk[2]; // block boundaries of each row's chunks, per OC block kind
        std::vector<int64_t> prefix;   // cost before each item (empty: the static split by count)
        void range(int64_t work, int ithr, int nthr, int64_t &b, int64_t &e) const;
        // Item r's OC block and chunk, r left at its row (image, group, output
        // row). Regrouped, chunks vary fastest: a thread's range then covers
        // few OC blocks, and streams only their weights (at 7x7 the weights
        // are most of the bytes).
        void decode(int64_t &r, int64_t n_ob, int64_t &ob, int64_t &ck) const {
            if (regrouped) {
                ck = r % n_chunks, r /= n_chunks;
                ob = r % n_ob, r /= n_ob;
            } else {
                ob = r % n_ob, r /= n_ob;
                ck = r % n_chunks, r /= n_chunks;
            }
        }
    };
    work_split split_work(int threads) const;
    // Whether the packed u8 stores skip min(255, y), and whether pack() then
    // lowers a bias above 2^30 to 2^30 (bounded_u8_store(), conv_pipeline.h).
    u8_store_bound u8_bound_;
    std::vector<uint16_t> pad_pixel_; // one padded source pixel (cs elements)
    std::vector<uint8_t> pad_bytes8_; // the same as bytes (u8 copies)
    bool pad_zero_ = true;            // every element of the padded pixel is 0
    template <typename T>
    void fill_padding(T *px, int64_t n) const; // n padded pixels
};

void conv_x8s8_kernel::plan_padding() {
    const conv_geometry &g = g_;
    // The value of a padded source pixel: zp bytes, 0x80 (s8) or 0; padded channels 0.
    // Direct mode: the value a skipped tap stands for (see corr in pack()).
    pad_pixel_.assign(static_cast<size_t>(g.cs), 0);
    if (g.copy || g.direct)
        for (int64_t gr = 0; gr < g.g; ++gr)
            for (int64_t ic = 0; ic < g.icg; ++ic) {
                pad_pixel_[gr * g.icg4 + ic] = pad_byte(p_, a_, gr * g.icg + ic);
            }
    pad_bytes8_.assign(pad_pixel_.begin(), pad_pixel_.end());
    pad_zero_ = std::all_of(pad_pixel_.begin(), pad_pixel_.end(), [](uint16_t v) { return v == 0; });
}

void conv_x8s8_kernel::plan_row_classes() {
    const conv_geometry &g = g_;
    // Direct mode, row-wise blocking: rows whose valid kernel rows are the
    // same share micro-kernels (row class); otherwise one class.
    row_cls_.assign(static_cast<size_t>(g.oh), 0);
    if (!g.direct || g.list()) return;
    for (int64_t oh = 0; oh < g.oh; ++oh) {
        uint64_t m = 0;
        for (int64_t kh = 0; kh < g.kh; ++kh) {
            const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
            if (ih >= 0 && ih < p_.desc.ih) m |= uint64_t(1) << kh;
        }
        const auto it = std::find(cls_mask_.begin(), cls_mask_.end(), m);
        row_cls_[oh] = static_cast<int>(it - cls_mask_.begin());
        if (it == cls_mask_.end()) cls_mask_.push_back(m);
    }
}

uint64_t conv_x8s8_kernel::tap_bits(int64_t oh, int64_t ow) const {
    const conv_desc &d = p_.desc;
    const conv_geometry &g = g_;
    uint64_t m = 0;
    for (int64_t kh = 0; kh < g.kh; ++kh)
        for (int64_t kw = 0; kw < g.kw; ++kw) {
            const int64_t ih = oh * g.sh - g.pt + kh * g.dh, iw = ow * g.sw - g.pl + kw * g.dw;
            if (ih >= 0 && ih < d.ih && iw >= 0 && iw < d.iw) m |= uint64_t(1) << (kh * g.kw + kw);
        }
    return m;
}

// The tap mask with every tap of the kernel valid.
uint64_t all_taps(const conv_geometry &g) {
    return g.kh * g.kw == 64 ? ~uint64_t(0) : (uint64_t(1) << (g.kh * g.kw)) - 1;
}

// OC-block kinds: the full block (kind 0) and the last one (kind 1), as
// (vectors, valid lanes of the last vector).
std::pair<int, int> oc_block_kind(const conv_geometry &g, int k) {
    const int64_t nvec = g.ocg16 / g.lanes;
    const int last_nb = static_cast<int>(nvec - (g.n_ob - 1) * g.nb_big);
    const int last_lanes = static_cast<int>(g.ocg - (nvec - 1) * g.lanes);
    return k == 0 ? std::pair<int, int>{g.nb_big, g.n_ob > 1 ? g.lanes : last_lanes}
                  : std::pair<int, int>{last_nb, last_lanes};
}

void conv_x8s8_kernel::plan_blocks(int k) {
    const conv_geometry &g = g_;
    // Row-wise blocking: ur-wide blocks and a tail, one chunk per row. One
    // long pixel list (flattened 1x1, short rows): the fewest blocks,
    // balanced (49 = 4·6 + 5·5, not 8·6 + 1: a tiny block still streams all
    // the weights), grouped into chunks of ≥ 32 pixels for the threads.
    block_schedule &bp = bp_[k];
    const int64_t ur = pixels_per_call(g, isa_, knobs_, oc_block_kind(g, k).first, g.ow);
    bp.start.clear();
    if (g.list()) {
        // nblk = ⌈ow / ur⌉ blocks, sizes differing by at most one (≤ ur).
        const int64_t nblk = (g.ow + ur - 1) / ur, base = g.ow / nblk, big = g.ow % nblk;
        for (int64_t i = 0, p = 0; i < nblk; p += i < big ? base + 1 : base, ++i) bp.start.push_back(p);
    } else {
        for (int64_t p = 0; p < g.ow; p += ur) bp.start.push_back(p);
    }
    const int64_t nblk = static_cast<int64_t>(bp.start.size());
    bp.start.push_back(g.ow);
    bp.chunk.assign(1, 0);
    const int64_t n_ch = g.list() ? std::max<int64_t>(1, g.ow / 32) : 1;
    for (int64_t i = 1, c = 1; i < nblk; ++i)
        if (bp.start[i] * n_ch >= c * g.ow) bp.chunk.push_back(i), ++c;
    bp.chunk.push_back(nblk);
    n_chunks_ = std::max<int64_t>(n_chunks_, static_cast<int64_t>(bp.chunk.size()) - 1);
}

// The calls of one work item (an OC block over a chunk of pixel blocks)
// share the next block's weights out: the fewest calls of a chunk times the
// 4-IC steps per call times the lines per step cover the block. A chunk with
// more calls prefetches past the block (into the one after: harmless), one
// with fewer (threads regroup the chunks) leaves the block's end to its first call.
void conv_x8s8_kernel::plan_prefetch_next() {
    const conv_geometry &g = g_;
    if (!g.prefetch_next) return;
    const block_schedule &bp = bp_[0];
    int64_t calls = std::numeric_limits<int64_t>::max();
    for (size_t c = 0; c + 1 < bp.chunk.size(); ++c) calls = std::min(calls, bp.chunk[c + 1] - bp.chunk[c]);
    const int64_t steps = g.icg4 / 4 * (g.taps_inner ? 1 : g.kh * g.kw);
    const int64_t block_lines = g.nb_big * g.lanes * g.weight_bytes_per_oc() / 64;
    pf_lines_ = static_cast<int>(std::min<int64_t>(16, (block_lines + calls * steps - 1) / (calls * steps)));
    pf_slice_ = int64_t(pf_lines_) * 64 * steps;
}

conv_ukernel_cfg conv_x8s8_kernel::ukernel_cfg(int u, int nb, int last_n, int col0,
                                               const std::vector<uint64_t> &masks) const {
    const conv_desc &d = p_.desc;
    const conv_geometry &g = g_;
    conv_ukernel_cfg c;
    if (col0 >= 0)
        for (int w = 0; w < u; ++w) {
            const int64_t q = col0 + w, dr = q / d.ow, col = q % d.ow;
            c.pix_off.push_back((dr * d.sh * g.iw_p + (col - col0) * d.sw) * g.cs * g.es);
        }
    c.isa = isa_;
    c.ur_w = u;
    c.nb = nb;
    c.kh = static_cast<int>(g.kh);
    c.kw = static_cast<int>(g.kw);
    c.ic4 = static_cast<int>(g.icg4 / 4);
    c.pix_stride = g.cs * g.es;
    c.row_stride = g.iw_p * g.cs * g.es;
    c.sw = static_cast<int>(g.sw);
    c.dh = static_cast<int>(g.dh);
    c.dw = static_cast<int>(g.dw);
    c.xor_src = !g.copy && p_.src_dt == dtype::s8;
    c.pipe = g.fused ? &pipe_ : nullptr;
    c.bounded_u8 = u8_bound_.bounded;
    c.last_n = last_n;
    c.taps_inner = g.taps_inner;
    c.tap_mask = masks;
    c.prefetch_bytes = g.prefetch;
    c.prefetch_next_lines = pf_lines_;
    if (!pad_zero_ && !masks.empty()) {
        const uint64_t all = all_taps(g);
        for (uint64_t m : masks)
            c.tap_corr.push_back(m == all ? -1
                                          : static_cast<int>(std::find(corr_masks_.begin(), corr_masks_.end(), m) -
                                                             corr_masks_.begin()));
        c.corr_stride = (d.oc + 16) * 4;
    }
    return c;
}

// The micro-kernel of every pixel block of kind k and row class (shared by
// equal configurations); flat2d compiles one kernel per start column.
void conv_x8s8_kernel::compile_blocks(int k) {
    const conv_desc &d = p_.desc;
    const conv_geometry &g = g_;
    const auto [nb, ln] = oc_block_kind(g, k);
    block_schedule &bp = bp_[k];
    const int64_t nblk = static_cast<int64_t>(bp.start.size()) - 1;
    const int last_n = g.fused ? ln : 16;
    const int n_cls = std::max<int>(1, static_cast<int>(cls_mask_.size()));
    bp.fn.assign(static_cast<size_t>(n_cls), {});
    for (int cl = 0; cl < n_cls; ++cl)
        for (int64_t i = 0; i < nblk; ++i) {
            const int u = static_cast<int>(bp.start[i + 1] - bp.start[i]);
            const int col0 = g.flat2d ? static_cast<int>(bp.start[i] % d.ow) : -1;
            std::vector<uint64_t> masks; // direct mode: valid taps per pixel
            if (g.direct) {
                // A representative row of the class (row-wise) or the block's own pixels (list).
                int64_t oh_r = 0;
                if (!g.list()) oh_r = std::find(row_cls_.begin(), row_cls_.end(), cl) - row_cls_.begin();
                for (int w = 0; w < u; ++w) {
                    const int64_t p = bp.start[i] + w;
                    masks.push_back(g.list() ? tap_bits(p / d.ow, p % d.ow) : tap_bits(oh_r, p));
                }
                const uint64_t all = all_taps(g);
                if (std::all_of(masks.begin(), masks.end(), [&](uint64_t m) { return m == all; })) masks.clear();
                // Zero point / s8 source: a skipped tap must still add w·v (v = the
                // padded value): per-pixel correction rows, one per distinct mask.
                if (!pad_zero_)
                    for (uint64_t m : masks) {
                        if (m == all || std::count(corr_masks_.begin(), corr_masks_.end(), m)) continue;
                        corr_masks_.push_back(m);
                    }
            }
            auto &slot = kernels_[{u, nb, last_n, col0, masks}];
            if (!slot) slot = std::make_unique<conv_ukernel>(ukernel_cfg(u, nb, last_n, col0, masks));
            bp.fn[cl].push_back(slot->fn());
        }
}

std::shared_ptr<const impl::packed> conv_x8s8_kernel::pack(const int8_t *wei, const float *bias) const {
    const conv_desc &d = p_.desc;
    const conv_geometry &g = g_;
    if (!wei) fail("wei", "is null");
    if (p_.with_bias && !bias) fail("bias", "with_bias is set but no bias was given");
    const int64_t per_group = g.group_weight_bytes();
    auto pk = std::make_shared<jit_packed>(static_cast<size_t>(per_group * g.g));
    for (int64_t gr = 0; gr < g.g; ++gr)
        for (int64_t ob = 0; ob < g.n_ob; ++ob) {
            const int64_t oc0 = ob * g.nb_big * g.lanes;
            const int64_t width = std::min<int64_t>(g.nb_big * g.lanes, g.ocg16 - oc0);
            int8_t *blk = pk->wei.get() + gr * per_group + oc0 * g.weight_bytes_per_oc();
            int16_t *blk16 = reinterpret_cast<int16_t *>(blk);
            for (int64_t kh = 0; kh < g.kh; ++kh)
                for (int64_t kw = 0; kw < g.kw; ++kw)
                    for (int64_t i4 = 0; i4 < g.icg4 / 4; ++i4)
                        for (int64_t o = 0; o < width; ++o)
                            for (int64_t j = 0; j < 4; ++j) {
                                const int64_t oc = oc0 + o, ic = i4 * 4 + j;
                                if (oc >= g.ocg || ic >= g.icg) continue;
                                const int64_t src_i = (((gr * g.ocg + oc) * g.icg + ic) * g.kh + kh) * g.kw + kw;
                                const int64_t step = g.taps_inner ? i4 * g.kh * g.kw + kh * g.kw + kw
                                                                  : (kh * g.kw + kw) * (g.icg4 / 4) + i4;
                                if (g.wb == 1) blk[(step * width + o) * 4 + j] = wei[src_i];
                                else // [step][pair][o][2]
                                    blk16[((step * 2 + j / 2) * width + o) * 2 + j % 2] = wei[src_i];
                            }
        }
    pk->comp = shifted_compensation(p_, a_, wei, 16);
    if (!corr_masks_.empty()) {
        // tz[oc][t] = Σ_ic w·v over tap t (uint32: int32 wrap-around, like the kernel's sums).
        const int64_t taps = g.kh * g.kw, stride = d.oc + 16;
        const std::vector<uint32_t> tz = padded_tap_sums(p_, a_, wei);
        pk->corr.assign(static_cast<size_t>(corr_masks_.size() * stride), 0);
        for (size_t m = 0; m < corr_masks_.size(); ++m)
            for (int64_t oc = 0; oc < d.oc; ++oc) {
                uint32_t c = 0;
                for (int64_t t = 0; t < taps; ++t)
                    if (!((corr_masks_[m] >> t) & 1u)) c += tz[oc * taps + t];
                pk->corr[m * stride + oc] = static_cast<int32_t>(c);
            }
    }
    if (p_.with_bias) {
        pk->bias.assign(static_cast<size_t>(d.oc + 16), 0.f);
        std::copy(bias, bias + d.oc, pk->bias.begin());
        if (u8_bound_.clamp_bias) bound_bias(pk->bias);
    }
    return pk;
}

template <typename T>
void conv_x8s8_kernel::fill_padding(T *px, int64_t n) const {
    const size_t bytes = static_cast<size_t>(g_.cs) * sizeof(T);
    if (pad_zero_) {
        std::memset(px, 0, bytes * static_cast<size_t>(n));
        return;
    }
    const uint8_t *pat = sizeof(T) == 1 ? pad_bytes8_.data() : reinterpret_cast<const uint8_t *>(pad_pixel_.data());
    for (int64_t k = 0; k < n; ++k) std::memcpy(reinterpret_cast<uint8_t *>(px) + k * bytes, pat, bytes);
}

template <typename T>
void conv_x8s8_kernel::make_padded_source_t(const void *src, T *buf, int ithr, int nthr) const {
    const conv_desc &d = p_.desc;
    const conv_geometry &g = g_;
    const uint8_t flip = p_.src_dt == dtype::s8 ? 0x80 : 0x00; // s8 x → u8 x + 128
    const uint8_t *s = static_cast<const uint8_t *>(src);
    // Thread ithr's share of the (image, row) pairs (a region of its own before the convolution's).
    int64_t k0, k1;
    impl::balance(g.mb * g.cp_rows, ithr, nthr, k0, k1);
    for (int64_t k = k0; k < k1; ++k) {
        {
            const int64_t n = k / g.cp_rows, r = k % g.cp_rows;
            T *row = buf + (n * g.cp_rows + r) * g.cp_cols * g.cs;
            const int64_t ih = r * g.step_h - d.pt;
            // Runs of consecutive source pixels (one pixel when subsampling).
            const int64_t max_run = g.step_w == 1 ? g.cp_cols : 1;
            for (int64_t col = 0; col < g.cp_cols; ++col) {
                T *px = row + col * g.cs;
                const int64_t iw = col * g.step_w - d.pl;
                if (ih < 0 || ih >= d.ih || iw < 0 || iw >= d.iw) {
                    // A run of padded pixels: whole row, or up to the first valid column.
                    const int64_t run = ih < 0 || ih >= d.ih ? g.cp_cols - col
                                        : iw < 0             ? std::min(-iw, g.cp_cols - col)
                                                             : g.cp_cols - col;
                    fill_padding(px, run);
                    col += run - 1;
                    continue;
                }
                const uint8_t *x = s + ((n * d.ih + ih) * d.iw + iw) * d.ic;
                if (sizeof(T) == 1 && g.cs == 4 && g.icg < 4) {
                    // One group of 1..3 channels (first layers): one dword per pixel.
                    const int64_t run = std::min({d.iw - iw, g.cp_cols - col, max_run});
                    if (g.icg == 3) {
                        widen3to4(x, reinterpret_cast<uint8_t *>(px), run, flip);
                        col += run - 1;
                        continue;
                    }
                    uint32_t fl = 0;
                    for (int64_t ic = 0; ic < g.icg; ++ic) fl |= uint32_t(flip) << (8 * ic);
                    for (int64_t k = 0; k < run; ++k) {
                        const uint8_t *xk = x + k * g.icg;
                        uint32_t v = xk[0];
                        if (g.icg > 1) v |= uint32_t(xk[1]) << 8;
                        if (g.icg > 2) v |= uint32_t(xk[2]) << 16;
                        v ^= fl;
                        std::memcpy(px + k * 4, &v, 4);
                    }
                    col += run - 1;
                    continue;
                }
                if (sizeof(T) == 1 && !flip && g.icg4 == g.icg) {
                    // Same layout: the whole valid run of this row in one copy.
                    const int64_t run = std::min({d.iw - iw, g.cp_cols - col, max_run});
                    std::memcpy(px, x, static_cast<size_t>(run * d.ic));
                    col += run - 1;
                    continue;
                }
                for (int64_t gr = 0; gr < g.g; ++gr) {
                    T *o = px + gr * g.icg4;
                    const uint8_t *xi = x + gr * g.icg;
                    if (sizeof(T) == 1 && !flip) std::memcpy(o, xi, static_cast<size_t>(g.icg));
                    else
                        for (int64_t ic = 0; ic < g.icg; ++ic) o[ic] = static_cast<T>(xi[ic] ^ flip);
                    for (int64_t ic = g.icg; ic < g.icg4; ++ic) o[ic] = 0;
                }
            }
        }
    }
}

void conv_x8s8_kernel::make_padded_source(const void *src, uint8_t *buf, int ithr, int nthr) const {
    if (g_.es == 1) make_padded_source_t<uint8_t>(src, buf, ithr, nthr);
    else make_padded_source_t<uint16_t>(src, reinterpret_cast<uint16_t *>(buf), ithr, nthr);
}

// The split of one execution's items over its threads. Items are (image,
// group, output row, chunk of a row's pixel blocks, OC block), OC blocks
// fastest. With many items per thread the static split by count is balanced.
// With few (mb1 1x1 layers at 7x7 and 14x14: one chunk per row, OC blocks of
// 4, 4 and 2 vectors at OC 160) it is not: a thread of two got 8 of the 10
// vectors. Then each row's blocks are regrouped into more chunks (a chunk is
// any run of blocks: the micro-kernels are per block, nothing is compiled)
// and threads take contiguous ranges of equal cost (vectors × pixels), the
// chunks of an OC block side by side (see decode()). Every
// output is computed by the same block kernel whatever the grouping, so the
// bytes do not depend on it.
conv_x8s8_kernel::work_split conv_x8s8_kernel::split_work(int threads) const {
    const conv_geometry &g = g_;
    work_split ws;
    ws.n_chunks = n_chunks_;
    const int64_t rows = g.mb * g.g * g.n_ob * g.oh;
    constexpr int64_t per_thread = 8; // items per thread below which the split is by cost
    if (threads <= 1 || rows * n_chunks_ >= per_thread * threads) return ws;
    int64_t nblk = 1;
    for (const block_schedule &bp : bp_) nblk = std::max<int64_t>(nblk, static_cast<int64_t>(bp.start.size()) - 1);
    ws.n_chunks = std::max(n_chunks_, std::min(nblk, (per_thread * threads + rows - 1) / rows));
    ws.regrouped = true;
    for (int k = 0; k < 2; ++k) {
        const int64_t nb_k = static_cast<int64_t>(bp_[k].start.size()) - 1, c = std::min(ws.n_chunks, nb_k);
        ws.chunk[k].clear();
        for (int64_t j = 0; j <= c; ++j) ws.chunk[k].push_back(j * nb_k / c);
    }
    const int64_t nvec = g.ocg16 / g.lanes;
    const int64_t work = rows * ws.n_chunks;
    ws.prefix.assign(static_cast<size_t>(work + 1), 0);
    for (int64_t it = 0; it < work; ++it) {
        int64_t r = it, ob, ck;
        ws.decode(r, g.n_ob, ob, ck);
        const int k = ob == g.n_ob - 1 ? 1 : 0;
        const std::vector<int64_t> &ch = ws.chunk[k];
        int64_t cost = 0;
        if (ck + 1 < static_cast<int64_t>(ch.size())) {
            const int64_t nb = std::min<int64_t>(g.nb_big, nvec - ob * g.nb_big);
            const std::vector<int64_t> &st = bp_[k].start;
            cost = nb * (st[static_cast<size_t>(ch[static_cast<size_t>(ck + 1)])] -
                         st[static_cast<size_t>(ch[static_cast<size_t>(ck)])]);
        }
        ws.prefix[static_cast<size_t>(it + 1)] = ws.prefix[static_cast<size_t>(it)] + cost;
    }
    return ws;
}

void conv_x8s8_kernel::work_split::range(int64_t work, int ithr, int nthr, int64_t &b, int64_t &e) const {
    if (prefix.empty()) return impl::balance(work, ithr, nthr, b, e);
    // Thread t starts at the item boundary nearest to t/nthr of the cost.
    const int64_t total = prefix.back();
    auto bound = [&](int t) -> int64_t {
        if (t <= 0) return 0;
        if (t >= nthr) return work;
        const int64_t target = total * t / nthr;
        int64_t i = std::lower_bound(prefix.begin(), prefix.end(), target) - prefix.begin();
        if (i > 0 && target - prefix[static_cast<size_t>(i - 1)] < prefix[static_cast<size_t>(i)] - target) --i;
        return std::min(i, work);
    };
    b = bound(ithr);
    e = std::max(b, bound(ithr + 1));
}

void conv_x8s8_kernel::execute(const impl::packed &w, const void *src, void *dst, const exec_args &args) const {
    const conv_desc &d = p_.desc;
    const conv_geometry &g = g_;
    const auto &pk = dynamic_cast<const jit_packed &>(w);
    const int threads = impl::resolve_threads(args.threads);

    const uint8_t *view = static_cast<const uint8_t *>(src);
    uint8_t *pad_buf = nullptr;
    if (g.copy) {
        pad_buf = impl::thread_scratch(impl::scratch_use::dense_copy,
                                       static_cast<size_t>(g.mb * g.cp_rows * g.cp_cols * g.cs * g.es + 64));
        view = pad_buf;
    }
    const int64_t per_group = g.group_weight_bytes();
    const int64_t nvec = g.ocg16 / g.lanes;
    const work_split ws = split_work(threads);
    const int64_t n_chunks = ws.n_chunks;
    const int64_t work = g.mb * g.g * g.n_ob * g.oh * n_chunks;
    const int32_t *comp = pk.comp.data();
    const float *bias = p_.with_bias ? pk.bias.data() : nullptr;
    const int64_t dst_bytes = p_.dst_dt == dtype::f32 || p_.dst_dt == dtype::s32 ? 4 : 1;
    std::vector<int> full_idx; // exec_args::binary index of each full operand, chain order
    for (const auto &op : a_.ops)
        if (op.k == lowered_op::kind::binary && op.bcast == broadcast::full) full_idx.push_back(op.full_index);

    // The source copy (if any), every thread done with it, then the convolution.
    std::function<void(int, int)> copy;
    if (g.copy) copy = [&](int ithr, int nthr) { make_padded_source(src, pad_buf, ithr, nthr); };
    impl::parallel_phases(threads, copy, [&](int ithr, int nthr) {
        alignas(64) int32_t acc[25 * 16 + 16];
        conv_call call{}; // every field the item or the block uses is set below
        call.acc = acc;
        call.corr = pk.corr.empty() ? nullptr : pk.corr.data();
        int64_t it0, it1;
        ws.range(work, ithr, nthr, it0, it1);
        for (int64_t it = it0; it < it1; ++it) {
            // By count: OC blocks vary fastest (the full and the last, smaller,
            // block of a chunk side by side: a static split gives every thread
            // the same mix, and the chunk's source stays in cache between
            // them). By cost: chunks fastest (split_work()).
            int64_t r = it, ob, ck;
            ws.decode(r, g.n_ob, ob, ck);
            const int64_t oh = r % g.oh;
            r /= g.oh;
            const int64_t gr = r % g.g;
            const int64_t n = r / g.g;
            const int64_t oc0 = ob * g.nb_big * g.lanes;
            const int nb = static_cast<int>(std::min<int64_t>(g.nb_big, nvec - ob * g.nb_big));
            const int nc = static_cast<int>(std::min<int64_t>(nb * g.lanes, g.ocg - oc0));
            const int8_t *wblk = pk.wei.get() + gr * per_group + oc0 * g.weight_bytes_per_oc();
            const bool last_block = ob == g.n_ob - 1;
            const block_schedule &bp = bp_[last_block ? 1 : 0];
            const std::vector<int64_t> &chunk = ws.regrouped ? ws.chunk[last_block ? 1 : 0] : bp.chunk;
            if (ck + 1 >= static_cast<int64_t>(chunk.size())) continue; // this kind has fewer chunks
            // Byte offset of output row oh's tap (0, 0) source; direct mode
            // starts at (−pt, −pl), so offsets may point before the buffer
            // (those taps are never read).
            const int64_t row_off =
                ((n * g.ih_p + oh * g.sh - g.pt) * g.iw_p * g.cs - g.pl * g.cs + gr * (g.copy ? g.icg4 : g.icg)) * g.es;
            const auto *fns = bp.fn[static_cast<size_t>(row_cls_[oh])].data();
            call.wei = wblk;
            // The weights the calls of this item prefetch: the next OC block,
            // or the next group's first (after the last: this block again).
            const int8_t *next_blk = wblk;
            if (ob + 1 < g.n_ob) next_blk = wblk + g.nb_big * g.lanes * g.weight_bytes_per_oc();
            else if (gr + 1 < g.g) next_blk = pk.wei.get() + (gr + 1) * per_group;
            call.comp = comp + gr * g.ocg + oc0;
            call.bias = bias ? bias + gr * g.ocg + oc0 : nullptr;
            call.c_off = (gr * g.ocg + oc0) * 4;
            for (int64_t i = chunk[ck]; i < chunk[ck + 1]; ++i) {
                const int64_t ow = bp.start[i];
                const int u = static_cast<int>(bp.start[i + 1] - ow);
                int64_t src_off;
                if (g.flat2d) { // pixel index ow → (row, column) of the image
                    const int64_t orow = ow / g.ow_real, col0 = ow % g.ow_real;
                    src_off = ((n * g.ih_p + orow * g.sh - g.pt) * g.iw_p * g.cs + (col0 * g.sw - g.pl) * g.cs +
                               gr * (g.copy ? g.icg4 : g.icg)) *
                              g.es;
                } else {
                    src_off = row_off + ow * g.sw * g.cs * g.es;
                }
                call.src = reinterpret_cast<const uint8_t *>(reinterpret_cast<uintptr_t>(view) + src_off);
                call.pf = next_blk + (i - chunk[ck]) * pf_slice_;
                const int64_t off0 = ((n * g.oh + oh) * g.ow + ow) * d.oc + gr * g.ocg + oc0;
                if (g.fused) {
                    call.dst = static_cast<uint8_t *>(dst) + off0 * dst_bytes;
                    for (size_t f = 0; f < full_idx.size(); ++f) call.full[f] = args.binary[full_idx[f]] + off0;
                    fns[i](&call);
                    continue;
                }
                fns[i](&call);
                tile t;
                t.acc = acc;
                t.acc_stride = nb * g.lanes;
                t.npix = u;
                t.c0 = gr * g.ocg + oc0;
                t.nc = nc;
                t.dst_off0 = ((n * g.oh + oh) * g.ow + ow) * d.oc + t.c0;
                run_pipe_(pipe_, t, comp, bias, dst, args);
            }
        }
    });
}

// Packed weights of the avx2 row: the variant's own and which variant.
struct avx2_packed : impl::packed {
    std::shared_ptr<const impl::packed> inner;
    std::shared_ptr<const impl::conv_kernel> kernel;
};

// The avx2 row's kernel: the widened kernel, and the avx2_pairs kernel
// (compiled on the first weights that pass the check), one of the two per
// packed weights. Both return the reference's int32 sums for those weights.
class conv_avx2_kernel : public impl::conv_kernel {
public:
    conv_avx2_kernel(const conv_problem &p, const attr_set &a, const conv_plan &wide)
        : p_(p), a_(a), pairs_plan_(wide.pairs_variant),
          wide_(std::make_shared<conv_x8s8_kernel>(wide.isa, p, a, wide.knobs, *wide.detail_as<conv_geometry>())) {}
    std::shared_ptr<const impl::packed> pack(const int8_t *wei, const float *bias) const override {
        auto pk = std::make_shared<avx2_packed>();
        pk->kernel = wide_;
        if (pairs_plan_ && pairs_cannot_overflow(p_.desc, wei)) {
            std::call_once(pairs_once_, [&] {
                pairs_ = std::make_shared<conv_x8s8_kernel>(pairs_plan_->isa, p_, a_, pairs_plan_->knobs,
                                                            *pairs_plan_->detail_as<conv_geometry>());
            });
            pk->kernel = pairs_;
        }
        pk->inner = pk->kernel->pack(wei, bias);
        return pk;
    }
    void execute(const impl::packed &w, const void *src, void *dst, const exec_args &args) const override {
        const auto &pk = static_cast<const avx2_packed &>(w);
        pk.kernel->execute(*pk.inner, src, dst, args);
    }

private:
    conv_problem p_;
    attr_set a_;
    std::shared_ptr<const conv_plan> pairs_plan_;
    std::shared_ptr<const impl::conv_kernel> wide_;
    mutable std::once_flag pairs_once_;
    mutable std::shared_ptr<const impl::conv_kernel> pairs_;
};

} // namespace

// Whether vpmaddubsw's 16-bit sums x₁w₁ + x₂w₂ stay exact for every u8 x₁, x₂
// (the kernels' source bytes: u8, an s8 source shifted by 128, zero points
// and padding alike) with the weights as avx2_pairs packs them: the IC pairs
// (0, 1), (2, 3) of each 4-IC step, ICg padded with zeros, per output channel
// and tap. 255 · 128 = 32640 ≤ 32767 and 255 · −128 ≥ −32768, while 255 · 129
// overflows: so max(w₁, 0) + max(w₂, 0) ≤ 128 and min(w₁, 0) + min(w₂, 0) ≥ −128.
bool pairs_cannot_overflow(const conv_desc &d, const int8_t *wei) {
    const int64_t icg = d.icg(), taps = d.kh * d.kw;
    for (int64_t oc = 0; oc < d.oc; ++oc)
        for (int64_t ic = 0; ic < icg; ic += 2)
            for (int64_t t = 0; t < taps; ++t) {
                const int w1 = wei[(oc * icg + ic) * taps + t];
                const int w2 = ic + 1 < icg ? wei[(oc * icg + ic + 1) * taps + t] : 0;
                if (std::max(w1, 0) + std::max(w2, 0) > 128 || std::min(w1, 0) + std::min(w2, 0) < -128) return false;
            }
    return true;
}

bool conv_supports(conv_isa i, bool only_1x1, const conv_problem &p, const attr_set &a, std::string *why) {
    using impl::reject;
    const conv_desc &d = p.desc;
    if (only_1x1 && (d.kh != 1 || d.kw != 1)) return reject(why, "kernel is not 1x1");
    if (p.src_dt != dtype::u8 && p.src_dt != dtype::s8) return reject(why, "source must be u8 or s8");
    if (p.dst_dt != dtype::u8 && p.dst_dt != dtype::s8 && p.dst_dt != dtype::s32 && p.dst_dt != dtype::f32)
        return reject(why, std::string("destination ") + to_string(p.dst_dt) + " not supported");
    switch (a.zp) {
    case zp_mechanism::none: break;
    case zp_mechanism::stock_per_tensor:
        return reject(why, "stock per-tensor zero point is served as legacy per-channel (attr[0])");
    case zp_mechanism::legacy_per_channel:
        // Padded taps hold the zero point as a source value (pad_byte).
        if (!zp_fits_padding(p, a, why)) return false;
        break;
    }
    if (!pipeline::takes(a, why)) return false;
    // Register blocking and address displacements are 32-bit.
    const int64_t icg4 = rnd_up(d.icg(), 4);
    if (d.ic * d.iw * d.sw * 32 > (int64_t(1) << 30) || d.kw > 64 || icg4 / 4 > (int64_t(1) << 30))
        return reject(why, "source row too large for 32-bit displacements");
    return true;
}

std::shared_ptr<const impl::conv_kernel> conv_create(const conv_problem &p, const attr_set &a, const conv_plan &pl) {
    const conv_geometry *g = pl.detail_as<conv_geometry>();
    if (!g) fail("plan", "a dense plan carries the dense rows' geometry (conv_dense_plan)");
    if (pl.pairs_variant) return std::make_shared<conv_avx2_kernel>(p, a, pl);
    return std::make_shared<conv_x8s8_kernel>(pl.isa, p, a, pl.knobs, *g);
}

std::shared_ptr<const conv_plan> conv_dense_plan(conv_isa i, const conv_problem &p, const attr_set &a,
                                                 const conv_knobs &k) {
    auto pl = conv_plan::make(i, conv_plan::kind::dense, k);
    pl->detail = std::make_shared<const conv_geometry>(plan_geometry(i, p, a, k));
    if (i == conv_isa::avx2 && k.pairs) pl->pairs_variant = conv_dense_plan(conv_isa::avx2_pairs, p, a, k);
    return pl;
}

impl::conv_entry conv_row(const std::string &name, conv_isa i) {
    return jit_conv_entry(
        name, std::string("jit:conv_x8s8:") + to_string(i), i, conv_plan::kind::dense,
        [i](const conv_problem &p, const attr_set &a, const impl::platform &, std::string *why) {
            if (!conv_supports(i, false, p, a, why)) return impl::plan_ptr();
            return impl::plan_ptr(conv_dense_plan(i, p, a, conv_knobs::from_env()));
        },
        [](const conv_problem &p, const attr_set &a, const impl::plan &pl) {
            return conv_create(p, a, dynamic_cast<const conv_plan &>(pl));
        });
}

} // namespace qconv::jit
