// qconv::check_environment() and the thread-count bound (environment.h).
#include "dispatch/environment.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/parallel.h"
#include "core/text.h"
#include "dispatch/cache.h"
#include "dispatch/tuning.h"
#include "qconv/types.h"

namespace qconv {
namespace {

// A non-negative decimal integer of at most 18 digits (no sign, no spaces).
bool is_count(const std::string &s) {
    if (s.empty() || s.size() > 18) return false;
    for (char c : s)
        if (c < '0' || c > '9') return false;
    return true;
}

// OMP_NUM_THREADS: one count per nesting level, "8" or "8,2".
void check_omp_num_threads(const std::string &v) {
    for (const std::string &item : detail::split(v, ',')) {
        const std::string n = detail::trim(item);
        if (!is_count(n) || std::stoll(n) < 1)
            fail("OMP_NUM_THREADS", "expected positive thread counts, e.g. 8 or 8,2 (got '" + v + "')");
        if (std::stoll(n) > max_threads)
            fail("OMP_NUM_THREADS",
                 n + " threads is more than qconv's limit of " + std::to_string(max_threads) + " (qconv::max_threads)");
    }
}

} // namespace

void check_environment() {
    if (const char *v = std::getenv("QCONV_MAX_CPU_ISA"); v && *v) (void)parse_isa(v, "QCONV_MAX_CPU_ISA");
    (void)impl::cache_capacity_from_env();
    (void)impl::tuned_dispatch_from_env();
    if (const char *v = std::getenv("QCONV_VERBOSE"); v && *v && !is_count(v))
        fail("QCONV_VERBOSE", std::string("expected a level 0, 1 or 2 (got '") + v + "')");
    if (const char *v = std::getenv("OMP_NUM_THREADS"); v && *v) check_omp_num_threads(v);
    if (const char *v = std::getenv("QCONV_RUNTIME");
        v && *v && std::strcmp(v, "openmp") != 0 && std::strcmp(v, "caller") != 0)
        fail("QCONV_RUNTIME", std::string("expected openmp or caller (got '") + v + "')");
}

namespace impl {

void check_openmp_threads() {
    const int n = openmp_max_threads();
    if (n <= qconv::max_threads) return;
    const char *env = std::getenv("OMP_NUM_THREADS");
    fail(env && *env ? "OMP_NUM_THREADS" : "threads", "OpenMP would run " + std::to_string(n) +
                                                          " threads, more than qconv's limit of " +
                                                          std::to_string(max_threads) + " (qconv::max_threads)");
}

void check_threads_argument(int threads) {
    if (threads > max_threads)
        fail("threads", std::to_string(threads) + " is more than qconv's limit of " + std::to_string(max_threads) +
                            " (qconv::max_threads)");
}

} // namespace impl
} // namespace qconv
