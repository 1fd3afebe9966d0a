// Elementwise regions: f32 Add, Subtract, Multiply, Divide, Relu, Clamp and
// Sigmoid nodes of one 4-D shape whose values only each other read — a
// hard-swish x·Clip(x + 3, 0, 6)/6, a hard-sigmoid, a BatchNormalization's
// Multiply and Add and the Relu after them — run as one step that evaluates
// them chunk by chunk (detail::eval_region): each op's own arithmetic, element
// for element, so the same values, without writing and reading the
// intermediate tensors. The region takes the last node's place (its root); the
// others are fused into it. Its other operands have the root's shape or
// broadcast per channel or per tensor (detail::region_operand). In an f32
// island the region keeps NHWC when every operand of the root's shape is NHWC.
#include <algorithm>
#include <set>

#include "graph/exec/compile.h"
#include "graph/exec/steps.h"
#include "graph/ops/ops.h"

namespace qconv::graph::exec {

namespace {

bool region_op(const node &n) {
    switch (n.kind) {
    case op::Add:
    case op::Subtract:
    case op::Multiply:
    case op::Divide:
    case op::Relu:
    case op::Clamp:
    case op::Sigmoid: break;
    default: return false;
    }
    if (n.out_type != dtype::f32 || n.out_shape.size() != 4 || constant_subgraph(&n)) return false;
    return std::all_of(n.inputs.begin(), n.inputs.end(), [&](const node *i) {
        return i->out_type == dtype::f32 && detail::region_operand(i->out_shape, n.out_shape);
    });
}

// Every node's readers (each once), as graph::consumers gives them.
using reader_index = std::map<const node *, std::vector<node *>>;
reader_index readers_of(const graph &g) {
    reader_index r;
    for (const auto &c : g.nodes())
        for (const node *in : c->inputs) {
            std::vector<node *> &v = r[in];
            if (v.empty() || v.back() != c.get()) v.push_back(c.get());
        }
    return r;
}

// The region grown from root r: inputs of its nodes that are region ops of
// r's shape read only by the region (no Result, no other reader).
std::vector<node *> grow(const reader_index &readers, node *r, const std::set<const node *> &taken) {
    std::set<node *> in_region{r};
    bool grew = true;
    while (grew) {
        grew = false;
        for (node *m : std::vector<node *>(in_region.begin(), in_region.end()))
            for (node *i : m->inputs) {
                if (in_region.count(i) || taken.count(i) || !region_op(*i) || i->out_shape != r->out_shape) continue;
                const std::vector<node *> &cs = readers.at(i);
                if (std::all_of(cs.begin(), cs.end(), [&](node *c) { return in_region.count(c) > 0; })) {
                    in_region.insert(i);
                    grew = true;
                }
            }
    }
    return {in_region.begin(), in_region.end()};
}

} // namespace

void find_elementwise_regions(graph &g, const std::vector<node *> &order, compile_context &cx) {
    std::map<const node *, size_t> pos;
    for (size_t k = 0; k < order.size(); ++k) pos[order[k]] = k;
    std::set<const node *> taken; // in a region, or fused into another step already
    for (const auto &f : cx.fused_into) taken.insert(f.first);
    // What an f32 convolution's primitive takes (its bias, a BatchNormalization): not a region's.
    for (const auto &[conv, chain] : cx.conv_epilogues)
        for (const conv_epilogue_op &e : chain) taken.insert(e.nodes.begin(), e.nodes.end());
    const reader_index readers = readers_of(g); // one index, not a scan of the graph per candidate
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        node *r = *it;
        if (taken.count(r) || !region_op(*r)) continue;
        std::vector<node *> nodes = grow(readers, r, taken);
        if (nodes.size() < 2) continue;
        std::sort(nodes.begin(), nodes.end(), [&](const node *a, const node *b) { return pos.at(a) < pos.at(b); });
        region reg;
        for (node *m : nodes) {
            taken.insert(m);
            reg.nodes.push_back(m);
            if (m != r) cx.fused_into[m] = r->id;
        }
        const std::set<const node *> inside(nodes.begin(), nodes.end());
        for (node *m : nodes)
            for (node *i : m->inputs)
                if (!inside.count(i) && std::find(reg.operands.begin(), reg.operands.end(), i) == reg.operands.end())
                    reg.operands.push_back(i);
        cx.regions[r] = std::move(reg);
    }
}

built elementwise_region(compile_context &cx, node &n) {
    region reg = std::move(cx.regions.at(&n));
    std::vector<int> in;
    for (const node *x : reg.operands) in.push_back(cx.slot.at(x));
    std::string impl = "graph:elementwise_region (" + std::to_string(reg.nodes.size()) + " ops:";
    for (const node *m : reg.nodes) impl += std::string(" ") + to_string(m->kind);
    impl += ")";
    return {std::make_unique<region_step>(&n, std::move(in), cx.out, std::move(reg)), impl};
}

void region_step::run(run_context &ctx) const {
    const std::vector<const tensor *> &ins = ctx.gather(in);
    const shape_t &S = n->out_shape;
    bool all_nhwc = true;
    for (size_t k = 0; k < ins.size(); ++k) {
        if (ins[k]->shape != r.operands[k]->out_shape)
            fail(n->where(), "elementwise region: operand '" + r.operands[k]->id + "' has shape " +
                                 to_string(ins[k]->shape) + ", expected " + to_string(r.operands[k]->out_shape));
        if (ins[k]->shape == S) all_nhwc = all_nhwc && ins[k]->order == layout::nhwc;
    }
    const layout order = nhwc && all_nhwc ? layout::nhwc : layout::plain;
    // Operands of the root's shape in the output's layout; the broadcast ones
    // are the same bytes in either.
    std::vector<tensor> copies;
    copies.reserve(ins.size());
    std::map<const node *, const tensor *> ext;
    for (size_t k = 0; k < ins.size(); ++k) {
        const tensor *t = ins[k];
        if (t->shape == S && t->order != order) {
            copies.push_back(t->to_layout(order));
            t = &copies.back();
        }
        ext[r.operands[k]] = t;
    }
    tensor &o = ctx.v[out];
    const int k = in_place < 0 ? -1 : static_cast<int>(std::find(in.begin(), in.end(), in_place) - in.begin());
    if (k >= 0 && ext.at(r.operands[k]) == &ctx.v[in_place] && ctx.v[in_place].order == order) {
        // Chunk by chunk each element is read before it is written: the
        // operand's storage becomes the output (already in cache).
        ctx.A.give(o);
        tensor &src = ctx.v[in_place];
        o.type = dtype::f32;
        o.shape = S;
        o.order = order;
        o.bytes.swap(src.bytes);
        ext[r.operands[k]] = &o;
    } else {
        ctx.A.take(o, dtype::f32, S, order);
    }
    detail::eval_region(r.nodes, ext, o);
}

void region_step::settle(const graph &, const std::set<int> &dying, const std::vector<bool> &keep) {
    for (size_t k = 0; k < in.size(); ++k)
        if (dying.count(in[k]) && !keep[in[k]] && r.operands[k]->out_shape == n->out_shape &&
            r.operands[k]->out_type == dtype::f32) {
            in_place = in[k];
            return;
        }
}

// An operand of the root's shape is read NHWC when the region writes NHWC; a
// broadcast one has the same bytes in either layout.
bool region_step::reads_nhwc(const node &) const { return nhwc; }

} // namespace qconv::graph::exec
