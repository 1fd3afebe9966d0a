// The platform the dispatcher decides for: an ISA level, plus AVX-VNNI (VEX
// vpdpbusd on ymm), which is not a step of the ladder: Alder Lake has it
// without AVX-512, Zen 4 has AVX-512 VNNI without it. Detection (cpu_features,
// XCR0, CPUID, the Linux AMX permission request) happens once per process;
// tests pass simulated platforms to the attr builder and the dispatcher
// instead (platform{level} has no AVX-VNNI; platform{level, true} has it).
#pragma once

#include <string>

#include "qconv/types.h"

namespace qconv::impl {

struct platform {
    isa level = isa::sse41;
    // AVX-VNNI usable: the CPU has it and the cap is at least avx2_vnni.
    // Rows using VEX vpdpbusd test this, never has(isa::avx2_vnni).
    bool avx_vnni = false;
    bool has(isa i) const { return level >= i; }
    bool amx() const { return level >= isa::avx512_core_amx; }
    bool vnni() const { return avx_vnni || level >= isa::avx512_core_vnni; }
    bool avx512() const { return level >= isa::avx512_core; }
    std::string str() const { return to_string(level); }
};

// What the CPU and OS support (uncapped), detected once.
isa detected_isa();
// Whether the CPU (and OS) support AVX-VNNI, detected once.
bool detected_avx_vnni();
// detected_isa() capped by QCONV_MAX_CPU_ISA / set_max_cpu_isa(); avx_vnni
// when detected and the cap is avx2_vnni or above.
platform host_platform();

} // namespace qconv::impl
