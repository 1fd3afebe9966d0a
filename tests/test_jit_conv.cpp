// Exactness of the JIT int8 conv kernels (jit:conv_x8s8*) against the
// reference, through the dispatcher with the implementation forced by name.
//
// Coverage (sampled so that the suite stays within a couple of minutes):
// every JIT conv row × ResNet-50 / MobileNet layers at reduced spatial size ×
// {no zp, per-tensor, per-channel zp} × post-op chains × dst {u8, s8, s32,
// f32}; extreme data; odd channel counts; all-padding windows; 1x1 images;
// grouped convolutions with tiny groups; 1 vs 2 threads give identical bytes.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "dispatch/host_platform.h"
#include "kernels/jit/base/conv_pipeline.h"
#include "kernels/jit/base/jit_base.h"
#include "kernels/jit/conv/conv_rows.h"

#include "dispatch/attr_builder.h"
#include "dispatch/dispatcher.h"
#include "qconv/qconv.h"
#include "reference/reference.h"
#include "rows/row.h"
#include "tests/support/conv_tester.h"
#include "tests/support/testdata.h"

using qconv::dtype;
using qconv::test::ConvTester;
using qconv::test::epilogue_chains;
using qconv::test::knob_env;

namespace {

using qconv::impl::cpu_feature;

const qconv::impl::conv_entry &row_entry(const std::string &name) { return qconv::impl::conv_row_named(name); }

// The JIT rows, dense and depthwise (selected by their declared family); the
// AMX row, which refuses small groups, has its own suite (test_jit_conv_amx).
std::vector<std::string> jit_rows() {
    std::vector<std::string> r;
    for (const auto &e : qconv::impl::conv_list())
        if (e.family == qconv::impl::row_family::jit && !e.needs.has(cpu_feature::amx_int8)) r.push_back(e.name);
    return r;
}

bool is_1x1_row(const std::string &name) { return row_entry(name).only_1x1; }
bool is_dw_row(const std::string &name) { return row_entry(name).only_depthwise; }

// AVX-VNNI is a feature of its own, not a level.
bool have_avx_vnni() { return qconv::impl::host_platform().has(cpu_feature::avx2_vnni); }

// Whether this CPU (under the cap) has every feature the row declares.
bool isa_ok(const std::string &row) { return qconv::impl::host_platform().has_all(row_entry(row).needs); }
// Whether the row runs VNNI instructions (the rows the sampled sweeps always run).
bool is_vnni_row(const std::string &row) {
    const auto &n = row_entry(row).needs;
    return n.has(cpu_feature::avx512_core_vnni) || n.has(cpu_feature::avx2_vnni);
}

// ResNet-50 and MobileNet layers at reduced spatial size (channels kept).
const std::vector<std::string> &net_shapes() {
    static const std::vector<std::string> s = {
        "mb1ic3ih20oc64oh10kh7sh2ph3n\"resnet_50:conv1\"",
        "mb1ic64ih7oc256oh7kh1ph0n\"resnet_50:res2a_branch1\"",
        "mb1ic64ih7oc64oh7kh3ph1n\"resnet_50:res2a_branch2b\"",
        "mb1ic256ih8oc512oh4kh1sh2ph0n\"resnet_50:res3a_branch1\"",
        "mb1ic128ih6oc128oh6kh3ph1n\"resnet_50:res3a_branch2b\"",
        "mb1ic256ih6oc256oh3kh3sh2ph1n\"resnet_50:res4a_branch2b\"",
        "mb1ic512ih3oc2048oh3kh1ph0n\"resnet_50:res5a_branch2c\"",
        "mb1ic2048ih2oc512oh2kh1ph0n\"resnet_50:res5b_branch2a\"",
        "mb2ic3ih9oc32oh5kh3sh2ph1n\"mobilenet:conv1\"",
        "mb2ic32ih6oc64oh6kh1ph0n\"mobilenet:conv2\"",
        "mb1ic512ih3oc1024oh3kh1ph0n\"mobilenet:conv9\"",
        "mb2ic1024ih1oc5oh1kh1ph0n\"mobilenet:conv11\"",
        "g32mb1ic32ih7oc32oh7kh3ph1n\"mobilenet:conv_dw_1\"",
    };
    return s;
}

// (The cases here carry no fused dw item: the rows that take only those are
// tested in test_conv_dw_fusion.)
bool row_takes(const std::string &row, const std::string &desc) {
    if (row_entry(row).only_dw_item) return false;
    const qconv::conv_desc d = qconv::conv_desc::parse(desc);
    if (is_dw_row(row)) return d.is_depthwise();
    if (!is_1x1_row(row)) return true;
    return d.kh == 1 && d.kw == 1;
}

// Runs one case on every JIT row that can take it; returns how many ran.
// With sample > 0, the rows without VNNI take only every sample-th case (their
// code differs from the VNNI rows only in the micro-kernel).
int run_all_rows(ConvTester t, const std::string &desc, int sample = 0, int index = 0) {
    int ran = 0;
    for (const std::string &row : jit_rows()) {
        if (!isa_ok(row) || !row_takes(row, desc)) continue;
        if (sample > 0 && !is_vnni_row(row) && index % sample != 0) continue;
        ConvTester c = t;
        c.desc(desc);
        EXPECT_TRUE(c.run(row)) << row << " skipped " << desc;
        EXPECT_EQ(c.impl_name(), row);
        ++ran;
        if (::testing::Test::HasFailure()) return ran;
    }
    return ran;
}

// The row's plan (its str(): verbose's words) for the problem a tester ran.
std::string plan_of(const std::string &row, const ConvTester &t) {
    const qconv::impl::platform host = qconv::impl::host_platform();
    const auto attrs = qconv::impl::conv_attrs(t.problem(), host, {});
    const auto pl = row_entry(row).supports(t.problem(), attrs.at(static_cast<size_t>(t.attr_id())), host, nullptr);
    return pl ? pl->str() : "(refused)";
}

// Each case runs on the rows whose ISA this machine (or the ISA cap) has.
void require_avx2() {
    if (qconv::max_cpu_isa() < qconv::isa::avx2) GTEST_SKIP() << "no AVX2";
}

} // namespace

// A strided 1x1 convolution that needs a source copy (ICg not a multiple of
// 4, or a widening ISA) copies only the pixels it reads and runs as a stride-1
// GEMM over them: every row, u8/s8 sources, every zero-point kind, groups,
// mini-batch 2, strides differing per axis.
TEST(JitConv, StridedOneByOneCopiesOnlyThePixelsItReads) {
    require_avx2();
    int i = 0, ran = 0;
    for (const char *desc : {"mb2ic114ih48iw80oc68oh16ow16kh1kw1sh3sw5", "mb1ic265ih31iw32oc40oh11ow16kh1kw1sh3sw2",
                             "g2mb1ic26ih9iw9oc18oh3ow5kh1kw1sh4sw2", "mb1ic3ih7iw9oc16oh4ow3kh1kw1sh2sw4"})
        for (const char *zp : {"none", "tensor:random", "channel:random"})
            for (dtype src : {dtype::u8, dtype::s8}) {
                if (src == dtype::s8 && std::string(zp) == "channel:random") continue;
                ConvTester t;
                t.src(src).zp(zp).post_ops(i % 2 ? "fq:per_channel" : "relu").dst(i % 3 ? dtype::u8 : dtype::f32);
                t.seed(17000 + i++);
                ran += run_all_rows(t, desc);
                if (HasFailure()) return;
            }
    EXPECT_GT(ran, 0);
}

TEST(JitConv, RowsArePresentAndNamed) {
    const auto rows = jit_rows();
    ASSERT_GE(rows.size(), 7u);
    for (const char *n :
         {"jit:conv_dw_x8s8:avx512_core_vnni", "jit:conv_dw_x8s8:avx512_core", "jit:conv_dw_x8s8:avx2_vnni",
          "jit:conv_dw_x8s8:avx2", "jit:conv_x8s8:avx512_core", "jit:conv_x8s8:avx2_vnni", "jit:conv_x8s8:avx2"})
        EXPECT_NE(std::find(rows.begin(), rows.end(), n), rows.end()) << n;
    EXPECT_NE(std::find(rows.begin(), rows.end(), "jit:conv_x8s8:avx512_core_vnni"), rows.end());
}

TEST(JitConv, RejectsWithReasons) {
    std::string why;
    qconv::conv_problem p;
    p.desc = qconv::conv_desc::parse("mb1ic16ih5oc16oh5kh3ph1");
    qconv::attr_set a;
    qconv::impl::platform avx2{qconv::isa::avx2};
    qconv::impl::platform vnni{qconv::isa::avx512_core_vnni};
    for (const auto &e : qconv::impl::conv_list()) {
        if (e.family != qconv::impl::row_family::jit || e.only_depthwise ||
            !e.needs.has(cpu_feature::avx512_core_vnni) || e.needs.has(cpu_feature::amx_int8))
            continue;
        // (depthwise rows: see DepthwiseRejectsDense)
        why.clear();
        EXPECT_FALSE(e.supports(p, a, avx2, &why)) << e.name;
        EXPECT_FALSE(why.empty());
        qconv::attr_set stock;
        stock.zp = qconv::zp_mechanism::stock_per_tensor;
        stock.zp_values = {3};
        qconv::conv_problem p1 = p;
        p1.desc = qconv::conv_desc::parse("mb1ic16ih5oc16oh5kh1ph0");
        why.clear();
        EXPECT_FALSE(e.supports(p1, stock, vnni, &why)) << e.name;
        EXPECT_NE(why.find("per-tensor"), std::string::npos) << why;
        if (is_1x1_row(e.name)) {
            why.clear();
            EXPECT_FALSE(e.supports(p, a, vnni, &why));
            EXPECT_NE(why.find("1x1"), std::string::npos) << why;
        } else {
            EXPECT_TRUE(e.supports(p, a, vnni, &why)) << why;
        }
    }
}

// Network layers × zero point kinds × post-op chains × destination types.
TEST(JitConv, NetworkShapesZpPostOpsDst) {
    require_avx2();
    const std::vector<std::string> zps = {"none", "tensor:random", "channel:random"};
    const std::vector<std::string> chains = {"",      "relu",       "fq:per_channel", "scale_shift;fq:per_channel",
                                             "prelu", "add:per_oc", "sum;relu",       "gelu_erf"};
    const std::vector<dtype> dsts = {dtype::u8, dtype::s8, dtype::s32, dtype::f32};
    int ran = 0, i = 0;
    for (const std::string &desc : net_shapes())
        for (const std::string &zp : zps)
            for (size_t k = 0; k < chains.size(); ++k) {
                // Sample: each (shape, zp, chain) with one rotating dst type.
                const dtype dst = dsts[(i++) % dsts.size()];
                ConvTester t;
                t.src(dtype::u8).dst(dst).zp(zp).post_ops(chains[k]).seed(static_cast<uint32_t>(i));
                ran += run_all_rows(t, desc, 3, i);
                if (HasFailure())
                    FAIL() << desc << " zp=" << zp << " ops=" << chains[k] << " dst=" << qconv::to_string(dst);
            }
    EXPECT_GT(ran, 0);
}

TEST(JitConv, S8SourceAllChains) {
    require_avx2();
    const std::vector<std::string> chains = {"",          "relu",      "fq:per_tensor", "clip:-3:6;linear:2:1",
                                             "max:full",  "sum:0.5:3", "swish:1",       "hardswish;abs;square",
                                             "round;sqrt"};
    int i = 0;
    for (const std::string desc : {"mb1ic17ih6oc33oh6kh3ph1", "mb2ic64ih4oc65oh4kh1ph0", "mb1ic3ih5oc4oh3kh3ph0"})
        for (const std::string &ops : chains)
            for (dtype dst : {dtype::u8, dtype::s8, dtype::s32, dtype::f32}) {
                ConvTester t;
                t.src(dtype::s8).dst(dst).post_ops(ops).seed(100 + i++);
                run_all_rows(t, desc);
                if (HasFailure()) FAIL() << desc << " ops=" << ops << " dst=" << qconv::to_string(dst);
            }
}

// Chains for the packed u8 stores: bounded below 2^30 by a clip whatever the
// bias (no clamp, no bias lowered), the QDQ ResNet-50 residual chain as the
// graph lowers it (bounded by its clip), and a shift that leaves it unbounded
// (the clamp stays).
const char *const bounded_by_clip = "clip:-3e9:1e9";
const char *const qdq_residual = "round;clip:-136:119;linear:0.0272;sum:0.11:121;linear:16.3;round";
const char *const unbounded_shift = "linear:0.5:3e9";

// u8 stores packed 64 bytes at a time (4 OC vectors, or 2 / 4 pixels of OC
// 32 / 16; the depthwise row kernel's 4 pixels) skip the clamp where the
// scales bound acc·scale below 2^28 and pack() lowers a bias above 2^30, or
// where the chain bounds every value below 2^30 (bounded_u8_store,
// conv_pipeline.h): biases far beyond the u8 range, infinite or NaN store
// what the reference stores, with and without the skip.
TEST(JitConv, PackedU8StoresSaturateHugeBiases) {
    require_avx2();
    const std::vector<float> pool = qconv::test::extreme_biases();
    int ran = 0, i = 0;
    for (const std::string desc : {"mb1ic16ih5iw7oc16oh5ow7kh1ph0", "mb1ic32ih3iw9oc32oh3ow9kh1ph0",
                                   "mb1ic24ih4oc64oh4kh1ph0", "mb1ic16ih6oc96oh6kh1ph0", "mb2ic8ih5oc16oh5kh3ph1",
                                   // depthwise: the row kernel's rows, row pairs and byte layout, a channel tail
                                   "g32mb1ic32ih9oc32oh9kh3ph1", "g64mb1ic64ih9oc64oh5kh3sh2ph1",
                                   "g40mb1ic40ih7oc40oh7kh3ph1", "g72mb1ic72ih8oc72oh4kh3sh2ph1"}) {
        const int64_t oc = qconv::conv_desc::parse(desc).oc;
        std::vector<float> bias(static_cast<size_t>(oc));
        for (int64_t c = 0; c < oc; ++c) bias[static_cast<size_t>(c)] = pool[static_cast<size_t>((c * 5 + i) % 16)];
        for (const std::string ops : {"", "round", "relu", bounded_by_clip, qdq_residual, unbounded_shift})
            for (const std::string zp : {"none", "tensor:random", "s8"}) {
                ConvTester t;
                t.src(zp == "s8" ? dtype::s8 : dtype::u8).dst(dtype::u8).zp(zp == "s8" ? "none" : zp);
                t.post_ops(ops).scales(std::vector<float>(static_cast<size_t>(oc), 0.5f)).bias(bias).seed(++i);
                ran += run_all_rows(t, desc);
                if (HasFailure()) FAIL() << desc << " ops=" << ops << " zp=" << zp;
            }
    }
    EXPECT_GT(ran, 0);
}

// The interval arithmetic behind the packed stores' missing clamp
// (chain_upper_bound, conv_pipeline.h): the bound of what a chain can store
// whatever the fma gives, each f32 rounding allowed for.
TEST(JitPipeline, ChainUpperBound) {
    using qconv::jit::chain_upper_bound;
    auto chain = [](const std::string &ops, dtype dst = dtype::u8, int32_t dst_zp = 0) {
        ConvTester t;
        t.desc("mb1ic16ih2oc16oh2kh1ph0").dst(dst).post_ops(ops).dst_zp(dst_zp);
        EXPECT_TRUE(t.run()) << ops; // builds the problem and its attributes
        const auto attrs = qconv::impl::conv_attrs(t.problem(), qconv::impl::host_platform(), {});
        return qconv::jit::pipeline::build(t.problem(), attrs.at(static_cast<size_t>(t.attr_id())));
    };
    const double inf = std::numeric_limits<double>::infinity();
    EXPECT_EQ(chain_upper_bound(chain("")), inf);
    EXPECT_EQ(chain_upper_bound(chain("round")), inf);
    EXPECT_EQ(chain_upper_bound(chain("relu")), inf);
    EXPECT_EQ(chain_upper_bound(chain("clip:0:6;add:full")), inf); // a tensor's values are unknown
    std::string divisors = "-2";                                   // an interval of divisors that holds 0
    for (int c = 1; c < 16; ++c) divisors += ",2";
    EXPECT_EQ(chain_upper_bound(chain("clip:-1:6;div:per_oc:" + divisors)), inf);
    EXPECT_NEAR(chain_upper_bound(chain("clip:-1:6;div:per_tensor:0.5")), 12.0, 1e-4);
    const double b6 = chain_upper_bound(chain("clip:0:6"));
    EXPECT_GE(b6, 6.0);
    EXPECT_LT(b6, 6.00001);
    EXPECT_NEAR(chain_upper_bound(chain("clip:0:6", dtype::u8, 3)), 9.0, 1e-4); // + dst_zp
    EXPECT_NEAR(chain_upper_bound(chain("clip:-2:6;linear:-3:1")), 7.0, 1e-4);  // -3·(-2) + 1
    EXPECT_NEAR(chain_upper_bound(chain("clip:-2:6;relu:0.5;abs")), 6.0, 1e-4);
    EXPECT_NEAR(chain_upper_bound(chain("clip:-2:6;square")), 36.0, 1e-3);
    EXPECT_NEAR(chain_upper_bound(chain("clip:-4:2;mul:per_tensor:-2.5")), 10.0, 1e-4);
    EXPECT_NEAR(chain_upper_bound(chain("clip:1:6;max:per_tensor:9")), 9.0, 1e-4);
    EXPECT_NEAR(chain_upper_bound(chain("clip:0:6;sum:0.5:4")), 6.0 + 0.5 * 251, 1e-3); // u8 destination
    // The ResNet-50 residual: (119·0.0272 + 0.11·(255 − 121))·16.3 = 293.0, rounded up.
    const double r = chain_upper_bound(chain(qdq_residual));
    EXPECT_GE(r, 293.0);
    EXPECT_LE(r, 295.0);
    // A FakeQuantize crops (output range 0..100 here), then its own madds;
    // one whose bounds the u8 store saturates leaves its crop to the store
    // (pipeline_op::crop) and bounds nothing.
    const double q = chain_upper_bound(chain("fq:256:-1:1:0:100"));
    EXPECT_GE(q, 100.0);
    EXPECT_LT(q, 101.0);
    EXPECT_EQ(chain_upper_bound(chain("fq:256:-1:1:0:255")), inf);
    // Cancellation: y + 1e30 − 1e30 is exact in the reals, not in f32.
    EXPECT_GT(chain_upper_bound(chain("clip:0:1;linear:1:1e30;linear:1:-1e30")), 1e20);
    EXPECT_EQ(chain_upper_bound(chain("clip:0:6;linear:1e9:0")) < 1073741824.0, false);
}

// A FakeQuantize to levels 0..255 stored as u8 (the graph's lowering of an
// output FakeQuantize) whose bounds land on the store's range in every
// channel leaves its crop to the store's saturation (pipeline_op::crop):
// values far beyond the bounds store what the reference stores, and one
// channel whose bounds do not saturate keeps the crop everywhere.
TEST(JitConv, FakeQuantizeCropLeftToTheSaturation) {
    require_avx2();
    int ran = 0, i = 0;
    for (const std::string desc : {"mb1ic64ih5oc48oh5kh1ph0", "mb1ic32ih6oc37oh6kh3ph1", "mb2ic16ih4oc16oh4kh3ph1"})
        for (const bool saturating : {true, false}) {
            const int64_t oc = qconv::conv_desc::parse(desc).oc;
            std::string il, ih, oh;
            for (int64_t c = 0; c < oc; ++c) {
                const int m = static_cast<int>((c * 37) % 65); // il = −m, ih = 255 − m: isc 1, ish m
                il += (c ? "," : "") + std::to_string(-m);
                ih += (c ? "," : "") + std::to_string(255 - m);
                oh += (c ? "," : "") + std::string(!saturating && c == oc / 2 ? "127" : "255");
            }
            for (const std::string zp : {"none", "channel:random"}) {
                ConvTester t;
                t.src(dtype::u8).dst(dtype::u8).zp(zp).post_ops("fq:256:" + il + ":" + ih + ":0:" + oh);
                t.scales(std::vector<float>(static_cast<size_t>(oc), 4.f)).seed(++i); // far beyond the bounds
                ran += run_all_rows(t, desc);
                if (HasFailure()) FAIL() << desc << " saturating=" << saturating << " zp=" << zp;
            }
        }
    EXPECT_GT(ran, 0);
}

TEST(JitConv, ExtremeData) {
    require_avx2();
    // u8 255 × s8 −128/127 over IC·KH·KW up to 4608; zp at 0 and 255.
    const std::vector<std::string> descs = {"mb1ic64ih3oc17oh3kh1ph0", "mb1ic512ih5oc64oh5kh3ph1",
                                            "mb1ic1000ih2oc65oh2kh1ph0", "mb1ic3ih4oc3oh4kh3ph1"};
    for (const std::string &desc : descs)
        for (const std::string zp : {"none", "tensor:0", "tensor:255", "channel:random"})
            for (dtype src : {dtype::u8, dtype::s8})
                for (dtype dst : {dtype::s32, dtype::u8, dtype::f32}) {
                    if (src == dtype::s8 && zp != "none") continue;
                    ConvTester t;
                    t.src(src).dst(dst).zp(zp).data("extreme").scales("none").bias(false);
                    run_all_rows(t, desc);
                    if (HasFailure()) FAIL() << desc << " zp=" << zp;
                }
}

TEST(JitConv, OddChannelCounts) {
    require_avx2();
    const int64_t counts[] = {1, 3, 4, 17, 64, 65, 1000};
    int i = 0;
    for (int64_t ic : counts)
        for (int64_t oc : counts) {
            if (ic * oc > 65 * 1000) continue;
            const bool k3 = (i % 2) == 0;
            const std::string desc =
                "mb1ic" + std::to_string(ic) + "ih3oc" + std::to_string(oc) + "oh3" + (k3 ? "kh3ph1" : "kh1ph0");
            ConvTester t;
            t.zp(i % 3 == 0 ? "channel:random" : "none").dst(i % 2 ? dtype::s32 : dtype::u8).post_ops("relu").seed(i);
            ++i;
            run_all_rows(t, desc);
            if (HasFailure()) FAIL() << desc;
        }
}

TEST(JitConv, GroupsPaddingDilationStride) {
    require_avx2();
    const std::vector<std::string> descs = {
        "g2mb1ic6ih5oc4oh5kh3ph1",      // ICg 3, OCg 2
        "g3mb2ic3ih4oc9oh4kh3ph1",      // ICg 1, OCg 3
        "g4mb1ic68ih5oc36oh3kh3sh2ph1", // ICg 17, OCg 9
        "g2mb1ic128ih5oc160oh5kh1ph0",  // OCg 80: full + tail OC block
        "mb1ic8ih7iw15oc20oh4ow3kh3kw5sh2sw3dh1dw1ph2pw1",
        "mb1ic5ih6oc7oh2kh2sh3ph0",    // strided, bottom rows skipped
        "mb1ic16ih2oc16oh2kh5ph2",     // windows mostly outside
        "mb1ic4ih1oc16oh5kh1ph2",      // all-padding windows (rows 0,1,3,4)
        "mb1ic3ih1oc5oh1kh3ph1",       // 1x1 image, 3x3 kernel
        "mb3ic70ih1oc130oh1kh1ph0",    // 1x1 image, 1x1 kernel
        "mb1ic256ih9oc64oh9kh3ph2dh1", // dilation 2
    };
    int i = 0;
    for (const std::string &desc : descs)
        for (const std::string zp : {"none", "channel:random"})
            for (const std::string ops : {"", "scale_shift;prelu;fq:per_channel"}) {
                ConvTester t;
                t.zp(zp).post_ops(ops).dst(i % 2 ? dtype::f32 : dtype::s8).seed(7 + i);
                ++i;
                run_all_rows(t, desc);
                if (HasFailure()) FAIL() << desc << " zp=" << zp << " ops=" << ops;
            }
}

TEST(JitConv, ThreadCountDoesNotChangeBytes) {
    require_avx2();
    for (const std::string desc : {"mb2ic64ih7oc96oh7kh3ph1", "mb1ic256ih14oc128oh14kh1ph0"})
        for (const std::string &row : jit_rows()) {
            if (!isa_ok(row) || !row_takes(row, desc)) continue;
            ConvTester a;
            a.desc(desc).zp("channel:random").post_ops("fq:per_channel;sum").threads(1);
            ASSERT_TRUE(a.run(row));
            for (int threads : {2, 3}) {
                ConvTester b;
                b.desc(desc).zp("channel:random").post_ops("fq:per_channel;sum").threads(threads);
                ASSERT_TRUE(b.run(row));
                EXPECT_EQ(a.result(), b.result()) << row << " " << desc << " threads=" << threads;
            }
        }
}

// Problems with few work items per thread (mb1 1x1 layers at 7x7 and 14x14,
// small 3x3 images) regroup each row's pixel blocks into more chunks and split
// them by cost: OC blocks of unequal width (OC 160: 4, 4, 2 vectors), OC
// tails, one-row images, padding, both zero-point kinds, s8 sources, sum and
// extreme data; exact at 1, 2 and 3 threads, the same bytes for each.
TEST(JitConv, FewItemsSplitByCost) {
    require_avx2();
    const std::vector<std::string> descs = {
        "mb1ic960ih7oc160oh7kh1ph0",     "mb1ic96ih7oc163oh7kh1ph0",      "mb1ic64ih14oc24oh14kh1ph0",
        "mb1ic32ih1iw5oc80oh1ow5kh1ph0", "mb1ic48ih3iw9oc33oh3ow9kh3ph1", "g2mb1ic32ih5oc96oh3kh3sh2ph1",
    };
    int i = 0;
    for (const std::string &desc : descs)
        for (const std::string zp : {"none", "tensor:random", "channel:random"})
            for (dtype src : {dtype::u8, dtype::s8}) {
                if (src == dtype::s8 && zp == "channel:random") continue;
                for (const std::string &row : jit_rows()) {
                    if (!isa_ok(row) || !row_takes(row, desc)) continue;
                    std::vector<uint8_t> first;
                    for (int threads : {1, 2, 3}) {
                        ConvTester t;
                        t.desc(desc).src(src).zp(zp).post_ops(i % 2 ? "relu;sum:0.5" : "linear:2:1;round");
                        t.data(i % 3 == 0 ? "extreme" : "random").dst(i % 4 == 1 ? dtype::s32 : dtype::u8);
                        t.seed(31000 + i).threads(threads);
                        ASSERT_TRUE(t.run(row)) << row << " " << desc;
                        if (threads == 1) first = t.result();
                        else EXPECT_EQ(t.result(), first) << row << " " << desc << " threads=" << threads;
                    }
                    if (HasFailure()) FAIL() << row << " " << desc << " zp=" << zp;
                }
                ++i;
            }
}

// The MobileNet chains (Relu6 as clip, requantization as linear + round) and
// their edges: clip's constant bounds (one vmaxps / vminps each: fmax / fmin,
// NaN inputs give the bound), a last round that the integer store's
// conversion performs (round half to even; kept with a dst zero point and for
// f32), a last linear:a:0 as a multiply (zero products: +0 or −0), ties at .5
// (linear:0.5:0.25 on odd sums), NaN and values beyond 2^31 reaching clip;
// every JIT row that takes the shape, every dst type.
TEST(JitConv, ClipAndLastRoundChains) {
    require_avx2();
    const std::vector<std::string> chains = {
        "clip:0:6;linear:42.5;round",
        "clip:-3.5:2.5;round",
        "linear:0.5:0.25;round",
        "linear:1073741824:0;clip:0:6;linear:42.5;round",
        "linear:-4294967296:0;abs;clip:0:6;round",
        "round;linear:0.5:0.5;round",
        "clip:-6:6;linear:-3:0",
        "linear:0:0;round",
    };
    const std::vector<std::string> descs = {"mb1ic16ih6oc96oh6kh1ph0", "mb1ic3ih9oc32oh5kh3sh2ph1",
                                            "g40mb1ic40ih7oc40oh7kh3ph1", "g24mb1ic24ih8oc24oh4kh3sh2ph1"};
    int i = 0;
    for (const std::string &desc : descs)
        for (const std::string &chain : chains)
            for (dtype dst : {dtype::u8, dtype::s8, dtype::s32, dtype::f32}) {
                ConvTester t;
                t.post_ops(chain).dst(dst).zp(i % 3 == 0 ? "tensor:random" : "none").seed(32000 + i);
                t.data(i % 4 == 3 ? "extreme" : "random").threads(1 + i % 2);
                if (i % 5 == 2 && dst != dtype::f32) t.dst_zp(3);
                ++i;
                run_all_rows(t, desc);
                if (HasFailure()) FAIL() << desc << " " << chain << " dst=" << static_cast<int>(dst);
            }
}

// The AVX-VNNI rows (vpdpbusd ymm) on their own, every case on both rows:
// u8 255 × s8 −128 over IC·KH·KW up to 4608 (int32 sums near 2^27 per tap
// group), OC tails (1..7 lanes of the last ymm vector, odd vector counts), IC
// tails (ICg % 4: padded copy) and ICg % 4 == 0 (source read in place, s8
// shifted in the kernel, padded taps skipped with correction rows), both
// zero-point kinds, post-op chains, every dst type, 1/2/3 threads.
TEST(JitConv, AvxVnniRowsExact) {
    if (!have_avx_vnni())
        GTEST_SKIP() << "no AVX-VNNI on this CPU (or QCONV_MAX_CPU_ISA below avx2_vnni): "
                     << qconv::impl::host_platform().str();
    const char *rows[] = {"jit:conv_x8s8:avx2_vnni", "jit:conv_dw_x8s8:avx2_vnni"};
    const std::vector<std::string> extreme = {"mb1ic512ih5oc65oh5kh3ph1", "mb1ic1024ih3oc9oh3kh1ph0",
                                              "mb1ic3ih6oc24oh3kh7sh2ph3", "g72mb1ic72ih5oc72oh5kh3ph1",
                                              "mb1ic516ih4iw5oc17oh4ow5kh3kw3ph1pw1"};
    int i = 0;
    for (const std::string &desc : extreme)
        for (const std::string zp : {"none", "tensor:255", "tensor:0", "channel:random"})
            for (dtype src : {dtype::u8, dtype::s8}) {
                if (src == dtype::s8 && zp != "none") continue;
                ConvTester t;
                t.desc(desc).src(src).dst(dtype::s32).zp(zp).data("extreme").scales("none").bias(false);
                t.seed(20000 + i++);
                const char *row = rows[qconv::conv_desc::parse(desc).is_depthwise() ? 1 : 0];
                EXPECT_TRUE(t.run(row)) << desc;
                EXPECT_EQ(t.impl_name(), row);
                if (HasFailure()) FAIL() << desc << " zp=" << zp << " src=" << qconv::to_string(src);
            }
    const std::vector<std::string> shapes = {
        "mb1ic13ih6oc1oh6kh3ph1",                 // OC 1, ICg % 4 = 1
        "mb2ic8ih5oc7oh5kh3ph1",                  // OC 7: one ymm tail, padded source read in place
        "mb1ic32ih9iw11oc23oh9ow11kh3kw3ph1pw1",  // 2 + 1 vectors (+ 7-lane tail), in place
        "mb1ic64ih8oc40oh4kh3sh2ph1",             // stride 2, 5 vectors
        "g4mb1ic68ih5oc36oh3kh3sh2ph1",           // ICg 17, OCg 9
        "mb1ic16ih7oc16oh7kh5ph2dh1",             // dilation, kernel windows mostly in the padding
        "mb1ic4ih1oc16oh5kh1ph2",                 // all-padding windows
        "mb1ic256ih14oc24oh14kh1ph0",             // 1x1 as one pixel list
        "mb1ic64ih3iw30oc16oh3ow30kh1ph0",        // 1x1 long rows
        "g24mb2ic24ih9iw7oc24oh9ow7kh3kw3ph1pw1", // depthwise, 8 + 16 channels
        "g13mb1ic13ih6oc13oh3kh5sh2ph2",          // depthwise, 5-lane tail, stride 2
    };
    const std::vector<std::string> &chains = epilogue_chains();
    const dtype dsts[] = {dtype::u8, dtype::s8, dtype::s32, dtype::f32};
    for (const std::string &desc : shapes)
        for (const std::string zp : {"none", "tensor:random", "channel:random"})
            for (dtype src : {dtype::u8, dtype::s8}) {
                if (src == dtype::s8 && zp != "none") continue;
                const char *row = rows[qconv::conv_desc::parse(desc).is_depthwise() ? 1 : 0];
                std::vector<uint8_t> first;
                for (int threads : {1, 2, 3}) {
                    ConvTester t;
                    t.desc(desc).src(src).zp(zp).post_ops(chains[i % chains.size()]).dst(dsts[i % 4]);
                    t.seed(21000 + i).threads(threads);
                    EXPECT_TRUE(t.run(row)) << desc;
                    EXPECT_EQ(t.impl_name(), row);
                    if (threads == 1) first = t.result();
                    else EXPECT_EQ(t.result(), first) << desc << " threads=" << threads;
                    if (HasFailure())
                        FAIL() << desc << " zp=" << zp << " src=" << qconv::to_string(src)
                               << " ops=" << chains[i % chains.size()] << " threads=" << threads;
                }
                ++i;
            }
}

TEST(JitConv, AutoPicksJitForLegacyZpAndPostOps) {
    require_avx2();
    ConvTester t;
    t.desc("mb1ic32ih5oc32oh5kh3ph1").zp("channel:random").post_ops("scale_shift");
    ASSERT_TRUE(t.run("auto"));
    EXPECT_EQ(t.impl_name().rfind("jit:conv_x8s8", 0), 0u) << t.impl_name();
}

// The saturation case of non-VNNI int8 kernels (vpmaddubsw): u8 255 × s8 127
// over IC = 64 must give 2072640 on every row, not 1048544.
TEST(JitConv, NoInt16SaturationOnAnyRow) {
    require_avx2();
    qconv::conv_problem p;
    p.desc = qconv::conv_desc::parse("mb1ic64ih2oc32oh2kh1ph0");
    p.src_dt = dtype::u8;
    p.dst_dt = dtype::s32;
    const std::vector<uint8_t> src(static_cast<size_t>(p.desc.src_elems()), 255);
    const std::vector<int8_t> wei(static_cast<size_t>(p.desc.wei_elems()), 127);
    int ran = 0;
    for (const std::string &row : jit_rows()) {
        if (!isa_ok(row) || !row_takes(row, p.desc.str())) continue;
        qconv::conv_hints h;
        h.impl = row;
        qconv::convolution c(p, wei.data(), nullptr, h);
        std::vector<int32_t> dst(static_cast<size_t>(p.desc.dst_elems()), 0);
        c.execute(src.data(), dst.data());
        for (int32_t v : dst) ASSERT_EQ(v, 2072640) << row;
        ++ran;
    }
    EXPECT_GT(ran, 0);
}

// avx2_pairs, the avx2 row's variant for weights no pair of which can
// overflow vpmaddubsw's 16-bit sums: the packing-time check, pair by pair at
// its boundary (255 · 128 fits 16 bits, 255 · 129 does not).
TEST(JitConv, Avx2PairsCheckIsTheOverflowBoundary) {
    struct pair_case {
        int w1, w2;
        bool fits;
    };
    const pair_case cases[] = {{64, 64, true},    {65, 64, false},   {127, 1, true},    {127, 2, false},
                               {-128, 0, true},   {-128, -1, false}, {-64, -64, true},  {-65, -64, false},
                               {127, -128, true}, {0, 0, true},      {-100, 100, true}, {100, 29, false}};
    const qconv::conv_desc d = qconv::conv_desc::parse("mb1ic4ih1oc2oh1kh1ph0");
    for (const pair_case &c : cases) {
        // OC 1's IC pair (2, 3); everything else 0.
        const std::vector<int8_t> w{0, 0, 0, 0, 0, 0, static_cast<int8_t>(c.w1), static_cast<int8_t>(c.w2)};
        EXPECT_EQ(qconv::jit::pairs_cannot_overflow(d, w.data()), c.fits) << c.w1 << ", " << c.w2;
    }
    // [OC][ICg][KH][KW]: IC 0 and 1 pair within one tap; ICg 3 pairs IC 2 with a zero.
    const qconv::conv_desc d3 = qconv::conv_desc::parse("mb1ic3ih3oc1oh1kh3ph0");
    std::vector<int8_t> w(27, 0);
    w[0 * 9 + 1] = 100, w[1 * 9 + 1] = 100; // tap 1: 200
    EXPECT_FALSE(qconv::jit::pairs_cannot_overflow(d3, w.data()));
    w[1 * 9 + 1] = 0, w[1 * 9 + 2] = 100; // different taps
    EXPECT_TRUE(qconv::jit::pairs_cannot_overflow(d3, w.data()));
    w[2 * 9 + 0] = -128, w[2 * 9 + 8] = 127; // IC 2 with the zero of the padding
    EXPECT_TRUE(qconv::jit::pairs_cannot_overflow(d3, w.data()));
}

// The avx2 row on both sides of that boundary, on saturating sources (u8 255;
// s8 −128 / 127), padded and 1x1, with and without a legacy zero point (u8), int32
// destinations: the reference's bits. Past the boundary the avx2_pairs
// variant would saturate, so exact results there show the widened kernel ran;
// QCONV_JIT_CONV_PAIRS=0 (the widened kernel for every weight) gives the same.
TEST(JitConv, Avx2RowExactOnBothSidesOfThePairsBoundary) {
    require_avx2();
    const int8_t fits[][2] = {{64, 64}, {-64, -64}, {127, 1}, {-128, 0}, {127, -128}, {1, 127}};
    for (const char *knob : {"1", "0"})
        for (bool past : {false, true})
            for (const char *desc : {"mb1ic20ih6oc24oh6kh3ph1", "mb1ic64ih4oc16oh4kh1ph0"})
                for (dtype sdt : {dtype::u8, dtype::s8})
                    for (const char *zp : {"none", "channel:random"}) {
                        if (sdt == dtype::s8 && std::string(zp) != "none") continue; // a zp needs a u8 source
                        knob_env env{{"QCONV_JIT_CONV_PAIRS", knob}};
                        qconv::conv_problem p;
                        p.desc = qconv::conv_desc::parse(desc);
                        p.src_dt = sdt;
                        p.dst_dt = dtype::s32;
                        if (std::string(zp) != "none")
                            p.src_zp =
                                qconv::testdata::make_zp(zp, p.desc.ic, sdt, qconv::testdata::data_kind::extreme, 3);
                        // [OC][ICg][KH][KW]: IC 2j and 2j + 1 of one tap hold a pair of `fits`.
                        const int64_t icg = p.desc.icg(), taps = p.desc.kh * p.desc.kw;
                        std::vector<int8_t> wei(static_cast<size_t>(p.desc.wei_elems()));
                        for (int64_t oc = 0; oc < p.desc.oc; ++oc)
                            for (int64_t ic = 0; ic < icg; ++ic)
                                for (int64_t t = 0; t < taps; ++t)
                                    wei[static_cast<size_t>((oc * icg + ic) * taps + t)] =
                                        fits[(oc + t + ic / 2) % 6][ic % 2];
                        if (past) wei[0] = 65, wei[static_cast<size_t>(taps)] = 64; // OC 0, IC 0 and 1, tap 0
                        ASSERT_EQ(qconv::jit::pairs_cannot_overflow(p.desc, wei.data()), !past);
                        std::vector<uint8_t> src(static_cast<size_t>(p.desc.src_elems()), 255);
                        if (sdt == dtype::s8)
                            for (size_t i = 0; i < src.size(); ++i) src[i] = i % 3 ? 0x7f : 0x80;
                        std::vector<int32_t> got(static_cast<size_t>(p.desc.dst_elems())), want(got.size());
                        qconv::conv_hints h;
                        h.impl = "jit:conv_x8s8:avx2";
                        qconv::convolution(p, wei.data(), nullptr, h).execute(src.data(), got.data());
                        h.impl = "ref:conv";
                        qconv::convolution(p, wei.data(), nullptr, h).execute(src.data(), want.data());
                        ASSERT_EQ(got, want) << desc << " src " << to_string(sdt) << " zp " << zp << " past " << past
                                             << " pairs knob " << knob;
                    }
}

// The unfused zmm path (int32 tile + C++ pipeline) that serves transcendental
// chains, forced for ordinary chains too. Shapes unique to this test, so no
// kernel cached by another test is reused.
TEST(JitConv, UnfusedPipelineMatches) {
    require_avx2();
    setenv("QCONV_JIT_CONV_FUSED", "0", 1);
    int i = 0;
    for (const std::string desc : {"mb1ic19ih5oc23oh5kh3ph1", "mb2ic40ih3oc70oh3kh1ph0"})
        for (const std::string ops : {"relu", "fq:per_channel;sum", "scale_shift;prelu;min:full"})
            for (dtype dst : {dtype::u8, dtype::s8, dtype::s32, dtype::f32}) {
                ConvTester t;
                t.zp(i % 2 ? "channel:random" : "none").post_ops(ops).dst(dst).seed(300 + i);
                ++i;
                run_all_rows(t, desc);
                if (HasFailure()) break;
            }
    unsetenv("QCONV_JIT_CONV_FUSED");
}

// Real-valued parameters (scales, biases, slopes, FakeQuantize ranges that are
// not powers of two): every y·a + b of the pipeline must be one rounding like
// the reference's madd(), so the JIT rows give the reference's bits on any
// data — f32 destinations included (a multiply then an add differs in the last
// bit, and a vmulps without bias stores −0 where madd gives +0). Fused
// micro-kernel and depthwise row kernel, and the C++ pipeline (unfused).
TEST(JitConv, RealValuedPipelineIsBitExact) {
    require_avx2();
    std::vector<float> scales(48);
    for (size_t c = 0; c < scales.size(); ++c) scales[c] = (c % 3 ? 1.f : -1.f) * (0.013f + 0.0071f * float(c));
    std::vector<float> a(48), b(48), lo(48), hi(48), olo(48), ohi(48);
    for (size_t c = 0; c < a.size(); ++c) {
        a[c] = 0.37f + 0.011f * float(c);
        b[c] = -1.3f + 0.093f * float(c);
        lo[c] = -5.1f - 0.1f * float(c);
        hi[c] = 7.3f + 0.07f * float(c);
        olo[c] = -3.3f;
        ohi[c] = 9.7f + 0.01f * float(c);
    }
    const qconv::post_ops chains[] = {
        {qconv::post_op::eltwise(qconv::eltwise_alg::linear, 0.71f, -0.29f), qconv::post_op::sum(0.37f, 2)},
        {qconv::post_op::scale_shift_op(a, b), qconv::post_op::prelu(a)},
        {qconv::post_op::fake_quantize(255, lo, hi, olo, ohi)},
        {qconv::post_op::fake_quantize(17, lo, hi, olo, ohi), qconv::post_op::scale_shift_op(a, b)},
    };
    int i = 0;
    for (const char *fused : {"1", "0"}) {
        setenv("QCONV_JIT_CONV_FUSED", fused, 1);
        for (const std::string desc :
             {"mb1ic19ih5oc48oh5kh3ph1", "mb1ic64ih4oc48oh4kh1ph0", "g48mb1ic48ih6oc48oh6kh3ph1"})
            for (const auto &ops : chains)
                for (dtype dst : {dtype::f32, dtype::u8, dtype::s32})
                    for (bool bias : {true, false}) {
                        ConvTester t;
                        t.scales(scales).bias(bias).post_ops(ops).dst(dst).data("extreme").seed(700 + i++);
                        t.tolerance(0);
                        if (i % 2) t.zp("channel:random");
                        run_all_rows(t, desc);
                        if (HasFailure()) break;
                    }
    }
    unsetenv("QCONV_JIT_CONV_FUSED");
}

// AVX-VNNI is its own feature: the avx2_vnni rows need cpu_feature::avx2_vnni,
// whatever the level (Zen 4: AVX-512 VNNI without AVX-VNNI), and take the
// problems the avx512_core_vnni rows take where it is present.
TEST(JitConv, AvxVnniRowsNeedTheFeature) {
    qconv::conv_problem p;
    p.desc = qconv::conv_desc::parse("mb1ic16ih5oc16oh5kh3ph1");
    qconv::conv_problem pdw;
    pdw.desc = qconv::conv_desc::parse("g16mb1ic16ih5oc16oh5kh3ph1");
    qconv::conv_problem pfused; // a 1x1 with a fused dw item
    pfused.desc = qconv::conv_desc::parse("mb1ic16ih5oc16oh5kh1");
    pfused.ops = qconv::testdata::make_post_ops("dw:1", 16, 1);
    const qconv::impl::platform zen4{qconv::isa::avx512_core_bf16, false};
    const qconv::impl::platform capped_no_feature{qconv::isa::avx2_vnni, false};
    const qconv::impl::platform adl{qconv::isa::avx2_vnni, true};
    const qconv::impl::platform zen5{qconv::isa::avx512_core_bf16, true};
    const qconv::impl::platform avx2{qconv::isa::avx2, false};
    int n = 0;
    for (const auto &e : qconv::impl::conv_list()) {
        if (!e.needs.has(cpu_feature::avx2_vnni)) continue;
        const qconv::conv_problem &q = e.only_dw_item ? pfused : is_dw_row(e.name) ? pdw : p;
        for (const auto &pl : {zen4, capped_no_feature, avx2}) {
            std::string why;
            EXPECT_FALSE(e.supports(q, qconv::attr_set{}, pl, &why)) << e.name << " on " << pl.str();
            EXPECT_NE(why.find("lacks avx2_vnni"), std::string::npos) << why;
        }
        // (oneDNN's rows take what oneDNN offers on the host, not on a simulated CPU.)
        if (e.family != qconv::impl::row_family::jit) continue;
        ++n;
        for (const auto &pl : {adl, zen5}) {
            std::string why;
            EXPECT_TRUE(e.supports(q, qconv::attr_set{}, pl, &why)) << e.name << ": " << why;
        }
    }
    EXPECT_EQ(n, 3); // dense, depthwise, fused 1x1 + dw
    // The order measured on a CPU with AVX-512 and AVX-VNNI (docs/dispatch.md):
    // dense ymm VNNI before zmm without VNNI, depthwise zmm first; the ymm
    // VNNI rows before the avx2 rows; the AVX-512 VNNI rows before all.
    const auto rows = jit_rows();
    auto at = [&](const char *n) { return std::find(rows.begin(), rows.end(), n) - rows.begin(); };
    EXPECT_LT(at("jit:conv_x8s8:avx512_core_vnni"), at("jit:conv_x8s8:avx2_vnni"));
    EXPECT_LT(at("jit:conv_x8s8:avx2_vnni"), at("jit:conv_x8s8:avx512_core"));
    EXPECT_LT(at("jit:conv_x8s8:avx2_vnni"), at("jit:conv_x8s8:avx2"));
    EXPECT_LT(at("jit:conv_dw_x8s8:avx512_core"), at("jit:conv_dw_x8s8:avx2_vnni"));
    EXPECT_LT(at("jit:conv_dw_x8s8:avx2_vnni"), at("jit:conv_dw_x8s8:avx2"));
}

TEST(JitConv, DepthwiseRejectsDense) {
    qconv::conv_problem p;
    p.desc = qconv::conv_desc::parse("g2mb1ic4ih5oc4oh5kh3ph1");
    const auto vnni = qconv::impl::platform{qconv::isa::avx512_core_vnni, true}.with(cpu_feature::avx512_vbmi);
    for (const auto &e : qconv::impl::conv_list()) {
        if (!is_dw_row(e.name)) continue;
        std::string why;
        EXPECT_FALSE(e.supports(p, qconv::attr_set{}, vnni, &why)) << e.name;
        EXPECT_NE(why.find("depthwise"), std::string::npos) << why;
    }
}

// MobileNet / SSD-MobileNet depthwise layers at reduced spatial size, and
// depthwise corner cases, on every depthwise row.
TEST(JitConv, DepthwiseShapes) {
    require_avx2();
    const std::vector<std::string> descs = {
        "g32mb1ic32ih10oc32oh10kh3ph1n\"mobilenet:conv2_dw\"",
        "g64mb1ic64ih9oc64oh5kh3sh2ph1n\"mobilenet:conv3_dw\"",
        "g512mb1ic512ih4oc512oh4kh3ph1n\"mobilenet:conv8_dw\"",
        "g1024mb1ic1024ih3oc1024oh2kh3sh2ph1n\"mobilenet:conv14_dw\"",
        "g3mb2ic3ih6oc3oh6kh5ph2",                            // C 3, 5x5
        "g17mb1ic17ih7iw9oc17oh4ow3kh3kw5sh2sw3dh1dw1ph2pw1", // dilation, strides
        "g65mb1ic65ih1oc65oh1kh3ph1",                         // 1x1 image
        "g1mb1ic1ih3oc1oh3kh3ph1",                            // 1 channel (also dense)
        "g40mb1ic40ih2oc40oh4kh1ph1",                         // all-padding rows
    };
    const std::vector<std::string> chains = {"",        "relu",       "fq:per_channel", "scale_shift;fq:per_channel",
                                             "prelu",   "add:per_oc", "sum;relu",       "gelu_erf",
                                             "mul:full"};
    const std::vector<dtype> dsts = {dtype::u8, dtype::s8, dtype::s32, dtype::f32};
    int i = 0;
    for (const std::string &desc : descs)
        for (const std::string zp : {"none", "tensor:random", "channel:random"})
            for (size_t k = 0; k < chains.size(); k += 2) {
                ConvTester t;
                t.zp(zp).post_ops(chains[(k + i) % chains.size()]).dst(dsts[i % dsts.size()]).seed(500 + i);
                ++i;
                run_all_rows(t, desc);
                if (HasFailure()) FAIL() << desc << " zp=" << zp;
            }
    for (const std::string &desc : {descs[0], descs[4], descs[5]})
        for (dtype src : {dtype::u8, dtype::s8}) {
            ConvTester t;
            t.src(src)
                .dst(dtype::s32)
                .data("extreme")
                .scales("none")
                .bias(false)
                .zp(src == dtype::u8 ? "tensor:255" : "none");
            run_all_rows(t, desc);
            if (HasFailure()) FAIL() << desc << " extreme";
        }
}

// Row-wise blocking (OW >= 16, and short rows with the pixel-list mode off)
// next to the pixel-list mode that short rows use by default.
TEST(JitConv, WideRowsAndRowWiseBlocking) {
    require_avx2();
    const std::vector<std::string> descs = {
        "mb1ic24ih5iw40oc70oh5ow40kh3kw3ph1pw1", "mb2ic16ih4iw37oc20oh2ow18kh3kw3sh2sw2ph1pw1",
        "mb1ic64ih9iw17oc64oh9ow17kh1kw1ph0", "g2mb1ic8ih3iw30oc34oh3ow30kh1kw5ph0pw2"};
    int i = 0;
    for (const char *flat2d : {"1", "0"}) {
        setenv("QCONV_JIT_CONV_FLAT2D", flat2d, 1);
        for (const std::string &desc : descs)
            for (const std::string zp : {"none", "channel:random"}) {
                ConvTester t;
                // Seeds (hence scales, the cache key) differ per pass: no cached kernel is reused.
                t.zp(zp)
                    .post_ops(i % 2 ? "fq:per_channel;sum" : "relu")
                    .dst(i % 3 ? dtype::u8 : dtype::f32)
                    .seed(700 + i);
                ++i;
                run_all_rows(t, desc);
                if (HasFailure()) break;
            }
        for (const std::string desc : {"mb1ic32ih7oc48oh7kh3ph1", "mb1ic32ih14oc20oh7kh3sh2ph1"}) {
            ConvTester t;
            t.zp("tensor:random").post_ops("scale_shift").seed(800 + i++);
            run_all_rows(t, desc);
        }
    }
    unsetenv("QCONV_JIT_CONV_FLAT2D");
}

// Padded sources are read in place by the VNNI rows (padding taps skipped
// per pixel block; with a zero point or an s8 source a per-pixel correction
// row adds the skipped taps' Σ w·v); QCONV_JIT_CONV_DIRECT=0 forces the
// padded copy. Both must equal the reference on every padding geometry:
// row classes (top/bottom rows), left/right blocks, short rows run as one
// pixel list, stride, dilation, asymmetric and bottom/right-only padding,
// windows entirely in the padding, groups, mb > 1, extreme data; no zp,
// per-tensor and per-channel zp, s8 sources.
TEST(JitConv, DirectPaddedSourceMatchesReference) {
    require_avx2();
    const std::vector<std::string> descs = {
        "mb1ic64ih20oc64oh20kh3ph1",                        // row-wise, 3 row classes
        "mb2ic32ih7oc80oh7kh3ph1",                          // pixel list (flat2d), OC tail block
        "mb1ic16ih9iw23oc32oh5ow12kh3kw3sh2sw2ph1pw1",      // strided
        "mb1ic8ih7iw18oc20oh4ow18kh3kw5sh2sw1dh1dw1ph2pw3", // dilation, wide pads
        "mb1ic4ih4iw19oc16oh4ow19kh3kw3ph0pw0",             // only bottom/right windows clipped
        "mb1ic16ih2oc16oh2kh5ph2",                          // windows mostly outside
        "mb1ic12ih1iw1oc16oh5ow5kh3kw3ph2pw2",              // all-padding windows
        "g2mb1ic64ih6oc48oh6kh3ph1",                        // groups, ICg 32
        "mb1ic256ih6oc256oh3kh3sh2ph1",                     // res4a_branch2b-like
        "mb1ic128ih9oc64oh9kh7ph3",                         // 7x7, 49 taps
        "mb1ic16ih30iw1oc16oh30ow1kh3kw1ph1pw0",            // one column: blocks span up to 24 rows
    };
    int i = 0;
    // Passes: direct + fused epilogue, padded copy, direct + C++ pipeline (int32 tiles).
    for (const char *direct : {"1", "0", "unfused"}) {
        setenv("QCONV_JIT_CONV_DIRECT", std::string(direct) == "0" ? "0" : "1", 1);
        if (std::string(direct) == "unfused") setenv("QCONV_JIT_CONV_FUSED", "0", 1);
        for (const std::string &desc : descs)
            for (const std::string ops : {"relu", "fq:per_channel;sum"}) {
                ConvTester t;
                // Seeds differ per pass (cache keys): no kernel of the other pass is reused.
                t.post_ops(ops).dst(i % 3 == 0 ? dtype::f32 : i % 3 == 1 ? dtype::u8 : dtype::s8).seed(900 + i);
                if (i % 4 == 3) t.data("extreme").post_ops("").scales("none").bias(false).dst(dtype::s32);
                // Source kinds in turn: u8 without zp, per-channel zp, per-tensor zp, s8.
                switch (i % 5) {
                case 1: t.zp("channel:random"); break;
                case 2: t.zp(i % 4 == 3 ? "tensor:255" : "tensor:random"); break;
                case 4: t.src(dtype::s8); break;
                default: break;
                }
                ++i;
                run_all_rows(t, desc);
                if (HasFailure()) break;
            }
    }
    unsetenv("QCONV_JIT_CONV_DIRECT");
    unsetenv("QCONV_JIT_CONV_FUSED");
}

// The weight prefetches of the dense rows change no byte: the next OC block's
// weights into L2 (on by default from 128 KiB of weights per group, off / on
// by QCONV_JIT_CONV_DENSE_PREFETCH_NEXT) and a KxK kernel's own weights into L1
// (QCONV_JIT_CONV_DENSE_PREFETCH=N KiB, off by default): res5's 3x3, a strided
// layer, a grouped one, a 1x1 with large weights, and small layers that plan
// neither, with and without a zero point; the plan states each.
TEST(JitConv, WeightPrefetchGivesTheSameBytes) {
    struct prefetch_case {
        const char *desc;
        bool by_default; // 128 KiB or more of weights per group
    };
    const prefetch_case cases[] = {
        {"mb1ic512ih7oc512oh7kh3ph1", true},    // 2.25 MiB
        {"mb1ic256ih9oc256oh5kh3sh2ph1", true}, // 576 KiB, strided
        {"g2mb1ic256ih5oc512oh5kh3ph1", true},  // 576 KiB per group
        {"mb1ic1024ih5oc256oh5kh1ph0", true},   // 1x1, 256 KiB
        {"mb1ic64ih9oc96oh9kh3ph1", false},     // 54 KiB
        {"mb1ic64ih9oc256oh9kh1ph0", false},    // 1x1, 16 KiB
    };
    int ran = 0;
    for (const std::string &row : jit_rows()) {
        if (!isa_ok(row) || is_dw_row(row) || row_entry(row).only_dw_item || is_1x1_row(row)) continue;
        for (const auto &c : cases)
            for (const char *zp : {"none", "channel:random"}) {
                ConvTester t;
                t.desc(c.desc).zp(zp).post_ops("relu").seed(7);
                const std::string what = row + " " + c.desc + " zp " + zp;
                auto run = [&](const char *next, const char *l1, std::string *plan) {
                    knob_env env({{"QCONV_JIT_CONV_DENSE_PREFETCH_NEXT", next}, {"QCONV_JIT_CONV_DENSE_PREFETCH", l1}});
                    ConvTester r = t;
                    EXPECT_TRUE(r.run(row)) << what;
                    *plan = plan_of(row, r);
                    return r.result();
                };
                std::string plan_default, plan_off, plan_on;
                const auto def = run(nullptr, nullptr, &plan_default);
                const auto off = run("0", nullptr, &plan_off);
                const auto on = run("1", "16", &plan_on);
                EXPECT_EQ(def, off) << what;
                EXPECT_EQ(on, off) << what;
                EXPECT_EQ(plan_default.find(" prefetch_next") != std::string::npos, c.by_default)
                    << what << ": " << plan_default;
                EXPECT_EQ(plan_default.find(" prefetch="), std::string::npos) << what << ": " << plan_default;
                EXPECT_EQ(plan_off.find(" prefetch"), std::string::npos) << what << ": " << plan_off;
                const bool kxk = std::string(c.desc).find("kh1") == std::string::npos;
                EXPECT_EQ(plan_on.find(" prefetch=16384") != std::string::npos, kxk) << what << ": " << plan_on;
                if (c.by_default) {
                    EXPECT_NE(plan_on.find(" prefetch_next"), std::string::npos) << what << ": " << plan_on;
                }
                ++ran;
                if (HasFailure()) FAIL() << what;
            }
    }
    if (ran == 0) GTEST_SKIP() << "no dense vector row on this CPU";
}

// An s8 source with a per-tensor zero point (attr[0] carries it as a legacy
// vector of IC equal values): padded taps hold the byte zp + 128 and comp =
// −Σ w·(zp + 128). Zero points −128 (padding byte 0, comp 0), 127, small
// random ones and −1; symmetric / asymmetric padding, all-padding windows,
// 1x1 and 3x3, stride 2, dilation, groups, OC/IC tails, every dst type, a
// FakeQuantize chain; passes: default (direct mode on VNNI), padded copy,
// direct with the C++ pipeline.
TEST(JitConv, S8SourceTensorZeroPoint) {
    require_avx2();
    const std::vector<std::string> descs = {
        "mb1ic64ih7oc64oh7kh3ph1",                          // 3x3, symmetric padding
        "mb1ic17ih6oc33oh6kh3ph1",                          // IC / OC tails (padded copy)
        "mb2ic64ih4oc65oh4kh1ph0",                          // 1x1, OC tail
        "mb1ic32ih5oc48oh7kh1ph1",                          // 1x1 with padding: border pixels all padding
        "mb1ic16ih9iw23oc32oh5ow12kh3kw3sh2sw2ph1pw1",      // stride 2
        "mb1ic8ih7iw18oc20oh4ow18kh3kw5sh2sw1dh1dw1ph2pw3", // dilation, asymmetric pads
        "mb1ic4ih4iw19oc16oh4ow19kh3kw3ph0pw0",             // only bottom/right windows clipped
        "mb1ic12ih1iw1oc16oh5ow5kh3kw3ph2pw2",              // all-padding windows
        "g2mb1ic6ih5oc4oh5kh3ph1",                          // groups, ICg 3
        "g2mb1ic64ih6oc48oh6kh3ph1",                        // groups, ICg 32
        "mb1ic3ih9oc32oh5kh3sh2ph1",                        // first layer, 3 channels
        "mb1ic24ih5iw40oc70oh5ow40kh3kw3ph1pw1",            // wide rows (row-wise blocking)
    };
    const std::vector<std::string> zps = {"tensor:-128", "tensor:127", "tensor:random", "tensor:-1"};
    const std::vector<std::string> chains = {"", "relu", "fq:per_channel", "scale_shift;fq:per_channel", "sum;relu"};
    const std::vector<dtype> dsts = {dtype::u8, dtype::s8, dtype::s32, dtype::f32};
    int i = 0;
    for (const char *pass : {"direct", "copy", "unfused"}) {
        setenv("QCONV_JIT_CONV_DIRECT", std::string(pass) == "copy" ? "0" : "1", 1);
        if (std::string(pass) == "unfused") setenv("QCONV_JIT_CONV_FUSED", "0", 1);
        for (const std::string &desc : descs)
            for (const std::string &zp : zps) {
                ConvTester t;
                // Seeds differ per pass (cache keys): no kernel of another pass is reused.
                t.src(dtype::s8).zp(zp).post_ops(chains[i % chains.size()]).dst(dsts[i % dsts.size()]).seed(1300 + i);
                ++i;
                run_all_rows(t, desc);
                if (HasFailure()) break;
            }
        if (HasFailure()) break;
    }
    unsetenv("QCONV_JIT_CONV_DIRECT");
    unsetenv("QCONV_JIT_CONV_FUSED");
    if (HasFailure()) return;
    // The dispatcher serves the case with a JIT row (the driver's ref:conv fallback before).
    ConvTester t;
    t.desc("mb1ic64ih7oc64oh7kh3ph1").src(dtype::s8).zp("tensor:7");
    ASSERT_TRUE(t.run("auto"));
    EXPECT_EQ(t.impl_name().rfind("jit:conv_x8s8", 0), 0u) << t.impl_name();
}

// s8 −128/127 sources, weights −128/127 over IC·KH·KW up to 4608, zero points
// −128 and 127: the int32 sums (s32, no scale) and saturating u8 / f32 stores.
TEST(JitConv, S8SourceTensorZeroPointExtremeData) {
    require_avx2();
    const std::vector<std::string> descs = {"mb1ic64ih3oc17oh3kh1ph0", "mb1ic512ih5oc64oh5kh3ph1",
                                            "mb1ic1000ih2oc65oh2kh1ph0", "mb1ic3ih4oc3oh4kh3ph1",
                                            "mb1ic16ih2oc16oh2kh5ph2"};
    int i = 0;
    for (const std::string &desc : descs)
        for (const std::string zp : {"tensor:-128", "tensor:127", "tensor:random"})
            for (dtype dst : {dtype::s32, dtype::u8, dtype::f32}) {
                ConvTester t;
                t.src(dtype::s8).dst(dst).zp(zp).data("extreme").scales("none").bias(false).seed(1500 + i++);
                run_all_rows(t, desc);
                if (HasFailure()) FAIL() << desc << " zp=" << zp;
            }
}

namespace {

// Σ over taps inside the image of w·(x − zp[ic]) in int64: the definition
// (docs/semantics.md §2), independent of either zero-point mechanism.
std::vector<int64_t> naive_acc(const qconv::conv_desc &d, const int8_t *x, const int8_t *w,
                               const std::vector<int32_t> &zp) {
    std::vector<int64_t> acc(static_cast<size_t>(d.dst_elems()), 0);
    const int64_t icg = d.icg(), ocg = d.ocg();
    for (int64_t n = 0; n < d.mb; ++n)
        for (int64_t oh = 0; oh < d.oh; ++oh)
            for (int64_t ow = 0; ow < d.ow; ++ow)
                for (int64_t oc = 0; oc < d.oc; ++oc) {
                    const int64_t g = oc / ocg;
                    int64_t s = 0;
                    for (int64_t kh = 0; kh < d.kh; ++kh)
                        for (int64_t kw = 0; kw < d.kw; ++kw) {
                            const int64_t ih = oh * d.sh - d.pt + kh * d.dh, iw = ow * d.sw - d.pl + kw * d.dw;
                            if (ih < 0 || ih >= d.ih || iw < 0 || iw >= d.iw) continue;
                            for (int64_t ic = 0; ic < icg; ++ic) {
                                const int64_t c = g * icg + ic;
                                s +=
                                    int64_t(w[((oc * icg + ic) * d.kh + kh) * d.kw + kw]) *
                                    (int64_t(x[((n * d.ih + ih) * d.iw + iw) * d.ic + c]) - zp[static_cast<size_t>(c)]);
                            }
                        }
                    acc[static_cast<size_t>(((n * d.oh + oh) * d.ow + ow) * d.oc + oc)] = s;
                }
    return acc;
}

} // namespace

// Kernel level: the legacy mechanism with an s8 source and a per-channel
// vector of s8 values (the API takes per-channel zero points for u8 sources
// only; the kernels take any legacy vector of source values). Every JIT row
// this CPU has, direct mode and padded copy, created and executed directly;
// the s32 sums against the int64 definition and every dst type (with a
// FakeQuantize chain) against ref::conv with the same attribute set.
TEST(JitConv, S8SourcePerChannelLegacyZpKernelLevel) {
    require_avx2();
    const std::vector<std::string> descs = {"mb1ic64ih7oc64oh7kh3ph1",
                                            "mb1ic17ih6oc33oh6kh3ph1",
                                            "mb2ic64ih4oc65oh4kh1ph0",
                                            "mb1ic8ih7iw18oc20oh4ow18kh3kw5sh2sw1dh1dw1ph2pw3",
                                            "mb1ic12ih1iw1oc16oh5ow5kh3kw3ph2pw2",
                                            "g2mb1ic64ih6oc48oh6kh3ph1",
                                            "g24mb1ic24ih9oc24oh9kh5ph2",
                                            "mb1ic512ih5oc64oh5kh3ph1"};
    const std::vector<dtype> dsts = {dtype::s32, dtype::u8, dtype::s8, dtype::f32};
    const auto plat = qconv::impl::host_platform();
    int i = 0, ran = 0;
    for (const char *direct : {"1", "0"}) {
        setenv("QCONV_JIT_CONV_DIRECT", direct, 1);
        for (const std::string &desc : descs)
            for (const auto kind : {qconv::testdata::data_kind::random, qconv::testdata::data_kind::extreme})
                for (size_t k = 0; k < dsts.size(); ++k) {
                    const uint32_t seed = 1700 + i++;
                    const bool sums = k == 0; // s32, no scale, no bias, no post-op: dst = the sums
                    qconv::conv_problem p;
                    p.desc = qconv::conv_desc::parse(desc);
                    p.src_dt = dtype::s8;
                    p.dst_dt = dsts[k];
                    p.with_bias = !sums;
                    if (!sums) p.scales = qconv::testdata::make_scales(p.desc.oc, false, seed);
                    if (!sums) p.ops = qconv::testdata::make_post_ops("scale_shift;fq:per_channel", p.desc.oc, seed);
                    p.validate();
                    qconv::attr_set a = qconv::impl::build_attrs(p, plat, {}).at(0);
                    a.zp = qconv::zp_mechanism::legacy_per_channel;
                    a.zp_values.resize(static_cast<size_t>(p.desc.ic));
                    qconv::testdata::rng r(seed);
                    for (auto &z : a.zp_values) z = r.uniform(-128, 127);
                    a.zp_values[0] = -128;
                    a.zp_values[p.desc.ic - 1] = 127;
                    const auto src = qconv::testdata::make_src(p, kind, seed);
                    const auto wei = qconv::testdata::make_weights(p.desc, kind, seed);
                    const auto bias = qconv::testdata::make_bias(p.desc, seed);
                    const auto dst0 = qconv::testdata::make_dst(p, seed);
                    std::vector<uint8_t> want = dst0;
                    qconv::exec_args args;
                    qconv::ref::conv(p, a, src.data(), wei.data(), p.with_bias ? bias.data() : nullptr, want.data(),
                                     args);
                    std::vector<int64_t> exact;
                    if (sums)
                        exact =
                            naive_acc(p.desc, reinterpret_cast<const int8_t *>(src.data()), wei.data(), a.zp_values);
                    for (const auto &e : qconv::impl::conv_list()) {
                        if (e.family != qconv::impl::row_family::jit || e.needs.has(cpu_feature::amx_int8) ||
                            !isa_ok(e.name) || !row_takes(e.name, desc))
                            continue;
                        std::string why;
                        const qconv::impl::plan_ptr plan = e.supports(p, a, plat, &why);
                        if (!plan) {
                            ADD_FAILURE() << e.name << " refuses " << desc << ": " << why;
                            break;
                        }
                        const auto kernel = e.create(p, a, *plan);
                        const auto packed = kernel->pack(wei.data(), p.with_bias ? bias.data() : nullptr);
                        std::vector<uint8_t> got = dst0;
                        kernel->execute(*packed, src.data(), got.data(), args);
                        ++ran;
                        std::string report;
                        EXPECT_EQ(qconv::test::compare_dst(p, got.data(), want.data(), 0, &report), 0)
                            << e.name << " " << desc << " dst=" << qconv::to_string(p.dst_dt)
                            << " data=" << qconv::testdata::to_string(kind) << " direct=" << direct << "\n"
                            << report;
                        if (sums) {
                            const int32_t *g32 = reinterpret_cast<const int32_t *>(got.data());
                            int64_t bad = 0;
                            // Stored through f32 (acc·1 + 0), like every s32 destination.
                            for (size_t j = 0; j < exact.size(); ++j)
                                if (std::llabs(exact[j]) < (int64_t(1) << 30) &&
                                    g32[j] != static_cast<int32_t>(static_cast<float>(exact[j])))
                                    ++bad;
                            EXPECT_EQ(bad, 0) << e.name << " " << desc << ": sums differ from the definition";
                        }
                        if (HasFailure()) break;
                    }
                    if (HasFailure()) break;
                }
    }
    unsetenv("QCONV_JIT_CONV_DIRECT");
    EXPECT_GT(ran, 0);
}

// The legacy zero point's range follows the source type: a padded tap holds
// it as a source value.
TEST(JitConv, LegacyZpRangePerSourceType) {
    qconv::conv_problem p;
    p.desc = qconv::conv_desc::parse("mb1ic16ih5oc16oh5kh3ph1");
    // A simulated AVX-512 VNNI platform with AVX-VNNI and VBMI: every row applies.
    const auto vnni = qconv::impl::platform{qconv::isa::avx512_core_vnni, true}.with(cpu_feature::avx512_vbmi);
    struct rc {
        dtype src;
        std::vector<int32_t> zp;
        const char *why;
    };
    const rc cases[] = {
        {dtype::s8, {-128}, nullptr},
        {dtype::s8, {127}, nullptr},
        {dtype::u8, {0}, nullptr},
        {dtype::u8, {255}, nullptr},
        {dtype::s8, {128}, "[-128, 127] (s8 source)"},
        {dtype::s8, {-129}, "[-128, 127] (s8 source)"},
        {dtype::u8, {-1}, "[0, 255] (u8 source)"},
        {dtype::u8, {256}, "[0, 255] (u8 source)"},
    };
    int rows = 0;
    for (const auto &e : qconv::impl::conv_list()) {
        if (e.family != qconv::impl::row_family::jit || is_1x1_row(e.name) || e.needs.has(cpu_feature::amx_int8))
            continue;
        const bool dw = is_dw_row(e.name);
        ++rows;
        for (const rc &c : cases) {
            qconv::conv_problem q = p;
            if (dw) q.desc = qconv::conv_desc::parse("g16mb1ic16ih5oc16oh5kh3ph1");
            q.src_dt = c.src;
            qconv::attr_set a;
            a.zp = qconv::zp_mechanism::legacy_per_channel;
            a.zp_values.assign(static_cast<size_t>(q.desc.ic), c.src == dtype::u8 ? 5 : -5);
            a.zp_values[3] = c.zp[0]; // a per-channel vector with one value at the limit, then the value alone
            for (const auto &zv : {a.zp_values, c.zp}) {
                qconv::attr_set b = a;
                b.zp_values = zv;
                std::string why;
                const bool ok = e.supports(q, b, vnni, &why) != nullptr;
                if (!c.why) {
                    EXPECT_TRUE(ok) << e.name << " " << qconv::to_string(c.src) << " zp " << c.zp[0] << ": " << why;
                } else {
                    EXPECT_FALSE(ok) << e.name << " " << qconv::to_string(c.src) << " zp " << c.zp[0];
                    EXPECT_NE(why.find(c.why), std::string::npos) << e.name << ": " << why;
                }
            }
        }
    }
    EXPECT_GE(rows, 5);
}

namespace {

// A minimal generator: int f(int x) { return x + 42; }
class add42 : public qconv::jit::jit_generator {
public:
    const char *name() const override { return "jit:test_add42"; }

protected:
    void generate() override {
        lea(eax, ptr[rdi + 42]);
        ret();
    }
};

// Permissions ("r-xp", ...) of the mapping that holds address p.
std::string mapping_perms(const void *p) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    const auto a = reinterpret_cast<uintptr_t>(p);
    while (std::getline(maps, line)) {
        unsigned long lo = 0, hi = 0;
        char perms[8] = {};
        if (std::sscanf(line.c_str(), "%lx-%lx %4s", &lo, &hi, perms) == 3 && a >= lo && a < hi) return perms;
    }
    return "";
}

} // namespace

// The JIT base: code runs, its pages are read+execute (never writable and
// executable at once), QCONV_JIT_DUMP writes the code, QCONV_JIT_PROFILE
// appends a perf map line.
TEST(JitBase, ReadExecutePagesDumpAndPerfMap) {
    const std::string map = "/tmp/perf-" + std::to_string(::getpid()) + ".map";
    setenv("QCONV_JIT_DUMP", "1", 1);
    setenv("QCONV_JIT_PROFILE", "1", 1);
    add42 g;
    g.create();
    unsetenv("QCONV_JIT_DUMP");
    unsetenv("QCONV_JIT_PROFILE");
    ASSERT_TRUE(g.created());
    EXPECT_EQ(g.entry<int (*)(int)>()(1), 43);
    const std::string perms = mapping_perms(g.getCode());
    ASSERT_EQ(perms.size(), 4u);
    EXPECT_EQ(perms[0], 'r');
    EXPECT_EQ(perms[1], '-') << perms; // not writable
    EXPECT_EQ(perms[2], 'x') << perms;

    // Dump: qconv_jit_<name>.<n>.bin in the working directory, the code bytes.
    bool found = false;
    for (int n = 0; n < 10000 && !found; ++n) {
        const std::string f = "qconv_jit_jit_test_add42." + std::to_string(n) + ".bin";
        std::ifstream in(f, std::ios::binary);
        if (!in) continue;
        std::stringstream ss;
        ss << in.rdbuf();
        const std::string bytes = ss.str();
        found = bytes.size() == g.getSize() &&
                std::equal(bytes.begin(), bytes.end(), reinterpret_cast<const char *>(g.getCode()));
        std::remove(f.c_str());
    }
    EXPECT_TRUE(found);

    std::ifstream pm(map);
    std::string line, all;
    while (std::getline(pm, line)) all += line + "\n";
    EXPECT_NE(all.find("qconv_jit_jit_test_add42"), std::string::npos) << all;
    std::remove(map.c_str());
}
