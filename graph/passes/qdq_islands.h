// 8-bit elementwise islands as tables (graph/passes/qdq_islands.cpp).
#pragma once

#include "qconv/graph.h"

namespace qconv::graph::detail {

// Replaces every QuantizeLinear(elementwise f32 ops of one or two per-tensor
// DequantizeLinear values and scalar constants) by a LookupTable of the
// 8-bit inputs whose table is that island evaluated on every input value.
// Returns how many were replaced.
int tabulate_qdq_islands(graph &g);

} // namespace qconv::graph::detail
