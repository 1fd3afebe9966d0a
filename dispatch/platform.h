// The platform the dispatcher decides for: an ISA level. Detection (cpu_features,
// XCR0, the Linux AMX permission request) happens once per process; tests pass
// simulated platforms to the attr builder and the dispatcher instead.
#pragma once

#include <string>

#include "qconv/types.h"

namespace qconv::impl {

struct platform {
    isa level = isa::sse41;
    bool has(isa i) const { return level >= i; }
    bool amx() const { return level >= isa::avx512_core_amx; }
    bool vnni() const { return level == isa::avx2_vnni || level >= isa::avx512_core_vnni; }
    bool avx512() const { return level >= isa::avx512_core; }
    std::string str() const { return to_string(level); }
};

// What the CPU and OS support (uncapped), detected once.
isa detected_isa();
// detected_isa() capped by QCONV_MAX_CPU_ISA / set_max_cpu_isa().
platform host_platform();

} // namespace qconv::impl
