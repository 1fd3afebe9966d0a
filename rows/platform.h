// The platform the dispatcher decides for: the set of CPU features a row may
// need, plus the ISA level (the ladder oneDNN names: avx2, avx2_vnni,
// avx512_core, avx512_core_vnni, avx512_core_bf16, avx512_core_amx) that the
// cap QCONV_MAX_CPU_ISA and the attribute builder's tables speak of.
//
// Features are not a ladder: Alder Lake has AVX-VNNI without AVX-512, Zen 4
// has AVX-512 VNNI without AVX-VNNI, Cascade Lake has VNNI without VBMI. Rows
// declare the features they need and test them with has(feature); the level
// only names the platform and drives the attribute tables (docs/dispatch.md).
//
// This is the row interface's vocabulary (rows/, below kernels/ and
// dispatch/); the host's platform is detected in dispatch/ (host_platform.h:
// cpu_features, XCR0, CPUID, the Linux AMX permission request) and capped: a
// feature is kept when the cap's level includes it (cap_allows()). Tests pass simulated platforms:
// platform{level} has the ladder features of that level but no AVX-VNNI;
// platform{level, true} adds AVX-VNNI; with() adds any other.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "qconv/types.h"

namespace qconv::impl {

enum class cpu_feature : unsigned {
    avx2,             // AVX2 + FMA
    avx2_vnni,        // AVX-VNNI: VEX vpdpbusd / vpdpwssd on ymm
    avx512_core,      // AVX-512 F, BW, DQ, VL
    avx512_core_vnni, // AVX-512 VNNI
    avx512_vbmi,      // AVX-512 VBMI: vpermb, vpermt2b
    avx512_bf16,      // AVX-512 BF16
    amx_int8,         // AMX tiles with INT8, usable (palette and OS permission)
    amx_bf16,         // AMX BF16
};
const char *to_string(cpu_feature f);

// A set of features, e.g. what a row needs.
class feature_set {
public:
    feature_set() = default;
    feature_set(std::initializer_list<cpu_feature> fs) {
        for (cpu_feature f : fs) add(f);
    }
    void add(cpu_feature f) { bits_ |= bit(f); }
    void remove(cpu_feature f) { bits_ &= ~bit(f); }
    bool has(cpu_feature f) const { return (bits_ & bit(f)) != 0; }
    bool contains(const feature_set &o) const { return (bits_ & o.bits_) == o.bits_; }
    bool empty() const { return bits_ == 0; }
    uint32_t bits() const { return bits_; }
    // "avx2+avx512_core+..." in declaration order ("none" when empty).
    std::string str() const;
    // The members of `needed` this set lacks, as str() does.
    std::string missing(const feature_set &needed) const;

private:
    static uint32_t bit(cpu_feature f) { return uint32_t(1) << static_cast<unsigned>(f); }
    uint32_t bits_ = 0;
};

// The features every CPU of ISA level `level` has (avx2_vnni: AVX2 and
// AVX-VNNI; avx512_core_amx: AVX-512 VNNI and BF16 and AMX).
feature_set level_features(isa level);
// Whether a cap at `level` lets `f` be used: f is part of a level at or below
// it; VBMI counts with avx512_core_vnni (the VNNI CPUs that have it).
bool cap_allows(isa level, cpu_feature f);

// Every feature, in declaration order.
inline constexpr cpu_feature all_cpu_features[] = {
    cpu_feature::avx2,        cpu_feature::avx2_vnni,   cpu_feature::avx512_core, cpu_feature::avx512_core_vnni,
    cpu_feature::avx512_vbmi, cpu_feature::avx512_bf16, cpu_feature::amx_int8,    cpu_feature::amx_bf16};

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
