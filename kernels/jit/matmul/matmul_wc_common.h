// Pieces shared by the weight-compressed MatMul kernels: the f32 rows
// (matmul_wc.cpp, matmul_wc_gen.cpp) and the dynamic-quantization row
// (matmul_wc_dq.cpp, matmul_wc_dq_amx.cpp).
//
// Host side (qconv::impl): the 4-bit test and the validation of
// matmul_weights against a descriptor (packed weights and parameters live in
// core/buffers.h's zeroed aligned buffers).
//
// Generator side (qconv::jit): how a kernel addresses the rows of its block of
// activations. Rows are a fixed number of bytes apart, held in one stride
// register; row m = 3j + i is [row_base(j) + stride·i + disp] (i = 0, 1, 2:
// the SIB scale covers it), so four base registers reach twelve rows and
// the loop advances only the bases. The counted loops (over the groups, and
// the unrolled one over a group's k-steps) are shared as well.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "core/buffers.h"
#include "kernels/jit/base/jit_base.h"
#include "qconv/types.h"
#include "rows/row.h"

namespace qconv::impl {

inline bool four_bit(dtype dt) { return dt == dtype::u4 || dt == dtype::s4; }

// The values a zero point of weight type dt may take.
inline void zp_range(dtype dt, int32_t *lo, int32_t *hi) {
    switch (dt) {
    case dtype::u8: *lo = 0, *hi = 255; break;
    case dtype::s8: *lo = -128, *hi = 127; break;
    case dtype::u4: *lo = 0, *hi = 15; break;
    default: *lo = -8, *hi = 7; break;
    }
}

// Throws qconv::error (field first) for missing pointers and zero points
// outside the weight type's range.
inline void check_wc_weights(const matmul_desc &d, const matmul_weights &w) {
    if (!w.wei) fail("wei", "is null");
    if (!w.scale) fail("scale", "is null");
    if (d.with_bias && !w.bias) fail("bias", "with_bias is set but no bias was given");
    if (d.zp == matmul_desc::zp_kind::none) return;
    if (!w.zp) fail("zp", "is null but a zero point is declared");
    int32_t lo, hi;
    zp_range(d.wei_dt, &lo, &hi);
    const int64_t count = d.zp == matmul_desc::zp_kind::per_tensor ? 1 : d.n * d.n_groups();
    for (int64_t i = 0; i < count; ++i)
        if (w.zp[i] < lo || w.zp[i] > hi)
            fail("zp", "value " + std::to_string(w.zp[i]) + " at " + std::to_string(i) + " is outside the " +
                           to_string(d.wei_dt) + " range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

// Shape checks common to every row: positive sizes, groups dividing K.
inline bool wc_shape_ok(const matmul_desc &d, std::string *why) {
    if (d.m <= 0 || d.k <= 0 || d.n <= 0) return reject(why, "m, k and n must be positive");
    const int64_t gs = d.group_size();
    if (gs <= 0 || d.k % gs != 0) return reject(why, "group size must divide k");
    return true;
}

// Dynamic quantization of X (the rows jit:matmul_wc_dq:*, matmul_wc_dq.cpp):
// max |x| over n values (NaN lanes ignored), and q[k] = clamp(rne(x[k]·inv),
// ±127) for n values, returning Σ q.
float dq_abs_max(const float *x, int64_t n);
int32_t dq_quantize(const float *x, int64_t n, float inv, int8_t *q);

} // namespace qconv::impl

namespace qconv::jit {

// Base register j of the rows 3j .. 3j+2.
inline const Xbyak::Reg64 &row_base(int j) {
    static const Xbyak::Reg64 bases[4] = {Xbyak::util::r10, Xbyak::util::rsi, Xbyak::util::r12, Xbyak::util::r13};
    return bases[j];
}
// Base registers for rows rows.
inline int row_bases_for(int rows) { return (rows + 2) / 3; }

// Row m at byte displacement disp.
inline Xbyak::RegExp row_at(int m, const Xbyak::Reg64 &stride, int disp) {
    const Xbyak::Reg64 &b = row_base(m / 3);
    switch (m % 3) {
    case 0: return b + disp;
    case 1: return b + stride + disp;
    default: return b + stride * 2 + disp;
    }
}

// With row_base(0) and stride loaded: row_base(j) = row_base(j − 1) + 3·stride.
inline void emit_row_bases(jit_generator &g, const Xbyak::Reg64 &stride, int n_bases) {
    for (int j = 1; j < n_bases; ++j) {
        g.mov(row_base(j), row_base(j - 1));
        for (int i = 0; i < 3; ++i) g.add(row_base(j), stride);
    }
}

// body() emitted once and run iters (>= 1) times, counting cnt down.
template <typename Body>
void emit_counted_loop(jit_generator &g, const Xbyak::Reg64 &cnt, int64_t iters, Body body) {
    Xbyak::Label loop;
    g.mov(cnt, iters);
    g.L(loop);
    body();
    g.dec(cnt);
    g.jnz(loop, Xbyak::CodeGenerator::T_NEAR);
}

// steps k-steps unrolled by unroll: a loop (counter cnt) of begin(unroll),
// step(0..unroll−1) then advance(unroll), followed by begin(rem), the
// remaining steps and advance(rem).
template <typename Begin, typename Step, typename Advance>
void emit_unrolled_steps(jit_generator &g, const Xbyak::Reg64 &cnt, int64_t steps, int unroll, Begin begin, Step step,
                         Advance advance) {
    const int64_t iters = steps / unroll;
    const int rem = static_cast<int>(steps % unroll);
    if (iters > 0)
        emit_counted_loop(g, cnt, iters, [&] {
            begin(unroll);
            for (int u = 0; u < unroll; ++u) step(u);
            advance(unroll);
        });
    if (rem > 0) {
        begin(rem);
        for (int u = 0; u < rem; ++u) step(u);
        advance(rem);
    }
}
template <typename Step, typename Advance>
void emit_unrolled_steps(jit_generator &g, const Xbyak::Reg64 &cnt, int64_t steps, int unroll, Step step,
                         Advance advance) {
    emit_unrolled_steps(
        g, cnt, steps, unroll, [](int) {}, step, advance);
}

} // namespace qconv::jit
