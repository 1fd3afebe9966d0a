// Memory the kernels own: zeroed aligned buffers for packed weights and
// parameters, and scratch kept per calling thread (padded source copies, the
// fused row's ring, the composite's intermediate, MatMul tiles, oneDNN's
// scratchpad).
//
// Scratch is one buffer per (thread, use), 4 KB aligned, zeroed when it is
// (re)allocated and reused while it is large enough, so a call allocates
// nothing and touches no fresh pages once a thread has run the problem size
// before (OpenMP workers persist). Uses are separate slots because one call
// may hold several at once (the fused row's ring while its depthwise kernel
// makes its padded copy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

namespace qconv::impl {

struct aligned_free {
    void operator()(void *p) const { std::free(p); }
};
template <typename T>
using aligned_buffer = std::unique_ptr<T[], aligned_free>;

// count zeroed elements, 64-byte aligned; from 2 MB on 2 MB aligned and
// advised onto transparent huge pages (advice only: failure keeps 4 KB
// pages), so a weight stream crosses no 4 KB TLB pages. Throws
// std::bad_alloc when the memory is not there.
void *alloc_aligned_bytes(size_t bytes);
template <typename T>
aligned_buffer<T> alloc_aligned(size_t count) {
    return aligned_buffer<T>(static_cast<T *>(alloc_aligned_bytes(count * sizeof(T))));
}

enum class scratch_use : int {
    dense_copy,        // jit:conv_x8s8 padded source copy
    dw_copy,           // depthwise kernels' padded source copy
    dw_row_copy,       // depthwise row kernel: the padded rows of one output row
    amx_copy,          // jit:conv_x8s8:avx512_core_amx padded source copy
    amx_ring,          // jit:conv_x8s8:avx512_core_amx gathered blocks
    dw_ring,           // jit:conv_1x1_dw_x8s8 intermediate rows
    composite_mid,     // composite:conv_1x1_dw intermediate (u8/s8)
    matmul_a,          // AMX MatMul: converted activations
    matmul_panels,     // AMX MatMul: a thread's accumulators and B tiles
    onednn_scratchpad, // wrapped oneDNN primitives
    count_
};

// The calling thread's buffer for `use`, at least `bytes` long. Throws
// std::bad_alloc when it cannot grow; try_thread_scratch returns null instead
// (for callers inside a parallel region, where nothing may throw).
uint8_t *thread_scratch(scratch_use use, size_t bytes);
uint8_t *try_thread_scratch(scratch_use use, size_t bytes) noexcept;

} // namespace qconv::impl
