// The ONNX reader (graph/io/onnx_reader.cpp) and the .npy files (graph/io/npy.cpp):
// models built in C++ (tests/support/onnx_models.h) read, run, and match an
// independent computation and their own .qg text; the compressed-weight FFNs
// run as compressed MatMuls; every refusal names the node, op and attribute;
// `qconv-driver graph model.onnx --save --input --output-dir`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include "qconv/graph.h"
#include "qconv/graph_onnx.h"
#include "tests/support/onnx_models.h"
#include "tests/support/quick.h"
#include "tests/support/run_driver.h"

namespace {

namespace g = qconv::graph;
namespace om = qconv::test::onnx_model;
using ::testing::HasSubstr;

std::string temp_dir(const std::string &name) {
    const std::string d = ::testing::TempDir() + "/onnx_" + name;
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
}

std::unique_ptr<g::graph> read(const om::builder &b) {
    const std::string s = b.bytes();
    return g::parse_onnx(s.data(), s.size());
}

// max |a − ref| / max |ref|
double rel_diff(const std::vector<float> &a, const std::vector<double> &ref) {
    EXPECT_EQ(a.size(), ref.size());
    double d = 0, m = 0;
    for (size_t i = 0; i < a.size() && i < ref.size(); ++i) {
        d = std::max(d, std::fabs(a[i] - ref[i]));
        m = std::max(m, std::fabs(ref[i]));
    }
    return m > 0 ? d / m : d;
}

g::tensor input(const g::shape_t &s, uint64_t seed) {
    return g::tensor::from_f32(g::dtype::f32, s, om::uniform(seed, static_cast<size_t>(g::elems_of(s)), -1.f, 1.f));
}

// The graph's text loads back and computes the same values.
void expect_text_round_trip(const g::graph &gr, const std::vector<g::tensor> &in) {
    const std::string text = g::to_text(gr);
    auto back = g::parse(text);
    EXPECT_EQ(g::to_text(*back), text);
    const auto a = g::compiled_graph(gr).run(in), b = g::compiled_graph(*back).run(in);
    ASSERT_EQ(a.size(), b.size());
    for (size_t r = 0; r < a.size(); ++r) EXPECT_EQ(a[r].bytes, b[r].bytes) << "output " << r;
}

// --------------------------------------------------------------- the FFN
struct ffn_case {
    const char *name;
    int64_t hidden, inner, block;
    enum { nbits, nbits_typed_zp, dequantize } kind;
    std::vector<int64_t> tokens;
};
// The parameter as the test list shows it (readable_test_names).
void PrintTo(const ffn_case &c, std::ostream *os) { *os << c.name; }

class OnnxFfn : public ::testing::TestWithParam<ffn_case> {};

TEST_P(OnnxFfn, RunsAsCompressedMatMulsAndMatchesTheFormula) {
    const ffn_case &c = GetParam();
    if (c.hidden > 256 && qconv::test::quick_mode()) GTEST_SKIP() << "the full-size FFN in quick mode";
    const auto w = om::make_ffn_weights(c.hidden, c.inner, c.block, 7);
    const om::builder b = c.kind == ffn_case::dequantize ? om::ffn_dequantize(w)
                                                         : om::ffn_matmulnbits(w, c.kind == ffn_case::nbits_typed_zp);
    auto gr = read(b);
    ASSERT_TRUE(gr->is_dynamic()); // the symbolic token count is `?`
    const auto counts = gr->count_ops();
    EXPECT_EQ(counts.at("MatMul"), 2);
    EXPECT_EQ(counts.at("Gelu"), 1); // the erf form read as one Gelu
    EXPECT_EQ(counts.count("Convolution"), 0u);

    g::compiled_graph cg(*gr);
    int compressed = 0, fused = 0;
    for (const auto &[id, impl] : cg.impls()) {
        EXPECT_THAT(impl, ::testing::Not(HasSubstr("graph:matmul_f32"))) << id;
        if (impl.find("group" + std::to_string(c.block)) != std::string::npos && impl.find("u4") != std::string::npos) {
            ++compressed;
            EXPECT_THAT(impl, HasSubstr("zp:per_group")) << id;
            EXPECT_THAT(impl, HasSubstr("bias")) << id;
        }
        fused += impl.rfind("fused into", 0) == 0;
    }
    EXPECT_EQ(compressed, 2) << "both MatMuls run on the compressed-MatMul primitive";
    EXPECT_GE(fused, 2 * 6);

    for (int64_t t : c.tokens) {
        const auto x = input({1, t, c.hidden}, 100 + t);
        const auto y = cg.run({x});
        ASSERT_EQ(y.size(), 1u);
        EXPECT_EQ(y[0].shape, (g::shape_t{1, t, c.hidden}));
        EXPECT_LE(rel_diff(y[0].to_f32(), om::ffn_reference(w, x.to_f32(), t)), 2e-5) << "tokens " << t;
    }
    if (c.hidden <= 256) expect_text_round_trip(*gr, {input({1, 3, c.hidden}, 5)});
}

INSTANTIATE_TEST_SUITE_P(
    Models, OnnxFfn,
    ::testing::Values(ffn_case{"MatMulNBits", 256, 512, 128, ffn_case::nbits, {1, 7}},
                      ffn_case{"MatMulNBitsTypedZeroPoints", 256, 512, 64, ffn_case::nbits_typed_zp, {3}},
                      ffn_case{"BlockedDequantizeLinear", 256, 512, 128, ffn_case::dequantize, {1, 7}},
                      ffn_case{"MatMulNBitsFull", 1024, 4096, 128, ffn_case::nbits, {1, 32}},
                      ffn_case{"BlockedDequantizeLinearFull", 1024, 4096, 128, ffn_case::dequantize, {32}}),
    [](const auto &info) { return std::string(info.param.name); });

// ------------------------------------------------------------- small CNN
TEST(OnnxCnn, ReadsRunsAndMatches) {
    auto gr = read(om::small_cnn(3));
    const auto counts = gr->count_ops();
    EXPECT_EQ(counts.at("Convolution"), 2);
    EXPECT_EQ(counts.at("GroupConvolution"), 1);
    EXPECT_EQ(counts.at("MatMul"), 1);
    const auto x = input({1, 4, 8, 8}, 9);
    const auto y = g::compiled_graph(*gr).run({x});
    ASSERT_EQ(y.size(), 1u);
    EXPECT_EQ(y[0].shape, (g::shape_t{1, 10}));
    EXPECT_LE(rel_diff(y[0].to_f32(), om::small_cnn_reference(3, x.to_f32())), 1e-5);
    expect_text_round_trip(*gr, {x});
    // Names: the Parameter and the Result keep the ONNX names; nodes say where they came from.
    EXPECT_EQ(gr->parameters()[0]->friendly_name, "x");
    EXPECT_EQ(gr->results()[0]->friendly_name, "y");
    EXPECT_EQ(gr->find("c1")->rt_info.at("origin"), "onnx:conv1");
}

TEST(OnnxCnn, ExternalDataMatchesInlineData) {
    const std::string dir = temp_dir("external");
    om::builder b = om::small_cnn(4);
    b.externalize("weights.bin");
    b.save(dir + "/model.onnx");
    auto ext = g::load_file(dir + "/model.onnx"); // by extension
    auto inl = read(om::small_cnn(4));
    const auto x = input({1, 4, 8, 8}, 11);
    EXPECT_EQ(g::compiled_graph(*ext).run({x})[0].bytes, g::compiled_graph(*inl).run({x})[0].bytes);
    // From memory there is no folder: external data is refused.
    const std::string s = b.bytes();
    try {
        g::parse_onnx(s.data(), s.size());
        ADD_FAILURE() << "external data read without a folder";
    } catch (const qconv::error &e) {
        EXPECT_THAT(e.what(), HasSubstr("initializer 'conv1.weight'"));
        EXPECT_THAT(e.what(), HasSubstr("model's folder"));
    }
    // A short data file is a truncated model.
    std::filesystem::resize_file(dir + "/weights.bin", 100);
    try {
        g::load_file(dir + "/model.onnx");
        ADD_FAILURE() << "truncated external data read";
    } catch (const qconv::error &e) {
        EXPECT_THAT(e.what(), HasSubstr("truncated"));
        EXPECT_THAT(e.what(), HasSubstr("model.onnx"));
    }
}

// Transpose, Cast, Sub, Identity, Relu, tanh Gelu (opset 20) and Constant tensors.
TEST(OnnxOps, ElementwiseAndLayoutOps) {
    om::builder b(20);
    b.input("x", om::FLOAT, {2, 3});
    b.output("y");
    auto &k = b.node("Constant", {}, {"k"}, "k");
    auto *a = k.add_attribute();
    a->set_name("value");
    a->set_type(::onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(om::FLOAT);
    a->mutable_t()->add_dims(2);
    for (float v : {0.25f, -0.5f}) a->mutable_t()->add_float_data(v);
    b.node("Transpose", {"x"}, {"t"}, "t");                                       // [3, 2]
    om::attr(b.node("Cast", {"t"}, {"h"}, "to_f16"), "to", int64_t(om::FLOAT16)); // rounds to f16
    om::attr(b.node("Cast", {"h"}, {"f"}, "to_f32"), "to", int64_t(om::FLOAT));
    b.node("Sub", {"f", "k"}, {"s"}, "sub");
    b.node("Identity", {"s"}, {"i"}, "id");
    b.node("Relu", {"i"}, {"r"}, "relu");
    om::attr(b.node("Gelu", {"r"}, {"y"}, "gelu"), "approximate", std::string("tanh"));
    auto gr = read(b);
    const auto x = input({2, 3}, 21);
    const auto y = g::compiled_graph(*gr).run({x})[0];
    ASSERT_EQ(y.shape, (g::shape_t{3, 2}));
    const float kv[2] = {0.25f, -0.5f};
    std::vector<double> ref;
    for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 2; ++c) {
            const double h = qconv::f16_to_f32(qconv::f32_to_f16(x.to_f32()[c * 3 + r]));
            const double v = std::max(h - kv[c], 0.0);
            ref.push_back(0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
        }
    EXPECT_LE(rel_diff(y.to_f32(), ref), 1e-6);
}

// The erf form of Gelu in the orders exporters write it is read as one Gelu.
class OnnxGeluErfForm : public ::testing::TestWithParam<int> {};

TEST_P(OnnxGeluErfForm, IsOneGelu) {
    om::builder b(17);
    b.input("x", om::FLOAT, {2, 8});
    b.output("y");
    b.init_f32("inv_sqrt2", {1}, {0.70710678f});
    b.init_f32("sqrt2", {}, {1.4142135f});
    b.init_f32("one", {}, {1.f});
    b.init_f32("half", {}, {0.5f});
    if (GetParam() == 0) b.node("Mul", {"inv_sqrt2", "x"}, {"d"}); // x·(1/√2), the constant first
    else b.node("Div", {"x", "sqrt2"}, {"d"});
    b.node("Erf", {"d"}, {"e"});
    b.node("Add", {"one", "e"}, {"s"});
    switch (GetParam()) {
    case 0: // (x·(1+erf))·0.5
        b.node("Mul", {"x", "s"}, {"m"});
        b.node("Mul", {"m", "half"}, {"y"});
        break;
    case 1: // ((1+erf)·0.5)·x
        b.node("Mul", {"s", "half"}, {"m"});
        b.node("Mul", {"x", "m"}, {"y"});
        break;
    default: // (x·0.5)·(1+erf)
        b.node("Mul", {"half", "x"}, {"h"});
        b.node("Mul", {"h", "s"}, {"y"});
        break;
    }
    auto gr = read(b);
    const auto ops = gr->count_ops();
    EXPECT_EQ(ops.at("Gelu"), 1);
    EXPECT_EQ(ops.count("Multiply") + ops.count("Add"), 0u);
    const auto x = input({2, 8}, 3);
    const auto y = g::compiled_graph(*gr).run({x})[0];
    std::vector<double> ref;
    for (float v : x.to_f32()) ref.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    EXPECT_LE(rel_diff(y.to_f32(), ref), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Orders, OnnxGeluErfForm, ::testing::Values(0, 1, 2));

// A value the pattern's inner nodes compute that something else reads keeps the
// pattern from matching: it runs as written, through the IR's Erf.
TEST(OnnxGeluErfForm, SharedInnerValueIsNotRewritten) {
    om::builder b(17);
    b.input("x", om::FLOAT, {2, 8});
    b.output("y");
    b.output("e");
    b.init_f32("sqrt2", {}, {1.4142135f});
    b.init_f32("one", {}, {1.f});
    b.init_f32("half", {}, {0.5f});
    b.node("Div", {"x", "sqrt2"}, {"d"});
    b.node("Erf", {"d"}, {"e"}, "erf");
    b.node("Add", {"e", "one"}, {"s"});
    b.node("Mul", {"x", "s"}, {"m"});
    b.node("Mul", {"m", "half"}, {"y"});
    auto gr = read(b);
    const auto ops = gr->count_ops();
    EXPECT_EQ(ops.count("Gelu"), 0u);
    EXPECT_EQ(ops.at("Erf"), 1);
    const auto x = input({2, 8}, 4);
    const auto out = g::compiled_graph(*gr).run({x});
    std::vector<double> ref_y, ref_e;
    for (float v : x.to_f32()) {
        ref_e.push_back(std::erf(double(v / 1.4142135f)));
        ref_y.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    }
    EXPECT_LE(rel_diff(out[0].to_f32(), ref_y), 1e-6);
    EXPECT_LE(rel_diff(out[1].to_f32(), ref_e), 1e-6);
}

// ---------------------------------------------------- quantized-CNN ops
// Each op read from ONNX, run, and checked against a computation written here
// from the ONNX spec (not from the IR's reference executor).
std::vector<uint8_t> bytes_of(const std::vector<int32_t> &v) {
    std::vector<uint8_t> r(v.size() * 4);
    std::memcpy(r.data(), v.data(), r.size());
    return r;
}
std::vector<uint8_t> bytes_u8(const std::vector<int> &v) { // one byte each (u8 / i8)
    std::vector<uint8_t> r;
    for (int x : v) r.push_back(static_cast<uint8_t>(x));
    return r;
}
// ONNX QuantizeLinear on one value: x / s in f32, half to even, + zp, saturated.
int quantize_value(float x, float s, int zp, int lo, int hi) {
    const float q = std::nearbyint(x / s);
    return static_cast<int>(std::clamp(q + static_cast<float>(zp), float(lo), float(hi)));
}
std::vector<float> run_one(const om::builder &b, const std::vector<g::tensor> &in) {
    auto gr = read(b);
    const auto y = g::compiled_graph(*gr).run(in);
    EXPECT_EQ(y.size(), 1u);
    return y.empty() ? std::vector<float>{} : y[0].to_f32();
}
g::tensor u8_input(const g::shape_t &s, uint64_t seed) {
    const auto v = om::integers(seed, static_cast<size_t>(g::elems_of(s)), 0, 255);
    return g::tensor::from_values(g::dtype::u8, s, std::vector<double>(v.begin(), v.end()));
}

TEST(OnnxQuantized, QdqConvBlockPerTensorAndPerChannel) {
    // x → Q/DQ (u8 per tensor) → Conv(DQ(w i8 per channel, axis 0), DQ(b i32, x_s·w_s)) → Relu →
    // Q/DQ (u8), the layout of ONNX Runtime's static quantizer; then a per-channel (axis 1) Q/DQ.
    const int C = 4, OC = 6, H = 6, W = 5;
    om::builder b(17);
    b.input("x", om::FLOAT, {1, C, H, W});
    b.output("y");
    const float xs = 0.011f, ys = 0.017f;
    const int xz = 121, yz = 3;
    const auto wq = om::integers(11, OC * C * 9, -127, 127);
    const auto ws = om::uniform(12, OC, 0.002f, 0.01f);
    const auto bq = om::integers(13, OC, -3000, 3000);
    std::vector<float> bs(OC);
    for (int o = 0; o < OC; ++o) bs[o] = xs * ws[o];
    std::vector<float> cs = om::uniform(14, OC, 0.01f, 0.03f);
    std::vector<int> cz = om::integers(15, OC, 0, 20);
    b.init_f32("xs", {}, {xs});
    b.init_raw("xz", om::UINT8, {}, {uint8_t(xz)});
    b.init_raw("wq", om::INT8, {OC, C, 3, 3}, bytes_u8(wq));
    b.init_f32("ws", {OC}, ws);
    b.init_raw("wz", om::INT8, {OC}, std::vector<uint8_t>(OC, 0));
    b.init_raw("bq", om::INT32, {OC}, bytes_of(std::vector<int32_t>(bq.begin(), bq.end())));
    b.init_f32("bs", {OC}, bs);
    b.init_f32("ys", {}, {ys});
    b.init_raw("yz", om::UINT8, {}, {uint8_t(yz)});
    b.init_f32("cs", {OC}, cs);
    b.init_raw("cz", om::UINT8, {OC}, bytes_u8(cz));
    b.node("QuantizeLinear", {"x", "xs", "xz"}, {"xq"});
    b.node("DequantizeLinear", {"xq", "xs", "xz"}, {"xd"});
    om::attr(b.node("DequantizeLinear", {"wq", "ws", "wz"}, {"wd"}), "axis", int64_t(0));
    om::attr(b.node("DequantizeLinear", {"bq", "bs"}, {"bd"}), "axis", int64_t(0));
    auto &conv = b.node("Conv", {"xd", "wd", "bd"}, {"c"}, "conv");
    om::attr(conv, "pads", std::vector<int64_t>{1, 1, 1, 1});
    b.node("Relu", {"c"}, {"r"});
    b.node("QuantizeLinear", {"r", "ys", "yz"}, {"rq"});
    b.node("DequantizeLinear", {"rq", "ys", "yz"}, {"rd"});
    om::attr(b.node("QuantizeLinear", {"rd", "cs", "cz"}, {"pq"}), "axis", int64_t(1));
    om::attr(b.node("DequantizeLinear", {"pq", "cs", "cz"}, {"y"}), "axis", int64_t(1));
    auto gr = read(b);
    const auto ops = gr->count_ops();
    EXPECT_EQ(ops.at("QuantizeLinear"), 3);
    EXPECT_EQ(ops.at("DequantizeLinear"), 3); // activations; the constants' are Convert/Multiply chains
    EXPECT_EQ(ops.at("Convolution"), 1);
    const auto x = input({1, C, H, W}, 16);
    const auto y = g::compiled_graph(*gr).run({x})[0];
    ASSERT_EQ(y.type, g::dtype::f32);
    // Reference in double from the spec, the quantizations in f32 as ONNX writes them.
    const auto xv = x.to_f32();
    std::vector<double> xd(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) xd[i] = (quantize_value(xv[i], xs, xz, 0, 255) - xz) * double(xs);
    int differ = 0, total = 0;
    double worst = 0;
    for (int o = 0; o < OC; ++o)
        for (int i = 0; i < H; ++i)
            for (int j = 0; j < W; ++j) {
                double acc = bq[o] * double(bs[o]);
                for (int c = 0; c < C; ++c)
                    for (int ki = 0; ki < 3; ++ki)
                        for (int kj = 0; kj < 3; ++kj) {
                            const int ii = i + ki - 1, jj = j + kj - 1;
                            if (ii < 0 || ii >= H || jj < 0 || jj >= W) continue;
                            acc += xd[(c * H + ii) * W + jj] * (wq[((o * C + c) * 3 + ki) * 3 + kj] * double(ws[o]));
                        }
                const float r = static_cast<float>(std::max(acc, 0.0));
                const float rd = (quantize_value(r, ys, yz, 0, 255) - yz) * ys;
                const float want = (quantize_value(rd, cs[o], cz[o], 0, 255) - cz[o]) * cs[o];
                const float got = y.to_f32()[(o * H + i) * W + j];
                ++total;
                if (got != want) ++differ;
                worst = std::max(worst, std::fabs(double(got) - want) / cs[o]);
            }
    // f32 accumulation against double: a value on a rounding boundary may move one step.
    EXPECT_LE(worst, 1.0 + 1e-3);
    EXPECT_LE(differ, total / 50) << differ << " of " << total;
    expect_text_round_trip(*gr, {x});
}

// ONNX Runtime's quantizer writes a one-channel per-axis bias as a scale of
// shape [1] with a zero point of shape []: read as per tensor, as ORT does.
// The same one-output-channel QDQ convolution with the zero points in [1]
// and in [] (bias and activation) gives the same values as written and after
// the int8 lowering, which takes it.
TEST(OnnxQuantized, OneElementZeroPointBesideAOneElementScale) {
    auto model = [](bool scalar_zp) {
        om::builder b(13);
        b.input("x", om::FLOAT, {1, 3, 6, 6});
        b.output("y");
        const std::vector<int64_t> zs = scalar_zp ? std::vector<int64_t>{} : std::vector<int64_t>{1};
        b.init_f32("xs", {1}, {0.02f});
        b.init_raw("xz", om::UINT8, zs, {uint8_t(128)});
        b.init_raw("wq", om::INT8, {1, 3, 3, 3}, bytes_u8(om::integers(21, 27, -100, 100)));
        b.init_f32("ws", {1}, {0.01f});
        b.init_raw("wz", om::INT8, {1}, {uint8_t(0)});
        b.init_raw("bq", om::INT32, {1}, bytes_of({-370}));
        b.init_f32("bs", {1}, {0.0002f});
        b.init_raw("bz", om::INT32, zs, bytes_of({0}));
        b.init_f32("ys", {}, {0.05f});
        b.init_raw("yz", om::UINT8, {}, {uint8_t(10)});
        b.node("QuantizeLinear", {"x", "xs", "xz"}, {"xq"});
        b.node("DequantizeLinear", {"xq", "xs", "xz"}, {"xd"});
        om::attr(b.node("DequantizeLinear", {"wq", "ws", "wz"}, {"wd"}), "axis", int64_t(0));
        om::attr(b.node("DequantizeLinear", {"bq", "bs", "bz"}, {"bd"}), "axis", int64_t(0));
        om::attr(b.node("Conv", {"xd", "wd", "bd"}, {"c"}, "conv"), "pads", std::vector<int64_t>{1, 1, 1, 1});
        b.node("QuantizeLinear", {"c", "ys", "yz"}, {"cq"});
        b.node("DequantizeLinear", {"cq", "ys", "yz"}, {"y"});
        return b;
    };
    const auto x = input({1, 3, 6, 6}, 22);
    auto ref = read(model(false));
    auto scalar = read(model(true));
    const auto want = g::compiled_graph(*ref).run({x})[0];
    EXPECT_EQ(g::compiled_graph(*scalar).run({x})[0].bytes, want.bytes);
    std::vector<g::rewrite_record> lowered;
    g::run_passes(*scalar, {}, &lowered);
    ASSERT_EQ(lowered.size(), 1u);
    EXPECT_TRUE(lowered[0].rewritten) << lowered[0].reason;
    EXPECT_EQ(g::compiled_graph(*scalar).run({x})[0].bytes, want.bytes);
}

TEST(OnnxQuantized, QuantizeLinearPerAxisExactAndTypes) {
    // Per-axis u8 and per-tensor i8 (output_dtype, opset 21) QuantizeLinear outputs are exact.
    om::builder b(21);
    b.input("x", om::FLOAT, {2, 3, 4});
    b.output("q", om::UINT8);
    b.output("p", om::INT8);
    const std::vector<float> s = {0.01f, 0.02f, 0.05f};
    const std::vector<int> z = {0, 128, 255};
    b.init_f32("s", {3}, s);
    b.init_raw("z", om::UINT8, {3}, bytes_u8(z));
    b.init_f32("t", {}, {0.004f});
    om::attr(b.node("QuantizeLinear", {"x", "s", "z"}, {"q"}), "axis", int64_t(-2));
    om::attr(b.node("QuantizeLinear", {"x", "t"}, {"p"}), "output_dtype", int64_t(om::INT8));
    auto gr = read(b);
    auto x = input({2, 3, 4}, 31);
    const auto y = g::compiled_graph(*gr).run({x});
    ASSERT_EQ(y.size(), 2u);
    EXPECT_EQ(y[0].type, g::dtype::u8);
    EXPECT_EQ(y[1].type, g::dtype::s8);
    const auto xv = x.to_f32();
    for (int i = 0; i < 24; ++i) {
        const int c = (i / 4) % 3;
        EXPECT_EQ(y[0].values()[i], quantize_value(xv[i], s[c], z[c], 0, 255)) << i;
        EXPECT_EQ(y[1].values()[i], quantize_value(xv[i], 0.004f, 0, -128, 127)) << i;
    }
}

TEST(OnnxQuantized, QLinearConvAsQdq) {
    for (int group : {1, 4}) {
        const int C = 4, OC = 8, H = 5, W = 6, ICg = C / group, OCg = OC / group;
        om::builder b(17);
        b.input("x", om::UINT8, {1, C, H, W});
        b.output("y", om::UINT8);
        const float xs = 0.02f, ys = 0.05f;
        const int xz = 100, yz = 7;
        const auto wq = om::integers(41, OC * ICg * 9, -127, 127);
        const auto ws = om::uniform(42, OC, 0.001f, 0.004f);
        const auto bq = om::integers(43, OC, -2000, 2000);
        b.init_f32("xs", {}, {xs});
        b.init_raw("xz", om::UINT8, {}, {uint8_t(xz)});
        b.init_raw("w", om::INT8, {OC, ICg, 3, 3}, bytes_u8(wq));
        b.init_f32("ws", {OC}, ws);
        b.init_raw("wz", om::INT8, {OC}, std::vector<uint8_t>(OC, 0));
        b.init_f32("ys", {}, {ys});
        b.init_raw("yz", om::UINT8, {}, {uint8_t(yz)});
        b.init_raw("b", om::INT32, {OC}, bytes_of(std::vector<int32_t>(bq.begin(), bq.end())));
        auto &n = b.node("QLinearConv", {"x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"}, {"y"}, "qconv");
        om::attr(n, "group", int64_t(group));
        om::attr(n, "strides", std::vector<int64_t>{2, 1});
        om::attr(n, "pads", std::vector<int64_t>{1, 1, 1, 1});
        auto gr = read(b);
        EXPECT_EQ(gr->count_ops().count(group == 1 ? "Convolution" : "GroupConvolution"), 1u);
        const auto x = u8_input({1, C, H, W}, 44);
        const auto y = g::compiled_graph(*gr).run({x})[0];
        ASSERT_EQ(y.type, g::dtype::u8);
        const int OH = (H + 2 - 3) / 2 + 1, OW = W;
        ASSERT_EQ(y.shape, (g::shape_t{1, OC, OH, OW}));
        // The integer form of the spec: acc = Σ (x − xz)·w + b; y = saturate(round(acc·xs·ws/ys) + yz).
        const auto xv = x.values(), yv = y.values();
        int differ = 0;
        for (int o = 0; o < OC; ++o)
            for (int i = 0; i < OH; ++i)
                for (int j = 0; j < OW; ++j) {
                    int64_t acc = bq[o];
                    const int gi = o / OCg;
                    for (int c = 0; c < ICg; ++c)
                        for (int ki = 0; ki < 3; ++ki)
                            for (int kj = 0; kj < 3; ++kj) {
                                const int ii = 2 * i + ki - 1, jj = j + kj - 1;
                                if (ii < 0 || ii >= H || jj < 0 || jj >= W) continue;
                                acc += (int64_t(xv[((gi * ICg + c) * H + ii) * W + jj]) - xz) *
                                       wq[((o * ICg + c) * 3 + ki) * 3 + kj];
                            }
                    const double want = std::clamp(std::nearbyint(acc * double(xs) * ws[o] / ys) + yz, 0.0, 255.0);
                    const double got = yv[(o * OH + i) * OW + j];
                    EXPECT_LE(std::fabs(got - want), 1.0) << "group " << group << " o " << o;
                    differ += got != want;
                }
        EXPECT_LE(differ, OC * OH * OW / 50) << "group " << group;
    }
}

TEST(OnnxQuantized, QLinearMatMulAsQdq) {
    const int M = 3, K = 16, N = 5;
    om::builder b(17);
    b.input("a", om::UINT8, {M, K});
    b.output("y", om::INT8);
    const auto bq = om::integers(51, K * N, -128, 127);
    const auto bs = om::uniform(52, N, 0.002f, 0.006f);
    const float as = 0.03f, ys = 0.04f;
    const int az = 128, yz = -5;
    b.init_f32("as", {}, {as});
    b.init_raw("az", om::UINT8, {}, {uint8_t(az)});
    b.init_raw("b", om::INT8, {K, N}, bytes_u8(bq));
    b.init_f32("bs", {N}, bs);
    b.init_raw("bz", om::INT8, {N}, bytes_u8(std::vector<int>{0, 1, -1, 2, 0}));
    b.init_f32("ys", {}, {ys});
    b.init_raw("yz", om::INT8, {}, {uint8_t(int8_t(yz))});
    b.node("QLinearMatMul", {"a", "as", "az", "b", "bs", "bz", "ys", "yz"}, {"y"}, "qmm");
    auto gr = read(b);
    const auto a = u8_input({M, K}, 53);
    const auto y = g::compiled_graph(*gr).run({a})[0];
    ASSERT_EQ(y.type, g::dtype::s8);
    const std::vector<int> bz = {0, 1, -1, 2, 0};
    const auto av = a.values(), yv = y.values();
    for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
            int64_t acc = 0;
            for (int k = 0; k < K; ++k) acc += (int64_t(av[m * K + k]) - az) * (bq[k * N + n] - bz[n]);
            const double want = std::clamp(std::nearbyint(acc * double(as) * bs[n] / ys) + yz, -128.0, 127.0);
            EXPECT_LE(std::fabs(yv[m * N + n] - want), 1.0) << m << "," << n;
        }
}

// A single-node model on x f32 [1, C, H, W].
om::builder single(const std::string &op, const g::shape_t &xs, const std::function<void(::onnx::NodeProto &)> &f,
                   int64_t opset = 17) {
    om::builder b(opset);
    b.input("x", om::FLOAT, std::vector<int64_t>(xs.begin(), xs.end()));
    b.output("y");
    f(b.node(op, {"x"}, {"y"}, "n"));
    return b;
}

// 2-D pooling from the spec: windows of k at stride s from −pb; `avg_pad`: the
// divisor counts padding positions inside [−pb, in + pe).
std::vector<double> pool_ref(const std::vector<float> &x, int C, int H, int W, int k, int s, int pb, int pe, bool ceil,
                             bool is_max, bool count_pad) {
    auto out = [&](int in) { return (ceil ? (in + pb + pe - k + s - 1) / s : (in + pb + pe - k) / s) + 1; };
    const int OH = out(H), OW = out(W);
    std::vector<double> r;
    for (int c = 0; c < C; ++c)
        for (int i = 0; i < OH; ++i)
            for (int j = 0; j < OW; ++j) {
                double m = -INFINITY, sum = 0;
                int n = 0, npad = 0;
                for (int a = 0; a < k; ++a)
                    for (int bb = 0; bb < k; ++bb) {
                        const int ii = i * s - pb + a, jj = j * s - pb + bb;
                        if (ii < H + pe && jj < W + pe) ++npad;
                        if (ii < 0 || ii >= H || jj < 0 || jj >= W) continue;
                        const double v = x[(c * H + ii) * W + jj];
                        m = std::max(m, v);
                        sum += v;
                        ++n;
                    }
                r.push_back(is_max ? m : sum / (count_pad ? npad : n));
            }
    return r;
}

TEST(OnnxQuantized, Pools) {
    const int C = 2, H = 7, W = 7;
    const auto x = input({1, C, H, W}, 61);
    const auto xv = x.to_f32();
    struct pcase {
        const char *op;
        int k, s, p;
        bool ceil, count_pad;
    };
    for (const pcase &c : {pcase{"MaxPool", 3, 2, 1, false, false}, pcase{"MaxPool", 2, 2, 0, true, false},
                           pcase{"AveragePool", 3, 2, 1, false, false}, pcase{"AveragePool", 3, 2, 1, false, true},
                           pcase{"AveragePool", 2, 2, 0, true, true}}) {
        const auto b = single(c.op, {1, C, H, W}, [&](auto &n) {
            om::attr(n, "kernel_shape", std::vector<int64_t>{c.k, c.k});
            om::attr(n, "strides", std::vector<int64_t>{c.s, c.s});
            om::attr(n, "pads", std::vector<int64_t>{c.p, c.p, c.p, c.p});
            if (c.ceil) om::attr(n, "ceil_mode", int64_t(1));
            if (c.count_pad) om::attr(n, "count_include_pad", int64_t(1));
        });
        const bool is_max = std::string(c.op) == "MaxPool";
        EXPECT_LE(rel_diff(run_one(b, {x}), pool_ref(xv, C, H, W, c.k, c.s, c.p, c.p, c.ceil, is_max, c.count_pad)),
                  1e-6)
            << c.op << " k" << c.k << " ceil " << c.ceil << " count_pad " << c.count_pad;
    }
    // GlobalAveragePool → ReduceMean axes=[2,3] keep_dims.
    auto gb = single("GlobalAveragePool", {1, C, H, W}, [](auto &) {});
    auto gr = read(gb);
    EXPECT_EQ(gr->count_ops().at("ReduceMean"), 1);
    const auto y = g::compiled_graph(*gr).run({x})[0];
    EXPECT_EQ(y.shape, (g::shape_t{1, C, 1, 1}));
    std::vector<double> ref(C, 0.0);
    for (int i = 0; i < C * H * W; ++i) ref[i / (H * W)] += xv[i] / double(H * W);
    EXPECT_LE(rel_diff(y.to_f32(), ref), 1e-6);
    // MaxPool on u8 data stays u8.
    om::builder mb(17);
    mb.input("x", om::UINT8, {1, C, H, W});
    mb.output("y", om::UINT8);
    om::attr(mb.node("MaxPool", {"x"}, {"y"}), "kernel_shape", std::vector<int64_t>{3, 3});
    const auto xu = u8_input({1, C, H, W}, 62);
    const auto yu = g::compiled_graph(*read(mb)).run({xu})[0];
    EXPECT_EQ(yu.type, g::dtype::u8);
    const auto xuf = xu.to_f32();
    EXPECT_LE(rel_diff(yu.to_f32(), pool_ref(xuf, C, H, W, 3, 1, 0, 0, false, true, false)), 0.0);
}

TEST(OnnxQuantized, ElementwiseAndShapeOps) {
    const g::shape_t xs = {1, 3, 2, 4};
    const auto x = input(xs, 71);
    auto xv = x.to_f32();
    for (float &v : xv) v *= 8; // beyond Relu6's bounds
    const auto x8 = g::tensor::from_f32(g::dtype::f32, xs, xv);
    auto each = [&](const std::function<double(double, int64_t)> &f) {
        std::vector<double> r;
        for (size_t i = 0; i < xv.size(); ++i) r.push_back(f(xv[i], static_cast<int64_t>(i)));
        return r;
    };
    { // Clip with constant min and max (Relu6), and with max only.
        om::builder b(17);
        b.input("x", om::FLOAT, {1, 3, 2, 4});
        b.output("y");
        b.output("z");
        b.init_f32("lo", {}, {0.f});
        b.init_f32("hi", {}, {6.f});
        b.node("Clip", {"x", "lo", "hi"}, {"y"}, "relu6");
        b.node("Clip", {"x", "", "hi"}, {"z"}, "max_only");
        auto gr = read(b);
        EXPECT_EQ(gr->count_ops().at("Clamp"), 2);
        const auto y = g::compiled_graph(*gr).run({x8});
        EXPECT_LE(rel_diff(y[0].to_f32(), each([](double v, int64_t) { return std::clamp(v, 0.0, 6.0); })), 0.0);
        EXPECT_LE(rel_diff(y[1].to_f32(), each([](double v, int64_t) { return std::min(v, 6.0); })), 0.0);
    }
    // Sigmoid; Softmax along the last axis (opset 13's default) and along axis 1.
    EXPECT_LE(rel_diff(run_one(single("Sigmoid", xs, [](auto &) {}), {x8}),
                       each([](double v, int64_t) { return 1 / (1 + std::exp(-v)); })),
              1e-6);
    for (int64_t axis : {int64_t(-1), int64_t(1)}) {
        const auto b = single("Softmax", xs, [&](auto &n) {
            if (axis != -1) om::attr(n, "axis", axis);
        });
        const int64_t stride = axis == -1 ? 1 : 8, len = axis == -1 ? 4 : 3;
        const auto ref = each([&](double v, int64_t i) {
            const int64_t base = i - ((i / stride) % len) * stride;
            double sum = 0;
            for (int64_t k = 0; k < len; ++k) sum += std::exp(xv[base + k * stride] - v);
            return 1 / sum;
        });
        EXPECT_LE(rel_diff(run_one(b, {x8}), ref), 1e-6) << "axis " << axis;
    }
    // Flatten (axis 2 → [3·1, 2·4]).
    {
        auto gr = read(single("Flatten", xs, [](auto &n) { om::attr(n, "axis", int64_t(2)); }));
        const auto y = g::compiled_graph(*gr).run({x8})[0];
        EXPECT_EQ(y.shape, (g::shape_t{3, 8}));
        EXPECT_EQ(y.to_f32(), xv);
    }
    // PRelu: a [C,1,1] slope (per channel) and a 1-D slope of W values (numpy: the last axis,
    // not the channel axis — here C = 3 and W = 4 differ, and with C = W = 4 below too).
    const std::vector<float> sc = {0.1f, -0.2f, 0.3f}, sw = {0.5f, 0.25f, -1.f, 2.f};
    for (bool per_w : {false, true}) {
        om::builder b(17);
        b.input("x", om::FLOAT, {1, 3, 2, 4});
        b.output("y");
        if (per_w) b.init_f32("s", {4}, sw);
        else b.init_f32("s", {3, 1, 1}, sc);
        b.node("PRelu", {"x", "s"}, {"y"});
        const auto ref = each([&](double v, int64_t i) {
            const double s = per_w ? sw[i % 4] : sc[(i / 8) % 3];
            return v < 0 ? v * s : v;
        });
        EXPECT_LE(rel_diff(run_one(b, {x8}), ref), 1e-7) << "per_w " << per_w;
    }
    {
        om::builder b(17);
        b.input("x", om::FLOAT, {1, 4, 1, 4});
        b.output("y");
        b.init_f32("s", {4}, sw);
        b.node("PRelu", {"x", "s"}, {"y"});
        const auto x4 = input({1, 4, 1, 4}, 72);
        const auto v = x4.to_f32();
        std::vector<double> ref;
        for (size_t i = 0; i < v.size(); ++i) ref.push_back(v[i] < 0 ? v[i] * double(sw[i % 4]) : v[i]);
        EXPECT_LE(rel_diff(run_one(b, {x4}), ref), 1e-7);
    }
    // Concat along axis 1 (and a negative axis) of an input and a Relu of it.
    for (int64_t axis : {int64_t(1), int64_t(-3)}) {
        om::builder b(17);
        b.input("x", om::FLOAT, {1, 3, 2, 4});
        b.output("y");
        b.node("Relu", {"x"}, {"r"});
        om::attr(b.node("Concat", {"x", "r", "x"}, {"y"}), "axis", axis);
        const auto y = run_one(b, {x8});
        std::vector<double> ref(xv.begin(), xv.end());
        for (float v : xv) ref.push_back(std::max(v, 0.f));
        ref.insert(ref.end(), xv.begin(), xv.end());
        EXPECT_LE(rel_diff(y, ref), 0.0) << "axis " << axis;
    }
}

TEST(OnnxLimits, ImportedGraphIsHeldToRunMemory) {
    // 2^30 f32 values in and 2^30 out: 8 GiB, above max_run_bytes — refused at read time, as a .qg file is.
    om::builder b(17);
    b.input("x", om::FLOAT, {4, int64_t(1) << 28});
    b.output("y");
    b.node("Relu", {"x"}, {"y"}, "r");
    try {
        read(b);
        ADD_FAILURE() << "accepted";
    } catch (const qconv::error &e) {
        EXPECT_THAT(e.what(), HasSubstr("running the graph"));
    }
}

// --------------------------------------------------------------- refusals
struct refusal {
    const char *name;
    std::function<om::builder()> make;
    std::vector<std::string> says; // substrings of the message, the first its start
};
void PrintTo(const refusal &r, std::ostream *os) { *os << r.name; }

om::builder one_node(const std::string &op, const std::string &name, int64_t opset = 17) {
    om::builder b(opset);
    b.input("x", om::FLOAT, {1, 4, 8, 8});
    b.output("y");
    b.node(op, {"x"}, {"y"}, name);
    return b;
}

om::builder conv_with(const std::function<void(::onnx::NodeProto &)> &f) {
    om::builder b(17);
    b.input("x", om::FLOAT, {1, 4, 8, 8});
    b.output("y");
    b.init_f32("w", {8, 4, 3, 3}, std::vector<float>(8 * 4 * 9, 0.5f));
    f(b.node("Conv", {"x", "w"}, {"y"}, "conv1"));
    return b;
}

om::builder nbits_with(const std::function<void(om::builder &, ::onnx::NodeProto &)> &f) {
    om::builder b(17, true);
    b.input("x", om::FLOAT, {1, 64});
    b.output("y");
    b.init_raw("q", om::UINT8, {8, 2, 16}, std::vector<uint8_t>(8 * 2 * 16, 0x88));
    b.init_f32("s", {16}, std::vector<float>(16, 0.5f));
    auto &n = b.node("MatMulNBits", {"x", "q", "s"}, {"y"}, "fc", "com.microsoft");
    om::attr(n, "K", int64_t(64));
    om::attr(n, "N", int64_t(8));
    om::attr(n, "bits", int64_t(4));
    om::attr(n, "block_size", int64_t(32));
    f(b, n);
    return b;
}

const refusal refusals[] = {
    {"UnknownOp", [] { return one_node("LRN", "lrn"); }, {"node 'lrn' (#0, LRN)", "op LRN is not supported"}},
    {"UnknownAttributeOfAnUnnamedNode",
     [] {
         om::builder b = one_node("Relu", "");
         om::attr(*b.graph().mutable_node(0), "alpha", 0.1f);
         return b;
     },
     {"node #0 (Relu)", "attribute 'alpha'", "not supported"}},
    {"BadAttributeValue",
     [] { return conv_with([](auto &n) { om::attr(n, "auto_pad", std::string("BOGUS")); }); },
     {"node 'conv1' (#0, Conv)", "attribute 'auto_pad'", "BOGUS"}},
    {"BadAttributeType",
     [] { return conv_with([](auto &n) { om::attr(n, "group", std::string("two")); }); },
     {"node 'conv1' (#0, Conv)", "attribute 'group'", "expected an int"}},
    {"GroupDoesNotFit",
     [] { return conv_with([](auto &n) { om::attr(n, "group", int64_t(3)); }); },
     {"node 'conv1' (#0, Conv)", "attribute 'group'"}},
    {"ThreeDimensionalStrides",
     [] { return conv_with([](auto &n) {
              om::attr(n, "strides", std::vector<int64_t>{1, 1, 1});
          }); },
     {"node 'conv1' (#0, Conv)", "attribute 'strides'", "2 values"}},
    {"Opset10", [] { return one_node("Relu", "r", 10); }, {"opset", "opset 10 is not supported"}},
    {"Opset22", [] { return one_node("Relu", "r", 22); }, {"opset", "opset 22 is not supported"}},
    {"GeluBeforeOpset20", [] { return one_node("Gelu", "g", 17); }, {"node 'g' (#0, Gelu)", "opset 20"}},
    {"MaxPoolWithoutKernel",
     [] { return one_node("MaxPool", "pool"); },
     {"node 'pool' (#0, MaxPool)", "attribute 'kernel_shape'", "required"}},
    {"MaxPoolDilated",
     [] {
         om::builder b = one_node("MaxPool", "pool");
         om::attr(*b.graph().mutable_node(0), "kernel_shape", std::vector<int64_t>{2, 2});
         om::attr(*b.graph().mutable_node(0), "dilations", std::vector<int64_t>{2, 2});
         return b;
     },
     {"node 'pool' (#0, MaxPool)", "attribute 'dilations'"}},
    {"MaxPoolIndices",
     [] {
         om::builder b = one_node("MaxPool", "pool");
         om::attr(*b.graph().mutable_node(0), "kernel_shape", std::vector<int64_t>{2, 2});
         b.graph().mutable_node(0)->add_output("indices");
         return b;
     },
     {"node 'pool' (#0, MaxPool)", "output 1 'indices'"}},
    {"CeilModeWindowInPadding",
     [] {
         om::builder b = one_node("AveragePool", "ap");
         auto &n = *b.graph().mutable_node(0);
         om::attr(n, "kernel_shape", std::vector<int64_t>{2, 2});
         om::attr(n, "strides", std::vector<int64_t>{2, 2});
         om::attr(n, "pads", std::vector<int64_t>{0, 0, 1, 1});
         om::attr(n, "ceil_mode", int64_t(1));
         return b;
     },
     {"node 'ap' (#0, AveragePool)", "attribute 'ceil_mode'", "end padding"}},
    {"ClipBoundFromAnInput",
     [] {
         om::builder b(17);
         b.input("x", om::FLOAT, {1, 4});
         b.input("m", om::FLOAT, {});
         b.output("y");
         b.node("Clip", {"x", "m"}, {"y"}, "clip");
         return b;
     },
     {"node 'clip' (#0, Clip)", "input 1 'm'", "constant"}},
    {"ConcatWithoutAxis", [] { return one_node("Concat", "cat"); }, {"node 'cat' (#0, Concat)", "attribute 'axis'"}},
    {"QuantizeBlocked",
     [] {
         om::builder b(21);
         b.input("x", om::FLOAT, {4, 4});
         b.output("y", om::UINT8);
         b.init_f32("s", {2, 4}, std::vector<float>(8, 0.5f));
         om::attr(b.node("QuantizeLinear", {"x", "s"}, {"y"}, "q"), "block_size", int64_t(2));
         return b;
     },
     {"node 'q' (#0, QuantizeLinear)", "attribute 'block_size'"}},
    {"QuantizeTo16Bits",
     [] {
         om::builder b(21);
         b.input("x", om::FLOAT, {4});
         b.output("y");
         b.init_f32("s", {}, {0.5f});
         om::attr(b.node("QuantizeLinear", {"x", "s"}, {"y"}, "q"), "output_dtype", int64_t(4));
         return b;
     },
     {"node 'q' (#0, QuantizeLinear)", "attribute 'output_dtype'", "UINT16"}},
    {"QuantizePerAxisScaleOfWrongLength",
     [] {
         om::builder b(17);
         b.input("x", om::FLOAT, {1, 4, 2});
         b.output("y");
         b.init_f32("s", {3}, {0.5f, 0.5f, 0.5f});
         b.node("QuantizeLinear", {"x", "s"}, {"y"}, "q");
         return b;
     },
     {"node 'q' (#0, QuantizeLinear)", "input 1 's'", "per-axis scale must be [4]"}},
    {"QLinearConvWeightsFromAnInput",
     [] {
         om::builder b(17);
         b.input("x", om::UINT8, {1, 4, 4, 4});
         b.input("w", om::INT8, {4, 4, 1, 1});
         b.output("y", om::UINT8);
         b.init_f32("s", {}, {0.5f});
         b.node("QLinearConv", {"x", "s", "", "w", "s", "", "s", ""}, {"y"}, "qc");
         return b;
     },
     {"node 'qc' (#0, QLinearConv)", "input 3 'w'", "constant"}},
    {"UnknownDomain",
     [] {
         om::builder b = one_node("Relu", "r");
         b.graph().mutable_node(0)->set_domain("org.example");
         return b;
     },
     {"node 'r' (#0, Relu)", "domain 'org.example'"}},
    {"MatMulNBits3Bits",
     [] { return nbits_with([](auto &, auto &n) { n.mutable_attribute(2)->set_i(3); }); },
     {"node 'fc' (#0, MatMulNBits)", "attribute 'bits'", "3"}},
    {"MatMulNBitsGIdx",
     [] {
         return nbits_with([](auto &b, auto &n) {
             b.init_raw("gi", om::INT32, {64}, std::vector<uint8_t>(256, 0));
             n.add_input("");
             n.add_input("gi");
         });
     },
     {"node 'fc' (#0, MatMulNBits)", "input 4 'gi'", "g_idx"}},
    {"MatMulNBitsPartialBlock",
     [] { return nbits_with([](auto &, auto &n) { n.mutable_attribute(3)->set_i(48); }); },
     {"node 'fc' (#0, MatMulNBits)", "attribute 'block_size'"}},
    {"MatMulNBitsWrongWeights",
     [] { return nbits_with([](auto &, auto &n) { n.mutable_attribute(1)->set_i(4); }); },
     {"node 'fc' (#0, MatMulNBits)", "input 1 'q'", "u8[4,2,16]"}},
    {"CastFloatToInt",
     [] {
         om::builder b = one_node("Cast", "c");
         om::attr(*b.graph().mutable_node(0), "to", int64_t(om::INT8));
         return b;
     },
     {"node 'c' (#0, Cast)", "attribute 'to'", "truncates"}},
    {"CastToDouble",
     [] {
         om::builder b = one_node("Cast", "c");
         om::attr(*b.graph().mutable_node(0), "to", int64_t(om::DOUBLE));
         return b;
     },
     {"node 'c' (#0, Cast)", "attribute 'to'", "DOUBLE"}},
    {"DequantizeActivationsBlocked",
     [] {
         om::builder b(21);
         b.input("x", om::UINT8, {1, 4});
         b.output("y");
         b.init_f32("s", {}, {0.5f});
         om::attr(b.node("DequantizeLinear", {"x", "s"}, {"y"}, "dq"), "block_size", int64_t(2));
         return b;
     },
     {"node 'dq' (#0, DequantizeLinear)", "attribute 'block_size'", "activations"}},
    {"BlockSizeBeforeOpset21",
     [] {
         om::builder b(19);
         b.input("x", om::FLOAT, {1, 4});
         b.output("y");
         b.init_raw("q", om::INT8, {4, 4}, std::vector<uint8_t>(16, 1));
         b.init_f32("s", {2, 4}, std::vector<float>(8, 0.5f));
         om::attr(b.node("DequantizeLinear", {"q", "s"}, {"w"}, "dq"), "block_size", int64_t(2));
         b.node("MatMul", {"x", "w"}, {"y"}, "mm");
         return b;
     },
     {"node 'dq' (#0, DequantizeLinear)", "attribute 'block_size'", "opset 21"}},
    {"ReshapeShapeFromAnInput",
     [] {
         om::builder b(17);
         b.input("x", om::FLOAT, {1, 4});
         b.input("s", om::INT64, {2});
         b.output("y");
         b.node("Reshape", {"x", "s"}, {"y"}, "rs");
         return b;
     },
     {"node 'rs' (#0, Reshape)", "input 1 's'", "constant"}},
    {"ReshapeDimensionBeyondDouble",
     [] {
         // INT64_MAX rounds up to 2^63 as a double: the shape must be read as integers.
         om::builder b(17);
         b.input("x", om::FLOAT, {1, 4});
         b.init_i64("s", {1, std::numeric_limits<int64_t>::max()});
         b.output("y");
         b.node("Reshape", {"x", "s"}, {"y"}, "rs");
         return b;
     },
     {"node 'rs' (#0, Reshape)", "target shape", "9223372036854775807"}},
    {"UndefinedInput",
     [] {
         om::builder b = one_node("Relu", "r");
         b.graph().mutable_node(0)->set_input(0, "nowhere");
         return b;
     },
     {"node 'r' (#0, Relu)", "input 0 'nowhere'", "not defined"}},
    {"OversizedInputDim",
     [] {
         om::builder b(17);
         b.input("x", om::FLOAT, {1, int64_t(1) << 40});
         b.output("x");
         return b;
     },
     {"input 'x'", "2^31"}},
    {"TwoSymbolicDims",
     [] {
         om::builder b(17);
         b.input("a", om::FLOAT, {-1, 4}, "batch");
         b.input("b", om::FLOAT, {-1, 4}, "seq");
         b.output("a");
         return b;
     },
     {"input 'b'", "'batch' and 'seq'"}},
    {"OversizedInitializer",
     [] {
         om::builder b = one_node("Relu", "r");
         b.init_raw("w", om::FLOAT, {int64_t(1) << 20, int64_t(1) << 20}, std::vector<uint8_t>(4, 0));
         return b;
     },
     {"initializer 'w'", "more than 2^31 elements"}},
    {"ShortRawData",
     [] {
         om::builder b = one_node("Relu", "r");
         b.init_raw("w", om::FLOAT, {4, 4}, std::vector<uint8_t>(8, 0));
         return b;
     },
     {"initializer 'w'", "raw_data holds 8 bytes", "needs 64"}},
    {"UnsupportedInitializerType",
     [] {
         om::builder b = one_node("Relu", "r");
         b.init_raw("w", om::DOUBLE, {2}, std::vector<uint8_t>(16, 0));
         return b;
     },
     {"initializer 'w'", "DOUBLE"}},
    {"ExternalPathEscapes",
     [] {
         om::builder b = one_node("Relu", "r");
         auto &t = b.init_f32("w", {2}, {1.f, 2.f});
         b.externalize("../outside.bin");
         (void)t;
         return b;
     },
     {"initializer 'w'", "leaves the model's folder"}},
    {"ExternalPathAbsolute",
     [] {
         om::builder b = one_node("Relu", "r");
         b.init_f32("w", {2}, {1.f, 2.f});
         b.externalize("/etc/passwd");
         return b;
     },
     {"initializer 'w'", "absolute"}},
    {"NoOutput",
     [] {
         om::builder b = one_node("Relu", "r");
         b.graph().clear_output();
         return b;
     },
     {"model", "no output"}},
};

class OnnxRefusal : public ::testing::TestWithParam<refusal> {};

TEST_P(OnnxRefusal, NamesWhatIsRefused) {
    const refusal &r = GetParam();
    const std::string dir = temp_dir(std::string("refusal_") + r.name);
    const std::string s = r.make().bytes();
    try {
        g::parse_onnx(s.data(), s.size(), dir);
        ADD_FAILURE() << "accepted";
    } catch (const qconv::error &e) {
        const std::string m = e.what();
        EXPECT_THAT(m, ::testing::StartsWith(r.says[0]));
        for (const auto &part : r.says) EXPECT_THAT(m, HasSubstr(part));
    }
}

INSTANTIATE_TEST_SUITE_P(Cases, OnnxRefusal, ::testing::ValuesIn(refusals),
                         [](const auto &info) { return std::string(info.param.name); });

// A symbolic link inside the folder that points outside it is refused too.
TEST(OnnxRefusalFile, ExternalSymlinkOutsideTheFolder) {
    const std::string dir = temp_dir("symlink"), outside = temp_dir("symlink_target");
    std::ofstream(outside + "/w.bin", std::ios::binary) << std::string(8, '\0');
    std::filesystem::create_symlink(outside + "/w.bin", dir + "/w.bin");
    om::builder b = one_node("Relu", "r");
    b.init_f32("w", {2}, {1.f, 2.f});
    b.externalize("w.bin");
    std::ofstream(dir + "/model.onnx", std::ios::binary) << b.bytes();
    try {
        g::load_file(dir + "/model.onnx");
        ADD_FAILURE() << "accepted";
    } catch (const qconv::error &e) {
        EXPECT_THAT(e.what(), HasSubstr("initializer 'w'"));
        EXPECT_THAT(e.what(), HasSubstr("outside the model's folder"));
    }
}

TEST(OnnxRefusalFile, TruncatedAndCorruptFiles) {
    const std::string full = om::small_cnn(1).bytes();
    for (size_t cut : {full.size() / 2, full.size() - 7, size_t(3)}) {
        const std::string s = full.substr(0, cut);
        try {
            g::parse_onnx(s.data(), s.size());
            ADD_FAILURE() << "a model cut to " << cut << " bytes was accepted";
        } catch (const qconv::error &e) {
            EXPECT_THAT(e.what(), ::testing::StartsWith("model")) << cut;
        }
    }
    const std::string dir = temp_dir("truncated");
    std::ofstream(dir + "/cut.onnx", std::ios::binary) << full.substr(0, full.size() / 2);
    try {
        g::load_file(dir + "/cut.onnx");
        ADD_FAILURE() << "accepted";
    } catch (const qconv::error &e) {
        EXPECT_THAT(e.what(), HasSubstr("truncated or corrupt"));
        EXPECT_THAT(e.what(), HasSubstr("cut.onnx"));
    }
    std::ofstream(dir + "/text.onnx") << "x = Parameter f32[1]\n";
    EXPECT_THROW(g::load_file(dir + "/text.onnx"), qconv::error);
}

// ------------------------------------------------------------------- npy
TEST(Npy, RoundTripAndTypes) {
    const std::string dir = temp_dir("npy");
    const auto t = g::tensor::from_f32(g::dtype::f32, {2, 3}, {1, -2, 3.5f, 0, 1e-3f, -7});
    g::write_npy(dir + "/a.npy", t);
    const auto back = g::read_npy(dir + "/a.npy");
    EXPECT_EQ(back.shape, t.shape);
    EXPECT_EQ(back.bytes, t.bytes);
    EXPECT_EQ(back.type, g::dtype::f32);
    // Version 2 header, i64 and u1 data, a scalar.
    auto npy = [](int major, const std::string &descr, const std::string &shape, const std::string &body) {
        std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
        h += std::string((64 - (h.size() + 1 + (major == 1 ? 10 : 12)) % 64) % 64, ' ') + "\n";
        std::string s = std::string("\x93NUMPY", 6) + char(major) + '\0';
        s += char(h.size() & 0xFF);
        s += char(h.size() >> 8);
        if (major != 1) s += std::string(2, '\0');
        return s + h + body;
    };
    const int64_t v[2] = {-5, int64_t(1) << 40};
    const std::string i8 = npy(2, "<i8", "(2,)", std::string(reinterpret_cast<const char *>(v), 16));
    const auto a = g::parse_npy(i8.data(), i8.size());
    EXPECT_EQ(a.type, g::dtype::s64);
    EXPECT_EQ(a.values(), (std::vector<double>{-5., double(int64_t(1) << 40)})); // exact: kept as i64
    const std::string u1 = npy(1, "|u1", "()", std::string(1, char(200)));
    const auto s = g::parse_npy(u1.data(), u1.size());
    EXPECT_EQ(s.shape, g::shape_t{});
    EXPECT_EQ(s.type, g::dtype::u8);
    EXPECT_EQ(s.values(), std::vector<double>{200.});
    // Refusals name the field.
    const std::pair<std::string, std::string> bad[] = {
        {npy(1, ">f4", "(1,)", std::string(4, '\0')), "big-endian"},
        {npy(1, "<f8", "(1,)", std::string(8, '\0')), "descr '<f8'"},
        {npy(1, "<f4", "(2,)", std::string(4, '\0')), "truncated"},
        {npy(1, "<f4", "(0,)", ""), "non-positive"},
        {npy(4, "<f4", "(1,)", std::string(4, '\0')), "version 4"},
        {std::string("\x93NUMPY\x01\x00\x10\x00{'descr': '<f4'}", 26), "fortran_order"},
        {"not numpy", "magic"},
    };
    for (const auto &[bytes, says] : bad) {
        try {
            g::parse_npy(bytes.data(), bytes.size(), "x.npy");
            ADD_FAILURE() << says;
        } catch (const qconv::error &e) {
            EXPECT_THAT(e.what(), ::testing::StartsWith("x.npy"));
            EXPECT_THAT(e.what(), HasSubstr(says));
        }
    }
    std::string fortran = npy(1, "<f4", "(1,)", std::string(4, '\0'));
    fortran.replace(fortran.find("False"), 5, "True ");
    EXPECT_THROW(g::parse_npy(fortran.data(), fortran.size()), qconv::error);
}

// ---------------------------------------------------------------- driver
std::map<std::string, std::string> fields(const std::string &out, const std::string &prefix) {
    std::istringstream in(out);
    std::string line;
    std::map<std::string, std::string> kv;
    while (std::getline(in, line)) {
        if (line.rfind(prefix, 0) != 0) continue;
        std::istringstream ls(line);
        std::string tok;
        while (ls >> tok) {
            const auto eq = tok.find('=');
            if (eq != std::string::npos) kv[tok.substr(0, eq)] = tok.substr(eq + 1);
        }
        break;
    }
    return kv;
}

TEST(OnnxDriver, RunsAModelWithInputsAndWritesOutputs) {
    const std::string dir = temp_dir("driver");
    const auto w = om::make_ffn_weights(128, 256, 64, 5);
    om::ffn_matmulnbits(w).save(dir + "/ffn.onnx");
    const auto x = input({1, 5, 128}, 77);
    g::write_npy(dir + "/x.npy", x);
    const auto r = qconv::test::run_driver({"graph", dir + "/ffn.onnx", "--save=" + dir + "/read.qg",
                                            "--input=x=" + dir + "/x.npy", "--output-dir=" + dir + "/out", "--reps=1"});
    ASSERT_EQ(r.rc, 0) << r.out << r.err;
    auto kv = fields(r.out, "op=graph");
    EXPECT_EQ(kv["file"], dir + "/ffn.onnx");
    EXPECT_EQ(kv["rewritten"], "0/0");
    EXPECT_EQ(kv.count("dim"), 0u); // the input's token count bound at load: no run-time dimension left
    EXPECT_EQ(kv["status"], "ok");
    for (const char *k :
         {"nodes_before", "nodes_after", "before_ms", "after_ms", "speedup", "max_abs_diff", "max_rel_diff", "tol"})
        EXPECT_TRUE(kv.count(k)) << k;
    // --save wrote the graph as read; the output file holds the graph's result on x.
    auto saved = g::load_file(dir + "/read.qg");
    EXPECT_EQ(saved->count_ops().at("MatMul"), 2);
    const auto y = g::read_npy(dir + "/out/y.npy");
    EXPECT_EQ(y.shape, (g::shape_t{1, 5, 128}));
    EXPECT_LE(rel_diff(y.to_f32(), om::ffn_reference(w, x.to_f32(), 5)), 2e-5);

    // Bad input: exit status 2 with the reason.
    auto bad = qconv::test::run_driver({"graph", dir + "/ffn.onnx", "--input=z=" + dir + "/x.npy"});
    EXPECT_EQ(bad.rc, 2);
    EXPECT_THAT(bad.err, HasSubstr("no input 'z'"));
    g::write_npy(dir + "/wrong.npy", input({1, 5, 64}, 1));
    bad = qconv::test::run_driver({"graph", dir + "/ffn.onnx", "--input=x=" + dir + "/wrong.npy"});
    EXPECT_EQ(bad.rc, 2);
    EXPECT_THAT(bad.err, HasSubstr("input 'x': dim 2 is 128 in the model, the shape given [1,5,64] has 64"));
    std::ofstream(dir + "/cut.onnx", std::ios::binary) << om::small_cnn(1).bytes().substr(0, 200);
    bad = qconv::test::run_driver({"graph", dir + "/cut.onnx"});
    EXPECT_EQ(bad.rc, 2);
    EXPECT_THAT(bad.err, HasSubstr("cut.onnx"));
    om::builder pool = one_node("MaxPool", "pool1");
    pool.save(dir + "/pool.onnx");
    bad = qconv::test::run_driver({"graph", dir + "/pool.onnx"});
    EXPECT_EQ(bad.rc, 2);
    EXPECT_THAT(bad.err, HasSubstr("node 'pool1' (#0, MaxPool)"));
}

// The seed corpus of tests/fuzz/fuzz_onnx.cpp, written by
//   QCONV_ONNX_CORPUS=tests/fuzz/corpus/onnx build/tests/test_onnx
//     --gtest_also_run_disabled_tests --gtest_filter='OnnxCorpus.*'
// (qlinear_conv.onnx, QLinearConvs with QuantizeLinear/DequantizeLinear, comes from
//   scripts/make_models.py tests/fuzz/corpus/onnx --models=qlinear_conv --size=8).
TEST(OnnxCorpus, DISABLED_WriteFuzzSeeds) {
    const char *dir = std::getenv("QCONV_ONNX_CORPUS");
    if (!dir) GTEST_SKIP() << "QCONV_ONNX_CORPUS is not set";
    std::filesystem::create_directories(dir);
    const auto w = om::make_ffn_weights(32, 64, 16, 1);
    const std::pair<const char *, om::builder> seeds[] = {
        {"ffn_matmulnbits.onnx", om::ffn_matmulnbits(w)},
        {"ffn_matmulnbits_typed_zp.onnx", om::ffn_matmulnbits(w, true)},
        {"ffn_dequantize.onnx", om::ffn_dequantize(w)},
        {"small_cnn.onnx", om::small_cnn(1)},
        {"refused_maxpool.onnx", one_node("MaxPool", "pool")},
    };
    for (const auto &[name, b] : seeds) std::ofstream(std::string(dir) + "/" + name, std::ios::binary) << b.bytes();
}

} // namespace
