// Aligned buffers and per-thread scratch (buffers.h).
#include "core/buffers.h"

#include <algorithm>
#include <cstring>
#include <new>

#include <sys/mman.h>

namespace qconv::impl {

void *alloc_aligned_bytes(size_t bytes) {
    constexpr size_t huge = size_t(2) << 20;
    const bool big = bytes >= huge;
    const size_t align = big ? huge : 64;
    const size_t rounded = std::max<size_t>(64, (bytes + align - 1) / align * align);
    void *p = std::aligned_alloc(align, rounded);
    if (!p) throw std::bad_alloc();
    if (big) madvise(p, rounded, MADV_HUGEPAGE);
    std::memset(p, 0, rounded);
    return p;
}

uint8_t *try_thread_scratch(scratch_use use, size_t bytes) noexcept {
    struct kept {
        aligned_buffer<uint8_t> p;
        size_t size = 0;
    };
    thread_local kept slots[static_cast<int>(scratch_use::count_)];
    kept &k = slots[static_cast<int>(use)];
    if (!k.p || k.size < bytes) {
        constexpr size_t page = 4096;
        const size_t rounded = std::max<size_t>(page, (bytes + page - 1) / page * page);
        k.p.reset(); // the old buffer goes first: the two need not fit together
        k.size = 0;
        k.p.reset(static_cast<uint8_t *>(std::aligned_alloc(page, rounded)));
        if (!k.p) return nullptr;
        std::memset(k.p.get(), 0, rounded);
        k.size = rounded;
    }
    return k.p.get();
}

uint8_t *thread_scratch(scratch_use use, size_t bytes) {
    uint8_t *p = try_thread_scratch(use, bytes);
    if (!p) throw std::bad_alloc();
    return p;
}

} // namespace qconv::impl
