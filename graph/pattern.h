// A small pattern matcher over the graph IR.
//
// A pattern is a tree rooted at the node being matched and grown towards its
// inputs. Pieces:
//   is({op...}, {inputs}, label, pred)  a node of one of the kinds whose inputs
//                                       match in order (no inputs listed: not checked)
//   any(label, pred)                    any node
//   optional(op, {inputs}, label)       either that node, or — when absent — its
//                                       first input pattern matched at this position
//   alt({p, q}, label)                  the first alternative that matches
// Predicates see the candidate node; single_consumer(g) is one. Labels bind
// matched nodes in a `bindings` map; a failed branch leaves no bindings behind.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qconv/graph.h"

namespace qconv::graph::pattern {

struct pat;
using P = std::shared_ptr<const pat>;
using predicate = std::function<bool(const node &)>;
using bindings = std::map<std::string, node *>;

struct pat {
    enum class kind { any, is, optional, alt } k = kind::any;
    std::vector<op> ops;
    std::vector<P> inputs;
    predicate pred;
    std::string label;
};

P any(const std::string &label = "", predicate pred = {});
P is(std::vector<op> ops, std::vector<P> inputs, const std::string &label = "", predicate pred = {});
P optional(op k, std::vector<P> inputs, const std::string &label = "", predicate pred = {});
P alt(std::vector<P> alternatives, const std::string &label = "");

// Matches p at n; on success adds the labels to *b.
bool match(const P &p, node *n, bindings *b);

// Predicates.
predicate single_consumer(const graph &g);
predicate integer_type();
predicate of_type(etype t);
predicate all(std::vector<predicate> ps);

} // namespace qconv::graph::pattern
