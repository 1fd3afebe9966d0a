// The fused 1x1 + depthwise pair of the int8 lowering (lowering.h), run on
// the QConvolution nodes once every candidate is decided.
#include "graph/passes/lower_int8/lowering.h"

namespace qconv::graph::int8 {

// A lowered 1x1 whose only reader is a lowered 3x3 depthwise (padding 1,
// stride 1 or 2, no source zero point) becomes one QConvolution with the
// depthwise as its fused dw item (docs/semantics.md §5): the 1x1's output
// pipeline with its destination type as the intermediate (its zero point must
// be 0), then the depthwise's weights, bias, scales, post-ops, destination.
// The same numbers as the two convolutions; rows that fuse keep only a few
// rows of the intermediate.
void fuse_dw(graph &g, std::map<const node *, std::string> &origin, std::vector<rewrite_record> &records) {
    auto record = [&](const node *n) -> rewrite_record * {
        for (auto &r : records)
            if (origin.count(n) && r.conv == origin[n]) return &r;
        return nullptr;
    };
    for (node *n1 : g.topo_order()) {
        if (n1->kind != op::QConvolution) continue;
        const auto cs = g.consumers(n1);
        if (cs.size() != 1 || cs[0]->kind != op::QConvolution || cs[0]->inputs[0] != n1) continue;
        node *n2 = cs[0];
        const qconv_spec &a = *n1->attr.qconv;
        const qconv_spec &b = *n2->attr.qconv;
        const conv_desc &d1 = a.p.desc, &d2 = b.p.desc;
        const bool pw = d1.kh == 1 && d1.kw == 1 && d1.g == 1 && d1.pt == 0 && d1.pl == 0 && d1.pb <= 0 && d1.pr <= 0 &&
                        !a.residual && a.p.dst_zp == 0 && a.p.dw() == nullptr;
        const bool dw = d2.is_depthwise() && d2.kh == 3 && d2.kw == 3 && d2.pt == 1 && d2.pl == 1 && d2.sh == d2.sw &&
                        (d2.sh == 1 || d2.sh == 2) && d2.dh == 1 && d2.dw == 1 &&
                        d2.oh == (d2.ih + 2 - 3) / d2.sh + 1 && d2.ow == (d2.iw + 2 - 3) / d2.sw + 1 &&
                        b.p.src_zp.effective_kind() == zero_point::kind::none && b.p.dw() == nullptr;
        if (!pw || !dw) continue;
        qconv_spec f = a;
        const node *w2 = n2->inputs[1];
        std::vector<int8_t> wd(w2->data->bytes.begin(), w2->data->bytes.end());
        f.p.ops.push_back(post_op::dw_conv(static_cast<int>(d2.sh), a.p.dst_dt, wd,
                                           b.p.with_bias ? b.bias : std::vector<float>{}, b.p.scales));
        for (const auto &o : b.p.ops) f.p.ops.push_back(o);
        f.p.dst_dt = b.p.dst_dt;
        f.p.dst_zp = b.p.dst_zp;
        f.residual = b.residual;
        f.sum = b.sum;
        try {
            f.p.validate();
        } catch (const error &) {
            continue;
        }
        attributes at = n2->attr;
        at.qconv = std::make_shared<const qconv_spec>(f);
        std::vector<node *> ins{n1->inputs[0], n1->inputs[1]};
        if (b.residual) ins.push_back(n2->inputs[2]);
        node *fused = g.add(op::QConvolution, ins, at, g.unique_id(n1->id + "_dw"));
        fused->friendly_name = n2->friendly_name;
        fused->rt_info = n2->rt_info;
        infer_node(*fused);
        g.replace_uses(n2, fused);
        if (auto *r = record(n1)) r->reason += " + fused dw item (" + origin[n2] + ")";
        if (auto *r = record(n2)) r->reason += "; fused into " + origin[n1] + " as its dw item";
        origin[fused] = origin[n1];
    }
}

} // namespace qconv::graph::int8
