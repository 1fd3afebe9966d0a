// The pattern matcher (see graph/pattern.h).
#include "graph/pattern.h"

#include <algorithm>

namespace qconv::graph::pattern {

namespace {
std::shared_ptr<pat> make(pat::kind k, std::vector<op> ops, std::vector<P> inputs, const std::string &label,
                          predicate pred) {
    auto p = std::make_shared<pat>();
    p->k = k;
    p->ops = std::move(ops);
    p->inputs = std::move(inputs);
    p->label = label;
    p->pred = std::move(pred);
    return p;
}

bool bind(const pat &p, node *n, bindings *b) {
    if (p.label.empty()) return true;
    auto it = b->find(p.label);
    if (it != b->end()) return it->second == n; // a label bound twice must be the same node
    (*b)[p.label] = n;
    return true;
}

bool match_is(const pat &p, node *n, bindings *b) {
    if (!p.ops.empty() && std::find(p.ops.begin(), p.ops.end(), n->kind) == p.ops.end()) return false;
    if (p.pred && !p.pred(*n)) return false;
    if (!p.inputs.empty()) {
        if (n->inputs.size() != p.inputs.size()) return false;
        for (size_t i = 0; i < p.inputs.size(); ++i)
            if (!match(p.inputs[i], n->inputs[i], b)) return false;
    }
    return bind(p, n, b);
}
} // namespace

P any(const std::string &label, predicate pred) { return make(pat::kind::any, {}, {}, label, std::move(pred)); }
P is(std::vector<op> ops, std::vector<P> inputs, const std::string &label, predicate pred) {
    return make(pat::kind::is, std::move(ops), std::move(inputs), label, std::move(pred));
}
P optional(op k, std::vector<P> inputs, const std::string &label, predicate pred) {
    return make(pat::kind::optional, {k}, std::move(inputs), label, std::move(pred));
}
P alt(std::vector<P> alternatives, const std::string &label) {
    return make(pat::kind::alt, {}, std::move(alternatives), label, {});
}

bool match(const P &p, node *n, bindings *b) {
    if (!n) return false;
    bindings trial = *b;
    bool ok = false;
    switch (p->k) {
    case pat::kind::any: ok = (!p->pred || p->pred(*n)) && bind(*p, n, &trial); break;
    case pat::kind::is: ok = match_is(*p, n, &trial); break;
    case pat::kind::optional:
        ok = match_is(*p, n, &trial);
        if (!ok) { // absent: the first input's pattern stands here
            trial = *b;
            ok = !p->inputs.empty() && match(p->inputs[0], n, &trial);
        }
        break;
    case pat::kind::alt:
        for (const P &a : p->inputs) {
            trial = *b;
            if (match(a, n, &trial) && bind(*p, n, &trial)) {
                ok = true;
                break;
            }
        }
        break;
    }
    if (ok) *b = std::move(trial);
    return ok;
}

predicate single_consumer(const graph &g) {
    return [&g](const node &n) { return g.consumers(&n).size() == 1; };
}
predicate integer_type() {
    return [](const node &n) { return is_integer(n.out_type); };
}
predicate of_type(etype t) {
    return [t](const node &n) { return n.out_type == t; };
}
predicate all(std::vector<predicate> ps) {
    return [ps](const node &n) {
        for (const auto &p : ps)
            if (!p(n)) return false;
        return true;
    };
}

} // namespace qconv::graph::pattern
