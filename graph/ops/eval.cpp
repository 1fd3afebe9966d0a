// The graph's evaluation of one node: what every op computes (docs/graph.md),
// on typed tensors. Layout and conversion ops and QuantizeLinear /
// DequantizeLinear work on the typed storage; the other ops compute in f32 on
// f32 views of their inputs and round their results to their type once; a
// Convolution runs the f32 convolution primitive (NCHW transposed to NHWC
// around it). The executor (executor.cpp) folds constants and runs the nodes
// it does not hand to a primitive through it; the low-precision lowering reads
// constant subgraphs through it.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <immintrin.h>

#include "core/parallel.h"
#include "graph/ir/detail.h"
#include "graph/ops/lut.h"
#include "graph/ops/ops.h"
#include "qconv/conv_desc.h"
#include "qconv/conv_f32.h"
#include "qconv/graph.h"

namespace qconv::graph {

namespace {

using detail::to_type;

// Below this many elements (or multiply-adds) a loop runs on one thread: a
// parallel region costs more than it saves, and much more on a loaded machine.
constexpr int64_t kParallelMin = 1 << 16;

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
    dtype type = dtype::f32;
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
    if (t.type == dtype::f32 && t.order == layout::plain) {
        f.data = {const_cast<float *>(t.f32()), static_cast<size_t>(t.elems())};
        return f;
    }
    f.own = t.to_f32();
    f.data = {f.own.data(), f.own.size()};
    return f;
}
// A zero-filled f32 buffer of the given shape.
ft scratch(dtype type, const shape_t &s) {
    ft f;
    f.type = type;
    f.shape = s;
    f.own.assign(static_cast<size_t>(elems_of(s)), 0.f);
    f.data = {f.own.data(), f.own.size()};
    return f;
}
ft out_view(tensor &o) {
    if (o.type == dtype::f32) {
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
    if (o.type == dtype::f32) return;
    uint8_t *b = o.bytes.data();
    const dtype t = o.type;
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
    const auto fa = detail::bstrides(a.shape, o.shape), fb = detail::bstrides(b.shape, o.shape);
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
        // The common strides as their own loops (the same operations, so the
        // compiler can keep a broadcast operand in a register and vectorize).
        if (ia == 1 && ib == 0) {
            const float vb = *pb;
            for (int64_t i = 0; i < inner; ++i) y[i] = f(pa[i], vb);
        } else if (ia == 0 && ib == 1) {
            const float va = *pa;
            for (int64_t i = 0; i < inner; ++i) y[i] = f(va, pb[i]);
        } else if (ia == 1 && ib == 1) {
            for (int64_t i = 0; i < inner; ++i) y[i] = f(pa[i], pb[i]);
        } else {
            for (int64_t i = 0; i < inner; ++i) y[i] = f(pa[i * ia], pb[i * ib]);
        }
    });
}

// A permutation that keeps leading dims and swaps two groups of the rest
// ([0, 2, 3, 1]: NCHW → NHWC; [0, 3, 1, 2]: back): per batch, the input is a
// [rows, cols] matrix and the output its transpose. False otherwise.
bool as_matrix_transpose(const shape_t &s, const std::vector<int64_t> &perm, int64_t *batch, int64_t *rows,
                         int64_t *cols) {
    const size_t r = perm.size();
    size_t p = 0;
    while (p < r && perm[p] == static_cast<int64_t>(p)) ++p;
    if (p + 2 > r) return false;
    const int64_t m = perm[p]; // the first dim of the second group
    for (size_t i = p; i < r; ++i) {
        const int64_t want = i < p + (r - m) ? m + static_cast<int64_t>(i - p) : static_cast<int64_t>(i - (r - m));
        if (perm[i] != want) return false;
    }
    *batch = *rows = *cols = 1;
    for (size_t i = 0; i < r; ++i) (i < p ? *batch : static_cast<int64_t>(i) < m ? *rows : *cols) *= s[i];
    return true;
}

void transpose(const ft &in, const std::vector<int64_t> &perm, ft &o) {
    int64_t batch, rows, cols;
    if (as_matrix_transpose(in.shape, perm, &batch, &rows, &cols) && rows > 1 && cols > 1)
        return detail::transpose_tiled(dtype::f32, reinterpret_cast<const uint8_t *>(in.data.data()),
                                       reinterpret_cast<uint8_t *>(o.data.data()), batch, rows, cols);
    const size_t r = perm.size();
    const auto is = detail::strides_of(in.shape);
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
    const auto sa = detail::bstrides(ab, ob), sb = detail::bstrides(bb, ob);
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
    const conv_desc d = detail::f32_conv_desc(n);
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
    for (size_t i = 0; i < k; ++i) st[i] = detail::bstrides(in[i]->shape, out);
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
    const dtype ot = o.type, xt = x.type;
    uint8_t *y = o.bytes.data();
    // Fast paths of the common types (the same values as the general loops,
    // graph/ops/glue_kernels.cpp): f32 → u8/i8 and u8/i8 → f32.
    detail::quant_params qp;
    qp.per_axis = per_axis;
    qp.C = C;
    qp.inner = per_axis ? inner : total;
    qp.outer = per_axis ? total / std::max<int64_t>(C * inner, 1) : 1;
    qp.scale = s.data.data();
    qp.zp = z.data();
    if (x.order == layout::nhwc && o.order == layout::nhwc) {
        // NHWC on both sides (an f32 island of the graph: executor): per tensor
        // the same loops over the whole buffer; a DequantizeLinear per channel
        // takes the channel from the innermost dim.
        if (n.kind == op::QuantizeLinear && x.type == dtype::f32 && !per_axis && (ot == dtype::u8 || ot == dtype::s8)) {
            qp.inner = total;
            detail::quantize_f32(x.f32(), qp, ot == dtype::u8, false, y);
            return;
        }
        if (n.kind == op::DequantizeLinear && o.type == dtype::f32 && (xt == dtype::u8 || xt == dtype::s8) &&
            x.shape.size() == 4 && (!per_axis || ax == 1)) {
            if (per_axis) detail::dequantize_nhwc_f32(x.bytes.data(), qp, xt == dtype::u8, o.f32());
            else {
                qp.inner = total;
                detail::dequantize_to_f32(x.bytes.data(), qp, xt == dtype::u8, false, o.f32());
            }
            return;
        }
        fail(n.where(), "QDQ: unexpected NHWC operands");
    }
    if (n.kind == op::QuantizeLinear && x.type == dtype::f32 && x.order == layout::plain &&
        (ot == dtype::u8 || ot == dtype::s8)) {
        if (o.order == layout::nhwc) {
            // NCHW in, NHWC out (the first int8 convolution's source): the scale per tensor or per channel.
            qp.outer = x.shape[0];
            qp.C = x.shape[1];
            qp.inner = x.shape[2] * x.shape[3];
        }
        detail::quantize_f32(x.f32(), qp, ot == dtype::u8, o.order == layout::nhwc, y);
        return;
    }
    if (n.kind == op::DequantizeLinear && o.type == dtype::f32 && (xt == dtype::u8 || xt == dtype::s8)) {
        if (x.order == layout::nhwc) {
            qp.outer = x.shape[0];
            qp.C = x.shape[1];
            qp.inner = x.shape[2] * x.shape[3];
        }
        detail::dequantize_to_f32(x.bytes.data(), qp, xt == dtype::u8, x.order == layout::nhwc, o.f32());
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
        // Eight outputs at a time, each its own sum in the same order: eight
        // independent chains of additions instead of one (the same values).
        const int64_t inner = static_cast<int64_t>(x.data.size() / o.data.size());
        const int64_t outs = static_cast<int64_t>(o.data.size());
        constexpr int64_t B = 8;
        for (int64_t k0 = 0; k0 < outs; k0 += B) {
            const int64_t nb = std::min(B, outs - k0);
            double acc[B] = {};
            const float *p = x.data.data() + k0 * inner;
            if (nb == B)
                for (int64_t j = 0; j < inner; ++j)
                    for (int64_t b = 0; b < B; ++b) acc[b] += p[b * inner + j];
            else
                for (int64_t b = 0; b < nb; ++b)
                    for (int64_t j = 0; j < inner; ++j) acc[b] += p[b * inner + j];
            for (int64_t b = 0; b < nb; ++b) o.data[k0 + b] = static_cast<float>(acc[b] / static_cast<double>(inner));
        }
        return;
    }
    // Output strides seen from the input's index space (0 along reduced axes).
    shape_t kept(r);
    for (size_t i = 0; i < r; ++i) kept[i] = red[i] ? 1 : x.shape[i];
    const auto ost = detail::strides_of(kept);
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

// e^x for 16 floats: x = k·ln2 + r (|r| ≤ ln2/2, ln2 in two parts), e^r by
// its degree-7 Taylor polynomial (Horner, FMA), scaled by 2^k; below −87.3
// (e^x under the smallest normal) 0, above 88.7 +inf, NaN as NaN. Within 2
// ulp of std::exp over the normal range (tests/test_graph_ops.cpp).
__attribute__((target("avx512f"))) inline __m512 exp16(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-87.33654f), hi = _mm512_set1_ps(88.72284f);
    const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693145752f), xc); // ln2 high part (exact product)
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.42860677e-6f), r);       // ln2 low part
    __m512 p = _mm512_set1_ps(1.f / 5040);
    for (float c : {1.f / 720, 1.f / 120, 1.f / 24, 1.f / 6, 0.5f, 1.f, 1.f})
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
    const __m512 y = _mm512_scalef_ps(p, k);
    const __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), over = _mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ);
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    const __m512 z = _mm512_mask_mov_ps(y, under, _mm512_setzero_ps());
    return _mm512_mask_mov_ps(_mm512_mask_mov_ps(z, over, _mm512_set1_ps(1.f / 0.f)), nan, x);
}

// The maximum of a row as std::max(m, x) in order gives it: NaN elements
// after the first are passed over, a NaN first element stays (vmaxps(x, m)
// returns m when either is NaN; the lanes then meet in the same rule).
__attribute__((target("avx512f"))) float row_max_avx512(const float *src, int64_t C) {
    float m = src[0];
    __m512 vm = _mm512_set1_ps(m);
    int64_t c = 1;
    for (; c + 16 <= C; c += 16) vm = _mm512_max_ps(_mm512_loadu_ps(src + c), vm);
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, vm);
    for (float l : lanes) m = std::max(m, l);
    for (; c < C; ++c) m = std::max(m, src[c]);
    return m;
}

// One softmax row of C contiguous floats: the maximum, e^(x − max) (16 at a
// time), their sum in double (eight running sums), each divided by it (in
// double, 8 at a time: the bits of the scalar division).
__attribute__((target("avx512f"))) void softmax_row_avx512(const float *src, float *dst, int64_t C) {
    const float m = row_max_avx512(src, C);
    const __m512 vm = _mm512_set1_ps(m);
    __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
    int64_t c = 0;
    for (; c + 16 <= C; c += 16) {
        const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(src + c), vm));
        _mm512_storeu_ps(dst + c, e);
        acc0 = _mm512_add_pd(acc0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        acc1 = _mm512_add_pd(acc1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
    }
    if (c < C) {
        const __mmask16 k = static_cast<__mmask16>((1u << (C - c)) - 1);
        const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, src + c), vm));
        _mm512_mask_storeu_ps(dst + c, k, e);
        const __m512 ez = _mm512_maskz_mov_ps(k, e);
        acc0 = _mm512_add_pd(acc0, _mm512_cvtps_pd(_mm512_castps512_ps256(ez)));
        acc1 = _mm512_add_pd(acc1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(ez), 1))));
    }
    const double sum = _mm512_reduce_add_pd(_mm512_add_pd(acc0, acc1));
    const __m512d vs = _mm512_set1_pd(sum);
    int64_t i = 0;
    for (; i + 8 <= C; i += 8)
        _mm256_storeu_ps(dst + i, _mm512_cvtpd_ps(_mm512_div_pd(_mm512_cvtps_pd(_mm256_loadu_ps(dst + i)), vs)));
    for (; i < C; ++i) dst[i] = static_cast<float>(dst[i] / sum);
}

void softmax(const node &n, const ft &x, ft &o) {
    const int64_t ax = axis_of(n.attr.axis, x.shape.size());
    const int64_t inner = inner_of(x.shape, ax), C = x.shape[ax];
    const int64_t outer = static_cast<int64_t>(x.data.size()) / std::max<int64_t>(C * inner, 1);
    static const bool avx512 = __builtin_cpu_supports("avx512f");
    if (inner == 1 && avx512 && C >= 16) { // rows along the last axis
        impl::parallel_for_if(outer * C >= kParallelMin, outer,
                              [&](int64_t j) { softmax_row_avx512(x.data.data() + j * C, o.data.data() + j * C, C); });
        return;
    }
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

// ConvTranspose: y[n, oc, oh, ow] = Σ x[n, ic, ih, iw] · w[ic, oc mod OCg, kh, kw]
// over the ic of oc's group, kh and kw with ih·sh − pt + kh·dh = oh and
// iw·sw − pl + kw·dw = ow, summed in f32 in the order ic, kh, kw (ascending),
// from 0 (output_padding's positions that no input reaches stay 0).
void conv_transpose(const node &n, const ft &x, const ft &w, ft &o) {
    const auto &a = n.attr;
    const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
    const int64_t OC = o.shape[1], OH = o.shape[2], OW = o.shape[3];
    const int64_t G = a.group, Cg = C / G, OCg = OC / G, KH = w.shape[2], KW = w.shape[3];
    const int64_t sh = a.strides[0], sw = a.strides[1], dh = a.dilations[0], dw = a.dilations[1];
    const int64_t pt = a.pads_begin[0], pl = a.pads_begin[1];
    const int64_t work = N * OC * OH * OW * Cg * KH * KW;
    impl::parallel_for_if(work >= kParallelMin, N * OC, [&](int64_t job) {
        const int64_t b = job / OC, oc = job % OC, g = oc / OCg, ocg = oc % OCg;
        float *y = o.data.data() + job * OH * OW;
        for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ow = 0; ow < OW; ++ow) {
                float s = 0.f;
                for (int64_t ic = g * Cg; ic < (g + 1) * Cg; ++ic) {
                    const float *xc = x.data.data() + (b * C + ic) * H * W;
                    const float *wc = w.data.data() + (ic * OCg + ocg) * KH * KW;
                    for (int64_t kh = 0; kh < KH; ++kh) {
                        const int64_t th = oh + pt - kh * dh;
                        if (th < 0 || th % sh || th / sh >= H) continue;
                        for (int64_t kw = 0; kw < KW; ++kw) {
                            const int64_t tw = ow + pl - kw * dw;
                            if (tw < 0 || tw % sw || tw / sw >= W) continue;
                            s += xc[(th / sh) * W + tw / sw] * wc[kh * KW + kw];
                        }
                    }
                }
                y[oh * OW + ow] = s;
            }
    });
}

// Reference evaluation of an op that computes in f32 (o: the output's f32 view).
// LookupTable on plain values: o[i] = table[a[i]] or table[a[i]·256 + b[j]],
// b's element j the one numpy broadcasting pairs with a's element i.
void lookup_table(const std::vector<const tensor *> &in, tensor &o) {
    const uint8_t *table = in.back()->bytes.data();
    const uint8_t *a = in[0]->bytes.data();
    const int64_t n = o.elems();
    if (in.size() == 2 && in.back()->elems() == 256) {
        detail::lut_unary(a, n, table, o.bytes.data());
        return;
    }
    if (in.size() == 2) { // a table per channel of a 4-D a (plain)
        const int64_t C = o.shape[1], HW = o.shape[2] * o.shape[3];
        detail::lut_per_channel(a, o.shape[0], C, HW, false, table, o.bytes.data());
        return;
    }
    const std::vector<int64_t> bs = detail::bstrides(in[1]->shape, o.shape), os = detail::strides_of(o.shape);
    const uint8_t *b = in[1]->bytes.data();
    for (int64_t i = 0; i < n; ++i) {
        int64_t j = 0;
        for (size_t d = 0; d < os.size(); ++d) j += (i / os[d]) % o.shape[d] * bs[d];
        o.bytes[i] = table[(unsigned(a[i]) << 8) | b[j]];
    }
}

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
    case op::DequantizeLinear:
    case op::LookupTable:
    case op::Slice:
    case op::Pad:
    case op::DepthToSpace:
    case op::Resize: break; // on typed storage: eval()
    case op::Subtract: binary(*in[0], *in[1], o, [](float a, float b) { return a - b; }); break;
    case op::Multiply: binary(*in[0], *in[1], o, [](float a, float b) { return a * b; }); break;
    case op::Add: binary(*in[0], *in[1], o, [](float a, float b) { return a + b; }); break;
    case op::Divide: binary(*in[0], *in[1], o, [](float a, float b) { return a / b; }); break;
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
    case op::Sqrt:
        for (size_t i = 0; i < o.data.size(); ++i) o.data[i] = std::sqrt(in[0]->data[i]);
        break;
    case op::ConvTranspose: conv_transpose(n, *in[0], *in[1], o); break;
    case op::Erf:
        for (size_t i = 0; i < o.data.size(); ++i) o.data[i] = std::erf(in[0]->data[i]);
        break;
    case op::Tanh:
        for (size_t i = 0; i < o.data.size(); ++i) o.data[i] = std::tanh(in[0]->data[i]);
        break;
    case op::QConvolution: fail(n.where(), "QConvolution runs on its compiled primitive only"); break;
    }
}

} // namespace

namespace detail {

conv_desc f32_conv_desc(const node &n) {
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

void run_f32_conv(const convolution_f32 &c, const tensor &x, tensor &o, int threads) {
    if (x.order == layout::nhwc || o.order == layout::nhwc) {
        // An f32 island kept NHWC (executor): the primitive's own layout on
        // the NHWC side, one tiled transpose on the other.
        if (x.type != dtype::f32 || o.type != dtype::f32) fail("convolution", "NHWC operands must be f32");
        const tensor xn = x.order == layout::nhwc ? tensor() : x.to_layout(layout::nhwc);
        const float *src = x.order == layout::nhwc ? x.f32() : xn.f32();
        if (o.order == layout::nhwc) {
            c.execute(src, o.f32(), threads);
            return;
        }
        tensor yn(o.type, o.shape);
        yn.order = layout::nhwc;
        c.execute(src, yn.f32(), threads);
        o.bytes = yn.to_layout(layout::plain).bytes;
        return;
    }
    const ft xv = view(x);
    ft y = out_view(o);
    convolution_nchw(xv, y, [&](const float *src, float *dst) { c.execute(src, dst, threads); });
    commit(y, o);
}

// MaxPool of u8/i8 integers held NHWC (a lowered convolution's output): the
// maximum over the window's valid positions, on the integers themselves (max
// commutes with the dequantization, and an integer is its own f32 value), the
// output NHWC for the next int8 convolution. The same values as pool()
// (graph/ops/glue_kernels.cpp: vectorized over the channels).
void max_pool_nhwc_node(const node &n, const tensor &x, tensor &o) {
    detail::pool_geometry p;
    p.N = x.shape[0], p.C = x.shape[1], p.H = x.shape[2], p.W = x.shape[3];
    p.OH = o.shape[2], p.OW = o.shape[3];
    p.KH = n.attr.kernel[0], p.KW = n.attr.kernel[1], p.SH = n.attr.strides[0], p.SW = n.attr.strides[1];
    p.PT = n.pads_b[0], p.PL = n.pads_b[1];
    if (x.type != dtype::f32) {
        max_pool_nhwc_8bit(p, x.type == dtype::s8, x.bytes.data(), o.bytes.data());
        return;
    }
    // f32: per output pixel and channel the plain loop's maximum — the window's
    // first valid element, then std::max with the others in (h, w) order
    // (the same NaN handling); a window with no valid element gives 0.
    const int64_t C = p.C;
    impl::parallel_for_2d_if(elems_of(o.shape) * p.KH * p.KW >= kParallelMin, p.N * p.OH, p.OW,
                             [&](int64_t noh, int64_t ow) {
                                 const int64_t b = noh / p.OH, oh = noh % p.OH;
                                 const int64_t h0 = oh * p.SH - p.PT, w0 = ow * p.SW - p.PL;
                                 const int64_t ha = std::max<int64_t>(h0, 0), hb = std::min(h0 + p.KH, p.H);
                                 const int64_t wa = std::max<int64_t>(w0, 0), wb = std::min(w0 + p.KW, p.W);
                                 float *y = o.f32() + (noh * p.OW + ow) * C;
                                 if (ha >= hb || wa >= wb) {
                                     std::fill(y, y + C, 0.f);
                                     return;
                                 }
                                 const float *src = x.f32() + b * p.H * p.W * C;
                                 std::copy(src + (ha * p.W + wa) * C, src + (ha * p.W + wa + 1) * C, y);
                                 for (int64_t h = ha; h < hb; ++h)
                                     for (int64_t w = wa; w < wb; ++w) {
                                         const float *v = src + (h * p.W + w) * C;
                                         for (int64_t c = 0; c < C; ++c) y[c] = std::max(y[c], v[c]);
                                     }
                             });
}

// Whether QDQ reads or writes a 4-D u8/i8 tensor held NHWC itself (the
// layout change fused into its loop): per tensor, or per channel (axis 1).
bool qdq_takes_nhwc(const node &n) {
    const node &x = *n.inputs[0];
    const bool q = n.kind == op::QuantizeLinear && x.out_type == dtype::f32 &&
                   (n.out_type == dtype::u8 || n.out_type == dtype::s8);
    const bool dq = n.kind == op::DequantizeLinear && n.out_type == dtype::f32 &&
                    (x.out_type == dtype::u8 || x.out_type == dtype::s8);
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
void eval_node_into(const node &n, const std::vector<const tensor *> &in, tensor &o) {
    std::vector<tensor> plain; // inputs in another layout, made plain
    std::vector<const tensor *> ins = in;
    const bool nhwc_qdq = (n.kind == op::QuantizeLinear || n.kind == op::DequantizeLinear) && qdq_takes_nhwc(n);
    // NHWC in and out: a DequantizeLinear into an f32 island, a per-tensor
    // QuantizeLinear out of one (the executor decides; qdq() checks the rest).
    const bool same_nhwc = nhwc_qdq && o.order == layout::nhwc && in[0]->order == layout::nhwc;
    if (o.order != layout::plain && !(nhwc_qdq && n.kind == op::QuantizeLinear) && !same_nhwc)
        fail(n.where(), "output in layout " + std::string(to_string(o.order)));
    for (size_t k = 0; k < ins.size(); ++k)
        if (ins[k]->order != layout::plain && !(k == 0 && nhwc_qdq && n.kind == op::DequantizeLinear) &&
            !(k == 0 && same_nhwc)) {
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
    case op::Slice: detail::slice(n, *ins[0], o); return;
    case op::Pad: detail::pad(n, *ins[0], o); return;
    case op::Resize: detail::resize(n, *ins[0], o); return;
    case op::DepthToSpace: detail::depth_to_space(n, *ins[0], o); return;
    case op::QuantizeLinear:
    case op::DequantizeLinear: qdq(n, ins, o); return;
    case op::LookupTable: lookup_table(ins, o); return;
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

shape_t nhwc_dims(const tensor &t) {
    if (t.order == layout::nhwc) return {t.shape[0], t.shape[2], t.shape[3], t.shape[1]};
    if (t.shape.size() > 4) return {};
    shape_t s(4 - t.shape.size(), 1);
    s.insert(s.end(), t.shape.begin(), t.shape.end());
    if (s[1] != 1 && s[2] * s[3] != 1) return {};
    return {s[0], s[2], s[3], s[1]};
}

void eval_elementwise_nhwc(const node &n, const std::vector<const tensor *> &in, tensor &o) {
    if (o.order != layout::nhwc || o.type != dtype::f32) fail(n.where(), "NHWC elementwise: f32 NHWC output");
    std::vector<ft> views(in.size());
    std::vector<const ft *> vin;
    for (size_t k = 0; k < in.size(); ++k) {
        const tensor &t = *in[k];
        views[k].shape = nhwc_dims(t);
        if (t.type != dtype::f32 || views[k].shape.empty())
            fail(n.where(), "NHWC elementwise: input " + std::to_string(k) + " is not an f32 NHWC view");
        views[k].data = {const_cast<float *>(t.f32()), static_cast<size_t>(t.elems())};
        vin.push_back(&views[k]);
    }
    ft out;
    out.shape = nhwc_dims(o);
    out.data = {o.f32(), static_cast<size_t>(o.elems())};
    eval_f32(n, vin, out);
}

bool reduce_mean_takes_nhwc(const node &n) {
    if (n.kind != op::ReduceMean || n.out_type != dtype::f32 || n.inputs[0]->out_type != dtype::f32 ||
        n.inputs[0]->out_shape.size() != 4)
        return false;
    std::vector<bool> red(4, false);
    for (int64_t a : n.attr.axes) red[axis_of(a, 4)] = true;
    return red == std::vector<bool>{false, false, true, true};
}

void reduce_mean_hw_nhwc(const tensor &x, tensor &o) {
    const int64_t N = x.shape[0], C = x.shape[1], HW = x.shape[2] * x.shape[3];
    if (x.order != layout::nhwc || x.type != dtype::f32 || o.type != dtype::f32 || o.elems() != N * C)
        fail("ReduceMean", "NHWC mean: f32 [N, C, H, W] in NHWC, N·C outputs");
    const float *px = x.f32();
    float *y = o.f32();
    std::vector<double> acc(static_cast<size_t>(C));
    for (int64_t b = 0; b < N; ++b) {
        std::fill(acc.begin(), acc.end(), 0.0);
        // Per channel the pixels in order: the plain loop's sums, in parallel chains.
        for (int64_t p = 0; p < HW; ++p) {
            const float *v = px + (b * HW + p) * C;
            for (int64_t c = 0; c < C; ++c) acc[c] += v[c];
        }
        for (int64_t c = 0; c < C; ++c) y[b * C + c] = static_cast<float>(acc[c] / static_cast<double>(HW));
    }
}

void concat_nhwc(const std::vector<const tensor *> &in, tensor &o) {
    const int64_t es = bits_of(o.type) / 8, C = o.shape[1];
    const int64_t pixels = o.shape[0] * o.shape[2] * o.shape[3];
    int64_t sum = 0;
    for (const tensor *t : in) {
        if (t->order != layout::nhwc || t->type != o.type || bits_of(o.type) < 8)
            fail("Concat", "NHWC inputs of the output's type");
        sum += t->shape[1];
    }
    if (o.order != layout::nhwc || sum != C) fail("Concat", "NHWC output along C");
    impl::parallel_for_if(pixels * C >= kParallelMin, pixels, [&](int64_t p) {
        int64_t at = 0;
        for (const tensor *t : in) {
            const int64_t ck = t->shape[1];
            std::memcpy(o.bytes.data() + (p * C + at) * es, t->bytes.data() + p * ck * es,
                        static_cast<size_t>(ck * es));
            at += ck;
        }
    });
}

namespace {

// One op of a region on whole chunks: y = a op b, or y = f(a). The same
// arithmetic as eval_f32 (each result rounded once, no contraction across
// ops), written as plain loops that the compiler vectorizes for the widest
// unit the CPU has (Sigmoid's std::exp stays a call per element).
enum class region_kind { add, sub, mul, div, relu, clamp, sigmoid };
__attribute__((always_inline)) inline void region_loop(region_kind k, const float *a, const float *b, bool b_one,
                                                       float lo, float hi, float *y, int64_t n) {
    if (b_one) { // b one value (a register, not a repeated chunk)
        const float s = *b;
        switch (k) {
        case region_kind::add:
            for (int64_t i = 0; i < n; ++i) y[i] = a[i] + s;
            return;
        case region_kind::sub:
            for (int64_t i = 0; i < n; ++i) y[i] = a[i] - s;
            return;
        case region_kind::mul:
            for (int64_t i = 0; i < n; ++i) y[i] = a[i] * s;
            return;
        case region_kind::div:
            for (int64_t i = 0; i < n; ++i) y[i] = a[i] / s;
            return;
        default: break;
        }
    }
    switch (k) {
    case region_kind::add:
        for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
        break;
    case region_kind::sub:
        for (int64_t i = 0; i < n; ++i) y[i] = a[i] - b[i];
        break;
    case region_kind::mul:
        for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
        break;
    case region_kind::div:
        for (int64_t i = 0; i < n; ++i) y[i] = a[i] / b[i];
        break;
    case region_kind::relu:
        for (int64_t i = 0; i < n; ++i) y[i] = std::max(a[i], 0.f);
        break;
    case region_kind::clamp:
        for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(a[i], lo), hi);
        break;
    case region_kind::sigmoid:
        for (int64_t i = 0; i < n; ++i) y[i] = 1.f / (1.f + std::exp(-a[i]));
        break;
    }
}
__attribute__((target("avx512f"))) void region_loop_avx512(region_kind k, const float *a, const float *b, bool b_one,
                                                           float lo, float hi, float *y, int64_t n) {
    region_loop(k, a, b, b_one, lo, hi, y, n);
}
__attribute__((target("avx2"))) void region_loop_avx2(region_kind k, const float *a, const float *b, bool b_one,
                                                      float lo, float hi, float *y, int64_t n) {
    region_loop(k, a, b, b_one, lo, hi, y, n);
}
void region_loop_any(region_kind k, const float *a, const float *b, bool b_one, float lo, float hi, float *y,
                     int64_t n) {
    static const int level = __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
    if (level == 2) region_loop_avx512(k, a, b, b_one, lo, hi, y, n);
    else if (level == 1) region_loop_avx2(k, a, b, b_one, lo, hi, y, n);
    else region_loop(k, a, b, b_one, lo, hi, y, n);
}

region_kind region_kind_of(const node &x) {
    switch (x.kind) {
    case op::Add: return region_kind::add;
    case op::Subtract: return region_kind::sub;
    case op::Multiply: return region_kind::mul;
    case op::Divide: return region_kind::div;
    case op::Relu: return region_kind::relu;
    case op::Clamp: return region_kind::clamp;
    case op::Sigmoid: return region_kind::sigmoid;
    default: fail(x.where(), std::string("elementwise region: ") + to_string(x.kind) + " is not a region op");
    }
}

// How an external input of an elementwise region broadcasts onto its
// [N, C, H, W] output: the whole shape, one value, one per channel, one per
// image and channel.
enum class reach { full, one, channel, image_channel };

reach reach_of(const shape_t &s, const shape_t &out) {
    if (s == out) return reach::full;
    if (elems_of(s) == 1) return reach::one;
    return s.size() == 4 && s[0] == out[0] && out[0] != 1 ? reach::image_channel : reach::channel;
}

// A region's values by index: its operands from outside (0 .. E−1), then its
// nodes' outputs.
struct region_plan {
    struct operand {
        reach r;
        const float *base;
        std::vector<float> repeated; // one value, or one per channel of NHWC chunks: a whole chunk of it
    };
    struct step {
        region_kind k;
        int a, b; // value indices (b −1: unary)
        float lo, hi;
        bool b_one; // b is one value (read as such)
        int buf;    // the scratch chunk its output goes to (the last step: the output)
    };
    std::vector<operand> ops;
    std::vector<step> steps;
    int bufs = 0; // scratch chunks for the steps' outputs, reused once a value is read for the last time
};

region_plan plan_region(const std::vector<const node *> &nodes, const std::map<const node *, const tensor *> &ext,
                        const shape_t &S, bool nhwc, int64_t longest) {
    region_plan P;
    std::map<const node *, int> index;
    for (const auto &[x, v] : ext) {
        index[x] = static_cast<int>(P.ops.size());
        region_plan::operand o{reach_of(v->shape, S), v->f32(), {}};
        if (o.r == reach::one) o.repeated.assign(static_cast<size_t>(longest), o.base[0]);
        else if (nhwc && o.r == reach::channel)
            for (int64_t i = 0; i < longest; i += S[1]) o.repeated.insert(o.repeated.end(), o.base, o.base + S[1]);
        P.ops.push_back(std::move(o));
    }
    const int E = static_cast<int>(P.ops.size());
    std::vector<int> last(E + nodes.size(), -1); // the step reading each value last
    for (size_t k = 0; k < nodes.size(); ++k) {
        const node &x = *nodes[k];
        const int b = x.inputs.size() > 1 ? index.at(x.inputs[1]) : -1;
        P.steps.push_back({region_kind_of(x), index.at(x.inputs[0]), b, static_cast<float>(x.attr.clamp_min),
                           static_cast<float>(x.attr.clamp_max), b >= 0 && b < E && P.ops[b].r == reach::one, -1});
        index[&x] = E + static_cast<int>(k);
        last[P.steps[k].a] = static_cast<int>(k);
        if (b >= 0) last[b] = static_cast<int>(k);
    }
    std::vector<int> free_bufs;
    for (size_t k = 0; k + 1 < P.steps.size(); ++k) {
        region_plan::step &st = P.steps[k];
        // a buffer whose value this step reads last is free once the step has read it (elementwise, in place)
        for (int v : {st.a, st.b})
            if (v >= E && last[v] == static_cast<int>(k)) free_bufs.push_back(P.steps[v - E].buf);
        if (free_bufs.empty()) st.buf = P.bufs++;
        else st.buf = free_bufs.back(), free_bufs.pop_back();
    }
    return P;
}

} // namespace

bool region_operand(const shape_t &s, const shape_t &out) {
    if (s == out || (elems_of(s) == 1 && s.size() <= 4)) return true;
    if (out.size() != 4 || s.size() < 3 || s.size() > 4 || s[s.size() - 3] != out[1] || s[s.size() - 2] != 1 ||
        s[s.size() - 1] != 1)
        return false;
    return s.size() == 3 || s[0] == 1 || s[0] == out[0];
}

void eval_region(const std::vector<const node *> &nodes, const std::map<const node *, const tensor *> &ext, tensor &o) {
    const shape_t &S = o.shape;
    const int64_t N = S[0], C = S[1], HW = S[2] * S[3], image = C * HW;
    const bool nhwc = o.order == layout::nhwc;
    // A chunk: about kChunk consecutive elements of one image (whole pixels
    // in NHWC), small enough that the region's values stay in L1/L2.
    constexpr int64_t kChunk = 1024;
    const int64_t longest = nhwc ? std::max<int64_t>(1, kChunk / C) * C : std::min(kChunk, image);
    const int64_t per_image = (image + longest - 1) / longest;
    const region_plan P = plan_region(nodes, ext, S, nhwc, longest);
    const size_t E = P.ops.size(), K = P.steps.size(), B = static_cast<size_t>(P.bufs);
    impl::parallel_for_if(N * image >= kParallelMin, N * per_image, [&](int64_t t) {
        const int64_t n = t / per_image, first = t % per_image * longest;
        const int64_t len = std::min(longest, image - first);
        // Scratch of this thread, kept from call to call: a chunk per value.
        thread_local std::vector<float> scratch;
        if (scratch.size() < (E + B) * static_cast<size_t>(longest)) scratch.resize((E + B) * longest);
        std::vector<const float *> at(E + K);
        for (size_t e = 0; e < E; ++e) {
            const region_plan::operand &op = P.ops[e];
            float *b = scratch.data() + (B + e) * longest;
            if (op.r == reach::full) at[e] = op.base + n * image + first;
            else if (!op.repeated.empty()) at[e] = op.repeated.data();
            else if (nhwc) { // one per image and channel
                for (int64_t i = 0; i < len; i += C) std::copy(op.base + n * C, op.base + n * C + C, b + i);
                at[e] = b;
            } else { // plane by plane, each its channel's value
                const float *row = op.base + (op.r == reach::image_channel ? n * C : 0);
                for (int64_t i = 0; i < len;) {
                    const int64_t pos = first + i, run = std::min(len - i, HW - pos % HW);
                    std::fill(b + i, b + i + run, row[pos / HW]);
                    i += run;
                }
                at[e] = b;
            }
        }
        for (size_t k = 0; k < K; ++k) {
            const region_plan::step &st = P.steps[k];
            float *y = k + 1 == K ? o.f32() + n * image + first : scratch.data() + st.buf * longest;
            const float *b = st.b < 0 ? nullptr : st.b_one ? P.ops[st.b].base : at[st.b];
            region_loop_any(st.k, at[st.a], b, st.b_one, st.lo, st.hi, y, len);
            at[E + k] = y;
        }
    });
}

void eval_node(const node &n, const std::vector<const tensor *> &in, tensor &o) {
    o = tensor(n.out_type, n.out_shape);
    eval_node_into(n, in, o);
}

namespace {
bool fold(const node *x, const fold_limits &lim, int level, std::map<const node *, tensor> *memo) {
    if (memo && memo->count(x)) return true;
    if (x->kind == op::Constant) {
        if (!x->data) return false;
        if (memo) (*memo)[x] = constant_value(*x);
        return true;
    }
    if (level >= lim.levels || x->kind == op::Parameter || x->kind == op::QConvolution || x->inputs.empty() ||
        elems_of(x->out_shape) > lim.max_elems)
        return false;
    for (const node *i : x->inputs)
        if (!fold(i, lim, level + 1, memo)) return false;
    if (memo) {
        std::vector<const tensor *> in;
        for (const node *i : x->inputs) in.push_back(&memo->at(i));
        tensor o;
        eval_node(*x, in, o);
        (*memo)[x] = std::move(o);
    }
    return true;
}
} // namespace

bool fold_constant(const node *x, const fold_limits &lim, std::map<const node *, tensor> *memo) {
    return fold(x, lim, 0, memo);
}

} // namespace detail

} // namespace qconv::graph
