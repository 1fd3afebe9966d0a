// Pieces shared by the weight-compressed MatMul kernels: the f32 rows
// (matmul_wc.cpp, matmul_wc_gen.cpp) and the dynamic-quantization row
// (matmul_wc_dq.cpp).
//
// Host side (qconv::impl): the zeroed, aligned buffers that hold packed
// weights and parameters (2 MB aligned and advised onto transparent huge
// pages from 2 MB on, so a weight stream crosses no 4 KB TLB pages), the
// 4-bit test and the validation of matmul_weights against a descriptor.

#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include <sys/mman.h>

#include "dispatch/impl.h"
#include "qconv/types.h"

namespace qconv::impl {

struct aligned_free {
    void operator()(void *p) const { std::free(p); }
};
template <typename T>
using aligned_buffer = std::unique_ptr<T[], aligned_free>;

// count zeroed elements, 64-byte aligned; from 2 MB on 2 MB aligned and
// advised onto transparent huge pages (advice only: failure keeps 4 KB pages).
template <typename T>
aligned_buffer<T> alloc_wc_buffer(size_t count) {
    constexpr size_t huge = size_t(2) << 20;
    const bool big = count * sizeof(T) >= huge;
    const size_t align = big ? huge : 64;
    const size_t bytes = std::max<size_t>(64, (count * sizeof(T) + align - 1) / align * align);
    void *p = std::aligned_alloc(align, bytes);
    if (!p) throw std::bad_alloc();
    if (big) madvise(p, bytes, MADV_HUGEPAGE);
    std::memset(p, 0, bytes);
    return aligned_buffer<T>(static_cast<T *>(p));
}

inline bool four_bit(dtype dt) { return dt == dtype::u4 || dt == dtype::s4; }

// The values a zero point of weight type dt may take.
inline void zp_range(dtype dt, int32_t *lo, int32_t *hi) {
    switch (dt) {
    case dtype::u8: *lo = 0, *hi = 255; break;
    case dtype::s8: *lo = -128, *hi = 127; break;
    case dtype::u4: *lo = 0, *hi = 15; break;
    default: *lo = -8, *hi = 7; break;
    }
}

// Throws qconv::error (field first) for missing pointers and zero points
// outside the weight type's range.
inline void check_wc_weights(const matmul_desc &d, const matmul_weights &w) {
    if (!w.wei) fail("wei", "is null");
    if (!w.scale) fail("scale", "is null");
    if (d.with_bias && !w.bias) fail("bias", "with_bias is set but no bias was given");
    if (d.zp == matmul_desc::zp_kind::none) return;
    if (!w.zp) fail("zp", "is null but a zero point is declared");
    int32_t lo, hi;
    zp_range(d.wei_dt, &lo, &hi);
    const int64_t count = d.zp == matmul_desc::zp_kind::per_tensor ? 1 : d.n * d.n_groups();
    for (int64_t i = 0; i < count; ++i)
        if (w.zp[i] < lo || w.zp[i] > hi)
            fail("zp", "value " + std::to_string(w.zp[i]) + " at " + std::to_string(i) + " is outside the " +
                           to_string(d.wei_dt) + " range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

} // namespace qconv::impl
