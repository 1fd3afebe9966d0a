// The 8-bit table lookups of the LookupTable op (graph/ops/lut.h) against a
// plain loop over every element: lengths around the 64-byte vector and the
// parallel threshold, every byte value, and each broadcast geometry of the
// second input.
#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <random>
#include <vector>

#include "graph/ops/lut.h"

namespace {

using qconv::graph::detail::lut2_geometry;

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 g(seed);
    std::vector<uint8_t> v(n);
    for (auto &x : v) x = static_cast<uint8_t>(g());
    return v;
}

TEST(GraphLut, UnaryEveryValueAndLength) {
    const auto table = random_bytes(256, 7);
    for (int64_t n : {1, 63, 64, 65, 255, 256, 1000, 65536 + 77, 300000}) {
        auto x = random_bytes(static_cast<size_t>(n), static_cast<uint32_t>(n));
        for (int64_t i = 0; i < n && i < 256; ++i) x[i] = static_cast<uint8_t>(i); // every value appears
        std::vector<uint8_t> y(x.size(), 0xAA);
        qconv::graph::detail::lut_unary(x.data(), n, table.data(), y.data());
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], table[x[i]]) << "n=" << n << " i=" << i;
    }
}

TEST(GraphLut, PerChannelPlainAndNhwc) {
    const int64_t N = 2, C = 5, HW = 77;
    const auto table = random_bytes(static_cast<size_t>(C * 256), 9);
    const auto x = random_bytes(static_cast<size_t>(N * C * HW), 4);
    for (bool nhwc : {false, true}) {
        std::vector<uint8_t> y(x.size(), 0xAA);
        qconv::graph::detail::lut_per_channel(x.data(), N, C, HW, nhwc, table.data(), y.data());
        for (int64_t n = 0; n < N; ++n)
            for (int64_t c = 0; c < C; ++c)
                for (int64_t p = 0; p < HW; ++p) {
                    const int64_t k = nhwc ? (n * HW + p) * C + c : (n * C + c) * HW + p;
                    ASSERT_EQ(y[k], table[c * 256 + x[k]]) << (nhwc ? "nhwc" : "plain") << " at " << k;
                }
    }
}

struct lut2_case {
    const char *name;
    lut2_geometry g;
    int64_t b_elems;
};

void PrintTo(const lut2_case &c, std::ostream *os) { *os << c.name; }

class GraphLutBinary : public ::testing::TestWithParam<lut2_case> {};

TEST_P(GraphLutBinary, MatchesPlainLoop) {
    const lut2_case &c = GetParam();
    const auto table = random_bytes(65536, 11);
    const int64_t n = c.g.outer * c.g.mid * c.g.inner;
    const auto a = random_bytes(static_cast<size_t>(n), 3), b = random_bytes(static_cast<size_t>(c.b_elems), 5);
    std::vector<uint8_t> y(static_cast<size_t>(n), 0xAA);
    qconv::graph::detail::lut_binary(a.data(), b.data(), c.g, table.data(), y.data());
    for (int64_t o = 0; o < c.g.outer; ++o)
        for (int64_t m = 0; m < c.g.mid; ++m)
            for (int64_t i = 0; i < c.g.inner; ++i) {
                const int64_t k = (o * c.g.mid + m) * c.g.inner + i;
                const int64_t bk = o * c.g.b_outer + m * c.g.b_mid + i * c.g.b_inner;
                ASSERT_EQ(y[k], table[a[k] * 256 + b[bk]]) << c.name << " at " << k;
            }
}

INSTANTIATE_TEST_SUITE_P(Geometries, GraphLutBinary,
                         ::testing::Values(lut2_case{"equal_shapes", {1, 1, 100003, 0, 0, 1}, 100003},
                                           lut2_case{"nhwc_per_channel_n2", {2, 3000, 24, 24, 0, 1}, 48},
                                           lut2_case{"plain_per_channel_n2", {2 * 24, 1, 3000, 1, 0, 0}, 48},
                                           lut2_case{"scalar", {1, 1, 777, 0, 0, 0}, 1}),
                         [](const auto &info) { return std::string(info.param.name); });

} // namespace
