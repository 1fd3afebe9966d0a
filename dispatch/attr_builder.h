// The attr builder: from a problem's logical post-op chain and source zero
// point, the platform and the hints, to the one or two attribute sets the
// dispatcher offers to the implementations (docs/semantics.md §6).
//
//   attr[0]  legacy post-ops and/or the legacy per-channel zero point
//            (padding with the zp bytes + precomputed compensation) — served
//            by the JIT kernels and the reference; always present.
//   attr[1]  stock (binary) post-ops and/or the stock per-tensor zero point —
//            served by oneDNN brgconv; present only when brgconv may run:
//              AMX       with binary post-ops, or with a per-tensor zp (then
//                        with *legacy* post-ops, the AMX workaround);
//              AVX-512   VNNI with a per-tensor zp; with binary post-ops only
//                        under conv_hints::enforce_brgconv;
//              otherwise never (per-channel zp, fused dw-conv, below VNNI).
// Below AVX-512 VNNI a per-tensor zero point becomes a per-channel one (IC
// equal values). "Binary" means needs_binary(chain): the stock form of the
// chain needs binary post-ops.
//
// build_attrs() is pure: no global state, no CPUID; tests pass simulated
// platforms.
#pragma once

#include <vector>

#include "core/lowering.h"
#include "dispatch/host_platform.h"
#include "qconv/conv.h"
#include "qconv/post_ops.h"

namespace qconv::impl {

std::vector<attr_set> build_attrs(const conv_problem &p, const platform &plat, const conv_hints &hints);

// For a peer forced by name (a comparison, never "auto"): build_attrs() plus,
// when it has none and the zero point is not per-channel, the stock set
// (attr[1]: per-tensor zp as oneDNN's runtime zero point, stock post-ops), so
// that oneDNN can be measured on a problem the attribute tables give only to the
// JIT kernels (a per-tensor zp below VNNI).
std::vector<attr_set> build_attrs_for_peer(const conv_problem &p, const platform &plat, const conv_hints &hints);

// Whether oneDNN brgconv exists at this level (AVX-512 with VNNI or above).
bool brgconv_platform(const platform &plat);

} // namespace qconv::impl
