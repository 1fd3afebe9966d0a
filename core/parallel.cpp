// The parallel-for's two runtimes (core/parallel.h) and the public pool
// settings (include/qconv/threadpool.h).
#include "core/parallel.h"

#include <omp.h>

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

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

// QCONV_RUNTIME=caller: the regions that would go to OpenMP run on this
// pool instead. The calling thread claims tasks like the workers do and a
// region ends when its tasks are done, not when every thread has checked in:
// a worker the OS has not scheduled (another process on its core) leaves its
// tasks to the caller instead of stalling the region until its next time
// slice (with OpenMP, MobileNet v2 at 2 threads beside one busy process took
// 19-660 ms a run instead of ~2; docs/perf_log.md, 2026-12-04). A task a
// worker has claimed is still waited for. Workers spin ~0.1-0.3 ms for the
// next region, then sleep. The task index, not the OS thread, is what the
// kernels split by, so results are those of OpenMP's regions.
class caller_runs_pool final : public threadpool {
public:
    int num_threads() const override { return std::max(1, omp_get_max_threads()); }
    void run(int n, const std::function<void(int)> &task) override {
        if (n <= 1) {
            if (n == 1) task(0);
            return;
        }
        // One region at a time; a second caller meanwhile runs its tasks itself.
        std::unique_lock<std::mutex> busy(run_mu_, std::try_to_lock);
        if (!busy.owns_lock() || n > 0xffff) {
            for (int i = 0; i < n; ++i) task(i);
            return;
        }
        start_workers(n - 1);
        task_ = &task;
        done_.store(0);
        gen_ = (gen_ + 1) & 0xffffffffu;
        word_.store(gen_ << 32 | static_cast<uint64_t>(n) << 16); // publishes task_ and n
        if (sleepers_.load() > 0) {
            std::lock_guard<std::mutex> lock(sleep_mu_);
            sleep_cv_.notify_all();
        }
        work(gen_);
        while (done_.load() < n) _mm_pause(); // only tasks another thread claimed are left
    }

private:
    // Claims and runs tasks of region g until none is left.
    void work(uint64_t g) {
        for (;;) {
            uint64_t w = word_.load();
            const uint64_t n = (w >> 16) & 0xffff, i = w & 0xffff;
            if ((w >> 32) != g || i >= n) return;
            if (!word_.compare_exchange_weak(w, w + 1)) continue;
            (*task_)(static_cast<int>(i)); // valid: the region waits for this task
            done_.fetch_add(1);
        }
    }
    void start_workers(int want) {
        for (; workers_ < want; ++workers_) std::thread([this] { worker(); }).detach();
    }
    void worker() {
        uint64_t seen = word_.load() >> 32;
        for (;;) {
            uint64_t g = word_.load() >> 32;
            for (int spin = 0; g == seen && spin < spin_limit; ++spin) {
                _mm_pause();
                g = word_.load() >> 32;
            }
            if (g == seen) {
                std::unique_lock<std::mutex> lock(sleep_mu_);
                sleepers_.fetch_add(1);
                sleep_cv_.wait(lock, [&] { return (word_.load() >> 32) != seen; });
                sleepers_.fetch_sub(1);
                g = word_.load() >> 32;
            }
            seen = g;
            work(g);
        }
    }

    static constexpr int spin_limit = 20000; // ~0.1-0.3 ms of pause
    std::mutex run_mu_;
    int workers_ = 0;
    const std::function<void(int)> *task_ = nullptr;
    uint64_t gen_ = 0;
    std::atomic<uint64_t> word_{0}; // region (32 bits) | task count (16) | next task (16)
    std::atomic<int> done_{0};
    std::atomic<int> sleepers_{0};
    std::mutex sleep_mu_;
    std::condition_variable sleep_cv_;
};

// The pool of QCONV_RUNTIME=caller, or nullptr (OpenMP); read once.
threadpool *builtin_runtime() {
    static threadpool *const pool = []() -> threadpool * {
        const char *v = std::getenv("QCONV_RUNTIME");
        if (!v || std::strcmp(v, "caller") != 0) return nullptr;
        return new caller_runs_pool; // never destroyed: regions may run until exit
    }();
    return pool;
}

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
    threadpool *runner = pool ? pool : builtin_runtime();
    if (runner) {
        runner->run(nthr, [&](int ithr) {
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
    if (active_pool() || builtin_runtime() || nthr <= 1 || tls.depth > 0) {
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
