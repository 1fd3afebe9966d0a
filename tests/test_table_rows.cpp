// Every row of the conv table, one test each (the parameter is the row's
// name): a row whose declared CPU features this machine (under the ISA cap)
// lacks is skipped with the missing features; otherwise, on every candidate
// problem of tests/support/row_problems.h the row accepts — 1x1, 3x3,
// strided, grouped, depthwise; u8/s8 sources; every zero-point kind; no post-op,
// ReLU, FakeQuantize, binary; u8 and f32 destinations — forced by name, it
// returns the reference's result, and the plan it decided names the row's
// family. The same holds for shapes whose edge outputs read only padding.
// A row added to dispatch/conv_list.cpp is tested here without new code.
#include <gtest/gtest.h>

#include <string>

#include "dispatch/attr_builder.h"
#include "dispatch/dispatcher.h"
#include "dispatch/host_platform.h"
#include "rows/row.h"
#include "tests/support/conv_tester.h"
#include "tests/support/row_problems.h"

namespace qconv {
namespace {

const impl::conv_entry &row(const std::string &name) { return impl::conv_row_named(name); }

std::vector<std::string> row_names() {
    std::vector<std::string> n;
    for (const auto &e : impl::conv_list()) n.push_back(e.name);
    return n;
}

class ConvRow : public ::testing::TestWithParam<std::string> {
protected:
    // Runs every problem of `problems` the row accepts, forced by name,
    // against the reference; returns how many it took (0: skipped).
    int run_accepted(const std::vector<conv_problem> &problems) {
        const impl::conv_entry &e = row(GetParam());
        const impl::platform pl = impl::host_platform();
        if (!pl.has_all(e.needs)) {
            missing_ =
                e.name + " needs " + e.needs.str() + "; this CPU (under the cap) lacks " + pl.features.missing(e.needs);
            return 0;
        }
        // Below VNNI a peer may run a saturating oneDNN kernel (exact() false):
        // s8 sources are where that shows on the default data.
        const bool vnni = pl.has(impl::cpu_feature::avx512_core_vnni) || pl.has(impl::cpu_feature::avx2_vnni);
        conv_hints h;
        h.impl = e.name;
        h.enforce_brgconv = true;
        int ran = 0;
        for (const conv_problem &p : problems) {
            if (e.peer && !vnni && p.src_dt == dtype::s8) continue;
            const auto attrs = e.peer ? impl::build_attrs_for_peer(p, pl, h) : impl::build_attrs(p, pl, h);
            impl::plan_ptr plan;
            for (const attr_set &a : attrs)
                if ((plan = e.supports(p, a, pl, nullptr))) break;
            if (!plan) continue;
            EXPECT_FALSE(plan->str().empty());
            SCOPED_TRACE(p.desc.str() + " src " + to_string(p.src_dt) + " dst " + to_string(p.dst_dt) + " zp " +
                         to_string(p.src_zp.effective_kind()) + " ops " + to_string(p.ops) + " plan " + plan->str());
            test::ConvTester t;
            t.desc(p.desc).src(p.src_dt).dst(p.dst_dt).zp(p.src_zp).post_ops(p.ops).scales(p.scales).bias(p.with_bias);
            t.enforce_brgconv().seed(31);
            if (!t.run(e.name)) continue; // skipped: labelled inexact here, and it differs
            EXPECT_EQ(t.impl_name(), e.name);
            ++ran;
            if (HasFailure()) break;
        }
        if (ran == 0) missing_ = e.name + " takes none of the candidate problems on " + pl.key();
        return ran;
    }
    std::string missing_;
};

TEST_P(ConvRow, MatchesTheReferenceWhereItAccepts) {
    const int ran = run_accepted(test::conv_candidates());
    if (ran == 0) GTEST_SKIP() << missing_;
    std::printf("%s: %d candidate problems matched the reference\n", GetParam().c_str(), ran);
}

// Outputs that read nothing but padding (semantics §2): a row takes such a
// shape bit-exactly or refuses it (the next row takes it).
TEST_P(ConvRow, PadOnlyOutputsMatchTheReferenceWhereItAccepts) {
    const int ran = run_accepted(test::conv_pad_only_candidates());
    if (!missing_.empty() && ran == 0) GTEST_SKIP() << missing_;
    std::printf("%s: %d pad-only problems matched the reference\n", GetParam().c_str(), ran);
}

INSTANTIATE_TEST_SUITE_P(Table, ConvRow, ::testing::ValuesIn(row_names()),
                         [](const ::testing::TestParamInfo<std::string> &i) {
                             std::string s = i.param;
                             for (char &c : s)
                                 if (c == ':') c = '_';
                             return s;
                         });

} // namespace
} // namespace qconv
