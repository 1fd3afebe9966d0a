// The weight-decompression subgraph, matched in one place for the conv1x1 →
// MatMul rewrite and the executor's compressed MatMul (docs/graph.md):
//
//   Wq [→ Reshape] → Convert(T) [→ Subtract(·, Convert(ZP) to T)] → Multiply(·, Scale) [→ Reshape]
//
// in the activation type T (f32, f16 or bf16): Wq an integer Constant or
// Parameter, ZP an integer Constant, Scale a Constant of type T or a
// Convert(f16 Constant) to T; the Multiply's operands in either order.
#pragma once

#include <string>
#include <vector>

#include "qconv/graph.h"

namespace qconv::graph::detail {

struct decompression {
    node *wq = nullptr;         // the integer Constant or Parameter
    node *wq_reshape = nullptr; // a Reshape between Wq and its Convert, or null
    node *cw = nullptr;         // Convert(Wq) to T: its shape is the decompression shape
    node *sub = nullptr;        // the zero point's Subtract, or null
    node *cz = nullptr;         // Convert(ZP) to T (with sub)
    node *zp = nullptr;         // the zero point's Constant (with sub)
    node *mul = nullptr;        // the Multiply by the scale
    node *scale = nullptr;      // the scale's Constant (of type T, or f16 under cscale)
    node *cscale = nullptr;     // Convert(f16 scale) to T, or null
    node *reshape = nullptr;    // a Reshape after the Multiply, or null
    // Every node from the weights' consumer's input back to Wq (Wq itself
    // and the two Constants excluded): what a fused MatMul replaces.
    std::vector<node *> chain() const;
};

// Matches the subgraph ending at `w` (the weights input of a Convolution or a
// MatMul) in type T. On a mismatch returns false and, when `why` is given,
// one line naming the first piece that differs ("scale is not a Constant
// (Parameter)").
bool match_decompression(node *w, dtype T, decompression *d, std::string *why = nullptr);

// The (n, group) → value table of a broadcast constant `c` (a scale or zero
// point) against the decompression shape D, where row n spans K = elems(D)/N
// and groups have G consecutive elements; false when c is not constant
// within each group.
bool group_table(const node &c, const shape_t &D, int64_t G, std::vector<double> *out);
// The smallest group size (a divisor of K) along which c is constant: K, or
// the product of D's dims after the last dim along which c varies.
int64_t group_of(const node &c, const shape_t &D);

} // namespace qconv::graph::detail
