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
// `if constexpr`. A family's traits are built from its line of the JIT ISA
// table (conv_isa.h), which planners, running before any code exists, read at
// run time through isa_facts(). The run-time ISA (conv_isa) reaches a traits
// type only through with_traits(): a switch with one case per value and no
// default, so a new value without its case does not compile (-Werror=switch).
#pragma once

#include <type_traits>

#include <xbyak/xbyak.h>

#include "kernels/jit/base/conv_isa.h"
#include "qconv/types.h"

namespace qconv::jit {

// Where a kernel keeps its int32 partial sums.
enum class acc_kind {
    vregs, // vector registers (the accumulation and the epilogue share them)
    tiles, // AMX tiles, stored to a buffer that the vector epilogue reloads
};

// The two vector widths (conv_isa.h's ymm_width / zmm_width as types).
template <class V, const vector_width &W>
struct width_traits {
    using Vmm = V;
    static constexpr int lanes = W.lanes, vbytes = W.vbytes, n_vregs = W.n_vregs;
    static constexpr bool evex = W.evex;
};
using ymm_vex = width_traits<Xbyak::Ymm, ymm_width>;
using zmm_evex = width_traits<Xbyak::Zmm, zmm_width>;

// A vector kernel's traits: the width, VNNI or not, sums in registers.
template <conv_isa I, class Width, bool Vnni>
struct vector_traits : Width {
    static constexpr conv_isa isa = I;
    static constexpr bool vnni = Vnni;
    static constexpr bool pairs16 = conv_isa_line_of(I).pairs16;
    static constexpr acc_kind acc = acc_kind::vregs;
};

// The traits of family I, built from its line of the JIT ISA table.
template <conv_isa I>
struct isa_traits : vector_traits<I, std::conditional_t<conv_isa_line_of(I).width.evex, zmm_evex, ymm_vex>,
                                  conv_isa_line_of(I).vnni> {};

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
    case conv_isa::avx2_pairs: return f(isa_traits<conv_isa::avx2_pairs>{});
    case conv_isa::avx512_core: return f(isa_traits<conv_isa::avx512_core>{});
    case conv_isa::avx512_core_vnni: return f(isa_traits<conv_isa::avx512_core_vnni>{});
    }
    fail("isa", "not a conv_isa value");
}

} // namespace qconv::jit
