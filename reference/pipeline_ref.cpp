// Reference output pipeline: one lowered post-op at a time, in f32, and the
// final store (round half to even + saturation for integer destinations).
//
// The eltwise and binary functions themselves live in core (eltwise_ref,
// binary_ref) so that there is exactly one definition of each. Every
// "y·a + b" step (scale and bias, scale-shift, quantization, sum) is one
// madd(), i.e. a fused multiply-add with a single rounding.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "reference/reference.h"

namespace qconv::ref {

namespace {

// Value of a post-op parameter that is either per-tensor (1 value) or per-OC.
float param(const std::vector<float> &v, int64_t c, const char *field) {
    if (v.empty()) fail(field, "post-op parameter vector is empty");
    if (v.size() != 1 && c >= static_cast<int64_t>(v.size()))
        fail(field, "has " + std::to_string(v.size()) + " values, channel " + std::to_string(c) + " requested");
    return lowered_op::at(v, c);
}

// Round half to even, then clamp to [lo, hi]; NaN stores as 0.
template <typename T>
T saturate_rne(float y) {
    if (std::isnan(y)) return 0;
    const double r = std::nearbyint(static_cast<double>(y)); // default mode: half to even
    const double lo = static_cast<double>(std::numeric_limits<T>::min());
    const double hi = static_cast<double>(std::numeric_limits<T>::max());
    return static_cast<T>(std::min(std::max(r, lo), hi));
}

} // namespace

float apply_op(const lowered_op &op, float y, int64_t c, int64_t off, float dst_prev, const exec_args &args) {
    using K = lowered_op::kind;
    switch (op.k) {
    case K::eltwise: return eltwise_ref(op.alg, op.alpha, op.beta, y);
    case K::binary: {
        float rhs;
        if (op.bcast == broadcast::full) {
            if (op.full_index < 0 || op.full_index >= static_cast<int>(args.binary.size()) ||
                args.binary[op.full_index] == nullptr)
                fail("binary",
                     "full-tensor operand #" + std::to_string(op.full_index) + " not passed in exec_args::binary");
            rhs = args.binary[op.full_index][off];
        } else {
            rhs = param(op.a, c, "binary");
        }
        return binary_ref(op.balg, y, rhs);
    }
    case K::prelu: return y >= 0.f ? y : y * param(op.a, c, "prelu");
    case K::sum: return madd(dst_prev - static_cast<float>(op.sum_zp), op.sum_scale, y);
    case K::depthwise_scale_shift: return madd(y, param(op.a, c, "scale_shift"), param(op.b, c, "scale_shift"));
    case K::depthwise_prelu: return y >= 0.f ? y : y * param(op.a, c, "prelu");
    case K::quantization: {
        y = std::min(std::max(y, param(op.cl, c, "fake_quantize")), param(op.ch, c, "fake_quantize"));
        y = madd(y, param(op.isc, c, "fake_quantize"), param(op.ish, c, "fake_quantize"));
        if (op.round) y = std::nearbyint(y);
        if (op.dequantize) y = madd(y, param(op.osc, c, "fake_quantize"), param(op.osh, c, "fake_quantize"));
        return y;
    }
    case K::dw_conv: fail("post_ops", "the fused depthwise conv is run by ref::conv, not by the pipeline");
    }
    fail("post_ops", "unknown lowered post-op kind");
}

float apply_pipeline(const conv_problem &p, const std::vector<lowered_op> &ops, int32_t acc, const float *bias,
                     int64_t c, int64_t off, float dst_prev, const exec_args &args) {
    float y = madd(static_cast<float>(acc), p.scale(c), bias ? bias[c] : 0.f);
    for (const lowered_op &op : ops) y = apply_op(op, y, c, off, dst_prev, args);
    return y + static_cast<float>(p.dst_zp);
}

void store(dtype dt, void *base, int64_t off, float y) {
    switch (dt) {
    case dtype::f32: static_cast<float *>(base)[off] = y; return;
    case dtype::s32: static_cast<int32_t *>(base)[off] = saturate_rne<int32_t>(y); return;
    case dtype::s8: static_cast<int8_t *>(base)[off] = saturate_rne<int8_t>(y); return;
    case dtype::u8: static_cast<uint8_t *>(base)[off] = saturate_rne<uint8_t>(y); return;
    case dtype::bf16: static_cast<uint16_t *>(base)[off] = f32_to_bf16(y); return;
    default: fail("dst_dt", std::string("cannot store ") + to_string(dt));
    }
}

float load(dtype dt, const void *base, int64_t off) {
    switch (dt) {
    case dtype::f32: return static_cast<const float *>(base)[off];
    case dtype::s32: return static_cast<float>(static_cast<const int32_t *>(base)[off]);
    case dtype::s8: return static_cast<const int8_t *>(base)[off];
    case dtype::u8: return static_cast<const uint8_t *>(base)[off];
    case dtype::bf16: return bf16_to_f32(static_cast<const uint16_t *>(base)[off]);
    default: fail("dt", std::string("cannot load ") + to_string(dt));
    }
}

} // namespace qconv::ref
