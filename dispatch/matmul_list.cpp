// The weight-compressed MatMul implementation table, in dispatch order (best
// first, reference last); rows come from the kernel families
// (dispatch/registry.h):
//
//   1. JIT rows                      jit_matmul_entries()
//   2. oneDNN rows (peers)           onednn_matmul_entries()
//   3. the reference                 ref_matmul_entries()   `ref:matmul`
#include "dispatch/registry.h"

namespace qconv::impl {

__attribute__((weak)) std::vector<matmul_entry> jit_matmul_entries() { return {}; }
__attribute__((weak)) std::vector<matmul_entry> onednn_matmul_entries() { return {}; }

namespace {
std::vector<matmul_entry> build_matmul_list() {
    std::vector<matmul_entry> list;
    auto append = [&list](std::vector<matmul_entry> rows) {
        for (auto &r : rows) list.push_back(std::move(r));
    };
    append(jit_matmul_entries());    // ---- rows: JIT compressed-weight kernels
    append(onednn_matmul_entries()); // ---- rows: oneDNN (peers for benchmarks)
    append(ref_matmul_entries());    // ---- the reference: always last
    return list;
}
} // namespace

const std::vector<matmul_entry> &matmul_list() {
    static const std::vector<matmul_entry> list = build_matmul_list();
    return list;
}

} // namespace qconv::impl
