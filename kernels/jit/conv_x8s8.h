// Int8 direct convolution (u8/s8 source, s8 weights) built from a JIT
// accumulation micro-kernel and a vectorised output pipeline.
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
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/jit/conv_isa.h"
#include "rows/row.h"

namespace qconv::jit {

class jit_generator;

// a rounded up to a multiple of b (b > 0).
inline int64_t rnd_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }
// The block size that covers n items (pixels of a row) in the fewest blocks
// of at most mx, balanced: the block sizes differ by at most one.
inline int64_t balanced_block(int64_t n, int64_t mx) {
    if (n <= mx) return n;
    const int64_t blocks = (n + mx - 1) / mx;
    return (n + blocks - 1) / blocks;
}

// Compile-time configuration of one micro-kernel.
struct conv_ukernel_cfg {
    conv_isa isa = conv_isa::avx512_core_vnni;
    int ur_w = 1; // output pixels per call
    int nb = 1;   // vector blocks of OC (16 lanes on zmm, 8 on ymm)
    int kh = 1, kw = 1;
    int ic4 = 1;            // ICg rounded up to 4, divided by 4
    int64_t pix_stride = 0; // bytes between consecutive input pixels
    int64_t row_stride = 0; // bytes between consecutive input rows
    int sw = 1, dh = 1, dw = 1;
    bool xor_src = false; // s8 source read directly: x ^ 0x80 = x + 128
    // Loop order: false: kh → kw → ICg/4 (weights [kh][kw][ic4]...); true:
    // ICg/4 → kh → kw with every tap unrolled (weights [ic4][kh][kw]...), so
    // the reduction is one loop of ic4 iterations whatever the kernel size.
    bool taps_inner = false;
    // Valid taps per pixel (bit kh·kw_count + kw), taps-inner VNNI only:
    // a (pixel, tap) pair whose bit is clear is skipped (it reads padding of
    // an in-place source, contributing 0); a tap no pixel uses loads nothing.
    // Empty: every tap of every pixel is read.
    std::vector<uint64_t> tap_mask;
    // Per pixel: row of conv_call::corr added to its accumulators after the
    // reduction (the skipped taps' Σ w·v for a zero point or an s8 source),
    // or −1; corr_stride: bytes per row. Empty: no correction.
    std::vector<int> tap_corr;
    int64_t corr_stride = 0;
    // Byte offset of each pixel's source from pixel 0's (empty: w·sw·pix_stride).
    // Set when a pixel block spans output rows (short rows run as one list).
    std::vector<int64_t> pix_off;
    // Fused output pipeline (zmm ISAs, no transcendental eltwise, at most
    // max_fused_full full-tensor binary operands): the kernel stores dst
    // itself instead of the int32 tile. `pipe` is owned by the conv kernel
    // and outlives this micro-kernel; its per-OC arrays are addressed
    // directly. last_n: valid lanes of the last OC vector (1..16).
    const struct pipeline *pipe = nullptr;
    int last_n = 16;
    // Depthwise mode (conv_dw_x8s8): nb vectors of channels, source u8 with
    // pix_stride bytes per pixel, weights int32 [kh][kw][dw_cpad], every
    // tap unrolled; one widened multiply-add per (tap, pixel, vector).
    bool depthwise = false;
    int64_t dw_cpad = 0;
    // Depthwise reading the unpadded source directly (u8, no zero point):
    // kernel rows whose bit is clear and source columns outside
    // [dw_col_lo, dw_col_hi) of the block are skipped (they read padding,
    // which contributes 0); the last vector of a block loads last_n lanes.
    bool dw_direct = false;
    uint64_t dw_row_mask = ~uint64_t(0);
    int dw_col_lo = 0, dw_col_hi = 1 << 30;
};

constexpr int max_fused_full = 4;

// Tuning and debugging switches of the JIT conv kernels (docs/dispatch.md),
// read from the environment once per decision — supports() puts them into the
// plan — so they are part of the kernel cache key and a kernel never reads
// the environment while it is built.
struct conv_knobs {
    int ur = 0;              // QCONV_JIT_CONV_UR=N: at most N pixels per call (0: the register limit)
    int nb = 0;              // QCONV_JIT_CONV_NB=N: at most N OC vectors per block (0: the ISA's limit)
    bool direct = true;      // QCONV_JIT_CONV_DIRECT=0: padded sources always copied
    bool flat2d = true;      // QCONV_JIT_CONV_FLAT2D=0: short rows not run as one pixel list
    bool taps_inner = true;  // QCONV_JIT_CONV_TAPS_INNER=0: the kh → kw → ICg/4 loop order
    bool fused = true;       // QCONV_JIT_CONV_FUSED=0: the output pipeline outside the micro-kernels
    bool dw_direct = true;   // QCONV_JIT_CONV_DW_DIRECT=0: depthwise sources always copied
    bool dw_pair = true;     // QCONV_JIT_CONV_DW_PAIR=0: no row pairs in the depthwise row kernel
    bool dw_row_copy = true; // QCONV_JIT_CONV_DW_ROW_COPY=0: strided depthwise rows copy the whole source first
    bool dw_row = true;      // QCONV_JIT_CONV_DW_ROW=0: the depthwise row-kernel row refuses
    int dw_native = -1;      // QCONV_JIT_CONV_DW_NATIVE=0|1: byte-layout variant off / forced (-1: auto)
    int dw_band = 0; // QCONV_JIT_CONV_DW_BAND=N: depthwise rows per band of the fused 1x1 + dw rows (0: ~256 KiB ring)
    static conv_knobs from_env();
    // The values that differ from the defaults ("ur=4,fused=0"), or "default".
    std::string str() const;
};

// Whether the output pipeline of `a` can be fused into the micro-kernels: no
// transcendental eltwise (those are computed by eltwise_ref in C++), at most
// max_fused_full full-tensor operands (what a call carries), and fusion not
// turned off by the knob (debugging, comparisons).
bool pipeline_fusable(const attr_set &a, const conv_knobs &k);

// Arguments of one micro-kernel call.
struct conv_call {
    const uint8_t *src;                // input pixel of output pixel 0, tap (0, 0), channel g·ICg
    const int8_t *wei;                 // packed weights of the OC block
    int32_t *acc;                      // int32 tile (unfused kernels)
    void *dst;                         // dst element (pixel 0, channel c0) (fused kernels)
    const int32_t *comp;               // comp + c0
    const float *bias;                 // bias + c0 (or null)
    int64_t c_off;                     // c0 · 4: byte offset into the pipeline's per-OC arrays
    const float *full[max_fused_full]; // full binary operands at (pixel 0, c0)
    const int32_t *corr;               // direct-mode correction rows (row 0, channel 0), or null
};
using conv_ukernel_fn = void (*)(const conv_call *);

// Builds (and owns) the code of one micro-kernel.
class conv_ukernel {
public:
    explicit conv_ukernel(const conv_ukernel_cfg &cfg);
    ~conv_ukernel();
    conv_ukernel_fn fn() const { return fn_; }
    const conv_ukernel_cfg &cfg() const { return cfg_; }

private:
    conv_ukernel_cfg cfg_;
    std::unique_ptr<jit_generator> gen_;
    conv_ukernel_fn fn_ = nullptr;
};

// Register-width facts of an ISA variant: OC lanes per vector, OC vectors per
// block (at most), accumulator registers for nb OC vectors, and bytes per
// source element in the kernel's view (1: u8 bytes; 2: widened u16).
int oc_lanes(conv_isa i);
int max_oc_vectors(conv_isa i);
int max_accumulators(conv_isa i, int nb);
int src_elem_bytes(conv_isa i);
// Accumulator registers of the depthwise micro-kernel with KW weight registers.
int max_accumulators_dw(conv_isa i, int kw);
// The CPU features a variant's instructions need.
impl::feature_set required_features(conv_isa i);

// What a JIT conv row decided: the variant, the knobs its kernels are built
// with and, for the dense rows, the geometry (conv_x8s8_plan.h: source,
// loop order, blocking, pipeline). A dense plan without one (the fused
// 1x1 + dw row plans each band's problem) is planned by conv_create().
struct conv_geometry;
namespace dw {
struct rows_geometry;
}
struct conv_plan : impl::plan {
    conv_isa isa = conv_isa::avx512_core_vnni;
    enum class kind { dense, depthwise, depthwise_rows } k = kind::dense;
    conv_knobs knobs;
    std::shared_ptr<const conv_geometry> geometry;
    std::shared_ptr<const dw::rows_geometry> rows; // the depthwise row kernel's plan
    // "dense:avx2 source=padded_copy pixels=list taps=inner oc_blocks=1x2 pipeline=tile knobs=default".
    std::string str() const override;
};

// Whether the dense family can run (problem, attr) with variant i (the
// platform's features are the row's business); only_1x1: a 1x1 kernel only.
bool conv_supports(conv_isa i, bool only_1x1, const conv_problem &p, const attr_set &a, std::string *why);
// Whether the depthwise family can (groups == IC == OC); `rows`: the row
// kernel (AVX-512 VNNI + VBMI), which also needs the knob on.
bool conv_dw_supports(conv_isa i, bool rows, const conv_problem &p, const attr_set &a, const conv_knobs &k,
                      std::string *why);
std::shared_ptr<const impl::conv_kernel> conv_create(const conv_problem &p, const attr_set &a, const conv_plan &pl);
std::shared_ptr<const impl::conv_kernel> conv_dw_create(const conv_problem &p, const attr_set &a, const conv_plan &pl);

// Table rows (dispatch/conv_list.cpp); `name` must be the configuration's.
impl::conv_entry conv_row(const std::string &name, conv_isa i);
impl::conv_entry conv_dw_row(const std::string &name, conv_isa i);
// The depthwise row kernel: jit:conv_dw_x8s8_rows:avx512_core_vnni.
impl::conv_entry conv_dw_rows_row(const std::string &name);
// A 1x1 with a fused 3x3 depthwise item, band by band through a per-thread
// ring of intermediate rows (conv_1x1_dw.cpp): jit:conv_1x1_dw_x8s8:<isa>.
impl::conv_entry conv_1x1_dw_row(const std::string &name, conv_isa i);

} // namespace qconv::jit
