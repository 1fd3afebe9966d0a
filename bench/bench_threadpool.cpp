// The caller's pool against OpenMP (include/qconv/threadpool.h):
//
//   bench_threadpool [--threads=1,2] [--budget-ms=N] [--matmul-only] [--conv-only]
//
// ResNet-50 at mb1 (bench/shapes/shapes_resnet_50; u8 source, s8 weights, u8
// destination, per-OC scales, bias, ReLU; the dispatcher's row) and the
// compressed MatMul (u4 and u8 weights, group-wise and per-OC scales, M from
// 1 to 32), each at 1 and 2 threads: once through OpenMP (exec threads = T)
// and once through a caller's pool of T threads (a spinning std::thread pool,
// the caller running tasks too, as a runtime's pool does). Both modes run on
// the same primitive in interleaved rounds (blocks of 4 calls per mode), the
// per-problem best kept; a line
// per problem gives both times and ratio = pool / OpenMP, and each block
// ends with the total (layers weighted by their `*N` counts).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <immintrin.h>

#include "qconv/qconv.h"
#include "tests/support/testdata.h"

namespace {

struct options {
    std::vector<int> threads = {1, 2};
    double budget_ms = 60;
    bool conv = true, matmul = true;
} opt;

double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// n − 1 workers and the caller take tasks from a shared counter; an idle
// worker spins briefly (about 0.1 ms, like OpenMP's and pthreadpool's
// workers), then sleeps until the next run().
class spin_pool final : public qconv::threadpool {
public:
    explicit spin_pool(int n) : n_(n) {
        for (int i = 1; i < n; ++i) workers_.emplace_back([this] { work(); });
    }
    ~spin_pool() override {
        stop_.store(true);
        wake();
        for (auto &t : workers_) t.join();
    }
    int num_threads() const override { return n_; }
    void run(int n, const std::function<void(int)> &task) override {
        task_ = &task;
        count_ = n;
        next_.store(0);
        left_.store(n);
        wake();
        drain();
        while (left_.load(std::memory_order_acquire) != 0) _mm_pause();
    }

private:
    void wake() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            generation_.fetch_add(1, std::memory_order_release);
        }
        cv_.notify_all();
    }
    void drain() {
        for (int i; (i = next_.fetch_add(1)) < count_;) {
            (*task_)(i);
            left_.fetch_sub(1, std::memory_order_acq_rel);
        }
    }
    void work() {
        uint64_t seen = 0;
        for (;;) {
            int spins = 0;
            uint64_t g;
            while ((g = generation_.load(std::memory_order_acquire)) == seen) {
                if (++spins < 4000) {
                    _mm_pause();
                    continue;
                }
                std::unique_lock<std::mutex> lock(mu_);
                cv_.wait(lock, [&] { return generation_.load() != seen; });
            }
            seen = g;
            if (stop_.load()) return;
            drain();
        }
    }
    const int n_;
    std::vector<std::thread> workers_;
    std::mutex mu_;
    std::condition_variable cv_;
    const std::function<void(int)> *task_ = nullptr;
    int count_ = 0;
    std::atomic<int> next_{0}, left_{0};
    std::atomic<uint64_t> generation_{0};
    std::atomic<bool> stop_{false};
};

// Deterministic MatMul weights and input (as tests/support/row_problems.h).
struct mm_buffers {
    std::vector<uint8_t> wei;
    std::vector<float> scale, bias, x;
    std::vector<int32_t> zp;
    explicit mm_buffers(const qconv::matmul_desc &d) {
        qconv::testdata::rng r(1);
        wei.resize(size_t(d.wei_bytes()));
        for (auto &b : wei) b = uint8_t(r.next());
        scale.resize(size_t(d.scale_elems()));
        for (auto &v : scale) v = float(r.uniform(1, 8)) / 64.f;
        zp.resize(size_t(d.zp_elems()));
        for (auto &z : zp) z = r.uniform(0, d.wei_dt == qconv::dtype::u4 ? 15 : 255);
        bias.resize(size_t(d.n));
        for (auto &b : bias) b = float(r.uniform(-8, 8));
        x.resize(size_t(d.m * d.k));
        for (auto &v : x) v = float(r.uniform(-16, 16)) / 8.f;
    }
    qconv::matmul_weights weights() const {
        return {wei.data(), scale.data(), zp.empty() ? nullptr : zp.data(), bias.data()};
    }
};

struct layer {
    std::string name;
    qconv::conv_desc desc;
    int repeats = 1;
};

std::vector<layer> read_shapes(const std::string &list) {
    std::vector<layer> r;
    std::ifstream in(std::string(QCONV_SOURCE_DIR) + "/bench/shapes/shapes_" + list);
    if (!in) qconv::fail("lists", "no shape list bench/shapes/shapes_" + list);
    for (std::string line; std::getline(in, line);) {
        line = line.substr(0, line.find('#'));
        line.erase(std::remove_if(line.begin(), line.end(), ::isspace), line.end());
        if (line.empty()) continue;
        layer l;
        l.desc = qconv::conv_desc::parse(line);
        l.desc.mb = 1;
        l.name = l.desc.name;
        const auto star = l.name.find('*');
        if (star != std::string::npos) {
            l.repeats = std::max(1, std::atoi(l.name.c_str() + star + 1));
            l.name = l.name.substr(0, star);
        }
        r.push_back(l);
    }
    return r;
}

// Best of interleaved rounds of f(false) (OpenMP) and f(true) (the pool):
// each round runs one mode `block` times in a row, then the other (the order
// alternates), so that the idle workers of the runtime that just ran (both
// spin a while before they sleep) disturb only the first calls of a block.
void time_both(const std::function<void(bool)> &f, double *omp_ms, double *pool_ms) {
    constexpr int block = 4;
    *omp_ms = *pool_ms = 1e30;
    f(false);
    f(true);
    const double start = now_ms();
    for (int round = 0; round < 100 && (round < 4 || now_ms() - start < opt.budget_ms); ++round)
        for (int k = 0; k < 2; ++k) {
            const bool pool = (k + round) % 2 == 1;
            double &best = pool ? *pool_ms : *omp_ms;
            for (int r = 0; r < block; ++r) {
                const double t0 = now_ms();
                f(pool);
                best = std::min(best, now_ms() - t0);
            }
        }
}

struct total {
    double omp = 0, pool = 0;
    void add(double o, double p, int w) {
        omp += o * w;
        pool += p * w;
    }
};

void bench_conv(int threads) {
    using namespace qconv;
    spin_pool pool(threads);
    total t;
    std::printf("resnet_50 mb1, %d thread(s)\n", threads);
    for (const layer &l : read_shapes("resnet_50")) {
        conv_problem p;
        p.desc = l.desc;
        p.scales = testdata::make_scales(p.desc.oc, false, 1);
        p.with_bias = true;
        p.ops = testdata::make_post_ops("relu", p.desc.oc, 1);
        const auto wei = testdata::make_weights(p.desc, testdata::data_kind::random, 1);
        const auto bias = testdata::make_bias(p.desc, 1);
        const auto src = testdata::make_src(p, testdata::data_kind::random, 1);
        std::vector<uint8_t> dst(testdata::bytes_of(p.dst_dt, p.desc.dst_elems()));
        const convolution conv(p, wei.data(), bias.data());
        double o, q;
        time_both(
            [&](bool on_pool) {
                exec_args a;
                a.threads = threads;
                a.pool = on_pool ? &pool : nullptr;
                conv.execute(src.data(), dst.data(), a);
            },
            &o, &q);
        std::printf("  %-28s %-40s omp %8.4f ms  pool %8.4f ms  ratio %.3f\n", l.name.c_str(), conv.impl_name().c_str(),
                    o, q, q / o);
        t.add(o, q, l.repeats);
    }
    std::printf("  total: omp %.3f ms  pool %.3f ms  ratio %.3f\n\n", t.omp, t.pool, t.pool / t.omp);
}

void bench_matmul(int threads) {
    using namespace qconv;
    spin_pool pool(threads);
    total t;
    std::printf("compressed MatMul, %d thread(s)\n", threads);
    const char *shapes[] = {"m1k4096n4096", "m8k4096n4096", "m32k4096n4096", "m1k4096n11008", "m16k11008n4096"};
    for (const char *s : shapes)
        for (dtype wt : {dtype::u4, dtype::u8}) {
            matmul_desc d = matmul_desc::parse(s);
            d.wei_dt = wt;
            if (wt == dtype::u4) {
                d.group = 128;
                d.zp = matmul_desc::zp_kind::per_group;
            }
            const mm_buffers w(d);
            const mm_buffers &in = w;
            const matmul mm(d, w.weights());
            std::vector<float> y(static_cast<size_t>(d.m * d.n));
            double o, q;
            time_both(
                [&](bool on_pool) {
                    threadpool_scope scope(on_pool ? &pool : nullptr);
                    mm.execute(in.x.data(), y.data(), threads);
                },
                &o, &q);
            const std::string name = d.key();
            std::printf("  %-44s %-28s omp %8.4f ms  pool %8.4f ms  ratio %.3f\n", name.c_str(), mm.impl_name().c_str(),
                        o, q, q / o);
            t.add(o, q, 1);
        }
    std::printf("  total: omp %.3f ms  pool %.3f ms  ratio %.3f\n\n", t.omp, t.pool, t.pool / t.omp);
}

} // namespace

int main(int argc, char **argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a.rfind("--threads=", 0) == 0) {
            opt.threads.clear();
            std::stringstream ss(a.substr(10));
            for (std::string x; std::getline(ss, x, ',');) opt.threads.push_back(std::atoi(x.c_str()));
        } else if (a.rfind("--budget-ms=", 0) == 0) {
            opt.budget_ms = std::atof(a.c_str() + 12);
        } else if (a == "--matmul-only") {
            opt.conv = false;
        } else if (a == "--conv-only") {
            opt.matmul = false;
        } else {
            std::fprintf(stderr,
                         "usage: bench_threadpool [--threads=1,2] [--budget-ms=N] [--matmul-only|--conv-only]\n");
            return 2;
        }
    }
    try {
        for (int t : opt.threads) {
            if (opt.conv) bench_conv(t);
            if (opt.matmul) bench_matmul(t);
        }
    } catch (const qconv::error &e) {
        std::fprintf(stderr, "bench_threadpool: %s\n", e.what());
        return 2;
    }
    return 0;
}
