// Test data generators (see testdata.h).
#include "tests/support/testdata.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

namespace qconv::testdata {

data_kind parse_data_kind(const std::string &s) {
    if (s == "random") return data_kind::random;
    if (s == "extreme") return data_kind::extreme;
    fail("data", "unknown data kind '" + s + "' (valid: random, extreme)");
}

const char *to_string(data_kind k) { return k == data_kind::random ? "random" : "extreme"; }

rng::rng(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {
    for (int i = 0; i < 4; ++i) next();
}

uint32_t rng::next() {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return static_cast<uint32_t>((s_ * 0x2545F4914F6CDD1Dull) >> 32);
}

int32_t rng::uniform(int32_t lo, int32_t hi) {
    const uint64_t span = static_cast<uint64_t>(static_cast<int64_t>(hi) - lo + 1);
    return static_cast<int32_t>(lo + static_cast<int64_t>(next() % span));
}

bool rng::chance(int one_in) { return next() % static_cast<uint32_t>(one_in) == 0; }

size_t bytes_of(dtype dt, int64_t n) { return static_cast<size_t>((n * bits_of(dt) + 7) / 8); }

namespace {
// Distinct streams for the different arrays of one seed.
enum stream : uint64_t { s_src = 1, s_wei, s_bias, s_scale, s_zp, s_binary, s_dst };
rng stream_rng(uint32_t seed, stream s) { return rng((static_cast<uint64_t>(seed) << 8) | s); }
} // namespace

std::vector<uint8_t> make_src(const conv_problem &p, data_kind k, uint32_t seed) {
    rng r = stream_rng(seed, s_src);
    const int64_t n = p.desc.src_elems();
    std::vector<uint8_t> v(static_cast<size_t>(n));
    const bool u8 = p.src_dt == dtype::u8;
    for (auto &b : v) {
        int32_t x;
        if (k == data_kind::random) x = u8 ? r.uniform(0, 15) : r.uniform(-8, 7);
        else if (u8) x = r.chance(8) ? 0 : 255;
        else x = r.chance(2) ? -128 : 127;
        b = static_cast<uint8_t>(x);
    }
    return v;
}

std::vector<int8_t> make_weights(const conv_desc &d, data_kind k, uint32_t seed) {
    rng r = stream_rng(seed, s_wei);
    std::vector<int8_t> w(static_cast<size_t>(d.wei_elems()));
    const int64_t per_oc = d.icg() * d.kh * d.kw;
    for (int64_t i = 0; i < d.wei_elems(); ++i) {
        int32_t x;
        if (k == data_kind::random) {
            x = r.uniform(-4, 4);
        } else {
            switch ((i / per_oc) % 3) {
            case 0: x = 127; break;
            case 1: x = -128; break;
            default: x = r.chance(2) ? -128 : 127; break;
            }
        }
        w[static_cast<size_t>(i)] = static_cast<int8_t>(x);
    }
    return w;
}

std::vector<float> make_bias(const conv_desc &d, uint32_t seed) {
    rng r = stream_rng(seed, s_bias);
    std::vector<float> b(static_cast<size_t>(d.oc));
    for (auto &x : b) x = static_cast<float>(r.uniform(-8, 8));
    return b;
}

std::vector<float> make_scales(int64_t oc, bool per_tensor, uint32_t seed) {
    rng r = stream_rng(seed, s_scale);
    std::vector<float> s(per_tensor ? 1 : static_cast<size_t>(oc));
    for (auto &x : s) x = 1.f / static_cast<float>(1 << r.uniform(2, 6));
    return s;
}

zero_point make_zp(const std::string &spec, int64_t ic, dtype src_dt, data_kind k, uint32_t seed) {
    if (spec == "none" || spec.empty()) return zero_point::none();
    const auto colon = spec.find(':');
    const std::string kind = spec.substr(0, colon);
    const std::string value = colon == std::string::npos ? "" : spec.substr(colon + 1);
    if (kind != "tensor" && kind != "channel")
        fail("zp",
             "unknown zero point '" + spec + "' (valid: none, tensor:V, tensor:random, channel:V, channel:random)");
    rng r = stream_rng(seed, s_zp);
    const bool u8 = src_dt == dtype::u8;
    auto random_value = [&]() -> int32_t {
        if (k == data_kind::extreme) return r.chance(2) ? (u8 ? 255 : -128) : (u8 ? 0 : 127);
        return u8 ? r.uniform(0, 15) : r.uniform(-8, 7);
    };
    auto fixed_value = [&]() -> int32_t {
        char *end = nullptr;
        const long x = std::strtol(value.c_str(), &end, 10);
        if (value.empty() || *end != '\0') fail("zp", "bad value in '" + spec + "' (an integer or 'random')");
        return static_cast<int32_t>(x);
    };
    const bool random = value == "random";
    if (kind == "tensor") return zero_point::tensor(random ? random_value() : fixed_value());
    std::vector<int32_t> v(static_cast<size_t>(ic));
    const int32_t fixed = random ? 0 : fixed_value();
    for (auto &x : v) x = random ? random_value() : fixed;
    return zero_point::channel(std::move(v));
}

std::vector<std::vector<float>> make_binary_tensors(const conv_problem &p, uint32_t seed) {
    static const float values[] = {-4.f, -2.f, -1.f, -0.5f, 0.5f, 1.f, 2.f, 4.f};
    rng r = stream_rng(seed, s_binary);
    std::vector<std::vector<float>> out;
    for (const auto &op : p.ops) {
        if (op.k != post_op::kind::binary || op.bcast != broadcast::full) continue;
        std::vector<float> t(static_cast<size_t>(p.dst_elems()));
        for (auto &x : t) x = values[r.uniform(0, 7)];
        out.push_back(std::move(t));
    }
    return out;
}

std::vector<uint8_t> make_dst(const conv_problem &p, uint32_t seed) {
    rng r = stream_rng(seed, s_dst);
    const int64_t n = p.dst_elems();
    std::vector<uint8_t> v(bytes_of(p.dst_dt, n));
    for (int64_t i = 0; i < n; ++i) {
        switch (p.dst_dt) {
        case dtype::u8: v[static_cast<size_t>(i)] = static_cast<uint8_t>(r.uniform(0, 15)); break;
        case dtype::s8: v[static_cast<size_t>(i)] = static_cast<uint8_t>(static_cast<int8_t>(r.uniform(-8, 7))); break;
        case dtype::s32: {
            const int32_t x = r.uniform(-100, 100);
            std::memcpy(&v[static_cast<size_t>(i) * 4], &x, 4);
            break;
        }
        default: {
            const float x = static_cast<float>(r.uniform(-8, 8));
            std::memcpy(&v[static_cast<size_t>(i) * 4], &x, 4);
            break;
        }
        }
    }
    return v;
}

// ---------------------------------------------------------- compressed MatMul
void weight_range(dtype dt, int32_t *lo, int32_t *hi) {
    switch (dt) {
    case dtype::u8: *lo = 0, *hi = 255; break;
    case dtype::s8: *lo = -128, *hi = 127; break;
    case dtype::u4: *lo = 0, *hi = 15; break;
    case dtype::s4: *lo = -8, *hi = 7; break;
    default: fail("wei_dt", std::string("not a compressed weight type: ") + to_string(dt));
    }
}

void set_weight(std::vector<uint8_t> &w, dtype dt, int64_t i, int32_t v) {
    if (bits_of(dt) == 8) {
        w[static_cast<size_t>(i)] = static_cast<uint8_t>(v);
        return;
    }
    uint8_t &b = w[static_cast<size_t>(i / 2)];
    const int sh = 4 * static_cast<int>(i % 2);
    b = static_cast<uint8_t>((b & ~(0xF << sh)) | ((v & 0xF) << sh));
}

matmul_weights matmul_data::weights() const {
    matmul_weights w;
    w.wei = wei.data();
    if (d.scale_dt == dtype::f16) w.scale_f16 = scale_f16.data();
    else w.scale = scale.data();
    w.zp = zp.empty() ? nullptr : zp.data();
    w.bias = d.with_bias ? bias.data() : nullptr;
    return w;
}

matmul_data make_matmul_data(const matmul_desc &d, uint32_t seed) {
    d.validate();
    std::mt19937 gen(seed);
    matmul_data c;
    c.d = d;
    int32_t lo, hi;
    weight_range(d.wei_dt, &lo, &hi);
    std::uniform_int_distribution<int32_t> wd(lo, hi);
    c.wei.assign(static_cast<size_t>(d.wei_bytes()), 0);
    for (int64_t i = 0; i < d.n * d.k; ++i) set_weight(c.wei, d.wei_dt, i, wd(gen));
    std::uniform_real_distribution<float> sd(0.01f, 0.1f), xd(-1.f, 1.f), bd(-2.f, 2.f);
    c.scale.resize(static_cast<size_t>(d.scale_elems()));
    for (auto &v : c.scale) v = sd(gen);
    if (d.scale_dt == dtype::f16)
        for (auto &v : c.scale) {
            c.scale_f16.push_back(f32_to_f16(v));
            v = f16_to_f32(c.scale_f16.back());
        }
    c.zp.resize(static_cast<size_t>(d.zp_elems()));
    for (auto &v : c.zp) v = wd(gen);
    c.bias.resize(static_cast<size_t>(d.n));
    for (auto &v : c.bias) v = bd(gen);
    c.x.resize(static_cast<size_t>(d.m * d.k));
    for (auto &v : c.x) v = xd(gen);
    return c;
}

std::vector<double> matmul_error_bound(const matmul_data &c, bool dynamic_quantization) {
    const matmul_desc &d = c.d;
    const int64_t gs = d.group_size(), ng = d.n_groups();
    std::vector<double> half_step(static_cast<size_t>(d.m * ng), 0.0); // sx/2 per row and group
    if (dynamic_quantization)
        for (int64_t m = 0; m < d.m; ++m)
            for (int64_t k = 0; k < d.k; ++k) {
                double &h = half_step[static_cast<size_t>(m * ng + k / gs)];
                h = std::max(h, std::fabs(double(c.x[static_cast<size_t>(m * d.k + k)])) / 127.0 / 2.0);
            }
    std::vector<double> bound(static_cast<size_t>(d.m * d.n));
    std::vector<double> w(static_cast<size_t>(d.k)); // |deq(W)[n, k]|
    for (int64_t n = 0; n < d.n; ++n) {
        for (int64_t k = 0; k < d.k; ++k) {
            const int64_t g = k / gs;
            const int32_t zp = d.zp == matmul_desc::zp_kind::none         ? 0
                               : d.zp == matmul_desc::zp_kind::per_tensor ? c.zp[0]
                                                                          : c.zp[static_cast<size_t>(n * ng + g)];
            w[static_cast<size_t>(k)] = std::fabs(double(weight_at(c.wei.data(), d.wei_dt, n * d.k + k) - zp) *
                                                  c.scale[static_cast<size_t>(n * ng + g)]);
        }
        for (int64_t m = 0; m < d.m; ++m) {
            double mag = d.with_bias ? std::fabs(c.bias[static_cast<size_t>(n)]) : 0.0, q = 0.0;
            for (int64_t k = 0; k < d.k; ++k) {
                mag += w[static_cast<size_t>(k)] * std::fabs(c.x[static_cast<size_t>(m * d.k + k)]);
                q += w[static_cast<size_t>(k)] * half_step[static_cast<size_t>(m * ng + k / gs)];
            }
            bound[static_cast<size_t>(m * d.n + n)] = 1e-5 * mag + q;
        }
    }
    return bound;
}

} // namespace qconv::testdata
