// The passes' own vocabulary (internal to graph/passes): the table that
// run_passes walks (pass_list.cpp) and the state each row is handed.
//
// A pass is one row: its name, what it does, and a function of the graph and
// the state. A pass of the graph alone (void f(graph &), or one that returns
// a count) takes `on_graph<f>` as its function, so adding one is one row.
#pragma once

#include <vector>

#include "qconv/graph.h"

namespace qconv::graph::passes {

// What run_passes hands every pass: the caller's veto and the records that
// run_passes returns (the conv1x1 → MatMul rewrite's) or hands back through
// `lowered` (the int8 lowering's).
struct pass_state {
    const veto_callback &veto;
    std::vector<rewrite_record> rewrites;
    std::vector<rewrite_record> lowered;
};

struct pass {
    const char *name;
    const char *what;
    void (*run)(graph &, pass_state &);
};

// The function of a row for a pass that takes the graph alone.
template <auto F>
void on_graph(graph &g, pass_state &) {
    (void)F(g);
}

// The passes in the order run_passes runs them.
const std::vector<pass> &pass_list();

} // namespace qconv::graph::passes
