// Compile-time facts of the JIT targets: one traits type per instruction
// family, the single width abstraction of the generators.
//
// A traits type says which vector register the generator works in (Vmm:
// Xbyak::Ymm or Xbyak::Zmm) and how many there are, the lanes and bytes of
// one vector, whether u8·s8 products use VNNI (vpdpbusd) or are widened to
// s16 (vpmaddwd), whether instructions are VEX or EVEX encoded (EVEX brings
// k-masks, embedded broadcasts and 32 registers), and where the accumulators
// live: in vector registers, or in AMX tiles whose int32 sums are stored and
// reloaded by the vector epilogue (which is the zmm one).
//
// Generators are templates over a traits type and branch with
// `if constexpr`; planners, which run before any code exists, read the same
// facts at run time through isa_facts() (conv_isa.h). The run-time ISA (conv_isa)
// reaches a traits type only through with_traits(): a switch with one case
// per value and no default, so a new value without its case does not
// compile (-Werror=switch), and a case without its specialisation does not
// either (isa_traits is declared, never defined, for other values).
#pragma once

#include <xbyak/xbyak.h>

#include "kernels/jit/conv_isa.h"
#include "qconv/types.h"

namespace qconv::jit {

// Where a kernel keeps its int32 partial sums.
enum class acc_kind {
    vregs, // vector registers (the accumulation and the epilogue share them)
    tiles, // AMX tiles, stored to a buffer that the vector epilogue reloads
};

// The two vector widths.
struct ymm_vex {
    using Vmm = Xbyak::Ymm;
    static constexpr int lanes = 8, vbytes = 32, n_vregs = 16;
    static constexpr bool evex = false;
};
struct zmm_evex {
    using Vmm = Xbyak::Zmm;
    static constexpr int lanes = 16, vbytes = 64, n_vregs = 32;
    static constexpr bool evex = true;
};

// A vector kernel's traits: the width, VNNI or not, sums in registers.
template <conv_isa I, class Width, bool Vnni>
struct vector_traits : Width {
    static constexpr conv_isa isa = I;
    static constexpr bool vnni = Vnni;
    static constexpr acc_kind acc = acc_kind::vregs;
};

template <conv_isa I>
struct isa_traits; // specialised for every conv_isa below, and nowhere else

template <>
struct isa_traits<conv_isa::avx2> : vector_traits<conv_isa::avx2, ymm_vex, false> {};
template <>
struct isa_traits<conv_isa::avx2_vnni> : vector_traits<conv_isa::avx2_vnni, ymm_vex, true> {};
template <>
struct isa_traits<conv_isa::avx512_core> : vector_traits<conv_isa::avx512_core, zmm_evex, false> {};
template <>
struct isa_traits<conv_isa::avx512_core_vnni> : vector_traits<conv_isa::avx512_core_vnni, zmm_evex, true> {};

// avx512_core_amx: tdpbusd / tdpbssd into tiles; the epilogue is zmm.
struct amx_traits : zmm_evex {
    static constexpr bool vnni = true;
    static constexpr acc_kind acc = acc_kind::tiles;
};

// f(isa_traits<i>{}): the one place a run-time ISA becomes a traits type.
template <class F>
decltype(auto) with_traits(conv_isa i, F &&f) {
    switch (i) {
    case conv_isa::avx2: return f(isa_traits<conv_isa::avx2>{});
    case conv_isa::avx2_vnni: return f(isa_traits<conv_isa::avx2_vnni>{});
    case conv_isa::avx512_core: return f(isa_traits<conv_isa::avx512_core>{});
    case conv_isa::avx512_core_vnni: return f(isa_traits<conv_isa::avx512_core_vnni>{});
    }
    fail("isa", "not a conv_isa value");
}

} // namespace qconv::jit
