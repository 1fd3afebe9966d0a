// Names and parsers of the basic enums, and qconv::fail().
#include "qconv/types.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace qconv {

void fail(const std::string &field, const std::string &what) { throw error(field + ": " + what); }

namespace {
struct dtype_info {
    dtype dt;
    const char *name;
    int bits;
};
constexpr dtype_info dtypes[] = {
    {dtype::f32, "f32", 32}, {dtype::bf16, "bf16", 16}, {dtype::f16, "f16", 16}, {dtype::s32, "s32", 32},
    {dtype::s8, "s8", 8},    {dtype::u8, "u8", 8},      {dtype::s4, "s4", 4},    {dtype::u4, "u4", 4},
};
} // namespace

const char *to_string(dtype dt) {
    for (const auto &d : dtypes)
        if (d.dt == dt) return d.name;
    return "undef";
}

dtype parse_dtype(const std::string &s, const std::string &field) {
    for (const auto &d : dtypes)
        if (s == d.name) return d.dt;
    fail(field, "unknown data type '" + s + "' (expected f32, bf16, f16, s32, s8, u8, s4 or u4)");
}

int bits_of(dtype dt) {
    for (const auto &d : dtypes)
        if (d.dt == dt) return d.bits;
    return 0;
}

bool is_integer(dtype dt) {
    return dt == dtype::s32 || dt == dtype::s8 || dt == dtype::u8 || dt == dtype::s4 || dt == dtype::u4;
}

uint16_t f32_to_bf16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((x >> 16) | 0x40u); // NaN: quiet, sign kept
    x += 0x7FFFu + ((x >> 16) & 1u);                                         // round to nearest even
    return uint16_t(x >> 16);
}

float bf16_to_f32(uint16_t h) {
    const uint32_t x = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}

// IEEE binary16 <-> binary32 (bit manipulation, no F16C needed).
uint16_t f32_to_f16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t ax = x & 0x7FFFFFFFu;
    if (ax >= 0x7F800000u) return sign | 0x7C00u | (ax > 0x7F800000u ? 0x200u : 0u); // inf/nan
    if (ax >= 0x477FF000u) return sign | 0x7C00u;                                    // overflow → inf
    if (ax < 0x38800000u) {                                                          // subnormal / zero
        float a;
        std::memcpy(&a, &ax, 4);
        // a * 2^24 rounded to nearest even gives the subnormal mantissa.
        return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
    }
    uint32_t m = ax + 0xC8000000u;   // rebias exponent 127 → 15 (−112 << 23)
    m += 0x0FFFu + ((m >> 13) & 1u); // round to nearest even
    return sign | static_cast<uint16_t>(m >> 13);
}

float f16_to_f32(uint16_t h) {
    const uint32_t sign = (h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
    float r;
    if (e == 0) r = std::ldexp(static_cast<float>(m), -24);
    else if (e == 31) r = m ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
    else r = std::ldexp(static_cast<float>(m | 0x400), static_cast<int>(e) - 25);
    uint32_t x;
    std::memcpy(&x, &r, 4);
    x |= sign;
    std::memcpy(&r, &x, 4);
    return r;
}

} // namespace qconv
