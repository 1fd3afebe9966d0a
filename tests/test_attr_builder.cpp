// The attr builder against the two attribute tables (docs/semantics.md §6,
// docs/dispatch.md "Attribute sets"): one test case per cell, plus the
// AVX-512-core and AVX2 rows. Each row reads like a line of those tables:
// platform, zero point, post-ops (and the enforce_brgconv hint), then the
// attribute sets expected, each with its zero-point mechanism and whether its
// post-ops are in legacy form (depthwise / quantization), binary form, or
// plain (eltwise only — the same in both forms).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dispatch/attr_builder.h"
#include "tests/support/testdata.h"

namespace qconv {
namespace {

using impl::platform;
using zpm = zp_mechanism;

enum class form { plain, legacy, binary };
const char *name_of(form f) { return f == form::plain ? "plain" : f == form::legacy ? "legacy" : "binary"; }

struct expect_set {
    zpm zp;
    form ops;
};

struct row {
    const char *name;
    isa level;
    const char *zp;  // testdata::make_zp spec
    const char *ops; // post-op text
    bool enforce;    // conv_hints::enforce_brgconv
    std::vector<expect_set> sets;
};
void PrintTo(const row &r, std::ostream *os) {
    *os << r.name << " (" << to_string(r.level) << ", zp " << r.zp << ", '" << r.ops << "')";
}

// Chains: "relu" needs no binary post-op in stock form; "relu;fq:per_channel"
// (and scale_shift, prelu) does.
constexpr const char *no_binary = "relu";
constexpr const char *with_binary = "relu;fq:per_channel";
constexpr bool hint = true, no_hint = false;

const expect_set a0_none_plain{zpm::none, form::plain};
const expect_set a0_none_legacy{zpm::none, form::legacy};
const expect_set a0_lpc_plain{zpm::legacy_per_channel, form::plain};
const expect_set a0_lpc_legacy{zpm::legacy_per_channel, form::legacy};
const expect_set a1_none_binary{zpm::none, form::binary};
const expect_set a1_stock_plain{zpm::stock_per_tensor, form::plain};
const expect_set a1_stock_legacy{zpm::stock_per_tensor, form::legacy};
const expect_set a1_stock_binary{zpm::stock_per_tensor, form::binary};

const std::vector<row> rows = {
    // ---- docs/dispatch.md, attribute table: the AMX rows
    {"amx_nozp_nobinary", isa::avx512_core_amx, "none", no_binary, no_hint, {a0_none_plain}},
    {"amx_nozp_binary", isa::avx512_core_amx, "none", with_binary, no_hint, {a0_none_legacy, a1_none_binary}},
    {"amx_perchannel_nobinary", isa::avx512_core_amx, "channel:random", no_binary, no_hint, {a0_lpc_plain}},
    {"amx_perchannel_binary", isa::avx512_core_amx, "channel:random", with_binary, no_hint, {a0_lpc_legacy}},
    {"amx_pertensor_nobinary", isa::avx512_core_amx, "tensor:3", no_binary, no_hint, {a0_lpc_plain, a1_stock_plain}},
    {"amx_pertensor_binary", isa::avx512_core_amx, "tensor:3", with_binary, no_hint, {a0_lpc_legacy, a1_stock_legacy}},
    // per-channel zp whose values are all equal is per-tensor
    {"amx_equalchannel_binary",
     isa::avx512_core_amx,
     "channel:7",
     with_binary,
     no_hint,
     {a0_lpc_legacy, a1_stock_legacy}},
    // ---- docs/dispatch.md, attribute table: the AVX-512 VNNI / BF16 rows
    {"vnni_nozp_nobinary", isa::avx512_core_vnni, "none", no_binary, no_hint, {a0_none_plain}},
    {"vnni_nozp_binary", isa::avx512_core_vnni, "none", with_binary, no_hint, {a0_none_legacy}},
    {"vnni_nozp_binary_enforced", isa::avx512_core_vnni, "none", with_binary, hint, {a0_none_legacy, a1_none_binary}},
    {"vnni_perchannel_nobinary", isa::avx512_core_vnni, "channel:random", no_binary, no_hint, {a0_lpc_plain}},
    {"vnni_perchannel_binary", isa::avx512_core_vnni, "channel:random", with_binary, no_hint, {a0_lpc_legacy}},
    {"vnni_perchannel_binary_enforced", isa::avx512_core_vnni, "channel:random", with_binary, hint, {a0_lpc_legacy}},
    {"vnni_pertensor_nobinary", isa::avx512_core_vnni, "tensor:3", no_binary, no_hint, {a0_lpc_plain, a1_stock_plain}},
    {"vnni_pertensor_binary", isa::avx512_core_vnni, "tensor:3", with_binary, no_hint, {a0_lpc_legacy}},
    {"vnni_pertensor_binary_enforced",
     isa::avx512_core_vnni,
     "tensor:3",
     with_binary,
     hint,
     {a0_lpc_legacy, a1_stock_binary}},
    // AVX-512 BF16 (this machine) is a VNNI platform
    {"bf16_pertensor_nobinary", isa::avx512_core_bf16, "tensor:3", no_binary, no_hint, {a0_lpc_plain, a1_stock_plain}},
    {"bf16_nozp_binary", isa::avx512_core_bf16, "none", with_binary, no_hint, {a0_none_legacy}},
    // ---- AVX-512 core (no VNNI): attr[0] only, per-tensor zp as per-channel
    {"avx512core_nozp_nobinary", isa::avx512_core, "none", no_binary, no_hint, {a0_none_plain}},
    {"avx512core_nozp_binary", isa::avx512_core, "none", with_binary, hint, {a0_none_legacy}},
    {"avx512core_perchannel", isa::avx512_core, "channel:random", with_binary, no_hint, {a0_lpc_legacy}},
    {"avx512core_pertensor_nobinary", isa::avx512_core, "tensor:3", no_binary, no_hint, {a0_lpc_plain}},
    {"avx512core_pertensor_binary", isa::avx512_core, "tensor:3", with_binary, hint, {a0_lpc_legacy}},
    // ---- AVX2 (and AVX2 VNNI: no brgconv there either)
    {"avx2_nozp_nobinary", isa::avx2, "none", no_binary, no_hint, {a0_none_plain}},
    {"avx2_nozp_binary", isa::avx2, "none", with_binary, hint, {a0_none_legacy}},
    {"avx2_perchannel", isa::avx2, "channel:random", no_binary, no_hint, {a0_lpc_plain}},
    {"avx2_pertensor_nobinary", isa::avx2, "tensor:3", no_binary, no_hint, {a0_lpc_plain}},
    {"avx2_pertensor_binary", isa::avx2, "tensor:3", with_binary, hint, {a0_lpc_legacy}},
    {"avx2vnni_pertensor_nobinary", isa::avx2_vnni, "tensor:3", no_binary, no_hint, {a0_lpc_plain}},
    // ---- a fused dw-conv keeps everything in attr[0]
    {"amx_pertensor_dwconv", isa::avx512_core_amx, "tensor:3", "dw", no_hint, {a0_lpc_legacy}},
    {"vnni_pertensor_dwconv", isa::avx512_core_vnni, "tensor:3", "dw", hint, {a0_lpc_legacy}},
    {"avx2_nozp_dwconv", isa::avx2, "none", "dw", no_hint, {a0_none_legacy}},
};

conv_problem make_problem(const row &r) {
    conv_problem p;
    p.desc = conv_desc::parse("g1mb1ic17ih5oc3oh5kh3ph1");
    p.src_dt = dtype::u8;
    p.dst_dt = dtype::u8;
    p.src_zp = testdata::make_zp(r.zp, p.desc.ic, p.src_dt, testdata::data_kind::random, 5);
    p.ops = testdata::make_post_ops(r.ops, p.desc.oc, 1);
    return p;
}

form form_of(const attr_set &a) {
    EXPECT_FALSE(a.has_legacy_ops() && a.has_binary_ops()) << a.str() << " mixes legacy and binary post-ops";
    if (a.has_legacy_ops()) return form::legacy;
    if (a.has_binary_ops()) return form::binary;
    return form::plain;
}

class AttrTable : public ::testing::TestWithParam<row> {};

TEST_P(AttrTable, Cell) {
    const row &r = GetParam();
    const conv_problem p = make_problem(r);
    ASSERT_EQ(needs_binary(p.ops), std::string(r.ops) == with_binary) << "row's chain is not what its column says";
    conv_hints hints;
    hints.enforce_brgconv = r.enforce;
    const auto sets = impl::build_attrs(p, platform{r.level}, hints);

    ASSERT_EQ(sets.size(), r.sets.size());
    for (size_t i = 0; i < sets.size(); ++i) {
        SCOPED_TRACE("attr[" + std::to_string(i) + "] = " + sets[i].str());
        EXPECT_EQ(sets[i].id, static_cast<int>(i));
        EXPECT_EQ(sets[i].zp, r.sets[i].zp) << "got " << to_string(sets[i].zp) << " want " << to_string(r.sets[i].zp);
        EXPECT_EQ(form_of(sets[i]), r.sets[i].ops)
            << "got " << name_of(form_of(sets[i])) << " want " << name_of(r.sets[i].ops);
        // Zero-point values: IC copies for the legacy mechanism, one for stock.
        switch (sets[i].zp) {
        case zpm::none: EXPECT_TRUE(sets[i].zp_values.empty()); break;
        case zpm::legacy_per_channel:
            ASSERT_EQ(sets[i].zp_values.size(), static_cast<size_t>(p.desc.ic));
            for (int64_t c = 0; c < p.desc.ic; ++c) EXPECT_EQ(sets[i].zp_values[c], p.src_zp.at(c)) << "ic " << c;
            break;
        case zpm::stock_per_tensor:
            ASSERT_EQ(sets[i].zp_values.size(), 1u);
            EXPECT_EQ(sets[i].zp_values[0], p.src_zp.at(0));
            break;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Seed, AttrTable, ::testing::ValuesIn(rows),
                         [](const ::testing::TestParamInfo<row> &i) { return std::string(i.param.name); });

// The builder is pure: the same inputs give the same sets.
TEST(AttrBuilder, Deterministic) {
    const conv_problem p = make_problem(rows[5]);
    const auto a = impl::build_attrs(p, platform{isa::avx512_core_amx}, {});
    const auto b = impl::build_attrs(p, platform{isa::avx512_core_amx}, {});
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].str(), b[i].str());
}

// The attr[1] of AMX + per-tensor zp carries exactly attr[0]'s post-ops (the
// AMX per-tensor row of docs/dispatch.md's attribute table), with the stock zero point instead of the legacy one.
TEST(AttrBuilder, AmxPerTensorWorkaroundSharesLegacyOps) {
    const conv_problem p = make_problem(rows[5]);
    const auto sets = impl::build_attrs(p, platform{isa::avx512_core_amx}, {});
    ASSERT_EQ(sets.size(), 2u);
    ASSERT_EQ(sets[0].ops.size(), sets[1].ops.size());
    for (size_t i = 0; i < sets[0].ops.size(); ++i) {
        EXPECT_EQ(sets[0].ops[i].k, sets[1].ops[i].k);
        EXPECT_EQ(sets[0].ops[i].cl, sets[1].ops[i].cl);
        EXPECT_EQ(sets[0].ops[i].osc, sets[1].ops[i].osc);
    }
}

// A peer forced by name may be measured on what the attribute tables give only to
// the JIT kernels: below VNNI a per-tensor zp gets a stock attr[1] too (the
// tables' cells, for "auto", stay as they are).
TEST(AttrBuilder, ForcedPeerGetsTheStockSet) {
    conv_problem p;
    p.desc = conv_desc::parse("mb1ic16ih6oc8kh3ph1");
    p.src_zp = zero_point::tensor(3);
    p.ops = parse_post_ops("relu", p.desc.oc);
    const platform avx2{isa::avx2};
    ASSERT_EQ(impl::build_attrs(p, avx2, {}).size(), 1u);
    const auto sets = impl::build_attrs_for_peer(p, avx2, {});
    ASSERT_EQ(sets.size(), 2u);
    EXPECT_EQ(sets[0].zp, zp_mechanism::legacy_per_channel);
    EXPECT_EQ(sets[1].id, 1);
    EXPECT_EQ(sets[1].zp, zp_mechanism::stock_per_tensor);
    EXPECT_EQ(sets[1].zp_values, std::vector<int32_t>{3});
    // A per-channel zero point has no stock form: no second set.
    conv_problem pc = p;
    pc.src_zp = zero_point::channel({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
    EXPECT_EQ(impl::build_attrs_for_peer(pc, avx2, {}).size(), 1u);
    EXPECT_EQ(impl::build_attrs_for_peer(pc, platform{isa::avx512_core_vnni}, {}).size(), 1u);
    // Where the tables already give two sets, the peer sees the same two.
    const platform amx{isa::avx512_core_amx};
    EXPECT_EQ(impl::build_attrs_for_peer(p, amx, {}).size(), impl::build_attrs(p, amx, {}).size());
}

} // namespace
} // namespace qconv
