// f16 and bf16 activations (matmul_desc::src_dt / dst_dt, execute_typed):
// the conversions (AVX-512 loops against the scalar definitions, exhaustive
// for 16-bit inputs), and every row of the table giving, for X and Y of those
// types, the bits of its f32 run on the converted X with Y rounded to nearest
// even; run-time M; errors naming the field.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/convert.h"
#include "dispatch/dispatcher.h"
#include "dispatch/host_platform.h"
#include "qconv/matmul.h"
#include "reference/reference.h"
#include "tests/support/amx_emulator.h"
#include "tests/support/expect_error.h"
#include "tests/support/testdata.h"

namespace qconv {
namespace {

using zpk = matmul_desc::zp_kind;

bool has_avx512() { return impl::host_platform().has(impl::cpu_feature::avx512_core); }

bool same(float a, float b) {
    uint32_t x, y;
    std::memcpy(&x, &a, 4);
    std::memcpy(&y, &b, 4);
    return x == y || (std::isnan(a) && std::isnan(b));
}

TEST(ActivationConversion, SixteenBitToF32IsExactOnEveryPattern) {
    std::vector<uint16_t> h(65536);
    for (size_t i = 0; i < h.size(); ++i) h[i] = uint16_t(i);
    for (dtype t : {dtype::f16, dtype::bf16}) {
        std::vector<float> scalar(h.size()), vec(h.size());
        detail::to_f32(t, h.data(), scalar.data(), int64_t(h.size()), false);
        if (has_avx512()) detail::to_f32(t, h.data(), vec.data(), int64_t(h.size()), true);
        else vec = scalar;
        for (size_t i = 0; i < h.size(); ++i) {
            ASSERT_TRUE(same(scalar[i], vec[i])) << to_string(t) << " " << i;
            // Back to the type: the same pattern (NaN stays NaN).
            std::vector<uint16_t> back(1);
            detail::from_f32(t, &scalar[i], back.data(), 1, false);
            if (!std::isnan(scalar[i])) {
                ASSERT_EQ(back[0], h[i]) << to_string(t) << " " << i;
            }
        }
    }
    EXPECT_EQ(bf16_to_f32(0x3F80), 1.f);
}

TEST(ActivationConversion, F32ToSixteenBitRoundsToNearestEven) {
    EXPECT_EQ(f32_to_bf16(1.f + 0x1p-8f), 0x3F80);     // a tie: to even
    EXPECT_EQ(f32_to_bf16(1.f + 3 * 0x1p-8f), 0x3F82); // a tie: up to even
    EXPECT_EQ(f32_to_bf16(1.f + 0x1p-8f + 0x1p-20f), 0x3F81);
    EXPECT_EQ(f32_to_bf16(3.4e38f), 0x7F80);   // beyond the largest bf16: inf
    EXPECT_EQ(f32_to_bf16(0x1p-130f), 0x0008); // denormals are kept
    EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
    // Vector against scalar on random bit patterns and every f32 near the f16/bf16 boundaries.
    std::mt19937 gen(5);
    std::vector<float> v(1 << 18);
    for (size_t i = 0; i < v.size(); ++i) {
        uint32_t x = gen();
        if (i % 4 == 1) x &= 0x807FFFFFu | (uint32_t(101 + gen() % 40) << 23); // around f16's range
        std::memcpy(&v[i], &x, 4);
    }
    for (dtype t : {dtype::f16, dtype::bf16}) {
        std::vector<uint16_t> scalar(v.size()), vec(v.size());
        detail::from_f32(t, v.data(), scalar.data(), int64_t(v.size()), false);
        if (!has_avx512()) GTEST_SKIP() << "no AVX-512 here: the scalar form is the only one";
        detail::from_f32(t, v.data(), vec.data(), int64_t(v.size()), true);
        for (size_t i = 0; i < v.size(); ++i) {
            float a, b;
            detail::to_f32(t, &scalar[i], &a, 1, false);
            detail::to_f32(t, &vec[i], &b, 1, false);
            ASSERT_TRUE(same(a, b)) << to_string(t) << " " << v[i];
        }
    }
}

std::vector<std::string> row_names() {
    std::vector<std::string> n;
    for (const auto &e : impl::matmul_list()) n.push_back(e.name);
    return n;
}

class ActivationRow : public ::testing::TestWithParam<std::string> {};

// Each row, forced: f16/bf16 X and Y give the row's f32 bits on the converted
// X, rounded; and the typed reference is within the bound of it.
TEST_P(ActivationRow, SameBitsAsTheF32RunRounded) {
    (void)test::amx_test_mode();
    const impl::platform pl = impl::host_platform();
    int ran = 0;
    for (dtype wei : {dtype::u4, dtype::u8})
        for (dtype src : {dtype::f16, dtype::bf16})
            for (dtype dst : {dtype::f32, dtype::f16, dtype::bf16}) {
                matmul_desc d;
                d.m = 6, d.k = 128, d.n = 80, d.wei_dt = wei, d.group = 32, d.zp = zpk::per_group;
                d.with_bias = true;
                testdata::matmul_data c = testdata::make_matmul_data(d, 11);
                matmul_hints h;
                h.impl = GetParam();
                bool takes = false;
                for (const auto &e : impl::matmul_list())
                    if (e.name == GetParam()) {
                        h.dynamic_quantization = e.dynamic_quantization;
                        takes = pl.has_all(e.needs) && e.supports(d, h, pl, nullptr);
                    }
                if (!takes) continue;
                SCOPED_TRACE(std::string(to_string(wei)) + " " + to_string(src) + ":" + to_string(dst));
                std::vector<uint16_t> x16(c.x.size());
                detail::from_f32(src, c.x.data(), x16.data(), int64_t(x16.size()), false);
                detail::to_f32(src, x16.data(), c.x.data(), int64_t(x16.size()), false); // the f32 run's X
                const matmul f32(d, c.weights(), h);
                std::vector<float> y32(size_t(d.m * d.n));
                f32.execute(c.x.data(), y32.data(), 1);

                matmul_desc dt = d;
                dt.src_dt = src, dt.dst_dt = dst;
                const matmul typed(dt, c.weights(), h);
                EXPECT_EQ(typed.impl_name(), GetParam());
                std::vector<uint16_t> y16(y32.size(), 0xFFFF);
                std::vector<float> yf(y32.size(), -1.f);
                void *out = dst == dtype::f32 ? static_cast<void *>(yf.data()) : y16.data();
                typed.execute_typed(x16.data(), out, 0, 1);
                std::vector<float> want(y32.size()), got(y32.size());
                std::vector<uint16_t> w16(y32.size());
                detail::from_f32(dst, y32.data(), dst == dtype::f32 ? static_cast<void *>(want.data()) : w16.data(),
                                 int64_t(y32.size()), false);
                if (dst == dtype::f32) got = yf;
                else {
                    detail::to_f32(dst, y16.data(), got.data(), int64_t(got.size()), false);
                    detail::to_f32(dst, w16.data(), want.data(), int64_t(want.size()), false);
                }
                for (size_t i = 0; i < got.size(); ++i) ASSERT_TRUE(same(got[i], want[i])) << i;
                // The typed reference: the same definition, within the row's bound plus the rounding.
                std::vector<uint16_t> r16(y32.size());
                std::vector<float> rf(y32.size());
                ref::matmul_typed(dt, c.weights(), x16.data(),
                                  dst == dtype::f32 ? static_cast<void *>(rf.data()) : r16.data());
                if (dst != dtype::f32) detail::to_f32(dst, r16.data(), rf.data(), int64_t(rf.size()), false);
                const std::vector<double> bound = testdata::matmul_error_bound(c, h.dynamic_quantization);
                const double u = dst == dtype::bf16 ? 0x1p-8 : dst == dtype::f16 ? 0x1p-11 : 0.0;
                for (size_t i = 0; i < got.size(); ++i)
                    EXPECT_LE(std::fabs(double(got[i]) - rf[i]), 3 * bound[i] * (1 + 2 * u) + 2 * u * std::fabs(rf[i]))
                        << i;
                ++ran;
            }
    if (ran == 0) GTEST_SKIP() << GetParam() << " takes none of the problems here";
}

INSTANTIATE_TEST_SUITE_P(Table, ActivationRow, ::testing::ValuesIn(row_names()),
                         [](const ::testing::TestParamInfo<std::string> &i) {
                             std::string s = i.param;
                             for (char &ch : s)
                                 if (ch == ':') ch = '_';
                             return s;
                         });

TEST(Activations, RunTimeMAndErrors) {
    matmul_desc d;
    d.m = matmul_desc::runtime_m, d.k = 64, d.n = 40, d.wei_dt = dtype::s8, d.src_dt = dtype::bf16;
    d.dst_dt = dtype::f16;
    matmul_desc data_desc = d;
    data_desc.m = 20, data_desc.src_dt = data_desc.dst_dt = dtype::f32;
    const testdata::matmul_data c = testdata::make_matmul_data(data_desc, 2);
    std::vector<uint16_t> x16(c.x.size());
    detail::from_f32(dtype::bf16, c.x.data(), x16.data(), int64_t(x16.size()), false);
    const matmul mm(d, c.weights());
    std::vector<uint16_t> y20(size_t(20 * d.n)), y3(size_t(3 * d.n));
    mm.execute_typed(x16.data(), y20.data(), 20);
    mm.execute_typed(x16.data(), y3.data(), 3);
    // Rows are independent: 3 rows are the first 3 of 20 where both classes run one row kind.
    if (mm.impl_name(3) == mm.impl_name(20)) {
        EXPECT_EQ(0, std::memcmp(y3.data(), y20.data(), y3.size() * 2));
    }
    std::vector<float> xf(c.x.size()), yf(y20.size());
    test::expect_error_prefix([&] { mm.execute(xf.data(), yf.data(), int64_t(3)); }, "x", "execute_typed");
    test::expect_error_prefix([&] { mm.execute_typed(x16.data(), y3.data(), 0); }, "m", "positive");
    test::expect_error_prefix([&] { mm.execute_typed(nullptr, y3.data(), 3); }, "x", "null");
    matmul_desc bad = d;
    bad.src_dt = dtype::s8;
    test::expect_error_prefix([&] { bad.validate(); }, "src_dt", "f32, f16 or bf16");
    bad = d;
    bad.dst_dt = dtype::u8;
    test::expect_error_prefix([&] { bad.validate(); }, "dst_dt", "f32, f16 or bf16");
}

} // namespace
} // namespace qconv
