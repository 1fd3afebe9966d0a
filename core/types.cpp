// Names and parsers of the basic enums, and qconv::fail().
#include "qconv/types.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace qconv {

void fail(const std::string &field, const std::string &what) { throw error(field + ": " + what); }

namespace {
// The one element-type table of the project: the kernels' name (oneDNN's "s8"),
// the graph text format's name (OpenVINO's "i8"), bits per element.
struct dtype_info {
    dtype dt;
    const char *name;
    const char *ir_name;
    int bits;
    bool integer;
};
constexpr dtype_info dtypes[] = {
    {dtype::f32, "f32", "f32", 32, false}, {dtype::bf16, "bf16", "bf16", 16, false},
    {dtype::f16, "f16", "f16", 16, false}, {dtype::s32, "s32", "i32", 32, true},
    {dtype::s8, "s8", "i8", 8, true},      {dtype::u8, "u8", "u8", 8, true},
    {dtype::s4, "s4", "i4", 4, true},      {dtype::u4, "u4", "u4", 4, true},
    {dtype::s64, "s64", "i64", 64, true},
};
const dtype_info *find(dtype dt) {
    for (const auto &d : dtypes)
        if (d.dt == dt) return &d;
    return nullptr;
}
} // namespace

const char *to_string(dtype dt) {
    const dtype_info *d = find(dt);
    return d ? d->name : "undef";
}

const char *ir_name(dtype dt) {
    const dtype_info *d = find(dt);
    return d ? d->ir_name : "undef";
}

dtype parse_dtype(const std::string &s, const std::string &field) {
    for (const auto &d : dtypes)
        if (s == d.name || s == d.ir_name) return d.dt;
    fail(field, "unknown element type '" + s + "' (expected f32, f16, bf16, u8, s8|i8, u4, s4|i4, s32|i32 or s64|i64)");
}

int bits_of(dtype dt) {
    const dtype_info *d = find(dt);
    return d ? d->bits : 0;
}

bool is_integer(dtype dt) {
    const dtype_info *d = find(dt);
    return d && d->integer;
}

int64_t storage_bytes(dtype dt, int64_t elems) { return (elems * bits_of(dt) + 7) / 8; }

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
