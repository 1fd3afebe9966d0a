// lower_low_precision: per pattern, the lowered graph against the graph run
// as written (the reference executor with FakeQuantize / QDQ semantics), to
// the contract of docs/semantics.md §10:
//  * QDQ patterns with power-of-two scales (every f32 step of the graph exact):
//    bit-exact;
//  * FakeQuantize patterns: at most one output quantization step, on at most
//    kFqFraction of the elements (the graph divides by (ih − il) and
//    multiplies by 255 in f32 where the primitive applies one fused step).
// Each pattern also checks the structure (one QConvolution, the record) and
// that the lowered convolution runs the row "auto" picks for that layer alone.
// CTest runs the suite again under every ISA cap (tests/cmake/graph_lower.cmake).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>

#include <unistd.h>

#include "graph/io/qconv_text.h"
#include "qconv/conv.h"
#include "qconv/graph.h"
#include "qconv/graph_onnx.h"
#include "tests/support/expect_error.h"
#include "tests/support/graph_texts.h"

using namespace qconv::graph;

namespace {

constexpr double kFqFraction = 0.01; // the stated bound (docs/semantics.md §10)

// qdq_channel_scales: a scale and a zero point per channel (a depthwise convolution's source)
enum class act_q { fq_u8, fq_u8_zp, fq_s8, fq_channel, qdq_u8, qdq_i8, qdq_channel, qdq_channel_scales };
enum class wts { mul, mul_zp_u8, dql };
// reader: the ONNX reader's int32 bias, Multiply(Convert(b) − Convert(zp), s) of Constants
enum class bias_k { none, add, dql_i32, reader };
enum class fn { none, relu, prelu, clamp };
enum class out_q { fq_u8, fq_s8, ql_u8, ql_i8, ql_channel };

struct pattern_t {
    std::string name;
    act_q act = act_q::qdq_u8;
    wts w = wts::mul;
    bias_k bias = bias_k::add;
    bool mul_add = false; // per-channel Multiply + Add
    fn f = fn::relu;
    bool residual = false;
    bool requantized = false; // the residual Add reads QuantizeLinear → DequantizeLinear of the chain (ONNX QDQ)
    fn f2 = fn::none;         // after the residual
    out_q out = out_q::ql_u8;
    bool depthwise = false;
    int64_t kernel = 3;
    bool pow2 = true; // power-of-two scales (the graph's f32 chain exact)
};
void PrintTo(const pattern_t &p, std::ostream *os) { *os << p.name; }

bool is_fq(act_q a) { return a == act_q::fq_u8 || a == act_q::fq_u8_zp || a == act_q::fq_s8 || a == act_q::fq_channel; }

constexpr int64_t N = 1, C = 16, H = 9, W = 7, OC = 24;

attributes with_type(dtype t) {
    attributes a;
    a.type = t;
    return a;
}
attributes conv_attrs(int64_t k) {
    attributes a;
    a.pads_begin = {k / 2, k / 2};
    a.pads_end = {k / 2, k / 2};
    return a;
}
attributes axis(int64_t v) {
    attributes a;
    a.axis = v;
    return a;
}

struct built {
    std::unique_ptr<graph> g;
    double out_step = 0; // the output's quantization step
};

std::vector<float> pow2s(int64_t n, int lo, int hi, uint64_t seed) {
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = std::ldexp(1.f, lo + static_cast<int>((i * 7 + seed) % (hi - lo + 1)));
    return v;
}

// Quantized activation of x over C channels with scale s_a (dequantized f32 output).
node *quantize_act(graph &g, node *x, act_q a, float sa, int64_t ch, const std::string &p) {
    if (is_fq(a)) {
        std::vector<float> lo, hi;
        shape_t s{};
        if (a == act_q::fq_channel) {
            s = {1, ch, 1, 1};
            for (int64_t c = 0; c < ch; ++c) {
                const int zp = static_cast<int>((c * 37) % 200) + 20;
                lo.push_back(-zp * sa);
                hi.push_back((255 - zp) * sa);
            }
        } else {
            const int zp = a == act_q::fq_u8 ? 0 : a == act_q::fq_u8_zp ? 10 : 128;
            lo = {-zp * sa};
            hi = {(255 - zp) * sa};
        }
        node *l = g.constant_f32(s, lo, p + "_lo"), *h = g.constant_f32(s, hi, p + "_hi");
        attributes fa;
        fa.levels = 256;
        return g.add(op::FakeQuantize, {x, l, h, l, h}, fa, p + "_fq");
    }
    node *sc = g.constant_f32({}, {sa}, p + "_s");
    node *zp;
    attributes ax = axis(1);
    if (a == act_q::qdq_channel || a == act_q::qdq_channel_scales) {
        std::vector<int64_t> z;
        for (int64_t c = 0; c < ch; ++c) z.push_back((c * 53) % 256);
        zp = g.constant_int(dtype::u8, {ch}, z, p + "_z");
        // one scale (or a power of two per channel), per-channel zero points
        std::vector<float> sv(ch, sa);
        if (a == act_q::qdq_channel_scales)
            for (int64_t c = 0; c < ch; ++c) sv[c] = std::ldexp(sa, static_cast<int>(c % 3) - 1);
        sc = g.constant_f32({ch}, sv, p + "_s");
    } else if (a == act_q::qdq_i8) {
        zp = g.constant_int(dtype::s8, {}, {3}, p + "_z");
    } else {
        zp = g.constant_int(dtype::u8, {}, {128}, p + "_z");
    }
    node *q = g.add(op::QuantizeLinear, {x, sc, zp}, ax, p + "_q");
    return g.add(op::DequantizeLinear, {q, sc, zp}, ax, p + "_dq");
}

built build(const pattern_t &pt) {
    built b;
    b.g = std::make_unique<graph>();
    graph &g = *b.g;
    const int64_t oc = pt.depthwise ? C : OC, icg = pt.depthwise ? 1 : C, k = pt.kernel;
    // Activation scale (x in [-1, 1) covers most of the range); other scales
    // get factors that are not powers of two with pow2 off.
    const float sa = pt.pow2 ? 1.f / 16 : 0.0617f, fw = pt.pow2 ? 1.f : 1.37f, fo = pt.pow2 ? 1.f : 1.11f;
    node *x = g.parameter(dtype::f32, {N, C, H, W}, "x");
    node *xs = g.add(op::Multiply, {x, g.constant_f32({}, {8.f}, "x_gain")}, {}, "x_gain_mul");
    node *a = quantize_act(g, xs, pt.act, sa, C, "a");

    // Weights: i8 (or u8 with a zero point) with per-OC power-of-two scales.
    const shape_t ws = pt.depthwise ? shape_t{oc, 1, 1, k, k} : shape_t{oc, icg, k, k};
    const shape_t ss = pt.depthwise ? shape_t{oc, 1, 1, 1, 1} : shape_t{oc, 1, 1, 1};
    std::vector<int64_t> wv(oc * icg * k * k);
    for (size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<int64_t>((i * 2654435761u) % 33) - 16;
    auto sw = pow2s(oc, -7, -5, 1);
    for (auto &v : sw) v *= fw;
    node *w;
    if (pt.w == wts::dql) {
        node *wq = g.constant_int(dtype::s8, ws, wv, "w");
        w = g.add(op::DequantizeLinear, {wq, g.constant_f32({oc}, sw, "w_s")}, axis(0), "w_dq");
    } else if (pt.w == wts::mul_zp_u8) {
        for (auto &v : wv) v += 100;
        node *wq = g.constant_int(dtype::u8, ws, wv, "w");
        node *cw = g.add(op::Convert, {wq}, with_type(dtype::f32), "w_f");
        node *z = g.add(op::Convert, {g.constant_int(dtype::u8, {}, {100}, "w_zp")}, with_type(dtype::f32), "w_zf");
        node *sub = g.add(op::Subtract, {cw, z}, {}, "w_sub");
        w = g.add(op::Multiply, {sub, g.constant_f32(ss, sw, "w_s")}, {}, "w_deq");
    } else {
        node *wq = g.constant_int(dtype::s8, ws, wv, "w");
        node *cw = g.add(op::Convert, {wq}, with_type(dtype::f32), "w_f");
        w = g.add(op::Multiply, {g.constant_f32(ss, sw, "w_s"), cw}, {}, "w_deq");
    }
    node *t = g.add(pt.depthwise ? op::GroupConvolution : op::Convolution, {a, w}, conv_attrs(k), "conv");
    if (pt.bias == bias_k::add) {
        std::vector<float> bv(oc);
        for (int64_t c = 0; c < oc; ++c) bv[c] = static_cast<float>((c % 9) - 4) * 0.25f;
        t = g.add(op::Add, {t, g.constant_f32({1, oc, 1, 1}, bv, "b")}, {}, "bias");
    } else if (pt.bias == bias_k::dql_i32) {
        std::vector<int64_t> bv(oc);
        for (int64_t c = 0; c < oc; ++c) bv[c] = (c * 131) % 2001 - 1000;
        node *bq = g.constant_int(dtype::s32, {1, oc, 1, 1}, bv, "b");
        node *bd = g.add(op::DequantizeLinear, {bq, g.constant_f32({}, {1.f / 1024}, "b_s")}, {}, "b_dq");
        t = g.add(op::Add, {t, bd}, {}, "bias");
    } else if (pt.bias == bias_k::reader) {
        std::vector<int64_t> bv(oc);
        for (int64_t c = 0; c < oc; ++c) bv[c] = (c * 131) % 2001 - 1000;
        node *bq =
            g.add(op::Convert, {g.constant_int(dtype::s32, {1, oc, 1, 1}, bv, "b")}, with_type(dtype::f32), "b_f32");
        node *bz = g.add(op::Convert, {g.constant_int(dtype::s32, {1, oc, 1, 1}, std::vector<int64_t>(oc, 0), "b_z")},
                         with_type(dtype::f32), "b_zf32");
        node *bc = g.add(op::Subtract, {bq, bz}, {}, "b_centered");
        node *bd = g.add(op::Multiply, {bc, g.constant_f32({}, {1.f / 1024}, "b_s")}, {}, "b_deq");
        t = g.add(op::Add, {t, bd}, {}, "bias");
    }
    if (pt.mul_add) {
        t = g.add(op::Multiply, {t, g.constant_f32({1, oc, 1, 1}, pow2s(oc, -1, 1, 3), "m")}, {}, "chan_mul");
        std::vector<float> av(oc);
        for (int64_t c = 0; c < oc; ++c) av[c] = static_cast<float>(c % 5) * 0.5f - 1.f;
        t = g.add(op::Add, {t, g.constant_f32({1, oc, 1, 1}, av, "ad")}, {}, "chan_add");
    }
    auto act = [&](fn f, const std::string &id) {
        if (f == fn::relu) t = g.add(op::Relu, {t}, {}, id);
        if (f == fn::clamp) {
            attributes ca;
            ca.clamp_min = 0;
            ca.clamp_max = 6;
            t = g.add(op::Clamp, {t}, ca, id);
        }
        if (f == fn::prelu) t = g.add(op::PRelu, {t, g.constant_f32({oc}, pow2s(oc, -3, -1, 5), id + "_sl")}, {}, id);
    };
    act(pt.f, "act");
    if (pt.residual) {
        node *r = g.parameter(dtype::f32, {N, oc, H, W}, "r");
        node *rs = g.add(op::Multiply, {r, g.constant_f32({}, {4.f}, "r_gain")}, {}, "r_gain_mul");
        node *rq = quantize_act(g, rs, is_fq(pt.act) ? act_q::fq_u8_zp : act_q::qdq_u8, 1.f / 32, oc, "res");
        if (pt.requantized) {
            node *s = g.constant_f32({}, {pt.pow2 ? 1.f / 8 : 0.1137f}, "m_s");
            node *z = g.constant_int(dtype::u8, {}, {100}, "m_z");
            node *q = g.add(op::QuantizeLinear, {t, s, z}, axis(1), "m_q");
            t = g.add(op::DequantizeLinear, {q, s, z}, axis(1), "m_dq");
        }
        t = g.add(op::Add, {t, rq}, {}, "residual");
    }
    act(pt.f2, "act2");
    // Output quantization.
    const float so = fo / 8;
    b.out_step = so;
    node *y;
    if (pt.out == out_q::fq_u8 || pt.out == out_q::fq_s8) {
        const int zp = pt.out == out_q::fq_u8 ? 0 : 128;
        node *l = g.constant_f32({}, {-zp * so}, "y_lo"), *h = g.constant_f32({}, {(255 - zp) * so}, "y_hi");
        attributes fa;
        fa.levels = 256;
        y = g.add(op::FakeQuantize, {t, l, h, l, h}, fa, "y_fq");
    } else {
        const bool ch = pt.out == out_q::ql_channel;
        node *s = ch ? g.constant_f32({oc}, std::vector<float>(pow2s(oc, -4, -2, 2)), "y_s")
                     : g.constant_f32({}, {so}, "y_s");
        node *z = pt.out == out_q::ql_i8 ? g.constant_int(dtype::s8, {}, {-5}, "y_z")
                  : ch                   ? g.constant_int(dtype::u8, {oc}, std::vector<int64_t>(oc, 100), "y_z")
                                         : g.constant_int(dtype::u8, {}, {100}, "y_z");
        node *q = g.add(op::QuantizeLinear, {t, s, z}, axis(1), "y_q");
        y = g.add(op::DequantizeLinear, {q, s, z}, axis(1), "y_dq");
        if (ch) b.out_step = 0.25;
    }
    g.add(op::Result, {y}, {}, "out");
    g.infer();
    return b;
}

// The lowered graph's QConvolution node and its implementation line.
const node *qconv_node(const graph &g) {
    for (const auto &n : g.nodes())
        if (n->kind == op::QConvolution) return n.get();
    return nullptr;
}

class GraphLower : public ::testing::TestWithParam<pattern_t> {};

TEST_P(GraphLower, MatchesTheGraphAsWrittenAndTheRowAutoPicks) {
    const pattern_t &pt = GetParam();
    built b = build(pt);
    auto lowered = b.g->clone();
    std::vector<rewrite_record> recs;
    run_passes(*lowered, {}, &recs);
    ASSERT_EQ(recs.size(), 1u);
    EXPECT_TRUE(recs[0].rewritten) << recs[0].reason;
    EXPECT_EQ(recs[0].conv, "conv");
    const node *q = qconv_node(*lowered);
    ASSERT_NE(q, nullptr) << to_text(*lowered);
    EXPECT_EQ(lowered->count_ops()["Convolution"] + lowered->count_ops()["GroupConvolution"], 0);
    // The text form keeps the node.
    EXPECT_EQ(to_text(*parse(to_text(*lowered))), to_text(*lowered));

    const auto inputs = random_inputs(*b.g, 7);
    compiled_graph before(*b.g), after(*lowered);
    const auto yb = before.run(inputs), ya = after.run(inputs);
    ASSERT_EQ(yb.size(), 1u);
    ASSERT_EQ(ya.size(), 1u);
    ASSERT_EQ(yb[0].shape, ya[0].shape);
    const auto vb = yb[0].values(), va = ya[0].values();
    // differ: another quantization level; ulp: the same level, its f32 value
    // one ulp apart (the top level of a FakeQuantize, §10).
    int64_t differ = 0, ulp = 0;
    double max_diff = 0;
    for (size_t i = 0; i < vb.size(); ++i) {
        const double d = std::fabs(va[i] - vb[i]);
        const bool level = d > b.out_step / 2;
        differ += level;
        ulp += d != 0 && !level;
        if (!level) {
            EXPECT_LE(d, std::ldexp(std::fabs(vb[i]), -22)) << i;
        }
        max_diff = std::max(max_diff, d);
    }
    const double fraction = double(differ) / double(vb.size());
    std::string impl;
    for (const auto &[id, im] : after.impls())
        if (id == q->id) impl = im;
    std::printf("[ pattern  ] %s: %lld of %zu elements on another level (%.4f%%), %lld one ulp apart, max |diff| "
                "%.6g (step %.6g); %s\n",
                pt.name.c_str(), static_cast<long long>(differ), vb.size(), 100 * fraction, static_cast<long long>(ulp),
                max_diff, b.out_step, impl.c_str());
    if (pt.pow2 && !is_fq(pt.act) && pt.out != out_q::fq_u8 && pt.out != out_q::fq_s8) {
        EXPECT_EQ(differ + ulp, 0) << "QDQ with power-of-two scales is bit-exact";
    } else {
        EXPECT_LE(max_diff, b.out_step * (1 + 1e-6));
        EXPECT_LE(fraction, kFqFraction);
    }
    // Not all outputs saturate or vanish: the test sees real values.
    int64_t distinct = 0;
    for (size_t i = 1; i < vb.size(); ++i) distinct += vb[i] != vb[0];
    EXPECT_GT(distinct, static_cast<int64_t>(vb.size() / 4));

    // The row: the one "auto" picks for this layer alone.
    const detail::qconv_spec &sp = *q->attr.qconv;
    const node *wn = q->inputs[1];
    const qconv::convolution alone(sp.p, reinterpret_cast<const int8_t *>(wn->data->bytes.data()),
                                   sp.p.with_bias ? sp.bias.data() : nullptr);
    EXPECT_EQ(impl.rfind("qconv:" + alone.impl_name() + " attr[" + std::to_string(alone.attr_id()) + "]", 0), 0u)
        << impl << " vs " << alone.impl_name();
    // A residual of int8 integers (QDQ here) of the destination's type is a
    // sum post-op over them; an f32 one (a FakeQuantize of a Parameter) add:full.
    if (pt.residual) {
        EXPECT_EQ(sp.sum, !is_fq(pt.act)) << detail::qconv_text(sp);
    }
    // The zero point mechanism follows the activation's quantization.
    const bool per_channel =
        pt.act == act_q::fq_channel || pt.act == act_q::qdq_channel || pt.act == act_q::qdq_channel_scales;
    EXPECT_EQ(sp.p.src_zp.effective_kind() == qconv::zero_point::kind::per_channel, per_channel);
}

pattern_t P(std::string name, std::function<void(pattern_t &)> f) {
    pattern_t p;
    p.name = std::move(name);
    f(p);
    return p;
}

INSTANTIATE_TEST_SUITE_P(
    Patterns, GraphLower,
    ::testing::Values(
        P("qdq_u8_base", [](pattern_t &) {}), P("qdq_i8_src", [](pattern_t &p) { p.act = act_q::qdq_i8; }),
        P("qdq_channel_zp", [](pattern_t &p) { p.act = act_q::qdq_channel; }),
        P("qdq_no_bias", [](pattern_t &p) { p.bias = bias_k::none; }),
        P("qdq_bias_i32", [](pattern_t &p) { p.bias = bias_k::dql_i32; }),
        P("qdq_bias_onnx_reader", [](pattern_t &p) { p.bias = bias_k::reader; }),
        P("qdq_requantized_residual_relu",
          [](pattern_t &p) {
              p.bias = bias_k::reader;
              p.f = fn::none;
              p.residual = p.requantized = true;
              p.f2 = fn::relu;
          }),
        P("qdq_requantized_residual_any_scales",
          [](pattern_t &p) {
              p.f = fn::none;
              p.residual = p.requantized = true;
              p.pow2 = false;
          }),
        P("qdq_depthwise_channel_scales",
          [](pattern_t &p) {
              p.depthwise = true;
              p.act = act_q::qdq_channel_scales;
              p.bias = bias_k::reader;
          }),
        P("qdq_weights_dql", [](pattern_t &p) { p.w = wts::dql; }),
        P("qdq_weights_u8_zp", [](pattern_t &p) { p.w = wts::mul_zp_u8; }),
        P("qdq_mul_add", [](pattern_t &p) { p.mul_add = true; }), P("qdq_no_act", [](pattern_t &p) { p.f = fn::none; }),
        P("qdq_prelu", [](pattern_t &p) { p.f = fn::prelu; }), P("qdq_clamp", [](pattern_t &p) { p.f = fn::clamp; }),
        P("qdq_residual_relu",
          [](pattern_t &p) {
              p.f = fn::none;
              p.residual = true;
              p.f2 = fn::relu;
          }),
        P("qdq_out_i8", [](pattern_t &p) { p.out = out_q::ql_i8; }),
        P("qdq_out_channel", [](pattern_t &p) { p.out = out_q::ql_channel; }),
        P("qdq_depthwise",
          [](pattern_t &p) {
              p.depthwise = true;
              p.act = act_q::qdq_channel;
          }),
        P("qdq_1x1", [](pattern_t &p) { p.kernel = 1; }),
        P("qdq_any_scales",
          [](pattern_t &p) {
              p.pow2 = false;
              p.mul_add = true;
          }),
        P("qdq_any_scales_residual",
          [](pattern_t &p) {
              p.pow2 = false;
              p.residual = true;
          }),
        P("fq_any_ranges",
          [](pattern_t &p) {
              p.act = act_q::fq_u8_zp, p.out = out_q::fq_u8;
              p.pow2 = false;
          }),
        P("fq_any_ranges_channel",
          [](pattern_t &p) {
              p.act = act_q::fq_channel, p.out = out_q::fq_s8;
              p.pow2 = false, p.f = fn::prelu;
          }),
        P("fq_u8", [](pattern_t &p) { p.act = act_q::fq_u8, p.out = out_q::fq_u8; }),
        P("fq_u8_zp", [](pattern_t &p) { p.act = act_q::fq_u8_zp, p.out = out_q::fq_u8; }),
        P("fq_s8_src_s8_dst", [](pattern_t &p) { p.act = act_q::fq_s8, p.out = out_q::fq_s8, p.f = fn::none; }),
        P("fq_channel_zp", [](pattern_t &p) { p.act = act_q::fq_channel, p.out = out_q::fq_u8; }),
        P("fq_mul_add_prelu",
          [](pattern_t &p) {
              p.act = act_q::fq_u8_zp, p.out = out_q::fq_s8;
              p.mul_add = true, p.f = fn::prelu;
          }),
        P("fq_residual",
          [](pattern_t &p) {
              p.act = act_q::fq_u8, p.out = out_q::fq_u8;
              p.residual = true, p.f2 = fn::relu;
          }),
        P("fq_depthwise_channel_zp",
          [](pattern_t &p) {
              p.act = act_q::fq_channel, p.out = out_q::fq_u8;
              p.depthwise = true, p.bias = bias_k::none;
          })),
    [](const ::testing::TestParamInfo<pattern_t> &i) { return i.param.name; });

// ------------------------------------------------------------- negatives
std::vector<rewrite_record> lower_of(graph &g) {
    std::vector<rewrite_record> r;
    run_passes(g, {}, &r);
    return r;
}

TEST(GraphLowerNot, PerChannelActivationScalesThatDifferStayF32) {
    pattern_t p;
    p.act = act_q::fq_channel;
    p.out = out_q::fq_u8;
    built b = build(p);
    // Give channel 0 another scale: no single source scale exists.
    node *hi = b.g->find("a_hi");
    std::vector<float> v;
    for (int64_t c = 0; c < C; ++c) v.push_back(static_cast<float>(hi->value(c)) * (c == 0 ? 2.f : 1.f));
    node *h2 = b.g->constant_f32({1, C, 1, 1}, v, "a_hi2");
    node *fq = b.g->find("a_fq");
    fq->inputs[2] = h2;
    fq->inputs[4] = h2;
    b.g->infer();
    auto g2 = b.g->clone();
    const auto r = lower_of(*g2);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_FALSE(r[0].rewritten);
    EXPECT_NE(r[0].reason.find("per-channel activation scales differ"), std::string::npos) << r[0].reason;
    EXPECT_EQ(qconv_node(*g2), nullptr);
    // ... and runs as written.
    const auto in = random_inputs(*b.g, 3);
    EXPECT_EQ(compiled_graph(*b.g).run(in)[0].values(), compiled_graph(*g2).run(in)[0].values());
}

TEST(GraphLowerNot, UnquantizedOutputAndSharedIntermediateStayF32) {
    {
        pattern_t p;
        built b = build(p);
        // The Relu's output read twice: the chain cannot be absorbed.
        node *relu = b.g->find("act");
        b.g->add(op::Result, {relu}, {}, "extra");
        b.g->infer();
        const auto r = lower_of(*b.g);
        ASSERT_EQ(r.size(), 1u);
        EXPECT_FALSE(r[0].rewritten);
        EXPECT_NE(r[0].reason.find("read by 2 nodes"), std::string::npos) << r[0].reason;
    }
    {
        // An activation that is not quantized.
        graph g;
        node *x = g.parameter(dtype::f32, {1, 4, 5, 5}, "x");
        node *w = g.constant_f32({4, 4, 1, 1}, std::vector<float>(16, 0.5f), "w");
        node *c = g.add(op::Convolution, {x, w}, conv_attrs(1), "conv");
        g.add(op::Result, {c}, {}, "out");
        g.infer();
        const auto r = lower_of(g);
        ASSERT_EQ(r.size(), 1u);
        EXPECT_FALSE(r[0].rewritten);
        EXPECT_EQ(r[0].reason, "activation is not quantized (Parameter)");
    }
}

// Two lowered convolutions in a row: the second reads the first's integers
// (NHWC, no dequantize/quantize between them).
TEST(GraphLower, ChainOfTwoStaysInt8) {
    const auto q = parse(qconv::test::int8_conv_head("1,8,6,6") + R"(r1   = Relu(c1)
y1q  = QuantizeLinear(r1, s, z)
y1d  = DequantizeLinear(y1q, s, z)
w2   = Constant i8[4,8,1,1] random(2, -20, 20)
w2s  = Constant f32[4] [0.0078125,0.0078125,0.015625,0.015625]
w2d  = DequantizeLinear(w2, w2s) axis=0
c2   = Convolution(y1d, w2d) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
y2q  = QuantizeLinear(c2, s, z)
y2d  = DequantizeLinear(y2q, s, z)
out  = Result(y2d)
)");
    auto l = q->clone();
    std::vector<rewrite_record> r;
    run_passes(*l, {}, &r);
    ASSERT_EQ(r.size(), 2u);
    EXPECT_TRUE(r[0].rewritten && r[1].rewritten) << r[0].reason << " / " << r[1].reason;
    int qc = 0;
    for (const auto &n : l->nodes())
        if (n->kind == op::QConvolution) {
            ++qc;
            if (n->id == "c2_int8") {
                EXPECT_EQ(n->inputs[0]->id, "c1_int8");
            }
        }
    EXPECT_EQ(qc, 2);
    const auto in = random_inputs(*q, 11);
    EXPECT_EQ(compiled_graph(*q).run(in)[0].values(), compiled_graph(*l).run(in)[0].values());
}

// MaxPool and Concat between lowered convolutions run on the integers:
// FakeQuantize form (the requantizing FakeQuantize has the producer's
// bounds) and QDQ form (the same scale and zero point). Same values as the
// graph as written.
TEST(GraphLower, MaxPoolAndConcatStayInt8) {
    for (const bool fq : {true, false}) {
        SCOPED_TRACE(fq ? "FakeQuantize" : "QDQ");
        std::string text = R"(
x    = Parameter f32[1,8,8,8]
lo   = Constant f32[] [0]
hi   = Constant f32[] [15.9375]
s    = Constant f32[] [0.0625]
z    = Constant u8[] [0]
w1   = Constant i8[8,8,3,3] random(1, -20, 20)
w1s  = Constant f32[8] [0.0078125,0.015625,0.0078125,0.015625,0.0078125,0.015625,0.0078125,0.015625]
w1d  = DequantizeLinear(w1, w1s) axis=0
w2   = Constant i8[8,8,1,1] random(2, -20, 20)
w2d  = DequantizeLinear(w2, w1s) axis=0
w3   = Constant i8[4,16,1,1] random(3, -20, 20)
w3s  = Constant f32[4] [0.0078125,0.0078125,0.015625,0.015625]
w3d  = DequantizeLinear(w3, w3s) axis=0
)";
        if (fq)
            text += R"(
xa   = FakeQuantize(x, lo, hi, lo, hi) levels=256
c1   = Convolution(xa, w1d) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
r1   = Relu(c1)
y1   = FakeQuantize(r1, lo, hi, lo, hi) levels=256
mp   = MaxPool(y1) kernel=[2,2] strides=[2,2] pads_begin=[0,0] pads_end=[0,0]
mpq  = FakeQuantize(mp, lo, hi, lo, hi) levels=256
c2   = Convolution(mpq, w2d) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
r2   = Relu(c2)
y2   = FakeQuantize(r2, lo, hi, lo, hi) levels=256
cat  = Concat(mp, y2) axis=1
catq = FakeQuantize(cat, lo, hi, lo, hi) levels=256
c3   = Convolution(catq, w3d) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
y3   = FakeQuantize(c3, lo, hi, lo, hi) levels=256
out  = Result(y3)
)";
        else
            text += R"(
xq   = QuantizeLinear(x, s, z)
xa   = DequantizeLinear(xq, s, z)
c1   = Convolution(xa, w1d) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
r1   = Relu(c1)
y1q  = QuantizeLinear(r1, s, z)
y1   = DequantizeLinear(y1q, s, z)
mp   = MaxPool(y1) kernel=[2,2] strides=[2,2] pads_begin=[0,0] pads_end=[0,0]
mpq  = QuantizeLinear(mp, s, z)
mpd  = DequantizeLinear(mpq, s, z)
c2   = Convolution(mpd, w2d) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
r2   = Relu(c2)
y2q  = QuantizeLinear(r2, s, z)
y2   = DequantizeLinear(y2q, s, z)
cat  = Concat(mp, y2) axis=1
catq = QuantizeLinear(cat, s, z)
catd = DequantizeLinear(catq, s, z)
c3   = Convolution(catd, w3d) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
y3q  = QuantizeLinear(c3, s, z)
y3   = DequantizeLinear(y3q, s, z)
out  = Result(y3)
)";
        const auto g = parse(text);
        auto l = g->clone();
        std::vector<rewrite_record> r;
        run_passes(*l, {}, &r);
        ASSERT_EQ(r.size(), 3u);
        for (const auto &x : r) EXPECT_TRUE(x.rewritten) << x.conv << ": " << x.reason;
        // c2 reads MaxPool(u8), c3 reads Concat(u8): no f32 between them.
        const node *c2 = l->find("c2_int8"), *c3 = l->find("c3_int8");
        ASSERT_TRUE(c2 && c3) << to_text(*l);
        EXPECT_EQ(c2->inputs[0]->kind, op::MaxPool);
        EXPECT_EQ(c2->inputs[0]->out_type, dtype::u8);
        EXPECT_EQ(c2->inputs[0]->inputs[0]->id, "c1_int8");
        EXPECT_EQ(c3->inputs[0]->kind, op::Concat);
        EXPECT_EQ(c3->inputs[0]->out_type, dtype::u8);
        EXPECT_EQ(c3->inputs[0]->inputs[1]->id, "c2_int8");
        const auto in = random_inputs(*g, 5);
        const auto vb = compiled_graph(*g).run(in)[0].values(), va = compiled_graph(*l).run(in)[0].values();
        EXPECT_EQ(vb, va);
        int64_t nonzero = 0;
        for (double v : vb) nonzero += v != 0;
        EXPECT_GT(nonzero, static_cast<int64_t>(vb.size() / 4));
    }
}

// The per-channel zero point's network form (scripts/make_models.py,
// resnet50_qdq_zp): a convolution's output quantized before its Relu along
// axis 1 with one scale and a zero point per channel, the Relu quantized again
// with the same parameters, then a MaxPool and the same pair: c1 takes the
// Relu as its activation before the quantization (no f32 Relu left), the
// MaxPool runs on its integers, c2 reads them with the legacy per-channel zero
// point. Powers of two keep the graph as written exact: the same values.
TEST(GraphLower, RequantizedReluAndPerChannelZeroPointPoolStayInt8) {
    const auto g = parse(qconv::test::int8_conv_head("1,8,8,8") +
                         R"(ps   = Constant f32[8] [0.125,0.125,0.125,0.125,0.125,0.125,0.125,0.125]
pz   = Constant u8[8] [100,3,250,128,0,77,200,31]
aq   = QuantizeLinear(c1, ps, pz) axis=1
ad   = DequantizeLinear(aq, ps, pz) axis=1
r1   = Relu(ad)
rq   = QuantizeLinear(r1, ps, pz) axis=1
rd   = DequantizeLinear(rq, ps, pz) axis=1
mp   = MaxPool(rd) kernel=[3,3] strides=[2,2] pads_begin=[1,1] pads_end=[1,1]
mq   = QuantizeLinear(mp, ps, pz) axis=1
md   = DequantizeLinear(mq, ps, pz) axis=1
w2   = Constant i8[4,8,3,3] random(2, -20, 20)
w2s  = Constant f32[4] [0.0078125,0.0078125,0.015625,0.015625]
w2d  = DequantizeLinear(w2, w2s) axis=0
c2   = Convolution(md, w2d) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
yq   = QuantizeLinear(c2, s, z)
yd   = DequantizeLinear(yq, s, z)
out  = Result(yd)
)");
    auto l = g->clone();
    std::vector<rewrite_record> r;
    run_passes(*l, {}, &r);
    ASSERT_EQ(r.size(), 2u);
    for (const auto &x : r) EXPECT_TRUE(x.rewritten) << x.conv << ": " << x.reason;
    EXPECT_NE(r[0].reason.find("requantized Relu"), std::string::npos) << r[0].reason;
    EXPECT_NE(r[1].reason.find("zp=per_channel"), std::string::npos) << r[1].reason;
    const node *c2 = l->find("c2_int8");
    ASSERT_TRUE(c2) << to_text(*l);
    EXPECT_EQ(c2->inputs[0]->kind, op::MaxPool);
    EXPECT_EQ(c2->inputs[0]->out_type, dtype::u8);
    EXPECT_EQ(c2->inputs[0]->inputs[0]->id, "c1_int8");
    for (const auto &n : l->nodes()) EXPECT_NE(n->kind, op::Relu) << n->id;
    for (uint64_t seed : {5, 6}) {
        const auto in = random_inputs(*g, seed);
        const auto vb = compiled_graph(*g).run(in)[0].values(), va = compiled_graph(*l).run(in)[0].values();
        EXPECT_EQ(vb, va);
        std::set<double> distinct(vb.begin(), vb.end());
        EXPECT_GT(distinct.size(), 20u);
    }
}

// Per-channel activation scales (no single source scale): the convolution
// reading them stays f32, an island between int8 convolutions. The MaxPool
// runs on the lowered convolution's integers, the f32 convolution takes its
// bias Add as the primitive's bias, and the island stays NHWC (DequantizeLinear
// → convolution → Relu → a hard-swish-like chain of scalar and same-shape
// elementwise ops → QuantizeLinear, no transposes; a per-channel Constant
// operand makes its op plain). The same values as
// the graph as written (exact powers of two) and as the island in plain
// layout (QCONV_GRAPH_F32_NHWC=0).
TEST(GraphLower, PerChannelScaleIslandRunsNhwcWithItsBias) {
    for (const bool per_channel_op : {false, true}) {
        SCOPED_TRACE(per_channel_op ? "a per-channel Multiply in the chain" : "layout-free chain");
        const std::string tail = per_channel_op ? "pc   = Constant f32[1,16,1,1] random(5, 1, 2)\n"
                                                  "hp   = Multiply(hx, pc)\n"
                                                  "q2   = QuantizeLinear(hp, s, z)\n"
                                                : "q2   = QuantizeLinear(hx, s, z)\n";
        const auto g = parse(qconv::test::int8_conv_head("1,8,8,8") +
                             R"(ps   = Constant f32[8] [0.125,0.25,0.0625,0.125,0.5,0.25,0.125,0.0625]
pz   = Constant u8[8] [100,3,250,128,0,77,200,31]
aq   = QuantizeLinear(c1, ps, pz) axis=1
ad   = DequantizeLinear(aq, ps, pz) axis=1
mp   = MaxPool(ad) kernel=[2,2] strides=[2,2] pads_begin=[0,0] pads_end=[0,0]
mq   = QuantizeLinear(mp, ps, pz) axis=1
md   = DequantizeLinear(mq, ps, pz) axis=1
w2   = Constant f32[16,8,3,3] random(2, -4, 4)
c2   = Convolution(md, w2) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
b2   = Constant f32[1,16,1,1] random(3, -8, 8)
a2   = Add(c2, b2)
r2   = Relu(a2)
k1   = Constant f32[] [0.25]
k2   = Constant f32[] [0.5]
hm   = Multiply(r2, k1)
ha   = Add(hm, k2)
hc   = Clamp(ha) min=0 max=4
hx   = Multiply(r2, hc)
)" + tail + R"(
d2   = DequantizeLinear(q2, s, z)
w3   = Constant i8[4,16,1,1] random(4, -20, 20)
w3s  = Constant f32[4] [0.0078125,0.0078125,0.015625,0.015625]
w3d  = DequantizeLinear(w3, w3s) axis=0
c3   = Convolution(d2, w3d) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
yq   = QuantizeLinear(c3, s, z)
yd   = DequantizeLinear(yq, s, z)
out  = Result(yd)
)");
        auto l = g->clone();
        std::vector<rewrite_record> r;
        run_passes(*l, {}, &r);
        ASSERT_EQ(r.size(), 3u);
        EXPECT_TRUE(r[0].rewritten && !r[1].rewritten && r[2].rewritten)
            << r[0].reason << " / " << r[1].reason << " / " << r[2].reason;
        const node *c2 = l->find("c2");
        ASSERT_TRUE(c2) << to_text(*l);
        EXPECT_EQ(c2->inputs[0]->kind, op::DequantizeLinear);
        EXPECT_EQ(c2->inputs[0]->inputs[0]->kind, op::MaxPool);
        EXPECT_EQ(c2->inputs[0]->inputs[0]->out_type, dtype::u8);
        const compiled_graph island(*l);
        std::map<std::string, std::string> impl;
        for (const auto &[id, text] : island.impls()) impl[id] = text;
        EXPECT_NE(impl["c2"].find("+bias"), std::string::npos) << impl["c2"];
        EXPECT_EQ(impl["a2"], "fused into c2");
        EXPECT_NE(impl[c2->inputs[0]->id].find("(f32 NHWC)"), std::string::npos) << impl[c2->inputs[0]->id];
        // Elementwise ops keep NHWC up to the QuantizeLinear: scalar,
        // same-shape and per-channel Constant operands alike (the executor
        // maps a per-channel operand onto the NHWC channel); those that only
        // each other read run as one elementwise region in their last one's step.
        auto step_of = [&](const std::string &id) {
            const std::string &t = impl[id];
            return t.rfind("fused into ", 0) == 0 ? impl[t.substr(11)] : t;
        };
        for (const char *id : {"c2", "r2", "hm", "ha", "hc", "hx"})
            EXPECT_NE(step_of(id).find("(f32 NHWC)"), std::string::npos) << id << ": " << step_of(id);
        setenv("QCONV_GRAPH_F32_NHWC", "0", 1);
        const compiled_graph plain(*l);
        unsetenv("QCONV_GRAPH_F32_NHWC");
        for (const auto &[id, text] : plain.impls())
            EXPECT_EQ(text.find("NHWC"), std::string::npos) << id << ": " << text;
        for (uint64_t seed : {7, 8}) {
            const auto in = random_inputs(*g, seed);
            const auto vb = compiled_graph(*g).run(in)[0].values();
            EXPECT_EQ(island.run(in)[0].values(), vb);
            EXPECT_EQ(plain.run(in)[0].values(), vb);
            std::set<double> distinct(vb.begin(), vb.end());
            EXPECT_GT(distinct.size(), 20u);
        }
    }
}

// A Concat of QDQ values whose scales and zero points differ, requantized as
// a whole: the Concat runs on the integers, each input whose quantization is
// not the requantization's requantized on its own slice (the same two ops as
// the graph's, elementwise); the same values as the graph as written.
TEST(GraphLower, ConcatRequantizesOnlyTheInputsWhoseScalesDiffer) {
    const auto g = parse(R"(
x    = Parameter f32[1,8,6,6]
s    = Constant f32[] [0.0625]
s2   = Constant f32[] [0.1]
so   = Constant f32[] [0.075]
z    = Constant u8[] [0]
z2   = Constant u8[] [3]
w1   = Constant i8[8,8,1,1] random(1, -20, 20)
w1s  = Constant f32[8] [0.0078125,0.015625,0.0078125,0.015625,0.0078125,0.015625,0.0078125,0.015625]
w1d  = DequantizeLinear(w1, w1s) axis=0
w2   = Constant i8[8,8,1,1] random(2, -20, 20)
w2d  = DequantizeLinear(w2, w1s) axis=0
w3   = Constant i8[4,24,1,1] random(3, -20, 20)
w3s  = Constant f32[4] [0.0078125,0.0078125,0.015625,0.015625]
w3d  = DequantizeLinear(w3, w3s) axis=0
xq   = QuantizeLinear(x, s, z)
xa   = DequantizeLinear(xq, s, z)
c1   = Convolution(xa, w1d) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
r1   = Relu(c1)
y1q  = QuantizeLinear(r1, s, z)
y1   = DequantizeLinear(y1q, s, z)
c2   = Convolution(xa, w2d) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
y2q  = QuantizeLinear(c2, s2, z2)
y2   = DequantizeLinear(y2q, s2, z2)
c4   = Convolution(xa, w1d) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
y3q  = QuantizeLinear(c4, so, z2)
y3   = DequantizeLinear(y3q, so, z2)
cat  = Concat(y1, y2, y3) axis=1
catq = QuantizeLinear(cat, so, z2)
catd = DequantizeLinear(catq, so, z2)
c3   = Convolution(catd, w3d) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
o3q  = QuantizeLinear(c3, s, z)
o3   = DequantizeLinear(o3q, s, z)
out  = Result(o3)
)");
    auto l = g->clone();
    std::vector<rewrite_record> r;
    run_passes(*l, {}, &r);
    for (const auto &x : r) EXPECT_TRUE(x.rewritten) << x.conv << ": " << x.reason;
    const node *c3 = l->find("c3_int8");
    ASSERT_TRUE(c3) << to_text(*l);
    const node *cat = c3->inputs[0];
    ASSERT_EQ(cat->kind, op::Concat) << to_text(*l);
    EXPECT_EQ(cat->out_type, dtype::u8);
    ASSERT_EQ(cat->inputs.size(), 3u);
    // y1 (0.0625, 0) and y2 (0.1, 3) are requantized to (0.075, 3) — each
    // requantization a table of 256 (tabulate_qdq_islands); y3 has it.
    EXPECT_EQ(cat->inputs[0]->kind, op::LookupTable);
    EXPECT_EQ(cat->inputs[1]->kind, op::LookupTable);
    EXPECT_EQ(cat->inputs[2]->id, "c4_int8");
    for (int seed : {5, 6}) {
        const auto in = random_inputs(*g, seed);
        const auto vb = compiled_graph(*g).run(in)[0].values(), va = compiled_graph(*l).run(in)[0].values();
        EXPECT_EQ(vb, va);
        int64_t nonzero = 0;
        for (double v : vb) nonzero += v != 0;
        EXPECT_GT(nonzero, static_cast<int64_t>(vb.size() / 4));
    }
}

// A MobileNet v2 block: the expanding 1x1 and the 3x3 depthwise after it
// (both quantized, the intermediate u8 with zero point 0) become one
// QConvolution with the fused dw item; stride 1 and 2; equal to the graph as
// written (power-of-two scales).
TEST(GraphLower, OneByOneThenDepthwiseIsTheFusedDwItem) {
    for (const int stride : {1, 2}) {
        SCOPED_TRACE("stride " + std::to_string(stride));
        const std::string st = std::to_string(stride);
        const auto g = parse(R"(
x    = Parameter f32[1,16,10,10]
s    = Constant f32[] [0.0625]
z    = Constant u8[] [128]
z0   = Constant u8[] [0]
xq   = QuantizeLinear(x, s, z)
xd   = DequantizeLinear(xq, s, z)
w1   = Constant i8[48,16,1,1] random(1, -30, 30)
w1s  = Constant f32[48] pow2(2, -9, -8)
w1d  = DequantizeLinear(w1, w1s) axis=0
c1   = Convolution(xd, w1d) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
b1   = Constant f32[1,48,1,1] random(3, -1, 1)
c1b  = Add(c1, b1)
r1   = Clamp(c1b) min=0 max=6
y1q  = QuantizeLinear(r1, s, z0)
y1   = DequantizeLinear(y1q, s, z0)
w2   = Constant i8[48,1,1,3,3] random(4, -60, 60)
w2s  = Constant f32[48,1,1,1,1] pow2(5, -7, -6)
w2c  = Convert(w2) to=f32
w2d  = Multiply(w2c, w2s)
c2   = GroupConvolution(y1, w2d) strides=[)" +
                             st + "," + st + R"(] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
r2   = Clamp(c2) min=0 max=6
y2q  = QuantizeLinear(r2, s, z0)
y2   = DequantizeLinear(y2q, s, z0)
w3   = Constant i8[16,48,1,1] random(6, -30, 30)
w3s  = Constant f32[16] pow2(7, -9, -8)
w3d  = DequantizeLinear(w3, w3s) axis=0
c3   = Convolution(y2, w3d) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
y3q  = QuantizeLinear(c3, s, z)
y3   = DequantizeLinear(y3q, s, z)
out  = Result(y3)
)");
        auto l = g->clone();
        std::vector<rewrite_record> r;
        run_passes(*l, {}, &r);
        ASSERT_EQ(r.size(), 3u);
        for (const auto &x : r) EXPECT_TRUE(x.rewritten) << x.conv << ": " << x.reason;
        EXPECT_NE(r[0].reason.find("fused dw item (c2)"), std::string::npos) << r[0].reason;
        EXPECT_NE(r[1].reason.find("fused into c1 as its dw item"), std::string::npos) << r[1].reason;
        int qc = 0;
        const node *fused = nullptr;
        for (const auto &n : l->nodes())
            if (n->kind == op::QConvolution) {
                ++qc;
                if (detail::qconv_text(*n->attr.qconv).find(";dw:") != std::string::npos) fused = n.get();
            }
        EXPECT_EQ(qc, 2) << to_text(*l);
        ASSERT_NE(fused, nullptr) << to_text(*l);
        const int64_t o = stride == 1 ? 10 : 5;
        EXPECT_EQ(fused->out_shape, (shape_t{1, 48, o, o}));
        const auto in = random_inputs(*g, 9);
        compiled_graph after(*l);
        const auto vb = compiled_graph(*g).run(in)[0].values(), va = after.run(in)[0].values();
        EXPECT_EQ(vb, va);
        for (const auto &[id, im] : after.impls())
            if (id == fused->id) std::printf("[ dw fused ] stride %d: %s\n", stride, im.c_str());
        // The same row as the fused problem alone.
        const detail::qconv_spec &sp = *fused->attr.qconv;
        const qconv::convolution alone(sp.p, reinterpret_cast<const int8_t *>(fused->inputs[1]->data->bytes.data()),
                                       sp.p.with_bias ? sp.bias.data() : nullptr);
        for (const auto &[id, im] : after.impls())
            if (id == fused->id) {
                EXPECT_EQ(im.rfind("qconv:" + alone.impl_name() + " ", 0), 0u) << im;
            }
    }
}

// A Gemm (MatMul with transpose_b) with i8 weights and a quantized
// activation runs as a 1x1 convolution: QDQ form with an i32 bias, and
// FakeQuantize form with a Multiply-dequantized weight and an f32 bias.
TEST(GraphLower, GemmWithI8WeightsIsA1x1Convolution) {
    for (const bool fq : {false, true}) {
        SCOPED_TRACE(fq ? "FakeQuantize" : "QDQ");
        std::string text = R"(
x    = Parameter f32[4,64]
s    = Constant f32[] [0.0625]
z    = Constant u8[] [128]
lo   = Constant f32[] [-8]
hi   = Constant f32[] [7.9375]
w    = Constant i8[10,64] random(1, -60, 60)
)";
        text += fq ? R"(
xa   = FakeQuantize(x, lo, hi, lo, hi) levels=256
wc   = Convert(w) to=f32
ws   = Constant f32[10,1] pow2(2, -8, -7)
wd   = Multiply(wc, ws)
mm   = MatMul(xa, wd) transpose_b=true
b    = Constant f32[10] random(3, -2, 2)
mb   = Add(mm, b)
y    = FakeQuantize(mb, lo, hi, lo, hi) levels=256
out  = Result(y)
)"
                   : R"(
xq   = QuantizeLinear(x, s, z)
xa   = DequantizeLinear(xq, s, z)
ws   = Constant f32[10] pow2(2, -8, -7)
wd   = DequantizeLinear(w, ws) axis=0
mm   = MatMul(xa, wd) transpose_b=true
b    = Constant i32[10] random(3, -500, 500)
bs   = Constant f32[] [0.0009765625]
bd   = DequantizeLinear(b, bs)
mb   = Add(mm, bd)
yq   = QuantizeLinear(mb, s, z)
y    = DequantizeLinear(yq, s, z)
out  = Result(y)
)";
        const auto g = parse(text);
        auto l = g->clone();
        std::vector<rewrite_record> r;
        run_passes(*l, {}, &r);
        ASSERT_EQ(r.size(), 1u);
        EXPECT_EQ(r[0].conv, "mm");
        EXPECT_TRUE(r[0].rewritten) << r[0].reason;
        const node *q = qconv_node(*l);
        ASSERT_NE(q, nullptr) << to_text(*l);
        const std::string spec_text = detail::qconv_text(*q->attr.qconv);
        EXPECT_NE(spec_text.find("desc=g1mb4ic64ih1iw1oc10oh1ow1kh1kw1"), std::string::npos) << spec_text;
        EXPECT_EQ(l->count_ops()["MatMul"], 0);
        const auto in = random_inputs(*g, 13);
        const auto vb = compiled_graph(*g).run(in)[0].values(), va = compiled_graph(*l).run(in)[0].values();
        EXPECT_EQ(vb, va);
        int64_t distinct = 0;
        for (double v : vb) distinct += v != vb[0];
        EXPECT_GT(distinct, 20);
    }
}

// The same Gemm with its weights [K, N] (transB = 0, as Paddle and ORT's
// quantizer write a classifier): matmul_weights_to_nk transposes the
// quantized weights to [N, K] (DequantizeLinear axis 1 per N, or the
// reader's Multiply form with [1, N] scale and zero point, or per tensor), the
// lowering then takes it; bit-identical to the graph as written (power-of-two
// scales). Weights with a scale per K are left as written.
TEST(GraphLower, GemmWithKnWeightsIsTransposedThenLowered) {
    const std::string head = R"(
x    = Parameter f32[3,64]
s    = Constant f32[] [0.0625]
z    = Constant u8[] [128]
xq   = QuantizeLinear(x, s, z)
xa   = DequantizeLinear(xq, s, z)
w    = Constant i8[64,10] random(1, -60, 60)
)";
    const std::string tail = R"(
mm   = MatMul(xa, wd)
b    = Constant f32[10] random(3, -2, 2)
mb   = Add(mm, b)
yq   = QuantizeLinear(mb, s, z)
y    = DequantizeLinear(yq, s, z)
out  = Result(y)
)";
    const std::pair<const char *, std::string> forms[] = {
        {"per N", "ws = Constant f32[10] pow2(2, -8, -7)\nwz = Constant i8[10] fill(0)\nwd = DequantizeLinear(w, ws, "
                  "wz) axis=1\n"},
        {"per tensor", "ws = Constant f32[] [0.0078125]\nwd = DequantizeLinear(w, ws)\n"},
        {"Multiply form", "wc = Convert(w) to=f32\nzz = Constant i8[1,10] fill(1)\nzc = Convert(zz) to=f32\n"
                          "wm = Subtract(wc, zc)\nws = Constant f32[1,10] pow2(2, -8, -7)\nwd = Multiply(wm, ws)\n"},
        {"per K (left)", "ws = Constant f32[64] pow2(2, -8, -7)\nwd = DequantizeLinear(w, ws) axis=0\n"},
    };
    for (const auto &[name, weights] : forms) {
        SCOPED_TRACE(name);
        const bool left = std::string(name) == "per K (left)";
        const auto g = parse(head + weights + tail);
        auto t = g->clone();
        EXPECT_EQ(matmul_weights_to_nk(*t), left ? 0 : 1);
        auto l = g->clone();
        std::vector<rewrite_record> r;
        run_passes(*l, {}, &r);
        ASSERT_EQ(r.size(), 1u);
        EXPECT_EQ(r[0].rewritten, !left) << r[0].reason;
        if (!left) {
            const node *q = qconv_node(*l);
            ASSERT_NE(q, nullptr) << to_text(*l);
            EXPECT_NE(detail::qconv_text(*q->attr.qconv).find("desc=g1mb3ic64ih1iw1oc10oh1ow1kh1kw1"),
                      std::string::npos);
        }
        const auto in = random_inputs(*g, 5);
        const auto vb = compiled_graph(*g).run(in)[0].values(), va = compiled_graph(*l).run(in)[0].values();
        EXPECT_EQ(vb, va);
        int64_t distinct = 0;
        for (double v : vb) distinct += v != vb[0];
        EXPECT_GT(distinct, 10);
    }
}

// A QConvolution written by hand: its problem text and inputs are checked
// when the graph is read, errors name the line.
TEST(GraphLowerNot, MalformedQConvolutionNamesTheLine) {
    const std::string head = R"(
x = Parameter u8[1,4,5,5]
w = Constant i8[8,4,1,1] fill(1)
)";
    const std::string ok =
        "desc=g1mb1ic4ih5oc8oh5kh1;src=u8;dst=u8;zp=none;scales=0.5;bias=none;dst_zp=0;residual=none;ops=";
    auto text = [&](const std::string &q, const std::string &to = "u8", const std::string &in = "x, w") {
        return head + "y = QConvolution(" + in + ") to=" + to + " qconv=\"" + q + "\"\nr = Result(y)\n";
    };
    // The good one reads, runs and gives 0.5 · Σ x per output (dst u8, rounded half to even).
    const auto g = parse(text(ok));
    tensor x(dtype::u8, {1, 4, 5, 5});
    for (int64_t i = 0; i < x.elems(); ++i) x.set(i, double(i % 7));
    const auto y = compiled_graph(*g).run({x})[0].values();
    ASSERT_EQ(y.size(), 200u);
    // output (n=0, c=0, h=0, w=0): 0.5 · (x[0,0,0,0] + x[0,1,0,0] + x[0,2,0,0] + x[0,3,0,0]) over NCHW indices 0, 25, 50, 75
    EXPECT_EQ(y[0], std::nearbyint(0.5 * (0 % 7 + 25 % 7 + 50 % 7 + 75 % 7)));
    using qconv::test::expect_error_prefix;
    expect_error_prefix([&] { parse(text("desc=g1mb1ic4ih5oc8oh5kh1;src=u8")); }, "line 4", "no ops= field");
    expect_error_prefix([&] { parse(text(ok, "i8")); }, "line 4", "differs from the problem's dst");
    expect_error_prefix([&] { parse(text(ok, "u8", "w, w")); }, "line 4", "source");
    expect_error_prefix([&] { parse(text("desc=g1mb1ic4ih5oc9oh5kh1" + ok.substr(25))); }, "line 4", "weights");
    expect_error_prefix([&] { parse(text(ok.substr(0, ok.size() - 4) + "ops=sum")); }, "line 4", "sum");
    expect_error_prefix([&] { parse(text(ok + "relu:x")); }, "line 4");
}

// The executor's buffer lifetimes (docs/graph.md, "Executor"): one compilation run
// again and again (its arena reused, the residual of a `sum` overwritten in
// place at its last use, the first convolution's source quantized straight
// into NHWC) gives the bytes of a fresh compilation on every input, at 1 and
// 2 threads, and from two threads at once; and the graph as written's values
// (power-of-two scales: bit-exact).
TEST(GraphLowerMemoryPlan, RepeatedRunsGiveTheBytesOfAFreshCompilation) {
    const auto g = parse(R"(
x    = Parameter f32[1,8,9,7]
s    = Constant f32[] [0.0625]
z    = Constant u8[] [0]
w1   = Constant i8[16,8,3,3] random(1, -20, 20)
w1s  = Constant f32[16] fill(0.0078125)
w1d  = DequantizeLinear(w1, w1s) axis=0
w2   = Constant i8[16,16,1,1] random(2, -20, 20)
w2d  = DequantizeLinear(w2, w1s) axis=0
w3   = Constant i8[16,16,1,1] random(3, -20, 20)
w3d  = DequantizeLinear(w3, w1s) axis=0
xq   = QuantizeLinear(x, s, z)
xa   = DequantizeLinear(xq, s, z)
c1   = Convolution(xa, w1d) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
r1   = Relu(c1)
y1q  = QuantizeLinear(r1, s, z)
y1   = DequantizeLinear(y1q, s, z)
mp   = MaxPool(y1) kernel=[3,3] strides=[1,1] pads_begin=[1,1] pads_end=[1,1]
mpq  = QuantizeLinear(mp, s, z)
mpd  = DequantizeLinear(mpq, s, z)
c2   = Convolution(mpd, w2d) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
r2   = Relu(c2)
y2q  = QuantizeLinear(r2, s, z)
y2   = DequantizeLinear(y2q, s, z)
c3   = Convolution(y2, w3d) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
c3q  = QuantizeLinear(c3, s, z)
c3d  = DequantizeLinear(c3q, s, z)
add  = Add(c3d, y1)
r3   = Relu(add)
y3q  = QuantizeLinear(r3, s, z)
y3   = DequantizeLinear(y3q, s, z)
out  = Result(y3)
)");
    auto l = g->clone();
    std::vector<rewrite_record> r;
    run_passes(*l, {}, &r);
    ASSERT_EQ(r.size(), 3u);
    for (const auto &x : r) EXPECT_TRUE(x.rewritten) << x.conv << ": " << x.reason;
    const node *c3 = l->find("c3_int8");
    ASSERT_TRUE(c3) << to_text(*l);
    ASSERT_EQ(c3->inputs.size(), 3u) << "the residual is a sum post-op";
    EXPECT_EQ(c3->inputs[2]->id, "c1_int8") << to_text(*l); // its last use: overwritten in place
    std::vector<std::vector<tensor>> inputs;
    for (uint64_t seed = 1; seed <= 4; ++seed) inputs.push_back(random_inputs(*g, seed));
    const compiled_graph written(*g);
    for (const int threads : {1, 2}) {
        SCOPED_TRACE("threads=" + std::to_string(threads));
        const compiled_graph once(*l, threads);
        for (int round = 0; round < 2; ++round)
            for (size_t k = 0; k < inputs.size(); ++k) {
                const auto y = once.run(inputs[k]);
                const auto fresh = compiled_graph(*l, threads).run(inputs[k]);
                ASSERT_EQ(y.size(), 1u);
                EXPECT_EQ(y[0].bytes, fresh[0].bytes) << "input " << k << ", round " << round;
                EXPECT_EQ(y[0].values(), written.run(inputs[k])[0].values()) << "input " << k;
            }
        // Two threads on one compilation: each run takes its own arena.
        std::vector<std::vector<tensor>> got(2);
        std::vector<std::thread> pool;
        for (int t = 0; t < 2; ++t)
            pool.emplace_back([&, t] {
                for (int rep = 0; rep < 8; ++rep) got[t] = once.run(inputs[t]);
            });
        for (auto &t : pool) t.join();
        for (int t = 0; t < 2; ++t) EXPECT_EQ(got[t][0].bytes, compiled_graph(*l, threads).run(inputs[t])[0].bytes);
    }
}

// The quantized networks of scripts/make_models.py at 32x32 (made here; the
// test is skipped without Debian's python3-onnx / python3-numpy): every
// lowered convolution runs the row `auto` picks for that layer alone (issue
// #35's table), and one compilation run on new inputs gives the bytes of a
// fresh one at 1 and 2 threads.
TEST(GraphLowerNetworks, EveryConvolutionRunsTheRowAutoPicksAloneAndRunsRepeat) {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                      ("qconv_lower_networks_" + std::to_string(static_cast<long long>(::getpid())));
    const std::string models = "resnet50_qdq,mobilenet_v2_qdq_pc";
    const std::string cmd = "/usr/bin/python3 -c 'import onnx, numpy' 2>/dev/null && /usr/bin/python3 " +
                            std::string(QCONV_SOURCE_DIR) + "/scripts/make_models.py '" + dir.string() +
                            "' --size=32 --models=" + models + " >/dev/null";
    if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "python3 with onnx and numpy is needed to make the models";
    for (const std::string name : {"resnet50_qdq", "mobilenet_v2_qdq_pc"}) {
        SCOPED_TRACE(name);
        auto g = load_file((dir / (name + ".onnx")).string());
        std::vector<rewrite_record> r;
        run_passes(*g, {}, &r);
        int lowered = 0;
        for (const auto &x : r) lowered += x.rewritten;
        EXPECT_EQ(lowered, static_cast<int>(r.size()));
        const compiled_graph cg(*g, 1);
        std::map<std::string, std::string> impl;
        for (const auto &[id, im] : cg.impls()) impl[id] = im;
        int checked = 0;
        for (const auto &n : g->nodes()) {
            if (n->kind != op::QConvolution) continue;
            const detail::qconv_spec &sp = *n->attr.qconv;
            const node *wn = n->inputs[1];
            ASSERT_EQ(wn->kind, op::Constant) << n->id;
            const qconv::convolution alone(sp.p, reinterpret_cast<const int8_t *>(wn->data->bytes.data()),
                                           sp.p.with_bias ? sp.bias.data() : nullptr);
            EXPECT_EQ(
                impl[n->id].rfind("qconv:" + alone.impl_name() + " attr[" + std::to_string(alone.attr_id()) + "]", 0),
                0u)
                << n->id << ": " << impl[n->id] << " vs " << alone.impl_name();
            ++checked;
        }
        EXPECT_GT(checked, 0); // fewer than `lowered` where a 1x1 and a depthwise are one (the dw item)
        // One compilation on inputs 1, 2, 1: the first and the last agree,
        // the second is a fresh compilation's.
        for (const int threads : {1, 2}) {
            SCOPED_TRACE("threads=" + std::to_string(threads));
            const compiled_graph once(*g, threads);
            const auto in1 = random_inputs(*g, 1), in2 = random_inputs(*g, 2);
            const auto y1 = once.run(in1), y2 = once.run(in2), y3 = once.run(in1);
            EXPECT_EQ(y1[0].bytes, y3[0].bytes);
            EXPECT_NE(y1[0].bytes, y2[0].bytes);
            EXPECT_EQ(y2[0].bytes, compiled_graph(*g, threads).run(in2)[0].bytes);
        }
    }
    std::filesystem::remove_all(dir);
}

} // namespace
