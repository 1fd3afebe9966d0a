// ConvertWeightCompressedConv1x1ToMatmul (docs/graph.md, "The conv1x1 →
// MatMul rewrite"; the MatMul computes docs/semantics.md §7). The Transpose
// cancellation that cleans up after it: cancel_transposes.cpp.
//
// Notation: the Convolution reads A (NCHW [N,IC,H,W]) and produces
// Y[n,oc,h,w] = Σ_ic W[oc,ic]·A[n,ic,h,w]. The MatMul reads A' (NHWC,
// A'[n,h,w,ic] = A[n,ic,h,w]) and produces Z[n,h,w,oc] = Y[n,oc,h,w].
// So Y = Transpose(Z, [0,3,1,2]) and Z = Transpose(Y, [0,2,3,1]); when H·W = 1
// both are plain Reshapes (the memory order is the same).
//
// Activation side (how A' is obtained):
//   Transpose(X, [0,3,1,2])  → A' = X                 (other orders: refused)
//   Reshape(X) → [N,IC,1,1]  → A' = Reshape(X, [N,1,1,IC])
//   Reshape(X) → [N,IC,H,W], H·W > 1: not a pure relayout → refused
//   anything else ("direct") → A' = Transpose(A, [0,2,3,1]) (Reshape when H·W = 1)
// Output side, through single consumers: optional bias Add with a [1,OC,1,1]
// Constant (becomes [1,1,1,OC]), optional Convert, then
//   a single Transpose(·, [0,2,3,1]) consumer → its consumers read Z directly
//   (other orders: refused);
//   a single Reshape consumer with H·W = 1 → Reshape(Z) to the same shape;
//   otherwise every consumer reads a fix-up Transpose(Z, [0,3,1,2]) — also the
//   Reshape consumer with H·W > 1, which must see NCHW order (the bug OpenVINO had).
// A "direct" activation with a fix-up output is an isolated Convolution: refused.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <unordered_map>

#include "core/verbose.h"
#include "graph/ir/decompression.h"
#include "graph/ir/detail.h"
#include "qconv/graph.h"

namespace qconv::graph {

namespace {

bool is_order(const node *n, std::vector<int64_t> o) { return n->kind == op::Transpose && n->attr.order == o; }

// Shape `s` aligned right against a rank-r shape whose last `k` dims are dropped.
shape_t drop_trailing(const shape_t &s, size_t r, size_t k) {
    // s is right-aligned with rank r; its last min(k, s.size()) dims align with the dropped ones.
    const size_t drop = std::min(k, s.size());
    shape_t o(s.begin(), s.end() - drop);
    if (o.empty()) o.push_back(1);
    (void)r;
    return o;
}

class rewriter {
public:
    rewriter(graph &g, const veto_callback &veto) : g_(g), veto_(veto) {
        // With `?`: the shapes at another value tell which dims follow it.
        if (g.is_dynamic()) {
            auto probe = g.clone();
            probe->bind_dynamic(g.dynamic_value() + 1);
            probe->infer();
            for (const auto &n : probe->nodes()) other_shape_[n->id] = n->out_shape;
        }
    }

    rewrite_record visit(node *c) {
        rewrite_record r{c->id, false, ""};
        r.reason = try_rewrite(c, &r.rewritten);
        return r;
    }

private:
    // A new node made from `from` (id with `suffix`, friendly name and
    // runtime info copied; see try_rewrite for the one name that changes).
    node *add(op k, std::vector<node *> in, attributes a, const node *from, const std::string &suffix) {
        node *n = g_.add(k, std::move(in), std::move(a), from->id + suffix);
        if (from) {
            n->friendly_name = from->friendly_name;
            n->rt_info = from->rt_info;
        }
        infer_node(*n);
        return n;
    }
    node *reshape(node *x, shape_t to, const node *from, const std::string &suffix) {
        attributes a;
        a.target = std::move(to);
        return add(op::Reshape, {x}, a, from, suffix);
    }
    node *transpose(node *x, std::vector<int64_t> order, const node *from, const std::string &suffix) {
        attributes a;
        a.order = std::move(order);
        return add(op::Transpose, {x}, a, from, suffix);
    }
    // A Constant sharing `c`'s data with a new shape.
    node *reshaped_constant(const node *c, shape_t s, const std::string &suffix) {
        node *n = g_.constant(c->attr.type, std::move(s), c->data, c->id + suffix);
        n->friendly_name = c->friendly_name;
        n->rt_info = c->rt_info;
        infer_node(*n);
        return n;
    }

    // The output side of Convolution c, through single consumers: an optional
    // bias Add with a [1,OC,1,1] Constant, an optional Convert, then how the
    // result is read (a [0,2,3,1] Transpose, a Reshape when H·W = 1, or the
    // fix-up). A reason when an output Transpose has another order.
    struct output_chain {
        node *last = nullptr, *bias = nullptr, *bias_const = nullptr, *cvt = nullptr, *layout = nullptr;
        std::string kind = "fixup";
    };
    std::string match_output(node *c, int64_t OC, bool spatial1, output_chain *o) const {
        auto single = [&](node *n) {
            auto cs = g_.consumers(n);
            return cs.size() == 1 ? cs[0] : nullptr;
        };
        node *t = c;
        if (node *s = single(t); s && s->kind == op::Add) {
            node *other = s->inputs[0] == t ? s->inputs[1] : s->inputs[0];
            if (other->kind == op::Constant && other->out_shape == shape_t{1, OC, 1, 1} &&
                s->out_shape == c->out_shape) {
                o->bias = s;
                o->bias_const = other;
                t = s;
            }
        }
        if (node *s = single(t); s && s->kind == op::Convert) {
            o->cvt = s;
            t = s;
        }
        o->last = t;
        if (node *s = single(t); s && s->kind == op::Transpose) {
            if (!is_order(s, {0, 2, 3, 1}))
                return "output Transpose order " + to_string(s->attr.order) + " is not [0,2,3,1]";
            o->layout = s;
            o->kind = "transpose";
        } else if (s && s->kind == op::Reshape && spatial1 && !g_.is_dynamic()) {
            // (With `?` its target was written for the NCHW input: it is fed
            // through the fix-up instead.)
            o->layout = s;
            o->kind = "reshape";
        }
        return "";
    }

    // Why Convolution c is not an f32/f16/bf16 1x1 convolution with stride
    // 1, no dilation and no padding ("" when it is).
    static std::string check_conv(const node *c) {
        if (c->kind == op::GroupConvolution) return "GroupConvolution (grouped) is not rewritten";
        const shape_t &ws = c->inputs[1]->out_shape;
        const dtype T = c->out_type; // the activation type
        if (T != dtype::f32 && T != dtype::f16 && T != dtype::bf16)
            return std::string("element type ") + ir_name(T) + " is not f32, f16 or bf16";
        if (ws[2] != 1 || ws[3] != 1)
            return "kernel " + std::to_string(ws[2]) + "x" + std::to_string(ws[3]) + " is not 1x1";
        if (c->attr.strides != std::vector<int64_t>{1, 1}) return "stride " + to_string(c->attr.strides) + " is not 1";
        if (c->attr.dilations != std::vector<int64_t>{1, 1})
            return "dilation " + to_string(c->attr.dilations) + " is not 1";
        if (c->pads_b != std::vector<int64_t>{0, 0} || c->pads_e != std::vector<int64_t>{0, 0})
            return "padding " + to_string(c->pads_b) + "/" + to_string(c->pads_e) + " is not zero";
        return "";
    }

    // The MatMul's NHWC result z (after the bias and the Convert) read where
    // the output was: by the output Transpose's readers, through a Reshape to
    // the same shape, or through the fix-up Transpose back to NCHW.
    void read_output(node *z, const output_chain &out, int64_t N, int64_t OC, bool spatial1) {
        node *t = out.last, *layout = out.layout;
        if (out.kind == "transpose") {
            z->friendly_name = layout->friendly_name;
            for (const auto &kv : layout->rt_info) z->rt_info.insert(kv);
            g_.replace_uses(layout, z);
        } else if (out.kind == "reshape") {
            node *r = reshape(z, layout->out_shape, layout, "_2");
            g_.replace_uses(layout, r);
        } else {
            // The fix-up takes over t's output and its friendly name; the NHWC
            // node before it is named apart, so no two nodes share one.
            node *fix = spatial1 ? reshape(z, {g_.is_dynamic() ? -1 : N, OC, 1, 1}, t, "_nchw")
                                 : transpose(z, {0, 3, 1, 2}, t, "_nchw");
            if (!t->friendly_name.empty()) z->friendly_name = t->friendly_name + "_nhwc";
            g_.replace_uses(t, fix);
        }
    }

    std::string try_rewrite(node *c, bool *done) {
        if (std::string why = check_conv(c); !why.empty()) return why;
        const shape_t &xs = c->inputs[0]->out_shape, &ys = c->out_shape;
        const dtype T = c->out_type; // the activation type
        const int64_t N = xs[0], IC = xs[1], H = xs[2], W = xs[3], OC = ys[1];
        // H·W = 1 for every value of `?` (the Reshape forms bake it in).
        bool spatial1 = H * W == 1;
        if (g_.is_dynamic()) {
            auto it = other_shape_.find(c->inputs[0]->id);
            spatial1 =
                spatial1 && it != other_shape_.end() && it->second.size() == 4 && it->second[2] * it->second[3] == 1;
        }

        // Weights.
        detail::decompression b;
        if (std::string why; !detail::match_decompression(c->inputs[1], T, &b, &why)) return why;
        if (b.wq_reshape) return "compressed weights are reshaped before their Convert";
        node *wq = b.wq, *mul = b.mul;
        if (mul->out_shape != wq->out_shape)
            return "scale/zero point broadcast " + to_string(mul->out_shape) + " beyond the weights " +
                   to_string(wq->out_shape);
        if (b.sub && b.sub->out_shape != wq->out_shape) return "zero point broadcast beyond the weights";

        // Activation.
        node *a = c->inputs[0];
        std::string act_kind;
        if (a->kind == op::Transpose) {
            if (!is_order(a, {0, 3, 1, 2}))
                return "activation Transpose order " + to_string(a->attr.order) + " is not [0,3,1,2]";
            act_kind = "transpose";
        } else if (a->kind == op::Reshape) {
            if (!spatial1)
                return "activation Reshape to " + to_string(a->out_shape) + " is not a pure relayout (H*W > 1)";
            act_kind = "reshape";
        } else {
            act_kind = "direct";
        }

        output_chain out;
        if (std::string why = match_output(c, OC, spatial1, &out); !why.empty()) return why;
        node *bias = out.bias, *cvt = out.cvt, *bias_const = out.bias_const;
        const std::string &out_kind = out.kind;
        if (act_kind == "direct" && !out.layout)
            return "isolated Convolution: no Transpose/Reshape on the activation or the output";
        if (veto_ && veto_(*c)) return "vetoed by callback";

        // The new activation A' (NHWC).
        node *act = nullptr;
        // In a graph with a run-time dimension (`?`) N may follow it: the
        // Reshapes then infer it (-1).
        const int64_t n_dim = g_.is_dynamic() ? -1 : N;
        if (act_kind == "transpose") act = a->inputs[0];
        else if (act_kind == "reshape") act = reshape(a->inputs[0], {n_dim, 1, 1, IC}, a, "_nhwc");
        else {
            act = spatial1 ? reshape(a, {n_dim, 1, 1, IC}, c, "_act_nhwc") : transpose(a, {0, 2, 3, 1}, c, "_act_nhwc");
            if (!c->friendly_name.empty()) act->friendly_name = c->friendly_name + "_act_nhwc";
        }

        node *w2 = rebuild_weights(b, OC, IC, T);

        attributes mm;
        mm.transpose_b = true;
        node *z = add(op::MatMul, {act, w2}, mm, c, "_matmul");
        if (bias) {
            node *bc = reshaped_constant(bias_const, {1, 1, 1, OC}, "_nhwc");
            z = add(op::Add, {z, bc}, {}, bias, "_nhwc");
        }
        if (cvt) {
            attributes ca;
            ca.type = cvt->attr.type;
            z = add(op::Convert, {z}, ca, cvt, "_nhwc");
        }
        read_output(z, out, N, OC, spatial1);
        *done = true;
        std::ostringstream why;
        why << "rewritten: activation=" << act_kind << (T != dtype::f32 ? std::string(":") + ir_name(T) : "")
            << " weights=" << ir_name(wq->out_type) << (wq->kind == op::Parameter ? "(Parameter)" : "")
            << (b.reshape ? " group-wise" : " per-OC") << (b.sub ? " zp" : "") << (bias ? " bias" : "")
            << (cvt ? " convert" : "") << " output=" << out_kind;
        return why.str();
    }

    // Convert(Wq) [− Convert(ZP)] · Scale with the trailing unit dims removed
    // (2-D [OC,IC] per-OC, 3-D [OC,NG,GS] group-wise), then Reshape to [OC,IC].
    node *rebuild_weights(const detail::decompression &b, int64_t OC, int64_t IC, dtype T) {
        node *wq = b.wq, *cw = b.cw, *mul = b.mul, *scale = b.scale;
        const shape_t &d = wq->out_shape;
        size_t keep = d.size();
        while (keep > 2 && d[keep - 1] == 1) --keep;
        const size_t dropped = d.size() - keep;
        const shape_t d2(d.begin(), d.begin() + keep);

        node *q = wq->kind == op::Constant ? reshaped_constant(wq, d2, "_2d") : reshape(wq, d2, wq, "_2d");
        attributes ca;
        ca.type = T;
        node *x = add(op::Convert, {q}, ca, cw, "_2d");
        if (b.sub) {
            node *zp = b.zp, *cz = b.cz, *sub = b.sub;
            node *zp2 = reshaped_constant(zp, drop_trailing(zp->out_shape, d.size(), dropped), "_2d");
            node *cz2 = add(op::Convert, {zp2}, ca, cz, "_2d");
            x = add(op::Subtract, {x, cz2}, {}, sub, "_2d");
        }
        node *s2 = reshaped_constant(scale, drop_trailing(scale->out_shape, d.size(), dropped), "_2d");
        if (b.cscale) s2 = add(op::Convert, {s2}, ca, b.cscale, "_2d"); // f16 scales
        x = add(op::Multiply, {x, s2}, {}, mul, "_2d");
        if (x->out_shape != shape_t{OC, IC}) {
            const node *from = b.reshape ? b.reshape : mul;
            x = reshape(x, {OC, IC}, from, "_2d");
        }
        return x;
    }

    std::unordered_map<std::string, shape_t> other_shape_; // graphs with `?`: shapes at another value
    graph &g_;
    const veto_callback &veto_;
};

} // namespace

std::vector<rewrite_record> convert_weight_compressed_conv1x1_to_matmul(graph &g, const veto_callback &veto) {
    g.infer();
    rewriter rw(g, veto);
    std::vector<rewrite_record> records;
    for (node *n : g.topo_order())
        if (n->kind == op::Convolution || n->kind == op::GroupConvolution) records.push_back(rw.visit(n));
    g.prune();
    g.infer();
    if (impl::verbose_level() >= 2)
        for (const auto &r : records)
            impl::verbose_print("graph,conv1x1_to_matmul," + r.conv + "," + (r.rewritten ? "rewritten" : "skipped") +
                                "," + r.reason);
    return records;
}

} // namespace qconv::graph
