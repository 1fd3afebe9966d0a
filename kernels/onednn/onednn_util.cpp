// Helpers shared by the oneDNN wrappers: engine, type mapping, thread count,
// per-thread scratchpad.
#include "kernels/onednn/onednn_util.h"

#include <cstdlib>
#include <memory>

#include "core/buffers.h"
#include "core/parallel.h"

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

int effective_threads(int threads) { return resolve_threads(threads); }

threads_guard::threads_guard(int n) {
    if (n <= 0) return;
    saved_ = openmp_max_threads();
    if (saved_ == n) return;
    set_openmp_threads(n);
    active_ = true;
}

threads_guard::~threads_guard() {
    if (active_) set_openmp_threads(saved_);
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
