// The graph executor: compile (one implementation per node) and run.
//
// Compile walks the nodes in topological order:
//  * a MatMul(X, deq(W), transpose_b) whose weights are a decompression
//    subgraph — Convert(Wq [→ Reshape]) [− Convert(ZP)] · Scale [→ Reshape] with
//    Wq an integer Constant or Parameter of u8/i8/u4/i4 and scale/zp per ft,
//    per output channel or per group of K — becomes ONE qconv::matmul primitive
//    (the dispatcher picks the row); a following bias Add with a [.., N]
//    Constant is fused into it. Its decompression nodes are marked "fused";
//  * every other node whose inputs are all known at compile time is folded
//    (constant-folded decompression is what a plain f32 Convolution gets);
//  * the rest run on simple kernels: elementwise loops with numpy broadcast,
//    Transpose/Reshape copies, f32 MatMul loops, and Convolution through the
//    f32 convolution primitive (qconv::convolution_f32: oneDNN's f32
//    convolution, else the reference; weights known at compile time are
//    reordered once, others per run; NCHW is transposed to NHWC around it).
// Values are typed tensors (their node's type): layout and conversion ops and
// QuantizeLinear/DequantizeLinear work on the typed storage; the other ops
// compute in f32 on f32 views of their inputs and round their results to
// their type once. A compressed MatMul of f16/bf16 activations runs the
// primitive with that src_dt/dst_dt on the 16-bit storage; its decompression
// is exact in f32 (docs/graph.md).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <immintrin.h>
#include <map>
#include <mutex>
#include <set>

#include "core/memory.h"
#include "core/parallel.h"
#include "core/verbose.h"
#include "graph/detail.h"
#include "graph/lower_int8.h"
#include "qconv/conv.h"
#include "qconv/conv_desc.h"
#include "qconv/conv_f32.h"
#include "qconv/graph.h"
#include "qconv/matmul.h"

namespace qconv::graph {

namespace {

using detail::to_type;

// Below this many elements (or multiply-adds) a loop runs on one thread: a
// parallel region costs more than it saves, and much more on a loaded machine.
constexpr int64_t kParallelMin = 1 << 16;

std::vector<int64_t> strides_of(const shape_t &s) {
    std::vector<int64_t> st(s.size(), 1);
    for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
    return st;
}
// Strides of `in` broadcast (right-aligned) to `out`: 0 where `in` has size 1.
std::vector<int64_t> bstrides(const shape_t &in, const shape_t &out) {
    std::vector<int64_t> st(out.size(), 0);
    const auto s = strides_of(in);
    const size_t off = out.size() - in.size();
    for (size_t i = 0; i < in.size(); ++i) st[off + i] = in[i] == 1 ? 0 : s[i];
    return st;
}

// An f32 view of a value for the reference kernels: the storage itself for
// an f32 tensor (plain layout), else a converted copy; the output of a kernel
// is the output tensor's storage when it is f32, else a buffer that commit()
// rounds into the typed storage.
struct fspan {
    float *p = nullptr;
    size_t n = 0;
    float &operator[](size_t i) const { return p[i]; }
    float *data() const { return p; }
    size_t size() const { return n; }
};
struct ft {
    etype type = etype::f32;
    shape_t shape;
    fspan data;
    std::vector<float> own;
    ft() = default;
    ft(const ft &) = delete;
    ft(ft &&) = default;
    ft &operator=(ft &&) = default;
};
ft view(const tensor &t) {
    ft f;
    f.type = t.type;
    f.shape = t.shape;
    if (t.type == etype::f32 && t.order == layout::plain) {
        f.data = {const_cast<float *>(t.f32()), static_cast<size_t>(t.elems())};
        return f;
    }
    f.own = t.to_f32();
    f.data = {f.own.data(), f.own.size()};
    return f;
}
// A zero-filled f32 buffer of the given shape.
ft scratch(etype type, const shape_t &s) {
    ft f;
    f.type = type;
    f.shape = s;
    f.own.assign(static_cast<size_t>(elems_of(s)), 0.f);
    f.data = {f.own.data(), f.own.size()};
    return f;
}
ft out_view(tensor &o) {
    if (o.type == etype::f32) {
        ft f;
        f.type = o.type;
        f.shape = o.shape;
        f.data = {o.f32(), static_cast<size_t>(o.elems())};
        return f;
    }
    return scratch(o.type, o.shape);
}
// Rounds a kernel's f32 results into o's type (f16/bf16 nearest even;
// integers half to even, saturated).
void commit(const ft &f, tensor &o) {
    if (o.type == etype::f32) return;
    uint8_t *b = o.bytes.data();
    const etype t = o.type;
    const int64_t n = static_cast<int64_t>(f.data.size());
    if (bits_of(t) == 4) {
        for (int64_t i = 0; i < n; ++i) detail::store(t, b, i, f.data[i]);
        return;
    }
    impl::parallel_for_if(n >= kParallelMin, n, [&](int64_t i) { detail::store(t, b, i, f.data[i]); });
}

template <typename F>
void binary(const ft &a, const ft &b, ft &o, F f) {
    const int64_t total = static_cast<int64_t>(o.data.size());
    if (a.shape == o.shape && b.shape == o.shape) {
        impl::parallel_for_if(total >= kParallelMin, total, [&](int64_t i) { o.data[i] = f(a.data[i], b.data[i]); });
        return;
    }
    // Coalesce adjacent output dims along which both inputs are contiguous
    // (or both broadcast), so the inner loop is as long as possible.
    const auto fa = bstrides(a.shape, o.shape), fb = bstrides(b.shape, o.shape);
    shape_t dims;
    std::vector<int64_t> sa, sb;
    for (size_t i = 0; i < o.shape.size(); ++i) {
        if (o.shape[i] == 1) continue;
        if (!dims.empty()) {
            const int64_t d = o.shape[i];
            const bool ca = sa.back() == fa[i] * d, cb = sb.back() == fb[i] * d;
            if (ca && cb) {
                dims.back() *= d;
                sa.back() = fa[i];
                sb.back() = fb[i];
                continue;
            }
        }
        dims.push_back(o.shape[i]);
        sa.push_back(fa[i]);
        sb.push_back(fb[i]);
    }
    const size_t r = dims.size();
    const int64_t inner = r ? dims[r - 1] : 1, outer = inner ? total / inner : 0;
    const int64_t ia = r ? sa[r - 1] : 0, ib = r ? sb[r - 1] : 0;
    impl::parallel_for_if(total >= kParallelMin, outer, [&](int64_t j) {
        int64_t rem = j, oa = 0, ob = 0;
        for (int d = static_cast<int>(r) - 2; d >= 0; --d) {
            const int64_t idx = rem % dims[d];
            rem /= dims[d];
            oa += idx * sa[d];
            ob += idx * sb[d];
        }
        float *y = o.data.data() + j * inner;
        const float *pa = a.data.data() + oa, *pb = b.data.data() + ob;
        for (int64_t i = 0; i < inner; ++i) y[i] = f(pa[i * ia], pb[i * ib]);
    });
}

void transpose(const ft &in, const std::vector<int64_t> &perm, ft &o) {
    const size_t r = perm.size();
    const auto is = strides_of(in.shape);
    const int64_t total = static_cast<int64_t>(o.data.size());
    const int64_t inner = r ? o.shape[r - 1] : 1, outer = inner ? total / inner : 0;
    const int64_t step = r ? is[perm[r - 1]] : 0;
    impl::parallel_for_if(total >= kParallelMin, outer, [&](int64_t j) {
        int64_t rem = j, off = 0;
        for (int d = static_cast<int>(r) - 2; d >= 0; --d) {
            off += (rem % o.shape[d]) * is[perm[d]];
            rem /= o.shape[d];
        }
        float *y = o.data.data() + j * inner;
        for (int64_t i = 0; i < inner; ++i) y[i] = in.data[off + i * step];
    });
}

void matmul_f32(const node &n, const ft &a, const ft &b, ft &o) {
    const size_t ra = a.shape.size(), ro = o.shape.size();
    const int64_t M = o.shape[ro - 2], N = o.shape[ro - 1];
    const int64_t K = n.attr.transpose_a ? a.shape[ra - 2] : a.shape[ra - 1];
    // Element (m,k) of A and (k,n) of B through strides (transpose flags swap them).
    const int64_t am = n.attr.transpose_a ? 1 : K, ak = n.attr.transpose_a ? M : 1;
    const int64_t bk = n.attr.transpose_b ? 1 : N, bn = n.attr.transpose_b ? K : 1;
    const shape_t ob(o.shape.begin(), o.shape.end() - 2);
    const shape_t ab(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
    const auto sa = bstrides(ab, ob), sb = bstrides(bb, ob);
    const int64_t batches = elems_of(ob);
    impl::parallel_for_2d_if(batches * M * N * K >= kParallelMin, batches, M, [&](int64_t bt, int64_t m) {
        int64_t rem = bt, offa = 0, offb = 0;
        for (int d = static_cast<int>(ob.size()) - 1; d >= 0; --d) {
            const int64_t idx = rem % ob[d];
            rem /= ob[d];
            offa += idx * sa[d];
            offb += idx * sb[d];
        }
        const float *A = a.data.data() + offa * M * K + m * am;
        const float *B = b.data.data() + offb * K * N;
        float *y = o.data.data() + (bt * M + m) * N;
        for (int64_t j = 0; j < N; ++j) {
            float s = 0.f;
            for (int64_t k = 0; k < K; ++k) s += A[k * ak] * B[k * bk + j * bn];
            y[j] = s;
        }
    });
}

conv_desc conv_desc_of(const node &n) {
    const bool grouped = n.kind == op::GroupConvolution;
    const shape_t &xs = n.inputs[0]->out_shape, &ws = n.inputs[1]->out_shape, &ys = n.out_shape;
    conv_desc d;
    d.g = grouped ? ws[0] : 1;
    d.mb = xs[0];
    d.ic = xs[1];
    d.ih = xs[2];
    d.iw = xs[3];
    d.oc = ys[1];
    d.oh = ys[2];
    d.ow = ys[3];
    d.kh = ws[ws.size() - 2];
    d.kw = ws[ws.size() - 1];
    d.sh = n.attr.strides[0];
    d.sw = n.attr.strides[1];
    d.dh = n.attr.dilations[0];
    d.dw = n.attr.dilations[1];
    d.pt = n.pads_b[0];
    d.pl = n.pads_b[1];
    // The bottom/right pads the output actually uses (extra end padding changes nothing).
    d.pb = (d.oh - 1) * d.sh + d.kh_extent() - d.ih - d.pt;
    d.pr = (d.ow - 1) * d.sw + d.kw_extent() - d.iw - d.pl;
    try {
        d.validate();
    } catch (const error &e) {
        fail("node " + n.id, std::string(to_string(n.kind)) + ": " + e.what());
    }
    return d;
}

// NCHW around an NHWC convolution `run(src_nhwc, dst_nhwc)`.
template <typename F>
void convolution_nchw(const ft &x, ft &o, F run) {
    const shape_t &xs = x.shape, &ys = o.shape;
    ft xn = scratch(x.type, {xs[0], xs[2], xs[3], xs[1]});
    transpose(x, {0, 2, 3, 1}, xn);
    ft yn = scratch(o.type, {ys[0], ys[2], ys[3], ys[1]});
    run(xn.data.data(), yn.data.data());
    transpose(yn, {0, 3, 1, 2}, o);
}

void convolution(const node &n, const ft &x, const ft &w, ft &o) {
    const conv_desc d = conv_desc_of(n);
    const convolution_f32 conv(d, w.data.data(), nullptr);
    convolution_nchw(x, o, [&](const float *src, float *dst) { conv.execute(src, dst); });
}

float gelu_tanh(float x) {
    const float c = 0.7978845608028654f; // sqrt(2/pi)
    return 0.5f * x * (1.f + std::tanh(c * (x + 0.044715f * x * x * x)));
}

// Gelu (erf): y = 0.5·x·(1 + erf(x/√2)), four values at a time in SSE2 (the
// x86-64 baseline). erf(z) for z = |x|/√2 in three polynomial pieces, fitted
// in double (least squares on Chebyshev nodes) and evaluated in f32 (Horner,
// separate multiply and add): z·P(z²) below 0.8, P(z − 1.4) below 2,
// 1 − P(z − 3) below 3.92, 1 from there on (erfc(3.92) < 2^-25); the sign of x
// is given back to it. Against erf in double: |erf error| <= 1.2e-7, Gelu
// within 4.7e-7 absolute, 5.2e-5 relative where |y| > 1e-3 — the same as
// with std::erf in f32 (4.5e-7, 5.1e-5; both are 1 + erf cancelling for
// x < 0). inf gives inf, −inf NaN and NaN NaN, as before. 2.7 ns a value
// against 11.5 (Zen 4, one thread).
constexpr float gelu_erf_a[] = {1.128379107e+00f,  -3.761261106e-01f, 1.128321886e-01f,
                                -2.682505548e-02f, 5.092288367e-03f,  -6.578160101e-04f};
constexpr float gelu_erf_b[] = {9.522851110e-01f,  1.589416862e-01f,  -2.225183845e-01f, 1.547043175e-01f,
                                -3.411968425e-02f, -2.732057497e-02f, 2.184283733e-02f,  -2.129050205e-03f,
                                -3.911235370e-03f, 1.344893128e-03f,  2.677670273e-04f};
constexpr float gelu_erf_c[] = {2.209371814e-05f, -1.391885016e-04f, 4.175420909e-04f, -7.905121893e-04f,
                                1.046716352e-03f, -1.007819199e-03f, 7.292533410e-04f, -4.128572182e-04f,
                                1.492297306e-04f, 1.139128835e-05f,  -2.607944043e-05f};
template <int N>
inline __attribute__((always_inline)) __m128 gelu_horner(const float (&c)[N], __m128 t) {
    __m128 p = _mm_set1_ps(c[N - 1]);
    for (int i = N - 2; i >= 0; --i) p = _mm_add_ps(_mm_mul_ps(p, t), _mm_set1_ps(c[i]));
    return p;
}
inline __attribute__((always_inline)) __m128 gelu_select(__m128 mask, __m128 a, __m128 b) {
    return _mm_or_ps(_mm_and_ps(mask, a), _mm_andnot_ps(mask, b));
}
inline __attribute__((always_inline)) __m128 gelu_erf4(__m128 v) {
    const __m128 sign = _mm_set1_ps(-0.f);
    const __m128 z = _mm_mul_ps(_mm_andnot_ps(sign, v), _mm_set1_ps(0.7071067811865476f));
    const __m128 pa = _mm_mul_ps(gelu_horner(gelu_erf_a, _mm_mul_ps(z, z)), z);
    const __m128 pb = gelu_horner(gelu_erf_b, _mm_sub_ps(z, _mm_set1_ps(1.4f)));
    const __m128 pc = _mm_sub_ps(_mm_set1_ps(1.f), gelu_horner(gelu_erf_c, _mm_sub_ps(z, _mm_set1_ps(3.f))));
    __m128 e = gelu_select(_mm_cmplt_ps(z, _mm_set1_ps(3.92f)), pc, _mm_set1_ps(1.f)); // NaN: 1
    e = gelu_select(_mm_cmplt_ps(z, _mm_set1_ps(2.f)), pb, e);
    e = gelu_select(_mm_cmplt_ps(z, _mm_set1_ps(0.8f)), pa, e);
    const __m128 s = _mm_or_ps(e, _mm_and_ps(sign, v));
    return _mm_mul_ps(_mm_mul_ps(_mm_set1_ps(0.5f), v), _mm_add_ps(_mm_set1_ps(1.f), s));
}
void gelu_erf(const float *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, gelu_erf4(_mm_loadu_ps(x + i)));
    if (i == n) return;
    float t[4] = {};
    std::memcpy(t, x + i, size_t(n - i) * sizeof(float));
    _mm_storeu_ps(t, gelu_erf4(_mm_loadu_ps(t)));
    std::memcpy(y + i, t, size_t(n - i) * sizeof(float));
}

// Flat offsets of each broadcast input for one output row: `f(row, offsets)`
// for every row of the output's last dim; `inner_steps[k]` is input k's
// stride along that dim (0 when broadcast).
template <typename F>
void broadcast_rows(const std::vector<const ft *> &in, const shape_t &out, F f) {
    const size_t r = out.size(), k = in.size();
    std::vector<std::vector<int64_t>> st(k);
    for (size_t i = 0; i < k; ++i) st[i] = bstrides(in[i]->shape, out);
    const int64_t inner = r ? out[r - 1] : 1, total = elems_of(out), rows = inner ? total / inner : 0;
    std::vector<int64_t> steps(k);
    for (size_t i = 0; i < k; ++i) steps[i] = r ? st[i][r - 1] : 0;
    impl::parallel_for_if(total >= kParallelMin, rows, [&](int64_t j) {
        std::vector<int64_t> off(k, 0);
        int64_t rem = j;
        for (int d = static_cast<int>(r) - 2; d >= 0; --d) {
            const int64_t idx = rem % out[d];
            rem /= out[d];
            for (size_t i = 0; i < k; ++i) off[i] += idx * st[i][d];
        }
        f(j, inner, off, steps);
    });
}

// OpenVINO's FakeQuantize, in f32 arithmetic (docs/graph.md).
float fake_quantize(float x, float il, float ih, float ol, float oh, float lm1) {
    if (x <= std::min(il, ih)) return ol;
    if (x > std::max(il, ih)) return oh;
    return std::nearbyint((x - il) / (ih - il) * lm1) / lm1 * (oh - ol) + ol;
}

// Product of the dims after `axis` (the stride of axis) and the size of axis.
int64_t inner_of(const shape_t &s, int64_t axis) {
    int64_t r = 1;
    for (size_t i = static_cast<size_t>(axis) + 1; i < s.size(); ++i) r *= s[i];
    return r;
}
int64_t axis_of(int64_t axis, size_t rank) { return axis < 0 ? axis + static_cast<int64_t>(rank) : axis; }

// QuantizeLinear / DequantizeLinear on typed values: scale (and zero point)
// per tensor or per axis. QuantizeLinear writes u8/i8; DequantizeLinear reads
// the integers exactly (i32 too).
void qdq(const node &n, const std::vector<const tensor *> &in, tensor &o) {
    const tensor &x = *in[0];
    const ft s = view(*in[1]);
    const tensor *zp = in.size() > 2 ? in[2] : nullptr;
    const int64_t total = o.elems();
    const bool per_axis = s.data.size() != 1;
    const int64_t ax = axis_of(n.attr.axis, x.shape.size());
    const int64_t inner = per_axis ? inner_of(x.shape, ax) : 1, C = per_axis ? x.shape[ax] : 1;
    std::vector<int64_t> z(s.data.size(), 0);
    if (zp)
        for (size_t c = 0; c < z.size(); ++c) z[c] = static_cast<int64_t>(zp->get(static_cast<int64_t>(c)));
    const etype ot = o.type, xt = x.type;
    uint8_t *y = o.bytes.data();
    // Fast paths of the common types (the same values as the general loops,
    // graph/glue_kernels.cpp): f32 → u8/i8 and u8/i8 → f32.
    detail::quant_params qp;
    qp.per_axis = per_axis;
    qp.C = C;
    qp.inner = per_axis ? inner : total;
    qp.outer = per_axis ? total / std::max<int64_t>(C * inner, 1) : 1;
    qp.scale = s.data.data();
    qp.zp = z.data();
    if (n.kind == op::QuantizeLinear && x.type == etype::f32 && x.order == layout::plain &&
        (ot == etype::u8 || ot == etype::i8)) {
        if (o.order == layout::nhwc) {
            // NCHW in, NHWC out (the first int8 convolution's source): the scale per tensor or per channel.
            qp.outer = x.shape[0];
            qp.C = x.shape[1];
            qp.inner = x.shape[2] * x.shape[3];
        }
        detail::quantize_f32(x.f32(), qp, ot == etype::u8, o.order == layout::nhwc, y);
        return;
    }
    if (n.kind == op::DequantizeLinear && o.type == etype::f32 && (xt == etype::u8 || xt == etype::i8)) {
        if (x.order == layout::nhwc) {
            qp.outer = x.shape[0];
            qp.C = x.shape[1];
            qp.inner = x.shape[2] * x.shape[3];
        }
        detail::dequantize_to_f32(x.bytes.data(), qp, xt == etype::u8, x.order == layout::nhwc, o.f32());
        return;
    }
    if (x.order != layout::plain || o.order != layout::plain) fail(n.where(), "QDQ: unexpected layout");
    if (n.kind == op::QuantizeLinear) {
        const ft xf = view(x);
        impl::parallel_for_if(total >= kParallelMin, total, [&](int64_t i) {
            const int64_t c = per_axis ? (i / inner) % C : 0;
            // round half to even, add the zero point, saturate (NaN → 0)
            const float q = std::nearbyint(xf.data[i] / s.data[c]);
            detail::store(ot, y, i, static_cast<double>(q) + static_cast<double>(z[c]));
        });
        return;
    }
    const uint8_t *xb = x.bytes.data();
    impl::parallel_for_if(total >= kParallelMin, total, [&](int64_t i) {
        const int64_t c = per_axis ? (i / inner) % C : 0;
        const int64_t d = static_cast<int64_t>(detail::load(xt, xb, i)) - z[c];
        detail::store(ot, y, i, static_cast<float>(d) * s.data[c]);
    });
}

// MaxPool / AvgPool on NCHW. Window positions outside the input are skipped;
// AvgPool divides by the real elements (exclude_pad) or by the positions
// inside the padded input; a window without any input element gives 0.
void pool(const node &n, const ft &x, ft &o) {
    const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
    const int64_t OH = o.shape[2], OW = o.shape[3];
    const int64_t KH = n.attr.kernel[0], KW = n.attr.kernel[1], SH = n.attr.strides[0], SW = n.attr.strides[1];
    const int64_t PT = n.pads_b[0], PL = n.pads_b[1], PB = n.pads_e[0], PR = n.pads_e[1];
    const bool is_max = n.kind == op::MaxPool, excl = n.attr.exclude_pad;
    impl::parallel_for_2d_if(elems_of(o.shape) * KH * KW >= kParallelMin, N * C, OH, [&](int64_t nc, int64_t oh) {
        const float *src = x.data.data() + nc * H * W;
        float *dst = o.data.data() + (nc * OH + oh) * OW;
        const int64_t h0 = oh * SH - PT, h1 = h0 + KH;
        const int64_t ha = std::max<int64_t>(h0, 0), hb = std::min(h1, H);
        const int64_t hp = std::min(h1, H + PB) - std::max<int64_t>(h0, -PT);
        for (int64_t ow = 0; ow < OW; ++ow) {
            const int64_t w0 = ow * SW - PL, w1 = w0 + KW;
            const int64_t wa = std::max<int64_t>(w0, 0), wb = std::min(w1, W);
            const int64_t wp = std::min(w1, W + PR) - std::max<int64_t>(w0, -PL);
            if (ha >= hb || wa >= wb) {
                dst[ow] = 0.f;
                continue;
            }
            if (is_max) {
                float m = src[ha * W + wa];
                for (int64_t h = ha; h < hb; ++h)
                    for (int64_t w = wa; w < wb; ++w) m = std::max(m, src[h * W + w]);
                dst[ow] = m;
            } else {
                double sum = 0;
                for (int64_t h = ha; h < hb; ++h)
                    for (int64_t w = wa; w < wb; ++w) sum += src[h * W + w];
                const int64_t cnt = excl ? (hb - ha) * (wb - wa) : hp * wp;
                dst[ow] = static_cast<float>(sum / static_cast<double>(cnt));
            }
        }
    });
}

// MaxPool of u8/i8 integers held NHWC (a lowered convolution's output): the
// maximum over the window's valid positions, on the integers themselves (max
// commutes with the dequantization, and an integer is its own f32 value), the
// output NHWC for the next int8 convolution. The same values as pool()
// (graph/glue_kernels.cpp: vectorized over the channels).
void max_pool_nhwc(const node &n, const tensor &x, tensor &o) {
    detail::pool_geometry p;
    p.N = x.shape[0], p.C = x.shape[1], p.H = x.shape[2], p.W = x.shape[3];
    p.OH = o.shape[2], p.OW = o.shape[3];
    p.KH = n.attr.kernel[0], p.KW = n.attr.kernel[1], p.SH = n.attr.strides[0], p.SW = n.attr.strides[1];
    p.PT = n.pads_b[0], p.PL = n.pads_b[1];
    detail::max_pool_nhwc_8bit(p, x.type == etype::i8, x.bytes.data(), o.bytes.data());
}

void reduce_mean(const node &n, const ft &x, ft &o) {
    const size_t r = x.shape.size();
    std::vector<bool> red(r, false);
    for (int64_t a : n.attr.axes) red[axis_of(a, r)] = true;
    // Reduced axes that are the trailing ones (a global average pool's [2, 3]):
    // each output sums one contiguous run, in the order of the general loop below.
    size_t first = r;
    while (first > 0 && red[first - 1]) --first;
    if (std::none_of(red.begin(), red.begin() + static_cast<std::ptrdiff_t>(first), [](bool b) { return b; }) &&
        first < r && o.data.size() > 0) {
        const int64_t inner = static_cast<int64_t>(x.data.size() / o.data.size());
        for (size_t k = 0; k < o.data.size(); ++k) {
            double acc = 0.0;
            const float *p = x.data.data() + static_cast<int64_t>(k) * inner;
            for (int64_t j = 0; j < inner; ++j) acc += p[j];
            o.data[k] = static_cast<float>(acc / static_cast<double>(inner));
        }
        return;
    }
    // Output strides seen from the input's index space (0 along reduced axes).
    shape_t kept(r);
    for (size_t i = 0; i < r; ++i) kept[i] = red[i] ? 1 : x.shape[i];
    const auto ost = strides_of(kept);
    std::vector<double> acc(o.data.size(), 0.0);
    const int64_t total = static_cast<int64_t>(x.data.size());
    std::vector<int64_t> idx(r, 0);
    for (int64_t i = 0; i < total; ++i) {
        int64_t off = 0;
        for (size_t d = 0; d < r; ++d)
            if (!red[d]) off += idx[d] * ost[d];
        acc[off] += x.data[i];
        for (int d = static_cast<int>(r) - 1; d >= 0 && ++idx[d] == x.shape[d]; --d) idx[d] = 0;
    }
    const double cnt = static_cast<double>(total) / static_cast<double>(std::max<size_t>(o.data.size(), 1));
    for (size_t i = 0; i < acc.size(); ++i) o.data[i] = static_cast<float>(acc[i] / cnt);
}

// Concat on typed storage (bytes; 4-bit types element by element).
void concat(const node &n, const std::vector<const tensor *> &in, tensor &o) {
    const int64_t ax = axis_of(n.attr.axis, o.shape.size());
    int64_t outer = 1;
    for (int64_t i = 0; i < ax; ++i) outer *= o.shape[i];
    const int64_t row = o.shape[ax] * inner_of(o.shape, ax);
    const int bits = bits_of(o.type);
    int64_t at = 0;
    for (const tensor *t : in) {
        const int64_t len = t->shape[ax] * inner_of(t->shape, ax);
        for (int64_t j = 0; j < outer; ++j) {
            if (bits >= 8) {
                const int64_t es = bits / 8;
                std::memcpy(o.bytes.data() + (j * row + at) * es, t->bytes.data() + j * len * es, len * es);
            } else {
                for (int64_t i = 0; i < len; ++i) o.set(j * row + at + i, t->get(j * len + i));
            }
        }
        at += len;
    }
}

void softmax(const node &n, const ft &x, ft &o) {
    const int64_t ax = axis_of(n.attr.axis, x.shape.size());
    const int64_t inner = inner_of(x.shape, ax), C = x.shape[ax];
    const int64_t outer = static_cast<int64_t>(x.data.size()) / std::max<int64_t>(C * inner, 1);
    for (int64_t j = 0; j < outer; ++j)
        for (int64_t i = 0; i < inner; ++i) {
            const float *src = x.data.data() + j * C * inner + i;
            float *dst = o.data.data() + j * C * inner + i;
            float m = src[0];
            for (int64_t c = 1; c < C; ++c) m = std::max(m, src[c * inner]);
            double sum = 0;
            for (int64_t c = 0; c < C; ++c) sum += dst[c * inner] = std::exp(src[c * inner] - m);
            for (int64_t c = 0; c < C; ++c) dst[c * inner] = static_cast<float>(dst[c * inner] / sum);
        }
}

// Reference evaluation of an op that computes in f32 (o: the output's f32 view).
void eval_f32(const node &n, const std::vector<const ft *> &in, ft &o) {
    switch (n.kind) {
    case op::Parameter:
    case op::Constant:
    case op::Convert:
    case op::Reshape:
    case op::Result:
    case op::Flatten:
    case op::Concat:
    case op::QuantizeLinear:
    case op::DequantizeLinear: break; // on typed storage: eval()
    case op::Subtract: binary(*in[0], *in[1], o, [](float a, float b) { return a - b; }); break;
    case op::Multiply: binary(*in[0], *in[1], o, [](float a, float b) { return a * b; }); break;
    case op::Add: binary(*in[0], *in[1], o, [](float a, float b) { return a + b; }); break;
    case op::Transpose: transpose(*in[0], n.attr.order, o); break;
    case op::Convolution:
    case op::GroupConvolution: convolution(n, *in[0], *in[1], o); break;
    case op::MatMul: matmul_f32(n, *in[0], *in[1], o); break;
    case op::Relu:
        for (size_t i = 0; i < o.data.size(); ++i) o.data[i] = std::max(in[0]->data[i], 0.f);
        break;
    case op::Gelu: {
        const float *x = in[0]->data.data();
        float *y = o.data.data();
        const int64_t cnt = static_cast<int64_t>(o.data.size());
        if (n.attr.gelu_tanh) {
            impl::parallel_for_if(cnt >= kParallelMin / 8, cnt, [&](int64_t i) { y[i] = gelu_tanh(x[i]); });
            break;
        }
        const int64_t blocks = (cnt + 1023) / 1024;
        impl::parallel_for_if(cnt >= kParallelMin / 8, blocks, [&](int64_t b) {
            gelu_erf(x + b * 1024, y + b * 1024, std::min<int64_t>(1024, cnt - b * 1024));
        });
        break;
    }
    case op::FakeQuantize: {
        const float lm1 = static_cast<float>(n.attr.levels - 1);
        const ft &x = *in[0];
        broadcast_rows(in, o.shape,
                       [&](int64_t j, int64_t inner, const std::vector<int64_t> &off, const std::vector<int64_t> &st) {
                           float *y = o.data.data() + j * inner;
                           for (int64_t i = 0; i < inner; ++i)
                               y[i] = fake_quantize(x.data[off[0] + i * st[0]], in[1]->data[off[1] + i * st[1]],
                                                    in[2]->data[off[2] + i * st[2]], in[3]->data[off[3] + i * st[3]],
                                                    in[4]->data[off[4] + i * st[4]], lm1);
                       });
        break;
    }
    case op::MaxPool:
    case op::AvgPool: pool(n, *in[0], o); break;
    case op::ReduceMean: reduce_mean(n, *in[0], o); break;
    case op::Clamp: {
        double lo = n.attr.clamp_min, hi = n.attr.clamp_max;
        if (is_integer(o.type)) lo = std::ceil(lo), hi = std::floor(hi); // integers: the bounds inside [min, max]
        const float flo = static_cast<float>(lo), fhi = static_cast<float>(hi);
        for (size_t i = 0; i < o.data.size(); ++i) o.data[i] = std::min(std::max(in[0]->data[i], flo), fhi);
        break;
    }
    case op::PRelu: {
        const ft &x = *in[0], &sl = *in[1];
        auto f = [](float v, float s) { return v < 0.f ? v * s : v; };
        if (sl.shape.size() == 1 && x.shape.size() >= 2 && sl.shape[0] == x.shape[1]) {
            const int64_t inner = inner_of(x.shape, 1), C = x.shape[1];
            for (size_t i = 0; i < o.data.size(); ++i) o.data[i] = f(x.data[i], sl.data[(i / inner) % C]);
        } else {
            binary(x, sl, o, f);
        }
        break;
    }
    case op::Sigmoid:
        for (size_t i = 0; i < o.data.size(); ++i) o.data[i] = 1.f / (1.f + std::exp(-in[0]->data[i]));
        break;
    case op::Softmax: softmax(n, *in[0], o); break;
    case op::QConvolution: fail(n.where(), "QConvolution runs on its compiled primitive only"); break;
    }
}

// Whether QDQ reads or writes a 4-D u8/i8 tensor held NHWC itself (the
// layout change fused into its loop): per tensor, or per channel (axis 1).
bool qdq_takes_nhwc(const node &n) {
    const node &x = *n.inputs[0];
    const bool q = n.kind == op::QuantizeLinear && x.out_type == etype::f32 &&
                   (n.out_type == etype::u8 || n.out_type == etype::i8);
    const bool dq = n.kind == op::DequantizeLinear && n.out_type == etype::f32 &&
                    (x.out_type == etype::u8 || x.out_type == etype::i8);
    const bool per_axis = elems_of(n.inputs[1]->out_shape) != 1;
    return (q || dq) && x.out_shape.size() == 4 && (!per_axis || axis_of(n.attr.axis, 4) == 1);
}

// Reference evaluation of one node into a typed tensor. Values move between
// ops in their own type: layout and conversion ops work on the storage
// (exact for every type), QuantizeLinear/DequantizeLinear read and write the
// integers directly, every other op computes in f32 on f32 views of its
// inputs and rounds its results to its type once.
// eval_into: into an output whose type, shape, layout and storage size are set
// (its previous bytes are overwritten: every op writes every element).
void eval_into(const node &n, const std::vector<const tensor *> &in, tensor &o) {
    std::vector<tensor> plain; // inputs in another layout, made plain
    std::vector<const tensor *> ins = in;
    const bool nhwc_qdq = (n.kind == op::QuantizeLinear || n.kind == op::DequantizeLinear) && qdq_takes_nhwc(n);
    if (o.order != layout::plain && !(nhwc_qdq && n.kind == op::QuantizeLinear))
        fail(n.where(), "output in layout " + std::string(to_string(o.order)));
    for (size_t k = 0; k < ins.size(); ++k)
        if (ins[k]->order != layout::plain && !(k == 0 && nhwc_qdq && n.kind == op::DequantizeLinear)) {
            auto &t = ins[k];
            plain.reserve(ins.size());
            plain.push_back(t->to_layout(layout::plain));
            t = &plain.back();
        }
    switch (n.kind) {
    case op::Parameter:
    case op::Constant: return; // handled by the caller
    case op::Reshape:
    case op::Flatten:
    case op::Result: o.bytes = ins[0]->bytes; return;
    case op::Convert: {
        const tensor &x = *ins[0];
        const int64_t total = o.elems();
        if (x.type == o.type) {
            o.bytes = x.bytes;
        } else if (bits_of(o.type) == 4) {
            for (int64_t i = 0; i < total; ++i) o.set(i, x.get(i));
        } else {
            impl::parallel_for_if(total >= kParallelMin, total,
                                  [&](int64_t i) { detail::store(o.type, o.bytes.data(), i, x.get(i)); });
        }
        return;
    }
    case op::Transpose:
        detail::permute(o.type, ins[0]->bytes.data(), ins[0]->shape, n.attr.order, o.bytes.data());
        return;
    case op::Concat: concat(n, ins, o); return;
    case op::QuantizeLinear:
    case op::DequantizeLinear: qdq(n, ins, o); return;
    default: break;
    }
    std::vector<ft> views;
    views.reserve(ins.size());
    std::vector<const ft *> vin;
    for (const tensor *t : ins) {
        views.push_back(view(*t));
        vin.push_back(&views.back());
    }
    ft out = out_view(o);
    eval_f32(n, vin, out);
    commit(out, o);
}

void eval(const node &n, const std::vector<const tensor *> &in, tensor &o) {
    o = tensor(n.out_type, n.out_shape);
    eval_into(n, in, o);
}

} // namespace

void detail::eval_node(const node &n, const std::vector<const tensor *> &in, tensor &o) { eval(n, in, o); }

namespace {

std::string kernel_name(const node &n) {
    switch (n.kind) {
    case op::Parameter: return "input";
    case op::Constant: return "constant";
    case op::Result: return "output";
    case op::Convert: return std::string("graph:convert_") + to_string(n.out_type);
    case op::Subtract: return "graph:eltwise_sub";
    case op::Multiply: return "graph:eltwise_mul";
    case op::Add: return "graph:eltwise_add";
    case op::Reshape: return "graph:reshape";
    case op::Transpose: return "graph:transpose";
    case op::Convolution:
    case op::GroupConvolution: return "convolution_f32 (created per run)";
    case op::MatMul: return "graph:matmul_f32";
    case op::Relu: return "graph:relu";
    case op::Gelu: return n.attr.gelu_tanh ? "graph:gelu_tanh" : "graph:gelu_erf";
    case op::FakeQuantize: return "graph:fake_quantize";
    case op::QuantizeLinear: return std::string("graph:quantize_linear_") + to_string(n.out_type);
    case op::DequantizeLinear: return std::string("graph:dequantize_linear_") + to_string(n.inputs[0]->out_type);
    case op::MaxPool:
        return n.inputs[0]->kind == op::QConvolution && is_integer(n.out_type)
                   ? std::string("graph:max_pool_nhwc_") + to_string(n.out_type)
                   : "graph:max_pool";
    case op::AvgPool: return "graph:avg_pool";
    case op::ReduceMean: return "graph:reduce_mean";
    case op::Concat: return "graph:concat";
    case op::Clamp: return "graph:clamp";
    case op::PRelu: return "graph:prelu";
    case op::Flatten: return "graph:reshape";
    case op::Sigmoid: return "graph:sigmoid";
    case op::Softmax: return "graph:softmax";
    case op::QConvolution: return "qconv:convolution";
    }
    return "?";
}

dtype to_qconv(etype t) {
    switch (t) {
    case etype::f32: return dtype::f32;
    case etype::f16: return dtype::f16;
    case etype::bf16: return dtype::bf16;
    case etype::u8: return dtype::u8;
    case etype::i8: return dtype::s8;
    case etype::u4: return dtype::u4;
    case etype::i4: return dtype::s4;
    default: return dtype::undef;
    }
}

// A MatMul recognised as weight-compressed.
struct compressed {
    node *mm = nullptr, *bias_add = nullptr;
    node *wq = nullptr;        // Constant or Parameter
    std::vector<node *> chain; // decompression nodes (fused)
    matmul_desc desc;
    std::vector<float> scale;        // [N][NG]
    std::vector<uint16_t> scale_f16; // the same in IEEE half, iff desc.scale_dt is f16
    std::vector<int32_t> zp;         // 0, 1 or [N][NG]
    std::vector<float> bias;         // N or empty
    int64_t rows = 0;                // M of this compilation (desc.m is runtime_m in a graph with `?`)
    std::shared_ptr<matmul> prim;    // built at compile time when Wq is a Constant
    std::string impl;                // the row the dispatcher chose, and the problem
    matmul_hints hints;
};

// Creates the primitive (constant weights) or a probe with zero weights
// (weights from a Parameter: the primitive is then created per run; the
// dispatcher's choice depends on the descriptor only). False when no row
// takes the problem.
// Run-time-M MatMuls of a graph with `?`, shared by its compilations (one
// per value): node id and descriptor → primitive.
using matmul_pool = std::map<std::string, std::shared_ptr<matmul>>;

bool create_primitive(compressed *c, bool dq, matmul_pool *pool) {
    matmul_weights w;
    if (c->desc.scale_dt == dtype::f16) w.scale_f16 = c->scale_f16.data();
    else w.scale = c->scale.data();
    w.zp = c->zp.empty() ? nullptr : c->zp.data();
    w.bias = c->bias.empty() ? nullptr : c->bias.data();
    std::string name;
    matmul_hints h;
    h.dynamic_quantization = dq;
    c->hints = h;
    try {
        if (c->wq->kind == op::Constant) {
            w.wei = c->wq->data->bytes.data();
            std::shared_ptr<matmul> *shared = nullptr;
            if (pool) shared = &(*pool)[c->mm->id + "|" + c->desc.key() + "|dq=" + std::to_string(dq)];
            if (shared && *shared) c->prim = *shared;
            else c->prim = std::make_shared<matmul>(c->desc, w, h);
            if (shared) *shared = c->prim;
            name = c->prim->impl_name();
        } else {
            const std::vector<uint8_t> zeros(c->desc.wei_bytes(), 0);
            w.wei = zeros.data();
            name = matmul(c->desc, w, h).impl_name() + " (weights from a Parameter)";
        }
    } catch (const error &) {
        return false;
    }
    const matmul_desc &d = c->desc;
    c->impl = name + " " + d.str() + " " + to_string(d.wei_dt) +
              (d.group ? " group" + std::to_string(d.group) : " per_oc") + " zp:" + to_string(d.zp) +
              (d.with_bias ? " bias" : "") + (d.scale_dt == dtype::f16 ? " scale:f16" : "") +
              (d.src_dt != dtype::f32 ? std::string(" x:") + to_string(d.src_dt) : "");
    return true;
}

// The (n, group) → value table of a broadcast constant `c` against the
// decompression shape D, where row n spans K = elems(D)/N and groups have G
// elements. Returns false when c is not constant within each group.
bool group_table(const node &c, const shape_t &D, int64_t G, std::vector<double> *out) {
    const int64_t N = D[0], K = elems_of(D) / N, NG = K / G;
    if (c.out_shape.size() > D.size()) return false;
    const auto cs = bstrides(c.out_shape, D);
    const auto ds = strides_of(D);
    // Constant within each group of G consecutive flat elements: every dim
    // along which c varies must have a D-stride that is a multiple of G.
    for (size_t i = 1; i < D.size(); ++i)
        if (cs[i] != 0 && ds[i] % G != 0) return false;
    out->resize(N * NG);
    for (int64_t n = 0; n < N; ++n)
        for (int64_t g = 0; g < NG; ++g) {
            int64_t flat = n * K + g * G, off = 0;
            for (size_t i = 0; i < D.size(); ++i) {
                off += (flat / ds[i]) * cs[i];
                flat %= ds[i];
            }
            (*out)[n * NG + g] = c.value(off);
        }
    return true;
}

// Smallest group size (a divisor of K) along which c is constant: K, or the
// product of D's dims after the last dim (≥ 1) along which c varies.
int64_t group_of(const node &c, const shape_t &D) {
    const int64_t K = elems_of(D) / D[0];
    const auto cs = bstrides(c.out_shape, D);
    const auto ds = strides_of(D);
    int64_t g = K;
    for (size_t i = 1; i < D.size(); ++i)
        if (cs[i] != 0) g = std::min(g, ds[i]);
    return g;
}

bool recognize(const graph &g, node *mm, compressed *c) {
    if (mm->kind != op::MatMul || !mm->attr.transpose_b || mm->attr.transpose_a) return false;
    // The activation type T: f32, f16 or bf16 (X, Y and the decompression chain).
    const etype T = mm->out_type;
    if (T != etype::f32 && T != etype::f16 && T != etype::bf16) return false;
    if (mm->inputs[1]->out_shape.size() != 2) return false;
    const int64_t N = mm->inputs[1]->out_shape[0], K = mm->inputs[1]->out_shape[1];
    node *w = mm->inputs[1];
    std::vector<node *> chain;
    if (w->kind == op::Reshape) {
        chain.push_back(w);
        w = w->inputs[0];
    }
    if (w->kind != op::Multiply) return false;
    chain.push_back(w);
    // The scale: a Constant of type T, or Convert(f16 Constant) to T. f16
    // scales reach the primitive as f16; bf16 ones are exact in f32.
    auto scale_constant = [T](node *n) -> node * {
        if (n->kind == op::Constant && n->out_type == T) return n;
        if (n->kind == op::Convert && n->out_type == T && n->inputs[0]->kind == op::Constant &&
            n->inputs[0]->out_type == etype::f16)
            return n->inputs[0];
        return nullptr;
    };
    node *x = w->inputs[0], *s = w->inputs[1];
    if (scale_constant(x) && !scale_constant(s)) std::swap(x, s);
    if (!scale_constant(s)) return false;
    if (scale_constant(s) != s) {
        chain.push_back(s); // the Convert
        s = scale_constant(s);
    }
    if (s->out_type == etype::f16) c->desc.scale_dt = dtype::f16;
    node *zp = nullptr, *sub = nullptr;
    if (x->kind == op::Subtract) {
        sub = x;
        chain.push_back(x);
        node *cz = x->inputs[1];
        if (cz->kind != op::Convert || cz->inputs[0]->kind != op::Constant || !is_integer(cz->inputs[0]->out_type))
            return false;
        chain.push_back(cz);
        zp = cz->inputs[0];
        x = x->inputs[0];
    }
    if (x->kind != op::Convert || x->out_type != T) return false;
    chain.push_back(x);
    node *q = x->inputs[0];
    if (q->kind == op::Reshape) {
        chain.push_back(q);
        q = q->inputs[0];
    }
    if (q->kind != op::Constant && q->kind != op::Parameter) return false;
    const dtype dt = to_qconv(q->out_type);
    if (dt != dtype::u8 && dt != dtype::s8 && dt != dtype::u4 && dt != dtype::s4) return false;
    const shape_t &D = x->out_shape; // the decompression shape
    if (w->out_shape != D || (sub && sub->out_shape != D)) return false;
    if (D.empty() || D[0] != N || elems_of(D) != N * K) return false;

    int64_t G = group_of(*s, D);
    if (zp) G = std::min(G, group_of(*zp, D));
    if (K % G) return false;
    std::vector<double> sv, zv;
    if (!group_table(*s, D, G, &sv)) return false;
    if (zp && !group_table(*zp, D, G, &zv)) return false;

    c->mm = mm;
    c->wq = q;
    c->chain = chain;
    c->rows = elems_of(mm->out_shape) / N;
    c->desc.m = g.is_dynamic() ? matmul_desc::runtime_m : c->rows;
    c->desc.k = K;
    c->desc.n = N;
    c->desc.wei_dt = dt;
    c->desc.src_dt = c->desc.dst_dt = to_qconv(T);
    c->desc.group = G == K ? 0 : G;
    c->scale.assign(sv.begin(), sv.end());
    if (c->desc.scale_dt == dtype::f16)
        for (float v : c->scale) c->scale_f16.push_back(f32_to_f16(v)); // exact: the values are f16
    if (zp) {
        const int64_t lo = detail::type_min(q->out_type), hi = detail::type_max(q->out_type);
        for (double v : zv)
            if (v < lo || v > hi) return false; // zp outside the weight type: not expressible
        const bool uniform = std::all_of(zv.begin(), zv.end(), [&](double v) { return v == zv[0]; });
        c->desc.zp = uniform ? matmul_desc::zp_kind::per_tensor : matmul_desc::zp_kind::per_group;
        if (uniform) c->zp = {static_cast<int32_t>(zv[0])};
        else c->zp.assign(zv.begin(), zv.end());
    }
    // A bias Add with a [..., N] Constant right after.
    auto cons = g.consumers(mm);
    if (cons.size() == 1 && cons[0]->kind == op::Add && cons[0]->out_shape == mm->out_shape) {
        node *add = cons[0];
        node *b = add->inputs[0] == mm ? add->inputs[1] : add->inputs[0];
        if (b->kind == op::Constant && b->out_type == T && elems_of(b->out_shape) == N && b->out_shape.back() == N) {
            c->bias_add = add;
            c->bias.resize(N);
            for (int64_t i = 0; i < N; ++i) c->bias[i] = static_cast<float>(b->value(i));
        }
    }
    c->desc.with_bias = c->bias_add != nullptr;
    return true;
}

// Runs a compressed MatMul on typed values: f32 activations as floats,
// f16/bf16 ones as their 16-bit words through execute_typed().
void run_compressed(const matmul &mm, const tensor &x, tensor &y, int64_t rows, int threads) {
    if (mm.desc().src_dt == dtype::f32) mm.execute(x.f32(), y.f32(), rows, threads);
    else mm.execute_typed(x.bytes.data(), y.bytes.data(), rows, threads);
}

} // namespace

struct compiled_graph::state {
    struct step {
        const node *n = nullptr;
        std::vector<int> in;
        int out = -1;
        int fused = -1;                            // index into mms
        std::shared_ptr<convolution_f32> conv;     // f32 conv primitive (constant weights)
        bool conv_per_run = false;                 // f32 conv primitive created per run
        std::shared_ptr<qconv::convolution> qconv; // QConvolution: the int8 primitive
        // The memory plan (made at compile time): the slots whose last reader
        // this step is (their storage goes back to the run's arena after it),
        // the residual slot a QConvolution's `sum` overwrites in place (its
        // last use; -1: none), and an output written NHWC (a QuantizeLinear
        // whose readers are int8 convolutions / max pools).
        std::vector<int> frees;
        int in_place = -1;
        bool nhwc_out = false;
    };
    // The storage of one run: a tensor per slot and the buffers not in use,
    // by size. Kept between runs (after the first run of a compilation no
    // step allocates, zero-fills or page-faults its output); a run takes an
    // arena from `arenas` (a new one when all are in use by other threads)
    // and gives it back.
    struct arena {
        std::vector<tensor> v;
        std::map<size_t, std::vector<std::vector<uint8_t>>> spare;
        // t's storage goes back to the spares.
        void give(tensor &t) {
            if (t.bytes.empty()) return;
            std::vector<uint8_t> b;
            b.swap(t.bytes);
            spare[b.size()].push_back(std::move(b));
        }
        // t becomes a tensor of the given type, shape and layout on a spare
        // buffer of its size (contents: whatever was there) or a new one.
        void take(tensor &t, etype type, const shape_t &shape, layout order) {
            give(t);
            t.type = type;
            t.shape = shape;
            t.order = order;
            const size_t nb = static_cast<size_t>(storage_bytes(type, elems_of(shape)));
            auto it = spare.find(nb);
            if (it != spare.end() && !it->second.empty()) {
                t.bytes.swap(it->second.back());
                it->second.pop_back();
            } else {
                t.bytes.assign(nb, 0);
            }
        }
    };
    mutable std::mutex arenas_mu;
    mutable std::vector<std::unique_ptr<arena>> arenas;
    std::vector<tensor> consts; // per slot, compile-time values
    std::vector<bool> known;    // slot value known at compile time
    std::vector<step> steps;
    std::vector<int> params, results;
    std::vector<std::pair<std::string, std::string>> impls;
    std::vector<compressed> mms;
    std::vector<std::shared_ptr<const constant_data>> wq_bytes; // per mms: packed constant weights
    size_t slots = 0;
    int threads = 0;
    std::unique_ptr<graph> owner; // the compiled clone (steps point into it)
};

// A graph with `?`: the graph as given, and one compilation per value of
// `?` seen by run() (at most `keep`, the oldest dropped first), all sharing
// the run-time-M MatMuls of `pool`.
struct compiled_graph::dynamic {
    static constexpr size_t keep = 8;
    std::unique_ptr<graph> source;
    compile_options opt;
    std::mutex mu;
    matmul_pool pool;
    std::vector<std::pair<int64_t, std::shared_ptr<const state>>> compiled; // oldest first
};

compiled_graph::compiled_graph(const graph &g, int threads) : compiled_graph(g, compile_options{threads, true}) {}

compiled_graph::compiled_graph(const graph &gin, const compile_options &opt) {
    if (gin.is_dynamic()) {
        d_ = std::make_unique<dynamic>();
        d_->source = gin.clone();
        d_->opt = opt;
        s_ = compile(gin, opt, d_.get(), gin.dynamic_value());
        d_->compiled.push_back({gin.dynamic_value(), s_});
        return;
    }
    s_ = compile(gin, opt, nullptr, 1);
}

std::shared_ptr<const compiled_graph::state> compiled_graph::compile(const graph &gin, const compile_options &opt,
                                                                     dynamic *dyn, int64_t dynamic_value) {
    matmul_pool *pool = dyn ? &dyn->pool : nullptr;
    auto s = std::make_shared<state>();
    auto &S = *s;
    S.threads = opt.threads;
    // Work on a private, inferred clone (the caller's graph stays untouched).
    auto g = gin.clone();
    if (g->is_dynamic()) g->bind_dynamic(dynamic_value);
    g->infer();
    check_run_memory(*g); // before any tensor is allocated
    const auto order = g->topo_order();
    std::map<const node *, int> slot;
    for (const node *n : order) slot[n] = static_cast<int>(slot.size());
    S.slots = slot.size();
    S.consts.resize(S.slots);
    S.known.assign(S.slots, false);

    // 1. Compressed MatMuls and the nodes they absorb.
    std::map<const node *, std::string> fused_into;
    std::map<const node *, int> mm_index;
    for (node *n : order) {
        compressed c;
        if (!recognize(*g, n, &c)) continue;
        if (!create_primitive(&c, opt.dynamic_quantization, pool))
            continue; // e.g. a group size no row takes: runs unfused
        // A chain node is absorbed only if nothing outside the chain reads it.
        std::set<const node *> inside(c.chain.begin(), c.chain.end());
        inside.insert(n);
        for (node *ch : c.chain) {
            bool only = true;
            for (node *u : g->consumers(ch)) only &= inside.count(u) > 0;
            if (only) fused_into[ch] = n->id;
        }
        if (c.bias_add) fused_into[c.bias_add] = n->id;
        mm_index[n] = static_cast<int>(S.mms.size());
        S.mms.push_back(std::move(c));
    }

    // 2. Steps, folding whatever is known at compile time.
    for (node *n : order) {
        const int out = slot[n];
        std::vector<int> in;
        for (node *i : n->inputs) in.push_back(slot[i]);
        if (fused_into.count(n)) {
            S.impls.push_back({n->id, "fused into " + fused_into[n]});
            continue;
        }
        if (n->kind == op::Constant) {
            tensor &t = S.consts[out];
            t = tensor(n->out_type, n->out_shape);
            t.bytes = n->data->bytes; // packed as the tensor's storage
            S.known[out] = true;
            S.impls.push_back({n->id, "constant"});
            continue;
        }
        if (n->kind == op::Parameter) {
            S.impls.push_back({n->id, "input"});
            continue;
        }
        if (mm_index.count(n)) {
            compressed &c = S.mms[mm_index[n]];
            state::step st;
            st.n = n;
            st.in = {slot[n->inputs[0]], slot[c.wq]};
            st.out = c.bias_add ? slot[c.bias_add] : out;
            st.fused = mm_index[n];
            S.impls.push_back({n->id, c.impl});
            S.wq_bytes.push_back(nullptr);
            S.steps.push_back(st);
            continue;
        }
        const bool all_known = opt.fold_constants && n->kind != op::Result &&
                               std::all_of(in.begin(), in.end(), [&](int i) { return S.known[i]; });
        if (all_known) {
            std::vector<const tensor *> ins;
            for (int i : in) ins.push_back(&S.consts[i]);
            eval(*n, ins, S.consts[out]);
            S.known[out] = true;
            S.impls.push_back({n->id, "constant-folded"});
            continue;
        }
        state::step st;
        st.n = n;
        st.in = in;
        st.out = out;
        std::string impl = kernel_name(*n);
        if (n->kind == op::QConvolution) {
            // One int8 primitive, created once through the dispatcher ("auto":
            // the attribute builder picks attr[0]/attr[1] and the row).
            const detail::qconv_spec sp = detail::qconv_spec::decode(n->attr.qconv, n->where());
            if (!S.known[in[1]]) fail(n->where(), "QConvolution weights must be a Constant");
            const tensor &w = S.consts[in[1]];
            st.qconv = std::make_shared<qconv::convolution>(sp.p, reinterpret_cast<const int8_t *>(w.bytes.data()),
                                                            sp.p.with_bias ? sp.bias.data() : nullptr);
            impl = "qconv:" + st.qconv->impl_name() + " attr[" + std::to_string(st.qconv->attr_id()) + "] " +
                   sp.p.desc.str() + " " + to_string(sp.p.src_dt) + "->" + to_string(sp.p.dst_dt) +
                   " zp:" + to_string(sp.p.src_zp.effective_kind()) +
                   (sp.p.ops.empty() ? std::string() : " " + to_string(sp.p.ops));
        }
        if ((n->kind == op::Convolution || n->kind == op::GroupConvolution) && !is_integer(n->out_type)) {
            // The f32 convolution primitive (oneDNN's, else the reference):
            // constant weights are reordered once; weights computed at run
            // time mean a primitive per run. An f16/bf16 convolution runs it
            // on the (exact) f32 values and rounds the result to its type.
            const bool known = S.known[in[1]];
            std::vector<float> w(elems_of(n->inputs[1]->out_shape), 0.f);
            if (known) w = S.consts[in[1]].to_f32();
            auto c = std::make_shared<convolution_f32>(conv_desc_of(*n), w.data(), nullptr);
            impl = c->impl_name() + (known ? "" : " (weights per run)");
            if (known) st.conv = c;
            else st.conv_per_run = true;
        }
        S.steps.push_back(st);
        S.impls.push_back({n->id, impl});
    }
    // Folded values nothing reads at run time can go (e.g. the f32 copy of
    // compressed weights when only the decompression chain used them).
    std::vector<bool> needed(S.slots, false);
    for (const auto &st : S.steps)
        for (size_t k = 0; k < st.in.size(); ++k)
            if (!(k == 1 && (st.conv || st.qconv || (st.fused >= 0 && S.mms[st.fused].prim))))
                needed[st.in[k]] = true; // oneDNN / the compressed primitive hold their own weights
    for (size_t i = 0; i < S.slots; ++i)
        if (S.known[i] && !needed[i]) std::vector<uint8_t>().swap(S.consts[i].bytes);
    for (const node *p : g->parameters()) S.params.push_back(slot[p]);
    for (const node *r : g->results()) S.results.push_back(slot[r]);
    // 3. The memory plan: each slot's last reader, the residuals a `sum`
    // overwrites in place, the QuantizeLinear outputs made NHWC.
    {
        std::vector<int> last(S.slots, -1);
        std::vector<bool> keep(S.known); // constants, Parameters and Results live through the run
        for (int p : S.params) keep[p] = true;
        for (int r : S.results) keep[r] = true;
        for (size_t k = 0; k < S.steps.size(); ++k)
            for (int i : S.steps[k].in) last[i] = static_cast<int>(k);
        for (size_t k = 0; k < S.steps.size(); ++k) {
            state::step &st = S.steps[k];
            std::set<int> dying;
            for (int i : st.in)
                if (last[i] == static_cast<int>(k) && !keep[i]) dying.insert(i);
            if (st.qconv && st.in.size() == 3 && dying.count(st.in[2]) && st.in[2] != st.in[0] &&
                st.n->inputs[2]->out_type == st.n->out_type && st.n->out_type != etype::f32)
                st.in_place = st.in[2];
            st.frees.assign(dying.begin(), dying.end());
            if (st.n->kind == op::QuantizeLinear && qdq_takes_nhwc(*st.n)) {
                bool conv = false, all = true;
                for (const node *u : g->consumers(st.n)) {
                    conv |= u->kind == op::QConvolution;
                    all &= u->kind == op::QConvolution || (u->kind == op::MaxPool && u->out_type == st.n->out_type);
                }
                st.nhwc_out = conv && all && !keep[st.out];
            }
        }
    }
    S.owner = std::move(g);
    if (impl::verbose_level() >= 1)
        for (const auto &[id, chosen] : S.impls) impl::verbose_print("graph,compile," + id + "," + chosen);
    return s;
}

compiled_graph::~compiled_graph() = default;

// The value of `?` the inputs give: the same at every `?` of every Parameter.
int64_t compiled_graph::dynamic_value_of(const std::vector<tensor> &inputs) const {
    const auto params = d_->source->parameters();
    if (inputs.size() != params.size())
        fail("inputs", "expected " + std::to_string(params.size()) + " tensors, got " + std::to_string(inputs.size()));
    int64_t v = 0;
    std::string first;
    for (size_t p = 0; p < params.size(); ++p) {
        const shape_t &want = params[p]->attr.shape, &got = inputs[p].shape;
        if (want.size() != got.size())
            fail("inputs", "Parameter '" + params[p]->id + "' has rank " + std::to_string(want.size()) + ", got " +
                               to_string(got));
        for (size_t i = 0; i < want.size(); ++i) {
            if (want[i] != dynamic_dim) continue;
            if (v == 0) {
                v = got[i];
                first = "'" + params[p]->id + "' dim " + std::to_string(i);
            } else if (got[i] != v) {
                fail("inputs", "every '?' takes one value: " + first + " is " + std::to_string(v) + ", '" +
                                   params[p]->id + "' dim " + std::to_string(i) + " is " + std::to_string(got[i]));
            }
        }
    }
    if (v < 1)
        fail("inputs", "the run-time dimension '?' must be positive (" + first + " is " + std::to_string(v) + ")");
    return v;
}

std::vector<tensor> compiled_graph::run_profiled(const std::vector<tensor> &inputs,
                                                 std::vector<std::pair<std::string, double>> *ms) const {
    if (d_) fail("inputs", "run_profiled: a graph with a run-time dimension '?' is profiled through run()");
    return run_state(*s_, inputs, ms);
}

std::vector<tensor> compiled_graph::run(const std::vector<tensor> &inputs) const {
    if (!d_) return run_state(*s_, inputs);
    const int64_t v = dynamic_value_of(inputs);
    std::shared_ptr<const state> st;
    {
        std::lock_guard<std::mutex> lock(d_->mu);
        for (const auto &[value, c] : d_->compiled)
            if (value == v) st = c;
        if (!st) {
            // Compiled under the lock: concurrent runs of a new value wait for one compilation.
            st = compile(*d_->source, d_->opt, d_.get(), v);
            if (d_->compiled.size() >= dynamic::keep) d_->compiled.erase(d_->compiled.begin());
            d_->compiled.push_back({v, st});
        }
    }
    return run_state(*st, inputs);
}

std::vector<tensor> compiled_graph::run_state(const state &S, const std::vector<tensor> &inputs,
                                              std::vector<std::pair<std::string, double>> *ms) {
    if (inputs.size() != S.params.size())
        fail("inputs",
             "expected " + std::to_string(S.params.size()) + " tensors, got " + std::to_string(inputs.size()));
    // This run's arena: one left by an earlier run, else a new one.
    struct lease {
        const state &S;
        std::unique_ptr<state::arena> a;
        explicit lease(const state &s) : S(s) {
            std::lock_guard<std::mutex> lock(S.arenas_mu);
            if (!S.arenas.empty()) {
                a = std::move(S.arenas.back());
                S.arenas.pop_back();
            } else {
                a = std::make_unique<state::arena>();
            }
        }
        ~lease() {
            std::lock_guard<std::mutex> lock(S.arenas_mu);
            S.arenas.push_back(std::move(a));
        }
    } held(S);
    state::arena &A = *held.a;
    std::vector<tensor> &v = A.v;
    v.resize(S.slots);
    for (tensor &t : v) A.give(t);                       // what a run stopped by an error left
    std::vector<const tensor *> given(S.slots, nullptr); // Parameters read from the caller's tensors
    auto get = [&](int i) -> const tensor & { return S.known[i] ? S.consts[i] : given[i] ? *given[i] : v[i]; };
    const auto params = S.owner->parameters();
    for (size_t p = 0; p < S.params.size(); ++p) {
        const node &pn = *params[p];
        const tensor &t = inputs[p];
        if (t.shape != pn.out_shape || static_cast<int64_t>(t.bytes.size()) != storage_bytes(t.type, t.elems()))
            fail("inputs", "Parameter '" + pn.id + "' expects " + to_string(pn.out_shape) + ", got " +
                               to_string(t.shape) + " with " + std::to_string(t.bytes.size()) + " bytes of " +
                               to_string(t.type));
        // The graph's boundary: the value in the Parameter's type (converted as
        // a Convert does when another type is given) and in plain layout; the
        // caller's tensor itself when it is both.
        if (t.order == layout::plain && t.type == pn.out_type) {
            given[S.params[p]] = &t;
            continue;
        }
        tensor &d = v[S.params[p]];
        d = t.order == layout::plain ? t : t.to_layout(layout::plain);
        if (d.type != pn.out_type) {
            tensor c(pn.out_type, d.shape);
            for (int64_t i = 0; i < c.elems(); ++i) c.set(i, d.get(i));
            d = std::move(c);
        }
    }
    using clock = std::chrono::steady_clock;
    clock::time_point t0 = clock::now();
    const state::step *prev = nullptr;
    auto lap = [&](const state::step *next) {
        if (ms && prev) {
            const clock::time_point t1 = clock::now();
            ms->push_back({prev->n->id, std::chrono::duration<double, std::milli>(t1 - t0).count()});
            t0 = t1;
        } else if (ms) {
            t0 = clock::now();
        }
        prev = next;
    };
    std::vector<const tensor *> ins;
    auto run_step = [&](const state::step &st) {
        if (st.fused >= 0) {
            const compressed &c = S.mms[st.fused];
            const tensor &x = get(st.in[0]);
            tensor &y = v[st.out];
            A.take(y, c.mm->out_type, (c.bias_add ? c.bias_add : c.mm)->out_shape, layout::plain);
            if (x.elems() != c.rows * c.desc.k || x.type != y.type || x.order != layout::plain)
                fail("inputs", "MatMul '" + c.mm->id + "' input has " + std::to_string(x.elems()) + " elements of " +
                                   to_string(x.type));
            if (c.prim) {
                run_compressed(*c.prim, x, y, c.rows, S.threads);
            } else {
                const tensor &wt = get(st.in[1]);
                if (wt.type != c.wq->out_type) fail(st.n->where(), "weights of another type");
                matmul_weights w{wt.bytes.data(), c.scale.data(), c.zp.empty() ? nullptr : c.zp.data(),
                                 c.bias.empty() ? nullptr : c.bias.data()};
                if (c.desc.scale_dt == dtype::f16) w.scale = nullptr, w.scale_f16 = c.scale_f16.data();
                matmul_desc dm = c.desc; // weights per run: a primitive for this run's rows
                dm.m = c.rows;
                run_compressed(matmul(dm, w, c.hints), x, y, c.rows, S.threads);
            }
            return;
        }
        ins.clear();
        for (int i : st.in) ins.push_back(&get(i));
        if (st.qconv) {
            // Quantized activations stay NHWC: a source in another layout is
            // reordered once here, the output is left NHWC for the next one.
            const tensor &x0 = *ins[0];
            if (x0.shape != st.n->inputs[0]->out_shape || x0.type != st.n->inputs[0]->out_type)
                fail(st.n->where(), "QConvolution source changed shape or type");
            tensor xn;
            const tensor *x = &x0;
            if (x0.order != layout::nhwc) {
                xn = x0.to_layout(layout::nhwc);
                x = &xn;
            }
            tensor &o = v[st.out];
            exec_args a;
            a.threads = S.threads;
            tensor rn;
            if (ins.size() == 3 && ins[2]->type == st.n->out_type && st.n->out_type != etype::f32) {
                // sum: the skip's integers are the destination's previous values
                const tensor &r = *ins[2];
                if (r.shape != st.n->out_shape) fail(st.n->where(), "QConvolution residual changed shape");
                if (st.in_place >= 0 && r.order == layout::nhwc && &r == &v[st.in_place]) {
                    // the residual's last use: its storage becomes the output
                    A.give(o);
                    tensor &res = v[st.in_place];
                    o.type = res.type;
                    o.shape = res.shape;
                    o.order = layout::nhwc;
                    o.bytes.swap(res.bytes);
                } else {
                    A.take(o, st.n->out_type, st.n->out_shape, layout::nhwc);
                    if (r.order == layout::nhwc) std::memcpy(o.bytes.data(), r.bytes.data(), o.bytes.size());
                    else o.bytes = r.to_layout(layout::nhwc).bytes;
                }
            } else {
                A.take(o, st.n->out_type, st.n->out_shape, layout::nhwc);
                if (ins.size() == 3) {
                    rn = ins[2]->to_layout(layout::nhwc);
                    a.binary.push_back(rn.f32());
                }
            }
            st.qconv->execute(x->bytes.data(), o.bytes.data(), a);
            return;
        }
        if (st.conv || st.conv_per_run) {
            tensor &o = v[st.out];
            A.take(o, st.n->out_type, st.n->out_shape, layout::plain);
            if (ins[0]->shape != st.n->inputs[0]->out_shape) fail(st.n->where(), "input shape changed");
            std::shared_ptr<convolution_f32> c = st.conv;
            if (!c) c = std::make_shared<convolution_f32>(conv_desc_of(*st.n), view(*ins[1]).data.data(), nullptr);
            const ft x = view(*ins[0]);
            ft y = out_view(o);
            convolution_nchw(x, y, [&](const float *src, float *dst) { c->execute(src, dst, S.threads); });
            commit(y, o);
            return;
        }
        for (size_t k = 0; k < ins.size(); ++k)
            if (ins[k]->shape != st.n->inputs[k]->out_shape)
                fail(st.n->where(), std::string(to_string(st.n->kind)) + " '" + st.n->id + "': input " +
                                        std::to_string(k) + " has shape " + to_string(ins[k]->shape) + ", expected " +
                                        to_string(st.n->inputs[k]->out_shape));
        if (st.n->kind == op::MaxPool && ins[0]->order == layout::nhwc &&
            (ins[0]->type == etype::u8 || ins[0]->type == etype::i8) && st.n->out_type == ins[0]->type) {
            tensor &o = v[st.out];
            A.take(o, st.n->out_type, st.n->out_shape, layout::nhwc);
            max_pool_nhwc(*st.n, *ins[0], o);
            return;
        }
        tensor &o = v[st.out];
        A.take(o, st.n->out_type, st.n->out_shape, st.nhwc_out ? layout::nhwc : layout::plain);
        eval_into(*st.n, ins, o);
    };
    for (const auto &st : S.steps) {
        lap(&st);
        run_step(st);
        for (int i : st.frees) A.give(v[i]);
    }
    lap(nullptr);
    std::vector<tensor> out;
    for (int r : S.results) out.push_back(get(r));
    for (tensor &t : v) A.give(t);
    return out;
}

std::vector<std::pair<std::string, std::string>> compiled_graph::impls() const { return s_->impls; }

double run_bytes(const graph &g) {
    double bytes = 0;
    for (const auto &n : g.nodes()) {
        const double f32 = double(elems_of(n->out_shape)) * 4;
        bytes += f32;                                                        // the executor's tensor
        if (n->kind == op::Parameter || n->kind == op::Result) bytes += f32; // the caller's input, the output returned
        if (n->kind == op::Constant) bytes += double(storage_bytes(n->attr.type, elems_of(n->attr.shape)));
    }
    return bytes;
}

void check_run_memory(const graph &g) {
    const node *largest = nullptr;
    for (const auto &n : g.nodes())
        if (!largest || elems_of(n->out_shape) > elems_of(largest->out_shape)) largest = n.get();
    if (!largest) return;
    impl::check_memory(run_bytes(g), largest->where(),
                       "running the graph (largest tensor: '" + largest->id + "' " + to_string(largest->out_type) +
                           to_string(largest->out_shape) + ", " +
                           impl::bytes_text(double(elems_of(largest->out_shape)) * 4) + " in f32)",
                       double(max_run_bytes), "the graph limit of " + impl::bytes_text(double(max_run_bytes)));
}

std::vector<tensor> random_inputs(const graph &g, uint64_t seed, int64_t dynamic_value) {
    std::vector<tensor> r;
    detail::rng rng(seed);
    const int64_t v = dynamic_value > 0 ? dynamic_value : g.dynamic_value();
    std::vector<shape_t> shapes;
    double bytes = 0;
    for (const node *p : g.parameters()) {
        shape_t s = p->attr.shape;
        for (int64_t &d : s)
            if (d == dynamic_dim) d = v;
        check_shape(s, "inputs");
        bytes += double(elems_of(s)) * 4;
        shapes.push_back(s);
    }
    impl::check_memory(bytes, "inputs", "random inputs for every Parameter");
    size_t i = 0;
    for (const node *p : g.parameters()) {
        const shape_t &s = shapes[i++];
        tensor t(p->attr.type, s);
        for (int64_t e = 0; e < t.elems(); ++e)
            t.set(e, is_integer(t.type)
                         ? static_cast<double>(rng.integer(std::max<int64_t>(detail::type_min(t.type), -128),
                                                           std::min<int64_t>(detail::type_max(t.type), 127)))
                         : static_cast<double>(static_cast<float>(rng.uniform() * 2.0 - 1.0)));
        r.push_back(std::move(t));
    }
    return r;
}

} // namespace qconv::graph
