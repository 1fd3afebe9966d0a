// Weight-compressed MatMul on AMX-BF16 at f32 accuracy (u8/s8/u4/s4 weights,
// f32 activations): jit:matmul_wc_x8:avx512_core_amx, jit:matmul_wc_x4:avx512_core_amx.
//
// Scheme (docs/semantics.md §7, docs/matmul_wc.md "AMX-BF16 rows"):
//   b = w − zp is an integer with |b| <= 255, exact in bf16;
//   x = x_hi + x_lo + e, x_hi = bf16(x), x_lo = bf16(x − x_hi), |e| <= 2^-17 |x|;
//   two tdpbf16ps passes (x_hi·b and x_lo·b, exact products, f32 sums) per
//   chunk of at most 128 k inside one group, then acc = fma(C, scale, acc)
//   with the f32 scale of the chunk's group (scales are never rounded).
//
// Packed layout (pack(), still compressed): signed weights are stored with
// their sign bit flipped (s8 + 128, s4 + 8) and the zero point moved with
// them, so the kernel sees unsigned codes and b = code − zp'. The N columns
// are cut into panels of 32 (two B tiles of 16 columns); per panel and k-tile
// of 32 k: tile 0 then tile 1, 16 rows (k pairs) of 16 columns × 2 k:
//   8-bit: 32 bytes per row, byte [r][n][j] = code(n, 2r + j)
//   4-bit: 16 bytes per row, byte [r][n] = code(n, 2r) | code(n, 2r + 1) << 4
// The kernel widens one row to the VNNI-2 bf16 row of the tile (64 bytes:
// bf16(b(n, 2r + j)) at [n][j]) in an L1 buffer. Per panel and group the
// parameters follow: scale f32[32], then zp' (8-bit: int32 per (tile, n, j),
// 64 values; 4-bit: int16 per (tile, n, j), 64 values).
//
// One call of a generated kernel handles one chunk of one panel for all M
// rows: per block of two 16-row tiles zero the C tiles, run the k-tiles (B
// from the buffer the previous call filled, A hi and lo from the activation
// buffer), and drain C into the f32 accumulators; between the tile
// operations it decompresses the next call's chunk into the other buffer
// (double buffering: the vector ports work while the tile unit does).
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/jit/base/jit_base.h"
#include "qconv/types.h"

namespace qconv::jit {

// The activation buffer: per 16-row tile mt, k-tile kt and part p (0: hi,
// 1: lo) a tile of a_rows rows × 32 bf16 at ((mt·k_tiles + kt)·2 + p)·a_rows·64 bytes.
struct matmul_wc_amx_call {
    const uint8_t *w;      // the next call's chunk of compressed weights, decompressed by this call
    const void *zp_params; // its group's parameters (zp' used)
    uint16_t *b_out;       // where it goes: k_steps × 2 tiles × 1 KB, 64-byte aligned
    const void *params;    // this chunk's group parameters: scale[32], zp'[64]
    const uint16_t *b;     // this chunk's decompressed B (written by the previous call)
    const uint16_t *a;     // activation tiles of the chunk's first k-tile (mt = 0)
    float *acc;            // accumulators [m_tiles·16][32] (rows of 128 bytes)
    float *scratch;        // 4 KB, 64-byte aligned: the four drained C tiles
};
using matmul_wc_amx_fn = void (*)(const matmul_wc_amx_call *);
using matmul_wc_amx_cfg_fn = void (*)(const void *); // ldtilecfg of a 64-byte config

struct matmul_wc_amx_config {
    bool four_bit = false;
    bool zp = false;              // subtract zp' (false only when every zp' is 0)
    int k_steps = 4;              // k-tiles of 32 k per call (chunk = 32·k_steps k)
    int64_t m_tiles = 1;          // 16-row tiles of A and C
    int a_rows = 16;              // rows of each A / C tile (M when M < 16)
    int64_t k_tiles = 1;          // k-tiles of the whole (padded) K
    bool decompress_only = false; // the first chunk of a thread: no tile work
    int row_bytes() const { return four_bit ? 16 : 32; }
    int64_t chunk_bytes() const { return int64_t(k_steps) * 2 * 16 * row_bytes(); }
};

// The bytes of the 64-byte tile configuration for c (palette 1): tmm0..3 C,
// tmm4/5 A hi/lo (a_rows × 64 bytes), tmm6/7 B (16 × 64 bytes).
void matmul_wc_amx_tile_config(const matmul_wc_amx_config &c, uint8_t cfg[64]);

// Builds (emits and seals) the chunk kernel for c.
std::unique_ptr<jit_generator> make_matmul_wc_amx_generator(const matmul_wc_amx_config &c);

// Chunk length (k between drains of the C tiles) for K padded to k_pad (a
// multiple of 32) and group size gs: the largest of 128, 96, 64, 32 dividing
// gs (per output channel: K is padded to a multiple of it) whose bound stays within
// matmul_wc_amx_max_epsilon; 32 when none does (the rows then refuse).
int64_t matmul_wc_amx_chunk(int64_t k_pad, int64_t gs, bool per_oc);

// The relative error bound of the rows (docs/semantics.md §7):
//   eps = 2^-17 + (2·chunk + K/chunk + 3)·2^-24   of Σ|x·deq(W)| + |bias|.
double matmul_wc_amx_epsilon(int64_t k_pad, int64_t chunk);
// The largest relative bound the rows accept.
constexpr double matmul_wc_amx_max_epsilon = 3e-5;
// Plus an absolute term for the flush of denormal values (DAZ/FTZ): per
// output at most 2^-120 · Σ_k (|w − zp| + 1)·|scale|.
constexpr double matmul_wc_amx_flush_factor = 7.52316384526264e-37; // 2^-120

} // namespace qconv::jit
