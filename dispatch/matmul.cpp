// qconv::matmul: validation (including the dequantized range), the
// dispatcher's choice, the cached kernel, its own packed weights, and checked
// execution; for a run-time M, one choice per M class (dispatcher.h), the
// weights packed once per row and packing.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "core/convert.h"
#include "core/desc_text.h"
#include "core/memory.h"

#include "dispatch/dispatcher.h"
#include "dispatch/environment.h"
#include "dispatch/host_platform.h"
#include "dispatch/verbose.h"

namespace qconv {

using impl::verbose_level;
using impl::verbose_print;

namespace {
// docs/semantics.md §7: every dequantized weight f32(w − zp)·scale must be
// finite for every w of the type. The fused kernels apply the scale once per
// group sum, so an infinite or overflowing scale would give them other values
// than the definition (finite where it gives inf, or inf where w == zp gives
// NaN); such scales are refused here instead (the graph executor then runs
// the decompression unfused, as written). A NaN scale is data: it makes its
// outputs NaN in both forms.
void check_dequantized_range(const matmul_desc &d, const matmul_weights &w) {
    int64_t lo = 0, hi = 255;
    switch (d.wei_dt) {
    case dtype::s8: lo = -128, hi = 127; break;
    case dtype::u4: lo = 0, hi = 15; break;
    case dtype::s4: lo = -8, hi = 7; break;
    default: break;
    }
    const int64_t ng = d.n_groups();
    for (int64_t i = 0; i < d.scale_elems(); ++i) {
        const float s = w.scale[i];
        const int64_t zp = d.zp == matmul_desc::zp_kind::none ? 0 : w.zp[d.zp_elems() == 1 ? 0 : i];
        const double widest = double(std::max(std::llabs(hi - zp), std::llabs(lo - zp)));
        if (std::isnan(s)) continue;
        if (std::isinf(s) || std::fabs(double(s)) * widest > double(FLT_MAX))
            fail("scale", "value " + std::to_string(s) + " at n=" + std::to_string(i / ng) + " group " +
                              std::to_string(i % ng) + ": (w - zp)*scale is not finite for every weight of type " +
                              to_string(d.wei_dt));
    }
}
} // namespace

matmul::matmul(const matmul_desc &d, const matmul_weights &w, const matmul_hints &hints) {
    const double t0 = impl::now_ms();
    d.validate();
    if (!w.wei) fail("wei", "null pointer");
    if (d.scale_dt == dtype::f16 ? !w.scale_f16 : !w.scale)
        fail("scale", std::string("null pointer (scale_dt ") + to_string(d.scale_dt) +
                          ": matmul_weights::" + (d.scale_dt == dtype::f16 ? "scale_f16" : "scale") + ")");
    if (d.zp_elems() > 0 && !w.zp) fail("zp", "null pointer while a zero point is declared");
    if (d.with_bias && !w.bias) fail("bias", "null pointer while with_bias is set");
    // A valid descriptor can still need more memory than the machine has: the
    // packed copy (at most 4 bytes per weight) is checked before anything is allocated.
    impl::check_memory(double(d.k) * double(d.n) * 4, "wei",
                       "packing " + std::to_string(d.k) + "x" + std::to_string(d.n) + " weights");
    impl::check_openmp_threads();
    // f16 scales: converted once, exactly, to f32; the rows see f32 scales
    // (and pack them; the copy goes when the constructor returns).
    std::vector<float> scale32;
    matmul_weights w32 = w;
    if (d.scale_dt == dtype::f16) {
        scale32.resize(size_t(d.scale_elems()));
        for (int64_t i = 0; i < d.scale_elems(); ++i) scale32[size_t(i)] = f16_to_f32(w.scale_f16[i]);
        w32.scale = scale32.data();
        w32.scale_f16 = nullptr;
    }
    build(d, w32, hints, t0);
}

// The rows see f32 scales (d: the user's descriptor with scale_dt f32); the
// primitive keeps and prints the user's.
void matmul::build(const matmul_desc &user, const matmul_weights &w, const matmul_hints &hints, double t0) {
    matmul_desc d = user;
    d.scale_dt = d.src_dt = d.dst_dt = dtype::f32;
    check_dequantized_range(d, w);

    const impl::platform plat = impl::host_platform();
    if (d.runtime()) {
        p_ = create_runtime(d, w, hints, plat);
        p_->desc = user;
        p_->verbose_desc = impl::verbose_problem(user, hints);
        p_->avx512_convert = plat.has(impl::cpu_feature::avx512_core);
        if (verbose_level() >= 1)
            verbose_print("create,planned," + p_->name + ",attr[0]," + p_->verbose_desc + "," +
                          impl::verbose_ms(impl::now_ms() - t0));
        return;
    }
    const impl::matmul_choice choice = impl::select_matmul(d, hints, plat);
    auto prim = std::make_unique<impl::matmul_primitive>();
    prim->desc = user;
    prim->avx512_convert = plat.has(impl::cpu_feature::avx512_core);
    prim->name = choice.name;
    bool hit = false;
    prim->kernel = impl::cached_matmul_kernel(choice, d, hints, plat, &hit);
    prim->weights = prim->kernel->pack(w);
    if (verbose_level() >= 1) {
        prim->verbose_desc = impl::verbose_problem(user, hints);
        verbose_print(std::string("create,") + (hit ? "cache_hit," : "cache_miss,") + prim->name + ",attr[0]," +
                      prim->verbose_desc + "," + impl::verbose_ms(impl::now_ms() - t0));
    }
    p_ = std::move(prim);
}

// Every M class, in increasing M: the table's row for the class's M, its
// kernel (from the kernel cache) and packed weights, shared between classes
// of one row whose kernels report the same packing(). The name lists the rows
// with the M ranges they run.
std::unique_ptr<impl::matmul_primitive> matmul::create_runtime(const matmul_desc &d, const matmul_weights &w,
                                                               const matmul_hints &hints, const impl::platform &plat) {
    auto prim = std::make_unique<impl::matmul_primitive>();
    prim->desc = d;
    prim->verbose_desc = impl::verbose_problem(d, hints);
    std::map<std::string, std::shared_ptr<const impl::packed>> packs;
    std::vector<int64_t> ms;
    for (int64_t m = 1; m <= impl::matmul_exact_m; ++m) ms.push_back(m);
    for (int64_t m = 2 * impl::matmul_m_step; m <= impl::matmul_m_chunk; m += impl::matmul_m_step) ms.push_back(m);
    for (const int64_t m : ms) {
        matmul_desc dm = d;
        dm.m = m;
        const impl::matmul_choice choice = impl::select_matmul(dm, hints, plat);
        impl::matmul_m_class c;
        c.m = m;
        c.name = choice.name;
        c.kernel = impl::cached_matmul_kernel(choice, dm, hints, plat);
        const std::string packing = c.kernel->packing();
        if (packing.empty()) {
            c.weights = c.kernel->pack(w);
        } else {
            auto &shared = packs[choice.name + "|" + packing];
            if (!shared) shared = c.kernel->pack(w);
            c.weights = shared;
        }
        if (verbose_level() >= 1) c.verbose_desc = impl::verbose_problem(dm, hints);
        prim->classes.push_back(std::move(c));
    }
    // "row(m1-4)+row(m5-)": consecutive classes of one row form a range.
    const auto &cl = prim->classes;
    for (size_t i = 0; i < cl.size();) {
        size_t j = i;
        while (j + 1 < cl.size() && cl[j + 1].name == cl[i].name) ++j;
        const int64_t lo = i == 0 ? 1 : cl[i - 1].m + 1;
        if (!prim->name.empty()) prim->name += "+";
        prim->name += cl[i].name + "(m" + std::to_string(lo) + "-" +
                      (j + 1 == cl.size() ? std::string() : std::to_string(cl[j].m)) + ")";
        i = j + 1;
    }
    return prim;
}

matmul::~matmul() = default;
matmul::matmul(matmul &&) noexcept = default;
matmul &matmul::operator=(matmul &&) noexcept = default;

namespace {
void check_rows(const matmul_desc &d, int64_t m) {
    if (m < 1) fail("m", "must be positive (got " + std::to_string(m) + ")");
    if (!d.runtime() && m != d.m)
        fail("m", "this MatMul was created for m=" + std::to_string(d.m) + " (got " + std::to_string(m) +
                      "); create it with m = matmul_desc::runtime_m to vary the rows");
    detail::checked_elems({m, d.k}, "x", "m*k");
    detail::checked_elems({m, d.n}, "y", "m*n");
}

void check_f32(const matmul_desc &d) {
    if (d.src_dt != dtype::f32 || d.dst_dt != dtype::f32)
        fail(d.src_dt != dtype::f32 ? "x" : "y", std::string("this MatMul takes ") + to_string(d.src_dt) +
                                                     " activations and gives " + to_string(d.dst_dt) +
                                                     ": pass them with execute_typed()");
}

const impl::matmul_m_class &class_for(const impl::matmul_primitive &p, int64_t rows) {
    return p.classes[impl::matmul_class_index(impl::matmul_class_m(rows))];
}
} // namespace

void matmul::execute(const float *x, float *y, int threads) const {
    if (!p_) fail("matmul", "moved-from primitive");
    if (p_->desc.runtime())
        fail("m", "this MatMul was created with a run-time M: pass the rows, execute(x, y, m, threads)");
    check_f32(p_->desc);
    if (!x) fail("x", "null pointer");
    if (!y) fail("y", "null pointer");
    run_rows(x, dtype::f32, y, p_->desc.m, threads);
}

void matmul::execute(const float *x, float *y, int64_t m, int threads) const {
    if (!p_) fail("matmul", "moved-from primitive");
    check_rows(p_->desc, m);
    check_f32(p_->desc);
    if (!x) fail("x", "null pointer");
    if (!y) fail("y", "null pointer");
    run_rows(x, dtype::f32, y, m, threads);
}

// Activations of other types: f16/bf16 X read by the kernels that take it
// (converted exactly where they load it), else converted to f32 first; the
// f32 rows; Y rounded from f32 (core/convert.h; AVX-512 loops where the
// platform has them).
void matmul::execute_typed(const void *x, void *y, int64_t m, int threads) const {
    if (!p_) fail("matmul", "moved-from primitive");
    const matmul_desc &d = p_->desc;
    if (m == 0 && !d.runtime()) m = d.m;
    check_rows(d, m);
    if (!x) fail("x", "null pointer");
    if (!y) fail("y", "null pointer");
    std::vector<float> y32;
    float *yf = static_cast<float *>(y);
    if (d.dst_dt != dtype::f32) {
        y32.resize(size_t(m * d.n));
        yf = y32.data();
    }
    run_rows(x, d.src_dt, yf, m, threads);
    if (d.dst_dt != dtype::f32) detail::from_f32(d.dst_dt, yf, y, m * d.n, p_->avx512_convert);
}

namespace {
// rows x k elements of type dt to f32 (exact), or the f32 rows as they are.
const float *as_f32(const void *x, dtype dt, int64_t elems, std::vector<float> &buf, bool avx512) {
    if (dt == dtype::f32) return static_cast<const float *>(x);
    buf.resize(size_t(elems));
    detail::to_f32(dt, x, buf.data(), elems, avx512);
    return buf.data();
}

void run_kernel(const impl::matmul_kernel &k, const impl::packed &w, const void *x, dtype x_dt, int64_t elems, float *y,
                int threads, bool avx512) {
    if (k.takes_x(x_dt)) return k.execute_x(w, x, x_dt, y, threads);
    std::vector<float> x32;
    k.execute(w, as_f32(x, x_dt, elems, x32, avx512), y, threads);
}
} // namespace

// m rows of X (x_dt) to f32 Y (arguments checked).
void matmul::run_rows(const void *x, dtype x_dt, float *y, int64_t m, int threads) const {
    impl::check_threads_argument(threads);
    const int64_t K = p_->desc.k, N = p_->desc.n;
    const bool avx512 = p_->avx512_convert;
    if (!p_->desc.runtime()) {
        impl::verbose_exec(
            p_->name, [&] { run_kernel(*p_->kernel, *p_->weights, x, x_dt, m * K, y, threads, avx512); },
            [&] { return p_->verbose_desc.empty() ? impl::verbose_problem(p_->desc, {}) : p_->verbose_desc; });
        return;
    }
    const size_t es = x_dt == dtype::f32 ? 4 : 2; // bytes per element of X
    // Chunks of matmul_m_chunk rows; a chunk whose rows are not its class's M
    // runs on a copy padded with zero rows (rows are independent; a zero word
    // is 0 in f16 and bf16 too).
    for (int64_t r0 = 0; r0 < m; r0 += impl::matmul_m_chunk) {
        const int64_t rows = std::min(impl::matmul_m_chunk, m - r0);
        const impl::matmul_m_class &c = class_for(*p_, rows);
        const void *xs = static_cast<const uint8_t *>(x) + size_t(r0 * K) * es;
        float *ys = y + r0 * N;
        auto run = [&] {
            if (c.m == rows) return run_kernel(*c.kernel, *c.weights, xs, x_dt, rows * K, ys, threads, avx512);
            std::vector<uint8_t> xp(size_t(c.m * K) * es, 0);
            std::vector<float> yp(size_t(c.m * N));
            std::memcpy(xp.data(), xs, size_t(rows * K) * es);
            run_kernel(*c.kernel, *c.weights, xp.data(), x_dt, c.m * K, yp.data(), threads, avx512);
            std::memcpy(ys, yp.data(), size_t(rows * N) * sizeof(float));
        };
        impl::verbose_exec(c.name, run, [&] {
            matmul_desc dr = p_->desc;
            dr.m = rows;
            return impl::verbose_problem(dr, {}) + ",class=m" + std::to_string(c.m);
        });
    }
}

const std::string &matmul::impl_name() const { return p_->name; }
const std::string &matmul::impl_name(int64_t m) const {
    if (!p_) fail("matmul", "moved-from primitive");
    check_rows(p_->desc, m);
    if (!p_->desc.runtime()) return p_->name;
    return class_for(*p_, std::min(m, impl::matmul_m_chunk)).name;
}
const matmul_desc &matmul::desc() const { return p_->desc; }

std::vector<std::string> matmul_implementations() {
    std::vector<std::string> names;
    for (const auto &e : impl::matmul_list()) names.push_back(e.name);
    return names;
}

} // namespace qconv
