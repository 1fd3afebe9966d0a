// The platform the dispatcher decides for: the set of CPU features a row may
// need, plus the ISA level that the cap QCONV_MAX_CPU_ISA and the attribute
// builder's tables speak of (both from the ISA table, core/isa_table.h). Rows
// declare the features they need and test them with has(feature).
//
// This is the row interface's vocabulary (rows/, below kernels/ and
// dispatch/); the host's platform is detected in dispatch/ (host_platform.h:
// cpu_features, XCR0, CPUID, the Linux AMX permission request) and capped: a
// feature is kept when the cap's level includes it (cap_allows()). Tests pass simulated platforms:
// platform{level} has the ladder features of that level but no AVX-VNNI;
// platform{level, true} adds AVX-VNNI; with() adds any other.
#pragma once

#include <string>

#include "core/isa_table.h"
#include "qconv/types.h"

namespace qconv::impl {

struct platform {
    isa level = isa::sse41;
    feature_set features;

    platform() = default;
    // A simulated CPU of `level`, with AVX-VNNI exactly when `avx_vnni` (so
    // platform{avx2_vnni} is a cap at avx2_vnni on a CPU without it).
    explicit platform(isa l, bool avx_vnni = false) : level(l), features(level_features(l)) {
        features.remove(cpu_feature::avx2_vnni);
        if (avx_vnni && l >= isa::avx2) features.add(cpu_feature::avx2_vnni);
    }
    platform with(cpu_feature f) const {
        platform p = *this;
        p.features.add(f);
        return p;
    }
    bool has(cpu_feature f) const { return features.has(f); }
    bool has_all(const feature_set &s) const { return features.contains(s); }
    // The level's name ("avx512_core_bf16"), for messages.
    std::string str() const { return to_string(level); }
    // Level and every feature, for cache keys and verbose lines.
    std::string key() const { return str() + ":" + features.str(); }
};

} // namespace qconv::impl
