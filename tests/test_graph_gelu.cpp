// The executor's Gelu (erf form, graph/ops/eval.cpp): the vectorized erf
// against erf in double on a dense grid of x, and the special values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "qconv/graph.h"

using namespace qconv::graph;

namespace {

TEST(GraphGelu, ErfFormWithinItsBoundOnADenseGrid) {
    std::vector<float> xs;
    for (double v = -12; v <= 12; v += 1.0 / 4096) xs.push_back(float(v));
    for (float v : {0.7999999f, 0.8f, 1.1313708f, 1.9999999f, 2.f, 2.8284271f, 3.9199998f, 3.92f, 5.5437350f})
        for (float s : {1.f, -1.f}) xs.push_back(s * v * 1.4142135f); // z = |x|/sqrt(2) at the piece ends
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> specials = {0.f, -0.f, inf, -inf, std::nanf(""), 3e38f, -3e38f, 1e-40f, -1e-40f};
    xs.insert(xs.end(), specials.begin(), specials.end());
    const int64_t n = int64_t(xs.size());
    auto g = parse("x = Parameter f32[" + std::to_string(n) + "]\ne = Gelu(x)\no = Result(e)\n");
    const auto out = compiled_graph(*g).run({tensor::from_f32(dtype::f32, {n}, xs)});
    const std::vector<float> y = out[0].to_f32();
    ASSERT_EQ(int64_t(y.size()), n);
    const size_t first_special = xs.size() - specials.size();
    double worst = 0;
    for (size_t i = 0; i < first_special; ++i) {
        const double v = xs[i], want = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
        worst = std::max(worst, std::fabs(y[i] - want));
        ASSERT_NEAR(y[i], want, 5e-7 + 2e-7 * std::fabs(want)) << "x=" << v;
    }
    EXPECT_LT(worst, 5e-7);
    const float *s = &y[first_special];
    EXPECT_EQ(s[0], 0.f);
    EXPECT_TRUE(std::signbit(s[1]) && s[1] == 0.f);
    EXPECT_EQ(s[2], inf);
    EXPECT_TRUE(std::isnan(s[3])); // −inf · (1 + erf(−inf)) = −inf · 0, as 0.5·x·(1 + erf(x/√2)) in f32
    EXPECT_TRUE(std::isnan(s[4]));
    EXPECT_EQ(s[5], 3e38f);
    EXPECT_EQ(s[6], 0.f);
    EXPECT_EQ(s[7], 0.5f * 1e-40f);
    EXPECT_EQ(s[8], -0.5f * 1e-40f);
}

} // namespace
