// Post-op vocabulary: zero points, names, the reference eltwise/binary
// functions and the logical chain's constructors and queries. Each formula
// here is the single definition used by the reference, the JIT packing code
// and the oneDNN wrapper; the lowering of a chain into its legacy and stock
// forms is core/lowering.cpp.
#include "qconv/post_ops.h"

#include "core/convert.h"

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

} // namespace qconv
