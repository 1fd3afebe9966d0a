// The ONNX reader (graph/onnx_reader.cpp) and the .npy files (graph/npy.cpp):
// models built in C++ (tests/support/onnx_models.h) read, run, and match an
// independent computation and their own .qg text; the compressed-weight FFNs
// run as compressed MatMuls; every refusal names the node, op and attribute;
// `qconv-driver graph model.onnx --save --input --output-dir`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
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
    return g::tensor::from_f32(g::etype::f32, s, om::uniform(seed, static_cast<size_t>(g::elems_of(s)), -1.f, 1.f));
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
// pattern from matching: the Erf is then refused (the IR has no Erf).
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
    try {
        read(b);
        ADD_FAILURE() << "accepted";
    } catch (const qconv::error &e) {
        EXPECT_THAT(e.what(), ::testing::StartsWith("node #0 (Div)"));
    }
}

// --------------------------------------------------------------- refusals
struct refusal {
    const char *name;
    std::function<om::builder()> make;
    std::vector<std::string> says; // substrings of the message, the first its start
};

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
    {"UnknownOp", [] { return one_node("Softmax", "sm"); }, {"node 'sm' (#0, Softmax)", "op Softmax is not supported"}},
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
    {"Opset12", [] { return one_node("Relu", "r", 12); }, {"opset", "opset 12 is not supported"}},
    {"Opset22", [] { return one_node("Relu", "r", 22); }, {"opset", "opset 22 is not supported"}},
    {"GeluBeforeOpset20", [] { return one_node("Gelu", "g", 17); }, {"node 'g' (#0, Gelu)", "opset 20"}},
    {"PendingMaxPool", [] { return one_node("MaxPool", "pool"); }, {"node 'pool' (#0, MaxPool)", "not mapped yet"}},
    {"PendingClip", [] { return one_node("Clip", "clip"); }, {"node 'clip' (#0, Clip)", "not mapped yet"}},
    {"LoneErf", [] { return one_node("Erf", "erf"); }, {"node 'erf' (#0, Erf)", "Gelu"}},
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
    {"DequantizeActivations",
     [] {
         om::builder b(21);
         b.input("x", om::UINT8, {1, 4});
         b.output("y");
         b.init_f32("s", {}, {0.5f});
         b.node("DequantizeLinear", {"x", "s"}, {"y"}, "dq");
         return b;
     },
     {"node 'dq' (#0, DequantizeLinear)", "not mapped yet"}},
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
    const auto t = g::tensor::from_f32(g::etype::f32, {2, 3}, {1, -2, 3.5f, 0, 1e-3f, -7});
    g::write_npy(dir + "/a.npy", t);
    const auto back = g::read_npy(dir + "/a.npy");
    EXPECT_EQ(back.shape, t.shape);
    EXPECT_EQ(back.bytes, t.bytes);
    EXPECT_EQ(back.type, g::etype::f32);
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
    EXPECT_EQ(a.type, g::etype::i64);
    EXPECT_EQ(a.values(), (std::vector<double>{-5., double(int64_t(1) << 40)})); // exact: kept as i64
    const std::string u1 = npy(1, "|u1", "()", std::string(1, char(200)));
    const auto s = g::parse_npy(u1.data(), u1.size());
    EXPECT_EQ(s.shape, g::shape_t{});
    EXPECT_EQ(s.type, g::etype::u8);
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
    EXPECT_EQ(kv["dim"], "5"); // from the input's token count
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
    EXPECT_THAT(bad.err, HasSubstr("[1,?,128]"));
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
