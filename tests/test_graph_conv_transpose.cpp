// ConvTranspose as a 1x1 convolution + DepthToSpace (graph/passes/
// conv_transpose_to_conv.cpp, docs/semantics.md §10) and the DepthToSpace op
// itself (graph/ops/data_movement.cpp).
//
// GraphConvTranspose runs one table of ConvTransposes whose kernel is their
// stride (2x2, 3x2, 1x1, 4x4) through the pass: weights written as an f32
// Constant, a DequantizeLinear per output channel (axis 1) or per tensor, the
// ONNX reader's Multiply(Convert(q) − Convert(z), s) form, or a run-time
// Parameter (the generic Transpose + Reshape); no bias, a per-channel bias Add
// or a scalar one; a float activation or a QDQ one (u8 per tensor) with a
// per-tensor QuantizeLinear + DequantizeLinear output. Each is rewritten once,
// leaves no ConvTranspose and holds a DepthToSpace; float cases (small
// integers, exact sums) give the graph-as-written's values exactly (its
// reference ConvTranspose loop), QDQ ones are lowered to a QConvolution and
// stay within one output step of it on few elements. ConvTransposes the pass
// must leave (pads, output_padding, group 2, dilation 2, kernel != stride)
// are not rewritten and run as before.
//
// DepthToSpace: DCR and CRD against hand-computed values (square and
// non-square blocks, f32 and u8), on 8-bit NHWC values straight out of a
// lowered convolution and in an f32 island, the text round trip, and the
// refusals of bad blocks and modes (naming the node's line).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "qconv/graph.h"
#include "tests/support/graph_texts.h"

using namespace qconv::graph;
using ::testing::HasSubstr;

namespace {

// ---------------------------------------------------------------- builder
enum class weights {
    f32_constant,
    dq_per_oc,
    dq_per_tensor,
    multiply_form,
    parameter,
    multiply_z_scalar, // the Multiply form, scale per channel and zero point per tensor
    multiply_s_scalar, // the Multiply form, scale per tensor and zero point per channel
};
enum class bias {
    none,
    per_channel,
    scalar,
    per_channel_rank3, // [OC, 1, 1]
    two_adds,          // per channel, then a scalar
};

const char *to_name(weights w) {
    switch (w) {
    case weights::f32_constant: return "f32const";
    case weights::dq_per_oc: return "dq_per_oc";
    case weights::dq_per_tensor: return "dq_per_tensor";
    case weights::multiply_form: return "mul_form";
    case weights::parameter: return "param";
    case weights::multiply_z_scalar: return "mul_form_z_scalar";
    case weights::multiply_s_scalar: return "mul_form_s_scalar";
    }
    return "?";
}
const char *to_name(bias b) {
    switch (b) {
    case bias::none: return "nobias";
    case bias::per_channel: return "bias_per_oc";
    case bias::scalar: return "bias_scalar";
    case bias::per_channel_rank3: return "bias_per_oc_rank3";
    case bias::two_adds: return "two_bias_adds";
    }
    return "?";
}

struct ct_case {
    std::string name;
    int kh = 2, kw = 2; // kernel
    int sh = 2, sw = 2; // strides
    weights w = weights::f32_constant;
    bias b = bias::none;
    bool qdq = false;
    int N = 1, C = 6, OC = 5, H = 4, W = 5;
    int pad = 0, out_pad = 0, group = 1, dilation = 1;
    bool rewritten = true; // what conv_transpose_to_conv must do
    bool lowered = false;  // a QDQ case lowered to a QConvolution
};

void PrintTo(const ct_case &c, std::ostream *os) { *os << c.name; }

std::string dims(std::initializer_list<int> d) {
    std::string r;
    for (int v : d) r += (r.empty() ? "" : ",") + std::to_string(v);
    return "[" + r + "]";
}

// n small integers (−m .. m), deterministic.
std::string ints(int n, int m, int seed) {
    std::string r;
    for (int i = 0; i < n; ++i) r += (i ? "," : "") + std::to_string((i * 7 + seed * 3 + i / 5) % (2 * m + 1) - m);
    return "[" + r + "]";
}

// n weight scales cycling through three values: for float cases powers of
// two 2^-k, k from `lo` on (exact products); for QDQ ones scales near 1/100
// that are not (the int8 convolution then rounds where the graph does not).
std::string scales(int n, int lo, bool qdq) {
    const double q[] = {0.0107, 0.0061, 0.0083};
    std::string r;
    for (int i = 0; i < n; ++i) {
        const double v = qdq ? q[(i + lo) % 3] : std::ldexp(1.0, -(lo + i % 3));
        r += (i ? "," : "") + std::to_string(v);
    }
    return "[" + r + "]";
}

std::string zeros(int n) {
    std::string r;
    for (int i = 0; i < n; ++i) r += i ? ",0" : "0";
    return "[" + r + "]";
}

// The graph of case c: the ConvTranspose is `ct`; the output dequantized `yd`
// in QDQ cases.
std::string ct_text(const ct_case &c) {
    const int OCg = c.OC / c.group, nw = c.C * OCg * c.kh * c.kw;
    const std::string ws = dims({c.C, OCg, c.kh, c.kw});
    // QDQ weights: i8 in [-20, 20] with scales near 1/100; float cases: [-6,
    // 6] with scales of 1/4 .. 1/16 (exact products of integer data).
    const int qmax = c.qdq ? 20 : 6, slo = 2;
    std::string t = "x  = Parameter f32" + dims({c.N, c.C, c.H, c.W}) + "\n";
    std::string xin = "x";
    if (c.qdq) {
        t += "xs = Constant f32[] [0.0625]\nxz = Constant u8[] [128]\n"
             "xq = QuantizeLinear(x, xs, xz)\nxd = DequantizeLinear(xq, xs, xz)\n";
        xin = "xd";
    }
    switch (c.w) {
    case weights::f32_constant: t += "w  = Constant f32" + ws + " " + ints(nw, qmax, 1) + "\n"; break;
    case weights::dq_per_oc:
        t += "wq = Constant i8" + ws + " random(3, -" + std::to_string(qmax) + ", " + std::to_string(qmax) + ")\n";
        t += "wsc = Constant f32[" + std::to_string(OCg) + "] " + scales(OCg, slo, c.qdq) + "\n";
        // A zero point of zeros where the int8 lowering is to take it.
        t += "wz = Constant i8[" + std::to_string(OCg) + "] " + (c.qdq ? zeros(OCg) : ints(OCg, 2, 1)) + "\n";
        t += "w  = DequantizeLinear(wq, wsc, wz) axis=1\n";
        break;
    case weights::dq_per_tensor:
        t += "wq = Constant i8" + ws + " random(4, -" + std::to_string(qmax) + ", " + std::to_string(qmax) + ")\n";
        t += "wsc = Constant f32[] " + scales(1, slo + 1, c.qdq) + "\n";
        t += "w  = DequantizeLinear(wq, wsc)\n";
        break;
    case weights::multiply_form: {
        // The ONNX reader's form of a per-channel DequantizeLinear; a zero
        // point of zeros where the int8 lowering is to take it.
        t += "wq = Constant i8" + ws + " random(5, -" + std::to_string(qmax) + ", " + std::to_string(qmax) + ")\n";
        t += "wz = Constant i8" + dims({1, OCg, 1, 1}) + " " + (c.qdq ? zeros(OCg) : ints(OCg, 3, 2)) + "\n";
        t += "wsc = Constant f32" + dims({1, OCg, 1, 1}) + " " + scales(OCg, slo, c.qdq) + "\n";
        t += "wqc = Convert(wq) to=f32\nwzc = Convert(wz) to=f32\nwd = Subtract(wqc, wzc)\nw  = Multiply(wd, wsc)\n";
        break;
    }
    case weights::parameter: t += "w  = Parameter f32" + ws + "\n"; break;
    case weights::multiply_z_scalar:
    case weights::multiply_s_scalar: {
        const bool z1 = c.w == weights::multiply_z_scalar;
        t += "wq = Constant i8" + ws + " random(6, -" + std::to_string(qmax) + ", " + std::to_string(qmax) + ")\n";
        t += z1 ? "wz = Constant i8[] [" + std::string(c.qdq ? "0" : "2") + "]\n"
                : "wz = Constant i8" + dims({1, OCg, 1, 1}) + " " + (c.qdq ? zeros(OCg) : ints(OCg, 3, 2)) + "\n";
        t += z1 ? "wsc = Constant f32" + dims({1, OCg, 1, 1}) + " " + scales(OCg, slo, c.qdq) + "\n"
                : "wsc = Constant f32[] " + scales(1, slo, c.qdq) + "\n";
        t += "wqc = Convert(wq) to=f32\nwzc = Convert(wz) to=f32\nwd = Subtract(wqc, wzc)\nw  = Multiply(wsc, wd)\n";
        break;
    }
    }
    const std::string p = std::to_string(c.pad), d = std::to_string(c.dilation);
    t += "ct = ConvTranspose(" + xin + ", w) strides=" + dims({c.sh, c.sw}) + " pads_begin=[" + p + "," + p +
         "] pads_end=[" + p + "," + p + "] dilations=[" + d + "," + d + "]";
    if (c.out_pad) t += " output_padding=" + dims({c.out_pad, c.out_pad});
    if (c.group != 1) t += " group=" + std::to_string(c.group);
    t += "\n";
    std::string y = "ct";
    if (c.b == bias::per_channel || c.b == bias::per_channel_rank3 || c.b == bias::two_adds) {
        std::string v;
        for (int i = 0; i < c.OC; ++i) v += (i ? "," : "") + std::to_string(0.25 * (i % 5) - 0.5);
        const std::string bs = c.b == bias::per_channel_rank3 ? dims({c.OC, 1, 1}) : dims({1, c.OC, 1, 1});
        t += "b  = Constant f32" + bs + " [" + v + "]\nyb = Add(ct, b)\n";
        y = "yb";
        if (c.b == bias::two_adds) {
            t += "b2 = Constant f32[1] [-0.75]\nyb2 = Add(yb, b2)\n";
            y = "yb2";
        }
    } else if (c.b == bias::scalar) {
        t += "b  = Constant f32[] [0.375]\nyb = Add(b, ct)\n";
        y = "yb";
    }
    if (c.qdq) {
        t += "ys = Constant f32[] [0.02]\nyz = Constant u8[] [128]\n"
             "yq = QuantizeLinear(" +
             y + ", ys, yz)\nyd = DequantizeLinear(yq, ys, yz)\n";
        y = "yd";
    }
    return t + "o  = Result(" + y + ")\n";
}

// Random inputs; in float cases rounded to small integers (x in [-8, 8], run-time weights in [-4, 4]) so that
// every sum is exact.
std::vector<tensor> inputs_of(const graph &g, const ct_case &c, uint64_t seed) {
    auto in = random_inputs(g, seed);
    if (!c.qdq)
        for (size_t k = 0; k < in.size(); ++k)
            for (int64_t i = 0; i < in[k].elems(); ++i)
                in[k].f32()[i] = std::nearbyint(in[k].f32()[i] * (k == 0 ? 8.f : 4.f));
    return in;
}

int count(const graph &g, op k) {
    int n = 0;
    for (const auto &p : g.nodes()) n += p->kind == k;
    return n;
}

class GraphConvTranspose : public ::testing::TestWithParam<ct_case> {};

TEST_P(GraphConvTranspose, AsOneByOneConvolutionAndDepthToSpace) {
    const ct_case &c = GetParam();
    const std::string text = ct_text(c);
    SCOPED_TRACE(text);
    const auto g = parse(text);
    auto l = g->clone();
    int n = -1;
    try {
        n = conv_transpose_to_conv(*l);
    } catch (const qconv::error &e) {
        FAIL() << "conv_transpose_to_conv threw: " << e.what();
    }
    EXPECT_EQ(n, c.rewritten ? 1 : 0);
    std::vector<rewrite_record> records;
    run_passes(*l, {}, &records);
    SCOPED_TRACE(to_text(*l));
    EXPECT_EQ(count(*l, op::ConvTranspose), c.rewritten ? 0 : 1);
    EXPECT_EQ(count(*l, op::DepthToSpace), c.rewritten ? 1 : 0);
    if (c.rewritten) {
        bool lowered = false;
        for (const auto &r : records)
            if (r.conv == "ct_as_conv") lowered = r.rewritten;
        EXPECT_EQ(lowered, c.lowered);
        EXPECT_EQ(count(*l, op::QConvolution), c.lowered ? 1 : 0);
    }
    for (uint64_t seed : {1u, 2u})
        for (int threads : {1, 2}) {
            const auto in = inputs_of(*g, c, seed);
            const auto want = compiled_graph(*g, threads).run(in);
            const auto got = compiled_graph(*l, threads).run(in);
            ASSERT_EQ(want.size(), 1u);
            ASSERT_EQ(got.size(), 1u);
            ASSERT_EQ(want[0].shape, got[0].shape);
            const auto a = want[0].values(), b = got[0].values();
            std::set<double> distinct(a.begin(), a.end());
            EXPECT_GT(distinct.size(), 20u) << "seed " << seed;
            if (!c.qdq) {
                EXPECT_EQ(a, b) << "seed " << seed << " threads " << threads;
                continue;
            }
            // Within one output step; few elements differ at all.
            int64_t differ = 0;
            double worst = 0;
            for (size_t i = 0; i < a.size(); ++i) {
                differ += a[i] != b[i];
                worst = std::max(worst, std::fabs(a[i] - b[i]));
            }
            EXPECT_LE(worst, 0.02 + 1e-6) << "seed " << seed << " threads " << threads;
            EXPECT_LE(static_cast<double>(differ), 0.02 * static_cast<double>(a.size()))
                << differ << " of " << a.size() << " differ, seed " << seed << " threads " << threads;
        }
}

std::vector<ct_case> cases() {
    std::vector<ct_case> r;
    struct kernel {
        int h, w;
        const char *name;
    };
    const kernel kernels[] = {{2, 2, "k2x2"}, {3, 2, "k3x2"}, {1, 1, "k1x1"}, {4, 4, "k4x4"}};
    // Float activations: every weight form and bias, exact.
    for (const kernel &k : kernels)
        for (weights w : {weights::f32_constant, weights::dq_per_oc, weights::dq_per_tensor, weights::multiply_form,
                          weights::parameter})
            for (bias b : {bias::none, bias::per_channel, bias::scalar}) {
                ct_case c;
                c.name = std::string("f32_") + k.name + "_" + to_name(w) + "_" + to_name(b);
                c.kh = c.sh = k.h;
                c.kw = c.sw = k.w;
                c.w = w;
                c.b = b;
                if (k.h == 3) c.N = 2, c.H = 3, c.W = 7; // a batch of two, odd sizes
                r.push_back(c);
            }
    // QDQ activations: the quantized weight forms are lowered; f32 and
    // run-time weights leave an f32 convolution (still within a step).
    for (const kernel &k : kernels)
        for (weights w : {weights::dq_per_oc, weights::dq_per_tensor, weights::multiply_form, weights::f32_constant,
                          weights::parameter})
            for (bias b : {bias::none, bias::per_channel, bias::scalar}) {
                const bool quantized_weights = w != weights::f32_constant && w != weights::parameter;
                if (!quantized_weights && b == bias::scalar) continue;
                ct_case c;
                c.name = std::string("qdq_") + k.name + "_" + to_name(w) + "_" + to_name(b);
                c.kh = c.sh = k.h;
                c.kw = c.sw = k.w;
                c.w = w;
                c.b = b;
                c.qdq = true;
                c.C = 8;
                c.OC = 6;
                c.H = 6;
                c.W = 7;
                c.lowered = quantized_weights;
                r.push_back(c);
            }
    // The Multiply form with one of its scale and zero point per tensor and
    // the other per channel (both become one per channel).
    for (weights w : {weights::multiply_z_scalar, weights::multiply_s_scalar})
        for (bool qdq : {false, true}) {
            ct_case c;
            c.name = std::string(qdq ? "qdq_" : "f32_") + "k2x2_" + to_name(w) + "_bias_per_oc";
            c.w = w;
            c.b = bias::per_channel;
            c.qdq = c.lowered = qdq;
            if (qdq) c.C = 8, c.OC = 6, c.H = 6, c.W = 7;
            r.push_back(c);
        }
    // Other bias forms the DepthToSpace moves past.
    for (bias b : {bias::per_channel_rank3, bias::two_adds})
        for (bool qdq : {false, true}) {
            ct_case c;
            c.name = std::string(qdq ? "qdq_" : "f32_") + "k2x2_dq_per_oc_" + to_name(b);
            c.w = weights::dq_per_oc;
            c.b = b;
            c.qdq = qdq;
            c.lowered = qdq;
            if (qdq) c.C = 8, c.OC = 6, c.H = 6, c.W = 7;
            r.push_back(c);
        }
    // Not rewritten: each one condition off.
    auto keep = [&](const char *name, auto set) {
        ct_case c;
        c.name = std::string("kept_") + name;
        c.rewritten = false;
        set(c);
        r.push_back(c);
    };
    keep("pads", [](ct_case &c) { c.pad = 1; });
    keep("output_padding", [](ct_case &c) { c.out_pad = 1; });
    keep("group2", [](ct_case &c) { c.group = 2, c.OC = 6; });
    keep("dilation2", [](ct_case &c) { c.dilation = 2; });
    keep("kernel3_stride2", [](ct_case &c) { c.kh = c.kw = 3; });
    keep("kernel2_stride1", [](ct_case &c) { c.sh = c.sw = 1; });
    keep("kernel2x2_stride2x1", [](ct_case &c) { c.sw = 1; });
    keep("qdq_pads", [](ct_case &c) { c.pad = 1, c.qdq = true, c.w = weights::dq_per_oc, c.C = 8; });
    return r;
}

INSTANTIATE_TEST_SUITE_P(Cases, GraphConvTranspose, ::testing::ValuesIn(cases()),
                         [](const auto &info) { return info.param.name; });

// ------------------------------------------------------------ DepthToSpace
std::vector<double> run1(const std::string &text, const tensor &x, int threads = 1) {
    const auto g = parse(text);
    return compiled_graph(*g, threads).run({x})[0].values();
}

std::string d2s_text(const std::string &type, const std::string &shape, const std::string &attrs) {
    return "x = Parameter " + type + shape + "\ny = DepthToSpace(x) " + attrs + "\no = Result(y)\n";
}

tensor iota(dtype t, const shape_t &s) {
    std::vector<double> v(static_cast<size_t>(elems_of(s)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
    return tensor::from_values(t, s, v);
}

// x [1, 4, 1, 2] = 0..7 (channel k holds 2k, 2k + 1), block 2x2, C = 1: output
// row a takes channels 2a and 2a + 1, pixel by pixel. With one output channel
// DCR and CRD read the same channels.
TEST(DepthToSpace, HandComputedSquareBlocks) {
    for (const char *type : {"f32", "u8"}) {
        const dtype t = parse_dtype(type);
        EXPECT_EQ(run1(d2s_text(type, "[1,4,1,2]", "block=[2,2] mode=DCR"), iota(t, {1, 4, 1, 2})),
                  (std::vector<double>{0, 2, 1, 3, 4, 6, 5, 7}))
            << type;
        EXPECT_EQ(run1(d2s_text(type, "[1,4,1,2]", "block=[2,2] mode=CRD"), iota(t, {1, 4, 1, 2})),
                  (std::vector<double>{0, 2, 1, 3, 4, 6, 5, 7}))
            << type;
        // x [1, 8, 1, 1] = 0..7, C = 2: DCR output c at (a, b) reads channel
        // (2a + b)·2 + c; CRD reads (2c + a)·2 + b, the identity here.
        EXPECT_EQ(run1(d2s_text(type, "[1,8,1,1]", "block=[2,2] mode=DCR"), iota(t, {1, 8, 1, 1})),
                  (std::vector<double>{0, 2, 4, 6, 1, 3, 5, 7}))
            << type;
        EXPECT_EQ(run1(d2s_text(type, "[1,8,1,1]", "block=[2,2] mode=CRD"), iota(t, {1, 8, 1, 1})),
                  (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7}))
            << type;
    }
}

// Block [1, 2] of x [1, 4, 1, 2] = 0..7, C = 2: output [1, 2, 1, 4].
// DCR: channel c at column 2w + b is input channel 2b + c; CRD: 2c + b.
TEST(DepthToSpace, HandComputedNonSquareBlock) {
    const tensor x = iota(dtype::f32, {1, 4, 1, 2});
    EXPECT_EQ(run1(d2s_text("f32", "[1,4,1,2]", "block=[1,2] mode=DCR"), x),
              (std::vector<double>{0, 4, 1, 5, 2, 6, 3, 7}));
    EXPECT_EQ(run1(d2s_text("f32", "[1,4,1,2]", "block=[1,2] mode=CRD"), x),
              (std::vector<double>{0, 2, 1, 3, 4, 6, 5, 7}));
    // Block [2, 1] of x [1, 2, 1, 2]: C = 1, rows from channels 0 and 1.
    EXPECT_EQ(run1(d2s_text("f32", "[1,2,1,2]", "block=[2,1] mode=DCR"), iota(dtype::f32, {1, 2, 1, 2})),
              (std::vector<double>{0, 1, 2, 3}));
}

// Larger tensors against the definition, both modes, f32, f16, u8 and i8,
// threads 1 and 2; the largest one (76800 elements) splits across threads.
TEST(DepthToSpace, MatchesTheDefinition) {
    struct shape {
        int64_t N, C, H, W, bh, bw;
    };
    for (const shape &s :
         {shape{2, 3, 5, 4, 2, 3}, shape{2, 8, 40, 30, 2, 2}, shape{1, 4, 20, 33, 4, 3}, shape{3, 5, 7, 9, 1, 2}})
        for (const char *type : {"f32", "f16", "u8", "i8"})
            for (bool crd : {false, true})
                for (int threads : {1, 2}) {
                    const int64_t CI = s.C * s.bh * s.bw;
                    const std::string xs = to_string(shape_t{s.N, CI, s.H, s.W});
                    const std::string attrs = "block=" + to_string(shape_t{s.bh, s.bw}) + (crd ? " mode=CRD" : "");
                    const tensor x = random_inputs(*parse(d2s_text(type, xs, attrs)), 7)[0];
                    const auto got = run1(d2s_text(type, xs, attrs), x, threads);
                    const auto xv = x.values();
                    std::vector<double> want;
                    for (int64_t n = 0; n < s.N; ++n)
                        for (int64_t c = 0; c < s.C; ++c)
                            for (int64_t oh = 0; oh < s.H * s.bh; ++oh)
                                for (int64_t ow = 0; ow < s.W * s.bw; ++ow) {
                                    const int64_t a = oh % s.bh, b = ow % s.bw;
                                    const int64_t ic = crd ? (c * s.bh + a) * s.bw + b : (a * s.bw + b) * s.C + c;
                                    want.push_back(xv[((n * CI + ic) * s.H + oh / s.bh) * s.W + ow / s.bw]);
                                }
                    EXPECT_EQ(got, want) << type << " " << xs << " " << attrs << " threads " << threads;
                }
}

// DepthToSpace reading an int8 convolution's u8 output (NHWC as it comes out
// of the lowered convolution): the graph as written's values, in both modes
// and several blocks; and after a DequantizeLinear of it (an f32 island that
// may keep NHWC).
struct nhwc_case {
    const char *name;
    const char *block;
    bool crd;
    bool f32; // the DepthToSpace after the DequantizeLinear
};
void PrintTo(const nhwc_case &c, std::ostream *os) { *os << c.name; }

std::string nhwc_text(const nhwc_case &c) {
    const std::string attrs = std::string("block=") + c.block + (c.crd ? " mode=CRD" : " mode=DCR");
    std::string t = qconv::test::int8_conv_head("2,8,5,6") + "y1q  = QuantizeLinear(c1, s, z)\n";
    if (c.f32) t += "y1d  = DequantizeLinear(y1q, s, z)\nd2s  = DepthToSpace(y1d) " + attrs + "\nout  = Result(d2s)\n";
    else t += "d2s  = DepthToSpace(y1q) " + attrs + "\ndd   = DequantizeLinear(d2s, s, z)\nout  = Result(dd)\n";
    return t;
}

class DepthToSpaceNhwc : public ::testing::TestWithParam<nhwc_case> {};

TEST_P(DepthToSpaceNhwc, OnALoweredConvolutionsOutput) {
    const nhwc_case &c = GetParam();
    const auto g = parse(nhwc_text(c));
    auto l = g->clone();
    run_passes(*l);
    EXPECT_EQ(count(*l, op::QConvolution), 1) << to_text(*l);
    EXPECT_EQ(count(*l, op::DepthToSpace), 1) << to_text(*l);
    // It reads the int8 convolution's output (u8, NHWC) or its dequantization.
    for (const auto &n : l->nodes())
        if (n->kind == op::DepthToSpace) {
            const node *in = c.f32 ? n->inputs[0]->inputs[0] : n->inputs[0];
            EXPECT_EQ(in->kind, op::QConvolution) << to_text(*l);
        }
    for (uint64_t seed : {1u, 2u})
        for (int threads : {1, 2}) {
            const auto in = random_inputs(*g, seed);
            const auto want = compiled_graph(*g, threads).run(in)[0].values();
            const auto got = compiled_graph(*l, threads).run(in)[0].values();
            EXPECT_EQ(got, want) << "seed " << seed << " threads " << threads;
            std::set<double> distinct(want.begin(), want.end());
            EXPECT_GT(distinct.size(), 20u);
        }
}

INSTANTIATE_TEST_SUITE_P(
    Blocks, DepthToSpaceNhwc,
    ::testing::Values(nhwc_case{"u8_dcr_2x2", "[2,2]", false, false}, nhwc_case{"u8_crd_2x2", "[2,2]", true, false},
                      nhwc_case{"u8_dcr_1x2", "[1,2]", false, false}, nhwc_case{"u8_crd_2x1", "[2,1]", true, false},
                      nhwc_case{"u8_dcr_2x4", "[2,4]", false, false}, nhwc_case{"u8_crd_4x2", "[4,2]", true, false},
                      nhwc_case{"f32_dcr_2x2", "[2,2]", false, true}, nhwc_case{"f32_crd_2x2", "[2,2]", true, true}),
    [](const auto &info) { return std::string(info.param.name); });

// to_text writes the block and the mode; read back, the same values.
TEST(DepthToSpace, TextRoundTrip) {
    const auto g = parse(nhwc_text({"", "[2,2]", true, false}));
    auto l = g->clone();
    run_passes(*l);
    for (const graph *h : {g.get(), l.get()}) {
        const std::string text = to_text(*h);
        EXPECT_THAT(text, HasSubstr("block=[2,2] mode=CRD"));
        const auto back = parse(text);
        const auto in = random_inputs(*h, 3);
        EXPECT_EQ(compiled_graph(*back).run(in)[0].values(), compiled_graph(*h).run(in)[0].values());
    }
    const auto dcr = parse(d2s_text("f32", "[1,12,2,2]", "block=[3,2]"));
    EXPECT_THAT(to_text(*dcr), HasSubstr("block=[3,2] mode=DCR"));
}

std::string parse_error(const std::string &text) {
    try {
        parse(text);
    } catch (const qconv::error &e) {
        return e.what();
    }
    return "";
}

// Bad blocks and modes: refused by parse (its inference), the message naming
// the DepthToSpace's line and id.
TEST(DepthToSpace, RefusesBadBlocks) {
    struct bad {
        const char *shape, *attrs, *what;
    };
    for (const bad &b : {bad{"[1,4,2,2]", "block=[0,2]", "block must be two sizes in [1, 4096], got [0,2]"},
                         bad{"[1,4,2,2]", "block=[2,-1]", "block must be two sizes in [1, 4096], got [2,-1]"},
                         bad{"[1,4,2,2]", "block=[4097,1]", "block must be two sizes in [1, 4096]"},
                         bad{"[1,4,2,2]", "block=[2]", "block must be two sizes"},
                         bad{"[1,8,2,2]", "block=[2,2,2]", "block must be two sizes"},
                         bad{"[1,6,2,2]", "block=[2,2]", "6 channels do not split into blocks of 4"},
                         bad{"[1,4,2,2]", "block=[3,1]", "4 channels do not split into blocks of 3"},
                         bad{"[4,2,2]", "block=[2,2]", "data must be rank 4 (NCHW)"}}) {
        const std::string e = parse_error(d2s_text("f32", b.shape, b.attrs));
        EXPECT_THAT(e, HasSubstr("line 2")) << b.attrs;
        EXPECT_THAT(e, HasSubstr("DepthToSpace 'y'")) << b.attrs;
        EXPECT_THAT(e, HasSubstr(b.what)) << b.attrs;
    }
    const std::string mode = parse_error(d2s_text("f32", "[1,4,2,2]", "block=[2,2] mode=XYZ"));
    EXPECT_THAT(mode, HasSubstr("line 2"));
    EXPECT_THAT(mode, HasSubstr("XYZ"));
    // A graph built in code: infer names the node by its id.
    graph g;
    node *x = g.parameter(dtype::f32, {1, 6, 2, 2}, "x");
    attributes a;
    a.block = {2, 2};
    g.add(op::DepthToSpace, {x}, a, "d2s");
    try {
        g.infer();
        ADD_FAILURE() << "6 channels in blocks of 4 inferred";
    } catch (const qconv::error &e) {
        EXPECT_THAT(std::string(e.what()), HasSubstr("node 'd2s'"));
        EXPECT_THAT(std::string(e.what()), HasSubstr("channels do not split"));
    }
}

} // namespace
