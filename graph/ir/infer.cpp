// Shape and type inference of every op (graph::infer, detail::infer_shapes),
// with the geometry of Slice, Pad and Resize that evaluation shares
// (graph/ops/data_movement.cpp); docs/graph.md, "IR".
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "graph/ir/detail.h"
#include "graph/ir/qconv_spec.h"
#include "qconv/graph.h"

namespace qconv::graph {

// -------------------------------------------------------- shape inference
namespace {
[[noreturn]] void bad(const node &n, const std::string &what) { detail::fail_node(n, what); }
void need_inputs(const node &n, size_t k) {
    if (n.inputs.size() != k)
        bad(n, "expects " + std::to_string(k) + " input(s), got " + std::to_string(n.inputs.size()));
}
shape_t broadcast(const node &n, const shape_t &a, const shape_t &b) {
    const size_t r = std::max(a.size(), b.size());
    shape_t o(r);
    for (size_t i = 0; i < r; ++i) {
        const int64_t da = i + a.size() >= r ? a[i + a.size() - r] : 1;
        const int64_t db = i + b.size() >= r ? b[i + b.size() - r] : 1;
        if (da != db && da != 1 && db != 1)
            bad(n, "shapes " + to_string(a) + " and " + to_string(b) + " do not broadcast");
        o[i] = da == 1 ? db : da;
    }
    return o;
}
void check_dims(const node &n, const shape_t &s, const char *what) {
    try {
        check_shape(s, what);
    } catch (const error &e) {
        bad(n, e.what());
    }
}
void infer_conv(node &n, int64_t) {
    need_inputs(n, 2);
    const bool grouped = n.kind == op::GroupConvolution;
    const shape_t &x = n.inputs[0]->out_shape, &w = n.inputs[1]->out_shape;
    if (x.size() != 4) bad(n, "data must be rank 4 (NCHW), got " + to_string(x));
    if (w.size() != (grouped ? 5u : 4u))
        bad(n, std::string("weights must be rank ") + (grouped ? "5 (GOIHW)" : "4 (OIHW)") + ", got " + to_string(w));
    const auto &a = n.attr;
    for (const auto *v : {&a.strides, &a.dilations, &a.pads_begin, &a.pads_end})
        if (v->size() != 2) bad(n, "strides, dilations and pads need 2 values");
    constexpr int64_t lim = int64_t(1) << 24;
    for (int i = 0; i < 2; ++i) {
        if (a.strides[i] <= 0 || a.strides[i] > lim) bad(n, "strides must be in [1, 2^24]");
        if (a.dilations[i] <= 0 || a.dilations[i] > lim) bad(n, "dilations must be in [1, 2^24]");
        if (a.pads_begin[i] < 0 || a.pads_end[i] < 0 || a.pads_begin[i] > lim || a.pads_end[i] > lim)
            bad(n, "pads must be in [0, 2^24]");
    }
    const int64_t G = grouped ? w[0] : 1;
    const int64_t oc = grouped ? w[0] * w[1] : w[0];
    const int64_t icg = grouped ? w[2] : w[1];
    if (x[1] != G * icg) bad(n, "input channels " + std::to_string(x[1]) + " do not match weights " + to_string(w));
    if (n.inputs[0]->out_type != n.inputs[1]->out_type) bad(n, "data and weights element types differ");
    const int64_t k[2] = {w[w.size() - 2], w[w.size() - 1]};
    n.pads_b.assign(2, 0);
    n.pads_e.assign(2, 0);
    shape_t o = {x[0], oc, 0, 0};
    for (int i = 0; i < 2; ++i) {
        const int64_t in = x[2 + i], ext = (k[i] - 1) * a.dilations[i] + 1, s = a.strides[i];
        if (a.auto_pad == pad_mode::same_upper || a.auto_pad == pad_mode::same_lower) {
            o[2 + i] = (in + s - 1) / s;
            const int64_t total = std::max<int64_t>(0, (o[2 + i] - 1) * s + ext - in);
            n.pads_b[i] = a.auto_pad == pad_mode::same_upper ? total / 2 : total - total / 2;
            n.pads_e[i] = total - n.pads_b[i];
        } else {
            if (a.auto_pad == pad_mode::explicit_pads) {
                n.pads_b[i] = a.pads_begin[i];
                n.pads_e[i] = a.pads_end[i];
            }
            const int64_t span = in + n.pads_b[i] + n.pads_e[i] - ext;
            if (span < 0) bad(n, "kernel larger than the padded input");
            o[2 + i] = span / s + 1;
        }
    }
    n.out_shape = o;
    n.out_type = n.inputs[0]->out_type;
}
void infer_matmul(node &n, int64_t) {
    need_inputs(n, 2);
    shape_t a = n.inputs[0]->out_shape, b = n.inputs[1]->out_shape;
    if (a.size() < 2 || b.size() < 2) bad(n, "inputs must have rank >= 2");
    if (n.attr.transpose_a) std::swap(a[a.size() - 1], a[a.size() - 2]);
    if (n.attr.transpose_b) std::swap(b[b.size() - 1], b[b.size() - 2]);
    if (a.back() != b[b.size() - 2])
        bad(n, "inner dimensions differ: " + to_string(n.inputs[0]->out_shape) + " x " +
                   to_string(n.inputs[1]->out_shape));
    if (n.inputs[0]->out_type != n.inputs[1]->out_type) bad(n, "input element types differ");
    shape_t ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
    shape_t o = broadcast(n, ba, bb);
    o.push_back(a[a.size() - 2]);
    o.push_back(b.back());
    n.out_shape = o;
    n.out_type = n.inputs[0]->out_type;
}
void infer_reshape(node &n, int64_t) {
    need_inputs(n, 1);
    const shape_t &in = n.inputs[0]->out_shape;
    shape_t o = n.attr.target;
    int infer_at = -1;
    int64_t known = 1;
    for (size_t i = 0; i < o.size(); ++i) {
        if (o[i] == 0 && n.attr.special_zero) {
            if (i >= in.size()) bad(n, "special_zero copies dimension " + std::to_string(i) + " the input lacks");
            o[i] = in[i];
        }
        if (o[i] == -1) {
            if (infer_at >= 0) bad(n, "more than one -1 in the target shape");
            infer_at = static_cast<int>(i);
            continue;
        }
        if (o[i] <= 0 || o[i] > max_elems)
            bad(n, "target shape " + to_string(n.attr.target) + " has an invalid dimension");
        if (o[i] > max_elems / known) bad(n, "target shape " + to_string(n.attr.target) + " is too large");
        known *= o[i];
    }
    const int64_t total = elems_of(in);
    if (infer_at >= 0) {
        if (total % known) bad(n, "cannot infer -1: " + to_string(in) + " to " + to_string(n.attr.target));
        o[infer_at] = total / known;
    }
    if (elems_of(o) != total) bad(n, "element counts differ: " + to_string(in) + " to " + to_string(o));
    n.out_shape = o;
    n.out_type = n.inputs[0]->out_type;
}
void infer_transpose(node &n, int64_t) {
    need_inputs(n, 1);
    const shape_t &in = n.inputs[0]->out_shape;
    const auto &p = n.attr.order;
    if (p.size() != in.size()) bad(n, "order " + to_string(p) + " does not match rank of " + to_string(in));
    std::vector<bool> seen(p.size(), false);
    shape_t o(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
        if (p[i] < 0 || p[i] >= static_cast<int64_t>(p.size()) || seen[p[i]])
            bad(n, "order " + to_string(p) + " is not a permutation");
        seen[p[i]] = true;
        o[i] = in[p[i]];
    }
    n.out_shape = o;
    n.out_type = n.inputs[0]->out_type;
}
bool is_float(dtype t) { return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16; }
void need_float(const node &n, size_t i, const char *what) {
    if (!is_float(n.inputs[i]->out_type))
        bad(n, std::string(what) + " must be f32, f16 or bf16, got " + ir_name(n.inputs[i]->out_type));
}
// An axis in [-rank, rank) (or [-rank, rank] with `inclusive`), normalized to [0, rank).
int64_t norm_axis(const node &n, int64_t axis, size_t rank, const char *what, bool inclusive = false) {
    const int64_t r = static_cast<int64_t>(rank);
    const int64_t hi = inclusive ? r : r - 1;
    if (axis < -r || axis > hi)
        bad(n, std::string(what) + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
    return axis < 0 ? axis + r : axis;
}
// MaxPool / AvgPool: NCHW data, 2-D window.
void infer_pool(node &n, int64_t) {
    need_inputs(n, 1);
    const shape_t &x = n.inputs[0]->out_shape;
    if (x.size() != 4) bad(n, "data must be rank 4 (NCHW), got " + to_string(x));
    if (n.inputs[0]->out_type == dtype::u4 || n.inputs[0]->out_type == dtype::s4) bad(n, "4-bit data is not supported");
    if (n.kind == op::AvgPool) need_float(n, 0, "data");
    const auto &a = n.attr;
    if (a.kernel.size() != 2) bad(n, "kernel needs 2 values (got " + to_string(a.kernel) + ")");
    for (const auto *v : {&a.strides, &a.pads_begin, &a.pads_end})
        if (v->size() != 2) bad(n, "strides and pads need 2 values");
    constexpr int64_t lim = int64_t(1) << 24;
    n.pads_b.assign(2, 0);
    n.pads_e.assign(2, 0);
    shape_t o = {x[0], x[1], 0, 0};
    for (int i = 0; i < 2; ++i) {
        const int64_t in = x[2 + i], k = a.kernel[i], s = a.strides[i];
        if (k <= 0 || k > lim) bad(n, "kernel must be in [1, 2^24]");
        if (s <= 0 || s > lim) bad(n, "strides must be in [1, 2^24]");
        if (a.pads_begin[i] < 0 || a.pads_end[i] < 0 || a.pads_begin[i] > lim || a.pads_end[i] > lim)
            bad(n, "pads must be in [0, 2^24]");
        if (a.auto_pad == pad_mode::same_upper || a.auto_pad == pad_mode::same_lower) {
            o[2 + i] = (in + s - 1) / s;
            const int64_t total = std::max<int64_t>(0, (o[2 + i] - 1) * s + k - in);
            n.pads_b[i] = a.auto_pad == pad_mode::same_upper ? total / 2 : total - total / 2;
            n.pads_e[i] = total - n.pads_b[i];
            continue;
        }
        if (a.auto_pad == pad_mode::explicit_pads) {
            n.pads_b[i] = a.pads_begin[i];
            n.pads_e[i] = a.pads_end[i];
        }
        const int64_t span = in + n.pads_b[i] + n.pads_e[i] - k;
        if (span < 0) bad(n, "kernel larger than the padded input");
        o[2 + i] = (a.ceil_mode ? (span + s - 1) / s : span / s) + 1;
    }
    n.out_shape = o;
    n.out_type = n.inputs[0]->out_type;
}
// QuantizeLinear / DequantizeLinear: scale (and zero point) per tensor or per axis.
// QConvolution(xq, w [, residual]): the problem gives the shapes; the
// inputs must agree with it.
void infer_qconv(node &n, int64_t) {
    if (n.inputs.size() != 2 && n.inputs.size() != 3) bad(n, "QConvolution needs 2 or 3 inputs");
    if (!n.attr.qconv) bad(n, "QConvolution has no problem (qconv)");
    const detail::qconv_spec &sp = *n.attr.qconv;
    try {
        sp.check("qconv");
    } catch (const error &e) {
        bad(n, e.what());
    }
    const conv_desc &d = sp.p.desc;
    const node &x = *n.inputs[0], &w = *n.inputs[1];
    const dtype st = sp.p.src_dt == dtype::u8 ? dtype::u8 : dtype::s8;
    if (x.out_type != st || x.out_shape != shape_t{d.mb, d.ic, d.ih, d.iw})
        bad(n, "source " + std::string(ir_name(x.out_type)) + to_string(x.out_shape) + " does not match the problem");
    if (w.out_type != dtype::s8 || w.out_shape != shape_t{d.oc, d.icg(), d.kh, d.kw})
        bad(n, "weights " + std::string(ir_name(w.out_type)) + to_string(w.out_shape) + " do not match the problem");
    const conv_desc o = sp.p.dst_desc();
    const shape_t ys{o.mb, o.oc, o.oh, o.ow};
    if (sp.residual != (n.inputs.size() == 3)) bad(n, "residual input and problem disagree");
    if (sp.residual && !sp.sum && (n.inputs[2]->out_type != dtype::f32 || n.inputs[2]->out_shape != ys))
        bad(n, "residual must be f32" + to_string(ys));
    if (sp.sum && (n.inputs[2]->out_type != n.attr.type || n.inputs[2]->out_shape != ys))
        bad(n, "sum residual must be " + std::string(ir_name(n.attr.type)) + to_string(ys));
    const dtype dt = sp.p.dst_dt;
    const dtype ot = dt == dtype::u8    ? dtype::u8
                     : dt == dtype::s8  ? dtype::s8
                     : dt == dtype::s32 ? dtype::s32
                                        : dtype::f32;
    if (ot != n.attr.type) bad(n, "to=" + std::string(ir_name(n.attr.type)) + " differs from the problem's dst");
    n.out_type = ot;
    n.out_shape = ys;
}

// ConvTranspose: x [N, C, H, W], w [C, OC/G, KH, KW] (ONNX's layout), G = group;
// y [N, OC, (H − 1)·s − pb − pe + (KH − 1)·d + 1 + output_padding, the same along W].
void infer_conv_transpose(node &n, int64_t) {
    need_inputs(n, 2);
    need_float(n, 0, "data");
    const shape_t &x = n.inputs[0]->out_shape, &w = n.inputs[1]->out_shape;
    if (x.size() != 4) bad(n, "data must be rank 4 (NCHW), got " + to_string(x));
    if (w.size() != 4) bad(n, "weights must be rank 4 ([C, OC/group, KH, KW]), got " + to_string(w));
    if (n.inputs[0]->out_type != n.inputs[1]->out_type) bad(n, "data and weights element types differ");
    const auto &a = n.attr;
    for (const auto *v : {&a.strides, &a.dilations, &a.pads_begin, &a.pads_end, &a.output_padding})
        if (v->size() != 2) bad(n, "strides, dilations, pads and output_padding need 2 values");
    if (a.group < 1 || x[1] % a.group || w[0] != x[1])
        bad(n, "group " + std::to_string(a.group) + " does not fit " + std::to_string(x[1]) +
                   " input channels and weights " + to_string(w));
    constexpr int64_t lim = int64_t(1) << 24;
    shape_t o = {x[0], w[1] * a.group, 0, 0};
    for (int i = 0; i < 2; ++i) {
        const int64_t s = a.strides[i], d = a.dilations[i], op = a.output_padding[i];
        if (s < 1 || s > lim || d < 1 || d > lim) bad(n, "strides and dilations must be in [1, 2^24]");
        if (a.pads_begin[i] < 0 || a.pads_end[i] < 0 || a.pads_begin[i] > lim || a.pads_end[i] > lim)
            bad(n, "pads must be in [0, 2^24]");
        if (op < 0 || (op >= s && op >= d))
            bad(n, "output_padding " + to_string(a.output_padding) + " must be below the stride or the dilation");
        const int64_t full = (x[2 + i] - 1) * s + (w[2 + i] - 1) * d + 1 + op;
        o[2 + i] = full - a.pads_begin[i] - a.pads_end[i];
        if (o[2 + i] < 1) bad(n, "the pads leave no output along dimension " + std::to_string(2 + i));
    }
    n.out_shape = o;
    n.out_type = n.inputs[0]->out_type;
}

// Slice, Pad, Resize (graph/ops/data_movement.cpp): x's type, their own shapes.
void infer_moving(node &n, int64_t) {
    need_inputs(n, 1);
    const shape_t &x = n.inputs[0]->out_shape;
    n.out_shape = n.kind == op::Slice ? detail::slice_of(n, x).out
                  : n.kind == op::Pad ? detail::pad_shape(n, x)
                                      : detail::resize_shape(n, x);
    n.out_type = n.inputs[0]->out_type;
}

void infer_qdq(node &n, int64_t) {
    if (n.inputs.size() != 2 && n.inputs.size() != 3)
        bad(n, "expects 2 or 3 inputs (x, scale [, zero_point]), got " + std::to_string(n.inputs.size()));
    const node &x = *n.inputs[0], &s = *n.inputs[1];
    const node *zp = n.inputs.size() == 3 ? n.inputs[2] : nullptr;
    need_float(n, 1, "scale");
    const bool q = n.kind == op::QuantizeLinear;
    if (q) {
        need_float(n, 0, "x");
        if (x.out_type != s.out_type)
            bad(n, std::string("x and scale element types differ: ") + ir_name(x.out_type) + " and " +
                       ir_name(s.out_type));
        if (zp && zp->out_type != dtype::u8 && zp->out_type != dtype::s8)
            bad(n, std::string("zero_point must be u8 or i8, got ") + ir_name(zp->out_type));
    } else {
        if (x.out_type != dtype::u8 && x.out_type != dtype::s8 && x.out_type != dtype::s32)
            bad(n, std::string("x must be u8, i8 or i32, got ") + ir_name(x.out_type));
        if (zp && zp->out_type != x.out_type)
            bad(n,
                std::string("zero_point type ") + ir_name(zp->out_type) + " differs from x's " + ir_name(x.out_type));
    }
    const int64_t ns = elems_of(s.out_shape);
    // One scale and one zero point in different one-element shapes ([] and
    // [1]: ONNX Runtime's quantizer writes a one-channel per-axis bias so) are
    // per tensor, as ONNX Runtime reads them.
    if (zp && zp->out_shape != s.out_shape && !(ns == 1 && elems_of(zp->out_shape) == 1))
        bad(n, "zero_point shape " + to_string(zp->out_shape) + " differs from scale shape " + to_string(s.out_shape));
    if (ns != 1) {
        const int64_t ax = norm_axis(n, n.attr.axis, x.out_shape.size(), "axis");
        if (s.out_shape.size() != 1 || s.out_shape[0] != x.out_shape[ax])
            bad(n, "a per-axis scale must be 1-D with " + std::to_string(x.out_shape[ax]) + " values (x " +
                       to_string(x.out_shape) + ", axis " + std::to_string(n.attr.axis) + "), got " +
                       to_string(s.out_shape));
    }
    n.out_shape = x.out_shape;
    n.out_type = q ? (zp ? zp->out_type : dtype::u8) : s.out_type;
}
} // namespace

namespace detail {

void fail_node(const node &n, const std::string &what) {
    fail(n.where(), std::string(to_string(n.kind)) + " '" + n.id + "': " + what);
}

namespace {

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

// ------------------------------------------------------------------- Pad
shape_t pad_shape(const node &n, const shape_t &in) {
    const auto &a = n.attr;
    const dtype t = n.inputs[0]->out_type;
    if (bits_of(t) == 4) bad(n, "4-bit data is not supported");
    const std::string &m = a.padding;
    if (m != "constant" && m != "edge" && m != "reflect" && m != "wrap")
        bad(n, "mode must be constant, edge, reflect or wrap, got '" + m + "'");
    if (a.pads_begin.size() != in.size() || a.pads_end.size() != in.size())
        bad(n, "pads_begin and pads_end need " + std::to_string(in.size()) + " values (one per dim)");
    if (is_integer(t) && to_type(t, a.pad_value) != a.pad_value)
        bad(n, "value " + fmt_double(a.pad_value) + " is not a " + ir_name(t) + " value");
    shape_t out = in;
    for (size_t d = 0; d < in.size(); ++d) {
        const int64_t b = a.pads_begin[d], e = a.pads_end[d];
        if (b < -max_elems || b > max_elems || e < -max_elems || e > max_elems) bad(n, "pads must be in [-2^31, 2^31]");
        if (m != "constant" && (b < 0 || e < 0)) bad(n, "negative pads (a crop) need mode constant");
        // reflect mirrors once, about the first and the last element.
        if (m == "reflect" && std::max(b, e) > in[d] - 1)
            bad(n, "reflect pads of " + std::to_string(std::max(b, e)) + " on dim " + std::to_string(d) + " of " +
                       to_string(in) + ": at most " + std::to_string(in[d] - 1));
        out[d] = in[d] + b + e;
        if (out[d] <= 0)
            bad(n, "dim " + std::to_string(d) + " of " + to_string(in) + " padded to " + std::to_string(out[d]) +
                       ": the IR has no empty tensors");
    }
    return out;
}

shape_t resize_shape(const node &n, const shape_t &in) {
    const auto &a = n.attr;
    const dtype t = n.inputs[0]->out_type;
    if (in.size() < 2) bad(n, "x must have rank 2 or more (the last two dims are resized), got " + to_string(in));
    if (bits_of(t) == 4) bad(n, "4-bit data is not supported");
    if (a.resize_mode != "nearest" && a.resize_mode != "linear") bad(n, "mode must be nearest or linear");
    if (a.resize_mode == "linear" && is_integer(t)) bad(n, "linear needs floating-point data");
    if (a.scales.empty() == a.sizes.empty()) bad(n, "needs scales or sizes (one of them)");
    if (!a.scales.empty() && a.scales.size() != 2) bad(n, "scales needs 2 values (the last two dims)");
    if (!a.sizes.empty() && a.sizes.size() != 2) bad(n, "sizes needs 2 values (the last two dims)");
    shape_t out = in;
    for (int i = 0; i < 2; ++i) {
        const int64_t d = in[in.size() - 2 + i];
        int64_t o;
        if (a.sizes.empty()) {
            const float s = static_cast<float>(a.scales[i]);
            if (!(s > 0.f) || !std::isfinite(s) || static_cast<double>(s) != a.scales[i])
                bad(n, "scale " + fmt_double(a.scales[i]) + " is not a positive finite f32 value");
            const double v = std::floor(static_cast<double>(d) * static_cast<double>(s));
            o = v > static_cast<double>(max_elems) ? max_elems + 1 : static_cast<int64_t>(v);
        } else {
            o = a.sizes[i];
        }
        if (o < 1 || o > max_elems)
            bad(n, "output dim " + std::to_string(o) + " of input dim " + std::to_string(d) + " is not in [1, 2^31]");
        out[in.size() - 2 + i] = o;
    }
    return out;
}

} // namespace detail

namespace {

// The ops whose inference is a few lines (the larger ones are above).
void infer_parameter(node &n, int64_t dynamic_value) {
    need_inputs(n, 0);
    shape_t s = n.attr.shape;
    for (int64_t &d : s)
        if (d == dynamic_dim) d = dynamic_value;
    check_dims(n, s, "shape");
    n.out_type = n.attr.type;
    n.out_shape = s;
}
void infer_constant(node &n, int64_t) {
    need_inputs(n, 0);
    check_dims(n, n.attr.shape, "shape");
    if (!n.data) bad(n, "has no data");
    const int64_t need = storage_bytes(n.attr.type, elems_of(n.attr.shape));
    if (static_cast<int64_t>(n.data->bytes.size()) != need)
        bad(n, "holds " + std::to_string(n.data->bytes.size()) + " bytes, " + ir_name(n.attr.type) +
                   to_string(n.attr.shape) + " needs " + std::to_string(need));
    n.out_type = n.attr.type;
    n.out_shape = n.attr.shape;
}
void infer_convert(node &n, int64_t) {
    need_inputs(n, 1);
    n.out_type = n.attr.type;
    n.out_shape = n.inputs[0]->out_shape;
}
// Add, Subtract, Multiply, Divide: one element type, numpy broadcast.
void infer_binary(node &n, int64_t) {
    need_inputs(n, 2);
    if (n.kind == op::Divide) need_float(n, 0, "a");
    if (n.inputs[0]->out_type != n.inputs[1]->out_type)
        bad(n, std::string("element types differ: ") + ir_name(n.inputs[0]->out_type) + " and " +
                   ir_name(n.inputs[1]->out_type));
    n.out_shape = broadcast(n, n.inputs[0]->out_shape, n.inputs[1]->out_shape);
    n.out_type = n.inputs[0]->out_type;
}
void infer_fake_quantize(node &n, int64_t) {
    need_inputs(n, 5);
    need_float(n, 0, "x");
    shape_t o = n.inputs[0]->out_shape;
    for (size_t i = 1; i < 5; ++i) {
        if (n.inputs[i]->out_type != n.inputs[0]->out_type)
            bad(n, std::string("input ") + std::to_string(i) + " has type " + ir_name(n.inputs[i]->out_type) +
                       ", x has " + ir_name(n.inputs[0]->out_type));
        o = broadcast(n, o, n.inputs[i]->out_shape);
    }
    if (n.attr.levels < 2 || n.attr.levels > (int64_t(1) << 32))
        bad(n, "levels must be in [2, 2^32], got " + std::to_string(n.attr.levels));
    n.out_shape = o;
    n.out_type = n.inputs[0]->out_type;
}
void infer_reduce_mean(node &n, int64_t) {
    need_inputs(n, 1);
    need_float(n, 0, "x");
    const shape_t &x = n.inputs[0]->out_shape;
    if (n.attr.axes.empty()) bad(n, "needs axes=[...]");
    std::vector<bool> red(x.size(), false);
    for (int64_t a : n.attr.axes) {
        const int64_t k = norm_axis(n, a, x.size(), "axis");
        if (red[k]) bad(n, "axis " + std::to_string(a) + " is given twice");
        red[k] = true;
    }
    shape_t o;
    for (size_t i = 0; i < x.size(); ++i)
        if (!red[i]) o.push_back(x[i]);
        else if (n.attr.keep_dims) o.push_back(1);
    n.out_shape = o;
    n.out_type = n.inputs[0]->out_type;
}
void infer_concat(node &n, int64_t) {
    if (n.inputs.empty()) bad(n, "expects at least one input");
    const node &f = *n.inputs[0];
    const int64_t ax = norm_axis(n, n.attr.axis, f.out_shape.size(), "axis");
    shape_t o = f.out_shape;
    for (size_t i = 1; i < n.inputs.size(); ++i) {
        const node &in = *n.inputs[i];
        if (in.out_type != f.out_type)
            bad(n, std::string("input ") + std::to_string(i) + " has type " + ir_name(in.out_type) + ", input 0 has " +
                       ir_name(f.out_type));
        bool ok = in.out_shape.size() == o.size();
        for (size_t d = 0; ok && d < o.size(); ++d) ok = static_cast<int64_t>(d) == ax || in.out_shape[d] == o[d];
        if (!ok)
            bad(n, "input " + std::to_string(i) + " shape " + to_string(in.out_shape) + " differs from input 0 shape " +
                       to_string(f.out_shape) + " outside axis " + std::to_string(n.attr.axis));
        if (o[ax] > max_elems - in.out_shape[ax]) bad(n, "the concatenated axis is too large");
        o[ax] += in.out_shape[ax];
    }
    n.out_shape = o;
    n.out_type = f.out_type;
}
void infer_clamp(node &n, int64_t) {
    need_inputs(n, 1);
    if (!(n.attr.clamp_min <= n.attr.clamp_max))
        bad(n, "min " + detail::fmt_double(n.attr.clamp_min) + " is above max " + detail::fmt_double(n.attr.clamp_max));
    n.out_shape = n.inputs[0]->out_shape;
    n.out_type = n.inputs[0]->out_type;
}
void infer_prelu(node &n, int64_t) {
    need_inputs(n, 2);
    need_float(n, 0, "x");
    const shape_t &x = n.inputs[0]->out_shape, &sl = n.inputs[1]->out_shape;
    if (n.inputs[1]->out_type != n.inputs[0]->out_type) bad(n, "x and slope element types differ");
    const bool per_channel = sl.size() == 1 && x.size() >= 2 && sl[0] == x[1];
    bool onto = sl.size() <= x.size(); // numpy broadcast of the slope onto x's shape
    for (size_t i = 0; onto && i < sl.size(); ++i) {
        const int64_t d = sl[sl.size() - 1 - i];
        onto = d == 1 || d == x[x.size() - 1 - i];
    }
    if (!per_channel && !onto)
        bad(n, "slope " + to_string(sl) + " is neither per channel (axis 1) nor broadcastable onto " + to_string(x));
    n.out_shape = x;
    n.out_type = n.inputs[0]->out_type;
}
void infer_flatten(node &n, int64_t) {
    need_inputs(n, 1);
    const shape_t &x = n.inputs[0]->out_shape;
    const int64_t ax = norm_axis(n, n.attr.axis, x.size(), "axis", true);
    int64_t a = 1, b = 1;
    for (size_t i = 0; i < x.size(); ++i) (static_cast<int64_t>(i) < ax ? a : b) *= x[i];
    n.out_shape = {a, b};
    n.out_type = n.inputs[0]->out_type;
}
void infer_softmax(node &n, int64_t) {
    need_inputs(n, 1);
    need_float(n, 0, "x");
    norm_axis(n, n.attr.axis, n.inputs[0]->out_shape.size(), "axis");
    n.out_shape = n.inputs[0]->out_shape;
    n.out_type = n.inputs[0]->out_type;
}
// Relu, Gelu, Sigmoid, Sqrt, Erf, Tanh: floating point in, the same out.
void infer_unary_float(node &n, int64_t) {
    need_inputs(n, 1);
    if (is_integer(n.inputs[0]->out_type)) bad(n, "needs a floating-point input");
    n.out_shape = n.inputs[0]->out_shape;
    n.out_type = n.inputs[0]->out_type;
}
// DepthToSpace: x [N, C·bh·bw, H, W] → [N, C, H·bh, W·bw], any element type.
void infer_depth_to_space(node &n, int64_t) {
    need_inputs(n, 1);
    const shape_t &x = n.inputs[0]->out_shape;
    const auto &b = n.attr.block;
    if (x.size() != 4) bad(n, "data must be rank 4 (NCHW), got " + to_string(x));
    if (b.size() != 2 || b[0] < 1 || b[1] < 1 || b[0] > 4096 || b[1] > 4096)
        bad(n, "block must be two sizes in [1, 4096], got " + to_string(b));
    if (x[1] % (b[0] * b[1]))
        bad(n, std::to_string(x[1]) + " channels do not split into blocks of " + std::to_string(b[0] * b[1]));
    n.out_shape = {x[0], x[1] / (b[0] * b[1]), x[2] * b[0], x[3] * b[1]};
    n.out_type = n.inputs[0]->out_type;
}
// LookupTable(a [, b], table): a, b 8-bit; the table a u8/i8 Constant of
// 256 entries (one input) or 65536 (two); b broadcasts onto a's shape.
void infer_lookup_table(node &n, int64_t) {
    if (n.inputs.size() != 2 && n.inputs.size() != 3) bad(n, "needs (a, table) or (a, b, table)");
    const node &t = *n.inputs.back();
    const int64_t entries = n.inputs.size() == 2 ? 256 : 65536;
    const shape_t &x = n.inputs[0]->out_shape;
    const bool per_channel = n.inputs.size() == 2 && x.size() == 4 && t.out_shape == shape_t{x[1], 256};
    if ((t.out_type != dtype::u8 && t.out_type != dtype::s8) || (t.out_shape != shape_t{entries} && !per_channel))
        bad(n, "the table must be u8 or i8 [" + std::to_string(entries) + "], got " + std::string(ir_name(t.out_type)) +
                   to_string(t.out_shape));
    for (size_t i = 0; i + 1 < n.inputs.size(); ++i) {
        const dtype d = n.inputs[i]->out_type;
        if (d != dtype::u8 && d != dtype::s8) bad(n, "input " + std::to_string(i) + " must be u8 or i8");
    }
    const shape_t &a = n.inputs[0]->out_shape;
    if (n.inputs.size() == 3 && broadcast(n, a, n.inputs[1]->out_shape) != a)
        bad(n, "b " + to_string(n.inputs[1]->out_shape) + " does not broadcast onto a " + to_string(a));
    n.out_shape = a;
    n.out_type = t.out_type;
}
void infer_result(node &n, int64_t) {
    need_inputs(n, 1);
    n.out_shape = n.inputs[0]->out_shape;
    n.out_type = n.inputs[0]->out_type;
}

// One inference per op, in the order of `enum class op` (checked below), so
// that an op added to the enum without one does not compile.
using infer_fn = void (*)(node &n, int64_t dynamic_value);
struct infer_rule {
    op kind;
    infer_fn fn;
};
constexpr infer_rule infer_rules[] = {
    {op::Parameter, infer_parameter},
    {op::Constant, infer_constant},
    {op::Convert, infer_convert},
    {op::Subtract, infer_binary},
    {op::Multiply, infer_binary},
    {op::Add, infer_binary},
    {op::Reshape, infer_reshape},
    {op::Transpose, infer_transpose},
    {op::Convolution, infer_conv},
    {op::GroupConvolution, infer_conv},
    {op::MatMul, infer_matmul},
    {op::Relu, infer_unary_float},
    {op::Gelu, infer_unary_float},
    {op::FakeQuantize, infer_fake_quantize},
    {op::QuantizeLinear, infer_qdq},
    {op::DequantizeLinear, infer_qdq},
    {op::MaxPool, infer_pool},
    {op::AvgPool, infer_pool},
    {op::ReduceMean, infer_reduce_mean},
    {op::Concat, infer_concat},
    {op::Clamp, infer_clamp},
    {op::PRelu, infer_prelu},
    {op::Flatten, infer_flatten},
    {op::Sigmoid, infer_unary_float},
    {op::Softmax, infer_softmax},
    {op::Divide, infer_binary},
    {op::Slice, infer_moving},
    {op::Pad, infer_moving},
    {op::Resize, infer_moving},
    {op::Sqrt, infer_unary_float},
    {op::ConvTranspose, infer_conv_transpose},
    {op::Erf, infer_unary_float},
    {op::Tanh, infer_unary_float},
    {op::LookupTable, infer_lookup_table},
    {op::DepthToSpace, infer_depth_to_space},
    {op::QConvolution, infer_qconv},
    {op::Result, infer_result},
};
constexpr size_t op_count = static_cast<size_t>(op::Result) + 1;
constexpr bool one_rule_per_op() {
    if (sizeof(infer_rules) / sizeof(infer_rules[0]) != op_count) return false;
    for (size_t i = 0; i < op_count; ++i)
        if (static_cast<size_t>(infer_rules[i].kind) != i) return false;
    return true;
}
static_assert(one_rule_per_op(), "infer_rules: one row per op, in the order of enum class op");

} // namespace

void infer_node(node &n, int64_t dynamic_value) {
    for (const node *in : n.inputs)
        if (!in) bad(n, "input is missing");
    infer_rules[static_cast<size_t>(n.kind)].fn(n, dynamic_value);
    check_dims(n, n.out_shape, "output");
}

void detail::infer_shapes(graph &g) {
    for (node *n : g.topo_order()) {
        if (n->kind != op::Constant || n->data) {
            infer_node(*n, g.dynamic_value());
            continue;
        }
        check_dims(*n, n->attr.shape, "shape");
        n->out_type = n->attr.type;
        n->out_shape = n->attr.shape;
    }
}

} // namespace qconv::graph
