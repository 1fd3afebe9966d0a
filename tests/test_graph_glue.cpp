// The executor's vectorized u8/i8 glue (graph/ops/glue_kernels.cpp) against
// scalar loops written here from the ops' definitions: MaxPool of NHWC
// integers (odd channel counts, padding, windows that miss the input, the
// types' extremes), QuantizeLinear (round half to even, saturation, NaN → 0,
// infinities, −0, per tensor and per channel, plain and NHWC output),
// DequantizeLinear (plain and NHWC input) and the global average pool of a
// DequantizeLinear read from the bytes. Bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "graph/ir/detail.h"
#include "graph/ops/ops.h"

using namespace qconv::graph;

namespace {

std::vector<uint8_t> random_bytes(uint64_t seed, size_t n) {
    detail::rng r(seed);
    std::vector<uint8_t> v(n);
    for (auto &b : v) {
        const uint64_t k = r.next() % 8;
        // The extremes of both types often, the rest uniform.
        b = k == 0 ? 0 : k == 1 ? 255 : k == 2 ? 127 : k == 3 ? 128 : static_cast<uint8_t>(r.next());
    }
    return v;
}

template <typename T>
std::vector<uint8_t> max_pool_scalar(const detail::pool_geometry &p, const std::vector<uint8_t> &src) {
    std::vector<uint8_t> out(static_cast<size_t>(p.N * p.OH * p.OW * p.C));
    for (int64_t b = 0; b < p.N; ++b)
        for (int64_t oh = 0; oh < p.OH; ++oh)
            for (int64_t ow = 0; ow < p.OW; ++ow)
                for (int64_t c = 0; c < p.C; ++c) {
                    bool any = false;
                    T m = 0;
                    for (int64_t kh = 0; kh < p.KH; ++kh)
                        for (int64_t kw = 0; kw < p.KW; ++kw) {
                            const int64_t h = oh * p.SH - p.PT + kh, w = ow * p.SW - p.PL + kw;
                            if (h < 0 || h >= p.H || w < 0 || w >= p.W) continue;
                            const T v = static_cast<T>(src[((b * p.H + h) * p.W + w) * p.C + c]);
                            m = any ? std::max(m, v) : v;
                            any = true;
                        }
                    out[((b * p.OH + oh) * p.OW + ow) * p.C + c] = static_cast<uint8_t>(m);
                }
    return out;
}

TEST(GraphGlue, MaxPoolNhwcEqualsTheScalarLoopOnOddChannelsAndPadding) {
    struct geo {
        int64_t H, W, K, S, P;
    };
    const geo geos[] = {{112, 112, 3, 2, 1}, {9, 7, 2, 2, 0}, {5, 6, 3, 1, 1},
                        {4, 4, 3, 3, 2},     {3, 3, 2, 2, 2}, {7, 7, 7, 1, 0}};
    for (const int64_t C : {1, 3, 15, 16, 17, 63, 64, 65, 130}) {
        for (const auto &g : geos) {
            if (g.H == 112 && C > 64) continue; // the big case once is enough
            detail::pool_geometry p;
            p.N = 2, p.C = C, p.H = g.H, p.W = g.W, p.KH = g.K, p.KW = g.K, p.SH = g.S, p.SW = g.S;
            p.PT = g.P, p.PL = g.P;
            p.OH = (g.H + 2 * g.P - g.K) / g.S + 1;
            p.OW = (g.W + 2 * g.P - g.K) / g.S + 1;
            const auto src = random_bytes(static_cast<uint64_t>(C * 131 + g.H), static_cast<size_t>(2 * g.H * g.W * C));
            for (const bool is_signed : {false, true}) {
                SCOPED_TRACE("C=" + std::to_string(C) + " H=" + std::to_string(g.H) + " K=" + std::to_string(g.K) +
                             (is_signed ? " i8" : " u8"));
                std::vector<uint8_t> got(static_cast<size_t>(p.N * p.OH * p.OW * C), 0xA5);
                detail::max_pool_nhwc_8bit(p, is_signed, src.data(), got.data());
                const auto want = is_signed ? max_pool_scalar<int8_t>(p, src) : max_pool_scalar<uint8_t>(p, src);
                EXPECT_EQ(got, want);
            }
        }
    }
}

// The definition: nearbyint(x / scale) + zp, saturated, NaN → 0.
uint8_t quantize_one(float x, float s, int64_t zp, bool u8) {
    const float q = std::nearbyint(x / s);
    if (std::isnan(q)) return 0;
    const double v = std::min(std::max(double(q) + double(zp), u8 ? 0.0 : -128.0), u8 ? 255.0 : 127.0);
    return u8 ? static_cast<uint8_t>(v) : static_cast<uint8_t>(static_cast<int8_t>(v));
}

// Values around every rounding boundary and beyond the range.
std::vector<float> hard_floats(uint64_t seed, size_t n, float s) {
    detail::rng r(seed);
    const float special[] = {0.f,
                             -0.f,
                             std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity(),
                             std::numeric_limits<float>::quiet_NaN(),
                             std::numeric_limits<float>::max(),
                             -std::numeric_limits<float>::max(),
                             std::numeric_limits<float>::denorm_min(),
                             1e30f,
                             -1e30f,
                             4194304.5f,
                             8388609.f};
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) {
        const uint64_t k = r.next() % 4;
        const float half = static_cast<float>(static_cast<int64_t>(r.next() % 600) - 300) + 0.5f;
        v[i] = k == 0   ? special[r.next() % (sizeof special / sizeof special[0])]
               : k == 1 ? half * s // exact halves of a step: ties to even
                        : static_cast<float>(r.uniform() * 700.0 - 350.0) * s;
    }
    return v;
}

TEST(GraphGlue, QuantizeEqualsTheDefinitionPerTensorAndPerChannelPlainAndNhwc) {
    for (const bool u8 : {true, false}) {
        for (const int64_t C : {1, 3, 17}) {
            for (const int64_t HW : {1, 15, 16, 33, 300}) {
                const int64_t N = 2, total = N * C * HW;
                std::vector<float> scales(static_cast<size_t>(C));
                std::vector<int64_t> zps(static_cast<size_t>(C));
                for (int64_t c = 0; c < C; ++c) {
                    scales[c] = c % 2 ? 0.0173f : 0.25f;
                    zps[c] = u8 ? (c % 3 == 0   ? 0
                                   : c % 3 == 1 ? 255
                                                : 128)
                                : (c % 3 == 0   ? 0
                                   : c % 3 == 1 ? -128
                                                : 127);
                }
                const auto x = hard_floats(static_cast<uint64_t>(C * 1000 + HW), static_cast<size_t>(total), 0.25f);
                for (const bool per_axis : {false, true}) {
                    for (const bool nhwc : {false, true}) {
                        SCOPED_TRACE(std::string(u8 ? "u8" : "i8") + " C=" + std::to_string(C) +
                                     " HW=" + std::to_string(HW) + (per_axis ? " per-channel" : " per-tensor") +
                                     (nhwc ? " nhwc" : " plain"));
                        detail::quant_params q;
                        q.per_axis = per_axis;
                        q.scale = scales.data();
                        q.zp = zps.data();
                        if (per_axis || nhwc) q.outer = N, q.C = C, q.inner = HW;
                        else q.outer = 1, q.C = 1, q.inner = total;
                        std::vector<uint8_t> got(static_cast<size_t>(total), 0xA5);
                        detail::quantize_f32(x.data(), q, u8, nhwc, got.data());
                        for (int64_t n = 0; n < N; ++n)
                            for (int64_t c = 0; c < C; ++c)
                                for (int64_t i = 0; i < HW; ++i) {
                                    const int64_t src = (n * C + c) * HW + i;
                                    const int64_t dst = nhwc ? (n * HW + i) * C + c : src;
                                    const int64_t k = per_axis ? c : 0;
                                    ASSERT_EQ(got[dst], quantize_one(x[src], scales[k], zps[k], u8))
                                        << "x=" << x[src] << " element " << src;
                                }
                    }
                }
            }
        }
    }
}

TEST(GraphGlue, DequantizeEqualsTheDefinitionPlainAndNhwc) {
    for (const bool u8 : {true, false}) {
        for (const int64_t C : {1, 5, 37, 64}) {
            for (const int64_t HW : {1, 17, 49}) {
                const int64_t N = 2, total = N * C * HW;
                std::vector<float> scales(static_cast<size_t>(C));
                std::vector<int64_t> zps(static_cast<size_t>(C));
                for (int64_t c = 0; c < C; ++c) {
                    scales[c] = 0.0173f * static_cast<float>(c + 1);
                    zps[c] = u8 ? (c * 37) % 256 : (c * 37) % 256 - 128;
                }
                const auto x = random_bytes(static_cast<uint64_t>(C + HW), static_cast<size_t>(total));
                for (const bool per_axis : {false, true}) {
                    for (const bool nhwc : {false, true}) {
                        SCOPED_TRACE(std::string(u8 ? "u8" : "i8") + " C=" + std::to_string(C) +
                                     " HW=" + std::to_string(HW) + (per_axis ? " per-channel" : " per-tensor") +
                                     (nhwc ? " nhwc" : " plain"));
                        detail::quant_params q;
                        q.per_axis = per_axis;
                        q.scale = scales.data();
                        q.zp = zps.data();
                        if (per_axis || nhwc) q.outer = N, q.C = C, q.inner = HW;
                        else q.outer = 1, q.C = 1, q.inner = total;
                        std::vector<float> got(static_cast<size_t>(total), -1.f);
                        detail::dequantize_to_f32(x.data(), q, u8, nhwc, got.data());
                        for (int64_t n = 0; n < N; ++n)
                            for (int64_t c = 0; c < C; ++c)
                                for (int64_t i = 0; i < HW; ++i) {
                                    const int64_t dst = (n * C + c) * HW + i;
                                    const int64_t src = nhwc ? (n * HW + i) * C + c : dst;
                                    const int64_t k = per_axis ? c : 0;
                                    const int32_t v = u8 ? int32_t(x[src]) : int32_t(static_cast<int8_t>(x[src]));
                                    const float want = static_cast<float>(v - static_cast<int32_t>(zps[k])) * scales[k];
                                    ASSERT_EQ(std::memcmp(&got[dst], &want, sizeof want), 0)
                                        << got[dst] << " vs " << want << " element " << dst;
                                }
                    }
                }
            }
        }
    }
}

// The fold of DequantizeLinear into a global average pool against the two
// steps it replaces: dequantize_to_f32, then the in-order double sums of the
// general ReduceMean.
TEST(GraphGlue, DequantizeMeanEqualsDequantizeThenMean) {
    const float scales[] = {0.0173f, 3.7e-5f, 1.f / 3.f, 6.02e29f, 1e-40f /* subnormal */};
    for (const bool u8 : {true, false}) {
        for (const int64_t C : {1, 5, 16, 37, 48, 64, 85}) {
            for (const int64_t HW : {1, 17, 49}) {
                const int64_t N = 2, total = N * C * HW;
                const auto x = random_bytes(static_cast<uint64_t>(3 * C + HW), static_cast<size_t>(total));
                for (const float sc : scales) {
                    for (const int64_t zp :
                         {int64_t(0), u8 ? int64_t(255) : int64_t(-128), u8 ? int64_t(131) : int64_t(127)}) {
                        for (const bool nhwc : {false, true}) {
                            SCOPED_TRACE(std::string(u8 ? "u8" : "i8") + " C=" + std::to_string(C) +
                                         " HW=" + std::to_string(HW) + " sc=" + std::to_string(sc) +
                                         " zp=" + std::to_string(zp) + (nhwc ? " nhwc" : " plain"));
                            detail::quant_params q;
                            q.scale = &sc;
                            q.zp = &zp;
                            if (nhwc) q.outer = N, q.C = C, q.inner = HW;
                            else q.outer = 1, q.C = 1, q.inner = total;
                            std::vector<float> f(static_cast<size_t>(total));
                            detail::dequantize_to_f32(x.data(), q, u8, nhwc, f.data());
                            std::vector<float> got(static_cast<size_t>(N * C), -1.f);
                            detail::dequantize_mean(x.data(), u8, nhwc, N, C, HW, sc, static_cast<int32_t>(zp),
                                                    got.data());
                            for (int64_t k = 0; k < N * C; ++k) {
                                double acc = 0;
                                for (int64_t i = 0; i < HW; ++i) acc += f[static_cast<size_t>(k * HW + i)];
                                const float want = static_cast<float>(acc / static_cast<double>(HW));
                                ASSERT_EQ(std::memcmp(&got[k], &want, sizeof want), 0)
                                    << got[k] << " vs " << want << " output " << k;
                            }
                        }
                    }
                }
            }
        }
    }
}

} // namespace
