// The ONNX reading the PP-OCR models need (graph/io/onnx_reader.cpp;
// docs/graph.md, "ONNX"): opsets 11 and 12 and their older forms (Softmax's
// flattening, axes and split as attributes, per-tensor QDQ), Squeeze,
// Unsqueeze and ReduceMean. Each is read from a small model built here, run,
// and checked against values worked out by hand (small dyadic numbers, so
// that every f32 operation is exact); each refusal names the node and the
// attribute or input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "qconv/graph.h"
#include "qconv/graph_onnx.h"
#include "tests/support/onnx_models.h"
#include "tests/support/onnx_run.h"
#include "tests/support/run_driver.h"

namespace {

namespace g = qconv::graph;
namespace om = qconv::test::onnx_model;
using ::testing::HasSubstr;
using ::testing::StartsWith;

using om::f32;
using om::read;
using om::refusal;
using om::run;

std::vector<float> iota(size_t n) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
    return v;
}

// One node `op` named `name` of x [dims] → y at `opset`; `extra` more inputs.
om::builder one(int64_t opset, const std::string &op, const std::string &name, const std::vector<int64_t> &dims,
                const std::vector<std::string> &extra = {}) {
    om::builder b(opset);
    b.input("x", om::FLOAT, dims);
    b.output("y");
    std::vector<std::string> in = {"x"};
    in.insert(in.end(), extra.begin(), extra.end());
    b.node(op, in, {"y"}, name);
    return b;
}
::onnx::NodeProto &node0(om::builder &b) { return *b.graph().mutable_node(b.graph().node_size() - 1); }

// ----------------------------------------------------------------- opsets
TEST(OnnxOpset11, ReadsOpsets11And12) {
    for (int64_t opset : {11, 12}) {
        const auto y = run(one(opset, "Relu", "r", {1, 4}), {f32({1, 4}, {-1, 2, -3, 4})});
        EXPECT_EQ(y[0], (std::vector<float>{0, 2, 0, 4})) << opset;
    }
    EXPECT_THAT(refusal(one(10, "Relu", "r", {1, 4})), HasSubstr("opset 10 is not supported (11 to 21)"));
}

// ---------------------------------------------------------------- Softmax
// Before opset 13 Softmax flattens x to [∏d[:axis], ∏d[axis:]]: over [2,2,2]
// with axis 1 each row of four equal values gives 1/4 (per axis: 1/2).
TEST(OnnxOpset11, SoftmaxFlattensAroundTheAxis) {
    const auto x = f32({2, 2, 2}, {0, 0, 0, 0, 5, 5, 5, 5});
    om::builder b = one(11, "Softmax", "sm", {2, 2, 2}); // axis 1 by default
    std::vector<g::shape_t> shapes;
    auto y = run(b, {x}, &shapes);
    EXPECT_EQ(y[0], std::vector<float>(8, 0.25f));
    EXPECT_EQ(shapes[0], (g::shape_t{2, 2, 2}));
    EXPECT_EQ(read(b)->count_ops().at("Reshape"), 2);
    // axis 0: one row of eight; 0 and 5 → e^0/(4 + 4e^5) and e^5/(4 + 4e^5).
    om::attr(node0(b), "axis", int64_t(0));
    y = run(b, {x});
    const float e5 = std::exp(5.f);
    const double sum = 4.0 + 4.0 * static_cast<double>(e5);
    EXPECT_EQ(y[0][0], static_cast<float>(1.0 / sum));
    EXPECT_EQ(y[0][7], static_cast<float>(e5 / sum));
    // Opset 13: along axis 1 alone, pairs of equal values: 1/2.
    om::builder c = one(13, "Softmax", "sm", {2, 2, 2});
    om::attr(node0(c), "axis", int64_t(1));
    EXPECT_EQ(run(c, {x})[0], std::vector<float>(8, 0.5f));
    // The last axis is the same in both forms: no Reshape.
    om::builder d = one(12, "Softmax", "sm", {2, 2, 2});
    om::attr(node0(d), "axis", int64_t(-1));
    EXPECT_EQ(run(d, {x})[0], std::vector<float>(8, 0.5f));
    EXPECT_EQ(read(d)->count_ops().count("Reshape"), 0u);
}

TEST(OnnxOpset11, SoftmaxOfARunTimeDimIsRefused) {
    om::builder b = one(11, "Softmax", "sm", {-1, 2, 2}); // N × 2 × 2, axis 1
    EXPECT_THAT(refusal(b), StartsWith("node 'sm' (#0, Softmax): attribute 'axis': 1: before opset 13"));
}

// ------------------------------------------------------------------ Split
TEST(OnnxOpset11, SplitSizesAsAttribute) {
    auto model = [](const std::vector<int64_t> &sizes) {
        om::builder b(11);
        b.input("x", om::FLOAT, {1, 6});
        b.output("a");
        b.output("c");
        auto &n = b.node("Split", {"x"}, {"a", "c"}, "split");
        om::attr(n, "axis", int64_t(1));
        om::attr(n, "split", sizes);
        return b;
    };
    std::vector<g::shape_t> shapes;
    const auto y = run(model({2, 4}), {f32({1, 6}, iota(6))}, &shapes);
    EXPECT_EQ(y[0], (std::vector<float>{0, 1}));
    EXPECT_EQ(y[1], (std::vector<float>{2, 3, 4, 5}));
    EXPECT_THAT(refusal(model({2, 3})),
                StartsWith("node 'split' (#0, Split): attribute 'split': the sizes add up to 5"));
    // From opset 13 the sizes are an input.
    om::builder c(13);
    c.input("x", om::FLOAT, {1, 6});
    c.output("a");
    c.output("c");
    om::attr(c.node("Split", {"x"}, {"a", "c"}, "split"), "split", std::vector<int64_t>{2, 4});
    EXPECT_THAT(refusal(c), StartsWith("node 'split' (#0, Split): attribute 'split': is an input from opset 13"));
}

// ------------------------------------------------------ Squeeze/Unsqueeze
TEST(OnnxSqueeze, AxesAsAttributeAndAsInput) {
    const auto x = f32({1, 3, 1, 2}, iota(6));
    std::vector<g::shape_t> shapes;
    om::builder a = one(11, "Squeeze", "sq", {1, 3, 1, 2});
    om::attr(node0(a), "axes", std::vector<int64_t>{-2});
    EXPECT_EQ(run(a, {x}, &shapes)[0], iota(6));
    EXPECT_EQ(shapes.back(), (g::shape_t{1, 3, 2}));
    om::builder b = one(13, "Squeeze", "sq", {1, 3, 1, 2}, {"axes"});
    b.init_i64("axes", {0, 2});
    run(b, {x}, &shapes);
    EXPECT_EQ(shapes.back(), (g::shape_t{3, 2}));
    om::builder c = one(13, "Squeeze", "sq", {1, 3, 1, 2}); // no axes: every dim of 1
    run(c, {x}, &shapes);
    EXPECT_EQ(shapes.back(), (g::shape_t{3, 2}));
    om::builder u = one(12, "Unsqueeze", "un", {1, 3, 1, 2});
    om::attr(node0(u), "axes", std::vector<int64_t>{0, -1});
    EXPECT_EQ(run(u, {x}, &shapes)[0], iota(6));
    EXPECT_EQ(shapes.back(), (g::shape_t{1, 1, 3, 1, 2, 1}));
    om::builder v = one(13, "Unsqueeze", "un", {1, 3, 1, 2}, {"axes"});
    v.init_i64("axes", {1});
    run(v, {x}, &shapes);
    EXPECT_EQ(shapes.back(), (g::shape_t{1, 1, 3, 1, 2}));
}

TEST(OnnxSqueeze, Refusals) {
    om::builder a = one(11, "Squeeze", "sq", {1, 3});
    om::attr(node0(a), "axes", std::vector<int64_t>{1});
    EXPECT_THAT(refusal(a), StartsWith("node 'sq' (#0, Squeeze): attribute 'axes': dimension 1 of [1,3] is not 1"));
    om::builder b = one(13, "Squeeze", "sq", {1, 3});
    om::attr(node0(b), "axes", std::vector<int64_t>{0});
    EXPECT_THAT(refusal(b), StartsWith("node 'sq' (#0, Squeeze): attribute 'axes': is an input from opset 13"));
    om::builder c = one(11, "Unsqueeze", "un", {1, 3});
    EXPECT_THAT(refusal(c), StartsWith("node 'un' (#0, Unsqueeze): attribute 'axes': is required"));
    om::builder d = one(13, "Unsqueeze", "un", {1, 3}, {"axes"});
    d.init_i64("axes", {3});
    EXPECT_THAT(refusal(d), StartsWith("node 'un' (#0, Unsqueeze): input 1 'axes': axis 3 is outside rank 3"));
    om::builder e = one(11, "Unsqueeze", "un", {1, 3}, {"axes"});
    e.init_i64("axes", {0});
    EXPECT_THAT(refusal(e), StartsWith("node 'un' (#0, Unsqueeze): input 1 'axes': axes is an input from opset 13"));
}

// A run-time dim before the squeezed axis is copied (special_zero); one after it moves.
TEST(OnnxSqueeze, RunTimeDimension) {
    om::builder a = one(13, "Squeeze", "sq", {-1, 1, 2}, {"axes"});
    a.init_i64("axes", {1});
    auto gr = read(a);
    gr->bind_dynamic(3);
    gr->infer();
    const auto y = g::compiled_graph(*gr).run({f32({3, 1, 2}, iota(6))});
    EXPECT_EQ(y[0].shape, (g::shape_t{3, 2}));
    om::builder b = one(13, "Squeeze", "sq", {1, -1}, {"axes"});
    b.init_i64("axes", {0});
    EXPECT_THAT(refusal(b), StartsWith("node 'sq' (#0, Squeeze): input 0 'x': dimension 1 of [1,1] follows"));
}

// ------------------------------------------------------------- ReduceMean
TEST(OnnxReduceMean, AxesAttributeBefore18InputFrom18) {
    const auto x = f32({2, 2, 2}, {1, 3, 5, 7, 0, 2, 4, 10});
    std::vector<g::shape_t> shapes;
    om::builder a = one(11, "ReduceMean", "rm", {2, 2, 2});
    om::attr(node0(a), "axes", std::vector<int64_t>{-1}); // keepdims 1
    EXPECT_EQ(run(a, {x}, &shapes)[0], (std::vector<float>{2, 6, 1, 7}));
    EXPECT_EQ(shapes.back(), (g::shape_t{2, 2, 1}));
    om::attr(node0(a), "keepdims", int64_t(0));
    run(a, {x}, &shapes);
    EXPECT_EQ(shapes.back(), (g::shape_t{2, 2}));
    om::builder b = one(13, "ReduceMean", "rm", {2, 2, 2}); // no axes: all, kept
    EXPECT_EQ(run(b, {x}, &shapes)[0], (std::vector<float>{4}));
    EXPECT_EQ(shapes.back(), (g::shape_t{1, 1, 1}));
    om::builder c = one(18, "ReduceMean", "rm", {2, 2, 2}, {"axes"});
    c.init_i64("axes", {0, 2});
    om::attr(node0(c), "keepdims", int64_t(0));
    // (1+3+0+2)/4 = 1.5, (5+7+4+10)/4 = 6.5
    EXPECT_EQ(run(c, {x}, &shapes)[0], (std::vector<float>{1.5f, 6.5f}));
    EXPECT_EQ(shapes.back(), (g::shape_t{2}));
    om::builder d = one(18, "ReduceMean", "rm", {2, 2, 2});
    om::attr(node0(d), "noop_with_empty_axes", int64_t(1));
    EXPECT_EQ(run(d, {x})[0], x.to_f32());
}

TEST(OnnxReduceMean, Refusals) {
    om::builder a = one(18, "ReduceMean", "rm", {2, 2});
    om::attr(node0(a), "axes", std::vector<int64_t>{0});
    EXPECT_THAT(refusal(a), StartsWith("node 'rm' (#0, ReduceMean): attribute 'axes': is an input from opset 18"));
    om::builder b = one(13, "ReduceMean", "rm", {2, 2});
    om::attr(node0(b), "noop_with_empty_axes", int64_t(1));
    EXPECT_THAT(refusal(b), StartsWith("node 'rm' (#0, ReduceMean): attribute 'noop_with_empty_axes': the attribute "
                                       "needs opset 18"));
    om::builder c = one(13, "ReduceMean", "rm", {2, 2});
    om::attr(node0(c), "axes", std::vector<int64_t>{0, 0});
    EXPECT_THAT(refusal(c), StartsWith("node 'rm' (#0, ReduceMean)"));
    EXPECT_THAT(refusal(c), HasSubstr("given twice"));
}

// ------------------------------------------------- older forms refused
TEST(OnnxOpset11, OlderFormsRefused) {
    // QuantizeLinear before 13: per tensor only.
    om::builder q = one(12, "QuantizeLinear", "q", {1, 2}, {"s"});
    q.init_f32("s", {2}, {0.5f, 0.25f});
    EXPECT_THAT(refusal(q), StartsWith("node 'q' (#0, QuantizeLinear): input 1 's': holds 2 values: before opset 13"));
    om::builder a = one(11, "QuantizeLinear", "q", {1, 2}, {"s"});
    a.init_f32("s", {}, {0.5f});
    om::attr(node0(a), "axis", int64_t(1));
    EXPECT_THAT(refusal(a), StartsWith("node 'q' (#0, QuantizeLinear): attribute 'axis': a per-axis scale needs opset "
                                       "13 (the model imports opset 11)"));
    // Reshape's allowzero (14), Constant's value_float (12), HardSwish (14).
    om::builder r = one(13, "Reshape", "r", {2, 2}, {"s"});
    r.init_i64("s", {4});
    om::attr(node0(r), "allowzero", int64_t(0));
    EXPECT_THAT(refusal(r), StartsWith("node 'r' (#0, Reshape): attribute 'allowzero': the attribute needs opset 14"));
    om::builder c(11);
    c.output("y");
    om::attr(c.node("Constant", {}, {"y"}, "c"), "value_float", 1.f);
    EXPECT_THAT(refusal(c),
                StartsWith("node 'c' (#0, Constant): attribute 'value_float': the attribute needs opset 12"));
}

// ------------------------------------------------------- input shapes
// x [N, 3, H, W] with three named symbolic dims (the detector's input), through a
// 1x1 convolution summing the channels.
om::builder three_dims_model() {
    om::builder b(12);
    b.input("x", om::FLOAT, {-1, 3, -1, -1});
    auto *shape = b.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->mutable_dim(0)->set_dim_param("batch");
    shape->mutable_dim(2)->set_dim_param("height");
    shape->mutable_dim(3)->clear_dim_param(); // no name
    b.output("y");
    b.init_f32("w", {1, 3, 1, 1}, {1, 1, 1});
    b.node("Conv", {"x", "w"}, {"y"}, "conv");
    return b;
}

std::unique_ptr<g::graph> read_with(const om::builder &b, const std::map<std::string, g::shape_t> &shapes) {
    g::onnx_options o;
    o.input_shapes = shapes;
    const std::string s = b.bytes();
    return g::parse_onnx(s.data(), s.size(), "", o);
}
std::string refusal_with(const om::builder &b, const std::map<std::string, g::shape_t> &shapes) {
    try {
        read_with(b, shapes);
    } catch (const qconv::error &e) {
        return e.what();
    }
    return "";
}

TEST(OnnxInputShapes, EverySymbolicDimBound) {
    const om::builder b = three_dims_model();
    // Without shapes: three symbolic dims, one run-time dimension.
    EXPECT_THAT(refusal(b), StartsWith("input 'x': dim 2: symbolic dims 'batch' and 'height' differ"));
    auto gr = read_with(b, {{"x", {2, 3, 1, 2}}});
    EXPECT_FALSE(gr->is_dynamic());
    EXPECT_EQ(gr->parameters()[0]->out_shape, (g::shape_t{2, 3, 1, 2}));
    const auto y = g::compiled_graph(*gr).run({f32({2, 3, 1, 2}, iota(12))});
    // Per pixel the sum of the three channels: n0 (0+2+4, 1+3+5), n1 (6+8+10, 7+9+11).
    EXPECT_EQ(y[0].to_f32(), (std::vector<float>{6, 9, 24, 27}));
    EXPECT_EQ(y[0].shape, (g::shape_t{2, 1, 1, 2}));
    // A dim_value of -1 is a symbolic dim too.
    om::builder c = three_dims_model();
    c.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(
        -1);
    EXPECT_EQ(read_with(c, {{"x", {1, 3, 4, 4}}})->parameters()[0]->out_shape, (g::shape_t{1, 3, 4, 4}));
}

TEST(OnnxInputShapes, Refusals) {
    const om::builder b = three_dims_model();
    EXPECT_EQ(refusal_with(b, {{"x", {1, 4, 2, 2}}}),
              "input 'x': dim 1 is 3 in the model, the shape given [1,4,2,2] has 4");
    EXPECT_EQ(refusal_with(b, {{"x", {1, 3, 2}}}),
              "input 'x': the shape given [1,3,2] has rank 3, the model's input rank 4");
    EXPECT_THAT(refusal_with(b, {{"x", {1, 3, 0, 2}}}),
                StartsWith("input 'x': dim 2: the shape given [1,3,0,2] has 0"));
    EXPECT_EQ(refusal_with(b, {{"x", {1, 3, 2, 2}}, {"z", {1}}}),
              "input 'z': a shape is given, but the model has no input 'z' (inputs: x)");
}

// qconv-driver graph --shape=NAME=D,D,..., and the shape of an --input file.
TEST(OnnxInputShapes, Driver) {
    const std::string dir = ::testing::TempDir() + "/onnx_models_ops_shapes";
    std::filesystem::create_directories(dir);
    three_dims_model().save(dir + "/m.onnx");
    auto r = qconv::test::run_driver({"graph", dir + "/m.onnx", "--shape=x=1,3,4,5", "--reps=1"});
    EXPECT_EQ(r.rc, 0) << r.out << r.err;
    EXPECT_THAT(r.out, HasSubstr("status=ok"));
    g::write_npy(dir + "/x.npy", f32({2, 3, 1, 2}, iota(12)));
    r = qconv::test::run_driver(
        {"graph", dir + "/m.onnx", "--input=x=" + dir + "/x.npy", "--output-dir=" + dir + "/out", "--reps=1"});
    EXPECT_EQ(r.rc, 0) << r.out << r.err;
    EXPECT_EQ(g::read_npy(dir + "/out/y.npy").to_f32(), (std::vector<float>{6, 9, 24, 27}));
    r = qconv::test::run_driver({"graph", dir + "/m.onnx", "--shape=x=1,4,4,5"});
    EXPECT_EQ(r.rc, 2);
    EXPECT_THAT(r.err, HasSubstr("input 'x': dim 1 is 3 in the model"));
    r = qconv::test::run_driver({"graph", dir + "/m.onnx"});
    EXPECT_EQ(r.rc, 2);
    EXPECT_THAT(r.err, HasSubstr("give the input's shape"));
    r = qconv::test::run_driver({"graph", dir + "/m.onnx", "--shape=x=1,3,4,5", "--input=x=" + dir + "/x.npy"});
    EXPECT_EQ(r.rc, 2);
    EXPECT_THAT(r.err, HasSubstr("--shape: 'x' is [1,3,4,5], --input's file holds [2,3,1,2]"));
    r = qconv::test::run_driver({"graph", dir + "/m.onnx", "--shape=x=1,3,a,5"});
    EXPECT_EQ(r.rc, 2);
    EXPECT_THAT(r.err, HasSubstr("dim 'a' is not an integer"));
}

// ---------------------------------------------------- shape computations
// x [N, 2, 3] → Reshape(x, Concat(Gather(Shape(x), [0]), [-1])) → [N, 6]: with
// N given, the whole shape subgraph is a Constant at load.
TEST(OnnxShapeOps, ShapeGatherConcatFoldIntoTheReshapeTarget) {
    om::builder b(12);
    b.input("x", om::FLOAT, {-1, 2, 3});
    b.output("y");
    b.init_i64("zero", {0});
    b.init_i64("minus1", {-1});
    b.node("Shape", {"x"}, {"s"}, "shape");
    b.node("Gather", {"s", "zero"}, {"n"}, "gather");
    om::attr(b.node("Cast", {"n"}, {"n32"}, "narrow"), "to", int64_t(om::INT32));
    om::attr(b.node("Cast", {"n32"}, {"n64"}, "widen"), "to", int64_t(om::INT64));
    om::attr(b.node("Concat", {"n64", "minus1"}, {"t"}, "concat"), "axis", int64_t(0));
    b.node("Reshape", {"x", "t"}, {"y"}, "reshape");
    auto gr = read_with(b, {{"x", {2, 2, 3}}});
    const auto ops = gr->count_ops();
    EXPECT_EQ(ops.count("Concat"), 0u);
    EXPECT_EQ(ops.count("Convert"), 0u);
    EXPECT_EQ(ops.at("Reshape"), 1);
    const auto y = g::compiled_graph(*gr).run({f32({2, 2, 3}, iota(12))});
    EXPECT_EQ(y[0].shape, (g::shape_t{2, 6}));
    EXPECT_EQ(y[0].to_f32(), iota(12));
    // With N left as the run-time dimension, Shape cannot be known at load.
    EXPECT_THAT(refusal(b), StartsWith("node 'shape' (#0, Shape): input 0 'x': dimension 0 of [1,2,3] follows the "
                                       "run-time dimension '?'"));
}

// A model of constants only: Cast, Range, Expand, ConstantOfShape, Slice,
// Unsqueeze — each output an integer or float Constant at load.
TEST(OnnxShapeOps, ConstantsEvaluatedAtLoad) {
    om::builder b(12);
    b.init_f32("f", {4}, {-1.5f, 2.75f, -0.5f, 3.f});
    std::vector<uint8_t> big(8);
    const int64_t v = (int64_t(1) << 32) + 5;
    std::memcpy(big.data(), &v, 8);
    b.init_raw("big", om::INT64, {1}, big);
    om::attr(b.node("Cast", {"f"}, {"trunc"}, "c1"), "to", int64_t(om::INT32));
    om::attr(b.node("Cast", {"big"}, {"wrap"}, "c2"), "to", int64_t(om::INT32));
    b.init_i64("zero", {0});
    b.init_i64("five", {5});
    b.init_i64("two", {2});
    for (int i = 0; i < b.graph().initializer_size(); ++i)
        if (b.graph().initializer(i).data_type() == om::INT64 && b.graph().initializer(i).name() != "big")
            b.graph().mutable_initializer(i)->clear_dims(); // scalars
    b.node("Range", {"zero", "five", "two"}, {"range"}, "range");
    b.init_i64("shape22", {2, 2});
    b.init_f32("row", {1, 2}, {1.f, 2.f});
    b.node("Expand", {"row", "shape22"}, {"expanded"}, "expand");
    b.node("ConstantOfShape", {"shape22"}, {"zeros"}, "cos");
    for (const char *o : {"trunc", "wrap"}) b.output(o, om::INT32);
    b.output("range", om::INT64);
    b.output("expanded");
    b.output("zeros");
    auto gr = read(b);
    EXPECT_EQ(gr->count_ops().count("Convert"), 0u);
    const auto y = g::compiled_graph(*gr).run({});
    EXPECT_EQ(y[0].values(), (std::vector<double>{-1, 2, 0, 3})); // toward zero
    EXPECT_EQ(y[1].values(), (std::vector<double>{5}));           // 2^32 + 5 wraps to 5
    EXPECT_EQ(y[2].values(), (std::vector<double>{0, 2, 4}));
    EXPECT_EQ(y[3].to_f32(), (std::vector<float>{1, 2, 1, 2}));
    EXPECT_EQ(y[3].shape, (g::shape_t{2, 2}));
    EXPECT_EQ(y[4].to_f32(), (std::vector<float>{0, 0, 0, 0}));
}

TEST(OnnxShapeOps, Refusals) {
    om::builder a = one(12, "Gather", "gather", {2, 2}, {"i"});
    a.init_i64("i", {0});
    EXPECT_THAT(refusal(a), StartsWith("node 'gather' (#0, Gather): input 0 'x': must be a constant"));
    om::builder b = one(12, "Expand", "expand", {1, 2}, {"s"});
    b.init_i64("s", {2, 2});
    EXPECT_THAT(refusal(b), StartsWith("node 'expand' (#0, Expand): input 0 'x': must be a constant"));
    om::builder c(12);
    c.init_f32("f", {1}, {3e9f});
    om::attr(c.node("Cast", {"f"}, {"y"}, "cast"), "to", int64_t(om::INT32));
    c.output("y", om::INT32);
    EXPECT_THAT(refusal(c), StartsWith("node 'cast' (#0, Cast): input 0 'f': element 0 = 3e+09 is outside i32"));
    om::builder d(12);
    d.init_f32("data", {2}, {1.f, 2.f});
    d.init_i64("i", {2});
    d.node("Gather", {"data", "i"}, {"y"}, "gather");
    d.output("y");
    EXPECT_THAT(refusal(d), StartsWith("node 'gather' (#0, Gather): input 1 'i': index 2 is outside [-2, 2)"));
    om::builder e(12);
    e.init_i64("s", {1 << 13, 1 << 12});
    e.node("ConstantOfShape", {"s"}, {"y"}, "cos");
    e.output("y");
    EXPECT_THAT(refusal(e), StartsWith("node 'cos' (#0, ConstantOfShape): the output [8192,4096] has more than 2^24"));
}

// ---------------------------------------------------------- ConvTranspose
om::builder conv_transpose_model(const std::vector<int64_t> &xs, const std::vector<int64_t> &ws,
                                 const std::vector<float> &w, bool bias = false) {
    om::builder b(12);
    b.input("x", om::FLOAT, xs);
    b.output("y");
    b.init_f32("w", ws, w);
    std::vector<std::string> in = {"x", "w"};
    if (bias) {
        b.init_f32("B", {2}, {0.5f, -1.f});
        in.push_back("B");
    }
    b.node("ConvTranspose", in, {"y"}, "ct");
    return b;
}

// Stride 2, kernel 2: each input pixel writes its own 2x2 block x·w.
TEST(OnnxConvTranspose, StrideTwoPlacesOneBlockPerPixel) {
    om::builder b = conv_transpose_model({1, 1, 2, 2}, {1, 1, 2, 2}, {1, 10, 100, 1000});
    om::attr(node0(b), "strides", std::vector<int64_t>{2, 2});
    om::attr(node0(b), "kernel_shape", std::vector<int64_t>{2, 2});
    std::vector<g::shape_t> shapes;
    const auto y = run(b, {f32({1, 1, 2, 2}, {1, 2, 3, 4})}, &shapes);
    EXPECT_EQ(shapes[0], (g::shape_t{1, 1, 4, 4}));
    EXPECT_EQ(y[0], (std::vector<float>{1, 10, 2, 20, 100, 1000, 200, 2000, 3, 30, 4, 40, 300, 3000, 400, 4000}));
}

// Stride 1: the full convolution, overlapping blocks summed; the pads crop it.
TEST(OnnxConvTranspose, OverlapsSumAndPadsCrop) {
    const auto x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
    om::builder b = conv_transpose_model({1, 1, 2, 2}, {1, 1, 2, 2}, {1, 2, 3, 4});
    EXPECT_EQ(run(b, {x})[0], (std::vector<float>{1, 4, 4, 6, 20, 16, 9, 24, 16}));
    om::attr(node0(b), "pads", std::vector<int64_t>{0, 0, 1, 1});
    std::vector<g::shape_t> shapes;
    EXPECT_EQ(run(b, {x}, &shapes)[0], (std::vector<float>{1, 4, 6, 20}));
    EXPECT_EQ(shapes[0], (g::shape_t{1, 1, 2, 2}));
    // Dilation 2 along W: x [1, 2], w [1, 3] → ow = iw + 2·kw: 1, 2, 3, 6.
    om::builder d = conv_transpose_model({1, 1, 1, 2}, {1, 1, 1, 2}, {1, 3});
    om::attr(node0(d), "dilations", std::vector<int64_t>{1, 2});
    EXPECT_EQ(run(d, {f32({1, 1, 1, 2}, {1, 2})})[0], (std::vector<float>{1, 2, 3, 6}));
}

// Two groups of one channel, output_padding 1 (a row and a column no input
// reaches: 0, then the bias).
TEST(OnnxConvTranspose, GroupsOutputPaddingAndBias) {
    om::builder b = conv_transpose_model({1, 2, 1, 1}, {2, 1, 1, 1}, {3, 5}, true);
    om::attr(node0(b), "group", int64_t(2));
    om::attr(node0(b), "strides", std::vector<int64_t>{2, 2});
    om::attr(node0(b), "output_padding", std::vector<int64_t>{1, 1});
    std::vector<g::shape_t> shapes;
    const auto y = run(b, {f32({1, 2, 1, 1}, {1, 2})}, &shapes);
    EXPECT_EQ(shapes[0], (g::shape_t{1, 2, 2, 2}));
    EXPECT_EQ(y[0], (std::vector<float>{3.5f, 0.5f, 0.5f, 0.5f, 9, -1, -1, -1}));
}

TEST(OnnxConvTranspose, Refusals) {
    auto with = [](const char *name, const auto &v) {
        om::builder b = conv_transpose_model({1, 1, 2, 2}, {1, 1, 2, 2}, {1, 2, 3, 4});
        om::attr(node0(b), name, v);
        return refusal(b);
    };
    EXPECT_THAT(with("output_shape", std::vector<int64_t>{3, 3}),
                StartsWith("node 'ct' (#0, ConvTranspose): attribute 'output_shape': is not supported"));
    EXPECT_THAT(with("auto_pad", std::string("SAME_UPPER")),
                StartsWith("node 'ct' (#0, ConvTranspose): attribute 'auto_pad': 'SAME_UPPER' is not supported"));
    EXPECT_THAT(with("output_padding", std::vector<int64_t>{1, 0}),
                StartsWith("node 'ct' (#0, ConvTranspose): attribute 'output_padding': [1,0] must be below"));
    EXPECT_THAT(with("group", int64_t(2)),
                StartsWith("node 'ct' (#0, ConvTranspose): attribute 'group': 2 does not fit"));
    EXPECT_THAT(with("kernel_shape", std::vector<int64_t>{3, 3}),
                StartsWith("node 'ct' (#0, ConvTranspose): attribute 'kernel_shape': [3,3] differs"));
    EXPECT_THAT(with("pads", std::vector<int64_t>{2, 2, 2, 2}),
                StartsWith("node 'ct' (#0, ConvTranspose): node 'y': ConvTranspose 'y': the pads leave no output"));
}

// The IR op in the text format: read back, the same values.
TEST(OnnxConvTranspose, TextFormat) {
    auto gr = g::parse("x = Parameter f32[1,1,1,2]\n"
                       "w = Constant f32[1,1,1,2] [1, 3]\n"
                       "y = ConvTranspose(x, w) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,2] "
                       "output_padding=[0,1] group=1\n"
                       "r = Result(y)\n");
    const auto y = g::compiled_graph(*gr).run({f32({1, 1, 1, 2}, {1, 2})});
    EXPECT_EQ(y[0].to_f32(), (std::vector<float>{1, 2, 3, 6, 0}));
    EXPECT_THAT(g::to_text(*gr), HasSubstr("output_padding=[0,1]"));
    EXPECT_THAT(
        [] {
            try {
                g::parse(
                    "x = Parameter f32[1,1,1,2]\nw = Constant f32[1,1,1,2] [1, 3]\ny = ConvTranspose(x, w) bogus=1\n");
            } catch (const qconv::error &e) {
                return std::string(e.what());
            }
            return std::string();
        }(),
        HasSubstr("unknown attribute 'bogus' for ConvTranspose"));
}

// ----------------------------------------------------------- DepthToSpace
om::builder depth_to_space_model(const std::vector<int64_t> &xs, int64_t blocksize, const char *mode) {
    om::builder b = one(12, "DepthToSpace", "d2s", xs);
    if (blocksize) om::attr(node0(b), "blocksize", blocksize);
    if (mode) om::attr(node0(b), "mode", std::string(mode));
    return b;
}

// x [1, 8, 1, 2] = 0..15 (channel k holds 2k, 2k + 1), blocksize 2, C = 2:
// DCR reads channel (2a + b)·2 + c for output channel c at block position
// (a, b), CRD channel (2c + a)·2 + b; DCR is the default.
TEST(OnnxDepthToSpace, DcrAndCrd) {
    const auto x = f32({1, 8, 1, 2}, iota(16));
    std::vector<g::shape_t> shapes;
    const auto dcr = run(depth_to_space_model({1, 8, 1, 2}, 2, "DCR"), {x}, &shapes);
    EXPECT_EQ(shapes[0], (g::shape_t{1, 2, 2, 4}));
    EXPECT_EQ(dcr[0], (std::vector<float>{0, 4, 1, 5, 8, 12, 9, 13, 2, 6, 3, 7, 10, 14, 11, 15}));
    EXPECT_EQ(run(depth_to_space_model({1, 8, 1, 2}, 2, nullptr), {x})[0], dcr[0]);
    const auto crd = run(depth_to_space_model({1, 8, 1, 2}, 2, "CRD"), {x});
    EXPECT_EQ(crd[0], (std::vector<float>{0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15}));
    const auto gr = read(depth_to_space_model({1, 8, 1, 2}, 2, "CRD"));
    EXPECT_EQ(gr->count_ops().at("DepthToSpace"), 1);
    EXPECT_THAT(g::to_text(*gr), HasSubstr("block=[2,2] mode=CRD"));
}

TEST(OnnxDepthToSpace, Refusals) {
    EXPECT_THAT(refusal(depth_to_space_model({1, 8, 1, 2}, 0, "DCR")),
                StartsWith("node 'd2s' (#0, DepthToSpace): attribute 'blocksize': is required"));
    EXPECT_THAT(refusal(depth_to_space_model({1, 6, 1, 2}, 2, "DCR")),
                StartsWith("node 'd2s' (#0, DepthToSpace): attribute 'blocksize': 6 channels do not split into "
                           "blocks of 2x2"));
    EXPECT_THAT(refusal(depth_to_space_model({1, 8, 1, 2}, 2, "XYZ")),
                StartsWith("node 'd2s' (#0, DepthToSpace): attribute 'mode': 'XYZ' is not DCR or CRD"));
    EXPECT_THAT(refusal(depth_to_space_model({1, 8, 1, 2}, -2, "DCR")),
                StartsWith("node 'd2s' (#0, DepthToSpace): attribute 'blocksize': -2 is not in [1, 4096]"));
    EXPECT_THAT(refusal(depth_to_space_model({1, 8, 1, 2}, 5000, "DCR")),
                StartsWith("node 'd2s' (#0, DepthToSpace): attribute 'blocksize': 5000 is not in [1, 4096]"));
    EXPECT_THAT(refusal(depth_to_space_model({8, 1, 2}, 2, "DCR")),
                StartsWith("node 'd2s' (#0, DepthToSpace): input 0 'x': must have rank 4 (NCHW)"));
}

// ------------------------------------------------------ Sqrt, Pow, MatMul
TEST(OnnxElementwise, SqrtAndPowTwo) {
    EXPECT_EQ(run(one(12, "Sqrt", "sq", {4}), {f32({4}, {4, 2.25f, 0, 16})})[0], (std::vector<float>{2, 1.5f, 0, 4}));
    om::builder p = one(12, "Pow", "pow", {3}, {"e"});
    p.init_f32("e", {}, {2.f});
    EXPECT_EQ(run(p, {f32({3}, {1.5f, -3, 0.1f})})[0], (std::vector<float>{2.25f, 9, 0.1f * 0.1f}));
    EXPECT_EQ(read(p)->count_ops().at("Multiply"), 1);
    om::builder q = one(12, "Pow", "pow", {3}, {"e"});
    q.init_f32("e", {}, {3.f});
    EXPECT_THAT(refusal(q), StartsWith("node 'pow' (#0, Pow): input 1 'e': exponent 3 is not supported"));
    om::builder r(12);
    r.input("x", om::FLOAT, {3});
    r.input("e", om::FLOAT, {1});
    r.output("y");
    r.node("Pow", {"x", "e"}, {"y"}, "pow");
    EXPECT_THAT(refusal(r), StartsWith("node 'pow' (#0, Pow): input 1 'e': must be a constant"));
}

// MatMul of two activations (attention's Q·Kᵀ): a [1, 2, 2] · b [1, 2, 2].
TEST(OnnxElementwise, MatMulOfTwoActivations) {
    om::builder b(12);
    b.input("a", om::FLOAT, {1, 2, 2});
    b.input("b", om::FLOAT, {1, 2, 2});
    b.output("y");
    b.node("MatMul", {"a", "b"}, {"y"}, "mm");
    const auto y = run(b, {f32({1, 2, 2}, {1, 2, 3, 4}), f32({1, 2, 2}, {5, 6, 7, 8})});
    EXPECT_EQ(y[0], (std::vector<float>{19, 22, 43, 50}));
}

// ------------------------------------------------------- the PP-OCR models
// The three models of rapidocr-onnxruntime 1.4.4 (scripts/ocr_reference.py
// installs them and compares with ONNX Runtime), when present: read with
// their input's shape, run; the outputs are probabilities of the expected shapes.
TEST(OcrModels, LoadAndRunWhenPresent) {
    const char *env = std::getenv("QCONV_OCR_MODELS");
    const char *home = std::getenv("HOME");
    const std::string dir =
        env ? env : std::string(home ? home : "") + "/.cache/qconv/rapidocr/rapidocr_onnxruntime/models";
    const struct {
        const char *file;
        g::shape_t in, out;
    } models[] = {
        {"ch_PP-OCRv4_det_infer.onnx", {1, 3, 160, 224}, {1, 1, 160, 224}},
        {"ch_ppocr_mobile_v2.0_cls_infer.onnx", {1, 3, 48, 192}, {1, 2}},
        {"ch_PP-OCRv4_rec_infer.onnx", {1, 3, 48, 160}, {1, 20, 6625}},
    };
    for (const auto &m : models)
        if (!std::filesystem::exists(dir + "/" + m.file))
            GTEST_SKIP() << dir << "/" << m.file << " is absent (set QCONV_OCR_MODELS to the models folder of "
                         << "rapidocr-onnxruntime 1.4.4; scripts/ocr_reference.py installs it)";
    for (const auto &m : models) {
        g::onnx_options o;
        o.input_shapes["x"] = m.in;
        auto gr = g::load_onnx(dir + "/" + m.file, o);
        EXPECT_FALSE(gr->is_dynamic()) << m.file;
        const auto y = g::compiled_graph(*gr).run(g::random_inputs(*gr, 1));
        ASSERT_EQ(y.size(), 1u) << m.file;
        EXPECT_EQ(y[0].shape, m.out) << m.file;
        for (float v : y[0].to_f32()) ASSERT_TRUE(v >= 0 && v <= 1) << m.file << ": " << v;
    }
}

} // namespace
