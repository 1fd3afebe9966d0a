// Table lookups on 8-bit integers (graph/ops/lut.cpp): the kernels of the
// LookupTable op, which stands for an elementwise f32 island between
// DequantizeLinear and QuantizeLinear (docs/graph.md, "8-bit elementwise
// islands"). The output is a function of the one or two 8-bit inputs only, so
// a table made by running the island as written on every input value gives
// its bits exactly.
#pragma once

#include <cstdint>

namespace qconv::graph::detail {

// y[i] = table[x[i]], n elements.
void lut_unary(const uint8_t *x, int64_t n, const uint8_t *table /* [256] */, uint8_t *y);

// One table of 256 entries per channel (table [C][256]): a as [outer][C][inner]
// (plain, inner = H·W) or [outer][inner][C] (NHWC, inner = H·W): y = table[c][a].
void lut_per_channel(const uint8_t *x, int64_t outer, int64_t C, int64_t inner, bool nhwc, const uint8_t *table,
                     uint8_t *y);

// Two inputs: y = table[a · 256 + b] over [outer][mid][inner] elements of a
// (and y); b is broadcast: its element for (o, m, i) is b[o·b_outer + m·b_mid
// + i·b_inner] (a stride 0 repeats it). Equal shapes: (0, 0, 1) with outer =
// mid = 1; a per-channel operand [N, C, 1, 1] of an NHWC tensor: outer N, mid
// H·W, inner C, strides (C, 0, 1); of a plain one: outer N·C, mid 1, inner
// H·W, strides (1, 0, 0).
struct lut2_geometry {
    int64_t outer = 1, mid = 1, inner = 1;
    int64_t b_outer = 0, b_mid = 0, b_inner = 1;
};
void lut_binary(const uint8_t *a, const uint8_t *b, const lut2_geometry &g, const uint8_t *table /* [65536] */,
                uint8_t *y);

} // namespace qconv::graph::detail
