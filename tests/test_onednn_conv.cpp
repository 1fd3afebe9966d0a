// The oneDNN brgconv wrapper against the reference.
//
// The sweep runs every brgconv row (AMX and VNNI, 1x1 and general) that
// accepts a problem over the ResNet-50 and MobileNet layers at mb1 and a
// reduced spatial size (ih ≤ 7) × {no zp, per-tensor zp} × {none, relu,
// per-OC binary add, per-channel FakeQuantize, ScaleShift, sum} × dst {u8, s8,
// f32}, with the default (exact) data: power-of-two scales, so the wrapper
// passes bias/scale as oneDNN's bias and every output must equal the
// reference bit for bit. The reference accumulators are computed once per
// (layer, zp) and the reference pipeline applied per chain.
// Where oneDNN offers no brgconv for a case (3x3 with a zero point,
// depthwise, a capped ISA) the case is counted as unsupported; a suite in
// which nothing ran is skipped.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "dispatch/host_platform.h"
#include "kernels/onednn/onednn_conv.h"
#include "kernels/onednn/onednn_f32.h"
#include "reference/reference.h"
#include "tests/support/conv_tester.h"
#include "tests/support/expect_error.h"
#include "tests/support/testdata.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace qconv {
namespace {

using impl::onednn::selector;

// One OpenMP thread by default: on a shared 2-core machine, 2-thread barriers
// make the sweep several times slower. ThreadCountsAndConcurrentExecution
// passes its thread counts explicitly.
class one_thread_env : public ::testing::Environment {
public:
    void SetUp() override {
#ifdef _OPENMP
        omp_set_num_threads(1);
#endif
    }
};
const auto *const one_thread = ::testing::AddGlobalTestEnvironment(new one_thread_env);
using testdata::data_kind;

// Whether the platform has every feature of a (simulated) CPU at `level`
// that oneDNN's int8 kernels use.
bool has_level(const impl::platform &pl, isa level) {
    impl::feature_set f = impl::level_features(level);
    f.remove(impl::cpu_feature::avx512_bf16);
    return pl.has_all(f);
}

const std::vector<selector> &brg_rows() {
    static const std::vector<selector> rows = {
        selector::brgconv("brgconv_1x1", isa::avx512_core_amx),
        selector::brgconv("brgconv", isa::avx512_core_amx),
        selector::brgconv("brgconv_1x1", isa::avx512_core_vnni),
        selector::brgconv("brgconv", isa::avx512_core_vnni),
    };
    return rows;
}

// A layer at mb1 with ih, iw capped at `cap`; output size and bottom/right
// pads derived as benchdnn does (symmetric padding, floor division).
conv_desc reduce(conv_desc d, int64_t cap) {
    d.mb = 1;
    d.name.clear();
    auto fit = [](int64_t &i, int64_t &o, int64_t p0, int64_t &p1, int64_t ext, int64_t s, int64_t cap) {
        i = std::max(std::min(i, cap), ext);
        o = (i + 2 * p0 - ext) / s + 1;
        p1 = (o - 1) * s + ext - i - p0;
    };
    fit(d.ih, d.oh, d.pt, d.pb, d.kh_extent(), d.sh, cap);
    fit(d.iw, d.ow, d.pl, d.pr, d.kw_extent(), d.sw, cap);
    d.validate();
    return d;
}

std::vector<conv_desc> load_shapes(const std::string &file, int64_t cap) {
    std::ifstream in(std::string(QCONV_SOURCE_DIR) + "/bench/shapes/" + file);
    EXPECT_TRUE(in.good()) << file;
    std::vector<conv_desc> out;
    std::set<std::string> seen;
    std::string line;
    while (std::getline(in, line)) {
        const size_t hash = line.find('#');
        if (hash != std::string::npos) line.resize(hash);
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const conv_desc d = reduce(conv_desc::parse(line), cap);
        if (seen.insert(d.str()).second) out.push_back(d);
    }
    return out;
}

// Input data and reference accumulators for one (layer, src type, zp).
struct layer_data {
    conv_problem base;
    std::vector<uint8_t> src;
    std::vector<int8_t> wei;
    std::vector<float> bias;
    std::vector<int32_t> acc;
};

layer_data make_layer(const conv_desc &d, dtype src_dt, bool zp, uint32_t seed) {
    layer_data L;
    conv_problem &p = L.base;
    p.desc = d;
    p.src_dt = src_dt;
    p.scales = testdata::make_scales(d.oc, false, seed);
    p.with_bias = true;
    if (zp) p.src_zp = testdata::make_zp("tensor:random", d.ic, src_dt, data_kind::random, seed);
    L.src = testdata::make_src(p, data_kind::random, seed);
    L.wei = testdata::make_weights(d, data_kind::random, seed);
    L.bias = testdata::make_bias(d, seed);
    L.acc.resize(static_cast<size_t>(d.dst_elems()));
    ref::conv_acc(p, zp ? zp_mechanism::stock_per_tensor : zp_mechanism::none, p.src_zp.values, L.src.data(),
                  L.wei.data(), L.acc.data());
    return L;
}

attr_set stock_attr(const conv_problem &p, bool legacy_ops = false) {
    attr_set a;
    a.id = 1;
    if (p.src_zp.k != zero_point::kind::none) {
        a.zp = zp_mechanism::stock_per_tensor;
        a.zp_values = {p.src_zp.values[0]};
    }
    const bool f32 = p.dst_dt == dtype::f32;
    a.ops = legacy_ops ? lower_legacy(p.ops, p.desc.oc, f32) : lower_stock(p.ops, p.desc.oc, f32);
    return a;
}

// Reference destination from precomputed accumulators (ref::conv's pipeline loop).
std::vector<uint8_t> reference_dst(const layer_data &L, const conv_problem &p, const attr_set &a,
                                   const std::vector<uint8_t> &dst_init, const exec_args &args) {
    std::vector<uint8_t> out(dst_init);
    bool has_sum = false;
    for (const auto &op : a.ops) has_sum = has_sum || op.k == lowered_op::kind::sum;
    for (int64_t i = 0; i < p.desc.dst_elems(); ++i) {
        const float prev = has_sum ? ref::load(p.dst_dt, dst_init.data(), i) : 0.f;
        ref::store(p.dst_dt, out.data(), i,
                   ref::apply_pipeline(p, a.ops, L.acc[i], L.bias.data(), i % p.desc.oc, i, prev, args));
    }
    return out;
}

struct case_data {
    std::vector<uint8_t> dst_init;
    std::vector<std::vector<float>> full;
    exec_args args;
};

case_data make_case(const conv_problem &p, uint32_t seed) {
    case_data c;
    c.dst_init = testdata::make_dst(p, seed);
    c.full = testdata::make_binary_tensors(p, seed);
    for (const auto &t : c.full) c.args.binary.push_back(t.data());
    return c;
}

// One problem for the wrappers: layer data, destination type, the chain's
// stock attribute set (or its legacy ops in attr[1]), the case data and the
// reference destination.
struct wrapper_case {
    layer_data L;
    conv_problem p;
    attr_set a;
    case_data c;
    std::vector<uint8_t> want;
};

struct wrapper_spec {
    std::string desc, chain;
    dtype src = dtype::u8, dst = dtype::u8;
    bool zp = false;
    bool legacy_ops = false; // attr[1] carrying legacy ops (the AMX per-tensor-zp workaround)
    int32_t dst_zp = 0;
};

wrapper_case make_wrapper_case(const wrapper_spec &s, uint32_t seed) {
    wrapper_case w;
    const conv_desc d = conv_desc::parse(s.desc);
    w.L = make_layer(d, s.src, s.zp, seed);
    w.p = w.L.base;
    w.p.dst_dt = s.dst;
    w.p.dst_zp = s.dst_zp;
    w.p.ops = testdata::make_post_ops(s.chain, d.oc, seed);
    w.a = stock_attr(w.p, s.legacy_ops);
    w.c = make_case(w.p, seed);
    w.want = reference_dst(w.L, w.p, w.a, w.c.dst_init, w.c.args);
    return w;
}

// Runs the wrapper with `sel` (if it accepts); returns the destination.
bool run_wrapper(const selector &sel, const layer_data &L, const conv_problem &p, const attr_set &a, const case_data &c,
                 std::vector<uint8_t> *dst, std::string *why, std::string *info = nullptr, int threads = 0) {
    if (!impl::onednn::supports(sel, p, a, impl::host_platform(), why)) return false;
    const auto k = impl::onednn::create(sel, p, a, impl::host_platform());
    if (info) *info = impl::onednn::impl_info(*k);
    const auto w = k->pack(L.wei.data(), L.bias.data());
    *dst = c.dst_init;
    exec_args args = c.args;
    args.threads = threads;
    k->execute(*w, L.src.data(), dst->data(), args);
    return true;
}

bool run_wrapper(const selector &sel, const wrapper_case &t, std::vector<uint8_t> *dst, std::string *why,
                 std::string *info = nullptr) {
    return run_wrapper(sel, t.L, t.p, t.a, t.c, dst, why, info);
}

// First differing element, described.
std::string first_diff(const conv_problem &p, const std::vector<uint8_t> &got, const std::vector<uint8_t> &want) {
    const int64_t n = p.desc.dst_elems();
    for (int64_t i = 0; i < n; ++i) {
        const float g = ref::load(p.dst_dt, got.data(), i), w = ref::load(p.dst_dt, want.data(), i);
        if (std::memcmp(&g, &w, sizeof g) != 0)
            return "element " + std::to_string(i) + " (oc " + std::to_string(i % p.desc.oc) + "): got " +
                   std::to_string(g) + ", want " + std::to_string(w);
    }
    return "";
}

struct sweep_stats {
    int ran = 0, unsupported = 0, failed = 0;
    std::map<std::string, int> by_impl;
};

void sweep(const std::string &file) {
    const std::vector<std::string> chains = {"", "relu", "add:per_oc", "fq:per_channel", "scale_shift", "sum"};
    const std::vector<dtype> dsts = {dtype::u8, dtype::s8, dtype::f32};
    sweep_stats st;
    uint32_t seed = 1;
    for (const conv_desc &d : load_shapes(file, 7)) {
        for (bool zp : {false, true}) {
            ++seed;
            const dtype src_dt = seed % 3 == 0 ? dtype::s8 : dtype::u8;
            const layer_data L = make_layer(d, src_dt, zp, seed);
            for (const auto &chain : chains)
                for (dtype dst : dsts) {
                    conv_problem p = L.base;
                    p.dst_dt = dst;
                    p.ops = testdata::make_post_ops(chain, d.oc, seed);
                    const attr_set a = stock_attr(p);
                    const case_data c = make_case(p, seed);
                    const std::vector<uint8_t> want = reference_dst(L, p, a, c.dst_init, c.args);
                    bool any = false;
                    for (const selector &sel : brg_rows()) {
                        std::vector<uint8_t> got;
                        std::string why, info;
                        if (!run_wrapper(sel, L, p, a, c, &got, &why, &info)) continue;
                        any = true;
                        ++st.ran;
                        ++st.by_impl[info];
                        if (got != want) {
                            ++st.failed;
                            ADD_FAILURE() << sel.row_name() << " (" << info << ") " << d.str() << " src "
                                          << to_string(src_dt) << " zp " << zp << " chain '" << chain << "' dst "
                                          << to_string(dst) << ": " << first_diff(p, got, want);
                        }
                    }
                    if (!any) ++st.unsupported;
                }
        }
    }
    std::string summary = "ran " + std::to_string(st.ran) + ", unsupported " + std::to_string(st.unsupported);
    for (const auto &kv : st.by_impl) summary += "; " + kv.first + " " + std::to_string(kv.second);
    std::printf("[ %s ] %s\n", file.c_str(), summary.c_str());
    ::testing::Test::RecordProperty("summary", summary);
    if (st.ran == 0) GTEST_SKIP() << "oneDNN offers no brgconv on this machine / ISA cap";
    // No zero point, no groups: oneDNN 2.6 has brgconv for every such layer.
    EXPECT_GT(st.ran, st.unsupported);
}

TEST(OnednnBrgconv, ResNet50MatchesReference) { sweep("shapes_resnet_50"); }
TEST(OnednnBrgconv, MobileNetMatchesReference) { sweep("shapes_mobilenet"); }

// A few layers, brgconv rows only, with a given chain lowered either way.
int run_small(const wrapper_spec &s, uint32_t seed) {
    const wrapper_case w = make_wrapper_case(s, seed);
    const conv_problem &p = w.p;
    const attr_set &a = w.a;
    const std::vector<uint8_t> &want = w.want;
    int ran = 0;
    std::string whys;
    for (const selector &sel : brg_rows()) {
        std::vector<uint8_t> got;
        std::string why, info;
        if (!run_wrapper(sel, w, &got, &why, &info)) {
            whys += "\n  " + sel.row_name() + ": " + why;
            continue;
        }
        ++ran;
        EXPECT_EQ(first_diff(p, got, want), "")
            << sel.row_name() << " (" << info << ") " << s.desc << " '" << s.chain << "' " << a.str();
    }
    if (ran == 0 && std::getenv("QCONV_TEST_VERBOSE"))
        std::printf("unsupported: %s '%s' dst %s zp %d:%s\n", s.desc.c_str(), s.chain.c_str(), to_string(s.dst), s.zp,
                    whys.c_str());
    return ran;
}

// Every chain on every spec (its chain replaced), seeds from seed + 1 on;
// returns how many (chain, spec, row) runs there were.
int run_chains(const std::vector<std::string> &chains, std::vector<wrapper_spec> specs, uint32_t seed) {
    int ran = 0;
    for (const auto &chain : chains)
        for (wrapper_spec &s : specs) {
            s.chain = chain;
            ran += run_small(s, ++seed);
        }
    return ran;
}

TEST(OnednnBrgconv, LegacyOpsInAttr1AreConverted) {
    // attr[1] with legacy post-ops + stock per-tensor zp: the AMX workaround of docs/dispatch.md's tables.
    const int ran = run_chains({"fq:per_channel", "fq:per_tensor", "scale_shift", "scale_shift:per_tensor;relu",
                                "prelu:per_tensor", "fq:per_channel:16"},
                               {{"mb1ic64ih7oc48kh1", "", dtype::u8, dtype::u8, false, true},
                                {"mb1ic64ih7oc48kh1", "", dtype::u8, dtype::u8, true, true},
                                {"mb1ic64ih7oc48kh1", "", dtype::u8, dtype::f32, false, true},
                                {"mb1ic64ih7oc48kh1", "", dtype::u8, dtype::f32, true, true}},
                               100);
    if (ran == 0) GTEST_SKIP() << "no brgconv here";
    EXPECT_GE(ran, 24);
}

TEST(OnednnBrgconv, OtherPostOpsAndDstZeroPoint) {
    const std::vector<std::string> chains = {"mul:per_tensor", "sub:per_oc;min:per_oc", "div:per_tensor",
                                             "sum:0.5:3",      "clip:0:6;linear:2:1",   "abs;square"};
    // Whether oneDNN offers brgconv for the 3x3 s8 case depends on the CPU
    // (its heuristics); the 1x1 u8 case has a brgconv row wherever brgconv exists.
    int ran = 0, ran_1x1 = 0;
    uint32_t seed = 200;
    for (const auto &chain : chains)
        for (dtype dst : {dtype::u8, dtype::s8, dtype::s32, dtype::f32}) {
            ran += run_small({"mb2ic32ih6oc40oh6kh3ph1", chain, dtype::s8, dst, false, false, 0}, ++seed);
            ran_1x1 += run_small({"mb1ic48ih5oc16kh1", chain, dtype::u8, dst, true, false, -3}, ++seed) > 0;
        }
    if (ran + ran_1x1 == 0) GTEST_SKIP() << "no brgconv here";
    EXPECT_EQ(ran_1x1, 24) << "every 1x1 case has a brgconv row";
}

// Per-OC PReLU maps to oneDNN's prelu post-op (weights arg); oneDNN 2.6 has it
// in ref_int8 only, so the brgconv rows decline and `onednn:any` runs it.
TEST(OnednnAny, PerChannelPreluPostOp) {
    for (bool legacy : {false, true}) {
        const wrapper_case t =
            make_wrapper_case({"mb1ic16ih5oc24kh3ph1", "prelu;relu:0.5", dtype::u8, dtype::f32, true, legacy}, 41);
        std::string why, info;
        for (const selector &sel : brg_rows())
            EXPECT_FALSE(impl::onednn::supports(sel, t.p, t.a, impl::host_platform(), &why)) << why;
        std::vector<uint8_t> got;
        ASSERT_TRUE(run_wrapper(selector::any(), t, &got, &why, &info)) << why;
        EXPECT_EQ(first_diff(t.p, got, t.want), "") << info << " " << t.a.str();
    }
}

// Full-tensor binary operands (runtime DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) |
// DNNL_ARG_SRC_1): oneDNN 2.6 has no brgconv for them (the rows say so and
// list what oneDNN offers); `onednn:any` runs them on its jit kernels, exactly.
TEST(OnednnAny, FullTensorBinaryOperands) {
    for (const std::string chain : {"max:full", "add:full;relu", "mul:per_oc;sub:full;sum"}) {
        const wrapper_case t = make_wrapper_case({"mb2ic32ih6oc40kh3ph1", chain, dtype::u8, dtype::s8}, 31);
        ASSERT_FALSE(t.c.args.binary.empty());
        std::vector<uint8_t> got;
        std::string why, info;
        for (const selector &sel : brg_rows()) {
            EXPECT_FALSE(impl::onednn::supports(sel, t.p, t.a, impl::host_platform(), &why)) << chain;
            EXPECT_NE(why.find(has_level(impl::host_platform(), sel.level) ? "offered:" : "lacks"), std::string::npos)
                << why;
        }
        ASSERT_TRUE(run_wrapper(selector::any(), t, &got, &why, &info)) << why;
        EXPECT_EQ(first_diff(t.p, got, t.want), "") << chain << " on " << info;
        // A missing operand is an error naming the field (checked once, by
        // convolution::execute, before any kernel runs).
        conv_hints h;
        h.impl = "onednn:any";
        const convolution conv(t.p, t.L.wei.data(), t.p.with_bias ? t.L.bias.data() : nullptr, h);
        test::expect_error_prefix([&] { conv.execute(t.L.src.data(), got.data(), exec_args{}); }, "binary");
    }
}

// oneDNN 2.6 runs a repeated eltwise algorithm with its first parameters;
// the wrapper rewrites repeats (clip_v2, binary max/min/mul/add).
TEST(OnednnBrgconv, RepeatedEltwiseAlgorithmsKeepTheirParameters) {
    const int ran = run_chains({"linear:2:1;linear:0.5:-3", "clip:-8:6;clip:1:4", "clip:-8:6;clip:1:4;clip:2:3",
                                "relu:0.5;linear:1:2;relu:0.25", "linear:0.5:1;fq:per_tensor",
                                "linear:4:0;linear:1:-2;linear:0.5:0"},
                               {{"mb1ic32ih5oc24kh1", "", dtype::u8, dtype::s8, false, false, 2},
                                {"mb1ic32ih5oc24kh3ph1", "", dtype::u8, dtype::s8, false, true},
                                {"mb1ic32ih5oc24kh1", "", dtype::u8, dtype::f32, false, false, 2},
                                {"mb1ic32ih5oc24kh3ph1", "", dtype::u8, dtype::f32, false, true}},
                               400);
    if (ran == 0) GTEST_SKIP() << "no brgconv here";
    EXPECT_GE(ran, 24);
}

TEST(OnednnBrgconv, PaddingStrideDilationGroupsOddChannels) {
    const std::vector<std::string> descs = {"mb1ic3ih9oc17kh3sh2ph1",    "mb1ic17ih5oc3kh3ph2",
                                            "mb1ic13ih8oc29kh3dh1ph2",   "mb1ic64ih7iw5oc65kh1sh2",
                                            "mb1ic24ih6oc24kh5ph2",      "g2mb1ic32ih6oc64kh3ph1",
                                            "mb1ic16ih1oc16kh3ph1",      "mb1ic8ih4oc8kh3ph3sh3",
                                            "mb1ic1000ih1oc5kh1",        "mb1ic64ih8oc32oh4kh1sh2",
                                            "mb1ic32ih9oc32oh4kh3sh2ph1"}; // negative bottom/right pads
    int ran = 0;
    uint32_t seed = 300;
    for (const auto &d : descs)
        for (bool zp : {false, true}) ran += run_small({d, "relu", dtype::u8, dtype::u8, zp, false, 0}, ++seed);
    if (ran == 0) GTEST_SKIP() << "no brgconv here";
    EXPECT_GE(ran, 9);
}

// Non-power-of-two scales: the bias becomes a binary add after scaling;
// integers within 1 of the reference (one extra rounding), f32 within 1e-6.
TEST(OnednnBrgconv, NonPowerOfTwoScalesBiasAsPostOp) {
    const conv_desc d = conv_desc::parse("mb1ic64ih7oc64kh3ph1");
    for (dtype dst : {dtype::u8, dtype::f32}) {
        layer_data L = make_layer(d, dtype::u8, false, 7);
        conv_problem p = L.base;
        p.dst_dt = dst;
        for (int64_t c = 0; c < d.oc; ++c) p.scales[c] = 0.01f + 0.003f * static_cast<float>(c);
        for (auto &b : L.bias) b += 0.37f;
        const attr_set a = stock_attr(p);
        const case_data c = make_case(p, 7);
        const auto want = reference_dst(L, p, a, c.dst_init, c.args);
        int ran = 0;
        for (const selector &sel : brg_rows()) {
            std::vector<uint8_t> got;
            std::string why;
            if (!run_wrapper(sel, L, p, a, c, &got, &why)) continue;
            ++ran;
            int64_t exact = 0;
            for (int64_t i = 0; i < d.dst_elems(); ++i) {
                const float g = ref::load(dst, got.data(), i), w = ref::load(dst, want.data(), i);
                if (dst == dtype::f32) {
                    EXPECT_NEAR(g, w, 1e-6 * std::max(1.f, std::fabs(w))) << i;
                } else {
                    EXPECT_LE(std::fabs(g - w), 1.f) << i;
                }
                exact += g == w;
            }
            // Integers: a one-ulp difference before rounding rarely moves the result.
            if (dst != dtype::f32) {
                EXPECT_GT(exact, d.dst_elems() * 99 / 100) << sel.row_name();
            }
        }
        if (ran == 0) GTEST_SKIP() << "no brgconv here";
    }
}

TEST(OnednnBrgconv, ThreadCountsAndConcurrentExecution) {
    // Large enough for a real scratchpad: a primitive planned for another
    // thread count would overrun it.
    const wrapper_case t = make_wrapper_case({"mb2ic64ih28oc64kh3ph1", "add:per_oc;relu"}, 11);
    int ran = 0;
    for (const selector &sel : brg_rows()) {
        std::string why;
        if (!impl::onednn::supports(sel, t.p, t.a, impl::host_platform(), &why)) continue;
        ++ran;
        const auto k = impl::onednn::create(sel, t.p, t.a, impl::host_platform());
        const auto w = k->pack(t.L.wei.data(), t.L.bias.data());
        for (int threads : {1, 2, 0}) {
            std::vector<uint8_t> got(t.want.size());
            exec_args args = t.c.args;
            args.threads = threads;
            k->execute(*w, t.L.src.data(), got.data(), args);
            EXPECT_EQ(got, t.want) << sel.row_name() << " threads " << threads;
        }
        std::atomic<int> bad{0};
        std::vector<std::thread> pool;
        for (int caller = 0; caller < 4; ++caller)
            pool.emplace_back([&, caller] {
                for (int rep = 0; rep < 5; ++rep) {
                    std::vector<uint8_t> got(t.want.size());
                    exec_args args = t.c.args;
                    args.threads = 1 + (caller + rep) % 2;
                    k->execute(*w, t.L.src.data(), got.data(), args);
                    if (got != t.want) ++bad;
                }
            });
        for (auto &th : pool) th.join();
        EXPECT_EQ(bad.load(), 0) << sel.row_name();
    }
    if (ran == 0) GTEST_SKIP() << "no brgconv here";
}

TEST(OnednnBrgconv, RejectionsCarryReasons) {
    const conv_desc d = conv_desc::parse("mb1ic16ih4oc16kh1");
    conv_problem p;
    p.desc = d;
    attr_set legacy_zp;
    legacy_zp.zp = zp_mechanism::legacy_per_channel;
    legacy_zp.zp_values.assign(16, 3);
    const impl::platform plat = impl::host_platform();
    std::string why;
    for (const selector &sel : brg_rows()) {
        EXPECT_FALSE(impl::onednn::supports(sel, p, legacy_zp, plat, &why));
        EXPECT_NE(why.find(has_level(plat, sel.level) ? "legacy zero point" : "lacks"), std::string::npos) << why;
    }
    EXPECT_FALSE(impl::onednn::supports(selector::any(), p, legacy_zp, plat, &why));
    EXPECT_NE(why.find("legacy zero point"), std::string::npos) << why;

    // attr[0] with legacy post-ops belongs to the JIT kernels.
    p.ops = testdata::make_post_ops("fq:per_channel", d.oc, 1);
    attr_set a0;
    a0.ops = lower_legacy(p.ops, d.oc, false);
    for (const selector &sel : brg_rows()) {
        EXPECT_FALSE(impl::onednn::supports(sel, p, a0, impl::platform{isa::avx512_core_amx}, &why));
        EXPECT_NE(why.find("attr[0]"), std::string::npos) << why;
    }
    // A platform below the row's ISA.
    EXPECT_FALSE(impl::onednn::supports(brg_rows()[2], p, stock_attr(p), impl::platform{isa::avx2}, &why));
    EXPECT_EQ(why, "platform avx2 lacks avx512_core+avx512_core_vnni");
    // A bf16 destination has no oneDNN int8 form here.
    p.ops.clear();
    p.dst_dt = dtype::bf16;
    EXPECT_FALSE(impl::onednn::supports(selector::any(), p, stock_attr(p), plat, &why));
    EXPECT_NE(why.find("dst_dt"), std::string::npos) << why;
}

// 3x3 with a source zero point: oneDNN 2.6 has no brgconv (jit_int8 only).
TEST(OnednnBrgconv, Conv3x3WithZeroPointIsUnsupportedWithTheOfferedList) {
    const conv_desc d = conv_desc::parse("mb1ic64ih7oc64kh3ph1");
    conv_problem p;
    p.desc = d;
    p.src_zp = zero_point::tensor(5);
    const attr_set a = stock_attr(p);
    std::string why;
    for (const selector &sel : brg_rows()) {
        if (!has_level(impl::host_platform(), sel.level)) continue;
        EXPECT_FALSE(impl::onednn::supports(sel, p, a, impl::host_platform(), &why)) << sel.row_name();
        EXPECT_NE(why.find("offered:"), std::string::npos) << why;
    }
}

TEST(OnednnAny, RunsWhateverOnednnPicksAndMatches) {
    const wrapper_case t = make_wrapper_case({"mb1ic32ih6oc48kh3ph1", "relu", dtype::u8, dtype::s8, true}, 21);
    std::vector<uint8_t> got;
    std::string why, info;
    ASSERT_TRUE(run_wrapper(selector::any(), t, &got, &why, &info)) << why;
    // The plan names the implementation the kernel then runs.
    const impl::plan_ptr pl = impl::onednn::supports(selector::any(), t.p, t.a, impl::host_platform(), &why);
    ASSERT_TRUE(pl) << why;
    EXPECT_EQ(pl->str().rfind("oneDNN " + info + " ", 0), 0u) << pl->str();
    EXPECT_FALSE(info.empty());
    // No saturation risk with the default data: the picked kernel is exact too.
    EXPECT_EQ(first_diff(t.p, got, t.want), "") << info;
}

TEST(OnednnImplInfo, ParsesOnednnNames) {
    std::string kind;
    isa level;
    ASSERT_TRUE(impl::onednn::parse_impl_info("brgconv_1x1:avx512_core_amx_int8", &kind, &level));
    EXPECT_EQ(kind, "brgconv_1x1");
    EXPECT_EQ(level, isa::avx512_core_amx);
    ASSERT_TRUE(impl::onednn::parse_impl_info("brg:avx512_core_vnni", &kind, &level));
    EXPECT_EQ(kind, "brgconv");
    EXPECT_EQ(level, isa::avx512_core_vnni);
    ASSERT_TRUE(impl::onednn::parse_impl_info("jit_uni_int8_1x1:avx2", &kind, &level));
    EXPECT_EQ(kind, "jit_uni_int8_1x1");
    EXPECT_EQ(level, isa::avx2);
    EXPECT_FALSE(impl::onednn::parse_impl_info("ref_int8:any", &kind, &level));
    EXPECT_FALSE(impl::onednn::parse_impl_info("x64:gemm_s8u8s32:jit", &kind, &level));
    EXPECT_EQ(selector::brgconv("brgconv_1x1", isa::avx512_core_vnni).row_name(),
              "onednn:brgconv_1x1:avx512_core_vnni");
    EXPECT_EQ(selector::any().row_name(), "onednn:any");
}

// Through the public API and the dispatcher, forced by row name.
TEST(OnednnBrgconv, ForcedByNameThroughTheApi) {
    int ran = 0;
    for (const selector &sel : brg_rows()) {
        // oneDNN 2.6 takes a source zero point in brgconv_1x1 on VNNI only.
        const bool zp = sel.kind == "brgconv_1x1" && sel.level == isa::avx512_core_vnni;
        test::ConvTester t;
        t.desc(sel.kind == "brgconv_1x1" ? "mb1ic64ih7oc32kh1" : "mb1ic32ih7oc32kh3ph1")
            .zp(zp ? "tensor:3" : "none")
            .post_ops("add:per_oc;relu")
            .dst(dtype::s8)
            .enforce_brgconv();
        if (!has_level(impl::host_platform(), sel.level)) continue;
        if (!t.run(sel.row_name())) return;
        EXPECT_EQ(t.impl_name(), sel.row_name());
        ++ran;
    }
    if (ran == 0) GTEST_SKIP() << "no brgconv here";
}

// ------------------------------------------------------------ f32 helpers
// f32 results within a relative 1e-5 of the magnitude sum Σ|x·w| (+|bias|):
// oneDNN's blocked summation order differs from the reference's.
void expect_close(const std::vector<float> &got, const std::vector<float> &want, const std::vector<float> &mag,
                  const std::string &what) {
    ASSERT_EQ(got.size(), want.size());
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
        if (std::fabs(got[i] - want[i]) > 1e-5f * std::max(mag[i], 1.f) && ++bad < 5)
            ADD_FAILURE() << what << " element " << i << ": got " << got[i] << ", want " << want[i];
}

std::vector<float> ramp(size_t n, uint32_t seed, float scale) {
    testdata::rng r(seed);
    std::vector<float> v(n);
    for (auto &x : v) x = static_cast<float>(r.uniform(-1000, 1000)) * scale;
    return v;
}

TEST(OnednnF32, ConvMatchesReference) {
    for (const std::string text :
         {"mb2ic17ih9oc23kh3ph1", "g4mb1ic32ih7oc16kh3sh2ph1", "mb1ic64ih5oc32kh1", "mb1ic8ih10oc8kh3dh1ph2"}) {
        const conv_desc d = conv_desc::parse(text);
        const auto src = ramp(static_cast<size_t>(d.src_elems()), 1, 1e-3f);
        const auto wei = ramp(static_cast<size_t>(d.wei_elems()), 2, 1e-3f);
        const auto bias = ramp(static_cast<size_t>(d.oc), 3, 1e-2f);
        std::vector<float> want(static_cast<size_t>(d.dst_elems())), got(want.size());
        ref::conv_f32(d, src.data(), wei.data(), bias.data(), want.data());
        // Magnitudes: the same conv on |src|, |wei|, |bias|.
        std::vector<float> asrc(src), awei(wei), abias(bias), mag(want.size());
        for (auto *v : {&asrc, &awei, &abias})
            for (auto &x : *v) x = std::fabs(x);
        ref::conv_f32(d, asrc.data(), awei.data(), abias.data(), mag.data());
        const impl::onednn::conv_f32 conv(d, wei.data(), bias.data());
        for (int threads : {1, 2}) {
            std::fill(got.begin(), got.end(), -7.f);
            conv.execute(src.data(), got.data(), threads);
            expect_close(got, want, mag, text + " on " + conv.impl_info());
        }
    }
}

TEST(OnednnF32, SgemmAndMatmulMatchReferenceOnDequantizedWeights) {
    for (const std::string text : {"m1k64n33", "m5k100n17", "m32k256n64"}) {
        matmul_desc d = matmul_desc::parse(text);
        d.wei_dt = dtype::u8;
        d.group = 32;
        d.zp = matmul_desc::zp_kind::per_group;
        d.with_bias = true;
        if (d.k % 32 != 0) d.group = 0;
        testdata::rng r(5);
        std::vector<uint8_t> wq(static_cast<size_t>(d.wei_bytes()));
        for (auto &b : wq) b = static_cast<uint8_t>(r.uniform(0, 255));
        std::vector<float> scale(static_cast<size_t>(d.scale_elems()));
        for (auto &s : scale) s = 0.001f * static_cast<float>(r.uniform(1, 16));
        std::vector<int32_t> zp(static_cast<size_t>(d.zp_elems()));
        for (auto &z : zp) z = r.uniform(0, 255);
        const auto bias = ramp(static_cast<size_t>(d.n), 6, 1e-2f);
        const auto x = ramp(static_cast<size_t>(d.m * d.k), 7, 1e-3f);
        matmul_weights w;
        w.wei = wq.data();
        w.scale = scale.data();
        w.zp = zp.data();
        w.bias = bias.data();
        std::vector<float> want(static_cast<size_t>(d.m * d.n)), got(want.size()), mag(want.size());
        ref::matmul(d, w, x.data(), want.data());
        const std::vector<float> deq = impl::onednn::dequantize(d, w);
        for (int64_t i = 0; i < d.m; ++i)
            for (int64_t j = 0; j < d.n; ++j) {
                float m = std::fabs(bias[j]);
                for (int64_t k = 0; k < d.k; ++k) m += std::fabs(x[i * d.k + k] * deq[j * d.k + k]);
                mag[i * d.n + j] = m;
            }
        impl::onednn::sgemm(d.m, d.n, d.k, x.data(), deq.data(), bias.data(), got.data(), 1);
        expect_close(got, want, mag, text + " sgemm");
        const impl::onednn::matmul_f32 mm(d.m, d.k, d.n, deq.data(), bias.data());
        std::fill(got.begin(), got.end(), 0.f);
        mm.execute(x.data(), got.data(), 2);
        expect_close(got, want, mag, text + " matmul " + mm.impl_info());
        // The table peers through the public API.
        for (const std::string name : {"onednn:matmul_f32:dequantized", "onednn:sgemm_f32:dequantized"}) {
            matmul_hints h;
            h.impl = name;
            const qconv::matmul prim(d, w, h);
            EXPECT_EQ(prim.impl_name(), name);
            std::fill(got.begin(), got.end(), 0.f);
            prim.execute(x.data(), got.data());
            expect_close(got, want, mag, text + " " + name);
        }
    }
}

} // namespace
} // namespace qconv
