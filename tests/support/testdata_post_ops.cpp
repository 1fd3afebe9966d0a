// testdata::make_post_ops: the post-op shorthand of the tests and the driver
// (`scale_shift`, `prelu:per_tensor`, `add:per_oc`, `fq:per_channel:16`, ...),
// completed with generated values and handed to qconv::parse_post_ops.
//
// Generated values keep the f32 output pipeline exact (every operation on
// small integers produces an exactly representable result), so all
// implementations must agree bit for bit:
//   scale_shift   scale ∈ {0.5, 1, 2}, shift ∈ integers [−4, 4]
//   prelu         slope ∈ {0.25, 0.5}
//   binary        add/sub/max/min: integers [−4, 4]; mul: {−2, −1, 1, 2, 3};
//                 div: {0.5, 1, 2, 4} (powers of two)
//   fq            per channel: ih − il = (L−1)·2^a with a ∈ {0, 1, 2} and
//                 il = −m·2^a with m ∈ {0, 32, 64, 128}, so isc = 2^−a and
//                 ish = m are exact; oh − ol = (L−1)·2^b with b ∈ {0, −1}
//                 and ol ∈ {0, −128}, so osc = 2^b and osh = ol are exact.
//                 per tensor: the same rule drawn once.
//   dw            dw[:STRIDE[:MID_DT[:bias|nobias[:random|extreme]]]]
//                 (defaults 1, u8, bias, random): weights s8 in [−4, 4]
//                 (extreme: whole channels of 127, of −128, and mixed
//                 −128/127), bias integers [−8, 8], scales 2^−5 .. 2^−2
//                 per channel — the depthwise's f32 pipeline stays exact.
// Values come from a std::mt19937 seeded with (seed, item index), reduced
// with %, so a (text, oc, seed) triple gives the same values everywhere.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/text.h"
#include "tests/support/testdata.h"

namespace qconv::testdata {
namespace {

using detail::split;
using detail::trim;

struct gen {
    std::mt19937 rng;
    gen(uint32_t seed, size_t index) {
        std::seed_seq s{seed, uint32_t(index), 0x9e3779b9u};
        rng.seed(s);
    }
    std::vector<float> pick(int64_t n, const std::vector<float> &set) {
        std::vector<float> v(n);
        for (auto &x : v) x = set[rng() % set.size()];
        return v;
    }
    std::vector<float> ints(int64_t n, int lo, int hi) {
        std::vector<float> v(n);
        for (auto &x : v) x = float(lo + int(rng() % uint32_t(hi - lo + 1)));
        return v;
    }
};

// The values are small dyadic numbers: %.9g prints them exactly.
std::string list(const std::vector<float> &v) {
    std::string s;
    char buf[32];
    for (size_t i = 0; i < v.size(); ++i) {
        std::snprintf(buf, sizeof buf, "%.9g", double(v[i]));
        s += (i ? "," : "") + std::string(buf);
    }
    return s;
}

bool is_binary(const std::string &n) {
    return n == "add" || n == "sub" || n == "mul" || n == "div" || n == "max" || n == "min";
}
bool is_bcast(const std::string &s) { return s == "per_tensor" || s == "per_oc" || s == "per_channel"; }

std::string binary_item(gen &g, const std::string &name, const std::string &bcast, int64_t oc) {
    const int64_t n = bcast == "per_tensor" ? 1 : oc;
    std::vector<float> v = name == "mul"   ? g.pick(n, {-2.f, -1.f, 1.f, 2.f, 3.f})
                           : name == "div" ? g.pick(n, {0.5f, 1.f, 2.f, 4.f})
                                           : g.ints(n, -4, 4);
    return name + (bcast == "per_tensor" ? ":per_tensor:" : ":per_oc:") + list(v);
}

// levels_text is kept as written, so the parser reports a bad one.
std::string fq_item(gen &g, const std::string &levels_text, int64_t n) {
    char *end = nullptr;
    const long levels = std::strtol(levels_text.c_str(), &end, 10);
    const float steps = levels_text.empty() || *end != '\0' || levels < 2 || levels > 65536 ? 255.f : float(levels - 1);
    std::vector<float> il(n), ih(n), ol(n), oh(n);
    for (int64_t c = 0; c < n; ++c) {
        const float in_step = std::ldexp(1.f, int(g.rng() % 3)); // 2^a, a ∈ {0,1,2}
        static const float ms[] = {0.f, 32.f, 64.f, 128.f};
        const float m = ms[g.rng() % 4];
        const float out_step = (g.rng() % 2) ? 1.f : 0.5f; // 2^b, b ∈ {0,−1}
        const float out_base = (g.rng() % 2) ? 0.f : -128.f;
        il[c] = -m * in_step;
        ih[c] = il[c] + steps * in_step;
        ol[c] = out_base;
        oh[c] = out_base + steps * out_step;
    }
    return "fq:" + levels_text + ":" + list(il) + ":" + list(ih) + ":" + list(ol) + ":" + list(oh);
}

std::string ints_text(const std::vector<int> &v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s;
}

// The dw shorthand (up to 5 fields; the full form has 6).
std::string dw_item(gen &g, const std::vector<std::string> &f, int64_t oc) {
    const std::string stride = f.size() > 1 ? f[1] : "1", mid = f.size() > 2 ? f[2] : "u8";
    const bool bias = f.size() <= 3 || f[3] != "nobias";
    const bool extreme = f.size() > 4 && f[4] == "extreme";
    std::vector<int> wei(static_cast<size_t>(9 * oc));
    for (int64_t c = 0; c < oc; ++c) {
        const uint32_t mode = g.rng() % 3;
        for (int t = 0; t < 9; ++t) {
            int v = int(g.rng() % 9) - 4;
            if (extreme) v = mode == 0 ? 127 : mode == 1 ? -128 : (g.rng() % 2 ? 127 : -128);
            wei[static_cast<size_t>(c * 9 + t)] = v;
        }
    }
    std::vector<float> scales(static_cast<size_t>(oc));
    for (auto &x : scales) x = std::ldexp(1.f, -2 - int(g.rng() % 4));
    return "dw:" + stride + ":" + mid + ":" + ints_text(wei) + ":" + (bias ? list(g.ints(oc, -8, 8)) : "none") + ":" +
           list(scales);
}

// One item with its values written out; an item that already has them, or
// that the parser will reject, is returned as it is.
std::string complete(const std::string &item, int64_t oc, gen &g) {
    const auto f = split(item, ':');
    const std::string &name = f[0];
    if (is_binary(name) && f.size() <= 2) {
        const std::string bc = f.size() > 1 ? f[1] : "per_tensor";
        return is_bcast(bc) ? binary_item(g, name, bc, oc) : item;
    }
    if (name == "dw" && f.size() <= 5) return dw_item(g, f, oc);
    const bool shorthand =
        f.size() == 1 || (f.size() == 2 && is_bcast(f[1])) || (name == "fq" && f.size() == 3 && is_bcast(f[1]));
    if (!shorthand) return item;
    const bool per_tensor = f.size() > 1 && f[1] == "per_tensor";
    if (name == "scale_shift" || name == "prelu") {
        const int64_t n = per_tensor ? 1 : oc;
        if (name == "prelu") return "prelu:" + list(g.pick(n, {0.25f, 0.5f}));
        const std::vector<float> scale = g.pick(n, {0.5f, 1.f, 2.f});
        return "scale_shift:" + list(scale) + ":" + list(g.ints(n, -4, 4));
    }
    if (name == "fq") {
        const bool per_channel = f.size() > 1 && !per_tensor;
        return fq_item(g, f.size() > 2 ? f[2] : "256", per_channel ? oc : 1);
    }
    return item;
}

} // namespace

post_ops make_post_ops(const std::string &text, int64_t oc, uint32_t seed) {
    const std::string all = trim(text);
    if (all.empty() || all == "none" || oc < 1) return parse_post_ops(all, oc);
    const auto items = split(all, ';');
    std::string full;
    for (size_t i = 0; i < items.size(); ++i) {
        gen g(seed, i);
        full += (i ? ";" : "") + complete(trim(items[i]), oc, g);
    }
    return parse_post_ops(full, oc);
}

} // namespace qconv::testdata
