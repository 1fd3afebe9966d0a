// A test-only AMX emulator: on a CPU without AMX every tile instruction raises
// SIGILL (in a process without the Linux AMX permission those that touch tile
// data do, amx_config_traps()); the handler installed here decodes it, performs it on a per-thread software
// tile file (8 tiles of 16 rows x 64 bytes plus the 64-byte TILECFG) and
// resumes after it. So qconv's generated AMX code - the very bytes production
// runs - executes in the tests on any x86-64 machine (docs/amx_emulator.md).
//
// Emulated: LDTILECFG, STTILECFG, TILERELEASE, TILEZERO, TILELOADD,
// TILELOADDT1, TILESTORED, TDPBSSD, TDPBSUD, TDPBUSD, TDPBUUD, TDPBF16PS and
// TDPFP16PS, with the SDM's semantics. A SIGILL the emulator does not decode
// goes to the handler installed before it (or the default action). What the
// hardware faults on (#GP, #UD) writes "qconv amx emulator: <fault> at <rip>"
// to stderr and aborts.
//
// Per thread it counts the instructions by kind and the multiply-adds of the
// TDP instructions, so a kernel's test can report tile utilisation.
#pragma once

#include <cstdint>

namespace qconv::test {

// How the AMX tests of this process run (QCONV_TEST_AMX=native|emulate|both;
// default: native where the CPU and OS have AMX, else emulate). In emulate
// mode a binary that links this file runs under an amx_emulation from
// start-up, before anything could ask for the permission.
enum class amx_mode { native, emulate, both };
amx_mode amx_test_mode();
const char *to_string(amx_mode m);

// Whether the CPU has AMX-INT8 and AMX-BF16 tiles and the OS enables their
// state in XCR0 (the Linux permission aside).
bool cpu_has_amx();
// Whether this process holds the Linux permission for the tile data
// (ARCH_GET_XCOMP_PERM); while it does not, tile instructions trap.
bool amx_permission_granted();
// Asks for the permission (ARCH_REQ_XCOMP_PERM); true when granted.
bool request_amx_permission();

// Installs the SIGILL handler and makes the dispatcher see AMX on top of the
// host's features (qconv_test_amx_emulated(), dispatch/host_platform.h) for its lifetime;
// also caps oneDNN at avx512_core_bf16 (when oneDNN has not yet chosen its
// ISA) so that oneDNN never asks for the permission itself. Nestable.
class amx_emulation {
public:
    amx_emulation();
    ~amx_emulation();
    amx_emulation(const amx_emulation &) = delete;
    amx_emulation &operator=(const amx_emulation &) = delete;
    // Whether tile instructions reach the emulator: false when the process
    // already holds the AMX permission (then they run on the hardware).
    bool traps() const;
};

// Whether every tile instruction traps: true on a CPU without AMX. On an AMX
// CPU without the permission LDTILECFG, STTILECFG and TILERELEASE run on the
// hardware (Linux disables only the tile data); the emulator follows the
// hardware's TILECFG then, and does not count them.
bool amx_config_traps();

// Performs the tile instruction at the RIP of `uc` (a ucontext_t) on this
// thread's tile file as the handler would and advances RIP; false when it is
// not a tile instruction. Lets a test step through code without executing it.
bool emulate_amx_instruction(void *uc);

// Installs / removes the handler alone (what amx_emulation does besides the
// dispatcher's platform). Counted: handlers stay until the last remove.
void install_amx_handler();
void remove_amx_handler();

// The instruction kinds the counters distinguish.
enum class amx_op : unsigned {
    ldtilecfg,
    sttilecfg,
    tilerelease,
    tilezero,
    tileloadd,
    tileloaddt1,
    tilestored,
    tdpbssd,
    tdpbsud,
    tdpbusd,
    tdpbuud,
    tdpbf16ps,
    tdpfp16ps,
    count
};
const char *to_string(amx_op op);

struct amx_counters {
    uint64_t ops[static_cast<unsigned>(amx_op::count)] = {};
    // Multiply-adds the TDP instructions did: configured rows x K x N, K in
    // elements (bytes for int8, pairs x 2 for bf16 / fp16), N in dwords.
    uint64_t macs = 0;
    // What the TDPs issued could have done: 16 x 64 x 16 per int8 TDP,
    // 16 x 32 x 16 per bf16 / fp16 TDP.
    uint64_t capacity = 0;

    uint64_t of(amx_op op) const { return ops[static_cast<unsigned>(op)]; }
    uint64_t instructions() const;
    uint64_t tdps() const;
    // macs / capacity (0 when no TDP ran).
    double utilisation() const;
    amx_counters &operator+=(const amx_counters &o);
};

// The calling thread's counters.
amx_counters amx_thread_counters();
// The sum over every thread that ran an emulated instruction (threads that
// exited included).
amx_counters amx_total_counters();
// Zeroes every thread's counters; call while no emulated code runs.
void reset_amx_counters();

} // namespace qconv::test
