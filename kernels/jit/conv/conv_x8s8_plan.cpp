#include "kernels/jit/conv/conv_x8s8_plan.h"

#include <algorithm>

namespace qconv::jit {

namespace {

// How the source is read: a padded copy, in place (direct), or as it is.
void plan_source(conv_geometry &g, conv_isa isa, const conv_desc &d, const conv_knobs &k) {
    // Source rows/cols actually touched, with the padding origin at (−pt, −pl).
    const int64_t rows = (d.oh - 1) * d.sh + (d.kh - 1) * d.dh + 1;
    const int64_t cols = (d.ow - 1) * d.sw + (d.kw - 1) * d.dw + 1;
    const bool padded = d.pt > 0 || d.pl > 0 || rows > d.ih || cols > d.iw;
    g.copy = padded || g.icg4 != g.icg || g.es != 1;
    // Direct mode: a padded source is read in place; the micro-kernel of
    // each pixel block skips the (pixel, tap) pairs that fall into the
    // padding (no zp, u8: they would contribute w·0 = 0; zero point or s8
    // source: per-pixel correction rows add their w·v back, see pack()), so
    // the int32 sums equal the padded copy's, without the copy and with fewer
    // multiply-adds. Needs the VNNI byte layout, ICg a multiple of 4 and the
    // taps-inner loop; displacements (a block of ≤ 24 pixels spans at most
    // 24 / OW + 2 output rows) must fit 32 bits.
    {
        const int64_t span = ((d.kh * d.dh + (24 / d.ow + 2) * d.sh) * d.iw + d.kw * d.dw + d.ow * d.sw) * d.ic;
        g.direct = padded && isa_facts(isa).vnni && g.icg4 == g.icg && d.kh * d.kw > 1 && d.kh * d.kw <= 64 &&
                   span < (int64_t(1) << 30) && k.direct;
        if (g.direct) g.copy = false;
    }
    // A strided 1x1 convolution that needs a copy anyway (ICg not a multiple
    // of 4, a widened source) copies only the pixels it reads — the OH×OW
    // subsampled image — and runs as a flattened stride-1 1x1 (the full
    // image's copy cost up to 13x brgconv_1x1 on such layers).
    g.subsample = g.copy && !padded && !g.direct && d.kh == 1 && d.kw == 1 && (d.sh > 1 || d.sw > 1);
    g.flat =
        (d.kh == 1 && d.kw == 1 && d.sh == 1 && d.sw == 1 && !padded && d.oh == d.ih && d.ow == d.iw) || g.subsample;
    g.cp_rows = rows;
    g.cp_cols = cols;
    if (g.subsample) {
        g.cp_rows = d.oh, g.cp_cols = d.ow;
        g.step_h = d.sh, g.step_w = d.sw;
        g.sh = g.sw = 1;
    }
    if (g.copy) {
        g.ih_p = g.cp_rows;
        g.iw_p = g.cp_cols;
        g.cs = g.g * g.icg4;
    } else {
        g.ih_p = d.ih;
        g.iw_p = d.iw;
        g.cs = d.ic;
    }
    // Origin of the view: the padded copy starts at (−pt, −pl) already.
    if (!g.direct) g.pt = g.pl = 0;
}

// Which pixels a call runs (a row, or one list of the image's pixels), the
// loop order and the OC blocking.
void plan_loops(conv_geometry &g, conv_isa isa, const conv_desc &d, const conv_knobs &k) {
    // Rows shorter than two register blocks waste the tail block of every
    // row: run the image's pixels as one list (blocks cross row ends).
    g.ow_real = d.ow;
    // The flat2d knob turns this off (tests, comparisons).
    g.flat2d = !g.flat && d.oh > 1 && d.ow < 16 && k.flat2d;
    g.oh = g.list() ? 1 : d.oh;
    g.ow = g.list() ? d.oh * d.ow : d.ow;
    if (g.flat) g.ih_p = 1, g.iw_p = g.subsample ? d.oh * d.ow : d.ih * d.iw;
    // Loop order: every tap unrolled inside one ICg/4 loop, when the taps
    // are few enough for the code size and their displacements fit 32 bits.
    {
        const int64_t span = ((g.kh - 1) * g.dh * g.iw_p + (g.kw - 1) * g.dw + g.ow * g.sw) * g.cs * g.es;
        g.taps_inner = g.direct || (g.kh * g.kw > 1 && g.kh * g.kw <= 64 && span < (int64_t(1) << 30) && k.taps_inner);
    }
    const int64_t nvec = g.ocg16 / g.lanes;
    int nb_max = max_oc_vectors(isa);
    if (k.nb > 0) nb_max = std::min(nb_max, k.nb);
    g.nb_big = static_cast<int>(std::min<int64_t>(nb_max, nvec));
    g.n_ob = (nvec + g.nb_big - 1) / g.nb_big;
}

// In a network every layer's weights come from L3 or memory on first use,
// and the first pixel block of an OC block reads that block's weights in one
// burst (a 3x3 layer with 512 channels: 288 KiB in ~15 µs), which stalls the
// vpdpbusd chain: Zen 4, ResNet-50, the 512-channel 3x3 layers ran at 1.45x
// their time alone. The fix that holds (bench: `qconv-driver conv --cold=1`):
// the calls of one OC block bring the *next* block's weights into L2, each
// call its slice (weight_prefetch_next): res5's 3x3 cold 0.63 -> 0.46 ms,
// warm unchanged (0.41), a 1x1 with 1 MiB of weights 0.279 -> 0.268; the avx2
// row (weights widened to s16) 1.51 -> 1.40 and 0.74 -> 0.64 cold, warm
// unchanged. From 128 KiB of weights per group; smaller weights stay in L2.
bool weight_prefetch_next(const conv_geometry &g, const conv_knobs &k) {
    if (g.n_ob < 2 && g.g < 2) return false; // no next block
    if (k.dense_prefetch_next >= 0) return k.dense_prefetch_next == 1;
    return g.group_weight_bytes() >= (128 << 10);
}

// Bytes ahead of its loads a KxK micro-kernel prefetches its own weights
// into L1 (the knob only: 2 KiB ahead took res5's 3x3 cold from 0.63 to
// 0.53 ms, but on top of the next-block prefetch it cost 0.07 ms; 1x1 layers
// ran 2-8 % slower with it at every distance tried, 1-4 KiB).
int64_t weight_prefetch_bytes(const conv_geometry &g, const conv_knobs &k) {
    return g.taps_inner && k.dense_prefetch > 0 ? int64_t(k.dense_prefetch) * 1024 : 0;
}

} // namespace

conv_geometry plan_geometry(conv_isa isa, const conv_problem &p, const attr_set &a, const conv_knobs &k) {
    const conv_desc &d = p.desc;
    conv_geometry g{};
    g.mb = d.mb;
    g.g = d.g;
    g.icg = d.icg();
    g.ocg = d.ocg();
    g.lanes = oc_lanes(isa);
    g.es = src_elem_bytes(isa);
    g.wb = g.es;
    g.icg4 = rnd_up(g.icg, 4);
    g.ocg16 = rnd_up(g.ocg, g.lanes);
    g.kh = d.kh;
    g.kw = d.kw;
    g.sh = d.sh;
    g.sw = d.sw;
    g.dh = d.dh;
    g.dw = d.dw;
    g.pt = d.pt;
    g.pl = d.pl;
    plan_source(g, isa, d, k);
    plan_loops(g, isa, d, k);
    // The output pipeline is fused into the micro-kernels when it can be.
    g.fused = pipeline_fusable(a, k);
    g.prefetch = weight_prefetch_bytes(g, k);
    g.prefetch_next = weight_prefetch_next(g, k);
    return g;
}

int pixels_per_call(const conv_geometry &g, conv_isa isa, const conv_knobs &k, int nb, int64_t ow) {
    int64_t mx = std::min(24, max_accumulators(isa, nb) / nb);
    if (k.ur > 0) mx = std::min<int64_t>(mx, k.ur);
    if (g.list()) return static_cast<int>(std::min<int64_t>(ow, mx));
    return static_cast<int>(balanced_block(ow, mx));
}

std::string conv_geometry::str() const {
    std::string s = "source=";
    s += direct ? "direct" : subsample ? "subsampled_copy" : copy ? "padded_copy" : "in_place";
    s += " pixels=";
    s += flat ? "flat" : flat2d ? "list" : "rows";
    s += std::string(" taps=") + (kh * kw == 1 ? "1" : taps_inner ? "inner" : "outer");
    s += " oc_blocks=" + std::to_string(n_ob) + "x" + std::to_string(nb_big);
    s += std::string(" pipeline=") + (fused ? "fused" : "tile");
    if (prefetch > 0) s += " prefetch=" + std::to_string(prefetch);
    if (prefetch_next) s += " prefetch_next";
    return s;
}

} // namespace qconv::jit
