// The compressed MatMul (graph/exec/compressed_matmul.cpp): a MatMul(X, deq(W),
// transpose_b) whose weights are a decompression subgraph — Convert(Wq [→
// Reshape]) [− Convert(ZP)] · Scale [→ Reshape] with Wq an integer Constant or
// Parameter of u8/i8/u4/i4 and scale/zp per tensor, per output channel or per
// group of K — runs as ONE qconv::matmul primitive (the dispatcher picks the
// row); a following bias Add with a [.., N] Constant is fused into it. The
// decompression subgraph is graph/ir/decompression.h's, the one the conv1x1 →
// MatMul rewrite matches. A compressed MatMul of f16/bf16 activations runs the
// primitive with that src_dt/dst_dt on the 16-bit storage; its decompression
// is exact in f32 (docs/graph.md).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qconv/graph.h"
#include "qconv/matmul.h"

namespace qconv::graph::exec {

// A MatMul recognised as weight-compressed.
struct compressed {
    node *mm = nullptr, *bias_add = nullptr;
    node *wq = nullptr;        // Constant or Parameter
    std::vector<node *> chain; // decompression nodes (fused)
    matmul_desc desc;
    std::vector<float> scale;        // [N][NG]
    std::vector<uint16_t> scale_f16; // the same in IEEE half, iff desc.scale_dt is f16
    std::vector<int32_t> zp;         // 0, 1 or [N][NG]
    std::vector<float> bias;         // N or empty
    int64_t rows = 0;                // M of this compilation (desc.m is runtime_m in a graph with `?`)
    std::shared_ptr<matmul> prim;    // built at compile time when Wq is a Constant
    std::string impl;                // the row the dispatcher chose, and the problem
    matmul_hints hints;
};

// Run-time-M MatMuls of a graph with `?`, shared by its compilations (one
// per value): node id and descriptor → primitive.
using matmul_pool = std::map<std::string, std::shared_ptr<matmul>>;

// The compressed MatMuls of `order` whose primitive a row takes (with
// dynamic quantization when dq), by MatMul node, and the nodes each absorbs
// (its decompression nodes that nothing else reads, its bias Add) → the
// MatMul's id.
void find_compressed(const graph &g, const std::vector<node *> &order, bool dq, matmul_pool *pool,
                     std::map<const node *, compressed> *found, std::map<const node *, std::string> *fused_into);

} // namespace qconv::graph::exec
