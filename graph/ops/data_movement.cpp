// Ops that move elements, on typed storage (every type but u4/i4, exact):
// Slice, Pad (constant, edge, reflect, wrap), DepthToSpace and Resize
// (nearest; linear computes in f32). Their geometry (slice_of, pad_shape, resize_shape) is
// shape inference's (graph/ir/infer.cpp); docs/graph.md, "IR".
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/parallel.h"
#include "graph/ir/detail.h"
#include "graph/ops/ops.h"
#include "qconv/graph.h"

namespace qconv::graph::detail {

namespace {

constexpr int64_t kParallelMin = 1 << 16;

// Copies o's elements from x: element o[i] is x[offset(i)] where offset is
// `base` plus Σ idx[d]·stride[d] over i's row-major index idx in `os` (o's
// storage viewed in that shape).
void gather_strided(const tensor &x, tensor &o, int64_t base, const std::vector<int64_t> &stride, const shape_t &os) {
    const int64_t es = bits_of(o.type) / 8;
    const size_t r = os.size();
    const int64_t inner = r ? os[r - 1] : 1, total = elems_of(os), rows = inner ? total / inner : 0;
    const int64_t step = r ? stride[r - 1] : 0;
    const uint8_t *src = x.bytes.data();
    uint8_t *dst = o.bytes.data();
    impl::parallel_for_if(total >= kParallelMin, rows, [&](int64_t j) {
        int64_t rem = j, off = base;
        for (int d = static_cast<int>(r) - 2; d >= 0; --d) {
            off += (rem % os[d]) * stride[d];
            rem /= os[d];
        }
        uint8_t *y = dst + j * inner * es;
        if (step == 1) {
            std::memcpy(y, src + off * es, static_cast<size_t>(inner * es));
            return;
        }
        for (int64_t i = 0; i < inner; ++i) std::memcpy(y + i * es, src + (off + i * step) * es, es);
    });
}

} // namespace

void slice(const node &n, const tensor &x, tensor &o) {
    const slice_geometry g = slice_of(n, x.shape);
    const auto is = strides_of(x.shape);
    int64_t base = 0;
    std::vector<int64_t> stride(is.size());
    for (size_t d = 0; d < is.size(); ++d) {
        base += g.first[d] * is[d];
        stride[d] = g.step[d] * is[d];
    }
    gather_strided(x, o, base, stride, o.shape);
}

namespace {
// count copies of `size` bytes, the i-th from src + i·src_step to dst +
// i·dst_step; runs of 1, 2, 4 or 8 bytes (one channel of a 2x2 block) as
// fixed-size copies.
void copy_runs(uint8_t *dst, int64_t dst_step, const uint8_t *src, int64_t src_step, int64_t count, size_t size) {
    const auto runs = [&](auto n) {
        for (int64_t i = 0; i < count; ++i) std::memcpy(dst + i * dst_step, src + i * src_step, n);
    };
    switch (size) {
    case 1: runs(std::integral_constant<size_t, 1>()); break;
    case 2: runs(std::integral_constant<size_t, 2>()); break;
    case 4: runs(std::integral_constant<size_t, 4>()); break;
    case 8: runs(std::integral_constant<size_t, 8>()); break;
    default: runs(size);
    }
}
} // namespace

// The output viewed as [N, C, H, bh, W, bw] (plain) or [N, H, bh, W, bw, C]
// (NHWC; DCR: [N, H, bh, W, bw·C], each block row one copy), read with the
// input channel's strides of the mode.
void depth_to_space(const node &n, const tensor &x, tensor &o) {
    const int64_t N = x.shape[0], CI = x.shape[1], H = x.shape[2], W = x.shape[3];
    const int64_t bh = n.attr.block[0], bw = n.attr.block[1], C = CI / (bh * bw), HW = H * W;
    if (x.order != o.order || bits_of(x.type) < 8) fail_node(n, "input and output in one layout, whole bytes");
    // Strides of c, a, b in input channels.
    const int64_t sc = n.attr.crd ? bh * bw : 1, sa = n.attr.crd ? bw : bw * C, sb = n.attr.crd ? 1 : C;
    if (x.order == layout::plain && n.attr.crd) {
        gather_strided(x, o, 0, {CI * HW, sc * HW, W, sa * HW, 1, sb * HW}, {N, C, H, bh, W, bw});
        return;
    }
    if (x.order == layout::plain) { // DCR: each output row interleaves bw input rows
        const int64_t es = bits_of(x.type) / 8;
        impl::parallel_for_if(elems_of(o.shape) >= kParallelMin, N * C * H * bh, [&](int64_t r) {
            const int64_t a = r % bh, h = r / bh % H, c = r / (bh * H) % C, nn = r / (bh * H * C);
            uint8_t *dst = o.bytes.data() + r * W * bw * es;
            for (int64_t b = 0; b < bw; ++b) {
                const uint8_t *src = x.bytes.data() + ((nn * CI + (a * bw + b) * C + c) * HW + h * W) * es;
                copy_runs(dst + b * es, bw * es, src, es, W, static_cast<size_t>(es));
            }
        });
        return;
    }
    if (x.order != layout::nhwc) fail_node(n, "an NCHW or NHWC input");
    if (n.attr.crd) {
        gather_strided(x, o, 0, {HW * CI, W * CI, sa, CI, sb, sc}, {N, H, bh, W, bw, C});
        return;
    }
    // DCR: output row (h·bh + a) is, per input pixel w, its bw·C channels from a·bw·C on.
    const int64_t es = bits_of(x.type) / 8, run = bw * C * es;
    impl::parallel_for_if(elems_of(o.shape) >= kParallelMin, N * H * bh, [&](int64_t r) {
        const int64_t nh = r / bh, a = r % bh;
        const uint8_t *src = x.bytes.data() + (nh * W * CI + a * bw * C) * es;
        copy_runs(o.bytes.data() + r * W * run, run, src, CI * es, W, static_cast<size_t>(run));
    });
}

namespace {
// The input index output index o of dim d reads (−1: the constant value).
int64_t pad_source(const std::string &mode, int64_t o, int64_t begin, int64_t dim) {
    const int64_t i = o - begin;
    if (i >= 0 && i < dim) return i;
    if (mode == "edge") return i < 0 ? 0 : dim - 1;
    if (mode == "reflect") return i < 0 ? -i : 2 * (dim - 1) - i;
    if (mode == "wrap") return ((i % dim) + dim) % dim;
    return -1;
}
} // namespace

// o[i] = x[source(i)] per dim: i − pads_begin inside x; outside it the
// constant value, the edge element, the mirror image about the edge element
// (reflect) or the index modulo the dim (wrap).
void pad(const node &n, const tensor &x, tensor &o) {
    const int64_t es = bits_of(o.type) / 8;
    const shape_t &xs = x.shape, &os = o.shape;
    const size_t r = os.size();
    const auto is = strides_of(xs);
    std::vector<std::vector<int64_t>> src_of(r); // per dim: output index → input index or −1
    for (size_t d = 0; d < r; ++d)
        for (int64_t i = 0; i < os[d]; ++i)
            src_of[d].push_back(pad_source(n.attr.padding, i, n.attr.pads_begin[d], xs[d]));
    uint8_t fill[8] = {};
    store(o.type, fill, 0, n.attr.pad_value);
    const int64_t inner = r ? os[r - 1] : 1, total = elems_of(os), rows = inner ? total / inner : 0;
    const uint8_t *src = x.bytes.data();
    uint8_t *dst = o.bytes.data();
    impl::parallel_for_if(total >= kParallelMin, rows, [&](int64_t j) {
        int64_t rem = j, off = 0;
        bool inside = true;
        for (int d = static_cast<int>(r) - 2; d >= 0; --d) {
            const int64_t i = src_of[d][rem % os[d]];
            rem /= os[d];
            inside &= i >= 0;
            off += i * is[d];
        }
        uint8_t *y = dst + j * inner * es;
        for (int64_t c = 0; c < inner; ++c) {
            const int64_t i = r ? src_of[r - 1][c] : 0;
            std::memcpy(y + c * es, inside && i >= 0 ? src + (off + i) * es : fill, static_cast<size_t>(es));
        }
    });
}

// ---------------------------------------------------------------- Resize
namespace {

// The scale of each of the last two dims (f32): the given one, or out / in.
float resize_scale(const node &n, int i, int64_t in, int64_t out) {
    return n.attr.scales.empty() ? static_cast<float>(out) / static_cast<float>(in)
                                 : static_cast<float>(n.attr.scales[i]);
}

// The input coordinate of output coordinate o (f32, each operation rounded
// once), as ONNX's coordinate_transformation_mode defines it.
float source_coordinate(const std::string &mode, int64_t o, int64_t in, int64_t out, float scale) {
    const float x = static_cast<float>(o);
    if (mode == "half_pixel") return (x + 0.5f) / scale - 0.5f;
    if (mode == "pytorch_half_pixel") return out > 1 ? (x + 0.5f) / scale - 0.5f : 0.f;
    if (mode == "align_corners") return out == 1 ? 0.f : x * static_cast<float>(in - 1) / static_cast<float>(out - 1);
    return x / scale; // asymmetric
}

// The nearest input index of a coordinate (its rounding per nearest_mode,
// then clamped to [0, in − 1]); exact in double.
int64_t nearest_index(const std::string &mode, float c, int64_t in) {
    const double x = c, f = std::floor(x), frac = x - f;
    double r;
    if (mode == "floor") r = f;
    else if (mode == "ceil") r = std::ceil(x);
    else if (frac == 0.5) r = mode == "round_prefer_ceil" ? f + 1 : f;
    else r = frac < 0.5 ? f : f + 1;
    return static_cast<int64_t>(std::clamp(r, 0.0, static_cast<double>(in - 1)));
}

// Linear interpolation along one dim: the two input indices and the weight
// of the second, the coordinate clamped to [0, in − 1].
struct linear_tap {
    int64_t i0, i1;
    float w;
};
linear_tap linear_at(float c, int64_t in) {
    const float x = std::clamp(c, 0.f, static_cast<float>(in - 1));
    const int64_t i0 = static_cast<int64_t>(std::floor(x));
    return {i0, std::min(i0 + 1, in - 1), x - static_cast<float>(i0)};
}

} // namespace

void resize(const node &n, const tensor &x, tensor &o) {
    const auto &a = n.attr;
    const size_t r = x.shape.size();
    const int64_t H = x.shape[r - 2], W = x.shape[r - 1], OH = o.shape[r - 2], OW = o.shape[r - 1];
    const int64_t planes = elems_of(x.shape) / (H * W);
    const float sh = resize_scale(n, 0, H, OH), sw = resize_scale(n, 1, W, OW);
    const bool linear = a.resize_mode == "linear";
    std::vector<int64_t> ny(OH), nx(OW);
    std::vector<linear_tap> ly(OH), lx(OW);
    for (int64_t i = 0; i < OH; ++i) {
        const float c = source_coordinate(a.coordinate_mode, i, H, OH, sh);
        if (linear) ly[i] = linear_at(c, H);
        else ny[i] = nearest_index(a.nearest_mode, c, H);
    }
    for (int64_t i = 0; i < OW; ++i) {
        const float c = source_coordinate(a.coordinate_mode, i, W, OW, sw);
        if (linear) lx[i] = linear_at(c, W);
        else nx[i] = nearest_index(a.nearest_mode, c, W);
    }
    if (!linear) {
        const int64_t es = bits_of(o.type) / 8;
        if (x.order == layout::nhwc) {
            // NHWC in and out (an f32 island): each output pixel copies its
            // source pixel's C channels.
            if (r != 4 || o.order != layout::nhwc) fail_node(n, "an NHWC input needs a 4-D NHWC output");
            const int64_t px = x.shape[1] * es;
            impl::parallel_for_if(elems_of(o.shape) >= kParallelMin, x.shape[0] * OH, [&](int64_t j) {
                const uint8_t *src = x.bytes.data() + ((j / OH) * H + ny[j % OH]) * W * px;
                uint8_t *y = o.bytes.data() + j * OW * px;
                for (int64_t c = 0; c < OW; ++c) std::memcpy(y + c * px, src + nx[c] * px, static_cast<size_t>(px));
            });
            return;
        }
        impl::parallel_for_if(elems_of(o.shape) >= kParallelMin, planes * OH, [&](int64_t j) {
            const uint8_t *src = x.bytes.data() + ((j / OH) * H + ny[j % OH]) * W * es;
            uint8_t *y = o.bytes.data() + j * OW * es;
            if (es == 4) { // 32-bit words moved as integers (the same bytes; a loop the compiler unrolls)
                uint32_t w;
                for (int64_t c = 0; c < OW; ++c) {
                    std::memcpy(&w, src + nx[c] * 4, 4);
                    std::memcpy(y + c * 4, &w, 4);
                }
                return;
            }
            for (int64_t c = 0; c < OW; ++c) std::memcpy(y + c * es, src + nx[c] * es, static_cast<size_t>(es));
        });
        return;
    }
    // (1 − w)·a + w·b along W on the two rows, then along H: f32, each operation rounded once.
    const std::vector<float> xv = x.to_f32();
    impl::parallel_for_if(elems_of(o.shape) >= kParallelMin, planes * OH, [&](int64_t j) {
        const linear_tap ty = ly[j % OH];
        const float *r0 = xv.data() + ((j / OH) * H + ty.i0) * W, *r1 = xv.data() + ((j / OH) * H + ty.i1) * W;
        for (int64_t c = 0; c < OW; ++c) {
            const linear_tap tx = lx[c];
            const float top = (1.f - tx.w) * r0[tx.i0] + tx.w * r0[tx.i1];
            const float bottom = (1.f - tx.w) * r1[tx.i0] + tx.w * r1[tx.i1];
            const float v = (1.f - ty.w) * top + ty.w * bottom;
            if (o.type == dtype::f32) std::memcpy(o.bytes.data() + (j * OW + c) * 4, &v, 4);
            else store(o.type, o.bytes.data(), j * OW + c, v);
        }
    });
}

} // namespace qconv::graph::detail
