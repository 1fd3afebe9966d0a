// Fuzzes the ONNX reader (graph/io/onnx_reader.cpp): parse_onnx on the bytes
// (no folder, so external data is refused without touching the file system);
// on what loads, the imported graph's text must load again, and a small graph
// is compiled and run on random inputs, as written and after the passes.
//
// Property: only qconv::error escapes, never a crash, a leak or a hang. The
// reader allocates in proportion to the bytes it is given (every tensor's
// size is checked against its data before anything is allocated); running is
// bounded like fuzz_graph: every inferred tensor at most 2^16 elements and
// every Convolution/MatMul at most 2^24 multiply-adds.
// Seeds: tests/fuzz/corpus/onnx/ (written by test_onnx's
// OnnxCorpus.DISABLED_WriteFuzzSeeds).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "qconv/graph.h"
#include "qconv/graph_onnx.h"

namespace g = qconv::graph;

namespace {

constexpr int64_t max_elems = int64_t(1) << 16;
constexpr int64_t max_macs = int64_t(1) << 24;

bool small_graph(const g::graph &gr) {
    for (const auto &n : gr.nodes()) {
        const int64_t e = g::elems_of(n->out_shape);
        if (e < 0 || e > max_elems) return false;
        if ((n->kind == g::op::Convolution || n->kind == g::op::GroupConvolution || n->kind == g::op::MatMul) &&
            n->inputs.size() == 2) {
            const double macs = double(e) * double(g::elems_of(n->inputs[1]->out_shape));
            if (macs > double(max_macs)) return false;
        }
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
    if (size > 65536) return 0;
    std::unique_ptr<g::graph> gr;
    try {
        gr = g::parse_onnx(data, size);
    } catch (const qconv::error &) {
        return 0;
    }
    const std::string text = g::to_text(*gr);
    try {
        (void)g::parse(text);
    } catch (const qconv::error &e) {
        std::fprintf(stderr, "fuzz_onnx: the imported graph's text does not load: %s\n%s\n", e.what(), text.c_str());
        std::abort();
    }
    if (!small_graph(*gr)) return 0;
    run(*gr);
    std::unique_ptr<g::graph> rw = gr->clone();
    try {
        (void)g::run_passes(*rw);
    } catch (const qconv::error &) {
        return 0;
    }
    if (small_graph(*rw)) run(*rw);
    return 0;
}
