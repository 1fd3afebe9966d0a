// The implementation interface.
//
// An implementation table is an ordered list of rows, best first and the
// reference last, written out in dispatch/conv_list.cpp and
// dispatch/matmul_list.cpp. A row has a name that carries its configuration
// in oneDNN's ISA vocabulary ("jit:conv_dw_x8s8_rows:avx512_core_vnni"), the CPU
// features its instructions need, supports() — which refuses with a one-line
// reason or returns a plan, everything the row decided for the problem (the
// analogue of oneDNN's primitive descriptor) — and create(), which builds a
// weight-independent kernel from that plan without deciding again (cached by
// the dispatcher). The kernel packs weights into its own layout once per
// primitive and executes. Tests and benchmarks iterate the tables, so a new
// row is tested and benchmarked without further registration.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/lowering.h"
#include "qconv/conv.h"
#include "qconv/conv_f32.h"
#include "qconv/matmul.h"
#include "qconv/post_ops.h"
#include "rows/platform.h"

namespace qconv::impl {

// What kind of code a row runs: qconv's JIT kernels, oneDNN's, a composite of
// other rows, or the reference. The first word of its name.
enum class row_family { jit, onednn, composite, ref };
inline const char *to_string(row_family f) {
    switch (f) {
    case row_family::jit: return "jit";
    case row_family::onednn: return "onednn";
    case row_family::composite: return "composite";
    case row_family::ref: return "ref";
    }
    return "?";
}

// What a row decided in supports(). str() is a short description
// (QCONV_VERBOSE=2, the kernel cache key); rows with nothing to decide use
// the base class.
struct plan {
    virtual ~plan() = default;
    virtual std::string str() const { return "-"; }
};
using plan_ptr = std::shared_ptr<const plan>;

// Weights (and anything derived from them) in an implementation's layout.
struct packed {
    virtual ~packed() = default;
};

class conv_kernel {
public:
    virtual ~conv_kernel() = default;
    virtual std::shared_ptr<const packed> pack(const int8_t *wei, const float *bias) const = 0;
    // Thread-safe: may run concurrently on different buffers. The arguments
    // are valid: qconv::convolution::execute checked them once (non-null
    // src/dst, one non-null tensor per full-tensor binary operand).
    virtual void execute(const packed &w, const void *src, void *dst, const exec_args &args) const = 0;
    // Whether the kernel returns the reference's int32 sums for every input.
    // qconv's own kernels do; a oneDNN peer may run an implementation that
    // saturates 16-bit partial sums or halves s8-source weights below VNNI.
    virtual bool exact() const { return true; }
};

struct conv_entry {
    using decide_fn = std::function<plan_ptr(const conv_problem &, const attr_set &, const platform &, std::string *)>;
    using build_fn =
        std::function<std::shared_ptr<const conv_kernel>(const conv_problem &, const attr_set &, const plan &)>;
    std::string name;
    feature_set needs; // CPU features the row's code uses
    bool peer = false; // runs when forced by name (driver, benchmarks), never chosen by "auto"
    // What tests and benchmarks select rows by (never by parsing names):
    row_family family = row_family::jit;
    bool only_1x1 = false;       // takes 1x1 kernels only
    bool only_depthwise = false; // takes groups == IC == OC only
    bool only_dw_item = false;   // takes chains with a fused dw item (post_op::kind::dw_conv) only
    decide_fn decide;            // the row's own checks (needs already satisfied)
    build_fn build;
    // Where "auto" leaves a problem the row supports to the rows below it,
    // because they are measured faster there: the reason, or "" (unset:
    // never). Forced by name the row still runs, and the tuned mode times it.
    // The platform is the one decided for (rows measured slower than the rows
    // below only on some CPUs defer there alone); the plan is the one the row
    // decided, so that defer reads its decision instead of deciding again.
    using defer_fn = std::function<std::string(const conv_problem &, const attr_set &, const platform &, const plan &)>;
    defer_fn defer;

    // The plan for (p, attr) on `pl`, or null with the reason in *why (the
    // missing features first).
    plan_ptr supports(const conv_problem &p, const attr_set &attr, const platform &pl, std::string *why) const;
    // The kernel for a plan supports() returned.
    std::shared_ptr<const conv_kernel> create(const conv_problem &p, const attr_set &attr, const plan &pl) const {
        return build(p, attr, pl);
    }
};
// Best first, reference last.
const std::vector<conv_entry> &conv_list();

class matmul_kernel {
public:
    virtual ~matmul_kernel() = default;
    virtual std::shared_ptr<const packed> pack(const matmul_weights &w) const = 0;
    virtual void execute(const packed &w, const float *x, float *y, int threads) const = 0;
    // X of type x_dt (f16 or bf16: 16-bit words) read by the kernel itself,
    // converted exactly to f32 where it loads X; the same bits as execute()
    // on the converted X. Kernels whose takes_x() refuses x_dt get X
    // converted to f32 first (matmul::execute_typed).
    virtual bool takes_x(dtype x_dt) const { return x_dt == dtype::f32; }
    virtual void execute_x(const packed &w, const void *x, dtype x_dt, float *y, int threads) const {
        if (x_dt != dtype::f32) fail("x", std::string("this kernel reads f32 activations, not ") + to_string(x_dt));
        execute(w, static_cast<const float *>(x), y, threads);
    }
    // Kernels of one row for descriptors that differ only in M may share
    // packed weights when they return the same non-empty packing() (a
    // run-time-M primitive packs once per row and packing). "": the packed
    // weights depend on M too (e.g. they hold an M-specific oneDNN primitive).
    virtual std::string packing() const { return ""; }
};

struct matmul_entry {
    using decide_fn =
        std::function<plan_ptr(const matmul_desc &, const matmul_hints &, const platform &, std::string *)>;
    using build_fn =
        std::function<std::shared_ptr<const matmul_kernel>(const matmul_desc &, const matmul_hints &, const plan &)>;
    std::string name;
    feature_set needs;
    bool peer = false;
    row_family family = row_family::jit;
    int weight_bits = 0;               // 8: u8/s8 only, 4: u4/s4 only, 0: any
    bool dynamic_quantization = false; // runs only with the opt-in hint
    decide_fn decide;
    build_fn build;

    plan_ptr supports(const matmul_desc &d, const matmul_hints &h, const platform &pl, std::string *why) const;
    std::shared_ptr<const matmul_kernel> create(const matmul_desc &d, const matmul_hints &h, const plan &pl) const {
        return build(d, h, pl);
    }
};
const std::vector<matmul_entry> &matmul_list();

// The f32 convolution (qconv::convolution_f32): NHWC f32 data, weights bound
// at creation (a row reorders them into its layout), a post-op chain.
class conv_f32_kernel {
public:
    virtual ~conv_f32_kernel() = default;
    // Thread-safe: may run concurrently on different buffers.
    virtual void execute(const float *src, float *dst, int threads) const = 0;
};

struct conv_f32_entry {
    using decide_fn = std::function<bool(const conv_desc &, const platform &, std::string *)>;
    // May throw qconv::error when the implementation refuses after all (the
    // walk then records the reason and takes the next row).
    using build_fn = std::function<std::shared_ptr<const conv_f32_kernel>(const conv_desc &, const float *wei,
                                                                          const float *bias, const f32_post_ops &post)>;
    std::string name;
    feature_set needs;
    row_family family = row_family::onednn;
    decide_fn decide;
    build_fn build;
};
const std::vector<conv_f32_entry> &conv_f32_list();

// Sets *why (when non-null) and returns false: `return reject(why, "...");`
inline bool reject(std::string *why, const std::string &reason) {
    if (why) *why = reason;
    return false;
}

// A plan with nothing to decide, for rows whose supports() is a yes/no.
inline plan_ptr plain_plan() { return std::make_shared<plan>(); }

// The start of every row constructor: an entry called `name`, which must be
// `canonical`, the name its configuration gives (a table line cannot name a
// row built for another configuration), of `family`.
template <class Entry>
Entry named_entry(const std::string &name, const std::string &canonical, row_family family) {
    if (name != canonical) fail("impl", "row '" + name + "' is named '" + canonical + "' by its configuration");
    Entry e;
    e.name = name;
    e.family = family;
    return e;
}
// decide functions from a yes/no check: the plain plan when it accepts.
template <class Check>
auto decide_by(Check check) {
    return [check](const auto &a, const auto &b, const platform &pl, std::string *why) -> plan_ptr {
        return check(a, b, pl, why) ? plain_plan() : nullptr;
    };
}

} // namespace qconv::impl
