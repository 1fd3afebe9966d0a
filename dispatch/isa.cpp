// ISA detection and the ISA cap.
//
// detected_isa() asks cpu_features (which also checks that the OS enables the
// AVX / AVX-512 / AMX register state in XCR0) once per process. Two things it
// does not know are read here: AVX-VNNI (CPUID.(EAX=7,ECX=1):EAX bit 4) and
// whether AMX may actually be used — that needs a non-zero tile palette
// (CPUID leaf 0x1D) and, on Linux, the permission to use the XTILEDATA state
// (arch_prctl ARCH_REQ_XCOMP_PERM, verified with ARCH_GET_XCOMP_PERM). Any
// failure along the AMX path means "no AMX"; nothing here can crash.
//
// The cap (QCONV_MAX_CPU_ISA, read once, or set_max_cpu_isa()) only lowers
// the level the dispatcher sees; max_cpu_isa() = min(detected, cap).
#include <atomic>
#include <cstdlib>
#include <mutex>

#include <cpuid.h>
#include <cpuinfo_x86.h>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "dispatch/platform.h"
#include "qconv/types.h"

namespace qconv {
namespace {

bool cpu_has_avx_vnni() {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid_max(0, nullptr) < 7) return false;
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    const unsigned max_subleaf = eax;
    if (max_subleaf < 1) return false;
    __cpuid_count(7, 1, eax, ebx, ecx, edx);
    return (eax >> 4) & 1u;
}

// CPUID leaf 0x1D subleaf 0: EAX = highest palette id; palette 1 is the one
// the AMX instructions use.
bool cpu_has_tile_palette() {
    if (__get_cpuid_max(0, nullptr) < 0x1D) return false;
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    __cpuid_count(0x1D, 0, eax, ebx, ecx, edx);
    return eax != 0;
}

// Linux refuses AMX instructions (SIGILL) until the process asks for the
// XTILEDATA state component.
bool os_grants_amx() {
#if defined(__linux__) && defined(SYS_arch_prctl)
    constexpr long arch_get_xcomp_perm = 0x1022;
    constexpr long arch_req_xcomp_perm = 0x1023;
    constexpr long xfeature_xtiledata = 18;
    if (syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) != 0) return false;
    unsigned long long bitmask = 0;
    if (syscall(SYS_arch_prctl, arch_get_xcomp_perm, &bitmask) != 0) return false;
    return (bitmask >> xfeature_xtiledata) & 1ull;
#else
    return false;
#endif
}

isa detect() {
    const cpu_features::X86Features f = cpu_features::GetX86Info().features;
    // Bitfields are signed 1-bit ints (-1 when set): test for truth only.
    const bool avx2 = f.avx2 && f.fma3;
    const bool avx512_core = f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl;
    if (!avx2) return isa::sse41;
    if (!avx512_core) return cpu_has_avx_vnni() ? isa::avx2_vnni : isa::avx2;
    if (!f.avx512vnni) return isa::avx512_core;
    if (!f.avx512_bf16) return isa::avx512_core_vnni;
    if (f.amx_int8 && f.amx_tile && cpu_has_tile_palette() && os_grants_amx()) return isa::avx512_core_amx;
    return isa::avx512_core_bf16;
}

constexpr int no_cap = static_cast<int>(isa::avx512_core_amx);

std::atomic<int> api_cap{-1}; // -1: not set through the API
std::once_flag env_once;
int env_cap = no_cap;

int environment_cap() {
    std::call_once(env_once, [] {
        const char *v = std::getenv("QCONV_MAX_CPU_ISA");
        if (v && *v) env_cap = static_cast<int>(parse_isa(v, "QCONV_MAX_CPU_ISA"));
    });
    return env_cap;
}

} // namespace

isa max_cpu_isa() {
    const int detected = static_cast<int>(impl::detected_isa());
    int cap = api_cap.load(std::memory_order_acquire);
    if (cap < 0) cap = environment_cap();
    return static_cast<isa>(detected < cap ? detected : cap);
}

void set_max_cpu_isa(isa cap) { api_cap.store(static_cast<int>(cap), std::memory_order_release); }

namespace impl {

isa detected_isa() {
    static const isa level = detect();
    return level;
}

bool detected_avx_vnni() {
    // AVX-VNNI is VEX-encoded ymm: it needs the AVX state (checked by the avx2 level).
    static const bool v = detected_isa() >= isa::avx2 && cpu_has_avx_vnni();
    return v;
}

platform host_platform() {
    const isa level = max_cpu_isa();
    return platform{level, level >= isa::avx2_vnni && detected_avx_vnni()};
}

} // namespace impl
} // namespace qconv
