// Convolution benchmark: every implementation of the conv table that supports
// a problem, on the ResNet-50 (mb1) and MobileNet shape lists, side by side.
//
//   bench_conv [--case=relu|zp_tensor|zp_channel|fq] [--threads=N] [--shapes=resnet_50,mobilenet]
//              [--impl=SUBSTRING,...] [google benchmark flags]
//
// Problem: u8 source, s8 weights, u8 destination, per-OC scales, bias, and
// the case's zero point / post-ops (default: no zp, ReLU). Benchmark names
// are "<impl>/<layer>"; counters (Google Benchmark rates, so they follow its
// time): GOPS, pct_peak, where the peak is the single-thread vpdpbusd (zmm)
// throughput measured by a JIT loop this binary runs itself (× threads), and
// repeats. With --threads=1 (default) the time is Google Benchmark's CPU time
// of the benchmark thread (the OpenMP region runs on it), so that other
// processes on a shared machine distort it less; with more threads, wall
// time. Per-layer results are Google Benchmark's own output
// (--benchmark_format=json, --benchmark_out=FILE; bench/plot.sh plots the
// JSON). The one thing it cannot give is a comparison across benchmarks, so a
// small reporter wrapped around its display reporter prints at exit, per shape
// list, each implementation's total time (layers weighted by their repeat
// count "*N") and its ratio to every other implementation over the layers both
// ran.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <time.h>

#include "dispatch/host_platform.h"
#include "kernels/jit/base/jit_base.h"
#include "qconv/qconv.h"
#include "rows/row.h"
#include "tests/support/testdata.h"

namespace {

struct options {
    std::string bench_case = "relu";
    int threads = 1;
    std::vector<std::string> shape_sets = {"resnet_50", "mobilenet"};
    std::vector<std::string> impl_filter; // substrings; empty: all
} opt;

struct layer {
    std::string set, name;
    qconv::conv_desc desc;
    int repeats = 1;
};

std::vector<std::string> split(const std::string &s, char sep) {
    std::vector<std::string> r;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, sep))
        if (!item.empty()) r.push_back(item);
    return r;
}

// Reads bench/shapes/shapes_<set>, forcing mb1; "*N" in a name is a repeat count.
std::vector<layer> read_shapes(const std::string &set) {
    std::vector<layer> r;
    std::ifstream in(std::string(QCONV_SOURCE_DIR) + "/bench/shapes/shapes_" + set);
    std::string line;
    while (std::getline(in, line)) {
        line = line.substr(0, line.find('#'));
        line.erase(std::remove_if(line.begin(), line.end(), ::isspace), line.end());
        if (line.empty()) continue;
        layer l;
        l.set = set;
        l.desc = qconv::conv_desc::parse(line);
        l.desc.mb = 1;
        std::string n = l.desc.name;
        const auto star = n.find('*');
        if (star != std::string::npos) {
            l.repeats = std::max(1, std::atoi(n.c_str() + star + 1));
            n = n.substr(0, star);
        }
        l.name = n;
        r.push_back(l);
    }
    return r;
}

qconv::conv_problem make_problem(const qconv::conv_desc &d) {
    qconv::conv_problem p;
    p.desc = d;
    p.src_dt = qconv::dtype::u8;
    p.dst_dt = qconv::dtype::u8;
    p.scales = qconv::testdata::make_scales(d.oc, false, 1);
    p.with_bias = true;
    if (opt.bench_case == "relu") {
        p.ops = qconv::parse_post_ops("relu", d.oc);
    } else if (opt.bench_case == "zp_tensor") {
        p.src_zp = qconv::zero_point::tensor(3);
        p.ops = qconv::parse_post_ops("relu", d.oc);
    } else if (opt.bench_case == "zp_channel") {
        p.src_zp = qconv::testdata::make_zp("channel:random", d.ic, p.src_dt, qconv::testdata::data_kind::random, 1);
        p.ops = qconv::parse_post_ops("relu", d.oc);
    } else if (opt.bench_case == "fq") {
        p.ops = qconv::testdata::make_post_ops("fq:per_channel", d.oc, 1);
    } else {
        qconv::fail("case", "unknown benchmark case '" + opt.bench_case + "'");
    }
    return p;
}

// Seconds of this thread's CPU time with one thread (robust against other
// processes on a shared machine; the OpenMP region runs on the calling
// thread), wall time otherwise.
double now_s() {
    if (opt.threads == 1) {
        timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return ts.tv_sec + ts.tv_nsec * 1e-9;
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ----------------------------------------------------------------- peak
class peak_loop : public qconv::jit::jit_generator {
public:
    const char *name() const override { return "bench:vpdpbusd_peak"; }

protected:
    void generate() override {
        Xbyak::Label l;
        for (int i = 0; i < 24; ++i) vpxord(Xbyak::Zmm(i), Xbyak::Zmm(i), Xbyak::Zmm(i));
        vpxord(zmm30, zmm30, zmm30);
        vpxord(zmm31, zmm31, zmm31);
        L(l);
        for (int i = 0; i < 24; ++i) vpdpbusd(Xbyak::Zmm(i), zmm30, zmm31);
        dec(rdi);
        jnz(l, T_NEAR);
        vzeroupper();
        ret();
    }
};

// Single-thread GOPS of back-to-back independent vpdpbusd zmm (2 ops per MAC).
double measure_peak_gops() {
    if (qconv::max_cpu_isa() < qconv::isa::avx512_core_vnni) return 0.0;
    peak_loop g;
    g.create();
    auto fn = g.entry<void (*)(int64_t)>();
    const int64_t iters = 2000000;
    double best = 0.0;
    for (int rep = 0; rep < 5; ++rep) {
        const double t0 = now_s();
        fn(iters);
        const double s = now_s() - t0;
        best = std::max(best, iters * 24.0 * 64 * 2 / s * 1e-9);
    }
    return best;
}
double peak_gops = 0.0;

void bench_one(benchmark::State &state, const std::string &impl, const layer &l) {
    const qconv::conv_problem p = make_problem(l.desc);
    const auto kind = qconv::testdata::data_kind::random;
    const auto wei = qconv::testdata::make_weights(p.desc, kind, 1);
    const auto bias = qconv::testdata::make_bias(p.desc, 1);
    const auto src = qconv::testdata::make_src(p, kind, 1);
    std::vector<uint8_t> dst(qconv::testdata::bytes_of(p.dst_dt, p.desc.dst_elems()));
    qconv::conv_hints h;
    h.impl = impl;
    std::unique_ptr<qconv::convolution> conv;
    try {
        conv = std::make_unique<qconv::convolution>(p, wei.data(), bias.data(), h);
    } catch (const std::exception &e) {
        state.SkipWithError(e.what());
        return;
    }
    qconv::exec_args args;
    args.threads = opt.threads;
    conv->execute(src.data(), dst.data(), args); // warm-up
    for (auto _ : state) {
        conv->execute(src.data(), dst.data(), args);
        benchmark::ClobberMemory();
    }
    const double gop = p.desc.ops() * 1e-9;
    state.counters["GOPS"] = benchmark::Counter(gop, benchmark::Counter::kIsIterationInvariantRate);
    if (peak_gops > 0)
        state.counters["pct_peak"] =
            benchmark::Counter(100.0 * gop / (peak_gops * opt.threads), benchmark::Counter::kIsIterationInvariantRate);
    state.counters["repeats"] = l.repeats;
    state.SetLabel(conv->impl_name() + " attr[" + std::to_string(conv->attr_id()) + "]");
}

// Whether impl supports p on this machine (dispatcher check, no creation).
bool impl_supports(const qconv::impl::conv_entry &e, const qconv::conv_problem &p) {
    const auto plat = qconv::impl::host_platform();
    qconv::conv_hints h;
    h.impl = e.name;
    try {
        // Creating the primitive is the authoritative check (attr sets included).
        const auto wei = std::vector<int8_t>(static_cast<size_t>(p.desc.wei_elems()), 1);
        const auto bias = std::vector<float>(static_cast<size_t>(p.desc.oc), 0.f);
        qconv::convolution c(p, wei.data(), bias.data(), h);
        return true;
    } catch (const std::exception &) {
        return false;
    }
    (void)plat;
}

// ----------------------------------------------------------------- summary
std::map<std::string, std::string> set_of; // benchmark name → shape list

// Forwards to the display reporter --benchmark_format chose and keeps, per
// shape list and implementation, each layer's time × repeats (ms).
class summary_reporter : public benchmark::BenchmarkReporter {
public:
    std::map<std::string, std::map<std::string, std::map<std::string, double>>> ms; // set → impl → layer

    bool ReportContext(const Context &c) override { return display_->ReportContext(c); }
    void Finalize() override { display_->Finalize(); }
    void ReportRuns(const std::vector<Run> &runs) override {
        for (const auto &r : runs) {
            const std::string name = r.run_name.function_name;
            if (r.run_type != Run::RT_Iteration || r.error_occurred || !set_of.count(name)) continue;
            const double t = opt.threads == 1 ? r.GetAdjustedCPUTime() : r.GetAdjustedRealTime(); // ms
            const auto slash = name.find('/');
            ms[set_of[name]][name.substr(0, slash)][name.substr(slash + 1)] = t * r.counters.at("repeats");
        }
        display_->ReportRuns(runs);
    }

private:
    BenchmarkReporter *display_ = benchmark::CreateDefaultDisplayReporter();
};

// Per shape list: each implementation's total, and its speed-up against every
// other one over the layers both ran (time(other) / time(impl)).
void print_summary(const summary_reporter &rep) {
    for (const std::string &set : opt.shape_sets) {
        if (!rep.ms.count(set)) continue;
        const auto &impls = rep.ms.at(set);
        std::printf("\n== %s mb1, case %s, %d thread(s): total ms (layers × repeats)\n", set.c_str(),
                    opt.bench_case.c_str(), opt.threads);
        for (const auto &[impl, layers] : impls) {
            double t = 0;
            for (const auto &kv : layers) t += kv.second;
            std::printf("  %-40s %9.3f ms  (%zu layers)\n", impl.c_str(), t, layers.size());
        }
        for (const auto &[a, la] : impls)
            for (const auto &[b, lb] : impls) {
                double sa = 0, sb = 0;
                for (const auto &[n, t] : la)
                    if (a != b && lb.count(n)) sa += t, sb += lb.at(n);
                if (sa > 0 && sb > 0)
                    std::printf("  speed-up %s vs %s (common layers): %.3fx\n", a.c_str(), b.c_str(), sb / sa);
            }
    }
}

} // namespace

int main(int argc, char **argv) {
    std::vector<char *> rest;
    for (int i = 0; i < argc; ++i) {
        const std::string a = argv[i];
        if (a.rfind("--case=", 0) == 0) opt.bench_case = a.substr(7);
        else if (a.rfind("--threads=", 0) == 0) opt.threads = std::atoi(a.c_str() + 10);
        else if (a.rfind("--shapes=", 0) == 0) opt.shape_sets = split(a.substr(9), ',');
        else if (a.rfind("--impl=", 0) == 0) opt.impl_filter = split(a.substr(7), ',');
        else rest.push_back(argv[i]);
    }
    int rargc = static_cast<int>(rest.size());
    peak_gops = measure_peak_gops();
    std::printf("vpdpbusd zmm peak: %.1f GOPS per thread\n", peak_gops);

    for (const std::string &set : opt.shape_sets)
        for (const layer &l : read_shapes(set)) {
            const qconv::conv_problem p = make_problem(l.desc);
            for (const auto &e : qconv::impl::conv_list()) {
                if (e.name.rfind("ref:", 0) == 0) continue; // far too slow to be a peer here
                if (!opt.impl_filter.empty() &&
                    std::none_of(opt.impl_filter.begin(), opt.impl_filter.end(),
                                 [&](const std::string &f) { return e.name.find(f) != std::string::npos; }))
                    continue;
                if (!impl_supports(e, p)) continue;
                const std::string impl = e.name, name = impl + "/" + l.name;
                set_of[name] = set;
                auto *b = benchmark::RegisterBenchmark(name.c_str(),
                                                       [impl, l](benchmark::State &s) { bench_one(s, impl, l); });
                b->Unit(benchmark::kMillisecond);
                if (opt.threads != 1) b->UseRealTime();
            }
        }
    benchmark::Initialize(&rargc, rest.data());
    summary_reporter rep;
    benchmark::RunSpecifiedBenchmarks(&rep);
    benchmark::Shutdown();
    print_summary(rep);
    return 0;
}
