// The graph executor: compile (one implementation per node) and run.
//
// Compile walks the nodes in topological order:
//  * a MatMul(X, deq(W), transpose_b) whose weights are a decompression
//    subgraph — Convert(Wq [→ Reshape]) [− Convert(ZP)] · Scale [→ Reshape] with
//    Wq an integer Constant or Parameter of u8/i8/u4/i4 and scale/zp per ft,
//    per output channel or per group of K — becomes ONE qconv::matmul primitive
//    (the dispatcher picks the row); a following bias Add with a [.., N]
//    Constant is fused into it. Its decompression nodes are marked "fused";
//  * every other node whose inputs are all known at compile time is folded
//    (constant-folded decompression is what a plain f32 Convolution gets);
//  * the rest run on simple kernels: elementwise loops with numpy broadcast,
//    Transpose/Reshape copies, f32 MatMul loops, and Convolution through the
//    f32 convolution primitive (qconv::convolution_f32: oneDNN's f32
//    convolution, else the reference; weights known at compile time are
//    reordered once, others per run; NCHW is transposed to NHWC around it).
// Values are typed tensors (their node's type); what each op computes is
// graph/ops/eval.cpp's (detail::eval_node). The decompression subgraph is
// graph/ir/decompression.h's, the one the conv1x1 → MatMul rewrite matches. A compressed MatMul of f16/bf16 activations runs the
// primitive with that src_dt/dst_dt on the 16-bit storage; its decompression
// is exact in f32 (docs/graph.md).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "core/memory.h"
#include "core/parallel.h"
#include "core/verbose.h"
#include "graph/ir/decompression.h"
#include "graph/ir/detail.h"
#include "graph/ir/qconv_spec.h"
#include "graph/ops/ops.h"
#include "qconv/conv.h"
#include "qconv/conv_desc.h"
#include "qconv/conv_f32.h"
#include "qconv/graph.h"
#include "qconv/matmul.h"

namespace qconv::graph {

namespace {

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
    case op::ConvTranspose: return "graph:conv_transpose_f32";
    }
    return "?";
}

dtype to_qconv(dtype t) {
    switch (t) {
    case dtype::f32: return dtype::f32;
    case dtype::f16: return dtype::f16;
    case dtype::bf16: return dtype::bf16;
    case dtype::u8: return dtype::u8;
    case dtype::s8: return dtype::s8;
    case dtype::u4: return dtype::u4;
    case dtype::s4: return dtype::s4;
    default: return dtype::undef;
    }
}

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

// Creates the primitive (constant weights) or a probe with zero weights
// (weights from a Parameter: the primitive is then created per run; the
// dispatcher's choice depends on the descriptor only). False when no row
// takes the problem.
// Run-time-M MatMuls of a graph with `?`, shared by its compilations (one
// per value): node id and descriptor → primitive.
using matmul_pool = std::map<std::string, std::shared_ptr<matmul>>;

bool create_primitive(compressed *c, bool dq, matmul_pool *pool) {
    matmul_weights w;
    if (c->desc.scale_dt == dtype::f16) w.scale_f16 = c->scale_f16.data();
    else w.scale = c->scale.data();
    w.zp = c->zp.empty() ? nullptr : c->zp.data();
    w.bias = c->bias.empty() ? nullptr : c->bias.data();
    std::string name;
    matmul_hints h;
    h.dynamic_quantization = dq;
    c->hints = h;
    try {
        if (c->wq->kind == op::Constant) {
            w.wei = c->wq->data->bytes.data();
            std::shared_ptr<matmul> *shared = nullptr;
            if (pool) shared = &(*pool)[c->mm->id + "|" + c->desc.key() + "|dq=" + std::to_string(dq)];
            if (shared && *shared) c->prim = *shared;
            else c->prim = std::make_shared<matmul>(c->desc, w, h);
            if (shared) *shared = c->prim;
            name = c->prim->impl_name();
        } else {
            const std::vector<uint8_t> zeros(c->desc.wei_bytes(), 0);
            w.wei = zeros.data();
            name = matmul(c->desc, w, h).impl_name() + " (weights from a Parameter)";
        }
    } catch (const error &) {
        return false;
    }
    const matmul_desc &d = c->desc;
    c->impl = name + " " + d.str() + " " + qconv::to_string(d.wei_dt) +
              (d.group ? " group" + std::to_string(d.group) : " per_oc") + " zp:" + to_string(d.zp) +
              (d.with_bias ? " bias" : "") + (d.scale_dt == dtype::f16 ? " scale:f16" : "") +
              (d.src_dt != dtype::f32 ? std::string(" x:") + qconv::to_string(d.src_dt) : "");
    return true;
}

bool recognize(const graph &g, node *mm, compressed *c) {
    if (mm->kind != op::MatMul || !mm->attr.transpose_b || mm->attr.transpose_a) return false;
    // The activation type T: f32, f16 or bf16 (X, Y and the decompression chain).
    const dtype T = mm->out_type;
    if (T != dtype::f32 && T != dtype::f16 && T != dtype::bf16) return false;
    if (mm->inputs[1]->out_shape.size() != 2) return false;
    const int64_t N = mm->inputs[1]->out_shape[0], K = mm->inputs[1]->out_shape[1];
    detail::decompression dc;
    if (!detail::match_decompression(mm->inputs[1], T, &dc)) return false;
    node *w = dc.mul, *s = dc.scale, *sub = dc.sub, *zp = dc.zp, *x = dc.cw, *q = dc.wq;
    if (s->out_type == dtype::f16) c->desc.scale_dt = dtype::f16;
    const dtype dt = to_qconv(q->out_type);
    if (dt != dtype::u8 && dt != dtype::s8 && dt != dtype::u4 && dt != dtype::s4) return false;
    const shape_t &D = x->out_shape; // the decompression shape
    if (w->out_shape != D || (sub && sub->out_shape != D)) return false;
    if (D.empty() || D[0] != N || elems_of(D) != N * K) return false;

    int64_t G = detail::group_of(*s, D);
    if (zp) G = std::min(G, detail::group_of(*zp, D));
    if (K % G) return false;
    std::vector<double> sv, zv;
    if (!detail::group_table(*s, D, G, &sv)) return false;
    if (zp && !detail::group_table(*zp, D, G, &zv)) return false;

    c->mm = mm;
    c->wq = q;
    c->chain = dc.chain();
    c->rows = elems_of(mm->out_shape) / N;
    c->desc.m = g.is_dynamic() ? matmul_desc::runtime_m : c->rows;
    c->desc.k = K;
    c->desc.n = N;
    c->desc.wei_dt = dt;
    c->desc.src_dt = c->desc.dst_dt = to_qconv(T);
    c->desc.group = G == K ? 0 : G;
    c->scale.assign(sv.begin(), sv.end());
    if (c->desc.scale_dt == dtype::f16)
        for (float v : c->scale) c->scale_f16.push_back(f32_to_f16(v)); // exact: the values are f16
    if (zp) {
        const int64_t lo = detail::type_min(q->out_type), hi = detail::type_max(q->out_type);
        for (double v : zv)
            if (v < lo || v > hi) return false; // zp outside the weight type: not expressible
        const bool uniform = std::all_of(zv.begin(), zv.end(), [&](double v) { return v == zv[0]; });
        c->desc.zp = uniform ? matmul_desc::zp_kind::per_tensor : matmul_desc::zp_kind::per_group;
        if (uniform) c->zp = {static_cast<int32_t>(zv[0])};
        else c->zp.assign(zv.begin(), zv.end());
    }
    // A bias Add with a [..., N] Constant right after.
    auto cons = g.consumers(mm);
    if (cons.size() == 1 && cons[0]->kind == op::Add && cons[0]->out_shape == mm->out_shape) {
        node *add = cons[0];
        node *b = add->inputs[0] == mm ? add->inputs[1] : add->inputs[0];
        if (b->kind == op::Constant && b->out_type == T && elems_of(b->out_shape) == N && b->out_shape.back() == N) {
            c->bias_add = add;
            c->bias.resize(N);
            for (int64_t i = 0; i < N; ++i) c->bias[i] = static_cast<float>(b->value(i));
        }
    }
    c->desc.with_bias = c->bias_add != nullptr;
    return true;
}

// Runs a compressed MatMul on typed values: f32 activations as floats,
// f16/bf16 ones as their 16-bit words through execute_typed().
void run_compressed(const matmul &mm, const tensor &x, tensor &y, int64_t rows, int threads) {
    if (mm.desc().src_dt == dtype::f32) mm.execute(x.f32(), y.f32(), rows, threads);
    else mm.execute_typed(x.bytes.data(), y.bytes.data(), rows, threads);
}

} // namespace

struct compiled_graph::state {
    struct step {
        const node *n = nullptr;
        std::vector<int> in;
        int out = -1;
        int fused = -1;                        // index into mms
        std::shared_ptr<convolution_f32> conv; // f32 conv primitive (constant weights)
        // A ConvTranspose whose kernel is its stride (no pads, dilation 1, one
        // group): a 1x1 f32 convolution to OC·sh·sw channels, then each pixel's
        // sh x sw block put in place (detail::run_deconv_as_1x1).
        std::shared_ptr<convolution_f32> deconv;
        bool conv_per_run = false;                 // f32 conv primitive created per run
        std::shared_ptr<qconv::convolution> qconv; // QConvolution: the int8 primitive
        // The buffer lifetimes (made at compile time): the slots whose last reader
        // this step is (their storage goes back to the run's arena after it),
        // the residual slot a QConvolution's `sum` overwrites in place (its
        // last use; -1: none), and an output written NHWC (a QuantizeLinear
        // whose readers are int8 convolutions / max pools).
        std::vector<int> frees;
        int in_place = -1;
        bool nhwc_out = false;
        // A DequantizeLinear folded into the global average pool that alone
        // reads it (skip), and that pool, whose inputs are then the
        // DequantizeLinear's (dq_mean): detail::dequantize_mean.
        bool skip = false, dq_mean = false;
        // An f32 output that may stay NHWC (every reader takes it so: an f32
        // island between int8 convolutions): an f32 convolution writes it
        // NHWC, a DequantizeLinear or a Relu of an NHWC input too.
        bool f32_nhwc = false;
    };
    static node *f32_conv_bias(graph &g, node *n, const std::map<const node *, int> &slot, const state &S);
    // Whether x is computed from Constants alone (a few nodes deep), and its value.
    static bool constant_subgraph(const node *x, int depth, tensor *value = nullptr);
    static void mark_f32_islands(const graph &g, state &S, const std::map<const node *, int> &slot,
                                 const std::vector<bool> &keep);
    static bool layout_free(const node *n);
    static bool moves_nhwc(const node *n);
    static bool keeps_nhwc(const node &n, const std::vector<const tensor *> &ins);
    static std::shared_ptr<convolution_f32> deconv_as_1x1(const node &n, const tensor &weights);
    // The storage of one run: a tensor per slot and the buffers not in use,
    // by size. Kept between runs (after the first run of a compilation no
    // step allocates, zero-fills or page-faults its output); a run takes an
    // arena from `arenas` (a new one when all are in use by other threads)
    // and gives it back.
    struct arena {
        std::vector<tensor> v;
        std::map<size_t, std::vector<aligned_vector<uint8_t>>> spare;
        // t's storage goes back to the spares.
        void give(tensor &t) {
            if (t.bytes.empty()) return;
            aligned_vector<uint8_t> b;
            b.swap(t.bytes);
            spare[b.size()].push_back(std::move(b));
        }
        // t becomes a tensor of the given type, shape and layout on a spare
        // buffer of its size (contents: whatever was there) or a new one.
        void take(tensor &t, dtype type, const shape_t &shape, layout order) {
            give(t);
            t.type = type;
            t.shape = shape;
            t.order = order;
            const size_t nb = static_cast<size_t>(storage_bytes(type, elems_of(shape)));
            auto it = spare.find(nb);
            if (it != spare.end() && !it->second.empty()) {
                t.bytes.swap(it->second.back());
                it->second.pop_back();
            } else {
                t.bytes.assign(nb, 0);
            }
        }
    };
    mutable std::mutex arenas_mu;
    mutable std::vector<std::unique_ptr<arena>> arenas;
    std::vector<tensor> consts; // per slot, compile-time values
    std::vector<bool> known;    // slot value known at compile time
    std::vector<step> steps;
    std::vector<int> params, results;
    std::vector<std::pair<std::string, std::string>> impls;
    std::vector<compressed> mms;
    std::vector<std::shared_ptr<const constant_data>> wq_bytes; // per mms: packed constant weights
    size_t slots = 0;
    int threads = 0;
    std::unique_ptr<graph> owner; // the compiled clone (steps point into it)
};

// A graph with `?`: the graph as given, and one compilation per value of
// `?` seen by run() (at most `keep`, the oldest dropped first), all sharing
// the run-time-M MatMuls of `pool`.
struct compiled_graph::dynamic {
    static constexpr size_t keep = 8;
    std::unique_ptr<graph> source;
    compile_options opt;
    std::mutex mu;
    matmul_pool pool;
    std::vector<std::pair<int64_t, std::shared_ptr<const state>>> compiled; // oldest first
};

compiled_graph::compiled_graph(const graph &g, int threads) : compiled_graph(g, compile_options{threads, true}) {}

compiled_graph::compiled_graph(const graph &gin, const compile_options &opt) {
    if (gin.is_dynamic()) {
        d_ = std::make_unique<dynamic>();
        d_->source = gin.clone();
        d_->opt = opt;
        s_ = compile(gin, opt, d_.get(), gin.dynamic_value());
        d_->compiled.push_back({gin.dynamic_value(), s_});
        return;
    }
    s_ = compile(gin, opt, nullptr, 1);
}

namespace {

// Whether `mean` (a ReduceMean) over the DequantizeLinear `dq` can take it
// over: dq feeds it alone (no Result either), u8/i8 in, f32 out, a constant
// per-tensor scale and zero point; the mean reduces H and W of NCHW, no more
// than detail::dequantize_mean_max_hw pixels (where the fold is exact).
bool dq_mean_foldable(const graph &g, const node &dq, const node &mean, const std::vector<bool> &known,
                      const std::vector<tensor> &consts, const std::vector<int> &dq_in) {
    if (dq.kind != op::DequantizeLinear || dq.out_type != dtype::f32) return false;
    const dtype xt = dq.inputs[0]->out_type;
    if (xt != dtype::u8 && xt != dtype::s8) return false;
    if (g.consumers(&dq).size() != 1) return false; // a Result reading dq is a consumer too
    for (size_t k = 1; k < dq_in.size(); ++k)
        if (!known[dq_in[k]] || consts[dq_in[k]].elems() != 1) return false;
    if (dq_in.size() > 2) { // a zero point within x's type: |x − zp| ≤ 255
        const double zp = consts[dq_in[2]].get(0);
        if (zp < (xt == dtype::u8 ? 0 : -128) || zp > (xt == dtype::u8 ? 255 : 127)) return false;
    }
    const shape_t &x = dq.out_shape;
    if (x.size() != 4 || mean.out_type != dtype::f32 || elems_of(mean.out_shape) != x[0] * x[1]) return false;
    std::set<int64_t> axes;
    for (int64_t a : mean.attr.axes) axes.insert(a < 0 ? a + 4 : a);
    return axes == std::set<int64_t>{2, 3} && x[2] * x[3] <= detail::dequantize_mean_max_hw && x[2] * x[3] > 0;
}

} // namespace

// The Add of a per-channel f32 Constant ([C,1,1] or [1,C,1,1]) that alone
// reads f32 convolution n (4-D, constant weights), else null: it becomes the
// primitive's bias (the same sum: oneDNN adds the bias to each output in f32,
// as the Add does).
node *compiled_graph::state::f32_conv_bias(graph &g, node *n, const std::map<const node *, int> &slot, const state &S) {
    const auto cs = g.consumers(n);
    if (cs.size() != 1 || cs[0]->kind != op::Add || n->out_type != dtype::f32 || n->out_shape.size() != 4)
        return nullptr;
    node *a = cs[0];
    const node *b = a->inputs[0] == n ? a->inputs[1] : a->inputs[0];
    if (a->inputs[0] == a->inputs[1] || a->out_shape != n->out_shape || b->out_type != dtype::f32 ||
        !(S.known[slot.at(b)] || constant_subgraph(b, 0)))
        return nullptr;
    const shape_t &bs = b->out_shape;
    const int64_t C = n->out_shape[1];
    const bool per_c = elems_of(bs) == C && bs.size() >= 3 && bs.size() <= 4 && bs[bs.size() - 3] == C &&
                       bs[bs.size() - 1] == 1 && bs[bs.size() - 2] == 1;
    return per_c ? a : nullptr;
}

bool compiled_graph::state::constant_subgraph(const node *x, int depth, tensor *value) {
    if (x->kind == op::Constant) {
        if (!x->data) return false;
        if (value) {
            *value = tensor(x->out_type, x->out_shape);
            value->bytes.assign(x->data->bytes.begin(), x->data->bytes.end());
        }
        return true;
    }
    if (depth > 8 || x->kind == op::Parameter || x->inputs.empty() || elems_of(x->out_shape) > (1 << 20)) return false;
    std::vector<tensor> in(x->inputs.size());
    for (size_t k = 0; k < x->inputs.size(); ++k)
        if (!constant_subgraph(x->inputs[k], depth + 1, value ? &in[k] : nullptr)) return false;
    if (value) {
        std::vector<const tensor *> ins;
        for (const tensor &t : in) ins.push_back(&t);
        detail::eval_node(*x, ins, *value);
    }
    return true;
}

// A ConvTranspose with kernel = stride, no pads or output padding, dilation
// 1 and one group: each output pixel takes one tap, y[oc, i·sh + a, j·sw + c]
// = Σ_ic x[ic, i, j] · w[ic, oc, a, c] — a 1x1 convolution of x to OC·sh·sw
// channels (weights [(oc·sh + a)·sw + c][ic]); null otherwise. The f32
// convolution primitive sums over ic in its own order (docs/graph.md).
std::shared_ptr<convolution_f32> compiled_graph::state::deconv_as_1x1(const node &n, const tensor &weights) {
    const auto &a = n.attr;
    const shape_t &x = n.inputs[0]->out_shape, &w = n.inputs[1]->out_shape;
    if (n.inputs.size() != 2 || a.group != 1 || x.size() != 4 || w.size() != 4) return nullptr;
    for (int i = 0; i < 2; ++i)
        if (a.strides[i] != w[2 + i] || a.dilations[i] != 1 || a.pads_begin[i] || a.pads_end[i] || a.output_padding[i])
            return nullptr;
    const int64_t C = w[0], OC = w[1], sh = w[2], sw = w[3];
    conv_desc d;
    d.mb = x[0], d.ic = C, d.ih = x[2], d.iw = x[3];
    d.oc = OC * sh * sw, d.oh = x[2], d.ow = x[3], d.kh = d.kw = 1;
    const std::vector<float> wf = weights.to_f32();
    std::vector<float> w1(static_cast<size_t>(d.oc * C));
    for (int64_t ic = 0; ic < C; ++ic)
        for (int64_t o = 0; o < OC * sh * sw; ++o) w1[o * C + ic] = wf[ic * OC * sh * sw + o];
    return std::make_shared<convolution_f32>(d, w1.data(), nullptr);
}

// An elementwise f32 op that runs on NHWC storage as it is: a unary op, or
// Add / Subtract / Multiply / Divide whose operands have the output's shape
// or are the same bytes in either layout (rank <= 4 with C or H·W equal to 1
// once right-aligned to 4-D: a scalar, a per-channel [C,1,1] / [1,C,1,1]
// Constant such as a BatchNormalization's, a pooled [N,C,1,1] value); the
// NHWC op then broadcasts them along the matching dims of [N,H,W,C]
// (detail::eval_elementwise_nhwc, the same operations on the same operands).
bool compiled_graph::state::layout_free(const node *n) {
    if (n->out_type != dtype::f32 || n->out_shape.size() != 4) return false;
    switch (n->kind) {
    case op::Relu:
    case op::Clamp:
    case op::Sigmoid:
    case op::Gelu: return true;
    case op::Add:
    case op::Subtract:
    case op::Multiply:
    case op::Divide:
        for (const node *i : n->inputs) {
            const shape_t &s = i->out_shape;
            if (i->out_type != dtype::f32 || s.size() > 4) return false;
            if (s == n->out_shape) continue;
            shape_t a(4 - s.size(), 1);
            a.insert(a.end(), s.begin(), s.end());
            if (a[1] != 1 && a[2] * a[3] != 1) return false;
        }
        return true;
    default: return false;
    }
}

// An f32 op that moves NHWC values as they are: a 4-D nearest Resize (each
// pixel's channels copied) or a Concat along C of 4-D values.
bool compiled_graph::state::moves_nhwc(const node *n) {
    if (n->out_type != dtype::f32 || n->out_shape.size() != 4) return false;
    if (n->kind == op::Resize) return n->attr.resize_mode == "nearest" && n->inputs[0]->out_shape.size() == 4;
    if (n->kind == op::Concat) {
        for (const node *i : n->inputs)
            if (i->out_type != dtype::f32 || i->out_shape.size() != 4) return false;
        return n->attr.axis == 1 || n->attr.axis == -3;
    }
    return false;
}

// At run time: whether an island step (f32_nhwc) keeps NHWC with these
// inputs — a DequantizeLinear or a Resize of an NHWC value, a Concat of NHWC
// values, an elementwise op whose inputs nhwc_dims all views, one NHWC.
bool compiled_graph::state::keeps_nhwc(const node &n, const std::vector<const tensor *> &ins) {
    if (n.kind == op::DequantizeLinear || n.kind == op::Resize) return ins[0]->order == layout::nhwc;
    bool any = false, all = true;
    for (const tensor *t : ins) {
        any = any || t->order == layout::nhwc;
        all = all && (n.kind == op::Concat ? t->order == layout::nhwc : !detail::nhwc_dims(*t).empty());
    }
    return any && all;
}

// Which f32 outputs stay NHWC (state::step::f32_nhwc): those whose every
// reader takes an NHWC f32 input — an f32 convolution or a ConvTranspose run
// as a 1x1 one (its source), a per-tensor QuantizeLinear into u8/i8 that
// writes NHWC, a global average pool (ReduceMean over H, W), a layout-free
// elementwise op, nearest Resize or Concat along C whose output stays NHWC —
// from an f32 convolution, a 4-D DequantizeLinear, a layout-free op, a
// nearest Resize or a Concat along C. Results and Parameters stay plain. A
// float model's islands start at its first f32 convolution and run through
// its BatchNormalization Multiply / Add (per-channel operands), activations
// and squeeze-excitation blocks. At run time a step keeps NHWC only when its
// inputs allow it (keeps_nhwc), else it runs plain on plain copies.
void compiled_graph::state::mark_f32_islands(const graph &g, state &S, const std::map<const node *, int> &slot,
                                             const std::vector<bool> &keep) {
    // QCONV_GRAPH_F32_NHWC=0: every f32 output plain (the layout the graph's
    // ops define; the same values, tests compare the two).
    if (const char *v = std::getenv("QCONV_GRAPH_F32_NHWC"); v && std::string(v) == "0") return;
    std::map<const node *, state::step *> by_node;
    std::map<int, const node *> node_of;
    for (auto &st : S.steps) by_node[st.n] = &st;
    for (const auto &[nd, i] : slot) node_of[i] = nd;
    auto conv_f32 = [](const state::step &st) { return (st.conv || st.conv_per_run) && st.n->out_type == dtype::f32; };
    // Steps in reverse order: an op's readers are decided before the op.
    for (auto it = S.steps.rbegin(); it != S.steps.rend(); ++it) {
        state::step &st = *it;
        const node *n = st.n;
        const bool dq = n->kind == op::DequantizeLinear && n->out_type == dtype::f32 && n->out_shape.size() == 4 &&
                        detail::qdq_takes_nhwc(*n);
        const bool moves = (layout_free(n) || moves_nhwc(n)) && !st.qconv && st.fused < 0;
        if (!(conv_f32(st) || dq || moves) || keep[st.out] || st.skip) continue;
        const node *out_node = node_of.at(st.out); // the fused bias Add for a convolution with one
        bool all = true;
        for (const node *u : g.consumers(out_node)) {
            const auto r = by_node.find(u);
            const state::step *rs = r == by_node.end() ? nullptr : r->second;
            const bool first_only =
                u->inputs[0] == out_node && std::count(u->inputs.begin(), u->inputs.end(), out_node) == 1;
            const bool takes =
                rs && rs->n == u &&
                ((first_only && (conv_f32(*rs) || rs->deconv)) || ((layout_free(u) || moves_nhwc(u)) && rs->f32_nhwc) ||
                 (first_only && detail::reduce_mean_takes_nhwc(*u) && !rs->dq_mean) ||
                 (first_only && u->kind == op::QuantizeLinear && rs->nhwc_out && u->out_shape.size() == 4 &&
                  elems_of(u->inputs[1]->out_shape) == 1));
            all = all && takes;
        }
        st.f32_nhwc = all;
        if (all)
            for (auto &[id, impl] : S.impls)
                if (id == n->id) impl += " (f32 NHWC)";
    }
}

std::shared_ptr<const compiled_graph::state> compiled_graph::compile(const graph &gin, const compile_options &opt,
                                                                     dynamic *dyn, int64_t dynamic_value) {
    matmul_pool *pool = dyn ? &dyn->pool : nullptr;
    auto s = std::make_shared<state>();
    auto &S = *s;
    S.threads = opt.threads;
    // Work on a private, inferred clone (the caller's graph stays untouched).
    auto g = gin.clone();
    if (g->is_dynamic()) g->bind_dynamic(dynamic_value);
    g->infer();
    check_run_memory(*g); // before any tensor is allocated
    const auto order = g->topo_order();
    std::map<const node *, int> slot;
    for (const node *n : order) slot[n] = static_cast<int>(slot.size());
    S.slots = slot.size();
    S.consts.resize(S.slots);
    S.known.assign(S.slots, false);

    // 1. Compressed MatMuls and the nodes they absorb.
    std::map<const node *, std::string> fused_into;
    std::map<const node *, int> mm_index;
    for (node *n : order) {
        compressed c;
        if (!recognize(*g, n, &c)) continue;
        if (!create_primitive(&c, opt.dynamic_quantization, pool))
            continue; // e.g. a group size no row takes: runs unfused
        // A chain node is absorbed only if nothing outside the chain reads it.
        std::set<const node *> inside(c.chain.begin(), c.chain.end());
        inside.insert(n);
        for (node *ch : c.chain) {
            bool only = true;
            for (node *u : g->consumers(ch)) only &= inside.count(u) > 0;
            if (only) fused_into[ch] = n->id;
        }
        if (c.bias_add) fused_into[c.bias_add] = n->id;
        mm_index[n] = static_cast<int>(S.mms.size());
        S.mms.push_back(std::move(c));
    }

    // 2. Steps, folding whatever is known at compile time.
    for (node *n : order) {
        const int out = slot[n];
        std::vector<int> in;
        for (node *i : n->inputs) in.push_back(slot[i]);
        if (fused_into.count(n)) {
            S.impls.push_back({n->id, "fused into " + fused_into[n]});
            continue;
        }
        if (n->kind == op::Constant) {
            tensor &t = S.consts[out];
            t = tensor(n->out_type, n->out_shape);
            t.bytes.assign(n->data->bytes.begin(), n->data->bytes.end()); // packed as the tensor's storage
            S.known[out] = true;
            S.impls.push_back({n->id, "constant"});
            continue;
        }
        if (n->kind == op::Parameter) {
            S.impls.push_back({n->id, "input"});
            continue;
        }
        if (mm_index.count(n)) {
            compressed &c = S.mms[mm_index[n]];
            state::step st;
            st.n = n;
            st.in = {slot[n->inputs[0]], slot[c.wq]};
            st.out = c.bias_add ? slot[c.bias_add] : out;
            st.fused = mm_index[n];
            S.impls.push_back({n->id, c.impl});
            S.wq_bytes.push_back(nullptr);
            S.steps.push_back(st);
            continue;
        }
        const bool all_known = opt.fold_constants && n->kind != op::Result &&
                               std::all_of(in.begin(), in.end(), [&](int i) { return S.known[i]; });
        if (all_known) {
            std::vector<const tensor *> ins;
            for (int i : in) ins.push_back(&S.consts[i]);
            detail::eval_node(*n, ins, S.consts[out]);
            S.known[out] = true;
            S.impls.push_back({n->id, "constant-folded"});
            continue;
        }
        state::step st;
        st.n = n;
        st.in = in;
        st.out = out;
        std::string impl = kernel_name(*n);
        if (n->kind == op::QConvolution) {
            // One int8 primitive, created once through the dispatcher ("auto":
            // the attribute builder picks attr[0]/attr[1] and the row).
            const detail::qconv_spec &sp = *n->attr.qconv;
            if (!S.known[in[1]]) fail(n->where(), "QConvolution weights must be a Constant");
            const tensor &w = S.consts[in[1]];
            st.qconv = std::make_shared<qconv::convolution>(sp.p, reinterpret_cast<const int8_t *>(w.bytes.data()),
                                                            sp.p.with_bias ? sp.bias.data() : nullptr);
            impl = "qconv:" + st.qconv->impl_name() + " attr[" + std::to_string(st.qconv->attr_id()) + "] " +
                   sp.p.desc.str() + " " + qconv::to_string(sp.p.src_dt) + "->" + qconv::to_string(sp.p.dst_dt) +
                   " zp:" + to_string(sp.p.src_zp.effective_kind()) +
                   (sp.p.ops.empty() ? std::string() : " " + to_string(sp.p.ops));
        }
        if (n->kind == op::ConvTranspose && S.known[in[1]] && n->out_type == dtype::f32)
            if ((st.deconv = state::deconv_as_1x1(*n, S.consts[in[1]])))
                impl = st.deconv->impl_name() + " (ConvTranspose as a 1x1 convolution and its pixel blocks)";
        if ((n->kind == op::Convolution || n->kind == op::GroupConvolution) && !is_integer(n->out_type)) {
            // The f32 convolution primitive (oneDNN's, else the reference):
            // constant weights are reordered once; weights computed at run
            // time mean a primitive per run. An f16/bf16 convolution runs it
            // on the (exact) f32 values and rounds the result to its type.
            const bool known = S.known[in[1]];
            std::vector<float> w(elems_of(n->inputs[1]->out_shape), 0.f);
            if (known) w = S.consts[in[1]].to_f32();
            // A following Add of a per-channel Constant is the primitive's bias.
            node *bias_add = known ? state::f32_conv_bias(*g, n, slot, S) : nullptr;
            std::vector<float> bias;
            if (bias_add) {
                const node *b = bias_add->inputs[bias_add->inputs[0] == n ? 1 : 0];
                tensor bv;
                if (S.known[slot[b]]) bias = S.consts[slot[b]].to_f32();
                else if (state::constant_subgraph(b, 0, &bv)) bias = bv.to_f32();
                fused_into[bias_add] = n->id;
                st.out = slot[bias_add];
            }
            auto c = std::make_shared<convolution_f32>(detail::f32_conv_desc(*n), w.data(),
                                                       bias_add ? bias.data() : nullptr);
            impl = c->impl_name() + (known ? "" : " (weights per run)") + (bias_add ? " +bias" : "");
            if (known) st.conv = c;
            else st.conv_per_run = true;
        }
        S.steps.push_back(st);
        S.impls.push_back({n->id, impl});
    }
    // Folded values nothing reads at run time can go (e.g. the f32 copy of
    // compressed weights when only the decompression chain used them).
    std::vector<bool> needed(S.slots, false);
    for (const auto &st : S.steps)
        for (size_t k = 0; k < st.in.size(); ++k)
            if (!(k == 1 && (st.conv || st.qconv || (st.fused >= 0 && S.mms[st.fused].prim))))
                needed[st.in[k]] = true; // oneDNN / the compressed primitive hold their own weights
    for (size_t i = 0; i < S.slots; ++i)
        if (S.known[i] && !needed[i]) aligned_vector<uint8_t>().swap(S.consts[i].bytes);
    for (const node *p : g->parameters()) S.params.push_back(slot[p]);
    for (const node *r : g->results()) S.results.push_back(slot[r]);
    // 2b. A global average pool of a DequantizeLinear reads the bytes itself
    // (MobileNet's and ResNet's heads): no f32 tensor, one pass, the same values.
    {
        std::map<int, size_t> producer;
        for (size_t k = 0; k < S.steps.size(); ++k)
            if (S.steps[k].fused < 0) producer[S.steps[k].out] = k;
        for (state::step &st : S.steps) {
            if (st.n->kind != op::ReduceMean || st.in.empty()) continue;
            const auto it = producer.find(st.in[0]);
            if (it == producer.end()) continue;
            state::step &dq = S.steps[it->second];
            if (dq.skip || !dq_mean_foldable(*g, *dq.n, *st.n, S.known, S.consts, dq.in)) continue;
            dq.skip = true;
            st.dq_mean = true;
            st.in = dq.in;
            for (auto &[id, impl] : S.impls) {
                if (id == dq.n->id) impl = "graph:dequantize_linear (read by " + st.n->id + ")";
                if (id == st.n->id) impl = "graph:dequantize_mean_" + std::string(ir_name(dq.n->inputs[0]->out_type));
            }
        }
    }
    // 3. The buffer lifetimes: each slot's last reader, the residuals a `sum`
    // overwrites in place, the QuantizeLinear outputs made NHWC.
    {
        std::vector<int> last(S.slots, -1);
        std::vector<bool> keep(S.known); // constants, Parameters and Results live through the run
        for (int p : S.params) keep[p] = true;
        for (int r : S.results) keep[r] = true;
        for (size_t k = 0; k < S.steps.size(); ++k)
            for (int i : S.steps[k].in) last[i] = static_cast<int>(k);
        for (size_t k = 0; k < S.steps.size(); ++k) {
            state::step &st = S.steps[k];
            std::set<int> dying;
            for (int i : st.in)
                if (last[i] == static_cast<int>(k) && !keep[i]) dying.insert(i);
            if (st.qconv && st.in.size() == 3 && dying.count(st.in[2]) && st.in[2] != st.in[0] &&
                st.n->inputs[2]->out_type == st.n->out_type && st.n->out_type != dtype::f32)
                st.in_place = st.in[2];
            st.frees.assign(dying.begin(), dying.end());
            if (st.n->kind == op::QuantizeLinear && detail::qdq_takes_nhwc(*st.n)) {
                bool conv = false, all = true;
                for (const node *u : g->consumers(st.n)) {
                    conv |= u->kind == op::QConvolution;
                    all &= u->kind == op::QConvolution || (u->kind == op::MaxPool && u->out_type == st.n->out_type);
                }
                st.nhwc_out = conv && all && !keep[st.out];
            }
        }
        state::mark_f32_islands(*g, S, slot, keep);
    }
    S.owner = std::move(g);
    if (impl::verbose_level() >= 1)
        for (const auto &[id, chosen] : S.impls) impl::verbose_print("graph,compile," + id + "," + chosen);
    return s;
}

compiled_graph::~compiled_graph() = default;

// The value of `?` the inputs give: the same at every `?` of every Parameter.
int64_t compiled_graph::dynamic_value_of(const std::vector<tensor> &inputs) const {
    const auto params = d_->source->parameters();
    if (inputs.size() != params.size())
        fail("inputs", "expected " + std::to_string(params.size()) + " tensors, got " + std::to_string(inputs.size()));
    int64_t v = 0;
    std::string first;
    for (size_t p = 0; p < params.size(); ++p) {
        const shape_t &want = params[p]->attr.shape, &got = inputs[p].shape;
        if (want.size() != got.size())
            fail("inputs", "Parameter '" + params[p]->id + "' has rank " + std::to_string(want.size()) + ", got " +
                               to_string(got));
        for (size_t i = 0; i < want.size(); ++i) {
            if (want[i] != dynamic_dim) continue;
            if (v == 0) {
                v = got[i];
                first = "'" + params[p]->id + "' dim " + std::to_string(i);
            } else if (got[i] != v) {
                fail("inputs", "every '?' takes one value: " + first + " is " + std::to_string(v) + ", '" +
                                   params[p]->id + "' dim " + std::to_string(i) + " is " + std::to_string(got[i]));
            }
        }
    }
    if (v < 1)
        fail("inputs", "the run-time dimension '?' must be positive (" + first + " is " + std::to_string(v) + ")");
    return v;
}

std::vector<tensor> compiled_graph::run_profiled(const std::vector<tensor> &inputs,
                                                 std::vector<std::pair<std::string, double>> *ms) const {
    if (d_) fail("inputs", "run_profiled: a graph with a run-time dimension '?' is profiled through run()");
    return run_state(*s_, inputs, ms);
}

std::vector<tensor> compiled_graph::run(const std::vector<tensor> &inputs) const {
    if (!d_) return run_state(*s_, inputs);
    const int64_t v = dynamic_value_of(inputs);
    std::shared_ptr<const state> st;
    {
        std::lock_guard<std::mutex> lock(d_->mu);
        for (const auto &[value, c] : d_->compiled)
            if (value == v) st = c;
        if (!st) {
            // Compiled under the lock: concurrent runs of a new value wait for one compilation.
            st = compile(*d_->source, d_->opt, d_.get(), v);
            if (d_->compiled.size() >= dynamic::keep) d_->compiled.erase(d_->compiled.begin());
            d_->compiled.push_back({v, st});
        }
    }
    return run_state(*st, inputs);
}

std::vector<tensor> compiled_graph::run_state(const state &S, const std::vector<tensor> &inputs,
                                              std::vector<std::pair<std::string, double>> *ms) {
    if (inputs.size() != S.params.size())
        fail("inputs",
             "expected " + std::to_string(S.params.size()) + " tensors, got " + std::to_string(inputs.size()));
    // This run's arena: one left by an earlier run, else a new one.
    struct lease {
        const state &S;
        std::unique_ptr<state::arena> a;
        explicit lease(const state &s) : S(s) {
            std::lock_guard<std::mutex> lock(S.arenas_mu);
            if (!S.arenas.empty()) {
                a = std::move(S.arenas.back());
                S.arenas.pop_back();
            } else {
                a = std::make_unique<state::arena>();
            }
        }
        ~lease() {
            std::lock_guard<std::mutex> lock(S.arenas_mu);
            S.arenas.push_back(std::move(a));
        }
    } held(S);
    state::arena &A = *held.a;
    std::vector<tensor> &v = A.v;
    v.resize(S.slots);
    for (tensor &t : v) A.give(t);                       // what a run stopped by an error left
    std::vector<const tensor *> given(S.slots, nullptr); // Parameters read from the caller's tensors
    auto get = [&](int i) -> const tensor & { return S.known[i] ? S.consts[i] : given[i] ? *given[i] : v[i]; };
    const auto params = S.owner->parameters();
    for (size_t p = 0; p < S.params.size(); ++p) {
        const node &pn = *params[p];
        const tensor &t = inputs[p];
        if (t.shape != pn.out_shape || static_cast<int64_t>(t.bytes.size()) != storage_bytes(t.type, t.elems()))
            fail("inputs", "Parameter '" + pn.id + "' expects " + to_string(pn.out_shape) + ", got " +
                               to_string(t.shape) + " with " + std::to_string(t.bytes.size()) + " bytes of " +
                               ir_name(t.type));
        // The graph's boundary: the value in the Parameter's type (converted as
        // a Convert does when another type is given) and in plain layout; the
        // caller's tensor itself when it is both.
        if (t.order == layout::plain && t.type == pn.out_type) {
            given[S.params[p]] = &t;
            continue;
        }
        tensor &d = v[S.params[p]];
        d = t.order == layout::plain ? t : t.to_layout(layout::plain);
        if (d.type != pn.out_type) {
            tensor c(pn.out_type, d.shape);
            for (int64_t i = 0; i < c.elems(); ++i) c.set(i, d.get(i));
            d = std::move(c);
        }
    }
    using clock = std::chrono::steady_clock;
    clock::time_point t0 = clock::now();
    const state::step *prev = nullptr;
    auto lap = [&](const state::step *next) {
        if (ms && prev) {
            const clock::time_point t1 = clock::now();
            ms->push_back({prev->n->id, std::chrono::duration<double, std::milli>(t1 - t0).count()});
            t0 = t1;
        } else if (ms) {
            t0 = clock::now();
        }
        prev = next;
    };
    std::vector<const tensor *> ins;
    auto run_step = [&](const state::step &st) {
        if (st.skip) return;
        if (st.fused >= 0) {
            const compressed &c = S.mms[st.fused];
            const tensor &x = get(st.in[0]);
            tensor &y = v[st.out];
            A.take(y, c.mm->out_type, (c.bias_add ? c.bias_add : c.mm)->out_shape, layout::plain);
            if (x.elems() != c.rows * c.desc.k || x.type != y.type || x.order != layout::plain)
                fail("inputs", "MatMul '" + c.mm->id + "' input has " + std::to_string(x.elems()) + " elements of " +
                                   ir_name(x.type));
            if (c.prim) {
                run_compressed(*c.prim, x, y, c.rows, S.threads);
            } else {
                const tensor &wt = get(st.in[1]);
                if (wt.type != c.wq->out_type) fail(st.n->where(), "weights of another type");
                matmul_weights w{wt.bytes.data(), c.scale.data(), c.zp.empty() ? nullptr : c.zp.data(),
                                 c.bias.empty() ? nullptr : c.bias.data()};
                if (c.desc.scale_dt == dtype::f16) w.scale = nullptr, w.scale_f16 = c.scale_f16.data();
                matmul_desc dm = c.desc; // weights per run: a primitive for this run's rows
                dm.m = c.rows;
                run_compressed(matmul(dm, w, c.hints), x, y, c.rows, S.threads);
            }
            return;
        }
        ins.clear();
        for (int i : st.in) ins.push_back(&get(i));
        if (st.dq_mean) {
            const tensor &x = *ins[0];
            if (x.shape != st.n->inputs[0]->out_shape) fail(st.n->where(), "ReduceMean input changed shape");
            const shape_t &sh = x.shape;
            tensor &o = v[st.out];
            A.take(o, st.n->out_type, st.n->out_shape, layout::plain);
            const int32_t zp = ins.size() > 2 ? static_cast<int32_t>(ins[2]->get(0)) : 0;
            detail::dequantize_mean(x.bytes.data(), x.type == dtype::u8, x.order == layout::nhwc, sh[0], sh[1],
                                    sh[2] * sh[3], static_cast<float>(ins[1]->get(0)), zp, o.f32());
            return;
        }
        if (st.qconv) {
            // Quantized activations stay NHWC: a source in another layout is
            // reordered once here, the output is left NHWC for the next one.
            const tensor &x0 = *ins[0];
            if (x0.shape != st.n->inputs[0]->out_shape || x0.type != st.n->inputs[0]->out_type)
                fail(st.n->where(), "QConvolution source changed shape or type");
            tensor xn;
            const tensor *x = &x0;
            if (x0.order != layout::nhwc) {
                xn = x0.to_layout(layout::nhwc);
                x = &xn;
            }
            tensor &o = v[st.out];
            exec_args a;
            a.threads = S.threads;
            tensor rn;
            if (ins.size() == 3 && ins[2]->type == st.n->out_type && st.n->out_type != dtype::f32) {
                // sum: the skip's integers are the destination's previous values
                const tensor &r = *ins[2];
                if (r.shape != st.n->out_shape) fail(st.n->where(), "QConvolution residual changed shape");
                if (st.in_place >= 0 && r.order == layout::nhwc && &r == &v[st.in_place]) {
                    // the residual's last use: its storage becomes the output
                    A.give(o);
                    tensor &res = v[st.in_place];
                    o.type = res.type;
                    o.shape = res.shape;
                    o.order = layout::nhwc;
                    o.bytes.swap(res.bytes);
                } else {
                    A.take(o, st.n->out_type, st.n->out_shape, layout::nhwc);
                    if (r.order == layout::nhwc) std::memcpy(o.bytes.data(), r.bytes.data(), o.bytes.size());
                    else o.bytes = r.to_layout(layout::nhwc).bytes;
                }
            } else {
                A.take(o, st.n->out_type, st.n->out_shape, layout::nhwc);
                if (ins.size() == 3) {
                    rn = ins[2]->to_layout(layout::nhwc);
                    a.binary.push_back(rn.f32());
                }
            }
            st.qconv->execute(x->bytes.data(), o.bytes.data(), a);
            return;
        }
        if (st.deconv) {
            tensor &o = v[st.out];
            A.take(o, st.n->out_type, st.n->out_shape, layout::plain);
            if (ins[0]->shape != st.n->inputs[0]->out_shape) fail(st.n->where(), "input shape changed");
            detail::run_deconv_as_1x1(*st.deconv, *ins[0], o, S.threads);
            return;
        }
        if (st.conv || st.conv_per_run) {
            tensor &o = v[st.out];
            A.take(o, st.n->out_type, st.n->out_shape, st.f32_nhwc ? layout::nhwc : layout::plain);
            if (ins[0]->shape != st.n->inputs[0]->out_shape) fail(st.n->where(), "input shape changed");
            std::shared_ptr<convolution_f32> c = st.conv;
            if (!c)
                c = std::make_shared<convolution_f32>(detail::f32_conv_desc(*st.n), ins[1]->to_f32().data(), nullptr);
            detail::run_f32_conv(*c, *ins[0], o, S.threads);
            return;
        }
        for (size_t k = 0; k < ins.size(); ++k)
            if (ins[k]->shape != st.n->inputs[k]->out_shape)
                fail(st.n->where(), std::string(to_string(st.n->kind)) + " '" + st.n->id + "': input " +
                                        std::to_string(k) + " has shape " + to_string(ins[k]->shape) + ", expected " +
                                        to_string(st.n->inputs[k]->out_shape));
        if (st.n->kind == op::MaxPool && ins[0]->order == layout::nhwc &&
            (ins[0]->type == dtype::u8 || ins[0]->type == dtype::s8) && st.n->out_type == ins[0]->type) {
            tensor &o = v[st.out];
            A.take(o, st.n->out_type, st.n->out_shape, layout::nhwc);
            detail::max_pool_nhwc_node(*st.n, *ins[0], o);
            return;
        }
        tensor &o = v[st.out];
        if (ins[0]->order == layout::nhwc && detail::reduce_mean_takes_nhwc(*st.n)) {
            A.take(o, st.n->out_type, st.n->out_shape, layout::plain);
            detail::reduce_mean_hw_nhwc(*ins[0], o);
            return;
        }
        const bool keep_nhwc = st.f32_nhwc && state::keeps_nhwc(*st.n, ins);
        A.take(o, st.n->out_type, st.n->out_shape, st.nhwc_out || keep_nhwc ? layout::nhwc : layout::plain);
        if (keep_nhwc && st.n->kind == op::Resize) detail::resize(*st.n, *ins[0], o);
        else if (keep_nhwc && st.n->kind == op::Concat) detail::concat_nhwc(ins, o);
        else if (keep_nhwc && st.n->kind != op::DequantizeLinear) detail::eval_elementwise_nhwc(*st.n, ins, o);
        else detail::eval_node_into(*st.n, ins, o);
    };
    for (const auto &st : S.steps) {
        lap(&st);
        run_step(st);
        for (int i : st.frees) A.give(v[i]);
    }
    lap(nullptr);
    std::vector<tensor> out;
    for (int r : S.results) out.push_back(get(r));
    for (tensor &t : v) A.give(t);
    return out;
}

std::vector<std::pair<std::string, std::string>> compiled_graph::impls() const { return s_->impls; }

double run_bytes(const graph &g) {
    double bytes = 0;
    for (const auto &n : g.nodes()) {
        const double f32 = double(elems_of(n->out_shape)) * 4;
        bytes += f32;                                                        // the executor's tensor
        if (n->kind == op::Parameter || n->kind == op::Result) bytes += f32; // the caller's input, the output returned
        if (n->kind == op::Constant) bytes += double(storage_bytes(n->attr.type, elems_of(n->attr.shape)));
    }
    return bytes;
}

void check_run_memory(const graph &g) {
    const node *largest = nullptr;
    for (const auto &n : g.nodes())
        if (!largest || elems_of(n->out_shape) > elems_of(largest->out_shape)) largest = n.get();
    if (!largest) return;
    impl::check_memory(run_bytes(g), largest->where(),
                       "running the graph (largest tensor: '" + largest->id + "' " + ir_name(largest->out_type) +
                           to_string(largest->out_shape) + ", " +
                           impl::bytes_text(double(elems_of(largest->out_shape)) * 4) + " in f32)",
                       double(max_run_bytes), "the graph limit of " + impl::bytes_text(double(max_run_bytes)));
}

std::vector<tensor> random_inputs(const graph &g, uint64_t seed, int64_t dynamic_value) {
    std::vector<tensor> r;
    detail::rng rng(seed);
    const int64_t v = dynamic_value > 0 ? dynamic_value : g.dynamic_value();
    std::vector<shape_t> shapes;
    double bytes = 0;
    for (const node *p : g.parameters()) {
        shape_t s = p->attr.shape;
        for (int64_t &d : s)
            if (d == dynamic_dim) d = v;
        check_shape(s, "inputs");
        bytes += double(elems_of(s)) * 4;
        shapes.push_back(s);
    }
    impl::check_memory(bytes, "inputs", "random inputs for every Parameter");
    size_t i = 0;
    for (const node *p : g.parameters()) {
        const shape_t &s = shapes[i++];
        tensor t(p->attr.type, s);
        for (int64_t e = 0; e < t.elems(); ++e)
            t.set(e, is_integer(t.type)
                         ? static_cast<double>(rng.integer(std::max<int64_t>(detail::type_min(t.type), -128),
                                                           std::min<int64_t>(detail::type_max(t.type), 127)))
                         : static_cast<double>(static_cast<float>(rng.uniform() * 2.0 - 1.0)));
        r.push_back(std::move(t));
    }
    return r;
}

} // namespace qconv::graph
