// split_dw: a chain with a fused depthwise item cut into its two convolutions.
#include "core/dw_fusion.h"

#include "qconv/types.h"

namespace qconv {

conv_desc dw_desc_over(const conv_desc &pw, int stride) {
    conv_desc d;
    d.g = pw.oc;
    d.mb = pw.mb;
    d.ic = d.oc = pw.oc;
    d.ih = pw.oh;
    d.iw = pw.ow;
    d.kh = d.kw = 3;
    d.sh = d.sw = stride;
    d.pt = d.pl = 1;
    d.oh = (d.ih + 2 - 3) / stride + 1;
    d.ow = (d.iw + 2 - 3) / stride + 1;
    d.pb = (d.oh - 1) * stride + 3 - d.ih - d.pt;
    d.pr = (d.ow - 1) * stride + 3 - d.iw - d.pl;
    d.name = pw.name.empty() ? "" : pw.name + ":dw";
    return d;
}

dw_halves split_dw(const conv_problem &p) {
    const post_op *item = p.dw();
    if (!item) fail("post_ops", "split_dw: the chain has no dw conv item");
    dw_halves h;
    h.pw = p;
    h.pw.ops.clear();
    h.pw.dst_dt = item->dw_mid_dt;
    h.pw.dst_zp = 0;
    h.dw.desc = dw_desc_over(p.desc, item->dw_stride);
    h.dw.src_dt = item->dw_mid_dt;
    h.dw.dst_dt = p.dst_dt;
    h.dw.dst_zp = p.dst_zp;
    h.dw.scales = item->dw_scales;
    h.dw.with_bias = !item->dw_bias.empty();
    bool after = false;
    for (const post_op &op : p.ops) {
        if (op.k == post_op::kind::dw_conv) after = true;
        else (after ? h.dw.ops : h.pw.ops).push_back(op);
    }
    h.dw_wei = item->dw_wei;
    h.dw_bias = item->dw_bias;
    return h;
}

void split_dw(const attr_set &a, attr_set *pw, attr_set *dw) {
    *pw = a;
    pw->ops.clear();
    *dw = attr_set{};
    dw->id = a.id;
    bool after = false;
    for (const lowered_op &op : a.ops) {
        if (op.k == lowered_op::kind::dw_conv) after = true;
        else (after ? dw->ops : pw->ops).push_back(op);
    }
}

} // namespace qconv
