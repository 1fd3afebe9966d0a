// Quantized constant weights as the ONNX reader or the text format writes
// them (internal to graph/passes): their integers, scale and zero point.
#pragma once

#include <cstdint>
#include <vector>

#include "qconv/graph.h"

namespace qconv::graph::passes {

// A Constant with its bytes, of whole-byte elements.
bool constant_bytes(const node *n);

// The parts of quantized weights w = (q − z)·s; z null when there is none.
struct dequantized {
    node *q = nullptr, *s = nullptr, *z = nullptr;
};

// w as DequantizeLinear(q, s [, z]) of Constants, or as the reader's
// Multiply(Convert(q) [− Convert(z)], s) (either operand order), q of
// integers, s and z each one value or `count` values along `axis` of w (a
// DequantizeLinear's axis; in the Multiply form a shape that broadcasts so:
// `count` at that axis, 1 elsewhere, right-aligned): its parts, else all null.
dequantized dequantized_weights(node *w, int axis, int64_t count);

// A new Constant of like's type with these bytes, id like's + suffix.
node *constant_like(graph &g, const node &like, const shape_t &s, std::vector<uint8_t> bytes, const char *suffix);
// Constant v (one value or e of them) as `count` values, v's values repeated
// in turn; v itself when count is 1.
node *constant_repeated(graph &g, node *v, int64_t count, const char *suffix);

} // namespace qconv::graph::passes
