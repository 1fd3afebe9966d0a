// The reference rows, last in every table: `ref:conv`, `ref:matmul` and
// `ref:conv_f32`.
// They run qconv::ref (reference/), accept every valid problem in either
// attribute set (a fused dw-conv item too: the two convolutions in
// sequence), and "pack" by copying the weights and bias.
#include <cstring>

#include "reference/ref_rows.h"
#include "reference/reference.h"

namespace qconv::impl {
namespace {

// ------------------------------------------------------------------ conv
struct ref_conv_packed : packed {
    std::vector<int8_t> wei;
    std::vector<float> bias; // empty without bias
};

class ref_conv_kernel : public conv_kernel {
public:
    ref_conv_kernel(const conv_problem &p, const attr_set &attr) : p_(p), attr_(attr) {}

    std::shared_ptr<const packed> pack(const int8_t *wei, const float *bias) const override {
        auto w = std::make_shared<ref_conv_packed>();
        w->wei.assign(wei, wei + p_.desc.wei_elems());
        if (p_.with_bias) w->bias.assign(bias, bias + p_.desc.oc);
        return w;
    }

    void execute(const packed &w, const void *src, void *dst, const exec_args &args) const override {
        const auto &pw = static_cast<const ref_conv_packed &>(w);
        ref::conv(p_, attr_, src, pw.wei.data(), p_.with_bias ? pw.bias.data() : nullptr, dst, args);
    }

private:
    conv_problem p_;
    attr_set attr_;
};

bool ref_conv_supports(const conv_problem &, const attr_set &, const platform &, std::string *) { return true; }

// ---------------------------------------------------------------- matmul
struct ref_matmul_packed : packed {
    std::vector<uint8_t> wei;
    std::vector<float> scale, bias;
    std::vector<int32_t> zp;
};

class ref_matmul_kernel : public matmul_kernel {
public:
    explicit ref_matmul_kernel(const matmul_desc &d) : d_(d) {}

    // Plain copies of the weights: the same for every M.
    std::string packing() const override { return "ref"; }

    std::shared_ptr<const packed> pack(const matmul_weights &w) const override {
        auto p = std::make_shared<ref_matmul_packed>();
        p->wei.assign(w.wei, w.wei + d_.wei_bytes());
        p->scale.assign(w.scale, w.scale + d_.scale_elems());
        if (d_.zp_elems() > 0) p->zp.assign(w.zp, w.zp + d_.zp_elems());
        if (d_.with_bias) p->bias.assign(w.bias, w.bias + d_.n);
        return p;
    }

    void execute(const packed &w, const float *x, float *y, int) const override {
        const auto &p = static_cast<const ref_matmul_packed &>(w);
        matmul_weights mw;
        mw.wei = p.wei.data();
        mw.scale = p.scale.data();
        mw.zp = p.zp.empty() ? nullptr : p.zp.data();
        mw.bias = p.bias.empty() ? nullptr : p.bias.data();
        ref::matmul(d_, mw, x, y);
    }

private:
    matmul_desc d_;
};

} // namespace

conv_entry ref_conv_row() {
    conv_entry e;
    e.name = "ref:conv";
    e.family = impl::row_family::ref;
    e.decide = decide_by(ref_conv_supports);
    e.build = [](const conv_problem &p, const attr_set &attr, const plan &) -> std::shared_ptr<const conv_kernel> {
        return std::make_shared<ref_conv_kernel>(p, attr);
    };
    return e;
}

matmul_entry ref_matmul_row() {
    matmul_entry e;
    e.name = "ref:matmul";
    e.family = impl::row_family::ref;
    e.decide = [](const matmul_desc &, const matmul_hints &, const platform &, std::string *) { return plain_plan(); };
    e.build = [](const matmul_desc &d, const matmul_hints &, const plan &) -> std::shared_ptr<const matmul_kernel> {
        return std::make_shared<ref_matmul_kernel>(d);
    };
    return e;
}

conv_f32_entry ref_conv_f32_row() {
    struct kernel final : conv_f32_kernel {
        kernel(const conv_desc &d, const float *wei, const float *bias, const f32_post_ops &post)
            : d(d), wei(wei, wei + d.wei_elems()),
              bias(bias ? std::vector<float>(bias, bias + d.oc) : std::vector<float>()), post(post) {}
        void execute(const float *src, float *dst, int) const override {
            ref::conv_f32(d, src, wei.data(), bias.empty() ? nullptr : bias.data(), dst, post);
        }
        conv_desc d;
        std::vector<float> wei, bias;
        f32_post_ops post;
    };
    conv_f32_entry e;
    e.name = "ref:conv_f32";
    e.family = impl::row_family::ref;
    e.decide = [](const conv_desc &, const platform &, std::string *) { return true; };
    e.build = [](const conv_desc &d, const float *wei, const float *bias,
                 const f32_post_ops &post) -> std::shared_ptr<const conv_f32_kernel> {
        return std::make_shared<kernel>(d, wei, bias, post);
    };
    return e;
}

} // namespace qconv::impl
