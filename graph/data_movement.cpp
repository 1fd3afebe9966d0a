// Ops that move elements without computing on them, on typed storage (every
// type but u4/i4, exact): Slice. Their geometry is shared by shape inference
// (graph/ir.cpp) and evaluation (graph/eval.cpp); docs/graph.md, "IR".
#include <algorithm>
#include <cstring>

#include "core/parallel.h"
#include "graph/detail.h"
#include "qconv/graph.h"

namespace qconv::graph::detail {

namespace {

constexpr int64_t kParallelMin = 1 << 16;

[[noreturn]] void bad(const node &n, const std::string &what) {
    fail(n.where(), std::string(to_string(n.kind)) + " '" + n.id + "': " + what);
}

// One Slice entry on a dim of size `dim`: the first index and the element
// count, as ONNX defines them (negative indices count from the end, then
// clamped: to [0, dim] for a positive step, to [0, dim−1] / [−1, dim−1]
// for a negative one).
void slice_axis(int64_t dim, int64_t s, int64_t e, int64_t step, int64_t *first, int64_t *count) {
    if (s < 0) s += dim; // no overflow: s < 0 < dim
    if (e < 0) e += dim;
    if (step > 0) {
        s = std::clamp<int64_t>(s, 0, dim);
        e = std::clamp<int64_t>(e, 0, dim);
    } else {
        s = std::clamp<int64_t>(s, 0, dim - 1);
        e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    const int64_t span = step > 0 ? e - s : s - e; // |span| <= dim + 1
    const uint64_t mag = step > 0 ? uint64_t(step) : uint64_t(0) - uint64_t(step);
    *first = s;
    *count = span <= 0 ? 0 : static_cast<int64_t>(1 + uint64_t(span - 1) / mag);
}

// Copies o's elements from x: element o[i] is x[offset(i)] where offset is
// `base` plus Σ idx[d]·stride[d] over o's row-major index idx.
void gather_strided(const tensor &x, tensor &o, int64_t base, const std::vector<int64_t> &stride) {
    const int64_t es = bits_of(o.type) / 8;
    const shape_t &os = o.shape;
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

slice_geometry slice_of(const node &n, const shape_t &in) {
    const auto &a = n.attr;
    const size_t r = in.size(), k = a.starts.size();
    if (bits_of(n.inputs[0]->out_type) == 4) bad(n, "4-bit data is not supported");
    if (k == 0) bad(n, "needs starts=[...] and ends=[...]");
    if (a.ends.size() != k) bad(n, "starts and ends differ in length");
    if (!a.axes.empty() && a.axes.size() != k) bad(n, "axes and starts differ in length");
    if (!a.steps.empty() && a.steps.size() != k) bad(n, "steps and starts differ in length");
    if (k > r) bad(n, std::to_string(k) + " entries for rank " + std::to_string(r));
    slice_geometry g;
    g.first.assign(r, 0);
    g.step.assign(r, 1);
    g.out = in;
    std::vector<bool> seen(r, false);
    for (size_t i = 0; i < k; ++i) {
        int64_t ax = a.axes.empty() ? static_cast<int64_t>(i) : a.axes[i];
        if (ax < -static_cast<int64_t>(r) || ax >= static_cast<int64_t>(r))
            bad(n, "axis " + std::to_string(ax) + " is out of range for rank " + std::to_string(r));
        if (ax < 0) ax += static_cast<int64_t>(r);
        if (seen[ax]) bad(n, "axis " + std::to_string(ax) + " is given twice");
        seen[ax] = true;
        const int64_t step = a.steps.empty() ? 1 : a.steps[i];
        if (step == 0) bad(n, "a step of 0");
        slice_axis(in[ax], a.starts[i], a.ends[i], step, &g.first[ax], &g.out[ax]);
        if (g.out[ax] == 0)
            bad(n, "the slice of axis " + std::to_string(ax) + " (size " + std::to_string(in[ax]) +
                       ") is empty: the IR has no empty tensors");
        g.step[ax] = g.out[ax] == 1 ? 1 : step; // |step| <= dim when two or more are taken
    }
    return g;
}

void slice(const node &n, const tensor &x, tensor &o) {
    const slice_geometry g = slice_of(n, x.shape);
    const auto is = strides_of(x.shape);
    int64_t base = 0;
    std::vector<int64_t> stride(is.size());
    for (size_t d = 0; d < is.size(); ++d) {
        base += g.first[d] * is[d];
        stride[d] = g.step[d] * is[d];
    }
    gather_strided(x, o, base, stride);
}

} // namespace qconv::graph::detail
