// The graph pattern matcher: typed nodes, inputs, optional nodes,
// alternatives, predicates, single-consumer checks and label bindings.
#include <gtest/gtest.h>

#include "graph/pattern.h"
#include "qconv/graph.h"

using namespace qconv::graph;
namespace pt = qconv::graph::pattern;

namespace {

struct fixture {
    graph g;
    node *w, *cw, *zp, *cz, *sub, *s, *mul, *r;
    fixture() {
        w = g.constant_int(etype::u4, {4, 8}, std::vector<int64_t>(32, 3), "w");
        attributes f32;
        f32.type = etype::f32;
        cw = g.add(op::Convert, {w}, f32, "cw");
        zp = g.constant_int(etype::u4, {4, 1}, {1, 2, 3, 4}, "zp");
        cz = g.add(op::Convert, {zp}, f32, "cz");
        sub = g.add(op::Subtract, {cw, cz}, {}, "sub");
        s = g.constant_f32({4, 1}, {1, 2, 3, 4}, "s");
        mul = g.add(op::Multiply, {sub, s}, {}, "mul");
        r = g.add(op::Result, {mul}, {}, "r");
        g.infer();
    }
};

pt::P decompression() {
    auto wq = pt::is({op::Constant, op::Parameter}, {}, "wq", pt::integer_type());
    auto cw = pt::is({op::Convert}, {wq}, "cw", pt::of_type(etype::f32));
    auto cz = pt::is({op::Convert}, {pt::is({op::Constant}, {}, "zp")}, "cz");
    auto sub = pt::optional(op::Subtract, {cw, cz}, "sub");
    auto sc = pt::is({op::Constant}, {}, "scale", pt::of_type(etype::f32));
    return pt::alt({pt::is({op::Multiply}, {sub, sc}), pt::is({op::Multiply}, {sc, sub})}, "mul");
}

TEST(GraphPattern, MatchesAndBindsLabels) {
    fixture f;
    pt::bindings b;
    ASSERT_TRUE(pt::match(decompression(), f.mul, &b));
    EXPECT_EQ(b.at("wq"), f.w);
    EXPECT_EQ(b.at("cw"), f.cw);
    EXPECT_EQ(b.at("zp"), f.zp);
    EXPECT_EQ(b.at("sub"), f.sub);
    EXPECT_EQ(b.at("scale"), f.s);
    EXPECT_EQ(b.at("mul"), f.mul);
}

TEST(GraphPattern, OptionalNodeAbsent) {
    fixture f;
    node *m2 = f.g.add(op::Multiply, {f.s, f.cw}, {}, "m2"); // no Subtract, operands swapped
    f.g.infer();
    pt::bindings b;
    ASSERT_TRUE(pt::match(decompression(), m2, &b));
    EXPECT_EQ(b.count("sub"), 0u);
    EXPECT_EQ(b.count("zp"), 0u);
    EXPECT_EQ(b.at("cw"), f.cw);
}

TEST(GraphPattern, OptionalNodePresentButWrongFallsBackAndFails) {
    fixture f;
    // Subtract with an f32 Constant zero point (no Convert): the optional
    // Subtract does not match, and Convert(Wq) does not match a Subtract.
    node *zf = f.g.constant_f32({4, 1}, {1, 1, 1, 1}, "zf");
    node *sub2 = f.g.add(op::Subtract, {f.cw, zf}, {}, "sub2");
    node *m2 = f.g.add(op::Multiply, {sub2, f.s}, {}, "m2");
    f.g.infer();
    pt::bindings b;
    EXPECT_FALSE(pt::match(decompression(), m2, &b));
    EXPECT_TRUE(b.empty()); // a failed match leaves no bindings
}

TEST(GraphPattern, PredicatesReject) {
    fixture f;
    pt::bindings b;
    EXPECT_FALSE(pt::match(pt::is({op::Constant}, {}, "x", pt::of_type(etype::f32)), f.w, &b));
    EXPECT_TRUE(pt::match(pt::is({op::Constant}, {}, "x", pt::integer_type()), f.w, &b));
    EXPECT_FALSE(pt::match(pt::is({op::Convert}, {}), f.w, &b));
    EXPECT_TRUE(pt::match(pt::any("anything"), f.r, &b));
    // Input count must match when inputs are given.
    EXPECT_FALSE(pt::match(pt::is({op::Multiply}, {pt::any()}), f.mul, &b));
}

TEST(GraphPattern, SingleConsumer) {
    fixture f;
    const auto single = pt::single_consumer(f.g);
    EXPECT_TRUE(single(*f.cw));
    f.g.add(op::Relu, {f.cw}, {}, "second_reader");
    EXPECT_FALSE(single(*f.cw));
    pt::bindings b;
    EXPECT_FALSE(pt::match(pt::is({op::Convert}, {}, "c", single), f.cw, &b));
    EXPECT_TRUE(pt::match(pt::is({op::Convert}, {}, "c", single), f.cz, &b));
}

TEST(GraphPattern, SameLabelMustBeSameNode) {
    fixture f;
    node *sq = f.g.add(op::Multiply, {f.cw, f.cw}, {}, "sq");
    node *mixed = f.g.add(op::Multiply, {f.cw, f.cz}, {}, "mixed");
    f.g.infer();
    const auto p = pt::is({op::Multiply}, {pt::any("x"), pt::any("x")});
    pt::bindings b;
    EXPECT_TRUE(pt::match(p, sq, &b));
    pt::bindings b2;
    EXPECT_FALSE(pt::match(p, mixed, &b2));
}

TEST(GraphPattern, AlternativesInOrder) {
    fixture f;
    const auto p = pt::alt(
        {pt::is({op::Subtract}, {}, "first"), pt::is({op::Multiply}, {}, "second"), pt::any("third")}, "either");
    pt::bindings b;
    ASSERT_TRUE(pt::match(p, f.mul, &b));
    EXPECT_EQ(b.count("first"), 0u);
    EXPECT_EQ(b.at("second"), f.mul);
    EXPECT_EQ(b.count("third"), 0u);
    EXPECT_EQ(b.at("either"), f.mul);
}

} // namespace
