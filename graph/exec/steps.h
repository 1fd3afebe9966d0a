// The kinds of step (graph/exec/steps.cpp runs them; the step table,
// graph/exec/step_table.cpp, builds them): each holds what it decided at
// compile time and runs itself on the run's values.
//
//   compressed_matmul_step  a compressed MatMul (and its bias Add): one qconv::matmul
//   qconv_step              a QConvolution: one qconv::convolution, NHWC in and out
//   f32_conv_step           an f32 (f16, bf16) Convolution: one qconv::convolution_f32
//   f32_matmul_step         an f32 MatMul by constant weights: a 1x1 qconv::convolution_f32
//   dequantize_mean_step    a global average pool reading a DequantizeLinear's bytes
//   folded_step             the DequantizeLinear such a pool reads: nothing to run
//   eval_step               any other op: graph/ops' evaluation into a plain output
//   quantize_step           a QuantizeLinear, its output NHWC for int8 convolutions
//   max_pool_step           a MaxPool, on 8-bit NHWC values as they are
//   lookup_table_step       a LookupTable, on 8-bit values in their layout
//   move_8bit_step          a nearest Resize, DepthToSpace or Concat along C of 8-bit
//                           values, NHWC as they are
//   reduce_mean_step        a ReduceMean, over H and W of an NHWC f32 value as it is
//   region_step             f32 elementwise ops only each other read, chunk by chunk
//   island_step             an op of an f32 island (a 4-D DequantizeLinear, a
//                           layout-free elementwise op, a nearest Resize, a Concat
//                           along C, a DepthToSpace): NHWC in and out where its
//                           inputs allow it
#pragma once

#include <memory>

#include "graph/exec/compressed_matmul.h"
#include "graph/exec/program.h"
#include "qconv/conv.h"
#include "qconv/conv_f32.h"

namespace qconv::graph::exec {

// A MatMul with compressed weights, its decompression and bias Add fused
// (out: the bias Add's slot when there is one). in: X, Wq.
struct compressed_matmul_step final : step {
    compressed_matmul_step(const node *n, std::vector<int> in, int out, compressed c)
        : step(n, std::move(in), out), c(std::move(c)) {}
    void run(run_context &ctx) const override;
    bool holds_weights() const override { return c.prim != nullptr; }
    compressed c;
};

// A QConvolution: one int8 primitive, created once through the dispatcher.
// Quantized activations stay NHWC: a source in another layout is reordered
// once here, the output is left NHWC for the next one. A `sum` residual
// (input 2 of the output's type) is the destination's previous values; in its
// last use its storage becomes the output (in_place, set by settle()).
struct qconv_step final : step {
    qconv_step(const node *n, std::vector<int> in, int out, std::shared_ptr<qconv::convolution> prim)
        : step(n, std::move(in), out), prim(std::move(prim)) {}
    void run(run_context &ctx) const override;
    bool holds_weights() const override { return true; }
    void settle(const graph &g, const std::set<int> &dying, const std::vector<bool> &keep) override;
    std::shared_ptr<qconv::convolution> prim;
    int in_place = -1; // the residual slot the output takes over (-1: none)
};

// An f32 convolution (oneDNN's, else the reference): constant weights are
// reordered once (prim); weights computed at run time mean a primitive per run
// (prim null). An f16/bf16 convolution runs it on the (exact) f32 values and
// rounds the result to its type. Its output is NHWC inside an f32 island.
struct f32_conv_step final : step {
    f32_conv_step(const node *n, std::vector<int> in, int out, std::shared_ptr<convolution_f32> prim)
        : step(n, std::move(in), out), prim(std::move(prim)) {}
    void run(run_context &ctx) const override;
    bool holds_weights() const override { return prim != nullptr; }
    bool may_write_nhwc() const override { return n->out_type == dtype::f32; }
    void write_nhwc() override { nhwc = true; }
    bool reads_nhwc(const node &value) const override;
    std::shared_ptr<convolution_f32> prim;
    bool nhwc = false;
};

// An f32 MatMul of an activation by constant weights (and its bias Add): the
// rows of the activation as the pixels of one 1x1 convolution primitive.
struct f32_matmul_step final : step {
    f32_matmul_step(const node *n, std::vector<int> in, int out, std::shared_ptr<convolution_f32> prim)
        : step(n, std::move(in), out), prim(std::move(prim)) {}
    void run(run_context &ctx) const override;
    bool holds_weights() const override { return true; }
    std::shared_ptr<convolution_f32> prim;
};

// A global average pool (ReduceMean over H, W) of a DequantizeLinear that
// alone reads it: the pool reads the bytes itself, its inputs are the
// DequantizeLinear's (x, scale[, zero point]); detail::dequantize_mean.
struct dequantize_mean_step final : step {
    using step::step;
    void run(run_context &ctx) const override;
};

// The DequantizeLinear a dequantize_mean_step reads through: nothing to run.
struct folded_step final : step {
    using step::step;
    void run(run_context &) const override {}
};

// Any other op: its inputs' shapes checked, then graph/ops' evaluation into a
// plain output.
struct eval_step : step {
    using step::step;
    void run(run_context &ctx) const override;

protected:
    // The step's inputs, their shapes checked against the compiled ones.
    const std::vector<const tensor *> &inputs(run_context &ctx) const;
    // The output, taken from the arena in the given layout, and evaluated.
    void eval_into(run_context &ctx, const std::vector<const tensor *> &ins, layout order) const;
};

// A QuantizeLinear: its output NHWC when its readers are int8 convolutions or
// max pools (nhwc_out, set by settle()).
struct quantize_step final : eval_step {
    using eval_step::eval_step;
    void run(run_context &ctx) const override;
    void settle(const graph &g, const std::set<int> &dying, const std::vector<bool> &keep) override;
    bool reads_nhwc(const node &value) const override;
    bool nhwc_out = false;
};

// A MaxPool: 8-bit NHWC values pooled as they are, anything else evaluated.
// An f32 MaxPool in an f32 island: NHWC in and out (nhwc, set by the island
// marking).
struct max_pool_step final : eval_step {
    using eval_step::eval_step;
    void run(run_context &ctx) const override;
    bool may_write_nhwc() const override { return n->out_type == dtype::f32 && n->out_shape.size() == 4; }
    void write_nhwc() override { nhwc = true; }
    bool reads_nhwc(const node &value) const override;
    bool nhwc = false;
};

// A ReduceMean: over H and W of an NHWC f32 value as it is, anything else
// evaluated.
struct reduce_mean_step final : eval_step {
    using eval_step::eval_step;
    void run(run_context &ctx) const override;
    bool reads_nhwc(const node &value) const override;
};

// A nearest Resize, a DepthToSpace or a Concat along C of 4-D 8-bit values:
// NHWC values moved as they are (each output pixel a copy of its source
// pixel's channels, of its block position's, of each input's), the plain
// inputs of a Concat with an NHWC one made NHWC; anything else evaluated.
struct move_8bit_step final : eval_step {
    using eval_step::eval_step;
    void run(run_context &ctx) const override;
};

// A LookupTable: its output in its first input's layout (8-bit NHWC values
// between int8 convolutions stay NHWC), the table read per element
// (graph/ops/lut.h); a second input broadcast other than per channel or
// per tensor is evaluated plain.
struct lookup_table_step final : eval_step {
    using eval_step::eval_step;
    void run(run_context &ctx) const override;
};

// An op of an f32 island (graph/exec/f32_islands.cpp): with nhwc set it keeps
// NHWC when its inputs allow it at run time (keeps_nhwc), else it runs plain
// on plain copies.
struct island_step final : eval_step {
    using eval_step::eval_step;
    void run(run_context &ctx) const override;
    bool may_write_nhwc() const override;
    void write_nhwc() override { nhwc = true; }
    bool reads_nhwc(const node &value) const override;
    bool nhwc = false;
};

// Elementwise ops of one shape that only each other read (graph/exec/
// elementwise_regions.cpp): one step for all of them, in place of the last
// one (the root); in: the slots of the operands from outside.
struct region_step final : step {
    region_step(const node *n, std::vector<int> in, int out, region r) : step(n, std::move(in), out), r(std::move(r)) {}
    void run(run_context &ctx) const override;
    bool may_write_nhwc() const override { return true; }
    void write_nhwc() override { nhwc = true; }
    bool reads_nhwc(const node &value) const override;
    std::vector<const node *> covered() const override { return r.nodes; }
    void settle(const graph &g, const std::set<int> &dying, const std::vector<bool> &keep) override;
    region r;
    bool nhwc = false;
    int in_place = -1; // an operand of the root's shape read last here: the output takes its storage
};

// The ops island_step runs (graph/exec/f32_islands.cpp).
// An elementwise f32 op that runs on NHWC storage as it is.
bool layout_free(const node *n);
// An f32 op that moves NHWC values as they are: a 4-D nearest Resize, a
// Concat along C of 4-D values or a DepthToSpace.
bool moves_nhwc(const node *n);
// A 4-D f32 DequantizeLinear that may write NHWC.
bool dequantize_to_nhwc(const node *n);
// At run time: whether an island step keeps NHWC with these inputs.
bool keeps_nhwc(const node &n, const std::vector<const tensor *> &ins);
// Whether `value` is u's first input and no other.
bool first_only(const node &u, const node &value);

} // namespace qconv::graph::exec
