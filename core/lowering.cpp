// The lowering of a logical post-op chain into the legacy (attr[0]) and stock
// (attr[1]) forms the kernels take (core/lowering.h), and the attribute
// sets' queries and text.
#include "core/lowering.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "qconv/conv_desc.h"
#include "qconv/post_ops.h"

namespace qconv {

const char *to_string(zp_mechanism m) {
    switch (m) {
    case zp_mechanism::none: return "none";
    case zp_mechanism::legacy_per_channel: return "legacy_per_channel";
    case zp_mechanism::stock_per_tensor: return "stock_per_tensor";
    }
    return "?";
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

// ------------------------------------------------------------ saturated clamps
namespace {

// v carried through ops[b, e) for channel c as the pipeline computes it;
// false when an item there is not increasing in its input.
bool carry_increasing(const post_ops &ops, size_t b, size_t e, int64_t c, float &v) {
    for (size_t i = b; i < e; ++i) {
        const post_op &op = ops[i];
        if (op.k == post_op::kind::eltwise && op.alg == eltwise_alg::linear && op.alpha > 0.f) {
            v = madd(v, op.alpha, op.beta);
        } else if (op.k == post_op::kind::eltwise && op.alg == eltwise_alg::round) {
            v = std::nearbyint(v);
        } else if (op.k == post_op::kind::scale_shift) {
            const float s = lowered_op::at(op.scale, c);
            if (!(s > 0.f)) return false;
            v = madd(v, s, lowered_op::at(op.shift, c));
        } else {
            return false;
        }
    }
    return true;
}

} // namespace

int drop_saturated_clamps(post_ops &ops, int64_t oc, dtype dst_dt, int32_t dst_zp) {
    int dropped = 0;
    // One segment: ops[b, e) stored as `dt` with zero point `zp`.
    auto segment = [&](size_t b, size_t &e, dtype dt, int32_t zp) {
        if (dt != dtype::u8 && dt != dtype::s8) return; // no saturation to lean on
        const float lo = dt == dtype::u8 ? 0.f : -128.f, hi = dt == dtype::u8 ? 255.f : 127.f;
        for (size_t i = b; i < e;) {
            const post_op &op = ops[i];
            const bool clip = op.k == post_op::kind::eltwise && op.alg == eltwise_alg::clip;
            const bool relu = op.k == post_op::kind::eltwise && op.alg == eltwise_alg::relu && op.alpha == 0.f;
            bool redundant = clip || relu;
            // The store adds the zero point, rounds half to even and saturates:
            // a bound below lo (above hi) after that stores lo (hi), as every
            // value beyond it does (each step is increasing).
            for (int64_t c = 0; redundant && c < oc; ++c) {
                float v = relu ? 0.f : op.alpha;
                redundant = carry_increasing(ops, i + 1, e, c, v) && std::nearbyint(v + static_cast<float>(zp)) <= lo;
                if (redundant && clip) {
                    v = op.beta;
                    redundant =
                        carry_increasing(ops, i + 1, e, c, v) && std::nearbyint(v + static_cast<float>(zp)) >= hi;
                }
            }
            if (!redundant) {
                ++i;
                continue;
            }
            ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(i));
            --e;
            ++dropped;
        }
    };
    size_t dw = ops.size();
    for (size_t i = 0; i < ops.size(); ++i)
        if (ops[i].k == post_op::kind::dw_conv) dw = i;
    size_t end = ops.size();
    if (dw < ops.size()) segment(dw + 1, end, dst_dt, dst_zp);
    size_t pre = std::min(dw, ops.size());
    segment(0, pre, dw < ops.size() ? ops[pre].dw_mid_dt : dst_dt, dw < ops.size() ? 0 : dst_zp);
    return dropped;
}

} // namespace qconv
