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
// TDP instructions, so a kernel's test can report tile utilisation. An opt-in
// memory model (set_amx_memory_model) runs the tile loads and stores, and in
// its stepping mode the vector loads and stores between them, through a
// modelled L1 / L2 per thread (amx_cache_model.h) and predicts a cycle bound
// (memory_report).
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

// ---------------------------------------------------------------- memory model

// Off by default; while off, the handler checks one flag and nothing else.
struct amx_memory_options {
    bool enabled = false;
    // Also single-step the code between a thread's first trapped tile
    // instruction and its TILERELEASE (EFLAGS.TF, a SIGTRAP handler) and run
    // the memory operand of every VEX / EVEX instruction through the cache:
    // the epilogue's vector loads and stores. Costs a signal per instruction.
    bool step_vectors = false;
};
// Sets the model; resets its counters and empties every thread's caches.
// Call while no emulated code runs.
void set_amx_memory_model(const amx_memory_options &o);
amx_memory_options amx_memory_model();

// The accesses the model distinguishes.
enum class amx_mem_kind : unsigned { tileloadd, tileloaddt1, tilestored, vector_load, vector_store, count };
const char *to_string(amx_mem_kind k);

struct amx_memory_counters {
    static constexpr unsigned n_kinds = static_cast<unsigned>(amx_mem_kind::count);
    static constexpr unsigned n_levels = 3; // cache_level: l1, l2, beyond
    // Bytes and 64-byte lines per kind, by the level that served the line.
    uint64_t bytes[n_kinds][n_levels] = {};
    uint64_t lines[n_kinds][n_levels] = {};
    // Stepped VEX / EVEX instructions; of them those with a memory operand,
    // and those that issue on the vector ALU ports (all but pure loads,
    // stores and broadcast loads).
    uint64_t vector_instructions = 0, vector_memory = 0, vector_alu = 0;

    uint64_t bytes_at(unsigned level) const; // summed over the kinds
    uint64_t lines_at(unsigned level) const;
    uint64_t bytes_of(amx_mem_kind k) const; // summed over the levels
    amx_memory_counters &operator+=(const amx_memory_counters &o);
};
amx_memory_counters amx_thread_memory_counters();
amx_memory_counters amx_total_memory_counters();
// Zeroes the counters and empties the caches; while no emulated code runs.
void reset_amx_memory_model();
// Zeroes the counters alone (the caches keep their lines: a warm run).
void reset_amx_memory_counters();
// The calling thread's modelled cache takes an access as a stepped vector
// instruction would (a test's or tool's own accesses).
void amx_memory_access(const void *p, uint64_t bytes, bool store);

// The cycle bound the model predicts for a run: the largest of
// - tile:   16 cycles per TDP (a 16x64x16 int8 or 16x32x16 bf16 product);
// - l1:     every line an access touches takes a port slot: 2 loaded lines
//           per cycle, 1 stored line per cycle (a 16-row TILELOADD = 8);
// - fill:   lines from L2 at 2 cycles each, from beyond at 8 cycles each;
// - vector: the vector ALU instructions stepped, 2 per cycle.
// A model of a Sapphire Rapids core, not a measurement (docs/amx_emulator.md).
struct amx_memory_report {
    static constexpr double tdp_cycles_each = 16, l1_load_lines_per_cycle = 2, l1_store_lines_per_cycle = 1,
                            l2_cycles_per_line = 2, beyond_cycles_per_line = 8, vector_alu_per_cycle = 2;
    uint64_t tdps = 0;
    double bytes_per_tdp[3] = {}; // served from L1, L2, beyond (every kind)
    double tile_cycles = 0, l1_cycles = 0, fill_cycles = 0, vector_cycles = 0;
    double predicted_cycles = 0;
    const char *bound = "none"; // "tile", "l1", "fill" or "vector"
    // macs / (predicted_cycles x 1024): the share of the int8 tdpbusd peak.
    double share_of_peak(double macs) const;
};
amx_memory_report memory_report(const amx_counters &c, const amx_memory_counters &m);

} // namespace qconv::test
