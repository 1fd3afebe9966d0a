// ConvTester: one line per test case to run an implementation against the
// reference on generated data.
//
//   ConvTester().desc("g1mb1ic17ih5oc3oh5kh3ph1").src(dtype::u8).dst(dtype::s8)
//       .zp("channel:random").post_ops("relu;fq:per_channel").seed(3).run("jit:conv_x8s8:avx512_core_vnni");
//
// run(name) creates the primitive forced to `name` (GTEST_SKIP() with the
// dispatcher's reason when that implementation does not support the problem
// on this machine; an unknown name fails the test), executes it, runs
// ref::conv with the attribute set the dispatcher chose, and compares the
// destinations: bit-exact (values equal), or — when a transcendental eltwise
// is in the chain — f32 within a relative `tolerance()` and integers within 1.
// A row labelled inexact on this CPU (exact() false: oneDNN below VNNI,
// brgconv on AMX) that differs is skipped with the count; `auto` choosing
// such a row fails.
// run() returns false when the case was skipped, so a caller adding checks
// after it can `if (!t.run(...)) return;`.
//
// Data comes from tests/support/testdata.h (random: the f32 pipeline is
// exact; extreme: saturating values). Defaults: mb from the desc, u8 → u8, no
// zp, per-OC power-of-two scales, bias, no post-ops, random data, seed 1,
// default threads.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "qconv/conv.h"
#include "tests/support/testdata.h"

namespace qconv::test {

class ConvTester {
public:
    ConvTester &desc(const std::string &text);
    ConvTester &desc(const conv_desc &d);
    ConvTester &src(dtype dt);
    ConvTester &dst(dtype dt);
    ConvTester &zp(const zero_point &z);     // explicit values
    ConvTester &zp(const std::string &spec); // "none", "tensor:3", "tensor:random", "channel:random", ...
    ConvTester &post_ops(const std::string &text);
    ConvTester &post_ops(const qconv::post_ops &ops);
    ConvTester &scales(const std::vector<float> &s); // explicit (empty = 1.0)
    ConvTester &scales(const std::string &kind);     // "per_oc" | "per_tensor" | "none" (random powers of two)
    ConvTester &bias(bool with);
    ConvTester &bias(const std::vector<float> &values); // explicit, one per OC
    ConvTester &dst_zp(int32_t v);
    ConvTester &data(testdata::data_kind k);
    ConvTester &data(const std::string &kind);
    ConvTester &seed(uint32_t s);
    ConvTester &threads(int n);
    ConvTester &enforce_brgconv(bool on = true);
    ConvTester &tolerance(double rel); // f32 bound after a transcendental eltwise (default 1e-5)

    // Runs `impl` ("auto" lets the dispatcher choose) and checks it; see above.
    bool run(const std::string &impl = "auto");

    // The problem as built (valid after run()) and what ran.
    const conv_problem &problem() const { return p_; }
    const std::string &impl_name() const { return ran_impl_; }
    int attr_id() const { return ran_attr_; }
    const std::vector<uint8_t> &result() const { return got_; }
    const std::vector<uint8_t> &expected() const { return want_; }

private:
    void build_problem();

    std::string desc_text_;
    conv_desc desc_;
    bool have_desc_ = false;
    dtype src_dt_ = dtype::u8, dst_dt_ = dtype::u8;
    std::string zp_spec_ = "none";
    zero_point zp_;
    bool zp_explicit_ = false;
    std::string ops_text_;
    qconv::post_ops ops_;
    bool ops_explicit_ = false;
    std::string scales_kind_ = "per_oc";
    std::vector<float> scales_;
    bool scales_explicit_ = false;
    bool bias_ = true;
    std::vector<float> bias_values_; // explicit (empty: generated from the seed)
    int32_t dst_zp_ = 0;
    testdata::data_kind data_ = testdata::data_kind::random;
    uint32_t seed_ = 1;
    int threads_ = 0;
    bool enforce_ = false;
    double tol_ = 1e-5;

    conv_problem p_;
    std::string ran_impl_;
    int ran_attr_ = -1;
    std::vector<uint8_t> got_, want_;
};

// Sets kernel knobs (environment variables read when a primitive is
// planned, e.g. QCONV_JIT_CONV_DENSE_PREFETCH) for its lifetime; a null value
// leaves one unset.
struct knob_env {
    knob_env(std::initializer_list<std::pair<const char *, const char *>> knobs) {
        for (const auto &k : knobs) {
            names.push_back(k.first);
            if (k.second) setenv(k.first, k.second, 1);
            else unsetenv(k.first);
        }
    }
    ~knob_env() {
        for (const char *n : names) unsetenv(n);
    }
    knob_env(const knob_env &) = delete;
    knob_env &operator=(const knob_env &) = delete;
    std::vector<const char *> names;
};

// Whether the chain holds an eltwise computed with exp/erf/tanh/log.
bool has_transcendental(const qconv::post_ops &ops);

// Compares two NHWC destinations of p.dst_dt with ConvTester's rule (equal
// values; after a transcendental eltwise f32 within rel_tol·max(1,|want|) and
// integers within 1). Returns the number of differing elements and writes the
// first few, with their coordinates, to *report.
int64_t compare_dst(const conv_problem &p, const void *got, const void *want, double rel_tol, std::string *report);

// Post-op chains that cover every epilogue path of the JIT kernels: none,
// eltwise, FakeQuantize, depthwise scale-shift, sum, binary of each shape,
// PReLU, and scales that push values past 2^30 / 2^31 or to NaN.
const std::vector<std::string> &epilogue_chains();

// 16 biases for the packed u8 stores' edges: far beyond the u8 range (±3e9,
// 3.4e38, 2^31 and just below, 2^30 and just above, ±inf, NaN), the u8 edges
// (254.5, 255.5) and a few plain values; bias c of a test takes entry (5c + i) % 16.
inline std::vector<float> extreme_biases() {
    const float inf = std::numeric_limits<float>::infinity();
    return {3e9f,   inf,   1073741888.f, 2147483648.f, -3e9f,   -inf,         std::nanf(""), 1.5e9f,
            12.25f, -7.5f, 254.5f,       255.5f,       3.4e38f, 2147483520.f, 1073741824.f,  -0.f};
}

} // namespace qconv::test
