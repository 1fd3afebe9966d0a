// The kernel cache: create-once under concurrency, failure handling, LRU
// eviction, capacity 0, and the primitives built through it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "dispatch/attr_builder.h"
#include "dispatch/cache.h"
#include "dispatch/dispatcher.h"
#include "dispatch/host_platform.h"
#include "tests/support/testdata.h"

namespace qconv {
namespace {

using impl::kernel_cache;

kernel_cache::object make_int(int v) { return std::make_shared<const int>(v); }

TEST(KernelCache, ConcurrentCreatorsBuildOnce) {
    kernel_cache cache(16);
    std::atomic<int> builds{0};
    constexpr int n = 8;
    std::vector<kernel_cache::object> got(n);
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i)
        threads.emplace_back([&, i] {
            got[i] = cache.get_or_create("k", [&] {
                ++builds;
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
                return make_int(42);
            });
        });
    for (auto &t : threads) t.join();
    EXPECT_EQ(builds.load(), 1);
    for (int i = 0; i < n; ++i) {
        ASSERT_NE(got[i], nullptr);
        EXPECT_EQ(got[i].get(), got[0].get()) << "thread " << i << " got another instance";
        EXPECT_EQ(*static_cast<const int *>(got[i].get()), 42);
    }
    const auto st = cache.stats();
    EXPECT_EQ(st.misses, 1u);
    EXPECT_EQ(st.hits, static_cast<uint64_t>(n - 1));
    EXPECT_EQ(st.size, 1u);
}

TEST(KernelCache, FailedCreationIsNotCachedAndReachesWaiters) {
    kernel_cache cache(16);
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i)
        threads.emplace_back([&] {
            try {
                cache.get_or_create("bad", [] {
                    std::this_thread::sleep_for(std::chrono::milliseconds(30));
                    fail("impl", "cannot build");
                    return make_int(0);
                });
            } catch (const error &e) {
                if (std::string(e.what()) == "impl: cannot build") ++failures;
            }
        });
    for (auto &t : threads) t.join();
    EXPECT_EQ(failures.load(), 4);
    EXPECT_EQ(cache.stats().size, 0u);
    bool hit = true;
    auto v = cache.get_or_create(
        "bad", [] { return make_int(7); }, &hit);
    EXPECT_FALSE(hit);
    EXPECT_EQ(*static_cast<const int *>(v.get()), 7);
}

TEST(KernelCache, LeastRecentlyUsedIsEvicted) {
    kernel_cache cache(2);
    int builds = 0;
    auto get = [&](const std::string &k) {
        bool hit = false;
        cache.get_or_create(
            k,
            [&] {
                ++builds;
                return make_int(0);
            },
            &hit);
        return hit;
    };
    EXPECT_FALSE(get("a"));
    EXPECT_FALSE(get("b"));
    EXPECT_TRUE(get("a"));  // a is now the most recent
    EXPECT_FALSE(get("c")); // evicts b
    EXPECT_EQ(cache.stats().size, 2u);
    EXPECT_TRUE(get("a"));
    EXPECT_TRUE(get("c"));
    EXPECT_FALSE(get("b")); // rebuilt
    EXPECT_EQ(builds, 4);
    cache.set_capacity(1);
    EXPECT_EQ(cache.stats().size, 1u);
    EXPECT_TRUE(get("b")); // the most recent survives a shrink
}

TEST(KernelCache, CapacityZeroDisablesCaching) {
    kernel_cache cache(0);
    auto a = cache.get_or_create("k", [] { return make_int(1); });
    auto b = cache.get_or_create("k", [] { return make_int(1); });
    EXPECT_NE(a.get(), b.get());
    EXPECT_EQ(cache.stats().size, 0u);
    EXPECT_EQ(cache.stats().misses, 2u);
}

TEST(KernelCache, CapacityFromEnvironment) {
    const char *saved = std::getenv("QCONV_CACHE_CAPACITY");
    const std::string keep = saved ? saved : "";
    unsetenv("QCONV_CACHE_CAPACITY");
    EXPECT_EQ(impl::cache_capacity_from_env(), 1024u);
    setenv("QCONV_CACHE_CAPACITY", "7", 1);
    EXPECT_EQ(impl::cache_capacity_from_env(), 7u);
    setenv("QCONV_CACHE_CAPACITY", "lots", 1);
    try {
        impl::cache_capacity_from_env();
        ADD_FAILURE() << "no error";
    } catch (const error &e) {
        EXPECT_EQ(std::string(e.what()).rfind("QCONV_CACHE_CAPACITY", 0), 0u) << e.what();
    }
    if (saved) setenv("QCONV_CACHE_CAPACITY", keep.c_str(), 1);
    else unsetenv("QCONV_CACHE_CAPACITY");
}

// ----------------------------------------------- primitives through the cache

conv_problem small_problem() {
    conv_problem p;
    p.desc = conv_desc::parse("g1mb1ic13ih7oc9oh7kh3ph1");
    p.src_zp = zero_point::tensor(2);
    p.scales = testdata::make_scales(p.desc.oc, false, 1);
    p.with_bias = true;
    p.ops = testdata::make_post_ops("relu", p.desc.oc, 1);
    return p;
}

TEST(PrimitiveCache, ThreadsCreatingTheSamePrimitiveShareOneKernel) {
    const conv_problem p = small_problem();
    const auto plat = impl::host_platform();
    const auto choice = impl::select_conv(p, plat, {});
    kernel_cache::global().clear();

    constexpr int n = 6;
    std::vector<std::shared_ptr<const impl::conv_kernel>> kernels(n);
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i)
        threads.emplace_back([&, i] { kernels[i] = impl::cached_conv_kernel(choice, p, plat); });
    for (auto &t : threads) t.join();
    for (int i = 0; i < n; ++i) EXPECT_EQ(kernels[i].get(), kernels[0].get()) << choice.name << " thread " << i;
    EXPECT_EQ(kernel_cache::global().stats().misses, 1u);
}

TEST(PrimitiveCache, ConcurrentConvolutionsAgreeBitForBit) {
    const conv_problem p = small_problem();
    const auto w = testdata::make_weights(p.desc, testdata::data_kind::random, 3);
    const auto b = testdata::make_bias(p.desc, 3);
    const auto src = testdata::make_src(p, testdata::data_kind::random, 3);
    kernel_cache::global().clear();

    constexpr int n = 6;
    std::vector<std::vector<uint8_t>> out(n, std::vector<uint8_t>(p.desc.dst_elems()));
    std::vector<std::string> names(n);
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i)
        threads.emplace_back([&, i] {
            convolution c(p, w.data(), b.data());
            names[i] = c.impl_name();
            c.execute(src.data(), out[i].data());
        });
    for (auto &t : threads) t.join();
    const auto st = kernel_cache::global().stats();
    EXPECT_EQ(st.misses, 1u);
    EXPECT_EQ(st.hits, static_cast<uint64_t>(n - 1));
    for (int i = 1; i < n; ++i) {
        EXPECT_EQ(names[i], names[0]);
        EXPECT_EQ(out[i], out[0]) << "thread " << i;
    }
    // One primitive executed from several threads at once gives the same bytes.
    convolution shared(p, w.data(), b.data());
    std::vector<std::vector<uint8_t>> out2(n, std::vector<uint8_t>(p.desc.dst_elems()));
    threads.clear();
    for (int i = 0; i < n; ++i) threads.emplace_back([&, i] { shared.execute(src.data(), out2[i].data()); });
    for (auto &t : threads) t.join();
    for (int i = 0; i < n; ++i) EXPECT_EQ(out2[i], out[0]) << "thread " << i;
}

TEST(PrimitiveCache, DifferentProblemsGetDifferentKernels) {
    kernel_cache::global().clear();
    conv_problem p = small_problem();
    const auto w = testdata::make_weights(p.desc, testdata::data_kind::random, 3);
    const auto b = testdata::make_bias(p.desc, 3);
    convolution a(p, w.data(), b.data());
    p.src_zp = zero_point::tensor(5);
    convolution c(p, w.data(), b.data());
    p.ops = testdata::make_post_ops("relu;sum", p.desc.oc, 1);
    convolution d(p, w.data(), b.data());
    EXPECT_EQ(kernel_cache::global().stats().misses, 3u);
    EXPECT_EQ(kernel_cache::global().stats().hits, 0u);
}

} // namespace
} // namespace qconv
