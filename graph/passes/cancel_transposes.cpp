// The Transpose cancellation (run after the conv1x1 → MatMul rewrite, whose
// activation and output Transposes meet those of the next rewritten
// convolution): Transpose(Transpose(x, p1), p2) with p2 undoing p1 is x, also
// with a unary elementwise op between them (Relu, Gelu, Convert), which then
// reads x.
#include <unordered_map>
#include <unordered_set>

#include "qconv/graph.h"

namespace qconv::graph {

int cancel_transposes(graph &g) {
    // One pass in topological order with an index of each node's consumers
    // kept up to date, so n cancelling pairs cost O(n); restarting the scan
    // after every removal was quadratic (4 000 pairs: 19 s). A pair that a
    // removal creates further down (T1 T2 T3 T4) is still found: later nodes
    // are looked at with their inputs as they are by then.
    const std::vector<node *> order = g.topo_order();
    std::unordered_map<const node *, std::vector<node *>> users;
    for (node *c : order)
        for (node *in : c->inputs) users[in].push_back(c);
    std::unordered_set<const node *> gone;
    auto live_users = [&](const node *n) {
        std::unordered_set<const node *> u;
        for (const node *c : users[n])
            if (!gone.count(c)) u.insert(c);
        return u.size();
    };
    int removed = 0;
    for (node *t2 : order) {
        if (t2->kind != op::Transpose || gone.count(t2)) continue;
        node *u = t2->inputs[0];
        const bool unary = u->kind == op::Relu || u->kind == op::Gelu || u->kind == op::Convert;
        node *t1 = unary ? u->inputs[0] : u;
        if (t1->kind != op::Transpose) continue;
        if (unary && live_users(u) != 1) continue;
        const auto &p1 = t1->attr.order, &p2 = t2->attr.order;
        if (p1.size() != p2.size()) continue;
        bool identity = true;
        for (size_t j = 0; j < p2.size(); ++j) identity &= p1[p2[j]] == static_cast<int64_t>(j);
        if (!identity) continue;
        node *x = t1->inputs[0];
        node *repl = x;
        if (unary) {
            repl = g.add(u->kind, {x}, u->attr, u->id + "_moved");
            repl->friendly_name = u->friendly_name;
            repl->rt_info = u->rt_info;
            infer_node(*repl);
            users[x].push_back(repl);
        }
        // t2's consumers read repl from now on.
        for (node *c : users[t2]) {
            if (gone.count(c)) continue;
            for (node *&in : c->inputs)
                if (in == t2) in = repl;
            users[repl].push_back(c);
        }
        gone.insert(t2);
        ++removed;
    }
    g.prune();
    g.infer();
    return removed;
}

} // namespace qconv::graph
