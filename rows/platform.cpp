// The feature vocabulary of the row interface: names, sets, the ladder
// levels' features and what a cap allows (rows/platform.h).
#include "rows/platform.h"

namespace qconv::impl {

const char *to_string(cpu_feature f) {
    switch (f) {
    case cpu_feature::avx2: return "avx2";
    case cpu_feature::avx2_vnni: return "avx2_vnni";
    case cpu_feature::avx512_core: return "avx512_core";
    case cpu_feature::avx512_core_vnni: return "avx512_core_vnni";
    case cpu_feature::avx512_vbmi: return "avx512_vbmi";
    case cpu_feature::avx512_bf16: return "avx512_bf16";
    case cpu_feature::amx_int8: return "amx_int8";
    case cpu_feature::amx_bf16: return "amx_bf16";
    }
    return "?";
}

std::string feature_set::str() const {
    std::string s;
    for (cpu_feature f : all_cpu_features)
        if (has(f)) s += (s.empty() ? "" : "+") + std::string(to_string(f));
    return s.empty() ? "none" : s;
}

std::string feature_set::missing(const feature_set &needed) const {
    feature_set m;
    for (cpu_feature f : all_cpu_features)
        if (needed.has(f) && !has(f)) m.add(f);
    return m.str();
}

feature_set level_features(isa level) {
    feature_set s;
    if (level >= isa::avx2) s.add(cpu_feature::avx2);
    if (level == isa::avx2_vnni) s.add(cpu_feature::avx2_vnni);
    if (level >= isa::avx512_core) s.add(cpu_feature::avx512_core);
    if (level >= isa::avx512_core_vnni) s.add(cpu_feature::avx512_core_vnni);
    if (level >= isa::avx512_core_bf16) s.add(cpu_feature::avx512_bf16);
    if (level >= isa::avx512_core_amx) s.add(cpu_feature::amx_int8), s.add(cpu_feature::amx_bf16);
    return s;
}

bool cap_allows(isa level, cpu_feature f) {
    switch (f) {
    case cpu_feature::avx2: return level >= isa::avx2;
    case cpu_feature::avx2_vnni: return level >= isa::avx2_vnni;
    case cpu_feature::avx512_core: return level >= isa::avx512_core;
    case cpu_feature::avx512_core_vnni:
    case cpu_feature::avx512_vbmi: return level >= isa::avx512_core_vnni;
    case cpu_feature::avx512_bf16: return level >= isa::avx512_core_bf16;
    case cpu_feature::amx_int8:
    case cpu_feature::amx_bf16: return level >= isa::avx512_core_amx;
    }
    return false;
}

} // namespace qconv::impl
