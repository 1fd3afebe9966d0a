// Depthwise int8 convolution (groups == IC == OC), any kernel size, stride,
// padding and dilation, both zero-point kinds and every post-op.
//
// Two kernels share the source handling below, each its own table row:
//  * jit:conv_dw_x8s8_rows:avx512_core_vnni (needs VBMI too): the row kernel (dw_row_gen). The source
//    stays u8 bytes and vpdpbusd multiplies them by byte-sparse s8 weights
//    (exact u8·s8 products summed in int32). One call computes whole output
//    rows (or a pair of rows) of a range of channel blocks: pixel blocks
//    with the weights in registers, runs of equal blocks as a loop, the fused
//    output pipeline (single-rounding vfmadd like the reference's madd) at
//    the end of each block. Variants: kernel-row chunks (three kernel rows
//    per dword, built with vpermt2b + vpermb), row pairs (four source rows
//    feed two output rows at stride 1) and the byte layout (strided rows:
//    64 channels used as loaded, lanes 4i + q, no permutes).
//  * jit:conv_dw_x8s8:<isa> (every ISA): conv_ukernel in
//    depthwise mode, one call per pixel block: vpmovzxbd-widened source and
//    int32-stored s16 weights, vpdpwssd (VNNI) or vpmaddwd + vpaddd.
// Source: a u8 source without zero point is read in place on zmm ISAs (taps
// in the padding are skipped or zeroed: they would contribute exactly 0; the
// channel tail and the image's last row are masked loads). Otherwise it is copied once per execution into a
// padded NHWC buffer whose pixels hold the channels rounded up to 16 (s8
// shifted by +128; padded taps: pad_byte() = zp + shift, i.e. zp + 128 for
// s8 sources and 0x80 without a zero point; padded channels 0). The same
// compensation argument as conv_x8s8.h makes this exact
// (core/compensation.h): comp[c] = −Σ w·(zp + shift), added in int32.
// Threads split (mb, row or row pair, channel blocks); results do not depend
// on them.
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>

#include "core/compensation.h"
#include "kernels/jit/conv_epilogue_gen.h"
#include "kernels/jit/conv_pipeline.h"
#include "kernels/jit/conv_x8s8.h"
#include "kernels/jit/jit_base.h"

namespace qconv::jit {
namespace {

int64_t rnd_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

struct dw_packed : impl::packed {
    std::vector<int32_t> wei;  // conv_ukernel: [kh][kw][cpad]
    std::vector<uint8_t> wei8; // row kernel: [block][kh][kw][vector][64]
    std::vector<uint8_t> wei8_pair; // pair mode: [block][set][kw][64]
    std::vector<int32_t> comp; // C + 16
    std::vector<float> bias;   // C + 16 (empty without bias)
    // Native row kernel: comp and bias in its lane order.
    std::vector<int32_t> comp_nat;
    std::vector<float> bias_nat;
};

// Lane order of the native row kernel: position g·64 + 16q + i holds
// channel g·64 + 4i + q (n: rounded up to 64, plus 16 of padding).
template <typename T>
std::vector<T> native_order(const std::vector<T> &v, int64_t c) {
    if (v.empty()) return v;
    std::vector<T> out(static_cast<size_t>(rnd_up(c, 64) + 16), T(0));
    for (int64_t pos = 0; pos < rnd_up(c, 64); ++pos) {
        const int64_t g = pos / 64, q = (pos % 64) / 16, i = pos % 16, ch = g * 64 + 4 * i + q;
        if (ch < c && ch < static_cast<int64_t>(v.size())) out[static_cast<size_t>(pos)] = v[static_cast<size_t>(ch)];
    }
    return out;
}

// comp (conv_comp: −Σ w·(zp + shift)) and the padded bias.
void fill_comp_bias(dw_packed &pk, const conv_problem &p, const attr_set &a, const int8_t *wei, const float *bias) {
    const int64_t c_ = p.desc.oc;
    pk.comp = shifted_compensation(p, a, wei, 16);
    if (p.with_bias) {
        pk.bias.assign(static_cast<size_t>(c_ + 16), 0.f);
        std::copy(bias, bias + c_, pk.bias.begin());
    }
}

// Indices of the full-tensor binary operands (convolution::execute checked
// that exec_args carries each).
std::vector<int> full_operands(const attr_set &a) {
    std::vector<int> full_idx;
    for (const auto &op : a.ops)
        if (op.k == lowered_op::kind::binary && op.bcast == broadcast::full) full_idx.push_back(op.full_index);
    return full_idx;
}

// The padded u8 copy of the source (s8 shifted by +128): rows × cols pixels
// of cpad bytes per image.
struct padded_copy {
    int64_t rows = 0, cols = 0, cpad = 0, c = 0;
    conv_desc d;
    uint8_t flip = 0;
    std::vector<uint8_t> pad_pixel;

    padded_copy(const conv_problem &p, const attr_set &a) : d(p.desc) {
        c = d.oc;
        cpad = rnd_up(c, 16);
        rows = (d.oh - 1) * d.sh + (d.kh - 1) * d.dh + 1;
        cols = (d.ow - 1) * d.sw + (d.kw - 1) * d.dw + 1;
        flip = p.src_dt == dtype::s8 ? 0x80 : 0x00;
        pad_pixel.assign(static_cast<size_t>(cpad), 0);
        for (int64_t ch = 0; ch < c; ++ch) pad_pixel[ch] = pad_byte(p, a, ch);
    }
    size_t bytes(int64_t mb) const { return static_cast<size_t>(mb * rows * cols * cpad + 64); }
    // Row nr = n · rows + r of the copy.
    void row(const uint8_t *s, uint8_t *buf, int64_t nr) const {
        const int64_t n = nr / rows, r = nr % rows;
        uint8_t *out = buf + nr * cols * cpad;
        const int64_t ih = r - d.pt;
        for (int64_t col = 0; col < cols; ++col) {
            uint8_t *px = out + col * cpad;
            const int64_t iw = col - d.pl;
            if (ih < 0 || ih >= d.ih || iw < 0 || iw >= d.iw) {
                std::memcpy(px, pad_pixel.data(), static_cast<size_t>(cpad));
                continue;
            }
            const uint8_t *x = s + ((n * d.ih + ih) * d.iw + iw) * c;
            if (!flip && cpad == c) { // same layout: the whole valid run at once
                const int64_t run = std::min(d.iw - iw, cols - col);
                std::memcpy(px, x, static_cast<size_t>(run * c));
                col += run - 1;
                continue;
            }
            if (flip)
                for (int64_t ch = 0; ch < c; ++ch) px[ch] = static_cast<uint8_t>(x[ch] ^ flip);
            else
                std::memcpy(px, x, static_cast<size_t>(c));
            std::memset(px + c, 0, static_cast<size_t>(cpad - c));
        }
    }
};

// pack()'s argument checks, then an empty packed set.
std::shared_ptr<dw_packed> new_packed(const conv_problem &p, const int8_t *wei, const float *bias) {
    if (!wei) fail("wei", "is null");
    if (p.with_bias && !bias) fail("bias", "with_bias is set but no bias was given");
    return std::make_shared<dw_packed>();
}

// What both kernels' execute() start from: the source, the full-tensor
// operands, the thread count and the buffer of the padded u8
// copy (s8 shifted by +128; empty when the source is read in place).
struct dw_exec {
    const uint8_t *src;
    std::vector<int> full_idx;
    const dw_packed &pk;
    int threads;
    std::vector<uint8_t> buf;
    int64_t dst_bytes;
    const float *bias; // padded bias or null

    dw_exec(const conv_problem &p, const attr_set &a, const padded_copy &pc, bool direct, const impl::packed &w,
            const void *s, const void *dst, const exec_args &args)
        : src(static_cast<const uint8_t *>(s)), full_idx(full_operands(a)),
          pk(dynamic_cast<const dw_packed &>(w)), threads(args.threads > 0 ? args.threads : omp_get_max_threads()),
          buf(direct ? 0 : pc.bytes(p.desc.mb)), dst_bytes(p.dst_dt == dtype::f32 || p.dst_dt == dtype::s32 ? 4 : 1),
          bias(p.with_bias ? pk.bias.data() : nullptr) {}
};

// ---------------------------------------------------------------------------
// conv_ukernel path (avx512_core, avx2, VNNI without VBMI).
class conv_dw_kernel : public impl::conv_kernel {
public:
    conv_dw_kernel(conv_isa isa, const conv_problem &p, const attr_set &a, const conv_knobs &k)
        : isa_(isa), p_(p), a_(a), knobs_(k), pipe_(pipeline::build(p, a)), pc_(p, a) {
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
    conv_knobs knobs_;
    pipeline pipe_;
    padded_copy pc_;
    int lanes_ = 16;
    int64_t c_ = 0, cpad_ = 0, nvec_ = 0, rows_ = 0, cols_ = 0;
    int nb_big_ = 1;
    int64_t n_ob_ = 1;
    bool fused_ = false;
    // Direct mode: a u8 source without zero point is read in place; taps in
    // the padding are skipped (they would contribute 0); the channel tail is
    // a masked load (zmm) or byte inserts (ymm), nothing is read past it.
    bool direct_ = false;
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

    fused_ = pipeline_fusable(a_, knobs_);

    direct_ = p_.src_dt == dtype::u8 && a_.zp == zp_mechanism::none && d.kh <= 64 && knobs_.dw_direct;
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
    dw_exec e(p_, a_, pc_, direct_, w, src, dst, args);
    const int64_t work = d.mb * d.oh * n_ob_;
    // One parallel region: the source copy (unless in place), a barrier, the convolution.
#pragma omp parallel num_threads(e.threads)
    {
        if (!direct_) {
#pragma omp for schedule(static)
            for (int64_t nr = 0; nr < d.mb * rows_; ++nr) pc_.row(e.src, e.buf.data(), nr);
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
                    call.src = e.buf.data() + ((n * rows_ + oh * d.sh) * cols_ + ow * d.sw) * cpad_ + c0;
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
                if (is_ymm(isa_)) run_pipeline_avx2(pipe_, t, e.pk.comp.data(), e.bias, dst, args);
                else run_pipeline_avx512(pipe_, t, e.pk.comp.data(), e.bias, dst, args);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Row kernel (avx512_core_vnni with VBMI): u8 bytes in place, three kernel rows
// per vpdpbusd.
//
// The kernel rows are taken in chunks of up to 3. For a source column j, a
// chunk and a vector of 16 channels, byte p of dword i of a register holds
// the source byte of channel i in kernel row p of the chunk (built from the
// rows' bytes by one vpermt2b and one merge-masked vpermb: 2 permutes for 3
// rows); the weight register of tap column kw holds w[p][kw] of channel i
// in the same byte and 0 in byte 3. vpdpbusd then adds the exact sum of the
// 3 u8·s8 products to lane i: 3 taps of one channel per lane, and the built
// register feeds every output pixel that reads column j (KW multiply-adds
// at stride 1). Kernel rows in the padding are zeroed in the built register
// (zero-masked permutes), columns in the padding are skipped.
// One call computes whole output rows of a range of channel blocks (nb
// vectors): per block, runs of identical pixel blocks as a loop, the weights
// of the block in registers, the fused output pipeline at the end of each
// pixel block.
//
// Registers: acc (w, k) = zmm(w·nb + k), at most 25; then the weights
// (chunks·KW·nb), the permutation index, two built sources and a temporary.
// Masks: k5 = 16 source bytes, k6 = tail bytes, k7 = byte 2, k4 = bytes 0-1,
// k3 = bytes 0 and 2 (row pairs: byte 3), k2 = byte 0, k1 = byte 1 (k1-k3
// reset per pixel block: the epilogue uses k1 = store tail, k2/k3 = scratch).
// The row-pair and byte-layout variants are described at their cfg fields
// and emit functions.
struct dw_run {
    int u = 1;          // pixels per block
    int lo = 0, hi = 0; // source columns of the block read (others: padding)
    int count = 1;      // consecutive identical blocks
};

struct dw_row_cfg {
    int nb = 1;                             // channel vectors of a full block
    int last_nb = 0, last_n = 16;           // tail block: vectors, lanes of its last vector (0: no tail)
    int kh = 1, kw = 1, sw = 1, dh = 1, dw = 1;
    int64_t pix_stride = 0, row_stride = 0; // source bytes
    uint64_t row_mask = ~uint64_t(0);       // kernel rows inside the image
    int masked_kh = -1;                     // kernel row that reads the image's last row (masked loads)
    std::vector<dw_run> runs;
    const pipeline *pipe = nullptr;         // fused epilogue; null: int32 rows to acc
    int64_t acc_pix = 0;                    // bytes between pixels of the int32 row
    int64_t blk_wbytes = 0;                 // packed weight bytes per channel block
    // Byte layout (strided convolutions): 64-channel groups read as they are,
    // lane i of accumulator q is channel 4i + q (see dw_native_note below).
    bool native = false;
    int tail_bytes = 0;                     // channels of the last group (native, 0: none)
    // Pair mode (3-row kernels, stride 1, 16-channel blocks): output rows oh
    // and oh + 1 from one build of source rows r..r+3 (row_mask bits 0..3,
    // masked_kh: the one of them that is the image's last row); the second
    // row's dst is row_pix pixels further.
    bool pair = false;
    int64_t row_pix = 0;
};

struct dw_call {
    const uint8_t *src;  // source of output pixel 0, tap (0, 0), channel c0
    const int8_t *wei;   // packed weights of the first channel block
    void *dst;           // dst element (pixel 0, c0) (fused)
    int32_t *acc;        // int32 row (unfused)
    const int32_t *comp; // comp + c0
    const float *bias;   // bias + c0 (or null)
    int64_t c_off;       // c0 · 4
    const float *full[max_fused_full];
    int64_t n_full; // full channel blocks to compute
    int64_t last;   // then the tail block too (1) or not (0)
};
using dw_row_fn = void (*)(const dw_call *);

// Byte layout (native): a 64-byte source load holds 4 channels per dword;
// weight register q of a tap holds w[4i + q] in byte q of dword i, so
// vpdpbusd(acc_q, x, w_q) adds x·w of channel 4i + q to lane i, exactly. No
// permutes at all (9 multiply-adds per 16 outputs of a 3x3 tap set instead
// of 3 plus two permuted source builds per column), which wins when columns
// are not shared (stride 2). The epilogue runs on the permuted lanes with
// per-OC arrays permuted the same way and recombines the four accumulators
// of a pixel into bytes (shift + or): u8 / s8 destinations without
// position-dependent operands (sum, full-tensor binary).
int dw_chunks(int kh) { return (kh + 2) / 3; }
int dw_native_max_acc(int kw) { return std::min(25, 30 - 4 * kw); }
int dw_max_acc(int nb, int kh, int kw) { return std::min(25, 28 - dw_chunks(kh) * kw * nb); }

// Fused epilogue registers: zmm26..29 comp, scale, bias, zero; zmm25 spare.
class dw_row_gen : public conv_epilogue_gen {
public:
    explicit dw_row_gen(const dw_row_cfg &c) : conv_epilogue_gen(code_size(c), c.pipe, 26, 25), cfg(c) {}
    const char *name() const override { return "jit:conv_dw_x8s8:avx512_core_vnni:row"; }

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
    // Epilogue registers (rax, rbx, r11..r15) are conv_epilogue_gen's.
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
    Xbyak::Opmask pos_mask(int p) const { return p == 0 ? k2 : p == 1 ? k1 : k7; }

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
            if (dsz() == 4) lea(reg_dst, ptr[reg_dst + reg_ch * 4]);
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
            bool first = true;
            for (int p = 0; p < 3; ++p) {
                if (!((v >> p) & 1u)) continue;
                with_operand(p, [&](const Xbyak::Operand &o) {
                    if (first) vpermb(x | pos_mask(p) | T_z, zmm_idx, o);
                    else vpermb(x | pos_mask(p), zmm_idx, o);
                });
                first = false;
            }
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
            add(reg_dst, r.u * cfg.pipe->oc * dsz());
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
            auto pmask = [&](int p) { return p == 0 ? k2 : p == 1 ? k1 : p == 2 ? k7 : k3; };
            if (v == 15u) {
                if (cfg.masked_kh == 0) vmovdqu8(x | (tl ? k6 : k5) | T_z, addr(0));
                else vmovdqu8(x, addr(0));
                with_operand(1, [&](const Xbyak::Operand &o) { vpermt2b(x, zmm_idx, o); });
                with_operand(2, [&](const Xbyak::Operand &o) { vpermb(x | k7, zmm_idx, o); });
                with_operand(3, [&](const Xbyak::Operand &o) { vpermb(x | k3, zmm_idx, o); });
            } else {
                bool first = true;
                for (int p = 0; p < 4; ++p) {
                    if (!((v >> p) & 1u)) continue;
                    with_operand(p, [&](const Xbyak::Operand &o) {
                        if (first) vpermb(x | pmask(p) | T_z, zmm_idx, o);
                        else vpermb(x | pmask(p), zmm_idx, o);
                    });
                    first = false;
                }
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
        add(reg_dst, r.u * cfg.pipe->oc * dsz());
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
                for (int q = 0; q < 4; ++q)
                    vmovdqu8(nwreg(kw, q), ptr[reg_wei + ((kh * cfg.kw + kw) * 4 + q) * 64]);
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
            emit_load_params(q);
            for (int w = 0; w < u; ++w) {
                const Xbyak::Zmm y = acc(w, q);
                emit_pixel_pipeline(y, w, q, 0); // u8 / s8 only: no sum, no full-tensor operand
                emit_to_int8_range(y, pp.dst_dt, pp.dst_dt == dtype::u8);
            }
        }
        if (pp.dst_dt == dtype::u8) {
            // Unsigned packs (they saturate: see emit_to_int8_range), then
            // within each 16-byte lane byte 4m + q ← byte 4q + m.
            vmovdqu8(Xbyak::Zmm(25), ptr[rip + l_nat_shuf]);
            for (int w = 0; w < u; ++w) {
                vpackusdw(zmm_t, acc(w, 0), acc(w, 1));
                vpackusdw(zmm_u, acc(w, 2), acc(w, 3));
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
                for (int q = 0; q < 3; ++q) vpandd(acc(w, q), acc(w, q), cst(bits_float(0xffu)));
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
        emit_const_pool();
    }
    // ------------------------------------------------------------ fused epilogue
    // The pipeline itself is conv_epilogue_gen's (single-rounding vfmadd for
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
        const int64_t pix = pp.oc * dsz();
        // u8 / s8: four pixels of a full vector are clamped and converted,
        // then packed together (vpackus/ss + vpermd) and stored as 4 × 16 bytes.
        const bool packable = pp.dst_dt == dtype::u8 || pp.dst_dt == dtype::s8;
        for (int b = 0; b < nbv_; ++b) {
            emit_load_params(b);
            for (int w = 0; w < u;) {
                const int group = packable && !tail(b) && w + 4 <= u ? 4 : 1;
                for (int q = 0; q < group; ++q) {
                    const Xbyak::Zmm y = acc(acc_base_ + w + q, b);
                    emit_pixel_pipeline(y, pix_base_ + w + q, b, pix);
                    if (group == 1)
                        emit_store(y, ptr[reg_dst + (pix_base_ + w + q) * pix + b * 16 * dsz()], tail(b), pp.dst_dt);
                    else emit_to_int8_range(y, pp.dst_dt, true);
                }
                if (group == 4) emit_pack_store(acc_base_ + w, pix_base_ + w, b, pix, pp.dst_dt);
                w += group;
            }
        }
    }

    // NaN → 0, clamp to the 8-bit range in f32, convert (round half to even).
    // u8 before the unsigned packs (packed = true): min(32767, y) (NaN stays
    // NaN) and the conversion suffice — NaN and −∞ become INT_MIN, which the
    // packs' saturation turns into 0 like every negative value, values in
    // (255, 32767] become 255 (vpackuswb reads words as signed: the bound
    // keeps them positive).
    void emit_to_int8_range(const Xbyak::Zmm &y, dtype dt, bool packed = false) {
        if (dt == dtype::u8 && packed) {
            vbroadcastss(zmm_t, cst_plain(32767.f));
            vminps(y, zmm_t, y);
        } else if (dt == dtype::u8) {
            vmaxps(y, y, zmm_zero); // NaN → 0
            vminps(y, y, cst(255.f));
        } else {
            vcmpps(k2, y, y, cmp_ord);
            vmovaps(y | k2 | T_z, y);
            vmaxps(y, y, cst(-128.f));
            vminps(y, y, cst(127.f));
        }
        vcvtps2dq(y, y);
    }

    // Pixels w..w+3 of vector b: int32 in the 8-bit range → 4 × 16 bytes.
    void emit_pack_store(int w, int pw, int b, int64_t pix, dtype dt) {
        const Xbyak::Zmm t = zmm_t, v = zmm_u, idx = Xbyak::Zmm(25);
        if (dt == dtype::u8) {
            vpackusdw(t, acc(w, b), acc(w + 1, b));
            vpackusdw(v, acc(w + 2, b), acc(w + 3, b));
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

// Whether the row kernel's registers fit the kernel: the weights of a
// 16-channel block plus one accumulator (VBMI is the row's declared feature).
bool row_kernel_fits(const conv_desc &d) {
    return d.kh <= 64 && dw_max_acc(1, static_cast<int>(d.kh), static_cast<int>(d.kw)) >= 1;
}

class conv_dw_row_kernel : public impl::conv_kernel {
public:
    conv_dw_row_kernel(const conv_problem &p, const attr_set &a, const conv_knobs &k)
        : p_(p), a_(a), knobs_(k), pipe_(pipeline::build(p, a)), pc_(p, a) {
        plan();
    }
    std::shared_ptr<const impl::packed> pack(const int8_t *wei, const float *bias) const override;
    void execute(const impl::packed &w, const void *src, void *dst, const exec_args &args) const override;

private:
    void plan();
    int ur_max(int nb) const {
        if (native_) return dw_native_max_acc(static_cast<int>(p_.desc.kw)) / 4;
        if (pair_) return std::min(25, 28 - 2 * static_cast<int>(p_.desc.kw)) / 2;
        return dw_max_acc(nb, static_cast<int>(p_.desc.kh), static_cast<int>(p_.desc.kw)) / nb;
    }
    bool native_eligible() const;
    int ur_for(int nb) const {
        const int64_t mx = ur_max(nb), ow = p_.desc.ow;
        if (ow <= mx) return static_cast<int>(ow);
        const int64_t calls = (ow + mx - 1) / mx;
        return static_cast<int>((ow + calls - 1) / calls);
    }
    std::pair<uint64_t, int> row_class(int64_t oh) const;
    std::vector<dw_run> row_runs(int ur) const;

    conv_problem p_;
    attr_set a_;
    conv_knobs knobs_;
    pipeline pipe_;
    padded_copy pc_;
    int64_t c_ = 0;
    int nb_ = 1;
    int64_t n_full_ = 0, n_ob_ = 0, blk_wbytes_ = 0;
    bool tail_ = false, fused_ = false, direct_ = false, native_ = false, pair_ = false;
    int64_t pair_wbytes_ = 0;
    std::vector<dw_row_fn> fns_pair_; // per pair of output rows (2p, 2p + 1)
    pipeline pipe_nat_; // pipe_ with per-OC arrays in the native lane order
    std::vector<std::unique_ptr<dw_row_gen>> gens_;
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
        else
            runs.push_back(r);
    }
    return runs;
}

// The byte-layout variant: strided rows (QCONV_JIT_CONV_DW_NATIVE=1: any
// stride, =0: never), u8 / s8 dst, fused, no position-dependent operand.
bool conv_dw_row_kernel::native_eligible() const {
    const conv_desc &d = p_.desc;
    if (knobs_.dw_native == 0) return false;
    const bool forced = knobs_.dw_native == 1;
    if (!fused_ || (p_.dst_dt != dtype::u8 && p_.dst_dt != dtype::s8)) return false;
    if (dw_native_max_acc(static_cast<int>(d.kw)) < 4) return false;
    for (const auto &op : a_.ops)
        if (op.k == lowered_op::kind::sum || (op.k == lowered_op::kind::binary && op.bcast == broadcast::full))
            return false;
    return forced || d.sw >= 2;
}

void conv_dw_row_kernel::plan() {
    const conv_desc &d = p_.desc;
    c_ = d.oc;
    fused_ = pipeline_fusable(a_, knobs_);
    direct_ = p_.src_dt == dtype::u8 && a_.zp == zp_mechanism::none && knobs_.dw_direct;
    native_ = native_eligible();
    {
        pair_ = fused_ && !native_ && d.kh == 3 && d.sh == 1 && d.sw == 1 && d.dh == 1 && d.oh >= 2 &&
                28 - 2 * d.kw >= 2 && knobs_.dw_pair;
    }
    // Native: 64-channel groups. Otherwise the widest channel block whose
    // pixel block still covers the row (fewer passes over the row), else 16
    // channels with the longest pixel blocks.
    nb_ = native_ ? 4 : 1;
    if (!native_ && !pair_)
        for (int nb : {4, 2})
            if (ur_max(nb) >= d.ow && (c_ + 15) / 16 >= nb) {
                nb_ = nb;
                break;
            }
    n_full_ = c_ / (16 * nb_);
    tail_ = c_ % (16 * nb_) != 0;
    n_ob_ = n_full_ + (tail_ ? 1 : 0);
    blk_wbytes_ = native_ ? d.kh * d.kw * 4 * 64 : int64_t(dw_chunks(static_cast<int>(d.kh))) * d.kw * nb_ * 64;
    if (native_) {
        pipe_nat_ = pipe_;
        pipe_nat_.scale = native_order(pipe_.scale, c_);
        for (auto &op : pipe_nat_.ops) {
            op.a = native_order(op.a, c_);
            op.b = native_order(op.b, c_);
            for (auto &v : op.q) v = native_order(v, c_);
        }
    }

    const int rem = static_cast<int>(c_ - n_full_ * 16 * nb_);
    const bool pair_save = pair_;
    pair_ = false; // single-row blocking for the single-row kernels
    const std::vector<dw_run> runs = row_runs(ur_for(nb_));
    pair_ = pair_save;
    if (pair_) {
        // 16-channel blocks; single-row kernels serve only an odd last row.
        pair_wbytes_ = 2 * d.kw * 64;
        const std::vector<dw_run> pruns = row_runs(ur_for(1));
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
                gens_.push_back(std::make_unique<dw_row_gen>(c));
                gens_.back()->create();
                it = pmade.emplace(std::make_pair(mask, last), gens_.back()->entry<dw_row_fn>()).first;
            }
            fns_pair_[pr] = it->second;
        }
    }
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
            gens_.push_back(std::make_unique<dw_row_gen>(c));
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
    return pk;
}

void conv_dw_row_kernel::execute(const impl::packed &w, const void *src, void *dst, const exec_args &args) const {
    const conv_desc &d = p_.desc;
    dw_exec e(p_, a_, pc_, direct_, w, src, dst, args);
    // Work: (image, row, group of channel blocks); one group per row unless
    // the rows are too few for the threads. Unfused: one block per call.
    int64_t groups = 1;
    if (!fused_) groups = n_ob_;
    else if (e.threads > 1) groups = std::min<int64_t>(n_ob_, (4 * e.threads + d.mb * d.oh - 1) / (d.mb * d.oh));
    const int64_t per_group = (n_ob_ + groups - 1) / groups;
    // Row units: pairs of output rows (pair mode; an odd last row alone) or rows.
    const int64_t units = pair_ ? (d.oh + 1) / 2 : d.oh;
    const int64_t work = d.mb * units * groups;
#pragma omp parallel num_threads(e.threads)
    {
        if (!direct_) {
#pragma omp for schedule(static)
            for (int64_t nr = 0; nr < d.mb * pc_.rows; ++nr) pc_.row(e.src, e.buf.data(), nr);
        }
        std::vector<int32_t> rowacc(fused_ ? 0 : static_cast<size_t>(d.ow * nb_ * 16 + 16));
#pragma omp for schedule(static) nowait
        for (int64_t it = 0; it < work; ++it) {
            const int64_t g = it % groups;
            const int64_t unit = (it / groups) % units;
            const int64_t n = it / groups / units;
            const int64_t oh = pair_ ? 2 * unit : unit;
            const bool two = pair_ && oh + 1 < d.oh;
            const int64_t b0 = g * per_group, b1 = std::min(n_ob_, b0 + per_group);
            if (b0 >= b1) continue;
            const int64_t c0 = b0 * nb_ * 16;
            dw_call call{};
            if (direct_) {
                // The row origin (oh·sh − pt, −pl) may lie in the padding; the
                // kernel reads only offsets inside the image.
                const int64_t o = ((n * d.ih + oh * d.sh - d.pt) * d.iw - d.pl) * c_ + c0;
                call.src = reinterpret_cast<const uint8_t *>(reinterpret_cast<uintptr_t>(e.src) + o);
            } else {
                call.src = e.buf.data() + (n * pc_.rows + oh * d.sh) * pc_.cols * pc_.cpad + c0;
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
    }
}

} // namespace

bool conv_dw_supports(conv_isa i, bool rows, const conv_problem &p, const attr_set &a, const conv_knobs &k,
                      std::string *why) {
    using impl::reject;
    const conv_desc &d = p.desc;
    if (!d.is_depthwise()) return reject(why, "not depthwise (needs groups == IC == OC)");
    if (rows) {
        if (!k.dw_row) return reject(why, "turned off (QCONV_JIT_CONV_DW_ROW=0)");
        if (!row_kernel_fits(d)) return reject(why, "kernel too large for the row kernel's registers");
    }
    if (d.kh * d.kw > 121 || max_accumulators_dw(i, static_cast<int>(d.kw)) < 1)
        return reject(why, "kernel wider than the registers allow (every tap is unrolled)");
    // Everything else (types, zero points, post-ops) as the dense kernels.
    return conv_supports(i, false, p, a, why);
}

std::shared_ptr<const impl::conv_kernel> conv_dw_create(const conv_problem &p, const attr_set &a,
                                                        const conv_plan &pl) {
    if (pl.k == conv_plan::kind::depthwise_rows) return std::make_shared<conv_dw_row_kernel>(p, a, pl.knobs);
    return std::make_shared<conv_dw_kernel>(pl.isa, p, a, pl.knobs);
}

} // namespace qconv::jit
