// The plan of the dense int8 conv rows (jit:conv_x8s8:<isa>): how the
// source is read, the loop order, the register blocking and where the output
// pipeline runs, decided from the variant, the problem, the attribute set and
// the knobs alone — no code is generated here. supports() puts it into the
// row's plan (QCONV_VERBOSE=2 prints it, the kernel cache keys on it) and the
// kernel (conv_x8s8.cpp) builds its micro-kernels from it.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/jit/conv/conv_plan.h"
#include "kernels/jit/conv/conv_ukernel.h"

namespace qconv::jit {

struct conv_geometry : conv_plan_detail {
    int64_t mb, g, icg, ocg, icg4, ocg16;   // ocg16: OCg rounded up to the lane count
    int lanes, es, wb;                      // OC lanes per vector; bytes per source / weight element
    int64_t oh, ow;                         // as iterated (1x1 flattening: oh = 1, ow = OH·OW)
    int64_t ih_p, iw_p;                     // source view rows/cols as iterated (padded copy or original)
    int64_t cp_rows, cp_cols;               // rows/cols of the padded copy
    int64_t cs;                             // bytes per source pixel in the view
    int64_t kh, kw, sh, sw, dh, dw, pt, pl; // pt, pl: 0 unless direct (view origin)
    bool copy = false;                      // build a padded source copy
    bool flat = false;                      // 1x1 flattened into one row
    bool subsample = false;                 // strided 1x1 copy: only the pixels read, stride 1 in the copy
    int64_t step_h = 1, step_w = 1;         // source pixels per copy pixel (subsample: the strides)
    bool flat2d = false;                    // short rows: the OH·OW pixels as one list, blocks may span rows
    bool taps_inner = false;                // loop order ic4 → taps (weights packed [ic4][kh][kw])
    bool direct = false;                    // padded convolution read in place, padding taps skipped
    int64_t ow_real = 0;                    // OW (flat2d maps a pixel index p to (p / OW, p % OW))
    int nb_big;                             // vector blocks per full OC block (≤ 4)
    int64_t n_ob;                           // OC blocks per group
    bool fused = false;                     // output pipeline inside the micro-kernels
    bool prefetch_next = false;             // the calls of an OC block prefetch the next block's weights into L2
    int64_t prefetch = 0;                   // bytes ahead the micro-kernels prefetch the weights (0: none)
    bool list() const { return flat || flat2d; }
    // Packed weight bytes per output channel, and per group (OC padded to the lanes).
    int64_t weight_bytes_per_oc() const { return kh * kw * icg4 * wb; }
    int64_t group_weight_bytes() const { return weight_bytes_per_oc() * ocg16; }
    // "source=direct pixels=rows taps=inner oc_blocks=2x4 pipeline=fused".
    std::string str() const override;
};

// The decisions for (variant, problem, attribute set, knobs).
conv_geometry plan_geometry(conv_isa isa, const conv_problem &p, const attr_set &a, const conv_knobs &k);

// Pixels per micro-kernel call for nb OC vectors over a row (or list) of ow
// pixels: as many as the registers allow, balanced over a row so that a
// short row (OW = 7) is not split into 6 + 1; a pixel list takes the most.
int pixels_per_call(const conv_geometry &g, conv_isa isa, const conv_knobs &k, int nb, int64_t ow);

} // namespace qconv::jit
