// The passes, in one ordered table (docs/architecture.md, graph/passes):
// run_passes runs each row in turn on the graph, then prunes and infers it.
// A new pass is one row here (its function declared in passes.h, or in
// include/qconv/graph.h when it is public).
#include "graph/passes/passes.h"

#include "graph/passes/qdq_islands.h"

#include <utility>

#include "qconv/graph.h"

namespace qconv::graph {

namespace passes {

namespace {

void conv1x1_to_matmul(graph &g, pass_state &s) { s.rewrites = convert_weight_compressed_conv1x1_to_matmul(g, s.veto); }
void lower_int8(graph &g, pass_state &s) { s.lowered = lower_low_precision(g); }

} // namespace

const std::vector<pass> &pass_list() {
    static const std::vector<pass> list = {
        // name, what it does, the function
        {"fuse_gelu", "the erf and tanh forms of Gelu -> Gelu", on_graph<fuse_gelu>},
        {"conv1x1_to_matmul", "compressed-weight 1x1 Convolution -> MatMul", conv1x1_to_matmul},
        {"cancel_transposes", "inverse Transpose pairs (also around Relu/Gelu/Convert)", on_graph<cancel_transposes>},
        {"conv_transpose_to_conv", "ConvTranspose with kernel = stride -> 1x1 Convolution + DepthToSpace",
         on_graph<conv_transpose_to_conv>},
        {"matmul_weights_to_nk", "MatMul by quantized [K,N] weights -> [N,K] weights with transpose_b",
         on_graph<matmul_weights_to_nk>},
        {"lower_int8", "quantized convolutions and MatMuls -> QConvolution", lower_int8},
        {"tabulate_qdq_islands", "8-bit elementwise islands (Q of f32 ops of DQs) -> LookupTable",
         on_graph<detail::tabulate_qdq_islands>},
        {"compose_lookup_tables", "a LookupTable read by another one alone -> one composed table",
         on_graph<compose_lookup_tables>},
    };
    return list;
}

} // namespace passes

std::vector<rewrite_record> run_passes(graph &g, const veto_callback &veto, std::vector<rewrite_record> *lowered) {
    passes::pass_state s{veto, {}, {}};
    for (const passes::pass &p : passes::pass_list()) p.run(g, s);
    if (lowered) *lowered = std::move(s.lowered);
    g.prune();
    g.infer();
    return std::move(s.rewrites);
}

} // namespace qconv::graph
