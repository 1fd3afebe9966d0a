// The ISA vocabulary in one table: the CPU features a row may need, and the
// ladder of ISA levels (oneDNN's names: avx2, avx2_vnni, avx512_core,
// avx512_core_vnni, avx512_core_bf16, avx512_core_amx) with, per level, what
// every CPU of the level has, what a cap at the level admits besides, and
// oneDNN's ONEDNN_MAX_CPU_ISA spelling. Names, parsing, detection's level,
// caps, the driver's oneDNN cap and the tests' level lists all derive from
// isa_levels(); a new level is a line there (docs/adding_a_kernel.md).
//
// Features are not a ladder: Alder Lake has AVX-VNNI without AVX-512, Zen 4
// has AVX-512 VNNI without AVX-VNNI, Cascade Lake has VNNI without VBMI. Rows
// declare the features they need; the level names the platform and drives
// the attribute tables (docs/dispatch.md).
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

// Every feature, in declaration order.
inline constexpr cpu_feature all_cpu_features[] = {
    cpu_feature::avx2,        cpu_feature::avx2_vnni,   cpu_feature::avx512_core, cpu_feature::avx512_core_vnni,
    cpu_feature::avx512_vbmi, cpu_feature::avx512_bf16, cpu_feature::amx_int8,    cpu_feature::amx_bf16};

// A set of features, e.g. what a row needs.
class feature_set {
public:
    constexpr feature_set() = default;
    constexpr feature_set(std::initializer_list<cpu_feature> fs) {
        for (cpu_feature f : fs) add(f);
    }
    constexpr void add(cpu_feature f) { bits_ |= bit(f); }
    constexpr void add(const feature_set &o) { bits_ |= o.bits_; }
    constexpr void remove(cpu_feature f) { bits_ &= ~bit(f); }
    constexpr bool has(cpu_feature f) const { return (bits_ & bit(f)) != 0; }
    constexpr bool contains(const feature_set &o) const { return (bits_ & o.bits_) == o.bits_; }
    constexpr bool empty() const { return bits_ == 0; }
    constexpr uint32_t bits() const { return bits_; }
    // "avx2+avx512_core+..." in declaration order ("none" when empty).
    std::string str() const;
    // The members of `needed` this set lacks, as str() does.
    std::string missing(const feature_set &needed) const;

private:
    static constexpr uint32_t bit(cpu_feature f) { return uint32_t(1) << static_cast<unsigned>(f); }
    uint32_t bits_ = 0;
};

// One step of the ladder.
struct isa_level {
    isa level;
    const char *name;       // qconv's and oneDNN's name, QCONV_MAX_CPU_ISA's value
    const char *onednn_cap; // ONEDNN_MAX_CPU_ISA's value for the same cap
    feature_set features;   // what every CPU of the level has
    feature_set cap_extra;  // admitted by a cap at this level though not in `features`
};

// The ladder, lowest first, one line per value of qconv::isa in its order
// (isa::avx512_core_amx is the last value; a level above it moves this too).
inline constexpr int isa_level_count = static_cast<int>(isa::avx512_core_amx) + 1;
const isa_level (&isa_levels())[isa_level_count];
const isa_level &isa_level_of(isa level);

// The features every CPU of ISA level `level` has (avx2_vnni: AVX2 and
// AVX-VNNI; avx512_core_amx: AVX-512 VNNI and BF16 and AMX).
inline feature_set level_features(isa level) { return isa_level_of(level).features; }
// Whether a cap at `level` lets `f` be used: f is part of a level at or below
// it (or admitted by one: VBMI counts with avx512_core_vnni, the VNNI CPUs
// that have it).
bool cap_allows(isa level, cpu_feature f);
// The highest level all of whose features `s` has.
isa level_of(const feature_set &s);
// Whether the level multiplies u8·s8 with VNNI-class instructions (vpdpbusd,
// AMX tiles): exact int32 sums without 16-bit intermediates.
bool level_has_vnni(isa level);

} // namespace qconv::impl
