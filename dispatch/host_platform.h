// The platform of the machine qconv runs on: the features the CPU and OS
// support, detected once (cpu_features, XCR0, CPUID for AVX-VNNI and the AMX
// palette, the Linux XTILEDATA permission; dispatch/isa.cpp), and the same
// under the ISA cap (QCONV_MAX_CPU_ISA / set_max_cpu_isa()). Only dispatch/
// and the tests ask for it; rows are given a platform.
#pragma once

#include "rows/platform.h"

namespace qconv::impl {

// Whether the test suite's AMX emulator (tests/support/amx_emulator.h) is
// on in this process: it defines `extern "C" bool qconv_test_amx_emulated()`,
// which the library references weakly (never defined in the library). While on,
// the detected features (and so host_platform()) add amx_int8 and amx_bf16 on
// a host with AVX-512 VNNI and BF16, and a first detection made while on does
// not request the Linux AMX permission, so tile instructions trap into the emulator.
bool amx_emulated();

// What the CPU and OS support (uncapped), detected once.
isa detected_isa();
feature_set detected_features();
// The detected features and level under the cap (QCONV_MAX_CPU_ISA /
// set_max_cpu_isa()).
platform host_platform();

} // namespace qconv::impl
