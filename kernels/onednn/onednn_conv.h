// The oneDNN int8 convolution wrapper (internal to qconv).
//
// One kernel class runs a oneDNN convolution_forward primitive on qconv's
// problem: NHWC source and destination, weights in whatever layout the chosen
// oneDNN implementation asks for (format_tag::any; reordered once by pack()),
// per-tensor or per-OC output scales, the stock per-tensor source zero point
// as a runtime value, and the attribute set's lowered post-ops mapped to
// oneDNN post-ops (legacy depthwise / quantization ops are converted to
// eltwise and binary ones). A `selector` says which of the implementations
// oneDNN offers the kernel takes: the first one (the `onednn:any` peer), or
// the first brgconv of a given kind and ISA (the brgconv rows, e.g.
// `onednn:brgconv_1x1:avx512_core_amx`), found by stepping through
// next_impl(). See conv_recipe.h for the bias-order conversion.
#pragma once

#include <memory>
#include <string>

#include "rows/row.h"

namespace qconv::impl::onednn {

// Which of oneDNN's implementations (in its own order) a row takes.
struct selector {
    bool first = false;     // take whatever oneDNN picks first (`onednn:any`)
    std::string kind;       // "brgconv_1x1", "brgconv" or "jit" (when !first)
    isa level = isa::sse41; // the ISA of the brgconv implementation (when !first)

    static selector any() { return {true, "", isa::sse41}; }
    static selector brgconv(std::string kind, isa level) { return {false, std::move(kind), level}; }
    // "onednn:any" or "onednn:<kind>:<isa>".
    std::string row_name() const;
};

// Splits oneDNN's impl_info_str() ("brgconv_1x1:avx512_core_amx_int8",
// "brg:avx512_core_vnni") into a stable kind ("brgconv_1x1", "brgconv", or
// the text before ':' for non-brgconv) and a qconv ISA level. Returns false
// when the ISA part names no qconv level.
bool parse_impl_info(const std::string &info, std::string *kind, isa *level);

// The plan for (p, attr) on `plat` with this selector — the recipe and the
// primitive descriptor on the implementation the selector takes — or null
// with the reason in *why.
plan_ptr supports(const selector &sel, const conv_problem &p, const attr_set &attr, const platform &plat,
                  std::string *why);
// The kernel for a plan supports() returned (throws qconv::error when oneDNN
// refuses it after all).
std::shared_ptr<const conv_kernel> create(const conv_problem &p, const attr_set &attr, const plan &pl);
// supports() on `plat`, then create() (tests; throws when refused).
std::shared_ptr<const conv_kernel> create(const selector &sel, const conv_problem &p, const attr_set &attr,
                                          const platform &plat);

// Table rows (dispatch/conv_list.cpp): a brgconv kind ("brgconv_1x1",
// "brgconv") or oneDNN's AMX JIT convolution at an ISA level, a brgconv kind
// as a peer (run only when forced by name: the untrusted brgconv AMX rows),
// and the `onednn:any` peer. `name` must be the configuration's name
// ("onednn:<kind>:<isa>").
conv_entry brgconv_row(const std::string &name, const std::string &kind, isa level);
conv_entry brgconv_peer_row(const std::string &name, const std::string &kind, isa level);
conv_entry jit_row(const std::string &name, isa level);
conv_entry any_row();
// oneDNN's fused 1x1 + 3x3 depthwise (post_ops::append_dw) at an ISA level,
// for chains with a dw item (conv_dw_fused.cpp); a peer runs only when forced.
conv_entry conv_1x1_dw_row(const std::string &name, isa level, bool peer);

// The oneDNN implementation a kernel made by create() runs
// (impl_info_str(), e.g. "brgconv:avx512_core_vnni"); empty for other kernels.
std::string impl_info(const conv_kernel &k);

} // namespace qconv::impl::onednn
