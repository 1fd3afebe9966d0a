// Int8 convolution on AMX tiles (u8 or s8 source, s8 weights): the row
// jit:conv_x8s8:avx512_core_amx. Design and measurements: docs/jit_conv_amx.md.
//
// The convolution is a GEMM of output pixels (M) × output channels (N) over
// the reduction (K = taps × ICg). One micro-kernel call computes 32 pixels ×
// 32 channels in four 16x16 int32 C tiles (tmm0..3) from two A tiles
// (tmm4/5: 16 pixels × kc source bytes each) and two B tiles (tmm6/7: the
// VNNI-4 weights of 16 channels, kc/4 rows × 64 bytes), one tdpbusd (u8
// source) or tdpbssd (s8 source) per (A, B) pair, and stores the C tiles to
// an int32 buffer; the output pipeline then runs on it: fused into the same
// code (the epilogue injector, per pixel row of the buffer) when the chain allows
// (pipeline_fusable), else the C++ AVX-512 pipeline.
//
// The source is read through one of four views, every row of a tile one
// output pixel:
//  * in place: 1x1, stride 1, no padding, ICg a multiple of kc;
//  * padded copy (stride 1, any kernel, padding, dilation): per (image,
//    group) the touched rows and columns, channels padded with 0 to a
//    multiple of kc, padded pixels holding the zero point (per-IC for the
//    legacy mechanism, the scalar for the stock one, 0 without). Output
//    pixels are flattened over the copy's width: tap (kh, kw) of virtual
//    pixel q is pixel q + kh·DH·W + kw·DW; columns ≥ OW are computed and
//    not stored;
//  * row taps (small ICg under a KxK kernel, KW·ICg ≤ 64): the padded copy
//    of the source's pixels in the SH row-phase planes, a tap a whole
//    kernel row (KW·ICg consecutive bytes), the A stride SW pixels;
//  * gathered copy (strides, small ICg): each output pixel's whole window
//    as one row of KH·KW·ICg bytes (padded taps hold the zero point), so
//    the taps fill K.
// Because every padded tap holds the zero point, the compensation
// −Σ zp[ic]·w is one int32 per output channel (core/compensation.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/jit/conv/conv_plan.h"
#include "kernels/jit/conv/conv_ukernel.h"
#include "rows/row.h"

namespace qconv::jit {

// One micro-kernel: `taps` A offsets (bytes from the block's first pixel),
// nk K chunks of kc bytes each per tap; weights [chunk][tap][half][kc/4][16][4].
struct amx_ukernel_cfg {
    std::vector<int64_t> tap_off;
    int nk = 1;
    int kc = 64;
    bool s8_src = false; // tdpbssd instead of tdpbusd
    // Fused output pipeline (null: the kernel only stores the C tiles).
    const struct pipeline *pipe = nullptr;
    // Fused: destination elements between consecutive output pixels (OC).
    int64_t dst_pixel_elems = 0;
    // K ranges: each call runs amx_call::nk chunks (from its a and b) and
    // starts from zero or from its C buffer, and the fused pipeline runs only
    // for the calls that end their block's K (amx_call::flags). Off: every
    // call runs the whole K from zero and is followed by its pipeline.
    bool k_ranges = false;
    // Fused: the chain's per-OC parameters held in vector registers across a
    // block's pixel rows (else reloaded per row).
    bool hoist = true;
    // The K loop prefetches the packed weights this many bytes ahead of its B
    // tile loads (0: none), one line per 64 bytes loaded.
    int64_t prefetch_bytes = 0;
    // Fused u8 stores: the blocks whose 32 outputs are consecutive pixels
    // store a full OC vector's rows four at a time through the saturating
    // packs (else one vpmovusdb a row); bounded_u8: without min(255, y)
    // before them (bounded_u8_store(), conv_pipeline.h).
    bool pack_u8 = false;
    bool bounded_u8 = false;
};

// Arguments of one call.
struct amx_call {
    const uint8_t *a; // pixel 0 of the block, first channel of the group
    int64_t a_stride; // bytes between consecutive pixels
    const int8_t *b;  // packed weights of the OC block
    int32_t *c;       // int32 [32 pixels][32 channels], 64-byte aligned
    // Fused kernels: row_off[i] = element offset of pixel i's output from
    // dst (−1: not stored), or null when the 32 outputs are consecutive
    // pixels from element offset row0; dst, comp, bias
    // and the full operands at channel c0 of the block, c_off = c0 · 4;
    // mask: valid channels of each 16-channel half.
    const int64_t *row_off;
    int64_t row0;
    void *dst;
    const int32_t *comp;
    const float *bias;
    int64_t c_off;
    const float *full[max_fused_full];
    uint16_t mask[2];
    // K ranges (amx_ukernel_cfg::k_ranges): the chunks this call runs and
    // what it does with its C buffer.
    int32_t nk;
    uint32_t flags;
    static constexpr uint32_t load_c = 1; // start from the C buffer (else from zero)
    static constexpr uint32_t last_k = 2; // the block's K ends here: the fused pipeline runs on it
};
// Runs n calls (blocks) in order.
using amx_ukernel_fn = void (*)(const amx_call *, int64_t n);

// Owns the code of a micro-kernel and of its tile configuration helpers.
class amx_ukernel {
public:
    explicit amx_ukernel(const amx_ukernel_cfg &cfg);
    ~amx_ukernel();
    amx_ukernel_fn fn() const { return fn_; }
    // ldtilecfg of this kernel's palette (per thread, before the first call)
    // and tilerelease (when the thread is done).
    void configure() const;
    void release() const;

private:
    struct gens;
    std::unique_ptr<gens> gens_;
    amx_ukernel_fn fn_ = nullptr;
    alignas(64) uint8_t tilecfg_[64] = {};
};

// The table row (dispatch/conv_list.cpp); `name` must be
// "jit:conv_x8s8:avx512_core_amx".
impl::conv_entry conv_amx_row(const std::string &name);

} // namespace qconv::jit
