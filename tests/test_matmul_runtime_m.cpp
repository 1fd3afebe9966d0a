// Run-time M (matmul_desc::runtime_m): one MatMul, created for K, N and the
// weights, executed on every M from 1 to 40 and on both sides of the M
// classes' boundaries up to 300 (run_ms()) against ref::matmul — within
// the bound of the row that runs that M (docs/semantics.md §7: the AMX-BF16
// rows' eps, 1e-5 for the f32 rows), the rows beyond m untouched, the same
// bytes as a MatMul created for that M where the class is that M, the row
// the table picks for it; concurrent calls of different M on one primitive;
// bad M names the field. Where the CPU lacks AMX the tile emulator runs the
// AMX rows (tests/support/amx_emulator.h).
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "dispatch/dispatcher.h"
#include "dispatch/host_platform.h"
#include "kernels/jit/matmul/matmul_wc_amx.h"
#include "qconv/matmul.h"
#include "reference/reference.h"
#include "tests/support/amx_emulator.h"
#include "tests/support/expect_error.h"
#include "tests/support/testdata.h"

namespace qconv {
namespace {

using zpk = matmul_desc::zp_kind;
constexpr int64_t max_m = 300;

// Every M to 40 (the classes of single M to 16, the AMX rows from M 3 / 5,
// the blocked shape's 12-row blocks and their tails, the AVX2 prefill from M
// 8 / 24), then each side of the multiple-of-16 classes' boundaries and of
// the chunks beyond 256, to 300. Every M from 1 to 300 took 290 s of the
// suite on an AVX-512 CPU (the AMX rows emulated); a wrong row, tail or
// padding of a class shows at its first M and at its boundaries.
std::vector<int64_t> run_ms() {
    std::vector<int64_t> ms;
    for (int64_t m = 1; m <= 40; ++m) ms.push_back(m);
    for (int64_t m :
         {47, 48, 49, 63, 64, 65, 100, 127, 128, 129, 191, 192, 193, 239, 240, 241, 255, 256, 257, 263, 299, 300})
        ms.push_back(m);
    return ms;
}

struct weights_kind {
    const char *name;
    dtype wei;
    int64_t group; // 0: per output channel
    zpk zp;
    bool bias;
};

const weights_kind kinds[] = {
    {"u8_per_oc", dtype::u8, 0, zpk::none, true},
    {"s8_g32_zp_tensor", dtype::s8, 32, zpk::per_tensor, false},
    {"u4_g32_zp_group", dtype::u4, 32, zpk::per_group, true},
    {"s4_per_oc_zp_group", dtype::s4, 0, zpk::per_group, false},
};

// The name in test listings (ctest -N), not a byte dump.
void PrintTo(const weights_kind &w, std::ostream *os) { *os << w.name; }

matmul_desc desc_of(const weights_kind &w, int64_t m) {
    matmul_desc d;
    d.m = m, d.k = 160, d.n = 72; // a K tail beyond 128, an N tail beyond one panel
    d.wei_dt = w.wei, d.group = w.group, d.zp = w.zp, d.with_bias = w.bias;
    return d;
}

bool is_amx_row(const std::string &name) {
    for (const auto &e : impl::matmul_list())
        if (e.name == name) return e.needs.has(impl::cpu_feature::amx_bf16);
    return false;
}

// The bound per output of the row `name` (tests/test_matmul_amx.cpp and
// tests/test_matmul.cpp hold the same two).
std::vector<double> bound_for(const std::string &name, const testdata::matmul_data &c) {
    std::vector<double> b = testdata::matmul_error_bound(c, false); // 1e-5 · (Σ|x·deq(W)| + |bias|)
    if (!is_amx_row(name)) return b;
    const matmul_desc &d = c.d;
    const bool per_oc = d.n_groups() == 1;
    const int64_t chunk = jit::matmul_wc_amx_chunk((d.k + 31) / 32 * 32, d.group_size(), per_oc);
    const double eps = jit::matmul_wc_amx_epsilon((d.k + chunk - 1) / chunk * chunk, chunk);
    double max_scale = 0;
    for (float s : c.scale) max_scale = std::max(max_scale, double(std::fabs(s)));
    const double flush = jit::matmul_wc_amx_flush_factor * double(d.k) * 256.0 * max_scale;
    for (double &v : b) v = v / 1e-5 * eps + flush;
    return b;
}

class RuntimeM : public ::testing::TestWithParam<weights_kind> {
protected:
    void SetUp() override { (void)test::amx_test_mode(); }
};

TEST_P(RuntimeM, EachMClassMatchesTheReference) {
    const weights_kind &w = GetParam();
    // The data of the largest M; a call with m rows reads its first m rows.
    const testdata::matmul_data c = testdata::make_matmul_data(desc_of(w, max_m), 5);
    const size_t N = size_t(c.d.n);
    std::vector<float> ref(size_t(max_m) * N);
    const int max_threads = omp_get_max_threads();
    omp_set_num_threads(1);
    ref::matmul(c.d, c.weights(), c.x.data(), ref.data());
    omp_set_num_threads(max_threads);
    const std::vector<double> f32_bound = bound_for("", c);
    const std::vector<double> amx_bound = bound_for("jit:matmul_wc_x8:avx512_core_amx", c);

    const matmul mm(desc_of(w, matmul_desc::runtime_m), c.weights());
    EXPECT_NE(mm.impl_name().find("(m1-"), std::string::npos) << mm.impl_name();
    std::vector<float> y(size_t(max_m + 1) * N);
    int bad = 0;
    for (int64_t m : run_ms()) {
        if (bad >= 5) break;
        const std::string row = mm.impl_name(m);
        SCOPED_TRACE("m=" + std::to_string(m) + " row " + row);
        std::fill(y.begin(), y.end(), -77.f);
        mm.execute(c.x.data(), y.data(), m, m % 2 ? 1 : 2);
        const std::vector<double> &b = is_amx_row(row) ? amx_bound : f32_bound;
        for (size_t i = 0; i < size_t(m) * N && bad < 5; ++i)
            if (!(std::fabs(double(y[i]) - double(ref[i])) <= b[i])) {
                ADD_FAILURE() << "row " << i / N << " n=" << i % N << " got " << y[i] << " ref " << ref[i] << " bound "
                              << b[i];
                ++bad;
            }
        for (size_t i = size_t(m) * N; i < y.size(); ++i)
            if (y[i] != -77.f) {
                ADD_FAILURE() << "wrote row " << i / N << " beyond m";
                ++bad;
                break;
            }
    }
}

// Each M runs the row the table picks for it, and where its class is that
// very M, the kernel of a MatMul created for M: the same bytes.
TEST_P(RuntimeM, RunsTheTablesRowForEachM) {
    const weights_kind &w = GetParam();
    const testdata::matmul_data c = testdata::make_matmul_data(desc_of(w, max_m), 9);
    const matmul mm(desc_of(w, matmul_desc::runtime_m), c.weights());
    for (int64_t m : {1, 2, 3, 4, 5, 6, 15, 16, 32, 64, 256}) {
        SCOPED_TRACE("m=" + std::to_string(m));
        const matmul fixed(desc_of(w, m), c.weights());
        EXPECT_EQ(mm.impl_name(m), fixed.impl_name());
        std::vector<float> a(size_t(m * c.d.n)), b(a.size());
        mm.execute(c.x.data(), a.data(), m, 1);
        fixed.execute(c.x.data(), b.data(), 1);
        EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
    }
    // Rows are independent: M = 17 (padded to its class, 32) gives the first
    // 17 rows of M = 32 bit for bit; M = 300 the rows of 256 + 44.
    std::vector<float> y17(size_t(17 * c.d.n)), y32(size_t(32 * c.d.n));
    mm.execute(c.x.data(), y17.data(), int64_t(17), 1);
    mm.execute(c.x.data(), y32.data(), int64_t(32), 1);
    EXPECT_EQ(0, std::memcmp(y17.data(), y32.data(), y17.size() * sizeof(float)));
    std::vector<float> y300(size_t(300 * c.d.n)), y44(size_t(44 * c.d.n));
    mm.execute(c.x.data(), y300.data(), int64_t(300), 1);
    mm.execute(c.x.data() + 256 * c.d.k, y44.data(), int64_t(44), 1);
    EXPECT_EQ(0, std::memcmp(y300.data() + 256 * c.d.n, y44.data(), y44.size() * sizeof(float)));
}

// Concurrent execute() calls with different M on one primitive give the bytes
// of the same calls made one at a time.
TEST_P(RuntimeM, ConcurrentCallsOfDifferentM) {
    const weights_kind &w = GetParam();
    const testdata::matmul_data c = testdata::make_matmul_data(desc_of(w, max_m), 13);
    const matmul mm(desc_of(w, matmul_desc::runtime_m), c.weights());
    const std::vector<int64_t> ms = {1, 3, 7, 17, 64, 300};
    std::vector<std::vector<float>> want;
    for (int64_t m : ms) {
        want.emplace_back(size_t(m * c.d.n));
        mm.execute(c.x.data(), want.back().data(), m, 1);
    }
    std::vector<int> wrong(ms.size(), 0);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < ms.size(); ++t)
        threads.emplace_back([&, t] {
            std::vector<float> y(want[t].size());
            for (int rep = 0; rep < 20; ++rep) {
                std::fill(y.begin(), y.end(), 0.f);
                mm.execute(c.x.data(), y.data(), ms[t], 1);
                if (std::memcmp(y.data(), want[t].data(), y.size() * sizeof(float)) != 0) ++wrong[t];
            }
        });
    for (auto &th : threads) th.join();
    for (size_t t = 0; t < ms.size(); ++t) EXPECT_EQ(wrong[t], 0) << "m=" << ms[t];
}

INSTANTIATE_TEST_SUITE_P(Weights, RuntimeM, ::testing::ValuesIn(kinds),
                         [](const ::testing::TestParamInfo<weights_kind> &i) { return std::string(i.param.name); });

TEST(RuntimeMContract, BadRowsNameTheField) {
    const testdata::matmul_data c = testdata::make_matmul_data(desc_of(kinds[0], 4), 3);
    std::vector<float> y(size_t(4 * c.d.n));
    const matmul rt(desc_of(kinds[0], matmul_desc::runtime_m), c.weights());
    test::expect_error_prefix([&] { rt.execute(c.x.data(), y.data(), int64_t(0)); }, "m", "positive (got 0)");
    test::expect_error_prefix([&] { rt.execute(c.x.data(), y.data(), int64_t(-5)); }, "m", "positive (got -5)");
    test::expect_error_prefix([&] { rt.impl_name(0); }, "m", "positive");
    // The three-argument form with an int is the thread count: on a run-time M
    // it is refused, naming m, rather than guessing the rows.
    test::expect_error_prefix([&] { rt.execute(c.x.data(), y.data(), 2); }, "m", "run-time M");
    test::expect_error_prefix([&] { rt.execute(nullptr, y.data(), int64_t(4)); }, "x", "null");
    test::expect_error_prefix([&] { rt.execute(c.x.data(), nullptr, int64_t(4)); }, "y", "null");
    test::expect_error_prefix([&] { rt.execute(c.x.data(), y.data(), int64_t(1) << 40); }, "x", "limit");
    // A MatMul created for M = 4 runs 4 rows only.
    const matmul fixed(desc_of(kinds[0], 4), c.weights());
    EXPECT_NO_THROW(fixed.execute(c.x.data(), y.data(), int64_t(4)));
    test::expect_error_prefix([&] { fixed.execute(c.x.data(), y.data(), int64_t(3)); }, "m", "created for m=4");
    // Descriptors: m? in text, negative M refused.
    EXPECT_TRUE(matmul_desc::parse("m?k64n8").runtime());
    EXPECT_EQ(matmul_desc::parse("m?k64n8").str(), "m?k64n8");
    EXPECT_TRUE(matmul_desc::parse(matmul_desc::parse("k64_m?_n8").str()).runtime());
    test::expect_error_prefix([] { matmul_desc::parse("m0k4n4"); }, "m", "m?");
    matmul_desc neg = desc_of(kinds[0], -3);
    test::expect_error_prefix([&] { neg.validate(); }, "m", "positive (got -3)");
}

} // namespace
} // namespace qconv
