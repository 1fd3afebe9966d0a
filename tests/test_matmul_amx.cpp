// The AMX weight-compressed MatMul rows against ref::matmul: the AMX-BF16
// rows (f32 accuracy) and the AMX-INT8 dynamic-quantization row (its own
// bound, testdata::matmul_error_bound, as for the VNNI one).
//
// Bound (docs/semantics.md §7): per output
//   |y − y_ref| <= eps · (Σ_k |x·deq(W)| + |bias|) + 2^-120 · Σ_k (|w − zp| + 1)·|scale|
// with eps = jit::matmul_wc_amx_epsilon(K padded to 32, chunk) <= 3e-5 (the
// bf16 hi/lo split of X and the f32 sums of the tiles). Thread counts 1, 2
// and 3 must give identical bytes. Every test skips on a CPU without AMX-BF16;
// amx_available() is the one place that decides it.
#include <gtest/gtest.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "dispatch/dispatcher.h"
#include "dispatch/host_platform.h"
#include "kernels/jit/matmul/matmul_wc_amx.h"
#include "qconv/matmul.h"
#include "reference/reference.h"
#include "rows/row.h"
#include "tests/support/amx_emulator.h"
#include "tests/support/expect_error.h"
#include "tests/support/testdata.h"

namespace qconv {
namespace {

// Native where the CPU has AMX; on a CPU without it (or QCONV_TEST_AMX=emulate)
// the tile emulator runs the rows' generated code from start-up
// (tests/support/amx_emulator.h), and the dispatcher sees AMX.
bool amx_available() {
    (void)test::amx_test_mode(); // links the emulator, which starts with the process where needed
    return impl::host_platform().has(impl::cpu_feature::amx_bf16);
}
#define SKIP_WITHOUT_AMX()                                                                                             \
    if (!amx_available()) GTEST_SKIP() << "needs AMX-BF16 (Sapphire Rapids class)"

using zpk = matmul_desc::zp_kind;
using case_data = testdata::matmul_data;

const char *row_name(bool x4) { return x4 ? "jit:matmul_wc_x4:avx512_core_amx" : "jit:matmul_wc_x8:avx512_core_amx"; }

constexpr const char *dq_row_name = "jit:matmul_wc_dq:avx512_core_amx";

const impl::matmul_entry &row_named(const std::string &name) {
    for (const auto &e : impl::matmul_list())
        if (e.name == name) return e;
    throw std::runtime_error("no row " + name);
}
const impl::matmul_entry &row(bool x4) { return row_named(row_name(x4)); }

bool is_4bit(dtype dt) { return dt == dtype::u4 || dt == dtype::s4; }

// The rows' bound for case c (see the top of the file).
std::vector<double> amx_bound(const case_data &c) {
    const matmul_desc &d = c.d;
    const bool per_oc = d.n_groups() == 1;
    const int64_t chunk = jit::matmul_wc_amx_chunk((d.k + 31) / 32 * 32, d.group_size(), per_oc);
    const double eps = jit::matmul_wc_amx_epsilon((d.k + chunk - 1) / chunk * chunk, chunk);
    std::vector<double> b = testdata::matmul_error_bound(c, false); // 1e-5 · (Σ|x·deq(W)| + |bias|)
    double max_scale = 0;
    for (float s : c.scale) max_scale = std::max(max_scale, double(std::fabs(s)));
    const double flush = jit::matmul_wc_amx_flush_factor * double(d.k) * 256.0 * max_scale;
    for (double &v : b) v = v / 1e-5 * eps + flush;
    return b;
}

// Runs the row (named, so any M runs) at 1, 2 and 3 threads: identical bytes,
// within the bound (the dynamic-quantization row: the bound of
// testdata::matmul_error_bound for it). Returns the largest |y − y_ref| / bound seen.
double check(const case_data &c, const std::string &name, bool dq) {
    SCOPED_TRACE(name + " " + c.d.key());
    matmul_hints h;
    h.impl = name;
    h.dynamic_quantization = dq;
    std::string why;
    const impl::plan_ptr plan = row_named(name).supports(c.d, h, impl::host_platform(), &why);
    EXPECT_TRUE(plan) << why;
    if (!plan) return 0;
    auto kernel = row_named(name).create(c.d, h, *plan);
    auto packed = kernel->pack(c.weights());
    const size_t ny = static_cast<size_t>(c.d.m * c.d.n);
    std::vector<float> ref(ny), y1(ny, -7.f), y2(ny, 7.f), y3(ny, 3.f);
    const int max_threads = omp_get_max_threads();
    omp_set_num_threads(1);
    ref::matmul(c.d, c.weights(), c.x.data(), ref.data());
    omp_set_num_threads(max_threads);
    kernel->execute(*packed, c.x.data(), y1.data(), 1);
    kernel->execute(*packed, c.x.data(), y2.data(), 2);
    kernel->execute(*packed, c.x.data(), y3.data(), 3);
    EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), ny * sizeof(float))) << "threads 1 and 2 differ";
    EXPECT_EQ(0, std::memcmp(y1.data(), y3.data(), ny * sizeof(float))) << "threads 1 and 3 differ";
    const std::vector<double> bound = dq ? testdata::matmul_error_bound(c, true) : amx_bound(c);
    double worst = 0;
    int bad = 0;
    for (size_t i = 0; i < ny; ++i) {
        const double err = std::fabs(double(y1[i]) - double(ref[i]));
        worst = std::max(worst, err / bound[i]);
        if (!(err <= bound[i]) && bad++ < 5)
            ADD_FAILURE() << "m=" << i / c.d.n << " n=" << i % c.d.n << " got " << y1[i] << " ref " << ref[i]
                          << " bound " << bound[i];
    }
    return worst;
}
double check(const case_data &c) { return check(c, row_name(is_4bit(c.d.wei_dt)), false); }

matmul_desc desc(int64_t m, int64_t k, int64_t n, dtype dt, int64_t group, zpk zp, bool bias) {
    matmul_desc d;
    d.m = m, d.k = k, d.n = n, d.wei_dt = dt, d.group = group, d.zp = zp, d.with_bias = bias;
    return d;
}

// Every weight at the type's extreme (lo with sign, else hi), the zero point at
// the other one, scales 1, every x = x_value; lo and hi returned.
case_data extreme_case(const matmul_desc &d, uint32_t seed, int sign, float x_value, int32_t *lo, int32_t *hi) {
    case_data c = testdata::make_matmul_data(d, seed);
    testdata::weight_range(d.wei_dt, lo, hi);
    for (int64_t i = 0; i < d.n * d.k; ++i) testdata::set_weight(c.wei, d.wei_dt, i, sign ? *lo : *hi);
    for (auto &s : c.scale) s = 1.f;
    for (auto &z : c.zp) z = sign ? *hi : *lo;
    for (auto &v : c.x) v = x_value;
    return c;
}

// ------------------------------------------------------------ the sweep
struct amx_param {
    dtype wei;
    int64_t group; // 0: per OC
    zpk zp;
};

// "u4_g128_zp_per_group", "s8_oc_zp_per_oc".
std::string describe(const amx_param &p) {
    const std::string zp = p.zp == zpk::per_group && p.group == 0 ? "per_oc" : to_string(p.zp);
    return std::string(to_string(p.wei)) + "_" + (p.group ? "g" + std::to_string(p.group) : "oc") + "_zp_" + zp;
}
void PrintTo(const amx_param &p, std::ostream *os) { *os << describe(p); }

std::vector<amx_param> amx_params() {
    std::vector<amx_param> v;
    for (dtype dt : {dtype::u8, dtype::s8, dtype::u4, dtype::s4})
        for (int64_t g : {0, 32, 64, 128})
            for (zpk z : {zpk::none, zpk::per_tensor, zpk::per_group}) v.push_back({dt, g, z});
    return v;
}

class MatmulAmx : public testing::TestWithParam<amx_param> {};

// M from 1 to 300 (tiles of fewer rows, a padded last tile, several blocks),
// N tails, K with a tail inside a k-tile (per OC) or several groups; bias on
// every other M.
TEST_P(MatmulAmx, MatchesReference) {
    SKIP_WITHOUT_AMX();
    const amx_param &p = GetParam();
    const std::vector<int64_t> ks =
        p.group == 0 ? std::vector<int64_t>{13, 160, 300} : std::vector<int64_t>{p.group * 3};
    uint32_t seed = 1;
    for (int64_t k : ks)
        for (int64_t m : {1, 3, 15, 16, 17, 32, 100, 300}) {
            const int64_t n = m % 2 ? 70 : 37;
            check(testdata::make_matmul_data(desc(m, k, n, p.wei, p.group, p.zp, m % 3 == 0), seed++));
            if (HasFailure()) return;
        }
}

INSTANTIATE_TEST_SUITE_P(Rows, MatmulAmx, testing::ValuesIn(amx_params()),
                         [](const testing::TestParamInfo<amx_param> &i) { return describe(i.param); });

// ------------------------------------------------ dynamic quantization (AMX-INT8)
// jit:matmul_wc_dq:avx512_core_amx: every weight type, per OC and groups of
// 64 / 128 / 192 (chunks of 64), every zero-point kind, M from 1 to 300.
class MatmulAmxDq : public testing::TestWithParam<amx_param> {};

bool amx_int8_available() { return amx_available() && impl::host_platform().has(impl::cpu_feature::amx_int8); }

TEST_P(MatmulAmxDq, MatchesReference) {
    if (!amx_int8_available()) GTEST_SKIP() << "needs AMX-INT8 (Sapphire Rapids class)";
    const amx_param &p = GetParam();
    const std::vector<int64_t> ks =
        p.group == 0 ? std::vector<int64_t>{13, 160, 600} : std::vector<int64_t>{p.group * 3};
    uint32_t seed = 1;
    for (int64_t k : ks)
        for (int64_t m : {1, 3, 12, 16, 17, 33, 300}) {
            const int64_t n = m % 2 ? 70 : 37;
            check(testdata::make_matmul_data(desc(m, k, n, p.wei, p.group, p.zp, m % 3 == 0), seed++), dq_row_name,
                  true);
            if (HasFailure()) return;
        }
}

std::vector<amx_param> dq_params() {
    std::vector<amx_param> v;
    for (const amx_param &p : amx_params())
        if (p.group != 32) v.push_back(p); // refused (a tile's K is 64): RefusesWithReasons
    for (dtype dt : {dtype::u8, dtype::u4}) v.push_back({dt, 192, zpk::per_group});
    return v;
}

INSTANTIATE_TEST_SUITE_P(Rows, MatmulAmxDq, testing::ValuesIn(dq_params()),
                         [](const testing::TestParamInfo<amx_param> &i) { return describe(i.param); });

// The weights at their extremes with zero points at the other end over a long
// K and x = 127 (so sx = 1 and q = 127 exactly): every chunk's sum and the
// f32 accumulation are exact, the result is K·127·(w − zp).
TEST(MatmulAmxDq, ExtremeValuesLongK) {
    if (!amx_int8_available()) GTEST_SKIP() << "needs AMX-INT8 (Sapphire Rapids class)";
    for (dtype dt : {dtype::u8, dtype::s8, dtype::u4, dtype::s4})
        for (int sign : {0, 1}) {
            const matmul_desc d = desc(16, 4096, 37, dt, 128, zpk::per_tensor, false);
            int32_t lo, hi;
            const case_data c = extreme_case(d, 3, sign, 127.f, &lo, &hi);
            check(c, dq_row_name, true);
            matmul_hints h;
            h.impl = dq_row_name;
            h.dynamic_quantization = true;
            std::string why;
            const impl::plan_ptr plan = row_named(dq_row_name).supports(d, h, impl::host_platform(), &why);
            ASSERT_TRUE(plan) << why;
            auto kern = row_named(dq_row_name).create(d, h, *plan);
            auto pk = kern->pack(c.weights());
            std::vector<float> y(static_cast<size_t>(d.m * d.n), 1.f);
            kern->execute(*pk, c.x.data(), y.data(), 2);
            const float want = float(d.k) * 127.f * float(sign ? lo - hi : hi - lo);
            for (float v : y) ASSERT_EQ(v, want) << to_string(dt);
        }
}

// Opt-in only; groups that are not a multiple of 64 and M < 12 (unless
// named) go to the VNNI row.
TEST(MatmulAmxDq, TableAndRefusals) {
    if (!amx_int8_available()) GTEST_SKIP() << "needs AMX-INT8 (Sapphire Rapids class)";
    const impl::platform pl = impl::host_platform();
    matmul_hints dq;
    dq.dynamic_quantization = true;
    std::string why;
    const impl::matmul_entry &e = row_named(dq_row_name);
    EXPECT_FALSE(e.supports(desc(32, 256, 64, dtype::u8, 128, zpk::none, false), {}, pl, &why));
    EXPECT_NE(why.find("dynamic quantization"), std::string::npos) << why;
    why.clear();
    EXPECT_FALSE(e.supports(desc(32, 256, 64, dtype::u4, 32, zpk::none, false), dq, pl, &why));
    EXPECT_NE(why.find("multiple of 64"), std::string::npos) << why;
    why.clear();
    EXPECT_FALSE(e.supports(desc(11, 256, 64, dtype::u8, 0, zpk::none, false), dq, pl, &why));
    EXPECT_NE(why.find("m < 12"), std::string::npos) << why;
    EXPECT_EQ(impl::select_matmul(desc(12, 256, 64, dtype::u8, 0, zpk::none, false), dq, pl).name, dq_row_name);
    EXPECT_EQ(impl::select_matmul(desc(11, 256, 64, dtype::u8, 0, zpk::none, false), dq, pl).name,
              "jit:matmul_wc_dq:avx512_core_vnni");
    EXPECT_EQ(impl::select_matmul(desc(64, 256, 64, dtype::u4, 32, zpk::none, false), dq, pl).name,
              "jit:matmul_wc_dq:avx512_core_vnni");
    EXPECT_EQ(impl::select_matmul(desc(64, 256, 64, dtype::u4, 64, zpk::none, false), {}, pl).name,
              "jit:matmul_wc_x4:avx512_core_amx");
}

// ------------------------------------------------------------ accuracy
// Outlier channels (|x| up to 1000 beside values near 1e-3) at the sizes of
// the headline problems: the largest error stays far inside the bound.
TEST(MatmulAmxAccuracy, OutlierChannelsLongK) {
    SKIP_WITHOUT_AMX();
    for (dtype dt : {dtype::u8, dtype::u4})
        for (int64_t group : {0, 128}) {
            case_data c = testdata::make_matmul_data(desc(32, 4096, 96, dt, group, zpk::per_group, true), 21);
            for (int64_t m = 0; m < c.d.m; ++m)
                for (int64_t k = 0; k < c.d.k; ++k) {
                    float &v = c.x[static_cast<size_t>(m * c.d.k + k)];
                    if (k % 61 == 0) v *= 1000.f;
                    if (k % 7 == 3) v *= 1e-3f;
                }
            const double worst = check(c);
            // eps of these problems and the measured share of it.
            const double eps = jit::matmul_wc_amx_epsilon(4096, 128);
            std::printf("[ amx ] %s %s: max |y - ref| = %.3g of the bound (eps %.3g), ~%.3g of the magnitude sum\n",
                        to_string(dt), c.d.key().c_str(), worst, eps, worst * eps);
            EXPECT_LT(worst, 0.2);
        }
}

// Every weight at an extreme, scale 1, x = 1: the sums are integers, exact.
TEST(MatmulAmxAccuracy, ExtremeValuesAreExact) {
    SKIP_WITHOUT_AMX();
    for (dtype dt : {dtype::u8, dtype::s8, dtype::u4, dtype::s4})
        for (int sign : {0, 1}) {
            const matmul_desc d = desc(20, 4096, 40, dt, 128, zpk::per_tensor, false);
            int32_t lo, hi;
            const case_data c = extreme_case(d, 7, sign, 1.f, &lo, &hi);
            matmul_hints h;
            h.impl = row_name(is_4bit(dt));
            const matmul mm(d, c.weights(), h);
            std::vector<float> y(static_cast<size_t>(d.m * d.n));
            mm.execute(c.x.data(), y.data(), 2);
            const float want = float(d.k) * float((sign ? lo : hi) - (sign ? hi : lo));
            for (float v : y) ASSERT_EQ(v, want) << to_string(dt);
        }
}

// Non-finite activations reach the outputs as in the reference; an x that
// bf16 rounding would turn into inf stays finite (its high part is truncated).
TEST(MatmulAmxAccuracy, NonFiniteActivations) {
    SKIP_WITHOUT_AMX();
    const matmul_desc d = desc(16, 64, 32, dtype::u8, 0, zpk::none, false);
    case_data c = testdata::make_matmul_data(d, 9);
    for (int64_t i = 0; i < d.n * d.k; ++i) testdata::set_weight(c.wei, d.wei_dt, i, 1);
    c.x[5] = INFINITY; // row 0: +inf
    c.x[64 + 7] = NAN; // row 1: NaN
    for (int k = 0; k < 64; ++k) c.x[128 + k] = 0.f;
    c.x[128 + 9] = 3.4e38f; // row 2: above the largest bf16 (rounds to inf), finite in f32
    matmul_hints h;
    h.impl = row_name(false);
    const matmul mm(d, c.weights(), h);
    std::vector<float> y(static_cast<size_t>(d.m * d.n)), ref(y.size());
    mm.execute(c.x.data(), y.data(), 1);
    ref::matmul(d, c.weights(), c.x.data(), ref.data());
    for (int64_t n = 0; n < d.n; ++n) {
        EXPECT_EQ(y[n], INFINITY) << n;
        EXPECT_TRUE(std::isnan(y[d.n + n])) << n;
        EXPECT_NEAR(y[2 * d.n + n], ref[2 * d.n + n], 1e-5 * ref[2 * d.n + n]) << n;
    }
}

// Denormal and tiny activations (the tile unit and the bf16 conversion flush
// denormals): within the bound's absolute term.
TEST(MatmulAmxAccuracy, TinyActivations) {
    SKIP_WITHOUT_AMX();
    case_data c = testdata::make_matmul_data(desc(20, 512, 40, dtype::s8, 128, zpk::per_group, false), 17);
    for (int64_t m = 0; m < c.d.m; ++m)
        for (int64_t k = 0; k < c.d.k; ++k) {
            float &v = c.x[static_cast<size_t>(m * c.d.k + k)];
            if (m % 4 == 1) v *= 1e-40f;                   // denormal
            if (m % 4 == 2) v *= 1e-36f;                   // normal, its low part denormal
            if (m % 4 == 3 && k % 2) v = v * 1e-40f + 1.f; // mixed with ordinary values
        }
    check(c);
}

// Called from inside a parallel region (nested regions inactive: a team of
// one), the row still computes every panel, with the same bytes.
TEST(MatmulAmxAccuracy, InsideAParallelRegion) {
    SKIP_WITHOUT_AMX();
    const matmul_desc d = desc(32, 256, 200, dtype::u4, 64, zpk::per_group, true);
    const case_data c = testdata::make_matmul_data(d, 13);
    matmul_hints h;
    h.impl = row_name(true);
    const matmul mm(d, c.weights(), h);
    const size_t ny = static_cast<size_t>(d.m * d.n);
    std::vector<float> want(ny), got(2 * ny, -1.f);
    mm.execute(c.x.data(), want.data(), 2);
#pragma omp parallel for num_threads(2)
    for (int i = 0; i < 2; ++i) mm.execute(c.x.data(), got.data() + i * ny, 2);
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), ny * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(want.data(), got.data() + ny, ny * sizeof(float)));
}

// ------------------------------------------------------------ refusals
TEST(MatmulAmxRows, RefusesWithReasons) {
    SKIP_WITHOUT_AMX();
    const impl::platform pl = impl::host_platform();
    std::string why;
    matmul_hints named;
    named.impl = row_name(false);
    // Groups must hold whole k-tiles of 32.
    EXPECT_FALSE(row(false).supports(desc(32, 96, 64, dtype::u8, 48, zpk::none, false), named, pl, &why));
    EXPECT_NE(why.find("multiple of 32"), std::string::npos) << why;
    // Small M goes to the AVX-512 row unless the AMX row is named.
    EXPECT_FALSE(row(false).supports(desc(1, 256, 64, dtype::u8, 0, zpk::none, false), {}, pl, &why));
    EXPECT_NE(why.find("faster"), std::string::npos) << why;
    EXPECT_TRUE(row(false).supports(desc(1, 256, 64, dtype::u8, 0, zpk::none, false), named, pl, &why)) << why;
    // A K whose bound would exceed 3e-5 (per OC, every chunk length).
    EXPECT_FALSE(row(false).supports(desc(32, 1 << 16, 64, dtype::u8, 0, zpk::none, false), named, pl, &why));
    EXPECT_NE(why.find("3e-5"), std::string::npos) << why;
    // ... and the longest ones it takes (docs/semantics.md §7): per OC 17280
    // (chunks of 96), groups of 128 15616 (chunks of 64), groups of 32 9856.
    const auto takes = [&](int64_t k, int64_t g) {
        return bool(row(false).supports(desc(32, k, 64, dtype::u8, g, zpk::none, false), named, pl, &why));
    };
    EXPECT_TRUE(takes(17280, 0)) << why;
    EXPECT_FALSE(takes(17280 + 32, 0));
    EXPECT_TRUE(takes(15616, 128)) << why;
    EXPECT_FALSE(takes(15616 + 128, 128));
    EXPECT_TRUE(takes(9856, 32)) << why;
    EXPECT_FALSE(takes(9856 + 32, 32));
    // Weight types.
    EXPECT_FALSE(row(true).supports(desc(32, 64, 64, dtype::u8, 0, zpk::none, false), {}, pl, &why));
    EXPECT_NE(why.find("u4/s4"), std::string::npos) << why;
    // Without AMX-BF16 the table never offers the rows.
    const impl::platform no_amx{isa::avx512_core_bf16};
    EXPECT_EQ(impl::select_matmul(desc(32, 256, 64, dtype::u8, 0, zpk::none, false), {}, no_amx).name,
              "jit:matmul_wc_x8:avx512_core");
}

// The table: from M = 5 (8-bit) / 3 (4-bit) on the AMX rows, below it the AVX-512 ones.
TEST(MatmulAmxRows, TableChoosesByM) {
    SKIP_WITHOUT_AMX();
    const impl::platform pl = impl::host_platform();
    for (bool x4 : {false, true}) {
        const dtype dt = x4 ? dtype::u4 : dtype::u8;
        EXPECT_EQ(impl::select_matmul(desc(32, 256, 64, dt, 128, zpk::per_group, false), {}, pl).name, row_name(x4));
        const int64_t first = x4 ? 3 : 5;
        EXPECT_EQ(impl::select_matmul(desc(first, 256, 64, dt, 0, zpk::none, false), {}, pl).name, row_name(x4));
        EXPECT_EQ(impl::select_matmul(desc(first - 1, 256, 64, dt, 0, zpk::none, false), {}, pl).name,
                  x4 ? "jit:matmul_wc_x4:avx512_core" : "jit:matmul_wc_x8:avx512_core");
    }
}

TEST(MatmulAmxRows, BadWeightsAreErrors) {
    SKIP_WITHOUT_AMX();
    for (bool x4 : {false, true}) {
        const matmul_desc d = desc(32, 64, 20, x4 ? dtype::u4 : dtype::s8, 32, zpk::per_group, true);
        const case_data c = testdata::make_matmul_data(d, 5);
        matmul_hints h;
        h.impl = row_name(x4);
        matmul_weights w = c.weights();
        w.wei = nullptr;
        test::expect_error_prefix([&] { matmul(d, w, h); }, "wei");
        w = c.weights();
        w.scale = nullptr;
        test::expect_error_prefix([&] { matmul(d, w, h); }, "scale");
        w = c.weights();
        w.bias = nullptr;
        test::expect_error_prefix([&] { matmul(d, w, h); }, "bias");
        std::vector<int32_t> bad_zp = c.zp;
        bad_zp[3] = x4 ? 16 : 128;
        w = c.weights();
        w.zp = bad_zp.data();
        test::expect_error_prefix([&] { matmul(d, w, h); }, "zp");
    }
}

} // namespace
} // namespace qconv
