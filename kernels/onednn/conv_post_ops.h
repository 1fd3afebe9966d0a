// The post-op chain of the oneDNN int8 convolution wrapper (internal to
// kernels/onednn/): an attribute set's lowered chain mapped op for op to
// oneDNN post-ops, and the runtime operands they read.
//
// Post-op mapping (lowered_op → oneDNN):
//   eltwise           → eltwise (same algorithm, alpha, beta)
//   binary            → binary, src1 {1,1,1,1} (per-tensor, mask 0),
//                       {1,OC,1,1} (per-OC, mask 2) or the full NHWC tensor
//                       (runtime arg DNNL_ARG_ATTR_MULTIPLE_POST_OP(i)|SRC_1)
//   prelu (stock)     → prelu (mask 2, weights arg) — per-tensor slopes as
//                       eltwise relu(alpha); oneDNN 2.6 has no brgconv with a
//                       prelu post-op, so per-OC PReLU selects ref_int8 only
//   sum               → sum(scale, zp)
//   legacy depthwise_scale_shift / quantization (the AMX per-tensor-zp
//   attr[1] carries them): converted to clip / max / min, eltwise linear
//   (per-tensor, a fused multiply-add like the reference's madd) or binary
//   mul + add (per-OC: two roundings, exact for the default data),
//   eltwise round; depthwise_prelu as prelu above.
//   dw_conv: unsupported.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/lowering.h"
#include "qconv/conv_desc.h"
#include "rows/row.h"

namespace qconv::impl::onednn {

using md_t = dnnl::memory::desc;
using dt_t = dnnl::memory::data_type;
using tag_t = dnnl::memory::format_tag;

// qconv's algorithms → oneDNN's; whether an eltwise algorithm reads alpha or
// beta (docs/semantics.md §5).
dnnl::algorithm to_dnnl(eltwise_alg a);
dnnl::algorithm to_dnnl(binary_alg a);
bool takes_parameters(eltwise_alg a);

// A runtime operand of a post-op: constant values (per-tensor / per-OC), the
// packed bias (the bias-as-binary-add case), or a full tensor of exec_args.
struct operand {
    enum class source { values, bias, full };
    int arg = 0; // DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | SRC_1 or WEIGHTS
    source from = source::values;
    std::vector<float> values;
    int full_index = -1;
    md_t md;
};

class chain_builder {
public:
    explicit chain_builder(const conv_desc &d) : d_(d) {}

    // oneDNN 2.6's post-op injector keeps one eltwise injector per
    // algorithm, built with the parameters of the algorithm's first
    // occurrence: a second clip(0, 6) after clip(-1, 1) silently runs as
    // clip(-1, 1). A repeated dnnl::algorithm with other parameters is therefore
    // rewritten into an equivalent form: clip → clip_v2 or binary max + min,
    // linear → binary mul and/or add (exactly madd when a == 1 or b == 0; two
    // roundings otherwise), relu(α) → relu_use_dst_for_bwd (same forward).
    //
    // An dnnl::algorithm without parameters (round, abs, tanh, ...) is given 0, 0:
    // its repeats then always agree (a round(4, 2) before a FakeQuantize's
    // round was refused, and the FakeQuantize lost its rounding).
    bool eltwise(eltwise_alg a, float alpha, float beta, std::string *why = nullptr) {
        if (!takes_parameters(a)) alpha = beta = 0.f;
        dnnl::algorithm alg = to_dnnl(a);
        if (!claim(alg, alpha, beta)) {
            switch (a) {
            case eltwise_alg::clip:
                if (claim(dnnl::algorithm::eltwise_clip_v2, alpha, beta)) {
                    alg = dnnl::algorithm::eltwise_clip_v2;
                    break;
                }
                binary(binary_alg::max, {alpha});
                binary(binary_alg::min, {beta});
                return true;
            case eltwise_alg::linear:
                if (alpha != 1.f) binary(binary_alg::mul, {alpha});
                if (beta != 0.f || alpha == 1.f) binary(binary_alg::add, {beta});
                return true;
            case eltwise_alg::relu:
                if (claim(dnnl::algorithm::eltwise_relu_use_dst_for_bwd, alpha, beta)) {
                    alg = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
                    break;
                }
                [[fallthrough]];
            default:
                return reject(why, std::string("eltwise ") + to_string(a) +
                                       " twice with different parameters (oneDNN 2.6 keeps one set per algorithm)");
            }
        }
        po_.append_eltwise(1.f, alg, alpha, beta);
        ++n_;
        return true;
    }
    // Binary with 1 (per-tensor) or OC (per-OC) constant values.
    void binary(binary_alg a, const std::vector<float> &v) {
        const md_t md = vector_md(v.size());
        po_.append_binary(to_dnnl(a), md);
        add_operand(DNNL_ARG_SRC_1, operand::source::values, v, -1, md);
    }
    void binary_full(binary_alg a, int full_index) {
        const md_t md({d_.mb, d_.oc, d_.oh, d_.ow}, dt_t::f32, tag_t::nhwc);
        po_.append_binary(to_dnnl(a), md);
        add_operand(DNNL_ARG_SRC_1, operand::source::full, {}, full_index, md);
    }
    void bias_add() {
        const md_t md = vector_md(static_cast<size_t>(d_.oc));
        po_.append_binary(dnnl::algorithm::binary_add, md);
        add_operand(DNNL_ARG_SRC_1, operand::source::bias, {}, -1, md);
    }
    bool prelu(const std::vector<float> &slopes, std::string *why) {
        if (slopes.size() == 1) return eltwise(eltwise_alg::relu, slopes[0], 0.f, why);
        po_.append_prelu(1 << 1);
        add_operand(DNNL_ARG_WEIGHTS, operand::source::values, slopes, -1, vector_md(slopes.size()));
        return true;
    }
    // y·a + b: one eltwise linear when both are per-tensor, else mul then add.
    void affine(const std::vector<float> &a, const std::vector<float> &b) {
        if (a.size() == 1 && b.size() == 1) {
            eltwise(eltwise_alg::linear, a[0], b[0]);
            return;
        }
        binary(binary_alg::mul, a);
        binary(binary_alg::add, b);
    }
    void clamp(const std::vector<float> &lo, const std::vector<float> &hi) {
        if (lo.size() == 1 && hi.size() == 1) {
            eltwise(eltwise_alg::clip, lo[0], hi[0]);
            return;
        }
        binary(binary_alg::max, lo);
        binary(binary_alg::min, hi);
    }
    void sum(float scale, int32_t zp) {
        po_.append_sum(scale, zp, dt_t::undef);
        ++n_;
    }

    // Appends one lowered op; false (with the reason) if oneDNN has no form.
    bool append(const lowered_op &op, std::string *why) {
        switch (op.k) {
        case lowered_op::kind::eltwise: return eltwise(op.alg, op.alpha, op.beta, why);
        case lowered_op::kind::binary:
            if (op.bcast == broadcast::full) binary_full(op.balg, op.full_index);
            else binary(op.balg, op.a);
            return true;
        case lowered_op::kind::prelu:
        case lowered_op::kind::depthwise_prelu: return prelu(op.a, why);
        case lowered_op::kind::sum:
            // oneDNN 2.6 computes a second sum with the first one's parameters
            // (found by fuzz_diff); one sum per chain is all it does faithfully.
            if (sums_++) return reject(why, "more than one sum post-op: oneDNN 2.6 supports only one");
            sum(op.sum_scale, op.sum_zp);
            return true;
        case lowered_op::kind::depthwise_scale_shift: affine(op.a, op.b); return true;
        case lowered_op::kind::quantization:
            clamp(op.cl, op.ch);
            affine(op.isc, op.ish);
            if (op.round && !eltwise(eltwise_alg::round, 0.f, 0.f, why)) return false;
            if (op.dequantize) affine(op.osc, op.osh);
            return true;
        default: return reject(why, "the fused dw_conv post-op has no oneDNN form here");
        }
    }

    const dnnl::post_ops &post_ops() const { return po_; }
    bool has_sum() const { return sums_ > 0; }
    std::vector<operand> take_operands() { return std::move(operands_); }

private:
    // Whether `alg` may run with (alpha, beta): its first use, or the same
    // parameters as its first use.
    bool claim(dnnl::algorithm alg, float alpha, float beta) {
        const auto it = eltwise_params_.find(alg);
        if (it == eltwise_params_.end()) {
            eltwise_params_.emplace(alg, std::make_pair(alpha, beta));
            return true;
        }
        return it->second == std::make_pair(alpha, beta);
    }
    md_t vector_md(size_t n) const {
        const int64_t c = n == 1 ? 1 : d_.oc;
        return md_t({1, c, 1, 1}, dt_t::f32, tag_t::nhwc);
    }
    void add_operand(int kind, operand::source from, const std::vector<float> &v, int full, const md_t &md) {
        operand o;
        o.arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(n_) | kind;
        o.from = from;
        o.values = v;
        o.full_index = full;
        o.md = md;
        operands_.push_back(std::move(o));
        ++n_;
    }

    const conv_desc &d_;
    dnnl::post_ops po_;
    std::vector<operand> operands_;
    std::map<dnnl::algorithm, std::pair<float, float>> eltwise_params_;
    int n_ = 0; // index of the next post-op
    int sums_ = 0;
};

} // namespace qconv::impl::onednn
