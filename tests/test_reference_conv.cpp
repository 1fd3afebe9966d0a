// The reference int8 convolution: hand-computed small cases for every feature
// (expected numbers written here), the equivalences between zero-point
// mechanisms, extreme data against exact int64 sums, and a random sweep
// against a naive seven-loop convolution written in this file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "reference/reference.h"

using namespace qconv;

namespace {

// A test's shape: every size 1 (mb too), stride 1, no padding, dense; the
// test sets what it needs and make_desc() derives the output size.
struct shape : conv_desc {
    shape() { mb = ic = ih = iw = oc = kh = kw = 1; }
    shape &batch(int64_t n) { return mb = n, *this; }
    shape &channels(int64_t groups, int64_t in, int64_t out) { return g = groups, ic = in, oc = out, *this; }
    shape &image(int64_t h, int64_t w) { return ih = h, iw = w, *this; }
    shape &kernel(int64_t h, int64_t w) { return kh = h, kw = w, *this; }
    shape &pads(int64_t top, int64_t left, int64_t bottom, int64_t right) {
        return pt = top, pl = left, pb = bottom, pr = right, *this;
    }
    shape &stride(int64_t h, int64_t w) { return sh = h, sw = w, *this; }
    shape &dilation(int64_t h, int64_t w) { return dh = h, dw = w, *this; }
};

conv_desc make_desc(const shape &s) {
    conv_desc d = s;
    d.oh = (s.ih + s.pt + s.pb - s.kh_extent()) / s.sh + 1;
    d.ow = (s.iw + s.pl + s.pr - s.kw_extent()) / s.sw + 1;
    return d;
}

conv_problem make_problem(const shape &s, dtype src = dtype::u8, dtype dst = dtype::s32) {
    conv_problem p;
    p.desc = make_desc(s);
    p.src_dt = src;
    p.dst_dt = dst;
    return p;
}

std::vector<int32_t> acc_of(const conv_problem &p, zp_mechanism m, const std::vector<int32_t> &zp, const void *src,
                            const std::vector<int8_t> &wei) {
    std::vector<int32_t> acc(static_cast<size_t>(p.desc.dst_elems()), -777);
    ref::conv_acc(p, m, zp, src, wei.data(), acc.data());
    return acc;
}

// Runs ref::conv and returns dst as a vector of T.
template <typename T>
std::vector<T> run(const conv_problem &p, const attr_set &attr, const void *src, const std::vector<int8_t> &wei,
                   const float *bias = nullptr, std::vector<T> dst = {}, const exec_args &args = {}) {
    if (dst.empty()) dst.assign(static_cast<size_t>(p.desc.dst_elems()), T(99));
    ref::conv(p, attr, src, wei.data(), bias, dst.data(), args);
    return dst;
}

attr_set ops_only(std::vector<lowered_op> ops) {
    attr_set a;
    a.ops = std::move(ops);
    return a;
}

lowered_op eltwise(eltwise_alg alg, float alpha = 0.f, float beta = 0.f) {
    lowered_op op;
    op.k = lowered_op::kind::eltwise;
    op.alg = alg;
    op.alpha = alpha;
    op.beta = beta;
    return op;
}

lowered_op binary(binary_alg alg, broadcast b, std::vector<float> a, int full_index = -1) {
    lowered_op op;
    op.k = lowered_op::kind::binary;
    op.balg = alg;
    op.bcast = b;
    op.a = std::move(a);
    op.full_index = full_index;
    return op;
}

// Naive definition, int64: Σ over valid taps of w·(x − zp[ic]).
template <typename T>
std::vector<int64_t> naive_acc(const conv_desc &d, const T *x, const std::vector<int8_t> &w,
                               const std::vector<int32_t> &zp) {
    std::vector<int64_t> out(static_cast<size_t>(d.dst_elems()));
    const int64_t icg = d.icg(), ocg = d.ocg();
    for (int64_t n = 0; n < d.mb; ++n)
        for (int64_t oh = 0; oh < d.oh; ++oh)
            for (int64_t ow = 0; ow < d.ow; ++ow)
                for (int64_t oc = 0; oc < d.oc; ++oc) {
                    int64_t s = 0;
                    const int64_t g = oc / ocg;
                    for (int64_t ic = 0; ic < icg; ++ic)
                        for (int64_t kh = 0; kh < d.kh; ++kh)
                            for (int64_t kw = 0; kw < d.kw; ++kw) {
                                const int64_t ih = oh * d.sh - d.pt + kh * d.dh;
                                const int64_t iw = ow * d.sw - d.pl + kw * d.dw;
                                if (ih < 0 || ih >= d.ih || iw < 0 || iw >= d.iw) continue;
                                const int64_t c = g * icg + ic;
                                const int64_t xv = x[((n * d.ih + ih) * d.iw + iw) * d.ic + c];
                                const int64_t z = zp.empty() ? 0 : zp.size() == 1 ? zp[0] : zp[c];
                                s += int64_t(w[((oc * icg + ic) * d.kh + kh) * d.kw + kw]) * (xv - z);
                            }
                    out[((n * d.oh + oh) * d.ow + ow) * d.oc + oc] = s;
                }
    return out;
}

std::vector<int32_t> to_i32(const std::vector<int64_t> &v) { return {v.begin(), v.end()}; }

} // namespace

// ----------------------------------------------------------------- geometry

TEST(RefConv, OneByOneTwoChannels) {
    shape s;
    s.ic = 2;
    s.iw = 2;
    s.oc = 2;
    const conv_problem p = make_problem(s);
    const std::vector<uint8_t> x = {1, 2, 3, 4}; // pixel0 (1,2), pixel1 (3,4)
    const std::vector<int8_t> w = {1, -1, 2, 3}; // oc0 (1,-1), oc1 (2,3)
    EXPECT_EQ(run<int32_t>(p, {}, x.data(), w), (std::vector<int32_t>{-1, 8, -1, 18}));
}

// 3x3 image 1..9, 3x3 kernel 1..9 (row-major), asymmetric pads.
TEST(RefConv, AsymmetricPads) {
    const std::vector<uint8_t> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    const std::vector<int8_t> w = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    const conv_problem top_right = make_problem(shape().image(3, 3).kernel(3, 3).pads(1, 0, 0, 1));
    ASSERT_EQ(top_right.desc.oh, 2);
    ASSERT_EQ(top_right.desc.ow, 2);
    // (0,0): 4·1+5·2+6·3 + 7·4+8·5+9·6 = 154; (0,1): 4·2+5·3 + 7·5+8·6 = 106;
    // (1,0): full window = 285; (1,1): 1·2+2·3 + 4·5+5·6 + 7·8+8·9 = 186.
    EXPECT_EQ(run<int32_t>(top_right, {}, x.data(), w), (std::vector<int32_t>{154, 106, 285, 186}));
    // Left and bottom: the same windows, mirrored.
    const conv_problem left_bottom = make_problem(shape().image(3, 3).kernel(3, 3).pads(0, 1, 1, 0));
    EXPECT_EQ(run<int32_t>(left_bottom, {}, x.data(), w), (std::vector<int32_t>{186, 285, 106, 154}));
}

TEST(RefConv, AllPaddingWindowIsZero) {
    // 1x1 image, 3x3 kernel, pads of 3 on the top: the first output rows see only padding.
    const conv_problem p = make_problem(shape().kernel(3, 3).pads(4, 1, 1, 1));
    ASSERT_EQ(p.desc.oh, 4);
    ASSERT_EQ(p.desc.ow, 1);
    const std::vector<uint8_t> x = {7};
    const std::vector<int8_t> w = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    // ih = oh − 4 + kh: oh 0 and 1 see only padding; oh 2 hits with kh 2 (w[2][1] = 8),
    // oh 3 with kh 1 (w[1][1] = 5).
    EXPECT_EQ(run<int32_t>(p, {}, x.data(), w), (std::vector<int32_t>{0, 0, 56, 35}));
}

// 5x5 image x[h][w] = 5h+w, 2x2 kernel (1,2,3,4), stride 2, dilation 2.
TEST(RefConv, StrideAndDilation) {
    const conv_problem p = make_problem(shape().image(5, 5).kernel(2, 2).stride(2, 2).dilation(2, 2));
    ASSERT_EQ(p.desc.oh, 2);
    std::vector<uint8_t> x(25);
    for (int i = 0; i < 25; ++i) x[i] = static_cast<uint8_t>(i);
    const std::vector<int8_t> w = {1, 2, 3, 4};
    // (0,0): 1·0+2·2+3·10+4·12 = 82, then +20 per step in ow, +100 per step in oh.
    EXPECT_EQ(run<int32_t>(p, {}, x.data(), w), (std::vector<int32_t>{82, 102, 182, 202}));
}

TEST(RefConv, AsymmetricStride) {
    // 1x4 image (1,2,3,4), 1x2 kernel (1,10), sw=2 → (1+20, 3+40).
    const conv_problem p = make_problem(shape().image(1, 4).kernel(1, 2).stride(3, 2));
    const std::vector<uint8_t> x = {1, 2, 3, 4};
    const std::vector<int8_t> w = {1, 10};
    EXPECT_EQ(run<int32_t>(p, {}, x.data(), w), (std::vector<int32_t>{21, 43}));
}

TEST(RefConv, Groups) {
    const conv_problem p = make_problem(shape().channels(2, 4, 4));
    const std::vector<uint8_t> x = {1, 2, 3, 4};
    const std::vector<int8_t> w = {1, 1, 1, -1, 2, 0, 0, -3}; // [oc][icg]
    // group 0 sees (1,2), group 1 sees (3,4).
    EXPECT_EQ(run<int32_t>(p, {}, x.data(), w), (std::vector<int32_t>{3, -1, 6, -12}));
}

TEST(RefConv, Depthwise) {
    const conv_problem p = make_problem(shape().channels(2, 2, 2).image(2, 2).kernel(3, 3).pads(1, 1, 1, 1));
    ASSERT_TRUE(p.desc.is_depthwise());
    // channel 0 = [[1,2],[3,4]], channel 1 = [[10,20],[30,40]] (NHWC interleaved)
    const std::vector<uint8_t> x = {1, 10, 2, 20, 3, 30, 4, 40};
    std::vector<int8_t> w(18);
    for (int i = 0; i < 9; ++i) {
        w[i] = 1;                              // channel 0: box filter
        w[9 + i] = static_cast<int8_t>(i + 1); // channel 1: 1..9
    }
    // Channel 0 always covers the whole image: 10. Channel 1, e.g. (0,0):
    // 10·5 + 20·6 + 30·8 + 40·9 = 770.
    EXPECT_EQ(run<int32_t>(p, {}, x.data(), w), (std::vector<int32_t>{10, 770, 10, 670, 10, 470, 10, 370}));
}

TEST(RefConv, SignedSource) {
    const conv_problem p = make_problem(shape().channels(1, 2, 1).image(1, 2), dtype::s8);
    const std::vector<int8_t> x = {-3, 100, -128, 127};
    const std::vector<int8_t> w = {5, -2};
    EXPECT_EQ(run<int32_t>(p, {}, x.data(), w), (std::vector<int32_t>{-215, -128 * 5 - 254}));
}

TEST(RefConv, MiniBatch) {
    const conv_problem p = make_problem(shape().batch(2));
    const std::vector<uint8_t> x = {3, 250};
    const std::vector<int8_t> w = {-2};
    EXPECT_EQ(run<int32_t>(p, {}, x.data(), w), (std::vector<int32_t>{-6, -500}));
}

// ------------------------------------------------------------ destinations

namespace {
// 1x1, ic1, oc2, 4 pixels x = (3,5,200,255), w = (1,−2), scale 0.5:
//   oc0: 1.5, 2.5, 100, 127.5     oc1: −3, −5, −200, −255
struct dst_case {
    shape s;
    std::vector<uint8_t> x = {3, 5, 200, 255};
    std::vector<int8_t> w = {1, -2};
    dst_case() {
        s.iw = 4;
        s.oc = 2;
    }
    conv_problem problem(dtype dst) const {
        conv_problem p = make_problem(s, dtype::u8, dst);
        p.scales = {0.5f};
        return p;
    }
};
} // namespace

TEST(RefConv, DstF32) {
    dst_case t;
    EXPECT_EQ(run<float>(t.problem(dtype::f32), {}, t.x.data(), t.w),
              (std::vector<float>{1.5f, -3, 2.5f, -5, 100, -200, 127.5f, -255}));
}

TEST(RefConv, DstS32RoundsHalfToEven) {
    dst_case t;
    EXPECT_EQ(run<int32_t>(t.problem(dtype::s32), {}, t.x.data(), t.w),
              (std::vector<int32_t>{2, -3, 2, -5, 100, -200, 128, -255}));
}

TEST(RefConv, DstS8Saturates) {
    dst_case t;
    EXPECT_EQ(run<int8_t>(t.problem(dtype::s8), {}, t.x.data(), t.w),
              (std::vector<int8_t>{2, -3, 2, -5, 100, -128, 127, -128}));
}

TEST(RefConv, DstU8Saturates) {
    dst_case t;
    EXPECT_EQ(run<uint8_t>(t.problem(dtype::u8), {}, t.x.data(), t.w),
              (std::vector<uint8_t>{2, 0, 2, 0, 100, 0, 128, 0}));
}

TEST(RefStore, RoundHalfToEvenAndSaturation) {
    int32_t i32[1];
    const std::vector<std::pair<float, int32_t>> s32 = {{0.5f, 0},
                                                        {1.5f, 2},
                                                        {2.5f, 2},
                                                        {-0.5f, 0},
                                                        {-1.5f, -2},
                                                        {-2.5f, -2},
                                                        {2.4999998f, 2},
                                                        {3e9f, INT32_MAX},
                                                        {-3e9f, INT32_MIN},
                                                        {2147483520.f, 2147483520},
                                                        {-2147483648.f, INT32_MIN},
                                                        {std::numeric_limits<float>::infinity(), INT32_MAX},
                                                        {std::nanf(""), 0}};
    for (auto [y, want] : s32) {
        ref::store(dtype::s32, i32, 0, y);
        EXPECT_EQ(i32[0], want) << y;
    }
    int8_t i8[2];
    ref::store(dtype::s8, i8, 1, 126.5f);
    EXPECT_EQ(i8[1], 126);
    ref::store(dtype::s8, i8, 1, 127.5f);
    EXPECT_EQ(i8[1], 127);
    ref::store(dtype::s8, i8, 1, -128.5f);
    EXPECT_EQ(i8[1], -128);
    ref::store(dtype::s8, i8, 1, -1000.f);
    EXPECT_EQ(i8[1], -128);
    uint8_t u8[1];
    ref::store(dtype::u8, u8, 0, 254.5f);
    EXPECT_EQ(u8[0], 254);
    ref::store(dtype::u8, u8, 0, 255.5f);
    EXPECT_EQ(u8[0], 255);
    ref::store(dtype::u8, u8, 0, -0.5f);
    EXPECT_EQ(u8[0], 0);
    ref::store(dtype::u8, u8, 0, -7.f);
    EXPECT_EQ(u8[0], 0);
    float f[1];
    ref::store(dtype::f32, f, 0, 2.75f);
    EXPECT_EQ(f[0], 2.75f);
    EXPECT_EQ(ref::load(dtype::u8, u8, 0), 0.f);
    EXPECT_EQ(ref::load(dtype::s8, i8, 1), -128.f);
    EXPECT_EQ(ref::load(dtype::s32, i32, 0), 0.f);
    EXPECT_EQ(ref::load(dtype::f32, f, 0), 2.75f);
    EXPECT_THROW(ref::store(dtype::u4, u8, 0, 1.f), qconv::error);
}

// ------------------------------------------------------- scale and bias

namespace {
// 1x1, ic1, oc2, 2 pixels x = (2,6), w = (1,−1): acc = (2,−2, 6,−6).
struct pipe_case {
    shape s;
    std::vector<uint8_t> x = {2, 6};
    std::vector<int8_t> w = {1, -1};
    pipe_case() {
        s.iw = 2;
        s.oc = 2;
    }
    conv_problem problem(dtype dst = dtype::f32) const { return make_problem(s, dtype::u8, dst); }
};
} // namespace

TEST(RefConv, PerTensorScaleAndBias) {
    pipe_case t;
    conv_problem p = t.problem();
    p.scales = {0.25f};
    p.with_bias = true;
    const std::vector<float> bias = {1, -2};
    EXPECT_EQ(run<float>(p, {}, t.x.data(), t.w, bias.data()), (std::vector<float>{1.5f, -2.5f, 2.5f, -3.5f}));
}

TEST(RefConv, PerOcScale) {
    pipe_case t;
    conv_problem p = t.problem();
    p.scales = {0.5f, 4.f};
    EXPECT_EQ(run<float>(p, {}, t.x.data(), t.w), (std::vector<float>{1, -8, 3, -24}));
}

TEST(RefConv, BiasIgnoredWithoutFlagAndRequiredWithIt) {
    pipe_case t;
    conv_problem p = t.problem();
    const std::vector<float> bias = {100, 100};
    EXPECT_EQ(run<float>(p, {}, t.x.data(), t.w, bias.data()), (std::vector<float>{2, -2, 6, -6}));
    p.with_bias = true;
    EXPECT_THROW(run<float>(p, {}, t.x.data(), t.w, nullptr), qconv::error);
}

TEST(RefConv, PipelineOrder) {
    // acc·scale + bias → linear(2, 0) → + dst_zp: 6·0.5+1 = 4 → 8 → 9.
    pipe_case t;
    conv_problem p = t.problem(dtype::s32);
    p.scales = {0.5f};
    p.with_bias = true;
    p.dst_zp = 1;
    const std::vector<float> bias = {1, 1};
    const auto y = run<int32_t>(p, ops_only({eltwise(eltwise_alg::linear, 2, 0)}), t.x.data(), t.w, bias.data());
    EXPECT_EQ(y, (std::vector<int32_t>{5, 1, 9, -3}));
}

TEST(RefConv, DstZeroPointBeforeSaturation) {
    pipe_case t;
    conv_problem p = t.problem(dtype::u8);
    p.dst_zp = 3;
    // (2,−2,6,−6) + 3 = (5, 1, 9, −3 → 0)
    EXPECT_EQ(run<uint8_t>(p, {}, t.x.data(), t.w), (std::vector<uint8_t>{5, 1, 9, 0}));
}

// --------------------------------------------------------------- eltwise

TEST(RefPostOps, EachEltwise) {
    struct c {
        eltwise_alg alg;
        float alpha, beta, x, want;
    };
    const std::vector<c> cases = {
        {eltwise_alg::relu, 0.f, 0.f, -2.f, 0.f},
        {eltwise_alg::relu, 0.5f, 0.f, -2.f, -1.f},
        {eltwise_alg::relu, 0.5f, 0.f, 3.f, 3.f},
        {eltwise_alg::clip, 0.f, 6.f, 7.f, 6.f},
        {eltwise_alg::clip, 0.f, 6.f, -1.f, 0.f},
        {eltwise_alg::clip, 0.f, 6.f, 2.5f, 2.5f},
        {eltwise_alg::linear, 2.f, 1.f, 3.f, 7.f},
        {eltwise_alg::gelu_erf, 0.f, 0.f, 1.f, 0.8413447f},
        {eltwise_alg::gelu_erf, 0.f, 0.f, -1.f, -0.1586553f},
        {eltwise_alg::gelu_tanh, 0.f, 0.f, 1.f, 0.8411920f},
        {eltwise_alg::swish, 1.f, 0.f, 1.f, 0.7310586f},
        {eltwise_alg::swish, 2.f, 0.f, -1.f, -0.1192029f},
        {eltwise_alg::hardswish, 0.f, 0.f, 1.f, 0.6666667f},
        {eltwise_alg::hardswish, 0.f, 0.f, -4.f, 0.f},
        {eltwise_alg::hardswish, 0.f, 0.f, 4.f, 4.f},
        {eltwise_alg::mish, 0.f, 0.f, 1.f, 0.8650984f},
        {eltwise_alg::logistic, 0.f, 0.f, 0.f, 0.5f},
        {eltwise_alg::logistic, 0.f, 0.f, 1.f, 0.7310586f},
        {eltwise_alg::tanh, 0.f, 0.f, 0.5f, 0.4621172f},
        {eltwise_alg::elu, 1.f, 0.f, -1.f, -0.6321206f},
        {eltwise_alg::elu, 1.f, 0.f, 2.f, 2.f},
        {eltwise_alg::abs, 0.f, 0.f, -3.f, 3.f},
        {eltwise_alg::sqrt, 0.f, 0.f, 6.25f, 2.5f},
        {eltwise_alg::square, 0.f, 0.f, -3.f, 9.f},
        {eltwise_alg::exp, 0.f, 0.f, 1.f, 2.7182817f},
        {eltwise_alg::round, 0.f, 0.f, 2.5f, 2.f},
        {eltwise_alg::round, 0.f, 0.f, 3.5f, 4.f},
        {eltwise_alg::round, 0.f, 0.f, -2.5f, -2.f},
        {eltwise_alg::round, 0.f, 0.f, 2.6f, 3.f},
    };
    for (const c &t : cases) {
        const float got = ref::apply_op(eltwise(t.alg, t.alpha, t.beta), t.x, 0, 0, 0.f, {});
        EXPECT_NEAR(got, t.want, 2e-7f * std::max(1.f, std::fabs(t.want))) << to_string(t.alg) << "(" << t.x << ")";
    }
}

TEST(RefPostOps, EltwiseInsideConv) {
    pipe_case t;
    const auto y =
        run<float>(t.problem(), ops_only({eltwise(eltwise_alg::relu), eltwise(eltwise_alg::square)}), t.x.data(), t.w);
    EXPECT_EQ(y, (std::vector<float>{4, 0, 36, 0}));
}

// ---------------------------------------------------------------- binary
// acc = (2,−2, 6,−6) at NHWC offsets 0..3 (offset = pixel·2 + oc).

TEST(RefPostOps, BinaryPerTensor) {
    pipe_case t;
    EXPECT_EQ(
        run<float>(t.problem(), ops_only({binary(binary_alg::add, broadcast::per_tensor, {1.5f})}), t.x.data(), t.w),
        (std::vector<float>{3.5f, -0.5f, 7.5f, -4.5f}));
    EXPECT_EQ(
        run<float>(t.problem(), ops_only({binary(binary_alg::div, broadcast::per_tensor, {4.f})}), t.x.data(), t.w),
        (std::vector<float>{0.5f, -0.5f, 1.5f, -1.5f}));
}

TEST(RefPostOps, BinaryPerOc) {
    pipe_case t;
    EXPECT_EQ(
        run<float>(t.problem(), ops_only({binary(binary_alg::sub, broadcast::per_oc, {1.f, 2.f})}), t.x.data(), t.w),
        (std::vector<float>{1, -4, 5, -8}));
    EXPECT_EQ(
        run<float>(t.problem(), ops_only({binary(binary_alg::max, broadcast::per_oc, {3.f, -1.f})}), t.x.data(), t.w),
        (std::vector<float>{3, -1, 6, -1}));
}

TEST(RefPostOps, BinaryFull) {
    pipe_case t;
    const std::vector<float> t0 = {1, 2, 3, 4}, t1 = {0, 0, 10, -10};
    exec_args args;
    args.binary = {t0.data(), t1.data()};
    EXPECT_EQ(run<float>(t.problem(), ops_only({binary(binary_alg::mul, broadcast::full, {}, 0)}), t.x.data(), t.w,
                         nullptr, {}, args),
              (std::vector<float>{2, -4, 18, -24}));
    EXPECT_EQ(run<float>(t.problem(), ops_only({binary(binary_alg::min, broadcast::full, {}, 1)}), t.x.data(), t.w,
                         nullptr, {}, args),
              (std::vector<float>{0, -2, 6, -10}));
    // Two full operands in one chain: (acc · t1) + t0.
    EXPECT_EQ(run<float>(t.problem(),
                         ops_only({binary(binary_alg::mul, broadcast::full, {}, 1),
                                   binary(binary_alg::add, broadcast::full, {}, 0)}),
                         t.x.data(), t.w, nullptr, {}, args),
              (std::vector<float>{1, 2, 63, 64}));
    // A missing operand is an error, not a crash.
    EXPECT_THROW(run<float>(t.problem(), ops_only({binary(binary_alg::mul, broadcast::full, {}, 2)}), t.x.data(), t.w,
                            nullptr, {}, args),
                 qconv::error);
}

// Every algorithm × every broadcast, expected values by hand from acc = (2,−2,6,−6):
// per-tensor operand 2, per-OC operand (2,−4), full operand (4,−1,−2,0.5).
TEST(RefPostOps, EveryBinaryAlgTimesEveryBroadcast) {
    pipe_case t;
    const std::vector<float> full = {4.f, -1.f, -2.f, 0.5f};
    exec_args args;
    args.binary = {full.data()};
    struct row {
        binary_alg alg;
        std::vector<float> pt, oc, fu;
    };
    const std::vector<row> rows = {
        {binary_alg::add, {4, 0, 8, -4}, {4, -6, 8, -10}, {6, -3, 4, -5.5f}},
        {binary_alg::sub, {0, -4, 4, -8}, {0, 2, 4, -2}, {-2, -1, 8, -6.5f}},
        {binary_alg::mul, {4, -4, 12, -12}, {4, 8, 12, 24}, {8, 2, -12, -3}},
        {binary_alg::div, {1, -1, 3, -3}, {1, 0.5f, 3, 1.5f}, {0.5f, 2, -3, -12}},
        {binary_alg::max, {2, 2, 6, 2}, {2, -2, 6, -4}, {4, -1, 6, 0.5f}},
        {binary_alg::min, {2, -2, 2, -6}, {2, -4, 2, -6}, {2, -2, -2, -6}},
    };
    for (const row &r : rows) {
        const auto go = [&](const lowered_op &op) {
            return run<float>(t.problem(), ops_only({op}), t.x.data(), t.w, nullptr, {}, args);
        };
        EXPECT_EQ(go(binary(r.alg, broadcast::per_tensor, {2.f})), r.pt) << to_string(r.alg);
        EXPECT_EQ(go(binary(r.alg, broadcast::per_oc, {2.f, -4.f})), r.oc) << to_string(r.alg);
        EXPECT_EQ(go(binary(r.alg, broadcast::full, {}, 0)), r.fu) << to_string(r.alg);
    }
}

TEST(RefPostOps, EveryBinaryAlg) {
    const std::vector<std::pair<binary_alg, float>> cases = {{binary_alg::add, 8.f},  {binary_alg::sub, 4.f},
                                                             {binary_alg::mul, 12.f}, {binary_alg::div, 3.f},
                                                             {binary_alg::max, 6.f},  {binary_alg::min, 2.f}};
    for (auto [alg, want] : cases)
        EXPECT_EQ(ref::apply_op(binary(alg, broadcast::per_tensor, {2.f}), 6.f, 0, 0, 0.f, {}), want) << to_string(alg);
}

// ------------------------------------------------------------------- sum

TEST(RefPostOps, SumWithScaleAndZeroPoint) {
    pipe_case t;
    lowered_op sum;
    sum.k = lowered_op::kind::sum;
    sum.sum_scale = 0.5f;
    sum.sum_zp = 4;
    // y + 0.5·(prev − 4): (2 + 3, −2 + 8, 6 + 13, −6 + 18)
    const auto y = run<int32_t>(t.problem(dtype::s32), ops_only({sum}), t.x.data(), t.w, nullptr, {10, 20, 30, 40});
    EXPECT_EQ(y, (std::vector<int32_t>{5, 6, 19, 12}));
    // Sum then relu, u8 destination holding the previous values.
    const auto z = run<uint8_t>(t.problem(dtype::u8), ops_only({sum, eltwise(eltwise_alg::relu)}), t.x.data(), t.w,
                                nullptr, {0, 2, 4, 250});
    // (2 − 2, −2 − 1, 6 + 0, −6 + 123) = (0, 0, 6, 117)
    EXPECT_EQ(z, (std::vector<uint8_t>{0, 0, 6, 117}));
}

// ------------------------------------------------ depthwise scale-shift / prelu

TEST(RefPostOps, DepthwiseScaleShift) {
    pipe_case t;
    lowered_op op;
    op.k = lowered_op::kind::depthwise_scale_shift;
    op.a = {2.f, 0.5f};
    op.b = {1.f, -1.f};
    EXPECT_EQ(run<float>(t.problem(), ops_only({op}), t.x.data(), t.w), (std::vector<float>{5, -2, 13, -4}));
    op.a = {3.f};
    op.b = {-1.f};
    EXPECT_EQ(run<float>(t.problem(), ops_only({op}), t.x.data(), t.w), (std::vector<float>{5, -7, 17, -19}));
}

TEST(RefPostOps, DepthwisePreluAndStockPrelu) {
    pipe_case t;
    for (auto k : {lowered_op::kind::depthwise_prelu, lowered_op::kind::prelu}) {
        lowered_op op;
        op.k = k;
        op.a = {0.25f, 0.5f};
        EXPECT_EQ(run<float>(t.problem(), ops_only({op}), t.x.data(), t.w), (std::vector<float>{2, -1, 6, -3}));
        op.a = {0.25f};
        EXPECT_EQ(run<float>(t.problem(), ops_only({op}), t.x.data(), t.w), (std::vector<float>{2, -0.5f, 6, -1.5f}));
    }
}

// ----------------------------------------------------------- quantization

TEST(RefPostOps, Quantization) {
    // FakeQuantize(levels 4, il −1, ih 3, ol 0, oh 6): cl −1, ch 3, isc 0.75,
    // ish 0.75, osc 2, osh 0.
    lowered_op q;
    q.k = lowered_op::kind::quantization;
    q.cl = {-1.f};
    q.ch = {3.f};
    q.isc = {0.75f};
    q.ish = {0.75f};
    q.osc = {2.f};
    q.osh = {0.f};
    const std::vector<std::pair<float, float>> cases = {{-5.f, 0.f},
                                                        {-1.f, 0.f},
                                                        {0.f, 2.f} /* 0.75 → 1 */,
                                                        {1.f, 4.f} /* 1.5 → 2 */,
                                                        {0.5f, 2.f} /* 1.125 → 1 */,
                                                        {2.f, 4.f} /* 2.25 → 2 */,
                                                        {3.f, 6.f},
                                                        {10.f, 6.f}};
    for (auto [x, want] : cases) EXPECT_EQ(ref::apply_op(q, x, 0, 0, 0.f, {}), want) << x;
    // Ties on the level axis round to even: isc 1, ish 0.5 → x = 1 gives 1.5 → 2,
    // x = 2 gives 2.5 → 2.
    lowered_op tie = q;
    tie.isc = {1.f};
    tie.ish = {0.5f};
    tie.osc = {1.f};
    tie.osh = {0.f};
    EXPECT_EQ(ref::apply_op(tie, 1.f, 0, 0, 0.f, {}), 2.f);
    EXPECT_EQ(ref::apply_op(tie, 2.f, 0, 0, 0.f, {}), 2.f);
    // Without rounding and dequantization the value stays on the level axis.
    q.round = false;
    q.dequantize = false;
    EXPECT_EQ(ref::apply_op(q, 1.f, 0, 0, 0.f, {}), 1.5f);
    // Per-channel parameters (channel 1: cl 0, ch 4, isc 0.5, ish 0, osc 4, osh −8).
    lowered_op pc;
    pc.k = lowered_op::kind::quantization;
    pc.cl = {-1.f, 0.f};
    pc.ch = {3.f, 4.f};
    pc.isc = {0.75f, 0.5f};
    pc.ish = {0.75f, 0.f};
    pc.osc = {2.f, 4.f};
    pc.osh = {0.f, -8.f};
    EXPECT_EQ(ref::apply_op(pc, 1.f, 0, 0, 0.f, {}), 4.f);
    EXPECT_EQ(ref::apply_op(pc, 3.f, 1, 0, 0.f, {}), 0.f); // 1.5 → 2 → 8 − 8
    EXPECT_EQ(ref::apply_op(pc, 9.f, 1, 0, 0.f, {}), 0.f); // clamp 4 → 2 → 0
    EXPECT_EQ(ref::apply_op(pc, -9.f, 1, 0, 0.f, {}), -8.f);
}

TEST(RefPostOps, QuantizationToU8InsideConv) {
    // FQ(256, 0, 25.5, 0, 255) without dequantize: y·10 rounded, u8 dst.
    pipe_case t;
    lowered_op q;
    q.k = lowered_op::kind::quantization;
    q.cl = {0.f};
    q.ch = {25.5f};
    q.isc = {10.f};
    q.ish = {0.f};
    q.round = false;
    q.dequantize = false;
    conv_problem p = t.problem(dtype::u8);
    p.scales = {0.125f};
    // acc·0.125 = (0.25, −0.25, 0.75, −0.75) → clamp (0.25, 0, 0.75, 0) → ×10 → 2.5, 0, 7.5, 0 → rne 2, 0, 8, 0
    EXPECT_EQ(run<uint8_t>(p, ops_only({q}), t.x.data(), t.w), (std::vector<uint8_t>{2, 0, 8, 0}));
}

// The dw item is run by ref::conv as two convolutions, never by the pipeline.
TEST(RefPostOps, FusedDwConvMarkerIsNotAPipelineStep) {
    pipe_case t;
    lowered_op op;
    op.k = lowered_op::kind::dw_conv;
    EXPECT_THROW(run<float>(t.problem(), ops_only({op}), t.x.data(), t.w), qconv::error);
}

// ------------------------------------------------------------ zero points

namespace {
struct zp_case {
    shape s;
    std::vector<uint8_t> x;
    std::vector<int8_t> w;
    std::vector<int32_t> zp;
    explicit zp_case(uint32_t seed) {
        s.mb = 2;
        s.g = 1;
        s.ic = 5;
        s.ih = 4;
        s.iw = 5;
        s.oc = 3;
        s.kh = 3;
        s.kw = 2;
        s.pt = 1;
        s.pl = 2;
        s.pb = 2;
        s.pr = 1;
        s.sh = 1;
        s.sw = 2;
        s.dh = 2;
        s.dw = 1;
        std::mt19937 rng(seed);
        const conv_desc d = make_desc(s);
        x.resize(d.src_elems());
        w.resize(d.wei_elems());
        zp.resize(d.ic);
        for (auto &v : x) v = static_cast<uint8_t>(rng() % 256);
        for (auto &v : w) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
        for (auto &v : zp) v = static_cast<int32_t>(rng() % 256);
    }
};
} // namespace

TEST(RefZeroPoint, PerChannelWithPaddingEqualsShiftedSourceWithZeroPadding) {
    zp_case t(7);
    const conv_problem p = make_problem(t.s);
    const conv_desc &d = p.desc;
    // conv(x − zp) with zero padding, in f32 (all values are small integers, exact).
    std::vector<float> xs(t.x.size()), wf(t.w.begin(), t.w.end()), y(d.dst_elems());
    for (size_t i = 0; i < t.x.size(); ++i) xs[i] = float(int(t.x[i]) - t.zp[i % d.ic]);
    ref::conv_f32(d, xs.data(), wf.data(), nullptr, y.data());
    const auto legacy = acc_of(p, zp_mechanism::legacy_per_channel, t.zp, t.x.data(), t.w);
    const auto stock = acc_of(p, zp_mechanism::stock_per_tensor, t.zp, t.x.data(), t.w);
    for (int64_t i = 0; i < d.dst_elems(); ++i) {
        ASSERT_EQ(float(legacy[i]), y[i]) << i;
        ASSERT_EQ(stock[i], legacy[i]) << i;
    }
    EXPECT_EQ(legacy, to_i32(naive_acc(d, t.x.data(), t.w, t.zp)));
}

TEST(RefZeroPoint, LegacyMechanismEqualsStockMechanism) {
    for (int32_t z : {0, 1, 128, 255}) {
        zp_case t(11);
        const conv_problem p = make_problem(t.s);
        const std::vector<int32_t> vec(p.desc.ic, z);
        const auto stock = acc_of(p, zp_mechanism::stock_per_tensor, {z}, t.x.data(), t.w);
        EXPECT_EQ(acc_of(p, zp_mechanism::legacy_per_channel, vec, t.x.data(), t.w), stock) << z;
        EXPECT_EQ(acc_of(p, zp_mechanism::legacy_per_channel, {z}, t.x.data(), t.w), stock) << z;
        EXPECT_EQ(stock, to_i32(naive_acc(p.desc, t.x.data(), t.w, {z}))) << z;
    }
}

TEST(RefZeroPoint, PerTensorEqualsVectorOfEqualValues) {
    zp_case t(3);
    const conv_problem p = make_problem(t.s);
    const std::vector<int32_t> vec(p.desc.ic, 37);
    const auto tensor = acc_of(p, zp_mechanism::stock_per_tensor, {37}, t.x.data(), t.w);
    EXPECT_EQ(acc_of(p, zp_mechanism::stock_per_tensor, vec, t.x.data(), t.w), tensor);
    EXPECT_EQ(acc_of(p, zp_mechanism::legacy_per_channel, vec, t.x.data(), t.w), tensor);
    EXPECT_EQ(zero_point::channel(vec).effective_kind(), zero_point::kind::per_tensor);
    EXPECT_NE(acc_of(p, zp_mechanism::none, {}, t.x.data(), t.w), tensor);
}

TEST(RefZeroPoint, HandComputedWithPadding) {
    // 1x2 image (10, 20), 1x3 kernel (1, 2, 3), pad 1 left/right, zp 5:
    // ow0: taps (pad, 10, 20) → 2·5 + 3·15 = 55; ow1: (10, 20, pad) → 1·5 + 2·15 = 35.
    shape s;
    s.iw = 2;
    s.kw = 3;
    s.pl = s.pr = 1;
    const conv_problem p = make_problem(s);
    const std::vector<uint8_t> x = {10, 20};
    const std::vector<int8_t> w = {1, 2, 3};
    for (auto m : {zp_mechanism::legacy_per_channel, zp_mechanism::stock_per_tensor})
        EXPECT_EQ(acc_of(p, m, {5}, x.data(), w), (std::vector<int32_t>{55, 35})) << to_string(m);
    attr_set a;
    a.zp = zp_mechanism::legacy_per_channel;
    a.zp_values = {5};
    EXPECT_EQ(run<int32_t>(p, a, x.data(), w), (std::vector<int32_t>{55, 35}));
    EXPECT_EQ(run<int32_t>(p, {}, x.data(), w), (std::vector<int32_t>{80, 50}));
}

TEST(RefZeroPoint, BadInputs) {
    zp_case t(5);
    const conv_problem p = make_problem(t.s);
    std::vector<int32_t> acc(p.desc.dst_elems());
    try {
        ref::conv_acc(p, zp_mechanism::legacy_per_channel, {1, 2}, t.x.data(), t.w.data(), acc.data());
        FAIL() << "wrong zp length accepted";
    } catch (const qconv::error &e) {
        EXPECT_EQ(std::string(e.what()).rfind("src_zp", 0), 0u) << e.what();
    }
    // An s8 source takes the legacy mechanism (a per-tensor zp lowered to it)
    // with s8 zero points only; the result equals the stock mechanism's.
    conv_problem s8 = p;
    s8.src_dt = dtype::s8;
    EXPECT_THROW(ref::conv_acc(s8, zp_mechanism::legacy_per_channel, {200}, t.x.data(), t.w.data(), acc.data()),
                 qconv::error);
    std::vector<int32_t> stock(acc.size());
    ref::conv_acc(s8, zp_mechanism::legacy_per_channel, {-3}, t.x.data(), t.w.data(), acc.data());
    ref::conv_acc(s8, zp_mechanism::stock_per_tensor, {-3}, t.x.data(), t.w.data(), stock.data());
    EXPECT_EQ(acc, stock);
    conv_problem f = p;
    f.src_dt = dtype::f32;
    EXPECT_THROW(ref::conv_acc(f, zp_mechanism::none, {}, t.x.data(), t.w.data(), acc.data()), qconv::error);
}

// ---------------------------------------------------------- extreme data

TEST(RefExtreme, U8MaxTimesS8MinOver4608) {
    // IC·KH·KW = 512·3·3 = 4608; with pad 1 the corner output sees 4 taps.
    shape s;
    s.ic = 512;
    s.ih = s.iw = 3;
    s.oc = 3;
    s.kh = s.kw = 3;
    s.pt = s.pl = s.pb = s.pr = 1;
    const conv_problem p = make_problem(s);
    const conv_desc &d = p.desc;
    const std::vector<uint8_t> x(d.src_elems(), 255);
    std::vector<int8_t> w(d.wei_elems(), -128);
    for (int64_t i = 2 * 512 * 9; i < 3 * 512 * 9; ++i) w[i] = 127; // oc 2: +127
    for (int64_t i = 512 * 9; i < 2 * 512 * 9; ++i) w[i] = static_cast<int8_t>(i % 2 ? 127 : -128);
    const auto acc = acc_of(p, zp_mechanism::none, {}, x.data(), w);
    const int64_t full = 255LL * -128 * 4608;
    EXPECT_EQ(acc[(1 * 3 + 1) * 3 + 0], full); // centre pixel, oc 0
    EXPECT_EQ(acc[(1 * 3 + 1) * 3 + 0], -150405120);
    EXPECT_EQ(acc[(1 * 3 + 1) * 3 + 2], 255LL * 127 * 4608);
    EXPECT_EQ(acc[0], 255LL * -128 * 512 * 4); // corner: 4 taps
    EXPECT_EQ(to_i32(naive_acc(d, x.data(), w, {})), acc);
    // Zero points 0 and 255 through both mechanisms.
    for (int32_t z : {0, 255}) {
        const auto want = to_i32(naive_acc(d, x.data(), w, {z}));
        EXPECT_EQ(acc_of(p, zp_mechanism::legacy_per_channel, {z}, x.data(), w), want);
        EXPECT_EQ(acc_of(p, zp_mechanism::stock_per_tensor, {z}, x.data(), w), want);
    }
    // x = 0 with zp 255: every valid tap contributes w·(−255).
    const std::vector<uint8_t> zeros(d.src_elems(), 0);
    const auto z255 = acc_of(p, zp_mechanism::legacy_per_channel, {255}, zeros.data(), w);
    EXPECT_EQ(z255[(1 * 3 + 1) * 3 + 0], -255LL * -128 * 4608);
}

TEST(RefExtreme, S8MinTimesS8Min) {
    shape s;
    s.ic = 512;
    s.ih = s.iw = 3;
    s.kh = s.kw = 3;
    const conv_problem p = make_problem(s, dtype::s8);
    const std::vector<int8_t> x(p.desc.src_elems(), -128);
    const std::vector<int8_t> w(p.desc.wei_elems(), -128);
    EXPECT_EQ(acc_of(p, zp_mechanism::none, {}, x.data(), w), (std::vector<int32_t>{16384 * 4608}));
}

// ------------------------------------------------- random sweep vs naive loop

TEST(RefConv, RandomShapesMatchNaiveLoops) {
    std::mt19937 rng(2024);
    auto r = [&](int lo, int hi) { return lo + static_cast<int>(rng() % (hi - lo + 1)); };
    int ran = 0;
    for (int it = 0; it < 80; ++it) {
        shape s;
        s.mb = r(1, 2);
        s.g = r(1, 3);
        s.ic = s.g * r(1, 5);
        s.oc = s.g * r(1, 4);
        s.ih = r(1, 7);
        s.iw = r(1, 7);
        s.kh = r(1, 3);
        s.kw = r(1, 3);
        s.sh = r(1, 3);
        s.sw = r(1, 3);
        s.dh = r(1, 2);
        s.dw = r(1, 2);
        s.pt = r(0, 2);
        s.pl = r(0, 2);
        s.pb = r(0, 2);
        s.pr = r(0, 2);
        if (s.ih + s.pt + s.pb < (s.kh - 1) * s.dh + 1 || s.iw + s.pl + s.pr < (s.kw - 1) * s.dw + 1) continue;
        try {
            make_desc(s).validate(); // e.g. an end pad larger than the kernel is not a problem
        } catch (const qconv::error &) {
            continue;
        }
        ++ran;
        const bool s8 = it % 2;
        const conv_problem p = make_problem(s, s8 ? dtype::s8 : dtype::u8);
        const conv_desc &d = p.desc;
        std::vector<uint8_t> xu(d.src_elems());
        for (auto &v : xu) v = static_cast<uint8_t>(rng());
        std::vector<int8_t> w(d.wei_elems());
        for (auto &v : w) v = static_cast<int8_t>(rng());
        std::vector<int32_t> zp;
        if (!s8) {
            zp.resize(d.ic);
            for (auto &v : zp) v = static_cast<int32_t>(rng() % 256);
        }
        const std::vector<int64_t> want =
            s8 ? naive_acc(d, reinterpret_cast<const int8_t *>(xu.data()), w, zp) : naive_acc(d, xu.data(), w, zp);
        const auto mech = s8 ? zp_mechanism::none : zp_mechanism::legacy_per_channel;
        ASSERT_EQ(acc_of(p, mech, zp, xu.data(), w), to_i32(want)) << d.str();
        if (!s8) {
            ASSERT_EQ(acc_of(p, zp_mechanism::stock_per_tensor, zp, xu.data(), w), to_i32(want)) << d.str();
        }
    }
    EXPECT_GE(ran, 30);
}

TEST(RefConv, ThreadCountDoesNotChangeResults) {
    zp_case t(9);
    conv_problem p = make_problem(t.s, dtype::u8, dtype::f32);
    p.scales = {0.5f, 0.25f, 2.f};
    attr_set a;
    a.zp = zp_mechanism::legacy_per_channel;
    a.zp_values = t.zp;
    a.ops = {eltwise(eltwise_alg::gelu_erf)};
    exec_args one, two;
    one.threads = 1;
    two.threads = 2;
    EXPECT_EQ(run<float>(p, a, t.x.data(), t.w, nullptr, {}, one), run<float>(p, a, t.x.data(), t.w, nullptr, {}, two));
}

// ------------------------------------------------------------ f32 conv

TEST(RefConvF32, HandComputedWithGroupsStridePadsDilationBias) {
    // Same geometry as StrideAndDilation, as f32, plus a second group with
    // kernel (0.5, 0, 0, −1) on the image 0.25·x, and a bias.
    shape s;
    s.g = 2;
    s.ic = 2;
    s.oc = 2;
    s.ih = s.iw = 5;
    s.kh = s.kw = 2;
    s.sh = s.sw = 2;
    s.dh = s.dw = 2;
    const conv_desc d = make_desc(s);
    std::vector<float> x(50);
    for (int i = 0; i < 25; ++i) {
        x[2 * i] = float(i);
        x[2 * i + 1] = 0.25f * float(i);
    }
    const std::vector<float> w = {1, 2, 3, 4, 0.5f, 0, 0, -1};
    const std::vector<float> bias = {1, -1};
    std::vector<float> y(d.dst_elems());
    ref::conv_f32(d, x.data(), w.data(), bias.data(), y.data());
    // group 1 at (oh,ow): 0.5·0.25·x[2oh][2ow] − 0.25·x[2oh+2][2ow+2]
    //   (0,0): 0 − 3 = −3; (0,1): 0.25 − 3.5 = −3.25; (1,0): 1.25 − 5.5 = −4.25; (1,1): 1.5 − 6 = −4.5
    EXPECT_EQ(y, (std::vector<float>{83, -4, 103, -4.25f, 183, -5.25f, 203, -5.5f}));
}

TEST(RefConvF32, PadsMatchIntegerReference) {
    shape s;
    s.ih = s.iw = 3;
    s.kh = s.kw = 3;
    s.pt = 1;
    s.pr = 1;
    const conv_desc d = make_desc(s);
    const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    std::vector<float> y(d.dst_elems());
    ref::conv_f32(d, x.data(), x.data(), nullptr, y.data());
    EXPECT_EQ(y, (std::vector<float>{154, 106, 285, 186}));
}
