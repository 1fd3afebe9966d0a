// An f32 convolution's post-ops in the graph (graph/exec/conv_epilogue.cpp):
// with constant weights, the Relu, Clamp, hard-swish
// (x·Clip(x + 3, 0, 6)/6) and per-channel / per-tensor Add, Subtract and
// Multiply after it, through single readers, go into its primitive. Each case
// is a graph in the text format; it checks the convolution's implementation
// ("+hardswish +multiply ..."), that the absorbed nodes are "fused into" it
// and the others keep steps of their own, and compares the outputs with the
// same graph compiled with compile_options::conv_post_ops = false (each op a
// step, or a region): byte for byte where the chain has no hard-swish (on
// integer-valued data the convolution is exact in any summation order, and
// each post-op is the graph's own f32 operation), within the hard-swish's
// bound otherwise (docs/semantics.md §5) — for 3 seeds, threads 1 and 2,
// NHWC islands and plain (QCONV_GRAPH_F32_NHWC=0).
// Cases: PP-OCR's LCNet block (bias, scalar scale-shift folded, hard-swish,
// scalar scale-shift) on a 1x1 and on a depthwise convolution; a
// BatchNormalization after a Relu then Relu6; Subtract of a per-channel
// constant (x − c is x + (−c)); and what stays out: c − x, a hard-swish whose
// input is read elsewhere, a Divide by 5, a Clamp(0, 5), a post-op whose value
// is also a Result (the chain ends before it), a Multiply by a full-shape
// operand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "qconv/graph.h"

using namespace qconv::graph;

namespace {

struct post_op_case {
    const char *name;
    std::string text;
    std::string conv_impl;              // a fragment of "c"'s implementation
    std::vector<std::string> fused;     // "fused into c"
    std::vector<std::string> not_fused; // steps of their own (or regions)
    bool exact;                         // no hard-swish in the chain
};

void PrintTo(const post_op_case &c, std::ostream *os) { *os << c.name; }

std::map<std::string, std::string> impl_map(const compiled_graph &cg) {
    std::map<std::string, std::string> m;
    for (const auto &[id, text] : cg.impls()) m[id] = text;
    return m;
}

compile_options options(int threads, bool post_ops) {
    compile_options o;
    o.threads = threads;
    o.conv_post_ops = post_ops;
    return o;
}

// Inputs of small integers (exact convolutions in any summation order).
std::vector<qconv::graph::tensor> integer_inputs(const graph &g, uint64_t seed) {
    auto in = random_inputs(g, seed);
    for (auto &t : in)
        for (int64_t i = 0; i < t.elems(); ++i) t.f32()[i] = std::nearbyint(t.f32()[i] * 4.f);
    return in;
}

const char *kConv = "x  = Parameter f32[2,8,9,11]\n"
                    "wi = Constant i8[16,8,1,1] random(1, -3, 3)\nw = Convert(wi) to=f32\n"
                    "c  = Convolution(x, w) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]\n";

std::string hard_swish(const std::string &x, const std::string &p) {
    return p + "3 = Constant f32[1] [3]\n" + p + "a = Add(" + x + ", " + p + "3)\n" + p + "c = Clamp(" + p +
           "a) min=0 max=6\n" + p + "m = Multiply(" + x + ", " + p + "c)\n" + p + "6 = Constant f32[] [6]\n" + p +
           "d = Divide(" + p + "m, " + p + "6)\n";
}

// The ONNX reader's HardSwish: x · Clamp(x·(1/6) + 0.5, 0, 1).
std::string hard_swish_op(const std::string &x, const std::string &p) {
    return p + "k = Constant f32[] [0.16666667]\n" + p + "s = Multiply(" + x + ", " + p + "k)\n" + p +
           "h = Constant f32[] [0.5]\n" + p + "a = Add(" + p + "s, " + p + "h)\n" + p + "c = Clamp(" + p +
           "a) min=0 max=1\n" + p + "m = Multiply(" + p + "c, " + x + ")\n";
}

std::vector<post_op_case> cases() {
    std::vector<post_op_case> r;
    const std::string lcnet_tail = "s0 = Constant f32[1] [1.5]\nm0 = Multiply(s0, b)\nt0 = Constant f32[1] [-0.25]\n"
                                   "a0 = Add(m0, t0)\n" +
                                   hard_swish("a0", "h") +
                                   "s1 = Constant f32[1] [0.75]\nm1 = Multiply(hd, s1)\n"
                                   "t1 = Constant f32[1] [0.5]\na1 = Add(m1, t1)\n"
                                   "w2i = Constant i8[4,16,1,1] random(2, -2, 2)\nw2 = Convert(w2i) to=f32\n"
                                   "c2 = Convolution(a1, w2) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] "
                                   "dilations=[1,1]\no = Result(c2)\n";
    const std::vector<std::string> lcnet_fused = {"b", "m0", "a0", "ha", "hc", "hm", "hd", "m1", "a1"};
    r.push_back({"LcnetBlock1x1",
                 std::string(kConv) +
                     "bbi = Constant i8[16,1,1] random(3, -4, 4)\nbb = Convert(bbi) to=f32\nb = Add(c, bb)\n" +
                     lcnet_tail,
                 "+bias (per-channel scale folded) +hardswish +multiply +add (f32 NHWC)",
                 lcnet_fused,
                 {},
                 false});
    r.push_back(
        {"LcnetBlockDepthwise",
         "x  = Parameter f32[1,16,10,13]\nwi = Constant i8[16,1,1,3,3] random(1, -3, 3)\nw = Convert(wi) to=f32\n"
         "c  = GroupConvolution(x, w) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]\n"
         "bbi = Constant i8[1,16,1,1] random(3, -4, 4)\nbb = Convert(bbi) to=f32\nb = Add(c, bb)\n" +
             lcnet_tail,
         "+bias (per-channel scale folded) +hardswish +multiply +add (f32 NHWC)",
         lcnet_fused,
         {},
         false});
    r.push_back(
        {"BatchNormAfterReluThenRelu6",
         std::string(kConv) +
             "r = Relu(c)\ns = Constant f32[16,1,1] [0.5,2,1,4,0.25,1,2,0.5,1,1,2,4,0.5,1,2,1]\n"
             "m = Multiply(r, s)\nti = Constant i8[1,16,1,1] random(4, -3, 3)\nt = Convert(ti) to=f32\nn = Add(t, m)\n"
             "q = Clamp(n) min=0 max=6\no = Result(q)\n",
         "onednn:conv_f32 +relu +multiply +add +clip",
         {"r", "m", "n", "q"},
         {},
         true});
    r.push_back(
        {"SubtractAConstant",
         std::string(kConv) +
             "r = Relu(c)\nki = Constant i8[16,1,1] random(5, -2, 2)\nk = Convert(ki) to=f32\ns = Subtract(r, k)\n"
             "k2 = Constant f32[] [3]\ns2 = Subtract(k2, s)\no = Result(s2)\n",
         "onednn:conv_f32 +relu +add",
         {"r", "s"},
         {"s2"},
         true});
    r.push_back({"OnnxHardSwishThenShift",
                 std::string(kConv) + hard_swish_op("c", "h") +
                     "t = Constant f32[1,16,1,1] [1,2,3,4,5,6,7,8,-1,-2,-3,-4,-5,-6,-7,-8]\nn = Add(hm, t)\n"
                     "o = Result(n)\n",
                 "onednn:conv_f32 +hardswish +add",
                 {"hs", "ha", "hc", "hm", "n"},
                 {},
                 false});
    r.push_back({"HardSwishInputReadElsewhere",
                 std::string(kConv) + hard_swish("c", "h") + "e = Add(c, hd)\no = Result(e)\n",
                 "onednn:conv_f32",
                 {},
                 {"ha", "hd", "e"},
                 true});
    r.push_back({"NotAHardSwish",
                 std::string(kConv) + "r = Relu(c)\nk3 = Constant f32[] [3]\na = Add(r, k3)\n"
                                      "q = Clamp(a) min=0 max=5\nm = Multiply(r, q)\nk5 = Constant f32[] [5]\n"
                                      "d = Divide(m, k5)\no = Result(d)\n",
                 "onednn:conv_f32 +relu",
                 {"r"},
                 {"a", "d"},
                 true});
    r.push_back({"ChainEndsBeforeAResult",
                 std::string(kConv) + "r = Relu(c)\nk = Constant f32[] [0.5]\nm = Multiply(r, k)\n"
                                      "n = Multiply(m, k)\no1 = Result(m)\no2 = Result(n)\n",
                 "onednn:conv_f32 +relu +multiply",
                 {"r", "m"},
                 {"n"},
                 true});
    r.push_back({"FullShapeOperandStops",
                 std::string(kConv) + "p = Parameter f32[2,16,9,11]\nr = Relu(c)\nm = Multiply(r, p)\n"
                                      "q = Relu(m)\no = Result(q)\n",
                 "onednn:conv_f32 +relu",
                 {"r"},
                 {"q"},
                 true});
    return r;
}

class GraphConvPostOps : public ::testing::TestWithParam<post_op_case> {};

TEST_P(GraphConvPostOps, TheConvolutionTakesTheChainWithTheValuesOfOneStepPerOp) {
    const post_op_case &c = GetParam();
    const auto g = parse(c.text);
    for (const bool plain : {false, true}) {
        if (plain) setenv("QCONV_GRAPH_F32_NHWC", "0", 1);
        for (int threads : {1, 2}) {
            const compiled_graph on(*g, options(threads, true)), off(*g, options(threads, false));
            const auto impl = impl_map(on);
            const std::string want_impl = plain ? c.conv_impl.substr(0, c.conv_impl.rfind(" (f32 NHWC)")) : c.conv_impl;
            EXPECT_NE(impl.at("c").find(want_impl), std::string::npos) << impl.at("c");
            for (const std::string &f : c.fused) EXPECT_EQ(impl.at(f), "fused into c") << f;
            for (const std::string &f : c.not_fused) EXPECT_NE(impl.at(f), "fused into c") << f;
            for (const auto &[id, text] : impl_map(off)) EXPECT_EQ(text.find("+relu"), std::string::npos) << id;
            for (uint64_t seed : {1u, 2u, 3u}) {
                const auto in = integer_inputs(*g, seed);
                const auto want = off.run(in), got = on.run(in);
                ASSERT_EQ(want.size(), got.size());
                for (size_t k = 0; k < want.size(); ++k) {
                    const auto w = want[k].to_f32(), v = got[k].to_f32();
                    ASSERT_EQ(w.size(), v.size());
                    float top = 0.f;
                    for (float x : w) top = std::max(top, std::fabs(x));
                    EXPECT_GT(top, 0.f);
                    int bad = 0;
                    for (size_t i = 0; i < w.size(); ++i) {
                        // Hard-swish: a few ulps of each value, times the next convolution's weights (16 · 2).
                        const float tol = c.exact ? 0.f : 32.f * std::ldexp(top, -21);
                        if (!(std::fabs(w[i] - v[i]) <= tol) && ++bad < 5)
                            ADD_FAILURE() << "output " << k << " element " << i << ": " << v[i] << ", one step per op "
                                          << w[i] << " (threads " << threads << ", seed " << seed << ")";
                    }
                }
            }
        }
        if (plain) unsetenv("QCONV_GRAPH_F32_NHWC");
    }
}

INSTANTIATE_TEST_SUITE_P(Chains, GraphConvPostOps, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<post_op_case> &i) { return std::string(i.param.name); });

} // namespace
