// The caller's thread pool (include/qconv/threadpool.h, core/parallel.h):
// every row of the conv and MatMul tables that runs on this CPU gives through
// a std::thread pool of 1 to 4 threads the same bytes as through OpenMP; two
// primitives execute at once on two callers' pools; a pool of 1 runs on the
// caller's thread without being called; nested regions run serially; the
// process-wide default pool and the graph executor run on the pool. Same
// bytes alone would not show that the pool ran anything (OpenMP gives them
// too): every run that may use more than one of the pool's threads must have
// called its run() (oneDNN rows excepted: they keep OpenMP), and one of a
// single thread must not have.
//
// Under AddressSanitizer and UndefinedBehaviorSanitizer:
//   cmake -S . -B build-asan -DQCONV_SANITIZE=address,undefined -DQCONV_BUILD_BENCH=OFF
//   cmake --build build-asan --target test_threadpool && build-asan/tests/test_threadpool
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/parallel.h"
#include "dispatch/dispatcher.h"
#include "dispatch/host_platform.h"
#include "qconv/graph.h"
#include "qconv/qconv.h"
#include "rows/row.h"
#include "tests/support/amx_emulator.h"
#include "tests/support/row_problems.h"
#include "tests/support/testdata.h"

namespace qconv {
namespace {

// A plain pool: `n` std::threads that take task indices from a shared
// counter; run() waits for them (the caller does not run tasks itself, so
// every task of a region of more than one is seen on a worker).
class std_pool final : public threadpool {
public:
    explicit std_pool(int n) : n_(n) {
        for (int i = 0; i < n; ++i) workers_.emplace_back([this] { work(); });
    }
    ~std_pool() override {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        for (auto &t : workers_) t.join();
    }
    int num_threads() const override { return n_; }
    void run(int n, const std::function<void(int)> &task) override {
        std::lock_guard<std::mutex> one_at_a_time(run_mu_);
        runs_.fetch_add(1);
        std::unique_lock<std::mutex> lock(mu_);
        task_ = &task;
        count_ = n;
        next_ = 0;
        left_ = n;
        ++generation_;
        cv_.notify_all();
        done_cv_.wait(lock, [&] { return left_ == 0; });
        task_ = nullptr;
    }
    // run() calls so far.
    int runs() const { return runs_.load(); }
    std::set<std::thread::id> worker_ids() const {
        std::set<std::thread::id> s;
        for (const auto &t : workers_) s.insert(t.get_id());
        return s;
    }

private:
    void work() {
        uint64_t seen = 0;
        std::unique_lock<std::mutex> lock(mu_);
        for (;;) {
            cv_.wait(lock, [&] { return stop_ || (generation_ != seen && next_ < count_); });
            if (stop_) return;
            while (next_ < count_) {
                const int i = next_++;
                const std::function<void(int)> *task = task_;
                lock.unlock();
                (*task)(i);
                lock.lock();
                if (--left_ == 0) done_cv_.notify_all();
            }
            seen = generation_;
        }
    }

    const int n_;
    std::vector<std::thread> workers_;
    std::mutex run_mu_, mu_;
    std::condition_variable cv_, done_cv_;
    const std::function<void(int)> *task_ = nullptr;
    int count_ = 0, next_ = 0, left_ = 0;
    uint64_t generation_ = 0;
    bool stop_ = false;
    std::atomic<int> runs_{0};
};

std::string param_name(const ::testing::TestParamInfo<std::string> &i) {
    std::string s = i.param;
    for (char &c : s)
        if (c == ':' || c == '-' || c == '.') c = '_';
    return s;
}

std::vector<std::string> conv_rows() {
    (void)test::amx_test_mode(); // links the AMX emulator: AMX rows run on AVX-512 CPUs without tiles
    std::vector<std::string> n;
    for (const auto &e : impl::conv_list()) n.push_back(e.name);
    return n;
}
std::vector<std::string> matmul_rows() {
    std::vector<std::string> n;
    for (const auto &e : impl::matmul_list()) n.push_back(e.name);
    return n;
}

// oneDNN rows run on oneDNN's OpenMP threads whatever the caller's pool
// (README, "Running on the caller's threads"); every other row's parallel
// loops run on it.
bool runs_on_callers_pool(impl::row_family f) { return f != impl::row_family::onednn; }

template <typename List>
const auto &entry_named(const List &list, const std::string &name) {
    for (const auto &e : list)
        if (e.name == name) return e;
    throw std::runtime_error("no row " + name);
}

// One conv row on its test problem: inputs, and the bytes of a run.
struct conv_case {
    test::conv_candidate c;
    std::vector<int8_t> wei;
    std::vector<float> bias;
    std::vector<uint8_t> src, dst0;
    std::vector<std::vector<float>> binary;
    std::unique_ptr<convolution> conv;

    bool make(const impl::conv_entry &row, std::string *why) {
        if (!test::find_conv_problem(row, &c, why)) return false;
        wei = testdata::make_weights(c.p.desc, testdata::data_kind::random, 3);
        bias = testdata::make_bias(c.p.desc, 3);
        src = testdata::make_src(c.p, testdata::data_kind::random, 4);
        dst0 = testdata::make_dst(c.p, 4);
        binary = testdata::make_binary_tensors(c.p, 4);
        conv = std::make_unique<convolution>(c.p, wei.data(), bias.data(), c.hints);
        return true;
    }
    std::vector<uint8_t> run(threadpool *pool = nullptr, int threads = 0) const {
        exec_args a;
        for (const auto &t : binary) a.binary.push_back(t.data());
        a.threads = threads;
        a.pool = pool;
        std::vector<uint8_t> dst = dst0;
        conv->execute(src.data(), dst.data(), a);
        return dst;
    }
};

class ConvRowOnPool : public ::testing::TestWithParam<std::string> {};

// Every row: a pool of 1..4 threads (as exec_args::pool, and as the
// thread's scope) gives OpenMP's bytes.
TEST_P(ConvRowOnPool, SameBytesAsOpenMP) {
    const impl::conv_entry &row = entry_named(impl::conv_list(), GetParam());
    conv_case k;
    std::string why;
    if (!k.make(row, &why)) GTEST_SKIP() << row.name << " runs no candidate problem here: " << why;
    ASSERT_EQ(k.conv->impl_name(), row.name);
    SCOPED_TRACE(row.name + " on " + k.c.p.desc.str());
    const std::vector<uint8_t> want = k.run();
    const bool on_pool = runs_on_callers_pool(row.family);
    for (int n = 1; n <= 4; ++n) {
        std_pool pool(n);
        // Each of the three runs of a pool of 2 or more calls its run() (a
        // runtime that ignored the caller's pool gives the same bytes through
        // OpenMP); a pool of 1 is never called.
        auto expect_used = [&](int before, const char *how) {
            if (n == 1) {
                EXPECT_EQ(pool.runs(), 0) << how << ": a pool of 1 is never called";
            } else if (on_pool) {
                EXPECT_GT(pool.runs(), before) << n << " threads, " << how << ": the pool was never called";
            }
        };
        int before = pool.runs();
        EXPECT_TRUE(k.run(&pool) == want) << n << " threads, exec_args::pool";
        expect_used(before, "exec_args::pool");
        {
            threadpool_scope scope(&pool);
            before = pool.runs();
            EXPECT_TRUE(k.run() == want) << n << " threads, threadpool_scope";
            expect_used(before, "threadpool_scope");
            before = pool.runs();
            EXPECT_TRUE(k.run(nullptr, 2) == want) << n << " threads, threads = 2";
            expect_used(before, "threadpool_scope, threads = 2");
        }
        // threads = 1: the caller's thread only, the pool untouched.
        before = pool.runs();
        EXPECT_TRUE(k.run(&pool, 1) == want) << n << " threads, exec_args::pool, threads = 1";
        EXPECT_EQ(pool.runs(), before) << n << " threads, threads = 1 called the pool";
    }
}

INSTANTIATE_TEST_SUITE_P(Table, ConvRowOnPool, ::testing::ValuesIn(conv_rows()), param_name);

class MatmulRowOnPool : public ::testing::TestWithParam<std::string> {};

TEST_P(MatmulRowOnPool, SameBytesAsOpenMP) {
    const impl::matmul_entry &row = entry_named(impl::matmul_list(), GetParam());
    test::matmul_candidate c;
    std::string why;
    if (!test::find_matmul_problem(row, &c, &why)) GTEST_SKIP() << row.name << " runs no candidate here: " << why;
    // N wide enough for every row to split it over several tasks (at the
    // candidate's N = 40 the AVX-512 rows have one panel and run serially).
    matmul_desc wide = c.d;
    wide.n = 296;
    if (row.supports(wide, c.hints, impl::host_platform(), nullptr)) c.d = wide;
    SCOPED_TRACE(row.name + " on " + c.d.key());
    const test::matmul_buffers w(c.d, 1), in(c.d, 2);
    const matmul mm(c.d, w.weights(), c.hints);
    ASSERT_EQ(mm.impl_name(), row.name);
    const size_t ny = static_cast<size_t>(c.d.m * c.d.n);
    std::vector<float> want(ny, -1.f);
    mm.execute(in.x.data(), want.data());
    const bool on_pool = runs_on_callers_pool(row.family);
    // ref:matmul ignores `threads`: its loop takes all of the runtime's threads.
    const bool honours_threads = row.family != impl::row_family::ref;
    for (int n = 1; n <= 4; ++n) {
        std_pool pool(n);
        threadpool_scope scope(&pool);
        for (int threads : {0, 2, 1}) {
            const int before = pool.runs();
            std::vector<float> y(ny, -1.f);
            mm.execute(in.x.data(), y.data(), threads);
            EXPECT_EQ(std::memcmp(y.data(), want.data(), ny * sizeof(float)), 0)
                << n << " threads in the pool, threads = " << threads;
            // Run on the scope's pool when it may use more than one thread of
            // it; on the caller's thread alone (never calling run()) otherwise.
            if (n == 1 || (threads == 1 && honours_threads)) {
                EXPECT_EQ(pool.runs(), before)
                    << n << " threads in the pool, threads = " << threads << ": called the pool for one task";
            } else if (on_pool && threads != 1) {
                EXPECT_GT(pool.runs(), before)
                    << n << " threads in the pool, threads = " << threads << ": the pool was never called";
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Table, MatmulRowOnPool, ::testing::ValuesIn(matmul_rows()), param_name);

// A JIT conv row and the first JIT MatMul row this CPU runs.
const impl::conv_entry *first_jit_conv() {
    for (const auto &e : impl::conv_list())
        if (e.name.rfind("jit:", 0) == 0) {
            test::conv_candidate c;
            if (test::find_conv_problem(e, &c)) return &e;
        }
    return nullptr;
}

TEST(Threadpool, TwoPrimitivesAtOnceOnTwoCallersPools) {
    const impl::conv_entry *row = first_jit_conv();
    if (!row) GTEST_SKIP() << "no JIT conv row runs here";
    conv_case k;
    ASSERT_TRUE(k.make(*row, nullptr));
    const matmul_desc d = [] {
        matmul_desc m = matmul_desc::parse("m8k512n256");
        m.wei_dt = dtype::u4;
        m.group = 128;
        m.zp = matmul_desc::zp_kind::per_group;
        return m;
    }();
    const test::matmul_buffers w(d, 1), in(d, 2);
    const matmul mm(d, w.weights());
    const std::vector<uint8_t> want_conv = k.run();
    std::vector<float> want_mm(static_cast<size_t>(d.m * d.n));
    mm.execute(in.x.data(), want_mm.data());

    std_pool pool_a(2), pool_b(3);
    std::atomic<int> bad_conv{0}, bad_mm{0};
    std::thread a([&] {
        for (int r = 0; r < 20; ++r)
            if (k.run(&pool_a) != want_conv) ++bad_conv;
    });
    std::thread b([&] {
        threadpool_scope scope(&pool_b);
        for (int r = 0; r < 20; ++r) {
            std::vector<float> y(want_mm.size());
            mm.execute(in.x.data(), y.data());
            if (std::memcmp(y.data(), want_mm.data(), y.size() * sizeof(float)) != 0) ++bad_mm;
        }
    });
    a.join();
    b.join();
    EXPECT_EQ(bad_conv.load(), 0) << row->name;
    EXPECT_EQ(bad_mm.load(), 0) << mm.impl_name();
    EXPECT_GT(pool_a.runs(), 0) << row->name << " never ran on its caller's pool";
    EXPECT_GT(pool_b.runs(), 0) << mm.impl_name() << " never ran on its caller's pool";
}

TEST(Threadpool, PoolOfOneRunsOnTheCallersThread) {
    std_pool pool(1);
    threadpool_scope scope(&pool);
    EXPECT_EQ(impl::default_threads(), 1);
    std::vector<std::thread::id> ids;
    impl::parallel(0, [&](int ithr, int nthr) {
        EXPECT_EQ(ithr, 0);
        EXPECT_EQ(nthr, 1);
        ids.push_back(std::this_thread::get_id());
    });
    impl::parallel_for(1000, [&](int64_t) {
        if (std::this_thread::get_id() != ids[0]) ids.push_back(std::this_thread::get_id());
    });
    ASSERT_EQ(ids.size(), 1u);
    EXPECT_EQ(ids[0], std::this_thread::get_id());
    // A primitive through it: the pool is never called.
    if (const impl::conv_entry *row = first_jit_conv()) {
        conv_case k;
        ASSERT_TRUE(k.make(*row, nullptr));
        k.run();
    }
    EXPECT_EQ(pool.runs(), 0);
}

TEST(Threadpool, TasksRunOnThePoolsThreadsAndNestedRegionsSerially) {
    std_pool pool(4);
    threadpool_scope scope(&pool);
    EXPECT_EQ(impl::default_threads(), 4);
    EXPECT_EQ(impl::resolve_threads(16), 4) << "never more tasks than the pool has threads";
    const std::set<std::thread::id> workers = pool.worker_ids();
    std::mutex mu;
    std::set<std::thread::id> seen;
    std::vector<int> inner(4, 0);
    impl::parallel(0, [&](int ithr, int nthr) {
        EXPECT_EQ(nthr, 4);
        EXPECT_TRUE(impl::in_parallel());
        EXPECT_EQ(impl::thread_index(), ithr);
        const std::thread::id me = std::this_thread::get_id();
        {
            std::lock_guard<std::mutex> lock(mu);
            seen.insert(me);
        }
        // Nested: one task, on this thread.
        impl::parallel(0, [&](int i, int n) {
            EXPECT_EQ(n, 1);
            EXPECT_EQ(i, 0);
            EXPECT_EQ(std::this_thread::get_id(), me);
            ++inner[static_cast<size_t>(ithr)];
        });
        EXPECT_EQ(impl::thread_index(), ithr) << "restored after the nested region";
    });
    EXPECT_FALSE(impl::in_parallel());
    EXPECT_EQ(inner, std::vector<int>(4, 1));
    for (const auto &id : seen) EXPECT_TRUE(workers.count(id)) << "a task ran off the pool";
    EXPECT_EQ(pool.runs(), 1);
}

TEST(Threadpool, TaskExceptionsReachTheCaller) {
    std_pool pool(3);
    threadpool_scope scope(&pool);
    EXPECT_THROW(impl::parallel(3,
                                [](int ithr, int) {
                                    if (ithr == 1) throw std::runtime_error("task 1");
                                }),
                 std::runtime_error);
    threadpool_scope openmp(nullptr);
    EXPECT_THROW(impl::parallel_for(100,
                                    [](int64_t i) {
                                        if (i == 57) throw std::runtime_error("57");
                                    }),
                 std::runtime_error);
}

TEST(Threadpool, DefaultPoolAndScopes) {
    ASSERT_EQ(default_threadpool(), nullptr);
    std_pool pool(2), other(3);
    set_default_threadpool(&pool);
    EXPECT_EQ(impl::active_pool(), &pool);
    {
        threadpool_scope s(&other);
        EXPECT_EQ(impl::active_pool(), &other);
        {
            threadpool_scope omp(nullptr);
            EXPECT_EQ(impl::active_pool(), nullptr) << "a null scope is OpenMP whatever the default";
        }
        EXPECT_EQ(impl::active_pool(), &other);
    }
    // Another thread sees the default.
    threadpool *seen = &other;
    std::thread([&] { seen = impl::active_pool(); }).join();
    EXPECT_EQ(seen, &pool);
    const matmul_desc d = matmul_desc::parse("m4k256n128");
    const test::matmul_buffers w(d, 1), in(d, 2);
    const matmul mm(d, w.weights());
    std::vector<float> y(static_cast<size_t>(d.m * d.n)), want(y.size());
    mm.execute(in.x.data(), y.data());
    set_default_threadpool(nullptr);
    mm.execute(in.x.data(), want.data());
    EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)), 0);
    EXPECT_GT(pool.runs(), 0) << mm.impl_name() << " did not run on the default pool";
    EXPECT_EQ(other.runs(), 0);
}

// A small transformer feed-forward block with u4 weights (the rewrite makes
// both layers compressed MatMuls) and elementwise ops above the graph's
// parallel threshold.
const char *ffn = R"(x = Parameter f32[1,1,64,512]
xt = Transpose(x) order=[0,3,1,2]
w1 = Constant u4[1024,4,128,1,1] random(1, 0, 15)
w1f = Convert(w1) to=f32
z1 = Constant u4[1024,4,1,1,1] random(2, 0, 15)
z1f = Convert(z1) to=f32
w1z = Subtract(w1f, z1f)
s1 = Constant f32[1024,4,1,1,1] random(3, 0.002, 0.02)
w1s = Multiply(w1z, s1)
w1r = Reshape(w1s) shape=[1024,512,1,1]
up = Convolution(xt, w1r) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
b1 = Constant f32[1,1024,1,1] random(4, -0.1, 0.1)
upb = Add(up, b1)
act = Gelu(upb)
w2 = Constant u4[512,8,128,1,1] random(5, 0, 15)
w2f = Convert(w2) to=f32
z2 = Constant u4[512,8,1,1,1] random(6, 0, 15)
z2f = Convert(z2) to=f32
w2z = Subtract(w2f, z2f)
s2 = Constant f32[512,8,1,1,1] random(7, 0.002, 0.02)
w2s = Multiply(w2z, s2)
w2r = Reshape(w2s) shape=[512,1024,1,1]
down = Convolution(act, w2r) strides=[1,1] pads_begin=[0,0] pads_end=[0,0] dilations=[1,1]
y = Transpose(down) order=[0,2,3,1]
out = Result(y)
)";

TEST(Threadpool, GraphExecutorRunsOnThePool) {
    auto g = graph::parse(ffn);
    graph::convert_weight_compressed_conv1x1_to_matmul(*g);
    const graph::compiled_graph cg(*g);
    const auto in = graph::random_inputs(*g, 11);
    const auto want = cg.run(in);
    for (int n : {1, 2, 4}) {
        std_pool pool(n);
        threadpool_scope scope(&pool);
        const auto got = cg.run(in);
        ASSERT_EQ(got.size(), want.size());
        EXPECT_TRUE(got[0].bytes == want[0].bytes) << n << " threads";
        if (n > 1) EXPECT_GT(pool.runs(), 0) << "the graph never used its caller's pool";
        else EXPECT_EQ(pool.runs(), 0);
    }
}

} // namespace
} // namespace qconv
