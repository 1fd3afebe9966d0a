// The caller's thread pool: qconv runs its parallel loops on a pool the
// caller owns instead of OpenMP (README, "Running on the caller's threads").
//
// A runtime that brings its own threads (ONNX Runtime's thread pool, TBB, a
// pthreadpool) implements `threadpool` and either installs it process-wide
// (set_default_threadpool) or for the calls made on one thread
// (threadpool_scope, or exec_args::pool for a convolution). Without either,
// qconv uses OpenMP, as it always did.
//
// The contract follows oneDNN's threadpool interop and XNNPACK's pthreadpool:
//   * num_threads() is how many tasks the pool runs at once; qconv splits a
//     loop into at most that many tasks (a `threads` argument asks for fewer)
//     and sizes its per-thread buffers accordingly;
//   * run(n, task) runs task(0) … task(n − 1), each exactly once, in any
//     order, on any of its threads (the calling thread included), and returns
//     when all have finished. The tasks never throw (an error inside one is
//     rethrown by qconv in the caller once run() has returned) and never wait
//     on one another, so a pool may run them one after another;
//   * a loop of one task runs on the calling thread without calling run();
//   * a loop inside a task (nested) runs serially on that task's thread.
// run() may be called from several threads at once when several qconv calls
// share the pool; the pool must outlive every call that uses it.
#pragma once

#include <functional>

namespace qconv {

class threadpool {
public:
    virtual ~threadpool() = default;
    // Tasks the pool runs at once (>= 1).
    virtual int num_threads() const = 0;
    // Runs task(i) for every i in [0, n) and waits for all of them.
    virtual void run(int n, const std::function<void(int)> &task) = 0;
};

// The process-wide pool every qconv call uses unless its thread holds a
// threadpool_scope; nullptr (the initial value) means OpenMP. Not owned.
void set_default_threadpool(threadpool *pool);
threadpool *default_threadpool();

// While it lives, qconv calls made on this thread run on `pool` (nullptr:
// OpenMP, whatever the default). Scopes nest; each restores what it found.
class threadpool_scope {
public:
    explicit threadpool_scope(threadpool *pool);
    ~threadpool_scope();
    threadpool_scope(const threadpool_scope &) = delete;
    threadpool_scope &operator=(const threadpool_scope &) = delete;

private:
    bool saved_set_;
    threadpool *saved_pool_;
};

} // namespace qconv
