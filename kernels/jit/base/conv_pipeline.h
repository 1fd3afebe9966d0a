// Output pipeline of the JIT conv kernels, run on an int32 accumulator tile.
//
// For every output element (docs/semantics.md §4, the same operation order
// as ref::apply_pipeline, so results are bit-identical):
//   y = float(acc + comp[c]) · scale[c] (+ bias[c]) → lowered post-ops in
//   chain order → + dst_zp → store (f32 as is; s32/s8/u8: NaN → 0, round half
//   to even, saturate).
// Per-tensor parameters are expanded to per-OC arrays once at creation, so
// the vector code always loads per-channel values. Transcendental eltwise
// functions call eltwise_ref per element (exact by construction); the other
// operations are vectorised with AVX-512 (16 channels per step) or AVX2
// (8 channels per step), reproducing the scalar semantics (fmax/fmin NaN
// rules, comparisons, non-fused multiply-add).
#pragma once

#include <cstdint>
#include <vector>

#include "core/lowering.h"
#include "kernels/jit/base/conv_isa.h"
#include "qconv/conv.h"
#include "qconv/post_ops.h"

namespace qconv::jit {

struct pipeline_op {
    lowered_op::kind k = lowered_op::kind::eltwise;
    eltwise_alg alg = eltwise_alg::relu;
    float alpha = 0.f, beta = 0.f;
    binary_alg balg = binary_alg::add;
    bool full = false;
    int full_index = -1;
    float sum_scale = 1.f, sum_zp = 0.f;
    bool round = true, dequantize = true;
    // Quantization: whether the crop (max cl, min ch) is emitted. False when
    // it is the last op before a u8/s8 store and, in every channel, cl and ch
    // carried through the op and the store land at or beyond the stored
    // range: the store's saturation then gives the same bytes (each step is
    // increasing), as for the graph's ReLU before a u8 output.
    bool crop = true;
    // Per-OC parameters (OC values + padding): a, b for binary/prelu/
    // depthwise; q[0..5] = cl, ch, isc, ish, osc, osh for quantization.
    std::vector<float> a, b;
    std::vector<float> q[6];
};

struct pipeline {
    dtype dst_dt = dtype::u8;
    int64_t oc = 0;
    std::vector<float> scale; // OC (+ padding)
    bool with_bias = false;
    float dst_zp = 0.f;
    bool has_sum = false;
    // comp[c] is 0 for every channel (u8 source without zero point): the
    // fused epilogue skips the add.
    bool comp_is_zero = false;
    std::vector<pipeline_op> ops;

    static pipeline build(const conv_problem &p, const attr_set &a);
    // Whether the pipeline implements every lowered op of `a` (a fused
    // dw-conv it does not); false with the reason otherwise.
    static bool takes(const attr_set &a, std::string *why);
};

// Whether the packed u8 stores of a JIT kernel may leave min(255, y) out:
// vcvtps2dq gives 0x80000000 for y ≥ 2^31, which the packs (vpackssdw +
// vpackuswb) saturate to 0 like a negative value, so the min is needed only
// where a stored y can reach 2^31. Two ways to know it cannot:
// - chain: an op of the chain bounds the values after it whatever the
//   accumulator and the bias (a clip, a FakeQuantize's crop, a ReLU below a
//   bounded op, ...): interval arithmetic over the ops after the fma, each
//   f32 rounding widening its span's ends by 2^-22 of themselves, ends
//   below 2^30 (chain_upper_bound());
// - bias: the store's value is acc·scale + bias itself (no post-op but the
//   store's own rounding, no destination zero point). With |acc + comp| ≤
//   K·2^17 (K products of u8 / shifted s8 values and zero points below 2^8
//   with s8 weights) and K·2^17·|scale| < 2^28 for every scale, the product
//   stays below 2^28; pack() then lowers a bias above 2^30 (or +inf) to 2^30
//   (bound_bias), so y stays below 2^31, and such a bias gives y > 2^29
//   before and after: 255 either way.
// The JIT kernels whose u8 stores pack leave the min out when either holds
// (docs/jit_conv.md).
struct u8_store_bound {
    bool bounded = false;    // no stored y reaches 2^31: the packs need no min(255, y)
    bool clamp_bias = false; // provided pack() lowers the bias (bound_bias)
};
u8_store_bound bounded_u8_store(const pipeline &pp, int64_t K);
// The largest value the chain after the fma can store (before the store's
// rounding), whatever the fma gave: +inf when no op bounds it.
double chain_upper_bound(const pipeline &pp);
constexpr float bounded_bias = 1073741824.f; // 2^30
inline void bound_bias(std::vector<float> &bias) {
    for (float &b : bias)
        if (b > bounded_bias) b = bounded_bias;
}

// One tile: npix output pixels (consecutive in dst, OC elements apart) ×
// nc channels starting at channel c0. acc[i·acc_stride + j] is the raw sum for
// pixel i, channel c0 + j; dst_off0 is the NHWC element offset of (pixel 0, c0).
struct tile {
    const int32_t *acc;
    int acc_stride;
    int npix;
    int64_t c0;
    int nc;
    int64_t dst_off0;
};

// The tile's acc rows and comp/bias/per-OC arrays must be readable up to
// whole vectors past nc (the kernels allocate them so).
// One body per ISA (conv_pipeline_avx512.cpp, conv_pipeline_avx2.cpp), called
// only on a machine that has it.
using pipeline_fn = void (*)(const pipeline &pp, const tile &t, const int32_t *comp, const float *bias, void *dst,
                             const exec_args &args);
extern const pipeline_fn run_pipeline_avx512;
extern const pipeline_fn run_pipeline_avx2;
// The body for a vector kernel's ISA (chosen once, when a kernel is built).
inline pipeline_fn pipeline_for(conv_isa i) { return isa_facts(i).evex ? run_pipeline_avx512 : run_pipeline_avx2; }

} // namespace qconv::jit
