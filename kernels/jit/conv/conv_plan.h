// The plan vocabulary of the JIT conv rows: the tuning switches a plan
// carries (conv_knobs), whether a post-op chain fuses into the micro-kernels
// (pipeline_fusable) and the plan itself (conv_plan: the variant, the knobs
// and the geometry a row decided in supports(), consumed by create()).
#pragma once

#include <memory>
#include <string>

#include "kernels/jit/base/conv_isa.h"
#include "rows/row.h"

namespace qconv::jit {

// Tuning and debugging switches of the JIT conv kernels (docs/dispatch.md),
// read from the environment once per decision — supports() puts them into the
// plan — so they are part of the kernel cache key and a kernel never reads
// the environment while it is built.
struct conv_knobs {
    int ur = 0;              // QCONV_JIT_CONV_UR=N: at most N pixels per call (0: the register limit)
    int nb = 0;              // QCONV_JIT_CONV_NB=N: at most N OC vectors per block (0: the ISA's limit)
    bool direct = true;      // QCONV_JIT_CONV_DIRECT=0: padded sources always copied
    bool flat2d = true;      // QCONV_JIT_CONV_FLAT2D=0: short rows not run as one pixel list
    bool taps_inner = true;  // QCONV_JIT_CONV_TAPS_INNER=0: the kh → kw → ICg/4 loop order
    bool fused = true;       // QCONV_JIT_CONV_FUSED=0: the output pipeline outside the micro-kernels
    bool dw_direct = true;   // QCONV_JIT_CONV_DW_DIRECT=0: depthwise sources always copied
    bool dw_pair = true;     // QCONV_JIT_CONV_DW_PAIR=0: no row pairs in the depthwise row kernel
    bool dw_row_copy = true; // QCONV_JIT_CONV_DW_ROW_COPY=0: strided depthwise rows copy the whole source first
    bool dw_row = true;      // QCONV_JIT_CONV_DW_ROW=0: the depthwise row-kernel row refuses
    int dw_native = -1;      // QCONV_JIT_CONV_DW_NATIVE=0|1: byte-layout variant off / forced (-1: auto)
    int dw_band = 0; // QCONV_JIT_CONV_DW_BAND=N: depthwise rows per band of the fused 1x1 + dw rows (0: ~256 KiB ring)
    bool amx_hoist = true;    // QCONV_JIT_CONV_AMX_HOIST=0: the AMX epilogue reloads per-OC parameters per pixel row
    bool amx_phases = true;   // QCONV_JIT_CONV_AMX_PHASES=0: strided KxK layers gather each window (AMX row)
    bool amx_k_ranges = true; // QCONV_JIT_CONV_AMX_K_RANGES=0: the AMX row runs each block's whole K in one call
    bool amx_row_taps = true; // QCONV_JIT_CONV_AMX_ROW_TAPS=0: small-IC KxK layers gather each window (AMX row)
    int amx_pack =
        -1; // QCONV_JIT_CONV_AMX_PACK=0|1: the AMX epilogue's packed u8 stores never / always (-1: bounded chains)
    int amx_l1_kib =
        0; // QCONV_JIT_CONV_AMX_L1_KIB=N: L1 KiB for a K range's weights, source rows and C (0: 36, 24 in place)
    int amx_group = 0; // QCONV_JIT_CONV_AMX_GROUP=N: pixel blocks sharing a K range's weights (0: 4)
    int amx_prefetch =
        -1; // QCONV_JIT_CONV_AMX_PREFETCH=N: weights prefetched N KiB ahead of the tile loads (0: none; -1: the default)
    // The dense rows' weight prefetches (conv_x8s8_plan.cpp):
    int dense_prefetch = 0; // QCONV_JIT_CONV_DENSE_PREFETCH=N: KxK micro-kernels also prefetch N KiB ahead into L1
    int dense_prefetch_next =
        -1; // QCONV_JIT_CONV_DENSE_PREFETCH_NEXT=0|1: the next OC block into L2 off / on (-1: default)
    // QCONV_JIT_CONV_PAIRS=0: the avx2 row never takes its avx2_pairs variant (conv_x8s8.cpp)
    bool pairs = true;
    static conv_knobs from_env();
    // The values that differ from the defaults ("ur=4,fused=0"), or "default".
    std::string str() const;
};

// Whether the output pipeline of `a` can be fused into the micro-kernels: no
// transcendental eltwise (those are computed by eltwise_ref in C++), at most
// max_fused_full full-tensor operands (what a call carries), and fusion not
// turned off by the knob (debugging, comparisons).
bool pipeline_fusable(const attr_set &a, const conv_knobs &k);

// What a family's planner decided beyond the variant and the knobs: the dense
// rows' geometry (conv_geometry, conv_x8s8_plan.h: source, loop order,
// blocking, pipeline), the depthwise micro-kernel path's and the depthwise
// row kernel's (dw::ukernel_geometry, dw::rows_geometry, conv_dw_common.h).
// Printed by verbose and part of the kernel cache key.
struct conv_plan_detail {
    virtual ~conv_plan_detail() = default;
    virtual std::string str() const = 0;
};

// What a JIT conv row decided in supports(): the variant, the knobs its
// kernels are built with and the family's detail; create() builds from it
// without deciding again (the fused 1x1 + dw row's plan holds one of these
// per band problem).
struct conv_plan : impl::plan {
    conv_isa isa = conv_isa::avx512_core_vnni;
    enum class kind { dense, depthwise, depthwise_rows } k = kind::dense;
    conv_knobs knobs;
    std::shared_ptr<const conv_plan_detail> detail;
    // The dense avx2 row: the avx2_pairs variant's plan, which its kernel
    // takes for weights that pass the check at packing (null: none).
    std::shared_ptr<const conv_plan> pairs_variant;
    // The detail as its family's type (null when the plan holds none of it).
    template <class T>
    const T *detail_as() const {
        return dynamic_cast<const T *>(detail.get());
    }
    static std::shared_ptr<conv_plan> make(conv_isa i, kind k, const conv_knobs &knobs);
    // "dense:avx2 source=padded_copy pixels=list taps=inner oc_blocks=1x2 pipeline=tile knobs=default".
    std::string str() const override;
};

// A table row of the JIT conv families (dispatch/conv_list.cpp): `name` must
// be `canonical` (the configuration's name); the row needs the variant's
// features (and VBMI for the depthwise row kernel), decides with `decide`
// and builds with `build`.
impl::conv_entry jit_conv_entry(const std::string &name, const std::string &canonical, conv_isa i, conv_plan::kind k,
                                impl::conv_entry::decide_fn decide, impl::conv_entry::build_fn build);

} // namespace qconv::jit
