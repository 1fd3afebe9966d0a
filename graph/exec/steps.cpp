// Each kind of step runs itself (steps.h): what it reads, the layout of the
// output it takes from the arena, and the kernel it calls.
#include "graph/exec/steps.h"

#include <algorithm>
#include <cstring>

#include "graph/ops/lut.h"
#include "graph/ops/ops.h"

namespace qconv::graph::exec {

namespace {

// Runs a compressed MatMul on typed values: f32 activations as floats,
// f16/bf16 ones as their 16-bit words through execute_typed().
void run_compressed(const matmul &mm, const tensor &x, tensor &y, int64_t rows, int threads) {
    if (mm.desc().src_dt == dtype::f32) mm.execute(x.f32(), y.f32(), rows, threads);
    else mm.execute_typed(x.bytes.data(), y.bytes.data(), rows, threads);
}

} // namespace

void compressed_matmul_step::run(run_context &ctx) const {
    const tensor &x = ctx.get(in[0]);
    tensor &y = ctx.v[out];
    ctx.A.take(y, c.mm->out_type, (c.bias_add ? c.bias_add : c.mm)->out_shape, layout::plain);
    if (x.elems() != c.rows * c.desc.k || x.type != y.type || x.order != layout::plain)
        fail("inputs",
             "MatMul '" + c.mm->id + "' input has " + std::to_string(x.elems()) + " elements of " + ir_name(x.type));
    if (c.prim) {
        run_compressed(*c.prim, x, y, c.rows, ctx.threads);
        return;
    }
    const tensor &wt = ctx.get(in[1]);
    if (wt.type != c.wq->out_type) fail(n->where(), "weights of another type");
    matmul_weights w{wt.bytes.data(), c.scale.data(), c.zp.empty() ? nullptr : c.zp.data(),
                     c.bias.empty() ? nullptr : c.bias.data()};
    if (c.desc.scale_dt == dtype::f16) w.scale = nullptr, w.scale_f16 = c.scale_f16.data();
    matmul_desc dm = c.desc; // weights per run: a primitive for this run's rows
    dm.m = c.rows;
    run_compressed(matmul(dm, w, c.hints), x, y, c.rows, ctx.threads);
}

void qconv_step::run(run_context &ctx) const {
    const std::vector<const tensor *> &ins = ctx.gather(in);
    const tensor &x0 = *ins[0];
    if (x0.shape != n->inputs[0]->out_shape || x0.type != n->inputs[0]->out_type)
        fail(n->where(), "QConvolution source changed shape or type");
    tensor xn;
    const tensor *x = &x0;
    if (x0.order != layout::nhwc) {
        xn = x0.to_layout(layout::nhwc);
        x = &xn;
    }
    tensor &o = ctx.v[out];
    exec_args a;
    a.threads = ctx.threads;
    tensor rn;
    if (ins.size() == 3 && ins[2]->type == n->out_type && n->out_type != dtype::f32) {
        // sum: the skip's integers are the destination's previous values
        const tensor &r = *ins[2];
        if (r.shape != n->out_shape) fail(n->where(), "QConvolution residual changed shape");
        if (in_place >= 0 && r.order == layout::nhwc && &r == &ctx.v[in_place]) {
            // the residual's last use: its storage becomes the output
            ctx.A.give(o);
            tensor &res = ctx.v[in_place];
            o.type = res.type;
            o.shape = res.shape;
            o.order = layout::nhwc;
            o.bytes.swap(res.bytes);
        } else {
            ctx.A.take(o, n->out_type, n->out_shape, layout::nhwc);
            if (r.order == layout::nhwc) std::memcpy(o.bytes.data(), r.bytes.data(), o.bytes.size());
            else o.bytes = r.to_layout(layout::nhwc).bytes;
        }
    } else {
        ctx.A.take(o, n->out_type, n->out_shape, layout::nhwc);
        if (ins.size() == 3) {
            rn = ins[2]->to_layout(layout::nhwc);
            a.binary.push_back(rn.f32());
        }
    }
    prim->execute(x->bytes.data(), o.bytes.data(), a);
}

// The residual's last reader, of the output's integer type, not the source
// too: the output takes its storage over.
void qconv_step::settle(const graph &, const std::set<int> &dying, const std::vector<bool> &) {
    if (in.size() == 3 && dying.count(in[2]) && in[2] != in[0] && n->inputs[2]->out_type == n->out_type &&
        n->out_type != dtype::f32)
        in_place = in[2];
}

void f32_conv_step::run(run_context &ctx) const {
    const std::vector<const tensor *> &ins = ctx.gather(in);
    tensor &o = ctx.v[out];
    ctx.A.take(o, n->out_type, n->out_shape, nhwc ? layout::nhwc : layout::plain);
    if (ins[0]->shape != n->inputs[0]->out_shape) fail(n->where(), "input shape changed");
    std::shared_ptr<convolution_f32> c = prim;
    if (!c) c = std::make_shared<convolution_f32>(detail::f32_conv_desc(*n), ins[1]->to_f32().data(), nullptr);
    detail::run_f32_conv(*c, *ins[0], o, ctx.threads);
}

bool f32_conv_step::reads_nhwc(const node &value) const { return first_only(*n, value) && n->out_type == dtype::f32; }

void f32_matmul_step::run(run_context &ctx) const {
    const std::vector<const tensor *> &ins = ctx.gather(in);
    if (ins[0]->shape != n->inputs[0]->out_shape) fail(n->where(), "MatMul input changed shape");
    const tensor a = ins[0]->order == layout::plain ? tensor() : ins[0]->to_layout(layout::plain);
    tensor &o = ctx.v[out];
    ctx.A.take(o, dtype::f32, n->out_shape, layout::plain);
    prim->execute(ins[0]->order == layout::plain ? ins[0]->f32() : a.f32(), o.f32(), ctx.threads);
}

void dequantize_mean_step::run(run_context &ctx) const {
    const std::vector<const tensor *> &ins = ctx.gather(in);
    const tensor &x = *ins[0];
    if (x.shape != n->inputs[0]->out_shape) fail(n->where(), "ReduceMean input changed shape");
    const shape_t &sh = x.shape;
    tensor &o = ctx.v[out];
    ctx.A.take(o, n->out_type, n->out_shape, layout::plain);
    const int32_t zp = ins.size() > 2 ? static_cast<int32_t>(ins[2]->get(0)) : 0;
    detail::dequantize_mean(x.bytes.data(), x.type == dtype::u8, x.order == layout::nhwc, sh[0], sh[1], sh[2] * sh[3],
                            static_cast<float>(ins[1]->get(0)), zp, o.f32());
}

const std::vector<const tensor *> &eval_step::inputs(run_context &ctx) const {
    const std::vector<const tensor *> &ins = ctx.gather(in);
    for (size_t k = 0; k < ins.size(); ++k)
        if (ins[k]->shape != n->inputs[k]->out_shape)
            fail(n->where(), std::string(to_string(n->kind)) + " '" + n->id + "': input " + std::to_string(k) +
                                 " has shape " + to_string(ins[k]->shape) + ", expected " +
                                 to_string(n->inputs[k]->out_shape));
    return ins;
}

void eval_step::eval_into(run_context &ctx, const std::vector<const tensor *> &ins, layout order) const {
    tensor &o = ctx.v[out];
    ctx.A.take(o, n->out_type, n->out_shape, order);
    detail::eval_node_into(*n, ins, o);
}

void eval_step::run(run_context &ctx) const { eval_into(ctx, inputs(ctx), layout::plain); }

void quantize_step::run(run_context &ctx) const {
    eval_into(ctx, inputs(ctx), nhwc_out ? layout::nhwc : layout::plain);
}

// The output NHWC when int8 convolutions read it, and max pools of its type
// or table lookups besides them, and nothing else (a Result keeps it plain).
void quantize_step::settle(const graph &g, const std::set<int> &, const std::vector<bool> &keep) {
    if (!detail::qdq_takes_nhwc(*n)) return;
    bool conv = false, all = true;
    for (const node *u : g.consumers(n)) {
        conv |= u->kind == op::QConvolution;
        all &= u->kind == op::QConvolution || u->kind == op::LookupTable ||
               (u->kind == op::MaxPool && u->out_type == n->out_type);
    }
    nhwc_out = conv && all && !keep[out];
}

// A per-tensor QuantizeLinear into NHWC reads an NHWC f32 source.
bool quantize_step::reads_nhwc(const node &value) const {
    return first_only(*n, value) && nhwc_out && n->out_shape.size() == 4 && elems_of(n->inputs[1]->out_shape) == 1;
}

void max_pool_step::run(run_context &ctx) const {
    const std::vector<const tensor *> &ins = inputs(ctx);
    const tensor &x = *ins[0];
    if (x.order == layout::nhwc && (x.type == dtype::u8 || x.type == dtype::s8) && n->out_type == x.type) {
        tensor &o = ctx.v[out];
        ctx.A.take(o, n->out_type, n->out_shape, layout::nhwc);
        detail::max_pool_nhwc_node(*n, x, o);
        return;
    }
    if (nhwc && x.order == layout::nhwc && x.type == dtype::f32) {
        tensor &o = ctx.v[out];
        ctx.A.take(o, dtype::f32, n->out_shape, layout::nhwc);
        detail::max_pool_nhwc_node(*n, x, o);
        return;
    }
    eval_into(ctx, ins, layout::plain);
}

bool max_pool_step::reads_nhwc(const node &value) const { return nhwc && first_only(*n, value); }

namespace {

// The geometry of a LookupTable's second input b over a (graph/ops/lut.h):
// equal shapes (in one layout, or 4-D one NHWC and the other plain: b read
// with its own strides), one value, or one per channel of a 4-D a.
bool lut2_of(const tensor &a, const tensor &b, detail::lut2_geometry *g) {
    const int64_t n = a.elems();
    const shape_t &s = a.shape, &t = b.shape;
    if (elems_of(t) == 1) {
        *g = {1, 1, n, 0, 0, 0};
        return true;
    }
    if (t == s && b.order == a.order) {
        *g = {1, 1, n, 0, 0, 1};
        return true;
    }
    if (t == s) {
        if (s.size() != 4) return false;
        const int64_t C = s[1], HW = s[2] * s[3];
        if (a.order == layout::nhwc) *g = {s[0], HW, C, C * HW, 1, HW}; // a [N][HW][C], b [N][C][HW]
        else *g = {s[0], C, HW, C * HW, 1, C};                          // a [N][C][HW], b [N][HW][C]
        return true;
    }
    if (s.size() != 4 || t.size() != 4 || t[1] != s[1] || t[2] != 1 || t[3] != 1 || (t[0] != 1 && t[0] != s[0]))
        return false;
    const int64_t per_image = t[0] == 1 ? 0 : s[1];
    if (a.order == layout::nhwc) *g = {s[0], s[2] * s[3], s[1], per_image, 0, 1};
    else *g = {s[0], s[1], s[2] * s[3], per_image, 1, 0};
    return true;
}

} // namespace

void lookup_table_step::run(run_context &ctx) const {
    const std::vector<const tensor *> &ins = inputs(ctx);
    const tensor &a = *ins[0];
    const uint8_t *table = ins.back()->bytes.data();
    detail::lut2_geometry g;
    const tensor *b = ins.size() == 3 ? ins[1] : nullptr;
    if (b && !lut2_of(a, *b, &g)) {
        eval_into(ctx, ins, layout::plain);
        return;
    }
    tensor &o = ctx.v[out];
    ctx.A.take(o, n->out_type, n->out_shape, a.order);
    if (!b && ins.back()->elems() != 256) { // a table per channel of a 4-D a
        const shape_t &s = a.shape;
        detail::lut_per_channel(a.bytes.data(), s[0], s[1], s[2] * s[3], a.order == layout::nhwc, table,
                                o.bytes.data());
    } else if (!b) detail::lut_unary(a.bytes.data(), a.elems(), table, o.bytes.data());
    else detail::lut_binary(a.bytes.data(), b->bytes.data(), g, table, o.bytes.data());
}

void move_8bit_step::run(run_context &ctx) const {
    const std::vector<const tensor *> &ins = inputs(ctx);
    if (n->kind == op::Concat) {
        const bool any = std::any_of(ins.begin(), ins.end(), [](const tensor *t) { return t->order == layout::nhwc; });
        if (!any) {
            eval_into(ctx, ins, layout::plain);
            return;
        }
        std::vector<tensor> copies;
        copies.reserve(ins.size());
        std::vector<const tensor *> nhwc;
        for (const tensor *t : ins) {
            if (t->order != layout::nhwc) {
                copies.push_back(t->to_layout(layout::nhwc));
                t = &copies.back();
            }
            nhwc.push_back(t);
        }
        tensor &o = ctx.v[out];
        ctx.A.take(o, n->out_type, n->out_shape, layout::nhwc);
        detail::concat_nhwc(nhwc, o);
        return;
    }
    if (ins[0]->order == layout::nhwc && ins[0]->shape.size() == 4) {
        tensor &o = ctx.v[out];
        ctx.A.take(o, n->out_type, n->out_shape, layout::nhwc);
        if (n->kind == op::DepthToSpace) detail::depth_to_space(*n, *ins[0], o);
        else detail::resize(*n, *ins[0], o);
        return;
    }
    eval_into(ctx, ins, layout::plain);
}

void reduce_mean_step::run(run_context &ctx) const {
    const std::vector<const tensor *> &ins = inputs(ctx);
    if (ins[0]->order == layout::nhwc && detail::reduce_mean_takes_nhwc(*n)) {
        tensor &o = ctx.v[out];
        ctx.A.take(o, n->out_type, n->out_shape, layout::plain);
        detail::reduce_mean_hw_nhwc(*ins[0], o);
        return;
    }
    eval_into(ctx, ins, layout::plain);
}

bool reduce_mean_step::reads_nhwc(const node &value) const {
    return first_only(*n, value) && detail::reduce_mean_takes_nhwc(*n);
}

void island_step::run(run_context &ctx) const {
    const std::vector<const tensor *> &ins = inputs(ctx);
    const bool keep_nhwc = nhwc && keeps_nhwc(*n, ins);
    if (!keep_nhwc) {
        eval_into(ctx, ins, layout::plain);
        return;
    }
    tensor &o = ctx.v[out];
    ctx.A.take(o, n->out_type, n->out_shape, layout::nhwc);
    if (n->kind == op::Resize) detail::resize(*n, *ins[0], o);
    else if (n->kind == op::Concat) detail::concat_nhwc(ins, o);
    else if (n->kind == op::DepthToSpace) detail::depth_to_space(*n, *ins[0], o);
    else if (n->kind != op::DequantizeLinear) detail::eval_elementwise_nhwc(*n, ins, o);
    else detail::eval_node_into(*n, ins, o);
}

bool island_step::may_write_nhwc() const { return dequantize_to_nhwc(n) || layout_free(n) || moves_nhwc(n); }

bool island_step::reads_nhwc(const node &) const { return (layout_free(n) || moves_nhwc(n)) && nhwc; }

} // namespace qconv::graph::exec
