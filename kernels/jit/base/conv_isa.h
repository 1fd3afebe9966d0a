// The vector kernels' instruction families as one table: a family's name, the
// CPU features its instructions need, its vector width and whether it
// multiplies u8·s8 with VNNI. The planners, which run before any code exists,
// read it at run time (isa_facts(), the register budgets of the micro-kernels);
// the generators' traits (isa_traits<i>, jit_traits.h) are built from the same
// line at compile time, so the two cannot disagree. A new family is its enum
// value, its table line, its with_traits case and its code in the generators
// (docs/adding_a_kernel.md).
#pragma once

#include "core/isa_table.h"

namespace qconv::jit {

// Instruction family used for the u8·s8 multiply-accumulate of the vector
// kernels (the AMX kernels build on amx_traits, jit_traits.h).
enum class conv_isa {
    avx512_core_vnni, // vpdpbusd zmm
    avx512_core,      // zmm: widen to int16, vpmaddwd (exact)
    avx2,             // ymm: widen to int16, vpmaddwd (exact)
    avx2_vnni,        // vpdpbusd ymm, VEX-encoded (AVX-VNNI)
    avx2_pairs,       // ymm, AVX2: vpmaddubsw + vpmaddwd on u8 bytes, exact only for weights
                      // no pair of which can overflow 16 bits (the avx2 row checks at packing)
};
inline constexpr int conv_isa_count = static_cast<int>(conv_isa::avx2_pairs) + 1;

// The two vector widths: lanes of 32-bit elements, bytes and registers of
// one vector, and the encoding (EVEX brings k-masks, embedded broadcasts and 32
// registers). jit_traits.h's ymm_vex / zmm_evex are these as types.
struct vector_width {
    int lanes, vbytes, n_vregs;
    bool evex;
};
inline constexpr vector_width ymm_width{8, 32, 16, false};
inline constexpr vector_width zmm_width{16, 64, 32, true};

// One line of the table.
struct conv_isa_line {
    conv_isa isa;
    const char *name;           // the row-name suffix: jit:conv_x8s8:<name>
    impl::feature_set features; // what its instructions need
    vector_width width;         // the register it works in
    bool vnni;                  // the u8 byte layout (vpdpbusd, or pairs16), else widened to s16 (vpmaddwd)
    bool pairs16 = false;       // the byte layout multiplied by vpmaddubsw (16-bit pair sums) + vpmaddwd
};

// The table, one line per conv_isa value in the enum's order (checked in
// conv_isa.cpp). isa_traits<i> (jit_traits.h) is built from line i.
inline constexpr conv_isa_line conv_isa_table[conv_isa_count] = {
    {conv_isa::avx512_core_vnni,
     "avx512_core_vnni",
     {impl::cpu_feature::avx512_core, impl::cpu_feature::avx512_core_vnni},
     zmm_width,
     true},
    {conv_isa::avx512_core, "avx512_core", {impl::cpu_feature::avx512_core}, zmm_width, false},
    {conv_isa::avx2, "avx2", {impl::cpu_feature::avx2}, ymm_width, false},
    {conv_isa::avx2_vnni, "avx2_vnni", {impl::cpu_feature::avx2, impl::cpu_feature::avx2_vnni}, ymm_width, true},
    {conv_isa::avx2_pairs, "avx2_pairs", {impl::cpu_feature::avx2}, ymm_width, true, true},
};
constexpr const conv_isa_line &conv_isa_line_of(conv_isa i) { return conv_isa_table[static_cast<int>(i)]; }

const char *to_string(conv_isa i);
// The CPU features a variant's instructions need.
impl::feature_set required_features(conv_isa i);

// Lanes, bytes and registers of one vector, EVEX or VEX, VNNI or widened:
// the table's line as the planners read it (isa_traits<i> holds the same).
struct isa_fact_set {
    int lanes, vbytes, n_vregs;
    bool evex, vnni, pairs16;
};
isa_fact_set isa_facts(conv_isa i);

// Register-width facts of an ISA variant: OC lanes per vector, OC vectors per
// block (at most), accumulator registers for nb OC vectors, and bytes per
// source element in the kernel's view (1: u8 bytes; 2: widened u16).
int oc_lanes(conv_isa i);
int max_oc_vectors(conv_isa i);
int max_accumulators(conv_isa i, int nb);
int src_elem_bytes(conv_isa i);
// Accumulator registers of the depthwise micro-kernel with KW weight registers.
int max_accumulators_dw(conv_isa i, int kw);

} // namespace qconv::jit
