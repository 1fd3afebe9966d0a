// The lowered form of a post-op chain and the attribute sets (internal).
//
// The dispatcher lowers a problem's logical chain (qconv/post_ops.h) into one
// or two attribute sets (docs/semantics.md §6):
//   attr[0]  legacy mechanisms: per-channel input zero point padded with the
//            zp bytes plus a precomputed compensation (core/compensation.h),
//            depthwise scale-shift / PReLU and the "quantization" form of
//            FakeQuantize;
//   attr[1]  stock mechanisms: per-tensor zero point and binary post-ops.
// Both forms compute the same values; lower_legacy()/lower_stock() are the one
// place where the lowering math lives (core/post_ops.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/convert.h"
#include "qconv/post_ops.h"

namespace qconv {

struct lowered_op {
    enum class kind {
        eltwise,               // alg, alpha, beta
        binary,                // balg, bcast, a (1 or OC values) or full tensor #full_index
        prelu,                 // stock PReLU: a = slopes (1 or OC)
        sum,                   // sum_scale, sum_zp
        depthwise_scale_shift, // legacy: y·a[c] + b[c]
        depthwise_prelu,       // legacy: y ≥ 0 ? y : y·a[c]
        quantization,          // legacy FQ: clamp(cl,ch), ·isc+ish, [rne], [·osc+osh]
        dw_conv,               // fused 3x3 depthwise item: the cut between the two convs (core/dw_fusion.h)
    };
    kind k = kind::eltwise;
    eltwise_alg alg = eltwise_alg::relu;
    float alpha = 0.f, beta = 0.f;
    binary_alg balg = binary_alg::add;
    broadcast bcast = broadcast::per_tensor;
    int full_index = -1; // index into exec_args::binary for bcast == full
    float sum_scale = 1.f;
    int32_t sum_zp = 0;
    std::vector<float> a, b; // per-tensor (1) or per-OC (OC)
    // quantization parameters, each 1 or OC values
    std::vector<float> cl, ch, isc, ish, osc, osh;
    bool round = true, dequantize = true;

    // Parameter for channel c of a 1-or-OC vector.
    static float at(const std::vector<float> &v, int64_t c) { return v.size() == 1 ? v[0] : v[c]; }
};

enum class zp_mechanism {
    none,
    legacy_per_channel, // pad with zp bytes + precomputed compensation (attr[0])
    stock_per_tensor,   // runtime per-tensor zero point (attr[1])
};
const char *to_string(zp_mechanism m);

struct attr_set {
    int id = 0; // 0 or 1: its index in the builder's output
    zp_mechanism zp = zp_mechanism::none;
    std::vector<int32_t> zp_values; // IC values (legacy) or 1 value (stock)
    std::vector<lowered_op> ops;
    bool has_legacy_ops() const; // any depthwise_* or quantization
    bool has_binary_ops() const; // any binary or prelu
    std::string str() const;     // e.g. "attr[1]:zp=stock_per_tensor:ops=binary_mul+..."
};

// Lowering of a logical chain. `dst_is_f32` feeds FakeQuantize's rounding rule
// (round = dequantize || dst is f32 || not last).
std::vector<lowered_op> lower_legacy(const post_ops &ops, int64_t oc, bool dst_is_f32);
std::vector<lowered_op> lower_stock(const post_ops &ops, int64_t oc, bool dst_is_f32);

// Removes the clamps the store makes redundant, keeping every stored value:
// a clip (or a relu without slope) followed, up to the store, only by
// increasing steps (linear or scale-shift with positive scales, round) whose
// bounds, carried through those steps, land at or beyond the saturation of
// the stored type. Before a dw item the store is the intermediate's (no zero
// point), after it (or without one) dst_dt with dst_zp. A QuantizeLinear
// after ReLU6 is the common case: clip(0, 6) then ·42.5 is [0, 255] already.
// Returns the number of items removed.
int drop_saturated_clamps(post_ops &ops, int64_t oc, dtype dst_dt, int32_t dst_zp);

} // namespace qconv
