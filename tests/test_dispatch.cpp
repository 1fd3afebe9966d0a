// Dispatcher decisions.
//
// 1. The walk itself, on small model tables: entries in table order, attr sets
//    inside; peers only by name; forcing; errors that name what went wrong.
// 2. The attribute tables' decisions (docs/dispatch.md), on a model of the kernel families (a brgconv that
//    takes only stock zp and non-legacy post-ops on VNNI/AMX; a JIT kernel that
//    takes attr[0]; the reference), for simulated AMX / AVX-512 VNNI / AVX-512
//    core / AVX2 platforms × zero-point kind × binary post-ops × the hint.
// 3. The real table (conv_list()) on the same simulated platforms: invariants
//    that hold whatever rows exist (the reference last, never a peer by auto,
//    no brgconv for legacy zp / below VNNI / un-enforced binary on VNNI, a
//    reason for every skipped candidate).
// 4. The public API: forcing through conv_hints, errors, verbose lines.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "dispatch/attr_builder.h"
#include "dispatch/dispatcher.h"
#include "dispatch/host_platform.h"
#include "dispatch/verbose.h"
#include "reference/reference.h"
#include "tests/support/conv_tester.h"
#include "tests/support/testdata.h"

namespace qconv {
namespace {

using impl::conv_entry;
using impl::platform;

// ------------------------------------------------------------ model tables

conv_entry model(const std::string &name,
                 std::function<bool(const conv_problem &, const attr_set &, const platform &, std::string *)> s,
                 bool peer = false) {
    conv_entry e;
    e.name = name;
    e.peer = peer;
    e.decide = impl::decide_by(std::move(s));
    e.build = [](const conv_problem &, const attr_set &,
                 const impl::plan &) -> std::shared_ptr<const impl::conv_kernel> { return nullptr; };
    return e;
}

// brgconv as docs/dispatch.md's tables describe it: stock zero point only, no legacy post-ops,
// AVX-512 VNNI and up.
bool brg_supports(const conv_problem &, const attr_set &a, const platform &pl, std::string *why) {
    if (!pl.has(impl::cpu_feature::avx512_core_vnni)) return impl::reject(why, "needs avx512_core_vnni");
    if (a.zp == zp_mechanism::legacy_per_channel) return impl::reject(why, "legacy zero point");
    if (a.has_legacy_ops()) return impl::reject(why, "legacy post-ops");
    return true;
}
// The JIT kernels: the legacy mechanisms (attr[0]), any ISA from AVX2.
bool jit_supports(const conv_problem &, const attr_set &a, const platform &pl, std::string *why) {
    if (!pl.has(impl::cpu_feature::avx2)) return impl::reject(why, "needs avx2");
    if (a.zp == zp_mechanism::stock_per_tensor) return impl::reject(why, "stock zero point");
    if (a.has_binary_ops()) return impl::reject(why, "binary post-ops");
    return true;
}
bool any_supports(const conv_problem &, const attr_set &, const platform &, std::string *) { return true; }

std::vector<conv_entry> model_table() {
    return {model("model:brgconv", brg_supports), model("model:jit", jit_supports),
            model("model:any", any_supports, /*peer=*/true), model("model:ref", any_supports)};
}

conv_problem problem(const std::string &zp, const std::string &ops) {
    conv_problem p;
    p.desc = conv_desc::parse("g1mb1ic16ih6oc8oh6kh3ph1");
    p.src_zp = testdata::make_zp(zp, p.desc.ic, p.src_dt, testdata::data_kind::random, 3);
    p.ops = testdata::make_post_ops(ops, p.desc.oc, 1);
    return p;
}

conv_hints with_impl(const std::string &name, bool enforce = false) {
    conv_hints h;
    h.impl = name;
    h.enforce_brgconv = enforce;
    return h;
}

// --------------------------------------------------------- 1. the walk

TEST(DispatchWalk, EntriesOuterAttrSetsInner) {
    // An entry accepting only attr[1] wins over a later entry accepting attr[0].
    std::vector<conv_entry> t = {
        model("first", [](auto &, const attr_set &a, auto &,
                          std::string *w) { return a.id == 1 || impl::reject(w, "wants attr[1]"); }),
        model("second", any_supports)};
    const conv_problem p = problem("tensor:3", "relu");
    const auto attrs = impl::build_attrs(p, platform{isa::avx512_core_vnni}, {});
    ASSERT_EQ(attrs.size(), 2u);
    std::vector<std::string> rej;
    const auto c = impl::select_conv_in(t, attrs, p, platform{isa::avx512_core_vnni}, {}, &rej);
    EXPECT_EQ(c.name, "first");
    EXPECT_EQ(c.attr_id, 1);
    EXPECT_EQ(c.attr.zp, zp_mechanism::stock_per_tensor);
    ASSERT_EQ(rej.size(), 1u);
    EXPECT_EQ(rej[0], "first attr[0]: wants attr[1]");
}

TEST(DispatchWalk, PeersOnlyByName) {
    std::vector<conv_entry> t = {model("peer", any_supports, true), model("ref", any_supports)};
    const conv_problem p = problem("none", "");
    const auto attrs = impl::build_attrs(p, platform{isa::avx2}, {});
    std::vector<std::string> rej;
    EXPECT_EQ(impl::select_conv_in(t, attrs, p, platform{isa::avx2}, {}, &rej).name, "ref");
    ASSERT_EQ(rej.size(), 1u);
    EXPECT_NE(rej[0].find("peer"), std::string::npos);
    EXPECT_EQ(impl::select_conv_in(t, attrs, p, platform{isa::avx2}, with_impl("peer")).name, "peer");
}

TEST(DispatchWalk, DeferredRowsRunOnlyByName) {
    // A row that supports the problem but defers it (rows below are measured
    // faster there) is passed over by auto with the reason, and runs when forced.
    std::vector<conv_entry> t = {model("slow_here", any_supports), model("ref", any_supports)};
    t[0].defer = [](const conv_problem &q, const attr_set &, const impl::platform &, const impl::plan &) {
        return q.desc.ic < 32 ? std::string("measured slower on small IC") : std::string();
    };
    const conv_problem p = problem("none", "");
    const auto attrs = impl::build_attrs(p, platform{isa::avx2}, {});
    std::vector<std::string> rej;
    EXPECT_EQ(impl::select_conv_in(t, attrs, p, platform{isa::avx2}, {}, &rej).name, "ref");
    ASSERT_EQ(rej.size(), 1u);
    EXPECT_EQ(rej[0], "slow_here attr[0]: deferred to the rows below: measured slower on small IC");
    EXPECT_EQ(impl::select_conv_in(t, attrs, p, platform{isa::avx2}, with_impl("slow_here")).name, "slow_here");
    conv_problem big = p;
    big.desc = conv_desc::parse("g1mb1ic64ih6oc8oh6kh3ph1");
    EXPECT_EQ(
        impl::select_conv_in(t, impl::build_attrs(big, platform{isa::avx2}, {}), big, platform{isa::avx2}, {}).name,
        "slow_here");
}

TEST(DispatchWalk, ForcedUnknownNameListsValidNames) {
    const auto t = model_table();
    const conv_problem p = problem("none", "");
    const auto attrs = impl::build_attrs(p, platform{isa::avx2}, {});
    try {
        impl::select_conv_in(t, attrs, p, platform{isa::avx2}, with_impl("model:nope"));
        FAIL() << "no error";
    } catch (const error &e) {
        const std::string m = e.what();
        EXPECT_EQ(m.rfind("impl: ", 0), 0u) << m;
        for (const auto &en : t) EXPECT_NE(m.find(en.name), std::string::npos) << m;
        EXPECT_NE(m.find("model:nope"), std::string::npos) << m;
    }
}

TEST(DispatchWalk, ForcedUnsupportedSaysWhy) {
    const auto t = model_table();
    const conv_problem p = problem("channel:random", "");
    const platform pl{isa::avx512_core_vnni};
    const auto attrs = impl::build_attrs(p, pl, {});
    try {
        impl::select_conv_in(t, attrs, p, pl, with_impl("model:brgconv"));
        FAIL() << "no error";
    } catch (const error &e) {
        const std::string m = e.what();
        EXPECT_EQ(m.rfind("impl: 'model:brgconv' does not support", 0), 0u) << m;
        EXPECT_NE(m.find("legacy zero point"), std::string::npos) << m;
    }
}

TEST(DispatchWalk, NothingAcceptsIsAnErrorWithEveryReason) {
    std::vector<conv_entry> t = {
        model("a", [](auto &, auto &, auto &, std::string *w) { return impl::reject(w, "reason A"); }),
        model("b", [](auto &, auto &, auto &, std::string *w) { return impl::reject(w, "reason B"); })};
    const conv_problem p = problem("none", "");
    const auto attrs = impl::build_attrs(p, platform{isa::avx2}, {});
    try {
        impl::select_conv_in(t, attrs, p, platform{isa::avx2}, {});
        FAIL() << "no error";
    } catch (const error &e) {
        const std::string m = e.what();
        EXPECT_EQ(m.rfind("impl: no implementation supports", 0), 0u) << m;
        EXPECT_NE(m.find("a attr[0]: reason A"), std::string::npos) << m;
        EXPECT_NE(m.find("b attr[0]: reason B"), std::string::npos) << m;
    }
}

// ------------------------- 2. the attribute tables' decisions (model)

struct decision {
    const char *name;
    isa level;
    const char *zp;
    const char *ops;
    bool enforce;
    const char *impl;
    int attr;
};
void PrintTo(const decision &d, std::ostream *os) { *os << d.name << " -> " << d.impl << " attr[" << d.attr << "]"; }
constexpr const char *nob = "relu";
constexpr const char *bin = "fq:per_channel;relu";

const std::vector<decision> decisions = {
    // AMX: brgconv whenever an attr set it can take exists; per-channel zp falls back to the JIT kernel.
    {"amx_nozp_nobinary", isa::avx512_core_amx, "none", nob, false, "model:brgconv", 0},
    {"amx_nozp_binary", isa::avx512_core_amx, "none", bin, false, "model:brgconv", 1},
    {"amx_perchannel_nobinary", isa::avx512_core_amx, "channel:random", nob, false, "model:jit", 0},
    {"amx_perchannel_binary", isa::avx512_core_amx, "channel:random", bin, false, "model:jit", 0},
    {"amx_pertensor_nobinary", isa::avx512_core_amx, "tensor:3", nob, false, "model:brgconv", 1},
    // attr[1] carries legacy post-ops there, which this model's brgconv refuses
    {"amx_pertensor_binary", isa::avx512_core_amx, "tensor:3", bin, false, "model:jit", 0},
    // AVX-512 VNNI: brgconv with binary post-ops only when enforced.
    {"vnni_nozp_nobinary", isa::avx512_core_vnni, "none", nob, false, "model:brgconv", 0},
    {"vnni_nozp_binary", isa::avx512_core_vnni, "none", bin, false, "model:jit", 0},
    {"vnni_nozp_binary_hint", isa::avx512_core_vnni, "none", bin, true, "model:brgconv", 1},
    {"vnni_perchannel_nobinary", isa::avx512_core_vnni, "channel:random", nob, false, "model:jit", 0},
    {"vnni_perchannel_binary_hint", isa::avx512_core_vnni, "channel:random", bin, true, "model:jit", 0},
    {"vnni_pertensor_nobinary", isa::avx512_core_vnni, "tensor:3", nob, false, "model:brgconv", 1},
    {"vnni_pertensor_binary", isa::avx512_core_vnni, "tensor:3", bin, false, "model:jit", 0},
    {"vnni_pertensor_binary_hint", isa::avx512_core_vnni, "tensor:3", bin, true, "model:brgconv", 1},
    // Below VNNI: attr[0] only, the JIT kernel.
    {"avx512core_pertensor_nobinary", isa::avx512_core, "tensor:3", nob, false, "model:jit", 0},
    {"avx512core_nozp_binary_hint", isa::avx512_core, "none", bin, true, "model:jit", 0},
    {"avx2_pertensor_binary_hint", isa::avx2, "tensor:3", bin, true, "model:jit", 0},
    {"avx2_perchannel_nobinary", isa::avx2, "channel:random", nob, false, "model:jit", 0},
    // Nothing but the reference below AVX2.
    {"sse41_pertensor", isa::sse41, "tensor:3", nob, false, "model:ref", 0},
};

class AttrTableDecision : public ::testing::TestWithParam<decision> {};

TEST_P(AttrTableDecision, OnModelTable) {
    const decision &d = GetParam();
    const conv_problem p = problem(d.zp, d.ops);
    conv_hints h;
    h.enforce_brgconv = d.enforce;
    const platform pl{d.level};
    const auto c = impl::select_conv_in(model_table(), impl::build_attrs(p, pl, h), p, pl, h);
    EXPECT_EQ(c.name, d.impl);
    EXPECT_EQ(c.attr_id, d.attr);
}

INSTANTIATE_TEST_SUITE_P(DispatchMd, AttrTableDecision, ::testing::ValuesIn(decisions),
                         [](const ::testing::TestParamInfo<decision> &i) { return std::string(i.param.name); });

// ------------------------------------------------- 3. the real table

// A wrapped oneDNN row (declared family; the rows that take attr[1] are among them).
bool is_onednn(const impl::conv_choice &c) { return c.entry && c.entry->family == qconv::impl::row_family::onednn; }

TEST(ConvTable, ReferenceIsLastAndNamesMatch) {
    const auto &t = impl::conv_list();
    ASSERT_FALSE(t.empty());
    EXPECT_EQ(t.back().name, "ref:conv");
    EXPECT_FALSE(t.back().peer);
    const auto names = conv_implementations();
    ASSERT_EQ(names.size(), t.size());
    for (size_t i = 0; i < t.size(); ++i) EXPECT_EQ(names[i], t[i].name);
    std::vector<std::string> sorted = names;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "duplicate names";
}

TEST(MatmulTable, ReferenceIsLastAndNamesMatch) {
    const auto &t = impl::matmul_list();
    ASSERT_FALSE(t.empty());
    EXPECT_EQ(t.back().name, "ref:matmul");
    const auto names = matmul_implementations();
    ASSERT_EQ(names.size(), t.size());
    for (size_t i = 0; i < t.size(); ++i) EXPECT_EQ(names[i], t[i].name);
}

struct real_case {
    const char *name;
    isa level;
    const char *zp;
    const char *ops;
    bool enforce;
};
void PrintTo(const real_case &c, std::ostream *os) {
    *os << c.name << " (" << to_string(c.level) << ", zp " << c.zp << ", '" << c.ops << "')";
}

std::vector<real_case> real_cases() {
    std::vector<real_case> v;
    static const struct {
        const char *n;
        isa l;
    } levels[] = {{"amx", isa::avx512_core_amx},
                  {"bf16", isa::avx512_core_bf16},
                  {"vnni", isa::avx512_core_vnni},
                  {"avx512core", isa::avx512_core},
                  {"avx2", isa::avx2}};
    static const struct {
        const char *n;
        const char *zp;
    } zps[] = {{"nozp", "none"}, {"perchannel", "channel:random"}, {"pertensor", "tensor:3"}};
    static const struct {
        const char *n;
        const char *ops;
    } chains[] = {{"nobinary", nob}, {"binary", bin}};
    static std::vector<std::string> names; // keeps the c_str()s alive
    names.reserve(200);
    for (const auto &l : levels)
        for (const auto &z : zps)
            for (const auto &c : chains)
                for (bool hint : {false, true}) {
                    names.push_back(std::string(l.n) + "_" + z.n + "_" + c.n + (hint ? "_hint" : ""));
                    v.push_back({names.back().c_str(), l.l, z.zp, c.ops, hint});
                }
    return v;
}

class RealTable : public ::testing::TestWithParam<real_case> {};

TEST_P(RealTable, ChoiceFollowsTheAttributeTable) {
    const real_case &rc = GetParam();
    const conv_problem p = problem(rc.zp, rc.ops);
    conv_hints h;
    h.enforce_brgconv = rc.enforce;
    const platform pl{rc.level};
    std::vector<std::string> rej;
    const auto c = impl::select_conv(p, pl, h, &rej);
    SCOPED_TRACE("chose " + c.name + " attr[" + std::to_string(c.attr_id) + "]");
    ASSERT_NE(c.entry, nullptr);
    EXPECT_FALSE(c.entry->peer);

    // Every non-peer row above the chosen one was tried and refused with a reason.
    const auto &t = impl::conv_list();
    const auto attrs = impl::build_attrs(p, pl, h);
    size_t expected_rejections = 0;
    for (const auto &e : t) {
        if (&e == c.entry) {
            expected_rejections += static_cast<size_t>(c.attr_id);
            break;
        }
        expected_rejections += e.peer ? 1 : attrs.size();
    }
    EXPECT_EQ(rej.size(), expected_rejections);
    for (const auto &r : rej) EXPECT_EQ(r.find(": not supported"), std::string::npos) << "reason missing: " << r;

    // If only the reference exists, it serves attr[0].
    if (t.size() == 1) {
        EXPECT_EQ(c.name, "ref:conv");
        EXPECT_EQ(c.attr_id, 0);
    }
    // The attribute tables' rules (docs/dispatch.md), whatever rows exist.
    const bool per_channel = std::string(rc.zp).rfind("channel", 0) == 0;
    const bool binary = std::string(rc.ops) == bin;
    if (per_channel || !pl.has(impl::cpu_feature::avx512_core_vnni)) {
        EXPECT_EQ(c.attr_id, 0);
        EXPECT_FALSE(is_onednn(c)) << c.name;
    }
    if (!pl.has(impl::cpu_feature::amx_int8) && binary && !rc.enforce) {
        EXPECT_FALSE(is_onednn(c)) << c.name;
    }
    if (c.attr_id == 1) {
        EXPECT_TRUE(pl.has(impl::cpu_feature::avx512_core_vnni));
    }
    // "auto" never picks a peer (oneDNN's brgconv on AMX is one: untrusted, docs/dispatch.md).
    ASSERT_NE(c.entry, nullptr);
    EXPECT_FALSE(c.entry->peer) << c.name;
}

INSTANTIATE_TEST_SUITE_P(Simulated, RealTable, ::testing::ValuesIn(real_cases()),
                         [](const ::testing::TestParamInfo<real_case> &i) { return std::string(i.param.name); });

// ----------------------------------------------------- 4. public API

TEST(ConvolutionApi, ForcedReferenceRunsAndMatches) {
    test::ConvTester t;
    t.desc("g1mb2ic17ih5oc3oh5kh3ph1")
        .src(dtype::u8)
        .dst(dtype::s8)
        .zp("channel:random")
        .post_ops("relu;fq:per_channel");
    ASSERT_TRUE(t.run("ref:conv"));
    EXPECT_EQ(t.impl_name(), "ref:conv");
    EXPECT_EQ(t.attr_id(), 0);
}

TEST(ConvolutionApi, AutoMatchesReferenceOnEachZeroPointKind) {
    for (const char *zp : {"none", "tensor:random", "channel:random"})
        for (const char *ops : {"", "relu", "scale_shift;relu", "add:per_oc;sum"}) {
            SCOPED_TRACE(std::string(zp) + " / " + ops);
            test::ConvTester t;
            t.desc("g1mb1ic19ih6oc21oh6kh3ph1").zp(zp).post_ops(ops).dst(dtype::u8);
            ASSERT_TRUE(t.run("auto"));
        }
}

TEST(ConvolutionApi, UnknownImplementationIsAnError) {
    const conv_problem p = problem("none", "");
    const auto w = testdata::make_weights(p.desc, testdata::data_kind::random, 1);
    try {
        convolution c(p, w.data(), nullptr, with_impl("jit:nonexistent"));
        FAIL() << "no error";
    } catch (const error &e) {
        const std::string m = e.what();
        EXPECT_EQ(m.rfind("impl: unknown implementation 'jit:nonexistent'", 0), 0u) << m;
        EXPECT_NE(m.find("ref:conv"), std::string::npos) << m;
    }
}

TEST(ConvolutionApi, DwConvItemIsRefusedByTheDenseRowsWithItsReason) {
    conv_problem p = problem("none", "");
    p.desc = conv_desc::parse("g1mb1ic16ih6oc8oh6kh1");
    p.ops = testdata::make_post_ops("relu;dw:2", p.desc.oc, 1);
    const auto w = testdata::make_weights(p.desc, testdata::data_kind::random, 1);
    const std::string dense = "jit:conv_x8s8:avx2";
    try {
        convolution c(p, w.data(), nullptr, with_impl(dense));
        FAIL() << "no error";
    } catch (const error &e) {
        const std::string m = e.what();
        EXPECT_EQ(m.rfind("impl: '" + dense + "' does not support", 0), 0u) << m;
        EXPECT_NE(m.find("fused dw conv item"), std::string::npos) << m;
    }
    // The reference and auto take it.
    EXPECT_EQ(convolution(p, w.data(), nullptr, with_impl("ref:conv")).impl_name(), "ref:conv");
    EXPECT_NE(convolution(p, w.data(), nullptr).impl_name(), "ref:conv");
}

TEST(ConvolutionApi, BadArgumentsNameTheField) {
    conv_problem p = problem("none", "");
    try {
        convolution c(p, nullptr, nullptr);
        FAIL();
    } catch (const error &e) {
        EXPECT_EQ(std::string(e.what()).rfind("weights", 0), 0u) << e.what();
    }
    p.with_bias = true;
    const auto w = testdata::make_weights(p.desc, testdata::data_kind::random, 1);
    try {
        convolution c(p, w.data(), nullptr);
        FAIL();
    } catch (const error &e) {
        EXPECT_EQ(std::string(e.what()).rfind("bias", 0), 0u) << e.what();
    }
    p = problem("none", "add:full");
    convolution c(p, w.data(), nullptr, with_impl("ref:conv"));
    std::vector<uint8_t> src(p.desc.src_elems()), dst(p.desc.dst_elems());
    try {
        c.execute(src.data(), dst.data(), {});
        FAIL();
    } catch (const error &e) {
        EXPECT_EQ(std::string(e.what()).rfind("binary", 0), 0u) << e.what();
    }
}

TEST(MatmulApi, ForcedReferenceMatchesReference) {
    matmul_desc d = matmul_desc::parse("m3k64n5");
    d.wei_dt = dtype::u4;
    d.group = 32;
    d.zp = matmul_desc::zp_kind::per_group;
    d.with_bias = true;
    testdata::rng r(7);
    std::vector<uint8_t> wei(static_cast<size_t>(d.wei_bytes()));
    for (auto &b : wei) b = static_cast<uint8_t>(r.next());
    std::vector<float> scale(static_cast<size_t>(d.scale_elems())), bias(static_cast<size_t>(d.n)),
        x(static_cast<size_t>(d.m * d.k)), y(static_cast<size_t>(d.m * d.n)), want(y.size());
    std::vector<int32_t> zp(static_cast<size_t>(d.zp_elems()));
    for (auto &s : scale) s = 0.25f;
    for (auto &z : zp) z = r.uniform(0, 15);
    for (auto &b : bias) b = static_cast<float>(r.uniform(-3, 3));
    for (auto &v : x) v = static_cast<float>(r.uniform(-4, 4));
    const matmul_weights w{wei.data(), scale.data(), zp.data(), bias.data()};
    matmul_hints h;
    h.impl = "ref:matmul";
    matmul m(d, w, h);
    EXPECT_EQ(m.impl_name(), "ref:matmul");
    m.execute(x.data(), y.data());
    ref::matmul(d, w, x.data(), want.data());
    EXPECT_EQ(y, want);
    // auto picks something that agrees too (exact data: small integers, 1/4 scales)
    matmul a(d, w);
    std::fill(y.begin(), y.end(), 0.f);
    a.execute(x.data(), y.data());
    for (size_t i = 0; i < y.size(); ++i)
        EXPECT_NEAR(y[i], want[i], 1e-4 * std::max(1.f, std::fabs(want[i]))) << a.impl_name();
    h.impl = "nope";
    EXPECT_THROW(matmul(d, w, h), error);
}

// ------------------------------------------------------------- verbose

TEST(Verbose, CreateExecAndSkipLines) {
    const int saved = impl::verbose_level();
    impl::set_verbose_level(2);
    const conv_problem p = problem("tensor:3", "relu");
    const auto w = testdata::make_weights(p.desc, testdata::data_kind::random, 1);
    std::vector<uint8_t> src(p.desc.src_elems(), 1), dst(p.desc.dst_elems());

    ::testing::internal::CaptureStderr();
    {
        convolution a(p, w.data(), nullptr, with_impl("ref:conv"));
        convolution b(p, w.data(), nullptr, with_impl("ref:conv"));
        b.execute(src.data(), dst.data());
        const platform pl{isa::avx512_core_vnni};
        impl::select_conv_in(model_table(), impl::build_attrs(p, pl, {}), p, pl, {});
    }
    const std::string err = ::testing::internal::GetCapturedStderr();
    impl::set_verbose_level(saved);

    const std::string shape = p.desc.str();
    EXPECT_NE(err.find("qconv_verbose,create,"), std::string::npos) << err;
    EXPECT_NE(err.find("cache_hit,ref:conv,attr[0]," + shape + ",dt=u8:s8:u8,zp=per_tensor:3"), std::string::npos)
        << err;
    EXPECT_NE(err.find("qconv_verbose,exec,ref:conv," + shape), std::string::npos) << err;
    // model:brgconv refuses attr[0] (legacy zp) and takes attr[1]: one skip line.
    EXPECT_NE(err.find("qconv_verbose,skip,model:brgconv,attr[0],legacy zero point\n"), std::string::npos) << err;
}

// Tuned dispatch: every accepting row is timed once (a `tune` line each at
// verbose level 2), the winner is one of them, matches the reference, and
// is reused for the same problem without timing again.
TEST(TunedDispatch, TimesEveryAcceptingRowOnceAndKeepsTheWinner) {
    const int saved = impl::verbose_level();
    impl::set_verbose_level(2);
    conv_problem p = problem("none", "relu");
    p.desc = conv_desc::parse("mb1ic64ih14oc64kh1");
    p.scales.assign(size_t(p.desc.oc), 0.5f);
    const auto w = testdata::make_weights(p.desc, testdata::data_kind::random, 1);
    const auto src = testdata::make_src(p, testdata::data_kind::random, 1);
    conv_hints h;
    h.tune = true;
    const platform plat = impl::host_platform();
    const auto cands = impl::accepting_conv(impl::conv_list(), impl::build_attrs(p, plat, h), p, plat);
    ASSERT_FALSE(cands.empty());

    ::testing::internal::CaptureStderr();
    std::string first, second;
    std::vector<uint8_t> got(size_t(p.desc.dst_elems()));
    {
        convolution a(p, w.data(), nullptr, h);
        first = a.impl_name();
        a.execute(src.data(), got.data());
        convolution b(p, w.data(), nullptr, h);
        second = b.impl_name();
    }
    const std::string err = ::testing::internal::GetCapturedStderr();
    impl::set_verbose_level(saved);

    EXPECT_EQ(first, second);
    bool listed = false;
    size_t tune_lines = 0;
    for (const auto &c : cands) {
        listed = listed || c.name == first;
        const bool timed = err.find("qconv_verbose,tune," + c.name + ",") != std::string::npos;
        EXPECT_TRUE(timed || cands.size() == 1) << c.name << " was not timed:\n" << err;
        tune_lines += timed;
    }
    EXPECT_TRUE(listed) << first;
    // Timed once: the second creation reuses the winner.
    size_t count = 0;
    for (size_t at = err.find(",tune,"); at != std::string::npos; at = err.find(",tune,", at + 1)) ++count;
    EXPECT_EQ(count, tune_lines) << err;

    std::vector<uint8_t> want(got.size());
    convolution r(p, w.data(), nullptr, with_impl("ref:conv"));
    r.execute(src.data(), want.data());
    EXPECT_EQ(got, want) << first;
}

TEST(Verbose, SilentAtLevelZero) {
    const int saved = impl::verbose_level();
    impl::set_verbose_level(0);
    const conv_problem p = problem("none", "");
    const auto w = testdata::make_weights(p.desc, testdata::data_kind::random, 1);
    ::testing::internal::CaptureStderr();
    { convolution a(p, w.data(), nullptr, with_impl("ref:conv")); }
    const std::string err = ::testing::internal::GetCapturedStderr();
    impl::set_verbose_level(saved);
    EXPECT_EQ(err.find("qconv_verbose"), std::string::npos) << err;
}

} // namespace
} // namespace qconv

namespace qconv {
namespace {

// The tester's comparison can fail: one element off is reported with its
// coordinates; the tolerance applies only after a transcendental eltwise.
TEST(ConvTesterSelf, ComparisonCatchesOneElement) {
    conv_problem p;
    p.desc = conv_desc::parse("g1mb1ic4ih3oc5oh3kh1");
    p.dst_dt = dtype::u8;
    std::vector<uint8_t> want(p.desc.dst_elems(), 10), got = want;
    std::string report;
    EXPECT_EQ(test::compare_dst(p, got.data(), want.data(), 1e-5, &report), 0);
    got[1 * 3 * 5 + 0 * 5 + 2] = 11; // (oh1, ow0, oc2)
    EXPECT_EQ(test::compare_dst(p, got.data(), want.data(), 1e-5, &report), 1);
    EXPECT_NE(report.find("[n0 oh1 ow0 oc2] got 11 want 10"), std::string::npos) << report;
    p.ops = testdata::make_post_ops("gelu_erf", p.desc.oc, 1);
    EXPECT_EQ(test::compare_dst(p, got.data(), want.data(), 1e-5, &report), 0); // integers within 1
    got[0] = 12;
    EXPECT_EQ(test::compare_dst(p, got.data(), want.data(), 1e-5, &report), 1);

    p.dst_dt = dtype::f32;
    std::vector<float> fw(p.desc.dst_elems(), 100.f), fg = fw;
    fg[1] = 100.0005f; // 5e-6 relative
    EXPECT_EQ(test::compare_dst(p, fg.data(), fw.data(), 1e-5, &report), 0);
    fg[1] = 100.01f;
    EXPECT_EQ(test::compare_dst(p, fg.data(), fw.data(), 1e-5, &report), 1);
    p.ops.clear(); // exact chain: any difference counts
    fg[1] = 100.0005f;
    EXPECT_EQ(test::compare_dst(p, fg.data(), fw.data(), 1e-5, &report), 1);
}

} // namespace
// Every row's family is the first word of its name (verbose and the tests
// read the family, users read the name).
TEST(DispatchTable, FamilyIsTheFirstWordOfTheName) {
    auto check = [](const auto &list) {
        for (const auto &e : list) EXPECT_EQ(e.name.substr(0, e.name.find(':')), to_string(e.family)) << e.name;
    };
    check(impl::conv_list());
    check(impl::matmul_list());
    check(impl::conv_f32_list());
}

} // namespace qconv
