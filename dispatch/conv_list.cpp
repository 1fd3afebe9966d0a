// The conv implementation table, in dispatch order (best first, reference
// last). The rows come from the kernel families (dispatch/registry.h):
//
//   1. oneDNN brgconv rows           onednn_conv_entries()  (+ `onednn:any` peer)
//   2. JIT rows                      jit_conv_entries()
//   3. the reference                 ref_conv_entries()     `ref:conv`
//
// The dispatcher walks entries in this order and, for each entry, the attr
// sets in order (attr[0] then attr[1]); the first accepted pair wins.
#include "dispatch/registry.h"

namespace qconv::impl {

// Weak defaults: replaced by the definitions in kernels/onednn/ and
// kernels/jit/ once those exist in the library.
__attribute__((weak)) std::vector<conv_entry> onednn_conv_entries() { return {}; }
__attribute__((weak)) std::vector<conv_entry> jit_conv_entries() { return {}; }

namespace {
std::vector<conv_entry> build_conv_list() {
    std::vector<conv_entry> list;
    auto append = [&list](std::vector<conv_entry> rows) {
        for (auto &r : rows) list.push_back(std::move(r));
    };
    append(onednn_conv_entries()); // ---- rows: oneDNN brgconv (top), onednn:any peer
    append(jit_conv_entries());    // ---- rows: JIT kernels (between brgconv and ref)
    append(ref_conv_entries());    // ---- the reference: always last
    return list;
}
} // namespace

const std::vector<conv_entry> &conv_list() {
    static const std::vector<conv_entry> list = build_conv_list();
    return list;
}

} // namespace qconv::impl
