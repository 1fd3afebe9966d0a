// The embedded example (examples/ffn_u4.qg: a transformer FFN block exported
// as Transpose → conv1x1 (u4, group 128, zp) + bias → Gelu → conv1x1 + bias →
// Transpose, 1024 → 4096 → 1024, 32 tokens) run as written and after the
// conv1x1 → MatMul rewrite, in one binary and one run. After the benchmarks a
// summary line gives both median times, the ratio (target ≥ 3× faster after)
// and the relative difference of the outputs (target ≤ 1e-4, as
// max|after − before| / max|before|).
//
//   bench_graph [--graph=FILE] [google benchmark flags]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "qconv/graph.h"

namespace {

using namespace qconv::graph;

struct fixture {
    std::unique_ptr<graph> before, after;
    std::unique_ptr<compiled_graph> cb, ca;
    std::vector<tensor> inputs;
    std::string impl_after;
};

fixture &fx() {
    static fixture f;
    return f;
}

void setup(const std::string &path) {
    fixture &f = fx();
    f.before = load_file(path);
    f.after = f.before->clone();
    run_passes(*f.after);
    f.cb = std::make_unique<compiled_graph>(*f.before);
    f.ca = std::make_unique<compiled_graph>(*f.after);
    f.inputs = random_inputs(*f.before, 1);
    for (const auto &[id, impl] : f.ca->impls())
        if (f.after->find(id)->kind == op::MatMul) f.impl_after += (f.impl_after.empty() ? "" : "; ") + impl;
    for (const auto &[id, impl] : f.cb->impls())
        if (f.before->find(id)->kind == op::Convolution) {
            f.impl_after += " | before: " + impl;
            break;
        }
}

void BM_graph(benchmark::State &state, bool rewritten) {
    fixture &f = fx();
    const compiled_graph &cg = rewritten ? *f.ca : *f.cb;
    for (auto _ : state) {
        auto y = cg.run(f.inputs);
        benchmark::DoNotOptimize(y.data());
    }
    const double flops = 2.0 * 32 * 1024 * 4096 * 2;
    state.counters["GFLOPS"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
    state.SetLabel(rewritten ? "matmul" : "conv");
}

// Remembers each benchmark's real time per iteration (ms).
class recorder : public benchmark::ConsoleReporter {
public:
    std::map<std::string, double> ms;
    void ReportRuns(const std::vector<Run> &runs) override {
        for (const auto &r : runs)
            if (r.run_type == Run::RT_Iteration && r.iterations > 0)
                ms[r.run_name.function_name] = r.GetAdjustedRealTime() *
                                         (r.time_unit == benchmark::kMillisecond ? 1.0 : r.time_unit == benchmark::kMicrosecond ? 1e-3 : 1e-6);
        ConsoleReporter::ReportRuns(runs);
    }
};

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
    setup(path);

    benchmark::RegisterBenchmark("ffn_u4/before", BM_graph, false)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();
    benchmark::RegisterBenchmark("ffn_u4/after", BM_graph, true)->Unit(benchmark::kMillisecond)->MinTime(1.0)->UseRealTime();
    recorder rep;
    benchmark::RunSpecifiedBenchmarks(&rep);

    // Output agreement on the same inputs.
    fixture &f = fx();
    const auto yb = f.cb->run(f.inputs), ya = f.ca->run(f.inputs);
    double max_abs = 0, max_ref = 0;
    for (size_t r = 0; r < yb.size(); ++r)
        for (size_t i = 0; i < yb[r].data.size(); ++i) {
            max_abs = std::max(max_abs, std::fabs(double(ya[r].data[i]) - yb[r].data[i]));
            max_ref = std::max(max_ref, std::fabs(double(yb[r].data[i])));
        }
    const double rel = max_ref > 0 ? max_abs / max_ref : 0;
    const double b = rep.ms.count("ffn_u4/before") ? rep.ms["ffn_u4/before"] : 0;
    const double a = rep.ms.count("ffn_u4/after") ? rep.ms["ffn_u4/after"] : 0;
    const double ratio = a > 0 ? b / a : 0;
    std::printf("summary graph=ffn_u4 before_ms=%.3f after_ms=%.3f speedup=%.2f max_rel_diff=%.3g "
                "speed_target=%s accuracy_target=%s impl=\"%s\"\n",
                b, a, ratio, rel, ratio >= 3.0 ? "met" : "missed", rel <= 1e-4 ? "met" : "missed",
                f.impl_after.c_str());
    benchmark::Shutdown();
    return 0;
}
