// Verbose output (QCONV_VERBOSE, read once; set_verbose_level() for tests):
//   1  one line per primitive creation and per execution:
//        qconv_verbose,create,<cache_hit|cache_miss>,<impl>,attr[<id>],<problem>,<ms>
//        qconv_verbose,exec,<impl>,<problem>,<ms>
//   2  also every rejected candidate of the dispatcher, and in the tuned
//      mode (docs/dispatch.md) every timed candidate:
//        qconv_verbose,skip,<impl>,attr[<id>],<reason>
//        qconv_verbose,plan,<impl>,attr[<id>],<plan>       (the accepted row)
//        qconv_verbose,tune,<impl>,attr[<id>],<problem>,<ms>
// Lines go to stderr, whole (one write under a lock): core/verbose.h, whose
// level and printer the graph shares.
#pragma once

#include <string>

#include "core/verbose.h"
#include "qconv/conv.h"
#include "qconv/matmul.h"

namespace qconv::impl {

// benchdnn shape + data types, zero point, scales, bias and post-ops, e.g.
//   g1mb1ic17ih5oc3oh5kh3ph1,dt=u8:s8:u8,zp=per_tensor:3,scales=per_oc,bias,post_ops=relu;sum
std::string verbose_problem(const conv_problem &p);
std::string verbose_problem(const matmul_desc &d, const matmul_hints &h);

// Monotonic clock in milliseconds.
double now_ms();
// A time for a verbose line: milliseconds with four decimals.
std::string verbose_ms(double ms);

// Runs `run()`; at level 1 and above also times it and prints
// "exec,<name>,<desc()>,<ms>" (desc is only computed then).
template <class Run, class Desc>
void verbose_exec(const std::string &name, Run run, Desc desc) {
    if (verbose_level() < 1) {
        run();
        return;
    }
    const double t0 = now_ms();
    run();
    const double ms = now_ms() - t0;
    verbose_print("exec," + name + "," + desc() + "," + verbose_ms(ms));
}

} // namespace qconv::impl
