// Dispatch benchmark: is `auto` the fastest exact row?
//
//   bench_dispatch [--lists=resnet_50,...] [--cases=relu,...] [--threads=1,2]
//                  [--budget-ms=N] [--verbose]
//
// For every problem of the shape lists (mb1), every case and thread count,
// `auto` and every row of the conv table that accepts the problem (peers such
// as `onednn:any` included, `ref:conv` left out) are created on the same data
// and timed in interleaved rounds — one execution of each per round, the
// per-row minimum kept — so all rows see the same machine state. A row counts
// as exact when its output equals auto's byte for byte and it does not report
// itself inexact (qconv::convolution::exact()). Per problem the line gives
// auto's row and time, the fastest exact row and its time, and
// ratio = best / auto (1.0: auto is the fastest; below: auto is slower).
// Each (list, case, threads) block ends with the total ratio (layers weighted
// by their `*N` counts) and its worst problem; the run ends with the five
// worst problems overall.
//
// Cases: relu (no zero point, ReLU), zp_tensor (per-tensor zp, ReLU),
// zp_channel_fq (per-channel zp, per-channel FakeQuantize), fq (no zp,
// per-channel FakeQuantize); u8 source, s8 weights, u8 destination, per-OC
// scales and bias.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "qconv/qconv.h"
#include "rows/row.h"
#include "tests/support/testdata.h"

namespace {

struct options {
    std::vector<std::string> lists = {"resnet_50",    "resnet_50_v1_5", "mobilenet",
                                      "mobilenet_dw", "ssd_mobilenet",  "1x1"};
    std::vector<std::string> cases = {"relu", "zp_tensor", "zp_channel_fq", "fq"};
    std::vector<int> threads = {1, 2};
    double budget_ms = 40;
    bool verbose = false;
} opt;

std::vector<std::string> split(const std::string &s, char sep) {
    std::vector<std::string> r;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, sep);)
        if (!item.empty()) r.push_back(item);
    return r;
}

struct layer {
    std::string name;
    qconv::conv_desc desc;
    int repeats = 1;
};

// bench/shapes/shapes_<list> at mb1; "*N" in a name is a repeat count.
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

qconv::conv_problem make_problem(const qconv::conv_desc &d, const std::string &c) {
    using namespace qconv;
    conv_problem p;
    p.desc = d;
    p.scales = testdata::make_scales(d.oc, false, 1);
    p.with_bias = true;
    const bool zp_tensor = c == "zp_tensor", zp_channel = c == "zp_channel_fq";
    if (c != "relu" && !zp_tensor && !zp_channel && c != "fq") fail("cases", "unknown case '" + c + "'");
    if (zp_tensor) p.src_zp = zero_point::tensor(3);
    if (zp_channel) p.src_zp = testdata::make_zp("channel:random", d.ic, p.src_dt, testdata::data_kind::random, 1);
    p.ops = testdata::make_post_ops(c == "relu" || zp_tensor ? "relu" : "fq:per_channel", d.oc, 1);
    return p;
}

double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct candidate {
    std::string requested, name; // "auto" or the row; the row that runs
    std::unique_ptr<qconv::convolution> conv;
    std::vector<uint8_t> dst;
    bool exact = true;
    double best_ms = 1e30;
};

struct outcome {
    std::string list, bench_case, layer, auto_row, best_row;
    int threads = 1, repeats = 1;
    double auto_ms = 0, best_ms = 0;
    double ratio() const { return best_ms / auto_ms; }
};

// Times auto and every accepting row on one problem (interleaved rounds).
outcome run_problem(const qconv::conv_problem &p, int threads) {
    using namespace qconv;
    const auto kind = testdata::data_kind::random;
    const auto wei = testdata::make_weights(p.desc, kind, 1);
    const auto bias = testdata::make_bias(p.desc, 1);
    const auto src = testdata::make_src(p, kind, 1);
    const size_t dst_bytes = testdata::bytes_of(p.dst_dt, p.desc.dst_elems());
    exec_args args;
    args.threads = threads;

    std::vector<candidate> cands;
    std::vector<std::string> names = {"auto"};
    for (const auto &e : impl::conv_list())
        if (e.family != qconv::impl::row_family::ref) names.push_back(e.name);
    for (const auto &n : names) {
        conv_hints h;
        h.impl = n;
        candidate c;
        c.requested = n;
        try {
            c.conv = std::make_unique<convolution>(p, wei.data(), bias.data(), h);
        } catch (const error &) {
            continue; // the row does not take the problem
        }
        c.name = c.conv->impl_name();
        // The row auto picked is measured once, as auto: a second copy of the
        // same kernel would only add the minimum of more noisy samples.
        if (n != "auto" && !cands.empty() && c.name == cands.front().name) continue;
        c.exact = c.conv->exact();
        c.dst.assign(dst_bytes, 0);
        c.conv->execute(src.data(), c.dst.data(), args); // warm-up and the output compared below
        cands.push_back(std::move(c));
    }
    for (auto &c : cands)
        if (c.dst != cands.front().dst) c.exact = false;

    const double start = now_ms();
    // Each round starts at another candidate: on sub-microsecond problems the
    // position in the round (what ran just before) shows in the time. After
    // the first round a candidate 3x slower than the fastest so far stops: it
    // cannot be the best, and a row that takes milliseconds (a dense kernel on
    // a depthwise layer) would evict the others' data between their samples.
    const size_t nc = cands.size();
    std::vector<bool> active(nc, true);
    for (int round = 0; round < 50 && (round < 3 || now_ms() - start < opt.budget_ms); ++round) {
        for (size_t k = 0; k < nc; ++k) {
            const size_t i = (k + static_cast<size_t>(round)) % nc;
            if (!active[i]) continue;
            candidate &c = cands[i];
            const double t0 = now_ms();
            c.conv->execute(src.data(), c.dst.data(), args);
            c.best_ms = std::min(c.best_ms, now_ms() - t0);
        }
        double fastest = 1e30;
        for (const auto &c : cands) fastest = std::min(fastest, c.best_ms);
        for (size_t i = 1; i < nc; ++i) active[i] = active[i] && cands[i].best_ms <= 3 * fastest;
    }

    outcome o;
    o.threads = threads;
    o.auto_row = cands.front().name;
    o.auto_ms = cands.front().best_ms;
    o.best_row = o.auto_row;
    o.best_ms = o.auto_ms;
    for (size_t i = 1; i < cands.size(); ++i) {
        const candidate &c = cands[i];
        if (opt.verbose)
            std::printf("    %-40s %8.4f ms%s\n", c.name.c_str(), c.best_ms, c.exact ? "" : "  (inexact: not counted)");
        if (c.exact && c.best_ms < o.best_ms) {
            o.best_ms = c.best_ms;
            o.best_row = c.name;
        }
    }
    return o;
}

} // namespace

int main(int argc, char **argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a.rfind("--lists=", 0) == 0) opt.lists = split(a.substr(8), ',');
        else if (a.rfind("--cases=", 0) == 0) opt.cases = split(a.substr(8), ',');
        else if (a.rfind("--threads=", 0) == 0) {
            opt.threads.clear();
            for (const auto &t : split(a.substr(10), ',')) opt.threads.push_back(std::max(1, std::atoi(t.c_str())));
        } else if (a.rfind("--budget-ms=", 0) == 0) opt.budget_ms = std::atof(a.c_str() + 12);
        else if (a == "--verbose") opt.verbose = true;
        else {
            std::fprintf(stderr, "bench_dispatch: unknown argument '%s' (see the comment at the top of the source)\n",
                         a.c_str());
            return 2;
        }
    }
    std::printf("bench_dispatch: ISA %s; ratio = fastest exact row / auto (1.000: auto is the fastest)\n",
                qconv::to_string(qconv::max_cpu_isa()));
    std::vector<outcome> all;
    for (const auto &list : opt.lists) {
        const std::vector<layer> layers = read_shapes(list);
        for (const auto &c : opt.cases)
            for (int t : opt.threads) {
                std::printf("\n== %s, case %s, %d thread(s)\n", list.c_str(), c.c_str(), t);
                double auto_total = 0, best_total = 0;
                const outcome *worst = nullptr;
                const size_t first = all.size();
                for (const layer &l : layers) {
                    outcome o = run_problem(make_problem(l.desc, c), t);
                    o.list = list, o.bench_case = c, o.layer = l.name, o.repeats = l.repeats;
                    std::printf("  %-22s auto %-40s %8.4f ms  best %-40s %8.4f ms  ratio %.3f\n", l.name.c_str(),
                                o.auto_row.c_str(), o.auto_ms, o.best_row.c_str(), o.best_ms, o.ratio());
                    std::fflush(stdout);
                    auto_total += o.auto_ms * l.repeats;
                    best_total += o.best_ms * l.repeats;
                    all.push_back(o);
                }
                for (size_t i = first; i < all.size(); ++i)
                    if (!worst || all[i].ratio() < worst->ratio()) worst = &all[i];
                if (worst)
                    std::printf("  total: auto %.3f ms, best %.3f ms, ratio %.3f; worst %s %.3f (%s vs auto %s)\n",
                                auto_total, best_total, best_total / auto_total, worst->layer.c_str(), worst->ratio(),
                                worst->best_row.c_str(), worst->auto_row.c_str());
            }
    }
    std::sort(all.begin(), all.end(), [](const outcome &a, const outcome &b) { return a.ratio() < b.ratio(); });
    std::printf("\n== worst problems\n");
    for (size_t i = 0; i < std::min<size_t>(5, all.size()); ++i) {
        const outcome &o = all[i];
        std::printf("  %.3f  %s %s %s t%d: auto %s %.4f ms, best %s %.4f ms\n", o.ratio(), o.list.c_str(),
                    o.bench_case.c_str(), o.layer.c_str(), o.threads, o.auto_row.c_str(), o.auto_ms, o.best_row.c_str(),
                    o.best_ms);
    }
    return 0;
}
