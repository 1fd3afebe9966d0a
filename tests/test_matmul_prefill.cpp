// The prefill shape of the f32 weight-compressed MatMul rows
// (jit:matmul_wc_{x8,x4}:{avx512_core,avx2}; kernels/jit/matmul/matmul_wc.h): the
// weights unpacked to f32 once per call, chunk by chunk, then a
// register-blocked FMA sweep over every row.
//
// Every row the CPU runs is built with the prefill plan whatever M (its table
// plan may keep the blocked shape for that M) and checked against ref::matmul
// within the f32 rows' bound (1e-5 · (Σ|x·deq(w)| + |bias|)): K tails (4-bit
// odd K, chunks that end inside a group, groups split over chunks), N tails,
// M tails (row blocks of 1 to 6 rows), group sizes, u8/s8/u4/s4, zero points,
// bias; threads 1, 2 and 3 give the same bytes. Extreme values over a long K
// are exact. Run-time M crosses the table's threshold both ways; f16/bf16
// activations and f16 scales reach the prefill kernels.
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "dispatch/dispatcher.h"
#include "dispatch/host_platform.h"
#include "kernels/jit/matmul/matmul_wc.h"
#include "qconv/matmul.h"
#include "reference/reference.h"
#include "rows/row.h"
#include "tests/support/matmul_rows_here.h"
#include "tests/support/testdata.h"

namespace qconv {
namespace {

using zpk = matmul_desc::zp_kind;

const impl::matmul_entry &row_named(const std::string &name) { return test::matmul_row(name); }

// The rows' kernels are called directly, on the CPU's platform under the ISA
// cap (tests/support/matmul_rows_here.h): QCONV_MAX_CPU_ISA=avx2 checks what
// an AVX2 CPU runs, and a test none of whose rows runs here skips.
using test::host_runs;
using test::rows_here;
using test::test_platform;
using test::why_none_here;

const std::vector<std::string> f32_rows = {"jit:matmul_wc_x8:avx512_core", "jit:matmul_wc_x4:avx512_core",
                                           "jit:matmul_wc_x8:avx2", "jit:matmul_wc_x4:avx2"};
const std::vector<std::string> ymm_rows = {"jit:matmul_wc_x4:avx2", "jit:matmul_wc_x8:avx2"};
bool is_x4(const std::string &row) { return row_named(row).weight_bits == 4; }
bool is_zmm(const std::string &row) { return row.find("avx512") != std::string::npos; }

// The row's kernel in the prefill shape, whatever M.
std::shared_ptr<const impl::matmul_kernel> prefill_kernel(const std::string &row, const matmul_desc &d) {
    std::string why;
    const impl::plan_ptr pl = row_named(row).supports(d, {}, test_platform(), &why);
    if (!pl) throw std::runtime_error(row + " refuses " + d.key() + ": " + why);
    const auto &decided = dynamic_cast<const impl::matmul_wc_plan &>(*pl);
    return row_named(row).create(d, {}, impl::plan_matmul_wc(d, decided.width, impl::matmul_wc_plan::shape::prefill));
}

std::vector<float> reference(const testdata::matmul_data &c) {
    std::vector<float> ref(size_t(c.d.m * c.d.n));
    const int max_threads = omp_get_max_threads();
    omp_set_num_threads(1); // tiny problems: idle workers only slow a loaded machine
    ref::matmul(c.d, c.weights(), c.x.data(), ref.data());
    omp_set_num_threads(max_threads);
    return ref;
}

// Within the bound of the reference; threads 1, 2 and 3 give the same bytes.
void check_prefill(const std::string &row, const testdata::matmul_data &c) {
    SCOPED_TRACE(row + " " + c.d.key());
    auto kernel = prefill_kernel(row, c.d);
    auto packed = kernel->pack(c.weights());
    const size_t ny = size_t(c.d.m * c.d.n);
    std::vector<float> y1(ny, -7.f), y2(ny, 7.f), y3(ny, 3.f);
    kernel->execute(*packed, c.x.data(), y1.data(), 1);
    kernel->execute(*packed, c.x.data(), y2.data(), 2);
    kernel->execute(*packed, c.x.data(), y3.data(), 3);
    ASSERT_EQ(0, std::memcmp(y1.data(), y2.data(), ny * sizeof(float))) << "threads 1 and 2 differ";
    ASSERT_EQ(0, std::memcmp(y1.data(), y3.data(), ny * sizeof(float))) << "threads 1 and 3 differ";
    const std::vector<float> ref = reference(c);
    const std::vector<double> bound = testdata::matmul_error_bound(c, false);
    int bad = 0;
    for (size_t i = 0; i < ny && bad < 5; ++i)
        if (!(std::fabs(double(y1[i]) - double(ref[i])) <= bound[i])) {
            ++bad;
            ADD_FAILURE() << "m=" << i / c.d.n << " n=" << i % c.d.n << " got " << y1[i] << " ref " << ref[i]
                          << " bound " << bound[i];
        }
}

// ------------------------------------------------------------ the sweep
struct prefill_param {
    std::string row;
    dtype wei;
    int64_t group; // 0: per output channel
    zpk zp;
    bool bias;
};

// "matmul_wc_x4_avx2_u4_g128_zp_per_group_bias": the test name and the parameter.
std::string describe(const prefill_param &p) {
    std::string s = p.row.substr(p.row.find(':') + 1);
    for (char &ch : s)
        if (ch == ':') ch = '_';
    return s + "_" + to_string(p.wei) + "_" + (p.group ? "g" + std::to_string(p.group) : "oc") + "_zp_" +
           to_string(p.zp) + (p.bias ? "_bias" : "");
}
void PrintTo(const prefill_param &p, std::ostream *os) { *os << describe(p); }

std::vector<prefill_param> sweep_params() {
    std::vector<prefill_param> v;
    for (const std::string &row : f32_rows)
        for (dtype dt :
             is_x4(row) ? std::vector<dtype>{dtype::u4, dtype::s4} : std::vector<dtype>{dtype::u8, dtype::s8})
            for (int64_t g : {0, 32, 128, 512})
                for (zpk z : {zpk::none, zpk::per_tensor, zpk::per_group}) v.push_back({row, dt, g, z, z != zpk::none});
    return v;
}

class PrefillSweep : public testing::TestWithParam<prefill_param> {};

TEST_P(PrefillSweep, MatchesReference) {
    const prefill_param &p = GetParam();
    if (!host_runs(p.row)) GTEST_SKIP() << why_none_here({p.row});
    // Chunks of 256 k: per channel K = 13 (4-bit: a padded k) and 600 (a group
    // split 256 + 256 + 88); 11 groups of 32 (chunks of 8 and 3 groups); 5 of
    // 128 (2, 2, 1); 2 of 512 (each split in two).
    const int64_t k = p.group == 0 ? 0 : p.group == 32 ? 352 : p.group == 128 ? 640 : 1024;
    uint32_t seed = 1;
    for (int64_t kk : k == 0 ? std::vector<int64_t>{13, 600} : std::vector<int64_t>{k})
        for (int64_t m : {1, 7, 13, 40})
            for (int64_t n : {13, 100}) {
                if (kk == 13 && n == 13 && m != 7) continue;
                matmul_desc d;
                d.m = m, d.k = kk, d.n = n, d.wei_dt = p.wei, d.group = p.group, d.zp = p.zp, d.with_bias = p.bias;
                check_prefill(p.row, testdata::make_matmul_data(d, seed++));
                if (HasFatalFailure()) return;
            }
}

INSTANTIATE_TEST_SUITE_P(F32Rows, PrefillSweep, testing::ValuesIn(sweep_params()),
                         [](const testing::TestParamInfo<prefill_param> &i) { return describe(i.param); });

// More rows than one range sweeps over an unpacked chunk (about 256): the
// rows are cut into ranges, each unpacking the chunk again.
TEST(MatmulPrefill, ManyRowsInSeveralRanges) {
    const std::vector<std::string> here = rows_here(f32_rows);
    if (here.empty()) GTEST_SKIP() << why_none_here(f32_rows);
    for (const std::string &row : here) {
        matmul_desc d;
        d.m = 600, d.k = 512, d.n = 70, d.wei_dt = is_x4(row) ? dtype::u4 : dtype::s8, d.group = 128;
        d.zp = zpk::per_group, d.with_bias = true;
        check_prefill(row, testdata::make_matmul_data(d, 41));
        if (HasFatalFailure()) return;
    }
}

// ------------------------------------------------------------ extremes
// Every weight at the type's extreme, zp at the other end or 0, x = 1, scale
// 1: integer partial sums stay exact in f32, so the result is K · (w − zp)
// exactly, per channel (one group split over 16 chunks) and per 128.
TEST(MatmulPrefill, ExtremeValuesLongK) {
    const std::vector<std::string> here = rows_here(f32_rows);
    if (here.empty()) GTEST_SKIP() << why_none_here(f32_rows);
    for (const std::string &row : here) {
        for (dtype dt :
             is_x4(row) ? std::vector<dtype>{dtype::u4, dtype::s4} : std::vector<dtype>{dtype::u8, dtype::s8})
            for (int sign : {0, 1})
                for (int64_t group : {0, 128})
                    for (zpk z : {zpk::none, zpk::per_group}) {
                        matmul_desc d;
                        d.m = 9, d.k = 4096, d.n = 37, d.wei_dt = dt, d.zp = z, d.group = group;
                        testdata::matmul_data c = testdata::make_matmul_data(d, 7);
                        int32_t lo, hi;
                        testdata::weight_range(dt, &lo, &hi);
                        for (int64_t i = 0; i < d.n * d.k; ++i) testdata::set_weight(c.wei, dt, i, sign ? lo : hi);
                        for (auto &s : c.scale) s = 1.f;
                        for (auto &zv : c.zp) zv = sign ? hi : lo;
                        for (auto &v : c.x) v = 1.f;
                        auto kern = prefill_kernel(row, d);
                        auto pk = kern->pack(c.weights());
                        std::vector<float> y(size_t(d.m * d.n));
                        kern->execute(*pk, c.x.data(), y.data(), 2);
                        const int zpv = z == zpk::none ? 0 : (sign ? hi : lo);
                        const float want = float(d.k) * float((sign ? lo : hi) - zpv);
                        for (float v : y) ASSERT_EQ(v, want) << row << " " << to_string(dt) << " group " << group;
                    }
    }
}

// ------------------------------------------------------------ same sums
// The prefill shape sums in the order of the blocked shape (k increasing
// inside a group, the scale once per group sum), so where the blocked shape
// runs with blocks of 3 rows or more (its blocks of 1 or 2 rows use two FMA
// chains) the two give the same bytes: at such M a run-time M crossing the
// threshold changes the speed, not the result.
TEST(MatmulPrefill, SameBytesAsTheBlockedShape) {
    const std::vector<std::string> here = rows_here(f32_rows);
    if (here.empty()) GTEST_SKIP() << why_none_here(f32_rows);
    for (const std::string &row : here) {
        uint32_t seed = 31;
        for (int64_t group : {0, 64, 512})
            for (int64_t m : {5, 16, 40}) {
                matmul_desc d;
                d.m = m, d.k = 1024, d.n = 100, d.wei_dt = is_x4(row) ? dtype::s4 : dtype::u8, d.group = group;
                d.zp = zpk::per_group, d.with_bias = true;
                const testdata::matmul_data c = testdata::make_matmul_data(d, seed++);
                // At M 5, 16 and 40 the blocked shape (above the streaming M).
                const impl::plan_ptr pl = row_named(row).supports(d, {}, test_platform(), nullptr);
                ASSERT_TRUE(pl) << row;
                const auto &decided = dynamic_cast<const impl::matmul_wc_plan &>(*pl);
                auto kb = row_named(row).create(
                    d, {}, impl::plan_matmul_wc(d, decided.width, impl::matmul_wc_plan::shape::blocked));
                auto kp = prefill_kernel(row, d);
                auto pb = kb->pack(c.weights());
                auto pp = kp->pack(c.weights());
                std::vector<float> yb(size_t(m * d.n)), yp(yb.size());
                kb->execute(*pb, c.x.data(), yb.data(), 2);
                kp->execute(*pp, c.x.data(), yp.data(), 1);
                EXPECT_EQ(0, std::memcmp(yb.data(), yp.data(), yb.size() * sizeof(float)))
                    << row << " group " << group << " m " << m;
            }
    }
}

// ------------------------------------------------------------ dispatch
// The rows' plan takes the prefill shape exactly from the measured M on.
TEST(MatmulPrefill, PlanFollowsTheCrossingPoint) {
    const std::vector<std::string> here = rows_here(f32_rows);
    if (here.empty()) GTEST_SKIP() << why_none_here(f32_rows);
    for (const std::string &row : here) {
        const int64_t from = jit::matmul_wc_prefill_min_m(is_zmm(row), is_x4(row));
        for (int64_t m : {int64_t(1), int64_t(4), int64_t(7), int64_t(8), int64_t(23), int64_t(24), int64_t(32),
                          int64_t(128), int64_t(4096)}) {
            matmul_desc d;
            d.m = m, d.k = 256, d.n = 64, d.wei_dt = is_x4(row) ? dtype::u4 : dtype::u8;
            std::string why;
            const impl::plan_ptr pl = row_named(row).supports(d, {}, test_platform(), &why);
            ASSERT_TRUE(pl) << why;
            const auto *wp = dynamic_cast<const impl::matmul_wc_plan *>(pl.get());
            ASSERT_NE(wp, nullptr) << row;
            EXPECT_EQ(wp->prefill(), m >= from) << row << " m=" << m;
        }
    }
}

// ------------------------------------------------------------ run-time M
// One run-time-M MatMul on each row, M going up across the threshold and
// back down: every call within the bound and the bytes of a MatMul created
// for that M (classes up to 16 are the M itself, 32 and 64 too).
TEST(MatmulPrefill, RunTimeMCrossesTheThresholdBothWays) {
    const std::vector<std::string> here = rows_here(f32_rows);
    if (here.empty()) GTEST_SKIP() << why_none_here(f32_rows);
    for (const std::string &row : here) {
        SCOPED_TRACE(row);
        matmul_desc d;
        d.m = 64, d.k = 520, d.n = 72, d.wei_dt = is_x4(row) ? dtype::s4 : dtype::u8, d.group = is_x4(row) ? 0 : 8,
        d.zp = zpk::per_group, d.with_bias = true;
        const testdata::matmul_data c = testdata::make_matmul_data(d, 21);
        const std::vector<float> ref = reference(c);
        const std::vector<double> bound = testdata::matmul_error_bound(c, false);
        matmul_hints h;
        h.impl = row;
        matmul_desc rt = d;
        rt.m = matmul_desc::runtime_m;
        const matmul mm(rt, c.weights(), h);
        for (int64_t m : {1, 7, 8, 16, 32, 64, 32, 16, 8, 7, 1}) {
            SCOPED_TRACE("m=" + std::to_string(m));
            std::vector<float> y(size_t(m * d.n), -5.f), yf(y.size());
            mm.execute(c.x.data(), y.data(), m, m % 3 + 1);
            for (size_t i = 0; i < y.size(); ++i)
                ASSERT_LE(std::fabs(double(y[i]) - double(ref[i])), bound[i]) << "i=" << i;
            matmul_desc fd = d;
            fd.m = m;
            const matmul fixed(fd, c.weights(), h);
            fixed.execute(c.x.data(), yf.data(), 1);
            EXPECT_EQ(0, std::memcmp(y.data(), yf.data(), y.size() * sizeof(float)));
        }
    }
}

// ------------------------------------------------------------ f16 / bf16
// X in f16 and bf16 and f16 scales on the prefill shape (a ymm row at M = 32:
// the table's plan): the bits of the f32 run on the converted X and scales,
// Y rounded once.
TEST(MatmulPrefill, SixteenBitActivationsAndScales) {
    const std::vector<std::string> here = rows_here(ymm_rows);
    if (here.empty()) GTEST_SKIP() << why_none_here(ymm_rows);
    for (const std::string &row : here) {
        matmul_desc d;
        d.m = 32, d.k = 384, d.n = 80, d.wei_dt = is_x4(row) ? dtype::u4 : dtype::s8, d.group = 128;
        d.zp = zpk::per_group, d.with_bias = true;
        ASSERT_GE(d.m, jit::matmul_wc_prefill_min_m(false, is_x4(row)));
        const testdata::matmul_data c = testdata::make_matmul_data(d, 5);
        std::vector<uint16_t> s16(c.scale.size());
        std::vector<float> s32(c.scale.size());
        for (size_t i = 0; i < s16.size(); ++i) s32[i] = f16_to_f32(s16[i] = f32_to_f16(c.scale[i]));
        matmul_weights w32 = c.weights(), w16 = c.weights();
        w32.scale = s32.data();
        w16.scale = nullptr, w16.scale_f16 = s16.data();
        matmul_hints h;
        h.impl = row;
        for (dtype act : {dtype::f16, dtype::bf16}) {
            SCOPED_TRACE(std::string(row) + " " + to_string(act));
            std::vector<uint16_t> x16(c.x.size());
            std::vector<float> xc(c.x.size());
            for (size_t i = 0; i < x16.size(); ++i) {
                x16[i] = act == dtype::f16 ? f32_to_f16(c.x[i]) : f32_to_bf16(c.x[i]);
                xc[i] = act == dtype::f16 ? f16_to_f32(x16[i]) : bf16_to_f32(x16[i]);
            }
            matmul_desc dt = d;
            dt.src_dt = dt.dst_dt = act, dt.scale_dt = dtype::f16;
            const matmul typed(dt, w16, h);
            const matmul plain(d, w32, h);
            std::vector<uint16_t> y16(size_t(d.m * d.n));
            std::vector<float> y32(y16.size());
            typed.execute_typed(x16.data(), y16.data(), 0, 2);
            plain.execute(xc.data(), y32.data(), 1);
            for (size_t i = 0; i < y16.size(); ++i) {
                const uint16_t want = act == dtype::f16 ? f32_to_f16(y32[i]) : f32_to_bf16(y32[i]);
                ASSERT_EQ(y16[i], want) << "i=" << i;
            }
        }
    }
}

} // namespace
} // namespace qconv
