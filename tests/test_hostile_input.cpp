// Hostile input at the API, graph and driver levels: every case raises a
// qconv::error whose message names the problem — never a crash, a hang or
// another exception type. Descriptor- and text-level validation is in
// tests/test_bad_input.cpp; this suite feeds the *primitives* (constructors
// and execute()), the graph loader/executor and the qconv-driver binary.
//
// Documented behaviour exercised here (README, "Reliability"):
//   - null pointers are errors naming the argument; buffers need no
//     particular alignment (a misaligned buffer gives the same bytes);
//   - NaN/Inf in scales and post-op parameters are rejected when the
//     primitive is created; NaN in the *data* (MatMul scale tensor, inputs)
//     is not checked and propagates;
//   - sizes overflowing int64 or above 2^40 elements are rejected by
//     validation; a valid size whose packed weights cannot be allocated is a
//     qconv::error, not std::bad_alloc;
//   - settings from the environment (QCONV_*, OMP_NUM_THREADS above
//     qconv::max_threads) are errors naming the variable;
//   - input files are bounded (batch files 16 MiB and 4096-byte lines, graph
//     files 64 MiB and 16 MiB lines, no NUL byte); what a driver problem or a
//     graph run needs is checked against a stated limit and the machine's
//     memory before anything is allocated, and a graph's shapes are all
//     inferred before any constant is generated.
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/memory.h"
#include "qconv/graph.h"
#include "qconv/qconv.h"
#include "tests/support/expect_error.h"
#include "tests/support/testdata.h"

using namespace qconv;

namespace {

// f must throw qconv::error starting with "<field>" and containing `detail`.
void expect_error(const std::function<void()> &f, const std::string &field, const std::string &detail = "") {
    test::expect_error_prefix(f, field, detail);
}

conv_problem small_problem(const std::string &desc = "mb1ic8ih5oc16kh3ph1") {
    conv_problem p;
    p.desc = conv_desc::parse(desc);
    p.src_dt = dtype::u8;
    p.dst_dt = dtype::u8;
    p.with_bias = true;
    p.scales = {0.25f};
    return p;
}

struct conv_data {
    std::vector<uint8_t> src, dst;
    std::vector<int8_t> wei;
    std::vector<float> bias;
    explicit conv_data(const conv_problem &p)
        : src(testdata::make_src(p, testdata::data_kind::random, 1)),
          dst(size_t(p.desc.dst_elems()) * size_t(bits_of(p.dst_dt) / 8)),
          wei(testdata::make_weights(p.desc, testdata::data_kind::random, 1)), bias(testdata::make_bias(p.desc, 1)) {}
};

// A problem built only to be rejected at creation.
void expect_create_error(const conv_problem &p, const std::string &field, const std::string &detail = "") {
    // Big enough for the small problems used below (the others fail first).
    const std::vector<int8_t> wei(4096);
    const std::vector<float> bias(4096);
    expect_error([&] { convolution c(p, wei.data(), bias.data()); }, field, detail);
}

matmul_desc small_matmul() {
    matmul_desc d = matmul_desc::parse("m2k64n16");
    d.wei_dt = dtype::u4;
    d.group = 32;
    d.zp = matmul_desc::zp_kind::per_group;
    d.with_bias = true;
    return d;
}

struct matmul_data {
    std::vector<uint8_t> wei;
    std::vector<float> scale, bias, x, y;
    std::vector<int32_t> zp;
    explicit matmul_data(const matmul_desc &d)
        : wei(size_t(d.wei_bytes()), 0x35), scale(size_t(d.scale_elems()), 0.5f), bias(size_t(d.n), 1.f),
          x(size_t(d.m * d.k), 1.f), y(size_t(d.m * d.n)), zp(size_t(d.zp_elems()), 3) {}
    matmul_weights w() const { return {wei.data(), scale.data(), zp.data(), bias.data()}; }
};

std::string write_temp(const std::string &name, const std::string &text) {
    const std::string path = ::testing::TempDir() + "hostile_" + name;
    std::ofstream(path) << text;
    return path;
}

// Sets (or, with nullptr, unsets) an environment variable for one scope; CTest
// runs every test in its own process.
struct scoped_env {
    std::string name, old;
    bool had;
    scoped_env(const char *n, const char *v) : name(n), had(std::getenv(n) != nullptr) {
        if (had) old = std::getenv(n);
        if (v) setenv(n, v, 1);
        else unsetenv(n);
    }
    ~scoped_env() {
        if (had) setenv(name.c_str(), old.c_str(), 1);
        else unsetenv(name.c_str());
    }
};

// examples/ffn_u4_f16.qg with its s2 Constant made 65536 times larger
// (2^31 f16 values): the next line's Multiply does not broadcast.
std::string huge_constant_ffn() {
    std::ifstream in(std::string(QCONV_SOURCE_DIR) + "/examples/ffn_u4_f16.qg");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string from = "f16[1024,32,1,1,1] random(7", to = "f16[1024,32,65536,1,1] random(7";
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << "examples/ffn_u4_f16.qg changed";
    if (at != std::string::npos) text.replace(at, from.size(), to);
    return text;
}

} // namespace

// ===================================================== convolution primitive

TEST(HostileConv, NullWeights) {
    const conv_problem p = small_problem();
    const conv_data d(p);
    expect_error([&] { convolution c(p, nullptr, d.bias.data()); }, "weights", "null");
}

TEST(HostileConv, NullBiasWithBias) {
    const conv_problem p = small_problem();
    const conv_data d(p);
    expect_error([&] { convolution c(p, d.wei.data(), nullptr); }, "bias", "null");
}

TEST(HostileConv, NullSourceAndDestination) {
    const conv_problem p = small_problem();
    conv_data d(p);
    const convolution c(p, d.wei.data(), d.bias.data());
    expect_error([&] { c.execute(nullptr, d.dst.data()); }, "src", "null");
    expect_error([&] { c.execute(d.src.data(), nullptr); }, "dst", "null");
}

TEST(HostileConv, MissingAndNullFullBinaryTensor) {
    conv_problem p = small_problem();
    p.ops = {post_op::binary(binary_alg::add, broadcast::full)};
    conv_data d(p);
    const convolution c(p, d.wei.data(), d.bias.data());
    expect_error([&] { c.execute(d.src.data(), d.dst.data()); }, "binary", "1 full-tensor");
    exec_args args;
    args.binary = {nullptr};
    expect_error([&] { c.execute(d.src.data(), d.dst.data(), args); }, "binary", "null");
}

TEST(HostileConv, MovedFromPrimitive) {
    const conv_problem p = small_problem();
    conv_data d(p);
    convolution c(p, d.wei.data(), d.bias.data());
    convolution other = std::move(c);
    expect_error([&] { c.execute(d.src.data(), d.dst.data()); }, "convolution", "moved-from"); // NOLINT
    other.execute(d.src.data(), d.dst.data());
}

TEST(HostileConv, UnknownImplementationName) {
    const conv_problem p = small_problem();
    const conv_data d(p);
    conv_hints h;
    h.impl = "jit:no_such_kernel";
    expect_error([&] { convolution c(p, d.wei.data(), d.bias.data(), h); }, "impl", "unknown implementation");
}

// Buffers with no particular alignment (odd addresses) give the same bytes as
// aligned ones, for whatever the dispatcher picks and for every ISA row.
TEST(HostileConv, MisalignedBuffersGiveTheSameBytes) {
    conv_problem p = small_problem("mb1ic19ih6oc35kh3ph1");
    p.ops = {post_op::relu()};
    const conv_data d(p);
    std::vector<uint8_t> want = d.dst;
    const convolution c(p, d.wei.data(), d.bias.data());
    c.execute(d.src.data(), want.data());

    // Copies at offset 1 (and 3 for weights/bias) from a 64-byte boundary.
    std::vector<uint8_t> src_buf(d.src.size() + 64), dst_buf(d.dst.size() + 64);
    std::vector<int8_t> wei_buf(d.wei.size() + 64);
    std::vector<uint8_t> bias_buf(d.bias.size() * sizeof(float) + 64);
    auto odd = [](auto *base, size_t off) {
        const auto a = reinterpret_cast<uintptr_t>(base);
        return reinterpret_cast<decltype(base)>(((a + 63) & ~uintptr_t(63)) + off);
    };
    uint8_t *src = odd(src_buf.data(), 1), *dst = odd(dst_buf.data(), 1);
    int8_t *wei = odd(wei_buf.data(), 3);
    float *bias = reinterpret_cast<float *>(odd(bias_buf.data(), 2));
    std::memcpy(src, d.src.data(), d.src.size());
    std::memcpy(wei, d.wei.data(), d.wei.size());
    std::memcpy(static_cast<void *>(bias), d.bias.data(), d.bias.size() * sizeof(float));
    const convolution c2(p, wei, bias);
    c2.execute(src, dst);
    EXPECT_EQ(0, std::memcmp(dst, want.data(), want.size())) << c2.impl_name();
}

TEST(HostileConv, NaNAndInfScales) {
    conv_problem p = small_problem();
    p.scales = {std::nanf("")};
    expect_create_error(p, "scales", "not finite");
    p.scales.assign(16, 1.f);
    p.scales[9] = -INFINITY;
    expect_create_error(p, "scales", "#9");
}

TEST(HostileConv, NaNInEltwiseParameter) {
    conv_problem p = small_problem();
    p.ops = {post_op::eltwise(eltwise_alg::clip, 0.f, std::nanf(""))};
    expect_create_error(p, "post_ops[0].beta", "finite");
}

TEST(HostileConv, InfInPerChannelBinaryOperand) {
    conv_problem p = small_problem();
    std::vector<float> v(16, 2.f);
    v[15] = INFINITY;
    p.ops = {post_op::relu(), post_op::binary(binary_alg::mul, broadcast::per_oc, v)};
    expect_create_error(p, "post_ops[1].scale", "#15");
}

TEST(HostileConv, NaNInScaleShiftAndPrelu) {
    conv_problem p = small_problem();
    p.ops = {post_op::scale_shift_op({1.f}, {std::nanf("")})};
    expect_create_error(p, "post_ops[0].shift", "finite");
    p.ops = {post_op::prelu(std::vector<float>(16, std::nanf("")))};
    expect_create_error(p, "post_ops[0].scale", "finite");
}

TEST(HostileConv, InfInFakeQuantizeAndSum) {
    conv_problem p = small_problem();
    p.ops = {post_op::fake_quantize(256, {0.f}, {INFINITY}, {0.f}, {255.f})};
    expect_create_error(p, "post_ops[0].in_hi", "finite");
    p.ops = {post_op::sum(-INFINITY)};
    expect_create_error(p, "post_ops[0].sum_scale", "finite");
}

TEST(HostileConv, DivisionByZeroOperand) {
    conv_problem p = small_problem();
    p.ops = {post_op::binary(binary_alg::div, broadcast::per_tensor, {0.f})};
    expect_create_error(p, "post_ops[0].scale", "division by zero");
}

TEST(HostileConv, ZeroPointVectorOfWrongLength) {
    conv_problem p = small_problem();
    p.src_zp = zero_point::channel(std::vector<int32_t>(7, 3)); // IC is 8
    expect_create_error(p, "src_zp", "IC=8");
    p.src_zp = zero_point::channel(std::vector<int32_t>(9, 3));
    expect_create_error(p, "src_zp", "IC=8");
    p.src_zp = {zero_point::kind::per_tensor, {}};
    expect_create_error(p, "src_zp", "exactly 1");
    p.src_zp = {zero_point::kind::none, {1}};
    expect_create_error(p, "src_zp", "no values");
}

TEST(HostileConv, ZeroPointKindOutOfRange) {
    conv_problem p = small_problem();
    p.src_zp = {static_cast<zero_point::kind>(42), {1}};
    expect_create_error(p, "src_zp", "unknown");
}

TEST(HostileConv, PostOpKindOutOfRange) {
    conv_problem p = small_problem();
    post_op op = post_op::relu();
    op.k = static_cast<post_op::kind>(99);
    p.ops = {op};
    expect_create_error(p, "post_ops[0]", "unknown");
    op = post_op::eltwise(static_cast<eltwise_alg>(77));
    p.ops = {op};
    expect_create_error(p, "post_ops[0].alg", "unknown");
}

TEST(HostileConv, SizesOverflowingInt64) {
    conv_problem p = small_problem();
    p.desc.mb = int64_t(1) << 40;
    p.desc.ih = p.desc.iw = int64_t(1) << 40;
    expect_create_error(p, "", "");
    p = small_problem();
    p.desc.ic = p.desc.oc = std::numeric_limits<int64_t>::max();
    expect_create_error(p, "", "");
}

TEST(HostileConv, NegativeAndZeroSizes) {
    conv_problem p = small_problem();
    p.desc.ic = -8;
    expect_create_error(p, "ic", "");
    p = small_problem();
    p.desc.oc = 0;
    expect_create_error(p, "oc", "");
    p = small_problem();
    p.desc.sh = -1;
    expect_create_error(p, "sh", "");
}

// 2^39 weight bytes: every dimension is valid, but the packed copy cannot be
// allocated. The weights are a read-only, never-backed mapping of that size.
// Found by this test: std::bad_alloc escaped from convolution's constructor;
// creation now checks the packed size against the machine's memory first.
TEST(HostileConv, TerabyteWeightsAreAnError) {
    conv_problem p;
    p.desc = conv_desc::parse("mb1ic1048576ih1oc524288kh1");
    p.src_dt = dtype::u8;
    p.dst_dt = dtype::u8;
    const size_t bytes = size_t(p.desc.wei_elems());
    ASSERT_EQ(bytes, size_t(1) << 39);
    void *wei = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (wei == MAP_FAILED) GTEST_SKIP() << "cannot reserve 2^39 bytes of address space";
    for (const std::string impl : {"auto", "ref:conv"}) {
        SCOPED_TRACE(impl);
        conv_hints h;
        h.impl = impl;
        try {
            convolution c(p, static_cast<const int8_t *>(wei), nullptr, h);
            ADD_FAILURE() << "created a primitive with 2^39 weight bytes (" << c.impl_name() << ")";
        } catch (const qconv::error &e) {
            SUCCEED() << e.what();
        } catch (const std::exception &e) {
            ADD_FAILURE() << "wrong exception type (expected qconv::error): " << e.what();
        }
    }
    munmap(wei, bytes);
}

// ======================================================== compressed MatMul

TEST(HostileMatmul, NullWeightPointers) {
    const matmul_desc d = small_matmul();
    const matmul_data m(d);
    matmul_weights w = m.w();
    w.wei = nullptr;
    expect_error([&] { matmul mm(d, w); }, "wei", "null");
    w = m.w();
    w.scale = nullptr;
    expect_error([&] { matmul mm(d, w); }, "scale", "null");
    w = m.w();
    w.zp = nullptr;
    expect_error([&] { matmul mm(d, w); }, "zp", "null");
    w = m.w();
    w.bias = nullptr;
    expect_error([&] { matmul mm(d, w); }, "bias", "null");
}

TEST(HostileMatmul, NullInputAndOutput) {
    const matmul_desc d = small_matmul();
    matmul_data m(d);
    const matmul mm(d, m.w());
    expect_error([&] { mm.execute(nullptr, m.y.data()); }, "x", "null");
    expect_error([&] { mm.execute(m.x.data(), nullptr); }, "y", "null");
}

TEST(HostileMatmul, MovedFromPrimitive) {
    const matmul_desc d = small_matmul();
    matmul_data m(d);
    matmul mm(d, m.w());
    matmul other = std::move(mm);
    expect_error([&] { mm.execute(m.x.data(), m.y.data()); }, "matmul", "moved-from"); // NOLINT
    other.execute(m.x.data(), m.y.data());
}

TEST(HostileMatmul, BadDescriptorsAtCreation) {
    const matmul_desc good = small_matmul();
    const matmul_data m(good);
    matmul_desc d = good;
    d.group = 48; // does not divide k = 64
    expect_error([&] { matmul mm(d, m.w()); }, "group", "does not divide");
    d = good;
    d.m = -3;
    expect_error([&] { matmul mm(d, m.w()); }, "m", "positive");
    d = good;
    d.k = d.n = std::numeric_limits<int64_t>::max();
    d.group = 0;
    expect_error([&] { matmul mm(d, m.w()); }, "", "");
    d = good;
    d.wei_dt = dtype::f32;
    expect_error([&] { matmul mm(d, m.w()); }, "wei_dt", "u8, s8, u4 or s4");
    d = good;
    d.zp = static_cast<matmul_desc::zp_kind>(9);
    expect_error([&] { matmul mm(d, m.w()); }, "zp", "unknown");
}

TEST(HostileMatmul, UnknownImplementationName) {
    const matmul_desc d = small_matmul();
    const matmul_data m(d);
    matmul_hints h;
    h.impl = "jit:matmul_nope";
    expect_error([&] { matmul mm(d, m.w(), h); }, "impl", "unknown implementation");
}

// Scales are data: not checked, NaN propagates to exactly the outputs of the
// channel whose scale is NaN, on every implementation the dispatcher picks.
TEST(HostileMatmul, NaNScaleIsDataAndPropagates) {
    const matmul_desc d = small_matmul();
    matmul_data m(d);
    m.scale[size_t(5 * d.n_groups())] = std::nanf(""); // channel 5, group 0
    for (const std::string impl : {"auto", "ref:matmul"}) {
        matmul_hints h;
        h.impl = impl;
        const matmul mm(d, m.w(), h);
        std::fill(m.y.begin(), m.y.end(), 0.f);
        mm.execute(m.x.data(), m.y.data());
        for (int64_t r = 0; r < d.m; ++r)
            for (int64_t n = 0; n < d.n; ++n)
                EXPECT_EQ(std::isnan(m.y[size_t(r * d.n + n)]), n == 5) << mm.impl_name() << " row " << r << " n " << n;
    }
}

// Was a finding (core/problem.cpp, fixed): `m?` was rewritten to `m0` before
// tokenizing, so 'm?5k64n64' ran m=5, 'k6m?4n64' ran m=4 and 'm??k64n64' was
// quoted as 'm0?k64n64'. `?` is now a value of its own, for m only.
TEST(HostileMatmul, RunTimeMOnlyAsAWholeValue) {
    const struct {
        const char *text, *field, *detail;
    } cases[] = {
        {"m?5k64n64", "desc", "'m?5k64n64'"},
        {"k6m?4n64", "desc", "'k6m?4n64'"},
        {"m??k64n64", "desc", "'m??k64n64'"},
        {"m1k?n64", "k", "only m may be given at run time"},
        {"m1k64n?", "n", "only m may be given at run time"},
    };
    for (const auto &c : cases) {
        SCOPED_TRACE(c.text);
        expect_error([&] { matmul_desc::parse(c.text); }, c.field, c.detail);
    }
    EXPECT_TRUE(matmul_desc::parse("m?k64n64").runtime());
    EXPECT_TRUE(matmul_desc::parse("k64_m?_n64").runtime());
    EXPECT_EQ(matmul_desc::parse("m5k64n64").m, 5);
}

// Was a finding (core/post_ops_text.cpp, fixed): clip:6:0 was accepted.
TEST(HostilePostOps, ClipLowerBoundAboveUpperBound) {
    expect_error([] { parse_post_ops("clip:6:0", 16); }, "post_ops[0].alpha", "above its upper bound");
    expect_error([] { parse_post_ops("relu;clip:1:-1", 16); }, "post_ops[1].alpha", "above its upper bound");
    EXPECT_NO_THROW(parse_post_ops("clip:2:2", 16)); // a constant is a clip too
}

// A valid MatMul whose packed weights (up to 4 bytes each) cannot fit is a
// qconv::error naming the weights before anything is read or allocated.
TEST(HostileMatmul, WeightsBeyondMemoryAreAnError) {
    matmul_desc d = matmul_desc::parse("m1k549755813888n1"); // 2^39 weights: 2 TiB packed
    if (impl::usable_memory() == 0 || double(impl::usable_memory()) > 0x1p41)
        GTEST_SKIP() << "this machine could hold 2 TiB";
    const std::vector<uint8_t> wei(64);
    const std::vector<float> scale(64, 1.f);
    const matmul_weights w{wei.data(), scale.data(), nullptr, nullptr};
    expect_error([&] { matmul m(d, w); }, "wei", "more than");
}

// ============================================================ environment

// Was a finding: QCONV_MAX_CPU_ISA=nonsense, QCONV_CACHE_CAPACITY=-1|abc and
// QCONV_DISPATCH=foo only showed as unimplemented rows (exit status 0), and
// OMP_NUM_THREADS=100000 crashed in the OpenMP runtime.
TEST(HostileEnvironment, EveryBadSettingIsNamed) {
    const struct {
        const char *var, *value, *detail;
    } cases[] = {
        {"OMP_NUM_THREADS", "100000", "more than qconv's limit of 4096"},
        {"OMP_NUM_THREADS", "4,100000", "more than qconv's limit of 4096"},
        {"OMP_NUM_THREADS", "0", "expected positive thread counts"},
        {"OMP_NUM_THREADS", "abc", "expected positive thread counts"},
        {"QCONV_MAX_CPU_ISA", "nonsense", "unknown ISA 'nonsense'"},
        {"QCONV_CACHE_CAPACITY", "-1", "expected a non-negative integer"},
        {"QCONV_CACHE_CAPACITY", "abc", "expected a non-negative integer"},
        {"QCONV_CACHE_CAPACITY", "99999999999999999999", "expected a non-negative integer"},
        {"QCONV_DISPATCH", "foo", "unknown value 'foo'"},
        {"QCONV_VERBOSE", "abc", "expected a level"},
        {"QCONV_RUNTIME", "tbb", "expected openmp or caller"},
    };
    for (const auto &c : cases) {
        SCOPED_TRACE(std::string(c.var) + "=" + c.value);
        const scoped_env e(c.var, c.value);
        expect_error([] { check_environment(); }, c.var, c.detail);
    }
    const struct {
        const char *var, *value;
    } good[] = {{"OMP_NUM_THREADS", "4096"},   {"OMP_NUM_THREADS", "8, 2"}, {"QCONV_MAX_CPU_ISA", "AVX2"},
                {"QCONV_CACHE_CAPACITY", "0"}, {"QCONV_DISPATCH", "tune"},  {"QCONV_VERBOSE", "2"},
                {"QCONV_RUNTIME", "openmp"},   {"QCONV_RUNTIME", "caller"}};
    for (const auto &g : good) {
        SCOPED_TRACE(std::string(g.var) + "=" + g.value);
        const scoped_env e(g.var, g.value);
        EXPECT_NO_THROW(check_environment());
    }
}

// More threads than qconv::max_threads, asked for in exec_args or set through
// OpenMP, is an error naming it, before any parallel region starts.
TEST(HostileEnvironment, ThreadCountAboveTheLimit) {
    const conv_problem p = small_problem();
    conv_data d(p);
    const convolution c(p, d.wei.data(), d.bias.data());
    exec_args args;
    args.threads = max_threads + 1;
    expect_error([&] { c.execute(d.src.data(), d.dst.data(), args); }, "threads", "limit of 4096");

    const scoped_env no_env("OMP_NUM_THREADS", nullptr);
    const int before = omp_get_max_threads();
    omp_set_num_threads(100000);
    expect_error([&] { convolution c2(p, d.wei.data(), d.bias.data()); }, "threads", "OpenMP would run 100000");
    expect_error([&] { matmul m(small_matmul(), matmul_data(small_matmul()).w()); }, "threads", "limit of 4096");
    omp_set_num_threads(before);
}

// ================================================================== graph

namespace {
void expect_graph_error(const std::string &text, const std::string &detail) {
    SCOPED_TRACE(text);
    expect_error([&] { graph::parse(text); }, "line", detail);
}
} // namespace

TEST(HostileGraph, Cycle) {
    expect_graph_error("x = Parameter f32[1,4]\n"
                       "a = Add(x, b)\n"
                       "b = Relu(a)\n"
                       "r = Result(b)\n",
                       "cycle");
}

TEST(HostileGraph, SelfLoop) { expect_graph_error("a = Relu(a)\nr = Result(a)\n", "cycle"); }

TEST(HostileGraph, DanglingInput) {
    expect_graph_error("x = Parameter f32[1,4]\ny = Relu(nowhere)\nr = Result(y)\n", "'nowhere' is not defined");
}

TEST(HostileGraph, UnknownOp) { expect_graph_error("x = Parameter f32[1,4]\ny = Swish(x)\n", "unknown op 'Swish'"); }

TEST(HostileGraph, DuplicateId) {
    expect_graph_error("x = Parameter f32[1,4]\nx = Parameter f32[1,4]\n", "defined twice");
}

TEST(HostileGraph, ElementwiseShapeMismatch) {
    expect_graph_error("a = Parameter f32[2,3]\nb = Parameter f32[4,5]\nc = Add(a, b)\nr = Result(c)\n", "line 3");
}

TEST(HostileGraph, MatMulInnerDimensionMismatch) {
    expect_graph_error("a = Parameter f32[2,3]\nb = Constant f32[4,5] fill(1)\nc = MatMul(a, b)\nr = Result(c)\n",
                       "line 3");
}

TEST(HostileGraph, ConvolutionChannelMismatch) {
    expect_graph_error("x = Parameter f32[1,3,4,4]\n"
                       "w = Constant f32[8,5,1,1] fill(1)\n"
                       "c = Convolution(x, w) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]\n"
                       "r = Result(c)\n",
                       "line 3");
}

TEST(HostileGraph, BadTransposeOrderAndReshape) {
    expect_graph_error("x = Parameter f32[1,2,3,4]\ny = Transpose(x) order=[0,0,1,2]\nr = Result(y)\n", "line 2");
    expect_graph_error("x = Parameter f32[1,2,3,4]\ny = Reshape(x) shape=[5,5]\nr = Result(y)\n", "line 2");
}

TEST(HostileGraph, WrongArity) {
    expect_graph_error("x = Parameter f32[1,4]\ny = Add(x)\nr = Result(y)\n", "line 2");
    expect_graph_error("x = Parameter f32[1,4]\ny = Relu(x, x, x)\nr = Result(y)\n", "line 2");
}

TEST(HostileGraph, ConstantValueCountAndRange) {
    expect_graph_error("c = Constant f32[2,2] [1, 2, 3]\n", "3 values given");
    expect_graph_error("c = Constant u8[2] [1, 300]\n", "not a valid u8");
    expect_graph_error("c = Constant u4[2] random(1, 0, 16)\n", "not a valid u4");
}

// Was a finding (graph/io/text.cpp, fixed): `Constant u8[-1,4] fill(1)` reached
// std::vector with a negative size (std::length_error).
TEST(HostileGraph, NegativeAndZeroDimensions) {
    expect_graph_error("c = Constant u8[-1,4] fill(1)\n", "line 1");
    expect_graph_error("x = Parameter f32[2,-3]\n", "line 1");
    expect_graph_error("x = Parameter f32[0,3]\n", "line 1");
}

// Was a finding (graph/, fixed): shapes whose element count overflows int64
// loaded without an error (elems_of wrapped; i8[2^32,2^32] got 0 bytes).
TEST(HostileGraph, SizesOverflowingInt64) {
    expect_graph_error("x = Parameter f32[4294967296,4294967296,4]\n", "line 1");
    expect_graph_error("c = Constant i8[4294967296,4294967296] fill(0)\n", "line 1");
}

// Was a finding (graph/io/text.cpp, fixed): a 4 TiB Constant was allocated (std::bad_alloc).
TEST(HostileGraph, TerabyteConstant) {
    // 2^40 f32 elements = 4 TiB: refused before anything is allocated.
    expect_graph_error("c = Constant f32[1048576,1048576] fill(0)\nr = Result(c)\n", "line 1");
}

// Was a finding (graph/io/text.cpp, fixed): a Constant of 2^31 f16 values was
// generated (4 GiB, minutes) before the next line's shape check refused the
// graph. Every shape is now inferred before any data is generated.
TEST(HostileGraph, ShapesAreCheckedBeforeConstantsAreGenerated) {
    const auto t0 = std::chrono::steady_clock::now();
    expect_error([] { graph::parse(huge_constant_ffn()); }, "line 32", "do not broadcast");
    // The same Constant as a Result: shapes agree, the run would need 12 GiB.
    expect_graph_error("c = Constant f16[1024,32,65536,1,1] random(7, 0.002, 0.02)\nr = Result(c)\n",
                       "more than the graph limit of 4 GiB");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(s, 30.0) << "data was generated before the shapes were checked";
}

// Was a finding (graph/, fixed): a Parameter f32[1,4096,4096,32] (2^29
// elements, under the 2^31 per-tensor limit) ended in std::bad_alloc. What a
// run holds (run_bytes) is checked against max_run_bytes and the machine's
// memory when the graph is read and compiled.
TEST(HostileGraph, RunBeyondTheGraphLimit) {
    expect_graph_error("x = Parameter f32[1,4096,4096,32]\nr = Result(x)\n",
                       "largest tensor: 'x' f32[1,4096,4096,32], 2 GiB in f32) needs about 8 GiB, more than the "
                       "graph limit of 4 GiB");
    // A graph built in code is checked when compiled.
    graph::graph g;
    graph::node *x = g.parameter(graph::dtype::f32, {1, 4096, 4096, 32}, "x");
    g.add(graph::op::Result, {g.add(graph::op::Relu, {x})});
    g.infer();
    EXPECT_GT(graph::run_bytes(g), double(graph::max_run_bytes));
    expect_error([&] { graph::compiled_graph cg(g); }, "node 'x'", "more than the graph limit");
}

// Was a finding (graph/io/text.cpp, fixed): `graph /dev/zero` read forever.
TEST(HostileGraph, FileLimits) {
    expect_error([] { graph::load_file("/dev/zero"); }, "file", "NUL byte");
    const std::string long_line =
        write_temp("long_line.qg",
                   "x = Parameter f32[1,4]" + std::string(size_t(graph::max_line_bytes), ' ') + "\nr = Result(x)\n");
    expect_error([&] { graph::load_file(long_line); }, "file", "line 1 is longer than the limit of 16 MiB");
    std::remove(long_line.c_str());
}

TEST(HostileGraph, MissingFile) {
    expect_error([] { graph::load_file("/nonexistent/dir/graph.qg"); }, "file", "cannot open");
}

TEST(HostileGraph, ExecutorWrongInputs) {
    const auto g = graph::parse("x = Parameter f32[1,4]\ny = Relu(x)\nr = Result(y)\n");
    const graph::compiled_graph cg(*g, 1);
    expect_error([&] { cg.run({}); }, "", "");
    graph::tensor t = graph::tensor::from_f32(graph::dtype::f32, {2, 4}, std::vector<float>(8, 1.f));
    expect_error([&] { cg.run({t}); }, "", "");
    t.shape = {1, 4};
    t.bytes.resize(3 * sizeof(float)); // fewer values than the shape says
    expect_error([&] { cg.run({t}); }, "", "");
}

// ================================================================= driver

namespace {
struct driver_result {
    int rc = -1;
    std::string err;
};
// env: "VAR=value" settings for the driver's environment (none when empty).
driver_result run_driver(const std::vector<std::string> &args, const std::string &env = "") {
    // One file per call and process: CTest runs these tests in parallel.
    static int calls = 0;
    const std::string err_path = ::testing::TempDir() + "hostile_driver_err_" + std::to_string(getpid()) + "_" +
                                 std::to_string(++calls) + ".txt";
    std::string cmd = "timeout 120 env " + (env.empty() ? std::string() : "'" + env + "' ") + QCONV_DRIVER;
    for (const auto &a : args) cmd += " '" + a + "'";
    cmd += " >/dev/null 2>" + err_path;
    const int status = std::system(cmd.c_str());
    driver_result r;
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    {
        std::ifstream in(err_path);
        r.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    std::remove(err_path.c_str());
    return r;
}
void expect_bad_input(const std::vector<std::string> &args, const std::string &detail, const std::string &env = "") {
    const driver_result r = run_driver(args, env);
    std::string cmd = env.empty() ? "" : env + " ";
    for (const auto &a : args) cmd += a + " ";
    EXPECT_EQ(r.rc, 2) << cmd << "\nstderr: " << r.err;
    EXPECT_NE(r.err.find(detail), std::string::npos) << cmd << "\n'" << detail << "' not in stderr: " << r.err;
}
} // namespace

TEST(HostileDriver, OverflowingDescriptorAndOptions) {
    expect_bad_input({"conv", "mb99999999999999999999ic4ih4oc4kh1"}, "mb");
    expect_bad_input({"conv", "mb1ic4ih4oc4kh1", "--mb=99999999999999999999"}, "--mb");
    expect_bad_input({"matmul", "m1k1099511627776n1099511627776"}, "");
}

TEST(HostileDriver, BadGraphFile) {
    const std::string path =
        write_temp("cycle.qg", "x = Parameter f32[1,4]\na = Add(x, b)\nb = Relu(a)\nr = Result(b)\n");
    expect_bad_input({"graph", path}, "cycle");
    expect_bad_input({"graph", "/nonexistent/graph.qg"}, "cannot open");
}

TEST(HostileDriver, BatchFileThatIsADirectoryOrMissing) {
    expect_bad_input({"conv", "--batch=/nonexistent/list"}, "--batch");
    expect_bad_input({"conv", "--batch=" + ::testing::TempDir()}, "--batch");
}

// One bad input as a careless or hostile user gives it: the driver must exit
// with status 2 and name what is wrong on stderr.
struct driver_case {
    std::string env;
    std::vector<std::string> args;
    std::string detail; // in stderr
};
void expect_bad_inputs(const std::vector<driver_case> &cases) {
    for (const auto &c : cases) expect_bad_input(c.args, c.detail, c.env);
}

// Were findings: a bad setting in the environment ran with exit status 0
// (rows shown unimplemented) or crashed in the OpenMP runtime.
TEST(HostileDriver, BadEnvironmentIsBadInput) {
    const std::vector<std::string> conv = {"conv", "mb1ic4ih5oc4kh3ph1"}, mm = {"matmul", "m1k64n64"};
    expect_bad_inputs({
        {"OMP_NUM_THREADS=100000", conv, "OMP_NUM_THREADS: 100000 threads is more than qconv's limit of 4096"},
        {"OMP_NUM_THREADS=100000", mm, "OMP_NUM_THREADS: 100000 threads is more than qconv's limit of 4096"},
        {"QCONV_MAX_CPU_ISA=nonsense", conv, "QCONV_MAX_CPU_ISA: unknown ISA 'nonsense'"},
        {"QCONV_CACHE_CAPACITY=-1", conv, "QCONV_CACHE_CAPACITY: expected a non-negative integer"},
        {"QCONV_CACHE_CAPACITY=abc", mm, "QCONV_CACHE_CAPACITY: expected a non-negative integer"},
        {"QCONV_DISPATCH=foo", conv, "QCONV_DISPATCH: unknown value 'foo'"},
    });
}

// Were findings: /dev/zero as a batch or graph file was read forever.
TEST(HostileDriver, InputFilesAreBounded) {
    const std::string long_line = write_temp("long_line.batch", std::string(5000, 'x') + "\n");
    const std::string many_lines = write_temp("many_lines.batch", std::string(size_t(17) << 20, '\n'));
    expect_bad_inputs({
        {"", {"conv", "--batch=/dev/zero"}, "--batch: /dev/zero:1: a NUL byte"},
        {"", {"matmul", "--batch=/dev/zero"}, "--batch: /dev/zero:1: a NUL byte"},
        {"", {"graph", "/dev/zero"}, "file: '/dev/zero' holds a NUL byte"},
        {"", {"conv", "--batch=" + long_line}, ":1: line longer than 4096 bytes"},
        {"", {"matmul", "--batch=" + many_lines}, "is larger than the limit of 16 MiB"},
    });
    std::remove(long_line.c_str());
    std::remove(many_lines.c_str());
}

// Were findings: garbage that ran with exit status 0.
TEST(HostileDriver, GarbageIsNotRun) {
    const std::string desc = "mb1ic4ih5oc4kh3ph1";
    const std::string zero_count = write_temp("zero_count.batch", desc + "n\"layer*0\"\n");
    const std::string graph = write_temp("relu.qg", "x = Parameter f32[1,4]\ny = Relu(x)\nr = Result(y)\n");
    expect_bad_inputs({
        {"", {"matmul", "m?5k64n64"}, "'m?5k64n64'"},
        {"", {"matmul", "k6m?4n64"}, "'k6m?4n64'"},
        {"", {"matmul", "--bias=abc", "--dq=2", "m1k64n64"}, "--bias: expected 1 or 0 (got 'abc')"},
        {"", {"matmul", "--dq=2", "m1k64n64"}, "--dq: expected 1 or 0 (got '2')"},
        {"", {"graph", "--dq=2", graph}, "--dq: expected 1 or 0 (got '2')"},
        {"", {"conv", "--post-ops=clip:6:0", desc}, "post_ops[0].alpha: clip's lower bound 6 is above"},
        {"", {"conv", desc + "n\"layer*-3\""}, "the count *N must be in [1, 1000000] (got '*-3')"},
        {"", {"conv", "--batch=" + zero_count}, ":1: name \"layer*0\": the count *N must be in [1, 1000000]"},
    });
    std::remove(zero_count.c_str());
    std::remove(graph.c_str());
}

// Were findings: std::bad_alloc (exit status 1) instead of a named refusal.
// Every problem below is valid and under the format's limits; the driver now
// refuses what it would hold for it (max_problem_bytes, 32 GiB, and the
// machine's memory) before generating any data, and the graph reader what a
// run needs (graph::max_run_bytes, 4 GiB) before allocating anything.
TEST(HostileDriver, ProblemsBeyondMemoryAreRefusedByName) {
    const std::string big = write_temp("big_parameter.qg", "x = Parameter f32[1,4096,4096,32]\nr = Result(x)\n");
    const std::string ffn = write_temp("huge_constant_ffn.qg", huge_constant_ffn());
    expect_bad_inputs({
        {"", {"conv", "ic2147483648ih5oc4kh3"}, "problem 'ic2147483648ih5oc4kh3': wei: the problem's data"},
        {"", {"conv", "mb1ic16ih100000oc16kh1"}, "problem 'mb1ic16ih100000oc16kh1': dst: the problem's data"},
        {"", {"matmul", "m1k99999999999n1"}, "problem 'm1k99999999999n1': wei: the problem's data"},
        {"", {"matmul", "m100000k100000n100000"}, "problem 'm100000k100000n100000': y: the problem's data"},
        {"", {"graph", big}, "line 1: running the graph (largest tensor: 'x' f32[1,4096,4096,32]"},
        {"", {"graph", ffn}, "line 32: Multiply 'w2_s': shapes [1024,32,128,1,1] and [1024,32,65536,1,1]"},
    });
    std::remove(big.c_str());
    std::remove(ffn.c_str());
}

// Were findings: messages that named the wrong thing.
TEST(HostileDriver, MessagesNameWhatIsWrong) {
    expect_bad_inputs({
        {"",
         {"conv", "--report=table", "--report-dir=/dev/null/x", "mb1ic4ih5oc4kh3ph1"},
         "--report-dir: cannot create '/dev/null/x'"},
        {"",
         {"matmul", "--group=99999999999999999999", "m1k64n64"},
         "--group: 99999999999999999999 is out of range (it overflows a 64-bit integer)"},
        {"", {"matmul", "m??k64n64"}, "unexpected character '?' at offset 2 in 'm??k64n64'"},
    });
}
