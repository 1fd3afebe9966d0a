// The cache model of the AMX emulator's memory model (amx_emulator.h,
// docs/amx_emulator.md): one core's L1D (48 KiB, 12-way) and L2 (2 MiB,
// 16-way), 64-byte lines, LRU replacement, indexed by virtual address.
//
// Non-inclusive: a line missing in both levels is filled into both, a line
// found in L2 is filled into L1, an L1 hit does not touch L2 (so L2 can evict
// a line that L1 still holds, and L1 keeps it). Stores allocate like loads;
// write-backs are not modelled. A plain struct of zeroed arrays is an empty
// cache, so zeroed memory (mmap) holds one without construction, and nothing
// here allocates or locks: the SIGILL / SIGTRAP handlers call it.
#pragma once

#include <cstdint>
#include <cstring>

namespace qconv::test {

// Where a line was found.
enum class cache_level : unsigned { l1, l2, beyond, count };

struct cache_model {
    static constexpr unsigned line_bytes = 64;
    static constexpr unsigned l1_ways = 12, l1_sets = 48 * 1024 / line_bytes / l1_ways;   // 64 sets
    static constexpr unsigned l2_ways = 16, l2_sets = 2048 * 1024 / line_bytes / l2_ways; // 2048 sets

    // Per set, line number + 1 of each way, most recently used first; 0: empty.
    uint64_t l1[l1_sets][l1_ways];
    uint64_t l2[l2_sets][l2_ways];

    // Moves `tag` to the front of `set` (LRU order); on a miss the last way
    // (the least recently used) is dropped. True on a hit.
    static bool touch(uint64_t *set, unsigned ways, uint64_t tag) {
        unsigned i = 0;
        while (i < ways && set[i] != tag) ++i;
        const bool hit = i < ways;
        if (!hit) i = ways - 1;
        for (; i > 0; --i) set[i] = set[i - 1];
        set[0] = tag;
        return hit;
    }

    // One access to line `line` (address / 64): the level that served it.
    cache_level access_line(uint64_t line) {
        const uint64_t tag = line + 1;
        if (touch(l1[line % l1_sets], l1_ways, tag)) return cache_level::l1;
        return touch(l2[line % l2_sets], l2_ways, tag) ? cache_level::l2 : cache_level::beyond;
    }

    // An access to bytes [addr, addr + n): adds to bytes[level] the bytes of
    // each line touched and to lines[level] one per line, by the level that
    // served that line.
    void access(uint64_t addr, uint64_t n, uint64_t bytes[3], uint64_t lines[3]) {
        if (n == 0) return;
        const uint64_t end = addr + n;
        for (uint64_t line = addr / line_bytes; line * line_bytes < end; ++line) {
            const uint64_t lo = line * line_bytes > addr ? line * line_bytes : addr;
            const uint64_t hi = (line + 1) * line_bytes < end ? (line + 1) * line_bytes : end;
            const unsigned l = static_cast<unsigned>(access_line(line));
            bytes[l] += hi - lo;
            lines[l] += 1;
        }
    }

    // Whether the line is in L1 / L2 (no LRU update).
    bool in_l1(uint64_t line) const { return holds(l1[line % l1_sets], l1_ways, line + 1); }
    bool in_l2(uint64_t line) const { return holds(l2[line % l2_sets], l2_ways, line + 1); }

    void clear() { memset(static_cast<void *>(this), 0, sizeof *this); }

private:
    static bool holds(const uint64_t *set, unsigned ways, uint64_t tag) {
        for (unsigned i = 0; i < ways; ++i)
            if (set[i] == tag) return true;
        return false;
    }
};

} // namespace qconv::test
