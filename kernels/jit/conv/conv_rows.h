// The JIT int8 conv rows as the table sees them (dispatch/conv_list.cpp):
// each family's checks, factory and table row. The dense family
// (conv_x8s8.cpp), the depthwise families (conv_dw_x8s8.cpp) and the fused
// 1x1 + dw row (conv_1x1_dw.cpp).
#pragma once

#include <memory>
#include <string>

#include "kernels/jit/base/conv_isa.h"
#include "kernels/jit/conv/conv_plan.h"
#include "rows/row.h"

namespace qconv::jit {

// Whether the dense family can run (problem, attr) with variant i (the
// platform's features are the row's business); only_1x1: a 1x1 kernel only.
bool conv_supports(conv_isa i, bool only_1x1, const conv_problem &p, const attr_set &a, std::string *why);
// Whether the depthwise family can (groups == IC == OC); `rows`: the row
// kernel (AVX-512 VNNI + VBMI), which also needs the knob on.
bool conv_dw_supports(conv_isa i, bool rows, const conv_problem &p, const attr_set &a, const conv_knobs &k,
                      std::string *why);
// The plans the rows decide (after the checks above): with the dense
// geometry, or with the depthwise micro-kernel path's.
std::shared_ptr<const conv_plan> conv_dense_plan(conv_isa i, const conv_problem &p, const attr_set &a,
                                                 const conv_knobs &k);
std::shared_ptr<const conv_plan> conv_dw_plan(conv_isa i, const conv_problem &p, const attr_set &a,
                                              const conv_knobs &k);
// The kernels of those plans (create() of the rows): built from the plan's
// detail, never deciding again.
std::shared_ptr<const impl::conv_kernel> conv_create(const conv_problem &p, const attr_set &a, const conv_plan &pl);
std::shared_ptr<const impl::conv_kernel> conv_dw_create(const conv_problem &p, const attr_set &a, const conv_plan &pl);

// Whether every pair of weights that the avx2_pairs variant sums in 16 bits
// (IC 2j and 2j + 1 of one output channel and tap; plain [OC][ICg][KH][KW]
// s8 weights) keeps that sum exact for every u8 source pair: the avx2 row
// packs such weights for avx2_pairs, others for the widened kernel.
bool pairs_cannot_overflow(const conv_desc &d, const int8_t *wei);

// Table rows (dispatch/conv_list.cpp); `name` must be the configuration's.
impl::conv_entry conv_row(const std::string &name, conv_isa i);
impl::conv_entry conv_dw_row(const std::string &name, conv_isa i);
// The depthwise row kernel: jit:conv_dw_x8s8_rows:avx512_core_vnni.
impl::conv_entry conv_dw_rows_row(const std::string &name);
// A 1x1 with a fused 3x3 depthwise item, band by band through a per-thread
// ring of intermediate rows (conv_1x1_dw.cpp): jit:conv_1x1_dw_x8s8:<isa>.
impl::conv_entry conv_1x1_dw_row(const std::string &name, conv_isa i);

} // namespace qconv::jit
