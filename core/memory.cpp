// The memory a process may use (see memory.h).
#include "core/memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "qconv/types.h"

namespace qconv::impl {
namespace {

// The first number in a cgroup limit file; 0 when absent or "max".
uint64_t read_limit(const char *path) {
    std::ifstream f(path);
    std::string v;
    if (!(f >> v) || v.empty() || v == "max") return 0;
    uint64_t x = 0;
    for (char c : v) {
        if (c < '0' || c > '9') return 0;
        if (x > (UINT64_MAX - 9) / 10) return 0; // "unlimited" written as a huge number
        x = x * 10 + uint64_t(c - '0');
    }
    return x;
}

uint64_t measure() {
    uint64_t limit = 0;
    auto take = [&](uint64_t v) {
        if (v > 0 && (limit == 0 || v < limit)) limit = v;
    };
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) take(uint64_t(pages) * uint64_t(page));
    take(read_limit("/sys/fs/cgroup/memory.max"));                   // cgroup v2 (the process's own namespace)
    take(read_limit("/sys/fs/cgroup/memory/memory.limit_in_bytes")); // cgroup v1
    for (int r : {RLIMIT_AS, RLIMIT_DATA}) {
        rlimit l{};
        if (getrlimit(r, &l) == 0 && l.rlim_cur != RLIM_INFINITY) take(uint64_t(l.rlim_cur));
    }
    return limit;
}

} // namespace

uint64_t usable_memory() {
    static const uint64_t bytes = measure();
    return bytes;
}

std::string bytes_text(double bytes) {
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (bytes >= 1024 && u < 6) bytes /= 1024, ++u;
    char buf[48];
    if (u == 0) std::snprintf(buf, sizeof buf, "%.0f bytes", bytes);
    else std::snprintf(buf, sizeof buf, "%.3g %s", bytes, units[u]);
    return buf;
}

void check_memory(double bytes, const std::string &field, const std::string &what, double cap,
                  const std::string &cap_name) {
    if (cap > 0 && bytes > cap) fail(field, what + " needs about " + bytes_text(bytes) + ", more than " + cap_name);
    const uint64_t usable = usable_memory();
    if (usable > 0 && bytes > double(usable))
        fail(field, what + " needs about " + bytes_text(bytes) + ", more than the " + bytes_text(double(usable)) +
                        " of memory this process may use");
}

} // namespace qconv::impl
