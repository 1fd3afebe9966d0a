// The verbose level (QCONV_VERBOSE, read once; set_verbose_level() for
// tests) and the one way a verbose line is printed, shared by the
// dispatcher (dispatch/verbose.h: what each level prints) and the graph.
#pragma once

#include <string>

namespace qconv::impl {

int verbose_level();
void set_verbose_level(int level);
// Prints "qconv_verbose,<fields>\n" to stderr, whole (one write under a lock).
void verbose_print(const std::string &fields);

} // namespace qconv::impl
