// The ISA table (core/isa_table.h) and what derives from it.
#include "core/isa_table.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <string>

namespace qconv::impl {

namespace {
using f = cpu_feature;
// Every level of the ladder: {level, name, ONEDNN_MAX_CPU_ISA, features, admitted by its cap}.
constexpr isa_level levels[] = {
    {isa::sse41, "sse41", "SSE41", {}, {}},
    {isa::avx2, "avx2", "AVX2", {f::avx2}, {}},
    {isa::avx2_vnni, "avx2_vnni", "AVX2_VNNI", {f::avx2, f::avx2_vnni}, {}},
    {isa::avx512_core, "avx512_core", "AVX512_CORE", {f::avx2, f::avx512_core}, {}},
    {isa::avx512_core_vnni,
     "avx512_core_vnni",
     "AVX512_CORE_VNNI",
     {f::avx2, f::avx512_core, f::avx512_core_vnni},
     {f::avx512_vbmi}},
    {isa::avx512_core_bf16,
     "avx512_core_bf16",
     "AVX512_CORE_BF16",
     {f::avx2, f::avx512_core, f::avx512_core_vnni, f::avx512_bf16},
     {}},
    {isa::avx512_core_amx,
     "avx512_core_amx",
     "AVX512_CORE_AMX",
     {f::avx2, f::avx512_core, f::avx512_core_vnni, f::avx512_bf16, f::amx_int8, f::amx_bf16},
     {}},
};

constexpr bool in_enum_order() {
    for (size_t i = 0; i < std::size(levels); ++i)
        if (static_cast<size_t>(levels[i].level) != i) return false;
    return true;
}
static_assert(in_enum_order(), "isa_levels(): one line per qconv::isa value, in its order");
static_assert(std::size(levels) == isa_level_count, "isa_levels(): a line for every qconv::isa value");
} // namespace

const isa_level (&isa_levels())[isa_level_count] { return levels; }

const isa_level &isa_level_of(isa level) { return levels[static_cast<size_t>(level)]; }

const char *to_string(cpu_feature feature) {
    switch (feature) {
    case f::avx2: return "avx2";
    case f::avx2_vnni: return "avx2_vnni";
    case f::avx512_core: return "avx512_core";
    case f::avx512_core_vnni: return "avx512_core_vnni";
    case f::avx512_vbmi: return "avx512_vbmi";
    case f::avx512_bf16: return "avx512_bf16";
    case f::amx_int8: return "amx_int8";
    case f::amx_bf16: return "amx_bf16";
    }
    return "?";
}

std::string feature_set::str() const {
    std::string s;
    for (cpu_feature x : all_cpu_features)
        if (has(x)) s += (s.empty() ? "" : "+") + std::string(to_string(x));
    return s.empty() ? "none" : s;
}

std::string feature_set::missing(const feature_set &needed) const {
    feature_set m;
    for (cpu_feature x : all_cpu_features)
        if (needed.has(x) && !has(x)) m.add(x);
    return m.str();
}

bool cap_allows(isa level, cpu_feature feature) {
    for (const isa_level &l : levels) {
        if (l.level > level) break;
        if (l.features.has(feature) || l.cap_extra.has(feature)) return true;
    }
    return false;
}

isa level_of(const feature_set &s) {
    isa best = isa::sse41;
    for (const isa_level &l : levels)
        if (s.contains(l.features)) best = l.level;
    return best;
}

bool level_has_vnni(isa level) {
    const feature_set &s = isa_level_of(level).features;
    return s.has(f::avx2_vnni) || s.has(f::avx512_core_vnni) || s.has(f::amx_int8);
}

} // namespace qconv::impl

namespace qconv {

// The names of the public enum (qconv/types.h) are the table's.
const char *to_string(isa i) { return impl::isa_level_of(i).name; }

isa parse_isa(const std::string &s, const std::string &field) {
    std::string l = s;
    std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
    std::string valid;
    for (const impl::isa_level &level : impl::isa_levels()) {
        if (l == level.name) return level.level;
        valid += (valid.empty() ? "" : ", ") + std::string(level.name);
    }
    fail(field, "unknown ISA '" + s + "' (valid: " + valid + ")");
}

} // namespace qconv
