// Reference int8 and f32 convolution: plain loops over NHWC data.
//
// Per output pixel (n, oh, ow) and output channel oc the accumulator walks the
// taps (kh, kw) and, inside each tap, the group's input channels. Weights are
// transposed once to [OC][KH][KW][ICg] so that the innermost loop reads both
// the source pixel and the weights contiguously; that is the only concession
// to speed besides a parallel loop over output pixels (every accumulator is
// computed by one thread in one fixed order, so results never depend on the
// thread count).
#include <algorithm>
#include <string>
#include <vector>

#include "core/compensation.h"
#include "core/dw_fusion.h"
#include "core/parallel.h"
#include "reference/reference.h"

namespace qconv::ref {

namespace {

// Zero point expanded to one value per input channel (0 when none).
std::vector<int32_t> zp_per_channel(const conv_desc &d, const std::vector<int32_t> &zp) {
    if (zp.empty()) return std::vector<int32_t>(d.ic, 0);
    if (zp.size() == 1) return std::vector<int32_t>(d.ic, zp[0]);
    if (static_cast<int64_t>(zp.size()) != d.ic)
        fail("src_zp", "needs 1 or IC=" + std::to_string(d.ic) + " values, got " + std::to_string(zp.size()));
    return zp;
}

// Plain [OC][ICg][KH][KW] → [OC][KH][KW][ICg].
template <typename T>
std::vector<T> transpose_weights(const conv_desc &d, const T *wei) {
    const int64_t icg = d.icg();
    std::vector<T> wt(static_cast<size_t>(d.wei_elems()));
    for (int64_t oc = 0; oc < d.oc; ++oc)
        for (int64_t ic = 0; ic < icg; ++ic)
            for (int64_t kh = 0; kh < d.kh; ++kh)
                for (int64_t kw = 0; kw < d.kw; ++kw)
                    wt[((oc * d.kh + kh) * d.kw + kw) * icg + ic] = wei[((oc * icg + ic) * d.kh + kh) * d.kw + kw];
    return wt;
}

// Calls f(n, oh, ow, out) for every output pixel, out = the offset of its
// first channel in the NHWC destination; pixels in parallel.
template <typename F>
void for_each_pixel(const conv_desc &d, int threads, F f) {
    impl::parallel_for_3d(
        d.mb, d.oh, d.ow,
        [&](int64_t n, int64_t oh, int64_t ow) { f(n, oh, ow, ((n * d.oh + oh) * d.ow + ow) * d.oc); }, true, threads);
}

// The accumulator loops for one source type.
//   legacy == false: Σ over taps inside the input of w·(x − zp[ic]).
//   legacy == true : Σ over all taps of w·x_padded, where a tap outside the
//                    input reads the zp byte, plus comp[oc].
template <typename T>
void acc_loops(const conv_desc &d, const T *src, const int8_t *wei, const std::vector<int32_t> &zp, bool legacy,
               const std::vector<int32_t> &comp, int32_t *acc, int threads) {
    const int64_t icg = d.icg(), ocg = d.ocg();
    const std::vector<int8_t> wt = transpose_weights(d, wei);
    const int8_t *wt_p = wt.data();
    const int32_t *zp_p = zp.data();

    for_each_pixel(d, threads, [&](int64_t n, int64_t oh, int64_t ow, int64_t out) {
        for (int64_t oc = 0; oc < d.oc; ++oc) {
            const int64_t g = oc / ocg;
            const int32_t *z = zp_p + g * icg;
            int32_t s = legacy ? comp[oc] : 0;
            for (int64_t kh = 0; kh < d.kh; ++kh) {
                const int64_t ih = oh * d.sh - d.pt + kh * d.dh;
                for (int64_t kw = 0; kw < d.kw; ++kw) {
                    const int64_t iw = ow * d.sw - d.pl + kw * d.dw;
                    const bool inside = ih >= 0 && ih < d.ih && iw >= 0 && iw < d.iw;
                    const int8_t *w = wt_p + ((oc * d.kh + kh) * d.kw + kw) * icg;
                    if (inside) {
                        const T *x = src + ((n * d.ih + ih) * d.iw + iw) * d.ic + g * icg;
                        if (legacy)
                            for (int64_t ic = 0; ic < icg; ++ic) s += w[ic] * int32_t(x[ic]);
                        else
                            for (int64_t ic = 0; ic < icg; ++ic) s += w[ic] * (int32_t(x[ic]) - z[ic]);
                    } else if (legacy) {
                        for (int64_t ic = 0; ic < icg; ++ic) s += w[ic] * z[ic];
                    }
                }
            }
            acc[out + oc] = s;
        }
    });
}

void conv_acc_impl(const conv_problem &p, zp_mechanism mech, const std::vector<int32_t> &zp, const void *src,
                   const int8_t *wei, int32_t *acc, int threads) {
    const conv_desc &d = p.desc;
    d.validate();
    if (!src) fail("src", "is null");
    if (!wei) fail("wei", "is null");
    if (!acc) fail("acc", "is null");
    const std::vector<int32_t> zpv = zp_per_channel(d, mech == zp_mechanism::none ? std::vector<int32_t>{} : zp);
    const bool legacy = mech == zp_mechanism::legacy_per_channel;
    // The legacy mechanism pads with the zero-point values themselves, so each
    // must be a value of the source type (u8 for per-channel zero points; an s8
    // source reaches here when a per-tensor zero point is lowered to legacy).
    if (legacy) {
        const int32_t lo = p.src_dt == dtype::u8 ? 0 : -128, hi = p.src_dt == dtype::u8 ? 255 : 127;
        for (int32_t z : zpv)
            if (z < lo || z > hi)
                fail("src_zp",
                     "legacy zero point " + std::to_string(z) + " is not a " + to_string(p.src_dt) + " value");
    }
    std::vector<int32_t> comp;
    if (legacy) comp = zp_compensation(d, wei, zpv);

    switch (p.src_dt) {
    case dtype::u8: acc_loops(d, static_cast<const uint8_t *>(src), wei, zpv, legacy, comp, acc, threads); break;
    case dtype::s8: acc_loops(d, static_cast<const int8_t *>(src), wei, zpv, legacy, comp, acc, threads); break;
    default: fail("src_dt", std::string("must be u8 or s8, got ") + to_string(p.src_dt));
    }
}

// Checks everything apply_pipeline() will index, so that no error is thrown
// from inside a parallel region.
void check_ops(const std::vector<lowered_op> &ops, int64_t oc, const exec_args &args) {
    auto ok = [oc](const std::vector<float> &v) { return v.size() == 1 || static_cast<int64_t>(v.size()) == oc; };
    for (size_t i = 0; i < ops.size(); ++i) {
        const lowered_op &op = ops[i];
        const std::string field = "post_ops[" + std::to_string(i) + "]";
        using K = lowered_op::kind;
        switch (op.k) {
        case K::eltwise:
        case K::sum: break;
        case K::binary:
            if (op.bcast == broadcast::full) {
                if (op.full_index < 0 || op.full_index >= static_cast<int>(args.binary.size()) ||
                    !args.binary[op.full_index])
                    fail(field, "full-tensor binary operand #" + std::to_string(op.full_index) +
                                    " not passed in exec_args::binary");
            } else if (!ok(op.a)) {
                fail(field, "binary operand needs 1 or OC values");
            }
            break;
        case K::prelu:
        case K::depthwise_prelu:
            if (!ok(op.a)) fail(field, "prelu needs 1 or OC slopes");
            break;
        case K::depthwise_scale_shift:
            if (!ok(op.a) || !ok(op.b)) fail(field, "scale_shift needs 1 or OC scales and shifts");
            break;
        case K::quantization:
            if (!ok(op.cl) || !ok(op.ch) || !ok(op.isc) || !ok(op.ish) ||
                (op.dequantize && (!ok(op.osc) || !ok(op.osh))))
                fail(field, "quantization parameters need 1 or OC values each");
            break;
        case K::dw_conv: fail(field, "the fused depthwise conv is run by ref::conv, not by the pipeline");
        }
    }
}

} // namespace

void conv_acc(const conv_problem &p, zp_mechanism mech, const std::vector<int32_t> &zp, const void *src,
              const int8_t *wei, int32_t *acc) {
    conv_acc_impl(p, mech, zp, src, wei, acc, 0);
}

void conv(const conv_problem &p, const attr_set &attr, const void *src, const int8_t *wei, const float *bias, void *dst,
          const exec_args &args) {
    if (p.dw()) {
        // The two convolutions in sequence (docs/semantics.md §5), through
        // an intermediate of the item's type.
        const dw_halves h = split_dw(p);
        attr_set a1, a2;
        split_dw(attr, &a1, &a2);
        std::vector<uint8_t> mid(static_cast<size_t>(h.pw.desc.dst_elems()));
        exec_args args1;
        args1.threads = args.threads;
        conv(h.pw, a1, src, wei, bias, mid.data(), args1);
        conv(h.dw, a2, mid.data(), h.dw_wei.data(), h.dw_bias.empty() ? nullptr : h.dw_bias.data(), dst, args);
        return;
    }
    const conv_desc &d = p.desc;
    if (!dst) fail("dst", "is null");
    if (p.with_bias && !bias) fail("bias", "with_bias is set but no bias was given");
    if (!p.scales.empty() && p.scales.size() != 1 && static_cast<int64_t>(p.scales.size()) != d.oc)
        fail("scales", "needs 0, 1 or OC values");
    check_ops(attr.ops, d.oc, args);

    std::vector<int32_t> acc(static_cast<size_t>(d.dst_elems()));
    conv_acc_impl(p, attr.zp, attr.zp_values, src, wei, acc.data(), args.threads);

    const bool has_sum = std::any_of(attr.ops.begin(), attr.ops.end(),
                                     [](const lowered_op &op) { return op.k == lowered_op::kind::sum; });
    const float *b = p.with_bias ? bias : nullptr;
    const int64_t total = d.dst_elems();
    impl::parallel_for(
        total,
        [&](int64_t i) {
            const int64_t c = i % d.oc;
            const float prev = has_sum ? load(p.dst_dt, dst, i) : 0.f;
            store(p.dst_dt, dst, i, apply_pipeline(p, attr.ops, acc[i], b, c, i, prev, args));
        },
        true, args.threads);
}

float apply_f32_post_op(const f32_post_op &op, float y, int64_t oc) {
    const auto value = [&] { return op.values.size() == 1 ? op.values[0] : op.values[static_cast<size_t>(oc)]; };
    switch (op.k) {
    case f32_post_op::kind::relu: return std::max(y, 0.f);
    case f32_post_op::kind::clip: return std::min(std::max(y, op.lo), op.hi);
    case f32_post_op::kind::hardswish: return y * std::min(std::max(y + 3.f, 0.f), 6.f) / 6.f;
    case f32_post_op::kind::add: return y + value();
    case f32_post_op::kind::multiply: return y * value();
    }
    return y;
}

void conv_f32(const conv_desc &d, const float *src, const float *wei, const float *bias, float *dst,
              const f32_post_ops &post) {
    d.validate();
    if (!src) fail("src", "is null");
    if (!wei) fail("wei", "is null");
    if (!dst) fail("dst", "is null");
    const int64_t icg = d.icg(), ocg = d.ocg();
    const std::vector<float> wt = transpose_weights(d, wei);
    const float *wt_p = wt.data();

    // Sums in double (f32 products are exact there), rounded once to f32, then
    // the bias is added in f32 — the same order as ref::matmul, so a 1x1 conv
    // and the MatMul it is rewritten into give identical values.
    for_each_pixel(d, 0, [&](int64_t n, int64_t oh, int64_t ow, int64_t out) {
        for (int64_t oc = 0; oc < d.oc; ++oc) {
            const int64_t g = oc / ocg;
            double s = 0.0;
            for (int64_t kh = 0; kh < d.kh; ++kh) {
                const int64_t ih = oh * d.sh - d.pt + kh * d.dh;
                if (ih < 0 || ih >= d.ih) continue;
                for (int64_t kw = 0; kw < d.kw; ++kw) {
                    const int64_t iw = ow * d.sw - d.pl + kw * d.dw;
                    if (iw < 0 || iw >= d.iw) continue;
                    const float *w = wt_p + ((oc * d.kh + kh) * d.kw + kw) * icg;
                    const float *x = src + ((n * d.ih + ih) * d.iw + iw) * d.ic + g * icg;
                    for (int64_t ic = 0; ic < icg; ++ic) s += double(w[ic]) * double(x[ic]);
                }
            }
            float y = static_cast<float>(s);
            if (bias) y += bias[oc];
            for (const f32_post_op &op : post) y = apply_f32_post_op(op, y, oc);
            dst[out + oc] = y;
        }
    });
}

} // namespace qconv::ref
