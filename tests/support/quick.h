// Reduced test sizes for slow configurations.
//
// scripts/sanitize.sh runs the whole CTest suite under AddressSanitizer with
// QCONV_TEST_QUICK=1. Big shape sweeps call quick_mode() and then run a
// representative subset (e.g. every 4th shape, or smaller spatial sizes) so
// that the sanitizer step stays inside its time budget. Correctness checks
// themselves never change: only how many cases run.
#pragma once

#include <cstdlib>
#include <cstring>

namespace qconv::test {

// True when QCONV_TEST_QUICK is set to something other than "" or "0".
inline bool quick_mode() {
    const char *v = std::getenv("QCONV_TEST_QUICK");
    return v && *v && std::strcmp(v, "0") != 0;
}

// Keeps every `stride`-th case in quick mode, all of them otherwise:
//   for (size_t i = 0; i < shapes.size(); ++i) { if (!keep_case(i)) continue; ... }
inline bool keep_case(size_t index, size_t stride = 4) { return !quick_mode() || index % stride == 0; }

} // namespace qconv::test
