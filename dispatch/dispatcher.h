// The dispatcher: picks an implementation for a problem and builds primitives.
//
// Selection walks the ordered table (conv_list(), matmul_list()): entries in
// table order, and for each entry its attribute sets in order (attr[0], then
// attr[1]); the first (entry, attr) pair whose supports() accepts wins, as
// OpenVINO's conv node does. Peers are skipped unless forced by name. Every
// rejection is kept as "<impl> attr[<id>]: <reason>" (printed with
// QCONV_VERBOSE=2, and quoted in the error when nothing accepts).
//
// Forcing (conv_hints::impl / matmul_hints::impl = a name): only that entry is
// tried; an unknown name or a refusal is a qconv::error ("impl: ...") that lists
// the valid names or the reasons.
//
// select_conv()/select_conv_in() decide without creating anything, for any
// (possibly simulated) platform: that is how tests check AMX decisions here.
//
// Files: select.cpp (the walk), kernel_keys.cpp (the kernel cache keys),
// tuning.{h,cpp} (the opt-in tuned mode), convolution.cpp and matmul.cpp (the
// public primitive classes and their argument and range checks).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dispatch/host_platform.h"
#include "rows/row.h"

namespace qconv::impl {

struct conv_choice {
    const conv_entry *entry = nullptr;
    std::string name; // entry->name
    int attr_id = -1; // index into the attr sets
    attr_set attr;
    plan_ptr plan; // what the entry decided (create() consumes it)
};

// Decision on `list` with the given attribute sets.
conv_choice select_conv_in(const std::vector<conv_entry> &list, const std::vector<attr_set> &attrs,
                           const conv_problem &p, const platform &plat, const conv_hints &hints,
                           std::vector<std::string> *rejections = nullptr);
// The attribute sets select_conv() walks: build_attrs(), or
// build_attrs_for_peer() for a peer forced by name.
std::vector<attr_set> conv_attrs(const conv_problem &p, const platform &plat, const conv_hints &hints);
// Decision on conv_list() with conv_attrs(p, plat, hints).
conv_choice select_conv(const conv_problem &p, const platform &plat, const conv_hints &hints,
                        std::vector<std::string> *rejections = nullptr);
// Every (entry, first accepting attr set) that "auto" could pick, in table
// order (peers left out); the tuned mode times them.
std::vector<conv_choice> accepting_conv(const std::vector<conv_entry> &list, const std::vector<attr_set> &attrs,
                                        const conv_problem &p, const platform &plat);
// Whether an implementation hint asks the dispatcher to choose ("" or "auto").
bool is_auto(const std::string &impl);
// The table row of that name; an unknown name is a qconv::error ("impl: ...")
// listing the valid ones.
const conv_entry &conv_row_named(const std::string &name);
const matmul_entry &matmul_row_named(const std::string &name);

struct matmul_choice {
    const matmul_entry *entry = nullptr;
    std::string name;
    plan_ptr plan;
};
matmul_choice select_matmul_in(const std::vector<matmul_entry> &list, const matmul_desc &d, const matmul_hints &hints,
                               const platform &plat, std::vector<std::string> *rejections = nullptr);
matmul_choice select_matmul(const matmul_desc &d, const matmul_hints &hints, const platform &plat,
                            std::vector<std::string> *rejections = nullptr);

// What a qconv::convolution holds: the shared (cached) kernel, its own packed
// weights, and the names it was created with.
class conv_primitive {
public:
    conv_problem problem;
    std::string name;
    int attr_id = 0;
    attr_set attr;
    std::string verbose_desc;
    std::shared_ptr<const conv_kernel> kernel;
    std::shared_ptr<const packed> weights;
};

// One M class of a run-time-M MatMul: the row the table picks for the
// class's M, its kernel for that M, and packed weights shared with the other
// classes of the row when the kernels' packing() agree.
struct matmul_m_class {
    int64_t m = 0; // the rows the kernel runs: every M of the class, padded up to it
    std::string name;
    std::string verbose_desc;
    std::shared_ptr<const matmul_kernel> kernel;
    std::shared_ptr<const packed> weights;
};

// The M classes of a run-time M: every M up to 16, then multiples of 16 up
// to 256; more rows run in chunks of 256 (the last chunk by its class).
constexpr int64_t matmul_exact_m = 16, matmul_m_step = 16, matmul_m_chunk = 256;
// The class M that runs m rows (1 ≤ m ≤ matmul_m_chunk).
inline int64_t matmul_class_m(int64_t m) {
    return m <= matmul_exact_m ? m : (m + matmul_m_step - 1) / matmul_m_step * matmul_m_step;
}
// Its index in matmul_primitive::classes.
inline size_t matmul_class_index(int64_t class_m) {
    return class_m <= matmul_exact_m ? size_t(class_m - 1) : size_t(matmul_exact_m + class_m / matmul_m_step - 2);
}

class matmul_primitive {
public:
    matmul_desc desc;
    std::string name;
    std::string verbose_desc;
    std::shared_ptr<const matmul_kernel> kernel;
    std::shared_ptr<const packed> weights;
    // A run-time M (desc.m == runtime_m): every class, in increasing M,
    // built at creation and read-only afterwards (execute() takes no lock).
    std::vector<matmul_m_class> classes;
    bool avx512_convert = false; // f16/bf16 activations converted on AVX-512 (the platform has it)
};

// The kernel for (problem, attr, platform, entry, plan) from the global
// kernel cache, created from the plan on a miss. *hit tells which. The plan's
// str() is part of the key: it carries the tuning knobs the plan was made with.
std::shared_ptr<const conv_kernel> cached_conv_kernel(const conv_choice &c, const conv_problem &p, const platform &plat,
                                                      bool *hit = nullptr);
std::shared_ptr<const matmul_kernel> cached_matmul_kernel(const matmul_choice &c, const matmul_desc &d,
                                                          const matmul_hints &h, const platform &plat,
                                                          bool *hit = nullptr);

} // namespace qconv::impl
