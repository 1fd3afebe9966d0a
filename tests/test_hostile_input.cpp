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
//     qconv::error, not std::bad_alloc.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

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

// Was a finding (graph/text.cpp, fixed): `Constant u8[-1,4] fill(1)` reached
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

// Was a finding (graph/text.cpp, fixed): a 4 TiB Constant was allocated (std::bad_alloc).
TEST(HostileGraph, TerabyteConstant) {
    // 2^40 f32 elements = 4 TiB: refused before anything is allocated.
    expect_graph_error("c = Constant f32[1048576,1048576] fill(0)\nr = Result(c)\n", "line 1");
}

TEST(HostileGraph, MissingFile) {
    expect_error([] { graph::load_file("/nonexistent/dir/graph.qg"); }, "file", "cannot open");
}

TEST(HostileGraph, ExecutorWrongInputs) {
    const auto g = graph::parse("x = Parameter f32[1,4]\ny = Relu(x)\nr = Result(y)\n");
    const graph::compiled_graph cg(*g, 1);
    expect_error([&] { cg.run({}); }, "", "");
    graph::tensor t = graph::tensor::from_f32(graph::etype::f32, {2, 4}, std::vector<float>(8, 1.f));
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
driver_result run_driver(const std::vector<std::string> &args) {
    // One file per call and process: CTest runs these tests in parallel.
    static int calls = 0;
    const std::string err_path = ::testing::TempDir() + "hostile_driver_err_" + std::to_string(getpid()) + "_" +
                                 std::to_string(++calls) + ".txt";
    std::string cmd = std::string("timeout 120 ") + QCONV_DRIVER;
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
void expect_bad_input(const std::vector<std::string> &args, const std::string &detail) {
    const driver_result r = run_driver(args);
    std::string cmd;
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
