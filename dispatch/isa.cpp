// ISA detection and the ISA cap.
//
// detected_features() asks cpu_features (which also checks that the OS enables
// the AVX / AVX-512 / AMX register state in XCR0) once per process; the level
// is the highest step of the ladder whose features are all there. Two things
// cpu_features 0.7 does not know are read here: AVX-VNNI (CPUID.(EAX=7,ECX=1):EAX bit 4) and
// whether AMX may actually be used — that needs a non-zero tile palette
// (CPUID leaf 0x1D) and, on Linux, the permission to use the XTILEDATA state
// (arch_prctl ARCH_REQ_XCOMP_PERM, verified with ARCH_GET_XCOMP_PERM). Any
// failure along the AMX path means "no AMX"; nothing here can crash.
//
// The cap (QCONV_MAX_CPU_ISA, read once, or set_max_cpu_isa()) only lowers
// the level the dispatcher sees, max_cpu_isa() = min(detected, cap), and
// keeps the features that level allows (cap_allows()).
//
// The test suite's AMX emulator (tests/support/amx_emulator.h) defines
// qconv_test_amx_emulated(); the library refers to it only weakly, so the
// shipped library exports no switch and in a program without the emulator the
// reference is null: the host's features are what the CPU has. While the
// emulator says so, the detected features gain AMX on an AVX-512 VNNI + BF16
// host, and a detection that runs then does not ask for the permission, so
// the process's tile instructions trap (SIGILL) into the emulator.
#include <atomic>
#include <cstdlib>
#include <mutex>

#include <cpuid.h>
#include <cpuinfo_x86.h>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "dispatch/host_platform.h"
#include "qconv/types.h"

extern "C" __attribute__((weak)) bool qconv_test_amx_emulated();

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

// Every feature the CPU and OS support. cpu_features 0.7 checks XCR0 for
// the AVX, AVX-512 and AMX state; it lacks AVX-VNNI (leaf 7 subleaf 1) and
// the AMX palette and permission, read above.
impl::feature_set detect_features() {
    using impl::cpu_feature;
    const cpu_features::X86Features f = cpu_features::GetX86Info().features;
    // Bitfields are signed 1-bit ints (-1 when set): test for truth only.
    impl::feature_set s;
    if (!(f.avx2 && f.fma3)) return s;
    s.add(cpu_feature::avx2);
    if (cpu_has_avx_vnni()) s.add(cpu_feature::avx2_vnni);
    if (!(f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl)) return s;
    s.add(cpu_feature::avx512_core);
    if (f.avx512vnni) s.add(cpu_feature::avx512_core_vnni);
    if (f.avx512vbmi) s.add(cpu_feature::avx512_vbmi);
    if (f.avx512_bf16) s.add(cpu_feature::avx512_bf16);
    if (f.amx_int8 && f.amx_tile && cpu_has_tile_palette() && !impl::amx_emulated() && os_grants_amx()) {
        s.add(cpu_feature::amx_int8);
        if (f.amx_bf16) s.add(cpu_feature::amx_bf16);
    }
    return s;
}

constexpr int no_cap = impl::isa_level_count - 1;

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

bool amx_emulated() { return qconv_test_amx_emulated != nullptr && qconv_test_amx_emulated(); }

feature_set detected_features() {
    static const feature_set s = detect_features();
    if (!amx_emulated() || !s.has(cpu_feature::avx512_core_vnni) || !s.has(cpu_feature::avx512_bf16)) return s;
    feature_set e = s;
    e.add(cpu_feature::amx_int8);
    e.add(cpu_feature::amx_bf16);
    return e;
}

isa detected_isa() { return level_of(detected_features()); }

platform host_platform() {
    platform p;
    p.level = max_cpu_isa();
    for (cpu_feature f : all_cpu_features)
        if (detected_features().has(f) && cap_allows(p.level, f)) p.features.add(f);
    return p;
}

} // namespace impl
} // namespace qconv
