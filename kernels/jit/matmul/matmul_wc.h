// Weight-compressed MatMul JIT kernels (u8/s8/u4/s4 weights, f32 activations).
//
// Y[M,N] = X[M,K] · deq(W)ᵀ + bias,  deq(W)[n,k] = (W[n,k] − zp[n,g]) · scale[n,g],  g = k / GS.
//
// Layout (built once by pack(), still compressed): the N columns are cut into
// panels of W = 64 (avx512, four zmm) or 32 (avx2, four ymm) columns. Inside a
// panel the weights are stored k-slice by k-slice, one byte per column:
//   8-bit: byte [k][c] = W[n0 + c][k]                       (K slices)
//   4-bit: byte [kk][c] = W[n0+c][2kk] | W[n0+c][2kk+1] << 4 (ceil(K/2) slices)
// so one 16-byte (zmm) / 8-byte (ymm) load, widened with vpmovzxbd/vpmovsxbd,
// gives one K-slice of a vector of columns (4-bit: two K-slices, the low and
// high nibbles). 4-bit on zmm (the "lut8" layout, groups a multiple of 8 or
// per-OC) stores blocks of 8 k instead:
//   byte [b][v][c][j] = W[n0+16v+c][8b+2j] | W[n0+16v+c][8b+2j+1] << 4
// (4 bytes per column, 64 bytes per vector of 16 columns), so a 64-byte load
// at byte offset j puts k = 8b+2j in the low 4 bits of lane c, and one shift
// by 4 puts k+1 there. Per panel and group the parameters follow as f32 vectors:
// scale[W] and, if there is a zero point, zp[W]. Padding columns have weight
// 0, zp 0 and scale 0 and are never stored.
//
// The generated code (one template over the register width, Ymm or Zmm)
// computes an mb x W block of Y for one panel and all of K:
//   for each group g:  part = Σ_{k in g} f32(w − zp) · x[m][k]   (f32 FMA)
//                      out  = out + part · scale[g]              (once per group)
// Decompression happens in registers (widen, nibble and/or shift, cvtdq2ps,
// exact f32 zp subtraction; for 4-bit on zmm a vpermps table lookup instead,
// which reads only the low 4 bits of each lane: of f32(v − zp) without a zero
// point or with a tensor one — with the lut8 layout 2.5 vector uops per 16
// nibbles: half a shift, a lookup, an FMA — or of f32(v) followed by the exact
// subtraction of a per-column zp vector). Small M uses the streaming shape (whole panel
// per call, memory bound: two accumulator sets to hide FMA latency when
// mb <= 2, software prefetch); larger M the register-blocked shape (half a
// panel, 12 rows (zmm) / 6 rows (ymm) per call), which reuses each
// decompressed vector for every row of the block and reads x packed k-major
// by the driver (x[k][m]: one sequential stream, plain displacements). The
// driver puts packed weights of 2 MB and more on huge pages (MADV_HUGEPAGE).
// From a crossing M (matmul_wc_prefill_min_m, below) the prefill shape
// instead unpacks each panel's weights to f32 once per call and sweeps every
// row over them (matmul_wc_prefill_gen.cpp).
// The C++ driver splits the (panel, row-block)
// grid over OpenMP threads; each output element is produced by exactly one
// call with a fixed summation order, so results do not depend on the thread
// count (K is never split).
//
// Rows registered: jit:matmul_wc_x8:avx512_core, jit:matmul_wc_x4:avx512_core,
// jit:matmul_wc_x8:avx2, jit:matmul_wc_x4:avx2 (x8 = u8/s8, x4 = u4/s4).
// These rows compute in f32 whatever matmul_hints::dynamic_quantization says
// (the hint permits quantizing X, it does not require it). The opt-in
// dynamic-quantization row jit:matmul_wc_dq:avx512_core_vnni (matmul_wc_dq.cpp)
// comes first in the table and accepts only when the hint is set.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/jit/base/jit_base.h"
#include "qconv/types.h"
#include "rows/row.h"

namespace qconv::jit {

// One call of a generated kernel: one panel (or its column offset), mb rows.
struct matmul_wc_call {
    const uint8_t *w;    // first k-slice of the panel
    const float *params; // group 0 parameters of the panel: scale[W] (zp[W])
    const float *x;      // row 0 of the block, rows x_stride floats apart
    float *out;          // mb rows of pc·W floats (overwritten)
    const float *lut;    // lut kernels: f32(v − zp) for the 16 nibble values v
};
using matmul_wc_fn = void (*)(const matmul_wc_call *);

struct matmul_wc_config {
    dtype wei_dt = dtype::u8;    // u8, s8, u4, s4
    bool zp = false;             // subtract the zp vector stored after scale
    bool zmm = true;             // register width: zmm (avx512) or ymm (avx2)
    int mb = 1;                  // rows per call
    int nv = 4;                  // vectors (of vlen columns) per panel: 4 = a panel, 2 = half
    int pc = 1;                  // panels per call (streaming: several weight streams at once)
    int64_t panel_bytes = 0;     // distance between panels (pc > 1)
    int64_t panel_params = 0;    // floats between the parameters of two panels (pc > 1)
    int64_t steps_per_group = 0; // k-slices (bytes per column) per group
    int64_t n_groups = 1;
    int64_t x_stride = 0; // floats between rows of x
    // x of the block packed k-major (x[k][m], mb floats per k) by the driver:
    // one sequential stream and plain displacements instead of mb row streams.
    bool x_packed = false;
    bool prefetch = false; // software prefetch of the weight stream
    // 4-bit on zmm: one vpermps from a 16-entry table of f32(v − zp) (per-column
    // zp: f32(v), then the zp vector is subtracted) replaces mask/shift +
    // convert (vpermps reads only the low 4 bits of each index).
    bool lut = false;
    // lut with the 8-k layout (see the layout above): each step is a block
    // of 8 k, 4 bytes per column; the low nibbles of the four bytes come from
    // four loads at byte offsets 0..3 (vpermps ignores the upper index bits),
    // the high nibbles from one shift of each.
    bool lut8 = false;
    int64_t prefetch_distance = 4096; // bytes ahead in every weight stream
    // Type of x in rows (not x_packed, not unpack; mb <= 9): f32, or f16 /
    // bf16 read as 16-bit words and converted exactly where they are loaded:
    // every 256 k of a group (and its tail) the kernel converts the next k
    // values of every row (f16: vcvtph2ps; bf16: vpmovzxwd + vpslld 16) into
    // an aligned scratch on the stack, from which the FMAs broadcast them as
    // they do from f32 rows.
    dtype x_dt = dtype::f32;
    // Prefill unpacking (mb = 0, nv = 4, pc = 1): each decompressed vector,
    // f32(w − zp) (exact small integers, no scale), is stored to out instead
    // of feeding FMAs: k-row k of the chunk at out + k·panel() floats.
    bool unpack = false;

    int vlen() const { return zmm ? 16 : 8; }
    int panel() const { return 4 * vlen(); } // columns per panel
    bool four_bit() const { return wei_dt == dtype::u4 || wei_dt == dtype::s4; }
    // Accumulators available: zmm 28, ymm 12 (the rest are temporaries).
    int acc_budget() const { return zmm ? 28 : 12; }
    // Accumulator sets: two independent FMA chains for the streaming shapes.
    int vectors() const { return pc * nv; }
    int sets() const { return mb <= 2 && 2 * mb * vectors() <= acc_budget() ? 2 : 1; }
    int64_t param_floats() const { return (zp ? 2 : 1) * panel(); } // per group
    int col_bytes() const { return lut8 ? 4 : 1; }                  // bytes per column and step
    int k_per_step() const { return lut8 ? 8 : four_bit() ? 2 : 1; }
};

// The two kernel shapes. Streaming (M <= streaming_max_m): one call covers
// pc whole panels (nv = 4) for all M rows; pc > 1 reads pc weight streams at
// once (one stream per core does not reach the DRAM bandwidth). Register-blocked (larger M): calls
// cover half a panel (nv = 2) for blocked_mb rows, so each decompressed
// vector feeds blocked_mb FMAs (zmm: 12 rows x 2 vectors = 24 accumulators;
// ymm: 6 x 2 = 12).
inline int matmul_wc_streaming_max_m(bool zmm) { return zmm ? 4 : 2; }
inline int matmul_wc_blocked_mb(bool zmm) { return zmm ? 12 : 6; }

// Builds (emits and seals) a kernel for the configuration.
std::unique_ptr<jit_generator> make_matmul_wc_generator(const matmul_wc_config &c);

// The prefill shape (M from matmul_wc_prefill_min_m on): per panel and
// K-chunk the weights are unpacked once (matmul_wc_config::unpack) into an
// f32 buffer b[k][panel] = f32(w − zp), then every row block of M is swept
// over it by a register-blocked FMA kernel (matmul_wc_prefill_gen.cpp):
//   for each group of the chunk:  part = Σ_k b[k][c] · x[m][k]      (f32 FMA, k in order)
//                                 out  = out + part · scale[g][c]   (once per group)
// A group longer than a chunk is split: the first chunks store part (part_out),
// the next ones start from it (part_in). The sums are those of the other
// shapes: every product f32(w − zp)·x in f32, k in increasing order, the
// scale once per group sum.
struct matmul_wc_prefill_call {
    const float *x;     // the block's x packed k-major (x[k][m], mb floats per k) at the chunk's first k
    const float *b;     // unpacked chunk at the block's first column, b_stride floats per k
    float *out;         // mb rows, out_stride floats apart
    float *part;        // partial sums of a split group, laid out like out
    const float *scale; // the chunk's first group scales at the block's columns, param_stride apart
    int64_t n_groups;   // groups in the chunk (1 for a split group)
};
using matmul_wc_prefill_fn = void (*)(const matmul_wc_prefill_call *);

struct matmul_wc_prefill_config {
    bool zmm = true;
    int mb = 6;               // rows per call (zmm <= 6 with nv 4; ymm <= 6 with nv 2)
    int nv = 4;               // vectors of columns per call
    int64_t k_group = 1;      // k per group (of a split group: per chunk)
    int64_t b_stride = 0;     // floats between k-rows of b
    int64_t out_stride = 0;   // floats between rows of out and part
    int64_t param_stride = 0; // floats between the scales of two groups
    bool part_in = false;     // start from part (else from 0)
    bool part_out = false;    // store part (else out += part · scale)
    int vlen() const { return zmm ? 16 : 8; }
};
std::unique_ptr<jit_generator> make_matmul_wc_prefill_generator(const matmul_wc_prefill_config &c);

// Register blocking of the prefill kernel: zmm 6 rows x 4 vectors (a whole
// panel: 24 accumulators, 4 weight vectors, x broadcast from memory), ymm 6
// rows x 2 vectors (12 accumulators, 2 weight vectors, 2 broadcast x).
inline int matmul_wc_prefill_mb(bool) { return 6; }
inline int matmul_wc_prefill_nv(bool zmm) { return zmm ? 4 : 2; }

// Smallest M the rows run in the prefill shape (their plan, matmul_wc_plan),
// the crossing points measured on Zen 4 (AMD EPYC, family 25; K = N = 4096,
// 1 thread, best of 8 interleaved; docs/matmul_wc.md, "Prefill"):
//   ymm, 8-bit: the blocked shape is 5 % faster at M = 16, the prefill 3 % at
//               24, 12 % at 128 (41.6 against 46.8 ms)        -> 24
//   ymm, 4-bit: even at M = 8, 9 % at 16, 24 % at 128           -> 8
//   zmm:        the blocked shape wins at every M (4 % at 128, 16 % at 32):
//               on this core a zmm FMA takes both 256-bit FMA pipes and
//               the in-register decompression issues beside it, so the
//               blocked shape already runs at 95-97 % of the f32 FMA peak;
//               the prefill pays its unpacking on top           -> never
// (Cores with two 512-bit FMA pipes may cross; measure them before setting it.)
constexpr int64_t matmul_wc_prefill_never = INT64_MAX;
inline int64_t matmul_wc_prefill_min_m(bool zmm, bool x4) {
    if (zmm) return matmul_wc_prefill_never;
    return x4 ? 8 : 24;
}

} // namespace qconv::jit

namespace qconv::impl {

// Table rows (dispatch/matmul_list.cpp; kernels/jit/matmul/matmul_wc.cpp,
// matmul_wc_dq.cpp): jit:matmul_wc_{x8,x4}:{avx512_core,avx2} and the opt-in
// dynamic quantization jit:matmul_wc_dq:avx512_core_vnni.
// The register width and the weight bits a row is built for.
enum class wc_width { ymm, zmm };
enum class wc_bits { x8, x4 };
matmul_entry matmul_wc_row(const std::string &name, wc_width width, wc_bits bits);
// The plan of those rows: the kernel's shape at the descriptor's M, decided
// in supports() and built by create() — streaming (M up to
// jit::matmul_wc_streaming_max_m: weights streamed once, pc panels per call),
// blocked (register blocks of rows over half panels) or prefill (M from
// jit::matmul_wc_prefill_min_m: weights unpacked to f32 once per call).
struct matmul_wc_plan : plan {
    enum class shape { streaming, blocked, prefill };
    wc_width width = wc_width::zmm;
    shape s = shape::blocked;
    int pc = 1; // weight panels per streaming call
    bool prefill() const { return s == shape::prefill; }
    // "streaming pc=4", "blocked", "prefill".
    std::string str() const override;
};
// The plan a row of `width` and `bits` makes for d (the shape by M).
matmul_wc_plan plan_matmul_wc(const matmul_desc &d, wc_width width, wc_bits bits);
// The plan in shape s whatever d's M (tests compare the shapes at one M).
matmul_wc_plan plan_matmul_wc(const matmul_desc &d, wc_width width, matmul_wc_plan::shape s);
matmul_entry matmul_wc_dq_row(const std::string &name);
// AMX-BF16 at f32 accuracy (kernels/jit/matmul/matmul_wc_amx.cpp): jit:matmul_wc_{x8,x4}:avx512_core_amx.
matmul_entry matmul_wc_amx_row(const std::string &name, wc_bits bits);
// Opt-in dynamic quantization on AMX-INT8 (kernels/jit/matmul/matmul_wc_dq_amx.cpp):
// jit:matmul_wc_dq:avx512_core_amx.
matmul_entry matmul_wc_dq_amx_row(const std::string &name);

} // namespace qconv::impl
