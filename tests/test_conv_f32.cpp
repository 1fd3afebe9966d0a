// The f32 convolution primitive (qconv::convolution_f32): its table, the
// choice of "auto", every row against the reference, and its error contract.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "qconv/conv_f32.h"
#include "reference/reference.h"
#include "tests/support/expect_error.h"
#include "tests/support/testdata.h"

namespace qconv {
namespace {

std::vector<float> ramp(size_t n, uint32_t seed, float scale) {
    testdata::rng r(seed);
    std::vector<float> v(n);
    for (auto &x : v) x = static_cast<float>(r.uniform(-1000, 1000)) * scale;
    return v;
}

struct f32_case {
    conv_desc d;
    std::vector<float> src, wei, bias, want, mag;
};

f32_case make_case(const std::string &text) {
    f32_case c{conv_desc::parse(text), {}, {}, {}, {}, {}};
    const conv_desc &d = c.d;
    c.src = ramp(static_cast<size_t>(d.src_elems()), 1, 1e-3f);
    c.wei = ramp(static_cast<size_t>(d.wei_elems()), 2, 1e-3f);
    c.bias = ramp(static_cast<size_t>(d.oc), 3, 1e-2f);
    c.want.resize(static_cast<size_t>(d.dst_elems()));
    ref::conv_f32(d, c.src.data(), c.wei.data(), c.bias.data(), c.want.data());
    // Magnitudes: the same convolution on |src|, |wei|, |bias| (the tolerance scale).
    std::vector<float> as(c.src), aw(c.wei), ab(c.bias);
    for (auto *v : {&as, &aw, &ab})
        for (auto &x : *v) x = std::fabs(x);
    c.mag.resize(c.want.size());
    ref::conv_f32(d, as.data(), aw.data(), ab.data(), c.mag.data());
    return c;
}

class ConvF32Rows : public ::testing::TestWithParam<std::string> {};

TEST_P(ConvF32Rows, MatchTheReference) {
    for (const std::string text :
         {"mb2ic17ih9oc23kh3ph1", "g4mb1ic32ih7oc16kh3sh2ph1", "mb1ic64ih5oc32kh1", "mb1ic8ih10oc8kh3dh1ph2",
          // outputs that read only padding (semantics §2): first row / last column, end pads, strided
          "mb1ic8ih6iw6oc16kh1ph1pw0oh7ow7", "mb2ic16ih5oc8kh3ph1oh8", "g2mb1ic8ih8oc8kh3sh2ph4oh7"}) {
        const f32_case c = make_case(text);
        const convolution_f32 conv(c.d, c.wei.data(), c.bias.data(), GetParam());
        EXPECT_EQ(conv.impl_name(), GetParam());
        for (int threads : {1, 2, 3}) {
            std::vector<float> got(c.want.size(), -7.f);
            conv.execute(c.src.data(), got.data(), threads);
            int bad = 0;
            for (size_t i = 0; i < got.size(); ++i) {
                // The reference row is the reference; oneDNN sums in its own order.
                const float tol = GetParam().rfind("ref", 0) == 0 ? 0.f : 1e-5f * std::max(c.mag[i], 1.f);
                if (std::fabs(got[i] - c.want[i]) > tol && ++bad < 5)
                    ADD_FAILURE() << text << " t" << threads << " element " << i << ": got " << got[i] << ", want "
                                  << c.want[i];
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Table, ConvF32Rows, ::testing::ValuesIn(conv_f32_implementations()),
                         [](const ::testing::TestParamInfo<std::string> &i) {
                             std::string n = i.param;
                             std::replace(n.begin(), n.end(), ':', '_');
                             return n;
                         });

TEST(ConvF32, TableEndsWithTheReferenceAndAutoTakesTheFirstRow) {
    const auto names = conv_f32_implementations();
    ASSERT_EQ(names, (std::vector<std::string>{"onednn:conv_f32", "ref:conv_f32"}));
    const f32_case c = make_case("mb1ic16ih6oc8kh3ph1");
    EXPECT_EQ(convolution_f32(c.d, c.wei.data(), nullptr).impl_name(), "onednn:conv_f32");
}

// Pad-only outputs do not send auto to the reference (oneDNN takes them).
TEST(ConvF32, AutoTakesPadOnlyOutputsOnOneDnn) {
    for (const char *text : {"mb1ic8ih6iw6oc16kh1ph1pw0oh7ow7", "mb2ic16ih5oc8kh3ph1oh8"}) {
        const f32_case c = make_case(text);
        EXPECT_EQ(convolution_f32(c.d, c.wei.data(), c.bias.data()).impl_name(), "onednn:conv_f32") << text;
    }
}

TEST(ConvF32, BadInputNamesTheField) {
    const f32_case c = make_case("mb1ic16ih6oc8kh3ph1");
    test::expect_error_prefix([&] { convolution_f32(c.d, nullptr, nullptr); }, "weights");
    test::expect_error_prefix([&] { convolution_f32(c.d, c.wei.data(), nullptr, "onednn:nope"); }, "impl",
                              "valid: auto, onednn:conv_f32, ref:conv_f32");
    const convolution_f32 conv(c.d, c.wei.data(), nullptr);
    std::vector<float> dst(c.want.size());
    test::expect_error_prefix([&] { conv.execute(nullptr, dst.data()); }, "src");
    test::expect_error_prefix([&] { conv.execute(c.src.data(), nullptr); }, "dst");
    conv_desc bad = c.d;
    bad.oc = 0;
    test::expect_error_prefix([&] { convolution_f32(bad, c.wei.data(), nullptr); }, "oc");
}

} // namespace
} // namespace qconv
