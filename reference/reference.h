// Reference implementations: plain loops that define "correct" for every
// other implementation. Readability over speed; no ISA-specific code.
#pragma once

#include <cstdint>

#include "core/lowering.h"
#include "qconv/conv.h"
#include "qconv/conv_f32.h"
#include "qconv/matmul.h"
#include "qconv/post_ops.h"

namespace qconv::ref {

// int32 accumulators acc[mb][oh][ow][oc] (NHWC).
//  stock_per_tensor / none: Σ w·(x − zp) over taps inside the input;
//  legacy_per_channel: taps outside the input read the zp byte, then comp[c]
//  (zp_compensation) is added. Both give the same numbers.
void conv_acc(const conv_problem &p, zp_mechanism mech, const std::vector<int32_t> &zp, const void *src,
              const int8_t *wei, int32_t *acc);

// Output pipeline for one element of channel c at NHWC offset `off`:
//   y = acc·scale[c] + bias[c] → ops (lowered) → + dst_zp; `dst_prev` is the
// destination's previous value (for sum). Returns the f32 value before store.
float apply_pipeline(const conv_problem &p, const std::vector<lowered_op> &ops, int32_t acc, const float *bias,
                     int64_t c, int64_t off, float dst_prev, const exec_args &args);
float apply_op(const lowered_op &op, float y, int64_t c, int64_t off, float dst_prev, const exec_args &args);

// Stores y as dt (integers: round half to even, saturate) / loads as f32.
void store(dtype dt, void *base, int64_t off, float y);
float load(dtype dt, const void *base, int64_t off);

// The whole convolution with a lowered attribute set.
void conv(const conv_problem &p, const attr_set &attr, const void *src, const int8_t *wei, const float *bias, void *dst,
          const exec_args &args);

// f32 convolution (graph layer): src NHWC f32, weights [G·OCg][ICg][KH][KW] f32,
// bias OC or null, then the post-op chain, dst NHWC f32.
void conv_f32(const conv_desc &d, const float *src, const float *wei, const float *bias, float *dst,
              const f32_post_ops &post = {});
// One f32 post-op on an output y of channel oc, as the graph's ops compute it
// (qconv/conv_f32.h): hardswish is Divide(Multiply(y, Clamp(Add(y, 3), 0, 6)), 6).
float apply_f32_post_op(const f32_post_op &op, float y, int64_t oc);

// Weight-compressed MatMul (docs/semantics.md).
void matmul(const matmul_desc &d, const matmul_weights &w, const float *x, float *y);
// X and Y of d's src_dt / dst_dt (f32, f16, bf16): X converted exactly to f32,
// the f32 definition above, Y rounded to nearest even (scalar conversions).
void matmul_typed(const matmul_desc &d, const matmul_weights &w, const void *x, void *y);

} // namespace qconv::ref
