// Post-op vocabulary, the reference eltwise/binary functions, the lowering of
// a logical chain into the legacy (attr[0]) and stock (attr[1]) forms, and the
// zero-point compensation. Each formula here is the single definition used by
// the reference, the JIT packing code and the oneDNN wrapper.
#include "qconv/post_ops.h"

#include "core/lowering.h"

#include <cmath>

#include "qconv/conv_desc.h"

namespace qconv {

// ------------------------------------------------------------ zero points
zero_point::kind zero_point::effective_kind() const {
    if (k != kind::per_channel || values.empty()) return k;
    for (int32_t v : values)
        if (v != values[0]) return kind::per_channel;
    return kind::per_tensor;
}

int32_t zero_point::at(int64_t ic) const {
    if (k == kind::none || values.empty()) return 0;
    return values.size() == 1 ? values[0] : values[static_cast<size_t>(ic)];
}

const char *to_string(zero_point::kind k) {
    switch (k) {
    case zero_point::kind::none: return "none";
    case zero_point::kind::per_tensor: return "per_tensor";
    case zero_point::kind::per_channel: return "per_channel";
    }
    return "?";
}

const char *to_string(zp_mechanism m) {
    switch (m) {
    case zp_mechanism::none: return "none";
    case zp_mechanism::legacy_per_channel: return "legacy_per_channel";
    case zp_mechanism::stock_per_tensor: return "stock_per_tensor";
    }
    return "?";
}

// ------------------------------------------------------------ names
namespace {
constexpr const char *eltwise_names[] = {
    "relu",     "clip", "linear", "gelu_erf", "gelu_tanh", "swish",  "hardswish", "mish",
    "logistic", "tanh", "elu",    "abs",      "sqrt",      "square", "exp",       "round",
};
constexpr const char *binary_names[] = {"add", "sub", "mul", "div", "max", "min"};
} // namespace

const char *to_string(eltwise_alg a) { return eltwise_names[static_cast<int>(a)]; }
const char *to_string(binary_alg a) { return binary_names[static_cast<int>(a)]; }
const char *to_string(broadcast b) {
    switch (b) {
    case broadcast::per_tensor: return "per_tensor";
    case broadcast::per_oc: return "per_oc";
    case broadcast::full: return "full";
    }
    return "?";
}

eltwise_alg parse_eltwise_alg(const std::string &s) {
    for (int i = 0; i < static_cast<int>(std::size(eltwise_names)); ++i)
        if (s == eltwise_names[i]) return static_cast<eltwise_alg>(i);
    fail("post_ops", "unknown eltwise algorithm '" + s + "'");
}

binary_alg parse_binary_alg(const std::string &s) {
    for (int i = 0; i < static_cast<int>(std::size(binary_names)); ++i)
        if (s == binary_names[i]) return static_cast<binary_alg>(i);
    fail("post_ops", "unknown binary algorithm '" + s + "'");
}

bool is_transcendental(eltwise_alg a) {
    switch (a) {
    case eltwise_alg::gelu_erf:
    case eltwise_alg::gelu_tanh:
    case eltwise_alg::swish:
    case eltwise_alg::mish:
    case eltwise_alg::logistic:
    case eltwise_alg::tanh:
    case eltwise_alg::elu:
    case eltwise_alg::exp:
    case eltwise_alg::sqrt: return true;
    default: return false;
    }
}

// ------------------------------------------------------------ reference math
float eltwise_ref(eltwise_alg a, float alpha, float beta, float x) {
    // Transcendental functions are evaluated in double and rounded once, so the
    // reference is the correctly rounded value up to double's own error.
    const double d = x;
    switch (a) {
    case eltwise_alg::relu: return x > 0.f ? x : x * alpha;
    case eltwise_alg::clip: return std::fmin(std::fmax(x, alpha), beta);
    case eltwise_alg::linear: return madd(x, alpha, beta);
    case eltwise_alg::gelu_erf: return static_cast<float>(0.5 * d * (1.0 + std::erf(d / std::sqrt(2.0))));
    case eltwise_alg::gelu_tanh: {
        const double k = std::sqrt(2.0 / M_PI);
        return static_cast<float>(0.5 * d * (1.0 + std::tanh(k * (d + 0.044715 * d * d * d))));
    }
    case eltwise_alg::swish: return static_cast<float>(d / (1.0 + std::exp(-static_cast<double>(alpha) * d)));
    case eltwise_alg::hardswish: return x * std::fmin(std::fmax(x / 6.f + 0.5f, 0.f), 1.f);
    case eltwise_alg::mish: return static_cast<float>(d * std::tanh(std::log1p(std::exp(d))));
    case eltwise_alg::logistic: return static_cast<float>(1.0 / (1.0 + std::exp(-d)));
    case eltwise_alg::tanh: return static_cast<float>(std::tanh(d));
    case eltwise_alg::elu: return x > 0.f ? x : static_cast<float>(alpha * std::expm1(d));
    case eltwise_alg::abs: return std::fabs(x);
    case eltwise_alg::sqrt: return std::sqrt(x);
    case eltwise_alg::square: return x * x;
    case eltwise_alg::exp: return static_cast<float>(std::exp(d));
    case eltwise_alg::round: return std::nearbyint(x); // default rounding mode: half to even
    }
    return x;
}

float binary_ref(binary_alg a, float x, float y) {
    switch (a) {
    case binary_alg::add: return x + y;
    case binary_alg::sub: return x - y;
    case binary_alg::mul: return x * y;
    case binary_alg::div: return x / y;
    case binary_alg::max: return std::fmax(x, y);
    case binary_alg::min: return std::fmin(x, y);
    }
    return x;
}

// ------------------------------------------------------------ logical chain
post_op post_op::eltwise(eltwise_alg a, float alpha, float beta) {
    post_op p;
    p.k = kind::eltwise;
    p.alg = a;
    p.alpha = alpha;
    p.beta = beta;
    return p;
}

post_op post_op::binary(binary_alg a, broadcast b, std::vector<float> values) {
    post_op p;
    p.k = kind::binary;
    p.balg = a;
    p.bcast = b;
    p.scale = std::move(values);
    return p;
}

post_op post_op::sum(float scale, int32_t zp) {
    post_op p;
    p.k = kind::sum;
    p.sum_scale = scale;
    p.sum_zp = zp;
    return p;
}

post_op post_op::scale_shift_op(std::vector<float> scale, std::vector<float> shift) {
    post_op p;
    p.k = kind::scale_shift;
    p.scale = std::move(scale);
    p.shift = std::move(shift);
    return p;
}

post_op post_op::prelu(std::vector<float> slope) {
    post_op p;
    p.k = kind::prelu;
    p.scale = std::move(slope);
    return p;
}

post_op post_op::fake_quantize(int levels, std::vector<float> il, std::vector<float> ih, std::vector<float> ol,
                               std::vector<float> oh) {
    post_op p;
    p.k = kind::fake_quantize;
    p.levels = levels;
    p.in_lo = std::move(il);
    p.in_hi = std::move(ih);
    p.out_lo = std::move(ol);
    p.out_hi = std::move(oh);
    return p;
}

post_op post_op::dw_conv(int stride, dtype mid_dt, std::vector<int8_t> wei, std::vector<float> bias,
                         std::vector<float> scales) {
    post_op p;
    p.k = kind::dw_conv;
    p.dw_stride = stride;
    p.dw_mid_dt = mid_dt;
    p.dw_wei = std::move(wei);
    p.dw_bias = std::move(bias);
    p.dw_scales = std::move(scales);
    return p;
}

bool post_op::operator==(const post_op &o) const {
    return k == o.k && alg == o.alg && alpha == o.alpha && beta == o.beta && balg == o.balg && bcast == o.bcast &&
           sum_scale == o.sum_scale && sum_zp == o.sum_zp && scale == o.scale && shift == o.shift &&
           levels == o.levels && in_lo == o.in_lo && in_hi == o.in_hi && out_lo == o.out_lo && out_hi == o.out_hi &&
           dw_stride == o.dw_stride && dw_mid_dt == o.dw_mid_dt && dw_wei == o.dw_wei && dw_bias == o.dw_bias &&
           dw_scales == o.dw_scales;
}

namespace {
bool per_channel(const std::vector<float> &v) { return v.size() > 1; }

bool fq_per_channel(const post_op &p) {
    return per_channel(p.in_lo) || per_channel(p.in_hi) || per_channel(p.out_lo) || per_channel(p.out_hi);
}
} // namespace

bool needs_binary(const post_ops &ops) {
    for (const auto &p : ops) {
        switch (p.k) {
        case post_op::kind::binary: return true;
        case post_op::kind::fake_quantize:
            if (fq_per_channel(p)) return true;
            break;
        case post_op::kind::scale_shift:
            if (per_channel(p.scale) || per_channel(p.shift)) return true;
            break;
        case post_op::kind::prelu:
            if (per_channel(p.scale)) return true;
            break;
        default: break;
        }
    }
    return false;
}

int count_full_binary(const post_ops &ops) {
    int n = 0;
    for (const auto &op : ops)
        if (op.k == post_op::kind::binary && op.bcast == broadcast::full) ++n;
    return n;
}

bool has_legacy(const post_ops &ops) {
    for (const auto &p : ops)
        if (p.k == post_op::kind::scale_shift || p.k == post_op::kind::prelu || p.k == post_op::kind::fake_quantize ||
            p.k == post_op::kind::dw_conv)
            return true;
    return false;
}

// ------------------------------------------------------------ lowering
namespace {
using lk = lowered_op::kind;

// The element-wise combination of two 1-or-OC vectors.
template <typename F>
std::vector<float> combine(const std::vector<float> &a, const std::vector<float> &b, F f) {
    const size_t n = std::max(a.size(), b.size());
    std::vector<float> r(n);
    for (size_t c = 0; c < n; ++c) r[c] = f(lowered_op::at(a, c), lowered_op::at(b, c));
    return r;
}

bool all_equal(const std::vector<float> &v, float x) {
    for (float e : v)
        if (e != x) return false;
    return true;
}

lowered_op make(lk k) {
    lowered_op op;
    op.k = k;
    return op;
}

lowered_op eltwise_op(eltwise_alg a, float alpha, float beta) {
    lowered_op op = make(lk::eltwise);
    op.alg = a;
    op.alpha = alpha;
    op.beta = beta;
    return op;
}

lowered_op binary_op(binary_alg a, std::vector<float> v) {
    lowered_op op = make(lk::binary);
    op.balg = a;
    op.bcast = v.size() == 1 ? broadcast::per_tensor : broadcast::per_oc;
    op.a = std::move(v);
    return op;
}

// The legacy quantization parameters of a FakeQuantize (docs/semantics.md §5):
// cl=il, ch=ih, isc=(L−1)/(ih−il), ish=−il·isc, osc=(oh−ol)/(L−1), osh=ol.
lowered_op quantization(const post_op &p, bool last, bool dst_is_f32) {
    const float steps = static_cast<float>(p.levels - 1);
    lowered_op q = make(lk::quantization);
    q.cl = p.in_lo;
    q.ch = p.in_hi;
    q.isc = combine(p.in_lo, p.in_hi, [&](float lo, float hi) { return steps / (hi - lo); });
    q.ish = combine(p.in_lo, q.isc, [](float lo, float isc) { return -lo * isc; });
    q.osc = combine(p.out_lo, p.out_hi, [&](float lo, float hi) { return (hi - lo) / steps; });
    q.osh = p.out_lo;
    q.dequantize = !(all_equal(q.osc, 1.f) && all_equal(q.osh, 0.f));
    q.round = q.dequantize || dst_is_f32 || !last;
    return q;
}

// y·a + b in the stock vocabulary: eltwise linear when both are per-tensor,
// binary mul and add otherwise.
void append_affine(std::vector<lowered_op> &out, const std::vector<float> &a, const std::vector<float> &b) {
    if (a.size() == 1 && b.size() == 1) {
        out.push_back(eltwise_op(eltwise_alg::linear, a[0], b[0]));
        return;
    }
    out.push_back(binary_op(binary_alg::mul, a));
    out.push_back(binary_op(binary_alg::add, b));
}

// Ops shared by both forms: eltwise, binary and sum lower to themselves.
bool lower_common(const post_op &p, int &full_index, std::vector<lowered_op> &out) {
    switch (p.k) {
    case post_op::kind::eltwise: out.push_back(eltwise_op(p.alg, p.alpha, p.beta)); return true;
    case post_op::kind::binary: {
        lowered_op op = make(lk::binary);
        op.balg = p.balg;
        op.bcast = p.bcast;
        op.a = p.scale;
        if (p.bcast == broadcast::full) op.full_index = full_index++;
        out.push_back(op);
        return true;
    }
    case post_op::kind::sum: {
        lowered_op op = make(lk::sum);
        op.sum_scale = p.sum_scale;
        op.sum_zp = p.sum_zp;
        out.push_back(op);
        return true;
    }
    case post_op::kind::dw_conv: out.push_back(make(lk::dw_conv)); return true;
    default: return false;
    }
}
} // namespace

namespace {
// Walks the chain: eltwise, binary, sum and dw_conv lower to themselves in
// both forms; scale_shift, prelu and fake_quantize go through `form`.
template <typename Form>
std::vector<lowered_op> lower_with(const post_ops &ops, int64_t oc, Form form) {
    validate(ops, oc);
    std::vector<lowered_op> out;
    int full_index = 0;
    for (size_t i = 0; i < ops.size(); ++i)
        if (!lower_common(ops[i], full_index, out)) form(ops[i], i + 1 == ops.size(), out);
    return out;
}
} // namespace

std::vector<lowered_op> lower_legacy(const post_ops &ops, int64_t oc, bool dst_is_f32) {
    return lower_with(ops, oc, [&](const post_op &p, bool last, std::vector<lowered_op> &out) {
        if (p.k == post_op::kind::scale_shift) {
            lowered_op op = make(lk::depthwise_scale_shift);
            op.a = p.scale;
            op.b = p.shift;
            out.push_back(op);
        } else if (p.k == post_op::kind::prelu) {
            lowered_op op = make(lk::depthwise_prelu);
            op.a = p.scale;
            out.push_back(op);
        } else if (p.k == post_op::kind::fake_quantize) {
            out.push_back(quantization(p, last, dst_is_f32));
        }
    });
}

std::vector<lowered_op> lower_stock(const post_ops &ops, int64_t oc, bool dst_is_f32) {
    return lower_with(ops, oc, [&](const post_op &p, bool last, std::vector<lowered_op> &out) {
        if (p.k == post_op::kind::scale_shift) {
            append_affine(out, p.scale, p.shift);
        } else if (p.k == post_op::kind::prelu) {
            if (p.scale.size() == 1) {
                out.push_back(eltwise_op(eltwise_alg::relu, p.scale[0], 0.f));
            } else {
                lowered_op op = make(lk::prelu);
                op.a = p.scale;
                out.push_back(op);
            }
        } else if (p.k == post_op::kind::fake_quantize) {
            const lowered_op q = quantization(p, last, dst_is_f32);
            if (q.cl.size() == 1 && q.ch.size() == 1) {
                out.push_back(eltwise_op(eltwise_alg::clip, q.cl[0], q.ch[0]));
            } else {
                out.push_back(binary_op(binary_alg::max, q.cl));
                out.push_back(binary_op(binary_alg::min, q.ch));
            }
            append_affine(out, q.isc, q.ish);
            if (q.round) out.push_back(eltwise_op(eltwise_alg::round, 0.f, 0.f));
            if (q.dequantize) append_affine(out, q.osc, q.osh);
        }
    });
}

// ------------------------------------------------------------ attr sets
bool attr_set::has_legacy_ops() const {
    for (const auto &op : ops)
        if (op.k == lk::depthwise_scale_shift || op.k == lk::depthwise_prelu || op.k == lk::quantization ||
            op.k == lk::dw_conv)
            return true;
    return false;
}

bool attr_set::has_binary_ops() const {
    for (const auto &op : ops)
        if (op.k == lk::binary || op.k == lk::prelu) return true;
    return false;
}

namespace {
std::string op_name(const lowered_op &op) {
    switch (op.k) {
    case lk::eltwise: return std::string("eltwise_") + to_string(op.alg);
    case lk::binary: return std::string("binary_") + to_string(op.balg) + "_" + to_string(op.bcast);
    case lk::prelu: return "prelu";
    case lk::sum: return "sum";
    case lk::depthwise_scale_shift: return "depthwise_scale_shift";
    case lk::depthwise_prelu: return "depthwise_prelu";
    case lk::quantization: return "quantization";
    case lk::dw_conv: return "dw_conv";
    }
    return "?";
}
} // namespace

std::string attr_set::str() const {
    std::string s = "attr[" + std::to_string(id) + "]:zp=" + to_string(zp) + ":ops=";
    if (ops.empty()) s += "none";
    for (size_t i = 0; i < ops.size(); ++i) s += (i ? "+" : "") + op_name(ops[i]);
    return s;
}

} // namespace qconv
