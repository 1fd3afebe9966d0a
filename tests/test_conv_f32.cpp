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

f32_post_op make_op(f32_post_op::kind k, std::vector<float> values = {}, float lo = 0.f, float hi = 0.f) {
    f32_post_op o;
    o.k = k;
    o.values = std::move(values);
    o.lo = lo;
    o.hi = hi;
    return o;
}

std::vector<float> per_channel(int64_t oc, uint32_t seed, float lo, float hi) {
    testdata::rng r(seed);
    std::vector<float> v(static_cast<size_t>(oc));
    for (auto &x : v) x = static_cast<float>(r.uniform(lo, hi));
    return v;
}

// Post-op chains (each kind; a scale-shift after a hard-swish as PP-OCR
// writes it; a BatchNormalization after a Relu, then a clip) on every row
// against the reference's chain: the reference row exactly, oneDNN within
// its summation order (the chains' slopes are at most ~2·2).
TEST_P(ConvF32Rows, PostOpChainsMatchTheReference) {
    using k = f32_post_op::kind;
    for (const std::string text : {"mb2ic17ih9oc23kh3ph1", "g8mb1ic8ih7oc8kh3ph1", "mb1ic64ih5oc32kh1"}) {
        const f32_case c = make_case(text);
        const int64_t oc = c.d.oc;
        const std::vector<f32_post_ops> chains = {
            {make_op(k::relu)},
            {make_op(k::clip, {}, -0.05f, 0.07f)},
            {make_op(k::hardswish)},
            {make_op(k::hardswish), make_op(k::multiply, {1.7f}), make_op(k::add, {-0.3f})},
            {make_op(k::relu), make_op(k::multiply, per_channel(oc, 5, 0.5f, 2.f)),
             make_op(k::add, per_channel(oc, 6, -1.f, 1.f)), make_op(k::clip, {}, 0.f, 6.f)},
            {make_op(k::add, {0.25f}), make_op(k::multiply, {-2.f}), make_op(k::hardswish), make_op(k::relu)},
        };
        for (const f32_post_ops &post : chains) {
            std::vector<float> want(c.want.size());
            ref::conv_f32(c.d, c.src.data(), c.wei.data(), c.bias.data(), want.data(), post);
            const convolution_f32 conv(c.d, c.wei.data(), c.bias.data(), GetParam(), post);
            EXPECT_EQ(conv.impl_name(), GetParam());
            EXPECT_EQ(conv.post_ops().size(), post.size());
            for (int threads : {1, 2}) {
                std::vector<float> got(want.size(), -7.f);
                conv.execute(c.src.data(), got.data(), threads);
                int bad = 0, changed = 0;
                for (size_t i = 0; i < got.size(); ++i) {
                    const float tol = GetParam().rfind("ref", 0) == 0 ? 0.f : 1e-4f * std::max(c.mag[i], 1.f);
                    changed += want[i] != c.want[i];
                    if (std::fabs(got[i] - want[i]) > tol && ++bad < 5)
                        ADD_FAILURE() << text << " chain of " << post.size() << " starting " << to_string(post[0].k)
                                      << " t" << threads << " element " << i << ": got " << got[i] << ", want "
                                      << want[i];
                }
                EXPECT_GT(changed, static_cast<int>(got.size() / 4)) << "the chain changes the outputs";
            }
        }
    }
}

// The post-ops' own arithmetic, on a 1x1 convolution with weight 1 (its
// outputs are its inputs exactly): relu, clip, add and multiply give the
// reference's bits on every row; oneDNN's hard-swish is within 2^-21 of
// y·min(max(y + 3, 0), 6)/6 relative (it multiplies by 1/6), exact at 0 and
// at the clamp's corners; values across the f32 range, ±0, denormals, ±3.
TEST_P(ConvF32Rows, PostOpArithmeticOnExactOutputs) {
    using k = f32_post_op::kind;
    std::vector<float> xs = {0.f,   -0.f,   1e-40f, -1e-40f, 3.f,   -3.f, 2.9999998f, -3.0000002f, 6.f,      -6.f,
                             1e30f, -1e30f, 1e-20f, 0.5f,    -0.5f, 2.5f, -2.5f,      7.f,         123.456f, -1.234f};
    testdata::rng r(9);
    while (xs.size() < 4096) xs.push_back(static_cast<float>(r.uniform(-8, 8)));
    const conv_desc d = conv_desc::parse("mb1ic1ih64iw64oc1kh1");
    const float one = 1.f;
    const std::vector<f32_post_ops> chains = {{make_op(k::relu)},
                                              {make_op(k::clip, {}, -2.5f, 3.25f)},
                                              {make_op(k::add, {0.1f})},
                                              {make_op(k::multiply, {-1.3f})},
                                              {make_op(k::hardswish)}};
    for (const f32_post_ops &post : chains) {
        const convolution_f32 conv(d, &one, nullptr, GetParam(), post);
        std::vector<float> got(xs.size(), -7.f);
        conv.execute(xs.data(), got.data(), 1);
        const bool bounded = post[0].k == k::hardswish && GetParam().rfind("ref", 0) != 0;
        for (size_t i = 0; i < xs.size(); ++i) {
            const float want = ref::apply_f32_post_op(post[0], xs[i], 0);
            if (!bounded) {
                EXPECT_EQ(got[i], want) << to_string(post[0].k) << " of " << xs[i];
                continue;
            }
            EXPECT_LE(std::fabs(got[i] - want), std::ldexp(std::fabs(want), -21)) << "hardswish of " << xs[i];
            if (xs[i] == 0.f || xs[i] <= -3.f || xs[i] == 3.f) EXPECT_EQ(got[i], want) << "hardswish of " << xs[i];
        }
    }
}

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
    f32_post_op two;
    two.k = f32_post_op::kind::add;
    two.values = {1.f, 2.f};
    test::expect_error_prefix([&] { convolution_f32(c.d, c.wei.data(), nullptr, "auto", {two}); }, "post",
                              "post[0] (add): 2 values, expected 1 or oc = 8");
    f32_post_op clip;
    clip.k = f32_post_op::kind::clip;
    clip.lo = 1.f;
    clip.hi = std::nanf("");
    test::expect_error_prefix([&] { convolution_f32(c.d, c.wei.data(), nullptr, "auto", {clip}); }, "post",
                              "post[0] (clip): lo");
}

} // namespace
} // namespace qconv
