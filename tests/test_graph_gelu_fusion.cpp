// Erf and Tanh (graph/ops/eval.cpp) and the Gelu fusion pass
// (graph/passes/fuse_gelu.cpp): forms that do not match run as written, each
// op against std::erf / std::tanh in double; the erf and tanh forms built by
// hand in the IR become one Gelu each, with the values of the graph as written.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "qconv/graph.h"
#include "qconv/graph_onnx.h"
#include "tests/support/onnx_models.h"

namespace {

using namespace qconv::graph;
namespace om = qconv::test::onnx_model;

std::unique_ptr<graph> read(const om::builder &b) {
    const std::string s = b.bytes();
    return parse_onnx(s.data(), s.size());
}

tensor input(const shape_t &s, uint64_t seed, float lo = -4.f, float hi = 4.f) {
    return tensor::from_f32(dtype::f32, s, om::uniform(seed, static_cast<size_t>(elems_of(s)), lo, hi));
}

int count(const graph &g, op k) {
    int c = 0;
    for (const auto &n : g.nodes()) c += n->kind == k;
    return c;
}

// The tanh form 0.5·x·(1 + tanh(beta·(x + kappa·x·(x·x)))) of "x" into `out`
// (Constants beta, kappa, one, half; `sum` and `prod` name the last inner values).
void tanh_form(om::builder &b, const std::string &out, const std::string &sum, const std::string &prod,
               const std::string &name = "") {
    b.node("Mul", {"x", "x"}, {"sq"});
    b.node("Mul", {"x", "sq"}, {"cube"});
    b.node("Mul", {"kappa", "cube"}, {"kc"});
    b.node("Add", {"x", "kc"}, {"in"});
    b.node("Mul", {"beta", "in"}, {"u"});
    b.node("Tanh", {"u"}, {"t"});
    b.node("Add", {"one", "t"}, {sum});
    b.node("Mul", {"x", sum}, {prod});
    if (name.empty()) b.node("Mul", {"half", prod}, {out});
    else b.node("Mul", {"half", prod}, {out}, name);
}

// An ONNX model of erf and tanh forms that the pass leaves as written — the
// erf form with 0.6 for 0.5, the tanh form with 0.05 for 0.044715 — and a lone
// Erf and Tanh: each output against the formula in double.
TEST(GraphGeluFusion, UnmatchedErfAndTanhFormsRunAsWritten) {
    om::builder b(17);
    b.input("x", om::FLOAT, {4, 16});
    for (const char *o : {"erf_form", "tanh_form", "erf", "tanh"}) b.output(o);
    b.init_f32("sqrt2", {}, {1.4142135f});
    b.init_f32("one", {}, {1.f});
    b.init_f32("c06", {}, {0.6f});
    b.init_f32("half", {}, {0.5f});
    b.init_f32("beta", {}, {0.7978846f});
    b.init_f32("kappa", {}, {0.05f});
    b.node("Div", {"x", "sqrt2"}, {"d"});
    b.node("Erf", {"d"}, {"e"});
    b.node("Add", {"e", "one"}, {"s"});
    b.node("Mul", {"x", "s"}, {"m"});
    b.node("Mul", {"m", "c06"}, {"erf_form"});
    tanh_form(b, "tanh_form", "ts", "tm");
    b.node("Erf", {"x"}, {"erf"}, "lone_erf");
    b.node("Tanh", {"x"}, {"tanh"}, "lone_tanh");
    auto g = read(b);
    EXPECT_EQ(count(*g, op::Gelu), 0);
    EXPECT_EQ(count(*g, op::Erf), 2);
    EXPECT_EQ(count(*g, op::Tanh), 2);

    const tensor x = input({4, 16}, 11);
    const auto out = compiled_graph(*g).run({x});
    ASSERT_EQ(out.size(), 4u);
    const std::vector<float> xs = x.to_f32();
    const std::vector<float> ef = out[0].to_f32(), tf = out[1].to_f32(), e = out[2].to_f32(), t = out[3].to_f32();
    for (size_t i = 0; i < xs.size(); ++i) {
        const double v = xs[i];
        const double want_e = 0.6 * v * (1 + std::erf(v / std::sqrt(2.0)));
        const double want_t = 0.5 * v * (1 + std::tanh(0.7978846 * (v + 0.05 * v * v * v)));
        EXPECT_NEAR(ef[i], want_e, 2e-6 * (1 + std::fabs(want_e))) << "x=" << v;
        EXPECT_NEAR(tf[i], want_t, 2e-6 * (1 + std::fabs(want_t))) << "x=" << v;
        EXPECT_NEAR(e[i], std::erf(v), 2e-7) << "x=" << v;
        EXPECT_NEAR(t[i], std::tanh(v), 2e-7) << "x=" << v;
    }
    // Special values of the ops themselves.
    auto one_op = parse("x = Parameter f32[6]\ne = Erf(x)\nt = Tanh(x)\nre = Result(e)\nrt = Result(t)\n");
    const float inf = std::numeric_limits<float>::infinity();
    const auto sp =
        compiled_graph(*one_op).run({tensor::from_f32(dtype::f32, {6}, {0.f, -0.f, inf, -inf, 20.f, -20.f})});
    EXPECT_EQ(sp[0].to_f32(), (std::vector<float>{0.f, -0.f, 1.f, -1.f, 1.f, -1.f}));
    EXPECT_EQ(sp[1].to_f32(), (std::vector<float>{0.f, -0.f, 1.f, -1.f, 1.f, -1.f}));
    EXPECT_TRUE(std::signbit(sp[0].to_f32()[1]) && std::signbit(sp[1].to_f32()[1]));
    // The text format writes and reads them.
    EXPECT_EQ(to_text(*parse(to_text(*g))), to_text(*g));
}

// The erf form: head 0 Divide by √2, 1 Multiply by 1/√2 (constant first);
// tail order 0 (x·(1+a))·0.5, 1 ((1+a)·0.5)·x, 2 (x·0.5)·(1+a).
node *erf_form(graph &g, node *x, int head, int order, const std::string &p) {
    node *d = head == 0 ? g.add(op::Divide, {x, g.constant_f32({}, {1.4142135f}, p + "sqrt2")}, {}, p + "div")
                        : g.add(op::Multiply, {g.constant_f32({1}, {0.70710677f}, p + "isqrt2"), x}, {}, p + "div");
    node *e = g.add(op::Erf, {d}, {}, p + "erf");
    node *s = g.add(op::Add, {e, g.constant_f32({}, {1.f}, p + "one")}, {}, p + "add");
    node *half = g.constant_f32({}, {0.5f}, p + "half");
    if (order == 0) return g.add(op::Multiply, {g.add(op::Multiply, {x, s}, {}, p + "m1"), half}, {}, p + "last");
    if (order == 1) return g.add(op::Multiply, {x, g.add(op::Multiply, {s, half}, {}, p + "m1")}, {}, p + "last");
    return g.add(op::Multiply, {g.add(op::Multiply, {half, x}, {}, p + "m1"), s}, {}, p + "last");
}

// The tanh form: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), the cube as
// x·(x·x) (cube 0) or (x·x)·x (cube 1), the products in the operand orders
// the exporters use, the tail as erf_form's order 0.
node *tanh_form(graph &g, node *x, int cube, const std::string &p) {
    node *sq = g.add(op::Multiply, {x, x}, {}, p + "sq");
    node *c = cube == 0 ? g.add(op::Multiply, {x, sq}, {}, p + "cube") : g.add(op::Multiply, {sq, x}, {}, p + "cube");
    node *kc = g.add(op::Multiply, {g.constant_f32({}, {0.044715f}, p + "kappa"), c}, {}, p + "kc");
    node *in = g.add(op::Add, {x, kc}, {}, p + "in");
    node *u = g.add(op::Multiply, {in, g.constant_f32({}, {0.7978846f}, p + "beta")}, {}, p + "u");
    node *t = g.add(op::Tanh, {u}, {}, p + "tanh");
    node *s = g.add(op::Add, {g.constant_f32({}, {1.f}, p + "one"), t}, {}, p + "add");
    node *m = g.add(op::Multiply, {x, s}, {}, p + "m1");
    return g.add(op::Multiply, {g.constant_f32({}, {0.5f}, p + "half"), m}, {}, p + "last");
}

// Every erf form (2 heads × 3 orders) and both tanh forms side by side on
// one input, plus one erf form whose Erf is also an output (left as written).
std::unique_ptr<graph> patterns() {
    auto g = std::make_unique<graph>();
    node *x = g->parameter(dtype::f32, {3, 40}, "x");
    for (int h = 0; h < 2; ++h)
        for (int o = 0; o < 3; ++o) {
            node *v = erf_form(*g, x, h, o, "e" + std::to_string(h) + std::to_string(o) + "_");
            v->rt_info["origin"] = "\"onnx:" + v->id + "\"";
            g->add(op::Result, {v}, {}, v->id + "_out");
        }
    for (int c = 0; c < 2; ++c) g->add(op::Result, {tanh_form(*g, x, c, "t" + std::to_string(c) + "_")});
    node *r = g->add(op::Relu, {x}, {}, "r");
    g->add(op::Result, {erf_form(*g, r, 0, 2, "kept_")}, {}, "kept_out");
    g->add(op::Result, {g->find("kept_erf")}, {}, "kept_erf_out");
    g->infer();
    return g;
}

TEST(GraphGeluFusion, PassFusesHandBuiltPatterns) {
    auto fused = patterns();
    const auto written = patterns();
    EXPECT_EQ(count(*fused, op::Erf), 7);
    EXPECT_EQ(fuse_gelu(*fused), 8);
    EXPECT_EQ(count(*fused, op::Gelu), 8);
    EXPECT_EQ(count(*fused, op::Erf), 1); // the kept form's
    EXPECT_EQ(count(*fused, op::Tanh), 0);
    EXPECT_EQ(count(*fused, op::Multiply), 2); // the kept form's last two products
    for (int h = 0; h < 2; ++h)
        for (int o = 0; o < 3; ++o) {
            const std::string id = "e" + std::to_string(h) + std::to_string(o) + "_last";
            const node *n = fused->find(id);
            ASSERT_TRUE(n) << id;
            EXPECT_EQ(n->kind, op::Gelu) << id;
            EXPECT_FALSE(n->attr.gelu_tanh) << id;
            EXPECT_EQ(n->inputs, std::vector<node *>{fused->find("x")}) << id;
            EXPECT_EQ(n->rt_info.at("origin"), "\"onnx:" + id + "\"");
        }
    for (const char *id : {"t0_last", "t1_last"}) {
        ASSERT_TRUE(fused->find(id)) << id;
        EXPECT_EQ(fused->find(id)->kind, op::Gelu) << id;
        EXPECT_TRUE(fused->find(id)->attr.gelu_tanh) << id;
    }
    EXPECT_EQ(fused->find("kept_last")->kind, op::Multiply);
    EXPECT_EQ(fuse_gelu(*fused), 0); // nothing left to fuse

    const tensor x = input({3, 40}, 5);
    const auto a = compiled_graph(*written).run({x}), b = compiled_graph(*fused).run({x});
    ASSERT_EQ(a.size(), b.size());
    for (size_t r = 0; r < a.size(); ++r) {
        const std::vector<float> va = a[r].to_f32(), vb = b[r].to_f32();
        ASSERT_EQ(va.size(), vb.size());
        for (size_t i = 0; i < va.size(); ++i)
            EXPECT_NEAR(vb[i], va[i], 1e-6 + 1e-6 * std::fabs(va[i])) << "output " << r << " element " << i;
    }
    // The kept pattern is the graph as written, bit for bit.
    EXPECT_EQ(a[a.size() - 2].bytes, b[b.size() - 2].bytes);
    EXPECT_EQ(a.back().bytes, b.back().bytes);
}

// A pattern the pass must leave: the wrong constant, a result of another
// shape (the 0.5 broadcasts x to rank 3), an inner value read twice.
TEST(GraphGeluFusion, PassLeavesWhatDoesNotMatch) {
    for (int c = 0; c < 3; ++c) {
        graph g;
        node *x = g.parameter(dtype::f32, {2, 3}, "x");
        node *d = g.add(op::Divide, {x, g.constant_f32({}, {c == 0 ? 1.5f : 1.4142135f})});
        node *e = g.add(op::Erf, {d});
        node *s = g.add(op::Add, {e, g.constant_f32({}, {1.f})});
        node *m = g.add(op::Multiply, {x, s});
        node *y = g.add(op::Multiply, {m, g.constant_f32(c == 1 ? shape_t{1, 1, 1} : shape_t{}, {0.5f})});
        g.add(op::Result, {y});
        if (c == 2) g.add(op::Result, {s});
        g.infer();
        EXPECT_EQ(fuse_gelu(g), 0) << c;
        EXPECT_EQ(count(g, op::Gelu), 0) << c;
        EXPECT_EQ(count(g, op::Erf), 1) << c;
    }
}

// The tanh form as the exporters write it in ONNX reads as one Gelu (tanh).
TEST(GraphGeluFusion, OnnxTanhFormIsOneGelu) {
    om::builder b(17);
    b.input("x", om::FLOAT, {2, 8});
    b.output("y");
    b.init_f32("beta", {}, {0.7978846f});
    b.init_f32("kappa", {}, {0.044715f});
    b.init_f32("one", {}, {1.f});
    b.init_f32("half", {}, {0.5f});
    tanh_form(b, "y", "s", "m", "gelu_out");
    auto g = read(b);
    const auto ops = g->count_ops();
    ASSERT_EQ(ops.at("Gelu"), 1);
    EXPECT_EQ(ops.count("Tanh") + ops.count("Multiply") + ops.count("Add"), 0u);
    EXPECT_NE(to_text(*g).find("approximation=tanh rt={origin=\"onnx:gelu_out\"}"), std::string::npos) << to_text(*g);
    const tensor x = input({2, 8}, 9);
    const std::vector<float> y = compiled_graph(*g).run({x})[0].to_f32(), xs = x.to_f32();
    for (size_t i = 0; i < xs.size(); ++i) {
        const double v = xs[i], want = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
        EXPECT_NEAR(y[i], want, 1e-6 * (1 + std::fabs(want))) << "x=" << v;
    }
}

// run_passes fuses first: a text-format graph written with Erf.
TEST(GraphGeluFusion, RunPassesFusesTextGraphs) {
    const std::string text = "x = Parameter f32[2,5]\n"
                             "c = Constant f32[1] [0.70710677]\n"
                             "one = Constant f32[1] [1]\n"
                             "half = Constant f32[1] [0.5]\n"
                             "d = Multiply(x, c)\n"
                             "e = Erf(d)\n"
                             "s = Add(e, one)\n"
                             "h = Multiply(x, half)\n"
                             "y = Multiply(h, s)\n"
                             "o = Result(y)\n";
    auto g = parse(text);
    const auto written = parse(text);
    run_passes(*g);
    EXPECT_EQ(count(*g, op::Gelu), 1);
    EXPECT_EQ(count(*g, op::Erf), 0);
    EXPECT_EQ(g->find("y")->kind, op::Gelu);
    const tensor x = input({2, 5}, 3);
    const std::vector<float> a = compiled_graph(*written).run({x})[0].to_f32(),
                             b = compiled_graph(*g).run({x})[0].to_f32();
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-6 + 1e-6 * std::fabs(a[i])) << i;
}

} // namespace
