// f32 convolution, sgemm and matmul on oneDNN (see onednn_f32.h), and the
// oneDNN peers of the compressed-MatMul table: weights dequantized to f32
// once at pack time, then dnnl::matmul or dnnl_sgemm.
#include "kernels/onednn/onednn_f32.h"

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>

#include "kernels/onednn/onednn_f32.h"
#include "kernels/onednn/onednn_util.h"

namespace qconv::impl::onednn {

namespace {

using md_t = dnnl::memory::desc;
using dt_t = dnnl::memory::data_type;
using tag_t = dnnl::memory::format_tag;

// Primitives of one descriptor, one per thread count (created on first use
// with the calling thread's OpenMP count set to it), plus the weights
// reordered for the first one's layout.
template <class PD, class PRIM>
class per_threads {
public:
    using make_fn = std::function<PD()>;
    struct built {
        PD pd;
        PRIM prim;
    };

    explicit per_threads(make_fn make) : make_(std::move(make)) {}

    std::shared_ptr<const built> get(int threads) const {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = by_threads_.find(threads);
        if (it != by_threads_.end()) return it->second;
        threads_guard guard(threads);
        PD pd = make_();
        auto b = std::make_shared<built>(built{pd, PRIM(pd)});
        by_threads_[threads] = b;
        return b;
    }

private:
    make_fn make_;
    mutable std::mutex mu_;
    mutable std::map<int, std::shared_ptr<const built>> by_threads_;
};

dnnl::primitive_attr user_scratchpad() {
    dnnl::primitive_attr a;
    a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return a;
}

} // namespace

// One f32 primitive with weights given plain: the source/destination
// descriptors, the plain weights (reordered once into the layout of the first
// primitive, and again on demand for a primitive of another thread count that
// wants another layout), the bias, and the primitives per thread count.
template <class PD, class PRIM>
struct f32_primitive {
    using pt = per_threads<PD, PRIM>;
    md_t src_md, dst_md, plain_w_md, bias_md;
    std::vector<float> plain, bias;
    std::unique_ptr<pt> prims;
    md_t w_md;
    dnnl::memory w;
    // The binary post-ops' operands: argument, descriptor, values.
    struct operand {
        int arg;
        md_t md;
        std::vector<float> values;
    };
    std::vector<operand> operands;

    void set_weights(const md_t &plain_md, const float *wei, const float *b, int64_t oc, const md_t &b_md) {
        plain_w_md = plain_md;
        plain.assign(wei, wei + plain_md.get_size() / sizeof(float));
        if (b) {
            bias.assign(b, b + oc);
            bias_md = b_md;
        }
    }

    void create(typename pt::make_fn make, const char *what) {
        prims = std::make_unique<pt>(std::move(make));
        try {
            const auto b = prims->get(effective_threads(0));
            w_md = b->pd.weights_desc();
            w = reorder_to(plain_w_md, plain.data(), w_md);
        } catch (const dnnl::error &e) {
            fail(what, std::string("oneDNN cannot create it: ") + e.what());
        }
    }

    void execute(const float *src, float *dst, int threads) const {
        const int n = effective_threads(threads);
        const auto b = prims->get(n);
        const dnnl::engine &eng = cpu_engine();
        std::unordered_map<int, dnnl::memory> m;
        m[DNNL_ARG_SRC] = dnnl::memory(src_md, eng, const_cast<float *>(src));
        m[DNNL_ARG_DST] = dnnl::memory(dst_md, eng, dst);
        m[DNNL_ARG_WEIGHTS] =
            b->pd.weights_desc() == w_md ? w : reorder_to(plain_w_md, plain.data(), b->pd.weights_desc());
        if (!bias.empty()) m[DNNL_ARG_BIAS] = dnnl::memory(bias_md, eng, const_cast<float *>(bias.data()));
        for (const operand &o : operands) m[o.arg] = dnnl::memory(o.md, eng, const_cast<float *>(o.values.data()));
        run_primitive(b->prim, b->pd.scratchpad_desc(), m, n);
    }

    std::string impl_info() const { return prims->get(effective_threads(0))->pd.impl_info_str(); }
};

// ------------------------------------------------------------------ conv_f32
struct conv_f32::state : f32_primitive<dnnl::convolution_forward::primitive_desc, dnnl::convolution_forward> {};

namespace {
// The chain as oneDNN post-ops: relu, clip and hardswish as eltwise ops (its
// hardswish multiplies by 1/6 where the reference divides by 6), add and
// multiply as binary ops of a [1,1,1,1] or [1,OC,1,1] f32 operand (one f32
// addition / product each); the operands go to `operands`.
template <class S>
dnnl::post_ops conv_post_ops(const conv_desc &d, const f32_post_ops &post, S &s) {
    dnnl::post_ops po;
    for (const f32_post_op &o : post) {
        using k = f32_post_op::kind;
        if (o.k == k::relu) po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
        if (o.k == k::clip) po.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, o.lo, o.hi);
        if (o.k == k::hardswish) po.append_eltwise(1.f, dnnl::algorithm::eltwise_hardswish, 0.f, 0.f);
        if (o.k != k::add && o.k != k::multiply) continue;
        const int64_t c = o.values.size() == 1 ? 1 : d.oc;
        const md_t md({1, c, 1, 1}, dt_t::f32, tag_t::nchw);
        po.append_binary(o.k == k::add ? dnnl::algorithm::binary_add : dnnl::algorithm::binary_mul, md);
        const int arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(po.len() - 1) | DNNL_ARG_SRC_1;
        s.operands.push_back({arg, md, o.values});
    }
    return po;
}
} // namespace

conv_f32::conv_f32(const conv_desc &d, const float *wei, const float *bias, const f32_post_ops &post)
    : s_(std::make_unique<state>()) {
    d.validate();
    if (!wei) fail("wei", "is null");
    state &s = *s_;
    s.src_md = md_t({d.mb, d.ic, d.ih, d.iw}, dt_t::f32, tag_t::nhwc);
    s.dst_md = md_t({d.mb, d.oc, d.oh, d.ow}, dt_t::f32, tag_t::nhwc);
    const bool grouped = d.g > 1;
    const dnnl::memory::dims wdims =
        grouped ? dnnl::memory::dims{d.g, d.ocg(), d.icg(), d.kh, d.kw} : dnnl::memory::dims{d.oc, d.ic, d.kh, d.kw};
    s.set_weights(md_t(wdims, dt_t::f32, grouped ? tag_t::goihw : tag_t::oihw), wei, bias, d.oc,
                  md_t({d.oc}, dt_t::f32, tag_t::x));
    const md_t any_wei(wdims, dt_t::f32, tag_t::any);
    const md_t src_md = s.src_md, dst_md = s.dst_md, bias_md = s.bias_md;
    const dnnl::post_ops po = conv_post_ops(d, post, s);
    s.create(
        [=] {
            const dnnl::convolution_forward::desc cd(
                dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_md, any_wei, bias_md,
                dst_md, {d.sh, d.sw}, {d.dh - 1, d.dw - 1}, {d.pt, d.pl}, {d.pb, d.pr});
            dnnl::primitive_attr attr = user_scratchpad();
            attr.set_post_ops(po);
            return dnnl::convolution_forward::primitive_desc(cd, attr, cpu_engine());
        },
        "conv_f32");
}

conv_f32::~conv_f32() = default;

void conv_f32::execute(const float *src, float *dst, int threads) const {
    if (!src) fail("src", "is null");
    if (!dst) fail("dst", "is null");
    s_->execute(src, dst, threads);
}

std::string conv_f32::impl_info() const { return s_->impl_info(); }

// --------------------------------------------------------------------- sgemm
void sgemm(int64_t m, int64_t n, int64_t k, const float *x, const float *w, const float *bias, float *y, int threads) {
    if (m <= 0 || n <= 0 || k <= 0) fail("sgemm", "sizes must be positive");
    if (!x || !w || !y) fail("sgemm", "null pointer");
    if (bias)
        for (int64_t i = 0; i < m; ++i) std::copy(bias, bias + n, y + i * n);
    threads_guard guard(threads);
    // Row-major: Y[M,N] = X[M,K] · (W[N,K])ᵀ, i.e. B = W read transposed.
    const dnnl_status_t st = dnnl_sgemm('N', 'T', m, n, k, 1.f, x, k, w, k, bias ? 1.f : 0.f, y, n);
    if (st != dnnl_success) fail("sgemm", "dnnl_sgemm failed with status " + std::to_string(st));
}

// ----------------------------------------------------------------- matmul_f32
struct matmul_f32::state : f32_primitive<dnnl::matmul::primitive_desc, dnnl::matmul> {};

matmul_f32::matmul_f32(int64_t m, int64_t k, int64_t n, const float *w, const float *bias)
    : s_(std::make_unique<state>()) {
    if (m <= 0 || n <= 0 || k <= 0) fail("matmul_f32", "sizes must be positive");
    if (!w) fail("wei", "is null");
    state &s = *s_;
    s.src_md = md_t({m, k}, dt_t::f32, tag_t::ab);
    s.dst_md = md_t({m, n}, dt_t::f32, tag_t::ab);
    // W[N][K] row-major is Wᵀ[K][N] in "ba".
    s.set_weights(md_t({k, n}, dt_t::f32, tag_t::ba), w, bias, n, md_t({1, n}, dt_t::f32, tag_t::ab));
    const md_t x_md = s.src_md, y_md = s.dst_md, bias_md = s.bias_md, any_w({k, n}, dt_t::f32, tag_t::any);
    s.create(
        [=] {
            const dnnl::matmul::desc md(x_md, any_w, bias_md, y_md);
            return dnnl::matmul::primitive_desc(md, user_scratchpad(), cpu_engine());
        },
        "matmul_f32");
}

matmul_f32::~matmul_f32() = default;

void matmul_f32::execute(const float *x, float *y, int threads) const {
    if (!x) fail("x", "is null");
    if (!y) fail("y", "is null");
    s_->execute(x, y, threads);
}

std::string matmul_f32::impl_info() const { return s_->impl_info(); }

// ------------------------------------------------------------- dequantize
std::vector<float> dequantize(const matmul_desc &d, const matmul_weights &w) {
    d.validate();
    if (!w.wei) fail("wei", "is null");
    if (!w.scale) fail("scale", "is null");
    if (d.zp_elems() > 0 && !w.zp) fail("zp", "is null");
    const int64_t gs = d.group_size(), ng = d.n_groups();
    std::vector<float> out(static_cast<size_t>(d.n * d.k));
    for (int64_t n = 0; n < d.n; ++n)
        for (int64_t k = 0; k < d.k; ++k) {
            const int64_t g = n * ng + k / gs;
            const int32_t zp = d.zp_elems() == 0 ? 0 : d.zp_elems() == 1 ? w.zp[0] : w.zp[g];
            const int32_t q = weight_at(w.wei, d.wei_dt, n * d.k + k);
            out[n * d.k + k] = static_cast<float>(q - zp) * w.scale[g];
        }
    return out;
}

// ------------------------------------------------------- matmul table peers
namespace {

// Weights dequantized once; the product by oneDNN f32 (matmul or sgemm).
struct f32_peer_packed : packed {
    std::vector<float> deq, bias;
    std::unique_ptr<matmul_f32> mm; // matmul peer only
};

class f32_peer_kernel final : public matmul_kernel {
public:
    f32_peer_kernel(const matmul_desc &d, bool use_matmul) : d_(d), use_matmul_(use_matmul) {}

    std::shared_ptr<const packed> pack(const matmul_weights &w) const override {
        auto p = std::make_shared<f32_peer_packed>();
        p->deq = dequantize(d_, w);
        if (d_.with_bias) {
            if (!w.bias) fail("bias", "with_bias is set but no bias was given");
            p->bias.assign(w.bias, w.bias + d_.n);
        }
        const float *b = d_.with_bias ? p->bias.data() : nullptr;
        if (use_matmul_) p->mm = std::make_unique<matmul_f32>(d_.m, d_.k, d_.n, p->deq.data(), b);
        return p;
    }

    void execute(const packed &pw, const float *x, float *y, int threads) const override {
        const auto &p = static_cast<const f32_peer_packed &>(pw);
        if (p.mm) return p.mm->execute(x, y, threads);
        sgemm(d_.m, d_.n, d_.k, x, p.deq.data(), d_.with_bias ? p.bias.data() : nullptr, y, threads);
    }

private:
    matmul_desc d_;
    bool use_matmul_;
};

} // namespace

} // namespace qconv::impl::onednn

namespace qconv::impl {

// Peers for the benchmarks and the driver: oneDNN f32 on weights dequantized
// once at pack time (4x / 8x the bytes of u8 / u4 weights).
matmul_entry onednn_f32_row(const std::string &name, f32_gemm gemm) {
    const bool use_matmul = gemm == f32_gemm::matmul_primitive;
    const std::string canonical = use_matmul ? "onednn:matmul_f32:dequantized" : "onednn:sgemm_f32:dequantized";
    matmul_entry e = impl::named_entry<matmul_entry>(name, canonical, impl::row_family::onednn);
    e.peer = true;
    e.decide = decide_by([](const matmul_desc &d, const matmul_hints &, const platform &, std::string *why) {
        if (d.m * d.k > (int64_t(1) << 31) || d.n * d.k > (int64_t(1) << 31))
            return reject(why, "too large for the f32 peer");
        return true;
    });
    e.build = [use_matmul](const matmul_desc &d, const matmul_hints &,
                           const plan &) -> std::shared_ptr<const matmul_kernel> {
        return std::make_shared<onednn::f32_peer_kernel>(d, use_matmul);
    };
    return e;
}

// oneDNN's f32 convolution (the graph executor's f32 Convolution nodes).
conv_f32_entry onednn_conv_f32_row(const std::string &name) {
    struct kernel final : conv_f32_kernel {
        kernel(const conv_desc &d, const float *wei, const float *bias, const f32_post_ops &post)
            : conv(d, wei, bias, post) {}
        void execute(const float *src, float *dst, int threads) const override { conv.execute(src, dst, threads); }
        onednn::conv_f32 conv;
    };
    conv_f32_entry e = named_entry<conv_f32_entry>(name, "onednn:conv_f32", impl::row_family::onednn);
    e.decide = [](const conv_desc &, const platform &, std::string *) { return true; };
    e.build = [](const conv_desc &d, const float *wei, const float *bias,
                 const f32_post_ops &post) -> std::shared_ptr<const conv_f32_kernel> {
        return std::make_shared<kernel>(d, wei, bias, post);
    };
    return e;
}

} // namespace qconv::impl
