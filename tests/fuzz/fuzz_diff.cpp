// Differential fuzzer: every implementation against the reference.
//
// The first value drawn picks the op. A conv input builds one int8
// convolution problem (shape, groups, padding, stride, dilation, source and
// destination types, zero-point kind and values, scales, bias, a post-op
// chain, dst zero point, data); a MatMul input one weight-compressed MatMul
// problem (M, K, N, weight type, group size, zero point, bias, data).
// Then, for every row of conv_list() (peers included) and
// every attribute set the builder makes (enforce_brgconv on, so the brgconv
// rows with binary post-ops are reached too) that supports() the problem on
// this machine, it creates the kernel, packs, executes and compares with
// ref::conv on the same attribute set; likewise every row of matmul_list()
// against ref::matmul. New rows are covered without touching this file. A
// peer whose kernel says it is inexact (oneDNN's int8 kernels below VNNI,
// e.g. onednn:conv_1x1_dw:avx2 on an AVX2-only CPU) is left out; any other
// row that says so fails.
//
// What must hold (docs/semantics.md §8):
//   * f32 destinations: within a relative 1e-5 of the reference;
//   * "exact" data (the default generators' ranges: small integers, power-of-
//     two scales and parameters): integer destinations equal the reference
//     bit for bit, unless a transcendental eltwise or a FakeQuantize (its
//     output scale is not a power of two) is in the chain — then within 1
//     (or a relative 1e-5 for s32 values beyond f32's integer range; after a
//     FakeQuantize, one level flip carried through the chain, fq_flip_bound); a
//     transcendental eltwise is put last and dst_zp is 0, so nothing amplifies
//     the allowed difference;
//   * "wide" data (full u8/s8 ranges, any scales): the f32 pipeline is no
//     longer exact, so integers may differ by 1 and f32 by a relative 1e-5;
//     the chain then holds only ops that do not amplify a rounding difference
//     (relu, clip, linear with power-of-two alpha, abs);
//   * MatMul: |y − y_ref| <= 1e-5 · (Σ|x·deq(w)| + |bias|) (tests/test_matmul.cpp);
//     the dynamic-quantization row (run with its opt-in hint) within that plus
//     Σ_k |deq(w)|·sx/2, the quantization of X (docs/matmul_wc.md).
// A violation prints the problem, the row and the first differences, then aborts.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "dispatch/attr_builder.h"
#include "dispatch/host_platform.h"
#include "qconv/qconv.h"
#include "reference/reference.h"
#include "rows/row.h"

using namespace qconv;

namespace {

float pow2(FuzzedDataProvider &in, int lo, int hi) { return std::ldexp(1.f, in.ConsumeIntegralInRange<int>(lo, hi)); }
float small_value(FuzzedDataProvider &in) {
    static const float v[] = {0.f, 1.f, -1.f, 0.5f, 2.f, -2.f, 0.25f, 4.f, 6.f, -0.5f, 3.f, -8.f};
    return v[in.ConsumeIntegralInRange<size_t>(0, sizeof v / sizeof v[0] - 1)];
}

// ------------------------------------------------------------- conv problem
struct conv_case {
    conv_problem p;
    bool wide = false;
    std::vector<uint8_t> src, dst0;
    std::vector<int8_t> wei;
    std::vector<float> bias;
    std::vector<std::vector<float>> full;
};

post_op make_op(FuzzedDataProvider &in, int64_t oc, bool wide, bool last_may_be_transcendental, bool *transcendental) {
    const auto vec = [&](bool per_c, auto gen) {
        std::vector<float> v(per_c ? size_t(oc) : 1);
        for (auto &x : v) x = gen();
        return v;
    };
    if (wide) { // ops that keep a 1-ulp difference 1 ulp
        switch (in.ConsumeIntegralInRange<int>(0, 3)) {
        case 0: return post_op::relu(in.ConsumeBool() ? 0.f : pow2(in, -3, 0));
        case 1: {
            float a = small_value(in), b = small_value(in);
            return post_op::eltwise(eltwise_alg::clip, std::min(a, b), std::max(a, b));
        }
        case 2: return post_op::eltwise(eltwise_alg::linear, pow2(in, -2, 2), 0.f);
        default: return post_op::eltwise(eltwise_alg::abs);
        }
    }
    switch (in.ConsumeIntegralInRange<int>(0, 6)) {
    case 0: { // eltwise
        auto a = static_cast<eltwise_alg>(in.ConsumeIntegralInRange<int>(0, int(eltwise_alg::round)));
        if (is_transcendental(a)) {
            if (!last_may_be_transcendental) a = eltwise_alg::relu;
            else *transcendental = true;
        }
        float alpha = small_value(in), beta = small_value(in);
        if (a == eltwise_alg::clip && alpha > beta) std::swap(alpha, beta);
        if (a == eltwise_alg::linear) alpha = pow2(in, -2, 2);
        return post_op::eltwise(a, alpha, beta);
    }
    case 1: { // binary
        const auto alg = static_cast<binary_alg>(in.ConsumeIntegralInRange<int>(0, int(binary_alg::min)));
        const auto b = static_cast<broadcast>(in.ConsumeIntegralInRange<int>(0, 2));
        if (b == broadcast::full) return post_op::binary(alg, b);
        const auto v = vec(b == broadcast::per_oc, [&] { return (in.ConsumeBool() ? -1.f : 1.f) * pow2(in, -2, 2); });
        return post_op::binary(alg, b, v);
    }
    case 2: return post_op::sum(in.ConsumeBool() ? 1.f : pow2(in, -2, 1), in.ConsumeIntegralInRange<int32_t>(-4, 4));
    case 3: {
        const bool per_c = in.ConsumeBool();
        return post_op::scale_shift_op(vec(per_c, [&] { return pow2(in, -2, 2); }),
                                       vec(per_c, [&] { return float(in.ConsumeIntegralInRange<int>(-8, 8)); }));
    }
    case 4:
        return post_op::prelu(vec(in.ConsumeBool(), [&] { return (in.ConsumeBool() ? -1.f : 1.f) * pow2(in, -3, 1); }));
    case 5: { // FakeQuantize: power-of-two ranges keep the scales exact
        const bool per_c = in.ConsumeBool();
        const int levels = in.ConsumeBool() ? 256 : 1 + (1 << in.ConsumeIntegralInRange<int>(1, 8));
        std::vector<float> il = vec(per_c, [&] { return float(in.ConsumeIntegralInRange<int>(-16, 0)); });
        std::vector<float> ih = il;
        for (auto &x : ih) x += pow2(in, 2, 6);
        std::vector<float> ol = vec(per_c, [&] { return float(in.ConsumeIntegralInRange<int>(-16, 0)); });
        std::vector<float> oh = ol;
        for (auto &x : oh) x += pow2(in, 2, 8);
        return post_op::fake_quantize(levels, il, ih, ol, oh);
    }
    default: return post_op::eltwise(eltwise_alg::round);
    }
}

bool build_conv(FuzzedDataProvider &in, conv_case &c) {
    conv_problem &p = c.p;
    conv_desc &d = p.desc;
    c.wide = in.ConsumeIntegralInRange<int>(0, 3) == 0;
    // One input in four reaches the wrapped-row sweep's space (IC/OC up to 512
    // with tails, kernels up to 7, strides up to 4, mini-batch up to 3,
    // spatial up to 24); the rest stay small, where most inputs run fast.
    const bool large = in.ConsumeIntegralInRange<int>(0, 3) == 0;
    const int64_t max_c = large ? 512 : 40, max_k = large ? 7 : 3, max_s = large ? 4 : 3;
    const int64_t max_i = large ? 24 : 9, max_mb = large ? 3 : 2;
    const bool dw = in.ConsumeIntegralInRange<int>(0, 4) == 0;
    d.g = dw ? in.ConsumeIntegralInRange<int64_t>(1, large ? 160 : 40) : in.ConsumeIntegralInRange<int64_t>(1, 3);
    const int64_t icg = dw ? 1 : in.ConsumeIntegralInRange<int64_t>(1, max_c);
    const int64_t ocg = dw ? 1 : in.ConsumeIntegralInRange<int64_t>(1, max_c);
    d.ic = d.g * icg;
    d.oc = d.g * ocg;
    d.mb = in.ConsumeIntegralInRange<int64_t>(1, max_mb);
    d.ih = in.ConsumeIntegralInRange<int64_t>(1, max_i);
    d.iw = in.ConsumeIntegralInRange<int64_t>(1, max_i);
    d.kh = in.ConsumeIntegralInRange<int64_t>(1, max_k);
    d.kw = in.ConsumeIntegralInRange<int64_t>(1, max_k);
    d.sh = in.ConsumeIntegralInRange<int64_t>(1, max_s);
    d.sw = in.ConsumeIntegralInRange<int64_t>(1, max_s);
    d.dh = in.ConsumeIntegralInRange<int64_t>(1, 3);
    d.dw = in.ConsumeIntegralInRange<int64_t>(1, 3);
    d.pt = in.ConsumeIntegralInRange<int64_t>(0, d.kh_extent() - 1);
    d.pl = in.ConsumeIntegralInRange<int64_t>(0, d.kw_extent() - 1);
    const int64_t pb = in.ConsumeIntegralInRange<int64_t>(0, d.kh_extent() - 1);
    const int64_t pr = in.ConsumeIntegralInRange<int64_t>(0, d.kw_extent() - 1);
    const int64_t sh_span = d.ih + d.pt + pb - d.kh_extent(), sw_span = d.iw + d.pl + pr - d.kw_extent();
    if (sh_span < 0 || sw_span < 0) return false;
    d.oh = sh_span / d.sh + 1;
    d.ow = sw_span / d.sw + 1;
    // Canonical bottom/right pads for that output size.
    d.pb = (d.oh - 1) * d.sh + d.kh_extent() - d.ih - d.pt;
    d.pr = (d.ow - 1) * d.sw + d.kw_extent() - d.iw - d.pl;
    // Every row and the reference run each input: bound the work.
    if (double(d.mb) * d.oc * d.oh * d.ow * icg * d.kh * d.kw > 4e6) return false;

    p.src_dt = in.ConsumeBool() ? dtype::u8 : dtype::s8;
    static const dtype dsts[] = {dtype::f32, dtype::s32, dtype::s8, dtype::u8};
    p.dst_dt = dsts[in.ConsumeIntegralInRange<int>(0, 3)];
    const bool u8 = p.src_dt == dtype::u8;
    const int32_t zlo = u8 ? 0 : -128, zhi = u8 ? 255 : 127;
    const auto zval = [&] {
        return c.wide ? in.ConsumeIntegralInRange<int32_t>(zlo, zhi)
                      : in.ConsumeIntegralInRange<int32_t>(u8 ? 0 : -8, u8 ? 15 : 7);
    };
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: break;
    case 1: p.src_zp = zero_point::tensor(zval()); break;
    case 2: p.src_zp = zero_point::tensor(in.ConsumeBool() ? zlo : zhi); break;
    default:
        if (!u8) break;
        { // per channel: random values, or all equal (then it is per-tensor)
            std::vector<int32_t> v(size_t(d.ic));
            const bool equal = in.ConsumeIntegralInRange<int>(0, 3) == 0;
            for (auto &x : v) x = equal && &x != v.data() ? v[0] : zval();
            p.src_zp = zero_point::channel(v);
        }
    }
    switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 0: break;
    case 1: p.scales = {c.wide ? in.ConsumeFloatingPointInRange<float>(1e-4f, 2.f) : pow2(in, -6, 0)}; break;
    default:
        p.scales.resize(size_t(d.oc));
        for (auto &s : p.scales) s = c.wide ? in.ConsumeFloatingPointInRange<float>(1e-4f, 2.f) : pow2(in, -6, -2);
    }
    p.with_bias = in.ConsumeBool();

    const int nops = in.ConsumeIntegralInRange<int>(0, 3);
    bool trans = false;
    for (int i = 0; i < nops && !trans; ++i) p.ops.push_back(make_op(in, d.oc, c.wide, i == nops - 1, &trans));
    p.dst_zp = trans && p.dst_dt == dtype::f32 ? 0 : in.ConsumeIntegralInRange<int32_t>(-4, 4);
    if (trans) p.dst_zp = 0;
    // One exact-data input in six: a fused depthwise item (docs/semantics.md
    // §5) after the conv made a 1x1, placed before any sum or full binary
    // (those may only follow it) and before any FakeQuantize or
    // transcendental eltwise (a tolerated difference in the intermediate
    // would be amplified by the depthwise).
    if (!c.wide && in.ConsumeIntegralInRange<int>(0, 5) == 0) {
        d.g = 1;
        d.kh = d.kw = d.dh = d.dw = 1;
        d.pt = d.pl = 0;
        d.oh = (d.ih - 1) / d.sh + 1;
        d.ow = (d.iw - 1) / d.sw + 1;
        d.pb = (d.oh - 1) * d.sh + 1 - d.ih;
        d.pr = (d.ow - 1) * d.sw + 1 - d.iw;
        if (double(d.mb) * d.oc * d.oh * d.ow * d.ic > 4e6) return false;
        size_t pos = 0, limit = p.ops.size();
        for (size_t i = 0; i < p.ops.size(); ++i) {
            const post_op &op = p.ops[i];
            if (op.k == post_op::kind::sum || op.k == post_op::kind::fake_quantize ||
                (op.k == post_op::kind::binary && op.bcast == broadcast::full) ||
                (op.k == post_op::kind::eltwise && is_transcendental(op.alg))) {
                limit = i;
                break;
            }
        }
        pos = size_t(in.ConsumeIntegralInRange<size_t>(0, limit));
        std::vector<int8_t> w(size_t(9 * d.oc));
        for (auto &x : w) x = int8_t(in.ConsumeIntegralInRange<int>(-4, 4));
        std::vector<float> b, sc;
        if (in.ConsumeBool()) {
            b.resize(size_t(d.oc));
            for (auto &x : b) x = float(in.ConsumeIntegralInRange<int>(-8, 8));
        }
        if (in.ConsumeBool()) {
            sc.resize(in.ConsumeBool() ? size_t(d.oc) : 1);
            for (auto &x : sc) x = pow2(in, -4, 0);
        }
        p.ops.insert(p.ops.begin() + std::ptrdiff_t(pos),
                     post_op::dw_conv(in.ConsumeBool() ? 2 : 1, in.ConsumeBool() ? dtype::u8 : dtype::s8, w, b, sc));
    }
    try {
        p.validate();
        validate(p.ops, d.oc);
    } catch (const error &) {
        return false;
    }

    // Data: exact ranges, or full ranges with the extremes favoured.
    c.src.resize(size_t(d.src_elems()));
    for (auto &x : c.src) {
        if (!c.wide) x = uint8_t(u8 ? in.ConsumeIntegralInRange<int>(0, 15) : in.ConsumeIntegralInRange<int>(-8, 7));
        else x = in.ConsumeBool() ? (u8 ? 255 : (in.ConsumeBool() ? 0x80 : 0x7f)) : in.ConsumeIntegral<uint8_t>();
    }
    c.wei.resize(size_t(d.wei_elems()));
    for (auto &w : c.wei)
        w = !c.wide            ? int8_t(in.ConsumeIntegralInRange<int>(-4, 4))
            : in.ConsumeBool() ? int8_t(in.ConsumeBool() ? -128 : 127)
                               : in.ConsumeIntegral<int8_t>();
    c.bias.resize(size_t(d.oc));
    for (auto &b : c.bias) b = float(in.ConsumeIntegralInRange<int>(-8, 8));
    const int64_t dst_elems = p.dst_elems(); // the depthwise's with a dw item
    const size_t dst_bytes = size_t(dst_elems) * size_t(bits_of(p.dst_dt) / 8);
    c.dst0.assign(dst_bytes, 0);
    for (int64_t i = 0; i < dst_elems; ++i)
        ref::store(p.dst_dt, c.dst0.data(), i, float(in.ConsumeIntegralInRange<int>(-8, 8)));
    for (const auto &op : p.ops)
        if (op.k == post_op::kind::binary && op.bcast == broadcast::full) {
            std::vector<float> t(static_cast<size_t>(dst_elems));
            for (auto &x : t) x = (in.ConsumeBool() ? -1.f : 1.f) * pow2(in, -2, 2);
            c.full.push_back(std::move(t));
        }
    return true;
}

bool transcendental(const post_ops &ops) {
    for (const auto &op : ops)
        if (op.k == post_op::kind::eltwise && is_transcendental(op.alg)) return true;
    return false;
}

float max_abs(const std::vector<float> &v, float dflt) {
    float m = v.empty() ? dflt : 0.f;
    for (float x : v) m = std::max(m, std::fabs(x));
    return m;
}

// How far an integer destination may move when one FakeQuantize of the chain
// puts a value in the neighbouring level (a rounding tie decided the other
// way, e.g. by a row that applies FakeQuantize's affine steps as a multiply
// and an add with two roundings): that FakeQuantize's output step, times the
// gain of every op after it (a later FakeQuantize maps a move of its input
// to at most (oh−ol)/(ih−il) times that move, plus its own step). At least 1.
double fq_flip_bound(const post_ops &ops) {
    double bound = 0;
    for (const auto &op : ops) {
        double gain = 1;
        switch (op.k) {
        case post_op::kind::fake_quantize: {
            double step = 0, slope = 0;
            for (size_t c = 0; c < std::max(op.out_lo.size(), op.in_lo.size()); ++c) {
                const auto at = [c](const std::vector<float> &v) { return double(v[v.size() > 1 ? c : 0]); };
                step = std::max(step, (at(op.out_hi) - at(op.out_lo)) / (op.levels - 1));
                slope = std::max(slope, (at(op.out_hi) - at(op.out_lo)) / (at(op.in_hi) - at(op.in_lo)));
            }
            bound = bound * slope + step;
            continue;
        }
        case post_op::kind::scale_shift: gain = max_abs(op.scale, 1.f); break;
        case post_op::kind::prelu: gain = std::max(1.f, max_abs(op.scale, 1.f)); break;
        case post_op::kind::binary:
            if (op.balg == binary_alg::mul) gain = op.bcast == broadcast::full ? 4.f : max_abs(op.scale, 1.f);
            if (op.balg == binary_alg::div) gain = 4.f; // operands are ±2^[-2, 2]
            break;
        case post_op::kind::eltwise:
            if (op.alg == eltwise_alg::linear) gain = std::fabs(op.alpha);
            break;
        default: break;
        }
        bound *= gain;
    }
    return std::max(1.0, std::ceil(bound));
}

std::string describe(const conv_case &c) {
    const conv_problem &p = c.p;
    std::ostringstream s;
    s << p.desc.str() << " src=" << to_string(p.src_dt) << " dst=" << to_string(p.dst_dt)
      << " zp=" << to_string(p.src_zp.k) << "(" << p.src_zp.values.size() << " values"
      << (p.src_zp.values.empty() ? "" : ", first " + std::to_string(p.src_zp.values[0])) << ")"
      << " scales=" << p.scales.size() << " bias=" << p.with_bias << " post_ops=" << to_string(p.ops)
      << " dst_zp=" << p.dst_zp << " data=" << (c.wide ? "wide" : "exact");
    // Parameter vectors (first values) so a finding can be rebuilt by hand.
    auto head = [](const std::vector<float> &v) {
        std::ostringstream o;
        o << v.size() << "[";
        for (size_t i = 0; i < v.size() && i < 4; ++i) o << (i ? "," : "") << v[i];
        return o.str() + (v.size() > 4 ? ",..]" : "]");
    };
    for (size_t i = 0; i < p.ops.size(); ++i) {
        const post_op &op = p.ops[i];
        s << "\n    op" << i << ": alpha=" << op.alpha << " beta=" << op.beta << " scale=" << head(op.scale)
          << " shift=" << head(op.shift) << " sum=" << op.sum_scale << "/" << op.sum_zp << " levels=" << op.levels
          << " in_lo=" << head(op.in_lo) << " in_hi=" << head(op.in_hi) << " out_lo=" << head(op.out_lo)
          << " out_hi=" << head(op.out_hi);
    }
    return s.str();
}

// An s32 destination saturates at ±2^31 in f32. The reference and the JIT
// kernels store INT32_MAX for y >= 2^31; oneDNN clamps in f32 first and stores
// 2147483520, the largest float below 2^31 (docs/semantics.md, §8). Both are
// "saturated": equal to within one f32 ulp at the top of the range.
bool s32_saturated(float v) { return v >= 2147483520.f || v <= -2147483648.f; }

// Whether the environment variable `name` is "1" (read once per name).
bool env_on(const char *name) {
    const char *v = std::getenv(name);
    return v && std::string(v) == "1";
}
bool peer_enabled() {
    static const bool on = env_on("QCONV_FUZZ_PEER");
    return on;
}
// QCONV_FUZZ_TRACE=1: every row and problem on stderr before it runs, so a
// crash inside generated code (no symbols) names its row.
bool trace_enabled() {
    static const bool on = env_on("QCONV_FUZZ_TRACE");
    return on;
}

void check_conv(const conv_case &c) {
    const conv_problem &p = c.p;
    const impl::platform plat = impl::host_platform();
    conv_hints hints;
    hints.enforce_brgconv = true;
    const std::vector<attr_set> attrs = impl::build_attrs(p, plat, hints);
    exec_args args;
    args.threads = 1;
    for (const auto &t : c.full) args.binary.push_back(t.data());
    // docs/semantics.md §8: f32 destinations within a relative 1e-5 always;
    // integer ones bit-exact while every f32 step is exact, else within 1.
    // FakeQuantize's output scale (oh−ol)/(L−1) is not a power of two, so it is not exact.
    bool fq = false;
    for (const auto &op : p.ops) fq = fq || op.k == post_op::kind::fake_quantize;
    const bool f32 = p.dst_dt == dtype::f32;
    const bool loose = f32 || c.wide || fq || transcendental(p.ops);
    const double int_bound = fq ? fq_flip_bound(p.ops) : 1.0;
    const int64_t n = p.dst_elems();

    for (const auto &e : impl::conv_list()) {
        // The peer onednn:any (never chosen by "auto") runs on request only:
        // QCONV_FUZZ_PEER=1. Once in ~26 000 executions oneDNN 2.6.3 crashed
        // inside dnnl_primitive_create for one of its non-brgconv
        // implementations (a read past a heap block; the saved input does not
        // reproduce it alone), which must not fail a CI run. Its fixed
        // findings are regression tests (tests/test_fuzz_regressions.cpp).
        if (e.name == "onednn:any" && !peer_enabled()) continue;
        for (const attr_set &a : attrs) {
            impl::plan_ptr plan;
            try {
                plan = e.supports(p, a, plat, nullptr);
            } catch (const std::exception &x) { // supports() must answer, not throw
                std::fprintf(stderr, "fuzz_diff: %s supports() threw on attr[%d] (%s): %s\n  on %s\n", e.name.c_str(),
                             a.id, a.str().c_str(), x.what(), describe(c).c_str());
                std::abort();
            }
            if (!plan) continue;
            if (trace_enabled())
                std::fprintf(stderr, "fuzz_diff: running %s attr[%d] (%s) on %s\n", e.name.c_str(), a.id,
                             a.str().c_str(), describe(c).c_str());
            std::vector<uint8_t> want = c.dst0, got = c.dst0;
            // supports() said yes: neither the reference nor the row may refuse now.
            try {
                const auto kernel = e.create(p, a, *plan);
                if (!kernel->exact()) {
                    // A peer whose oneDNN implementation is known to be inexact
                    // (below VNNI oneDNN's int8 kernels saturate 16-bit sums; on an
                    // AVX2-only CPU, e.g. onednn:conv_1x1_dw:avx2): labelled
                    // exact=0 wherever it is timed, never chosen by auto. Any
                    // other row must be exact.
                    if (e.peer) continue;
                    std::fprintf(stderr, "fuzz_diff: %s (not a peer) says it is inexact on attr[%d] (%s)\n  on %s\n",
                                 e.name.c_str(), a.id, a.str().c_str(), describe(c).c_str());
                    std::abort();
                }
                ref::conv(p, a, c.src.data(), c.wei.data(), p.with_bias ? c.bias.data() : nullptr, want.data(), args);
                const auto w = kernel->pack(c.wei.data(), p.with_bias ? c.bias.data() : nullptr);
                kernel->execute(*w, c.src.data(), got.data(), args);
            } catch (const error &x) {
                std::fprintf(stderr, "fuzz_diff: %s accepts attr[%d] (%s) but running it fails: %s\n  on %s\n",
                             e.name.c_str(), a.id, a.str().c_str(), x.what(), describe(c).c_str());
                std::abort();
            }
            int64_t bad = 0;
            std::ostringstream report;
            for (int64_t i = 0; i < n; ++i) {
                const float g = ref::load(p.dst_dt, got.data(), i), r = ref::load(p.dst_dt, want.data(), i);
                if (g == r || (std::isnan(g) && std::isnan(r))) continue;
                if (p.dst_dt == dtype::s32 && s32_saturated(g) && s32_saturated(r) && (g > 0) == (r > 0)) continue;
                if (loose) {
                    const double diff = std::fabs(double(g) - double(r));
                    // Integers: within 1 (a FakeQuantize chain: one level flip, see
                    // fq_flip_bound), or within f32's relative 1e-5 where the values
                    // are so large (s32 after exp, say) that one f32 ulp exceeds 1.
                    const double rel = 1e-5 * std::max(1.0, std::fabs(double(r)));
                    if (f32 ? diff <= rel : diff <= std::max(int_bound, rel)) continue;
                }
                if (++bad <= 8)
                    report << std::setprecision(9) << "  elem " << i << " (oc " << i % p.desc.oc << "): got " << g
                           << " want " << r << "\n";
            }
            if (bad) {
                std::fprintf(stderr,
                             "fuzz_diff: %s attr[%d] (%s) differs from ref:conv in %lld of %lld elements on\n  %s\n%s",
                             e.name.c_str(), a.id, a.str().c_str(), (long long)bad, (long long)n, describe(c).c_str(),
                             report.str().c_str());
                std::abort();
            }
        }
    }
}

// ----------------------------------------------------------- matmul problem
struct matmul_case {
    matmul_desc d;
    std::vector<uint8_t> wei;
    std::vector<float> scale, bias, x;
    std::vector<int32_t> zp;
    matmul_weights w() const {
        return {wei.data(), scale.data(), zp.empty() ? nullptr : zp.data(), d.with_bias ? bias.data() : nullptr};
    }
};

bool build_matmul(FuzzedDataProvider &in, matmul_case &c) {
    matmul_desc &d = c.d;
    d.m = in.ConsumeIntegralInRange<int64_t>(1, 6);
    d.n = in.ConsumeIntegralInRange<int64_t>(1, 70);
    const int64_t gs = in.ConsumeIntegralInRange<int64_t>(1, 48);
    const int64_t ng = in.ConsumeIntegralInRange<int64_t>(1, 4);
    d.k = gs * ng;
    d.group = ng == 1 && in.ConsumeBool() ? 0 : gs;
    static const dtype wdt[] = {dtype::u8, dtype::s8, dtype::u4, dtype::s4};
    d.wei_dt = wdt[in.ConsumeIntegralInRange<int>(0, 3)];
    d.zp = static_cast<matmul_desc::zp_kind>(in.ConsumeIntegralInRange<int>(0, 2));
    d.with_bias = in.ConsumeBool();
    try {
        d.validate();
    } catch (const error &) {
        return false;
    }
    const int32_t lo = d.wei_dt == dtype::u8 ? 0 : d.wei_dt == dtype::s8 ? -128 : d.wei_dt == dtype::u4 ? 0 : -8;
    const int32_t hi = d.wei_dt == dtype::u8 ? 255 : d.wei_dt == dtype::s8 ? 127 : d.wei_dt == dtype::u4 ? 15 : 7;
    c.wei.resize(size_t(d.wei_bytes()));
    for (auto &b : c.wei) b = in.ConsumeIntegral<uint8_t>();
    c.scale.resize(size_t(d.scale_elems()));
    for (auto &s : c.scale) s = in.ConsumeBool() ? pow2(in, -8, 0) : in.ConsumeFloatingPointInRange<float>(-0.1f, 0.1f);
    c.zp.resize(size_t(d.zp_elems()));
    for (auto &z : c.zp) z = in.ConsumeIntegralInRange<int32_t>(lo, hi);
    c.bias.resize(size_t(d.n));
    for (auto &b : c.bias) b = in.ConsumeFloatingPointInRange<float>(-4.f, 4.f);
    c.x.resize(size_t(d.m * d.k));
    for (auto &v : c.x)
        v = in.ConsumeBool() ? float(in.ConsumeIntegralInRange<int>(-8, 8))
                             : in.ConsumeFloatingPointInRange<float>(-2.f, 2.f);
    return true;
}

// The zero point of group g (index n·NG + g) of a case: none, per tensor or per group.
int32_t zp_at(const matmul_case &c, int64_t g) {
    return c.zp.empty() ? 0 : c.zp.size() == 1 ? c.zp[0] : c.zp[size_t(g)];
}

// Σ_k |x·deq(w)| + |bias| per output: the scale of the allowed f32 difference.
std::vector<double> magnitude(const matmul_case &c) {
    const matmul_desc &d = c.d;
    std::vector<double> mag(size_t(d.m * d.n));
    const int64_t gs = d.group_size();
    for (int64_t m = 0; m < d.m; ++m)
        for (int64_t n = 0; n < d.n; ++n) {
            double s = d.with_bias ? std::fabs(double(c.bias[size_t(n)])) : 0.0;
            for (int64_t k = 0; k < d.k; ++k) {
                const int64_t g = n * d.n_groups() + k / gs;
                const int32_t z = zp_at(c, g);
                const double deq = double(weight_at(c.wei.data(), d.wei_dt, n * d.k + k) - z) * c.scale[size_t(g)];
                s += std::fabs(double(c.x[size_t(m * d.k + k)]) * deq);
            }
            mag[size_t(m * d.n + n)] = s;
        }
    return mag;
}

// The dynamic-quantization row's extra allowance (docs/matmul_wc.md):
// Σ_k |deq(W)[n,k]| · sx[m, g(k)] / 2 with sx[m, g] = max_{k in g} |x[m,k]| / 127
// over the weights' groups (per-OC: the whole row).
std::vector<double> dq_slack(const matmul_case &c) {
    const matmul_desc &d = c.d;
    const int64_t gs = d.group_size(), ng = d.n_groups();
    std::vector<double> slack(size_t(d.m * d.n));
    for (int64_t m = 0; m < d.m; ++m)
        for (int64_t n = 0; n < d.n; ++n) {
            double s = 0.0;
            for (int64_t g = 0; g < ng; ++g) {
                double amax = 0.0, wsum = 0.0;
                const int32_t z = zp_at(c, n * ng + g);
                for (int64_t k = g * gs; k < (g + 1) * gs; ++k) {
                    amax = std::max(amax, std::fabs(double(c.x[size_t(m * d.k + k)])));
                    wsum += std::fabs(double(weight_at(c.wei.data(), d.wei_dt, n * d.k + k) - z));
                }
                s += wsum * std::fabs(double(c.scale[size_t(n * ng + g)])) * amax / 127.0 / 2.0;
            }
            slack[size_t(m * d.n + n)] = s;
        }
    return slack;
}

void check_matmul(const matmul_case &c) {
    const impl::platform plat = impl::host_platform();
    const size_t ny = size_t(c.d.m * c.d.n);
    std::vector<float> want(ny);
    ref::matmul(c.d, c.w(), c.x.data(), want.data());
    const std::vector<double> mag = magnitude(c), slack = dq_slack(c);
    // Every row without the dynamic-quantization hint, then the rows that
    // quantize X with it (the others ignore the hint and were run already).
    for (const bool dq : {false, true})
        for (const auto &e : impl::matmul_list()) {
            matmul_hints h;
            h.dynamic_quantization = dq;
            if (dq != e.dynamic_quantization) continue;
            const impl::plan_ptr plan = e.supports(c.d, h, plat, nullptr);
            if (!plan) continue;
            std::vector<float> got(ny, -1.f);
            try {
                const auto kernel = e.create(c.d, h, *plan);
                const auto packed = kernel->pack(c.w());
                kernel->execute(*packed, c.x.data(), got.data(), 1);
            } catch (const error &x) {
                std::fprintf(stderr, "fuzz_diff: %s accepts %s but running it fails: %s\n", e.name.c_str(),
                             c.d.key().c_str(), x.what());
                std::abort();
            }
            for (size_t i = 0; i < ny; ++i) {
                const double diff = std::fabs(double(got[i]) - double(want[i]));
                const double bound = 1e-5 * mag[i] + (dq ? slack[i] : 0.0);
                if (diff <= bound) continue;
                std::fprintf(stderr,
                             "fuzz_diff: %s differs from ref:matmul on %s wei=%s group=%lld zp=%s bias=%d: "
                             "y[%zu] got %g want %g (bound %g)\n",
                             e.name.c_str(), c.d.str().c_str(), to_string(c.d.wei_dt), (long long)c.d.group,
                             to_string(c.d.zp), int(c.d.with_bias), i, double(got[i]), double(want[i]), bound);
                std::abort();
            }
        }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzedDataProvider in(data, size);
    const bool conv_first = in.ConsumeBool();
    conv_case cc;
    matmul_case mc;
    if (conv_first) {
        if (build_conv(in, cc)) check_conv(cc);
    } else {
        if (build_matmul(in, mc)) check_matmul(mc);
    }
    return 0;
}
