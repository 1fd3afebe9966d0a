// The embedded example (examples/ffn_u4.qg: a transformer FFN block exported
// as Transpose → conv1x1 (u4, group 128, zp) + bias → Gelu → conv1x1 + bias →
// Transpose, 1024 → 4096 → 1024, 32 tokens) run as written and after the
// conv1x1 → MatMul rewrite, in one binary and one run.
//
// Benchmarks (real time, ms):
//   ffn_u4/before           as written; the decompression subgraphs are folded at
//                           compile time into f32 weights (32 MB) and the
//                           Convolutions run on oneDNN's f32 convolution
//   ffn_u4/before_unfolded  as written, every node at every run: the weights are
//                           decompressed to f32 per run, oneDNN conv created per run
//   ffn_u4/after            after the rewrite: two compressed-MatMul primitives
//                           (u4 weights stay compressed, 4 MB) + Gelu
//   ffn_u4/after_dq         the same with the opt-in dynamic quantization of the
//                           activations (int8 dot products; bounded error)
//   ffn_u4_1token/*         the same with 1 token (the decode case, memory-bound)
// Counters (Google Benchmark rates, so --benchmark_format=json and
// --benchmark_out carry them): GFLOPS and pct_peak, the share of the f32 FMA
// peak of all threads, measured by this binary (back-to-back independent
// vfmadd231ps zmm, ymm without AVX-512). What Google Benchmark cannot give is
// a comparison across benchmarks, so after them one summary line per token
// count gives the times, the ratios (target ≥ 3× faster after), the relative
// difference of the outputs (target ≤ 1e-4, as max|after − before| /
// max|before|) and `f32_bound_speedup`: before_ms over the time the FFN's
// multiply-adds take at that peak, i.e. the largest ratio any f32 kernel
// could reach on this run's machine and thread count.
//
//   bench_graph [--graph=FILE] [google benchmark flags]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "kernels/jit/base/jit_base.h"
#include "qconv/graph.h"
#include "qconv/qconv.h"

namespace {

using namespace qconv::graph;

struct variant {
    std::string name;
    int64_t tokens = 0;
    std::unique_ptr<graph> before, after;
    std::unique_ptr<compiled_graph> folded, unfolded, rewritten, rewritten_dq;
    std::vector<tensor> inputs;
    std::string impls;
};

std::map<std::string, variant> &variants() {
    static std::map<std::string, variant> v;
    return v;
}

// Loads the graph with its token axis (W of the NHWC input) set to `tokens`.
void setup(const std::string &path, const std::string &name, int64_t tokens) {
    variant &v = variants()[name];
    v.name = name;
    v.before = load_file(path);
    node *x = v.before->parameters().at(0);
    v.tokens = tokens ? tokens : x->attr.shape.at(2);
    x->attr.shape.at(2) = v.tokens;
    v.before->infer();
    v.after = v.before->clone();
    run_passes(*v.after);
    v.folded = std::make_unique<compiled_graph>(*v.before);
    v.unfolded = std::make_unique<compiled_graph>(*v.before, compile_options{0, false});
    v.rewritten = std::make_unique<compiled_graph>(*v.after);
    compile_options dq;
    dq.dynamic_quantization = true;
    v.rewritten_dq = std::make_unique<compiled_graph>(*v.after, dq);
    v.inputs = random_inputs(*v.before, 1);
    for (const auto &[id, impl] : v.folded->impls())
        if (v.before->find(id)->kind == op::Convolution) {
            v.impls = "before: " + impl;
            break;
        }
    for (const auto &[id, impl] : v.rewritten->impls())
        if (v.after->find(id)->kind == op::MatMul) v.impls += "; after: " + impl;
    for (const auto &[id, impl] : v.rewritten_dq->impls())
        if (v.after->find(id)->kind == op::MatMul) v.impls += "; after_dq: " + impl;
}

enum class which { folded, unfolded, rewritten, rewritten_dq };

double fma_peak_gflops = 0; // one thread; 0: not measured
int threads = 1;            // the graph runs with

void BM_graph(benchmark::State &state, std::string name, which w) {
    variant &v = variants()[name];
    const compiled_graph &cg = w == which::folded      ? *v.folded
                               : w == which::unfolded  ? *v.unfolded
                               : w == which::rewritten ? *v.rewritten
                                                       : *v.rewritten_dq;
    for (auto _ : state) {
        auto y = cg.run(v.inputs);
        benchmark::DoNotOptimize(y.data());
    }
    const double flops = 2.0 * v.tokens * 1024 * 4096 * 2;
    state.counters["GFLOPS"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
    if (fma_peak_gflops > 0)
        state.counters["pct_peak"] = benchmark::Counter(100.0 * flops * 1e-9 / (fma_peak_gflops * threads),
                                                        benchmark::Counter::kIsIterationInvariantRate);
    state.SetLabel(w == which::rewritten      ? "compressed matmul"
                   : w == which::rewritten_dq ? "compressed matmul, dynamic quantization"
                                              : "f32 conv");
}

// Forwards to the display reporter --benchmark_format chose and remembers each
// benchmark's real time per iteration (ms; every benchmark is in ms).
class recorder : public benchmark::BenchmarkReporter {
public:
    std::map<std::string, double> ms;
    bool ReportContext(const Context &c) override { return display_->ReportContext(c); }
    void Finalize() override { display_->Finalize(); }
    void ReportRuns(const std::vector<Run> &runs) override {
        for (const auto &r : runs)
            if (r.run_type == Run::RT_Iteration && r.iterations > 0)
                ms[r.run_name.function_name] = r.GetAdjustedRealTime();
        display_->ReportRuns(runs);
    }

private:
    BenchmarkReporter *display_ = benchmark::CreateDefaultDisplayReporter();
};

double max_rel_diff(const std::vector<tensor> &ref, const std::vector<tensor> &got) {
    double max_abs = 0, max_ref = 0;
    for (size_t r = 0; r < ref.size(); ++r) {
        const std::vector<double> a = ref[r].values(), b = got[r].values();
        for (size_t i = 0; i < a.size(); ++i) {
            max_abs = std::max(max_abs, std::fabs(b[i] - a[i]));
            max_ref = std::max(max_ref, std::fabs(a[i]));
        }
    }
    return max_ref > 0 ? max_abs / max_ref : 0;
}

// ----------------------------------------------------------- f32 peak
// 12 independent accumulators: enough to cover the FMA latency on two ports.
class fma_peak_loop : public qconv::jit::jit_generator {
public:
    explicit fma_peak_loop(bool zmm) : zmm_(zmm) {}
    const char *name() const override { return zmm_ ? "bench:fma_peak_zmm" : "bench:fma_peak_ymm"; }

protected:
    void generate() override {
        Xbyak::Label loop;
        for (int i = 0; i < 14; ++i) vxorps(Xbyak::Ymm(i), Xbyak::Ymm(i), Xbyak::Ymm(i));
        L(loop);
        for (int i = 0; i < 12; ++i) {
            if (zmm_) vfmadd231ps(Xbyak::Zmm(i), Xbyak::Zmm(12), Xbyak::Zmm(13));
            else vfmadd231ps(Xbyak::Ymm(i), Xbyak::Ymm(12), Xbyak::Ymm(13));
        }
        dec(rdi);
        jnz(loop, T_NEAR);
        vzeroupper();
        ret();
    }

private:
    bool zmm_;
};

// GFLOPS of one thread at the f32 FMA peak (best of 5), 0 below AVX2.
double measure_fma_peak_gflops() {
    const qconv::isa level = qconv::max_cpu_isa();
    if (level < qconv::isa::avx2) return 0.0;
    const bool zmm = level >= qconv::isa::avx512_core;
    fma_peak_loop g(zmm);
    g.create();
    auto fn = g.entry<void (*)(int64_t)>();
    const int64_t iters = 4000000;
    double best = 0.0;
    for (int rep = 0; rep < 5; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        fn(iters);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::max(best, iters * 12.0 * (zmm ? 16 : 8) * 2 / s * 1e-9);
    }
    return best;
}

// Threads the graph runs with: OpenMP's default, OMP_NUM_THREADS or one per CPU.
int run_threads() {
    const char *env = std::getenv("OMP_NUM_THREADS");
    const int n = env ? std::atoi(env) : 0;
    return n > 0 ? n : std::max(1u, std::thread::hardware_concurrency());
}

} // namespace

int main(int argc, char **argv) {
    std::string path = std::string(QCONV_SOURCE_DIR) + "/examples/ffn_u4.qg";
    std::vector<char *> args;
    for (int i = 0; i < argc; ++i) {
        if (std::strncmp(argv[i], "--graph=", 8) == 0) path = argv[i] + 8;
        else args.push_back(argv[i]);
    }
    int n = static_cast<int>(args.size());
    benchmark::Initialize(&n, args.data());
    setup(path, "ffn_u4", 0);
    setup(path, "ffn_u4_1token", 1);

    for (const char *name : {"ffn_u4", "ffn_u4_1token"}) {
        const std::string s = name;
        benchmark::RegisterBenchmark((s + "/before").c_str(), BM_graph, s, which::folded)
            ->Unit(benchmark::kMillisecond)
            ->MinTime(1.0)
            ->UseRealTime();
        benchmark::RegisterBenchmark((s + "/before_unfolded").c_str(), BM_graph, s, which::unfolded)
            ->Unit(benchmark::kMillisecond)
            ->MinTime(1.0)
            ->UseRealTime();
        benchmark::RegisterBenchmark((s + "/after").c_str(), BM_graph, s, which::rewritten)
            ->Unit(benchmark::kMillisecond)
            ->MinTime(1.0)
            ->UseRealTime();
        benchmark::RegisterBenchmark((s + "/after_dq").c_str(), BM_graph, s, which::rewritten_dq)
            ->Unit(benchmark::kMillisecond)
            ->MinTime(1.0)
            ->UseRealTime();
    }
    const double peak = fma_peak_gflops = measure_fma_peak_gflops();
    threads = run_threads();
    std::printf("f32 FMA peak: %.1f GFLOPS per thread\n", peak);
    recorder rep;
    benchmark::RunSpecifiedBenchmarks(&rep);

    for (auto &[name, v] : variants()) {
        const auto yb = v.folded->run(v.inputs), yu = v.unfolded->run(v.inputs), ya = v.rewritten->run(v.inputs);
        const auto yq = v.rewritten_dq->run(v.inputs);
        const double rel = std::max(max_rel_diff(yb, ya), max_rel_diff(yu, ya));
        const double rel_dq = max_rel_diff(yb, yq);
        auto t = [&](const char *k) {
            auto it = rep.ms.find(name + "/" + k);
            return it == rep.ms.end() ? 0.0 : it->second;
        };
        const double b = t("before"), u = t("before_unfolded"), a = t("after"), q = t("after_dq");
        const double r = a > 0 ? b / a : 0, ru = a > 0 ? u / a : 0, rq = q > 0 ? b / q : 0;
        // The FFN's multiply-adds at the f32 FMA peak of all threads.
        const double gflop = 2.0 * v.tokens * 1024 * 4096 * 2 * 1e-9;
        const double peak_ms = peak > 0 ? gflop / (peak * threads) * 1e3 : 0;
        std::printf("summary graph=%s tokens=%lld threads=%d before_ms=%.3f before_unfolded_ms=%.3f after_ms=%.3f "
                    "after_dq_ms=%.3f speedup=%.2f speedup_unfolded=%.2f speedup_dq=%.2f fma_peak_gflops=%.1f "
                    "f32_bound_speedup=%.2f max_rel_diff=%.3g "
                    "max_rel_diff_dq=%.3g speed_target_3x=%s accuracy_target=%s impl=\"%s\"\n",
                    name.c_str(), static_cast<long long>(v.tokens), threads, b, u, a, q, r, ru, rq, peak * threads,
                    peak_ms > 0 ? b / peak_ms : 0.0, rel, rel_dq,
                    r >= 3.0    ? "met"
                    : ru >= 3.0 ? "met_vs_unfolded_only"
                                : "missed",
                    rel <= 1e-4 ? "met" : "missed", v.impls.c_str());
    }
    benchmark::Shutdown();
    return 0;
}
