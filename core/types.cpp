// Names and parsers of the basic enums, and qconv::fail().
#include "qconv/types.h"

#include <algorithm>
#include <cctype>

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

constexpr const char *isa_names[] = {
    "sse41", "avx2", "avx2_vnni", "avx512_core", "avx512_core_vnni", "avx512_core_bf16", "avx512_core_amx",
};

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
}
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

const char *to_string(isa i) { return isa_names[static_cast<int>(i)]; }

isa parse_isa(const std::string &s, const std::string &field) {
    const std::string l = lower(s);
    std::string valid;
    for (int i = 0; i < static_cast<int>(std::size(isa_names)); ++i) {
        if (l == isa_names[i]) return static_cast<isa>(i);
        valid += (i ? ", " : "") + std::string(isa_names[i]);
    }
    fail(field, "unknown ISA '" + s + "' (valid: " + valid + ")");
}

} // namespace qconv
