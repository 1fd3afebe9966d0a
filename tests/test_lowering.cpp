// Lowering of logical post-ops, executed by the reference apply_op():
//  * FakeQuantize — the legacy form (one "quantization" op) and the stock form
//    (clip or binary max/min, linear or binary mul/add, round, linear or mul/add)
//    both reproduce OpenVINO's FakeQuantize formula over a sweep of values,
//    for levels 2/16/255/256, per-tensor and per-channel parameters;
//  * ScaleShift and PReLU: legacy (depthwise) and stock (binary/eltwise) forms
//    give the same values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "reference/reference.h"

using namespace qconv;

namespace {

// OpenVINO's FakeQuantize, evaluated in f32 exactly as written:
//   x ≤ min(il,ih) → ol;  x > max(il,ih) → oh;
//   else round((x−il)/(ih−il)·(L−1))/(L−1)·(oh−ol)+ol,   round = half to even.
float fq_formula(float x, int levels, float il, float ih, float ol, float oh) {
    if (x <= std::fmin(il, ih)) return ol;
    if (x > std::fmax(il, ih)) return oh;
    const float steps = static_cast<float>(levels - 1);
    return std::nearbyint((x - il) / (ih - il) * steps) / steps * (oh - ol) + ol;
}

float run_chain(const std::vector<lowered_op> &ops, float y, int64_t c) {
    for (const lowered_op &op : ops) y = ref::apply_op(op, y, c, 0, 0.f, {});
    return y;
}

struct fq_params {
    int levels;
    std::vector<float> il, ih, ol, oh;
    float at(const std::vector<float> &v, int64_t c) const { return v.size() == 1 ? v[0] : v[c]; }
};

std::string describe(const fq_params &p, int64_t c) {
    return "L=" + std::to_string(p.levels) + " c=" + std::to_string(c) + " il=" + std::to_string(p.at(p.il, c)) +
           " ih=" + std::to_string(p.at(p.ih, c)) + " ol=" + std::to_string(p.at(p.ol, c)) +
           " oh=" + std::to_string(p.at(p.oh, c));
}

// How each lowered form may differ from the formula, and why.
//
// The formula divides (x−il) by (ih−il); the lowered forms multiply by the f32
// constant isc = (L−1)/(ih−il) and add ish = −il·isc (itself rounded), and the
// stock per-channel form rounds once more between its binary mul and add. So
// the pre-rounding level value carries an error of a few f32 ulps of
// |x·isc| + |ish| + (L−1). Where the exact level t = (x−il)(L−1)/(ih−il)
// (computed in double) lies within that error of a half-integer k+½, the forms
// may legitimately choose adjacent levels: such x are counted as "ties" and
// allowed one level (|oh−ol|/(L−1)) of difference. Elsewhere the level must be
// the same, and the outputs then agree within a few ulps of max(|ol|,|oh|)
// (dequantization is level·osc+osh in one rounding vs level/(L−1)·(oh−ol)+ol).
// This is observed, not hypothetical: on the per-tensor sweep below about 3 %
// of the values are near-ties (most of them the f32-rounded midpoints added
// on purpose) and roughly 180 of ~51000 land on the adjacent level; the
// per-channel sweeps show 0–350 such values per level count.
struct fq_check {
    int compared = 0, ties = 0;

    void operator()(const fq_params &p, int64_t c, float x, float got, const char *form) {
        const float il = p.at(p.il, c), ih = p.at(p.ih, c), ol = p.at(p.ol, c), oh = p.at(p.oh, c);
        const float want = fq_formula(x, p.levels, il, ih, ol, oh);
        const double steps = p.levels - 1;
        const double isc = steps / (double(ih) - il);
        const double out_eps = 8 * std::ldexp(1.0, -24) * (std::fabs(ol) + std::fabs(oh));
        bool tie = false;
        if (x > il && x <= ih) {
            const double t = (double(x) - il) * isc;
            const double level_eps = 8 * std::ldexp(1.0, -24) * (std::fabs(x * isc) + std::fabs(il * isc) + steps);
            tie = std::fabs(t - std::floor(t) - 0.5) <= level_eps;
        }
        ++compared;
        if (tie) {
            ++ties;
            const double level = std::fabs(double(oh) - ol) / steps;
            EXPECT_LE(std::fabs(double(got) - want), level + out_eps)
                << form << " " << describe(p, c) << " x=" << x << " (near a tie)";
        } else {
            EXPECT_LE(std::fabs(double(got) - want), out_eps)
                << form << " " << describe(p, c) << " x=" << x << " got=" << got << " want=" << want;
        }
    }
};

// Values to try for channel c: a uniform sweep over [lo − margin, hi + margin],
// the range ends and their f32 neighbours, the exact level midpoints rounded
// to f32, and random values.
std::vector<float> sweep(float il, float ih, int levels, uint32_t seed) {
    const float lo = std::fmin(il, ih), hi = std::fmax(il, ih), margin = 0.25f * (hi - lo);
    std::vector<float> xs;
    const int n = 4001;
    for (int i = 0; i < n; ++i) xs.push_back(lo - margin + (hi - lo + 2 * margin) * float(i) / float(n - 1));
    for (float e : {il, ih}) {
        xs.push_back(e);
        xs.push_back(std::nextafter(e, -INFINITY));
        xs.push_back(std::nextafter(e, INFINITY));
    }
    for (int k = 0; k + 1 < levels; ++k)
        xs.push_back(static_cast<float>(double(il) + (k + 0.5) * (double(ih) - il) / (levels - 1)));
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(lo - margin, hi + margin);
    for (int i = 0; i < 1000; ++i) xs.push_back(u(rng));
    return xs;
}

post_op to_post_op(const fq_params &p) { return post_op::fake_quantize(p.levels, p.il, p.ih, p.ol, p.oh); }

// Per-tensor parameter sets: exact and inexact steps, symmetric, offset ranges.
std::vector<fq_params> per_tensor_sets() {
    return {
        {256, {0.f}, {2.55f}, {0.f}, {255.f}},       // u8 output: no dequantization
        {256, {-1.28f}, {1.27f}, {-1.28f}, {1.27f}}, // dequantize to the same range
        {255, {-1.27f}, {1.27f}, {-127.f}, {127.f}}, // s8-like symmetric
        {255, {0.f}, {6.f}, {0.f}, {6.f}},
        {16, {-0.3f}, {1.7f}, {-1.f}, {1.5f}},
        {16, {0.f}, {15.f}, {0.f}, {15.f}}, // every step exact
        {2, {0.1f}, {0.4f}, {-1.f}, {1.f}}, // binarization
        {2, {-1.f}, {1.f}, {0.f}, {1.f}},
        {256, {100.f}, {101.f}, {0.f}, {1.f}}, // range far from 0: ish is large
        {16, {-3.f}, {5.f}, {7.f}, {-7.f}},    // decreasing output range
    };
}

} // namespace

// Every level count × per-tensor parameter set, both forms, dst f32.
TEST(LoweringFakeQuantize, PerTensorBothFormsMatchOpenVinoFormula) {
    fq_check legacy_check, stock_check;
    int uniform_ties = 0, uniform = 0;
    for (const fq_params &p : per_tensor_sets()) {
        const post_ops chain = {to_post_op(p)};
        const auto legacy = lower_legacy(chain, 1, /*dst_is_f32=*/true);
        const auto stock = lower_stock(chain, 1, /*dst_is_f32=*/true);
        ASSERT_EQ(legacy.size(), 1u);
        ASSERT_EQ(legacy[0].k, lowered_op::kind::quantization);
        const auto xs = sweep(p.il[0], p.ih[0], p.levels, 1);
        for (size_t i = 0; i < xs.size(); ++i) {
            const int before = legacy_check.ties;
            legacy_check(p, 0, xs[i], run_chain(legacy, xs[i], 0), "legacy");
            stock_check(p, 0, xs[i], run_chain(stock, xs[i], 0), "stock");
            if (i < 4001) {
                ++uniform;
                uniform_ties += legacy_check.ties - before;
            }
            // Per-tensor: clip + linear (one rounding each) is the same arithmetic
            // as the quantization op, so the two forms agree bit for bit.
            ASSERT_EQ(run_chain(legacy, xs[i], 0), run_chain(stock, xs[i], 0)) << describe(p, 0) << " x=" << xs[i];
        }
    }
    // Near-ties are rare on a uniform sweep (the check is not vacuous).
    EXPECT_LT(uniform_ties * 100, uniform) << uniform_ties << " of " << uniform;
    EXPECT_GT(legacy_check.compared, 50000);
}

TEST(LoweringFakeQuantize, LevelsTwoSixteen255And256Covered) {
    std::vector<int> seen;
    for (const fq_params &p : per_tensor_sets()) seen.push_back(p.levels);
    for (int l : {2, 16, 255, 256}) EXPECT_NE(std::find(seen.begin(), seen.end(), l), seen.end()) << l;
}

// Per-channel: each channel its own range and level count fixed per test;
// the stock form uses binary max/min and binary mul/add with OC vectors.
TEST(LoweringFakeQuantize, PerChannelBothFormsMatchOpenVinoFormula) {
    for (int levels : {2, 16, 255, 256}) {
        fq_params p{levels,
                    {0.f, -1.f, -0.37f, 100.f, -8.f},
                    {2.55f, 1.f, 0.59f, 101.5f, 8.f},
                    {0.f, -1.f, -2.f, 0.f, -128.f},
                    {255.f, 1.f, 3.f, 1.f, 127.f}};
        const int64_t oc = 5;
        const post_ops chain = {to_post_op(p)};
        const auto legacy = lower_legacy(chain, oc, true);
        const auto stock = lower_stock(chain, oc, true);
        EXPECT_TRUE(needs_binary(chain));
        bool stock_has_binary = false;
        for (const auto &op : stock) stock_has_binary |= op.k == lowered_op::kind::binary;
        EXPECT_TRUE(stock_has_binary);
        fq_check legacy_check, stock_check;
        for (int64_t c = 0; c < oc; ++c)
            for (float x : sweep(p.il[c], p.ih[c], levels, uint32_t(c + 7))) {
                legacy_check(p, c, x, run_chain(legacy, x, c), "legacy");
                stock_check(p, c, x, run_chain(stock, x, c), "stock");
            }
        EXPECT_GT(legacy_check.compared, 5 * 5000) << levels;
        // Ties include the midpoints added on purpose (levels−1 per channel);
        // beyond those they stay rare.
        EXPECT_LT(legacy_check.ties, 5 * (levels - 1) + 200) << levels;
        EXPECT_LT(stock_check.ties, 5 * (levels - 1) + 200) << levels;
    }
}

// Exactly representable steps: here the formula and both forms must agree bit
// for bit, including exact ties k+½ (which round to even).
TEST(LoweringFakeQuantize, ExactStepsAgreeBitForBitIncludingTies) {
    const fq_params sets[] = {
        {256, {0.f}, {255.f}, {0.f}, {255.f}},
        {5, {-1.f}, {3.f}, {-2.f}, {6.f}},  // isc 1, ish 1, osc 2, osh −2
        {16, {0.f}, {7.5f}, {0.f}, {30.f}}, // isc 2, osc 2
    };
    for (const fq_params &p : sets) {
        const post_ops chain = {to_post_op(p)};
        const auto legacy = lower_legacy(chain, 1, true);
        const auto stock = lower_stock(chain, 1, true);
        for (float x = p.il[0] - 2.f; x <= p.ih[0] + 2.f; x += 0.125f) {
            const float want = fq_formula(x, p.levels, p.il[0], p.ih[0], p.ol[0], p.oh[0]);
            ASSERT_EQ(run_chain(legacy, x, 0), want) << describe(p, 0) << " x=" << x;
            ASSERT_EQ(run_chain(stock, x, 0), want) << describe(p, 0) << " x=" << x;
        }
    }
    // Hand-checked ties for FQ(5, −1, 3, −2, 6): x = 0.5 → level 1.5 → 2 → 2·2 − 2 = 2;
    // x = 1.5 → 2.5 → 2 → 2; x = −0.5 → 0.5 → 0 → −2.
    const auto legacy = lower_legacy({to_post_op(sets[1])}, 1, true);
    EXPECT_EQ(run_chain(legacy, 0.5f, 0), 2.f);
    EXPECT_EQ(run_chain(legacy, 1.5f, 0), 2.f);
    EXPECT_EQ(run_chain(legacy, -0.5f, 0), -2.f);
}

// An integer destination with an FQ that maps straight onto its levels: the
// last FQ skips rounding and dequantization and the store rounds instead.
TEST(LoweringFakeQuantize, LastFqIntoU8LeavesRoundingToTheStore) {
    const fq_params p{256, {0.f}, {5.1f}, {0.f}, {255.f}};
    const post_ops chain = {to_post_op(p)};
    for (const auto &ops : {lower_legacy(chain, 1, /*dst_is_f32=*/false), lower_stock(chain, 1, false)}) {
        fq_check check;
        for (float x : sweep(0.f, 5.1f, 256, 3)) {
            // The formula's value is already an integer level here.
            uint8_t got;
            ref::store(dtype::u8, &got, 0, run_chain(ops, x, 0));
            check(p, 0, x, float(got), "u8");
        }
        EXPECT_LT(check.ties, 255 + 50);
    }
    const auto legacy = lower_legacy(chain, 1, false);
    ASSERT_EQ(legacy.size(), 1u);
    EXPECT_FALSE(legacy[0].round);
    EXPECT_FALSE(legacy[0].dequantize);
    // Not last: the value is rounded inside the chain.
    const auto not_last = lower_legacy({to_post_op(p), post_op::relu()}, 1, false);
    EXPECT_TRUE(not_last[0].round);
}

// ------------------------------------------------------ scale-shift, prelu

namespace {
std::vector<float> values(uint32_t seed, bool exact) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-100.f, 100.f);
    std::vector<float> xs;
    for (int i = 0; i < 4000; ++i) xs.push_back(exact ? float(int(rng() % 2001) - 1000) / 8.f : u(rng));
    for (float e : {0.f, -0.f, 1e-30f, -1e-30f, 3e38f, -3e38f}) xs.push_back(e);
    return xs;
}
} // namespace

TEST(LoweringScaleShift, PerTensorFormsIdentical) {
    const post_ops chain = {post_op::scale_shift_op({0.37f}, {-1.3f})};
    const auto legacy = lower_legacy(chain, 4, true), stock = lower_stock(chain, 4, true);
    EXPECT_EQ(legacy[0].k, lowered_op::kind::depthwise_scale_shift);
    for (float x : values(1, false))
        for (int64_t c = 0; c < 4; ++c) ASSERT_EQ(run_chain(legacy, x, c), run_chain(stock, x, c)) << x;
}

TEST(LoweringScaleShift, PerChannelFormsIdentical) {
    // Stock per-channel is binary mul then binary add: the product is rounded
    // before the add, where the legacy form rounds once. With data whose
    // products are exact (dyadic values) the forms are bit-identical; with
    // arbitrary data they may differ by 1 ulp of the product (checked below).
    const post_ops exact = {post_op::scale_shift_op({0.5f, 2.f, -1.25f}, {3.f, -0.75f, 0.125f})};
    const auto legacy = lower_legacy(exact, 3, true), stock = lower_stock(exact, 3, true);
    EXPECT_EQ(legacy[0].k, lowered_op::kind::depthwise_scale_shift);
    for (float x : values(2, true))
        for (int64_t c = 0; c < 3; ++c) ASSERT_EQ(run_chain(legacy, x, c), run_chain(stock, x, c)) << x << " c" << c;
    // Hand-computed: x = 4 → (5, 7.25, −4.875).
    EXPECT_EQ(run_chain(legacy, 4.f, 0), 5.f);
    EXPECT_EQ(run_chain(stock, 4.f, 1), 7.25f);
    EXPECT_EQ(run_chain(stock, 4.f, 2), -4.875f);

    const post_ops any = {post_op::scale_shift_op({0.37f, -1.91f, 3.3f}, {-1.3f, 0.77f, 5.1f})};
    const auto l2 = lower_legacy(any, 3, true), s2 = lower_stock(any, 3, true);
    for (float x : values(3, false))
        for (int64_t c = 0; c < 3; ++c) {
            const float a = run_chain(l2, x, c), b = run_chain(s2, x, c);
            if (a == b) continue; // includes both overflowing to the same infinity
            const float prod_ulp = std::fabs(x * any[0].scale[c]) * std::ldexp(1.f, -23);
            ASSERT_LE(std::fabs(a - b), prod_ulp + std::fabs(a) * std::ldexp(1.f, -23)) << x << " c" << c;
        }
}

TEST(LoweringPrelu, FormsIdentical) {
    for (const std::vector<float> &slope : {std::vector<float>{0.1f}, std::vector<float>{0.1f, -0.5f, 2.3f}}) {
        const post_ops chain = {post_op::prelu(slope)};
        const auto legacy = lower_legacy(chain, 3, true), stock = lower_stock(chain, 3, true);
        EXPECT_EQ(legacy[0].k, lowered_op::kind::depthwise_prelu);
        for (float x : values(4, false))
            for (int64_t c = 0; c < 3; ++c) {
                const float a = run_chain(legacy, x, c);
                ASSERT_EQ(a, run_chain(stock, x, c)) << x << " c" << c;
                ASSERT_EQ(a, x >= 0.f ? x : x * lowered_op::at(slope, c));
            }
    }
}

// A whole chain through ref::conv: legacy and stock attribute sets give the
// same destination when the data keep the pipeline exact.
TEST(LoweringChain, LegacyAndStockConvolutionsAgree) {
    conv_problem p;
    p.desc = conv_desc::parse("mb1ic6ih5oc3oh5kh3ph1");
    p.src_dt = dtype::u8;
    p.dst_dt = dtype::u8;
    p.scales = {0.0625f};
    p.ops = {post_op::scale_shift_op({0.5f, 1.f, 2.f}, {1.f, 0.f, -3.f}), post_op::prelu({0.25f, 0.5f, 1.f}),
             post_op::fake_quantize(256, {0.f}, {25.5f}, {0.f}, {255.f})};
    std::mt19937 rng(1);
    std::vector<uint8_t> x(p.desc.src_elems());
    std::vector<int8_t> w(p.desc.wei_elems());
    for (auto &v : x) v = static_cast<uint8_t>(rng() % 16);
    for (auto &v : w) v = static_cast<int8_t>(int(rng() % 15) - 7);
    attr_set a0, a1;
    a0.ops = lower_legacy(p.ops, 3, false);
    a1.id = 1;
    a1.ops = lower_stock(p.ops, 3, false);
    std::vector<uint8_t> d0(p.desc.dst_elems()), d1(p.desc.dst_elems());
    ref::conv(p, a0, x.data(), w.data(), nullptr, d0.data(), {});
    ref::conv(p, a1, x.data(), w.data(), nullptr, d1.data(), {});
    EXPECT_EQ(d0, d1);
    int nonzero = 0;
    for (uint8_t v : d0) nonzero += v != 0;
    EXPECT_GT(nonzero, 10); // the data exercise the chain
}

// Clamps left to the saturation: a clip or relu that the store enforces is
// removed, and ref::conv writes the same bytes with and without it; one that
// cuts inside the stored range stays. The accumulators span far beyond both
// bounds, so both sides of every clamp are exercised.
TEST(LoweringChain, ClampsLeftToTheSaturationStoreTheSameBytes) {
    conv_problem p;
    p.desc = conv_desc::parse("mb1ic16ih6oc4oh6kh1");
    p.src_dt = dtype::u8;
    p.scales = {0.02f, 0.03f, 0.05f, 0.01f};
    std::mt19937 rng(7);
    std::vector<uint8_t> x(p.desc.src_elems());
    std::vector<int8_t> w(p.desc.wei_elems());
    for (auto &v : x) v = static_cast<uint8_t>(rng());
    for (auto &v : w) v = static_cast<int8_t>(rng());
    struct chain_case {
        const char *name;
        dtype dt;
        int32_t zp;
        post_ops ops;
        int dropped; // items drop_saturated_clamps removes
    };
    const std::vector<float> ss = {40.f, 42.5f, 50.f, 64.f};
    auto clip = [](float lo, float hi) { return post_op::eltwise(eltwise_alg::clip, lo, hi); };
    auto lin = [](float a, float b = 0.f) { return post_op::eltwise(eltwise_alg::linear, a, b); };
    const post_op rnd = post_op::eltwise(eltwise_alg::round), relu = post_op::relu();
    const post_op ss_pc = post_op::scale_shift_op(ss, {0.f, 0.f, 0.f, 0.f});
    // clang-format off
    const std::vector<chain_case> cases = {
        {"relu6 then 255/6",                        dtype::u8, 0, {clip(0.f, 6.f), lin(42.5f), rnd}, 1},
        {"relu then a shift that stays at 0",       dtype::u8, 0, {relu, lin(10.f, 0.4f), rnd}, 1},
        {"relu then a shift to 1",                  dtype::u8, 0, {relu, lin(10.f, 0.6f), rnd}, 0},
        {"relu6 then 254/6 (the top cut inside)",   dtype::u8, 0, {clip(0.f, 6.f), lin(42.3f), rnd}, 0},
        {"relu with a zero point above 0",          dtype::u8, 3, {relu, lin(10.f), rnd}, 0},
        {"s8 clip at -12.8..12.7 then 10",          dtype::s8, 0, {clip(-12.8f, 12.7f), lin(10.f)}, 1},
        {"per-channel scales, every channel saturates", dtype::u8, 0, {clip(0.f, 6.5f), ss_pc, rnd}, 1},
        {"per-channel scales, channel 0 cuts inside",   dtype::u8, 0, {clip(0.f, 6.f), ss_pc, rnd}, 0},
        {"a negative scale after the clamp",        dtype::u8, 0, {clip(-5.f, 0.f), lin(-42.5f)}, 0},
        {"relu before a sum",                       dtype::u8, 0, {relu, post_op::sum(0.5f), rnd}, 0},
        {"leaky relu",                              dtype::u8, 0, {post_op::relu(0.1f), lin(10.f, 100.f)}, 0},
    };
    // clang-format on
    for (const chain_case &t : cases) {
        SCOPED_TRACE(t.name);
        conv_problem a = p;
        a.dst_dt = t.dt;
        a.dst_zp = t.zp;
        a.ops = t.ops;
        conv_problem b = a;
        ASSERT_EQ(drop_saturated_clamps(b.ops, p.desc.oc, b.dst_dt, b.dst_zp), t.dropped);
        ASSERT_EQ(b.ops.size(), a.ops.size() - static_cast<size_t>(t.dropped));
        ASSERT_EQ(b.ops.front().alg == a.ops.front().alg, t.dropped == 0);
        if (t.dropped == 0) b.ops.erase(b.ops.begin()); // the clamp is needed: without it the bytes differ
        std::vector<uint8_t> da(p.desc.dst_elems(), 0x5a), db(p.desc.dst_elems(), 0x5a);
        attr_set sa, sb;
        sa.ops = lower_legacy(a.ops, p.desc.oc, false);
        sb.ops = lower_legacy(b.ops, p.desc.oc, false);
        ref::conv(a, sa, x.data(), w.data(), nullptr, da.data(), {});
        ref::conv(b, sb, x.data(), w.data(), nullptr, db.data(), {});
        if (t.dropped == 0) {
            EXPECT_NE(da, db);
        } else {
            EXPECT_EQ(da, db);
            int low = 0, high = 0; // both saturation ends are reached
            const int lo = t.dt == dtype::u8 ? 0 : 128, hi = t.dt == dtype::u8 ? 255 : 127;
            for (uint8_t v : da) low += v == lo, high += v == hi;
            EXPECT_GT(low, 10);
            EXPECT_GT(high, 10);
        }
    }
    // A dw item: the 1x1's clamp is judged by the intermediate's type, the
    // depthwise's by the destination's.
    post_ops dw = {
        post_op::eltwise(eltwise_alg::clip, 0.f, 6.f), post_op::eltwise(eltwise_alg::linear, 42.5f),
        post_op::eltwise(eltwise_alg::round),          post_op::dw_conv(1, dtype::s8, std::vector<int8_t>(36, 1)),
        post_op::eltwise(eltwise_alg::clip, 0.f, 6.f), post_op::eltwise(eltwise_alg::linear, 42.5f),
        post_op::eltwise(eltwise_alg::round)};
    EXPECT_EQ(drop_saturated_clamps(dw, 4, dtype::u8, 0), 1);
    ASSERT_EQ(dw.size(), 6u);
    EXPECT_EQ(dw[0].alg, eltwise_alg::clip); // s8 intermediate: [0, 255] is not its range
    EXPECT_EQ(dw[3].k, post_op::kind::dw_conv);
    EXPECT_EQ(dw[4].alg, eltwise_alg::linear);
}
