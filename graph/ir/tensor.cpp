// The executor's typed tensor: storage, conversions and layout changes.
#include <algorithm>
#include <cstring>

#include "core/parallel.h"
#include "graph/ir/detail.h"
#include "qconv/graph.h"

namespace qconv::graph {

namespace {

constexpr int64_t kParallelMin = 1 << 16;

// dst (the input's dims permuted by perm, row-major) = src permuted; T is the
// element's storage word.
template <typename T>
void permute_words(const uint8_t *src, const shape_t &in, const std::vector<int64_t> &perm, uint8_t *dst) {
    const size_t r = perm.size();
    std::vector<int64_t> is(r, 1);
    for (int i = static_cast<int>(r) - 2; i >= 0; --i) is[i] = is[i + 1] * in[i + 1];
    shape_t out(r);
    for (size_t i = 0; i < r; ++i) out[i] = in[perm[i]];
    const int64_t total = elems_of(in);
    const int64_t inner = r ? out[r - 1] : 1, outer = inner ? total / inner : 0;
    const int64_t step = r ? is[perm[r - 1]] : 0;
    const T *s = reinterpret_cast<const T *>(src);
    T *d = reinterpret_cast<T *>(dst);
    impl::parallel_for_if(total >= kParallelMin, outer, [&](int64_t j) {
        int64_t rem = j, off = 0;
        for (int k = static_cast<int>(r) - 2; k >= 0; --k) {
            off += (rem % out[k]) * is[perm[k]];
            rem /= out[k];
        }
        T *y = d + j * inner;
        for (int64_t i = 0; i < inner; ++i) y[i] = s[off + i * step];
    });
}

// detail::transpose_tiled for words T.
template <typename T>
void transpose_words(const uint8_t *src, uint8_t *dst, int64_t batch, int64_t rows, int64_t cols) {
    constexpr int64_t kTile = 16;
    const T *x = reinterpret_cast<const T *>(src);
    T *y = reinterpret_cast<T *>(dst);
    const int64_t row_tiles = (rows + kTile - 1) / kTile;
    impl::parallel_for_if(batch * rows * cols >= kParallelMin, batch * row_tiles, [&](int64_t t) {
        const int64_t b = t / row_tiles, i0 = t % row_tiles * kTile, i1 = std::min(rows, i0 + kTile);
        const T *xb = x + b * rows * cols;
        T *yb = y + b * rows * cols;
        for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
            const int64_t j1 = std::min(cols, j0 + kTile);
            for (int64_t j = j0; j < j1; ++j)
                for (int64_t i = i0; i < i1; ++i) yb[j * rows + i] = xb[i * cols + j];
        }
    });
}

} // namespace

namespace detail {
void transpose_tiled(dtype t, const uint8_t *src, uint8_t *dst, int64_t batch, int64_t rows, int64_t cols) {
    switch (bits_of(t)) {
    case 8: transpose_words<uint8_t>(src, dst, batch, rows, cols); return;
    case 16: transpose_words<uint16_t>(src, dst, batch, rows, cols); return;
    case 32: transpose_words<uint32_t>(src, dst, batch, rows, cols); return;
    case 64: transpose_words<uint64_t>(src, dst, batch, rows, cols); return;
    default: fail("transpose", std::string(ir_name(t)) + " elements share bytes");
    }
}

void permute(dtype t, const uint8_t *src, const shape_t &in, const std::vector<int64_t> &perm, uint8_t *dst) {
    switch (bits_of(t)) {
    case 8: permute_words<uint8_t>(src, in, perm, dst); return;
    case 16: permute_words<uint16_t>(src, in, perm, dst); return;
    case 32: permute_words<uint32_t>(src, in, perm, dst); return;
    case 64: permute_words<uint64_t>(src, in, perm, dst); return;
    default: break;
    }
    // 4-bit elements share bytes: one element at a time, on one thread,
    // input offsets from the output's flat index.
    std::vector<int64_t> is(in.size(), 1);
    for (size_t k = in.size(); k-- > 1;) is[k - 1] = is[k] * in[k];
    const int64_t total = elems_of(in);
    for (int64_t j = 0; j < total; ++j) {
        int64_t rem = j, off = 0;
        for (size_t k = perm.size(); k-- > 0;) {
            const int64_t d = in[perm[k]];
            off += (rem % d) * is[perm[k]];
            rem /= d;
        }
        store(t, dst, j, load(t, src, off));
    }
}
} // namespace detail

const char *to_string(layout l) { return l == layout::nhwc ? "nhwc" : "plain"; }

tensor::tensor(dtype t, shape_t s, layout o) : type(t), shape(std::move(s)), order(o) {
    check_shape(shape, "tensor");
    if (o == layout::nhwc && shape.size() != 4)
        fail("tensor", "layout nhwc needs a 4-D shape, got " + to_string(shape));
    bytes.assign(storage_bytes(t, elems_of(shape)), 0);
}

tensor tensor::from_f32(dtype t, shape_t s, const std::vector<float> &v) {
    tensor r(t, std::move(s));
    if (static_cast<int64_t>(v.size()) != r.elems())
        fail("tensor", std::to_string(v.size()) + " values for shape " + to_string(r.shape));
    if (t == dtype::f32) std::memcpy(r.bytes.data(), v.data(), v.size() * sizeof(float));
    else
        for (size_t i = 0; i < v.size(); ++i) r.set(static_cast<int64_t>(i), v[i]);
    return r;
}

tensor tensor::from_values(dtype t, shape_t s, const std::vector<double> &v) {
    tensor r(t, std::move(s));
    if (static_cast<int64_t>(v.size()) != r.elems())
        fail("tensor", std::to_string(v.size()) + " values for shape " + to_string(r.shape));
    for (size_t i = 0; i < v.size(); ++i) r.set(static_cast<int64_t>(i), v[i]);
    return r;
}

double tensor::get(int64_t i) const { return detail::load(type, bytes.data(), i); }
void tensor::set(int64_t i, double v) { detail::store(type, bytes.data(), i, v); }

std::vector<double> tensor::values() const {
    const tensor &p = order == layout::plain ? *this : to_layout(layout::plain);
    std::vector<double> r(static_cast<size_t>(elems()));
    for (size_t i = 0; i < r.size(); ++i) r[i] = p.get(static_cast<int64_t>(i));
    return r;
}

std::vector<float> tensor::to_f32() const {
    if (order != layout::plain) return to_layout(layout::plain).to_f32();
    std::vector<float> r(static_cast<size_t>(elems()));
    if (static_cast<int64_t>(bytes.size()) != storage_bytes(type, elems()))
        fail("tensor", "holds " + std::to_string(bytes.size()) + " bytes, " + ir_name(type) + to_string(shape) +
                           " needs " + std::to_string(storage_bytes(type, elems())));
    if (type == dtype::f32) std::memcpy(r.data(), bytes.data(), r.size() * sizeof(float));
    else
        for (size_t i = 0; i < r.size(); ++i) r[i] = static_cast<float>(get(static_cast<int64_t>(i)));
    return r;
}

namespace detail {
tensor constant_value(const node &c) {
    tensor t(c.out_type, c.out_shape);
    t.bytes.assign(c.data->bytes.begin(), c.data->bytes.end()); // packed as the tensor's storage
    return t;
}
} // namespace detail

tensor tensor::to_layout(layout o) const {
    if (o == order) return *this;
    if (shape.size() != 4) fail("tensor", "layout nhwc needs a 4-D shape, got " + to_string(shape));
    tensor r(type, shape, o);
    const shape_t &s = shape;
    if (bits_of(type) == 8) {
        // Bytes (u8/i8 activations around the int8 convolutions): per image and
        // channel one contiguous plane of H·W on the plain side, a stride of C on
        // the NHWC side — no index arithmetic per element.
        const int64_t C = s[1], HW = s[2] * s[3];
        const uint8_t *src = bytes.data();
        uint8_t *dst = r.bytes.data();
        for (int64_t n = 0; n < s[0]; ++n)
            for (int64_t c = 0; c < C; ++c) {
                const int64_t plane = (n * C + c) * HW, base = n * HW * C + c;
                if (o == layout::nhwc)
                    for (int64_t i = 0; i < HW; ++i) dst[base + i * C] = src[plane + i];
                else
                    for (int64_t i = 0; i < HW; ++i) dst[plane + i] = src[base + i * C];
            }
        return r;
    }
    // Per image a [C, H·W] matrix transposed (to NHWC) or its transpose back.
    const int64_t rows = o == layout::nhwc ? s[1] : s[2] * s[3], cols = o == layout::nhwc ? s[2] * s[3] : s[1];
    if (bits_of(type) >= 16) {
        detail::transpose_tiled(type, bytes.data(), r.bytes.data(), s[0], rows, cols);
        return r;
    }
    if (o == layout::nhwc) detail::permute(type, bytes.data(), s, {0, 2, 3, 1}, r.bytes.data());
    else detail::permute(type, bytes.data(), {s[0], s[2], s[3], s[1]}, {0, 3, 1, 2}, r.bytes.data());
    return r;
}

const float *tensor::f32() const {
    if (type != dtype::f32) fail("tensor", std::string("f32() of a ") + ir_name(type) + " tensor");
    return reinterpret_cast<const float *>(bytes.data());
}
float *tensor::f32() {
    if (type != dtype::f32) fail("tensor", std::string("f32() of a ") + ir_name(type) + " tensor");
    return reinterpret_cast<float *>(bytes.data());
}

namespace detail {

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

} // namespace detail

} // namespace qconv::graph
