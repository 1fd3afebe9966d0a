// f16 scales (matmul_desc::scale_dt = f16, matmul_weights::scale_f16): the
// conversion to f32 is exact, so every row of the table, forced by name,
// gives the bytes it gives for the same values in f32, and the reference
// reads them as the same values; fixed and run-time M; bad scale input names
// the field; the driver's --scale-dt and --dt.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "dispatch/dispatcher.h"
#include "dispatch/host_platform.h"
#include "qconv/matmul.h"
#include "reference/reference.h"
#include "tests/support/amx_emulator.h"
#include "tests/support/expect_error.h"
#include "tests/support/run_driver.h"
#include "tests/support/testdata.h"

namespace qconv {
namespace {

using zpk = matmul_desc::zp_kind;

matmul_desc desc(int64_t m, dtype wei, int64_t group, zpk zp, dtype scale_dt) {
    matmul_desc d;
    d.m = m, d.k = 128, d.n = 80, d.wei_dt = wei, d.group = group, d.zp = zp, d.with_bias = true;
    d.scale_dt = scale_dt;
    return d;
}

// The same problem with its (f16-representable) scales given in f32.
testdata::matmul_data as_f32(const testdata::matmul_data &c) {
    testdata::matmul_data f = c;
    f.d.scale_dt = dtype::f32;
    f.scale_f16.clear();
    return f;
}

std::vector<std::string> row_names() {
    std::vector<std::string> n;
    for (const auto &e : impl::matmul_list()) n.push_back(e.name);
    return n;
}

class ScaleF16Row : public ::testing::TestWithParam<std::string> {};

TEST_P(ScaleF16Row, SameBytesAsTheF32Values) {
    (void)test::amx_test_mode();
    const impl::platform pl = impl::host_platform();
    int ran = 0;
    for (dtype wei : {dtype::u8, dtype::s4})
        for (int64_t group : {int64_t(0), int64_t(32)})
            for (int64_t m : {int64_t(1), int64_t(8)}) {
                const testdata::matmul_data c =
                    testdata::make_matmul_data(desc(m, wei, group, zpk::per_group, dtype::f16), 3);
                ASSERT_EQ(c.scale_f16.size(), c.scale.size());
                const testdata::matmul_data f = as_f32(c);
                matmul_hints h;
                h.impl = GetParam();
                for (const auto &e : impl::matmul_list())
                    if (e.name == GetParam()) h.dynamic_quantization = e.dynamic_quantization;
                std::string why;
                bool takes = false;
                for (const auto &e : impl::matmul_list())
                    if (e.name == GetParam()) takes = pl.has_all(e.needs) && e.supports(f.d, h, pl, &why);
                if (!takes) continue;
                SCOPED_TRACE(c.d.key());
                const matmul half(c.d, c.weights(), h), full(f.d, f.weights(), h);
                EXPECT_EQ(half.impl_name(), GetParam());
                EXPECT_EQ(half.desc().scale_dt, dtype::f16);
                std::vector<float> a(size_t(m * c.d.n), 1.f), b(a.size(), 2.f), r(a.size()), rf(a.size());
                half.execute(c.x.data(), a.data(), 1);
                full.execute(f.x.data(), b.data(), 1);
                EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
                ref::matmul(c.d, c.weights(), c.x.data(), r.data());
                ref::matmul(f.d, f.weights(), f.x.data(), rf.data());
                EXPECT_EQ(0, std::memcmp(r.data(), rf.data(), r.size() * sizeof(float)));
                // And near the reference (1e-5 of the magnitude sum covers every row here but dq).
                if (!h.dynamic_quantization) {
                    const std::vector<double> bound = testdata::matmul_error_bound(f, false);
                    for (size_t i = 0; i < a.size(); ++i)
                        EXPECT_LE(std::fabs(double(a[i]) - double(r[i])), 3.0 * bound[i]) << i;
                }
                ++ran;
            }
    if (ran == 0) GTEST_SKIP() << GetParam() << " takes none of the problems here";
}

INSTANTIATE_TEST_SUITE_P(Table, ScaleF16Row, ::testing::ValuesIn(row_names()),
                         [](const ::testing::TestParamInfo<std::string> &i) {
                             std::string s = i.param;
                             for (char &ch : s)
                                 if (ch == ':') ch = '_';
                             return s;
                         });

TEST(ScaleF16, RunTimeMGivesTheF32Bytes) {
    (void)test::amx_test_mode();
    const testdata::matmul_data c = testdata::make_matmul_data(desc(40, dtype::u4, 32, zpk::per_group, dtype::f16), 8);
    const testdata::matmul_data f = as_f32(c);
    matmul_desc rt = c.d, rtf = f.d;
    rt.m = rtf.m = matmul_desc::runtime_m;
    const matmul half(rt, c.weights()), full(rtf, f.weights());
    for (int64_t m : {1, 7, 40}) {
        std::vector<float> a(size_t(m * c.d.n)), b(a.size());
        half.execute(c.x.data(), a.data(), m, 1);
        full.execute(f.x.data(), b.data(), m, 1);
        EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "m=" << m;
    }
}

TEST(ScaleF16, BadScalesNameTheField) {
    testdata::matmul_data c = testdata::make_matmul_data(desc(2, dtype::u8, 0, zpk::none, dtype::f16), 4);
    matmul_weights w = c.weights();
    w.scale_f16 = nullptr;
    w.scale = c.scale.data(); // f32 scales do not stand in for f16 ones
    test::expect_error_prefix([&] { matmul(c.d, w); }, "scale", "scale_f16");
    matmul_desc bf = c.d;
    bf.scale_dt = dtype::bf16;
    test::expect_error_prefix([&] { bf.validate(); }, "scale_dt", "f32 or f16");
    // An infinite f16 scale is refused as an f32 one is; the largest finite one is not.
    c.scale_f16[5] = 0x7C00;
    test::expect_error_prefix([&] { matmul(c.d, c.weights()); }, "scale", "not finite");
    c.scale_f16[5] = 0x7BFF; // 65504 · 255 is finite in f32
    EXPECT_NO_THROW(matmul(c.d, c.weights()));
}

TEST(ScaleF16, Conversions) {
    EXPECT_EQ(f16_to_f32(0x3C00), 1.f);
    EXPECT_EQ(f16_to_f32(0x7BFF), 65504.f);
    EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.f, -24));
    EXPECT_EQ(f32_to_f16(1.f + std::ldexp(1.f, -11)), 0x3C00); // a tie: to even
    EXPECT_EQ(f32_to_f16(1e6f), 0x7C00);
    for (uint32_t h = 0; h < 0x7C00; ++h) ASSERT_EQ(f32_to_f16(f16_to_f32(uint16_t(h))), h);
}

TEST(ScaleF16, DriverScaleDt) {
    const auto r = test::run_driver(
        {"matmul", "--scale-dt=f16", "--wei=u4", "--group=32", "--zp=per_group", "--mode=C", "m4k128n64"});
    ASSERT_EQ(r.rc, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("scale_dt=f16"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("status=ok"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("status=mismatch"), std::string::npos) << r.out;
    EXPECT_EQ(test::run_driver({"matmul", "--scale-dt=bf16", "m4k128n64"}).rc, 2);
    // --dt: 16-bit activations (tests/test_matmul_activations.cpp holds the kernels' side).
    const auto a = test::run_driver({"matmul", "--dt=bf16:f16", "--scale-dt=f16", "--mode=C", "m5k128n64"});
    ASSERT_EQ(a.rc, 0) << a.out << a.err;
    EXPECT_NE(a.out.find("dt=bf16:f16"), std::string::npos) << a.out;
    EXPECT_NE(a.out.find("status=ok"), std::string::npos) << a.out;
    EXPECT_EQ(a.out.find("status=mismatch"), std::string::npos) << a.out;
    EXPECT_EQ(test::run_driver({"matmul", "--dt=s8", "m4k128n64"}).rc, 2);
}

} // namespace
} // namespace qconv
