// Activation conversions of the MatMul primitive: f16 and bf16 to f32 (exact)
// and f32 to f16 and bf16 (round to nearest even; NaN stays NaN, overflow
// gives inf; denormals are kept, never flushed). Each has a scalar loop and
// an AVX-512 one (F16C-class vcvtph2ps / vcvtps2ph for f16, integer
// arithmetic for bf16, which gives the same bits as the scalar form); the
// caller says whether the AVX-512 one may run (the platform under the cap).
#pragma once

#include <cstdint>

#include "qconv/types.h"

namespace qconv::detail {

// n elements of type `from` (f32, f16 or bf16) at src to f32 at dst.
void to_f32(dtype from, const void *src, float *dst, int64_t n, bool avx512);
// n f32 elements at src to type `to` (f32, f16 or bf16) at dst.
void from_f32(dtype to, const float *src, void *dst, int64_t n, bool avx512);

} // namespace qconv::detail

namespace qconv {

// Multiply-add with a single rounding, y·a + b. Every "·a + b" step of the
// output pipeline (scale and bias, linear, scale-shift, quantization) is
// defined with it, so FMA-based kernels match the reference bit for bit.
inline float madd(float y, float a, float b) { return __builtin_fmaf(y, a, b); }

} // namespace qconv
