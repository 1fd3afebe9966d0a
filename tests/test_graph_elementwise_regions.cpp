// Elementwise regions (graph/exec/elementwise_regions.cpp, detail::eval_region
// in graph/ops/eval.cpp): f32 Add / Subtract / Multiply / Divide / Relu /
// Clamp / Sigmoid nodes of one 4-D shape that only each other read run as one
// step, chunk by chunk (8192 elements: whole pixels NHWC, stretches of one
// channel's plane plain). Each case is a graph in the text format; it checks
// that the region's root reports "graph:elementwise_region (N ops: ...)" (and
// "(f32 NHWC)" where an f32 island keeps NHWC), that its other nodes are
// "fused into" the root and nothing else is, and that the outputs are
// byte-identical to the same graph compiled with
// compile_options::elementwise_regions = false — for 3 seeds, at threads 1 and
// 2, in the islands' NHWC layout and with QCONV_GRAPH_F32_NHWC=0 (plain).
// Cases: hard-swish after an f32 convolution (NHWC, the output taking the
// operand's storage) and on a Parameter (plain); BatchNormalization-like
// Multiply / Add by [1,C,1,1] and [C,1,1] constants then Relu on 50x70 and
// 96x90 planes (C = 24: chunks that split pixels and planes unevenly);
// hard-sigmoid times x; a squeeze-excite Multiply by a pooled [N,C,1,1] value
// with N = 2 (a region on the pooled value too); Subtract and Divide of two
// convolutions' outputs; Sigmoid; C = 9000 (more channels than a chunk); a
// root that is also a Result with an interior value read elsewhere (that node
// stays a root of its own); an operand read again after the region (no
// in-place output), or also a Result; operands that a DequantizeLinear, a
// nearest Resize of a Concat, a DepthToSpace leave NHWC; an NHWC and a plain
// operand in one region; Constant operands (full shape, folded per channel);
// Divide by zero (inf and NaN bytes). Also: an Add that reads a convolution
// directly never joins a region (it becomes the convolution's bias, or stays
// a step of its own), and a run-time batch `?` (1, 2 and 3 images). The
// convolutions' post-ops are off here (compile_options::conv_post_ops; they
// would take the ops after them: test_graph_conv_post_ops.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "qconv/graph.h"

using namespace qconv::graph;

namespace {

struct expected_region {
    std::string root;
    std::string ops;                // the region's ops in order, e.g. "Add Clamp Multiply Divide"
    std::vector<std::string> fused; // the other nodes: "fused into <root>"
    bool nhwc;                      // the root's step writes NHWC (f32 island) in the default layout
};

struct region_case {
    const char *name;
    std::string text;
    std::vector<expected_region> regions;
    std::vector<std::string> not_fused; // nodes that must keep a step of their own
    bool nan = false;                   // some output holds NaN (0 / 0)
    // Values the region reads that their steps leave NHWC (default layout).
    std::vector<std::string> nhwc_operands = {};
};

void PrintTo(const region_case &c, std::ostream *os) { *os << c.name; }

int count_ops(const std::string &ops) { return static_cast<int>(std::count(ops.begin(), ops.end(), ' ')) + 1; }

std::map<std::string, std::string> impl_map(const compiled_graph &cg) {
    std::map<std::string, std::string> m;
    for (const auto &[id, text] : cg.impls()) m[id] = text;
    return m;
}

bool starts_with(const std::string &s, const std::string &p) { return s.rfind(p, 0) == 0; }

// The implementations of a graph compiled with regions on (nhwc: the default
// layout, else QCONV_GRAPH_F32_NHWC=0).
void check_impls(const region_case &c, const compiled_graph &cg, bool nhwc) {
    const auto impl = impl_map(cg);
    std::set<std::string> roots;
    for (const auto &r : c.regions) roots.insert(r.root);
    for (const auto &r : c.regions) {
        const std::string want = "graph:elementwise_region (" + std::to_string(count_ops(r.ops)) + " ops: " + r.ops +
                                 ")" + (nhwc && r.nhwc ? " (f32 NHWC)" : "");
        EXPECT_EQ(impl.at(r.root), want) << r.root << (nhwc ? " (default layout)" : " (plain)");
        for (const auto &f : r.fused) EXPECT_EQ(impl.at(f), "fused into " + r.root) << f;
    }
    // Nothing else fused into a region's root, and no other region.
    for (const auto &[id, text] : impl) {
        if (starts_with(text, "fused into ") && roots.count(text.substr(11))) {
            bool listed = false;
            for (const auto &r : c.regions)
                listed = listed || std::find(r.fused.begin(), r.fused.end(), id) != r.fused.end();
            EXPECT_TRUE(listed) << id << ": " << text;
        }
        if (starts_with(text, "graph:elementwise_region")) {
            EXPECT_TRUE(roots.count(id)) << id << ": " << text;
        }
        if (!nhwc) {
            EXPECT_EQ(text.find("NHWC"), std::string::npos) << id << ": " << text;
        }
    }
    for (const auto &id : c.nhwc_operands) {
        if (nhwc) {
            EXPECT_NE(impl.at(id).find("(f32 NHWC)"), std::string::npos) << id << ": " << impl.at(id);
        }
    }
    for (const auto &id : c.not_fused) {
        EXPECT_FALSE(starts_with(impl.at(id), "fused into ")) << id << ": " << impl.at(id);
    }
}

// Regions off: one step per op.
void check_no_regions(const region_case &c, const compiled_graph &cg) {
    std::set<std::string> roots;
    for (const auto &r : c.regions) roots.insert(r.root);
    for (const auto &[id, text] : cg.impls()) {
        EXPECT_EQ(text.find("elementwise_region"), std::string::npos) << id << ": " << text;
        if (starts_with(text, "fused into ")) {
            EXPECT_FALSE(roots.count(text.substr(11))) << id << ": " << text;
        }
    }
}

compile_options options(int threads, bool regions) {
    compile_options o;
    o.threads = threads;
    o.elementwise_regions = regions;
    o.conv_post_ops = false;
    return o;
}

// Not every value the same (the graph computes something); by bit pattern,
// NaN included.
bool varied(const tensor &t) {
    std::set<uint32_t> bits;
    for (float f : t.to_f32()) {
        uint32_t u;
        std::memcpy(&u, &f, sizeof u);
        bits.insert(u);
    }
    return bits.size() > 8;
}

void expect_same_bytes(const std::vector<tensor> &want, const std::vector<tensor> &got, const std::string &what) {
    ASSERT_EQ(want.size(), got.size()) << what;
    for (size_t k = 0; k < want.size(); ++k) {
        ASSERT_EQ(want[k].shape, got[k].shape) << what << " output " << k;
        EXPECT_EQ(got[k].order, layout::plain) << what << " output " << k;
        EXPECT_EQ(want[k].bytes, got[k].bytes) << what << " output " << k;
    }
}

class GraphElementwiseRegions : public ::testing::TestWithParam<region_case> {};

TEST_P(GraphElementwiseRegions, OneStepWithTheBytesOfOneStepPerOp) {
    const region_case &c = GetParam();
    const auto g = parse(c.text);
    for (int threads : {1, 2}) {
        SCOPED_TRACE("threads " + std::to_string(threads));
        const compiled_graph off(*g, options(threads, false)), on(*g, options(threads, true));
        setenv("QCONV_GRAPH_F32_NHWC", "0", 1);
        const compiled_graph plain_off(*g, options(threads, false)), plain_on(*g, options(threads, true));
        unsetenv("QCONV_GRAPH_F32_NHWC");
        check_impls(c, on, true);
        check_impls(c, plain_on, false);
        check_no_regions(c, off);
        check_no_regions(c, plain_off);
        for (uint64_t seed : {1u, 2u, 3u}) {
            SCOPED_TRACE("seed " + std::to_string(seed));
            const auto in = random_inputs(*g, seed);
            const auto want = off.run(in);
            bool any = false;
            for (const auto &t : want) any = any || varied(t);
            EXPECT_TRUE(any);
            if (c.nan) {
                bool has_nan = false;
                for (const auto &t : want)
                    for (float f : t.to_f32()) has_nan = has_nan || f != f;
                EXPECT_TRUE(has_nan);
            }
            expect_same_bytes(want, on.run(in), "regions on");
            const auto want_plain = plain_off.run(in);
            expect_same_bytes(want_plain, plain_on.run(in), "regions on, plain");
            expect_same_bytes(want, want_plain, "regions off, plain vs default layout");
        }
    }
}

// "id = Constant f32[shape] [v, v, ...]" with n values cycling through vals.
std::string cycle(const std::string &id, const std::string &shape, int n, const std::vector<const char *> &vals) {
    std::string s = id + " = Constant f32" + shape + " [";
    for (int i = 0; i < n; ++i) s += std::string(i ? "," : "") + vals[static_cast<size_t>(i) % vals.size()];
    return s + "]\n";
}

const char *const kConv3x3 = "strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]";
const char *const kConv1x1 = "strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]";

// x (f32[shape]) through a 3x3 convolution to oc channels and a per-channel
// bias Add (fused into the convolution): cb.
std::string conv_bias(const std::string &shape, int ic, int oc) {
    const std::string o = std::to_string(oc), i = std::to_string(ic);
    return "x  = Parameter f32[" + shape + "]\nw  = Constant f32[" + o + "," + i + ",3,3] random(11, -0.5, 0.5)\n" +
           "c  = Convolution(x, w) " + kConv3x3 + "\nb  = Constant f32[" + o + ",1,1] random(12, -1, 1)\n" +
           "cb = Add(c, b)\n";
}

// A 1x1 convolution of `from` (oc channels of ic) into a Result: keeps `from` NHWC.
std::string tail_conv(const std::string &from, int ic, int oc) {
    const std::string o = std::to_string(oc), i = std::to_string(ic);
    return "wt = Constant f32[" + o + "," + i + ",1,1] random(13, -1, 1)\nct = Convolution(" + from + ", wt) " +
           kConv1x1 + "\nout = Result(ct)\n";
}

const char *const kHardSwish = R"(
three = Constant f32[] [3]
six   = Constant f32[] [6]
a     = Add(cb, three)
cl    = Clamp(a) min=0 max=6
m     = Multiply(cb, cl)
d     = Divide(m, six)
)";

std::vector<region_case> cases() {
    std::vector<region_case> r;
    r.push_back({"HardSwishAfterConvNhwc",
                 conv_bias("1,8,12,10", 8, 16) + kHardSwish + tail_conv("d", 16, 4),
                 {{"d", "Add Clamp Multiply Divide", {"a", "cl", "m"}, true}},
                 {}});
    r.back().nhwc_operands = {"c"};
    r.push_back({"HardSwishOnParameterPlain",
                 R"(
cb    = Parameter f32[2,24,7,9]
)" + std::string(kHardSwish) +
                     "out = Result(d)\n",
                 {{"d", "Add Clamp Multiply Divide", {"a", "cl", "m"}, false}},
                 {}});
    r.push_back({"BatchNormRelu50x70N2Nhwc",
                 R"(
x  = Parameter f32[2,4,50,70]
w  = Constant f32[24,4,3,3] random(1, -0.5, 0.5)
c  = Convolution(x, w) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
c0 = Relu(c)
s  = Constant f32[1,24,1,1] random(2, 0.5, 1.5)
bm = Multiply(c0, s)
t  = Constant f32[24,1,1] random(3, -1, 1)
ba = Add(bm, t)
r  = Relu(ba)
)" + tail_conv("r", 24, 3),
                 {{"r", "Relu Multiply Add Relu", {"c0", "bm", "ba"}, true}},
                 {}});
    r.back().nhwc_operands = {"c"};
    r.push_back({"BatchNormRelu96x90N2Plain",
                 R"(
x  = Parameter f32[2,24,96,90]
s  = Constant f32[24,1,1] random(2, 0.5, 1.5)
bm = Multiply(s, x)
t  = Constant f32[1,24,1,1] random(3, -1, 1)
ba = Add(t, bm)
r  = Relu(ba)
out = Result(r)
)",
                 {{"r", "Multiply Add Relu", {"bm", "ba"}, false}},
                 {}});
    r.push_back({"BatchNormSigmoid96x90Nhwc",
                 R"(
x  = Parameter f32[1,3,96,90]
w  = Constant f32[24,3,3,3] random(1, -0.5, 0.5)
c  = Convolution(x, w) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
c0 = Relu(c)
s  = Constant f32[24,1,1] random(2, 0.5, 1.5)
bm = Multiply(c0, s)
t  = Constant f32[1,24,1,1] random(3, -1, 1)
ba = Add(bm, t)
sg = Sigmoid(ba)
y  = Multiply(ba, sg)
)" + tail_conv("y", 24, 2),
                 {{"y", "Relu Multiply Add Sigmoid Multiply", {"c0", "bm", "ba", "sg"}, true}},
                 {}});
    r.back().nhwc_operands = {"c"};
    r.push_back({"HardSigmoidTimesXN2Nhwc",
                 conv_bias("2,3,7,9", 3, 24) + R"(
k  = Constant f32[1] [0.2]
h  = Constant f32[1,1,1,1] [0.5]
hm = Multiply(cb, k)
ha = Add(hm, h)
hc = Clamp(ha) min=0 max=1
y  = Multiply(cb, hc)
)" + tail_conv("y", 24, 5),
                 {{"y", "Multiply Add Clamp Multiply", {"hm", "ha", "hc"}, true}},
                 {}});
    r.back().nhwc_operands = {"c"};
    // The pooled value's hard-sigmoid is a region of [2,16,1,1]; the
    // squeeze-excite Multiply reads it per image and channel.
    r.push_back({"SqueezeExciteN2Nhwc",
                 R"(
x  = Parameter f32[2,4,12,10]
w  = Constant f32[16,4,3,3] random(1, -0.5, 0.5)
c  = Convolution(x, w) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
r  = Relu(c)
gp = ReduceMean(r) axes=[2,3] keep_dims=true
w1 = Constant f32[16,16,1,1] random(2, -1, 1)
s1 = Convolution(gp, w1) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
k  = Constant f32[] [0.2]
h  = Constant f32[] [0.5]
hm = Multiply(s1, k)
ha = Add(hm, h)
hs = Clamp(ha) min=0 max=1
se = Multiply(r, hs)
y  = Add(se, r)
)" + tail_conv("y", 16, 3),
                 {{"hs", "Multiply Add Clamp", {"hm", "ha"}, true}, {"y", "Multiply Add", {"se"}, true}},
                 {"r", "gp"}});
    r.back().nhwc_operands = {"r", "s1"};
    r.push_back({"SubtractDivideOfTwoConvsNhwc",
                 R"(
x  = Parameter f32[2,4,7,9]
w1 = Constant f32[24,4,3,3] random(1, -0.5, 0.5)
c1 = Convolution(x, w1) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
w2 = Constant f32[24,4,3,3] random(2, -0.5, 0.5)
c2 = Convolution(x, w2) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
sb = Subtract(c1, c2)
dv = Divide(c1, c2)
ad = Add(sb, dv)
r  = Relu(ad)
)" + tail_conv("r", 24, 3),
                 {{"r", "Subtract Divide Add Relu", {"sb", "dv", "ad"}, true}},
                 {"c1", "c2"}});
    r.back().nhwc_operands = {"c1", "c2"};
    r.push_back({"SigmoidSwish50x70N2Plain",
                 R"(
x  = Parameter f32[2,24,50,70]
sg = Sigmoid(x)
m  = Multiply(x, sg)
s  = Constant f32[24,1,1] random(2, 0.5, 1.5)
k  = Multiply(m, s)
h  = Constant f32[1,1,1,1] [0.5]
y  = Subtract(k, h)
out = Result(y)
)",
                 {{"y", "Sigmoid Multiply Multiply Subtract", {"sg", "m", "k"}, false}},
                 {}});
    // More channels than a chunk's 8192 elements: one pixel per chunk (NHWC),
    // operands per image and channel ([2,9000,1,1]) and per channel.
    r.push_back({"Channels9000N2Nhwc",
                 R"(
x  = Parameter f32[2,4,3,5]
w  = Constant f32[9000,4,3,3] random(1, -0.5, 0.5)
c  = Convolution(x, w) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
b  = Constant f32[9000,1,1] random(2, -1, 1)
cb = Add(c, b)
gp = ReduceMean(cb) axes=[2,3] keep_dims=true
m  = Multiply(cb, gp)
k  = Constant f32[1,9000,1,1] random(3, -0.5, 0.5)
a  = Add(m, k)
cl = Clamp(a) min=-0.25 max=0.25
)" + tail_conv("cl", 9000, 3),
                 {{"cl", "Multiply Add Clamp", {"m", "a"}, true}},
                 {"gp"}});
    r.back().nhwc_operands = {"c"};
    // The root y is a Result too; the interior r is also read by a
    // convolution: r is the root of a region of its own. Both plain: y's
    // region, a Result's, reads r plain.
    r.push_back({"RootIsResultInteriorReadElsewhereNhwc",
                 R"(
x  = Parameter f32[2,4,7,9]
w  = Constant f32[24,4,3,3] random(1, -0.5, 0.5)
c  = Convolution(x, w) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
s0 = Constant f32[24,1,1] random(2, 0.5, 1.5)
a  = Subtract(c, s0)
r  = Relu(a)
s  = Constant f32[24,1,1] random(3, -1, 1)
m  = Multiply(r, s)
t  = Constant f32[1,24,1,1] random(4, -1, 1)
y  = Add(m, t)
w2 = Constant f32[3,24,1,1] random(5, -1, 1)
c2 = Convolution(r, w2) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
w3 = Constant f32[3,24,1,1] random(6, -1, 1)
c3 = Convolution(y, w3) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
o1 = Result(y)
o2 = Result(c2)
o3 = Result(c3)
)",
                 {{"r", "Subtract Relu", {"a"}, false}, {"y", "Multiply Add", {"m"}, false}},
                 {"r"}});
    r.push_back({"RootIsResultInteriorReadElsewherePlain",
                 R"(
x  = Parameter f32[1,24,7,9]
k  = Constant f32[] [0.25]
a  = Add(x, k)
r  = Relu(a)
s  = Constant f32[24,1,1] random(3, -1, 1)
m  = Multiply(r, s)
t  = Constant f32[1,24,1,1] random(4, -1, 1)
y  = Add(m, t)
gp = ReduceMean(y) axes=[2,3] keep_dims=true
o1 = Result(y)
o2 = Result(r)
o3 = Result(gp)
)",
                 {{"r", "Add Relu", {"a"}, false}, {"y", "Multiply Add", {"m"}, false}},
                 {"r"}});
    // cb, the region's operand, is read again after the region (by the
    // Concat): the region's output must not take its storage.
    r.push_back({"OperandReadAfterRegionNhwc",
                 conv_bias("2,8,12,10", 8, 16) + kHardSwish + "cat = Concat(d, cb) axis=1\n" + tail_conv("cat", 32, 4),
                 {{"d", "Add Clamp Multiply Divide", {"a", "cl", "m"}, true}},
                 {"cat"}});
    r.back().nhwc_operands = {"c", "cat"};
    r.push_back({"OperandReadAfterRegionPlain",
                 R"(
x  = Parameter f32[2,9,7,24]
cb = Transpose(x) order=[0,3,1,2]
)" + std::string(kHardSwish) +
                     R"(
cat = Concat(d, cb) axis=1
out = Result(cat)
)",
                 {{"d", "Add Clamp Multiply Divide", {"a", "cl", "m"}, false}},
                 {"cb", "cat"}});
    // The operand x also goes to a second Result.
    r.push_back({"ParameterAlsoAResult",
                 R"(
cb = Parameter f32[2,24,50,70]
)" + std::string(kHardSwish) +
                     "o1 = Result(d)\no2 = Result(cb)\n",
                 {{"d", "Add Clamp Multiply Divide", {"a", "cl", "m"}, false}},
                 {}});
    // A convolution's NHWC output and a plain Parameter of the same shape: the
    // step is an NHWC one, yet at run time it reads both plain (a plain copy of
    // the convolution's output, which the output then must not take over) and
    // writes plain for the next convolution.
    r.push_back({"NhwcAndPlainOperands",
                 conv_bias("2,4,11,13", 4, 24) + R"(
p  = Parameter f32[2,24,11,13]
sb = Subtract(cb, p)
r  = Relu(sb)
k  = Constant f32[] [1.5]
m  = Multiply(r, k)
)" + tail_conv("m", 24, 3),
                 {{"m", "Subtract Relu Multiply", {"sb", "r"}, true}},
                 {}});
    r.back().nhwc_operands = {"c"};
    // Operands that island ops leave NHWC: a 4-D DequantizeLinear, a nearest
    // Resize of a Concat along C, a DepthToSpace.
    r.push_back({"DequantizedOperandNhwc",
                 R"(
x  = Parameter f32[2,8,9,7]
qs = Constant f32[] [0.0625]
qz = Constant u8[] [128]
xq = QuantizeLinear(x, qs, qz)
xd = DequantizeLinear(xq, qs, qz)
s  = Constant f32[8,1,1] random(2, 0.5, 1.5)
m  = Multiply(xd, s)
t  = Constant f32[1,8,1,1] random(3, -1, 1)
a  = Add(m, t)
r  = Relu(a)
)" + tail_conv("r", 8, 3),
                 {{"r", "Multiply Add Relu", {"m", "a"}, true}},
                 {"xd"}});
    r.back().nhwc_operands = {"xd"};
    r.push_back({"ResizeConcatDepthToSpaceOperandsNhwc",
                 R"(
x  = Parameter f32[2,4,6,5]
w1 = Constant f32[8,4,3,3] random(1, -0.5, 0.5)
c1 = Convolution(x, w1) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
w2 = Constant f32[8,4,3,3] random(2, -0.5, 0.5)
c2 = Convolution(x, w2) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
cat = Concat(c1, c2) axis=1
up = Resize(cat) mode=nearest coordinate_mode=asymmetric nearest_mode=floor scales=[2,2]
w4 = Constant f32[64,4,3,3] random(4, -0.5, 0.5)
c4 = Convolution(x, w4) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
ds = DepthToSpace(c4) block=[2,2] mode=DCR
sb = Subtract(up, ds)
r  = Relu(sb)
k  = Constant f32[] [0.75]
m  = Multiply(r, k)
)" + tail_conv("m", 16, 3),
                 {{"m", "Subtract Relu Multiply", {"sb", "r"}, true}},
                 {"cat", "up", "ds"}});
    r.back().nhwc_operands = {"up", "ds"};
    // A full-shape Constant operand (kept through the run: never the output's
    // storage) and a per-channel one folded at compile time (st).
    r.push_back({"ConstantOperandsPlain",
                 R"(
x  = Parameter f32[2,16,9,11]
K  = Constant f32[2,16,9,11] random(5, -1, 1)
y  = Add(x, K)
r  = Relu(y)
s  = Constant f32[16,1,1] random(2, 0.5, 1.5)
t  = Constant f32[16,1,1] random(3, 0.5, 1.5)
st = Multiply(s, t)
z  = Multiply(r, st)
o  = Result(z)
)",
                 {{"z", "Add Relu Multiply", {"y", "r"}, false}},
                 {"st"}});
    // Per-channel divisor with zeros: +inf, -inf and NaN (0/0) bytes.
    r.push_back({"DivideByZeroPlain",
                 R"(
x  = Parameter f32[2,8,5,6]
r  = Relu(x)
)" + cycle("z", "[8,1,1]", 8, {"0", "1", "-2", "0", "0.5", "4", "0", "-1"}) +
                     R"(
d  = Divide(r, z)
m  = Multiply(d, x)
a  = Add(m, x)
cl = Clamp(a) min=-0.75 max=0.75
out = Result(cl)
)",
                 {{"cl", "Relu Divide Multiply Add Clamp", {"r", "d", "m", "a"}, false}},
                 {},
                 true});
    // Zero divisors in an NHWC region, a scalar and per channel: ±inf,
    // clamped to finite values before the next convolution.
    r.push_back({"DivideByZeroNhwc",
                 conv_bias("1,4,6,5", 4, 8) + R"(
z  = Constant f32[] [0]
d  = Divide(cb, z)
c1 = Clamp(d) min=-3 max=3
)" + cycle("zc", "[1,8,1,1]", 8, {"1", "0", "-3", "0.25"}) +
                     R"(
e  = Divide(cb, zc)
s  = Add(c1, e)
cl = Clamp(s) min=-2 max=2
)" + tail_conv("cl", 8, 2),
                 {{"cl", "Divide Clamp Divide Add Clamp", {"d", "c1", "e", "s"}, true}},
                 {}});
    r.back().nhwc_operands = {"c"};
    return r;
}

INSTANTIATE_TEST_SUITE_P(Regions, GraphElementwiseRegions, ::testing::ValuesIn(cases()),
                         [](const auto &info) { return std::string(info.param.name); });

// A run-time batch `?`: each value compiles its own steps; the regions hold
// for every one of them (1, 2 and 3 images; plain and NHWC).
TEST(GraphElementwiseRegionsDynamic, BatchFromTheInputs) {
    const auto g = parse(R"(
x  = Parameter f32[?,4,50,70]
w  = Constant f32[24,4,3,3] random(1, -0.5, 0.5)
c  = Convolution(x, w) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
c0 = Relu(c)
s  = Constant f32[24,1,1] random(2, 0.5, 1.5)
bm = Multiply(c0, s)
t  = Constant f32[1,24,1,1] random(3, -1, 1)
ba = Add(bm, t)
r  = Relu(ba)
w2 = Constant f32[3,24,1,1] random(4, -1, 1)
c2 = Convolution(r, w2) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
y  = Parameter f32[?,24,50,70]
k  = Constant f32[] [0.5]
ya = Add(y, k)
yr = Relu(ya)
o1 = Result(c2)
o2 = Result(yr)
)");
    for (int threads : {1, 2}) {
        const compiled_graph on(*g, options(threads, true)), off(*g, options(threads, false));
        const auto impl = impl_map(on);
        EXPECT_EQ(impl.at("r"), "graph:elementwise_region (4 ops: Relu Multiply Add Relu) (f32 NHWC)");
        EXPECT_EQ(impl.at("yr"), "graph:elementwise_region (2 ops: Add Relu)");
        for (int64_t batch : {1, 3, 2})
            for (uint64_t seed : {1u, 2u}) {
                const auto in = random_inputs(*g, seed, batch);
                const auto want = off.run(in), got = on.run(in);
                ASSERT_EQ(want.size(), 2u);
                EXPECT_EQ(want[0].shape, (shape_t{batch, 3, 50, 70}));
                expect_same_bytes(want, got, "threads " + std::to_string(threads) + " batch " + std::to_string(batch));
            }
    }
}

// An Add of per-channel constants that reads a convolution's output is the
// convolution's bias ("+bias", fused into the convolution), not a region's;
// an Add of another full-shape value (a Parameter) after a convolution
// joins the region of the ops after it.
TEST(GraphElementwiseRegionsBias, AddReadingAConvolutionIsItsBiasNotARegion) {
    const auto g = parse(R"(
x  = Parameter f32[2,4,7,9]
p  = Parameter f32[2,8,7,9]
w  = Constant f32[8,4,3,3] random(1, -0.5, 0.5)
c  = Convolution(x, w) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
b  = Constant f32[8,1,1] random(2, -1, 1)
ab = Add(b, c)
r  = Relu(ab)
k  = Constant f32[] [0.5]
m  = Multiply(r, k)
w2 = Constant f32[8,4,3,3] random(3, -0.5, 0.5)
c2 = Convolution(x, w2) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
ap = Add(c2, p)
r2 = Relu(ap)
m2 = Multiply(r2, k)
o1 = Result(m)
o2 = Result(m2)
)");
    for (int threads : {1, 2}) {
        const compiled_graph on(*g, options(threads, true)), off(*g, options(threads, false));
        const auto impl = impl_map(on);
        EXPECT_EQ(impl.at("ab"), "fused into c");
        EXPECT_NE(impl.at("c").find("+bias"), std::string::npos) << impl.at("c");
        EXPECT_EQ(impl.at("r"), "fused into m");
        EXPECT_EQ(impl.at("m"), "graph:elementwise_region (2 ops: Relu Multiply)");
        EXPECT_EQ(impl.at("ap"), "fused into m2");
        EXPECT_EQ(impl.at("c2").find("+bias"), std::string::npos) << impl.at("c2");
        EXPECT_EQ(impl.at("r2"), "fused into m2");
        EXPECT_EQ(impl.at("m2"), "graph:elementwise_region (3 ops: Add Relu Multiply)");
        const auto off_impl = impl_map(off);
        EXPECT_EQ(off_impl.at("ab"), "fused into c");
        EXPECT_NE(off_impl.at("c").find("+bias"), std::string::npos) << off_impl.at("c");
        for (uint64_t seed : {1u, 2u, 3u}) {
            const auto in = random_inputs(*g, seed);
            expect_same_bytes(off.run(in), on.run(in), "threads " + std::to_string(threads));
        }
    }
}

} // namespace
