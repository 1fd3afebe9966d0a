// W^X: no memory is ever writable and executable at once.
//
// Creates and executes every JIT kernel of the implementation tables (each
// row of conv_list() and matmul_list() whose name starts with "jit:", on a
// candidate problem it supports on this machine — tests/support/row_problems.h),
// keeps the primitives alive, then reads /proc/self/maps and requires that no
// mapping has both 'w' and 'x'. Rows added later are covered automatically.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "qconv/qconv.h"
#include "rows/row.h"
#include "tests/support/row_problems.h"
#include "tests/support/testdata.h"

using namespace qconv;

namespace {

// Mappings whose permissions contain both 'w' and 'x', one per line.
std::string writable_executable_mappings() {
    std::ifstream maps("/proc/self/maps");
    std::string line, bad;
    while (std::getline(maps, line)) {
        std::istringstream s(line);
        std::string range, perms;
        s >> range >> perms;
        if (perms.size() >= 3 && perms[1] == 'w' && perms[2] == 'x') bad += line + "\n";
    }
    return bad;
}

} // namespace

// The check can fail: a deliberately writable+executable page is reported.
TEST(WX, DetectorSeesAWritableExecutablePage) {
    void *p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) GTEST_SKIP() << "the kernel refuses RWX mappings here";
    const std::string bad = writable_executable_mappings();
    munmap(p, 4096);
    char addr[32];
    std::snprintf(addr, sizeof addr, "%lx-", static_cast<unsigned long>(reinterpret_cast<uintptr_t>(p)));
    EXPECT_NE(bad.find(addr), std::string::npos) << bad;
    EXPECT_EQ(writable_executable_mappings().find(addr), std::string::npos);
}

TEST(WX, NoWritableExecutableMappingAfterEveryJitKernel) {
    std::vector<std::unique_ptr<convolution>> convs;
    std::vector<std::unique_ptr<matmul>> mms;
    std::vector<std::string> created, skipped;

    for (const auto &row : impl::conv_list()) {
        if (row.family != qconv::impl::row_family::jit) continue;
        test::conv_candidate c;
        std::string why;
        if (!test::find_conv_problem(row, &c, &why)) {
            skipped.push_back(row.name + " (" + why + ")");
            continue;
        }
        const auto src = testdata::make_src(c.p, testdata::data_kind::random, 1);
        const auto wei = testdata::make_weights(c.p.desc, testdata::data_kind::random, 1);
        const auto bias = testdata::make_bias(c.p.desc, 1);
        const auto binary = testdata::make_binary_tensors(c.p, 1);
        auto dst = testdata::make_dst(c.p, 1);
        convs.push_back(std::make_unique<convolution>(c.p, wei.data(), bias.data(), c.hints));
        exec_args args;
        for (const auto &t : binary) args.binary.push_back(t.data());
        convs.back()->execute(src.data(), dst.data(), args);
        EXPECT_EQ(convs.back()->impl_name(), row.name);
        created.push_back(row.name);
    }
    for (const auto &row : impl::matmul_list()) {
        if (row.family != qconv::impl::row_family::jit) continue;
        test::matmul_candidate c;
        std::string why;
        if (!test::find_matmul_problem(row, &c, &why)) {
            skipped.push_back(row.name + " (" + why + ")");
            continue;
        }
        const test::matmul_buffers b(c.d, 1);
        std::vector<float> y(size_t(c.d.m * c.d.n));
        mms.push_back(std::make_unique<matmul>(c.d, b.weights(), c.hints));
        mms.back()->execute(b.x.data(), y.data());
        EXPECT_EQ(mms.back()->impl_name(), row.name);
        created.push_back(row.name);
    }

    std::string list;
    for (const auto &n : created) list += "  created " + n + "\n";
    for (const auto &n : skipped) list += "  not on this machine: " + n + "\n";
    ASSERT_FALSE(created.empty()) << "no JIT row runs here:\n" << list;
    EXPECT_EQ(writable_executable_mappings(), "") << "after creating and running:\n" << list;
    std::printf("%s", list.c_str());
}
