// The step table, in the order compile asks it: for each node (topological
// order) the first row that takes it builds its step and names its
// implementation (impls(), the profile, verbose). A row that takes a node
// builds it; the last row takes every node. The nodes earlier rows absorb
// (a compressed MatMul's decompression chain and bias Add, an f32
// convolution's bias Add) are fused into those rows' steps.
#include <algorithm>

#include "graph/exec/compile.h"
#include "graph/exec/steps.h"
#include "graph/ir/detail.h"
#include "graph/ir/qconv_spec.h"
#include "graph/ops/ops.h"
#include "qconv/conv_desc.h"

namespace qconv::graph::exec {

namespace {

// The implementation an op that runs graph/ops' evaluation reports.
std::string kernel_name(const node &n) {
    switch (n.kind) {
    case op::Parameter: return "input";
    case op::Constant: return "constant";
    case op::Result: return "output";
    case op::Convert: return std::string("graph:convert_") + ir_name(n.out_type);
    case op::Subtract: return "graph:eltwise_sub";
    case op::Multiply: return "graph:eltwise_mul";
    case op::Add: return "graph:eltwise_add";
    case op::Divide: return "graph:eltwise_div";
    case op::Reshape: return "graph:reshape";
    case op::Transpose: return "graph:transpose";
    case op::Convolution:
    case op::GroupConvolution: return "convolution_f32 (created per run)";
    case op::MatMul: return "graph:matmul_f32";
    case op::Relu: return "graph:relu";
    case op::Gelu: return n.attr.gelu_tanh ? "graph:gelu_tanh" : "graph:gelu_erf";
    case op::FakeQuantize: return "graph:fake_quantize";
    case op::QuantizeLinear: return std::string("graph:quantize_linear_") + ir_name(n.out_type);
    case op::DequantizeLinear: return std::string("graph:dequantize_linear_") + ir_name(n.inputs[0]->out_type);
    case op::MaxPool:
        return n.inputs[0]->kind == op::QConvolution && is_integer(n.out_type)
                   ? std::string("graph:max_pool_nhwc_") + ir_name(n.out_type)
                   : "graph:max_pool";
    case op::AvgPool: return "graph:avg_pool";
    case op::ReduceMean: return "graph:reduce_mean";
    case op::Concat: return "graph:concat";
    case op::Clamp: return "graph:clamp";
    case op::PRelu: return "graph:prelu";
    case op::Flatten: return "graph:reshape";
    case op::Sigmoid: return "graph:sigmoid";
    case op::Softmax: return "graph:softmax";
    case op::Slice: return "graph:slice";
    case op::Pad: return "graph:pad_" + n.attr.padding;
    case op::Resize: return "graph:resize_" + n.attr.resize_mode;
    case op::QConvolution: return "qconv:convolution";
    case op::Sqrt: return "graph:sqrt";
    case op::Erf: return "graph:erf";
    case op::Tanh: return "graph:tanh";
    case op::LookupTable:
        return n.inputs.size() == 3                     ? "graph:lookup_table_65536"
               : n.inputs.back()->out_shape.size() == 2 ? "graph:lookup_table_256_per_channel"
                                                        : "graph:lookup_table_256";
    case op::ConvTranspose: return "graph:conv_transpose_f32";
    case op::DepthToSpace: return "graph:depth_to_space";
    }
    return "?";
}

// A step of kind S for the node being built, reading its inputs, writing its output.
template <class S>
built eval_kind(compile_context &cx, node &n) {
    return {std::make_unique<S>(&n, cx.in, cx.out), kernel_name(n)};
}

built fused(compile_context &cx, node &n) { return {nullptr, "fused into " + cx.fused_into.at(&n)}; }

built constant(compile_context &cx, node &n) {
    cx.P.consts[cx.out] = detail::constant_value(n);
    cx.P.known[cx.out] = true;
    return {nullptr, "constant"};
}

built input(compile_context &, node &) { return {nullptr, "input"}; }

// The MatMul with its decompression chain and bias Add: one primitive.
built compressed_matmul(compile_context &cx, node &n) {
    auto it = cx.mms.find(&n);
    compressed c = std::move(it->second);
    cx.mms.erase(it);
    std::vector<int> in{cx.slot.at(n.inputs[0]), cx.slot.at(c.wq)};
    const int out = c.bias_add ? cx.slot.at(c.bias_add) : cx.out;
    std::string impl = c.impl;
    return {std::make_unique<compressed_matmul_step>(&n, std::move(in), out, std::move(c)), impl};
}

bool all_inputs_known(const compile_context &cx, const node &n) {
    return cx.opt.fold_constants && n.kind != op::Result &&
           std::all_of(cx.in.begin(), cx.in.end(), [&](int i) { return cx.P.known[i]; });
}

built fold(compile_context &cx, node &n) {
    std::vector<const tensor *> ins;
    for (int i : cx.in) ins.push_back(&cx.P.consts[i]);
    detail::eval_node(n, ins, cx.P.consts[cx.out]);
    cx.P.known[cx.out] = true;
    return {nullptr, "constant-folded"};
}

// One int8 primitive, created once through the dispatcher ("auto": the
// attribute builder picks attr[0]/attr[1] and the row).
built qconvolution(compile_context &cx, node &n) {
    const detail::qconv_spec &sp = *n.attr.qconv;
    if (!cx.P.known[cx.in[1]]) fail(n.where(), "QConvolution weights must be a Constant");
    const tensor &w = cx.P.consts[cx.in[1]];
    auto prim = std::make_shared<qconv::convolution>(sp.p, reinterpret_cast<const int8_t *>(w.bytes.data()),
                                                     sp.p.with_bias ? sp.bias.data() : nullptr);
    std::string impl = "qconv:" + prim->impl_name() + " attr[" + std::to_string(prim->attr_id()) + "] " +
                       sp.p.desc.str() + " " + qconv::to_string(sp.p.src_dt) + "->" + qconv::to_string(sp.p.dst_dt) +
                       " zp:" + to_string(sp.p.src_zp.effective_kind()) +
                       (sp.p.ops.empty() ? std::string() : " " + to_string(sp.p.ops));
    return {std::make_unique<qconv_step>(&n, cx.in, cx.out, std::move(prim)), impl};
}

} // namespace

namespace {

// The f32 convolution primitive (oneDNN's, else the reference): constant
// weights are reordered once; weights computed at run time mean a primitive
// per run. Its epilogue (find_conv_epilogues) goes into the primitive.
built f32_convolution(compile_context &cx, node &n) {
    const bool known = cx.P.known[cx.in[1]];
    std::vector<float> w(elems_of(n.inputs[1]->out_shape), 0.f);
    if (known) w = cx.P.consts[cx.in[1]].to_f32();
    const auto found = cx.conv_epilogues.find(&n);
    const std::vector<conv_epilogue_op> none;
    const std::vector<conv_epilogue_op> &chain = known && found != cx.conv_epilogues.end() ? found->second : none;
    const int64_t OC = n.out_shape[1], per_oc = static_cast<int64_t>(w.size()) / std::max<int64_t>(OC, 1);
    std::vector<float> bias(static_cast<size_t>(OC), 0.f);
    bool scaled = false, with_bias = false;
    f32_post_ops post;
    for (const conv_epilogue_op &e : chain) {
        for (node *m : e.nodes) cx.fused_into[m] = n.id;
        if (e.post) {
            post.push_back(*e.post);
            continue;
        }
        with_bias = true;
        scaled = scaled || e.kind == op::Multiply;
        for (int64_t o = 0; o < OC; ++o) {
            if (e.kind == op::Add) {
                bias[o] += e.values[o];
                continue;
            }
            bias[o] *= e.values[o];
            for (int64_t k = 0; k < per_oc; ++k) w[o * per_oc + k] *= e.values[o];
        }
    }
    const int out = chain.empty() ? cx.out : cx.slot.at(chain.back().nodes.back());
    auto c = std::make_shared<convolution_f32>(detail::f32_conv_desc(n), w.data(), with_bias ? bias.data() : nullptr,
                                               "auto", post);
    std::string impl = c->impl_name() + (known ? "" : " (weights per run)") + (with_bias ? " +bias" : "") +
                       (scaled ? " (per-channel scale folded)" : "");
    for (const f32_post_op &o : post) impl += std::string(" +") + to_string(o.k);
    return {std::make_unique<f32_conv_step>(&n, cx.in, out, known ? c : nullptr), impl};
}

// An f32 MatMul of an activation [..., M, K] by constant weights [K, N] (or
// [N, K] with transpose_b): a 1x1 convolution of the M rows as pixels, the
// weights reordered once. A following Add of constant [N] (or [1, N], ...)
// values that alone reads it is the primitive's bias (the same f32 addition).
bool constant_weight_matmul(const compile_context &cx, const node &n) {
    if (n.kind != op::MatMul || n.attr.transpose_a || n.out_type != dtype::f32 || n.inputs[0]->out_type != dtype::f32)
        return false;
    const shape_t &a = n.inputs[0]->out_shape, &b = n.inputs[1]->out_shape;
    return cx.P.known[cx.in[1]] && b.size() == 2 && a.size() >= 2 && n.inputs[1]->out_type == dtype::f32;
}

node *matmul_bias(const compile_context &cx, node *n) {
    const auto cs = cx.g.consumers(n);
    if (cs.size() != 1 || cs[0]->kind != op::Add || cs[0]->out_shape != n->out_shape) return nullptr;
    node *a = cs[0];
    const node *b = a->inputs[0] == n ? a->inputs[1] : a->inputs[0];
    const int64_t N = n->out_shape.back();
    const shape_t &bs = b->out_shape;
    bool per_n = a->inputs[0] != a->inputs[1] && b->out_type == dtype::f32 && elems_of(bs) == N && !bs.empty() &&
                 bs.back() == N && (cx.P.known[cx.slot.at(b)] || constant_subgraph(b));
    return per_n ? a : nullptr;
}

built f32_matmul(compile_context &cx, node &n) {
    const shape_t &a = n.inputs[0]->out_shape, &bs = n.inputs[1]->out_shape;
    const int64_t K = a.back(), M = elems_of(a) / K, N = n.out_shape.back();
    const std::vector<float> b = cx.P.consts[cx.in[1]].to_f32();
    std::vector<float> w(static_cast<size_t>(N * K)); // [N][K]
    for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < N; ++j) w[j * K + k] = n.attr.transpose_b ? b[j * bs[1] + k] : b[k * bs[1] + j];
    conv_desc d;
    d.mb = 1, d.ic = K, d.ih = M, d.iw = 1, d.oc = N, d.oh = M, d.ow = 1, d.kh = d.kw = 1;
    node *bias_add = matmul_bias(cx, &n);
    std::vector<float> bias;
    int out = cx.out;
    if (bias_add) {
        const node *bn = bias_add->inputs[bias_add->inputs[0] == &n ? 1 : 0];
        tensor bv;
        if (cx.P.known[cx.slot.at(bn)]) bias = cx.P.consts[cx.slot.at(bn)].to_f32();
        else if (constant_subgraph(bn, &bv)) bias = bv.to_f32();
        cx.fused_into[bias_add] = n.id;
        out = cx.slot.at(bias_add);
    }
    auto c = std::make_shared<convolution_f32>(d, w.data(), bias_add ? bias.data() : nullptr);
    std::string impl = c->impl_name() + " (MatMul as a 1x1 convolution)" + (bias_add ? " +bias" : "");
    return {std::make_unique<f32_matmul_step>(&n, std::vector<int>{cx.in[0]}, out, std::move(c)), impl};
}

bool is_one_of(const node &n, std::initializer_list<op> kinds) {
    return std::find(kinds.begin(), kinds.end(), n.kind) != kinds.end();
}

std::vector<step_row> build_step_table() {
    using cc = const compile_context &;
    using nc = const node &;
    return {
        // Computed by another node's step: a compressed MatMul's decompression
        // nodes (those nothing else reads) and bias Add, an f32 convolution's
        // bias Add.
        {"fused", [](cc cx, nc n) { return cx.fused_into.count(&n) > 0; }, fused},
        {"constant", [](cc, nc n) { return n.kind == op::Constant; }, constant},
        {"input", [](cc, nc n) { return n.kind == op::Parameter; }, input},
        // A MatMul whose weights are a decompression subgraph: one qconv::matmul.
        {"compressed_matmul", [](cc cx, nc n) { return cx.mms.count(&n) > 0; }, compressed_matmul},
        // Every input known at compile time: evaluated once (unless
        // compile_options::fold_constants is off; a Result always runs).
        {"constant_folded", all_inputs_known, fold},
        {"qconvolution", [](cc, nc n) { return n.kind == op::QConvolution; }, qconvolution},
        {"f32_convolution",
         [](cc, nc n) {
             return is_one_of(n, {op::Convolution, op::GroupConvolution}) && !is_integer(n.out_type);
         },
         f32_convolution},
        // f32 elementwise ops that only each other read: one step (elementwise_regions.cpp).
        {"elementwise_region", [](cc cx, nc n) { return cx.regions.count(&n) > 0; }, elementwise_region},
        {"f32_matmul", constant_weight_matmul, f32_matmul},
        {"quantize_linear", [](cc, nc n) { return n.kind == op::QuantizeLinear; }, eval_kind<quantize_step>},
        {"max_pool", [](cc, nc n) { return n.kind == op::MaxPool; }, eval_kind<max_pool_step>},
        {"lookup_table", [](cc, nc n) { return n.kind == op::LookupTable; }, eval_kind<lookup_table_step>},
        {"move_8bit",
         [](cc, nc n) {
             const bool along_c =
                 n.kind == op::Concat && n.out_shape.size() == 4 && (n.attr.axis == 1 || n.attr.axis == -3);
             return ((n.kind == op::Resize && n.attr.resize_mode == "nearest") || n.kind == op::DepthToSpace ||
                     along_c) &&
                    bits_of(n.out_type) == 8;
         },
         eval_kind<move_8bit_step>},
        {"reduce_mean", [](cc, nc n) { return n.kind == op::ReduceMean; }, eval_kind<reduce_mean_step>},
        // The ops an f32 island may hold (f32_islands.cpp decides which do).
        {"f32_island",
         [](cc, nc n) {
             return is_one_of(n, {op::DequantizeLinear, op::Relu, op::Clamp, op::Sigmoid, op::Gelu, op::Add,
                                  op::Subtract, op::Multiply, op::Divide, op::Resize, op::Concat, op::DepthToSpace});
         },
         eval_kind<island_step>},
        // Everything else: graph/ops' evaluation (graph/ops/eval.cpp).
        {"eval", [](cc, nc) { return true; }, eval_kind<eval_step>},
    };
}

} // namespace

const std::vector<step_row> &step_table() {
    static const std::vector<step_row> rows = build_step_table();
    return rows;
}

void build_step(compile_context &cx, node &n) {
    cx.in.clear();
    for (const node *i : n.inputs) cx.in.push_back(cx.slot.at(i));
    cx.out = cx.slot.at(&n);
    for (const step_row &row : step_table()) {
        if (!row.takes(cx, n)) continue;
        built b = row.build(cx, n);
        if (b.s) cx.P.steps.push_back(std::move(b.s));
        cx.P.impls.push_back({n.id, std::move(b.impl)});
        return;
    }
}

bool constant_subgraph(const node *x, tensor *value) {
    const detail::fold_limits lim{9, int64_t(1) << 20};
    if (!value) return detail::fold_constant(x, lim, nullptr);
    std::map<const node *, tensor> memo;
    if (!detail::fold_constant(x, lim, &memo)) return false;
    *value = std::move(memo.at(x));
    return true;
}

} // namespace qconv::graph::exec
