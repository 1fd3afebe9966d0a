// The parallel-for's two runtimes (core/parallel.h) and the public pool
// settings (include/qconv/threadpool.h).
#include "core/parallel.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>

namespace qconv {
namespace {

std::atomic<threadpool *> g_default{nullptr};

// Per thread: the scope's choice, and the region the thread is running in.
struct thread_state {
    bool scoped = false;        // a threadpool_scope (or a region) chose the runtime
    threadpool *pool = nullptr; // its choice (nullptr: OpenMP)
    int depth = 0;              // regions entered on this thread
    int index = 0, count = 1;   // task index and count of the innermost region
};
thread_local thread_state tls;

// Runs one task of a region with this thread's state set to it, and
// restores the state (a pool may run tasks on the calling thread).
template <typename F>
void as_task(threadpool *pool, int ithr, int nthr, const F &body) {
    const thread_state saved = tls;
    tls.scoped = true;
    tls.pool = pool;
    tls.depth = saved.depth + 1;
    tls.index = ithr;
    tls.count = nthr;
    body();
    tls = saved;
}

// The first exception a task threw, rethrown once the region has ended.
struct first_error {
    std::mutex mu;
    std::exception_ptr e;
    void keep() noexcept {
        std::lock_guard<std::mutex> lock(mu);
        if (!e) e = std::current_exception();
    }
    void rethrow() const {
        if (e) std::rethrow_exception(e);
    }
};

} // namespace

void set_default_threadpool(threadpool *pool) { g_default.store(pool, std::memory_order_release); }
threadpool *default_threadpool() { return g_default.load(std::memory_order_acquire); }

threadpool_scope::threadpool_scope(threadpool *pool) : saved_set_(tls.scoped), saved_pool_(tls.pool) {
    tls.scoped = true;
    tls.pool = pool;
}

threadpool_scope::~threadpool_scope() {
    tls.scoped = saved_set_;
    tls.pool = saved_pool_;
}

namespace impl {

threadpool *active_pool() { return tls.scoped ? tls.pool : default_threadpool(); }

int default_threads() {
    if (tls.depth > 0) return 1;
    if (threadpool *p = active_pool()) return std::max(1, p->num_threads());
    return omp_get_max_threads();
}

int resolve_threads(int requested) {
    if (requested <= 0) return default_threads();
    if (tls.depth > 0) return 1;
    if (threadpool *p = active_pool()) return std::min(requested, std::max(1, p->num_threads()));
    return requested;
}

int thread_index() { return tls.index; }
int region_threads() { return tls.count; }
bool in_parallel() { return tls.depth > 0; }

void parallel(int nthr, const std::function<void(int, int)> &fn) {
    if (nthr <= 0) nthr = default_threads();
    threadpool *pool = active_pool();
    if (pool) nthr = std::min(nthr, std::max(1, pool->num_threads()));
    // One task, or nested: serially on this thread.
    if (nthr <= 1 || tls.depth > 0) {
        as_task(pool, 0, 1, [&] { fn(0, 1); });
        return;
    }
    first_error err;
    if (pool) {
        pool->run(nthr, [&](int ithr) {
            as_task(pool, ithr, nthr, [&] {
                try {
                    fn(ithr, nthr);
                } catch (...) {
                    err.keep();
                }
            });
        });
    } else {
#pragma omp parallel num_threads(nthr)
        {
            const int ithr = omp_get_thread_num(), nt = omp_get_num_threads();
            as_task(nullptr, ithr, nt, [&] {
                try {
                    fn(ithr, nt);
                } catch (...) {
                    err.keep();
                }
            });
        }
    }
    err.rethrow();
}

void parallel_phases(int nthr, const std::function<void(int, int)> &first,
                     const std::function<void(int, int)> &second) {
    if (!first) return parallel(nthr, second);
    if (nthr <= 0) nthr = default_threads();
    if (active_pool() || nthr <= 1 || tls.depth > 0) {
        parallel(nthr, first);
        parallel(nthr, second);
        return;
    }
    first_error err;
#pragma omp parallel num_threads(nthr)
    {
        const int ithr = omp_get_thread_num(), nt = omp_get_num_threads();
        auto phase = [&](const std::function<void(int, int)> &fn) {
            as_task(nullptr, ithr, nt, [&] {
                try {
                    fn(ithr, nt);
                } catch (...) {
                    err.keep();
                }
            });
        };
        phase(first);
#pragma omp barrier
        phase(second);
    }
    err.rethrow();
}

int openmp_max_threads() { return omp_get_max_threads(); }
void set_openmp_threads(int n) { omp_set_num_threads(n); }

} // namespace impl
} // namespace qconv
