// Small helpers shared by the oneDNN wrappers (internal to kernels/onednn/).
//
// oneDNN is used through its C++ API with one CPU engine per process. The
// wrappers create their primitives with a user-managed scratchpad and give
// each execution its own dnnl::stream and a scratchpad buffer private to the
// calling thread, so one primitive may run concurrently from several threads
// on different buffers. oneDNN (built with OpenMP) fixes its thread count when
// a primitive is created, so a wrapper that honours a per-call thread count
// keeps one primitive per thread count (see threads_guard).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <string>
#include <unordered_map>

#include "qconv/types.h"

namespace qconv::impl::onednn {

// The process-wide CPU engine.
const dnnl::engine &cpu_engine();

// qconv element type → oneDNN data type (undef for types oneDNN lacks here).
dnnl::memory::data_type to_dnnl(dtype dt);

// Thread count a call runs with (core/parallel.h resolve_threads): `threads`
// if positive, else the caller's pool's count or OpenMP's default. oneDNN is
// built with OpenMP: under a caller's pool its primitives still run on
// OpenMP threads, that many of them (1 inside a pool task).
int effective_threads(int threads);

// Sets the calling thread's OpenMP thread count for the guard's lifetime
// (no-op for n <= 0); restores the previous value on destruction.
class threads_guard {
public:
    explicit threads_guard(int n);
    ~threads_guard();
    threads_guard(const threads_guard &) = delete;
    threads_guard &operator=(const threads_guard &) = delete;

private:
    int saved_ = 0;
    bool active_ = false;
};

// A scratchpad memory for `md`, backed by a buffer owned by the calling
// thread (grown on demand, reused by later calls of the same thread).
dnnl::memory thread_scratchpad(const dnnl::memory::desc &md);

// Runs prim with the arguments m (plus a per-thread scratchpad of
// scratchpad_md when it has a size) on a stream of its own, with `threads`
// OpenMP threads (threads_guard), and waits for it.
void run_primitive(const dnnl::primitive &prim, const dnnl::memory::desc &scratchpad_md,
                   std::unordered_map<int, dnnl::memory> &m, int threads);

// A new memory of descriptor `to` holding `from` (of descriptor `from_md`)
// reordered into it: used once at creation to pack weights.
dnnl::memory reorder_to(const dnnl::memory::desc &from_md, const void *from, const dnnl::memory::desc &to);

// Runs f() and converts a dnnl::error into false with the message in *why.
template <class F>
bool try_dnnl(F &&f, std::string *why, const char *what) {
    try {
        f();
        return true;
    } catch (const dnnl::error &e) {
        if (why) *why = std::string(what) + ": " + e.what();
        return false;
    }
}

} // namespace qconv::impl::onednn
