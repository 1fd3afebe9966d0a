// The vector kernels' instruction families as one table (conv_isa.cpp): a
// family's name, the CPU features its instructions need, and the facts the
// planners use before any code exists (lanes, register file, VNNI or widened,
// the register budgets of the micro-kernels). The generators take the same
// facts at compile time from jit_traits.h (isa_traits<i>); isa_facts() reads
// them from there, so the two cannot disagree. A new family is its enum value,
// its table line and its isa_traits specialization (docs/adding_a_kernel.md).
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
};
inline constexpr int conv_isa_count = static_cast<int>(conv_isa::avx2_vnni) + 1;

// One line of the table.
struct conv_isa_line {
    conv_isa isa;
    const char *name;           // the row-name suffix: jit:conv_x8s8:<name>
    impl::feature_set features; // what its instructions need
};
// One line per conv_isa value, in the enum's order.
const conv_isa_line (&conv_isas())[conv_isa_count];

const char *to_string(conv_isa i);
// The CPU features a variant's instructions need.
impl::feature_set required_features(conv_isa i);

// Lanes, bytes and registers of one vector, EVEX or VEX, VNNI or widened:
// isa_traits<i> (jit_traits.h) as values.
struct isa_fact_set {
    int lanes, vbytes, n_vregs;
    bool evex, vnni;
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
