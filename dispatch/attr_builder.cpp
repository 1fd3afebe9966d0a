// The attr builder (see attr_builder.h): the two attribute tables of
// docs/dispatch.md (Attribute sets) as code.
#include "dispatch/attr_builder.h"

namespace qconv::impl {
namespace {

bool has_dw_conv(const post_ops &ops) {
    for (const auto &op : ops)
        if (op.k == post_op::kind::dw_conv) return true;
    return false;
}

// The legacy mechanism takes IC values; a per-tensor zp is repeated.
std::vector<int32_t> per_channel_values(const conv_problem &p) {
    std::vector<int32_t> v(static_cast<size_t>(p.desc.ic));
    for (int64_t c = 0; c < p.desc.ic; ++c) v[static_cast<size_t>(c)] = p.src_zp.at(c);
    return v;
}

attr_set legacy_set(const conv_problem &p, bool dst_f32) {
    attr_set a;
    a.id = 0;
    if (p.src_zp.effective_kind() != zero_point::kind::none) {
        a.zp = zp_mechanism::legacy_per_channel;
        a.zp_values = per_channel_values(p);
    }
    a.ops = lower_legacy(p.ops, p.desc.oc, dst_f32);
    return a;
}

attr_set stock_set(const conv_problem &p, bool dst_f32, bool legacy_ops) {
    attr_set a;
    a.id = 1;
    if (p.src_zp.effective_kind() == zero_point::kind::per_tensor) {
        a.zp = zp_mechanism::stock_per_tensor;
        a.zp_values = {p.src_zp.at(0)};
    }
    a.ops = legacy_ops ? lower_legacy(p.ops, p.desc.oc, dst_f32) : lower_stock(p.ops, p.desc.oc, dst_f32);
    return a;
}

// Whether attr[1] is built, and with which form of post-ops.
struct second_set {
    bool wanted = false;
    bool legacy_ops = false;
};

second_set decide_second(const conv_problem &p, const platform &plat, const conv_hints &hints) {
    if (!brgconv_platform(plat) || has_dw_conv(p.ops)) return {};
    const zero_point::kind zp = p.src_zp.effective_kind();
    const bool binary = needs_binary(p.ops);
    if (zp == zero_point::kind::per_channel) return {}; // legacy only: no brgconv takes it
    if (plat.has(cpu_feature::amx_int8)) {
        if (zp == zero_point::kind::per_tensor) return {true, binary}; // WR: legacy post-ops + stock zp
        return {binary, false};                                        // brgconv-amx with binary post-ops
    }
    // AVX-512 VNNI / BF16: binary post-ops in brgconv only when enforced.
    if (binary) return {hints.enforce_brgconv, false};
    return {zp == zero_point::kind::per_tensor, false};
}

} // namespace

bool brgconv_platform(const platform &plat) { return plat.has(cpu_feature::avx512_core_vnni); }

std::vector<attr_set> build_attrs_for_peer(const conv_problem &p, const platform &plat, const conv_hints &hints) {
    std::vector<attr_set> sets = build_attrs(p, plat, hints);
    // The stock set can carry no per-channel zero point.
    const bool per_channel = p.src_zp.effective_kind() == zero_point::kind::per_channel;
    if (sets.size() == 1 && !per_channel && !has_dw_conv(p.ops))
        sets.push_back(stock_set(p, p.dst_dt == dtype::f32, false));
    return sets;
}

std::vector<attr_set> build_attrs(const conv_problem &p, const platform &plat, const conv_hints &hints) {
    const bool dst_f32 = p.dst_dt == dtype::f32;
    std::vector<attr_set> sets;
    sets.push_back(legacy_set(p, dst_f32));
    const second_set second = decide_second(p, plat, hints);
    if (second.wanted) sets.push_back(stock_set(p, dst_f32, second.legacy_ops));
    return sets;
}

} // namespace qconv::impl
