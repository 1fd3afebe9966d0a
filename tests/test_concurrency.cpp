// Concurrency: primitives are created once and executed from many threads at
// the same time, each thread with its own buffers; the same and different
// primitives are created from many threads at once. Every result must equal,
// byte for byte, what one thread computes alone.
//
// Every row of conv_list() and matmul_list() that runs on this machine is
// covered (on a candidate problem it supports, tests/support/row_problems.h),
// peers included. The execute() calls use 1 or 2 OpenMP threads each, so
// OpenMP teams nest inside the std::threads as in a real server.
//
// Under ThreadSanitizer (README, "Reliability"; clean, no suppressions):
//   cmake -S . -B build-tsan -DQCONV_SANITIZE=thread -DQCONV_BUILD_BENCH=OFF
//   cmake --build build-tsan --target test_concurrency
//   OMP_NUM_THREADS=1 build-tsan/tests/test_concurrency
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "qconv/qconv.h"
#include "rows/row.h"
#include "tests/support/quick.h"
#include "tests/support/row_problems.h"
#include "tests/support/testdata.h"

using namespace qconv;

namespace {

constexpr int n_threads = 4;
int reps() { return test::quick_mode() ? 2 : 5; }

// OpenMP threads per execute(): 1 or 2 alternating. Under ThreadSanitizer
// always 1: GNU libgomp is not instrumented, so TSan cannot see the ordering
// its barriers give and reports every parallel loop as a race. With one
// OpenMP thread per call, what TSan checks is exactly this suite's subject:
// std::threads sharing one primitive (kernel, packed weights, caches).
#if defined(__SANITIZE_THREAD__)
constexpr bool tsan = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool tsan = true;
#else
constexpr bool tsan = false;
#endif
#else
constexpr bool tsan = false;
#endif
int omp_threads(int t, int r) { return tsan ? 1 : 1 + (t + r) % 2; }

// One input set per seed.
struct conv_io {
    std::vector<uint8_t> src, dst0;
    std::vector<std::vector<float>> binary;
    exec_args args(int threads) const {
        exec_args a;
        for (const auto &t : binary) a.binary.push_back(t.data());
        a.threads = threads;
        return a;
    }
};

conv_io make_io(const conv_problem &p, uint32_t seed) {
    return {testdata::make_src(p, testdata::data_kind::random, seed), testdata::make_dst(p, seed),
            testdata::make_binary_tensors(p, seed)};
}

// Runs body(t) on n_threads threads released together.
template <class F>
void run_together(F body) {
    std::atomic<int> ready{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < n_threads; ++t)
        ts.emplace_back([&, t] {
            ready.fetch_add(1);
            while (ready.load() < n_threads) std::this_thread::yield();
            body(t);
        });
    for (auto &t : ts) t.join();
}

} // namespace

// Each row: one primitive, threads execute it at once on different inputs.
TEST(Concurrency, ConvOnePrimitiveManyThreads) {
    int covered = 0;
    for (const auto &row : impl::conv_list()) {
        test::conv_candidate c;
        if (!test::find_conv_problem(row, &c)) continue;
        SCOPED_TRACE(row.name + " on " + c.p.desc.str());
        const auto wei = testdata::make_weights(c.p.desc, testdata::data_kind::random, 1);
        const auto bias = testdata::make_bias(c.p.desc, 1);
        const convolution conv(c.p, wei.data(), bias.data(), c.hints);
        ASSERT_EQ(conv.impl_name(), row.name);

        std::vector<conv_io> io;
        std::vector<std::vector<uint8_t>> want;
        for (int t = 0; t < n_threads; ++t) {
            io.push_back(make_io(c.p, 10 + uint32_t(t)));
            want.push_back(io.back().dst0);
            conv.execute(io.back().src.data(), want.back().data(), io.back().args(1));
        }
        std::vector<int> mismatches(n_threads, 0);
        run_together([&](int t) {
            for (int r = 0; r < reps(); ++r) {
                std::vector<uint8_t> got = io[size_t(t)].dst0;
                conv.execute(io[size_t(t)].src.data(), got.data(), io[size_t(t)].args(omp_threads(t, r)));
                if (got != want[size_t(t)]) ++mismatches[size_t(t)];
            }
        });
        for (int t = 0; t < n_threads; ++t) EXPECT_EQ(mismatches[size_t(t)], 0) << "thread " << t;
        std::printf("  %s on %s\n", row.name.c_str(), c.p.desc.str().c_str());
        ++covered;
    }
    EXPECT_GT(covered, 1) << "the reference and at least one other row must run";
}

TEST(Concurrency, MatmulOnePrimitiveManyThreads) {
    int covered = 0;
    for (const auto &row : impl::matmul_list()) {
        test::matmul_candidate c;
        if (!test::find_matmul_problem(row, &c)) continue;
        SCOPED_TRACE(row.name + " on " + c.d.key());
        const test::matmul_buffers w(c.d, 1);
        const matmul mm(c.d, w.weights(), c.hints);
        ASSERT_EQ(mm.impl_name(), row.name);
        std::vector<test::matmul_buffers> in;
        std::vector<std::vector<float>> want;
        for (int t = 0; t < n_threads; ++t) {
            in.emplace_back(c.d, 20 + unsigned(t));
            want.emplace_back(size_t(c.d.m * c.d.n));
            mm.execute(in.back().x.data(), want.back().data(), 1);
        }
        std::vector<int> mismatches(n_threads, 0);
        run_together([&](int t) {
            for (int r = 0; r < reps(); ++r) {
                std::vector<float> y(want[size_t(t)].size(), -1.f);
                mm.execute(in[size_t(t)].x.data(), y.data(), omp_threads(t, r));
                if (std::memcmp(y.data(), want[size_t(t)].data(), y.size() * sizeof(float)) != 0)
                    ++mismatches[size_t(t)];
            }
        });
        for (int t = 0; t < n_threads; ++t) EXPECT_EQ(mismatches[size_t(t)], 0) << "thread " << t;
        std::printf("  %s on %s\n", row.name.c_str(), c.d.key().c_str());
        ++covered;
    }
    EXPECT_GT(covered, 1);
}

// Threads create the same problem (cache contention) and different problems
// at once; each executes its own primitive; results equal a single-threaded
// primitive's.
TEST(Concurrency, CreateSameAndDifferentPrimitivesAtOnce) {
    const char *descs[n_threads] = {"mb1ic24ih6oc40kh3ph1", "mb1ic24ih6oc40kh3ph1", "mb2ic16ih5oc16kh1",
                                    "g16mb1ic16ih6oc16kh3ph1"};
    const char *ops[n_threads] = {"relu", "relu", "fq:per_channel", "add:per_oc"};
    std::vector<conv_problem> probs;
    for (int t = 0; t < n_threads; ++t) {
        conv_problem p;
        p.desc = conv_desc::parse(descs[t]);
        p.src_zp = testdata::make_zp(t % 2 ? "channel:random" : "tensor:4", p.desc.ic, dtype::u8,
                                     testdata::data_kind::random, 3);
        p.scales = testdata::make_scales(p.desc.oc, false, 3);
        p.with_bias = true;
        p.ops = testdata::make_post_ops(ops[t], p.desc.oc, 3);
        probs.push_back(p);
    }
    std::vector<std::vector<uint8_t>> want(n_threads), got(n_threads);
    std::vector<std::string> impl_want(n_threads), impl_got(n_threads);
    auto run_one = [&](int t, std::vector<uint8_t> &dst, std::string &impl) {
        const conv_problem &p = probs[size_t(t)];
        const auto wei = testdata::make_weights(p.desc, testdata::data_kind::random, 5);
        const auto bias = testdata::make_bias(p.desc, 5);
        const conv_io io = make_io(p, 5);
        const convolution conv(p, wei.data(), bias.data());
        dst = io.dst0;
        conv.execute(io.src.data(), dst.data(), io.args(1));
        impl = conv.impl_name();
    };
    for (int t = 0; t < n_threads; ++t) run_one(t, want[size_t(t)], impl_want[size_t(t)]);
    for (int r = 0; r < reps(); ++r) {
        run_together([&](int t) { run_one(t, got[size_t(t)], impl_got[size_t(t)]); });
        for (int t = 0; t < n_threads; ++t) {
            EXPECT_EQ(impl_got[size_t(t)], impl_want[size_t(t)]) << descs[t];
            EXPECT_TRUE(got[size_t(t)] == want[size_t(t)]) << descs[t] << " on " << impl_got[size_t(t)];
        }
    }

    // MatMul: the same descriptor from every thread.
    const matmul_desc d = [] {
        matmul_desc m = matmul_desc::parse("m4k256n64");
        m.wei_dt = dtype::u4;
        m.group = 64;
        m.zp = matmul_desc::zp_kind::per_group;
        return m;
    }();
    const test::matmul_buffers b(d, 9);
    std::vector<float> y_want(size_t(d.m * d.n));
    matmul(d, b.weights()).execute(b.x.data(), y_want.data(), 1);
    std::vector<int> bad(n_threads, 0);
    run_together([&](int t) {
        std::vector<float> y(y_want.size());
        const matmul mm(d, b.weights());
        mm.execute(b.x.data(), y.data(), 1);
        bad[size_t(t)] = std::memcmp(y.data(), y_want.data(), y.size() * sizeof(float)) != 0;
    });
    for (int t = 0; t < n_threads; ++t) EXPECT_EQ(bad[size_t(t)], 0) << "matmul thread " << t;
}
