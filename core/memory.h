// How much memory this process may allocate, so that a problem too big for
// the machine is refused with a qconv::error naming it before anything is
// allocated (instead of std::bad_alloc, or the kernel's OOM killer, from
// somewhere in the middle).
//
// usable_memory() is the smallest of: the physical memory
// (sysconf(_SC_PHYS_PAGES) · page size), the cgroup memory limit of the
// process (cgroup v2 memory.max, v1 memory.limit_in_bytes) and the
// RLIMIT_AS / RLIMIT_DATA resource limits. It is read once per process.
#pragma once

#include <cstdint>
#include <string>

namespace qconv::impl {

// Bytes this process can expect to allocate at most; 0 when nothing is known.
uint64_t usable_memory();

// "3.5 GiB", "512 MiB", "12 KiB": a size for messages.
std::string bytes_text(double bytes);

// Throws qconv::error(field, "<what> needs about X, more than <limit>") when
// `bytes` exceeds `cap` (when cap > 0; cap_name says what the cap is, e.g.
// "the graph limit of 4 GiB") or the usable memory.
void check_memory(double bytes, const std::string &field, const std::string &what, double cap = 0,
                  const std::string &cap_name = "");

} // namespace qconv::impl
