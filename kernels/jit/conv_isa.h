// The run-time name of a vector kernel's instruction family and its facts
// as values, for the planners (which run before any code exists). The
// generators take the same facts at compile time from jit_traits.h.
#pragma once

namespace qconv::jit {

// Instruction family used for the u8·s8 multiply-accumulate of the vector
// kernels (the AMX kernels build on amx_traits, jit_traits.h).
enum class conv_isa {
    avx512_core_vnni, // vpdpbusd zmm
    avx512_core,      // zmm: widen to int16, vpmaddwd (exact)
    avx2,             // ymm: widen to int16, vpmaddwd (exact)
    avx2_vnni,        // vpdpbusd ymm, VEX-encoded (AVX-VNNI)
};
const char *to_string(conv_isa i);

// Lanes, bytes and registers of one vector, EVEX or VEX, VNNI or widened:
// isa_traits<i> (jit_traits.h) as values.
struct isa_fact_set {
    int lanes, vbytes, n_vregs;
    bool evex, vnni;
};
isa_fact_set isa_facts(conv_isa i);

} // namespace qconv::jit
