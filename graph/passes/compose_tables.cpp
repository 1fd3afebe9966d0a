// Table lookups in a row as one (docs/graph.md, "8-bit elementwise islands").
//
// A LookupTable that alone reads another one reads the first one's input
// instead, through a composed table — the same bytes by construction, since
// the executor would look up the same entries one after the other:
//   unary after unary      T[c][x] = T2[c][T1[c][x]] (a table per channel
//                          when either one is)
//   unary after binary     T[i] = T2[T1[i]] (T2 one table of 256)
//   binary after unary     T[x·256 + y] = T2[T1[x]·256 + y], or
//                          T2[x·256 + T1[y]] when it reads the second input
//                          (T1 one table of 256)
// The reading LookupTable keeps its id; its inputs and table change (a binary
// one fed by two unary tables takes both in one run, one after the other).
#include <algorithm>

#include "graph/ir/detail.h"
#include "qconv/graph.h"

namespace qconv::graph {

namespace {

std::vector<uint8_t> table_of(const node &lut) {
    const tensor t = detail::constant_value(*lut.inputs.back());
    return {t.bytes.begin(), t.bytes.end()};
}

bool unary(const node &lut) { return lut.inputs.size() == 2; }
bool single_table(const node &lut) {
    return elems_of(lut.inputs.back()->out_shape) <= 65536 && lut.inputs.back()->out_shape.size() == 1;
}

// The composed table of p (read by u at input i) and u, or empty when the
// pair is not one of the forms above.
std::vector<uint8_t> composed(const node &p, const node &u, size_t i, shape_t *shape) {
    const std::vector<uint8_t> t1 = table_of(p), t2 = table_of(u);
    if (unary(p) && unary(u)) {
        const int64_t c1 = static_cast<int64_t>(t1.size() / 256), c2 = static_cast<int64_t>(t2.size() / 256);
        if (c1 != 1 && c2 != 1 && c1 != c2) return {};
        const int64_t C = std::max(c1, c2);
        std::vector<uint8_t> t(static_cast<size_t>(C * 256));
        for (int64_t c = 0; c < C; ++c)
            for (int x = 0; x < 256; ++x)
                t[c * 256 + x] = t2[(c2 == 1 ? 0 : c) * 256 + t1[(c1 == 1 ? 0 : c) * 256 + x]];
        *shape = u.inputs.back()->out_shape.size() == 2 ? u.inputs.back()->out_shape : p.inputs.back()->out_shape;
        return t;
    }
    if (!unary(p) && unary(u) && single_table(u)) {
        std::vector<uint8_t> t(65536);
        for (size_t j = 0; j < t.size(); ++j) t[j] = t2[t1[j]];
        *shape = {65536};
        return t;
    }
    if (unary(p) && !unary(u) && single_table(p)) {
        std::vector<uint8_t> t(65536);
        for (int x = 0; x < 256; ++x)
            for (int y = 0; y < 256; ++y) t[x * 256 + y] = i == 0 ? t2[t1[x] * 256 + y] : t2[x * 256 + t1[y]];
        *shape = {65536};
        return t;
    }
    return {};
}

} // namespace

int compose_lookup_tables(graph &g) {
    g.prune(); // readers left by earlier passes are not readers
    int n = 0;
    for (node *u : g.topo_order()) {
        if (u->kind != op::LookupTable) continue;
        for (size_t i = 0; i + 1 < u->inputs.size(); ++i) {
            node *p = u->inputs[i];
            if (p->kind != op::LookupTable || std::count(u->inputs.begin(), u->inputs.end(), p) != 1 ||
                g.consumers(p).size() != 1)
                continue;
            shape_t shape;
            std::vector<uint8_t> t = composed(*p, *u, i, &shape);
            if (t.empty()) continue;
            auto d = std::make_shared<constant_data>();
            d->bytes = std::move(t);
            node *table = g.constant(u->inputs.back()->out_type, shape, d, g.unique_id(u->id + "_composed_table"));
            infer_node(*table);
            std::vector<node *> in(p->inputs.begin(), p->inputs.end() - 1); // p's operands
            if (unary(*u)) in.push_back(table);
            else if (i == 0) in = {p->inputs[0], u->inputs[1], table};
            else in = {u->inputs[0], p->inputs[0], table};
            u->inputs = in; // the positions of u's other inputs are kept: a binary u goes on with its second
            infer_node(*u);
            ++n;
        }
    }
    if (n) {
        g.prune();
        g.infer();
    }
    return n;
}

} // namespace qconv::graph
