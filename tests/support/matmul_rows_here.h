// The MatMul rows a test runs on this host. The platform is the CPU's under
// the ISA cap (QCONV_MAX_CPU_ISA / set_max_cpu_isa(); uncapped it is the
// detected one), so a capped run checks what a CPU of that level runs. A test
// looping over rows takes rows_here() first and, when it is empty, skips with
// why_none_here() (the features the rows lack) instead of passing with
// nothing checked:
//   const std::vector<std::string> rows = test::rows_here(jit_rows());
//   if (rows.empty()) GTEST_SKIP() << test::why_none_here(jit_rows());
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "dispatch/dispatcher.h"
#include "dispatch/host_platform.h"
#include "rows/row.h"

namespace qconv::test {

inline const impl::matmul_entry &matmul_row(const std::string &name) {
    for (const auto &e : impl::matmul_list())
        if (e.name == name) return e;
    throw std::runtime_error("no row " + name);
}

// The CPU's platform under the ISA cap.
inline impl::platform test_platform() { return impl::host_platform(); }

inline bool host_runs(const std::string &row) { return test_platform().has_all(matmul_row(row).needs); }

// Those of `rows` this host runs, in their order.
inline std::vector<std::string> rows_here(const std::vector<std::string> &rows) {
    std::vector<std::string> here;
    for (const std::string &r : rows)
        if (host_runs(r)) here.push_back(r);
    return here;
}

// Why none of `rows` runs here: "needs avx2, which this host lacks (platform
// sse41, QCONV_MAX_CPU_ISA=sse41): jit:matmul_wc_x8:avx2 lacks avx2, ...",
// naming first what the least demanding row lacks (rows are listed best
// first: the last of those lacking the fewest features).
inline std::string why_none_here(const std::vector<std::string> &rows) {
    const impl::platform p = test_platform();
    std::string least, each;
    size_t least_count = ~size_t(0);
    for (const std::string &r : rows) {
        const impl::feature_set &needs = matmul_row(r).needs;
        size_t count = 0;
        for (impl::cpu_feature f : impl::all_cpu_features) count += needs.has(f) && !p.has(f);
        const std::string lacks = p.features.missing(needs);
        if (count <= least_count) least_count = count, least = lacks;
        each += (each.empty() ? "" : ", ") + r + " lacks " + lacks;
    }
    const char *cap = std::getenv("QCONV_MAX_CPU_ISA");
    return "needs " + least + ", which this host lacks (platform " + p.str() +
           (cap && *cap ? std::string(", QCONV_MAX_CPU_ISA=") + cap : std::string()) + "): " + each;
}

} // namespace qconv::test
