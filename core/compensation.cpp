// Zero-point compensation (see compensation.h).
#include "core/compensation.h"

#include <string>

namespace qconv {

std::vector<int32_t> zp_compensation(const conv_desc &d, const int8_t *wei, const std::vector<int32_t> &zp) {
    if (zp.size() != 1 && static_cast<int64_t>(zp.size()) != d.ic)
        fail("zp", "expected 1 or " + std::to_string(d.ic) + " values, got " + std::to_string(zp.size()));
    const int64_t icg = d.icg(), ocg = d.ocg(), khw = d.kh * d.kw;
    std::vector<int32_t> comp(static_cast<size_t>(d.oc));
    for (int64_t c = 0; c < d.oc; ++c) {
        const int64_t g = c / ocg;
        int64_t sum = 0;
        for (int64_t ic = 0; ic < icg; ++ic) {
            const int64_t z = zp.size() == 1 ? zp[0] : zp[static_cast<size_t>(g * icg + ic)];
            const int8_t *w = wei + (c * icg + ic) * khw;
            for (int64_t k = 0; k < khw; ++k) sum += static_cast<int64_t>(w[k]) * z;
        }
        if (sum > INT32_MAX || -sum > INT32_MAX) fail("zp", "compensation overflows int32 for oc " + std::to_string(c));
        comp[static_cast<size_t>(c)] = static_cast<int32_t>(-sum);
    }
    return comp;
}

int32_t source_shift(dtype src) { return src == dtype::s8 ? 128 : 0; }

int32_t source_zp(const attr_set &a, int64_t ic) {
    if (a.zp == zp_mechanism::none || a.zp_values.empty()) return 0;
    return a.zp_values.size() == 1 ? a.zp_values[0] : a.zp_values[static_cast<size_t>(ic)];
}

uint8_t pad_byte(const conv_problem &p, const attr_set &a, int64_t ic) {
    const int32_t zp = a.zp == zp_mechanism::legacy_per_channel ? source_zp(a, ic) : 0;
    return static_cast<uint8_t>(zp + source_shift(p.src_dt)); // 0..255 for a zp in the source type's range
}

std::vector<int32_t> shifted_compensation(const conv_problem &p, const attr_set &a, const int8_t *wei, int64_t extra) {
    const conv_desc &d = p.desc;
    std::vector<int32_t> comp(static_cast<size_t>(d.oc + extra), 0);
    if (a.zp == zp_mechanism::legacy_per_channel) {
        const std::vector<int32_t> c = zp_compensation(d, wei, a.zp_values);
        std::copy(c.begin(), c.end(), comp.begin());
    }
    // −Σ w·shift, added in uint32 (int32 wrap-around, like the kernels' sums).
    if (const uint32_t shift = static_cast<uint32_t>(source_shift(p.src_dt))) {
        const int64_t k = d.icg() * d.kh * d.kw;
        for (int64_t oc = 0; oc < d.oc; ++oc) {
            uint32_t s = 0;
            for (int64_t i = 0; i < k; ++i) s += static_cast<uint32_t>(static_cast<int32_t>(wei[oc * k + i]));
            comp[static_cast<size_t>(oc)] =
                static_cast<int32_t>(static_cast<uint32_t>(comp[static_cast<size_t>(oc)]) - shift * s);
        }
    }
    return comp;
}

std::vector<uint32_t> padded_tap_sums(const conv_problem &p, const attr_set &a, const int8_t *wei) {
    const conv_desc &d = p.desc;
    const int64_t taps = d.kh * d.kw, icg = d.icg(), ocg = d.ocg();
    std::vector<uint32_t> s(static_cast<size_t>(d.oc * taps), 0);
    for (int64_t oc = 0; oc < d.oc; ++oc) {
        const int64_t g = oc / ocg;
        for (int64_t ic = 0; ic < icg; ++ic) {
            const uint32_t v = pad_byte(p, a, g * icg + ic);
            for (int64_t t = 0; t < taps; ++t)
                s[oc * taps + t] += static_cast<uint32_t>(static_cast<int32_t>(wei[(oc * icg + ic) * taps + t])) * v;
        }
    }
    return s;
}

bool zp_fits_padding(const conv_problem &p, const attr_set &a, std::string *why) {
    auto no = [why](const char *reason) {
        if (why) *why = reason;
        return false;
    };
    if (a.zp_values.size() != 1 && static_cast<int64_t>(a.zp_values.size()) != p.desc.ic)
        return no("zero point needs 1 or IC values");
    const bool u8 = p.src_dt == dtype::u8;
    const int32_t lo = u8 ? 0 : -128, hi = u8 ? 255 : 127;
    for (int32_t z : a.zp_values)
        if (z < lo || z > hi)
            return no(u8 ? "zero point outside [0, 255] (u8 source)" : "zero point outside [-128, 127] (s8 source)");
    return true;
}

} // namespace qconv
