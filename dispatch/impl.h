// The implementation interface and the ordered implementation lists.
//
// An implementation list is a table of entries, best first and the reference
// last (dispatch/conv_list.cpp, dispatch/matmul_list.cpp). Each entry has a
// name that carries its configuration ("jit:conv_x8s8_1x1:avx512_vnni"),
// supports(), which accepts or says in one line why not, and create(), which
// builds a weight-independent kernel (cached by the dispatcher). The kernel
// packs weights into its own layout once per primitive and executes.
// Tests and benchmarks iterate the tables, so a new row is tested and
// benchmarked without further registration.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dispatch/platform.h"
#include "qconv/conv.h"
#include "qconv/matmul.h"
#include "qconv/post_ops.h"

namespace qconv::impl {

// Weights (and anything derived from them) in an implementation's layout.
struct packed {
    virtual ~packed() = default;
};

class conv_kernel {
public:
    virtual ~conv_kernel() = default;
    virtual std::shared_ptr<const packed> pack(const int8_t *wei, const float *bias) const = 0;
    // Thread-safe: may run concurrently on different buffers.
    virtual void execute(const packed &w, const void *src, void *dst, const exec_args &args) const = 0;
    // Whether the kernel returns the reference's int32 sums for every input.
    // qconv's own kernels do; a oneDNN peer may run an implementation that
    // saturates 16-bit partial sums or halves s8-source weights below VNNI.
    virtual bool exact() const { return true; }
};

struct conv_entry {
    std::string name;
    bool peer = false; // runs when forced by name (driver, benchmarks), never chosen by "auto"
    std::function<bool(const conv_problem &, const attr_set &, const platform &, std::string *why)> supports;
    std::function<std::shared_ptr<const conv_kernel>(const conv_problem &, const attr_set &, const platform &)> create;
};
// Best first, reference last.
const std::vector<conv_entry> &conv_list();

class matmul_kernel {
public:
    virtual ~matmul_kernel() = default;
    virtual std::shared_ptr<const packed> pack(const matmul_weights &w) const = 0;
    virtual void execute(const packed &w, const float *x, float *y, int threads) const = 0;
};

struct matmul_entry {
    std::string name;
    bool peer = false;
    std::function<bool(const matmul_desc &, const matmul_hints &, const platform &, std::string *why)> supports;
    std::function<std::shared_ptr<const matmul_kernel>(const matmul_desc &, const matmul_hints &, const platform &)> create;
};
const std::vector<matmul_entry> &matmul_list();

// Sets *why (when non-null) and returns false: `return reject(why, "...");`
inline bool reject(std::string *why, const std::string &reason) {
    if (why) *why = reason;
    return false;
}

} // namespace qconv::impl
