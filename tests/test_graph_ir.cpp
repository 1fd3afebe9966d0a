// Graph IR and text format: shape inference, element packing, generators,
// load/save round trips, bad files (errors name the line), and the executor's
// elementwise, layout, MatMul and Convolution kernels on small hand-checked cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>

#include "qconv/graph.h"

using namespace qconv::graph;

namespace {

std::string error_of(const std::string &text) {
    try {
        parse(text);
    } catch (const qconv::error &e) {
        return e.what();
    }
    return "(no error)";
}

// ------------------------------------------------------ shape inference
TEST(GraphIr, ReshapeZeroNeedsSpecialZero) {
    const std::string e = error_of("x = Parameter f32[2,3,4]\nc = Reshape(x) shape=[0,3,4]\n");
    EXPECT_EQ(e.rfind("line 2:", 0), 0u) << e;
    EXPECT_NE(e.find("invalid dimension"), std::string::npos) << e;
}

TEST(GraphIr, ReshapeShapes) {
    auto g = parse(R"(x = Parameter f32[2,3,4]
a = Reshape(x) shape=[0,-1] special_zero=true
b = Reshape(x) shape=[4,-1]
r = Result(a)
r2 = Result(b)
)");
    EXPECT_EQ(g->find("a")->out_shape, (shape_t{2, 12}));
    EXPECT_EQ(g->find("b")->out_shape, (shape_t{4, 6}));
}

TEST(GraphIr, ConvolutionAutoPad) {
    auto g = parse("x = Parameter f32[1,4,7,6]\n"
                   "w = Constant f32[8,4,3,3] fill(1)\n"
                   "su = Convolution(x, w) strides=[2,2] auto_pad=same_upper\n"
                   "sl = Convolution(x, w) strides=[2,2] auto_pad=same_lower\n"
                   "v = Convolution(x, w) auto_pad=valid\n"
                   "e = Convolution(x, w) pads_begin=[1,0] pads_end=[2,0] dilations=[2,1]\n"
                   "r1 = Result(su)\nr2 = Result(sl)\nr3 = Result(v)\nr4 = Result(e)\n");
    const node *su = g->find("su"), *sl = g->find("sl");
    EXPECT_EQ(su->out_shape, (shape_t{1, 8, 4, 3}));
    // H: out 4, total pad (4-1)*2+3-7 = 2 → 1/1; W: out 3, total (3-1)*2+3-6 = 1 → upper 0/1, lower 1/0.
    EXPECT_EQ(su->pads_b, (std::vector<int64_t>{1, 0}));
    EXPECT_EQ(su->pads_e, (std::vector<int64_t>{1, 1}));
    EXPECT_EQ(sl->pads_b, (std::vector<int64_t>{1, 1}));
    EXPECT_EQ(sl->pads_e, (std::vector<int64_t>{1, 0}));
    EXPECT_EQ(g->find("v")->out_shape, (shape_t{1, 8, 5, 4}));
    EXPECT_EQ(g->find("e")->out_shape, (shape_t{1, 8, 6, 4})); // 7+3-5+1 = 6, 6-3+1 = 4
}

TEST(GraphIr, MatMulAndBroadcast) {
    auto g = parse("a = Parameter f32[2,1,5,3]\n"
                   "b = Parameter f32[4,3,6]\n"
                   "m = MatMul(a, b)\n"
                   "bt = Parameter f32[6,3]\n"
                   "mt = MatMul(a, bt) transpose_b=true\n"
                   "s = Add(m, mt)\n"
                   "c = Constant f32[6] fill(1)\n"
                   "t = Multiply(s, c)\n"
                   "r = Result(t)\n");
    EXPECT_EQ(g->find("m")->out_shape, (shape_t{2, 4, 5, 6}));
    EXPECT_EQ(g->find("mt")->out_shape, (shape_t{2, 1, 5, 6}));
    EXPECT_EQ(g->find("t")->out_shape, (shape_t{2, 4, 5, 6}));
}

// ------------------------------------------------------------- packing
TEST(GraphIr, U4PackingLowNibbleFirst) {
    graph g;
    node *c = g.constant_int(dtype::u4, {3}, {1, 2, 15});
    ASSERT_EQ(c->data->bytes.size(), 2u);
    EXPECT_EQ(c->data->bytes[0], 0x21);
    EXPECT_EQ(c->data->bytes[1], 0x0F);
    node *i = g.constant_int(dtype::s4, {2}, {-8, 7});
    EXPECT_EQ(i->data->bytes[0], 0x78);
    EXPECT_EQ(i->value(0), -8);
    EXPECT_EQ(i->value(1), 7);
}

TEST(GraphIr, ConvertRoundsAndSaturates) {
    auto g = parse("x = Constant f32[6] [1.5, 2.5, -3.5, 300, -300, 1.00048828125]\n"
                   "a = Convert(x) to=u8\n"
                   "b = Convert(x) to=i4\n"
                   "c = Convert(x) to=f16\n"
                   "r1 = Result(a)\nr2 = Result(b)\nr3 = Result(c)\n");
    const auto out = compiled_graph(*g).run({});
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0].to_f32(), (std::vector<float>{2, 2, 0, 255, 0, 1}));
    EXPECT_EQ(out[1].to_f32(), (std::vector<float>{2, 2, -4, 7, -8, 1}));
    // 1 + 2^-11 is a tie between 1 and 1 + 2^-10 in f16: rounds to even (1).
    EXPECT_EQ(out[2].get(5), 1.0f);
    EXPECT_EQ(out[2].get(3), 300.0f);
}

// bf16 is the top half of an f32: a Convert rounds to nearest even, a
// Constant stores two bytes per element and its text form round-trips.
TEST(GraphIr, Bf16RoundsToNearestEvenAndRoundTrips) {
    auto g = parse("x = Constant f32[4] [1.00390625, 1.01171875, 1.0078125, -3.4e38]\n"
                   "b = Convert(x) to=bf16\n"
                   "k = Constant bf16[2] [0.5, -1.5]\n"
                   "r1 = Result(b)\nr2 = Result(k)\n");
    const auto out = compiled_graph(*g).run({});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].type, dtype::bf16);
    // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even (1); 1 + 3·2^-8 a tie
    // up to 1 + 2^-6; 1 + 2^-7 is a bf16.
    EXPECT_EQ(out[0].get(0), 1.0f);
    EXPECT_EQ(out[0].get(1), 1.015625f);
    EXPECT_EQ(out[0].get(2), 1.0078125f);
    EXPECT_EQ(out[0].get(3), -INFINITY); // beyond the largest bf16
    EXPECT_EQ(out[1].to_f32(), (std::vector<float>{0.5f, -1.5f}));
    const node *k = g->find("k");
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(k->data->bytes.size(), 4u);
    const std::string text = to_text(*g);
    EXPECT_NE(text.find("k = Constant bf16[2] [0.5, -1.5]"), std::string::npos) << text;
    EXPECT_EQ(to_text(*parse(text)), text);
}

TEST(GraphIr, Generators) {
    auto a = generate(dtype::u4, {5, 7}, "random(3, 2, 9)");
    auto b = generate(dtype::u4, {35}, "random(3, 2, 9)");
    EXPECT_EQ(a->bytes, b->bytes); // the sequence does not depend on the shape
    EXPECT_EQ(a->generator, "random(3, 2, 9)");
    graph g;
    node *c = g.constant(dtype::u4, {5, 7}, a);
    bool seen_lo = false, seen_hi = false;
    for (int i = 0; i < 35; ++i) {
        const double v = c->value(i);
        EXPECT_GE(v, 2);
        EXPECT_LE(v, 9);
        seen_lo |= v == 2;
        seen_hi |= v == 9;
    }
    EXPECT_TRUE(seen_lo && seen_hi);
    auto p = generate(dtype::f32, {64}, "pow2(1, -3, 0)");
    node *pc = g.constant(dtype::f32, {64}, p);
    for (int i = 0; i < 64; ++i) {
        int e;
        const double m = std::frexp(std::fabs(pc->value(i)), &e);
        EXPECT_EQ(m, 0.5);
        EXPECT_GE(e - 1, -3);
        EXPECT_LE(e - 1, 0);
    }
    auto f = generate(dtype::s8, {3}, "fill(-5)");
    EXPECT_EQ(f->bytes, (std::vector<uint8_t>{0xFB, 0xFB, 0xFB}));
    EXPECT_THROW(generate(dtype::u4, {3}, "random(1, 0, 16)"), qconv::error);
    EXPECT_THROW(generate(dtype::f32, {3}, "gauss(1, 0, 1)"), qconv::error);
    EXPECT_THROW(generate(dtype::f32, {3}, "fill(1, 2)"), qconv::error);
}

// ---------------------------------------------------------- round trip
const char *every_type = R"(# every element type, inline and generated
x  = Parameter f32[2,3] name="input x" rt={origin="test", layer="7"}
a  = Constant f32[2,3] [0.1, -2.5, 3, 1e-07, 65504, -0]
b  = Constant f16[3] [0.5, -1, 0.0999755859375]
c  = Constant u8[2] [0, 255]
d  = Constant i8[2] [-128, 127]
e  = Constant u4[3] [1, 2, 15]
f  = Constant i4[3] [-8, 7, 0]
g  = Constant i32[2] [-2147483648, 2147483647]
h  = Constant i64[2] [-5, 1099511627776]
gu = Constant u4[4,5] random(9, 0, 15)
gf = Constant f32[4] fill(0.25)
s  = Add(x, a)
cf = Convert(b) to=f32
t  = Multiply(s, cf)  name="scaled"
r  = Result(t)
)";

TEST(GraphText, RoundTripEveryType) {
    auto g = parse(every_type);
    const std::string t1 = to_text(*g);
    auto g2 = parse(t1);
    EXPECT_EQ(to_text(*g2), t1);
    EXPECT_EQ(g2->find("x")->friendly_name, "input x");
    EXPECT_EQ(g2->find("x")->rt_info.at("layer"), "7");
    EXPECT_EQ(g2->find("t")->friendly_name, "scaled");
    EXPECT_EQ(g2->find("h")->value(1), 1099511627776.0);
    EXPECT_EQ(g2->find("g")->value(0), -2147483648.0);
    EXPECT_EQ(g2->find("a")->value(0), 0.1f);
    EXPECT_EQ(g2->find("b")->value(2), 0.0999755859375);
    EXPECT_EQ(g2->find("e")->data->bytes, (std::vector<uint8_t>{0x21, 0x0F}));
    for (const char *id : {"a", "b", "c", "d", "e", "f", "g", "h", "gu", "gf"})
        EXPECT_EQ(g->find(id)->data->bytes, g2->find(id)->data->bytes) << id;
    // Generated constants stay generated (the file stays small).
    EXPECT_NE(t1.find("gu = Constant u4[4,5] random(9, 0, 15)"), std::string::npos) << t1;
    EXPECT_NE(t1.find("gf = Constant f32[4] fill(0.25)"), std::string::npos) << t1;
}

TEST(GraphText, RoundTripExampleAndRewritten) {
    auto g = load_file(std::string(QCONV_SOURCE_DIR) + "/examples/ffn_u4.qg");
    const std::string t1 = to_text(*g);
    EXPECT_EQ(to_text(*parse(t1)), t1);
    run_passes(*g);
    const std::string t2 = to_text(*g);
    auto g2 = parse(t2);
    EXPECT_EQ(to_text(*g2), t2);
    EXPECT_LT(t2.size(), 8000u) << "generated constants must stay generated";
    // Saved and loaded through a file.
    const std::string path = ::testing::TempDir() + "/ffn_rewritten.qg";
    save_file(*g, path);
    EXPECT_EQ(to_text(*load_file(path)), t2);
}

TEST(GraphText, ConvolutionAttributesRoundTrip) {
    const std::string text = "x = Parameter f32[1,4,9,9]\n"
                             "w = Constant f32[2,3,2,3,3] random(1, -1, 1)\n"
                             "c = GroupConvolution(x, w) strides=[2,1] pads_begin=[1,0] pads_end=[0,2] "
                             "dilations=[1,2] auto_pad=same_lower\n"
                             "g = Gelu(c) approximation=tanh\n"
                             "m = Reshape(g) shape=[0,-1] special_zero=true\n"
                             "t = Transpose(m) order=[1,0]\n"
                             "mm = MatMul(t, t) transpose_a=true\n"
                             "r = Result(mm)\n";
    auto g = parse(text);
    const node *c = g->find("c");
    EXPECT_EQ(c->attr.auto_pad, pad_mode::same_lower);
    EXPECT_EQ(c->attr.dilations, (std::vector<int64_t>{1, 2}));
    EXPECT_TRUE(g->find("g")->attr.gelu_tanh);
    EXPECT_TRUE(g->find("mm")->attr.transpose_a);
    const std::string t1 = to_text(*g);
    EXPECT_EQ(to_text(*parse(t1)), t1);
}

// ---------------------------------------------------------- bad files
TEST(GraphText, BadFilesNameTheLine) {
    struct bad_case {
        const char *text;
        const char *starts;
        const char *contains;
    };
    const bad_case cases[] = {
        // cycle: b and c feed each other
        {"x = Parameter f32[2]\nb = Add(x, c)\nc = Relu(b)\nr = Result(c)\n", "line ", "cycle"},
        // dangling input
        {"x = Parameter f32[2]\n\ny = Relu(zz)\nr = Result(y)\n", "line 3:", "input 'zz' is not defined"},
        // unknown op
        {"x = Parameter f32[2]\ny = Swish(x)\n", "line 2:", "unknown op 'Swish'"},
        // shape mismatch
        {"x = Parameter f32[2,3]\ny = Parameter f32[4]\n# comment\ns = Add(x, y)\n", "line 4:", "do not broadcast"},
        {"x = Parameter f32[1,8,4,4]\nw = Constant f32[4,6,1,1] fill(1)\nc = Convolution(x, w)\n",
         "line 3:", "input channels 8"},
        {"x = Parameter f32[2,3]\nt = Transpose(x) order=[0,0]\n", "line 2:", "not a permutation"},
        {"x = Parameter f32[2,3]\nt = Reshape(x) shape=[4,-1]\n", "line 2:", "cannot infer"},
        {"x = Parameter f32[2,3]\nt = MatMul(x, x)\n", "line 2:", "inner dimensions"},
        {"x = Parameter f32[2,3]\ny = Convert(x) to=i4\nz = Add(x, y)\n", "line 3:", "element types differ"},
        // syntax
        {"x = Parameter f32[2]\nx = Relu(x)\n", "line 2:", "defined twice"},
        {"x = Parameter f33[2]\n", "line 1:", "unknown element type"},
        {"x = Constant u8[3] [1, 2]\n", "line 1:", "2 values given, shape [3] needs 3"},
        {"x = Constant u8[2] [1, 256]\n", "line 1:", "not a valid u8"},
        {"x = Constant u4[2] random(1, 0, 99)\n", "line 1:", "not a valid u4"},
        {"x = Parameter f32[2]\ny = Relu(x) colour=red\n", "line 2:", "unknown attribute 'colour'"},
        {"x = Parameter f32[2]\ny = Relu(x\n", "line 2:", "expected ','"},
        {"x = Parameter f32[2]\ny = Convert(x)\n", "line 2:", "to=<type>"},
        {"x = Parameter f32[0,2]\n", "line 1:", "non-positive"},
        {"c = Constant u8[-1,4] fill(1)\n", "line 1:", "non-positive"},
        {"x = Parameter f32[2,-3]\n", "line 1:", "non-positive"},
        {"x = Parameter f32[4294967296,4294967296,4]\n", "line 1:", "more than 2^31 elements"},
        {"c = Constant i8[4294967296,4294967296] fill(0)\n", "line 1:", "more than 2^31 elements"},
        {"c = Constant f32[1048576,1048576] fill(0)\nr = Result(c)\n", "line 1:", "more than 2^31 elements"},
        {"x = Parameter f32[65536,65536]\ny = Reshape(x) shape=[65536,65536,-1]\n", "line 1:", "2^31"},
        {"x = Parameter f32[4,4]\ny = Reshape(x) shape=[4294967296,4294967296,-1]\n", "line 2:", "invalid dimension"},
        {"x = Parameter f32[1,1,4,4]\nw = Constant f32[1,1,1,1] fill(1)\n"
         "c = Convolution(x, w) dilations=[9223372036854775807,1]\n",
         "line 3:", "dilations"},
        {"x = Constant i64[1] random(99999999999999999999, 0, 1)\n", "line 1:", "seed"},
        {"x = Constant i64[1] random(1, -9223372036854775808, 9223372036854775807)\n", "line 1:", "2^53"},
    };
    for (const auto &c : cases) {
        const std::string e = error_of(c.text);
        EXPECT_EQ(e.rfind(c.starts, 0), 0u) << c.text << " → " << e;
        EXPECT_NE(e.find(c.contains), std::string::npos) << c.text << " → " << e;
    }
    EXPECT_THROW(load_file("/nonexistent/graph.qg"), qconv::error);
}

// A model file must describe something to compute: a directory, an empty file
// and a graph without a Result are errors naming the file (the driver exits 2).
TEST(GraphText, FilesThatComputeNothingAreErrors) {
    auto error_of_file = [](const std::string &path) {
        try {
            load_file(path);
        } catch (const qconv::error &e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    const std::string dir = ::testing::TempDir();
    EXPECT_NE(error_of_file(dir).find("is a directory"), std::string::npos) << error_of_file(dir);
    const std::string empty = dir + "/qconv_empty.qg", no_result = dir + "/qconv_no_result.qg";
    std::ofstream(empty) << "# only a comment\n";
    std::ofstream(no_result) << "x = Parameter f32[1,4]\ny = Relu(x)\n";
    EXPECT_NE(error_of_file(empty).find("holds no node"), std::string::npos) << error_of_file(empty);
    EXPECT_NE(error_of_file(no_result).find("has no Result"), std::string::npos) << error_of_file(no_result);
    std::remove(empty.c_str());
    std::remove(no_result.c_str());
}

// A run-time dimension: `?` in Parameter shapes only; printed back as `?`,
// and the inferred shapes that follow it show `?` too.
TEST(GraphText, RunTimeDimension) {
    auto g = parse("x = Parameter f32[1,1,?,8]\n"
                   "t = Transpose(x) order=[0,3,1,2]\n"
                   "r = Result(t)\n");
    EXPECT_TRUE(g->is_dynamic());
    EXPECT_EQ(g->find("x")->attr.shape, (shape_t{1, 1, dynamic_dim, 8}));
    EXPECT_EQ(g->find("t")->out_shape, (shape_t{1, 8, 1, 1})); // `?` = 1 until bound
    const std::string t = to_text(*g);
    EXPECT_NE(t.find("x = Parameter f32[1,1,?,8]"), std::string::npos) << t;
    EXPECT_NE(t.find("# f32[1,8,1,?]"), std::string::npos) << t;
    EXPECT_EQ(to_text(*parse(t)), t);
    g->bind_dynamic(5);
    g->infer();
    EXPECT_EQ(g->find("t")->out_shape, (shape_t{1, 8, 1, 5}));
    EXPECT_FALSE(parse("x = Parameter f32[2,3]\nr = Result(x)\n")->is_dynamic());
    const std::string c = error_of("c = Constant f32[?,2] fill(1)\n");
    EXPECT_EQ(c.rfind("line 1:", 0), 0u) << c;
    EXPECT_NE(c.find("Parameter shapes only"), std::string::npos) << c;
    EXPECT_NE(error_of("x = Parameter f32[2,4]\nr = Reshape(x) shape=[?,2]\n").find("expected an integer"),
              std::string::npos);
    try {
        g->bind_dynamic(0);
        ADD_FAILURE() << "bind_dynamic(0) accepted";
    } catch (const qconv::error &e) {
        EXPECT_EQ(std::string(e.what()).rfind("?:", 0), 0u) << e.what();
    }
}

// ------------------------------------------------------------ executor
// Outputs that read nothing but padding are valid (OpenVINO and ONNX accept
// them; docs/semantics.md §2): a 1x1 convolution with pads_begin [1,0] and
// pads_end [0,1] gives a 5x5 output whose first row and last column are the
// (zero) bias, the rest the weighted input shifted down one row.
TEST(GraphExec, PadOnlyOutputsAreTheBiasOfAZeroSum) {
    auto g = parse("x = Parameter f32[1,2,4,4]\n"
                   "w = Constant f32[2,2,1,1] [1, 2, -1, 3]\n"
                   "c = Convolution(x, w) strides=[1,1] pads_begin=[1,0] pads_end=[0,1]\n"
                   "b = Constant f32[1,2,1,1] [0.5, -4]\n"
                   "a = Add(c, b)\n"
                   "r = Result(a)\n");
    EXPECT_EQ(g->find("c")->out_shape, (shape_t{1, 2, 5, 5}));
    std::vector<float> xv;
    for (int i = 0; i < 32; ++i) xv.push_back(static_cast<float>(i % 7 - 3));
    const tensor x = tensor::from_f32(dtype::f32, {1, 2, 4, 4}, xv);
    const float wt[2][2] = {{1, 2}, {-1, 3}}, bias[2] = {0.5f, -4.f};
    std::vector<float> expect;
    for (int oc = 0; oc < 2; ++oc)
        for (int h = 0; h < 5; ++h)
            for (int w = 0; w < 5; ++w) {
                float acc = 0.f;
                if (h >= 1 && w < 4)
                    for (int ic = 0; ic < 2; ++ic) acc += wt[oc][ic] * xv[size_t(ic * 16 + (h - 1) * 4 + w)];
                expect.push_back(acc + bias[oc]);
            }
    for (const bool fold : {true, false}) {
        compile_options o;
        o.fold_constants = fold;
        compiled_graph cg(*g, o);
        const auto out = cg.run({x});
        ASSERT_EQ(out[0].shape, (shape_t{1, 2, 5, 5}));
        EXPECT_EQ(out[0].to_f32(), expect) << "fold_constants=" << fold;
        EXPECT_EQ(out[0].get(0), 0.5f);      // oc 0, the pad-only first row
        EXPECT_EQ(out[0].get(25 + 4), -4.f); // oc 1, row 0 column 4
        EXPECT_EQ(out[0].get(25 + 9), -4.f); // oc 1, row 1, the pad-only last column
    }
}

// A strided 2x2 GroupConvolution whose end pads (3) leave the last output row
// and column reading nothing but padding: those outputs are 0.
TEST(GraphExec, PadOnlyOutputsOfAKxKGroupConvolution) {
    auto g = parse("x = Parameter f32[1,2,3,3]\n"
                   "w = Constant f32[2,1,1,2,2] [1, 0, 0, 1, 0, 1, 1, 0]\n"
                   "c = GroupConvolution(x, w) strides=[2,2] pads_begin=[0,0] pads_end=[3,3]\n"
                   "r = Result(c)\n");
    std::vector<float> xv;
    for (int i = 0; i < 18; ++i) xv.push_back(static_cast<float>(i + 1));
    const tensor x = tensor::from_f32(dtype::f32, {1, 2, 3, 3}, xv);
    const auto out = compiled_graph(*g).run({x});
    ASSERT_EQ(out[0].shape, (shape_t{1, 2, 3, 3}));
    // Output (h, w) reads rows 2h..2h+1 and columns 2w..2w+1. Group 0 (taps
    // (0,0), (1,1)): x[2h][2w] + x[2h+1][2w+1]; group 1 (taps (0,1), (1,0)).
    EXPECT_EQ(out[0].to_f32(), (std::vector<float>{1 + 5, 3, 0, 7, 9, 0, 0, 0, 0, //
                                                   11 + 13, 15, 0, 17, 0, 0, 0, 0, 0}));
}

// The same graph with `?` fixed at v (the text with `?` replaced).
std::unique_ptr<graph> fixed_at(const std::string &text, int64_t v) {
    std::string t = text;
    for (size_t q = t.find('?'); q != std::string::npos; q = t.find('?', q)) t.replace(q, 1, std::to_string(v));
    return parse(t);
}

float max_abs(const std::vector<float> &v) {
    float m = 0;
    for (float x : v) m = std::max(m, std::fabs(x));
    return m;
}

// A graph whose token count is `?` runs at any count: shapes are inferred per
// run, its compressed MatMuls (before and after the conv1x1 → MatMul rewrite)
// take the rows of each run; the results are those of the graph written for
// that count (bit for bit where the MatMul row's M class is the count).
TEST(GraphExec, RunTimeDimensionAtSeveralSizes) {
    const std::string path = std::string(QCONV_SOURCE_DIR) + "/examples/ffn_u4_tokens.qg";
    std::ifstream f(path);
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto g = parse(text);
    ASSERT_TRUE(g->is_dynamic());
    auto rewritten = g->clone();
    const auto records = run_passes(*rewritten);
    ASSERT_EQ(records.size(), 2u);
    for (const auto &r : records) EXPECT_TRUE(r.rewritten) << r.conv << ": " << r.reason;
    const compiled_graph before(*g), after(*rewritten);
    bool fused = false;
    for (const auto &[id, impl] : after.impls()) fused |= impl.find("m?k64n96") != std::string::npos;
    EXPECT_TRUE(fused) << "the up projection is a run-time-M MatMul";
    for (const int64_t tokens : {3, 32, 37, 3}) {
        SCOPED_TRACE("tokens " + std::to_string(tokens));
        auto fixed = fixed_at(text, tokens);
        auto fixed_rw = fixed->clone();
        run_passes(*fixed_rw);
        const auto in = random_inputs(*g, 7, tokens);
        ASSERT_EQ(in[0].shape, (shape_t{1, 1, tokens, 64}));
        const auto want = compiled_graph(*fixed).run(in), want_rw = compiled_graph(*fixed_rw).run(in);
        const auto got = before.run(in), got_rw = after.run(in);
        ASSERT_EQ(got[0].shape, (shape_t{1, 1, tokens, 64}));
        ASSERT_EQ(got_rw[0].shape, (shape_t{1, 1, tokens, 64}));
        EXPECT_EQ(got[0].to_f32(), want[0].to_f32()); // f32 convolutions, as written
        const float scale = max_abs(want[0].to_f32());
        ASSERT_GT(scale, 0.f);
        float vs_fixed = 0, vs_before = 0;
        for (size_t i = 0; i < static_cast<size_t>(got_rw[0].elems()); ++i) {
            vs_fixed = std::max(vs_fixed, static_cast<float>(std::fabs(got_rw[0].get(i) - want_rw[0].get(i))));
            vs_before = std::max(vs_before, static_cast<float>(std::fabs(got_rw[0].get(i) - want[0].get(i))));
        }
        EXPECT_LE(vs_fixed / scale, 1e-5f);  // the rewritten graph written for that count
        EXPECT_LE(vs_before / scale, 1e-4f); // the graph as written (the driver's tolerance)
        if (tokens == 3 || tokens == 32) {
            EXPECT_EQ(got_rw[0].to_f32(), want_rw[0].to_f32());
        }
    }
    // Weights from a Parameter: the MatMul is created per run, for its rows.
    const std::string pw = "x = Parameter f32[?,32]\n"
                           "q = Parameter u8[16,32]\n"
                           "q_f = Convert(q) to=f32\n"
                           "s = Constant f32[16,1] pow2(4, -7, -5)\n"
                           "w = Multiply(q_f, s)\n"
                           "m = MatMul(x, w) transpose_b=true\n"
                           "r = Result(m)\n";
    auto gp = parse(pw);
    const compiled_graph cp(*gp);
    bool per_run = false;
    for (const auto &[id, impl] : cp.impls()) per_run |= impl.find("weights from a Parameter") != std::string::npos;
    EXPECT_TRUE(per_run);
    for (const int64_t rows : {2, 19}) {
        const auto in = random_inputs(*gp, 3, rows);
        const auto want = compiled_graph(*fixed_at(pw, rows)).run(in);
        const auto got = cp.run(in);
        ASSERT_EQ(got[0].shape, (shape_t{rows, 16}));
        EXPECT_EQ(got[0].to_f32(), want[0].to_f32()) << rows;
    }
    // Every `?` takes one value.
    auto two = parse("a = Parameter f32[?,4]\nb = Parameter f32[?,4]\nc = Add(a, b)\nr = Result(c)\n");
    const compiled_graph cg(*two);
    tensor a = tensor::from_f32(dtype::f32, {2, 4}, std::vector<float>(8, 1.f));
    tensor b = tensor::from_f32(dtype::f32, {3, 4}, std::vector<float>(12, 1.f));
    std::string what = "no error";
    try {
        cg.run({a, b});
    } catch (const qconv::error &e) {
        what = e.what();
    }
    EXPECT_EQ(what.rfind("inputs:", 0), 0u) << what;
    EXPECT_NE(what.find("one value"), std::string::npos) << what;
    b = tensor::from_f32(dtype::f32, {2, 4}, std::vector<float>(8, 1.f));
    EXPECT_EQ(cg.run({a, b})[0].to_f32(), std::vector<float>(8, 2.f));
}

// f16 scales (Convert(f16 Constant) to f32, as OpenVINO's compressed weights
// carry them): the rewrite takes them, the executor fuses them into a MatMul
// with f16 scales, and the result is the graph's as written.
TEST(GraphExec, F16ScalesAreRewrittenAndFused) {
    const std::string text = "x   = Parameter f32[1,1,?,64]\n"
                             "t   = Transpose(x) order=[0,3,1,2]\n"
                             "w   = Constant u8[48,2,32,1,1] random(1, 0, 255)\n"
                             "w_f = Convert(w) to=f32\n"
                             "z   = Constant u8[48,2,1,1,1] random(2, 100, 150)\n"
                             "z_f = Convert(z) to=f32\n"
                             "w_z = Subtract(w_f, z_f)\n"
                             "s   = Constant f16[48,2,1,1,1] random(3, 0.001, 0.01)\n"
                             "s_f = Convert(s) to=f32\n"
                             "w_s = Multiply(s_f, w_z)\n"
                             "w_r = Reshape(w_s) shape=[48,64,1,1]\n"
                             "c   = Convolution(t, w_r)\n"
                             "y   = Transpose(c) order=[0,2,3,1]\n"
                             "r   = Result(y)\n";
    auto g = parse(text);
    auto after = g->clone();
    const auto records = run_passes(*after);
    ASSERT_EQ(records.size(), 1u);
    EXPECT_TRUE(records[0].rewritten) << records[0].reason;
    EXPECT_EQ(after->count_ops()["MatMul"], 1);
    const std::string saved = to_text(*after);
    EXPECT_NE(saved.find("Constant f16[48,2,1]"), std::string::npos) << saved; // the scales stay f16
    EXPECT_EQ(to_text(*parse(saved)), saved);
    const compiled_graph cb(*g), ca(*after);
    bool f16 = false;
    for (const auto &[id, impl] : ca.impls()) f16 |= impl.find("scale:f16") != std::string::npos;
    EXPECT_TRUE(f16) << "the MatMul takes the scales as f16";
    for (int64_t tokens : {1, 9}) {
        const auto in = random_inputs(*g, 5, tokens);
        const auto want = cb.run(in), got = ca.run(in);
        ASSERT_EQ(got[0].shape, want[0].shape);
        const float scale = max_abs(want[0].to_f32());
        ASSERT_GT(scale, 0.f);
        for (size_t i = 0; i < static_cast<size_t>(got[0].elems()); ++i)
            ASSERT_LE(std::fabs(got[0].get(i) - want[0].get(i)), 1e-5f * scale) << tokens << " " << i;
    }
}

// f16 and bf16 activations, as OpenVINO exports compressed weights for f16
// inference (the decompression chain in the activation type, f16 scales
// without a Convert): the rewrite takes the convolution, the executor fuses a
// MatMul whose X, Y and scales keep their types. With pow2 scales and small
// integer inputs every product and sum is exact: the MatMul's result is the
// exact value rounded once to the type, and the graph as written (which
// rounds the convolution and then the bias sum) is within one ulp of it.
std::string typed_ffn(const char *t, const char *scale) {
    std::string s =
        std::string("x   = Parameter T[1,1,?,64]\n"
                    "tx  = Transpose(x) order=[0,3,1,2]\n"
                    "w   = Constant u4[48,2,32,1,1] random(1, 0, 15)\n"
                    "w_f = Convert(w) to=T\n"
                    "z   = Constant u4[48,2,1,1,1] random(2, 0, 15)\n"
                    "z_f = Convert(z) to=T\n"
                    "w_z = Subtract(w_f, z_f)\n"
                    "s   = Constant S[48,2,1,1,1] pow2(3, -6, -2)\n") +
        (std::string(scale) == "T" ? "w_s = Multiply(w_z, s)\n" : "s_t = Convert(s) to=T\nw_s = Multiply(w_z, s_t)\n") +
        "w_r = Reshape(w_s) shape=[48,64,1,1]\n"
        "c   = Convolution(tx, w_r)\n"
        "b   = Constant T[1,48,1,1] pow2(4, -3, 0)\n"
        "cb  = Add(c, b)\n"
        "y   = Transpose(cb) order=[0,2,3,1]\n"
        "r   = Result(y)\n";
    const std::string st = std::string(scale) == "T" ? t : scale;
    for (const auto &[from, to] : {std::pair<std::string, std::string>{"T[", std::string(t) + "["},
                                   {"=T\n", std::string("=") + t + "\n"},
                                   {"S[", st + "["}})
        for (size_t at; (at = s.find(from)) != std::string::npos;) s.replace(at, from.size(), to);
    return s;
}

TEST(GraphExec, F16AndBf16ActivationsAreRewrittenAndFused) {
    struct variant {
        const char *type, *scale;
        dtype et;
    };
    for (const variant v :
         {variant{"f16", "T", dtype::f16}, variant{"bf16", "T", dtype::bf16}, variant{"bf16", "f16", dtype::bf16}}) {
        SCOPED_TRACE(std::string(v.type) + " scales " + v.scale);
        auto g = parse(typed_ffn(v.type, v.scale));
        auto after = g->clone();
        const auto records = run_passes(*after);
        ASSERT_EQ(records.size(), 1u);
        EXPECT_TRUE(records[0].rewritten) << records[0].reason;
        EXPECT_NE(records[0].reason.find(std::string("activation=transpose:") + v.type), std::string::npos)
            << records[0].reason;
        EXPECT_EQ(after->count_ops()["MatMul"], 1);
        const std::string saved = to_text(*after);
        EXPECT_EQ(to_text(*parse(saved)), saved);
        const compiled_graph cb(*g), ca(*after);
        bool typed = false, f16_scale = false;
        for (const auto &[id, impl] : ca.impls()) {
            typed |= impl.find(std::string(" x:") + v.type) != std::string::npos;
            f16_scale |= impl.find("scale:f16") != std::string::npos;
        }
        EXPECT_TRUE(typed) << "the MatMul takes X and Y as " << v.type;
        EXPECT_EQ(f16_scale, v.et == dtype::f16 || std::string(v.scale) == "f16");
        // y = round(Σ x·(w − zp)·s + b) once: exact in double, then RNE to the type.
        auto value = [&](const char *id, int64_t i) { return g->find(id)->value(i); };
        auto round_to_type = [&](double exact) {
            const float f = static_cast<float>(exact); // exact: fewer than 24 significant bits
            return v.et == dtype::f16 ? qconv::f16_to_f32(qconv::f32_to_f16(f))
                                      : qconv::bf16_to_f32(qconv::f32_to_bf16(f));
        };
        for (int64_t tokens : {1, 7}) {
            auto in = random_inputs(*g, 5, tokens);
            ASSERT_EQ(in[0].type, v.et);
            uint32_t k = 1;
            for (int64_t i = 0; i < in[0].elems(); ++i)
                in[0].set(i, static_cast<int>((k = k * 1103515245u + 12345u) >> 28) - 8);
            const auto want = cb.run(in), got = ca.run(in);
            ASSERT_EQ(got[0].shape, want[0].shape);
            EXPECT_EQ(got[0].type, v.et);
            int64_t bad = 0;
            for (int64_t t = 0; t < tokens; ++t)
                for (int64_t oc = 0; oc < 48; ++oc) {
                    double acc = value("b", oc);
                    for (int64_t i = 0; i < 64; ++i)
                        acc += in[0].get(t * 64 + i) * (value("w", oc * 64 + i) - value("z", oc * 2 + i / 32)) *
                               value("s", oc * 2 + i / 32);
                    const float exact = round_to_type(acc), y = got[0].get(t * 48 + oc);
                    if (y != exact && bad++ < 3)
                        ADD_FAILURE() << "token " << t << " oc " << oc << ": " << y << " vs " << exact;
                    // The graph as written rounds the convolution, then the sum
                    // with the bias: one unit in the last place apart at most.
                    const float ulp = std::ldexp(1.f, std::ilogb(exact) - (v.et == dtype::f16 ? 10 : 7));
                    EXPECT_LE(std::fabs(want[0].get(t * 48 + oc) - exact), ulp) << t << " " << oc;
                }
            EXPECT_EQ(bad, 0) << tokens;
        }
    }
    // A scale that is neither of the activation type nor an f16 Constant
    // (here Convert(f32 Constant) to f16) is refused with the reason.
    auto mixed = parse(typed_ffn("f16", "f32"));
    const auto records = run_passes(*mixed);
    ASSERT_EQ(records.size(), 1u);
    EXPECT_FALSE(records[0].rewritten);
    EXPECT_NE(records[0].reason.find("scale is not a Constant"), std::string::npos) << records[0].reason;
}

TEST(GraphExec, TransposeReshapeAndBroadcast) {
    auto g = parse("x = Parameter f32[2,3]\n"
                   "t = Transpose(x) order=[1,0]\n"
                   "b = Constant f32[2] [10, 20]\n"
                   "s = Add(t, b)\n"
                   "r = Reshape(s) shape=[6]\n"
                   "o = Result(r)\n");
    tensor in = tensor::from_f32(dtype::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
    const auto out = compiled_graph(*g).run({in});
    EXPECT_EQ(out[0].to_f32(), (std::vector<float>{11, 24, 12, 25, 13, 26}));
}

// Layout transposes (a batch of [rows, cols] matrices: NCHW <-> NHWC) run in
// tiles; odd sizes cross the tile edges. Each element checked by its index.
TEST(GraphExec, TransposesOfLayoutsByIndex) {
    const int64_t N = 2, C = 37, H = 5, W = 7;
    for (const char *order : {"[0,2,3,1]", "[0,3,1,2]", "[1,2,3,0]", "[0,1,3,2]", "[2,0,1,3]"}) {
        auto g =
            parse("x = Parameter f32[2,37,5,7]\nt = Transpose(x) order=" + std::string(order) + "\no = Result(t)\n");
        std::vector<float> v(N * C * H * W);
        for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
        const auto out = compiled_graph(*g).run({tensor::from_f32(dtype::f32, {N, C, H, W}, v)});
        const shape_t &os = out[0].shape;
        std::vector<int64_t> perm;
        for (const char *c = order; *c; ++c)
            if (*c >= '0' && *c <= '9') perm.push_back(*c - '0');
        const int64_t is[4] = {C * H * W, H * W, W, 1};
        const auto y = out[0].to_f32();
        int64_t j = 0, bad = 0;
        for (int64_t a = 0; a < os[0]; ++a)
            for (int64_t b = 0; b < os[1]; ++b)
                for (int64_t c = 0; c < os[2]; ++c)
                    for (int64_t d = 0; d < os[3]; ++d, ++j) {
                        const int64_t idx[4] = {a, b, c, d};
                        int64_t off = 0;
                        for (int k = 0; k < 4; ++k) off += idx[k] * is[perm[k]];
                        bad += y[j] != static_cast<float>(off);
                    }
        EXPECT_EQ(bad, 0) << order;
    }
}

// A ConvTranspose whose kernel is its stride becomes a 1x1 convolution and a
// DepthToSpace (conv_transpose_to_conv); the reference loop runs it as
// written. Small integers keep both sums exact: the same values, for strides
// 2x2 and 3x2 and an odd input size, with constant and run-time weights.
TEST(GraphExec, ConvTransposeAsOneByOneGivesTheLoopsValues) {
    for (const char *k : {"2,2", "3,2"}) {
        const std::string kk(k), kh = kk.substr(0, 1), kw = kk.substr(2, 1);
        const int n = 5 * 6 * std::stoi(kh) * std::stoi(kw);
        std::string vals;
        for (int i = 0; i < n; ++i) vals += (i ? "," : "") + std::to_string((i * 7) % 9 - 4);
        const std::string wshape = "f32[5,6," + kh + "," + kw + "]";
        const std::string attrs = " strides=[" + kk + "] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]\n";
        const std::string fast_text = "x = Parameter f32[1,5,3,7]\nw = Constant " + wshape + " [" + vals +
                                      "]\ny = ConvTranspose(x, w)" + attrs + "o = Result(y)\n";
        const std::string run_text = "x = Parameter f32[1,5,3,7]\nw = Parameter " + wshape +
                                     "\ny = ConvTranspose(x, w)" + attrs + "o = Result(y)\n";
        auto fast = parse(fast_text), loop = parse(run_text), runtime = parse(run_text);
        EXPECT_EQ(conv_transpose_to_conv(*fast), 1) << k;
        EXPECT_EQ(conv_transpose_to_conv(*runtime), 1) << k;
        EXPECT_EQ(fast->count_ops().count("ConvTranspose"), 0u) << k;
        EXPECT_EQ(fast->count_ops().at("DepthToSpace"), 1) << k;
        const compiled_graph cf(*fast), cl(*loop), cr(*runtime);
        auto in = random_inputs(*fast, 4);
        for (int64_t i = 0; i < in[0].elems(); ++i) in[0].f32()[i] = std::nearbyint(in[0].f32()[i] * 8.f);
        const tensor w =
            compiled_graph(*parse("w = Constant " + wshape + " [" + vals + "]\no = Result(w)\n")).run({})[0];
        const auto a = cf.run(in)[0].values(), b = cl.run({in[0], w})[0].values(), c = cr.run({in[0], w})[0].values();
        EXPECT_EQ(a, b) << k;
        EXPECT_EQ(c, b) << k;
        std::set<double> distinct(a.begin(), a.end());
        EXPECT_GT(distinct.size(), 20u) << k;
    }
}

TEST(GraphExec, MatMulTransposes) {
    auto g = parse("a = Parameter f32[2,3]\n"
                   "b = Parameter f32[2,3]\n"
                   "m = MatMul(a, b) transpose_b=true\n"
                   "n = MatMul(a, b) transpose_a=true\n"
                   "r1 = Result(m)\nr2 = Result(n)\n");
    tensor a = tensor::from_f32(dtype::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
    const tensor b = tensor::from_f32(dtype::f32, {2, 3}, {1, 0, -1, 2, 1, 0});
    const auto out = compiled_graph(*g).run({a, b});
    EXPECT_EQ(out[0].to_f32(), (std::vector<float>{-2, 4, -2, 13}));
    // aᵀ·b: [3,2]x[2,3]
    EXPECT_EQ(out[1].to_f32(), (std::vector<float>{9, 4, -1, 12, 5, -2, 15, 6, -3}));
}

TEST(GraphExec, GroupConvolutionNchw) {
    // 2 groups, 1 input and 1 output channel each, 3x3 input, 2x2 kernel, pads 1 at the end.
    auto g = parse("x = Parameter f32[1,2,3,3]\n"
                   "w = Constant f32[2,1,1,2,2] [1, 0, 0, 1, 0, 1, 1, 0]\n"
                   "c = GroupConvolution(x, w) pads_end=[1,1]\n"
                   "r = Result(c)\n");
    std::vector<float> xv;
    for (int i = 0; i < 18; ++i) xv.push_back(static_cast<float>(i));
    const tensor x = tensor::from_f32(dtype::f32, {1, 2, 3, 3}, xv);
    const auto out = compiled_graph(*g).run({x});
    ASSERT_EQ(out[0].shape, (shape_t{1, 2, 3, 3}));
    std::vector<float> expect;
    for (int gr = 0; gr < 2; ++gr)
        for (int h = 0; h < 3; ++h)
            for (int w = 0; w < 3; ++w) {
                auto at = [&](int hh, int ww) { return hh < 3 && ww < 3 ? xv[gr * 9 + hh * 3 + ww] : 0.f; };
                expect.push_back(gr == 0 ? at(h, w) + at(h + 1, w + 1) : at(h, w + 1) + at(h + 1, w));
            }
    EXPECT_EQ(out[0].to_f32(), expect);
}

TEST(GraphExec, ReluGeluAndF16) {
    auto g = parse("x = Parameter f32[4]\n"
                   "r = Relu(x)\n"
                   "e = Gelu(x)\n"
                   "t = Gelu(x) approximation=tanh\n"
                   "h = Convert(x) to=f16\n"
                   "o1 = Result(r)\no2 = Result(e)\no3 = Result(t)\no4 = Result(h)\n");
    tensor x = tensor::from_f32(dtype::f32, {4}, {-2, -0.5f, 0.5f, 3});
    const auto out = compiled_graph(*g).run({x});
    EXPECT_EQ(out[0].to_f32(), (std::vector<float>{0, 0, 0.5f, 3}));
    for (int i = 0; i < 4; ++i) {
        const double v = x.get(i);
        EXPECT_NEAR(out[1].get(i), 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))), 1e-6);
        EXPECT_NEAR(out[2].get(i), 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))), 1e-6);
    }
    EXPECT_EQ(out[3].type, dtype::f16);
    EXPECT_THROW(compiled_graph(*g).run({}), qconv::error);
    tensor wrong = tensor::from_f32(dtype::f32, {5}, std::vector<float>(5));
    EXPECT_THROW(compiled_graph(*g).run({wrong}), qconv::error);
}

} // namespace

// The executor's arena (docs/graph.md, "Compilation", 4): a compilation run
// again on other inputs gives a fresh compilation's bytes, for every example
// graph as written and after the passes (f32, f16, u4 MatMuls, Transposes,
// Reshapes, QDQ blocks), and in a graph with `?` for token counts that come
// and go (a compilation and its arenas per value).
TEST(GraphExecutor, RepeatedRunsGiveAFreshCompilationsBytes) {
    for (const char *name : {"ffn_u4.qg", "ffn_u4_f16.qg", "linear_i8_reshape.qg", "conv3x3_unchanged.qg",
                             "fq_conv_block.qg", "qdq_conv_block.qg", "qdq_bottleneck.qg"}) {
        SCOPED_TRACE(name);
        auto g = load_file(std::string(QCONV_SOURCE_DIR) + "/examples/" + name);
        for (const bool passes : {false, true}) {
            if (passes) run_passes(*g);
            const compiled_graph once(*g);
            // Seed 1, other inputs, seed 1 again: the third run must not see
            // what the second left in the arena. A fresh compilation's result
            // per seed is computed once.
            std::map<uint64_t, std::vector<tensor>> fresh;
            for (uint64_t seed : {1, 2, 1}) {
                const auto in = random_inputs(*g, seed);
                if (!fresh.count(seed)) fresh[seed] = compiled_graph(*g).run(in);
                const auto y = once.run(in);
                ASSERT_EQ(y.size(), fresh[seed].size());
                for (size_t r = 0; r < y.size(); ++r)
                    EXPECT_EQ(y[r].bytes, fresh[seed][r].bytes)
                        << "passes " << passes << " seed " << seed << " output " << r;
            }
        }
    }
    auto g = load_file(std::string(QCONV_SOURCE_DIR) + "/examples/ffn_u4_tokens.qg");
    run_passes(*g);
    const compiled_graph once(*g);
    for (const int64_t tokens : {3, 1, 3, 7, 1}) {
        const auto in = random_inputs(*g, static_cast<uint64_t>(tokens), tokens);
        EXPECT_EQ(once.run(in)[0].bytes, compiled_graph(*g).run(in)[0].bytes) << "tokens " << tokens;
    }
}

// A BatchNormalization after an f32 convolution (the reader's per-channel
// Multiply and Add, after the convolution's bias Add or directly) goes into
// the primitive: weights w·a, bias b·a + t (after a Relu: as post-ops). With power-of-two scales and
// small integers every product and sum is exact, so the output equals the
// same graph with run-time weights (nothing folded) bit for bit; with other
// scales it is within a few f32 ulps.
TEST(GraphExec, BatchNormAfterAnF32ConvolutionIsFoldedIntoIt) {
    for (bool exact : {true, false})
        for (bool with_bias : {true, false}) {
            const std::string a = exact ? "[0.5, 2, 0.25, 1, 4, 0.125]" : "[0.71, 1.3, 0.27, 1.01, 3.9, 0.113]";
            const std::string body =
                "x  = Parameter f32[1,3,7,6]\n"
                "c  = Convolution(x, w) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]\n" +
                std::string(with_bias ? "b  = Constant f32[1,6,1,1] [1, -2, 3, 0, -1, 2]\nt0 = Add(c, b)\n"
                                      : "t0 = Relu(c)\n") +
                "s  = Constant f32[1,6,1,1] " + a +
                "\nm  = Multiply(t0, s)\n"
                "h  = Constant f32[6,1,1] [3, -1, 0.5, 2, -4, 1]\nbn = Add(m, h)\nr = Relu(bn)\no = Result(r)\n";
            const std::string wv = "w  = Constant f32[6,3,3,3] random(7, -3, 3)\n";
            auto folded = parse(wv + body);
            auto rt = parse("w  = Parameter f32[6,3,3,3]\n" + body);
            const compiled_graph cf(*folded), cr(*rt);
            std::map<std::string, std::string> impl;
            for (const auto &[id, text] : cf.impls()) impl[id] = text;
            if (with_bias) {
                EXPECT_NE(impl["c"].find("+bias (per-channel scale folded)"), std::string::npos) << impl["c"];
                EXPECT_EQ(impl["m"], "fused into c");
                EXPECT_EQ(impl["bn"], "fused into c");
            } else { // a Relu in between: the BatchNormalization and the Relu after it are post-ops, not folded
                EXPECT_NE(impl["c"].find("onednn:conv_f32 +relu +multiply +add +relu"), std::string::npos) << impl["c"];
                EXPECT_EQ(impl["c"].find("folded"), std::string::npos) << impl["c"];
            }
            auto in = random_inputs(*folded, 3);
            for (int64_t i = 0; i < in[0].elems(); ++i) in[0].f32()[i] = std::nearbyint(in[0].f32()[i] * 4.f);
            const tensor w = compiled_graph(*parse(wv + "o = Result(w)\n")).run({})[0];
            std::vector<float> wi = w.to_f32();
            for (float &v : wi) v = std::nearbyint(v);
            const tensor wt = tensor::from_f32(dtype::f32, w.shape, wi);
            auto folded_int = parse("w  = Constant f32[6,3,3,3] [" + [&] {
                std::string t;
                for (size_t i = 0; i < wi.size(); ++i) t += (i ? "," : "") + std::to_string(static_cast<int>(wi[i]));
                return t;
            }() + "]\n" + body);
            const auto got = compiled_graph(*folded_int).run(in)[0].to_f32();
            const auto want = cr.run({wt, in[0]})[0].to_f32(); // Parameters in order: w, x
            ASSERT_EQ(got.size(), want.size());
            int nonzero = 0;
            for (size_t i = 0; i < got.size(); ++i) {
                if (exact) EXPECT_EQ(got[i], want[i]) << i;
                else EXPECT_NEAR(got[i], want[i], 4e-6 * std::fabs(want[i]) + 1e-5) << i;
                nonzero += got[i] != 0;
            }
            EXPECT_GT(nonzero, static_cast<int>(got.size() / 4));
        }
}

// An f32 MaxPool between two f32 convolutions runs NHWC in the island
// (windows with padding, a stride, ceil rounding and one row past the input
// whose window is all padding): per channel the plain loop's maximum, the same
// bytes as the plain run, on values with repeats (max ties) and negatives.
TEST(GraphExec, FloatIslandMaxPoolIsThePlainMaximum) {
    const auto g = parse(R"(
x   = Parameter f32[2,3,11,9]
w0  = Constant f32[5,3,3,3] random(11, -2, 2)
c0  = Convolution(x, w0) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
mp  = MaxPool(c0) kernel=[3,3] strides=[2,2] pads_begin=[1,1] pads_end=[1,1] rounding_type=ceil
w1  = Constant f32[4,5,1,1] random(12, -1, 1)
c1  = Convolution(mp, w1) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
o   = Result(c1)
)");
    const compiled_graph island(*g);
    std::map<std::string, std::string> impl;
    for (const auto &[id, text] : island.impls()) impl[id] = text;
    EXPECT_NE(impl["mp"].find("(f32 NHWC)"), std::string::npos) << impl["mp"];
    EXPECT_NE(impl["c0"].find("(f32 NHWC)"), std::string::npos) << impl["c0"];
    setenv("QCONV_GRAPH_F32_NHWC", "0", 1);
    const compiled_graph plain(*g);
    unsetenv("QCONV_GRAPH_F32_NHWC");
    EXPECT_EQ(plain.impls().size(), island.impls().size());
    for (uint64_t seed : {1, 2, 3}) {
        auto in = random_inputs(*g, seed);
        for (int64_t i = 0; i < in[0].elems(); i += 7) in[0].f32()[i] = std::nearbyint(in[0].f32()[i] * 2.f); // ties
        for (int threads : {1, 2}) {
            const auto a = compiled_graph(*g, threads).run(in)[0], b = plain.run(in)[0];
            EXPECT_EQ(a.bytes, b.bytes) << "seed " << seed << " threads " << threads;
            const auto v = a.values();
            EXPECT_GT(std::set<double>(v.begin(), v.end()).size(), 50u);
        }
    }
}

// A float model's f32 island (no DequantizeLinear): from the first f32
// convolution through a BatchNormalization read as per-channel Multiply /
// Add ([C,1,1] and [1,C,1,1] Constants), Relu, a scalar Add, a
// squeeze-excitation block (ReduceMean over H, W of the NHWC value, a 1x1
// convolution of the pooled [1,C,1,1] value, Clamp, the per-channel
// Multiply), a nearest Resize and a Concat along C into the last
// convolution: every op writes NHWC but the pool (the elementwise ops as
// regions, graph/exec/elementwise_regions.cpp), and the output has the
// bytes of the same graph run with every f32 output plain
// (QCONV_GRAPH_F32_NHWC=0: transposes around each convolution).
TEST(GraphExec, FloatIslandRunsThroughBatchNormPoolResizeAndConcat) {
    const auto g = parse(R"(
x   = Parameter f32[1,3,12,10]
w0  = Constant f32[8,3,3,3] random(1, -1, 1)
c0  = Convolution(x, w0) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
bs  = Constant f32[8,1,1] random(2, 0.5, 1.5)
bm  = Multiply(c0, bs)
bb  = Constant f32[1,8,1,1] random(3, -1, 1)
ba  = Add(bb, bm)
r0  = Relu(ba)
k   = Constant f32[1] [0.375]
h   = Add(r0, k)
gp  = ReduceMean(r0) axes=[2,3] keep_dims=true
w1  = Constant f32[8,8,1,1] random(4, -1, 1)
s1  = Convolution(gp, w1) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
sc  = Clamp(s1) min=0 max=1
se  = Multiply(h, sc)
ad  = Add(h, se)
w2  = Constant f32[4,8,3,3] random(5, -1, 1)
c2  = Convolution(ad, w2) strides=[2,2] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
up  = Resize(c2) mode=nearest coordinate_mode=asymmetric nearest_mode=floor scales=[2,2]
w3  = Constant f32[4,8,1,1] random(6, -1, 1)
c3  = Convolution(ad, w3) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
cat = Concat(up, c3) axis=1
w4  = Constant f32[2,8,3,3] random(7, -1, 1)
c4  = Convolution(cat, w4) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
o   = Result(c4)
)");
    const compiled_graph island(*g);
    std::map<std::string, std::string> impl;
    for (const auto &[id, text] : island.impls()) impl[id] = text;
    // The BatchNormalization's Multiply / Add go into the convolution (bm, ba into c0), an op fused into an
    // elementwise region (h, se into ad) runs in its root's step.
    auto step_of = [&](const std::string &id) {
        const std::string &t = impl[id];
        return t.rfind("fused into ", 0) == 0 ? impl[t.substr(11)] : t;
    };
    EXPECT_EQ(impl["bm"], "fused into c0");
    EXPECT_EQ(impl["ba"], "fused into c0");
    EXPECT_EQ(impl["se"], "fused into ad");
    for (const char *id : {"c0", "bm", "ba", "r0", "h", "s1", "sc", "se", "ad", "c2", "up", "c3", "cat"})
        EXPECT_NE(step_of(id).find("(f32 NHWC)"), std::string::npos) << id << ": " << step_of(id);
    for (const char *id : {"gp", "c4"}) EXPECT_EQ(impl[id].find("NHWC"), std::string::npos) << id << ": " << impl[id];
    setenv("QCONV_GRAPH_F32_NHWC", "0", 1);
    const compiled_graph plain(*g);
    unsetenv("QCONV_GRAPH_F32_NHWC");
    for (const auto &[id, text] : plain.impls()) EXPECT_EQ(text.find("NHWC"), std::string::npos) << id << ": " << text;
    for (uint64_t seed : {1, 2}) {
        const auto in = random_inputs(*g, seed);
        const auto a = island.run(in)[0], b = plain.run(in)[0];
        EXPECT_EQ(a.order, layout::plain);
        EXPECT_EQ(a.bytes, b.bytes) << "seed " << seed;
        const auto v = a.values();
        EXPECT_GT(std::set<double>(v.begin(), v.end()).size(), 100u);
    }
}
