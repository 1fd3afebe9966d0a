// The reference weight-compressed MatMul against an independent
// dequantize-then-f32 loop written here, for every weight type × granularity
// (per-OC, group sizes 32, 3, 5 with odd K) × zero-point kind × bias, plus
// hand-computed tiny cases that pin the u4/s4 nibble order (element 2i of the
// whole tensor in the low nibble of byte i).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "reference/reference.h"

using namespace qconv;

namespace {

using zk = matmul_desc::zp_kind;

// --- the independent definition -------------------------------------------
int32_t unpack(const std::vector<uint8_t> &bytes, dtype dt, int64_t i) {
    if (dt == dtype::u8) return bytes[i];
    if (dt == dtype::s8) return static_cast<int8_t>(bytes[i]);
    const uint8_t byte = bytes[i / 2];
    const int32_t nibble = (i % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
    if (dt == dtype::u4) return nibble;
    return nibble < 8 ? nibble : nibble - 16; // s4
}

// Y = X · deq(W)ᵀ + bias, all in f32.
std::vector<float> dequantize_then_f32(const matmul_desc &d, const std::vector<uint8_t> &wei,
                                       const std::vector<float> &scale, const std::vector<int32_t> &zp,
                                       const std::vector<float> &bias, const std::vector<float> &x) {
    const int64_t gs = d.group == 0 ? d.k : d.group, ng = d.k / gs;
    std::vector<float> deq(static_cast<size_t>(d.n * d.k));
    for (int64_t n = 0; n < d.n; ++n)
        for (int64_t k = 0; k < d.k; ++k) {
            const int64_t g = k / gs;
            int32_t z = 0;
            if (d.zp == zk::per_tensor) z = zp[0];
            if (d.zp == zk::per_group) z = zp[n * ng + g];
            deq[n * d.k + k] = float(unpack(wei, d.wei_dt, n * d.k + k) - z) * scale[n * ng + g];
        }
    std::vector<float> y(static_cast<size_t>(d.m * d.n));
    for (int64_t m = 0; m < d.m; ++m)
        for (int64_t n = 0; n < d.n; ++n) {
            float s = 0.f;
            for (int64_t k = 0; k < d.k; ++k) s += x[m * d.k + k] * deq[n * d.k + k];
            y[m * d.n + n] = d.with_bias ? s + bias[n] : s;
        }
    return y;
}

// --- random problems ---------------------------------------------------------
struct problem {
    matmul_desc d;
    std::vector<uint8_t> wei;
    std::vector<float> scale, bias, x;
    std::vector<int32_t> zp;

    // exact = true: small integers and power-of-two scales, so every f32 sum is exact.
    problem(const matmul_desc &desc, uint32_t seed, bool exact) : d(desc) {
        std::mt19937 rng(seed);
        std::uniform_real_distribution<float> uni(-1.f, 1.f);
        const int64_t bits = (d.wei_dt == dtype::u4 || d.wei_dt == dtype::s4) ? 4 : 8;
        wei.resize(static_cast<size_t>((d.n * d.k * bits + 7) / 8));
        for (auto &b : wei) b = static_cast<uint8_t>(rng());
        const int64_t ng = d.group == 0 ? 1 : d.k / d.group;
        scale.resize(static_cast<size_t>(d.n * ng));
        const float pow2[] = {0.25f, 0.5f, 1.f, 2.f};
        for (auto &s : scale) s = exact ? pow2[rng() % 4] : 0.01f + std::fabs(uni(rng));
        const int32_t lo = (d.wei_dt == dtype::s8) ? -128 : (d.wei_dt == dtype::s4) ? -8 : 0;
        const int32_t span = bits == 8 ? 256 : 16;
        if (d.zp == zk::per_tensor) zp = {lo + static_cast<int32_t>(rng() % span)};
        if (d.zp == zk::per_group) {
            zp.resize(scale.size());
            for (auto &z : zp) z = lo + static_cast<int32_t>(rng() % span);
        }
        if (d.with_bias) {
            bias.resize(static_cast<size_t>(d.n));
            for (auto &b : bias) b = exact ? float(int(rng() % 21) - 10) : uni(rng);
        }
        x.resize(static_cast<size_t>(d.m * d.k));
        for (auto &v : x) v = exact ? float(int(rng() % 17) - 8) : uni(rng);
    }

    std::vector<float> run_ref() const {
        matmul_weights w;
        w.wei = wei.data();
        w.scale = scale.data();
        w.zp = zp.empty() ? nullptr : zp.data();
        w.bias = bias.empty() ? nullptr : bias.data();
        std::vector<float> y(static_cast<size_t>(d.m * d.n), -1234.f);
        ref::matmul(d, w, x.data(), y.data());
        return y;
    }
    std::vector<float> run_loop() const { return dequantize_then_f32(d, wei, scale, zp, bias, x); }
};

matmul_desc make(int64_t m, int64_t k, int64_t n, dtype wdt, int64_t group, zk zp, bool bias) {
    matmul_desc d;
    d.m = m;
    d.k = k;
    d.n = n;
    d.wei_dt = wdt;
    d.group = group;
    d.zp = zp;
    d.with_bias = bias;
    return d;
}

std::string name(const matmul_desc &d) {
    return d.str() + " wei=" + to_string(d.wei_dt) + " group=" + std::to_string(d.group) + " zp=" + to_string(d.zp) +
           " bias=" + std::to_string(d.with_bias);
}

} // namespace

// ------------------------------------------------------------ hand-computed

TEST(RefMatmul, HandComputedU4NibbleOrder) {
    // K=3, N=2: W row 0 = (9, 10, 7), row 1 = (8, 0, 15): elements e0..e5 packed
    // low nibble first: 0xA9 = (e0=9, e1=10), 0x87 = (e2=7, e3=8), 0xF0 = (e4=0, e5=15).
    const std::vector<uint8_t> wei = {0xA9, 0x87, 0xF0};
    const std::vector<float> scale = {0.5f, 2.f}, bias = {1.f, 0.f}, x = {2.f, 1.f, 4.f};
    const std::vector<int32_t> zp = {8};
    matmul_weights w{wei.data(), scale.data(), zp.data(), bias.data()};
    std::vector<float> y(2);
    ref::matmul(make(1, 3, 2, dtype::u4, 0, zk::per_tensor, true), w, x.data(), y.data());
    // deq row 0 = (1, 2, −1)·0.5 → 2·0.5 + 1 − 4·0.5 = 0, + bias 1 = 1
    // deq row 1 = (0, −8, 7)·2  → 0 − 16 + 56 = 40
    EXPECT_EQ(y, (std::vector<float>{1.f, 40.f}));
}

TEST(RefMatmul, HandComputedS4NibbleOrder) {
    // Same bytes as s4: row 0 = (−7, −6, 7), row 1 = (−8, 0, −1); no zp, scale 1.
    const std::vector<uint8_t> wei = {0xA9, 0x87, 0xF0};
    const std::vector<float> scale = {1.f, 1.f}, x = {2.f, 1.f, 4.f};
    matmul_weights w{wei.data(), scale.data(), nullptr, nullptr};
    std::vector<float> y(2);
    ref::matmul(make(1, 3, 2, dtype::s4, 0, zk::none, false), w, x.data(), y.data());
    EXPECT_EQ(y, (std::vector<float>{-14.f - 6.f + 28.f, -16.f - 4.f}));
}

TEST(RefMatmul, HandComputedGroupWiseU8) {
    // K=4 in groups of 2: scales (1, 0.5), zero points (10, 20), x = 1, plus a second row x = (1,0,0,2).
    const std::vector<uint8_t> wei = {10, 20, 30, 40};
    const std::vector<float> scale = {1.f, 0.5f}, x = {1, 1, 1, 1, 1, 0, 0, 2};
    const std::vector<int32_t> zp = {10, 20};
    matmul_weights w{wei.data(), scale.data(), zp.data(), nullptr};
    std::vector<float> y(2);
    ref::matmul(make(2, 4, 1, dtype::u8, 2, zk::per_group, false), w, x.data(), y.data());
    // deq = (0, 10, 5, 10): row 0 → 25; row 1 → 0 + 20 = 20
    EXPECT_EQ(y, (std::vector<float>{25.f, 20.f}));
}

TEST(RefMatmul, HandComputedS8OddGroupsAcrossRows) {
    // N=3, K=3, group 3 = per-OC written as a group; the 4-bit twin below checks
    // that nibbles continue across row boundaries (K odd: row 1 starts in a high nibble).
    const std::vector<uint8_t> wei = {0xFF, 0x01, 0x80, 0x02, 0x03, 0x04, 0x7F, 0x00, 0x81};
    const std::vector<float> scale = {1.f, 2.f, 0.5f}, x = {1.f, -1.f, 2.f};
    matmul_weights w{wei.data(), scale.data(), nullptr, nullptr};
    std::vector<float> y(3);
    ref::matmul(make(1, 3, 3, dtype::s8, 3, zk::none, false), w, x.data(), y.data());
    // rows (−1, 1, −128), (2, 3, 4)·2, (127, 0, −127)·0.5
    EXPECT_EQ(y, (std::vector<float>{-1.f - 1.f - 256.f, 2.f * (2.f - 3.f + 8.f), 0.5f * (127.f - 254.f)}));

    // u4, N=3, K=3: elements 0..8 = 1..9 → bytes 0x21 0x43 0x65 0x87 0x09.
    const std::vector<uint8_t> w4 = {0x21, 0x43, 0x65, 0x87, 0x09};
    matmul_weights w2{w4.data(), scale.data(), nullptr, nullptr};
    ref::matmul(make(1, 3, 3, dtype::u4, 0, zk::none, false), w2, x.data(), y.data());
    // rows (1,2,3), (4,5,6)·2, (7,8,9)·0.5 with x = (1,−1,2)
    EXPECT_EQ(y, (std::vector<float>{1.f - 2.f + 6.f, 2.f * (4.f - 5.f + 12.f), 0.5f * (7.f - 8.f + 18.f)}));
}

// ------------------------------------------------ the full sweep, exact data

TEST(RefMatmul, EveryWeightTypeGranularityZeroPointAndBias) {
    struct kg {
        int64_t k, group;
    };
    const kg shapes[] = {{33, 0}, {7, 0}, {96, 32}, {15, 3}, {25, 5}, {9, 3}};
    int cases = 0;
    uint32_t seed = 1;
    for (dtype wdt : {dtype::u8, dtype::s8, dtype::u4, dtype::s4})
        for (const kg &s : shapes)
            for (zk z : {zk::none, zk::per_tensor, zk::per_group})
                for (bool bias : {false, true}) {
                    const matmul_desc d = make(3, s.k, 5, wdt, s.group, z, bias);
                    const problem p(d, seed++, /*exact=*/true);
                    EXPECT_EQ(p.run_ref(), p.run_loop()) << name(d);
                    ++cases;
                }
    EXPECT_EQ(cases, 4 * 6 * 3 * 2);
}

// Odd N·K: the last byte of a 4-bit tensor holds one element; its high nibble
// is padding and must not influence anything.
TEST(RefMatmul, OddElementCountIgnoresPaddingNibble) {
    for (dtype wdt : {dtype::u4, dtype::s4}) {
        const matmul_desc d = make(2, 5, 3, wdt, 5, zk::per_group, true);
        problem p(d, 77, true);
        ASSERT_EQ(p.wei.size(), 8u); // 15 elements
        const auto before = p.run_ref();
        p.wei.back() ^= 0xF0;
        EXPECT_EQ(p.run_ref(), before) << to_string(wdt);
        EXPECT_EQ(p.run_loop(), before) << to_string(wdt);
        p.wei.back() ^= 0x01; // the low nibble is element 14: changes row n=2
        const auto after = p.run_ref();
        EXPECT_NE(after, before);
        EXPECT_EQ(after[0], before[0]);
        EXPECT_EQ(after[3], before[3]);
    }
}

// ------------------------------------------------ general data, tolerance

TEST(RefMatmul, RandomFloatDataWithinTolerance) {
    // Real-valued scales and inputs: the reference sums in double and rounds once,
    // the loop here sums in f32, so they differ by f32 rounding only. Bound:
    // |Δ| ≤ 1e-5 · Σ|x·deq| (K ≤ 256 f32 additions, each ≤ 2^-24 relative).
    uint32_t seed = 1000;
    for (dtype wdt : {dtype::u8, dtype::s8, dtype::u4, dtype::s4})
        for (int64_t group : {0, 32, 3})
            for (zk z : {zk::none, zk::per_tensor, zk::per_group}) {
                const matmul_desc d = make(4, 96, 7, wdt, group, z, true);
                const problem p(d, seed++, /*exact=*/false);
                const auto got = p.run_ref(), want = p.run_loop();
                // Σ|x·deq| via the same loop on absolute values.
                problem a = p;
                for (auto &v : a.x) v = std::fabs(v);
                for (auto &b : a.bias) b = 0.f;
                const int64_t gs = d.group_size(), ng = d.n_groups();
                std::vector<float> mag(static_cast<size_t>(d.m * d.n), 0.f);
                for (int64_t m = 0; m < d.m; ++m)
                    for (int64_t n = 0; n < d.n; ++n)
                        for (int64_t k = 0; k < d.k; ++k) {
                            int32_t zz = z == zk::none ? 0 : z == zk::per_tensor ? p.zp[0] : p.zp[n * ng + k / gs];
                            mag[m * d.n + n] +=
                                a.x[m * d.k + k] *
                                std::fabs(float(unpack(p.wei, wdt, n * d.k + k) - zz) * p.scale[n * ng + k / gs]);
                        }
                for (size_t i = 0; i < got.size(); ++i)
                    ASSERT_NEAR(got[i], want[i], 1e-5f * (mag[i] + std::fabs(want[i]))) << name(d) << " i=" << i;
            }
}

TEST(RefMatmul, LeadingBatchFlattenedIntoM) {
    // Running M=6 at once equals two runs of M=3 on the halves.
    const matmul_desc d6 = make(6, 15, 4, dtype::s4, 3, zk::per_group, true);
    const problem p(d6, 5, true);
    const auto all = p.run_ref();
    matmul_desc d3 = d6;
    d3.m = 3;
    matmul_weights w{p.wei.data(), p.scale.data(), p.zp.data(), p.bias.data()};
    std::vector<float> half(12);
    for (int h = 0; h < 2; ++h) {
        ref::matmul(d3, w, p.x.data() + h * 3 * 15, half.data());
        for (int i = 0; i < 12; ++i) EXPECT_EQ(half[i], all[h * 12 + i]);
    }
}

TEST(RefMatmul, BadInputs) {
    const std::vector<uint8_t> wei(16, 0);
    const std::vector<float> scale(16, 1.f), x(16, 1.f);
    std::vector<float> y(16);
    auto expect_field = [&](const matmul_desc &d, const matmul_weights &w, const std::string &field) {
        try {
            ref::matmul(d, w, x.data(), y.data());
            ADD_FAILURE() << "accepted: " << field;
        } catch (const qconv::error &e) {
            EXPECT_EQ(std::string(e.what()).rfind(field, 0), 0u) << e.what();
        }
    };
    const matmul_weights ok{wei.data(), scale.data(), nullptr, nullptr};
    expect_field(make(1, 4, 2, dtype::u8, 3, zk::none, false), ok, "group"); // 3 does not divide 4
    expect_field(make(1, 4, 2, dtype::f32, 0, zk::none, false), ok, "wei_dt");
    expect_field(make(1, 4, 2, dtype::u8, 0, zk::per_tensor, false), ok, "zp");
    expect_field(make(1, 4, 2, dtype::u8, 0, zk::none, true), ok, "bias");
    expect_field(make(1, 0, 2, dtype::u8, 0, zk::none, false), ok, "k");
    expect_field(make(1, 4, 2, dtype::u8, 0, zk::none, false), {wei.data(), nullptr, nullptr, nullptr}, "scale");
}
