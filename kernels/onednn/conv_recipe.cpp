#include "kernels/onednn/conv_recipe.h"

#include <cmath>

#include "kernels/onednn/onednn_util.h"

namespace qconv::impl::onednn {

using dnnl::algorithm;

namespace {
bool is_power_of_two(float s) {
    if (!std::isfinite(s) || s == 0.f) return false;
    int e = 0;
    const float m = std::frexp(std::fabs(s), &e);
    return m == 0.5f && e > -100 && e < 100;
}
} // namespace

md_t weights_md(const conv_desc &d, tag_t tag) {
    if (d.g == 1) return md_t({d.oc, d.ic, d.kh, d.kw}, dt_t::s8, tag == tag_t::any ? tag : tag_t::oihw);
    return md_t({d.g, d.ocg(), d.icg(), d.kh, d.kw}, dt_t::s8, tag == tag_t::any ? tag : tag_t::goihw);
}

std::optional<recipe> make_recipe(const conv_problem &p, const attr_set &attr, std::string *why) {
    const conv_desc &d = p.desc;
    if (p.src_dt != dtype::u8 && p.src_dt != dtype::s8) {
        reject(why, std::string("src_dt ") + to_string(p.src_dt) + " is not u8/s8");
        return std::nullopt;
    }
    if (p.dst_dt != dtype::u8 && p.dst_dt != dtype::s8 && p.dst_dt != dtype::s32 && p.dst_dt != dtype::f32) {
        reject(why, std::string("dst_dt ") + to_string(p.dst_dt) + " is not u8/s8/s32/f32");
        return std::nullopt;
    }
    if (attr.zp == zp_mechanism::legacy_per_channel) {
        reject(
            why,
            "legacy zero point (zp bytes in the padding + compensation): oneDNN 2.6 has only the stock per-tensor one");
        return std::nullopt;
    }

    if (p.dst_dt != dtype::f32)
        for (const lowered_op &op : attr.ops)
            if (op.k == lowered_op::kind::eltwise && op.alg == eltwise_alg::sqrt) {
                // sqrt of a negative value is NaN; qconv stores it to an integer
                // destination as 0, oneDNN as whatever its conversion gives.
                reject(why,
                       "sqrt before an integer destination: oneDNN stores NaN as an arbitrary integer, qconv as 0");
                return std::nullopt;
            }

    bool pow2 = true;
    for (int64_t c = 0; c < (p.scales.size() > 1 ? d.oc : 1); ++c) pow2 = pow2 && is_power_of_two(p.scale(c));

    chain_builder chain(d);
    const bool bias_post_op = p.with_bias && !pow2;
    if (bias_post_op) chain.bias_add();
    for (const lowered_op &op : attr.ops)
        if (!chain.append(op, why)) return std::nullopt;
    if (p.dst_zp != 0) chain.binary(binary_alg::add, {static_cast<float>(p.dst_zp)});

    const md_t src_md({d.mb, d.ic, d.ih, d.iw}, onednn::to_dnnl(p.src_dt), tag_t::nhwc);
    const md_t dst_md({d.mb, d.oc, d.oh, d.ow}, onednn::to_dnnl(p.dst_dt), tag_t::nhwc);
    const bool bias_arg = p.with_bias && !bias_post_op;
    const md_t bias_md = bias_arg ? md_t({d.oc}, dt_t::f32, tag_t::x) : md_t();

    std::optional<recipe> r;
    const bool ok = try_dnnl(
        [&] {
            r.emplace(recipe{dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                             algorithm::convolution_direct, src_md,
                                                             weights_md(d, tag_t::any), bias_md, dst_md, {d.sh, d.sw},
                                                             {d.dh - 1, d.dw - 1}, {d.pt, d.pl}, {d.pb, d.pr}),
                             dnnl::primitive_attr(),
                             {},
                             bias_arg,
                             bias_post_op,
                             false,
                             0,
                             src_md,
                             dst_md,
                             weights_md(d, tag_t::undef),
                             d.g > 1,
                             d,
                             false});
            dnnl::primitive_attr &a = r->attr;
            a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
            if (p.scales.size() > 1) a.set_output_scales(1 << 1, p.scales);
            else if (p.scales.size() == 1) a.set_output_scales(0, p.scales);
            if (attr.zp == zp_mechanism::stock_per_tensor && !attr.zp_values.empty() && attr.zp_values[0] != 0) {
                a.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
                r->src_zp = true;
                r->src_zp_value = attr.zp_values[0];
            }
            a.set_post_ops(chain.post_ops());
        },
        why, "oneDNN rejects the descriptor");
    if (!ok) return std::nullopt;
    r->operands = chain.take_operands();
    r->binary_ops = !r->operands.empty();
    r->sum_op = chain.has_sum();
    return r;
}

} // namespace qconv::impl::onednn
