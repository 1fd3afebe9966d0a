// Exactness of the AMX int8 conv row (jit:conv_x8s8:avx512_core_amx) against
// the reference, through the dispatcher with the row forced by name.
//
// Coverage: the ResNet-50 and MobileNet shape lists (bench/shapes, spatial
// size capped at 12 by default; QCONV_AMX_TEST_FULL=1: the listed sizes and
// every destination type per case) × zero-point kinds × the epilogue chains;
// s8 sources; extreme data up to IC·KH·KW = 4608; channel tails; windows
// wholly in the padding; dilation; groups; mini-batch 2; identical bytes at
// 1, 2 and 3 threads; concurrent executions of one primitive; the refusals
// and their reasons. Every test skips on a
// CPU without AMX-INT8 unless the tile emulator runs them (amx_available()
// is the one place that decides; emulated, a bounded subset by default).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <ostream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dispatch/dispatcher.h"
#include "dispatch/host_platform.h"
#include "qconv/qconv.h"
#include "rows/row.h"
#include "tests/support/amx_emulator.h"
#include "tests/support/conv_tester.h"
#include "tests/support/testdata.h"

using qconv::dtype;
using qconv::test::ConvTester;
using qconv::test::epilogue_chains;
using qconv::test::knob_env;

namespace {

const char *const amx_row = "jit:conv_x8s8:avx512_core_amx";

bool full_sweep() {
    const char *v = std::getenv("QCONV_AMX_TEST_FULL");
    return v && *v && std::strcmp(v, "0") != 0;
}

// Native where the CPU has AMX; on a CPU without it (or QCONV_TEST_AMX=emulate)
// the tile emulator runs the row's generated code from start-up
// (tests/support/amx_emulator.h), and the dispatcher sees AMX.
bool emulated() { return qconv::test::amx_test_mode() == qconv::test::amx_mode::emulate; }
bool amx_available() { return qconv::impl::host_platform().has(qconv::impl::cpu_feature::amx_int8); }

// Emulated, every trapped instruction costs 15-40 us: the parameterised
// suites run one case in `emulated_stride` (QCONV_AMX_TEST_FULL=1: all).
constexpr int emulated_stride = 4;
bool in_emulated_subset(int index) { return !emulated() || full_sweep() || index % emulated_stride == 0; }

#define REQUIRE_AMX()                                                                                                  \
    do {                                                                                                               \
        if (!amx_available()) GTEST_SKIP() << "needs AMX-INT8 (Sapphire Rapids class)";                                \
    } while (0)

// The row defers gathered layers with few multiply-adds per copied byte to
// the VNNI row (faster there); this suite forces the row by name, so it runs
// them all (AmxConv.RefusesWithReasons checks the rule).

const qconv::impl::conv_entry &row() {
    for (const auto &e : qconv::impl::conv_list())
        if (e.name == amx_row) return e;
    throw std::runtime_error(std::string("no row ") + amx_row);
}

// A listed layer with mb 1 and, unless full_sweep(), the image capped at
// `cap` rows and columns (kernel, strides, padding and channels kept; the
// bottom/right pads re-derived).
qconv::conv_desc shrink(qconv::conv_desc d, int64_t cap) {
    d.mb = 1;
    if (full_sweep()) return d;
    auto axis = [cap](int64_t &in, int64_t &out, int64_t k_ext, int64_t s, int64_t p0, int64_t &p1) {
        if (in <= cap) return;
        in = cap;
        out = (in + p0 + p1 - k_ext) / s + 1;
        p1 = (out - 1) * s + k_ext - in - p0;
    };
    axis(d.ih, d.oh, d.kh_extent(), d.sh, d.pt, d.pb);
    axis(d.iw, d.ow, d.kw_extent(), d.sw, d.pl, d.pr);
    return d;
}

struct layer {
    std::string name; // test-name safe
    qconv::conv_desc desc;
    int index = 0; // position in network_layers()
};

// Parameters print as their names (test listings, ctest).
void PrintTo(const layer &l, std::ostream *os) { *os << l.name; }

std::vector<layer> read_shapes(const std::string &file) {
    std::ifstream in(std::string(QCONV_SOURCE_DIR) + "/bench/shapes/" + file);
    std::vector<layer> out;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        const qconv::conv_desc d = qconv::conv_desc::parse(line);
        if (d.g > 1 && d.g == d.ic && d.g == d.oc) continue; // depthwise: the depthwise rows
        std::string n = d.name.empty() ? "layer" + std::to_string(out.size()) : d.name;
        for (char &c : n)
            if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
        out.push_back({n, shrink(d, 12)});
    }
    return out;
}

std::vector<layer> network_layers() {
    std::vector<layer> all = read_shapes("shapes_resnet_50");
    for (const layer &l : read_shapes("shapes_mobilenet")) all.push_back(l);
    for (size_t i = 0; i < all.size(); ++i) all[i].index = static_cast<int>(i);
    return all;
}

// Emulated, a layer outside the subset is skipped with the reason.
#define REQUIRE_EMULATED_SUBSET(index)                                                                                 \
    do {                                                                                                               \
        if (!in_emulated_subset(index))                                                                                \
            GTEST_SKIP() << "emulated AMX: one layer in " << emulated_stride << " by default (QCONV_AMX_TEST_FULL=1)"; \
    } while (0)

const dtype all_dst[] = {dtype::u8, dtype::s8, dtype::s32, dtype::f32};

// The AMX row's plan for the problem a tester ran (its str(): verbose's words).
std::string amx_plan_of(const ConvTester &t) {
    const qconv::impl::platform host = qconv::impl::host_platform();
    const auto attrs = qconv::impl::conv_attrs(t.problem(), host, {});
    const auto pl = row().supports(t.problem(), attrs.at(static_cast<size_t>(t.attr_id())), host, nullptr);
    return pl ? pl->str() : "(refused)";
}

// Runs t on the AMX row with `knobs` set while it is planned: its bytes, and
// the row's plan for it in *plan when asked.
std::vector<uint8_t> run_with_knobs(ConvTester t, std::initializer_list<std::pair<const char *, const char *>> knobs,
                                    const std::string &what, std::string *plan = nullptr) {
    knob_env env(knobs);
    EXPECT_TRUE(t.run(amx_row)) << what;
    EXPECT_EQ(t.impl_name(), amx_row) << what;
    if (plan) *plan = amx_plan_of(t);
    return t.result();
}

bool run_case(ConvTester t) {
    const bool ran = t.run(amx_row);
    EXPECT_TRUE(ran) << "skipped";
    if (ran) {
        EXPECT_EQ(t.impl_name(), amx_row);
    }
    return ran;
}

} // namespace

// Network layers × zero-point kinds × epilogue chains; the destination type
// rotates over the cases (every type per case with QCONV_AMX_TEST_FULL=1).
class AmxNetworkLayer : public ::testing::TestWithParam<layer> {};

TEST_P(AmxNetworkLayer, ZpKindsChainsDstTypes) {
    REQUIRE_AMX();
    REQUIRE_EMULATED_SUBSET(GetParam().index);
    int i = 0;
    for (const char *zp : {"none", "tensor:random", "channel:random"})
        for (const std::string &chain : epilogue_chains()) {
            if (!in_emulated_subset(i + GetParam().index)) {
                ++i;
                continue;
            }
            for (size_t k = 0; k < 4; ++k) {
                const dtype dst = full_sweep() ? all_dst[k] : all_dst[(i + k) % 4];
                ConvTester t;
                t.desc(GetParam().desc).dst(dst).zp(zp).post_ops(chain).seed(static_cast<uint32_t>(100 + i));
                run_case(t);
                if (HasFailure()) FAIL() << "zp=" << zp << " ops=\"" << chain << "\" dst=" << qconv::to_string(dst);
                if (!full_sweep()) break;
            }
            ++i;
        }
}

// s8 sources: tdpbssd, the zero point as an s8 byte in the padding.
TEST_P(AmxNetworkLayer, S8Source) {
    REQUIRE_AMX();
    REQUIRE_EMULATED_SUBSET(GetParam().index + 4);
    int i = 0;
    for (const char *zp : {"none", "tensor:random", "tensor:-128"})
        for (const char *chain : {"relu", "fq:per_channel", "sum;relu"}) {
            ConvTester t;
            t.desc(GetParam().desc).src(dtype::s8).dst(all_dst[i % 4]).zp(zp).post_ops(chain);
            t.seed(static_cast<uint32_t>(300 + i++));
            run_case(t);
            if (HasFailure()) FAIL() << "zp=" << zp << " ops=" << chain;
        }
}

INSTANTIATE_TEST_SUITE_P(Nets, AmxNetworkLayer, ::testing::ValuesIn(network_layers()),
                         [](const ::testing::TestParamInfo<layer> &info) { return info.param.name; });

// Small problems by what they exercise; each runs every zero-point kind.
struct small_case {
    const char *name;
    const char *desc;
};
void PrintTo(const small_case &c, std::ostream *os) { *os << c.name << " " << c.desc; }

class AmxSmall : public ::testing::TestWithParam<small_case> {};

TEST_P(AmxSmall, ZpKindsAndSources) {
    REQUIRE_AMX();
    int i = 0;
    for (dtype src : {dtype::u8, dtype::s8})
        for (const char *zp : {"none", "tensor:random", "channel:random"}) {
            if (src == dtype::s8 && std::strcmp(zp, "channel:random") == 0) zp = "tensor:127";
            ConvTester t;
            t.desc(GetParam().desc).src(src).dst(all_dst[i % 4]).zp(zp);
            t.post_ops(i % 2 ? "scale_shift;fq:per_channel" : "prelu;sum").seed(static_cast<uint32_t>(500 + i));
            ++i;
            run_case(t);
            if (HasFailure()) FAIL() << "src=" << qconv::to_string(src) << " zp=" << zp;
        }
}

const small_case small_cases[] = {
    {"oc_ic_tails_3x3", "mb1ic17ih5oc7oh5kh3ph1"},
    {"oc_ic_tails_1x1", "mb1ic129ih9oc31oh9kh1ph0"},
    {"ic65_oc49", "mb1ic65ih6oc49oh6kh3ph1"},
    {"ic33_oc33_5x5", "mb1ic33ih8oc33oh8kh5ph2"},
    {"in_place_tail_block", "mb1ic64ih5iw7oc48oh5ow7kh1ph0"},
    {"in_place_ic32", "mb1ic32ih6oc40oh6kh1ph0"},
    {"windows_wholly_in_padding_1x1", "mb1ic16ih2oc16oh6kh1ph2"},
    {"windows_wholly_in_padding_3x3", "mb1ic40ih2iw3oc20oh6ow7kh3ph3"},
    {"dilation", "mb1ic48ih11oc32oh9kh3ph1dh1"},
    {"dilation_strided", "mb1ic24ih13oc24oh5kh3sh2ph1dh1"},
    {"stride_per_axis", "mb1ic40ih15iw16oc36oh5ow8kh3kw1sh3sw2ph1pw0"},
    {"strided_1x1", "mb1ic96ih9oc64oh5kh1sh2ph0"},
    {"conv1_like", "mb1ic3ih23oc64oh12kh7sh2ph3"},
    {"one_pixel", "mb1ic64ih1oc64oh1kh1ph0"},
    {"groups_2", "g2mb1ic64ih6oc96oh6kh3ph1"},
    {"groups_4_1x1", "g4mb1ic128ih5oc64oh5kh1ph0"},
    {"groups_3_strided", "g3mb1ic48ih9oc48oh5kh3sh2ph1"},
    {"mb2", "mb2ic64ih7oc80oh7kh3ph1"},
    {"mb2_1x1", "mb2ic64ih7oc64oh7kh1ph0"},
    {"mb2_strided", "mb2ic32ih9oc32oh5kh3sh2ph1"},
};

INSTANTIATE_TEST_SUITE_P(Cases, AmxSmall, ::testing::ValuesIn(small_cases),
                         [](const ::testing::TestParamInfo<small_case> &info) { return info.param.name; });

// Saturating data: u8 255 × s8 −128 / 127 with zero points 0 and 255, over
// reductions up to IC·KH·KW = 4608, into s32 (the exact int32 sum) and u8.
TEST(AmxConv, ExtremeData) {
    REQUIRE_AMX();
    int i = 0;
    for (const char *desc : {"mb1ic512ih5oc48oh5kh3ph1", "mb1ic2048ih4oc32oh4kh1ph0", "mb1ic3ih17oc32oh9kh7sh2ph3",
                             "mb1ic256ih7oc64oh4kh3sh2ph1"})
        for (const char *zp : {"none", "tensor:255", "channel:random"})
            for (dtype dst : {dtype::s32, dtype::u8}) {
                ConvTester t;
                t.desc(desc).data("extreme").dst(dst).zp(zp).seed(static_cast<uint32_t>(700 + i++));
                run_case(t);
                if (HasFailure()) FAIL() << desc << " zp=" << zp;
                ConvTester s;
                s.desc(desc).data("extreme").src(dtype::s8).dst(dst).zp(zp[0] == 'n' ? "none" : "tensor:-128");
                s.seed(static_cast<uint32_t>(800 + i));
                run_case(s);
                if (HasFailure()) FAIL() << desc << " s8 source";
            }
}

// Every output is computed by the same code whatever the thread count.
TEST(AmxConv, ThreadCountsGiveIdenticalBytes) {
    REQUIRE_AMX();
    for (const char *desc : {"mb2ic64ih9oc96oh9kh3ph1", "mb1ic128ih11oc64oh11kh1ph0", "mb1ic3ih19oc32oh10kh3sh2ph1"}) {
        std::vector<uint8_t> first;
        for (int th : {1, 2, 3}) {
            ConvTester t;
            t.desc(desc).zp("channel:random").post_ops("fq:per_channel").threads(th).seed(900);
            if (!run_case(t)) return;
            if (th == 1) {
                first = t.result();
            } else {
                EXPECT_EQ(t.result(), first) << desc << " threads=" << th;
            }
        }
    }
}

// K ranges (the weights of an OC block split along K so that a range serves
// a group of pixel blocks from L1, their C tiles saved between the ranges):
// the plan takes them where an OC block's weights exceed the budget, and
// every split gives the bytes of the whole-K kernel and of the reference —
// padded, in-place and gathered views, channel tails, groups, mini-batch 2,
// the fused pipeline and the C++ one (a transcendental eltwise), 1 and 3
// threads.
TEST(AmxConv, KRangesGiveTheBytesOfTheWholeK) {
    REQUIRE_AMX();
    struct kcase {
        const char *desc, *zp, *post_ops;
        dtype dst;
        int threads;
        bool by_default; // the default plan takes K ranges (in place: only through amx_l1_kib)
    };
    const kcase cases[] = {
        {"mb1ic128ih9oc96oh9kh3ph1", "none", "relu", dtype::u8, 1, true},                     // padded, 2 chunks
        {"mb2ic256ih7oc64oh7kh3ph1", "channel:random", "fq:per_channel", dtype::u8, 3, true}, // 4 chunks, mb 2
        {"mb1ic1024ih6oc80oh6kh1ph0", "tensor:3", "relu", dtype::s8, 1, false},               // in place, 16 chunks
        {"mb1ic1024ih5oc33oh5kh1ph0", "none", "sum:0.5;relu", dtype::s32, 3, false},          // in-place tail, OC tail
        {"mb1ic1000ih6oc32oh6kh1ph0", "tensor:random", "relu", dtype::u8, 1, true},           // padded K tail
        {"mb1ic136ih11oc48oh6kh3sh2ph1", "channel:random", "relu", dtype::f32, 1, true},      // phase planes
        {"mb1ic1024ih8oc48oh4kh1sh2ph0", "tensor:3", "relu", dtype::u8, 1, true},             // gathered, 16 chunks
        {"g2mb1ic512ih6oc64oh6kh3ph1", "none", "relu", dtype::u8, 3, true},                   // groups
        {"mb1ic1088ih7oc40oh7kh1ph0", "none", "gelu_erf", dtype::f32, 1, false},              // the C++ pipeline
    };
    for (const kcase &c : cases) {
        ConvTester t;
        t.desc(c.desc).zp(c.zp).post_ops(c.post_ops).dst(c.dst).threads(c.threads).seed(77);
        auto run = [&](const char *k_ranges, const char *l1_kib, const char *group, std::string *plan) {
            return run_with_knobs(t,
                                  {{"QCONV_JIT_CONV_AMX_K_RANGES", k_ranges},
                                   {"QCONV_JIT_CONV_AMX_L1_KIB", l1_kib},
                                   {"QCONV_JIT_CONV_AMX_GROUP", group}},
                                  c.desc, plan);
        };
        std::string whole_plan, plan;
        const std::vector<uint8_t> whole = run("0", nullptr, nullptr, &whole_plan);
        EXPECT_EQ(whole_plan.find(" k_ranges="), std::string::npos) << whole_plan;
        const std::vector<uint8_t> dflt = run(nullptr, nullptr, nullptr, &plan);
        EXPECT_EQ(plan.find(" k_ranges=") != std::string::npos, c.by_default) << c.desc << ": " << plan;
        EXPECT_EQ(dflt, whole) << c.desc << " " << plan;
        const char *const splits[][2] = {{"36", nullptr}, {"1", "1"}, {"1", "3"}, {"4", "8"}};
        for (const auto &sp : splits) {
            const std::vector<uint8_t> got = run(nullptr, sp[0], sp[1], &plan);
            EXPECT_NE(plan.find(" k_ranges="), std::string::npos) << c.desc << ": " << plan;
            EXPECT_EQ(got, whole) << c.desc << " " << plan;
        }
        if (HasFailure()) FAIL() << c.desc;
    }
}

// One layer of a view test: its shape, zero point, source type and threads.
struct view_case {
    const char *desc, *zp;
    dtype src;
    int threads;
};

// A copy view against the gathered windows it replaces: `knob`=0 turns the
// view off. Each layer gives the same bytes both ways (and the reference's:
// run_with_knobs checks them), the default plan names the view (`plan_word`)
// and the knob's plan gathers.
void expect_view_gives_the_gathered_bytes(const view_case *cases, size_t n, const char *knob, const char *plan_word,
                                          int seed) {
    for (size_t i = 0; i < n; ++i) {
        const view_case &c = cases[i];
        ConvTester t;
        t.desc(c.desc).zp(c.zp).src(c.src).post_ops("relu").threads(c.threads).seed(seed);
        std::string view_plan, gathered_plan;
        const std::vector<uint8_t> view = run_with_knobs(t, {{knob, nullptr}}, c.desc, &view_plan);
        const std::vector<uint8_t> gathered = run_with_knobs(t, {{knob, "0"}}, c.desc, &gathered_plan);
        EXPECT_NE(view_plan.find(plan_word), std::string::npos) << view_plan;
        EXPECT_NE(gathered_plan.find("amx:gathered"), std::string::npos) << gathered_plan;
        EXPECT_EQ(view, gathered) << c.desc;
        if (::testing::Test::HasFailure()) FAIL() << c.desc;
    }
}

// A strided KxK layer with 32 or more channels per group runs on the copy
// split into the strides' phase planes; it gives the bytes of the gathered
// windows (QCONV_JIT_CONV_AMX_PHASES=0) and of the reference: strides 2, 3
// and (2, 3), a stride beyond the kernel (a plane no tap reads), dilation,
// asymmetric padding, groups, mini-batch 2, per-channel zero points (the
// padded pixels hold them), s8 sources, K ranges on top.
TEST(AmxConv, PhasePlanesGiveTheBytesOfTheGatheredWindows) {
    REQUIRE_AMX();
    const view_case cases[] = {
        {"mb1ic64ih14oc64oh7kh3sh2ph1", "none", dtype::u8, 1},
        {"mb2ic48ih13oc40oh7kh3sh2ph1", "channel:random", dtype::u8, 3},
        {"ic32oc48_ih17oh6kh3sh3ph1_iw19ow5kw5sw3pw0", "tensor:random", dtype::u8, 1},
        {"ic64oc32_ih15oh7kh3sh2ph0dh1_iw16ow6kw3sw2pw0dw1", "none", dtype::s8, 1}, // dilation
        {"mb1ic40ih16oc36oh4kh3sh4ph0", "tensor:7", dtype::u8, 1},                  // stride 4 > kernel 3
        {"g2mb1ic96ih12oc64oh6kh3sh2ph1", "channel:random", dtype::u8, 3},          // groups
        {"mb1ic256ih14oc64oh7kh3sh2ph1", "none", dtype::u8, 1},                     // K ranges too
    };
    expect_view_gives_the_gathered_bytes(cases, std::size(cases), "QCONV_JIT_CONV_AMX_PHASES", " phases=", 31);
}

// A KxK layer with few channels per group (KW·ICg ≤ 64) runs on row taps:
// the padded copy in row-phase planes, a whole kernel row per tap, pixels SW
// apart. It gives the bytes of the gathered windows
// (QCONV_JIT_CONV_AMX_ROW_TAPS=0) and of the reference: ResNet-50's 7x7 s2
// stem, stride 1, strides (1, 2) and (2, 1), a stride beyond the kernel,
// dilation in H, KW·ICg = 64 exactly, groups, mini-batch 2, per-channel and
// per-tensor zero points in the padding, s8 sources, several threads.
TEST(AmxConv, RowTapsGiveTheBytesOfTheGatheredWindows) {
    REQUIRE_AMX();
    const view_case cases[] = {
        {"mb1ic3ih40oc64oh20kh7sh2ph3", "channel:random", dtype::u8, 1},                     // the stem, smaller
        {"mb1ic16ih13oc40oh13kh3sh1ph1", "none", dtype::u8, 3},                              // stride 1
        {"ic3oc32_ih20oh20kh3sh1ph1_iw21ow11kw3sw2pw1", "tensor:random", dtype::u8, 1},      // strides (1, 2)
        {"ic8oc48_ih21oh10kh5sh2ph1_iw12ow10kw5sw1pw2", "none", dtype::s8, 2},               // strides (2, 1)
        {"mb1ic4ih23oc36oh5kh3sh5ph2", "tensor:7", dtype::u8, 1},                            // stride 5 > kernel 3
        {"ic6oc33_ih19oh9kh3sh2ph1dh1_iw17ow9kw3sw2pw1dw0", "channel:random", dtype::u8, 1}, // dilation in H
        {"mb1ic16ih12oc64oh9kh4sh1ph0", "none", dtype::s8, 1},                               // KW·ICg = 64
        {"g2mb1ic32ih14oc64oh7kh3sh2ph1", "channel:random", dtype::u8, 3},                   // groups
        {"mb2ic3ih29oc64oh15kh7sh2ph3", "tensor:random", dtype::u8, 2},                      // mini-batch 2
        {"mb1ic1ih20oc32oh10kh3sh2ph1", "tensor:random", dtype::u8, 1},                      // 3 bytes a tap (kc 4)
    };
    expect_view_gives_the_gathered_bytes(cases, std::size(cases), "QCONV_JIT_CONV_AMX_ROW_TAPS", "amx:padded row_taps",
                                         41);
}

// The fused epilogue holds the chain's per-OC parameters in zmm1..23 across
// a block's pixel rows; QCONV_JIT_CONV_AMX_HOIST=0 reloads them per row. Both
// give the reference's bytes, channel tails and more parameters than
// registers included.
TEST(AmxConv, HoistedParametersGiveTheBytesOfReloadedOnes) {
    REQUIRE_AMX();
    const char *const chains[] = {
        "fq:per_channel",
        "scale_shift;fq:per_channel;prelu",
        "add:per_oc;mul:per_oc;max:per_oc;prelu;scale_shift",
        "fq:per_channel;scale_shift;fq:per_channel;scale_shift;fq:per_channel;scale_shift;fq:per_channel;prelu",
    };
    for (const char *chain : chains)
        for (const char *desc : {"mb1ic64ih10oc48oh10kh1ph0", "mb1ic96ih9oc37oh9kh3ph1"}) {
            ConvTester t;
            t.desc(desc).zp("channel:random").post_ops(chain).seed(12);
            const std::string what = std::string(desc) + " " + chain;
            EXPECT_EQ(run_with_knobs(t, {{"QCONV_JIT_CONV_AMX_HOIST", nullptr}}, what),
                      run_with_knobs(t, {{"QCONV_JIT_CONV_AMX_HOIST", "0"}}, what))
                << what;
            if (HasFailure()) FAIL() << desc << " " << chain;
        }
}

// The fused u8 stores of blocks whose outputs are consecutive pixels pack
// four rows of a full OC vector (amx_ukernel_cfg::pack_u8: by default where
// the chain bounds the values; QCONV_JIT_CONV_AMX_PACK=1 always, 0 never: one
// vpmovusdb a row): the reference's bytes in all three, with biases far beyond the u8 range (infinite, NaN),
// chains a clip bounds (no min(255, y) before the packs), unbounded ones (the
// min), the QDQ residual sum, a FakeQuantize, zero points and s8 sources,
// channel tails, a partial last block and a padded view (its row table).
TEST(AmxConv, PackedU8StoresGiveTheBytesOfOneVectorStores) {
    REQUIRE_AMX();
    const std::vector<float> pool = qconv::test::extreme_biases();
    const char *const chains[] = {"",
                                  "round",
                                  "relu",
                                  "clip:-3e9:1e9",
                                  "round;clip:-136:119;linear:0.0272;sum:0.11:121;linear:16.3;round",
                                  "linear:0.5:3e9",
                                  "fq:per_channel"};
    uint32_t seed = 0;
    for (const char *desc : {"mb1ic64ih8oc64oh8kh1ph0", "mb1ic64ih9iw7oc56oh9ow7kh1ph0",
                             "mb2ic128ih6iw11oc96oh6ow11kh1ph0", "mb1ic32ih6oc48oh6kh3ph1"}) {
        const int64_t oc = qconv::conv_desc::parse(desc).oc;
        for (const char *chain : chains)
            for (const std::string zp : {"none", "channel:random", "s8"}) {
                std::vector<float> bias(static_cast<size_t>(oc));
                for (int64_t c = 0; c < oc; ++c) bias[static_cast<size_t>(c)] = pool[(c * 5 + seed) % 16];
                ConvTester t;
                t.desc(desc).src(zp == "s8" ? dtype::s8 : dtype::u8).dst(dtype::u8).zp(zp == "s8" ? "none" : zp);
                t.post_ops(chain).scales(std::vector<float>(static_cast<size_t>(oc), 0.5f)).bias(bias).seed(++seed);
                const std::string what = std::string(desc) + " " + chain + " zp " + zp;
                const auto one = run_with_knobs(t, {{"QCONV_JIT_CONV_AMX_PACK", "0"}}, what);
                EXPECT_EQ(run_with_knobs(t, {{"QCONV_JIT_CONV_AMX_PACK", "1"}}, what), one) << what;
                EXPECT_EQ(run_with_knobs(t, {{"QCONV_JIT_CONV_AMX_PACK", nullptr}}, what), one) << what;
                if (HasFailure()) FAIL() << what;
            }
    }
}

// The weight prefetch of the K loop (on by default from 128 KiB of weights per
// group, forced on or off by QCONV_JIT_CONV_AMX_PREFETCH) changes no byte: a
// layer that plans it, one that does not, a grouped one, and a K-range layer,
// with and without a zero point; the plan states the distance.
TEST(AmxConv, WeightPrefetchGivesTheSameBytes) {
    REQUIRE_AMX();
    struct prefetch_case {
        const char *desc;
        bool by_default; // weights of 128 KiB or more per group
    };
    const prefetch_case cases[] = {
        {"mb1ic512ih7oc512oh7kh3ph1", true},     // 2.25 MiB: res5's 3x3
        {"mb1ic1024ih5oc256oh5kh1ph0", true},    // 256 KiB, in place
        {"g2mb1ic512ih6oc512oh6kh3ph1", true},   // 576 KiB per group
        {"mb1ic64ih9oc64oh9kh1ph0", false},      // 4 KiB
        {"mb1ic256ih10oc128oh5kh3sh2ph1", true}, // 288 KiB, phase planes
    };
    for (const auto &c : cases)
        for (const char *zp : {"none", "channel:random"}) {
            ConvTester t;
            t.desc(c.desc).zp(zp).post_ops("relu").seed(5);
            const std::string what = std::string(c.desc) + " zp " + zp;
            std::string plan_default, plan_off, plan_on;
            const auto def = run_with_knobs(t, {{"QCONV_JIT_CONV_AMX_PREFETCH", nullptr}}, what, &plan_default);
            const auto off = run_with_knobs(t, {{"QCONV_JIT_CONV_AMX_PREFETCH", "0"}}, what, &plan_off);
            const auto far = run_with_knobs(t, {{"QCONV_JIT_CONV_AMX_PREFETCH", "64"}}, what, &plan_on);
            EXPECT_EQ(def, off) << what;
            EXPECT_EQ(far, off) << what;
            EXPECT_EQ(plan_default.find(" prefetch=4096") != std::string::npos, c.by_default)
                << what << ": " << plan_default;
            EXPECT_EQ(plan_off.find(" prefetch="), std::string::npos) << what << ": " << plan_off;
            EXPECT_NE(plan_on.find(" prefetch=65536"), std::string::npos) << what << ": " << plan_on;
            if (HasFailure()) FAIL() << what;
        }
}

// Refusals carry a reason; without AMX the missing feature is named.
TEST(AmxConv, RefusesWithReasons) {
    const qconv::impl::platform host = qconv::impl::host_platform();
    qconv::conv_problem p;
    qconv::attr_set a;
    std::string why;
    p.desc = qconv::conv_desc::parse("g32mb1ic32ih7oc32oh7kh3ph1");
    EXPECT_FALSE(row().supports(p, a, host, &why));
    if (amx_available()) {
        EXPECT_NE(why.find("depthwise"), std::string::npos) << why;
    }
    why.clear();
    p.desc = qconv::conv_desc::parse("g4mb1ic32ih7oc32oh7kh3ph1");
    EXPECT_FALSE(row().supports(p, a, host, &why));
    if (amx_available()) {
        EXPECT_NE(why.find("fewer than 16"), std::string::npos) << why;
    }
    why.clear();
    p.desc = qconv::conv_desc::parse("mb1ic16ih5oc16oh5kh3ph1");
    const qconv::impl::platform vnni{qconv::isa::avx512_core_vnni};
    EXPECT_FALSE(row().supports(p, a, vnni, &why));
    EXPECT_NE(why.find("amx_int8"), std::string::npos) << why;
    if (!amx_available()) return;
    why.clear();
    a.zp = qconv::zp_mechanism::stock_per_tensor;
    a.zp_values = {300};
    EXPECT_FALSE(row().supports(p, a, host, &why));
    EXPECT_NE(why.find("zero point"), std::string::npos) << why;
    why.clear();
    a.zp_values = {3};
    EXPECT_TRUE(row().supports(p, a, host, &why)) << why;
    // MobileNet conv1: its row taps fill 9 of a tile product's 64 K bytes;
    // auto defers it to the VNNI row, forced by name the row takes it.
    p.desc = qconv::conv_desc::parse("mb1ic3ih224oc32oh112kh3sh2ph1");
    why.clear();
    EXPECT_TRUE(row().supports(p, a, host, &why)) << why;
    ASSERT_TRUE(row().defer);
    // What auto reads: the row's defer on the plan it decided.
    auto deferred = [&]() -> std::string {
        const auto pl = row().supports(p, a, host, nullptr);
        if (!pl) return "(refused)";
        return row().defer(p, a, qconv::impl::platform{}, *pl);
    };
    EXPECT_NE(deferred().find("VNNI row is faster"), std::string::npos);
    p.desc = qconv::conv_desc::parse("mb1ic3ih224oc64oh112kh7sh2ph3"); // ResNet-50 conv1: taken
    EXPECT_EQ(deferred(), "");
    // A strided 1x1 whose channels fill little of the K chunks (72 of 128)
    // defers; 114 of 128, or the same 72 at stride 1, does not.
    p.desc = qconv::conv_desc::parse("ic72oc80_ih56oh56kh1sh1ph0_iw54ow18kw1sw3pw0");
    EXPECT_NE(deferred().find("fill under 60 %"), std::string::npos);
    p.desc = qconv::conv_desc::parse("ic114oc68_ih48oh16kh1sh3ph0_iw80ow16kw1sw5pw0");
    EXPECT_EQ(deferred(), "");
    p.desc = qconv::conv_desc::parse("ic72oc80ih56oh56kh1ph0");
    EXPECT_EQ(deferred(), "");
}

// On an AMX machine the row is the dispatcher's first choice, legacy
// per-channel zero point and FakeQuantize (attr[0]) included.
TEST(AmxConv, FirstChoiceForLegacyAttributes) {
    REQUIRE_AMX();
    ConvTester t;
    t.desc("mb1ic64ih7oc64oh7kh3ph1").zp("channel:random").post_ops("fq:per_channel");
    ASSERT_TRUE(t.run("auto"));
    EXPECT_EQ(t.impl_name(), amx_row);
    EXPECT_EQ(t.attr_id(), 0);
}

// One primitive executed from several threads at once (each with its own
// source and destination) gives the bytes of sequential runs.
TEST(AmxConv, ConcurrentExecutionsOfOnePrimitive) {
    REQUIRE_AMX();
    for (const char *desc : {"mb1ic64ih9oc96oh9kh3ph1", "mb1ic3ih19oc32oh10kh3sh2ph1", "mb1ic128ih7oc64oh7kh1ph0"}) {
        qconv::conv_problem p;
        p.desc = qconv::conv_desc::parse(desc);
        p.src_zp = qconv::zero_point::tensor(7);
        p.with_bias = true;
        const auto wei = qconv::testdata::make_weights(p.desc, qconv::testdata::data_kind::random, 3);
        const auto bias = qconv::testdata::make_bias(p.desc, 4);
        qconv::conv_hints h;
        h.impl = amx_row;
        const qconv::convolution conv(p, wei.data(), bias.data(), h);
        constexpr int n = 4;
        std::vector<std::vector<uint8_t>> src, seq, par;
        for (int i = 0; i < n; ++i) {
            src.push_back(qconv::testdata::make_src(p, qconv::testdata::data_kind::random, 10 + i));
            seq.emplace_back(static_cast<size_t>(p.desc.dst_elems()));
            par.emplace_back(static_cast<size_t>(p.desc.dst_elems()));
            qconv::exec_args a;
            a.threads = 1;
            conv.execute(src[i].data(), seq[i].data(), a);
        }
        std::vector<std::thread> th;
        for (int i = 0; i < n; ++i)
            th.emplace_back([&, i] {
                qconv::exec_args a;
                a.threads = 1;
                for (int r = 0; r < 20; ++r) conv.execute(src[i].data(), par[i].data(), a);
            });
        for (auto &t : th) t.join();
        for (int i = 0; i < n; ++i) EXPECT_EQ(par[i], seq[i]) << desc << " thread " << i;
    }
}

// Emulated, the tile instructions the row issues are counted: over the 20
// ResNet-50 layers at their listed sizes (mb 1) the tile utilisation, the
// convolution's multiply-adds ÷ the capacity of the TDPs issued (16·16·64
// each), shows whether the blocking fills the tiles; every layer is checked
// against the reference too.
TEST(AmxConv, TileUtilisationOfResNet50) {
    REQUIRE_AMX();
    if (!emulated())
        GTEST_SKIP() << "counts come from the tile emulator (QCONV_TEST_AMX=emulate; the ctest "
                        "case jit_conv_amx_emulated runs it on every machine)";
    std::ifstream in(std::string(QCONV_SOURCE_DIR) + "/bench/shapes/shapes_resnet_50");
    double macs = 0, capacity = 0;
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        qconv::conv_desc d = qconv::conv_desc::parse(line);
        d.mb = 1;
        const std::string name = d.name;
        const size_t star = name.find('*');
        const double count = star == std::string::npos ? 1 : std::atof(name.c_str() + star + 1);
        qconv::test::reset_amx_counters();
        ConvTester t;
        t.desc(d).post_ops("relu");
        ASSERT_TRUE(run_case(t)) << name;
        const qconv::test::amx_counters c = qconv::test::amx_total_counters();
        ASSERT_GT(c.tdps(), 0u) << name << ": no tile instruction reached the emulator";
        const double layer_macs = d.ops() / 2, layer_capacity = double(c.tdps()) * 16 * 16 * 64;
        std::printf("tile utilisation %-24s %6.1f %%  (%llu TDPs)\n", name.c_str(), 100.0 * layer_macs / layer_capacity,
                    static_cast<unsigned long long>(c.tdps()));
        macs += count * layer_macs;
        capacity += count * layer_capacity;
    }
    const double u = macs / capacity;
    std::printf("tile utilisation over the 20 layers (weighted by their counts): %.1f %%\n", 100.0 * u);
    EXPECT_GT(u, 0.5);
    EXPECT_LE(u, 1.0);
}
