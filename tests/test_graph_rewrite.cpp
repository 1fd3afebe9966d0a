// ConvertWeightCompressedConv1x1ToMatmul: structure after the pass and
// numerical equality before/after over the whole case matrix, and the
// negative cases that must leave the graph unchanged.
//
// Data keeps every computation exact in f32 (small integer activations and
// biases, power-of-two scales), so "before" and "after" must agree bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "qconv/graph.h"

using namespace qconv::graph;

namespace {

enum class act_kind { transpose, reshape, direct };
const char *name(act_kind a) {
    return a == act_kind::transpose ? "transpose" : a == act_kind::reshape ? "reshape" : "direct";
}

struct case_t {
    act_kind act = act_kind::transpose;
    bool zp = true, bias = true, convert = false, wparam = false, group = true;
    dtype wt = dtype::u4;
};
std::string str(const case_t &c) {
    return std::string(name(c.act)) + (c.zp ? "_zp" : "") + (c.bias ? "_bias" : "") + (c.convert ? "_cvt" : "") +
           (c.wparam ? "_wparam" : "_wconst") + (c.group ? "_group" : "_peroc") + "_" + to_string(c.wt);
}
void PrintTo(const case_t &c, std::ostream *os) { *os << str(c); }

constexpr int64_t N = 2, H = 2, W = 3, IC = 64, OC = 24, GS = 16, NG = IC / GS;

std::vector<int64_t> ints(uint64_t seed, int64_t n, int64_t lo, int64_t hi) {
    std::vector<int64_t> v(n);
    uint64_t s = seed * 2654435761u + 12345;
    for (auto &x : v) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x = lo + static_cast<int64_t>((s >> 33) % static_cast<uint64_t>(hi - lo + 1));
    }
    return v;
}
int64_t lo_of(dtype t) { return t == dtype::u4 || t == dtype::u8 ? 0 : t == dtype::s4 ? -8 : -128; }
int64_t hi_of(dtype t) { return t == dtype::u4 ? 15 : t == dtype::u8 ? 255 : t == dtype::s4 ? 7 : 127; }

attributes conv_attrs() { return {}; }
attributes order(std::vector<int64_t> o) {
    attributes a;
    a.order = std::move(o);
    return a;
}
attributes target(std::vector<int64_t> s) {
    attributes a;
    a.target = std::move(s);
    return a;
}
attributes to(dtype t) {
    attributes a;
    a.type = t;
    return a;
}

struct built {
    std::unique_ptr<graph> g;
    std::vector<tensor> inputs;
};

// Decompression subgraph for weights [OC, IC, 1, 1] (or group-wise [OC,NG,GS,1,1] + Reshape).
node *weights(graph &g, const case_t &c, std::vector<tensor> *inputs, bool scale_param = false,
              bool zp_no_convert = false) {
    const shape_t ws = c.group ? shape_t{OC, NG, GS, 1, 1} : shape_t{OC, IC, 1, 1};
    const shape_t ss = c.group ? shape_t{OC, NG, 1, 1, 1} : shape_t{OC, 1, 1, 1};
    const auto wv = ints(7, OC * IC, lo_of(c.wt), hi_of(c.wt));
    node *wq;
    if (c.wparam) {
        wq = g.parameter(c.wt, ws, "wq");
        inputs->push_back(tensor::from_values(c.wt, ws, std::vector<double>(wv.begin(), wv.end())));
    } else {
        wq = g.constant_int(c.wt, ws, wv, "wq");
    }
    node *x = g.add(op::Convert, {wq}, to(dtype::f32), "wq_f32");
    if (c.zp) {
        const auto zv = ints(8, elems_of(ss), lo_of(c.wt), hi_of(c.wt));
        if (zp_no_convert) {
            std::vector<float> zf(zv.begin(), zv.end());
            x = g.add(op::Subtract, {x, g.constant_f32(ss, zf, "zp")}, {}, "sub");
        } else {
            node *zp = g.constant_int(c.wt, ss, zv, "zp");
            x = g.add(op::Subtract, {x, g.add(op::Convert, {zp}, to(dtype::f32), "zp_f32")}, {}, "sub");
        }
    }
    node *s;
    if (scale_param) {
        s = g.parameter(dtype::f32, ss, "scale");
        inputs->push_back(tensor::from_f32(dtype::f32, ss, std::vector<float>(elems_of(ss), 0.25f)));
    } else {
        std::vector<float> sv;
        for (int64_t e : ints(9, elems_of(ss), -4, 0)) sv.push_back(std::ldexp(1.f, static_cast<int>(e)));
        s = g.constant_f32(ss, sv, "scale");
    }
    node *m = g.add(op::Multiply, {x, s}, {}, "mul");
    if (c.group) m = g.add(op::Reshape, {m}, target({OC, IC, 1, 1}), "wreshape");
    return m;
}

tensor int_tensor(const shape_t &s, uint64_t seed) {
    const auto v = ints(seed, elems_of(s), -3, 3);
    return tensor::from_values(dtype::f32, s, std::vector<double>(v.begin(), v.end()));
}

// The conv with activation / output layout ops as the case says.
built make(const case_t &c) {
    built b;
    b.g = std::make_unique<graph>();
    graph &g = *b.g;
    const int64_t h = c.act == act_kind::reshape ? 1 : H, w = c.act == act_kind::reshape ? 1 : W;
    node *a;
    if (c.act == act_kind::transpose) {
        node *x = g.parameter(dtype::f32, {N, H, W, IC}, "x");
        b.inputs.push_back(int_tensor({N, H, W, IC}, 1));
        a = g.add(op::Transpose, {x}, order({0, 3, 1, 2}), "act");
    } else if (c.act == act_kind::reshape) {
        node *x = g.parameter(dtype::f32, {N, IC}, "x");
        b.inputs.push_back(int_tensor({N, IC}, 1));
        a = g.add(op::Reshape, {x}, target({N, IC, 1, 1}), "act");
    } else {
        node *x = g.parameter(dtype::f32, {N, IC, H, W}, "x");
        b.inputs.push_back(int_tensor({N, IC, H, W}, 1));
        a = g.add(op::Relu, {x}, {}, "act");
    }
    node *wts = weights(g, c, &b.inputs);
    node *t = g.add(op::Convolution, {a, wts}, conv_attrs(), "conv");
    if (c.bias) {
        std::vector<float> bv;
        for (int64_t v : ints(11, OC, -5, 5)) bv.push_back(static_cast<float>(v));
        t = g.add(op::Add, {t, g.constant_f32({1, OC, 1, 1}, bv, "bias")}, {}, "bias_add");
    }
    if (c.convert) t = g.add(op::Convert, {t}, to(dtype::f16), "cvt");
    if (c.act == act_kind::reshape) {
        t = g.add(op::Reshape, {t}, target({N, OC}), "out_layout");
    } else {
        t = g.add(op::Transpose, {t}, order({0, 2, 3, 1}), "out_layout");
    }
    t->friendly_name = "layer_out";
    g.add(op::Result, {t}, {}, "result");
    g.infer();
    (void)h;
    (void)w;
    return b;
}

std::vector<tensor> run(const graph &g, const std::vector<tensor> &in) { return compiled_graph(g).run(in); }

void expect_same_values(const std::vector<tensor> &a, const std::vector<tensor> &b) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t r = 0; r < a.size(); ++r) {
        EXPECT_EQ(a[r].shape, b[r].shape);
        EXPECT_EQ(a[r].type, b[r].type);
        ASSERT_EQ(static_cast<size_t>(a[r].elems()), static_cast<size_t>(b[r].elems()));
        size_t bad = 0;
        for (size_t i = 0; i < static_cast<size_t>(a[r].elems()); ++i) bad += a[r].get(i) != b[r].get(i);
        EXPECT_EQ(bad, 0u) << "of " << static_cast<size_t>(a[r].elems()) << " values differ";
    }
}

const node *only(const graph &g, op k) {
    const node *r = nullptr;
    int count = 0;
    for (const auto &n : g.nodes())
        if (n->kind == k) {
            r = n.get();
            ++count;
        }
    EXPECT_EQ(count, 1) << to_string(k);
    return r;
}

class Rewrite : public ::testing::TestWithParam<case_t> {};

TEST_P(Rewrite, StructureAndValues) {
    const case_t c = GetParam();
    built b = make(c);
    const auto before = run(*b.g, b.inputs);
    const shape_t out_shape = b.g->results()[0]->out_shape;
    const dtype out_type = b.g->results()[0]->out_type;

    auto rec = run_passes(*b.g);
    ASSERT_EQ(rec.size(), 1u);
    EXPECT_TRUE(rec[0].rewritten) << rec[0].reason;
    const graph &g = *b.g;
    auto ops = g.count_ops();
    EXPECT_EQ(ops["Convolution"], 0);
    const node *mm = only(g, op::MatMul);
    ASSERT_TRUE(mm);
    EXPECT_TRUE(mm->attr.transpose_b);
    EXPECT_FALSE(mm->attr.transpose_a);
    EXPECT_EQ(mm->inputs[1]->out_shape, (shape_t{OC, IC}));
    EXPECT_EQ(mm->out_type, dtype::f32);
    // Only the node that takes over the replaced output carries its friendly
    // name; the MatMul is named after the Convolution with a suffix unless it
    // is that node (it replaces the absorbed output Transpose).
    const bool mm_last = !c.bias && !c.convert && c.act != act_kind::reshape;
    EXPECT_EQ(mm->friendly_name, mm_last ? "layer_out" : "conv");
    // The names along the output chain stand once (the MatMul and a fix-up
    // Transpose used to both carry "conv").
    std::map<std::string, int> names;
    for (const auto &n : g.nodes())
        for (const char *name : {"conv", "layer_out", "bias_add", "cvt"})
            if (n->friendly_name == name) {
                EXPECT_EQ(++names[name], 1) << name << " twice";
            }
    const int64_t h = c.act == act_kind::reshape ? 1 : H, w = c.act == act_kind::reshape ? 1 : W;
    EXPECT_EQ(mm->out_shape, (shape_t{N, h, w, OC}));
    // The activation is the NHWC input itself (Transpose absorbed), a Reshape, or a Transpose.
    const op act_op = c.act == act_kind::transpose ? op::Parameter
                      : c.act == act_kind::reshape ? op::Reshape
                                                   : op::Transpose;
    EXPECT_EQ(mm->inputs[0]->kind, act_op);
    // Decompression kept, reshaped to 2-D/3-D.
    const node *q = nullptr;
    for (const auto &n : g.nodes())
        if ((n->kind == op::Constant || n->kind == op::Parameter) && n->out_type == c.wt) {
            if (c.zp && elems_of(n->out_shape) != OC * IC) continue;
            q = n.get();
        }
    ASSERT_TRUE(q);
    if (!c.wparam) {
        EXPECT_EQ(q->out_shape, c.group ? (shape_t{OC, NG, GS}) : (shape_t{OC, IC}));
    }
    EXPECT_EQ(ops["Subtract"], c.zp ? 1 : 0);
    EXPECT_EQ(ops["Multiply"], 1);
    if (c.bias) {
        const node *add = only(g, op::Add);
        ASSERT_TRUE(add);
        EXPECT_EQ(add->inputs[1]->out_shape, (shape_t{1, 1, 1, OC}));
        EXPECT_EQ(add->friendly_name, c.convert || c.act == act_kind::reshape ? "bias_add" : "layer_out");
    } else {
        EXPECT_EQ(ops["Add"], 0);
    }
    // Convert to f16 kept (plus the weight Converts).
    int f16_converts = 0;
    for (const auto &n : g.nodes()) f16_converts += n->kind == op::Convert && n->out_type == dtype::f16;
    EXPECT_EQ(f16_converts, c.convert ? 1 : 0);
    // The output layout op was absorbed: no Transpose after the MatMul.
    const node *res = g.results()[0];
    EXPECT_EQ(res->out_shape, out_shape);
    EXPECT_EQ(res->out_type, out_type);
    EXPECT_EQ(res->inputs[0]->friendly_name, "layer_out");
    EXPECT_EQ(ops["Transpose"], c.act == act_kind::direct ? 1 : 0);

    const auto after = run(g, b.inputs);
    expect_same_values(before, after);

    // The MatMul runs as one compressed-MatMul primitive.
    compiled_graph cg(g);
    for (const auto &[id, impl] : cg.impls())
        if (id == mm->id) {
            EXPECT_EQ(impl.find("graph:"), std::string::npos) << impl;
            EXPECT_NE(impl.find(c.group ? "group16" : "per_oc"), std::string::npos) << impl;
        }
}

// The full product: activation × weight type × zp × bias × Convert × group-wise × Parameter weights.
std::vector<case_t> matrix() {
    std::vector<case_t> r;
    for (act_kind a : {act_kind::transpose, act_kind::reshape, act_kind::direct})
        for (dtype t : {dtype::u4, dtype::s4, dtype::u8, dtype::s8})
            for (int bits = 0; bits < 32; ++bits) {
                case_t c;
                c.act = a;
                c.wt = t;
                c.zp = bits & 1;
                c.bias = bits & 2;
                c.convert = bits & 4;
                c.group = bits & 8;
                c.wparam = bits & 16;
                r.push_back(c);
            }
    return r;
}

INSTANTIATE_TEST_SUITE_P(Matrix, Rewrite, ::testing::ValuesIn(matrix()),
                         [](const ::testing::TestParamInfo<case_t> &i) { return str(i.param); });

// ------------------------------------------------------ left unchanged
struct negative {
    std::unique_ptr<graph> g;
    std::vector<tensor> in;
};

// Transpose → conv (with the given tweak) → Transpose.
negative base(const std::function<void(graph &, node *&act, node *&wts, attributes &ca, op &kind)> &tweak,
              bool out_transpose = true) {
    negative r;
    r.g = std::make_unique<graph>();
    graph &g = *r.g;
    case_t c;
    node *x = g.parameter(dtype::f32, {N, H, W, IC}, "x");
    r.in.push_back(int_tensor({N, H, W, IC}, 1));
    node *act = g.add(op::Transpose, {x}, order({0, 3, 1, 2}), "act");
    node *wts = weights(g, c, &r.in);
    attributes ca;
    op kind = op::Convolution;
    tweak(g, act, wts, ca, kind);
    node *conv = g.add(kind, {act, wts}, ca, "conv");
    node *t = conv;
    if (out_transpose) t = g.add(op::Transpose, {t}, order({0, 2, 3, 1}), "out");
    g.add(op::Result, {t}, {}, "result");
    g.prune();
    g.infer();
    return r;
}

void expect_unchanged(negative n, const std::string &reason, const veto_callback &veto = {}) {
    const std::string before = to_text(*n.g);
    const auto vb = run(*n.g, n.in);
    auto rec = run_passes(*n.g, veto);
    ASSERT_EQ(rec.size(), 1u);
    EXPECT_FALSE(rec[0].rewritten);
    EXPECT_NE(rec[0].reason.find(reason), std::string::npos) << rec[0].reason;
    EXPECT_EQ(to_text(*n.g), before);
    expect_same_values(vb, run(*n.g, n.in));
}

auto no_tweak = [](graph &, node *&, node *&, attributes &, op &) {};

TEST(RewriteNegative, Kernel3x3) {
    expect_unchanged(
        base([](graph &g, node *&, node *&w, attributes &a, op &) {
            std::vector<float> v(OC * IC * 9, 0.5f);
            w = g.constant_f32({OC, IC, 3, 3}, v, "w3");
            node *q = g.constant_int(dtype::u8, {OC, IC, 3, 3}, std::vector<int64_t>(OC * IC * 9, 3), "q3");
            node *cv = g.add(op::Convert, {q}, to(dtype::f32), "q3f");
            w = g.add(op::Multiply, {cv, g.constant_f32({OC, 1, 1, 1}, std::vector<float>(OC, 0.5f))}, {}, "m3");
            a.pads_begin = {1, 1};
            a.pads_end = {1, 1};
        }),
        "is not 1x1");
}
TEST(RewriteNegative, Stride2) {
    expect_unchanged(base([](graph &, node *&, node *&, attributes &a, op &) { a.strides = {2, 2}; }), "stride");
}
TEST(RewriteNegative, Padding) {
    expect_unchanged(base([](graph &, node *&, node *&, attributes &a, op &) {
                         a.pads_begin = {1, 0};
                         a.pads_end = {1, 0};
                     }),
                     "padding");
}
TEST(RewriteNegative, SameUpperWithStride) {
    expect_unchanged(base([](graph &, node *&, node *&, attributes &a, op &) {
                         a.auto_pad = pad_mode::same_upper;
                         a.strides = {2, 2};
                     }),
                     "stride");
}
TEST(RewriteNegative, GroupConvolution) {
    expect_unchanged(base([](graph &g, node *&, node *&w, attributes &, op &k) {
                         k = op::GroupConvolution;
                         w = g.add(op::Reshape, {w}, target({1, OC, IC, 1, 1}), "to_groups");
                     }),
                     "GroupConvolution");
}
TEST(RewriteNegative, NonConstantScale) {
    negative n = base([](graph &g, node *&, node *&w, attributes &, op &) {
        // Rebuild the weights with a Parameter scale.
        std::vector<tensor> extra;
        case_t c;
        w = weights(g, c, &extra, /*scale_param=*/true);
    });
    n.in.push_back(tensor::from_f32(dtype::f32, {OC, NG, 1, 1, 1}, std::vector<float>(OC * NG, 0.25f)));
    // Inputs follow Parameter creation order: x, scale.
    expect_unchanged(std::move(n), "scale is not a Constant");
}
TEST(RewriteNegative, ZeroPointWithoutConvert) {
    expect_unchanged(base([](graph &g, node *&, node *&w, attributes &, op &) {
                         std::vector<tensor> extra;
                         case_t c;
                         w = weights(g, c, &extra, false, /*zp_no_convert=*/true);
                     }),
                     "zero point is not Convert");
}
using node_fn = std::function<node *(graph &, node *)>;

// x (shape `xs`) → act(x) → Convolution(·, w) → out(conv) → Result, with the
// decompressed weights of the default case unless `plain_weights`.
negative chain(const shape_t &xs, const node_fn &act, const node_fn &out, bool plain_weights = false) {
    negative r;
    r.g = std::make_unique<graph>();
    graph &g = *r.g;
    node *x = g.parameter(dtype::f32, xs, "x");
    r.in.push_back(int_tensor(xs, 1));
    node *w = plain_weights ? g.constant_f32({OC, IC, 1, 1}, std::vector<float>(OC * IC, 0.5f), "w")
                            : weights(g, case_t{}, &r.in);
    g.add(op::Result, {out(g, g.add(op::Convolution, {act(g, x), w}, {}, "conv"))}, {}, "result");
    g.infer();
    return r;
}

node_fn transpose(std::vector<int64_t> o, const char *name) {
    return [o, name](graph &g, node *in) { return g.add(op::Transpose, {in}, order(o), name); };
}
const node_fn to_nchw = transpose({0, 3, 1, 2}, "act");
const node_fn to_nhwc = transpose({0, 2, 3, 1}, "out");

TEST(RewriteNegative, IsolatedConvolution) {
    expect_unchanged(chain(
                         {N, IC, H, W}, [](graph &, node *x) { return x; },
                         [](graph &g, node *c) { return g.add(op::Relu, {c}, {}, "relu"); }),
                     "isolated");
}
TEST(RewriteNegative, VetoedByCallback) {
    int calls = 0;
    expect_unchanged(base(no_tweak), "vetoed", [&](const node &c) {
        ++calls;
        return c.id == "conv";
    });
    EXPECT_EQ(calls, 1);
}
TEST(RewriteNegative, ActivationTransposeWrongOrder) {
    // [N, W, H, IC] with order [0,3,2,1] gives [N, IC, H, W]: the right shape, the wrong order.
    expect_unchanged(chain({N, W, H, IC}, transpose({0, 3, 2, 1}, "act"), to_nhwc),
                     "activation Transpose order [0,3,2,1]");
}
TEST(RewriteNegative, OutputTransposeWrongOrder) {
    expect_unchanged(chain({N, H, W, IC}, to_nchw, transpose({0, 3, 2, 1}, "out")), "output Transpose order [0,3,2,1]");
}
TEST(RewriteNegative, ActivationReshapeNotRelayout) {
    const node_fn reshape = [](graph &g, node *x) { return g.add(op::Reshape, {x}, target({N, IC, H, W}), "act"); };
    expect_unchanged(chain({N, H * W * IC}, reshape, to_nhwc), "not a pure relayout");
}
TEST(RewriteNegative, PlainF32Weights) {
    expect_unchanged(chain({N, H, W, IC}, to_nchw, to_nhwc, /*plain_weights=*/true), "not a decompression subgraph");
}

// ------------------------------------------ consumers that need a fix-up
// x NHWC → Transpose → Convolution (default weights); the caller adds the consumers.
built transposed_conv(node *&conv) {
    built b;
    b.g = std::make_unique<graph>();
    graph &g = *b.g;
    node *x = g.parameter(dtype::f32, {N, H, W, IC}, "x");
    b.inputs.push_back(int_tensor({N, H, W, IC}, 1));
    conv = g.add(op::Convolution, {to_nchw(g, x), weights(g, case_t{}, &b.inputs)}, {}, "conv");
    return b;
}

// A Reshape consumer with H·W > 1 must see NCHW order (OpenVINO's bug fed it NHWC).
TEST(RewriteFixup, ReshapeConsumerWithSpatialSeesNchw) {
    node *conv = nullptr;
    built b = transposed_conv(conv);
    graph &g = *b.g;
    node *r = g.add(op::Reshape, {conv}, target({N, OC * H * W}), "flatten");
    g.add(op::Result, {r}, {}, "result");
    g.infer();
    const auto before = run(g, b.inputs);
    auto rec = run_passes(g);
    ASSERT_TRUE(rec[0].rewritten) << rec[0].reason;
    EXPECT_NE(rec[0].reason.find("output=fixup"), std::string::npos);
    const node *fl = g.results()[0]->inputs[0];
    ASSERT_EQ(fl->kind, op::Reshape);
    ASSERT_EQ(fl->inputs[0]->kind, op::Transpose);
    EXPECT_EQ(fl->inputs[0]->attr.order, (std::vector<int64_t>{0, 3, 1, 2}));
    expect_same_values(before, run(g, b.inputs));
}

// The conv output read by two consumers: both see the values they saw before.
TEST(RewriteFixup, TwoConsumers) {
    node *conv = nullptr;
    built b = transposed_conv(conv);
    graph &g = *b.g;
    g.add(op::Result, {g.add(op::Relu, {conv}, {}, "relu")}, {}, "r1");
    g.add(op::Result, {g.add(op::Transpose, {conv}, order({0, 2, 3, 1}), "t")}, {}, "r2");
    g.infer();
    const auto before = run(g, b.inputs);
    auto rec = run_passes(g);
    ASSERT_TRUE(rec[0].rewritten) << rec[0].reason;
    EXPECT_EQ(g.count_ops()["Convolution"], 0);
    expect_same_values(before, run(g, b.inputs));
}

// A scale per input channel is still a decompression subgraph: rewritten,
// same values (the executor fuses it if a MatMul row takes group size 1,
// else runs the decompression and an f32 MatMul).
TEST(RewriteFixup, ScalePerInputChannel) {
    built b;
    b.g = std::make_unique<graph>();
    graph &g = *b.g;
    node *x = g.parameter(dtype::f32, {N, H, W, IC}, "x");
    b.inputs.push_back(int_tensor({N, H, W, IC}, 1));
    node *act = g.add(op::Transpose, {x}, order({0, 3, 1, 2}), "act");
    node *q = g.constant_int(dtype::u8, {OC, IC, 1, 1}, ints(3, OC * IC, 0, 255), "q");
    node *cq = g.add(op::Convert, {q}, to(dtype::f32), "cq");
    std::vector<float> sv;
    for (int64_t e : ints(4, IC, -4, 0)) sv.push_back(std::ldexp(1.f, static_cast<int>(e)));
    node *w = g.add(op::Multiply, {cq, g.constant_f32({1, IC, 1, 1}, sv, "s")}, {}, "w");
    node *conv = g.add(op::Convolution, {act, w}, {}, "conv");
    conv->rt_info["origin"] = "onnx:Conv_17";
    g.add(op::Result, {g.add(op::Transpose, {conv}, order({0, 2, 3, 1}), "out")}, {}, "result");
    g.infer();
    const auto before = run(g, b.inputs);
    auto rec = run_passes(g);
    ASSERT_TRUE(rec[0].rewritten) << rec[0].reason;
    const node *mm = nullptr;
    for (const auto &n : g.nodes())
        if (n->kind == op::MatMul) mm = n.get();
    ASSERT_TRUE(mm);
    EXPECT_EQ(mm->rt_info.at("origin"), "onnx:Conv_17"); // runtime info copied along
    expect_same_values(before, run(g, b.inputs));
}

// Scalar scale and zero point: per-tensor in the compressed MatMul.
TEST(RewriteFixup, PerTensorScaleAndZeroPoint) {
    auto g = parse("x = Parameter f32[2,3,5,64]\n"
                   "a = Transpose(x) order=[0,3,1,2]\n"
                   "q = Constant u8[24,64,1,1] random(1, 0, 255)\n"
                   "qf = Convert(q) to=f32\n"
                   "z = Constant u8[] [128]\n"
                   "zf = Convert(z) to=f32\n"
                   "d = Subtract(qf, zf)\n"
                   "s = Constant f32[1] [0.0625]\n"
                   "w = Multiply(s, d)\n"
                   "c = Convolution(a, w)\n"
                   "y = Transpose(c) order=[0,2,3,1]\n"
                   "r = Result(y)\n");
    tensor in = int_tensor({2, 3, 5, 64}, 5);
    const auto before = run(*g, {in});
    auto rec = run_passes(*g);
    ASSERT_TRUE(rec[0].rewritten) << rec[0].reason;
    compiled_graph cg(*g);
    bool seen = false;
    for (const auto &[id, impl] : cg.impls())
        if (g->find(id)->kind == op::MatMul) {
            seen = true;
            EXPECT_NE(impl.find("per_oc zp:per_tensor"), std::string::npos) << impl;
            EXPECT_EQ(impl.find("graph:"), std::string::npos) << impl;
        }
    EXPECT_TRUE(seen);
    expect_same_values(before, cg.run({in}));
}

// docs/semantics.md §7: scales whose dequantized weights overflow f32 are
// refused by the compressed MatMul, so the executor runs the decompression
// as written and the rewritten graph gives the original's inf/NaN (a fused
// kernel would apply the scale to the group sum and stay finite).
TEST(RewriteFixup, OverflowingScalesKeepTheOriginalInfinities) {
    auto g = parse("x = Parameter f32[1,1,4,64]\n"
                   "a = Transpose(x) order=[0,3,1,2]\n"
                   "q = Constant u8[8,64,1,1] random(3, 0, 255)\n"
                   "qf = Convert(q) to=f32\n"
                   "s = Constant f32[8,1,1,1] [3e36,3e36,3e36,3e36,1e30,1e30,1e30,1e30]\n"
                   "w = Multiply(qf, s)\n"
                   "c = Convolution(a, w)\n"
                   "y = Transpose(c) order=[0,2,3,1]\n"
                   "r = Result(y)\n");
    tensor in = int_tensor({1, 1, 4, 64}, 7);
    const auto before = run(*g, {in});
    size_t non_finite = 0;
    for (float v : before[0].to_f32()) non_finite += !std::isfinite(v);
    ASSERT_GT(non_finite, 0u) << "the original graph overflows";
    auto rec = run_passes(*g);
    ASSERT_TRUE(rec[0].rewritten) << rec[0].reason;
    const auto after = run(*g, {in});
    ASSERT_EQ(static_cast<size_t>(after[0].elems()), static_cast<size_t>(before[0].elems()));
    for (size_t i = 0; i < static_cast<size_t>(after[0].elems()); ++i) {
        const float b = before[0].get(i), a = after[0].get(i);
        if (std::isnan(b)) EXPECT_TRUE(std::isnan(a)) << i;
        else if (std::isinf(b)) EXPECT_EQ(a, b) << i;
        else EXPECT_NEAR(a, b, 1e-5 * std::fabs(b)) << i;
    }
}

// Cancelling Transpose pairs are removed in one pass: a chain of 2 000
// pairs around Relus collapses to the Relus on x (the scan used to restart
// after each removal: 4 000 pairs took 19 s), and the values stay.
TEST(CancelTransposes, LongChainsCollapseInOnePass) {
    std::string text = "x = Parameter f32[1,2,3,4]\n";
    std::string prev = "x";
    const int pairs = 2000;
    for (int i = 0; i < pairs; ++i) {
        const std::string a = "a" + std::to_string(i), r = "r" + std::to_string(i), b = "b" + std::to_string(i);
        text += a + " = Transpose(" + prev + ") order=[0,2,3,1]\n";
        text += r + " = Relu(" + a + ")\n";
        text += b + " = Transpose(" + r + ") order=[0,3,1,2]\n";
        prev = b;
    }
    text += "y = Result(" + prev + ")\n";
    auto g = parse(text);
    const tensor in = int_tensor({1, 2, 3, 4}, 3);
    const auto before = run(*g, {in});
    EXPECT_EQ(cancel_transposes(*g), pairs);
    auto ops = g->count_ops();
    EXPECT_EQ(ops["Transpose"], 0);
    EXPECT_EQ(ops["Relu"], pairs);
    expect_same_values(before, run(*g, {in}));
}

// The embedded example: both convolutions rewritten, the Transposes around
// the Gelu cancel, and the values agree within f32 rounding.
TEST(RewriteExample, FfnU4) {
    auto g = load_file(std::string(QCONV_SOURCE_DIR) + "/examples/ffn_u4.qg");
    const auto in = random_inputs(*g, 3);
    const auto before = run(*g, in);
    auto rec = run_passes(*g);
    ASSERT_EQ(rec.size(), 2u);
    for (const auto &r : rec) EXPECT_TRUE(r.rewritten) << r.conv << ": " << r.reason;
    auto ops = g->count_ops();
    EXPECT_EQ(ops["Convolution"], 0);
    EXPECT_EQ(ops["MatMul"], 2);
    EXPECT_EQ(ops["Transpose"], 0);
    EXPECT_EQ(g->results()[0]->out_shape, (shape_t{1, 1, 32, 1024}));
    EXPECT_EQ(g->results()[0]->friendly_name, "ffn_output");
    const auto after = run(*g, in);
    ASSERT_EQ(after.size(), 1u);
    double maxabs = 0, maxdiff = 0;
    for (size_t i = 0; i < static_cast<size_t>(after[0].elems()); ++i) {
        maxabs = std::max(maxabs, std::fabs(double(before[0].get(i))));
        maxdiff = std::max(maxdiff, std::fabs(double(before[0].get(i)) - after[0].get(i)));
    }
    EXPECT_GT(maxabs, 1.0);
    EXPECT_LE(maxdiff, 1e-5 * maxabs);
}

} // namespace
