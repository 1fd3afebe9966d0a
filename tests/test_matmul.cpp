// Weight-compressed MatMul: every JIT row against ref::matmul.
//
// Accuracy bound (f32 accumulation in a different order than the reference,
// which sums in double): for every output
//   |y − y_ref| <= 1e-5 · (Σ_k |x[m,k] · deq(W)[n,k]| + |bias[n]|)
// i.e. relative to the magnitude sum of the dot product, not to |y_ref|
// (which may cancel to ~0). The reference rounds deq(W) to f32 once; the JIT
// kernels multiply by the scale once per group, so both see a few f32
// roundings per term — far inside 1e-5 for the K used here.
// Thread counts 1 and 2 must give identical bytes (K is never split).
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "dispatch/dispatcher.h"
#include "dispatch/host_platform.h"
#include "qconv/matmul.h"
#include "reference/reference.h"
#include "rows/row.h"
#include "tests/support/expect_error.h"
#include "tests/support/matmul_rows_here.h"
#include "tests/support/testdata.h"

namespace qconv {
namespace {

using zpk = matmul_desc::zp_kind;

bool is_4bit(dtype dt) { return dt == dtype::u4 || dt == dtype::s4; }

using case_data = testdata::matmul_data;
case_data make_case(const matmul_desc &d, uint32_t seed) { return testdata::make_matmul_data(d, seed); }

const impl::matmul_entry *find_row(const std::string &name) {
    for (const auto &e : impl::matmul_list())
        if (e.name == name) return &e;
    return nullptr;
}

// The JIT rows (selected by their declared family); the AMX-BF16 rows have
// their own suite (tests/test_matmul_amx.cpp: another bound, an M rule).
std::vector<std::string> jit_rows() {
    std::vector<std::string> names;
    for (const auto &e : impl::matmul_list())
        if (e.family == qconv::impl::row_family::jit && !e.needs.has(impl::cpu_feature::amx_bf16) &&
            !e.needs.has(impl::cpu_feature::amx_int8))
            names.push_back(e.name);
    return names;
}

bool is_dq_row(const std::string &row) { return find_row(row)->dynamic_quantization; }
bool is_x4_row(const std::string &row) { return find_row(row)->weight_bits == 4; }

// The rows' kernels are called directly, on the CPU's platform under the ISA
// cap (tests/support/matmul_rows_here.h): QCONV_MAX_CPU_ISA=avx2 checks what
// an AVX2 CPU runs, and a test none of whose rows runs here skips.
using test::host_runs;
using test::rows_here;
using test::test_platform;
using test::why_none_here;

// The JIT rows `keep` selects, run here or not (for why_none_here()).
template <typename F>
std::vector<std::string> jit_rows_where(const F &keep) {
    std::vector<std::string> rows;
    for (const std::string &r : jit_rows())
        if (keep(r)) rows.push_back(r);
    return rows;
}

// The row's kernel for d, from the plan its supports() makes.
std::shared_ptr<const impl::matmul_kernel> make_kernel(const impl::matmul_entry &e, const matmul_desc &d,
                                                       const matmul_hints &h) {
    std::string why;
    const impl::plan_ptr pl = e.supports(d, h, test_platform(), &why);
    if (!pl) throw std::runtime_error(e.name + " refuses " + d.key() + ": " + why);
    return e.create(d, h, *pl);
}

// Runs `row` on case c with 1 and 2 threads; checks the bound and identity.
void check_row(const std::string &row, const case_data &c) {
    SCOPED_TRACE(row + " " + c.d.key());
    const impl::matmul_entry *e = find_row(row);
    ASSERT_NE(e, nullptr);
    matmul_hints hints;
    hints.dynamic_quantization = is_dq_row(row);
    std::string why;
    const impl::plan_ptr plan = e->supports(c.d, hints, test_platform(), &why);
    ASSERT_TRUE(plan) << why;
    auto kernel = e->create(c.d, hints, *plan);
    auto packed = kernel->pack(c.weights());

    const size_t ny = static_cast<size_t>(c.d.m * c.d.n);
    std::vector<float> ref(ny), y1(ny, -7.f), y2(ny, 7.f);
    // The reference serially: these problems are tiny, and idle OpenMP
    // workers spinning at barriers only slow a loaded machine down.
    const int max_threads = omp_get_max_threads();
    omp_set_num_threads(1);
    ref::matmul(c.d, c.weights(), c.x.data(), ref.data());
    omp_set_num_threads(max_threads);
    kernel->execute(*packed, c.x.data(), y1.data(), 1);
    kernel->execute(*packed, c.x.data(), y2.data(), 2);
    ASSERT_EQ(0, std::memcmp(y1.data(), y2.data(), ny * sizeof(float))) << "threads 1 and 2 differ";

    const std::vector<double> bound = testdata::matmul_error_bound(c, is_dq_row(row));
    int bad = 0;
    for (size_t i = 0; i < ny && bad < 5; ++i) {
        const double tol = bound[i];
        if (!(std::fabs(double(y1[i]) - double(ref[i])) <= tol)) {
            ++bad;
            ADD_FAILURE() << "m=" << i / c.d.n << " n=" << i % c.d.n << " got " << y1[i] << " ref " << ref[i] << " tol "
                          << tol;
        }
    }
}

// ------------------------------------------------------------ the sweep
struct sweep_param {
    std::string row;
    dtype wei;
    int64_t group; // 0: per OC
    zpk zp;
    bool bias;
};

// "matmul_wc_x8_avx512_u8_g128_zp_per_group_bias": the test name and the
// parameter as ctest lists it.
std::string describe(const sweep_param &p) {
    std::string s = p.row.substr(p.row.find(':') + 1);
    for (char &ch : s)
        if (ch == ':') ch = '_';
    s += std::string("_") + to_string(p.wei) + "_" + (p.group ? "g" + std::to_string(p.group) : "oc") + "_zp_" +
         to_string(p.zp) + (p.bias ? "_bias" : "");
    return s;
}
void PrintTo(const sweep_param &p, std::ostream *os) { *os << describe(p); }
std::string param_name(const testing::TestParamInfo<sweep_param> &info) { return describe(info.param); }

std::vector<sweep_param> sweep_params() {
    std::vector<sweep_param> v;
    for (const std::string &row : jit_rows())
        for (dtype dt : {dtype::u8, dtype::s8, dtype::u4, dtype::s4}) {
            const bool x4 = is_x4_row(row);
            if (!is_dq_row(row) && x4 != is_4bit(dt)) continue;
            for (int64_t g : {0, 32, 64, 128})
                for (zpk z : {zpk::none, zpk::per_tensor, zpk::per_group})
                    for (bool b : {false, true}) v.push_back({row, dt, g, z, b});
        }
    return v;
}

class MatmulSweep : public testing::TestWithParam<sweep_param> {};

TEST_P(MatmulSweep, MatchesReference) {
    const sweep_param &p = GetParam();
    if (!host_runs(p.row)) GTEST_SKIP() << why_none_here({p.row});
    // K not a multiple of the vector width or of 64; groups dividing K.
    std::vector<int64_t> ks;
    if (p.group == 0) ks = {13, 160};
    if (p.group == 32) ks = {96};
    if (p.group == 64) ks = {192};
    if (p.group == 128) ks = {384};
    uint32_t seed = 1;
    for (int64_t k : ks)
        for (int64_t m : {1, 2, 3, 5, 17, 64})
            for (int64_t n : {13, 37, 70, 200}) {
                // Several panels per call (streaming, M <= 3) with a partial last group,
                // and two panels and a tail for the blocked shape (M = 17).
                if (n == 70 && m != 17 && m != 1) continue;
                if (n == 200 && m != 2 && m != 3) continue;
                if (k == 13 && m != 1 && m != 5) continue; // odd K (4-bit: padded x): twice
                matmul_desc d;
                d.m = m, d.k = k, d.n = n, d.wei_dt = p.wei, d.group = p.group, d.zp = p.zp, d.with_bias = p.bias;
                check_row(p.row, make_case(d, seed++));
                if (HasFatalFailure()) return;
            }
}

INSTANTIATE_TEST_SUITE_P(JitRows, MatmulSweep, testing::ValuesIn(sweep_params()), param_name);

// ------------------------------------------------------------ extremes
// Largest magnitudes over a long K: every weight at the type's extreme, zp 0
// or at the other end, x = 1 — integer-valued partial sums stay exact in f32.
// (Not for the dynamic-quantization row: its X scale 1/127 is inexact.)
TEST(MatmulJit, ExtremeValuesLongK) {
    const std::vector<std::string> rows = jit_rows_where([](const std::string &r) { return !is_dq_row(r); });
    const std::vector<std::string> here = rows_here(rows);
    if (here.empty()) GTEST_SKIP() << why_none_here(rows);
    for (const std::string &row : here) {
        const bool x4 = is_x4_row(row);
        for (dtype dt : x4 ? std::vector<dtype>{dtype::u4, dtype::s4} : std::vector<dtype>{dtype::u8, dtype::s8})
            for (int sign : {0, 1})
                for (zpk z : {zpk::none, zpk::per_tensor}) {
                    matmul_desc d;
                    d.m = 3, d.k = 4096, d.n = 37, d.wei_dt = dt, d.zp = z, d.group = 128;
                    case_data c = make_case(d, 7);
                    int32_t lo, hi;
                    testdata::weight_range(dt, &lo, &hi);
                    for (int64_t i = 0; i < d.n * d.k; ++i) testdata::set_weight(c.wei, dt, i, sign ? lo : hi);
                    for (auto &s : c.scale) s = 1.f;
                    for (auto &zv : c.zp) zv = sign ? hi : lo;
                    for (auto &v : c.x) v = 1.f;
                    check_row(row, c);
                    // The exact value: K · (w − zp).
                    matmul_hints h;
                    h.dynamic_quantization = is_dq_row(row);
                    auto kern = make_kernel(*find_row(row), d, h);
                    auto pk = kern->pack(c.weights());
                    std::vector<float> y(d.m * d.n);
                    kern->execute(*pk, c.x.data(), y.data(), 2);
                    const int zpv = z == zpk::none ? 0 : (sign ? hi : lo);
                    const float want = float(d.k) * float((sign ? lo : hi) - zpv);
                    for (float v : y) ASSERT_EQ(v, want) << row << " " << to_string(dt);
                }
    }
}

// 4-bit rows with odd K (per OC) read a padded x column; odd group sizes are
// refused (a byte holds two k) and run by the reference instead.
TEST(MatmulJit, FourBitOddSizes) {
    const std::vector<std::string> rows = jit_rows_where(is_x4_row);
    const std::vector<std::string> here = rows_here(rows);
    if (here.empty()) GTEST_SKIP() << why_none_here(rows);
    for (const std::string &row : here) {
        matmul_desc d;
        d.m = 5, d.k = 7, d.n = 70, d.wei_dt = dtype::s4, d.zp = zpk::per_group;
        check_row(row, make_case(d, 3));
        d.k = 21, d.group = 3;
        std::string why;
        EXPECT_FALSE(find_row(row)->supports(d, {}, test_platform(), &why));
        EXPECT_NE(why.find("even"), std::string::npos) << why;
    }
}

// 4-bit table kernels: per-OC K that is not a multiple of 8 (the 8-k block
// layout pads K) and even groups that are not a multiple of 8 (the 2-k
// layout), streaming and blocked shapes, every zero-point kind.
TEST(MatmulJit, FourBitTableLayouts) {
    const std::vector<std::string> rows = jit_rows_where(is_x4_row);
    const std::vector<std::string> here = rows_here(rows);
    if (here.empty()) GTEST_SKIP() << why_none_here(rows);
    for (const std::string &row : here) {
        uint32_t seed = 11;
        for (dtype dt : {dtype::u4, dtype::s4})
            for (int64_t group : {0, 6, 24})
                for (int64_t k : {group == 0 ? int64_t(37) : group * 5, group == 0 ? int64_t(8) : group})
                    for (int64_t m : {1, 4, 13}) {
                        matmul_desc d;
                        d.m = m, d.k = k, d.n = 150, d.wei_dt = dt, d.group = group;
                        d.zp = seed % 3 == 0 ? zpk::none : seed % 3 == 1 ? zpk::per_tensor : zpk::per_group;
                        check_row(row, make_case(d, seed++));
                        if (HasFatalFailure()) return;
                    }
    }
}

// ------------------------------------------------------------ dispatch
TEST(MatmulJit, RowsAreListedBeforeTheReference) {
    const std::vector<std::string> rows = jit_rows();
    ASSERT_EQ(rows.size(), 5u);
    EXPECT_EQ(rows[0], "jit:matmul_wc_dq:avx512_core_vnni");
    EXPECT_EQ(rows[1], "jit:matmul_wc_x8:avx512_core");
    EXPECT_EQ(rows[2], "jit:matmul_wc_x4:avx512_core");
    EXPECT_EQ(rows[3], "jit:matmul_wc_x8:avx2");
    EXPECT_EQ(rows[4], "jit:matmul_wc_x4:avx2");
    EXPECT_EQ(impl::matmul_list().back().name, "ref:matmul");
}

TEST(MatmulJit, SupportsFollowsPlatformTypeAndHints) {
    matmul_desc d;
    d.m = 1, d.k = 64, d.n = 16, d.wei_dt = dtype::u4;
    std::string why;
    const impl::platform avx2{isa::avx2}, sse{isa::sse41}, avx512{isa::avx512_core_vnni};
    EXPECT_FALSE(find_row("jit:matmul_wc_x4:avx512_core")->supports(d, {}, avx2, &why));
    EXPECT_NE(why.find("avx512"), std::string::npos) << why;
    EXPECT_TRUE(find_row("jit:matmul_wc_x4:avx2")->supports(d, {}, avx2, &why)) << why;
    EXPECT_FALSE(find_row("jit:matmul_wc_x4:avx2")->supports(d, {}, sse, &why));
    EXPECT_FALSE(find_row("jit:matmul_wc_x8:avx512_core")->supports(d, {}, avx512, &why));
    EXPECT_NE(why.find("u8/s8"), std::string::npos) << why;
    matmul_hints dq;
    dq.dynamic_quantization = true;
    // Dynamic quantization is opt-in, and needs VNNI; the f32 rows accept the
    // hint (exact f32 is within any bound the hint allows).
    const impl::matmul_entry *dq_row = find_row("jit:matmul_wc_dq:avx512_core_vnni");
    EXPECT_FALSE(dq_row->supports(d, {}, avx512, &why));
    EXPECT_NE(why.find("dynamic quantization"), std::string::npos) << why;
    EXPECT_TRUE(dq_row->supports(d, dq, avx512, &why)) << why;
    EXPECT_FALSE(dq_row->supports(d, dq, impl::platform{isa::avx512_core}, &why));
    EXPECT_NE(why.find("vnni"), std::string::npos) << why;
    EXPECT_TRUE(find_row("jit:matmul_wc_x4:avx512_core")->supports(d, dq, avx512, &why)) << why;
    // The dispatcher's choice on simulated platforms.
    EXPECT_EQ(impl::select_matmul(d, {}, avx512).name, "jit:matmul_wc_x4:avx512_core");
    EXPECT_EQ(impl::select_matmul(d, {}, avx2).name, "jit:matmul_wc_x4:avx2");
    EXPECT_EQ(impl::select_matmul(d, {}, sse).name, "ref:matmul");
    EXPECT_EQ(impl::select_matmul(d, dq, avx512).name, "jit:matmul_wc_dq:avx512_core_vnni");
    EXPECT_EQ(impl::select_matmul(d, dq, impl::platform{isa::avx512_core}).name, "jit:matmul_wc_x4:avx512_core");
    EXPECT_EQ(impl::select_matmul(d, dq, avx2).name, "jit:matmul_wc_x4:avx2");
}

// Through the public API, auto and forced by name (the avx2 row runs here:
// the CPU has AVX2).
TEST(MatmulJit, PublicApi) {
    matmul_desc d;
    d.m = 17, d.k = 256, d.n = 100, d.wei_dt = dtype::u8, d.group = 64, d.zp = zpk::per_group, d.with_bias = true;
    const case_data c = make_case(d, 11);
    std::vector<float> ref(d.m * d.n), y(d.m * d.n);
    ref::matmul(d, c.weights(), c.x.data(), ref.data());
    const std::vector<double> bound = testdata::matmul_error_bound(c, false);
    // host_platform() honours QCONV_MAX_CPU_ISA (tests/cmake/matmul.cmake runs this capped at avx2).
    const impl::platform plat = impl::host_platform();
    for (const std::string name : {"auto", "jit:matmul_wc_x8:avx2", "jit:matmul_wc_x8:avx512_core"}) {
        if (name != "auto" && !find_row(name)->supports(d, {}, plat, nullptr)) continue;
        matmul_hints h;
        h.impl = name;
        matmul mm(d, c.weights(), h);
        const bool amx = plat.has(impl::cpu_feature::amx_bf16);
        if (name == "auto" && plat.has(impl::cpu_feature::avx2)) {
            EXPECT_EQ(mm.impl_name(), amx                                        ? "jit:matmul_wc_x8:avx512_core_amx"
                                      : plat.has(impl::cpu_feature::avx512_core) ? "jit:matmul_wc_x8:avx512_core"
                                                                                 : "jit:matmul_wc_x8:avx2");
        }
        mm.execute(c.x.data(), y.data(), 2);
        // The AMX-BF16 rows' bound is at most 3e-5 instead of 1e-5 (docs/semantics.md §7).
        const double widen = mm.impl_name().find("_amx") != std::string::npos ? 3.0 : 1.0;
        for (size_t i = 0; i < y.size(); ++i) ASSERT_LE(std::fabs(y[i] - ref[i]), widen * bound[i]) << name << " " << i;
    }
}

// ------------------------------------------------------------ bad weights

TEST(MatmulJit, BadWeightsAreErrors) {
    const std::vector<std::string> here = rows_here(jit_rows());
    if (here.empty()) GTEST_SKIP() << why_none_here(jit_rows());
    for (const std::string &row : here) {
        const bool x4 = is_x4_row(row);
        matmul_desc d;
        d.m = 2, d.k = 64, d.n = 20, d.wei_dt = x4 ? dtype::u4 : dtype::s8, d.zp = zpk::per_group, d.group = 32;
        d.with_bias = true;
        const case_data c = make_case(d, 5);
        matmul_hints h;
        h.dynamic_quantization = is_dq_row(row);
        auto kern = make_kernel(*find_row(row), d, h);
        matmul_weights w = c.weights();
        w.wei = nullptr;
        test::expect_error_prefix([&] { kern->pack(w); }, "wei");
        w = c.weights();
        w.scale = nullptr;
        test::expect_error_prefix([&] { kern->pack(w); }, "scale");
        w = c.weights();
        w.zp = nullptr;
        test::expect_error_prefix([&] { kern->pack(w); }, "zp");
        w = c.weights();
        w.bias = nullptr;
        test::expect_error_prefix([&] { kern->pack(w); }, "bias");
        std::vector<int32_t> bad_zp = c.zp;
        bad_zp[5] = x4 ? 16 : 128; // outside u4 / s8
        w = c.weights();
        w.zp = bad_zp.data();
        test::expect_error_prefix([&] { kern->pack(w); }, "zp");
        // The same through the public API.
        h.impl = row;
        test::expect_error_prefix([&] { matmul(d, w, h); }, "zp");
        w = c.weights();
        w.wei = nullptr;
        test::expect_error_prefix([&] { matmul(d, w, h); }, "wei");
    }
}

// docs/semantics.md §7: (w − zp)·scale must be finite for every weight of the
// type; a scale that breaks it is bad input naming `scale`, on every row.
TEST(MatmulApi, ScalesWhoseDequantizedWeightsOverflowAreRejected) {
    matmul_desc d;
    d.m = 2, d.k = 64, d.n = 4, d.wei_dt = dtype::u8, d.zp = zpk::per_tensor;
    const case_data c = make_case(d, 3);
    const int32_t zp = 0;
    for (float bad : {2e36f, -2e36f, INFINITY, -INFINITY}) {
        std::vector<float> scale(c.scale);
        scale[2] = bad; // 255 · 2e36 > FLT_MAX
        matmul_weights w = c.weights();
        w.scale = scale.data();
        w.zp = &zp;
        SCOPED_TRACE(bad);
        test::expect_error_prefix([&] { matmul(d, w); }, "scale");
    }
    // A large scale whose dequantized weights (and their sum over K) stay
    // finite is accepted and matches the reference.
    std::vector<float> scale(c.scale);
    scale[1] = 1e34f;
    matmul_weights w = c.weights();
    w.scale = scale.data();
    w.zp = &zp;
    const matmul mm(d, w);
    std::vector<float> y(size_t(d.m * d.n)), want(y.size());
    mm.execute(c.x.data(), y.data(), 1);
    ref::matmul(d, w, c.x.data(), want.data());
    for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_TRUE(std::isfinite(want[i]));
        EXPECT_NEAR(y[i], want[i], 1e-5 * std::fabs(want[i]) + 1e-6) << mm.impl_name() << " " << i;
    }
}

} // namespace
} // namespace qconv
