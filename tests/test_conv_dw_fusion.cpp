// The fused depthwise item (post_op::kind::dw_conv, docs/semantics.md §5):
// its text form and errors, the reference as the two convolutions in
// sequence, and every row that takes it — the fused JIT rows
// (jit:conv_1x1_dw_x8s8:avx2_vnni / avx2, forced by name; run on AVX-512
// hosts too, their features are a subset) and the composite row — bit-exact
// against the reference on the MobileNet v1 pointwise → depthwise pairs and
// on random small shapes (odd channel counts, strides 1 and 2, image sides
// 1–3, extreme data, every zero-point kind on the 1x1, post-ops on both
// halves), with identical bytes for 1, 2 and 3 threads and for any band size.
#include <gtest/gtest.h>

#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "core/dw_fusion.h"
#include "dispatch/dispatcher.h"
#include "dispatch/host_platform.h"
#include "qconv/qconv.h"
#include "reference/reference.h"
#include "tests/support/conv_tester.h"
#include "tests/support/expect_error.h"
#include "tests/support/testdata.h"

namespace qconv {
namespace {

using test::ConvTester;

const char *const kFusedVnni = "jit:conv_1x1_dw_x8s8:avx2_vnni";
const char *const kFusedAvx2 = "jit:conv_1x1_dw_x8s8:avx2";
const char *const kComposite = "composite:conv_1x1_dw";

std::string weights_text(int n, int v) {
    std::string s;
    for (int i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(v);
    return s;
}

// Sets an environment variable for the scope (the band knob is read when a
// row decides).
struct scoped_env {
    std::string name;
    scoped_env(const char *n, const std::string &v) : name(n) { setenv(n, v.c_str(), 1); }
    ~scoped_env() { unsetenv(name.c_str()); }
};

// ------------------------------------------------------------ text form
TEST(DwConvText, FullFormRoundTrips) {
    const int64_t oc = 3;
    const post_ops ops = testdata::make_post_ops("relu;dw:2:s8:bias;add:per_oc;sum", oc, 7);
    ASSERT_EQ(ops.size(), 4u);
    const post_op &d = ops[1];
    EXPECT_EQ(d.k, post_op::kind::dw_conv);
    EXPECT_EQ(d.dw_stride, 2);
    EXPECT_EQ(d.dw_mid_dt, dtype::s8);
    EXPECT_EQ(d.dw_wei.size(), 27u);
    EXPECT_EQ(d.dw_bias.size(), 3u);
    EXPECT_EQ(d.dw_scales.size(), 3u);
    EXPECT_EQ(parse_post_ops(to_text(ops), oc), ops);
    EXPECT_EQ(to_string(ops), "relu;dw:2:s8:bias;add:per_oc;sum");
    const post_ops plain = parse_post_ops("dw:1:u8:" + weights_text(27, -1) + ":none:none", oc);
    EXPECT_TRUE(plain[0].dw_bias.empty());
    EXPECT_TRUE(plain[0].dw_scales.empty());
    EXPECT_EQ(plain[0].dw_wei[5], -1);
    EXPECT_EQ(parse_post_ops(to_text(plain), oc), plain);
}

TEST(DwConvText, BadItemsNameTheField) {
    const int64_t oc = 2;
    const std::string w = weights_text(18, 1);
    test::expect_error_prefix([&] { parse_post_ops("dw:3:u8:" + w + ":none:none", oc); },
                              "post_ops[0].dw_stride: must be 1 or 2");
    test::expect_error_prefix([&] { parse_post_ops("dw:1:f32:" + w + ":none:none", oc); }, "post_ops[0].dw_mid_dt:");
    test::expect_error_prefix([&] { parse_post_ops("dw:1:u8:1,2:none:none", oc); },
                              "post_ops[0].dw_wei: expected 9·OC=18");
    test::expect_error_prefix([&] { parse_post_ops("dw:1:u8:" + weights_text(17, 1) + ",128:none:none", oc); },
                              "post_ops: 'dw:1:u8:", "weight 128 is outside [-128, 127]");
    test::expect_error_prefix([&] { parse_post_ops("dw:1:u8:" + w + ":1,2,3:none", oc); },
                              "post_ops[0].dw_bias: expected none or OC=2");
    test::expect_error_prefix([&] { parse_post_ops("dw:1:u8:" + w + ":none:1,2,3", oc); }, "post_ops[0].dw_scales:");
    test::expect_error_prefix([&] { parse_post_ops("dw:1:u8", oc); }, "post_ops: 'dw:1:u8': expected dw:STRIDE:MID_DT");
    const std::string item = "dw:1:u8:" + w + ":none:none";
    test::expect_error_prefix([&] { parse_post_ops(item + ";" + item, oc); }, "post_ops[1]: at most one dw conv item");
    test::expect_error_prefix([&] { parse_post_ops("sum;" + item, oc); }, "post_ops[0]: a sum before the dw conv item");
    test::expect_error_prefix([&] { parse_post_ops("add:full;" + item, oc); },
                              "post_ops[0]: a full-tensor binary before");
    EXPECT_NO_THROW(parse_post_ops(item + ";sum;add:full", oc));
}

TEST(DwConvProblem, NeedsAnUngroupedUnpadded1x1) {
    conv_problem p;
    p.ops = testdata::make_post_ops("dw:1", 8, 1);
    p.desc = conv_desc::parse("mb1ic8ih5oc8kh3ph1");
    test::expect_error_prefix([&] { p.validate(); }, "post_ops: a dw conv item needs a 1x1 convolution");
    p.desc = conv_desc::parse("g2mb1ic8ih5oc8kh1");
    test::expect_error_prefix([&] { p.validate(); }, "post_ops: a dw conv item needs an ungrouped");
    p.desc = conv_desc::parse("mb1ic8ih5oc8kh1");
    EXPECT_NO_THROW(p.validate());
    // The destination is the depthwise's: stride 2 over 5x5 gives 3x3.
    p.ops = testdata::make_post_ops("dw:2", 8, 1);
    EXPECT_EQ(p.dst_desc().oh, 3);
    EXPECT_EQ(p.dst_desc().ow, 3);
    EXPECT_EQ(p.dst_elems(), 3 * 3 * 8);
    EXPECT_NE(p.key(), conv_problem{}.key());
}

// ------------------------------------------------------------ reference
// The reference with a dw item equals an independent loop over the
// intermediate that ref::conv of the 1x1 alone produced.
TEST(DwConvReference, EqualsTheDepthwiseLoopOverTheIntermediate) {
    conv_problem p;
    p.desc = conv_desc::parse("mb2ic5ih4iw3oc3kh1");
    p.src_dt = dtype::u8;
    p.dst_dt = dtype::s32;
    p.src_zp = zero_point::tensor(2);
    p.scales = {0.5f};
    p.with_bias = true;
    p.ops = testdata::make_post_ops("relu;dw:2:u8;linear:2:1", p.desc.oc, 3);
    p.validate();
    const auto src = testdata::make_src(p, testdata::data_kind::random, 3);
    const auto wei = testdata::make_weights(p.desc, testdata::data_kind::random, 3);
    const auto bias = testdata::make_bias(p.desc, 3);
    attr_set a;
    a.zp = zp_mechanism::stock_per_tensor;
    a.zp_values = {2};
    a.ops = lower_legacy(p.ops, p.desc.oc, false);
    std::vector<int32_t> got(static_cast<size_t>(p.dst_elems()));
    ref::conv(p, a, src.data(), wei.data(), bias.data(), got.data(), {});

    const dw_halves h = split_dw(p);
    attr_set a1 = a;
    a1.ops = lower_legacy(h.pw.ops, p.desc.oc, false);
    std::vector<uint8_t> mid(static_cast<size_t>(h.pw.desc.dst_elems()));
    ref::conv(h.pw, a1, src.data(), wei.data(), bias.data(), mid.data(), {});
    const conv_desc d = p.dst_desc();
    const post_op &item = *p.dw();
    for (int64_t n = 0; n < d.mb; ++n)
        for (int64_t oh = 0; oh < d.oh; ++oh)
            for (int64_t ow = 0; ow < d.ow; ++ow)
                for (int64_t c = 0; c < d.oc; ++c) {
                    int32_t acc = 0;
                    for (int64_t kh = 0; kh < 3; ++kh)
                        for (int64_t kw = 0; kw < 3; ++kw) {
                            const int64_t ih = oh * 2 - 1 + kh, iw = ow * 2 - 1 + kw;
                            if (ih < 0 || ih >= d.ih || iw < 0 || iw >= d.iw) continue;
                            acc += item.dw_wei[static_cast<size_t>(c * 9 + kh * 3 + kw)] *
                                   mid[static_cast<size_t>(((n * d.ih + ih) * d.iw + iw) * d.ic + c)];
                        }
                    float y = __builtin_fmaf(float(acc), item.dw_scales[static_cast<size_t>(c)],
                                             item.dw_bias[static_cast<size_t>(c)]);
                    y = __builtin_fmaf(y, 2.f, 1.f);
                    const int64_t i = ((n * d.oh + oh) * d.ow + ow) * d.oc + c;
                    EXPECT_EQ(got[static_cast<size_t>(i)], int32_t(std::nearbyint(y))) << "element " << i;
                }
}

// ------------------------------------------------------------ rows
struct pair_case {
    const char *name;
    const char *desc; // the 1x1
    int stride;       // the depthwise's
};

// MobileNet v1's pointwise → depthwise pairs (bench/shapes/shapes_mobilenet*), mb1.
const pair_case kPairs[] = {
    {"conv2_s2", "mb1ic32ih112oc64kh1", 2},  {"conv3_s1", "mb1ic64ih56oc128kh1", 1},
    {"conv4_s2", "mb1ic128ih56oc128kh1", 2}, {"conv5_s1", "mb1ic128ih28oc256kh1", 1},
    {"conv6_s2", "mb1ic256ih28oc256kh1", 2}, {"conv7_s1", "mb1ic256ih14oc512kh1", 1},
    {"conv8_s1", "mb1ic512ih14oc512kh1", 1}, {"conv8_s2", "mb1ic512ih14oc512kh1", 2},
    {"conv9_s1", "mb1ic512ih7oc1024kh1", 1},
};

struct row_case {
    const char *name;
    const char *impl;
};
// Readable parameters in test listings.
void PrintTo(const pair_case &c, std::ostream *os) { *os << c.name << " " << c.desc << " dw stride " << c.stride; }
void PrintTo(const row_case &c, std::ostream *os) { *os << c.impl; }

const row_case kRows[] = {{"fused_avx2_vnni", kFusedVnni}, {"fused_avx2", kFusedAvx2}, {"composite", kComposite}};

class DwPairs : public ::testing::TestWithParam<std::tuple<pair_case, row_case>> {};

TEST_P(DwPairs, MatchTheReference) {
    const auto &[pc, rc] = GetParam();
    ConvTester t;
    t.desc(pc.desc).zp("tensor:random").post_ops("relu;dw:" + std::to_string(pc.stride) + ":u8;relu").seed(5);
    if (!t.run(rc.impl)) return;
    EXPECT_EQ(t.impl_name(), rc.impl);
}

INSTANTIATE_TEST_SUITE_P(MobileNet, DwPairs,
                         ::testing::Combine(::testing::ValuesIn(kPairs), ::testing::ValuesIn(kRows)),
                         [](const auto &i) {
                             return std::string(std::get<0>(i.param).name) + "_" + std::get<1>(i.param).name;
                         });

struct small_case {
    const char *name;
    const char *desc;
    dtype src;
    const char *zp;
    const char *ops;
    dtype dst;
    const char *data;
};

// Odd channel counts, image sides 1–3, strides 1 and 2, both intermediate
// types, every zero-point kind, post-ops on both halves, extreme data.
const small_case kSmall[] = {
    {"side1_s1", "mb1ic3ih1oc5kh1", dtype::u8, "none", "dw:1:u8", dtype::u8, "random"},
    {"side1_s2", "mb2ic7ih1oc9kh1", dtype::s8, "tensor:random", "dw:2:s8", dtype::s8, "random"},
    {"side2_s2", "mb1ic5ih2oc3kh1", dtype::u8, "channel:random", "relu;dw:2:u8;relu", dtype::f32, "random"},
    {"side3_s1", "mb3ic11ih3oc13kh1", dtype::u8, "tensor:random", "fq:per_channel;dw:1:s8;sum", dtype::s32, "random"},
    {"side3_s2", "mb1ic17ih3iw2oc7kh1", dtype::s8, "none", "scale_shift;dw:2:u8;prelu", dtype::u8, "random"},
    {"wide_s1", "mb1ic9ih5iw13oc19kh1", dtype::u8, "channel:random", "clip:0:6;dw:1:u8;add:full", dtype::f32, "random"},
    {"tall_s2", "mb2ic33ih17iw3oc15kh1", dtype::u8, "tensor:random", "dw:2:u8:nobias;mul:per_oc;sum:0.5", dtype::s8,
     "random"},
    {"extreme_s1", "mb1ic31ih6oc21kh1", dtype::u8, "tensor:255", "dw:1:u8:bias:extreme", dtype::s32, "extreme"},
    {"extreme_s2", "mb1ic31ih7oc23kh1", dtype::s8, "tensor:-128", "dw:2:s8:bias:extreme", dtype::f32, "extreme"},
    {"extreme_channel", "mb1ic8ih3oc40kh1", dtype::u8, "channel:random", "dw:1:u8:nobias:extreme;relu", dtype::u8,
     "extreme"},
    {"strided_1x1", "mb1ic8ih9oc8oh5kh1sh2", dtype::u8, "none", "dw:1:u8", dtype::u8, "random"},
};

void PrintTo(const small_case &c, std::ostream *os) { *os << c.name << " " << c.desc << " " << c.ops; }

class DwSmall : public ::testing::TestWithParam<std::tuple<small_case, row_case>> {};

TEST_P(DwSmall, MatchTheReferenceForEveryBandAndThreadCount) {
    const auto &[sc, rc] = GetParam();
    std::vector<uint8_t> first;
    for (const char *band : {"1", "2", "0"}) {
        const scoped_env env("QCONV_JIT_CONV_DW_BAND", band);
        for (int threads : {1, 2, 3}) {
            ConvTester t;
            t.desc(sc.desc).src(sc.src).dst(sc.dst).zp(sc.zp).post_ops(sc.ops).data(sc.data).seed(11).threads(threads);
            if (!t.run(rc.impl)) return;
            if (first.empty()) first = t.result();
            EXPECT_EQ(t.result(), first) << "band " << band << ", " << threads << " threads";
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Random, DwSmall, ::testing::Combine(::testing::ValuesIn(kSmall), ::testing::ValuesIn(kRows)),
                         [](const auto &i) {
                             return std::string(std::get<0>(i.param).name) + "_" + std::get<1>(i.param).name;
                         });

// oneDNN's append_dw rows are peers; where the implementation oneDNN runs
// is exact (VNNI sub-primitives) they match the reference bit for bit, and
// below VNNI (saturating sums) or on AMX (untrusted brgconv) they say exact=0.
TEST(DwOnednn, PeersMatchTheReferenceWhereExact) {
    const impl::platform pl = impl::host_platform();
    int ran = 0;
    for (const auto &e : impl::conv_list()) {
        if (e.family != qconv::impl::row_family::onednn || !e.only_dw_item) continue; // oneDNN's append_dw rows
        EXPECT_TRUE(e.peer) << e.name;
        if (!pl.has_all(e.needs)) continue;
        for (int stride : {1, 2}) {
            ConvTester t;
            t.desc("mb2ic24ih9iw7oc40kh1").post_ops("relu;dw:" + std::to_string(stride) + ":u8;clip:0:6").threads(2);
            const conv_problem p = [&] {
                conv_problem q;
                q.desc = conv_desc::parse("mb2ic24ih9iw7oc40kh1");
                q.ops = testdata::make_post_ops("relu;dw:" + std::to_string(stride) + ":u8;clip:0:6", 40, 1);
                q.scales = testdata::make_scales(40, false, 1);
                q.with_bias = true;
                return q;
            }();
            const auto w = testdata::make_weights(p.desc, testdata::data_kind::random, 1);
            const auto b = testdata::make_bias(p.desc, 1);
            conv_hints h;
            h.impl = e.name;
            std::unique_ptr<convolution> c;
            try {
                c = std::make_unique<convolution>(p, w.data(), b.data(), h);
            } catch (const error &) {
                continue; // oneDNN offers nothing at this ISA here (it follows DNNL_MAX_CPU_ISA)
            }
            if (!c->exact()) continue;
            t.seed(1);
            if (t.run(e.name)) ++ran;
        }
    }
    std::printf("%d exact oneDNN append_dw runs matched the reference\n", ran);
}

// ------------------------------------------------------------ dispatch
// A chain with the dw item is never an error and never falls to the
// reference: the fused rows on AVX2 / AVX-VNNI, the composite elsewhere.
TEST(DwDispatch, EveryLevelPicksAFusedOrTheCompositeRow) {
    conv_problem p;
    p.desc = conv_desc::parse("mb1ic32ih8oc48kh1");
    p.ops = testdata::make_post_ops("relu;dw:2;relu", p.desc.oc, 1);
    struct level_case {
        isa level;
        bool avx_vnni;
        const char *want;
    };
    const level_case levels[] = {
        {isa::sse41, false, kComposite},
        {isa::avx2, false, kFusedAvx2},
        {isa::avx2, true, kFusedVnni},
        {isa::avx512_core, false, kComposite},
        {isa::avx512_core_vnni, false, kComposite},
        {isa::avx512_core_amx, false, kComposite},
    };
    for (const auto &l : levels) {
        const auto c = impl::select_conv(p, impl::platform{l.level, l.avx_vnni}, {});
        EXPECT_EQ(c.name, l.want) << to_string(l.level) << (l.avx_vnni ? "+avx_vnni" : "");
    }
}

TEST(DwDispatch, AutoOnThisMachineMatchesTheReference) {
    ConvTester t;
    t.desc("mb2ic24ih9oc40kh1").zp("channel:random").post_ops("relu;dw:2:u8;add:per_oc").threads(2);
    ASSERT_TRUE(t.run("auto"));
    EXPECT_NE(t.impl_name(), "ref:conv");
    // Under a cap below AVX-512 (QCONV_MAX_CPU_ISA=avx2 / avx2_vnni, CTest
    // conv_dw_fusion_isa_cap_*) the fused row of the level runs, else the composite.
    const impl::platform pl = impl::host_platform();
    const char *want = pl.has(impl::cpu_feature::avx512_core) ? kComposite
                       : pl.has(impl::cpu_feature::avx2_vnni) ? kFusedVnni
                       : pl.has(impl::cpu_feature::avx2)      ? kFusedAvx2
                                                              : kComposite;
    EXPECT_EQ(t.impl_name(), want) << pl.key();
}

// The tuned mode times the composite row too, whose halves are tuned
// primitives of their own (a recursive tuning on the same thread: it once
// deadlocked); the tuned choice computes the same bytes as auto's.
TEST(DwDispatch, TunedModeRunsAndMatchesAuto) {
    conv_problem p;
    p.desc = conv_desc::parse("mb2ic17ih9oc24kh1");
    p.ops = testdata::make_post_ops("relu;dw:2:u8;relu", p.desc.oc, 1);
    p.scales = testdata::make_scales(p.desc.oc, false, 1);
    const auto src = testdata::make_src(p, testdata::data_kind::random, 1);
    const auto w = testdata::make_weights(p.desc, testdata::data_kind::random, 1);
    conv_hints tuned;
    tuned.tune = true;
    const convolution a(p, w.data(), nullptr), t(p, w.data(), nullptr, tuned);
    std::vector<uint8_t> da(static_cast<size_t>(p.dst_elems())), dt(da.size());
    a.execute(src.data(), da.data());
    t.execute(src.data(), dt.data());
    EXPECT_EQ(da, dt) << a.impl_name() << " vs tuned " << t.impl_name();
}

} // namespace
} // namespace qconv
