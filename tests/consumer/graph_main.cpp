// Consumer of an installed qconv_graph: a graph in the text format, checked by
// hand, and an ONNX model (the path given as the first argument) read, passed
// and run.
//
// The text graph: x = [1, 2, 3, 4] times the rows [1, 1, 1, 1] and
// [0, 1, 2, 3] gives [10, 20]; adding [-20, 0] gives [-10, 20]; Relu [0, 20].
#include <cmath>
#include <cstdio>
#include <vector>

#include <qconv/graph.h>
#include <qconv/graph_onnx.h>

namespace {
int failures = 0;

void expect(const char *what, double got, double want) {
    if (got != want) {
        std::printf("FAIL %s: got %g, expected %g\n", what, got, want);
        ++failures;
    }
}

void text_graph() {
    namespace g = qconv::graph;
    const auto graph = g::parse("x = Parameter f32[1,4]\n"
                                "w = Constant f32[2,4] [1, 1, 1, 1, 0, 1, 2, 3]\n"
                                "y = MatMul(x, w) transpose_b=true\n"
                                "c = Constant f32[2] [-20, 0]\n"
                                "s = Add(y, c)\n"
                                "z = Relu(s)\n"
                                "r = Result(z)\n");
    const g::compiled_graph cg(*graph);
    const auto out = cg.run({g::tensor::from_f32(g::dtype::f32, {1, 4}, {1, 2, 3, 4})});
    if (out.size() != 1 || out[0].elems() != 2) {
        std::printf("FAIL text graph: expected one output of 2 elements\n");
        ++failures;
        return;
    }
    const auto v = out[0].to_f32();
    expect("relu(x w^T + c)[0]", v[0], 0);
    expect("relu(x w^T + c)[1]", v[1], 20);
}

void onnx_model(const char *path) {
    namespace g = qconv::graph;
    const auto graph = g::load_onnx(path);
    g::run_passes(*graph);
    const g::compiled_graph cg(*graph);
    const auto out = cg.run(g::random_inputs(*graph, 1));
    if (out.empty()) {
        std::printf("FAIL %s: no output\n", path);
        ++failures;
        return;
    }
    for (const float f : out[0].to_f32())
        if (!std::isfinite(f)) {
            std::printf("FAIL %s: a non-finite output\n", path);
            ++failures;
            return;
        }
    std::printf("graph_consumer: %s: %zu nodes, output %s\n", path, graph->size(), g::to_string(out[0].shape).c_str());
}
} // namespace

int main(int argc, char **argv) {
    if (argc != 2) {
        std::printf("usage: graph_consumer MODEL.onnx\n");
        return 2;
    }
    text_graph();
    bool threw = false;
    try {
        qconv::graph::parse("x = Parameter f32[2]\ny = Relu(zz)\nr = Result(y)\n");
    } catch (const qconv::error &) {
        threw = true;
    }
    if (!threw) {
        std::printf("FAIL: an undefined input was accepted\n");
        ++failures;
    }
    onnx_model(argv[1]);
    std::printf(failures ? "graph_consumer: FAILED\n" : "graph_consumer: ok\n");
    return failures ? 1 : 0;
}
