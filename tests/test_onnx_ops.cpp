// The ONNX ops of trained models (graph/io/onnx_reader.cpp; docs/graph.md,
// "ONNX"): BatchNormalization, HardSigmoid, HardSwish, Div, Slice, Split,
// Pad and Resize. Each is read from a small model built here, run, and
// checked against values worked out by hand from the ONNX spec (small
// dyadic numbers, so that every f32 operation is exact and the order of
// operations cannot change them); each has a refusal naming the node and the
// attribute or input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
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

using om::f32;
using om::read;
using om::refusal;
using om::run;

// ------------------------------------------------------ BatchNormalization
om::builder batch_norm_model(int64_t opset = 15) {
    om::builder b(opset);
    b.input("x", om::FLOAT, {1, 2, 2, 2});
    b.output("y");
    // var + eps = 4 and 16: a = scale / 2 = 1 and scale / 4 = 0.125;
    // b = B − mean·a = 1 − 0.5 = 0.5 and −1 − 2·0.125 = −1.25.
    b.init_f32("scale", {2}, {2.f, 0.5f});
    b.init_f32("B", {2}, {1.f, -1.f});
    b.init_f32("mean", {2}, {0.5f, 2.f});
    b.init_f32("var", {2}, {3.f, 15.f});
    om::attr(b.node("BatchNormalization", {"x", "scale", "B", "mean", "var"}, {"y"}, "bn"), "epsilon", 1.f);
    return b;
}

TEST(OnnxBatchNormalization, PerChannelScaleAndShift) {
    for (int64_t opset : {13, 15, 21}) {
        const auto y = run(batch_norm_model(opset), {f32({1, 2, 2, 2}, {0, 1, -2, 4, 8, -8, 0.5f, 16})});
        ASSERT_EQ(y.size(), 1u);
        // channel 0: x·1 + 0.5; channel 1: x·0.125 − 1.25
        EXPECT_EQ(y[0], (std::vector<float>{0.5f, 1.5f, -1.5f, 4.5f, -0.25f, -2.25f, -1.1875f, 0.75f})) << opset;
    }
    auto gr = read(batch_norm_model());
    const auto ops = gr->count_ops();
    EXPECT_EQ(ops.at("Multiply"), 1);
    EXPECT_EQ(ops.at("Add"), 1);
}

// The f32 computation a = scale / sqrtf(var + eps), b = B − mean·a, rounded
// as the reader documents it: 1/sqrtf(3) is not exact.
TEST(OnnxBatchNormalization, ConstantsInF32) {
    om::builder b(15);
    b.input("x", om::FLOAT, {1, 1, 1, 1});
    b.output("y");
    b.init_f32("scale", {1}, {1.f});
    b.init_f32("B", {1}, {0.f});
    b.init_f32("mean", {1}, {0.1f});
    b.init_f32("var", {1}, {2.99999f});
    b.node("BatchNormalization", {"x", "scale", "B", "mean", "var"}, {"y"}, "bn"); // epsilon 1e-5
    const float a = 1.f / std::sqrt(2.99999f + 1e-5f);
    const float shift = 0.f - 0.1f * a;
    const auto y = run(b, {f32({1, 1, 1, 1}, {2.f})});
    EXPECT_EQ(y[0][0], 2.f * a + shift);
}

// Conv → BatchNormalization in a QDQ network: the Multiply and Add join the
// convolution's per-channel chain and the whole is one int8 convolution.
TEST(OnnxBatchNormalization, FoldedIntoALoweredConvolution) {
    om::builder b(13);
    b.input("x", om::FLOAT, {1, 2, 4, 4});
    b.output("y");
    b.init_f32("xs", {}, {0.02f});
    b.init_raw("xz", om::UINT8, {}, {uint8_t(128)});
    std::vector<uint8_t> w(2 * 2 * 9);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint8_t>(static_cast<int8_t>(int(i % 7) - 3));
    b.init_raw("wq", om::INT8, {2, 2, 3, 3}, w);
    b.init_f32("ws", {2}, {0.01f, 0.02f});
    b.init_f32("scale", {2}, {2.f, 0.5f});
    b.init_f32("B", {2}, {0.25f, -0.5f});
    b.init_f32("mean", {2}, {0.125f, 0.5f});
    b.init_f32("var", {2}, {3.f, 15.f});
    b.init_f32("ys", {}, {0.05f});
    b.init_raw("yz", om::UINT8, {}, {uint8_t(100)});
    b.node("QuantizeLinear", {"x", "xs", "xz"}, {"xq"});
    b.node("DequantizeLinear", {"xq", "xs", "xz"}, {"xd"});
    om::attr(b.node("DequantizeLinear", {"wq", "ws"}, {"wd"}), "axis", int64_t(0));
    om::attr(b.node("Conv", {"xd", "wd"}, {"c"}, "conv"), "pads", std::vector<int64_t>{1, 1, 1, 1});
    om::attr(b.node("BatchNormalization", {"c", "scale", "B", "mean", "var"}, {"n"}, "bn"), "epsilon", 1.f);
    b.node("Relu", {"n"}, {"r"});
    b.node("QuantizeLinear", {"r", "ys", "yz"}, {"q"});
    b.node("DequantizeLinear", {"q", "ys", "yz"}, {"y"});
    auto gr = read(b);
    std::vector<float> xv(32);
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(int(i * 5 % 11) - 5) * 0.25f;
    const auto x = f32({1, 2, 4, 4}, xv);
    const auto want = g::compiled_graph(*gr).run({x})[0];
    std::vector<g::rewrite_record> lowered;
    g::run_passes(*gr, {}, &lowered);
    ASSERT_EQ(lowered.size(), 1u);
    EXPECT_TRUE(lowered[0].rewritten) << lowered[0].reason;
    const auto ops = gr->count_ops();
    EXPECT_EQ(ops.count("Multiply"), 0u);
    EXPECT_EQ(ops.count("Add"), 0u);
    EXPECT_EQ(ops.at("QConvolution"), 1);
    const auto got = g::compiled_graph(*gr).run({x})[0];
    // One quantization step at most, on a value at a rounding boundary.
    const auto a = got.to_f32(), e = want.to_f32();
    for (size_t i = 0; i < a.size(); ++i) EXPECT_LE(std::fabs(a[i] - e[i]), 0.05f * 1.001f) << i;
}

// A quantizer's BatchNormalization: its parameters through DequantizeLinear
// of constants (ONNX Runtime's QDQ form), read as the constants
// DequantizeLinear defines, (x − zp)·scale in f32: per tensor with a zero
// point, an int32 bias with scale [1] and zero point [], per axis, and a
// QuantizeLinear of a constant first (a quantizer's weights held in a
// Constant or an initializer it quantizes as an activation).
TEST(OnnxBatchNormalization, DequantizedParameters) {
    om::builder b(13);
    b.input("x", om::FLOAT, {1, 2, 2, 2});
    b.output("y");
    b.init_raw("sq", om::INT8, {2}, {10, 6}); // (10 − 2)·0.25 = 2, (6 − 2)·0.25 = 1
    b.init_f32("ss", {}, {0.25f});
    b.init_raw("sz", om::INT8, {}, {2});
    b.node("DequantizeLinear", {"sq", "ss", "sz"}, {"scale"});
    b.init_raw("bq", om::INT32, {2}, {3, 0, 0, 0, 0xfb, 0xff, 0xff, 0xff}); // 3·0.5 = 1.5, −5·0.5 = −2.5
    b.init_f32("bs", {1}, {0.5f});
    b.init_raw("bz", om::INT32, {}, {0, 0, 0, 0});
    b.node("DequantizeLinear", {"bq", "bs", "bz"}, {"B"});
    // 0.4 / 0.5 = 0.8 → 1, 2.1 / 0.5 = 4.2 → 4; + 10; then (q − 10)·0.5 = 0.5, 2
    b.init_f32("mf", {2}, {0.4f, 2.1f});
    b.init_f32("ms", {}, {0.5f});
    b.init_raw("mz", om::UINT8, {}, {10});
    b.node("QuantizeLinear", {"mf", "ms", "mz"}, {"mq"});
    b.node("DequantizeLinear", {"mq", "ms", "mz"}, {"mean"});
    b.init_raw("vq", om::INT8, {2}, {6, 30}); // per axis: 6·0.5 = 3, 30·0.5 = 15
    b.init_f32("vs", {2}, {0.5f, 0.5f});
    om::attr(b.node("DequantizeLinear", {"vq", "vs"}, {"var"}), "axis", int64_t(0));
    // var + eps = 4, 16: a = 2/2 = 1, 1/4 = 0.25; b = 1.5 − 0.5·1 = 1, −2.5 − 2·0.25 = −3
    om::attr(b.node("BatchNormalization", {"x", "scale", "B", "mean", "var"}, {"y"}, "bn"), "epsilon", 1.f);
    const auto y = run(b, {f32({1, 2, 2, 2}, {0, 1, -2, 4, 8, -8, 0.5f, 16})});
    EXPECT_EQ(y[0], (std::vector<float>{1, 2, -1, 5, -1, -5, -2.875f, 1}));
    const auto ops = read(b)->count_ops();
    EXPECT_EQ(ops.at("Multiply"), 1);
    EXPECT_EQ(ops.at("Add"), 1);
    EXPECT_EQ(ops.count("DequantizeLinear") + ops.count("QuantizeLinear") + ops.count("Convert"), 0u);

    // A DequantizeLinear of an activation is no constant: refused naming the node and the input.
    om::builder a(13);
    a.input("x", om::FLOAT, {1, 2, 2, 2});
    a.input("sq", om::INT8, {2});
    a.output("y");
    a.init_f32("ss", {}, {0.25f});
    a.init_f32("B", {2}, {0, 0});
    a.init_f32("mean", {2}, {0, 0});
    a.init_f32("var", {2}, {1, 1});
    a.node("DequantizeLinear", {"sq", "ss"}, {"scale"});
    a.node("BatchNormalization", {"x", "scale", "B", "mean", "var"}, {"y"}, "bn");
    EXPECT_THAT(refusal(a), ::testing::StartsWith("node 'bn' (#1, BatchNormalization): input 1 'scale': must be a "
                                                  "constant"));
}

// The form ONNX Runtime's quantizer writes for a detector whose weights are
// Constant nodes: QuantizeLinear(f32 weights) → DequantizeLinear (u8 per
// tensor, here zero point 128, so W − Z is within s8), BatchNormalization
// with dequantized parameters. The reader folds both to constants; the
// convolution, BatchNormalization and Relu are one int8 convolution, and with
// power-of-two scales every f32 step of the graph as written is exact, so
// the lowered graph gives the same values (docs/semantics.md §10, item 2).
TEST(OnnxBatchNormalization, QuantizedConstantsLowerExactly) {
    om::builder b(13);
    b.input("x", om::FLOAT, {1, 2, 4, 4});
    b.output("y");
    b.init_f32("xs", {}, {0.125f});
    b.init_raw("xz", om::UINT8, {}, {uint8_t(128)});
    std::vector<float> wf(2 * 2 * 9);
    for (size_t i = 0; i < wf.size(); ++i) wf[i] = static_cast<float>(int(i % 7) - 3) * 0.25f;
    b.init_f32("wf", {2, 2, 3, 3}, wf);
    b.init_f32("ws", {}, {0.25f});
    b.init_raw("wz", om::UINT8, {}, {uint8_t(128)});
    b.init_raw("sq", om::INT8, {2}, {4, 2}); // 4·0.5 = 2, 2·0.5 = 1: a = 1, 0.5
    b.init_f32("ss", {}, {0.5f});
    b.init_raw("bq", om::INT32, {2}, {2, 0, 0, 0, 0xfc, 0xff, 0xff, 0xff}); // 0.5, −1
    b.init_f32("bs", {1}, {0.25f});
    b.init_raw("bz", om::INT32, {}, {0, 0, 0, 0});
    b.init_f32("mean", {2}, {0.25f, 0.5f}); // b = 0.5 − 0.25 = 0.25, −1 − 0.25 = −1.25
    b.init_f32("var", {2}, {3.f, 3.f});
    b.init_f32("ys", {}, {0.125f});
    b.init_raw("yz", om::UINT8, {}, {uint8_t(10)});
    b.node("QuantizeLinear", {"x", "xs", "xz"}, {"xq"});
    b.node("DequantizeLinear", {"xq", "xs", "xz"}, {"xd"});
    b.node("QuantizeLinear", {"wf", "ws", "wz"}, {"wq"});
    b.node("DequantizeLinear", {"wq", "ws", "wz"}, {"wd"});
    b.node("DequantizeLinear", {"sq", "ss"}, {"scale"});
    b.node("DequantizeLinear", {"bq", "bs", "bz"}, {"B"});
    om::attr(b.node("Conv", {"xd", "wd"}, {"c"}, "conv"), "pads", std::vector<int64_t>{1, 1, 1, 1});
    om::attr(b.node("BatchNormalization", {"c", "scale", "B", "mean", "var"}, {"n"}, "bn"), "epsilon", 1.f);
    b.node("Relu", {"n"}, {"r"});
    b.node("QuantizeLinear", {"r", "ys", "yz"}, {"q"});
    b.node("DequantizeLinear", {"q", "ys", "yz"}, {"y"});
    auto gr = read(b);
    std::vector<float> xv(32);
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(int(i * 5 % 11) - 5) * 0.25f;
    const auto x = f32({1, 2, 4, 4}, xv);
    const auto want = g::compiled_graph(*gr).run({x})[0];
    std::vector<g::rewrite_record> lowered;
    g::run_passes(*gr, {}, &lowered);
    ASSERT_EQ(lowered.size(), 1u);
    EXPECT_TRUE(lowered[0].rewritten) << lowered[0].reason;
    EXPECT_EQ(gr->count_ops().at("QConvolution"), 1);
    EXPECT_EQ(g::compiled_graph(*gr).run({x})[0].to_f32(), want.to_f32());
}

TEST(OnnxBatchNormalization, Refusals) {
    om::builder t = batch_norm_model();
    om::attr(*t.graph().mutable_node(0), "training_mode", int64_t(1));
    EXPECT_THAT(refusal(t), ::testing::StartsWith("node 'bn' (#0, BatchNormalization): attribute 'training_mode'"));
    om::builder v = batch_norm_model();
    v.graph().mutable_initializer()->RemoveLast(); // var becomes a graph input
    v.input("var", om::FLOAT, {2});
    EXPECT_THAT(refusal(v), ::testing::StartsWith("node 'bn' (#0, BatchNormalization): input 4 'var': must be a "
                                                  "constant"));
    om::builder z = batch_norm_model();
    z.graph().mutable_initializer(3)->set_raw_data(std::string(8, '\0')); // var 0, epsilon 0
    z.graph().mutable_node(0)->clear_attribute();
    om::attr(*z.graph().mutable_node(0), "epsilon", 0.f);
    EXPECT_THAT(refusal(z), HasSubstr("input 4 'var': input_var + epsilon is not a finite positive value"));
}

// ------------------------------------------------ HardSigmoid, HardSwish, Div
om::builder unary(const std::string &op, int64_t opset, const std::vector<int64_t> &dims) {
    om::builder b(opset);
    b.input("x", om::FLOAT, dims);
    b.output("y");
    b.node(op, {"x"}, {"y"}, "act");
    return b;
}

TEST(OnnxHardSigmoid, ClampedLine) {
    om::builder b = unary("HardSigmoid", 17, {6});
    om::attr(*b.graph().mutable_node(0), "alpha", 0.25f);
    om::attr(*b.graph().mutable_node(0), "beta", 0.5f);
    // max(0, min(1, x/4 + 1/2))
    auto y = run(b, {f32({6}, {-4, -1, 0, 1, 2, 3})});
    EXPECT_EQ(y[0], (std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1, 1}));
    // Defaults alpha 0.2, beta 0.5: 2.5 · 0.2f rounds to 0.5 in f32.
    y = run(unary("HardSigmoid", 13, {4}), {f32({4}, {0, 2.5f, -2.5f, 5})});
    EXPECT_EQ(y[0], (std::vector<float>{0.5f, 1, 0, 1}));
}

TEST(OnnxHardSwish, TimesHardSigmoid) {
    // x · max(0, min(1, x/6 + 1/2)); x · 0.16666667f rounds to x/6 for these x.
    const auto y = run(unary("HardSwish", 14, {7}), {f32({7}, {-4, -3, -1.5f, 0, 0.75f, 1.5f, 6})});
    EXPECT_EQ(y[0], (std::vector<float>{0, 0, -0.375f, 0, 0.46875f, 1.125f, 6}));
    auto gr = read(unary("HardSwish", 14, {7}));
    EXPECT_EQ(gr->count_ops().at("Clamp"), 1);
    EXPECT_EQ(gr->count_ops().at("Multiply"), 2);
}

// The form exporters write: Add(x, 3) → Clip(0, 6) → Div(·, 6) → Mul(x, ·).
TEST(OnnxHardSwish, ExportedAddClipDivMul) {
    om::builder b(17);
    b.input("x", om::FLOAT, {7});
    b.output("y");
    b.init_f32("three", {}, {3.f});
    b.init_f32("zero", {}, {0.f});
    b.init_f32("six", {}, {6.f});
    b.node("Add", {"x", "three"}, {"a"});
    b.node("Clip", {"a", "zero", "six"}, {"c"});
    b.node("Div", {"c", "six"}, {"d"}, "div");
    b.node("Mul", {"x", "d"}, {"y"});
    // min(max(x + 3, 0), 6) / 6 · x
    const auto y = run(b, {f32({7}, {-4, -3, -1.5f, 0, 1.5f, 3, 9})});
    EXPECT_EQ(y[0], (std::vector<float>{0, 0, -0.375f, 0, 1.125f, 3, 9}));
    EXPECT_EQ(read(b)->count_ops().at("Divide"), 1); // 1/6 is not exact: a true division
}

TEST(OnnxDiv, PowersOfTwoMultiplyOthersDivide) {
    om::builder b(17);
    b.input("x", om::FLOAT, {2, 2});
    b.input("z", om::FLOAT, {2, 2});
    b.output("p");
    b.output("q");
    b.output("r");
    b.init_f32("pow2", {2}, {4.f, -0.5f});
    b.init_f32("three", {}, {3.f});
    b.node("Div", {"x", "pow2"}, {"p"});
    b.node("Div", {"x", "three"}, {"q"});
    b.node("Div", {"x", "z"}, {"r"});
    auto gr = read(b);
    EXPECT_EQ(gr->count_ops().at("Multiply"), 1);
    EXPECT_EQ(gr->count_ops().at("Divide"), 2);
    const auto y = run(b, {f32({2, 2}, {1, 2, -3, 6}), f32({2, 2}, {2, -4, 0, 0.5f})});
    EXPECT_EQ(y[0], (std::vector<float>{0.25f, -4, -0.75f, -12}));
    EXPECT_EQ(y[1], (std::vector<float>{1.f / 3.f, 2.f / 3.f, -1, 2}));
    EXPECT_EQ(y[2][0], 0.5f);
    EXPECT_EQ(y[2][1], -0.5f);
    EXPECT_EQ(y[2][2], -INFINITY); // IEEE: −3 / 0
    EXPECT_EQ(y[2][3], 12.f);
}

TEST(OnnxActivations, Refusals) {
    om::builder a = unary("HardSigmoid", 17, {4});
    om::attr(*a.graph().mutable_node(0), "alpha", INFINITY);
    EXPECT_THAT(refusal(a), ::testing::StartsWith("node 'act' (#0, HardSigmoid): attribute 'alpha': is not finite"));
    EXPECT_THAT(refusal(unary("HardSwish", 13, {4})),
                ::testing::StartsWith("node 'act' (#0, HardSwish): HardSwish needs opset 14"));
    om::builder s = unary("HardSwish", 14, {4});
    om::attr(*s.graph().mutable_node(0), "alpha", 0.5f);
    EXPECT_THAT(refusal(s), ::testing::StartsWith("node 'act' (#0, HardSwish): attribute 'alpha': is not supported"));
    om::builder d(17);
    d.input("x", om::INT32, {4});
    d.output("y", om::INT32);
    d.init_raw("two", om::INT32, {}, {2, 0, 0, 0});
    d.node("Div", {"x", "two"}, {"y"}, "div");
    EXPECT_THAT(refusal(d), ::testing::StartsWith("node 'div' (#0, Div): input 0 'x': element type i32 is not "
                                                  "floating point"));
}

// ------------------------------------------------------------ Slice, Split
std::vector<float> iota(int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
    return v;
}

om::builder slice_model(const std::vector<int64_t> &starts, const std::vector<int64_t> &ends,
                        const std::vector<int64_t> &axes, const std::vector<int64_t> &steps,
                        const std::vector<int64_t> &dims = {3, 4}) {
    om::builder b(13);
    b.input("x", om::FLOAT, dims);
    b.output("y");
    b.init_i64("starts", starts);
    b.init_i64("ends", ends);
    std::vector<std::string> in = {"x", "starts", "ends"};
    if (!axes.empty()) b.init_i64("axes", axes), in.push_back("axes");
    else if (!steps.empty()) in.push_back("");
    if (!steps.empty()) b.init_i64("steps", steps), in.push_back("steps");
    b.node("Slice", in, {"y"}, "slice");
    return b;
}

TEST(OnnxSlice, IndicesClampingAndSteps) {
    const auto x = f32({3, 4}, iota(12)); // x[i][j] = 4i + j
    constexpr int64_t big = std::numeric_limits<int64_t>::max();
    std::vector<g::shape_t> shapes;
    // rows 1.. (end clamped to 3); columns from 3 (−1 + 4) down by 2 to the
    // end −5 + 4 = −1 (clamped to −1: down to column 0): columns 3, 1.
    auto y = run(slice_model({1, -1}, {big, -5}, {0, 1}, {1, -2}), {x}, &shapes);
    EXPECT_EQ(shapes[0], (g::shape_t{2, 2}));
    EXPECT_EQ(y[0], (std::vector<float>{7, 5, 11, 9}));
    // axes 0, 1 by default, steps 1.
    y = run(slice_model({0, 1}, {2, 3}, {}, {}), {x});
    EXPECT_EQ(y[0], (std::vector<float>{1, 2, 5, 6}));
    // A negative axis, a start before the beginning (clamped to 0), a step of 3.
    y = run(slice_model({-100}, {big}, {-1}, {3}), {x});
    EXPECT_EQ(y[0], (std::vector<float>{0, 3, 4, 7, 8, 11}));
    // All of a reversed axis: start past the end (clamped to 2), end −big (clamped to −1).
    y = run(slice_model({big}, {-big}, {0}, {-1}), {x});
    EXPECT_EQ(y[0], (std::vector<float>{8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3}));
}

TEST(OnnxSlice, I32IndicesAndARunTimeDimension) {
    om::builder b(13);
    b.input("x", om::FLOAT, {-1, 4});
    b.output("y");
    b.init_raw("starts", om::INT32, {1}, {1, 0, 0, 0});
    b.init_raw("ends", om::INT32, {1}, {3, 0, 0, 0});
    b.init_raw("axes", om::INT32, {1}, {1, 0, 0, 0});
    b.node("Slice", {"x", "starts", "ends", "axes"}, {"y"});
    std::vector<g::shape_t> shapes;
    const auto y = run(b, {f32({2, 4}, iota(8))}, &shapes);
    EXPECT_EQ(shapes[0], (g::shape_t{2, 2}));
    EXPECT_EQ(y[0], (std::vector<float>{1, 2, 5, 6}));
}

om::builder split_model(int64_t opset, const std::vector<int64_t> &dims, int outputs, int64_t axis,
                        const std::vector<int64_t> &sizes, int64_t num_outputs = 0) {
    om::builder b(opset);
    b.input("x", om::FLOAT, dims);
    std::vector<std::string> outs;
    for (int i = 0; i < outputs; ++i) {
        outs.push_back("y" + std::to_string(i));
        b.output(outs.back());
    }
    std::vector<std::string> in = {"x"};
    if (!sizes.empty()) b.init_i64("split", sizes), in.push_back("split");
    auto &n = b.node("Split", in, outs, "split");
    om::attr(n, "axis", axis);
    if (num_outputs) om::attr(n, "num_outputs", num_outputs);
    return b;
}

TEST(OnnxSplit, GivenSizesEqualPartsAndNumOutputs) {
    const auto x = f32({2, 6}, iota(12));
    std::vector<g::shape_t> shapes;
    auto y = run(split_model(13, {2, 6}, 3, -1, {1, 2, 3}), {x}, &shapes);
    ASSERT_EQ(y.size(), 3u);
    EXPECT_EQ(y[0], (std::vector<float>{0, 6}));
    EXPECT_EQ(y[1], (std::vector<float>{1, 2, 7, 8}));
    EXPECT_EQ(y[2], (std::vector<float>{3, 4, 5, 9, 10, 11}));
    EXPECT_EQ(shapes[2], (g::shape_t{2, 3}));
    y = run(split_model(13, {2, 6}, 2, 0, {}), {x});
    EXPECT_EQ(y[0], (std::vector<float>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(y[1], (std::vector<float>{6, 7, 8, 9, 10, 11}));
    // num_outputs 4 of 7: ceil(7/4) = 2 each, the last one 1.
    y = run(split_model(18, {1, 7}, 4, 1, {}, 4), {f32({1, 7}, iota(7))});
    EXPECT_EQ(y[0], (std::vector<float>{0, 1}));
    EXPECT_EQ(y[2], (std::vector<float>{4, 5}));
    EXPECT_EQ(y[3], (std::vector<float>{6}));
    EXPECT_EQ(read(split_model(13, {2, 6}, 3, 1, {1, 2, 3}))->count_ops().at("Slice"), 3);
}

TEST(OnnxSliceSplit, Refusals) {
    om::builder s = slice_model({0}, {2}, {0}, {0});
    EXPECT_THAT(refusal(s), ::testing::StartsWith("node 'slice' (#0, Slice): input 4 'steps': a step of 0"));
    om::builder v(13);
    v.input("x", om::FLOAT, {3, 4});
    v.input("st", om::INT64, {1});
    v.output("y");
    v.init_i64("e", {2});
    v.node("Slice", {"x", "st", "e"}, {"y"}, "slice");
    EXPECT_THAT(refusal(v), ::testing::StartsWith("node 'slice' (#0, Slice): input 1 'st': must be a constant"));
    EXPECT_THAT(refusal(slice_model({2}, {1}, {0}, {})),
                ::testing::AllOf(::testing::StartsWith("node 'slice' (#0, Slice): "),
                                 HasSubstr("the slice of axis 0 (size 3) is empty")));
    EXPECT_THAT(refusal(split_model(13, {2, 6}, 3, 1, {1, 2, 2})),
                ::testing::StartsWith("node 'split' (#0, Split): input 1 'split': the sizes add up to 5"));
    EXPECT_THAT(refusal(split_model(13, {2, 6}, 4, 1, {})),
                ::testing::StartsWith("node 'split' (#0, Split): attribute 'axis': dimension 6 does not split"));
    EXPECT_THAT(refusal(split_model(17, {2, 6}, 2, 1, {}, 2)),
                ::testing::StartsWith("node 'split' (#0, Split): attribute 'num_outputs': needs opset 18"));
    EXPECT_THAT(refusal(split_model(18, {1, 6}, 4, 1, {}, 4)),
                ::testing::StartsWith("node 'split' (#0, Split): attribute 'num_outputs': 4 parts of 2 do not fit"));
    EXPECT_THAT(refusal(split_model(13, {-1, 6}, 2, 0, {1, 1})),
                ::testing::StartsWith("node 'split' (#0, Split): attribute 'axis': dimension 0 of [1,6] follows the "
                                      "run-time dimension"));
}

// ------------------------------------------------------------------- Pad
om::builder pad_model(int64_t opset, const std::vector<int64_t> &pads, const std::vector<float> &value,
                      const std::vector<int64_t> &axes = {}) {
    om::builder b(opset);
    b.input("x", om::FLOAT, {1, 1, 2, 2});
    b.output("y");
    b.init_i64("pads", pads);
    std::vector<std::string> in = {"x", "pads"};
    if (!value.empty()) b.init_f32("v", {}, value), in.push_back("v");
    if (!axes.empty()) {
        if (value.empty()) in.push_back("");
        b.init_i64("axes", axes);
        in.push_back("axes");
    }
    b.node("Pad", in, {"y"}, "pad");
    return b;
}

TEST(OnnxPad, ConstantValueCropAndAxes) {
    const auto x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
    std::vector<g::shape_t> shapes;
    // One row before H, two columns after W, padded with 9.
    auto y = run(pad_model(13, {0, 0, 1, 0, 0, 0, 0, 2}, {9}), {x}, &shapes);
    EXPECT_EQ(shapes[0], (g::shape_t{1, 1, 3, 4}));
    EXPECT_EQ(y[0], (std::vector<float>{9, 9, 9, 9, 1, 2, 9, 9, 3, 4, 9, 9}));
    // A negative pad crops: the first column goes; the value defaults to 0.
    y = run(pad_model(13, {0, 0, 0, -1, 0, 0, 1, 0}, {}), {x}, &shapes);
    EXPECT_EQ(shapes[1], (g::shape_t{1, 1, 3, 1}));
    EXPECT_EQ(y[0], (std::vector<float>{2, 4, 0}));
    // Opset 18's axes: the last dim only, one each side.
    y = run(pad_model(18, {1, 1}, {}, {-1}), {x});
    EXPECT_EQ(y[0], (std::vector<float>{0, 1, 2, 0, 0, 3, 4, 0}));
}

TEST(OnnxPad, Integers) {
    om::builder b(13);
    b.input("x", om::UINT8, {3});
    b.output("y", om::UINT8);
    b.init_i64("pads", {2, 1});
    b.init_raw("v", om::UINT8, {}, {255});
    b.node("Pad", {"x", "pads", "v"}, {"y"});
    auto gr = read(b);
    const auto y = g::compiled_graph(*gr).run({g::tensor::from_values(g::dtype::u8, {3}, {7, 8, 9})});
    EXPECT_EQ(y[0].type, g::dtype::u8);
    EXPECT_EQ(y[0].values(), (std::vector<double>{255, 255, 7, 8, 9, 255}));
}

om::builder pad_mode_model(int64_t opset, const std::string &mode, const std::vector<int64_t> &pads) {
    om::builder b = pad_model(opset, pads, {});
    b.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(3)->set_dim_value(
        3);
    om::attr(*b.graph().mutable_node(0), "mode", mode);
    return b;
}

TEST(OnnxPad, EdgeReflectWrap) {
    const auto x = f32({1, 1, 2, 3}, {1, 2, 3, 4, 5, 6});
    // W: two before, one after. edge repeats the end elements; reflect mirrors
    // about them (−2, −1 → 2, 1; 3 → 1); wrap takes the index modulo 3.
    const std::vector<int64_t> w = {0, 0, 0, 2, 0, 0, 0, 1};
    EXPECT_EQ(run(pad_mode_model(13, "edge", w), {x})[0], (std::vector<float>{1, 1, 1, 2, 3, 3, 4, 4, 4, 5, 6, 6}));
    EXPECT_EQ(run(pad_mode_model(13, "reflect", w), {x})[0], (std::vector<float>{3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5}));
    EXPECT_EQ(run(pad_mode_model(19, "wrap", w), {x})[0], (std::vector<float>{2, 3, 1, 2, 3, 1, 5, 6, 4, 5, 6, 4}));
    // H and W, one before each, reflect: rows 1, 0, 1 and columns 1, 0, 1, 2.
    EXPECT_EQ(run(pad_mode_model(13, "reflect", {0, 0, 1, 1, 0, 0, 0, 0}), {x})[0],
              (std::vector<float>{5, 4, 5, 6, 2, 1, 2, 3, 5, 4, 5, 6}));
}

TEST(OnnxPad, Refusals) {
    EXPECT_THAT(refusal(pad_mode_model(13, "mirror", {0, 0, 1, 1, 0, 0, 1, 1})),
                ::testing::StartsWith("node 'pad' (#0, Pad): attribute 'mode': 'mirror' is not constant, edge, "
                                      "reflect or wrap"));
    EXPECT_THAT(refusal(pad_mode_model(18, "wrap", {0, 0, 1, 1, 0, 0, 1, 1})),
                ::testing::StartsWith("node 'pad' (#0, Pad): attribute 'mode': wrap needs opset 19"));
    EXPECT_THAT(refusal(pad_mode_model(13, "reflect", {0, 0, 0, 3, 0, 0, 0, 0})),
                ::testing::StartsWith("node 'pad' (#0, Pad): input 1 'pads': reflect pads of 3 on dim 3"));
    EXPECT_THAT(refusal(pad_mode_model(13, "edge", {0, 0, 0, -1, 0, 0, 0, 0})),
                ::testing::StartsWith("node 'pad' (#0, Pad): input 1 'pads': negative pads (a crop) with mode edge"));
    EXPECT_THAT(refusal(pad_model(13, {0, 0, 1}, {})),
                ::testing::StartsWith("node 'pad' (#0, Pad): input 1 'pads': holds 3 values, 8 needed"));
    EXPECT_THAT(refusal(pad_model(13, {0, 0, 0, -1, 0, 0, 0, -1}, {})),
                ::testing::AllOf(::testing::StartsWith("node 'pad' (#0, Pad): "), HasSubstr("no empty tensors")));
    om::builder v(13);
    v.input("x", om::FLOAT, {2});
    v.input("v", om::FLOAT, {});
    v.output("y");
    v.init_i64("pads", {1, 1});
    v.node("Pad", {"x", "pads", "v"}, {"y"}, "pad");
    EXPECT_THAT(refusal(v), ::testing::StartsWith("node 'pad' (#0, Pad): input 2 'v': must be a constant"));
}

// ---------------------------------------------------------------- Resize
// Resize of x with the given targets; `roi_empty`: roi is an empty
// initializer (as exporters write it), scales an empty Constant node when
// sizes are given.
om::builder resize_model(const std::vector<int64_t> &dims, const std::string &mode, const std::string &coord,
                         const std::string &nearest, const std::vector<float> &scales,
                         const std::vector<int64_t> &sizes, bool roi_empty = true) {
    om::builder b(13);
    b.input("x", om::FLOAT, dims);
    b.output("y");
    std::vector<std::string> in = {"x", roi_empty ? "roi" : ""};
    if (roi_empty) b.init_f32("roi", {0}, {});
    if (!scales.empty()) {
        b.init_f32("scales", {static_cast<int64_t>(scales.size())}, scales);
        in.push_back("scales");
    } else {
        auto &c = b.node("Constant", {}, {"no_scales"});
        auto *t = c.add_attribute();
        t->set_name("value");
        t->set_type(::onnx::AttributeProto::TENSOR);
        t->mutable_t()->set_data_type(om::FLOAT);
        t->mutable_t()->add_dims(0);
        in.push_back("no_scales");
    }
    if (!sizes.empty()) b.init_i64("sizes", sizes), in.push_back("sizes");
    auto &n = b.node("Resize", in, {"y"}, "resize");
    if (!mode.empty()) om::attr(n, "mode", mode);
    if (!coord.empty()) om::attr(n, "coordinate_transformation_mode", coord);
    if (!nearest.empty()) om::attr(n, "nearest_mode", nearest);
    return b;
}

TEST(OnnxResize, NearestModes) {
    // W 4 → 3 (scale 3/4): half_pixel coordinates (o + 0.5) / 0.75 − 0.5 are
    // 0.17, 1.5, 2.83; asymmetric o / 0.75: 0, 1.33, 2.67; align_corners
    // o · 3 / 2: 0, 1.5, 3.
    const auto x = f32({1, 1, 1, 4}, {10, 20, 30, 40});
    struct c {
        const char *coord, *nearest;
        std::vector<float> want;
    };
    const c cases[] = {
        {"", "", {10, 20, 40}}, // half_pixel, round_prefer_floor (the defaults)
        {"half_pixel", "round_prefer_ceil", {10, 30, 40}},
        {"half_pixel", "floor", {10, 20, 30}},
        {"half_pixel", "ceil", {20, 30, 40}},
        {"asymmetric", "round_prefer_floor", {10, 20, 40}},
        {"asymmetric", "floor", {10, 20, 30}},
        {"align_corners", "round_prefer_floor", {10, 20, 40}},
        {"align_corners", "round_prefer_ceil", {10, 30, 40}},
    };
    for (const auto &k : cases) {
        std::vector<g::shape_t> shapes;
        const auto y = run(resize_model({1, 1, 1, 4}, "", k.coord, k.nearest, {}, {1, 1, 1, 3}), {x}, &shapes);
        EXPECT_EQ(shapes[0], (g::shape_t{1, 1, 1, 3}));
        EXPECT_EQ(y[0], k.want) << k.coord << " " << k.nearest;
    }
    // Scales 2 (asymmetric, floor): each pixel twice along H and W.
    const auto y = run(resize_model({1, 1, 2, 2}, "nearest", "asymmetric", "floor", {1, 1, 2, 2}, {}),
                       {f32({1, 1, 2, 2}, {1, 2, 3, 4})});
    EXPECT_EQ(y[0], (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

TEST(OnnxResize, Bilinear) {
    const auto x = f32({1, 1, 2, 2}, {0, 4, 8, 12});
    // half_pixel, scale 2: coordinates −0.25 (clamped to 0), 0.25, 0.75, 1.25
    // (clamped to 1) along each dim: rows [0, 1, 3, 4] and [8, 9, 11, 12],
    // mixed 1:0, 3:1, 1:3, 0:1.
    auto y = run(resize_model({1, 1, 2, 2}, "linear", "", "", {1, 1, 2, 2}, {}), {x});
    EXPECT_EQ(y[0], (std::vector<float>{0, 1, 3, 4, 2, 3, 5, 6, 6, 7, 9, 10, 8, 9, 11, 12}));
    // align_corners to 3x3: coordinates 0, 0.5, 1.
    y = run(resize_model({1, 1, 2, 2}, "linear", "align_corners", "", {}, {1, 1, 3, 3}), {x});
    EXPECT_EQ(y[0], (std::vector<float>{0, 2, 4, 4, 6, 8, 8, 10, 12}));
    // To 1x1: half_pixel reads the centre (0.5, 0.5), pytorch_half_pixel the corner.
    y = run(resize_model({1, 1, 2, 2}, "linear", "half_pixel", "", {}, {1, 1, 1, 1}), {x});
    EXPECT_EQ(y[0], (std::vector<float>{6}));
    y = run(resize_model({1, 1, 2, 2}, "linear", "pytorch_half_pixel", "", {}, {1, 1, 1, 1}), {x});
    EXPECT_EQ(y[0], (std::vector<float>{0}));
    // asymmetric, W × 2 (scales, no roi): o / 2 = 0, 0.5, 1, 1.5 (clamped to 1).
    y = run(resize_model({1, 1, 1, 2}, "linear", "asymmetric", "", {1, 1, 1, 2}, {}, false),
            {f32({1, 1, 1, 2}, {0, 4})});
    EXPECT_EQ(y[0], (std::vector<float>{0, 2, 4, 4}));
}

TEST(OnnxResize, NearestOfIntegers) {
    om::builder b(13);
    b.input("x", om::UINT8, {1, 1, 1, 2});
    b.output("y", om::UINT8);
    b.init_i64("sizes", {1, 1, 1, 4});
    auto &n = b.node("Resize", {"x", "", "", "sizes"}, {"y"});
    om::attr(n, "coordinate_transformation_mode", std::string("asymmetric"));
    om::attr(n, "nearest_mode", std::string("floor"));
    auto gr = read(b);
    const auto y = g::compiled_graph(*gr).run({g::tensor::from_values(g::dtype::u8, {1, 1, 1, 2}, {7, 250})});
    EXPECT_EQ(y[0].type, g::dtype::u8);
    EXPECT_EQ(y[0].values(), (std::vector<double>{7, 7, 250, 250}));
}

TEST(OnnxResize, Refusals) {
    om::builder m = resize_model({1, 1, 2, 2}, "cubic", "", "", {1, 1, 2, 2}, {});
    EXPECT_THAT(refusal(m), ::testing::StartsWith("node 'resize' (#0, Resize): attribute 'mode': 'cubic' is not "
                                                  "supported"));
    m = resize_model({1, 1, 2, 2}, "", "tf_crop_and_resize", "", {1, 1, 2, 2}, {});
    EXPECT_THAT(refusal(m), ::testing::StartsWith("node 'resize' (#0, Resize): attribute "
                                                  "'coordinate_transformation_mode'"));
    m = resize_model({1, 2, 2, 2}, "", "", "", {1, 2, 2, 2}, {});
    EXPECT_THAT(refusal(m), ::testing::StartsWith("node 'resize' (#0, Resize): input 2 'scales': resizes dimension 1"));
    m = resize_model({1, 1, 2, 2}, "", "", "", {1, 1, 2, 2}, {1, 1, 4, 4});
    EXPECT_THAT(refusal(m), ::testing::StartsWith("node 'resize' (#0, Resize): input 3 'sizes': sizes cannot be given "
                                                  "with scales"));
    m = resize_model({1, 1, 2, 2}, "", "", "", {}, {});
    EXPECT_THAT(refusal(m), ::testing::StartsWith("node 'resize' (#1, Resize): input 2 'no_scales': one of scales"));
    // An empty tensor is read only where it stands for an absent optional input.
    om::builder e(13);
    e.input("x", om::FLOAT, {2});
    e.output("y");
    e.init_f32("nothing", {0}, {});
    e.node("Add", {"x", "nothing"}, {"y"}, "add");
    EXPECT_THAT(refusal(e), ::testing::StartsWith("node 'add' (#0, Add): input 1 'nothing': is an empty tensor (shape "
                                                  "[0])"));
}

// ------------------------------------------------------------- the driver
// Every op of this file in one model: BatchNormalization → HardSwish → Pad →
// Slice → Split, then Div → Resize (bilinear) and HardSigmoid.
om::builder trained_ops_model() {
    om::builder b(18);
    b.input("x", om::FLOAT, {1, 4, 6, 6});
    b.output("y0");
    b.output("y1");
    b.init_f32("scale", {4}, {1, 2, 0.5f, 1});
    b.init_f32("B", {4}, {0, 0.25f, -0.5f, 1});
    b.init_f32("mean", {4}, {0, 0.5f, 1, -1});
    b.init_f32("var", {4}, {1, 3, 0.25f, 1});
    b.init_i64("pads", {0, 0, 1, 1, 0, 0, 1, 1});
    b.init_i64("starts", {1});
    b.init_i64("ends", {7});
    b.init_i64("axes", {2});
    b.init_f32("scales", {4}, {1, 1, 2, 2});
    b.init_f32("three", {}, {3.f});
    b.node("BatchNormalization", {"x", "scale", "B", "mean", "var"}, {"bn"});
    b.node("HardSwish", {"bn"}, {"hs"});
    b.node("Pad", {"hs", "pads"}, {"p"});
    b.node("Slice", {"p", "starts", "ends", "axes"}, {"s"});
    auto &split = b.node("Split", {"s"}, {"a", "c"}, "split");
    om::attr(split, "num_outputs", int64_t(2));
    om::attr(split, "axis", int64_t(2));
    b.node("Div", {"a", "three"}, {"d"});
    om::attr(b.node("Resize", {"d", "", "scales"}, {"y0"}), "mode", std::string("linear"));
    b.node("HardSigmoid", {"c"}, {"y1"});
    return b;
}

// The upsampling ops of detectors: DepthToSpace (CRD) and a ConvTranspose
// whose kernel is its stride, with a bias (the pass makes it a 1x1
// Convolution and a DepthToSpace).
om::builder upsample_ops_model() {
    om::builder b(13);
    b.input("x", om::FLOAT, {1, 8, 3, 4});
    b.output("y");
    std::vector<float> w(2 * 3 * 2 * 2);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>(i % 7) - 3) * 0.25f;
    b.init_f32("w", {2, 3, 2, 2}, w);
    b.init_f32("b", {3}, {0.5f, -1.f, 2.f});
    auto &d2s = b.node("DepthToSpace", {"x"}, {"d"}, "d2s");
    om::attr(d2s, "blocksize", int64_t(2));
    om::attr(d2s, "mode", std::string("CRD"));
    auto &ct = b.node("ConvTranspose", {"d", "w", "b"}, {"y"}, "ct");
    om::attr(ct, "strides", std::vector<int64_t>{2, 2});
    om::attr(ct, "kernel_shape", std::vector<int64_t>{2, 2});
    return b;
}

// The model runs through `qconv-driver graph` (as read and after the passes,
// agreeing); a refused one exits with status 2 naming the node.
TEST(OnnxOpsDriver, RunsTheOpsAndRefusesWithStatus2) {
    const std::string dir = ::testing::TempDir() + "/onnx_ops_driver";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    om::builder b = trained_ops_model();
    b.save(dir + "/ops.onnx");
    const auto r = qconv::test::run_driver({"graph", dir + "/ops.onnx", "--reps=1"});
    EXPECT_EQ(r.rc, 0) << r.out << r.err;
    EXPECT_THAT(r.out, HasSubstr("status=ok"));
    upsample_ops_model().save(dir + "/upsample.onnx");
    const auto u = qconv::test::run_driver({"graph", dir + "/upsample.onnx", "--reps=1"});
    EXPECT_EQ(u.rc, 0) << u.out << u.err;
    EXPECT_THAT(u.out, HasSubstr("status=ok"));
    EXPECT_THAT(u.out, HasSubstr("node=y_conv_as_conv op=Convolution"));
    EXPECT_THAT(u.out, HasSubstr("op=DepthToSpace"));
    om::builder bad = resize_model({1, 1, 2, 2}, "cubic", "", "", {1, 1, 2, 2}, {});
    bad.save(dir + "/bad.onnx");
    const auto e = qconv::test::run_driver({"graph", dir + "/bad.onnx"});
    EXPECT_EQ(e.rc, 2);
    EXPECT_THAT(e.err, HasSubstr("node 'resize' (#0, Resize): attribute 'mode'"));
}

// ------------------------------------------------------------ the IR text
// The new IR ops in the text format: read, run, and errors naming the line.
TEST(GraphTextOps, SlicePadResizeDivide) {
    auto gr = g::parse("x = Parameter f32[1,1,2,4]\n"
                       "s = Slice(x) starts=[-1,0] ends=[-4,9223372036854775807] axes=[3,2] steps=[-2,1]\n"
                       "p = Pad(s) pads_begin=[0,0,0,1] pads_end=[0,0,0,0] mode=edge\n"
                       "r = Resize(p) mode=nearest coordinate_mode=asymmetric nearest_mode=floor scales=[1,1.5]\n"
                       "two = Constant f32[] [2]\n"
                       "d = Divide(r, two)\n"
                       "o = Result(d)\n");
    const auto y = g::compiled_graph(*gr).run({f32({1, 1, 2, 4}, {0, 1, 2, 3, 4, 5, 6, 7})});
    // Columns 3, 1 (the end −4 + 4 = 0 is exclusive); the first repeated; W 3 → floor(3 · 1.5) = 4 reading columns o / 1.5 = 0, 0, 1, 2; halved.
    EXPECT_EQ(y[0].shape, (g::shape_t{1, 1, 2, 4}));
    EXPECT_EQ(y[0].to_f32(), (std::vector<float>{1.5f, 1.5f, 1.5f, 0.5f, 3.5f, 3.5f, 3.5f, 2.5f}));
    EXPECT_EQ(g::parse(g::to_text(*gr))->size(), gr->size());
    const std::pair<const char *, const char *> bad[] = {
        {"x = Parameter f32[4]\ns = Slice(x) starts=[0]\no = Result(s)\n", "line 2: Slice needs starts"},
        {"x = Parameter f32[4]\ns = Slice(x) starts=[2] ends=[1]\no = Result(s)\n", "line 2: Slice 's': the slice"},
        {"x = Parameter f32[4]\np = Pad(x) pads_begin=[1] pads_end=[1] mode=mirror\no = Result(p)\n",
         "line 2: mode must be one of constant, edge, reflect, wrap"},
        {"x = Parameter f32[1,4]\nr = Resize(x) mode=linear\no = Result(r)\n", "line 2: Resize needs scales"},
        {"x = Parameter i32[4]\nd = Divide(x, x)\no = Result(d)\n", "line 2: Divide 'd': a must be f32"},
    };
    for (const auto &[text, says] : bad) {
        try {
            g::parse(text);
            ADD_FAILURE() << text;
        } catch (const qconv::error &e) {
            EXPECT_THAT(e.what(), ::testing::StartsWith(says)) << text;
        }
    }
}

// A seed of tests/fuzz/fuzz_onnx.cpp's corpus, written by
//   QCONV_ONNX_CORPUS=tests/fuzz/corpus/onnx build/tests/test_onnx_ops
//     --gtest_also_run_disabled_tests --gtest_filter='OnnxOpsCorpus.*'
TEST(OnnxOpsCorpus, DISABLED_WriteFuzzSeed) {
    const char *dir = std::getenv("QCONV_ONNX_CORPUS");
    if (!dir) GTEST_SKIP() << "QCONV_ONNX_CORPUS is not set";
    std::filesystem::create_directories(dir);
    trained_ops_model().save(std::string(dir) + "/trained_ops.onnx");
    upsample_ops_model().save(std::string(dir) + "/upsample_ops.onnx");
}

} // namespace
