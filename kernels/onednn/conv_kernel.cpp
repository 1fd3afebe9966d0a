#include "kernels/onednn/conv_kernel.h"

#include <map>
#include <mutex>
#include <unordered_map>

#include "kernels/onednn/known_wrong.h"
#include "kernels/onednn/onednn_util.h"

namespace qconv::impl::onednn {

namespace {

struct onednn_packed : packed {
    std::vector<int8_t> plain; // the plain weights (for a primitive of another layout)
    md_t wei_md;               // layout of `wei`
    dnnl::memory wei;
    std::vector<float> bias; // oneDNN bias (bias/scale) or the bias post-op operand

    // The weights in layout `md`: a primitive planned for another thread count
    // may want another blocking; each layout is reordered once and kept.
    dnnl::memory weights_for(const md_t &plain_md, const md_t &md) const {
        if (md == wei_md) return wei;
        std::lock_guard<std::mutex> lock(mu);
        for (const auto &e : other)
            if (e.first == md) return e.second;
        other.emplace_back(md, reorder_to(plain_md, plain.data(), md));
        return other.back().second;
    }

private:
    mutable std::mutex mu;
    mutable std::vector<std::pair<md_t, dnnl::memory>> other;
};

struct built {
    pd_t pd;
    dnnl::convolution_forward prim;
};

class onednn_conv_kernel final : public conv_kernel {
public:
    onednn_conv_kernel(const selector &sel, const conv_problem &p, recipe r, pd_t pd, int threads)
        : sel_(sel), p_(p), r_(std::move(r)) {
        threads_guard guard(threads);
        auto b = std::make_shared<built>(built{pd, dnnl::convolution_forward(pd)});
        info_ = b->pd.impl_info_str();
        exact_ = exact_impl(info_);
        default_threads_ = threads;
        by_threads_[threads] = std::move(b);
    }

    const std::string &info() const { return info_; }
    bool exact() const override { return exact_; }

    std::shared_ptr<const packed> pack(const int8_t *wei, const float *bias) const override {
        if (!wei) fail("wei", "is null");
        if (p_.with_bias && !bias) fail("bias", "with_bias is set but no bias was given");
        auto w = std::make_shared<onednn_packed>();
        const conv_desc &d = p_.desc;
        w->plain.assign(wei, wei + d.wei_elems());
        const auto b = get(default_threads_);
        w->wei_md = b->pd.weights_desc();
        w->wei = reorder_to(r_.plain_wei_md, w->plain.data(), w->wei_md);
        if (p_.with_bias) {
            w->bias.assign(bias, bias + d.oc);
            if (r_.bias_arg)
                for (int64_t c = 0; c < d.oc; ++c) w->bias[c] /= p_.scale(c); // exact: power-of-two scales
        }
        return w;
    }

    void execute(const packed &pw, const void *src, void *dst, const exec_args &args) const override {
        const auto &w = static_cast<const onednn_packed &>(pw);
        const int threads = effective_threads(args.threads);
        const auto b = get(threads);
        const dnnl::engine &eng = cpu_engine();

        std::unordered_map<int, dnnl::memory> m;
        m[DNNL_ARG_SRC] = dnnl::memory(r_.src_md, eng, const_cast<void *>(src));
        m[DNNL_ARG_DST] = dnnl::memory(r_.dst_md, eng, dst);
        m[DNNL_ARG_WEIGHTS] = w.weights_for(r_.plain_wei_md, b->pd.weights_desc());
        if (r_.bias_arg)
            m[DNNL_ARG_BIAS] =
                dnnl::memory(md_t({p_.desc.oc}, dt_t::f32, tag_t::x), eng, const_cast<float *>(w.bias.data()));
        int32_t zp = r_.src_zp_value;
        if (r_.src_zp)
            m[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = dnnl::memory(md_t({1}, dt_t::s32, tag_t::x), eng, &zp);
        for (const operand &o : r_.operands) m[o.arg] = operand_memory(o, w, args);
        run_primitive(b->prim, b->pd.scratchpad_desc(), m, threads);
    }

private:
    dnnl::memory operand_memory(const operand &o, const onednn_packed &w, const exec_args &args) const {
        const dnnl::engine &eng = cpu_engine();
        switch (o.from) {
        case operand::source::values: return dnnl::memory(o.md, eng, const_cast<float *>(o.values.data()));
        case operand::source::bias: return dnnl::memory(o.md, eng, const_cast<float *>(w.bias.data()));
        case operand::source::full: return dnnl::memory(o.md, eng, const_cast<float *>(args.binary[o.full_index]));
        }
        fail("binary", "unknown operand source");
    }

    // The primitive planned for `threads` threads (oneDNN fixes the split at
    // creation), created on first use.
    std::shared_ptr<const built> get(int threads) const {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = by_threads_.find(threads);
        if (it != by_threads_.end()) return it->second;
        std::string why;
        auto pd = select_pd(sel_, r_, threads, &why);
        if (!pd) fail("threads", "no oneDNN primitive for " + std::to_string(threads) + " threads: " + why);
        // Under the same thread count as the descriptor: oneDNN's primitive
        // cache keys on it, and a primitive planned for another count would
        // overrun this descriptor's scratchpad.
        threads_guard guard(threads);
        auto b = std::make_shared<built>(built{*pd, dnnl::convolution_forward(*pd)});
        by_threads_[threads] = b;
        return b;
    }

    selector sel_;
    conv_problem p_;
    recipe r_;
    std::string info_;
    bool exact_ = true;
    int default_threads_ = 1;
    mutable std::mutex mu_;
    mutable std::map<int, std::shared_ptr<const built>> by_threads_;
};

} // namespace

std::shared_ptr<const conv_kernel> make_conv_kernel(const selector &sel, const conv_problem &p, const recipe &r,
                                                    const pd_t &pd, int threads) {
    return std::make_shared<onednn_conv_kernel>(sel, p, r, pd, threads);
}

std::string impl_info(const conv_kernel &k) {
    const auto *o = dynamic_cast<const onednn_conv_kernel *>(&k);
    return o ? o->info() : std::string();
}

} // namespace qconv::impl::onednn
