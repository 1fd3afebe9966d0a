// The one parallel-for of the library (docs/architecture.md): every parallel
// loop of kernels/, reference/, dispatch/ and graph/ runs through it, on one
// of two runtimes chosen per call:
//   * the caller's pool (include/qconv/threadpool.h): the thread's
//     threadpool_scope, else the process-wide default pool;
//   * OpenMP otherwise (the default, as before: one `omp parallel` region).
// Nested regions run serially on the thread that meets them. No other file
// uses `#pragma omp` or omp_* calls.
#pragma once

#include "qconv/threadpool.h"

#include <cstdint>
#include <functional>

namespace qconv::impl {

// The pool this thread's calls run on, or nullptr for OpenMP.
threadpool *active_pool();
// Threads a region started here would get: 1 inside a region, else the
// pool's num_threads() or OpenMP's default (omp_get_max_threads()).
int default_threads();
// Threads a call asking for `requested` runs with: default_threads() when
// requested <= 0; with a pool never more than the pool has.
int resolve_threads(int requested);
// Inside a region: this task's index and the region's task count (0 and 1
// outside any region).
int thread_index();
int region_threads();
bool in_parallel();

// Runs fn(ithr, nthr) for ithr in [0, nthr) and waits; nthr <= 0 means
// default_threads(). nthr is what the region really got (fewer when nested or
// capped by the pool): work must be split by it, not by the request.
void parallel(int nthr, const std::function<void(int ithr, int nthr)> &fn);

// Two phases over the same threads, every thread done with `first` before
// any starts `second` (a copy, then the work that reads it): on OpenMP one
// region with a barrier between the phases (as the kernels had it), on a pool
// two run()s. An empty `first` is skipped.
void parallel_phases(int nthr, const std::function<void(int ithr, int nthr)> &first,
                     const std::function<void(int ithr, int nthr)> &second);

// OpenMP's static split of [0, n) over nthr threads: thread ithr's range.
inline void balance(int64_t n, int ithr, int nthr, int64_t &begin, int64_t &end) {
    const int64_t q = n / nthr, r = n % nthr;
    begin = ithr * q + (ithr < r ? ithr : r);
    end = begin + q + (ithr < r ? 1 : 0);
}

// f(i) for i of thread ithr's share of [0, n) (an `omp for schedule(static)`
// inside parallel()).
template <typename F>
void for_range(int64_t n, int ithr, int nthr, const F &f) {
    int64_t b, e;
    balance(n, ithr, nthr, b, e);
    for (int64_t i = b; i < e; ++i) f(i);
}

// f(i) for every i in [0, n), split statically over up to nthr threads
// (<= 0: default_threads()); serially when !go_parallel.
template <typename F>
void parallel_for(int64_t n, const F &f, bool go_parallel = true, int nthr = 0) {
    if (n <= 0) return;
    const int nt = go_parallel ? resolve_threads(nthr) : 1;
    if (nt <= 1 || n == 1) {
        for (int64_t i = 0; i < n; ++i) f(i);
        return;
    }
    parallel(static_cast<int>(nt < n ? nt : n), [&](int ithr, int nthr_) { for_range(n, ithr, nthr_, f); });
}

// f(i, j) over [0, n0) × [0, n1), the pairs split statically (collapse(2)).
template <typename F>
void parallel_for_2d(int64_t n0, int64_t n1, const F &f, bool go_parallel = true, int nthr = 0) {
    const int64_t n = n0 * n1;
    if (n0 <= 0 || n1 <= 0) return;
    auto range = [&](int ithr, int nthr_) {
        int64_t b, e;
        balance(n, ithr, nthr_, b, e);
        int64_t i = b / n1, j = b % n1;
        for (int64_t k = b; k < e; ++k) {
            f(i, j);
            if (++j == n1) j = 0, ++i;
        }
    };
    const int nt = go_parallel ? resolve_threads(nthr) : 1;
    if (nt <= 1 || n == 1) range(0, 1);
    else parallel(static_cast<int>(nt < n ? nt : n), range);
}

// f(i, j, k) over [0, n0) × [0, n1) × [0, n2) (collapse(3)).
template <typename F>
void parallel_for_3d(int64_t n0, int64_t n1, int64_t n2, const F &f, bool go_parallel = true, int nthr = 0) {
    if (n2 <= 0) return;
    parallel_for_2d(
        n0 * n1, n2, [&](int64_t ij, int64_t k) { f(ij / n1, ij % n1, k); }, go_parallel, nthr);
}

// The same with the flag first and the body last (an `omp parallel for
// if (go_parallel)` around a loop whose body keeps its place).
template <typename F>
void parallel_for_if(bool go_parallel, int64_t n, const F &f) {
    parallel_for(n, f, go_parallel);
}
template <typename F>
void parallel_for_2d_if(bool go_parallel, int64_t n0, int64_t n1, const F &f) {
    parallel_for_2d(n0, n1, f, go_parallel);
}

// OpenMP's own settings, for the oneDNN glue (oneDNN is built with OpenMP)
// and the start-up checks: omp_get_max_threads() / omp_set_num_threads().
int openmp_max_threads();
void set_openmp_threads(int n);

} // namespace qconv::impl
