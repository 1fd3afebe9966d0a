// f16 and bf16 activations read by the f32 weight-compressed MatMul rows
// themselves (jit:matmul_wc_{x8,x4}:{avx512_core,avx2}; matmul_kernel::
// execute_x): the streaming kernels convert x where they load it, the
// blocked and prefill shapes where the driver packs x. The conversion is
// exact, so every case gives the bytes of the f32 run on X converted first:
// every shape (streaming, blocked, prefill), both register widths, weight
// types and layouts (8-bit, 4-bit with and without the 8-k layout, per
// channel and grouped, zero points), K tails (odd K, groups whose steps
// leave a remainder to the unrolled loop), N and M tails, threads 1, 2 and
// 3; and through the public API with a run-time M.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/convert.h"
#include "dispatch/dispatcher.h"
#include "dispatch/host_platform.h"
#include "kernels/jit/matmul/matmul_wc.h"
#include "qconv/matmul.h"
#include "rows/row.h"
#include "tests/support/testdata.h"

namespace qconv {
namespace {

using zpk = matmul_desc::zp_kind;

const impl::matmul_entry &row_named(const std::string &name) {
    for (const auto &e : impl::matmul_list())
        if (e.name == name) return e;
    throw std::runtime_error("no row " + name);
}

impl::platform detected_platform() {
    impl::platform p;
    p.level = impl::detected_isa();
    p.features = impl::detected_features();
    return p;
}

const char *const f32_rows[] = {"jit:matmul_wc_x8:avx512_core", "jit:matmul_wc_x4:avx512_core", "jit:matmul_wc_x8:avx2",
                                "jit:matmul_wc_x4:avx2"};

bool host_runs(const std::string &row) { return detected_platform().has_all(row_named(row).needs); }
bool is_x4(const std::string &row) { return row_named(row).weight_bits == 4; }

// X rounded to the type (the 16-bit words) and the same values in f32.
struct typed_x {
    std::vector<uint16_t> x16;
    std::vector<float> x32;
};
typed_x make_x(const std::vector<float> &x, dtype dt) {
    typed_x t;
    t.x16.resize(x.size());
    t.x32.resize(x.size());
    detail::from_f32(dt, x.data(), t.x16.data(), int64_t(x.size()), false);
    detail::to_f32(dt, t.x16.data(), t.x32.data(), int64_t(x.size()), false);
    return t;
}

// The row's kernel for d in the shape its table plan picks (prefill false)
// or in the prefill shape.
std::shared_ptr<const impl::matmul_kernel> kernel_for(const std::string &row, const matmul_desc &d, bool prefill) {
    std::string why;
    const impl::plan_ptr pl = row_named(row).supports(d, {}, detected_platform(), &why);
    if (!pl) throw std::runtime_error(row + " refuses " + d.key() + ": " + why);
    if (!prefill) return row_named(row).create(d, {}, *pl);
    const auto &decided = dynamic_cast<const impl::matmul_wc_plan &>(*pl);
    return row_named(row).create(d, {}, impl::plan_matmul_wc(d, decided.width, impl::matmul_wc_plan::shape::prefill));
}

// f16 and bf16 X read by the kernel: the bytes of execute() on the converted
// X, for threads 1, 2 and 3.
void check_same_bytes(const std::string &row, const matmul_desc &d, bool prefill, uint32_t seed) {
    SCOPED_TRACE(row + " " + d.key() + " " + to_string(d.wei_dt) + " group " + std::to_string(d.group) + " zp " +
                 to_string(d.zp) + (prefill ? " prefill" : ""));
    const testdata::matmul_data c = testdata::make_matmul_data(d, seed);
    const auto kernel = kernel_for(row, d, prefill);
    const auto packed = kernel->pack(c.weights());
    const size_t ny = size_t(d.m * d.n);
    for (dtype dt : {dtype::f16, dtype::bf16}) {
        ASSERT_TRUE(kernel->takes_x(dt));
        const typed_x t = make_x(c.x, dt);
        std::vector<float> want(ny, -1.f);
        kernel->execute(*packed, t.x32.data(), want.data(), 1);
        for (int threads : {1, 2, 3}) {
            std::vector<float> got(ny, 5.f);
            kernel->execute_x(*packed, t.x16.data(), dt, got.data(), threads);
            ASSERT_EQ(0, std::memcmp(got.data(), want.data(), ny * sizeof(float)))
                << to_string(dt) << " threads " << threads;
        }
    }
}

struct layout_case {
    dtype wei;
    int64_t group; // 0: per output channel
    zpk zp;
    std::vector<int64_t> ks;
};

// Per row: the layouts and the K of each (odd K only per channel for 4-bit).
std::vector<layout_case> layouts(const std::string &row) {
    if (!is_x4(row))
        return {{dtype::u8, 0, zpk::none, {1, 37, 300, 600}}, // 600: pieces of 256 k in a loop
                {dtype::s8, 32, zpk::per_group, {96}},
                {dtype::u8, 128, zpk::per_tensor, {640}}};
    return {{dtype::u4, 128, zpk::per_group, {384}},   // zmm: the 8-k layout
            {dtype::s4, 0, zpk::none, {13, 301, 601}}, // odd K: a padded k
            {dtype::u4, 6, zpk::per_group, {42}},      // zmm: lut without the 8-k layout
            {dtype::s4, 24, zpk::per_tensor, {72}}};   // 3 steps of 8 k: no full unrolled pair
}

class X16Rows : public testing::TestWithParam<std::string> {};

TEST_P(X16Rows, StreamingAndBlockedShapesGiveTheBytesOfConvertingFirst) {
    const std::string row = GetParam();
    if (!host_runs(row)) GTEST_SKIP() << row << " needs an ISA this CPU lacks";
    uint32_t seed = 1;
    for (const layout_case &l : layouts(row))
        for (int64_t k : l.ks)
            for (int64_t m : {1, 2, 3, 4, 5, 14})
                for (int64_t n : {13, 200}) {
                    if (k < 16 && n == 200 && m > 2) continue;
                    matmul_desc d;
                    d.m = m, d.k = k, d.n = n, d.wei_dt = l.wei, d.group = l.group, d.zp = l.zp;
                    d.with_bias = m % 2 == 1;
                    check_same_bytes(row, d, false, seed++);
                    if (HasFatalFailure()) return;
                }
}

TEST_P(X16Rows, PrefillShapeGivesTheBytesOfConvertingFirst) {
    const std::string row = GetParam();
    if (!host_runs(row)) GTEST_SKIP() << row << " needs an ISA this CPU lacks";
    uint32_t seed = 100;
    for (const layout_case &l : layouts(row))
        for (int64_t m : {1, 7, 40}) {
            matmul_desc d;
            d.m = m, d.k = l.ks.back(), d.n = 100, d.wei_dt = l.wei, d.group = l.group, d.zp = l.zp;
            d.with_bias = true;
            check_same_bytes(row, d, true, seed++);
            if (HasFatalFailure()) return;
        }
}

// Through the public API, the row forced: a run-time M over the streaming,
// blocked and prefill classes (and a chunk padded to its class's M), X of
// 16-bit types against the f32 primitive on the converted X.
TEST_P(X16Rows, RunTimeMGivesTheBytesOfConvertingFirst) {
    const std::string row = GetParam();
    // The public API runs under the cap (QCONV_MAX_CPU_ISA) too.
    if (!impl::host_platform().has_all(row_named(row).needs)) GTEST_SKIP() << row << " is above this platform";
    matmul_desc d;
    d.m = matmul_desc::runtime_m, d.k = 264, d.n = 72, d.wei_dt = is_x4(row) ? dtype::u4 : dtype::u8;
    d.group = 24, d.zp = zpk::per_group, d.with_bias = true;
    matmul_desc data_desc = d;
    data_desc.m = 70;
    const testdata::matmul_data c = testdata::make_matmul_data(data_desc, 9);
    matmul_hints h;
    h.impl = row;
    const matmul f32(d, c.weights(), h);
    for (dtype dt : {dtype::f16, dtype::bf16}) {
        matmul_desc dt_desc = d;
        dt_desc.src_dt = dt;
        const matmul typed(dt_desc, c.weights(), h);
        const typed_x t = make_x(c.x, dt);
        for (int64_t m : {1, 2, 3, 5, 17, 24, 70})
            for (int threads : {1, 3}) {
                std::vector<float> want(size_t(m * d.n), -1.f), got(size_t(m * d.n), 2.f);
                f32.execute(t.x32.data(), want.data(), m, threads);
                typed.execute_typed(t.x16.data(), got.data(), m, threads);
                ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
                    << to_string(dt) << " m " << m << " threads " << threads << " " << typed.impl_name(m);
            }
    }
}

INSTANTIATE_TEST_SUITE_P(F32Rows, X16Rows,
                         testing::ValuesIn(std::vector<std::string>(std::begin(f32_rows), std::end(f32_rows))),
                         [](const testing::TestParamInfo<std::string> &i) {
                             std::string s = i.param.substr(i.param.find(':') + 1);
                             for (char &ch : s)
                                 if (ch == ':') ch = '_';
                             return s;
                         });

} // namespace
} // namespace qconv
