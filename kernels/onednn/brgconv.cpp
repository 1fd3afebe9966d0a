// The oneDNN int8 convolution wrapper: brgconv rows and the `onednn:any` peer.
//
// How a qconv problem becomes a oneDNN primitive:
//   - src/dst: NHWC (format_tag::nhwc); weights: format_tag::any (explicit
//     tags make oneDNN 2.6 fall back to ref), reordered from the plain
//     [G·OCg][ICg][KH][KW] s8 tensor once in pack();
//   - output scales: constant, mask 0 (per-tensor) or 2 (per-OC);
//   - stock per-tensor source zero point: a runtime value
//     (DNNL_RUNTIME_S32_VAL, mask 0) passed at execution;
//   - post-ops: the attribute set's lowered chain, op for op (below);
//   - dst_zp: a final per-tensor binary add, y + dst_zp (exact, and it
//     leaves eltwise linear free for the chain, see chain_builder::eltwise);
//   - the implementation: stepping through next_impl() until the selector
//     accepts impl_info_str(); no such implementation = unsupported, with the
//     list of what oneDNN offered as the reason.
//
// Bias order. qconv defines y = madd(acc, scale[c], bias[c]) (one rounding);
// oneDNN 2.6 computes scale[c]·(acc + bias[c]) for int8 convolutions. When
// every scale is a power of two the wrapper passes bias[c]/scale[c] as
// oneDNN's bias: the division is exact and scaling by a power of two commutes
// with rounding, so round(acc + bias/scale)·scale == round(acc·scale + bias)
// bit for bit (tests/test_onednn_conv.cpp proves it over the shape sweep).
// With any other scale the bias becomes a per-OC binary add, the first
// post-op: round(round(acc·scale) + bias), at most one rounding step away
// from the contract (integers within 1, as docs/semantics.md §8 allows for inexact data).
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
//   dw_conv and the legacy per-channel zero point: unsupported.
// brgconv rows take attr[0] only when it carries nothing legacy (plain
// eltwise/sum chains, no zero point): attr[0] with legacy post-ops belongs to
// the JIT kernels, which is how the seed's tables keep brgconv away from
// binary post-ops unless attr[1] offers them.
#include "kernels/onednn/onednn_conv.h"

#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "dispatch/rows.h"
#include "kernels/onednn/onednn_util.h"

namespace qconv::impl::onednn {

namespace {

using dnnl::algorithm;
using md_t = dnnl::memory::desc;
using dt_t = dnnl::memory::data_type;
using tag_t = dnnl::memory::format_tag;
using lk = lowered_op::kind;

// ------------------------------------------------------------ algorithms
algorithm to_dnnl(eltwise_alg a) {
    switch (a) {
    case eltwise_alg::relu: return algorithm::eltwise_relu;
    case eltwise_alg::clip: return algorithm::eltwise_clip;
    case eltwise_alg::linear: return algorithm::eltwise_linear;
    case eltwise_alg::gelu_erf: return algorithm::eltwise_gelu_erf;
    case eltwise_alg::gelu_tanh: return algorithm::eltwise_gelu_tanh;
    case eltwise_alg::swish: return algorithm::eltwise_swish;
    case eltwise_alg::hardswish: return algorithm::eltwise_hardswish;
    case eltwise_alg::mish: return algorithm::eltwise_mish;
    case eltwise_alg::logistic: return algorithm::eltwise_logistic;
    case eltwise_alg::tanh: return algorithm::eltwise_tanh;
    case eltwise_alg::elu: return algorithm::eltwise_elu;
    case eltwise_alg::abs: return algorithm::eltwise_abs;
    case eltwise_alg::sqrt: return algorithm::eltwise_sqrt;
    case eltwise_alg::square: return algorithm::eltwise_square;
    case eltwise_alg::exp: return algorithm::eltwise_exp;
    case eltwise_alg::round: return algorithm::eltwise_round;
    }
    return algorithm::undef;
}

// Whether the algorithm reads alpha or beta (docs/semantics.md §5).
bool takes_parameters(eltwise_alg a) {
    switch (a) {
    case eltwise_alg::relu:
    case eltwise_alg::clip:
    case eltwise_alg::linear:
    case eltwise_alg::swish:
    case eltwise_alg::elu: return true;
    default: return false;
    }
}

algorithm to_dnnl(binary_alg a) {
    switch (a) {
    case binary_alg::add: return algorithm::binary_add;
    case binary_alg::sub: return algorithm::binary_sub;
    case binary_alg::mul: return algorithm::binary_mul;
    case binary_alg::div: return algorithm::binary_div;
    case binary_alg::max: return algorithm::binary_max;
    case binary_alg::min: return algorithm::binary_min;
    }
    return algorithm::undef;
}

// ------------------------------------------------------------ post-op chain
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
    chain_builder(const conv_desc &d) : d_(d) {}

    // oneDNN 2.6's post-op injector keeps one eltwise injector per
    // algorithm, built with the parameters of the algorithm's first
    // occurrence: a second clip(0, 6) after clip(-1, 1) silently runs as
    // clip(-1, 1). A repeated algorithm with other parameters is therefore
    // rewritten into an equivalent form: clip → clip_v2 or binary max + min,
    // linear → binary mul and/or add (exactly madd when a == 1 or b == 0; two
    // roundings otherwise), relu(α) → relu_use_dst_for_bwd (same forward).
    //
    // An algorithm without parameters (round, abs, tanh, ...) is given 0, 0:
    // its repeats then always agree (a round(4, 2) before a FakeQuantize's
    // round was refused, and the FakeQuantize lost its rounding).
    bool eltwise(eltwise_alg a, float alpha, float beta, std::string *why = nullptr) {
        if (!takes_parameters(a)) alpha = beta = 0.f;
        algorithm alg = to_dnnl(a);
        if (!claim(alg, alpha, beta)) {
            switch (a) {
            case eltwise_alg::clip:
                if (claim(algorithm::eltwise_clip_v2, alpha, beta)) {
                    alg = algorithm::eltwise_clip_v2;
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
                if (claim(algorithm::eltwise_relu_use_dst_for_bwd, alpha, beta)) {
                    alg = algorithm::eltwise_relu_use_dst_for_bwd;
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
        po_.append_binary(algorithm::binary_add, md);
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
        case lk::eltwise: return eltwise(op.alg, op.alpha, op.beta, why);
        case lk::binary:
            if (op.bcast == broadcast::full) binary_full(op.balg, op.full_index);
            else binary(op.balg, op.a);
            return true;
        case lk::prelu:
        case lk::depthwise_prelu: return prelu(op.a, why);
        case lk::sum:
            // oneDNN 2.6 computes a second sum with the first one's parameters
            // (found by fuzz_diff); one sum per chain is all it does faithfully.
            if (sums_++) return reject(why, "more than one sum post-op: oneDNN 2.6 supports only one");
            sum(op.sum_scale, op.sum_zp);
            return true;
        case lk::depthwise_scale_shift: affine(op.a, op.b); return true;
        case lk::quantization:
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
    bool claim(algorithm alg, float alpha, float beta) {
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
    std::map<algorithm, std::pair<float, float>> eltwise_params_;
    int n_ = 0; // index of the next post-op
    int sums_ = 0;
};

// ------------------------------------------------------------ the recipe
bool is_power_of_two(float s) {
    if (!std::isfinite(s) || s == 0.f) return false;
    int e = 0;
    const float m = std::frexp(std::fabs(s), &e);
    return m == 0.5f && e > -100 && e < 100;
}

// Everything needed to create the primitive, derived from (problem, attr).
struct recipe {
    dnnl::convolution_forward::desc desc;
    dnnl::primitive_attr attr;
    std::vector<operand> operands;
    bool bias_arg = false;     // oneDNN bias = bias[c] / scale[c]
    bool bias_post_op = false; // bias as the first post-op (binary add)
    bool src_zp = false;
    int32_t src_zp_value = 0;
    md_t src_md, dst_md, plain_wei_md;
    bool grouped = false;
    conv_desc shape;         // the problem's geometry (known_wrong() reads it)
    bool binary_ops = false; // the oneDNN chain has a binary post-op
    bool sum_op = false;     // the oneDNN chain has a sum post-op
};

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

// ------------------------------------------------------------ selection
using pd_t = dnnl::convolution_forward::primitive_desc;

// Implementations of oneDNN 2.6.3 that compute some problems wrong. Every
// row passes over them (a brgconv row then has no implementation; the
// `onednn:any` peer takes oneDNN's next choice); docs/dispatch.md lists them
// with the reproducers, tests/test_fuzz_regressions.cpp and the wrapped-row
// sweep (tests/test_onednn_sweep.cpp) check each refusal:
//   - `jit:avx512_core_amx_int8` with a source zero point: the last channels
//     of an OC tail are wrong where the window covers padding (ic14 oc22 kh3
//     dh2 ph3: oc 21 off by 17);
//   - `gemm_*` on a grouped convolution with per-channel or full-tensor post-op
//     operands: the operands of the second and later groups are read at the
//     wrong channel offset (g2 oc54, binary min per OC: 147 of 1134 wrong);
//   - `gemm_*` on a grouped convolution with a source zero point (the
//     wrapped-row sweep: g4 ic32 ih18 oc8 kh1 s4 with zp 9, 27 of 200 wrong;
//     other grouped shapes pass, so the rule is wider than the finding);
//   - brgconv on AMX with a stride larger than the kernel along H or W: wrong
//     results that change with the thread count (mb1ic228ih19oc4kh2sh3: 9 of
//     24 wrong at 1 thread) and heap corruption (mb1ic72ih30iw25oc18kh1kw7sh2sw3,
//     `malloc(): corrupted top size`). Reported for IC >= 96 on an AMX Xeon;
//     refused for every IC, since the boundary in IC was not swept on AMX;
//   - `jit_uni_int8_1x1:avx2_vnni` on a strided 1x1 convolution: wrong at 2
//     threads (the wrapped-row sweep, seed 11: mb2 ic8 iw27 oc496 s3, 105 of
//     8 928 wrong; also without post-ops; 1 and 3 threads pass);
//   - `brdgmm_dw` and `brgconv` on a grouped convolution with per-channel
//     (or full-tensor) post-op operands when the output is one pixel
//     (mb·OH·OW = 1; for brgconv, one whose window lies wholly in the
//     padding): channels past the first vector or group are wrong (peer
//     fuzzing: g19 ih2 iw2 kh1 s3x2, FakeQuantize per channel, 3 of 19 wrong;
//     g40 1x1 on one pixel, add per OC: 22 of 40; fuzz_diff on the rows:
//     brgconv:avx512_core_vnni, g3 ic63 oc33 ih1 kh2 dh2 ph1, a window wholly
//     in the padding, scale-shift per channel: 21 of 33 wrong, later groups
//     read group 0's operands);
//   - `brgconv` with a sum post-op when an output pixel's window lies wholly
//     in the padding: wrong sums (mb1 ic16 ih4 oc16 oh6 kh3 ph1: 56 of 96
//     wrong) and, with another post-op in the chain, a crash (fuzz_diff on the
//     rows: g1 ic1 ih1 kh3 dh2 ph1, abs then sum; the wrapped-row sweep: g3
//     ic60 ih1 oh4 kh3 dh2 ph3, relu then sum);
//   - `gemm_*` with an s8 source on a grouped convolution (peer fuzzing: g2
//     ic886 ih1 iw1 kh4 kw4 s3x1 ph1 pw5, s32 destination, no post-ops: all 30
//     wrong; odd ICg ≥ 17 with that padding; a u8 source passes);
//   - `jit_uni_int8` (avx2, avx2_vnni, sse41) on a depthwise convolution
//     whose group count is not a multiple of 8, with binary post-ops: the
//     tail channels are wrong (g7 ic7 oc7 kh3 ph1, add per-tensor: 227 of 448
//     wrong; G = 1..33 on avx2: wrong for G % 8 >= 2; sse41 also for G = 6).
// The reason `info` computes (r) wrong, or "" when it is not known to.
// Whether output position o (stride s, start padding pad, k taps dil apart)
// reads no source position in [0, size): its window lies wholly in the padding.
bool in_padding(int64_t o, int64_t s, int64_t pad, int64_t k, int64_t dil, int64_t size) {
    for (int64_t i = 0; i < k; ++i) {
        const int64_t x = o * s - pad + i * dil;
        if (x >= 0 && x < size) return false;
    }
    return true;
}
// Whether output pixel (oh, ow) reads no source pixel.
bool pixel_in_padding(const conv_desc &d, int64_t oh, int64_t ow) {
    return in_padding(oh, d.sh, d.pt, d.kh, d.dh, d.ih) || in_padding(ow, d.sw, d.pl, d.kw, d.dw, d.iw);
}
// Whether some output pixel's window lies wholly in the padding.
bool some_pixel_in_padding(const conv_desc &d) {
    for (int64_t oh = 0; oh < d.oh; ++oh)
        if (in_padding(oh, d.sh, d.pt, d.kh, d.dh, d.ih)) return true;
    for (int64_t ow = 0; ow < d.ow; ++ow)
        if (in_padding(ow, d.sw, d.pl, d.kw, d.dw, d.iw)) return true;
    return false;
}

// Whether a post-op operand varies over channels (per-OC values, the bias as
// a post-op, or a full tensor).
bool per_channel_operand(const recipe &r) {
    for (const operand &o : r.operands)
        if (o.from != operand::source::values || o.values.size() > 1) return true;
    return false;
}

std::string known_wrong(const std::string &info, const recipe &r) {
    const conv_desc &d = r.shape;
    if (r.src_zp && info.find("avx512_core_amx_int8") != std::string::npos)
        return "oneDNN 2.6 computes OC tails over padding wrong with a source zero point";
    const bool grouped_gemm = r.grouped && info.find("gemm") != std::string::npos;
    if (grouped_gemm && r.src_zp)
        return "oneDNN 2.6 gemm convolution is wrong on some grouped problems with a source zero point";
    if (grouped_gemm && r.src_md.data_type() == dt_t::s8)
        return "oneDNN 2.6 gemm convolution with an s8 source is wrong on some grouped problems";
    if (grouped_gemm && per_channel_operand(r))
        return "oneDNN 2.6 reads per-channel post-op operands of later groups at the wrong offset";
    if (info.rfind("jit_uni_int8_1x1:avx2_vnni", 0) == 0 && (d.sh > 1 || d.sw > 1))
        return "oneDNN 2.6 jit_uni_int8_1x1:avx2_vnni computes strided 1x1 layers wrongly at some thread counts";
    // One output pixel: brdgmm_dw fails for any window, brgconv when the
    // window lies wholly in the padding.
    const bool brdgmm = info.rfind("brdgmm", 0) == 0, brgconv = info.rfind("brg", 0) == 0;
    if (r.grouped && d.mb * d.oh * d.ow == 1 && (brdgmm || (brgconv && pixel_in_padding(d, 0, 0))) &&
        per_channel_operand(r))
        return "oneDNN 2.6 brgconv/brdgmm reads per-channel post-op operands of a grouped convolution wrongly "
               "for a single output pixel";
    if (brgconv && r.sum_op && some_pixel_in_padding(d))
        return "oneDNN 2.6 brgconv computes a sum post-op wrongly (or crashes) where an output pixel's window lies "
               "wholly in the padding";
    if ((d.sh > d.kh || d.sw > d.kw) && brgconv && info.find("amx") != std::string::npos)
        return "oneDNN 2.6 brgconv on AMX is wrong (and corrupts the heap) with a stride larger than the kernel";
    if (d.is_depthwise() && d.g % 8 != 0 && r.binary_ops && info.rfind("jit_uni_int8:", 0) == 0)
        return "oneDNN 2.6 jit_uni_int8 applies binary post-ops to depthwise channel tails (G % 8 != 0) wrongly";
    return "";
}

// Whether `info` is one of oneDNN's brgconv implementations on AMX
// ("brgconv_1x1:avx512_core_amx_int8", "brg:avx512_core_amx_int8").
bool brgconv_on_amx(const std::string &info) {
    return info.rfind("brg", 0) == 0 && info.find("amx") != std::string::npos;
}

// oneDNN 2.6.3's brgconv on AMX is untrusted: on an AMX Xeon the wrapped-row
// sweep found wrong results that depend on the thread count, so no rule on
// the shape can describe them (g1mb2ic507ih20iw20oc10oh6ow5kh5kw5sh3sw4ph0pw3:
// wrong at 1 and 2 threads, right at 3; g1mb1ic160ih24iw15oc167oh5ow4kh5kw5sh4sw4ph0pw1:
// right at 1, 140 of 3 340 wrong at 2; docs/dispatch.md lists the
// reproducers). Its rows are peers labelled inexact (exact=0), and the
// `onednn:any` peer passes over it, so the ratio= baseline stays exact.
const char *const brgconv_amx_untrusted =
    "oneDNN 2.6 brgconv on AMX is untrusted (wrong results that depend on the thread count)";

// Whether the row takes oneDNN's implementation `info`; *wrong is set when
// it is refused as known wrong.
bool accepts(const selector &sel, const std::string &info, const recipe &r, std::string *wrong) {
    *wrong = known_wrong(info, r);
    if (wrong->empty() && sel.first && brgconv_on_amx(info)) *wrong = brgconv_amx_untrusted;
    if (!wrong->empty()) return false;
    if (sel.first) return true;
    std::string kind;
    isa level;
    return parse_impl_info(info, &kind, &level) && kind == sel.kind && level == sel.level;
}

// oneDNN 2.6.3 can offer a descriptor whose primitive it then fails to
// create (a grouped conv with a dilated kernel and a FakeQuantize chain:
// "could not create a primitive"); the selection steps past it to the next
// implementation. Creation goes through oneDNN's primitive cache, so the
// kernel's own creation of the same descriptor later is a cache hit.
bool creatable(const pd_t &pd) {
    try {
        dnnl::convolution_forward prim(pd);
        return true;
    } catch (const dnnl::error &) {
        return false;
    }
}

// Creates the primitive descriptor positioned on the selector's
// implementation, with oneDNN planning for `threads` threads.
std::optional<pd_t> select_pd(const selector &sel, const recipe &r, int threads, std::string *why) {
    threads_guard guard(threads);
    std::optional<pd_t> pd;
    std::string offered;
    const bool ok = try_dnnl(
        [&] {
            pd.emplace(r.desc, r.attr, cpu_engine(), true);
            if (!*pd) return;
            do {
                const std::string info = pd->impl_info_str();
                std::string wrong;
                if (accepts(sel, info, r, &wrong)) {
                    if (creatable(*pd)) return;
                    offered += (offered.empty() ? "" : ", ") + info + " (its primitive cannot be created)";
                    continue;
                }
                offered += (offered.empty() ? "" : ", ") + info + (wrong.empty() ? "" : " (refused: " + wrong + ")");
            } while (pd->next_impl());
            pd.reset();
        },
        why, "oneDNN primitive descriptor");
    if (!ok) return std::nullopt;
    if (!pd || !*pd) {
        reject(why, "oneDNN offers no " +
                        (sel.first ? std::string("implementation") : sel.kind + ":" + to_string(sel.level)) +
                        " (offered: " + (offered.empty() ? std::string("none") : offered) + ")");
        return std::nullopt;
    }
    return pd;
}

bool attr_allowed(const selector &sel, const attr_set &attr, std::string *why) {
    if (attr.zp == zp_mechanism::legacy_per_channel)
        return reject(
            why,
            "legacy zero point (zp bytes in the padding + compensation): oneDNN 2.6 has only the stock per-tensor one");
    if (!sel.first && attr.id == 0 && attr.has_legacy_ops())
        return reject(why,
                      "attr[0] carries legacy post-ops (the JIT kernels' set); brgconv takes them only in attr[1]");
    return true;
}

// Whether oneDNN's implementation `info` returns the reference's int32 sums
// for every input: VNNI-class instructions (vpdpbusd, AMX tiles) and the
// reference do; below VNNI, oneDNN's int8 kernels multiply with vpmaddubsw
// (16-bit saturation) and halve the weights of an s8 source. Its gemm
// follows the ISA it runs on. brgconv on AMX is untrusted (above).
bool exact_impl(const std::string &info) {
    if (info.rfind("ref", 0) == 0) return true;
    if (brgconv_on_amx(info)) return false;
    std::string kind;
    isa level = isa::sse41;
    if (parse_impl_info(info, &kind, &level)) return level == isa::avx2_vnni || level >= isa::avx512_core_vnni;
    if (info.find("gemm") == std::string::npos) return false;
    switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx2_vnni:
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx: return true;
    default: return false;
    }
}

// ------------------------------------------------------------ the kernel

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
        const md_t sp = b->pd.scratchpad_desc();
        if (sp.get_size() > 0) m[DNNL_ARG_SCRATCHPAD] = thread_scratchpad(sp);

        threads_guard guard(threads);
        dnnl::stream s(eng);
        b->prim.execute(s, m);
        s.wait();
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

// What a oneDNN row decided: the recipe and the primitive descriptor
// positioned on the implementation it takes, for the default thread count.
struct onednn_plan : plan {
    onednn_plan(const selector &s, recipe rc, pd_t p, int t) : sel(s), r(std::move(rc)), pd(std::move(p)), threads(t) {}
    selector sel;
    recipe r;
    pd_t pd;
    int threads;
    std::string str() const override {
        return std::string("oneDNN ") + pd.impl_info_str() + " threads=" + std::to_string(threads);
    }
};

// The CPU features a selector's implementations need.
feature_set needs_of(const selector &sel) {
    if (sel.first) return {};
    feature_set f = level_features(sel.level);
    f.remove(cpu_feature::avx512_bf16); // oneDNN's int8 kernels use none of the BF16 instructions
    return f;
}

// Whether the chain has a FakeQuantize with per-channel bounds: oneDNN runs
// it as a chain of binary post-ops (clip, scale, round and shift per channel).
bool per_channel_fake_quantize(const post_ops &ops) {
    for (const post_op &o : ops)
        if (o.k == post_op::kind::fake_quantize &&
            (o.in_lo.size() > 1 || o.in_hi.size() > 1 || o.out_lo.size() > 1 || o.out_hi.size() > 1))
            return true;
    return false;
}

// Where a default-path oneDNN row is measured slower than the JIT rows below
// it, auto leaves the problem to them (the row's defer()). For oneDNN's AMX
// JIT convolution, on the AMX Xeon at 1 thread (ResNet-50, MobileNet,
// SSD-MobileNet and the 1x1 list, against the fastest JIT row;
// docs/dispatch.md):
//   - a per-channel FakeQuantize, which oneDNN runs as a chain of binary
//     post-ops, unless ICg·KH·KW >= 1024 and the problem has 40 M MACs:
//     0.17-0.62x against jit:conv_x8s8:avx512_core_vnni (which fuses it) for
//     ICg·KH·KW <= 256, 0.62-1.01x at 512, 0.71x at 2304 with 25 pixels;
//     0.93-1.09x at 1024 and 1.4-1.8x for the 3x3 layers of 1152 and more;
//     the bench_dispatch fq totals were 0.44-0.64 with it first;
//   - small problems: a call costs at least ~12 us, so below 10 M MACs it
//     lost on every layer (0.03x at 1 pixel, 0.73x at 7 M MACs; 11.6 M:
//     1.17x, 13 M: 1.25-1.36x). The rule counts the problem's MACs, not per
//     thread: the thread count is an argument of each execution;
//   - a short reduction (ICg·KH·KW < 128) with fewer than 256 output channels:
//     0.76-0.94x (IC 32 and 64 1x1 layers; with 256 channels 1.03x).
// The reason, or "" (the row's `defer`: auto passes over it, forced by name it runs).
std::string slower_than_the_jit_rows(const selector &sel, const conv_problem &p) {
    if (sel.first || sel.kind != "jit" || sel.level != isa::avx512_core_amx) return "";
    const conv_desc &d = p.desc;
    const double macs = d.ops() / 2, k = double(d.icg() * d.kh * d.kw);
    if (per_channel_fake_quantize(p.ops) && (k < 1024 || macs < 40e6))
        return "a per-channel FakeQuantize becomes a chain of binary post-ops in oneDNN, slower than the JIT rows "
               "that fuse it unless the reduction is long (ICg*KH*KW >= 1024) and the problem large (measured "
               "0.17-0.86x below that, 0.93-1.8x above)";
    if (macs < 10e6) return "under 10 M MACs oneDNN's AMX JIT call costs more than the JIT rows (measured 0.03-0.73x)";
    if (k < 128 && d.ocg() < 256)
        return "a reduction ICg*KH*KW under 128 with OCg under 256 fills AMX tiles poorly (measured 0.76-0.94x of "
               "the JIT rows)";
    return "";
}

plan_ptr decide_checked(const selector &sel, const conv_problem &p, const attr_set &attr, const platform &plat,
                        std::string *why) {
    if (!plat.has_all(needs_of(sel))) {
        reject(why, "platform " + plat.str() + " lacks " + plat.features.missing(needs_of(sel)));
        return nullptr;
    }
    if (!attr_allowed(sel, attr, why)) return nullptr;
    auto r = make_recipe(p, attr, why);
    if (!r) return nullptr;
    const int threads = effective_threads(0);
    auto pd = select_pd(sel, *r, threads, why);
    if (!pd) return nullptr;
    return std::make_shared<onednn_plan>(sel, std::move(*r), std::move(*pd), threads);
}

conv_entry make_row(const std::string &name, const selector &sel, bool peer) {
    if (name != sel.row_name())
        fail("impl", "row '" + name + "' is named '" + sel.row_name() + "' by its configuration");
    conv_entry e;
    e.name = name;
    e.needs = needs_of(sel);
    e.peer = peer;
    e.family = "onednn";
    e.only_1x1 = sel.kind == "brgconv_1x1";
    e.decide = [sel](const conv_problem &p, const attr_set &attr, const platform &plat, std::string *why) {
        return onednn::supports(sel, p, attr, plat, why);
    };
    if (!peer) e.defer = [sel](const conv_problem &p, const attr_set &) { return slower_than_the_jit_rows(sel, p); };
    e.build = [](const conv_problem &p, const attr_set &attr, const plan &pl) { return onednn::create(p, attr, pl); };
    return e;
}

} // namespace

// ------------------------------------------------------------ public (internal) API
std::string selector::row_name() const {
    return first ? std::string("onednn:any") : "onednn:" + kind + ":" + to_string(level);
}

bool parse_impl_info(const std::string &info, std::string *kind, isa *level) {
    const size_t colon = info.find(':');
    if (colon == std::string::npos) return false;
    std::string k = info.substr(0, colon), i = info.substr(colon + 1);
    if (k == "brg") k = "brgconv";
    const std::string suffix = "_int8";
    if (i.size() > suffix.size() && i.compare(i.size() - suffix.size(), suffix.size(), suffix) == 0)
        i.resize(i.size() - suffix.size());
    try {
        *level = parse_isa(i);
    } catch (const error &) {
        return false;
    }
    *kind = k;
    return true;
}

// supports() answers; it never throws: oneDNN refuses some attribute
// combinations by throwing while the post-ops are built (e.g. two eltwise
// relu with different negative slopes, found by fuzz_diff).
plan_ptr supports(const selector &sel, const conv_problem &p, const attr_set &attr, const platform &plat,
                  std::string *why) {
    try {
        return decide_checked(sel, p, attr, plat, why);
    } catch (const dnnl::error &e) {
        reject(why, std::string("oneDNN refuses the attributes: ") + e.what());
        return nullptr;
    }
}

std::shared_ptr<const conv_kernel> create(const conv_problem &p, const attr_set &attr, const plan &pl) {
    const auto &op = dynamic_cast<const onednn_plan &>(pl);
    try {
        return std::make_shared<onednn_conv_kernel>(op.sel, p, op.r, op.pd, op.threads);
    } catch (const dnnl::error &e) {
        fail("impl", op.sel.row_name() + ": oneDNN refuses the attributes: " + e.what());
    }
}

std::shared_ptr<const conv_kernel> create(const selector &sel, const conv_problem &p, const attr_set &attr) {
    std::string why;
    const plan_ptr pl = supports(sel, p, attr, host_platform(), &why);
    if (!pl) fail("impl", sel.row_name() + ": " + why);
    return create(p, attr, *pl);
}

conv_entry brgconv_row(const std::string &name, const std::string &kind, isa level) {
    return make_row(name, selector::brgconv(kind, level), false);
}

conv_entry brgconv_peer_row(const std::string &name, const std::string &kind, isa level) {
    return make_row(name, selector::brgconv(kind, level), true);
}

conv_entry jit_row(const std::string &name, isa level) {
    return make_row(name, selector::brgconv("jit", level), false);
}

conv_entry any_row() { return make_row("onednn:any", selector::any(), true); }

std::string impl_info(const conv_kernel &k) {
    const auto *o = dynamic_cast<const onednn_conv_kernel *>(&k);
    return o ? o->info() : std::string();
}

} // namespace qconv::impl::onednn
