// 8-bit elementwise islands (graph/passes/qdq_islands.cpp, docs/semantics.md
// §10 item 10): each island of a QDQ graph becomes one LookupTable, and the
// graph's outputs stay bit-identical to the graph as written — hard-swish on
// one input, a squeeze-excite Multiply by a per-channel value, a Multiply of two
// equal-shaped values of which one comes NHWC out of an int8 convolution,
// constants written as DequantizeLinear of integers, a per-channel constant
// (a table per channel), i8 data. An interior value read elsewhere stays.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "qconv/graph.h"
#include "tests/support/graph_texts.h"

using namespace qconv::graph;

namespace {

struct island_case {
    const char *name;
    std::string text;
    int tables;  // LookupTable nodes after run_passes
    int entries; // the first one's table: 256, 65536 or 256 per channel (0: none)
};

void PrintTo(const island_case &c, std::ostream *os) { *os << c.name; }

// The network before and after run_passes on the same random inputs (threads 1 and 2).
void expect_bit_identical(const island_case &c) {
    const auto g = parse(c.text);
    auto l = g->clone();
    run_passes(*l);
    int tables = 0, entries = 0;
    for (const auto &n : l->nodes())
        if (n->kind == op::LookupTable) {
            if (!tables++) entries = static_cast<int>(elems_of(n->inputs.back()->out_shape));
        }
    EXPECT_EQ(tables, c.tables) << to_text(*l);
    for (const auto &n : l->nodes()) // a nearest Resize of quantized values runs on the integers
        if (n->kind == op::Resize && n->inputs[0]->kind == op::DequantizeLinear) ADD_FAILURE() << to_text(*l);
    EXPECT_EQ(entries, c.entries);
    for (uint64_t seed : {1u, 2u, 3u})
        for (int threads : {1, 2}) {
            const auto in = random_inputs(*g, seed);
            const auto want = compiled_graph(*g, threads).run(in);
            const auto got = compiled_graph(*l, threads).run(in);
            ASSERT_EQ(want.size(), got.size());
            for (size_t k = 0; k < want.size(); ++k) {
                ASSERT_EQ(want[k].shape, got[k].shape);
                EXPECT_EQ(want[k].values(), got[k].values()) << c.name << " seed " << seed << " threads " << threads;
            }
        }
}

class GraphQdqIslands : public ::testing::TestWithParam<island_case> {};

TEST_P(GraphQdqIslands, BecomeTablesWithTheGraphsBits) { expect_bit_identical(GetParam()); }

const char *const kHardSwish = R"(
x     = Parameter f32[2,24,9,7]
s     = Constant f32[] [0.05]
z     = Constant u8[] [100]
xq    = QuantizeLinear(x, s, z)
xd    = DequantizeLinear(xq, s, z)
three = Constant f32[] [3]
six   = Constant f32[] [6]
a     = Add(xd, three)
c     = Clamp(a) min=0 max=6
m     = Multiply(xd, c)
d     = Divide(m, six)
s2    = Constant f32[] [0.03]
z2    = Constant u8[] [10]
yq    = QuantizeLinear(d, s2, z2)
yd    = DequantizeLinear(yq, s2, z2)
out   = Result(yd)
)";

// A squeeze-excite scale: x · hard-sigmoid(pooled), the pooled value [N, C, 1, 1]
// quantized on its own; the slope and offset as DequantizeLinear of integers.
const char *const kExcite = R"(
x     = Parameter f32[2,16,10,6]
p     = Parameter f32[2,16,1,1]
s     = Constant f32[] [0.04]
z     = Constant u8[] [128]
xq    = QuantizeLinear(x, s, z)
xd    = DequantizeLinear(xq, s, z)
ps    = Constant f32[] [0.02]
pz    = Constant u8[] [3]
pq    = QuantizeLinear(p, ps, pz)
pd    = DequantizeLinear(pq, ps, pz)
k     = Constant u8[1] [51]
ks    = Constant f32[] [0.00392157]
kz    = Constant u8[] [0]
kd    = DequantizeLinear(k, ks, kz)
half  = Constant f32[] [0.5]
hs    = Multiply(pd, kd)
ha    = Add(hs, half)
hc    = Clamp(ha) min=0 max=1
m     = Multiply(xd, hc)
s2    = Constant f32[] [0.03]
z2    = Constant u8[] [120]
yq    = QuantizeLinear(m, s2, z2)
yd    = DequantizeLinear(yq, s2, z2)
out   = Result(yd)
)";

// A Multiply of an int8 convolution's output (NHWC between convolutions)
// and a plain quantized value of the same shape, into the next convolution.
const std::string kResidual = qconv::test::int8_conv_head("1,8,6,6") + R"(r     = Parameter f32[1,8,6,6]
y1q   = QuantizeLinear(c1, s, z)
y1d   = DequantizeLinear(y1q, s, z)
rs    = Constant f32[] [0.05]
rz    = Constant u8[] [90]
rq    = QuantizeLinear(r, rs, rz)
rd    = DequantizeLinear(rq, rs, rz)
sum   = Multiply(y1d, rd)
s2    = Constant f32[] [0.07]
z2    = Constant u8[] [128]
sq    = QuantizeLinear(sum, s2, z2)
sd    = DequantizeLinear(sq, s2, z2)
w2    = Constant i8[4,8,1,1] random(2, -20, 20)
w2s   = Constant f32[4] [0.0078125,0.0078125,0.015625,0.015625]
w2d   = DequantizeLinear(w2, w2s) axis=0
c2    = Convolution(sd, w2d) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
y2q   = QuantizeLinear(c2, s, z)
y2d   = DequantizeLinear(y2q, s, z)
out   = Result(y2d)
)";

// i8 in and out, Sigmoid between.
const char *const kSigmoidI8 = R"(
x     = Parameter f32[3,5,7]
s     = Constant f32[] [0.1]
z     = Constant i8[] [-3]
xq    = QuantizeLinear(x, s, z)
xd    = DequantizeLinear(xq, s, z)
g     = Sigmoid(xd)
s2    = Constant f32[] [0.00390625]
z2    = Constant i8[] [-128]
yq    = QuantizeLinear(g, s2, z2)
yd    = DequantizeLinear(yq, s2, z2)
out   = Result(yd)
)";

// A nearest Resize between a DequantizeLinear and a QuantizeLinear of the same
// parameters moves the integers (NHWC as they come out of an int8 convolution);
// the Add of the upsampled map and another is then an island.
const std::string kResize = qconv::test::int8_conv_head("1,8,5,4") + R"(r     = Parameter f32[1,8,10,8]
y1q   = QuantizeLinear(c1, s, z)
y1d   = DequantizeLinear(y1q, s, z)
up    = Resize(y1d) mode=nearest scales=[2,2]
uq    = QuantizeLinear(up, s, z)
ud    = DequantizeLinear(uq, s, z)
rs    = Constant f32[] [0.05]
rz    = Constant u8[] [90]
rq    = QuantizeLinear(r, rs, rz)
rd    = DequantizeLinear(rq, rs, rz)
sum   = Add(ud, rd)
s2    = Constant f32[] [0.07]
z2    = Constant u8[] [128]
sq    = QuantizeLinear(sum, s2, z2)
sd    = DequantizeLinear(sq, s2, z2)
out   = Result(sd)
)";

// A per-channel constant operand (a bias Add after a requantized int8
// convolution, its output NHWC): one table of 256 entries per channel.
const std::string kPerChannel = qconv::test::int8_conv_head("2,8,6,5") + R"(y1q   = QuantizeLinear(c1, s, z)
y1d   = DequantizeLinear(y1q, s, z)
b     = Constant f32[1,8,1,1] [0.5, -1, 2, 0.25, -0.75, 1.5, 3, -2]
a     = Add(y1d, b)
r     = Relu(a)
s2    = Constant f32[] [0.03]
z2    = Constant u8[] [5]
aq    = QuantizeLinear(r, s2, z2)
ad    = DequantizeLinear(aq, s2, z2)
out   = Result(ad)
)";

// Not an island: the Add's value is also a Result.
const char *const kNotIslands = R"(
x     = Parameter f32[1,4,3,3]
s     = Constant f32[] [0.05]
z     = Constant u8[] [100]
xq    = QuantizeLinear(x, s, z)
xd    = DequantizeLinear(xq, s, z)
three = Constant f32[] [3]
a     = Add(xd, three)
aq    = QuantizeLinear(a, s, z)
ad    = DequantizeLinear(aq, s, z)
o1    = Result(ad)
o2    = Result(a)
)";

INSTANTIATE_TEST_SUITE_P(Islands, GraphQdqIslands,
                         ::testing::Values(island_case{"hard_swish", kHardSwish, 1, 256},
                                           island_case{"squeeze_excite", kExcite, 1, 65536},
                                           island_case{"product_nhwc_and_plain", kResidual, 1, 65536},
                                           island_case{"sigmoid_i8", kSigmoidI8, 1, 256},
                                           island_case{"resize_on_integers", kResize, 1, 65536},
                                           island_case{"per_channel_constant", kPerChannel, 1, 8 * 256},
                                           island_case{"not_islands", kNotIslands, 0, 0}),
                         [](const auto &info) { return std::string(info.param.name); });

} // namespace
