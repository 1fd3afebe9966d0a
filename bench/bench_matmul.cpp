// Weight-compressed MatMul benchmark: the JIT rows, the memory limit, and the
// oneDNN f32 peers on pre-dequantized weights, in one binary.
//
//   bench_matmul [--threads=N] [google benchmark flags]
//
// Problems: M ∈ {1, 4, 32, 128} × (K, N) ∈ {(4096, 4096), (4096, 11008),
// (11008, 4096)} × weights u8/u4 × group 128 / per-OC, no zp, no bias.
// Names:
//   jit/<row>/<wei>/<g128|oc>/m<M>k<K>n<N>/<cold|hot>   our kernels (each
//                                            supported JIT row, by table name;
//                                            the _dq row with dynamic quantization)
//   sgemm/m<M>k<K>n<N>/<cold|hot>              dnnl_sgemm on deq(W) in f32
//   dnnl_matmul/m<M>k<K>n<N>/<cold|hot>        dnnl::matmul, weights reordered
//                                            once to the layout it prefers
//   f32_fma_peak/<zmm|ymm>                     the f32 FMA peak: twelve independent
//                                            vfmadd231ps chains (JIT), GFLOPS
//                                            per thread (the share of it a row
//                                            reaches: its GFLOPS / this)
//   dram_read                                  a read-only loop (8 streams per
//                                            thread) over a buffer larger than
//                                            the L3: the limit
//   share/<row>/<wei>/<g128|oc>/m1k<K>n<N>/cold  M = 1: the limit, our kernel
//                                            and dnnl_sgemm timed in turns in
//                                            one loop (counters share, vs_sgemm)
// "cold" rotates through copies of the (packed) weights whose total exceeds
// 2x the L3 (read from sysfs), so every call streams its weights from DRAM
// (a cyclic walk over twice the cache defeats its replacement policy);
// "hot" reuses one copy. The packed weights (matmul_wc.cpp), the sgemm
// copies and the dram_read buffer all sit on huge-page-advised memory
// (MADV_HUGEPAGE), so no side pays for 4 KB TLB misses alone. Counters: GB/s = weight bytes as stored per second
// (compressed for jit, f32 for the peers; dram_read: bytes read), GFLOPS =
// 2·M·K·N per second. Wall-clock time (OpenMP inside).
//
// Without --benchmark_filter the run is the headline comparison only:
// M=1 and M=32, K=N=4096, cold, plus dram_read. `--benchmark_filter=.`
// runs everything (several minutes and ~1 GB of memory).
#include <benchmark/benchmark.h>

#include <immintrin.h>
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <dnnl.h>
#include <dnnl.hpp>

#include "core/convert.h"
#include "dispatch/host_platform.h"
#include "kernels/jit/base/jit_base.h"
#include "qconv/matmul.h"
#include "rows/row.h"

namespace {

int g_threads = 0;

int threads() { return g_threads > 0 ? g_threads : omp_get_max_threads(); }

int64_t l3_bytes() {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index3/size");
    std::string s;
    int64_t v = 0;
    if (in >> s && !s.empty()) {
        v = std::atoll(s.c_str());
        if (s.back() == 'K') v <<= 10;
        if (s.back() == 'M') v <<= 20;
    }
    return v > 0 ? v : (64ll << 20);
}

// Copies of one buffer needed so that cycling through them misses the L3.
int cold_copies(int64_t bytes) {
    const int64_t want = l3_bytes() * 2;
    return static_cast<int>(std::max<int64_t>(2, (want + bytes - 1) / bytes));
}

uint64_t next_rand(uint64_t &s) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
}

// Random weights, scales and activations of a descriptor.
struct source {
    qconv::matmul_desc d;
    std::vector<uint8_t> wei;
    std::vector<float> scale, x;
    std::vector<int32_t> zp; // per group: values in the weight type's range

    explicit source(const qconv::matmul_desc &desc) : d(desc) {
        uint64_t s = 88172645463325252ull;
        wei.resize(static_cast<size_t>(d.wei_bytes()));
        for (auto &b : wei) b = static_cast<uint8_t>(next_rand(s));
        scale.resize(static_cast<size_t>(d.scale_elems()));
        for (auto &v : scale) v = 0.01f + 0.001f * float(next_rand(s) % 64);
        x.resize(static_cast<size_t>(d.m * d.k));
        for (auto &v : x) v = float(int(next_rand(s) % 17) - 8) * 0.125f;
        const bool s4 = d.wei_dt == qconv::dtype::s4, s8 = d.wei_dt == qconv::dtype::s8;
        const int span = d.wei_dt == qconv::dtype::u4 || s4 ? 16 : 256, lo = s4 ? -8 : s8 ? -128 : 0;
        zp.resize(static_cast<size_t>(d.zp_elems()));
        for (auto &v : zp) v = lo + int(next_rand(s) % uint64_t(span));
    }
    qconv::matmul_weights weights() const {
        qconv::matmul_weights w;
        w.wei = wei.data();
        w.scale = scale.data();
        w.zp = zp.empty() ? nullptr : zp.data();
        return w;
    }
    int32_t zp_at(int64_t n, int64_t g) const {
        return zp.empty() ? 0 : zp.size() == 1 ? zp[0] : zp[static_cast<size_t>(n * d.n_groups() + g)];
    }
    // deq(W) in f32, [N][K].
    std::vector<float> dequantized() const {
        std::vector<float> w(static_cast<size_t>(d.n * d.k));
        const int64_t gs = d.group_size(), ng = d.n_groups();
        for (int64_t n = 0; n < d.n; ++n)
            for (int64_t k = 0; k < d.k; ++k)
                w[n * d.k + k] = float(qconv::weight_at(wei.data(), d.wei_dt, n * d.k + k) - zp_at(n, k / gs)) *
                                 scale[n * ng + k / gs];
        return w;
    }
};

// One live fixture at a time: building copies is expensive, and Google
// Benchmark calls a benchmark function several times.
struct fixture {
    std::string key;
    virtual ~fixture() = default;
};
std::unique_ptr<fixture> g_fixture;

template <typename F, typename Make>
F &get_fixture(const std::string &key, Make make) {
    if (!g_fixture || g_fixture->key != key) {
        g_fixture.reset();
        g_fixture = make();
        g_fixture->key = key;
    }
    return static_cast<F &>(*g_fixture);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void set_counters(benchmark::State &st, double bytes, double flops) {
    st.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    st.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// ------------------------------------------------------------------ ours
struct jit_fixture : fixture {
    std::shared_ptr<const qconv::impl::matmul_kernel> kernel;
    std::vector<std::shared_ptr<const qconv::impl::packed>> copies;
    std::vector<float> x, y;
};

void bench_jit(benchmark::State &st, const qconv::impl::matmul_entry *e, qconv::matmul_desc d, bool cold) {
    auto &f = get_fixture<jit_fixture>(e->name + d.key() + (cold ? "c" : "h"), [&] {
        auto p = std::make_unique<jit_fixture>();
        const source src(d);
        const qconv::impl::platform plat = qconv::impl::host_platform();
        p->kernel = e->create(d, {}, *e->supports(d, {}, plat, nullptr));
        const int n = cold ? cold_copies(d.wei_bytes()) : 1;
        for (int i = 0; i < n; ++i) p->copies.push_back(p->kernel->pack(src.weights()));
        p->x = src.x;
        p->y.assign(static_cast<size_t>(d.m * d.n), 0.f);
        return p;
    });
    size_t i = 0;
    const int nt = threads();
    for (auto _ : st) {
        f.kernel->execute(*f.copies[i], f.x.data(), f.y.data(), nt);
        if (++i == f.copies.size()) i = 0;
        benchmark::DoNotOptimize(f.y.data());
    }
    set_counters(st, double(d.wei_bytes()), d.flops());
}

// x16/<row>/<wei>/g128_zp/m<M>k<K>n<N>/<f16|bf16>: f16 / bf16 X read by the
// kernel (matmul_kernel::execute_x: the streaming kernels convert where they
// load x, the blocked and prefill shapes where the driver packs it) against
// X converted to f32 first (core/convert.h's AVX-512 loop into a new buffer,
// then execute(): what matmul::execute_typed did before), timed in turns in
// one loop, in alternating order (hot weights). Counters: in_kernel_ms and convert_first_ms (the
// best of each), speedup = convert_first ÷ in_kernel (≥ 1: not slower). The
// time reported is the in-kernel one (manual time).
void bench_x16(benchmark::State &st, const qconv::impl::matmul_entry *e, qconv::matmul_desc d, qconv::dtype xt) {
    auto &f = get_fixture<jit_fixture>("x16" + e->name + d.key(), [&] {
        auto p = std::make_unique<jit_fixture>();
        const source src(d);
        const qconv::impl::platform plat = qconv::impl::host_platform();
        p->kernel = e->create(d, {}, *e->supports(d, {}, plat, nullptr));
        p->copies.push_back(p->kernel->pack(src.weights()));
        p->x = src.x;
        p->y.assign(static_cast<size_t>(d.m * d.n), 0.f);
        return p;
    });
    std::vector<uint16_t> x16(f.x.size());
    qconv::detail::from_f32(xt, f.x.data(), x16.data(), int64_t(x16.size()), true);
    const bool avx512 = qconv::impl::host_platform().has(qconv::impl::cpu_feature::avx512_core);
    const int nt = threads();
    double best_in = 1e30, best_first = 1e30;
    bool first_first = true; // the order alternates between iterations
    for (auto _ : st) {
        auto convert_first = [&] {
            const auto t0 = std::chrono::steady_clock::now();
            {
                std::vector<float> x32(x16.size());
                qconv::detail::to_f32(xt, x16.data(), x32.data(), int64_t(x32.size()), avx512);
                f.kernel->execute(*f.copies[0], x32.data(), f.y.data(), nt);
            }
            best_first = std::min(best_first, seconds_since(t0));
            benchmark::DoNotOptimize(f.y.data());
        };
        if (first_first) convert_first();
        const auto t0 = std::chrono::steady_clock::now();
        f.kernel->execute_x(*f.copies[0], x16.data(), xt, f.y.data(), nt);
        const double t = seconds_since(t0);
        best_in = std::min(best_in, t);
        st.SetIterationTime(t);
        benchmark::DoNotOptimize(f.y.data());
        if (!first_first) convert_first();
        first_first = !first_first;
    }
    st.counters["in_kernel_ms"] = best_in * 1e3;
    st.counters["convert_first_ms"] = best_first * 1e3;
    st.counters["speedup"] = best_first / best_in;
}

// ------------------------------------------------------------------ peers
// f32 weight copies on 2 MB aligned, huge-page-advised memory, like the
// packed weights of the JIT rows (matmul_wc.cpp): the peer gets the same pages.
struct huge_floats {
    float *p = nullptr;
    explicit huge_floats(const std::vector<float> &src) {
        const size_t bytes = (src.size() * sizeof(float) + (2u << 20) - 1) / (2u << 20) * (2u << 20);
        p = static_cast<float *>(std::aligned_alloc(2u << 20, bytes));
        if (!p) throw std::bad_alloc();
        madvise(p, bytes, MADV_HUGEPAGE);
        std::memcpy(p, src.data(), src.size() * sizeof(float));
    }
    huge_floats(const huge_floats &) = delete;
    huge_floats &operator=(const huge_floats &) = delete;
    ~huge_floats() { std::free(p); }
    float *data() const { return p; }
};

struct sgemm_fixture : fixture {
    std::vector<std::unique_ptr<huge_floats>> copies;
    std::vector<float> x, y;
};

void bench_sgemm(benchmark::State &st, qconv::matmul_desc d, bool cold) {
    auto &f = get_fixture<sgemm_fixture>("sgemm" + d.key() + (cold ? "c" : "h"), [&] {
        auto p = std::make_unique<sgemm_fixture>();
        const source src(d);
        const std::vector<float> w = src.dequantized();
        const int n = cold ? cold_copies(d.n * d.k * 4) : 1;
        for (int i = 0; i < n; ++i) p->copies.push_back(std::make_unique<huge_floats>(w));
        p->x = src.x;
        p->y.assign(static_cast<size_t>(d.m * d.n), 0.f);
        return p;
    });
    size_t i = 0;
    for (auto _ : st) {
        // Row-major Y[M,N] = X[M,K] · W[N,K]ᵀ.
        dnnl_sgemm('N', 'T', d.m, d.n, d.k, 1.f, f.x.data(), d.k, f.copies[i]->data(), d.k, 0.f, f.y.data(), d.n);
        if (++i == f.copies.size()) i = 0;
        benchmark::DoNotOptimize(f.y.data());
    }
    set_counters(st, double(d.n * d.k * 4), d.flops());
}

struct dnnl_matmul_fixture : fixture {
    dnnl::engine eng{dnnl::engine::kind::cpu, 0};
    dnnl::stream strm{eng};
    dnnl::matmul prim;
    dnnl::memory src, dst;
    std::vector<dnnl::memory> copies;
};

void bench_dnnl_matmul(benchmark::State &st, qconv::matmul_desc d, bool cold) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    auto &f = get_fixture<dnnl_matmul_fixture>("dnnl" + d.key() + (cold ? "c" : "h"), [&] {
        auto p = std::make_unique<dnnl_matmul_fixture>();
        const source src(d);
        std::vector<float> w = src.dequantized();
        const dnnl::memory::desc src_md({d.m, d.k}, dt::f32, tag::ab);
        const dnnl::memory::desc wei_any({d.k, d.n}, dt::f32, tag::any);
        const dnnl::memory::desc wei_plain({d.k, d.n}, dt::f32, tag::ba); // W[N,K] seen as [K,N]
        const dnnl::memory::desc dst_md({d.m, d.n}, dt::f32, tag::ab);
        const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_any, dst_md), p->eng);
        p->prim = dnnl::matmul(pd);
        p->src = dnnl::memory(src_md, p->eng);
        std::memcpy(p->src.get_data_handle(), src.x.data(), src.x.size() * sizeof(float));
        p->dst = dnnl::memory(dst_md, p->eng);
        dnnl::memory plain(wei_plain, p->eng, w.data());
        const int n = cold ? cold_copies(d.n * d.k * 4) : 1;
        for (int i = 0; i < n; ++i) {
            p->copies.emplace_back(pd.weights_desc(), p->eng);
            dnnl::reorder(plain, p->copies.back()).execute(p->strm, plain, p->copies.back());
        }
        p->strm.wait();
        return p;
    });
    size_t i = 0;
    for (auto _ : st) {
        f.prim.execute(f.strm, {{DNNL_ARG_SRC, f.src}, {DNNL_ARG_WEIGHTS, f.copies[i]}, {DNNL_ARG_DST, f.dst}});
        f.strm.wait();
        if (++i == f.copies.size()) i = 0;
    }
    set_counters(st, double(d.n * d.k * 4), d.flops());
}

// ------------------------------------------------------------------ the limit
// Reads `bytes` as 8 interleaved sequential streams (8 parts walked side by
// side): one stream per core stays well below what the memory system gives
// (the hardware prefetchers keep more lines in flight over several streams).
__attribute__((target("avx2"))) uint64_t read_avx2(const uint8_t *p, size_t bytes) {
    constexpr int S = 8;
    const size_t part = bytes / S / 64 * 64;
    __m256i a[S];
    for (auto &v : a) v = _mm256_setzero_si256();
    for (size_t i = 0; i < part; i += 64)
        for (int s = 0; s < S; ++s) {
            const uint8_t *q = p + s * part + i;
            a[s] = _mm256_xor_si256(a[s], _mm256_load_si256(reinterpret_cast<const __m256i *>(q)));
            a[s] = _mm256_xor_si256(a[s], _mm256_load_si256(reinterpret_cast<const __m256i *>(q + 32)));
        }
    __m256i r = a[0];
    for (int s = 1; s < S; ++s) r = _mm256_xor_si256(r, a[s]);
    return uint64_t(_mm256_extract_epi64(r, 0)) ^ uint64_t(_mm256_extract_epi64(r, 3));
}

// One pass of the dram_read loop: `bytes` split into whole 4 KB parts, one per
// thread, each read with read_avx2. Returns the bytes read.
size_t dram_pass_bytes(size_t bytes, int nt) { return bytes / nt / 4096 * 4096 * nt; }
size_t dram_pass(const uint8_t *base, size_t bytes, int nt, uint64_t *sink) {
    const size_t part = bytes / nt / 4096 * 4096;
    uint64_t acc = 0;
#pragma omp parallel for num_threads(nt) reduction(^ : acc) schedule(static)
    for (int t = 0; t < nt; ++t) acc ^= read_avx2(base + t * part, part);
    *sink ^= acc;
    return part * nt;
}

struct dram_fixture : fixture {
    uint8_t *buf = nullptr;
    size_t bytes = 0;
    ~dram_fixture() override { std::free(buf); }
};

// Each iteration reads a 64 MB slice of a buffer of 2x the L3, the next
// slice each time, split over the threads like the kernels split N.
void bench_dram(benchmark::State &st) {
    constexpr size_t slice = 64u << 20;
    auto &f = get_fixture<dram_fixture>("dram", [] {
        auto p = std::make_unique<dram_fixture>();
        p->bytes = (static_cast<size_t>(l3_bytes()) * 2 + slice - 1) / slice * slice;
        p->buf = static_cast<uint8_t *>(std::aligned_alloc(2u << 20, p->bytes));
        // Huge pages like the packed weights (matmul_wc.cpp), so the limit is not lowered by 4 KB pages.
        madvise(p->buf, p->bytes, MADV_HUGEPAGE);
        for (size_t i = 0; i < p->bytes; i += 64) std::memset(p->buf + i, int(i >> 6), 64);
        return p;
    });
    const int nt = threads();
    size_t off = 0;
    uint64_t sink = 0;
    for (auto _ : st) {
        dram_pass(f.buf + off, slice, nt, &sink);
        off += slice;
        if (off == f.bytes) off = 0;
    }
    benchmark::DoNotOptimize(sink);
    st.counters["GB/s"] = benchmark::Counter(double(slice) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// ------------------------------------------------------------------ interleaved
// share/<row>/<wei>/<g128|oc>/m<M>k<K>n<N>/cold: the limit, our kernel and
// dnnl_sgemm measured in turns inside one loop, so all three see the same
// state of the shared memory system (run one after the other, the limit moves
// by ±20 % between benchmarks here). Each iteration reads one 64 MB f32 copy
// with the dram_read loop, runs our kernel on the next cold packed copy, then
// dnnl_sgemm on another f32 copy (copies cycled, total > 2x the L3).
// Counters: GB/s (ours, compressed weight values), dram_GB/s, share = GB/s ÷
// dram_GB/s, share_with_params (the f32 scales and zero points counted too),
// sgemm_GB/s (f32 bytes), vs_sgemm = sgemm time ÷ our time; best_GB/s,
// dram_best_GB/s and share_best from each side's fastest iteration; hot_GB/s
// and hot_share: our kernel called twice in a row on one more copy, the
// second call timed (weights in the caches: the rate its instructions allow). The time reported
// is our kernel's (manual time).
struct share_fixture : fixture {
    std::shared_ptr<const qconv::impl::matmul_kernel> kernel;
    std::vector<std::shared_ptr<const qconv::impl::packed>> copies;
    std::shared_ptr<const qconv::impl::packed> hot; // run twice in a row: the second call finds it in the caches
    std::vector<std::unique_ptr<huge_floats>> f32;
    std::vector<float> x, y;
};

void bench_share(benchmark::State &st, const qconv::impl::matmul_entry *e, qconv::matmul_desc d) {
    auto &f = get_fixture<share_fixture>("share" + e->name + d.key(), [&] {
        auto p = std::make_unique<share_fixture>();
        const source src(d);
        const qconv::impl::platform plat = qconv::impl::host_platform();
        p->kernel = e->create(d, {}, *e->supports(d, {}, plat, nullptr));
        for (int i = 0, n = cold_copies(d.wei_bytes()); i < n; ++i) p->copies.push_back(p->kernel->pack(src.weights()));
        p->hot = p->kernel->pack(src.weights());
        const std::vector<float> w = src.dequantized();
        for (int i = 0, n = std::max(3, cold_copies(d.n * d.k * 4)); i < n; ++i)
            p->f32.push_back(std::make_unique<huge_floats>(w));
        p->x = src.x;
        p->y.assign(static_cast<size_t>(d.m * d.n), 0.f);
        return p;
    });
    const int nt = threads();
    const size_t f32_bytes = static_cast<size_t>(d.n * d.k * 4);
    size_t ik = 0, ib = 0, dram_bytes = 0;
    double t_dram = 0, t_ours = 0, t_sgemm = 0, best_dram = 1e30, best_ours = 1e30, best_hot = 1e30;
    uint64_t sink = 0;
    for (auto _ : st) {
        const uint8_t *base = reinterpret_cast<const uint8_t *>(f.f32[ib]->data());
        ib = (ib + 1) % f.f32.size();
        auto t0 = std::chrono::steady_clock::now();
        dram_bytes += dram_pass(base, f32_bytes, nt, &sink);
        const double td = seconds_since(t0);
        t_dram += td;
        best_dram = std::min(best_dram, td);

        t0 = std::chrono::steady_clock::now();
        f.kernel->execute(*f.copies[ik], f.x.data(), f.y.data(), nt);
        const double t = seconds_since(t0);
        t_ours += t;
        best_ours = std::min(best_ours, t);
        st.SetIterationTime(t);
        ik = (ik + 1) % f.copies.size();

        t0 = std::chrono::steady_clock::now();
        dnnl_sgemm('N', 'T', d.m, d.n, d.k, 1.f, f.x.data(), d.k, f.f32[ib]->data(), d.k, 0.f, f.y.data(), d.n);
        t_sgemm += seconds_since(t0);
        ib = (ib + 1) % f.f32.size();

        f.kernel->execute(*f.hot, f.x.data(), f.y.data(), nt);
        t0 = std::chrono::steady_clock::now();
        f.kernel->execute(*f.hot, f.x.data(), f.y.data(), nt);
        best_hot = std::min(best_hot, seconds_since(t0));
        benchmark::DoNotOptimize(f.y.data());
    }
    benchmark::DoNotOptimize(sink);
    const double it = double(st.iterations());
    const double ours = it * double(d.wei_bytes()) / t_ours * 1e-9, dram = double(dram_bytes) / t_dram * 1e-9;
    st.counters["GB/s"] = ours;
    st.counters["dram_GB/s"] = dram;
    st.counters["share"] = ours / dram;
    // The same with the scales and zero points the kernel streams beside the
    // weight values (f32 each: 1/32 more bytes for u4 with groups of 128).
    const double params = 4.0 * double(d.scale_elems() + d.zp_elems());
    st.counters["share_with_params"] = ours * (double(d.wei_bytes()) + params) / double(d.wei_bytes()) / dram;
    st.counters["sgemm_GB/s"] = it * double(f32_bytes) / t_sgemm * 1e-9;
    // Best of the iterations: each side's fastest pass (dram_read best of several).
    const double best_dram_gbs = double(dram_pass_bytes(f32_bytes, nt)) / best_dram * 1e-9;
    st.counters["best_GB/s"] = double(d.wei_bytes()) / best_ours * 1e-9;
    st.counters["dram_best_GB/s"] = best_dram_gbs;
    st.counters["share_best"] = double(d.wei_bytes()) / best_ours * 1e-9 / best_dram_gbs;
    // The kernel on weights just read (in the L3 where they fit): its rate without DRAM, the
    // bound of its cold rate; hot_share = that ÷ dram_best_GB/s.
    st.counters["hot_GB/s"] = double(d.wei_bytes()) / best_hot * 1e-9;
    st.counters["hot_share"] = double(d.wei_bytes()) / best_hot * 1e-9 / best_dram_gbs;
    st.counters["vs_sgemm"] = t_sgemm / t_ours;
}

// void loop(int64_t n): n iterations of 12 independent vfmadd231ps (zmm or ymm).
class fma_peak_gen : public qconv::jit::jit_generator {
public:
    explicit fma_peak_gen(bool zmm) : qconv::jit::jit_generator(4096), zmm_(zmm) {}
    const char *name() const override { return "bench:f32_fma_peak"; }

protected:
    void generate() override {
        using namespace Xbyak;
        Label loop;
        for (int i = 0; i < 14; ++i) vxorps(reg(i), reg(i), reg(i));
        L(loop);
        for (int i = 0; i < 12; ++i) vfmadd231ps(reg(i), reg(12), reg(13));
        dec(abi_param(0));
        jnz(loop, T_NEAR);
        vzeroupper();
        ret();
    }

private:
    Xbyak::Xmm reg(int i) const { return zmm_ ? Xbyak::Xmm(Xbyak::Zmm(i)) : Xbyak::Xmm(Xbyak::Ymm(i)); }
    bool zmm_;
};

// One thread: the rate of fma_peak_gen's loop (2 flops per lane and FMA).
void bench_fma_peak(benchmark::State &st, bool zmm) {
    fma_peak_gen g(zmm);
    g.create();
    const auto loop = g.entry<void (*)(int64_t)>();
    constexpr int64_t iters = 1 << 20;
    for (auto _ : st) loop(iters);
    st.counters["GFLOPS"] = benchmark::Counter(double(iters) * 12 * (zmm ? 16 : 8) * 2 * 1e-9,
                                               benchmark::Counter::kIsIterationInvariantRate);
}

// ------------------------------------------------------------------ registration
benchmark::internal::Benchmark *real_time(benchmark::internal::Benchmark *b) { return b->UseRealTime(); }

void register_all() {
    const std::vector<int64_t> ms = {1, 4, 32, 128};
    const std::vector<std::pair<int64_t, int64_t>> kns = {{4096, 4096}, {4096, 11008}, {11008, 4096}};
    const qconv::impl::platform plat = qconv::impl::host_platform();
    real_time(benchmark::RegisterBenchmark("dram_read", bench_dram))->MinTime(0.5);
    if (plat.has(qconv::impl::cpu_feature::avx512_core))
        real_time(
            benchmark::RegisterBenchmark("f32_fma_peak/zmm", [](benchmark::State &st) { bench_fma_peak(st, true); }));
    if (plat.has(qconv::impl::cpu_feature::avx2)) // AVX2 + FMA
        real_time(
            benchmark::RegisterBenchmark("f32_fma_peak/ymm", [](benchmark::State &st) { bench_fma_peak(st, false); }));
    for (int64_t m : ms)
        for (auto kn : kns)
            for (bool cold : {true, false}) {
                qconv::matmul_desc base;
                base.m = m, base.k = kn.first, base.n = kn.second;
                const std::string shape = base.str() + (cold ? "/cold" : "/hot");
                for (qconv::dtype wt : {qconv::dtype::u8, qconv::dtype::u4})
                    for (const char *layout : {"g128", "g128_zp", "oc"}) {
                        const int64_t g = layout[0] == 'g' ? 128 : 0;
                        qconv::matmul_desc d = base;
                        d.wei_dt = wt, d.group = g;
                        if (std::strcmp(layout, "g128_zp") == 0) d.zp = qconv::matmul_desc::zp_kind::per_group;
                        for (const auto &e : qconv::impl::matmul_list()) {
                            qconv::matmul_hints h;
                            h.dynamic_quantization = e.name.find("_dq") != std::string::npos;
                            if (e.name.rfind("jit:", 0) != 0 || !e.supports(d, h, plat, nullptr)) continue;
                            const std::string name =
                                "jit/" + e.name.substr(4) + "/" + qconv::to_string(wt) + "/" + layout + "/" + shape;
                            const qconv::impl::matmul_entry *ep = &e;
                            real_time(benchmark::RegisterBenchmark(
                                name.c_str(), [ep, d, cold](benchmark::State &st) { bench_jit(st, ep, d, cold); }));
                            if (cold && m == 1 && !h.dynamic_quantization)
                                benchmark::RegisterBenchmark(("share/" + name.substr(4)).c_str(),
                                                             [ep, d](benchmark::State &st) { bench_share(st, ep, d); })
                                    ->UseManualTime()
                                    ->MinTime(1.0);
                            // f16 / bf16 X read by the kernel against converted first (hot weights).
                            if (!cold && !h.dynamic_quantization && std::strcmp(layout, "g128_zp") == 0 &&
                                kn.first == 4096 && kn.second == 4096)
                                for (qconv::dtype xt : {qconv::dtype::f16, qconv::dtype::bf16})
                                    benchmark::RegisterBenchmark(
                                        ("x16/" + name.substr(4, name.size() - 8) + "/" + qconv::to_string(xt)).c_str(),
                                        [ep, d, xt](benchmark::State &st) { bench_x16(st, ep, d, xt); })
                                        ->UseManualTime();
                        }
                    }
                real_time(benchmark::RegisterBenchmark(
                    ("sgemm/" + shape).c_str(), [base, cold](benchmark::State &st) { bench_sgemm(st, base, cold); }));
                real_time(
                    benchmark::RegisterBenchmark(("dnnl_matmul/" + shape).c_str(), [base, cold](benchmark::State &st) {
                        bench_dnnl_matmul(st, base, cold);
                    }));
            }
}

} // namespace

int main(int argc, char **argv) {
    std::vector<char *> args;
    bool has_filter = false;
    for (int i = 0; i < argc; ++i) {
        const std::string a = argv[i];
        if (a.rfind("--threads=", 0) == 0) {
            g_threads = std::atoi(a.c_str() + 10);
            continue;
        }
        if (a.rfind("--benchmark_filter=", 0) == 0) has_filter = true;
        args.push_back(argv[i]);
    }
    static char default_filter[] =
        "--benchmark_filter=^dram_read|^share/.*/m1k4096n4096/|m1k4096n4096/cold|m32k4096n4096/cold";
    if (!has_filter) args.push_back(default_filter);
    if (g_threads > 0) omp_set_num_threads(g_threads);
    int n = static_cast<int>(args.size());
    benchmark::Initialize(&n, args.data());
    if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 2;
    register_all();
    benchmark::RunSpecifiedBenchmarks();
    g_fixture.reset();
    benchmark::Shutdown();
    return 0;
}
