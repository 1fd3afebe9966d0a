// The depthwise row kernel's code generator (make_dw_row_gen; the generator
// itself is conv_dw_row_gen.cpp) and its interface: the pixel-block runs of a
// row (dw_run), the compile-time configuration (dw_row_cfg), the call
// arguments (dw_call) and the register budget (dw_chunks, dw_max_acc,
// dw_native_max_acc). The kernel that plans, packs and calls it is
// conv_dw_row_kernel.cpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <memory>

#include "kernels/jit/base/conv_pipeline.h"
#include "kernels/jit/base/jit_base.h"
#include "kernels/jit/conv/conv_ukernel.h"

namespace qconv::jit::dw {

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
    int nb = 1;                   // channel vectors of a full block
    int last_nb = 0, last_n = 16; // tail block: vectors, lanes of its last vector (0: no tail)
    int kh = 1, kw = 1, sw = 1, dh = 1, dw = 1;
    int64_t pix_stride = 0, row_stride = 0; // source bytes
    uint64_t row_mask = ~uint64_t(0);       // kernel rows inside the image
    int masked_kh = -1;                     // kernel row that reads the image's last row (masked loads)
    std::vector<dw_run> runs;
    const pipeline *pipe = nullptr; // fused epilogue; null: int32 rows to acc
    int64_t acc_pix = 0;            // bytes between pixels of the int32 row
    int64_t blk_wbytes = 0;         // packed weight bytes per channel block
    // Byte layout (strided convolutions): 64-channel groups read as they are,
    // lane i of accumulator q is channel 4i + q (see dw_native_note below).
    bool native = false;
    int tail_bytes = 0; // channels of the last group (native, 0: none)
    // Pair mode (3-row kernels, stride 1, 16-channel blocks): output rows oh
    // and oh + 1 from one build of source rows r..r+3 (row_mask bits 0..3,
    // masked_kh: the one of them that is the image's last row); the second
    // row's dst is row_pix pixels further.
    // u8 stores may leave out the clamp before the packs: y < 2^31 is
    // known (bounded_u8_store(), conv_pipeline.h).
    bool bounded_u8 = false;
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
inline int dw_chunks(int kh) { return (kh + 2) / 3; }
inline int dw_native_max_acc(int kw) { return std::min(25, 30 - 4 * kw); }
inline int dw_max_acc(int nb, int kh, int kw) { return std::min(25, 28 - dw_chunks(kh) * kw * nb); }

// The code of one row class (jit:conv_dw_x8s8_rows:avx512_core_vnni), built
// now; its entry point is entry<dw_row_fn>() (conv_dw_row_gen.cpp).
std::unique_ptr<jit_generator> make_dw_row_gen(const dw_row_cfg &c);

} // namespace qconv::jit::dw
