// Helpers shared by the oneDNN wrappers: engine, type mapping, thread count,
// per-thread scratchpad.
#include "kernels/onednn/onednn_util.h"

#include <cstdlib>
#include <memory>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/buffers.h"

namespace qconv::impl::onednn {

const dnnl::engine &cpu_engine() {
    static const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    return eng;
}

dnnl::memory::data_type to_dnnl(dtype dt) {
    using d = dnnl::memory::data_type;
    switch (dt) {
    case dtype::f32: return d::f32;
    case dtype::bf16: return d::bf16;
    case dtype::f16: return d::f16;
    case dtype::s32: return d::s32;
    case dtype::s8: return d::s8;
    case dtype::u8: return d::u8;
    default: return d::undef;
    }
}

int effective_threads(int threads) {
#ifdef _OPENMP
    return threads > 0 ? threads : omp_get_max_threads();
#else
    return 1;
#endif
}

threads_guard::threads_guard(int n) {
#ifdef _OPENMP
    if (n <= 0) return;
    saved_ = omp_get_max_threads();
    if (saved_ == n) return;
    omp_set_num_threads(n);
    active_ = true;
#else
    (void)n;
#endif
}

threads_guard::~threads_guard() {
#ifdef _OPENMP
    if (active_) omp_set_num_threads(saved_);
#endif
}

dnnl::memory thread_scratchpad(const dnnl::memory::desc &md) {
    const size_t need = md.get_size();
    return dnnl::memory(md, cpu_engine(), need ? thread_scratch(scratch_use::onednn_scratchpad, need) : nullptr);
}

void run_primitive(const dnnl::primitive &prim, const dnnl::memory::desc &scratchpad_md,
                   std::unordered_map<int, dnnl::memory> &m, int threads) {
    if (scratchpad_md.get_size() > 0) m[DNNL_ARG_SCRATCHPAD] = thread_scratchpad(scratchpad_md);
    threads_guard guard(threads);
    dnnl::stream s(cpu_engine());
    prim.execute(s, m);
    s.wait();
}

dnnl::memory reorder_to(const dnnl::memory::desc &from_md, const void *from, const dnnl::memory::desc &to) {
    const dnnl::engine &eng = cpu_engine();
    dnnl::memory src(from_md, eng, const_cast<void *>(from));
    dnnl::memory dst(to, eng);
    dnnl::stream s(eng);
    dnnl::reorder(src, dst).execute(s, src, dst);
    s.wait();
    return dst;
}

} // namespace qconv::impl::onednn
