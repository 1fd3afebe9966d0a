// The ops of quantized CNNs in the graph IR (docs/graph.md, "Ops of quantized
// CNNs"): FakeQuantize, QuantizeLinear/DequantizeLinear, MaxPool/AvgPool,
// ReduceMean, Concat, Clamp, PRelu, Flatten, Sigmoid, Softmax — shape
// inference, errors naming the line, the text round trip and the reference
// executor on hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

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

// Runs a graph without Parameters; returns its outputs.
std::vector<tensor> run_text(const std::string &text) {
    auto g = parse(text);
    EXPECT_EQ(to_text(*parse(to_text(*g))), to_text(*g));
    return compiled_graph(*g).run({});
}

void expect_values(const tensor &t, const std::vector<float> &want) {
    const std::vector<float> got = t.to_f32();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "element " << i;
}

// ------------------------------------------------------------ storage
// Tensors live on 64-byte aligned storage (qconv::aligned_vector): a new one,
// a large one (glibc hands out mmap'd blocks 16 bytes past a page), a copy,
// and every output of a run, also the arena's reused buffers of a second run.
// The AMX rows read a 1x1 layer's source in place, one 64-byte tile row per
// pixel; off by 16 bytes every row straddles two lines (3x slower).
bool aligned64(const tensor &t) { return reinterpret_cast<uintptr_t>(t.bytes.data()) % 64 == 0; }

TEST(GraphStorage, TensorsAreCacheLineAligned) {
    const tensor small(dtype::u8, {1, 3, 5, 5});
    const tensor big(dtype::u8, {1, 256, 56, 56}); // 784 KiB
    const tensor copy = big;
    EXPECT_TRUE(aligned64(small));
    EXPECT_TRUE(aligned64(big));
    EXPECT_TRUE(aligned64(copy));
    auto g =
        parse("x = Constant f32[1,4,40,40] fill(0.5)\ny = Relu(x)\nz = Add(y, y)\nr = Result(z)\nr2 = Result(y)\n");
    compiled_graph cg(*g);
    for (int run = 0; run < 2; ++run) {
        const auto out = cg.run({});
        ASSERT_EQ(out.size(), 2u);
        for (const tensor &t : out) EXPECT_TRUE(aligned64(t)) << "run " << run;
        EXPECT_EQ(out[0].to_f32()[0], 1.0f);
        EXPECT_EQ(out[1].to_f32()[0], 0.5f);
    }
}

// A scale of shape [1] with a zero point of shape [] (and the other way
// round) is per tensor, as ONNX Runtime reads it: the values of the same
// DequantizeLinear / QuantizeLinear with both in [1]; other shapes that differ
// are refused naming both.
TEST(GraphOps, OneElementScaleAndZeroPointShapesMayDiffer) {
    const std::string x = "x = Constant u8[1,2,2,2] [0, 3, 7, 9, 250, 255, 128, 1]\n";
    const auto same = run_text(x + "s = Constant f32[1] [0.5]\nz = Constant u8[1] [3]\n"
                                   "d = DequantizeLinear(x, s, z)\nq = QuantizeLinear(d, s, z)\n"
                                   "r1 = Result(d)\nr2 = Result(q)\n");
    const auto mixed = run_text(x + "s = Constant f32[1] [0.5]\nz = Constant u8[] [3]\n"
                                    "d = DequantizeLinear(x, s, z)\nq = QuantizeLinear(d, s, z)\n"
                                    "r1 = Result(d)\nr2 = Result(q)\n");
    const auto swapped = run_text(x + "s = Constant f32[] [0.5]\nz = Constant u8[1] [3]\n"
                                      "d = DequantizeLinear(x, s, z)\nr1 = Result(d)\n");
    ASSERT_EQ(same.size(), 2u);
    ASSERT_EQ(mixed.size(), 2u);
    expect_values(same[0], {-1.5f, 0.f, 2.f, 3.f, 123.5f, 126.f, 62.5f, -1.f});
    expect_values(mixed[0], same[0].to_f32());
    expect_values(swapped[0], same[0].to_f32());
    EXPECT_EQ(mixed[1].bytes, same[1].bytes);
    EXPECT_NE(error_of(x + "s = Constant f32[2] [0.5, 0.25]\nz = Constant u8[] [3]\n"
                           "d = DequantizeLinear(x, s, z) axis=1\nr = Result(d)\n")
                  .find("zero_point shape [] differs from scale shape [2]"),
              std::string::npos);
}

// ------------------------------------------------------------ FakeQuantize
// levels=4 over [0,3] → [0,6]: the level index round((x-il)/(ih-il)*3) halves
// go to even (0.5 → 0, 1.5 → 2, 2.5 → 2: half away from zero would give 1, 2, 3).
TEST(GraphOps, FakeQuantizePerTensorRoundsHalfToEven) {
    const auto out = run_text("x = Constant f32[8] [-1, 0, 0.5, 1.5, 2.5, 3, 4, 1.49]\n"
                              "il = Constant f32[] [0]\nih = Constant f32[] [3]\n"
                              "ol = Constant f32[1] [0]\noh = Constant f32[1] [6]\n"
                              "fq = FakeQuantize(x, il, ih, ol, oh) levels=4\nr = Result(fq)\n");
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].type, dtype::f32);
    EXPECT_EQ(out[0].shape, (shape_t{8}));
    expect_values(out[0], {0, 0, 0, 4, 4, 6, 6, 2});
}

// Bounds broadcast numpy-style: input range per row, output low per column,
// output high per tensor.
TEST(GraphOps, FakeQuantizeBroadcastsBounds) {
    const auto out = run_text("x = Constant f32[2,3] [0.2, 0.3, 0.75, -0.5, 0, 5]\n"
                              "il = Constant f32[2,1] [0, -1]\nih = Constant f32[2,1] [1, 1]\n"
                              "ol = Constant f32[1,3] [0, 0, -1]\noh = Constant f32[1] [2]\n"
                              "fq = FakeQuantize(x, il, ih, ol, oh) levels=3\nr = Result(fq)\n");
    // row 0: (x-0)/1*2 = 0.4, 0.6, 1.5 → 0, 1, 2 → /2·(oh-ol)+ol = 0, 1, 1·3-1 = 2
    // row 1: (x+1)/2*2 = 0.5, 1 → 0, 1 → 0, 1; 5 > ih → oh = 2
    expect_values(out[0], {0, 1, 2, 0, 1, 2});
    auto g = parse("x = Parameter f32[2,3]\nb = Constant f32[4,1,1] fill(0)\nc = Constant f32[] [1]\n"
                   "fq = FakeQuantize(x, b, c, b, c) levels=256\nr = Result(fq)\n");
    EXPECT_EQ(g->find("fq")->out_shape, (shape_t{4, 2, 3}));
}

TEST(GraphOps, FakeQuantizeErrorsNameTheLine) {
    const std::string head = "x = Parameter f32[2,3]\nb = Constant f32[2] [0, 1]\nc = Constant f32[] [1]\n";
    std::string e = error_of(head + "fq = FakeQuantize(x, b, c, c, c) levels=256\n");
    EXPECT_EQ(e.rfind("line 4:", 0), 0u) << e;
    EXPECT_NE(e.find("do not broadcast"), std::string::npos) << e;
    e = error_of(head + "fq = FakeQuantize(x, c, c, c, c) levels=1\n");
    EXPECT_NE(e.find("levels must be in [2, 2^32]"), std::string::npos) << e;
    e = error_of(head + "fq = FakeQuantize(x, c, c, c) levels=2\n");
    EXPECT_NE(e.find("expects 5 input(s)"), std::string::npos) << e;
    e = error_of(head + "h = Constant f16[] [1]\nfq = FakeQuantize(x, c, h, c, c) levels=2\n");
    EXPECT_EQ(e.rfind("line 5:", 0), 0u) << e;
    EXPECT_NE(e.find("input 2 has type f16"), std::string::npos) << e;
}

// ------------------------------------------------- Quantize/DequantizeLinear
TEST(GraphOps, QuantizeLinearPerTensorU8) {
    const auto out = run_text("x = Constant f32[7] [-1, 0.25, 0.75, 1.25, 100, -100, 0.74]\n"
                              "s = Constant f32[] [0.5]\nz = Constant u8[] [128]\n"
                              "q = QuantizeLinear(x, s, z)\nq0 = QuantizeLinear(x, s)\n"
                              "r = Result(q)\nr0 = Result(q0)\n");
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].type, dtype::u8);
    // x/s = -2, 0.5, 1.5, 2.5, 200, -200, 1.48 → even rounding, + 128, saturate
    expect_values(out[0], {126, 128, 130, 130, 255, 0, 129});
    EXPECT_EQ(out[1].type, dtype::u8); // no zero point: u8, zp 0
    expect_values(out[1], {0, 0, 2, 2, 200, 0, 1});
}

TEST(GraphOps, QuantizeLinearPerAxisI8) {
    const auto out = run_text("x = Constant f32[1,2,3] [1, -3, -100, 2.5, -2.5, 1000]\n"
                              "s = Constant f32[2] [0.5, 2]\nz = Constant i8[2] [-1, 10]\n"
                              "q = QuantizeLinear(x, s, z) axis=1\nr = Result(q)\n");
    EXPECT_EQ(out[0].type, dtype::s8);
    // channel 0: 2-1, -6-1, -200-1 → -128; channel 1: round(1.25)+10, round(-1.25)+10, 500+10 → 127
    expect_values(out[0], {1, -7, -128, 11, 9, 127});
}

TEST(GraphOps, DequantizeLinear) {
    const auto out = run_text("a = Constant u8[3] [0, 128, 255]\nsa = Constant f32[] [0.5]\nza = Constant u8[] [128]\n"
                              "da = DequantizeLinear(a, sa, za)\n"
                              "b = Constant i8[2,2] [-128, 127, 5, -5]\nsb = Constant f32[2] [0.25, 2]\n"
                              "zb = Constant i8[2] [0, 1]\ndb = DequantizeLinear(b, sb, zb) axis=0\n"
                              "c = Constant i32[3] [100000, -7, 3]\nsc = Constant f16[] [0.5]\n"
                              "dc = DequantizeLinear(c, sc)\n"
                              "r1 = Result(da)\nr2 = Result(db)\nr3 = Result(dc)\n");
    expect_values(out[0], {-64, 0, 63.5});
    expect_values(out[1], {-32, 31.75, 8, -12});
    EXPECT_EQ(out[2].type, dtype::f16);
    // 50000 is not an f16: the nearest ones are 49984 and 50016 (spacing 32) → 49984
    expect_values(out[2], {49984, -3.5, 1.5});
}

// f32 → u8 → f32 through a QDQ pair equals the FakeQuantize that models it.
TEST(GraphOps, QdqPairMatchesFakeQuantize) {
    auto g = parse("x = Parameter f32[1,3,4,4]\n"
                   "s = Constant f32[] [0.03125]\nz = Constant u8[] [64]\n"
                   "q = QuantizeLinear(x, s, z)\ndq = DequantizeLinear(q, s, z)\n"
                   "il = Constant f32[] [-2]\nih = Constant f32[] [5.96875]\n"
                   "fq = FakeQuantize(x, il, ih, il, ih) levels=256\n"
                   "r1 = Result(dq)\nr2 = Result(fq)\n");
    const auto in = random_inputs(*g, 7);
    const auto out = compiled_graph(*g).run(in);
    const auto a = out[0].to_f32(), b = out[1].to_f32(), x = in[0].to_f32();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        // The same level; FakeQuantize's f32 arithmetic (/255·7.96875 − 2) may differ in the last bits.
        EXPECT_NEAR(a[i], b[i], 2e-6) << i << " x=" << x[i];
        EXPECT_LE(std::fabs(a[i] - x[i]), 0.015625f) << i; // half a step inside the range
    }
}

TEST(GraphOps, QdqErrors) {
    const std::string head = "x = Parameter f32[1,2,3]\ns2 = Constant f32[2] [1, 2]\ns3 = Constant f32[3] fill(1)\n";
    std::string e = error_of(head + "q = QuantizeLinear(x, s3) axis=1\n");
    EXPECT_EQ(e.rfind("line 4:", 0), 0u) << e;
    EXPECT_NE(e.find("per-axis scale must be 1-D with 2 values"), std::string::npos) << e;
    e = error_of(head + "z = Constant i32[2] [0, 0]\nq = QuantizeLinear(x, s2, z)\n");
    EXPECT_NE(e.find("zero_point must be u8 or i8"), std::string::npos) << e;
    e = error_of(head + "q = QuantizeLinear(x, s2) axis=3\n");
    EXPECT_NE(e.find("axis 3 is out of range"), std::string::npos) << e;
    e = error_of(head + "d = DequantizeLinear(x, s2)\n");
    EXPECT_NE(e.find("x must be u8, i8 or i32"), std::string::npos) << e;
    EXPECT_EQ(parse(head + "q = QuantizeLinear(x, s3) axis=-1\nr = Result(q)\n")->find("q")->out_type, dtype::u8);
}

// ------------------------------------------------------------------ pooling
// x (4x4): 0 7 14 5 / 12 3 10 1 / 8 15 6 13 / 4 11 2 9
const char *pool_x = "x = Constant f32[1,1,4,4] [0, 7, 14, 5, 12, 3, 10, 1, 8, 15, 6, 13, 4, 11, 2, 9]\n";

TEST(GraphOps, MaxPool) {
    const auto out = run_text(std::string(pool_x) + "a = MaxPool(x) kernel=[2,2] strides=[2,2]\n"
                                                    "b = MaxPool(x) kernel=[3,3] strides=[2,2] rounding_type=ceil\n"
                                                    "c = MaxPool(x) kernel=[3,3] strides=[2,2]\n"
                                                    "d = MaxPool(x) kernel=[3,3] auto_pad=same_upper\n"
                                                    "r1 = Result(a)\nr2 = Result(b)\nr3 = Result(c)\nr4 = Result(d)\n");
    expect_values(out[0], {12, 14, 15, 13});
    // ceil: a second, partial window per dim (rows/cols 2..3)
    EXPECT_EQ(out[1].shape, (shape_t{1, 1, 2, 2}));
    expect_values(out[1], {15, 14, 15, 13});
    EXPECT_EQ(out[2].shape, (shape_t{1, 1, 1, 1}));
    expect_values(out[2], {15});
    EXPECT_EQ(out[3].shape, (shape_t{1, 1, 4, 4}));
    expect_values(out[3], {12, 14, 14, 14, 15, 15, 15, 14, 15, 15, 15, 13, 15, 15, 15, 13});
}

TEST(GraphOps, AvgPoolExcludePad) {
    const auto out =
        run_text(std::string(pool_x) + "a = AvgPool(x) kernel=[2,2] strides=[2,2] pads_begin=[1,1] pads_end=[1,1] "
                                       "exclude_pad=true\n"
                                       "b = AvgPool(x) kernel=[2,2] strides=[2,2] pads_begin=[1,1] pads_end=[1,1]\n"
                                       "r1 = Result(a)\nr2 = Result(b)\n");
    EXPECT_EQ(out[0].shape, (shape_t{1, 1, 3, 3}));
    expect_values(out[0], {0, 10.5, 5, 10, 8.5, 7, 4, 6.5, 9});
    expect_values(out[1], {0, 5.25, 1.25, 5, 8.5, 3.5, 1, 3.25, 2.25});
}

TEST(GraphOps, GlobalAveragePoolIsReduceMean) {
    const auto out = run_text("x = Constant f32[1,2,2,2] [1, 2, 3, 4, 10, 20, 30, 40]\n"
                              "g = ReduceMean(x) axes=[2,3] keep_dims=true\n"
                              "h = ReduceMean(x) axes=[-1,2]\n"
                              "a = AvgPool(x) kernel=[2,2] strides=[1,1]\n"
                              "r1 = Result(g)\nr2 = Result(h)\nr3 = Result(a)\n");
    EXPECT_EQ(out[0].shape, (shape_t{1, 2, 1, 1}));
    expect_values(out[0], {2.5, 25});
    EXPECT_EQ(out[1].shape, (shape_t{1, 2}));
    expect_values(out[1], {2.5, 25});
    expect_values(out[2], {2.5, 25});
}

// Many channels (blocks of eight and a tail): each mean is its channel's
// values summed in order in double, divided, rounded to f32.
TEST(GraphOps, ReduceMeanOverManyChannelsSumsEachInOrder) {
    const int64_t C = 19, HW = 15;
    std::vector<float> x(static_cast<size_t>(C * HW));
    uint32_t s = 12345;
    for (float &v : x) {
        s = s * 1664525u + 1013904223u;
        v = static_cast<float>(static_cast<int32_t>(s >> 8) % 100000) * 1.37e-3f;
    }
    std::string text = "x = Constant f32[1," + std::to_string(C) + ",3,5] [";
    char buf[32];
    for (size_t i = 0; i < x.size(); ++i) {
        std::snprintf(buf, sizeof buf, "%s%.9g", i ? ", " : "", static_cast<double>(x[i]));
        text += buf;
    }
    const auto out = run_text(text + "]\ng = ReduceMean(x) axes=[2,3] keep_dims=true\nr = Result(g)\n");
    ASSERT_EQ(out[0].shape, (shape_t{1, C, 1, 1}));
    const std::vector<float> got = out[0].to_f32();
    for (int64_t c = 0; c < C; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < HW; ++j) acc += x[static_cast<size_t>(c * HW + j)];
        const float want = static_cast<float>(acc / static_cast<double>(HW));
        EXPECT_EQ(got[static_cast<size_t>(c)], want) << "channel " << c;
    }
}

// A global average pool of a DequantizeLinear (per tensor, read by the pool
// alone) is computed from the bytes (graph:dequantize_mean_*); the same
// graph with the f32 tensor also a result keeps both steps. The means are
// the same bits, in plain and NHWC layouts (the input given NHWC).
TEST(GraphOps, GlobalAveragePoolOfADequantizeReadsTheBytes) {
    const std::string head = "x = Parameter u8[2,37,7,7]\ns = Constant f32[] [0.0173]\nz = Constant u8[] [131]\n"
                             "d = DequantizeLinear(x, s, z)\ng = ReduceMean(d) axes=[3,-2] keep_dims=true\n"
                             "r = Result(g)\n";
    const compiled_graph folded(*parse(head)), kept(*parse(head + "rd = Result(d)\n"));
    auto impl_of = [](const compiled_graph &c, const std::string &id) {
        for (const auto &[n, impl] : c.impls())
            if (n == id) return impl;
        return std::string();
    };
    EXPECT_EQ(impl_of(folded, "g"), "graph:dequantize_mean_u8");
    EXPECT_EQ(impl_of(kept, "g"), "graph:reduce_mean");
    std::vector<float> v(2 * 37 * 49);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 97 + i / 7) % 256);
    const tensor x = tensor::from_f32(dtype::u8, {2, 37, 7, 7}, v);
    const tensor want = kept.run({x})[0];
    for (const tensor &in : {x, x.to_layout(layout::nhwc)}) {
        const tensor got = folded.run({in})[0];
        ASSERT_EQ(got.shape, (shape_t{2, 37, 1, 1}));
        ASSERT_EQ(got.bytes, want.bytes);
    }
    // Not folded: a per-channel scale, or more pixels than the exact sums allow.
    const compiled_graph per_axis(*parse("x = Parameter u8[1,2,3,3]\ns = Constant f32[2] [0.5, 0.25]\n"
                                         "d = DequantizeLinear(x, s) axis=1\ng = ReduceMean(d) axes=[2,3]\n"
                                         "r = Result(g)\n"));
    EXPECT_EQ(impl_of(per_axis, "g"), "graph:reduce_mean");
    const compiled_graph big(*parse("x = Parameter u8[1,1,1025,1024]\ns = Constant f32[] [0.5]\n"
                                    "d = DequantizeLinear(x, s)\ng = ReduceMean(d) axes=[2,3]\nr = Result(g)\n"));
    EXPECT_EQ(impl_of(big, "g"), "graph:reduce_mean");
}

TEST(GraphOps, PoolErrors) {
    const std::string head = "x = Parameter f32[1,1,4,4]\n";
    std::string e = error_of(head + "p = MaxPool(x) strides=[1,1]\n");
    EXPECT_EQ(e.rfind("line 2:", 0), 0u) << e;
    EXPECT_NE(e.find("MaxPool needs kernel="), std::string::npos) << e;
    e = error_of(head + "p = MaxPool(x) kernel=[5,5]\n");
    EXPECT_NE(e.find("kernel larger than the padded input"), std::string::npos) << e;
    e = error_of(head + "p = AvgPool(x) kernel=[2,2] rounding_type=up\n");
    EXPECT_NE(e.find("rounding_type must be floor or ceil"), std::string::npos) << e;
    e = error_of(head + "p = MaxPool(x) kernel=[2,2] dilations=[1,1]\n");
    EXPECT_NE(e.find("unknown attribute 'dilations'"), std::string::npos) << e;
    e = error_of("x = Parameter i8[1,1,4,4]\np = AvgPool(x) kernel=[2,2]\n");
    EXPECT_NE(e.find("data must be f32, f16 or bf16"), std::string::npos) << e;
    e = error_of(head + "p = ReduceMean(x) axes=[1,-3]\n");
    EXPECT_NE(e.find("axis -3 is given twice"), std::string::npos) << e;
    // an int8 MaxPool stays u8
    auto g = parse("x = Parameter u8[1,1,4,4]\np = MaxPool(x) kernel=[2,2]\nr = Result(p)\n");
    EXPECT_EQ(g->find("p")->out_type, dtype::u8);
}

// ------------------------------------------------------------------- glue
TEST(GraphOps, Concat) {
    const auto out = run_text("a = Constant f32[1,2,2] [1, 2, 3, 4]\nb = Constant f32[1,1,2] [5, 6]\n"
                              "c = Concat(a, b) axis=1\n"
                              "d = Constant f32[2,2] [1, 2, 3, 4]\ne = Constant f32[2,1] [9, 8]\n"
                              "f = Concat(d, e, d) axis=-1\n"
                              "r1 = Result(c)\nr2 = Result(f)\n");
    EXPECT_EQ(out[0].shape, (shape_t{1, 3, 2}));
    expect_values(out[0], {1, 2, 3, 4, 5, 6});
    EXPECT_EQ(out[1].shape, (shape_t{2, 5}));
    expect_values(out[1], {1, 2, 9, 1, 2, 3, 4, 8, 3, 4});
    const std::string e = error_of("a = Parameter f32[1,2,2]\nb = Parameter f32[1,2,3]\nc = Concat(a, b) axis=1\n");
    EXPECT_EQ(e.rfind("line 3:", 0), 0u) << e;
    EXPECT_NE(e.find("outside axis 1"), std::string::npos) << e;
}

TEST(GraphOps, ClampRelu6AndIntegers) {
    const auto out = run_text("x = Constant f32[5] [-1, 3, 7, 6.5, 0.25]\n"
                              "c = Clamp(x) min=0 max=6\n"
                              "i = Constant i32[3] [-5, 0, 5]\nci = Clamp(i) min=-1.5 max=2.5\n"
                              "r1 = Result(c)\nr2 = Result(ci)\n");
    expect_values(out[0], {0, 3, 6, 6, 0.25});
    EXPECT_EQ(out[1].type, dtype::s32);
    expect_values(out[1], {-1, 0, 2}); // integer bounds: ceil(min), floor(max)
    EXPECT_NE(error_of("x = Parameter f32[2]\nc = Clamp(x) min=0\n").find("Clamp needs min=<v> and max=<v>"),
              std::string::npos);
    EXPECT_NE(error_of("x = Parameter f32[2]\nc = Clamp(x) min=1 max=0\n").find("min 1 is above max 0"),
              std::string::npos);
}

TEST(GraphOps, PRelu) {
    const auto out = run_text("x = Constant f32[1,2,2] [-1, 2, -3, 4]\ns = Constant f32[2] [0.5, 0.25]\n"
                              "p = PRelu(x, s)\n"
                              "s2 = Constant f32[2,1] [0.5, 0.25]\np2 = PRelu(x, s2)\n"
                              "y = Constant f32[1,3,2] [-1, -1, -2, -2, 4, -4]\ns3 = Constant f32[] [0.125]\n"
                              "p3 = PRelu(y, s3)\n"
                              "r1 = Result(p)\nr2 = Result(p2)\nr3 = Result(p3)\n");
    expect_values(out[0], {-0.5, 2, -0.75, 4}); // per channel (axis 1)
    expect_values(out[1], {-0.5, 2, -0.75, 4}); // numpy broadcast of [2,1]
    expect_values(out[2], {-0.125, -0.125, -0.25, -0.25, 4, -0.5});
    const std::string e = error_of("x = Parameter f32[1,2,2,2]\ns = Constant f32[3] fill(1)\np = PRelu(x, s)\n");
    EXPECT_EQ(e.rfind("line 3:", 0), 0u) << e;
    EXPECT_NE(e.find("neither per channel"), std::string::npos) << e;
}

TEST(GraphOps, FlattenShapes) {
    auto g = parse("x = Parameter f32[2,3,4,5]\na = Flatten(x) axis=2\nb = Flatten(x) axis=0\n"
                   "c = Flatten(x) axis=-1\nd = Flatten(x) axis=4\ne = Flatten(x)\n"
                   "r1 = Result(a)\nr2 = Result(b)\nr3 = Result(c)\nr4 = Result(d)\nr5 = Result(e)\n");
    EXPECT_EQ(g->find("a")->out_shape, (shape_t{6, 20}));
    EXPECT_EQ(g->find("b")->out_shape, (shape_t{1, 120}));
    EXPECT_EQ(g->find("c")->out_shape, (shape_t{24, 5}));
    EXPECT_EQ(g->find("d")->out_shape, (shape_t{120, 1}));
    EXPECT_EQ(g->find("e")->out_shape, (shape_t{2, 60}));
    EXPECT_NE(error_of("x = Parameter f32[2,3]\nf = Flatten(x) axis=3\n").find("axis 3 is out of range"),
              std::string::npos);
    const auto out = run_text("x = Constant f32[1,2,2] [1, 2, 3, 4]\nf = Flatten(x) axis=1\nr = Result(f)\n");
    EXPECT_EQ(out[0].shape, (shape_t{1, 4}));
    expect_values(out[0], {1, 2, 3, 4});
}

TEST(GraphOps, SigmoidAndSoftmax) {
    const auto out = run_text("x = Constant f32[2,3] [1, 2, 3, 0, 0, 0]\n"
                              "s = Sigmoid(x)\na = Softmax(x) axis=1\nb = Softmax(x) axis=0\n"
                              "r1 = Result(s)\nr2 = Result(a)\nr3 = Result(b)\n");
    const double x[6] = {1, 2, 3, 0, 0, 0};
    const auto s = out[0].to_f32(), a = out[1].to_f32(), b = out[2].to_f32();
    for (int i = 0; i < 6; ++i) EXPECT_NEAR(s[i], 1 / (1 + std::exp(-x[i])), 2e-7) << i;
    const double sum0 = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
    for (int i = 0; i < 3; ++i) {
        EXPECT_NEAR(a[i], std::exp(x[i]) / sum0, 2e-7) << i;
        EXPECT_NEAR(a[3 + i], 1.0 / 3, 2e-7) << i;
        EXPECT_NEAR(b[i], std::exp(x[i]) / (std::exp(x[i]) + 1), 2e-7) << i;
        EXPECT_NEAR(b[3 + i], 1 / (std::exp(x[i]) + 1), 2e-7) << i;
    }
    EXPECT_NE(error_of("x = Parameter f32[2,3]\nf = Softmax(x) axis=2\n").find("axis 2 is out of range"),
              std::string::npos);
    EXPECT_NE(error_of("x = Parameter i8[2,3]\nf = Sigmoid(x)\n").find("needs a floating-point input"),
              std::string::npos);
}

// Softmax along a long last axis (a recogniser's 6625 classes; 37 leaves a
// tail of 5 past the 16-wide blocks): each output within a few ulp of the
// softmax of the same f32 differences x − max computed in double with std::exp — e^x by a polynomial within 2 ulp
// on AVX-512 CPUs, std::exp elsewhere — over values spanning e^−60 … 1;
// −inf gives 0, a NaN makes its row NaN as std::exp does.
TEST(GraphOps, SoftmaxOfLongRowsIsWithinUlpsOfDouble) {
    for (int64_t C : {6625, 37, 16}) {
        const std::string shape = "[3," + std::to_string(C) + "]";
        auto g = parse("x = Parameter f32" + shape + "\ny = Softmax(x) axis=-1\nr = Result(y)\n");
        tensor x = tensor::from_f32(qconv::dtype::f32, {3, C}, std::vector<float>(static_cast<size_t>(3 * C)));
        uint32_t state = 12345;
        for (int64_t i = 0; i < 3 * C; ++i) {
            state = state * 1664525u + 1013904223u;
            x.f32()[i] = -60.f + 70.f * static_cast<float>(state >> 8) / 16777216.f;
        }
        x.f32()[C + 3] = -1.f / 0.f;        // row 1: a −inf
        x.f32()[2 * C + 1] = std::nanf(""); // row 2: a NaN
        const std::vector<float> y = compiled_graph(*g).run({x})[0].to_f32();
        for (int64_t r = 0; r < 2; ++r) {
            double m = -1e300, sum = 0;
            for (int64_t c = 0; c < C; ++c) m = std::max(m, static_cast<double>(x.f32()[r * C + c]));
            // e^(x − max) of the f32 difference (what the op exponentiates), in double
            auto e = [&](int64_t c) {
                return std::exp(static_cast<double>(x.f32()[r * C + c] - static_cast<float>(m)));
            };
            for (int64_t c = 0; c < C; ++c) sum += e(c);
            int64_t nonzero = 0;
            for (int64_t c = 0; c < C; ++c) {
                const double want = e(c) / sum;
                const double got = y[r * C + c];
                EXPECT_NEAR(got, want, 4.8e-7 * want + 1e-37) << "C " << C << " row " << r << " col " << c;
                nonzero += got > 0;
            }
            EXPECT_GT(nonzero, C / 2) << C;
        }
        EXPECT_EQ(y[C + 3], 0.f);
        for (int64_t c = 0; c < C; ++c) EXPECT_TRUE(std::isnan(y[2 * C + c])) << "C " << C << " col " << c;
    }
}

// Every new op and attribute survives to_text → parse.
TEST(GraphOps, TextRoundTrip) {
    auto g = parse("x = Parameter f32[1,4,8,8]\n"
                   "il = Constant f32[1,4,1,1] [0, 0, -1, -1]\nih = Constant f32[1,4,1,1] [1, 2, 1, 2]\n"
                   "fq = FakeQuantize(x, il, ih, il, ih) levels=255\n"
                   "s = Constant f32[4] [0.5, 0.25, 1, 2]\nz = Constant i8[4] [0, 1, -1, 2]\n"
                   "q = QuantizeLinear(fq, s, z) axis=1\ndq = DequantizeLinear(q, s, z) axis=-3\n"
                   "mp = MaxPool(dq) kernel=[3,3] strides=[2,2] pads_begin=[1,1] pads_end=[0,0] "
                   "rounding_type=ceil\n"
                   "ap = AvgPool(mp) kernel=[2,2] strides=[1,1] auto_pad=same_lower exclude_pad=true\n"
                   "rm = ReduceMean(ap) axes=[2,3] keep_dims=true\n"
                   "c = Concat(rm, rm) axis=1\ncl = Clamp(c) min=-0.5 max=6\n"
                   "sl = Constant f32[8] fill(0.1)\npr = PRelu(cl, sl)\n"
                   "f = Flatten(pr) axis=1\nsg = Sigmoid(f)\nsm = Softmax(sg) axis=-1\nr = Result(sm)\n");
    const std::string t = to_text(*g);
    EXPECT_NE(t.find("fq = FakeQuantize(x, il, ih, il, ih) levels=255"), std::string::npos) << t;
    EXPECT_NE(t.find("q = QuantizeLinear(fq, s, z) axis=1  # i8[1,4,8,8]"), std::string::npos) << t;
    EXPECT_NE(t.find("mp = MaxPool(dq) kernel=[3,3] strides=[2,2] pads_begin=[1,1] pads_end=[0,0] "
                     "rounding_type=ceil  # f32[1,4,4,4]"),
              std::string::npos)
        << t;
    EXPECT_NE(t.find("auto_pad=same_lower exclude_pad=true"), std::string::npos) << t;
    EXPECT_NE(t.find("rm = ReduceMean(ap) axes=[2,3] keep_dims=true  # f32[1,4,1,1]"), std::string::npos) << t;
    EXPECT_NE(t.find("cl = Clamp(c) min=-0.5 max=6"), std::string::npos) << t;
    EXPECT_NE(t.find("sm = Softmax(sg) axis=-1  # f32[1,8]"), std::string::npos) << t;
    EXPECT_EQ(to_text(*parse(t)), t);
    const auto out = compiled_graph(*g).run(random_inputs(*g, 1));
    const auto y = out[0].to_f32();
    double sum = 0;
    for (float v : y) sum += v;
    EXPECT_NEAR(sum, 1.0, 1e-6);
}

// ------------------------------------------------------------ typed tensors
// Values keep their type between ops: u8/i8 outputs hold one byte per element,
// f16 two, and integers beyond 2^24 stay exact through layout ops and QDQ.
TEST(GraphTensor, ValuesKeepTheirType) {
    const auto out = run_text("x = Constant f32[4] [-1, 0.5, 1.5, 300]\ns = Constant f32[] [1]\n"
                              "z = Constant i8[] [0]\nq = QuantizeLinear(x, s, z)\n"
                              "h = Convert(x) to=f16\n"
                              "big = Constant i32[2] [16777217, -16777219]\nr = Reshape(big) shape=[2,1]\n"
                              "c = Concat(r, r) axis=1\nw = Convert(c) to=i64\n"
                              "zb = Constant i32[] [16777216]\nsb = Constant f32[] [0.5]\n"
                              "d = DequantizeLinear(big, sb, zb)\n"
                              "r1 = Result(q)\nr2 = Result(h)\nr3 = Result(w)\nr4 = Result(d)\n");
    EXPECT_EQ(out[0].type, dtype::s8);
    EXPECT_EQ(out[0].bytes, (qconv::aligned_vector<uint8_t>{0xFF, 0x00, 0x02, 0x7F})); // -1, 0 (half to even), 2, 127
    EXPECT_EQ(out[1].type, dtype::f16);
    EXPECT_EQ(out[1].bytes.size(), 8u);
    EXPECT_EQ(out[1].bytes[0] | out[1].bytes[1] << 8, 0xBC00); // -1 in IEEE half
    EXPECT_EQ(out[2].type, dtype::s64);
    EXPECT_EQ(out[2].shape, (shape_t{2, 2}));
    EXPECT_EQ(out[2].values(), (std::vector<double>{16777217, 16777217, -16777219, -16777219}));
    // (x − zp) exact in integers: 1 and −33554435, then one f32 product each
    EXPECT_EQ(out[3].values(), (std::vector<double>{0.5, -16777218}));
}

TEST(GraphTensor, FromF32RoundsAndLayoutsRoundTrip) {
    const tensor u = tensor::from_f32(dtype::u8, {4}, {2.5f, 3.5f, 300.f, -2.f});
    EXPECT_EQ(u.bytes, (qconv::aligned_vector<uint8_t>{2, 4, 255, 0}));
    std::vector<float> v(12);
    for (int i = 0; i < 12; ++i) v[i] = static_cast<float>(i);
    for (const dtype t : {dtype::f32, dtype::u8, dtype::bf16, dtype::s4}) {
        SCOPED_TRACE(to_string(t));
        std::vector<float> w = v;
        if (t == dtype::s4)
            for (float &x : w) x -= 6;
        const tensor a = tensor::from_f32(t, {1, 3, 2, 2}, w); // C=3, H=W=2
        const tensor n = a.to_layout(layout::nhwc);
        EXPECT_EQ(n.order, layout::nhwc);
        EXPECT_EQ(n.shape, a.shape);
        for (int c = 0; c < 3; ++c)
            for (int hw = 0; hw < 4; ++hw) EXPECT_EQ(n.get(hw * 3 + c), w[c * 4 + hw]) << c << " " << hw;
        EXPECT_EQ(n.to_f32(), w); // logical (NCHW) order whatever the layout
        EXPECT_EQ(n.to_layout(layout::plain).bytes, a.bytes);
    }
    // Bytes take their own path: two images, the same element moves as 32-bit words.
    {
        std::vector<float> x(2 * 5 * 3 * 4);
        for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 251);
        const tensor b = tensor::from_f32(dtype::u8, {2, 5, 3, 4}, x),
                     f = tensor::from_f32(dtype::f32, {2, 5, 3, 4}, x);
        const tensor bn = b.to_layout(layout::nhwc), fn = f.to_layout(layout::nhwc);
        for (int64_t i = 0; i < bn.elems(); ++i) EXPECT_EQ(bn.get(i), fn.get(i)) << i;
        EXPECT_EQ(bn.to_layout(layout::plain).bytes, b.bytes);
    }
    EXPECT_THROW(tensor(dtype::f32, {2, 3}, layout::nhwc), qconv::error);
    EXPECT_THROW(tensor::from_f32(dtype::f32, {2, 3}, {1.f}), qconv::error);
    EXPECT_THROW(u.f32(), qconv::error);
}

// Inputs in NHWC or of another type are converted once at the graph's
// boundary; the results are the same.
TEST(GraphTensor, InputsAreConvertedAtTheBoundary) {
    auto g = parse("x = Parameter u8[1,2,2,2]\ns = Constant f32[] [0.5]\nz = Constant u8[] [10]\n"
                   "d = DequantizeLinear(x, s, z)\nm = MaxPool(x) kernel=[2,2]\nr1 = Result(d)\nr2 = Result(m)\n");
    const compiled_graph cg(*g);
    const tensor x = tensor::from_f32(dtype::u8, {1, 2, 2, 2}, {10, 12, 14, 16, 0, 1, 2, 3});
    const auto a = cg.run({x});
    EXPECT_EQ(a[0].to_f32(), (std::vector<float>{0, 1, 2, 3, -5, -4.5, -4, -3.5}));
    EXPECT_EQ(a[1].type, dtype::u8);
    EXPECT_EQ(a[1].bytes, (qconv::aligned_vector<uint8_t>{16, 3}));
    const auto b = cg.run({x.to_layout(layout::nhwc)});
    EXPECT_EQ(b[0].bytes, a[0].bytes);
    EXPECT_EQ(b[1].bytes, a[1].bytes);
    const auto c = cg.run({tensor::from_f32(dtype::f32, {1, 2, 2, 2}, {10, 12, 14, 16, 0, 1, 2, 3.4f})});
    EXPECT_EQ(c[0].bytes, a[0].bytes); // 3.4 → u8 3
}

} // namespace
