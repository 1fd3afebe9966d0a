// onednn:conv_1x1_dw:<isa>: oneDNN's own fusion of a 1x1 int8 convolution
// with a 3x3 depthwise one (post_ops::append_dw), for a qconv chain with a
// dw item (docs/semantics.md §5). The row takes what maps one to one: no
// source or destination zero point, eltwise relu / clip / linear on either
// half, per-tensor or per-OC scales on both; oneDNN adds each bias before
// scaling, so the biases are passed divided by the scales (exact for the
// power-of-two scales of the tests, as in the other wrapped rows). The
// intermediate is the 1x1's oneDNN destination type (u8/s8), the final
// destination append_dw's. It takes oneDNN's implementation at the row's ISA
// (stepping through next_impl()). What oneDNN 2.6.3 offers for these chains
// on int8 is ref_fused_convolution alone: the 1x1 and the depthwise as two
// sub-primitives (jit_uni_int8_1x1 + jit_uni_int8 under DNNL_MAX_CPU_ISA=AVX2,
// jit_int8_1x1 + jit_int8 at avx512_core, brgconv_1x1 + brdgmm_dw on VNNI and
// AMX) through an intermediate in its scratchpad; the row's ISA is the 1x1
// sub-primitive's. oneDNN follows its own cap (DNNL_MAX_CPU_ISA), not qconv's.
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/dw_fusion.h"
#include "kernels/onednn/conv_select.h"
#include "kernels/onednn/known_wrong.h"
#include "kernels/onednn/onednn_conv.h"
#include "kernels/onednn/onednn_util.h"

namespace qconv::impl::onednn {
namespace {

using md_t = dnnl::memory::desc;
using dt_t = dnnl::memory::data_type;
using tag_t = dnnl::memory::format_tag;

bool eltwise_of(const lowered_op &op, dnnl::algorithm *alg) {
    if (op.k != lowered_op::kind::eltwise) return false;
    switch (op.alg) {
    case eltwise_alg::relu: *alg = dnnl::algorithm::eltwise_relu; return true;
    case eltwise_alg::clip: *alg = dnnl::algorithm::eltwise_clip; return true;
    case eltwise_alg::linear: *alg = dnnl::algorithm::eltwise_linear; return true;
    default: return false;
    }
}

bool ops_map(const std::vector<lowered_op> &ops, std::string *why) {
    dnnl::algorithm a;
    for (const auto &op : ops)
        if (!eltwise_of(op, &a)) return reject(why, "only eltwise relu, clip and linear on either half");
    return true;
}

std::vector<float> scales_of(const std::vector<float> &s, int *mask) {
    *mask = s.size() > 1 ? 1 << 1 : 0;
    return s.empty() ? std::vector<float>{1.f} : s;
}

// The ISA of oneDNN's implementation `info`, or −1: a fused kernel
// ("jit_uni_int8_1x1:avx2") or oneDNN 2.6's ref_fused_convolution, which runs
// its two sub-primitives through a scratchpad intermediate
// ("ref_fused_convolution:any:jit_uni_int8_1x1:avx2:jit_uni_int8:avx2"): the
// 1x1 sub-primitive's ISA.
int dw_impl_level(const std::string &info) {
    std::string head = info;
    const std::string fused = "ref_fused_convolution:any:";
    if (head.rfind(fused, 0) == 0) {
        head = head.substr(fused.size());
        const size_t c1 = head.find(':'), c2 = c1 == std::string::npos ? c1 : head.find(':', c1 + 1);
        if (c2 != std::string::npos) head.resize(c2);
    }
    std::string kind;
    isa l;
    if (!parse_impl_info(head, &kind, &l) || kind == "ref") return -1;
    return static_cast<int>(l);
}

// Whether both halves of `info` return the reference's int32 sums (below
// VNNI oneDNN's int8 kernels saturate 16-bit partial sums; its brgconv on AMX
// is untrusted): exact_impl() of each sub-primitive.
bool dw_impl_exact(const std::string &info) {
    const std::string fused = "ref_fused_convolution:any:";
    if (info.rfind(fused, 0) != 0) return exact_impl(info);
    const std::string rest = info.substr(fused.size());
    size_t c = rest.find(':');
    c = c == std::string::npos ? c : rest.find(':', c + 1);
    if (c == std::string::npos) return false;
    return exact_impl(rest.substr(0, c)) && exact_impl(rest.substr(c + 1));
}

struct dw_plan : plan {
    isa level;
    std::string info;
    std::string str() const override { return info; }
};

// The primitive descriptor on oneDNN's implementation at `level`.
std::optional<dnnl::convolution_forward::primitive_desc>
make_pd(const dw_halves &h, const attr_set &a1, const attr_set &a2, isa level, int threads, std::string *why) {
    const conv_desc &d = h.pw.desc;
    const auto &eng = cpu_engine();
    const md_t src({d.mb, d.ic, d.ih, d.iw}, to_dnnl(h.pw.src_dt), tag_t::nhwc);
    const md_t wei({d.oc, d.ic, 1, 1}, dt_t::s8, tag_t::any);
    const md_t bias({d.oc}, dt_t::f32, tag_t::x);
    const md_t mid({d.mb, d.oc, d.oh, d.ow}, to_dnnl(h.pw.dst_dt), tag_t::nhwc);
    dnnl::convolution_forward::desc cd(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                       wei, bias, mid, {d.sh, d.sw}, {0, 0}, {0, 0});
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    int mask1 = 0, mask2 = 0;
    attr.set_output_scales(mask1, scales_of(h.pw.scales, &mask1));
    dnnl::post_ops po;
    dnnl::algorithm alg;
    for (const auto &op : a1.ops)
        if (eltwise_of(op, &alg)) po.append_eltwise(1.f, alg, op.alpha, op.beta);
    const std::vector<float> s2 = scales_of(h.dw.scales, &mask2);
    po.append_dw(dt_t::s8, dt_t::f32, to_dnnl(h.dw.dst_dt), 3, h.dw.desc.sh, 1, mask2, s2);
    for (const auto &op : a2.ops)
        if (eltwise_of(op, &alg)) po.append_eltwise(1.f, alg, op.alpha, op.beta);
    attr.set_post_ops(po);
    threads_guard guard(threads);
    std::optional<dnnl::convolution_forward::primitive_desc> pd;
    std::string offered;
    const bool ok = try_dnnl(
        [&] {
            dnnl::convolution_forward::primitive_desc p(cd, attr, eng, true);
            do {
                const std::string info = p.impl_info_str();
                offered += (offered.empty() ? "" : ", ") + info;
                if (dw_impl_level(info) == static_cast<int>(level)) {
                    pd = p;
                    return;
                }
            } while (p.next_impl());
        },
        why, "oneDNN refuses the fused 1x1 + dw convolution");
    if (ok && !pd)
        reject(why, "oneDNN offers no implementation at " + std::string(to_string(level)) +
                        (offered.empty() ? "" : " (offered: " + offered + ")"));
    if (pd) {
        const md_t want({d.mb, d.oc, h.dw.desc.oh, h.dw.desc.ow}, to_dnnl(h.dw.dst_dt), tag_t::nhwc);
        if (pd->dst_desc() != want) {
            reject(why, "oneDNN's fused destination is not NHWC of the depthwise's shape");
            pd.reset();
        }
    }
    return pd;
}

struct dw_packed : packed {
    dnnl::memory wei, dw_wei;
    std::vector<float> bias, dw_bias;
};

class dw_kernel final : public conv_kernel {
public:
    dw_kernel(const conv_problem &p, const attr_set &a, isa level) : h_(split_dw(p)), level_(level) {
        split_dw(a, &a1_, &a2_);
        exact_ = dw_impl_exact(get(effective_threads(0))->pd.impl_info_str());
    }

    bool exact() const override { return exact_; }

    std::shared_ptr<const packed> pack(const int8_t *wei, const float *bias) const override {
        if (!wei) fail("wei", "is null");
        const conv_desc &d = h_.pw.desc;
        const auto b = get(effective_threads(0));
        auto w = std::make_shared<dw_packed>();
        w->wei = reorder_to(md_t({d.oc, d.ic, 1, 1}, dt_t::s8, tag_t::oihw), wei, b->pd.weights_desc());
        const md_t dw_md = b->pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS);
        w->dw_wei = reorder_to(md_t({d.oc, 1, 1, 3, 3}, dt_t::s8, tag_t::goihw), h_.dw_wei.data(), dw_md);
        w->bias.assign(static_cast<size_t>(d.oc), 0.f);
        w->dw_bias.assign(static_cast<size_t>(d.oc), 0.f);
        for (int64_t c = 0; c < d.oc; ++c) {
            if (bias) w->bias[c] = bias[c] / h_.pw.scale(c);
            if (!h_.dw_bias.empty()) w->dw_bias[c] = h_.dw_bias[c] / h_.dw.scale(c);
        }
        return w;
    }

    void execute(const packed &pw, const void *src, void *dst, const exec_args &args) const override {
        const auto &w = static_cast<const dw_packed &>(pw);
        const int threads = effective_threads(args.threads);
        const auto b = get(threads);
        const auto &eng = cpu_engine();
        const conv_desc &d = h_.pw.desc;
        const md_t bias_md({d.oc}, dt_t::f32, tag_t::x);
        std::unordered_map<int, dnnl::memory> m;
        m[DNNL_ARG_SRC] = dnnl::memory(b->pd.src_desc(), eng, const_cast<void *>(src));
        m[DNNL_ARG_WEIGHTS] = w.wei;
        m[DNNL_ARG_BIAS] = dnnl::memory(bias_md, eng, const_cast<float *>(w.bias.data()));
        m[DNNL_ARG_DST] = dnnl::memory(b->pd.dst_desc(), eng, dst);
        m[DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS] = w.dw_wei;
        m[DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS] = dnnl::memory(bias_md, eng, const_cast<float *>(w.dw_bias.data()));
        run_primitive(b->prim, b->pd.scratchpad_desc(), m, threads);
    }

private:
    struct built {
        dnnl::convolution_forward::primitive_desc pd;
        dnnl::convolution_forward prim;
    };
    // One primitive per thread count (oneDNN fixes the split at creation).
    std::shared_ptr<const built> get(int threads) const {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = by_threads_.find(threads);
        if (it != by_threads_.end()) return it->second;
        std::string why;
        auto pd = make_pd(h_, a1_, a2_, level_, threads, &why);
        if (!pd) fail("impl", "onednn:conv_1x1_dw: " + why);
        threads_guard guard(threads);
        auto b = std::make_shared<built>(built{*pd, dnnl::convolution_forward(*pd)});
        by_threads_[threads] = b;
        return b;
    }

    dw_halves h_;
    attr_set a1_, a2_;
    isa level_;
    bool exact_ = false;
    mutable std::mutex mu_;
    mutable std::map<int, std::shared_ptr<const built>> by_threads_;
};

plan_ptr dw_supports(isa level, const conv_problem &p, const attr_set &a, std::string *why) {
    if (!p.dw()) return reject(why, "no fused dw conv item"), nullptr;
    if (a.zp != zp_mechanism::none) return reject(why, "oneDNN's fused dw takes no source zero point"), nullptr;
    if (p.dst_zp != 0) return reject(why, "no destination zero point"), nullptr;
    if (p.desc.sh != 1 || p.desc.sw != 1) return reject(why, "the 1x1 is strided"), nullptr;
    const dw_halves h = split_dw(p);
    attr_set a1, a2;
    split_dw(a, &a1, &a2);
    if (!ops_map(a1.ops, why) || !ops_map(a2.ops, why)) return nullptr;
    std::string w;
    const auto pd = make_pd(h, a1, a2, level, effective_threads(0), &w);
    if (!pd) return reject(why, w), nullptr;
    auto pl = std::make_shared<dw_plan>();
    pl->level = level;
    pl->info = pd->impl_info_str();
    return pl;
}

} // namespace

conv_entry conv_1x1_dw_row(const std::string &name, isa level, bool peer) {
    const std::string canonical = std::string("onednn:conv_1x1_dw:") + to_string(level);
    conv_entry e = impl::named_entry<conv_entry>(name, canonical, impl::row_family::onednn);
    e.peer = peer;
    e.only_1x1 = true;
    e.only_dw_item = true;
    e.needs = level_features(level);
    e.needs.remove(cpu_feature::avx512_bf16);
    e.decide = [level](const conv_problem &p, const attr_set &a, const platform &, std::string *why) -> plan_ptr {
        try {
            return dw_supports(level, p, a, why);
        } catch (const dnnl::error &x) {
            reject(why, std::string("oneDNN refuses the attributes: ") + x.what());
            return nullptr;
        }
    };
    e.build = [level](const conv_problem &p, const attr_set &a, const plan &) -> std::shared_ptr<const conv_kernel> {
        try {
            return std::make_shared<dw_kernel>(p, a, level);
        } catch (const dnnl::error &x) {
            fail("impl", std::string("onednn:conv_1x1_dw: oneDNN refuses the attributes: ") + x.what());
        }
    };
    return e;
}

} // namespace qconv::impl::onednn
