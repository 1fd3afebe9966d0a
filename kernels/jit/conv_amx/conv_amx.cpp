// The AMX int8 conv kernel object: the source view (in place, padded copy or
// gathered copy), weight packing into VNNI-4 B tiles, the per-OC
// compensation, threading, the output pipeline, supports() and the row
// (design in conv_amx.h and docs/jit_conv_amx.md).
#include "kernels/jit/conv_amx/conv_amx.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "core/buffers.h"
#include "core/compensation.h"
#include "core/parallel.h"
#include "kernels/jit/base/conv_pipeline.h"

namespace qconv::jit {
namespace {

constexpr const char *row_name = "jit:conv_x8s8:avx512_core_amx";
constexpr int blk = 32; // pixels and channels per micro-kernel call

int64_t div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Short copies of the source views (a pixel's channels, a kernel row of a
// window): 64-byte moves, the last one masked (masked-out bytes are neither
// read nor written). The row needs AVX-512 BW.
__attribute__((target("avx512f,avx512bw"))) inline void copy_n(uint8_t *d, const uint8_t *s, int64_t n) {
    for (; n >= 64; n -= 64, d += 64, s += 64) _mm512_storeu_si512(d, _mm512_loadu_si512(s));
    if (n > 0) {
        const __mmask64 m = ~uint64_t(0) >> (64 - n);
        _mm512_mask_storeu_epi8(d, m, _mm512_maskz_loadu_epi8(m, s));
    }
}
__attribute__((target("avx512f,avx512bw"))) inline void zero_n(uint8_t *d, int64_t n) {
    const __m512i z = _mm512_setzero_si512();
    for (; n >= 64; n -= 64, d += 64) _mm512_storeu_si512(d, z);
    if (n > 0) _mm512_mask_storeu_epi8(d, ~uint64_t(0) >> (64 - n), z);
}

// One B tile row: 16 channels (stride bytes apart from x) × 4 consecutive
// bytes each; the tail form zero-fills channels ≥ channels and bytes ≥ bytes.
__attribute__((target("avx512f"))) inline void gather_tile_row(const int8_t *x, int64_t stride, int8_t *out) {
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(static_cast<int32_t>(stride)));
    _mm512_storeu_si512(out, _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), 0xFFFF, idx, x, 1));
}
inline void tile_row_tail(const int8_t *x, int64_t stride, int64_t channels, int64_t bytes, int8_t *out) {
    for (int64_t o = 0; o < 16; ++o)
        for (int64_t j = 0; j < 4; ++j) out[o * 4 + j] = o < channels && j < bytes ? x[o * stride + j] : int8_t(0);
}

enum class view_kind { in_place, padded, gathered };
const char *to_string(view_kind v) {
    return v == view_kind::in_place ? "in_place" : v == view_kind::padded ? "padded" : "gathered";
}

// Everything derived from the descriptor that the kernel needs.
struct amx_geometry {
    view_kind view = view_kind::padded;
    int64_t mb = 1, g = 1, icg = 1, ocg = 1;
    int64_t taps = 1;       // taps iterated by the micro-kernel (KH·KW; 1 when gathered)
    int64_t kt = 1;         // reduction bytes per tap (ICg; KH·KW·ICg when gathered)
    int kc = 64, nk = 1;    // K chunk bytes, chunks per tap
    int64_t ps = 64;        // bytes per pixel of the view
    int64_t hb = 0, wb = 0; // rows and columns of a padded copy's plane
    // Phase planes of a strided padded copy: plane (a, b) holds the padded
    // pixels at rows ≡ a (mod ph_h) and columns ≡ b (mod ph_w), so that every
    // tap reads 32 consecutive pixels of one plane (1 × 1: the plain copy).
    int64_t ph_h = 1, ph_w = 1;
    // Row taps (small ICg under a KxK kernel, KW·ICg ≤ 64): the padded copy
    // keeps the source's pixels (ps = ICg) in the SH row-phase planes, a tap
    // is a whole kernel row (its KW·ICg bytes are consecutive in the copy),
    // and consecutive output pixels are SW copy pixels apart (pstep).
    bool row_taps = false;
    int64_t pstep = 1;  // copy pixels between consecutive virtual pixels
    int64_t vw = 0;     // virtual pixels per output row (padded views; columns ≥ OW not stored)
    int64_t img_px = 0; // pixels per (image, group) of a copy, slack included
    int64_t q = 0;      // virtual output pixels per image
    int64_t nq = 0, nob = 0;
    std::vector<int64_t> tap_off;
    // K ranges (choose_k_ranges): nr ranges of nkr chunks; a work unit is
    // `group` pixel blocks × one OC block, its blocks' C kept in buffers
    // between the ranges. nr = 1: a work item is one block with its whole K.
    int nr = 1, nkr = 0, group = 1;
    int64_t nqg = 0; // pixel-block groups per (image, group)
    // Packed weight bytes of one K chunk of an OC block: every tap's two B
    // tiles of kc/4 rows × 64 bytes.
    int64_t b_chunk() const { return taps * 2 * (int64_t(kc) / 4 * 64); }
    // Weight bytes of one group: OCg channels over every tap's K chunks.
    int64_t group_weight_bytes() const { return ocg * taps * nk * kc; }
};

amx_geometry make_geometry(const conv_desc &d, const conv_knobs &k) {
    amx_geometry g;
    g.mb = d.mb;
    g.g = d.g;
    g.icg = d.icg();
    g.ocg = d.ocg();
    const int64_t taps = d.kh * d.kw;
    const int64_t rows = (d.oh - 1) * d.sh + d.kh_extent(), cols = (d.ow - 1) * d.sw + d.kw_extent();
    const bool padded = d.pt > 0 || d.pl > 0 || rows > d.ih || cols > d.iw;
    const bool strided = d.sh > 1 || d.sw > 1;
    // Small channel counts under a KxK kernel (conv1) and strided 1x1 gather
    // each window into one row so that the taps fill K. A strided KxK with
    // wider channels runs on a copy split into the strides' phase planes:
    // each input pixel copied once (a gathered window repeats it in up to
    // KH·KW rows) and the taps' source rows shared by neighbouring pixels.
    const bool small_ic = taps > 1 && g.icg < 32;
    const bool phased = strided && taps > 1 && !small_ic && k.amx_phases;
    g.row_taps = small_ic && d.dw == 1 && d.kw * g.icg <= 64 && k.amx_row_taps;
    const bool gather = !g.row_taps && (small_ic || (strided && !phased));
    g.kt = gather ? taps * g.icg : g.row_taps ? d.kw * g.icg : g.icg;
    g.kc = static_cast<int>(g.kt <= 64 ? rnd_up(g.kt, 4) : 64);
    g.nk = static_cast<int>(div_up(g.kt, g.kc));
    const bool in_place = !gather && taps == 1 && !padded && g.kt % g.kc == 0;
    g.view = gather ? view_kind::gathered : in_place ? view_kind::in_place : view_kind::padded;
    g.taps = gather ? 1 : g.row_taps ? d.kh : taps;
    g.ps = in_place ? d.ic : g.row_taps ? g.icg : rnd_up(int64_t(g.nk) * g.kc, 64);
    if (g.view == view_kind::padded) {
        // Output pixel (oh, ow) reads, for tap (kh, kw), padded pixel
        // (oh·SH + kh·DH, ow·SW + kw·DW): in plane (kh·DH mod SH, kw·DW mod
        // SW), pixel (oh + kh·DH / SH, ow + kw·DW / SW). Stride 1: one plane.
        // Row taps split the rows only: tap kh is the KW·ICg bytes from
        // column ow·SW of row oh + kh·DH / SH of plane kh·DH mod SH. Their
        // plane rows are whole padded rows, a multiple of SW pixels, so
        // virtual pixel q = oh·vw + j is copy pixel q·SW of the plane (pstep);
        // the tile's K bytes past KW·ICg are the next pixels' (weights 0).
        g.ph_h = phased || g.row_taps ? d.sh : 1;
        g.ph_w = phased ? d.sw : 1;
        g.pstep = g.row_taps ? d.sw : 1;
        g.hb = (d.oh - 1) + (d.kh - 1) * d.dh / g.ph_h + 1;
        g.wb = g.row_taps ? rnd_up((d.ow - 1) * d.sw + d.kw, d.sw) : (d.ow - 1) + (d.kw - 1) * d.dw / g.ph_w + 1;
        g.vw = g.wb / g.pstep;
        g.q = (d.oh - 1) * g.vw + d.ow;
        const int64_t plane_px = g.hb * g.wb;
        // Blocks past q read up to blk − 1 virtual pixels beyond the last
        // one, row taps kc bytes more.
        g.img_px = g.ph_h * g.ph_w * plane_px + blk * g.pstep + (g.row_taps ? g.kc : 0);
        const int64_t kw_taps = g.row_taps ? 1 : d.kw; // a row tap is the whole kernel row
        for (int64_t kh = 0; kh < d.kh; ++kh)
            for (int64_t kw = 0; kw < kw_taps; ++kw) {
                const int64_t rh = kh * d.dh, rw = kw * d.dw, plane = rh % g.ph_h * g.ph_w + rw % g.ph_w;
                g.tap_off.push_back((plane * plane_px + rh / g.ph_h * g.wb + rw / g.ph_w) * g.ps);
            }
    } else {
        g.q = d.oh * d.ow;
        g.img_px = rnd_up(g.q, blk);
        g.tap_off.push_back(0);
    }
    g.nq = div_up(g.q, blk);
    g.nob = div_up(g.ocg, blk);
    g.nkr = g.nk;
    g.nqg = g.nq;
    return g;
}

// K ranges. A block's tile products read its OC block's weights over the
// whole K (nk chunks × taps × two B tiles) and its source rows. Where those
// and the C tiles exceed what L1 keeps, the next block read the weights from
// L2 again (the memory model: 1000-1300 bytes from L2 per tdpbusd on
// ResNet-50's 3x3 layers with ICg ≥ 128 and its K ≥ 1024 1x1 layers). Split
// into ranges whose weights, one block's source rows and one C buffer fit
// `amx_l1_kib` (below), a range's weights serve the `amx_group` pixel blocks of a
// unit from L1, each block's C tiles saved to and reloaded from its 4 KiB
// buffer between the ranges.
constexpr int max_group = 8;
void choose_k_ranges(amx_geometry &g, const conv_knobs &k) {
    // Not in place unless amx_l1_kib is given: there (1x1, K ≥ 1024) the
    // model gains (res4b_branch2a 37 → 46-53 % of the peak at 24 KiB) but the
    // 16-core AMX Xeon measured the ranges slower (0.160 → 0.183 ms and 0.176
    // → 0.207 ms on ResNet-50's K = 1024 and 2048 layers, two rounds each;
    // docs/jit_conv_amx.md).
    if (!k.amx_k_ranges || g.nk < 2 || (g.view == view_kind::in_place && !k.amx_l1_kib)) return;
    // One chunk of a block's source rows: 32 pixels, and with the padded
    // view, per phase plane, the pixels its taps reach beyond them.
    int64_t a_rows = blk;
    if (g.view == view_kind::padded) {
        const int64_t plane_bytes = g.hb * g.wb * g.ps;
        std::vector<int64_t> lo(static_cast<size_t>(g.ph_h * g.ph_w), -1), hi(lo.size(), -1);
        for (int64_t off : g.tap_off) {
            const size_t pl = static_cast<size_t>(off / plane_bytes);
            lo[pl] = lo[pl] < 0 ? off : std::min(lo[pl], off);
            hi[pl] = std::max(hi[pl], off);
        }
        a_rows = 0;
        for (size_t pl = 0; pl < lo.size(); ++pl)
            if (lo[pl] >= 0) a_rows += blk + (hi[pl] - lo[pl]) / g.ps;
    }
    // Ranges where the whole K exceeds the L1 budget (36 KiB by default).
    const int64_t per_chunk = g.b_chunk() + a_rows * g.kc, c_bytes = blk * blk * 4;
    const int64_t budget = int64_t(k.amx_l1_kib ? k.amx_l1_kib : 36) * 1024 - c_bytes;
    if (g.nk * per_chunk <= budget) return;
    const int64_t per = std::max<int64_t>(1, budget / per_chunk);
    g.nr = static_cast<int>(div_up(g.nk, per));
    g.nkr = static_cast<int>(div_up(g.nk, g.nr)); // ranges of equal size
    g.nr = static_cast<int>(div_up(g.nk, g.nkr));
    g.group =
        static_cast<int>(std::clamp<int64_t>(k.amx_group ? k.amx_group : 4, 1, std::min<int64_t>(max_group, g.nq)));
    g.nqg = div_up(g.nq, g.group);
}

// A thread's copies of pixel blocks (gathered view, the in-place tail): a
// ring of slots, each with the block it holds (−1: none), found by key. A
// batch of calls touches at most batch distinct blocks and a new copy never
// goes to a slot the batch reads; twice as many slots keep recent blocks
// (pixel blocks alternating under the OC blocks) without copying them again.
constexpr int batch = 8, ring_slots = 2 * batch;
struct block_ring {
    uint8_t *b = nullptr; // the thread's scratch
    int64_t slot_bytes = 0;
    int64_t key[ring_slots];
    block_ring() { std::fill(key, key + ring_slots, int64_t(-1)); }
    int cur = 0;
    uint32_t in_use = 0; // slots the current batch reads
};

struct amx_packed : impl::packed {
    explicit amx_packed(size_t bytes) : wei(impl::alloc_aligned<uint8_t>(bytes)) {}
    impl::aligned_buffer<uint8_t> wei; // zeroed
    std::vector<int32_t> comp;         // OC + 32: −Σ zp·w
    std::vector<float> bias;           // OC + 16 (empty without bias)
};

// What the row decides in supports() and the kernel is built from: the
// geometry, the knobs, whether the output pipeline runs inside the tile
// kernel and the order of the work items.
struct amx_plan : impl::plan {
    amx_geometry g;
    conv_knobs knobs;
    bool fused = false;
    bool qb_inner = false; // pixel blocks innermost (the group's weights outweigh its source)
    int64_t prefetch = 0;  // bytes ahead the K loop prefetches the weights (weight_prefetch_bytes)
    // "amx:padded kc=64x4 k_ranges=4x1 group=4 order=pixels_inner pipeline=fused knobs=default".
    std::string str() const override {
        return std::string("amx:") + to_string(g.view) + (g.row_taps ? " row_taps" : "") +
               (g.ph_h * g.ph_w > 1 ? " phases=" + std::to_string(g.ph_h) + "x" + std::to_string(g.ph_w)
                                    : std::string()) +
               " kc=" + std::to_string(g.kc) + "x" + std::to_string(g.nk) +
               (g.nr > 1 ? " k_ranges=" + std::to_string(g.nr) + "x" + std::to_string(g.nkr) +
                               " group=" + std::to_string(g.group)
                         : std::string()) +
               " order=" + (qb_inner ? "pixels_inner" : "oc_inner") + " pipeline=" + (fused ? "fused" : "tile") +
               (prefetch ? " prefetch=" + std::to_string(prefetch) : std::string()) + " knobs=" + knobs.str();
    }
};

// The packed weights of a layer come from L3 or memory the first time a
// network runs through them (the whole network's weights outgrow L2), and a
// tile load of B stalls on that stream: the K loop then prefetches the weights
// 4 KiB (two K chunks of 64 bytes) ahead of its B tile loads. Measured over the
// QDQ ResNet-50 in the network (1 thread, AMX Xeon): layers with 128 KiB of
// weights or more 1.1–1.5× faster (res5's 3x3 1.32×), those below 5–13 %
// slower (weights that stay in L1/L2 across the pixel blocks: the prefetches
// only take issue slots), so the default prefetches from 128 KiB of weights
// per group on. QCONV_JIT_CONV_AMX_PREFETCH=N: N KiB ahead always (0: never).
int64_t weight_prefetch_bytes(const amx_geometry &g, const conv_knobs &k) {
    if (k.amx_prefetch >= 0) return int64_t(k.amx_prefetch) * 1024;
    return g.group_weight_bytes() >= 128 * 1024 ? 4096 : 0;
}

class conv_amx_kernel : public impl::conv_kernel {
public:
    conv_amx_kernel(const conv_problem &p, const attr_set &a, const amx_plan &pl)
        : p_(p), a_(a), pipe_(pipeline::build(p, a)), g_(pl.g), fused_(pl.fused), qb_inner_(pl.qb_inner) {
        pipe_.comp_is_zero = a.zp == zp_mechanism::none; // tdpbssd reads s8 as is: no +128 shift, no comp
        u8_bound_ = bounded_u8_store(pipe_, p.desc.ic / p.desc.g * p.desc.kh * p.desc.kw);
        amx_ukernel_cfg c;
        c.tap_off = g_.tap_off;
        c.nk = g_.nk;
        c.kc = g_.kc;
        c.s8_src = p.src_dt == dtype::s8;
        c.pipe = fused_ ? &pipe_ : nullptr;
        c.dst_pixel_elems = p.desc.oc;
        c.k_ranges = g_.nr > 1;
        c.hoist = pl.knobs.amx_hoist;
        c.prefetch_bytes = pl.prefetch;
        c.pack_u8 = fused_ && p.dst_dt == dtype::u8 && (pl.knobs.amx_pack < 0 ? u8_bound_.bounded : pl.knobs.amx_pack);
        c.bounded_u8 = c.pack_u8 && u8_bound_.bounded;
        ukernel_ = std::make_unique<amx_ukernel>(c);
        make_pad_pixels();
        make_pixel_table();
        for (const auto &op : a_.ops)
            if (op.k == lowered_op::kind::binary && op.bcast == broadcast::full) full_idx_.push_back(op.full_index);
    }

    std::shared_ptr<const impl::packed> pack(const int8_t *wei, const float *bias) const override;
    void execute(const impl::packed &w, const void *src, void *dst, const exec_args &args) const override;

private:
    void make_pad_pixels();
    void build_padded(const uint8_t *src, uint8_t *buf, int ithr, int nthr) const;
    void gather_block(const uint8_t *src, int64_t n, int64_t gr, int64_t q0, uint8_t *out) const;
    void tail_block(const uint8_t *a, int64_t q0, uint8_t *out) const;
    const uint8_t *block_source(const uint8_t *view, const uint8_t *src, int64_t n, int64_t gr, int64_t qb,
                                block_ring &ring, int64_t *stride) const;
    struct item;
    void prepare_call(const amx_packed &pk, const uint8_t *view, const uint8_t *src, const item &w, block_ring &ring,
                      amx_call &call, int64_t *rows, void *dst, const exec_args &args) const;
    void run_range(const amx_packed &pk, const uint8_t *view, const uint8_t *src, int64_t begin, int64_t end, void *dst,
                   const exec_args &args) const;
    block_ring thread_ring() const;
    void run_units(const amx_packed &pk, const uint8_t *view, const uint8_t *src, int64_t begin, int64_t end, void *dst,
                   const exec_args &args) const;
    void store(const amx_packed &pk, const int32_t *acc, int64_t n, int64_t gr, int64_t q0, int64_t ob, void *dst,
               const exec_args &args) const;

    void make_pixel_table();
    // Work item it = ((n·G + group)·nq + pixel block)·nob + OC block, or with
    // the pixel block fastest when the group's weights outweigh its source
    // (each OC block's weights then stay in cache over the pixel blocks).
    struct item {
        int64_t n, gr, qb, ob;
    };
    item decode(int64_t it) const {
        const int64_t inner = qb_inner_ ? g_.nq : g_.nob, outer = qb_inner_ ? g_.nob : g_.nq;
        const int64_t i = it % inner, o = it / inner % outer, r = it / (inner * outer);
        return {r / g_.g, r % g_.g, qb_inner_ ? i : o, qb_inner_ ? o : i};
    }
    // K ranges: unit u = ((n·G + group)·nqg + pixel-block group)·nob + OC
    // block, or with the pixel-block group fastest (qb_inner); qb = the
    // group's first block.
    item decode_unit(int64_t u) const {
        const int64_t inner = qb_inner_ ? g_.nqg : g_.nob, outer = qb_inner_ ? g_.nob : g_.nqg;
        const int64_t i = u % inner, o = u / inner % outer, r = u / (inner * outer);
        return {r / g_.g, r % g_.g, (qb_inner_ ? i : o) * g_.group, qb_inner_ ? o : i};
    }

    conv_problem p_;
    attr_set a_;
    pipeline pipe_;
    amx_geometry g_;
    bool fused_ = false;
    bool qb_inner_ = false;
    u8_store_bound u8_bound_; // the packed u8 stores' min(255, y) and pack()'s bias (bounded_u8_store())
    std::unique_ptr<amx_ukernel> ukernel_;
    std::vector<int64_t> pix_;                 // virtual pixel → output pixel of the image, or −1 (+ blk slack)
    std::vector<bool> consecutive_;            // per pixel block: its 32 outputs are consecutive pixels
    std::vector<int> full_idx_;                // exec_args::binary index of each full operand, chain order
    std::vector<std::vector<uint8_t>> pad_px_; // per group: one padded pixel (ps bytes)
};

void conv_amx_kernel::make_pad_pixels() {
    pad_px_.assign(static_cast<size_t>(g_.g), std::vector<uint8_t>(static_cast<size_t>(g_.ps), 0));
    for (int64_t gr = 0; gr < g_.g; ++gr)
        for (int64_t ic = 0; ic < g_.icg; ++ic)
            pad_px_[gr][ic] = static_cast<uint8_t>(source_zp(a_, gr * g_.icg + ic)); // s8: two's complement byte
}

void conv_amx_kernel::make_pixel_table() {
    const conv_desc &d = p_.desc;
    pix_.assign(static_cast<size_t>(g_.nq * blk), -1);
    for (int64_t q = 0; q < g_.q; ++q) {
        if (g_.view != view_kind::padded) pix_[q] = q;
        else if (q % g_.vw < d.ow) pix_[q] = q / g_.vw * d.ow + q % g_.vw;
    }
    consecutive_.assign(static_cast<size_t>(g_.nq), false);
    for (int64_t qb = 0; qb < g_.nq; ++qb) {
        const int64_t *px = pix_.data() + qb * blk;
        bool c = px[0] >= 0;
        for (int i = 1; i < blk && c; ++i) c = px[i] == px[0] + i;
        consecutive_[static_cast<size_t>(qb)] = c;
    }
}

// Weights as [group][OC block][chunk][tap][OC half][kc/4][16 OC][4 K bytes].
std::shared_ptr<const impl::packed> conv_amx_kernel::pack(const int8_t *wei, const float *bias) const {
    const conv_desc &d = p_.desc;
    const amx_geometry &g = g_;
    if (!wei) fail("wei", "is null");
    if (p_.with_bias && !bias) fail("bias", "with_bias is set but no bias was given");
    const int64_t per_ob = int64_t(g.nk) * g.b_chunk();
    auto pk = std::make_shared<amx_packed>(static_cast<size_t>(g.g * g.nob * per_ob));
    // Weights as [G·OCg][tap][ICg] (taps outer: a tap's k, and a gathered
    // window's k = tap·ICg + ic, consecutive; the user's layout when KH·KW = 1),
    // then written in the packed order: each B tile row is 16 channels × 4
    // consecutive k, one 4-byte move per channel where the 4 k exist.
    const int64_t khkw = d.kh * d.kw, blocks = g.g * g.nob, per_oc = g.icg * khkw;
    std::vector<int8_t> tap_major;
    const int8_t *w = wei;
    if (khkw > 1) {
        tap_major.resize(static_cast<size_t>(d.oc * per_oc));
        impl::parallel_for(
            d.oc,
            [&](int64_t oc) {
                for (int64_t tap = 0; tap < khkw; ++tap)
                    for (int64_t ic = 0; ic < g.icg; ++ic)
                        tap_major[oc * per_oc + tap * g.icg + ic] = wei[oc * per_oc + ic * khkw + tap];
            },
            d.oc * per_oc > (1 << 16));
        w = tap_major.data();
    }
    impl::parallel_for(
        blocks,
        [&](int64_t it) {
            const int64_t gr = it / g.nob, ob = it % g.nob;
            auto *out = reinterpret_cast<int8_t *>(pk->wei.get() + it * per_ob);
            for (int64_t chunk = 0; chunk < g.nk; ++chunk)
                for (int64_t t = 0; t < g.taps; ++t)
                    for (int64_t h = 0; h < 2; ++h)
                        for (int64_t r = 0; r < g.kc / 4; ++r, out += 64) {
                            const int64_t oc0 = ob * blk + h * 16, k0 = chunk * g.kc + r * 4;
                            const int8_t *x = w + (gr * g.ocg + std::min(oc0, g.ocg - 1)) * per_oc + t * g.kt + k0;
                            if (oc0 + 16 <= g.ocg && k0 + 4 <= g.kt && per_oc < (int64_t(1) << 27))
                                gather_tile_row(x, per_oc, out);
                            else tile_row_tail(x, per_oc, g.ocg - oc0, g.kt - k0, out);
                        }
        },
        blocks > 1 && g.g * g.ocg * g.kt * g.taps > (1 << 16));
    pk->comp.assign(static_cast<size_t>(d.oc + blk), 0); // a block reads 32 values
    if (a_.zp != zp_mechanism::none) {
        const std::vector<int32_t> c = zp_compensation(d, wei, a_.zp_values);
        std::copy(c.begin(), c.end(), pk->comp.begin());
    }
    if (p_.with_bias) {
        pk->bias.assign(static_cast<size_t>(d.oc + 16), 0.f);
        std::copy(bias, bias + d.oc, pk->bias.begin());
        if (u8_bound_.clamp_bias) bound_bias(pk->bias);
    }
    return pk;
}

// Padded copy, one (image, group, plane row) per work item: thread ithr's
// share (a region of its own before the convolution's).
__attribute__((target("avx512f,avx512bw"))) void conv_amx_kernel::build_padded(const uint8_t *src, uint8_t *buf,
                                                                               int ithr, int nthr) const {
    const conv_desc &d = p_.desc;
    const amx_geometry &g = g_;
    const size_t ps = static_cast<size_t>(g.ps), icg = static_cast<size_t>(g.icg);
    const int64_t planes = g.ph_h * g.ph_w, plane_px = g.hb * g.wb, rows = planes * g.hb;
    int64_t k0, k1;
    impl::balance(g.mb * g.g * rows, ithr, nthr, k0, k1);
    for (int64_t k = k0; k < k1; ++k) {
        const int64_t n = k / (g.g * rows), gr = k / rows % g.g, pr = k % rows;
        const int64_t plane = pr / g.hb, i = pr % g.hb, a = plane / g.ph_w, b = plane % g.ph_w;
        uint8_t *img = buf + (n * g.g + gr) * g.img_px * g.ps;
        uint8_t *row = img + (plane * plane_px + i * g.wb) * g.ps;
        const uint8_t *pad = pad_px_[static_cast<size_t>(gr)].data();
        const int64_t ih = i * g.ph_h + a - d.pt;
        for (int64_t c = 0; c < g.wb; ++c) {
            uint8_t *px = row + c * g.ps;
            const int64_t iw = c * g.ph_w + b - d.pl;
            if (ih < 0 || ih >= d.ih || iw < 0 || iw >= d.iw) {
                copy_n(px, pad, g.ps);
                continue;
            }
            const uint8_t *x = src + ((n * d.ih + ih) * d.iw + iw) * d.ic + gr * g.icg;
            if (ps == icg && g.g == 1 && g.ph_w == 1) { // same layout: the valid run at once
                const int64_t run = std::min(d.iw - iw, g.wb - c);
                std::memcpy(px, x, static_cast<size_t>(run) * ps);
                c += run - 1;
                continue;
            }
            copy_n(px, x, g.icg);
            zero_n(px + icg, g.ps - g.icg);
        }
        if (pr == rows - 1) // slack read by the last blocks (garbage outputs only)
            std::memset(img + planes * plane_px * g.ps, 0, static_cast<size_t>((g.img_px - planes * plane_px) * g.ps));
    }
}

// Gathered rows of one pixel block (per thread, right before its first use):
// the window of output pixel q as one row, tap-major; rows past the image 0.
// The sizes are locals: the byte stores may alias every member.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void
conv_amx_kernel::gather_block(const uint8_t *src, int64_t n, int64_t gr, int64_t q0, uint8_t *out) const {
    const conv_desc &d = p_.desc;
    const int64_t ih_n = d.ih, iw_n = d.iw, ic = d.ic, ow_n = d.ow, kh_n = d.kh, kw_n = d.kw, sh = d.sh, sw = d.sw;
    const int64_t pt = d.pt, pl = d.pl, dh = d.dh, dw = d.dw;
    const int64_t icg = g_.icg, ps = g_.ps, kt = g_.kt, q_n = g_.q, len = kw_n * icg;
    const bool dense = dw == 1 && g_.g == 1;
    const uint8_t *pad = pad_px_[static_cast<size_t>(gr)].data();
    const uint8_t *img = src + n * ih_n * iw_n * ic + gr * icg;
    const __mmask64 row_mask = len < 64 ? ~uint64_t(0) >> (64 - len) : ~uint64_t(0);
    int64_t wide = 0; // store width of the whole-window path (0: not taken)
    for (int64_t w : {16, 32, 64})
        if (!wide && len <= w && (kh_n - 1) * len + w <= ps) wide = w;
    for (int64_t q = q0; q < q0 + blk; ++q) {
        uint8_t *row = out + (q - q0) * ps;
        if (q >= q_n) {
            zero_n(row, ps);
            continue;
        }
        const int64_t oh = q / ow_n, ow = q % ow_n;
        const int64_t iw0 = ow * sw - pl;
        const bool row_inside = dense && iw0 >= 0 && iw0 + kw_n <= iw_n;
        const int64_t ih0 = oh * sh - pt;
        if (row_inside && wide > 0 && ih0 >= 0 && ih0 + (kh_n - 1) * dh < ih_n) {
            // The whole window inside the image: one load and one store of 16, 32
            // or 64 bytes per kernel row (its zeros past len are overwritten by
            // the next row or are K padding).
            const uint8_t *x = img + (ih0 * iw_n + iw0) * ic;
            for (int64_t kh = 0; kh < kh_n; ++kh, x += dh * iw_n * ic) {
                uint8_t *o = row + kh * len;
                if (wide == 16) _mm_storeu_si128(reinterpret_cast<__m128i *>(o), _mm_maskz_loadu_epi8(row_mask, x));
                else if (wide == 32)
                    _mm256_storeu_si256(reinterpret_cast<__m256i *>(o), _mm256_maskz_loadu_epi8(row_mask, x));
                else _mm512_storeu_si512(o, _mm512_maskz_loadu_epi8(row_mask, x));
            }
            zero_n(row + kt, ps - kt);
            continue;
        }
        for (int64_t kh = 0; kh < kh_n; ++kh) {
            const int64_t ih = oh * sh - pt + kh * dh;
            uint8_t *o = row + kh * len;
            if (row_inside && ih >= 0 && ih < ih_n) {
                // Dense kernel row inside the image: KW·ICg consecutive bytes; one
                // whole store when its zeros past len are rewritten or K padding.
                const uint8_t *x = img + (ih * iw_n + iw0) * ic;
                if (len <= 64 && kh * len + 64 <= ps) _mm512_storeu_si512(o, _mm512_maskz_loadu_epi8(row_mask, x));
                else copy_n(o, x, len);
                continue;
            }
            for (int64_t kw = 0; kw < kw_n; ++kw) {
                const int64_t iw = iw0 + kw * dw;
                if (ih < 0 || ih >= ih_n || iw < 0 || iw >= iw_n) copy_n(o + kw * icg, pad, icg);
                else copy_n(o + kw * icg, img + (ih * iw_n + iw) * ic, icg);
            }
        }
        zero_n(row + kt, ps - kt);
    }
}

// The last in-place block: its pixels copied (stride ts), the rest 0 (the source ends there).
__attribute__((target("avx512f,avx512bw"))) void conv_amx_kernel::tail_block(const uint8_t *a, int64_t q0,
                                                                             uint8_t *out) const {
    const int64_t ts = rnd_up(g_.kt, 64);
    for (int64_t i = 0; i < blk; ++i) {
        if (q0 + i < g_.q) copy_n(out + i * ts, a + i * p_.desc.ic, g_.kt);
        else zero_n(out + i * ts, g_.kt);
    }
}

// The output pipeline over the valid pixels of one block (padded view:
// virtual columns ≥ OW are skipped; each run stays within one output row).
void conv_amx_kernel::store(const amx_packed &pk, const int32_t *acc, int64_t n, int64_t gr, int64_t q0, int64_t ob,
                            void *dst, const exec_args &args) const {
    const conv_desc &d = p_.desc;
    const amx_geometry &g = g_;
    tile t;
    t.acc_stride = blk;
    t.c0 = gr * g.ocg + ob * blk;
    t.nc = static_cast<int>(std::min<int64_t>(blk, g.ocg - ob * blk));
    const float *bias = p_.with_bias ? pk.bias.data() : nullptr;
    const int64_t q_end = std::min(q0 + blk, g.q);
    for (int64_t q = q0; q < q_end;) {
        int64_t pix = q, run = q_end - q;
        if (g.view == view_kind::padded) {
            const int64_t oh = q / g.vw, ow = q % g.vw;
            if (ow >= d.ow) {
                q = (oh + 1) * g.vw;
                continue;
            }
            pix = oh * d.ow + ow;
            run = std::min(run, d.ow - ow);
        }
        t.acc = acc + (q - q0) * blk;
        t.npix = static_cast<int>(run);
        t.dst_off0 = (n * d.oh * d.ow + pix) * d.oc + t.c0;
        run_pipeline_avx512(pipe_, t, pk.comp.data(), bias, dst, args);
        q += run;
    }
}

// The A view of pixel block qb of (image n, group gr) and its stride.
const uint8_t *conv_amx_kernel::block_source(const uint8_t *view, const uint8_t *src, int64_t n, int64_t gr, int64_t qb,
                                             block_ring &ring, int64_t *stride) const {
    const conv_desc &d = p_.desc;
    const amx_geometry &g = g_;
    const int64_t q0 = qb * blk;
    if (g.view == view_kind::padded) {
        *stride = g.ps * g.pstep;
        return view + ((n * g.g + gr) * g.img_px + q0 * g.pstep) * g.ps;
    }
    const uint8_t *a = src + (n * d.ih * d.iw + q0) * d.ic + gr * g.icg;
    if (g.view == view_kind::in_place && q0 + blk <= g.q) {
        *stride = d.ic;
        return a;
    }
    // Gathered block, or the in-place tail: built once per thread into a slot.
    const int64_t key = (n * g.g + gr) * g.nq + qb;
    *stride = g.view == view_kind::gathered ? g.ps : rnd_up(g.kt, 64);
    int slot = static_cast<int>(std::find(ring.key, ring.key + ring_slots, key) - ring.key);
    if (slot == ring_slots) { // the next slot the current batch does not use
        do ring.cur = (ring.cur + 1) % ring_slots;
        while ((ring.in_use >> ring.cur) & 1u);
        slot = ring.cur;
        uint8_t *p = ring.b + slot * ring.slot_bytes;
        if (g.view == view_kind::gathered) gather_block(src, n, gr, q0, p);
        else tail_block(a, q0, p);
        ring.key[slot] = key;
    }
    ring.in_use |= 1u << slot;
    return ring.b + slot * ring.slot_bytes;
}

void conv_amx_kernel::prepare_call(const amx_packed &pk, const uint8_t *view, const uint8_t *src, const item &w,
                                   block_ring &ring, amx_call &call, int64_t *rows, void *dst,
                                   const exec_args &args) const {
    const conv_desc &d = p_.desc;
    const amx_geometry &g = g_;
    const int64_t ob = w.ob, qb = w.qb, gr = w.gr, n = w.n;
    call.a = block_source(view, src, n, gr, qb, ring, &call.a_stride);
    call.b = reinterpret_cast<const int8_t *>(pk.wei.get()) + (gr * g.nob + ob) * int64_t(g.nk) * g.b_chunk();
    if (!fused_) return;
    const int64_t c0 = gr * g.ocg + ob * blk, img = n * d.oh * d.ow, q0 = qb * blk;
    if (consecutive_[static_cast<size_t>(qb)]) {
        call.row_off = nullptr;
        call.row0 = (img + pix_[q0]) * d.oc;
    } else {
        for (int i = 0; i < blk; ++i) {
            const int64_t px = pix_[q0 + i];
            rows[i] = px < 0 ? -1 : (img + px) * d.oc;
        }
        call.row_off = rows;
    }
    const int64_t dsz = p_.dst_dt == dtype::f32 || p_.dst_dt == dtype::s32 ? 4 : 1;
    call.dst = static_cast<uint8_t *>(dst) + c0 * dsz;
    call.comp = pk.comp.data() + c0;
    call.bias = p_.with_bias ? pk.bias.data() + c0 : nullptr;
    call.c_off = c0 * 4;
    for (size_t f = 0; f < full_idx_.size(); ++f) call.full[f] = args.binary[full_idx_[f]] + c0;
    const int64_t nc = std::min<int64_t>(blk, g.ocg - ob * blk);
    for (int h = 0; h < 2; ++h) {
        const int64_t lanes = std::clamp<int64_t>(nc - h * 16, 0, 16);
        call.mask[h] = static_cast<uint16_t>((uint32_t(1) << lanes) - 1u);
    }
}

// The calling thread's ring of copied pixel blocks (gathered view, the
// in-place tail), or an empty one.
block_ring conv_amx_kernel::thread_ring() const {
    const amx_geometry &g = g_;
    block_ring ring;
    if (g.view == view_kind::gathered || (g.view == view_kind::in_place && g.q % blk != 0)) {
        ring.slot_bytes = blk * std::max(g.ps, rnd_up(g.kt, 64));
        ring.b = impl::thread_scratch(impl::scratch_use::amx_ring, static_cast<size_t>(ring_slots * ring.slot_bytes));
    }
    return ring;
}

// One thread's work items [begin, end): fused, in batches of consecutive
// items (each block's epilogue overlaps the next block's tile products);
// else one block per call and the C++ pipeline after it.
void conv_amx_kernel::run_range(const amx_packed &pk, const uint8_t *view, const uint8_t *src, int64_t begin,
                                int64_t end, void *dst, const exec_args &args) const {
    block_ring ring = thread_ring();
    alignas(64) int32_t acc[2][blk * blk];
    amx_call calls[batch] = {};
    int64_t rows[batch][blk];
    ukernel_->configure();
    const int64_t step = fused_ ? batch : 1;
    for (int64_t it = begin; it < end; it += step) {
        const int64_t cnt = std::min(step, end - it);
        ring.in_use = 0;
        for (int64_t i = 0; i < cnt; ++i) {
            calls[i].c = acc[i % 2];
            prepare_call(pk, view, src, decode(it + i), ring, calls[i], rows[i], dst, args);
        }
        ukernel_->fn()(calls, cnt);
        if (!fused_) {
            const item w = decode(it);
            store(pk, acc[0], w.n, w.gr, w.qb * blk, w.ob, dst, args);
        }
    }
    ukernel_->release();
}

// K ranges: one thread's units [begin, end). Per unit, one batch of calls:
// range by range, each of the group's blocks (its weights then come from L1
// after the first block), the C tiles through the block's buffer; the fused
// pipeline with the last range, else the C++ pipeline after the batch.
void conv_amx_kernel::run_units(const amx_packed &pk, const uint8_t *view, const uint8_t *src, int64_t begin,
                                int64_t end, void *dst, const exec_args &args) const {
    const amx_geometry &g = g_;
    block_ring ring = thread_ring();
    static_assert(max_group <= batch, "a unit's blocks fit in the ring beside each other");
    alignas(64) int32_t acc[max_group][blk * blk];
    amx_call first[max_group] = {};
    int64_t rows[max_group][blk];
    std::vector<amx_call> calls(static_cast<size_t>(g.nr * g.group));
    const int64_t b_range = int64_t(g.nkr) * g.b_chunk();
    ukernel_->configure();
    for (int64_t u = begin; u < end; ++u) {
        const item w = decode_unit(u);
        const int m = static_cast<int>(std::min<int64_t>(g.group, g.nq - w.qb));
        ring.in_use = 0;
        for (int j = 0; j < m; ++j) {
            first[j].c = acc[j];
            prepare_call(pk, view, src, {w.n, w.gr, w.qb + j, w.ob}, ring, first[j], rows[j], dst, args);
        }
        amx_call *c = calls.data();
        for (int r = 0; r < g.nr; ++r)
            for (int j = 0; j < m; ++j, ++c) {
                *c = first[j];
                c->a += int64_t(r) * g.nkr * g.kc;
                c->b += r * b_range;
                c->nk = std::min(g.nkr, g.nk - r * g.nkr);
                c->flags = (r > 0 ? amx_call::load_c : 0u) | (r == g.nr - 1 ? amx_call::last_k : 0u);
            }
        ukernel_->fn()(calls.data(), int64_t(g.nr) * m);
        if (!fused_)
            for (int j = 0; j < m; ++j) store(pk, acc[j], w.n, w.gr, (w.qb + j) * blk, w.ob, dst, args);
    }
    ukernel_->release();
}

void conv_amx_kernel::execute(const impl::packed &w, const void *src, void *dst, const exec_args &args) const {
    const amx_geometry &g = g_;
    const auto &pk = dynamic_cast<const amx_packed &>(w);
    const int threads = impl::resolve_threads(args.threads);
    const auto *s = static_cast<const uint8_t *>(src);
    uint8_t *buf = nullptr;
    if (g.view == view_kind::padded)
        buf = impl::thread_scratch(impl::scratch_use::amx_copy, static_cast<size_t>(g.mb * g.g * g.img_px * g.ps));
    const bool units = g.nr > 1;
    const int64_t work = g.mb * g.g * (units ? g.nqg : g.nq) * g.nob;
    // The padded copy (if any), every thread done with it, then the convolution.
    std::function<void(int, int)> copy;
    if (g.view == view_kind::padded) copy = [&](int ithr, int nthr) { build_padded(s, buf, ithr, nthr); };
    impl::parallel_phases(threads, copy, [&](int ithr, int nthr) {
        // A static split: thread t takes items [work·t/T, work·(t+1)/T).
        const int64_t t = ithr, nt = nthr;
        if (units) run_units(pk, buf, s, work * t / nt, work * (t + 1) / nt, dst, args);
        else run_range(pk, buf, s, work * t / nt, work * (t + 1) / nt, dst, args);
    });
}

// Whether the row takes (p, a); the geometry it would run with in *g.
bool amx_supports(const conv_problem &p, const attr_set &a, const conv_knobs &k, amx_geometry *out, std::string *why) {
    using impl::reject;
    const conv_desc &d = p.desc;
    if (p.src_dt != dtype::u8 && p.src_dt != dtype::s8) return reject(why, "source must be u8 or s8");
    if (p.dst_dt != dtype::u8 && p.dst_dt != dtype::s8 && p.dst_dt != dtype::s32 && p.dst_dt != dtype::f32)
        return reject(why, std::string("destination ") + to_string(p.dst_dt) + " not supported");
    if (d.g > 1 && d.g == d.ic && d.g == d.oc)
        return reject(why, "depthwise (groups == IC == OC): the depthwise rows take it");
    if (d.g > 1 && (d.icg() < 16 || d.ocg() < 16))
        return reject(why, "groups with fewer than 16 input or output channels do not fill the tiles");
    // Padded taps hold the zero point as a source byte.
    if (a.zp != zp_mechanism::none && !zp_fits_padding(p, a, why)) return false;
    if (!pipeline::takes(a, why)) return false;
    const amx_geometry g = make_geometry(d, k);
    *out = g;
    if (g.taps > 1024) return reject(why, "more than 1024 kernel taps (code size)");
    if (*std::max_element(g.tap_off.begin(), g.tap_off.end()) + g.nk * g.kc >= (int64_t(1) << 31) ||
        g.b_chunk() >= (int64_t(1) << 31) || g.ps * blk >= (int64_t(1) << 31))
        return reject(why, "source rows too large for 32-bit displacements");
    return true;
}

// A gathered block is copied once per thread and used by every OC block:
// with few multiply-adds per copied byte the copy dominates and the VNNI row
// is faster, so auto defers those layers to it (measured on the AMX Xeon, 1
// thread, AMX vs VNNI ms: MobileNet conv1 K·OCg/row bytes 13.5: 0.138 vs
// 0.068; IC 3 3x3 s2 OC 64, 27: 0.209 vs 0.119; IC 16 3x3 s2 OC 32, 24: 0.049
// vs 0.039; IC 32, 28.8: equal; ResNet-50 conv1, 49: 0.336 vs 0.404; IC 64
// 3x3 s2 OC 64, 64: 0.035 vs 0.070). Forced by name the row takes them.
// The same for the measured cases below.
//
// A strided 1x1 gathers one pixel's channels per row, padded to the K chunks:
// where they fill under 60 % of them the tiles multiply mostly zeros (the 1x1
// list, AMX vs VNNI ms: IC 72 → 128 bytes, sw3, OC 80: 0.030 vs 0.024; every
// other strided 1x1 there fills 73-98 % and the AMX row is 1.3-3.5x faster;
// IC 72 at stride 1, a padded copy built once per image: 0.067 vs 0.077).
//
// Small problems: a call costs ~2-3 us (tile configuration, the first tile
// loads), so under 1.5 M MACs, or with fewer than 10 output pixels, the VNNI
// rows win (AMX vs best ms: 1 pixel 0.0010-0.0025 vs 0.0004-0.0007; 1.18 M
// MACs 0.0066 vs 0.0027; 9 pixels, 2.65 M MACs 0.0068 vs 0.0055; from 1.6 M
// MACs and 12 pixels on the AMX row is 1.2-2.1x faster).
//
// Row taps (small ICg under a KxK kernel, no gather) multiply K bytes past
// KW·ICg by zero weights: under 16 of them (MobileNet conv1: 9 of 64, IC 3
// 3x3 s2 OC 64 above) the tiles multiply mostly padding, and auto keeps those
// on the VNNI row (the row-tap view is not yet timed on AMX hardware; the
// emulator's model: docs/jit_conv_amx.md).
//
// A folded small-IC stem (ICg <= 4, ResNet-50 conv1) without a zero point or
// legacy post-op: oneDNN's AMX JIT convolution takes it in 0.194 ms against
// 0.336 ms here; with them this row stays first (the VNNI row: 0.40 ms).
std::string rows_below_are_faster(const conv_problem &p, const attr_set &a, const amx_geometry &g) {
    const conv_desc &d = p.desc;
    if (g.row_taps && g.kt < 16)
        return "row taps of fewer than 16 bytes (KW·ICg: MobileNet conv1's 9 fill 9 of 64 K bytes a tile product): the "
               "VNNI row is faster";
    if (g.view == view_kind::gathered && g.kt * g.ocg < 32 * g.ps)
        return "gathered windows with fewer than 32 multiply-adds per copied byte (small IC and OC under a stride or "
               "a KxK kernel): the VNNI row is faster";
    if (g.view == view_kind::gathered && d.kh * d.kw == 1 && g.kt * 10 < int64_t(g.nk) * g.kc * 6)
        return "a strided 1x1 whose channels fill under 60 % of the K chunks: the tiles multiply mostly padding and "
               "the VNNI row is faster (IC 72 into 128, sw3, OC 80: 0.030 against 0.024 ms)";
    if (d.ops() / 2 < 1.5e6 || d.mb * d.oh * d.ow < 10)
        return "under 1.5 M MACs or 10 output pixels the tile set-up costs more than the VNNI rows take";
    if (d.icg() <= 4 && a.zp == zp_mechanism::none && !a.has_legacy_ops())
        return "a folded small-IC stem without zero point or legacy post-ops: oneDNN's AMX JIT convolution is faster "
               "(0.194 against 0.336 ms on ResNet-50 conv1)";
    return "";
}

} // namespace

impl::conv_entry conv_amx_row(const std::string &name) {
    impl::conv_entry e = impl::named_entry<impl::conv_entry>(name, row_name, impl::row_family::jit);
    using impl::cpu_feature;
    e.needs = {cpu_feature::avx512_core, cpu_feature::avx512_core_vnni, cpu_feature::amx_int8};
    e.decide = [](const conv_problem &p, const attr_set &a, const impl::platform &,
                  std::string *why) -> impl::plan_ptr {
        auto pl = std::make_shared<amx_plan>();
        pl->knobs = conv_knobs::from_env();
        if (!amx_supports(p, a, pl->knobs, &pl->g, why)) return nullptr;
        pl->fused = pipeline_fusable(a, pl->knobs);
        const amx_geometry &g = pl->g;
        pl->qb_inner = g.group_weight_bytes() > g.nq * blk * g.ps; // weight bytes > source bytes
        choose_k_ranges(pl->g, pl->knobs);
        pl->prefetch = weight_prefetch_bytes(g, pl->knobs);
        return pl;
    };
    e.defer = [](const conv_problem &p, const attr_set &a, const impl::platform &, const impl::plan &pl) {
        return rows_below_are_faster(p, a, dynamic_cast<const amx_plan &>(pl).g);
    };
    e.build = [](const conv_problem &p, const attr_set &a, const impl::plan &pl) {
        return std::make_shared<conv_amx_kernel>(p, a, dynamic_cast<const amx_plan &>(pl));
    };
    return e;
}

} // namespace qconv::jit
