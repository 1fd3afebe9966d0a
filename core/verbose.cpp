// The verbose level and printer (see verbose.h).
#include "core/verbose.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace qconv::impl {
namespace {
int level_from_env() {
    const char *v = std::getenv("QCONV_VERBOSE");
    return v ? std::atoi(v) : 0;
}
std::atomic<int> &level() {
    static std::atomic<int> l{level_from_env()};
    return l;
}
} // namespace

int verbose_level() { return level().load(std::memory_order_relaxed); }
void set_verbose_level(int l) { level().store(l, std::memory_order_relaxed); }

void verbose_print(const std::string &fields) {
    static std::mutex mu;
    const std::string line = "qconv_verbose," + fields + "\n";
    std::lock_guard<std::mutex> lock(mu);
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
}

} // namespace qconv::impl
