// `qconv-driver graph`: output fields, --save, exit statuses, on the small
// example graphs (the big FFN example is run by run.sh and bench_graph).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "qconv/graph.h"
#include "tests/support/run_driver.h"

namespace {

using run_result = qconv::test::driver_result;
using qconv::test::run_driver;

// key=value fields of the first line starting with `prefix`.
std::map<std::string, std::string> fields(const std::string &out, const std::string &prefix) {
    std::istringstream in(out);
    std::string line;
    std::map<std::string, std::string> kv;
    while (std::getline(in, line)) {
        if (line.rfind(prefix, 0) != 0) continue;
        std::istringstream ls(line);
        std::string tok;
        while (ls >> tok) {
            const auto eq = tok.find('=');
            if (eq != std::string::npos) kv[tok.substr(0, eq)] = tok.substr(eq + 1);
        }
        break;
    }
    return kv;
}

const std::string examples = std::string(QCONV_SOURCE_DIR) + "/examples/";

// --dim gives the run-time dimension `?`: the example runs at that token count.
TEST(GraphDriver, RunTimeDimension) {
    for (const char *dim : {"5", "40"}) {
        const auto r = run_driver({"graph", examples + "ffn_u4_tokens.qg", std::string("--dim=") + dim, "--reps=1"});
        ASSERT_EQ(r.rc, 0) << r.out << r.err;
        auto kv = fields(r.out, "op=graph");
        EXPECT_EQ(kv["dim"], dim);
        EXPECT_EQ(kv["rewritten"], "2/2");
        EXPECT_EQ(kv["status"], "ok");
    }
    EXPECT_EQ(run_driver({"graph", examples + "ffn_u4_tokens.qg", "--dim=0"}).rc, 2);
    EXPECT_EQ(run_driver({"graph", examples + "linear_i8_reshape.qg", "--dim=3"}).rc, 2); // no `?`
}

TEST(GraphDriver, RewritesAndMatches) {
    const std::string saved = ::testing::TempDir() + "/linear_after.qg";
    const auto r = run_driver({"graph", examples + "linear_i8_reshape.qg", "--save=" + saved, "--reps=2"});
    ASSERT_EQ(r.rc, 0) << r.out << r.err;
    auto kv = fields(r.out, "op=graph");
    EXPECT_EQ(kv["rewritten"], "1/1");
    EXPECT_EQ(kv["status"], "ok");
    EXPECT_EQ(kv["max_abs_diff"], "0"); // pow2 scales, exact data: bit-identical
    EXPECT_EQ(kv["tol"], "0.0001");
    for (const char *k : {"nodes_before", "nodes_after", "before_ms", "after_ms", "max_rel_diff"})
        EXPECT_TRUE(kv.count(k)) << k;
    // One impl line per node and phase; the MatMul runs on a compressed-MatMul row.
    auto mm = fields(r.out, "graph=after node=fc_matmul");
    EXPECT_EQ(mm["op"], "MatMul");
    EXPECT_EQ(r.out.find("graph=after node=fc_matmul op=MatMul impl=\"graph:"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("graph=before node=fc op=Convolution impl="), std::string::npos);
    // The saved graph loads and holds the MatMul.
    auto g = qconv::graph::load_file(saved);
    EXPECT_EQ(g->count_ops()["MatMul"], 1);
    EXPECT_EQ(g->count_ops()["Convolution"], 0);
}

// The QDQ block: its convolution is lowered onto the int8 primitive, the
// summary counts it (lowered=N/M), the result equals the graph as written
// (power-of-two scales: bit-exact, docs/semantics.md §10), and --report=table
// lists every node with its time and the lowering decision.
TEST(GraphDriver, LowersQuantizedConvolutions) {
    const auto r = run_driver({"graph", examples + "qdq_conv_block.qg", "--reps=1", "--report=table"});
    ASSERT_EQ(r.rc, 0) << r.out << r.err;
    auto kv = fields(r.out, "op=graph");
    EXPECT_EQ(kv["lowered"], "1/1");
    EXPECT_EQ(kv["status"], "ok");
    EXPECT_EQ(kv["max_abs_diff"], "0");
    for (const char *k : {"before_ms", "after_ms", "speedup", "after_best_ms", "max_abs_diff"})
        EXPECT_TRUE(kv.count(k)) << k;
    EXPECT_LE(std::stod(kv["after_best_ms"]), std::stod(kv["after_ms"])); // the fastest run, at most the median
    auto low = fields(r.out, "lower=conv conv=conv");
    EXPECT_EQ(low["lowered"], "1");
    EXPECT_NE(r.out.find("graph=after node=conv_int8 op=QConvolution impl=\"qconv:"), std::string::npos) << r.out;
    // The table: header, the QConvolution row with its decision, the total.
    EXPECT_NE(r.out.find("implementation / lowering"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("[lowered]"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\ntotal "), std::string::npos) << r.out;
    // The FakeQuantize block: the 1x1 is lowered, the depthwise (per-channel
    // output ranges of different scales) stays f32 and says why.
    const auto f = run_driver({"graph", examples + "fq_conv_block.qg", "--reps=1"});
    ASSERT_EQ(f.rc, 0) << f.out << f.err;
    EXPECT_EQ(fields(f.out, "op=graph")["lowered"], "1/2");
    EXPECT_NE(f.out.find("conv=dwc lowered=0 why=\"activation: per-channel activation scales differ"),
              std::string::npos)
        << f.out;
    EXPECT_EQ(run_driver({"graph", examples + "qdq_conv_block.qg", "--report=pretty"}).rc, 2);
    // The ResNet bottleneck: all three convolutions (the last one with the
    // residual Add of a DequantizeLinear, a sum over the skip's integers) lowered, bit-exact.
    const auto b = run_driver({"graph", examples + "qdq_bottleneck.qg", "--reps=1"});
    ASSERT_EQ(b.rc, 0) << b.out << b.err;
    auto bk = fields(b.out, "op=graph");
    EXPECT_EQ(bk["lowered"], "3/3") << b.out;
    EXPECT_EQ(bk["max_abs_diff"], "0");
    // The ReLU after the sum is the u8 store's own clamp at 0: left to it.
    EXPECT_NE(b.out.find("post_ops=sum:0.0625;linear:16;round"), std::string::npos) << b.out;
    // The first two: the output scale 1/s joins the per-OC scales, and only the round is left.
    EXPECT_NE(b.out.find("(clamp left to the saturation) (output scale folded) post_ops=round\""), std::string::npos)
        << b.out;
}

// The f16 FFN (f16 activations and scales, as OpenVINO exports them): both
// layers are rewritten into MatMuls that take X, Y and the scales as f16, and
// the rewritten graph agrees with the graph as written within the f16 bound.
TEST(GraphDriver, F16ActivationsAreRewritten) {
    const auto r = run_driver({"graph", examples + "ffn_u4_f16.qg", "--reps=1"});
    ASSERT_EQ(r.rc, 0) << r.out << r.err;
    auto kv = fields(r.out, "op=graph");
    EXPECT_EQ(kv["rewritten"], "2/2");
    EXPECT_EQ(kv["status"], "ok");
    EXPECT_EQ(kv["tol"], "0.01");
    EXPECT_GT(std::stod(kv["max_rel_diff"]), 0.0); // the graph as written rounds every node to f16
    EXPECT_LT(std::stod(kv["max_rel_diff"]), 5e-3);
    for (const char *node : {"graph=after node=up_matmul ", "graph=after node=down_matmul "}) {
        const size_t at = r.out.find(node);
        ASSERT_NE(at, std::string::npos) << node << "\n" << r.out;
        const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
        EXPECT_NE(line.find("scale:f16 x:f16\""), std::string::npos) << line;
    }
}

// A bound no run can meet (the outputs differ by rounding) gives a mismatch and exit 1.
TEST(GraphDriver, MismatchExitsOne) {
    const std::string g = ::testing::TempDir() + "/rounding.qg";
    std::ofstream(g) << "x = Parameter f32[1,1,3,64]\n"
                        "t = Transpose(x) order=[0,3,1,2]\n"
                        "q = Constant u8[32,64,1,1] random(1, 0, 255)\n"
                        "qf = Convert(q) to=f32\n"
                        "s = Constant f32[32,1,1,1] random(2, 0.001, 0.01)\n"
                        "w = Multiply(qf, s)\n"
                        "c = Convolution(t, w)\n"
                        "y = Transpose(c) order=[0,2,3,1]\n"
                        "r = Result(y)\n";
    auto r = run_driver({"graph", g, "--reps=1"});
    ASSERT_EQ(r.rc, 0) << r.out << r.err;
    auto kv = fields(r.out, "op=graph");
    if (kv["max_abs_diff"] == "0") GTEST_SKIP() << "both runs rounded identically";
    r = run_driver({"graph", g, "--reps=1", "--tol=0"});
    EXPECT_EQ(r.rc, 1);
    EXPECT_EQ(fields(r.out, "op=graph")["status"], "mismatch");
}

TEST(GraphDriver, ReportsWhyNotRewritten) {
    const auto r = run_driver({"graph", examples + "conv3x3_unchanged.qg", "--reps=1"});
    ASSERT_EQ(r.rc, 0) << r.out << r.err;
    EXPECT_EQ(fields(r.out, "op=graph")["rewritten"], "0/2");
    EXPECT_NE(r.out.find("conv=c3 rewritten=0 why=\"kernel 3x3 is not 1x1\""), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("conv=c1 rewritten=0 why=\"stride [2,2] is not 1\""), std::string::npos) << r.out;
}

TEST(GraphDriver, BadInput) {
    const std::string bad = ::testing::TempDir() + "/bad_graph.qg";
    std::ofstream(bad) << "x = Parameter f32[2]\ny = Frobnicate(x)\n";
    auto r = run_driver({"graph", bad});
    EXPECT_EQ(r.rc, 2);
    EXPECT_NE(r.err.find("line 2: unknown op 'Frobnicate'"), std::string::npos) << r.err;
    r = run_driver({"graph", "/nonexistent.qg"});
    EXPECT_EQ(r.rc, 2);
    r = run_driver({"graph"});
    EXPECT_EQ(r.rc, 2);
    r = run_driver({"graph", examples + "linear_i8_reshape.qg", "--bogus=1"});
    EXPECT_EQ(r.rc, 2);
    r = run_driver({"graph", examples + "linear_i8_reshape.qg", "--tol=abc"});
    EXPECT_EQ(r.rc, 2);
}

} // namespace
