// Fuzzes the graph text loader, then the passes and the executor on what
// loads: parse → (clone) run_passes → compiled_graph → run on random inputs,
// for the graph as loaded and as rewritten; the rewritten graph's text must
// load again.
//
// Property: only qconv::error escapes, never a crash, a leak or a hang.
// Sizes are bounded before anything is allocated or executed (this fuzzer
// looks for logic errors, not for the cost of big tensors): at most 64 lines,
// every bracketed list's product at most 2^16, every inferred tensor at most
// 2^16 elements and every Convolution/MatMul at most 2^24 multiply-adds (a pooling: output × window).
// Unbounded sizes are covered by tests/test_hostile_input.cpp.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "qconv/graph.h"

namespace g = qconv::graph;

namespace {

constexpr int64_t max_elems = int64_t(1) << 16;
constexpr int64_t max_macs = int64_t(1) << 24;

// Rejects texts whose bracketed integer lists could describe a big tensor.
bool small_text(const std::string &s) {
    int lines = 0;
    for (char c : s) lines += c == '\n';
    if (lines > 64) return false;
    double product = 1, cur = 0;
    bool in_list = false, in_num = false;
    for (char c : s) {
        if (c == '[') {
            in_list = true;
            product = 1;
            continue;
        }
        if (!in_list) continue;
        if (c >= '0' && c <= '9') {
            cur = cur * 10 + (c - '0');
            in_num = true;
            if (cur > max_elems) return false;
            continue;
        }
        if (in_num) {
            product *= cur;
            cur = 0;
            in_num = false;
        }
        if (product > max_elems) return false;
        if (c == ']') in_list = false;
    }
    return true;
}

bool small_graph(const g::graph &gr) {
    for (const auto &n : gr.nodes()) {
        const int64_t e = g::elems_of(n->out_shape);
        if (e < 0 || e > max_elems) return false;
        if ((n->kind == g::op::Convolution || n->kind == g::op::GroupConvolution || n->kind == g::op::MatMul) &&
            n->inputs.size() == 2) {
            const double macs = double(e) * double(g::elems_of(n->inputs[1]->out_shape));
            if (macs > double(max_macs)) return false;
        }
        if ((n->kind == g::op::MaxPool || n->kind == g::op::AvgPool) && n->attr.kernel.size() == 2 &&
            double(e) * double(n->attr.kernel[0]) * double(n->attr.kernel[1]) > double(max_macs))
            return false;
    }
    return true;
}

void run(const g::graph &gr) {
    try {
        g::compiled_graph cg(gr, 1);
        (void)cg.impls();
        (void)cg.run(g::random_inputs(gr, 3));
    } catch (const qconv::error &) {
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 8192) return 0;
    const std::string text(reinterpret_cast<const char *>(data), size);
    if (!small_text(text)) return 0;
    std::unique_ptr<g::graph> gr;
    try {
        gr = g::parse(text);
    } catch (const qconv::error &) {
        return 0;
    }
    if (!small_graph(*gr)) return 0;
    (void)g::to_text(*gr);
    run(*gr);

    std::unique_ptr<g::graph> rw = gr->clone();
    try {
        (void)g::run_passes(*rw);
    } catch (const qconv::error &) {
        return 0;
    }
    if (!small_graph(*rw)) return 0;
    const std::string again = g::to_text(*rw);
    try {
        (void)g::parse(again);
    } catch (const qconv::error &e) {
        std::fprintf(stderr, "fuzz_graph: the rewritten graph's text does not load: %s\n%s\n", e.what(), again.c_str());
        std::abort();
    }
    run(*rw);
    return 0;
}
