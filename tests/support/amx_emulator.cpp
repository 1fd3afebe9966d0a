// The AMX emulator (amx_emulator.h): the SIGILL handler, the decoder of the
// tile instructions and their semantics on a per-thread tile file.
//
// Everything the handler reaches is async-signal-safe: the tile file and the
// counter slot index live in initial-exec TLS (no allocation, no lazy TLS
// initialisation), the counters are lock-free atomics in a static table, and
// messages go out through write(2). The handler sets MXCSR for the bf16 / fp16
// arithmetic (round to nearest even, exceptions masked; DAZ and FTZ are done
// in software) and puts the caller's back before it returns.
//
// The memory model (set_amx_memory_model) keeps one cache_model per counter
// slot in an mmap'd table (zero pages: empty caches) and, in its stepping
// mode, a SIGTRAP handler that sees every instruction a thread runs between
// its first trapped tile instruction and its TILERELEASE.
#include "tests/support/amx_emulator.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include <cpuid.h>
#include <immintrin.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <oneapi/dnnl/dnnl.h>

#include "dispatch/host_platform.h"
#include "tests/support/amx_cache_model.h"

namespace qconv::test {
namespace {

constexpr unsigned n_tiles = 8;
constexpr unsigned max_rows = 16;
constexpr unsigned max_colsb = 64;

// One thread's tile state. Outside a tile's configured rows x colsb every
// byte is zero (LDTILECFG zeroes all, writes zero what they do not fill).
struct tile_file {
    alignas(64) uint8_t data[n_tiles][max_rows][max_colsb];
    bool configured;
    uint8_t palette;
    uint8_t start_row;
    uint8_t rows[n_tiles];
    uint16_t colsb[n_tiles];
    uint8_t hardware_cfg[64]; // the CPU's TILECFG as last seen (AMX CPUs: see on_sigill)
};
thread_local tile_file tiles __attribute__((tls_model("initial-exec")));

// ---------------------------------------------------------------- counters

constexpr unsigned n_ops = static_cast<unsigned>(amx_op::count);
constexpr int max_counted_threads = 256;

struct counter_block {
    std::atomic<uint64_t> ops[n_ops];
    std::atomic<uint64_t> macs;
    std::atomic<uint64_t> capacity;
};
// One block per thread, claimed on its first emulated instruction and never
// released; threads beyond the table share the last block.
counter_block counter_table[max_counted_threads + 1];
std::atomic<int> counter_blocks_claimed{0};
thread_local int counter_slot __attribute__((tls_model("initial-exec"))) = 0; // 1-based, 0: none yet

counter_block &thread_block() {
    if (counter_slot == 0) {
        const int i = counter_blocks_claimed.fetch_add(1, std::memory_order_relaxed);
        counter_slot = (i < max_counted_threads ? i : max_counted_threads) + 1;
    }
    return counter_table[counter_slot - 1];
}

void count(amx_op op, uint64_t macs = 0, uint64_t capacity = 0) {
    counter_block &b = thread_block();
    b.ops[static_cast<unsigned>(op)].fetch_add(1, std::memory_order_relaxed);
    if (capacity) {
        b.macs.fetch_add(macs, std::memory_order_relaxed);
        b.capacity.fetch_add(capacity, std::memory_order_relaxed);
    }
}

amx_counters read_block(const counter_block &b) {
    amx_counters c;
    for (unsigned i = 0; i < n_ops; ++i) c.ops[i] = b.ops[i].load(std::memory_order_relaxed);
    c.macs = b.macs.load(std::memory_order_relaxed);
    c.capacity = b.capacity.load(std::memory_order_relaxed);
    return c;
}

// ---------------------------------------------------------------- memory model

constexpr unsigned n_kinds = amx_memory_counters::n_kinds, n_levels = amx_memory_counters::n_levels;

std::atomic<bool> memory_on{false}, memory_step{false};
// One cache per counter slot (thread_block()), mmap'd on the first enable.
cache_model *caches = nullptr;
constexpr size_t caches_bytes = sizeof(cache_model) * (max_counted_threads + 1);

struct memory_block {
    std::atomic<uint64_t> bytes[n_kinds][n_levels];
    std::atomic<uint64_t> lines[n_kinds][n_levels];
    std::atomic<uint64_t> vector_instructions, vector_memory, vector_alu;
};
memory_block memory_table[max_counted_threads + 1];

// What one instruction's accesses add, flushed to the thread's block once.
struct mem_tally {
    uint64_t bytes[n_levels] = {}, lines[n_levels] = {};
    void access(uint64_t addr, uint64_t n) {
        thread_block();
        caches[counter_slot - 1].access(addr, n, bytes, lines);
    }
    void flush(amx_mem_kind k) const {
        memory_block &m = memory_table[counter_slot - 1];
        const unsigned i = static_cast<unsigned>(k);
        for (unsigned l = 0; l < n_levels; ++l) {
            if (bytes[l]) m.bytes[i][l].fetch_add(bytes[l], std::memory_order_relaxed);
            if (lines[l]) m.lines[i][l].fetch_add(lines[l], std::memory_order_relaxed);
        }
    }
};

amx_memory_counters read_memory_block(const memory_block &b) {
    amx_memory_counters c;
    for (unsigned k = 0; k < n_kinds; ++k)
        for (unsigned l = 0; l < n_levels; ++l) {
            c.bytes[k][l] = b.bytes[k][l].load(std::memory_order_relaxed);
            c.lines[k][l] = b.lines[k][l].load(std::memory_order_relaxed);
        }
    c.vector_instructions = b.vector_instructions.load(std::memory_order_relaxed);
    c.vector_memory = b.vector_memory.load(std::memory_order_relaxed);
    c.vector_alu = b.vector_alu.load(std::memory_order_relaxed);
    return c;
}

// ---------------------------------------------------------------- faults

void write_str(const char *s) {
    const size_t n = strlen(s);
    if (write(STDERR_FILENO, s, n) < 0) return;
}

void write_hex(uint64_t v) {
    char buf[19] = "0x";
    for (int i = 0; i < 16; ++i) buf[2 + i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 0xf];
    buf[18] = 0;
    write_str(buf);
}

// A fault the hardware raises: said on stderr with the instruction's address,
// then abort.
[[noreturn]] void fault(const char *kind, const char *what, uint64_t rip) {
    write_str("qconv amx emulator: ");
    write_str(kind);
    write_str(" (");
    write_str(what);
    write_str(") at ");
    write_hex(rip);
    write_str("\n");
    abort();
}

// ---------------------------------------------------------------- decoding

struct insn {
    amx_op op;
    unsigned length;
    unsigned tile;  // ModRM.reg: the tile of loads, stores, TILEZERO; TDP's dst
    unsigned src1;  // TDP: ModRM.rm
    unsigned src2;  // TDP: VEX.vvvv
    uint64_t addr;  // memory operand: base + displacement (+ index * scale but for tile rows)
    int64_t stride; // TILELOADD / TILESTORED: index * scale
};

// gregs index of x86 register number 0..15 (rax, rcx, ..., r15).
constexpr int greg_of[16] = {REG_RAX, REG_RCX, REG_RDX, REG_RBX, REG_RSP, REG_RBP, REG_RSI, REG_RDI,
                             REG_R8,  REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15};

// The memory operand (ModRM.mod != 3) at p, ModRM first: sets addr and
// stride; returns the bytes it takes.
unsigned decode_memory(const uint8_t *p, bool vex_x, bool vex_b, const greg_t *g, insn &in) {
    const unsigned mod = p[0] >> 6, rm = p[0] & 7;
    unsigned n = 1;
    uint64_t addr = 0;
    int64_t stride = 0;
    bool rip_relative = false;
    if (rm == 4) {
        const uint8_t sib = p[n++];
        const unsigned scale = sib >> 6, index = ((sib >> 3) & 7) | (vex_x ? 8 : 0), base = (sib & 7) | (vex_b ? 8 : 0);
        if (index != 4) stride = static_cast<int64_t>(static_cast<uint64_t>(g[greg_of[index]]) << scale);
        const bool no_base = (base & 7) == 5 && mod == 0; // then disp32 follows
        if (!no_base) addr = static_cast<uint64_t>(g[greg_of[base]]);
    } else if (rm == 5 && mod == 0) {
        rip_relative = true;
    } else {
        addr = static_cast<uint64_t>(g[greg_of[rm | (vex_b ? 8 : 0)]]);
    }
    const bool disp32 = mod == 2 || (mod == 0 && (rip_relative || (rm == 4 && (p[1] & 7) == 5)));
    int64_t disp = 0;
    if (mod == 1) {
        disp = static_cast<int8_t>(p[n]);
        n += 1;
    } else if (disp32) {
        int32_t d;
        memcpy(&d, p + n, 4);
        disp = d;
        n += 4;
    }
    in.addr = addr + static_cast<uint64_t>(disp);
    if (rip_relative) in.addr += reinterpret_cast<uint64_t>(p) + n; // the next instruction
    in.stride = stride;
    return n;
}

// Decodes the tile instruction at `ip`; false when it is none of those the
// emulator knows (the SIGILL is then handed on).
bool decode(const uint8_t *ip, const greg_t *g, insn &in) {
    if (ip[0] != 0xc4) return false;
    const uint8_t b1 = ip[1], b2 = ip[2];
    if ((b1 & 0x1f) != 2) return false;                  // map 0F38
    if ((b2 & 0x80) != 0 || (b2 & 4) != 0) return false; // W0, L0 (VEX.128)
    const bool r = !(b1 & 0x80), x = !(b1 & 0x40), b = !(b1 & 0x20);
    const unsigned vvvv = (~b2 >> 3) & 0xf, pp = b2 & 3;
    const uint8_t opcode = ip[3], modrm = ip[4];
    const unsigned mod = modrm >> 6, reg = ((modrm >> 3) & 7) | (r ? 8 : 0), rm = (modrm & 7) | (b ? 8 : 0);
    in.tile = reg;
    in.src1 = rm;
    in.src2 = vvvv;
    in.addr = 0;
    in.stride = 0;

    if (opcode == 0x49) {
        if (vvvv != 0) return false;
        if (mod == 3) {
            if (pp == 0 && modrm == 0xc0) in.op = amx_op::tilerelease;
            else if (pp == 3 && (modrm & 7) == 0 && !b && reg < n_tiles) in.op = amx_op::tilezero;
            else return false;
            in.length = 5;
            return true;
        }
        if (reg != 0 || (pp != 0 && pp != 1)) return false;
        in.op = pp == 0 ? amx_op::ldtilecfg : amx_op::sttilecfg;
        in.length = 4 + decode_memory(ip + 4, x, b, g, in);
        in.addr += static_cast<uint64_t>(in.stride); // an ordinary address: base + index * scale + disp
        in.stride = 0;
        return true;
    }
    if (opcode == 0x4b) {
        if (vvvv != 0 || mod == 3 || (modrm & 7) != 4 || reg >= n_tiles) return false;
        if (pp == 3) in.op = amx_op::tileloadd;
        else if (pp == 1) in.op = amx_op::tileloaddt1;
        else if (pp == 2) in.op = amx_op::tilestored;
        else return false;
        in.length = 4 + decode_memory(ip + 4, x, b, g, in);
        return true;
    }
    if (opcode == 0x5e || opcode == 0x5c) {
        if (mod != 3 || reg >= n_tiles || rm >= n_tiles || vvvv >= n_tiles) return false;
        if (opcode == 0x5e) {
            constexpr amx_op by_pp[4] = {amx_op::tdpbuud, amx_op::tdpbusd, amx_op::tdpbsud, amx_op::tdpbssd};
            in.op = by_pp[pp];
        } else if (pp == 2) {
            in.op = amx_op::tdpbf16ps;
        } else if (pp == 3) {
            in.op = amx_op::tdpfp16ps;
        } else {
            return false;
        }
        in.length = 5;
        return true;
    }
    return false;
}

// ---------------------------------------------------------------- vector instructions

// What the memory model needs of a VEX / EVEX instruction (stepping mode).
struct vector_insn {
    bool memory = false; // has a memory operand (gathers and scatters excepted)
    bool store = false;  // ... that it writes
    bool alu = true;     // issues on the vector ALU ports: all but pure loads, stores, broadcast loads
    uint64_t addr = 0, size = 0;
};

// Bytes the memory operand covers: the vector length, or the element with
// an EVEX broadcast, or what the scalar, partial, widening and narrowing
// forms take. For EVEX this is also N of the compressed disp8 (disp8 x N).
uint64_t access_size(unsigned map, uint8_t op, unsigned pp, unsigned w, uint64_t vl, bool broadcast) {
    if (broadcast) return w ? 8 : 4;
    const uint64_t scalar = pp == 3 ? 8 : 4; // F2: double, F3: single
    if (map == 1) {
        if (op == 0x10 || op == 0x11) return pp >= 2 ? scalar : vl;
        if (op == 0x12 || op == 0x13 || op == 0x16 || op == 0x17) return 8;
        if (op == 0x6e || (op == 0x7e && pp == 1)) return w ? 8 : 4;
        if ((op == 0x7e && pp == 2) || op == 0xd6) return 8;
        if (op >= 0x51 && op <= 0x5f && op != 0x5b && pp >= 2) return scalar;
        if ((op == 0x5a && pp == 0) || (op == 0xe6 && pp == 2)) return vl / 2;
        if ((op == 0xc2 || op == 0x2c || op == 0x2d) && pp >= 2) return scalar;
        if (op == 0x2a) return w ? 8 : 4;
        if (op == 0x2e || op == 0x2f) return pp == 1 ? 8 : 4;
        if (op == 0xc4) return 2;
        return vl;
    }
    if (map == 2) {
        switch (op) {
        case 0x18:
        case 0x58: return 4;
        case 0x19:
        case 0x59: return 8;
        case 0x1a:
        case 0x5a: return 16;
        case 0x1b:
        case 0x5b: return 32;
        case 0x78: return 1;
        case 0x79: return 2;
        case 0x13:
            if (pp == 1) return vl / 2; // vcvtph2ps
            break;
        default: break;
        }
        // vpmovsx / vpmovzx (66, rows 2 and 3) and the narrowing vpmov (F3,
        // rows 1 to 3): bw, bd, bq, wd, wq, dq.
        const unsigned row = op >> 4, col = op & 0xf;
        if (col <= 5 && ((pp == 1 && (row == 2 || row == 3)) || (pp == 2 && row >= 1 && row <= 3))) {
            constexpr unsigned ratio[6] = {2, 4, 8, 2, 4, 2};
            return vl / ratio[col];
        }
        if (row >= 9 && row <= 0xb && (col & 1) && col >= 9) return w ? 8 : 4; // scalar FMAs
        return vl;
    }
    if (map == 3) {
        switch (op) {
        case 0x14:
        case 0x20: return 1;
        case 0x15: return 2;
        case 0x16:
        case 0x22: return w ? 8 : 4;
        case 0x17:
        case 0x21:
        case 0x0a: return 4;
        case 0x0b: return 8;
        case 0x18:
        case 0x19:
        case 0x38:
        case 0x39: return 16;
        case 0x1a:
        case 0x1b:
        case 0x3a:
        case 0x3b: return 32;
        case 0x1d: return vl / 2;
        default: return vl;
        }
    }
    return vl;
}

bool is_store(unsigned map, uint8_t op, unsigned pp) {
    if (map == 1)
        return op == 0x11 || op == 0x13 || op == 0x17 || op == 0x29 || op == 0x2b || op == 0x7f || op == 0xe7 ||
               op == 0xd6 || (op == 0x7e && pp == 1);
    if (map == 2) {
        const unsigned row = op >> 4, col = op & 0xf;
        if (pp == 2 && row >= 1 && row <= 3 && col <= 5) return true; // narrowing vpmov
        return op == 0x2e || op == 0x2f || op == 0x8e || op == 0x8a || op == 0x8b;
    }
    if (map == 3)
        return op == 0x14 || op == 0x15 || op == 0x16 || op == 0x17 || op == 0x19 || op == 0x1b || op == 0x1d ||
               op == 0x39 || op == 0x3b;
    return false;
}

// Loads and stores that take no vector ALU port (plain moves, broadcast and
// masked loads / stores).
bool is_pure_move(unsigned map, uint8_t op) {
    if (map == 1)
        return op == 0x10 || op == 0x11 || op == 0x12 || op == 0x13 || op == 0x16 || op == 0x17 || op == 0x28 ||
               op == 0x29 || op == 0x2b || op == 0x6e || op == 0x6f || op == 0x7e || op == 0x7f || op == 0xd6 ||
               op == 0xe7;
    if (map == 2)
        return (op >= 0x18 && op <= 0x1b) || (op >= 0x58 && op <= 0x5b) || op == 0x78 || op == 0x79 ||
               (op >= 0x2c && op <= 0x2f) || op == 0x8c || op == 0x8e;
    return false;
}

// Bytes of immediate after the memory operand (for RIP-relative addresses).
unsigned immediate_bytes(unsigned map, uint8_t op) {
    if (map == 3) return 1;
    if (map == 1 && ((op >= 0x70 && op <= 0x73) || (op >= 0xc2 && op <= 0xc6))) return 1;
    return 0;
}

// Decodes the VEX (C4, C5) or EVEX (62) instruction at `ip` with the
// registers `g` (before it runs); false for anything else.
bool decode_vector(const uint8_t *ip, const greg_t *g, vector_insn &v) {
    unsigned map = 1, pp = 0, w = 0;
    uint64_t vl = 16;
    bool x = false, b = false, evex = false, broadcast = false;
    const uint8_t *p;
    if (ip[0] == 0xc5) {
        pp = ip[1] & 3;
        vl = (ip[1] & 4) ? 32 : 16;
        p = ip + 2;
    } else if (ip[0] == 0xc4) {
        map = ip[1] & 0x1f;
        x = !(ip[1] & 0x40), b = !(ip[1] & 0x20);
        w = ip[2] >> 7, pp = ip[2] & 3;
        vl = (ip[2] & 4) ? 32 : 16;
        p = ip + 3;
    } else if (ip[0] == 0x62) {
        map = ip[1] & 7;
        x = !(ip[1] & 0x40), b = !(ip[1] & 0x20);
        w = ip[2] >> 7, pp = ip[2] & 3;
        vl = uint64_t(16) << ((ip[3] >> 5) & 3);
        broadcast = (ip[3] >> 4) & 1;
        evex = true;
        p = ip + 4;
    } else {
        return false;
    }
    v = vector_insn{};
    const uint8_t op = p[0];
    if (map == 1 && op == 0x77) { // vzeroupper / vzeroall: no ModRM
        v.alu = false;
        return true;
    }
    if (map < 1 || map > 3) return true; // no memory operand decoded (FP16 maps)
    const uint8_t modrm = p[1];
    const unsigned mod = modrm >> 6;
    if (mod == 3) return true;
    if (map == 2 && ((op >= 0x90 && op <= 0x93) || (op >= 0xa0 && op <= 0xa3) || op == 0xc6 || op == 0xc7))
        return true; // gathers, scatters: vector indices, not modelled
    insn in;
    const unsigned n = decode_memory(p + 1, x, b, g, in);
    v.memory = true;
    v.store = is_store(map, op, pp);
    v.alu = !is_pure_move(map, op);
    v.size = access_size(map, op, pp, w, vl, broadcast);
    v.addr = in.addr + static_cast<uint64_t>(in.stride);
    if (evex && mod == 1) v.addr += (v.size - 1) * static_cast<uint64_t>(int64_t(static_cast<int8_t>(p[n])));
    if (mod == 0 && (modrm & 7) == 5) v.addr += immediate_bytes(map, op); // RIP-relative
    return true;
}

// ---------------------------------------------------------------- semantics

void init_state(tile_file &t) {
    uint8_t hw[64];
    memcpy(hw, t.hardware_cfg, 64);
    memset(&t, 0, sizeof t);
    memcpy(t.hardware_cfg, hw, 64);
}

void do_ldtilecfg(tile_file &t, const insn &in, uint64_t rip) {
    uint8_t m[64];
    memcpy(m, reinterpret_cast<const void *>(in.addr), 64);
    if (m[0] == 0) return init_state(t);
    if (m[0] != 1) fault("#GP", "ldtilecfg: palette other than 0 or 1", rip);
    for (int i = 2; i < 16; ++i)
        if (m[i]) fault("#GP", "ldtilecfg: reserved byte 2..15 not zero", rip);
    for (int i = 32; i < 48; ++i)
        if (m[i]) fault("#GP", "ldtilecfg: reserved byte 32..47 not zero", rip);
    for (int i = 56; i < 64; ++i)
        if (m[i]) fault("#GP", "ldtilecfg: reserved byte 56..63 not zero", rip);
    for (unsigned i = 0; i < n_tiles; ++i) {
        const unsigned colsb = m[16 + 2 * i] | (m[17 + 2 * i] << 8), rows = m[48 + i];
        if (rows > max_rows) fault("#GP", "ldtilecfg: more than 16 rows", rip);
        if (colsb > max_colsb) fault("#GP", "ldtilecfg: more than 64 bytes per row", rip);
        if ((rows == 0) != (colsb == 0))
            fault("#GP", "ldtilecfg: a tile with rows but no columns or columns but no rows", rip);
    }
    init_state(t);
    t.configured = true;
    t.palette = 1;
    t.start_row = m[1];
    for (unsigned i = 0; i < n_tiles; ++i) {
        t.colsb[i] = static_cast<uint16_t>(m[16 + 2 * i] | (m[17 + 2 * i] << 8));
        t.rows[i] = m[48 + i];
    }
}

// The 64 bytes STTILECFG writes.
void cfg_image(const tile_file &t, uint8_t m[64]) {
    memset(m, 0, 64);
    if (t.configured) {
        m[0] = t.palette;
        m[1] = t.start_row;
        for (unsigned i = 0; i < n_tiles; ++i) {
            m[16 + 2 * i] = static_cast<uint8_t>(t.colsb[i]);
            m[17 + 2 * i] = static_cast<uint8_t>(t.colsb[i] >> 8);
            m[48 + i] = t.rows[i];
        }
    }
}

void do_sttilecfg(const tile_file &t, const insn &in) {
    uint8_t m[64];
    cfg_image(t, m);
    memcpy(reinterpret_cast<void *>(in.addr), m, 64);
}

// The configuration LDTILECFG loaded on the hardware: taken over with the
// tiles zeroed.
void adopt_cfg(tile_file &t, const uint8_t m[64]) {
    init_state(t);
    memcpy(t.hardware_cfg, m, 64);
    if (m[0] == 0) return;
    t.configured = true;
    t.palette = m[0];
    t.start_row = m[1];
    for (unsigned i = 0; i < n_tiles; ++i) {
        t.colsb[i] = static_cast<uint16_t>(m[16 + 2 * i] | (m[17 + 2 * i] << 8));
        t.rows[i] = m[48 + i];
    }
}

void need_configured(const tile_file &t, const char *what, uint64_t rip) {
    if (!t.configured) fault("#UD", what, rip);
}

void need_valid(const tile_file &t, unsigned tile, const char *what, uint64_t rip) {
    need_configured(t, what, rip);
    if (t.rows[tile] == 0) fault("#UD", what, rip);
}

// Loads and stores: a valid tile of whole dwords per row, start_row inside.
void check_load_store(const tile_file &t, unsigned tile, const char *what, uint64_t rip) {
    need_valid(t, tile, what, rip);
    if (t.colsb[tile] % 4) fault("#UD", "tile load / store: colsb not a multiple of 4", rip);
    if (t.start_row >= t.rows[tile]) fault("#UD", "tile load / store: start_row >= rows", rip);
}

void do_tileload(tile_file &t, const insn &in, uint64_t rip) {
    check_load_store(t, in.tile, "tileloadd: tiles or this tile not configured", rip);
    const unsigned rows = t.rows[in.tile], colsb = t.colsb[in.tile];
    for (unsigned r = t.start_row; r < rows; ++r)
        memcpy(t.data[in.tile][r], reinterpret_cast<const void *>(in.addr + static_cast<uint64_t>(in.stride) * r),
               colsb);
    t.start_row = 0;
}

void do_tilestore(tile_file &t, const insn &in, uint64_t rip) {
    check_load_store(t, in.tile, "tilestored: tiles or this tile not configured", rip);
    const unsigned rows = t.rows[in.tile], colsb = t.colsb[in.tile];
    for (unsigned r = t.start_row; r < rows; ++r)
        memcpy(reinterpret_cast<void *>(in.addr + static_cast<uint64_t>(in.stride) * r), t.data[in.tile][r], colsb);
    t.start_row = 0;
}

void do_tilezero(tile_file &t, const insn &in, uint64_t rip) {
    need_valid(t, in.tile, "tilezero: tiles or this tile not configured", rip);
    memset(t.data[in.tile], 0, sizeof t.data[in.tile]);
    t.start_row = 0;
}

// The #UD checks of every TDP: configured, three different valid tiles of
// shapes dst M x N, src1 M x K, src2 K x N (K and N in dwords).
void check_tdp(const tile_file &t, const insn &in, uint64_t rip) {
    need_configured(t, "tdp: tiles not configured", rip);
    const unsigned d = in.tile, a = in.src1, b = in.src2;
    if (d == a || d == b || a == b) fault("#UD", "tdp: two operands name the same tile", rip);
    if (!t.rows[d] || !t.rows[a] || !t.rows[b]) fault("#UD", "tdp: an operand tile is not configured", rip);
    if (t.colsb[d] % 4 || t.colsb[a] % 4 || t.colsb[b] % 4) fault("#UD", "tdp: a colsb not a multiple of 4", rip);
    if (t.rows[d] != t.rows[a]) fault("#UD", "tdp: dst rows != src1 rows", rip);
    if (t.colsb[a] / 4 != t.rows[b]) fault("#UD", "tdp: src1 colsb / 4 != src2 rows", rip);
    if (t.colsb[d] != t.colsb[b]) fault("#UD", "tdp: dst colsb != src2 colsb", rip);
}

int32_t load_i32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

void store_i32(uint8_t *p, int32_t v) { memcpy(p, &v, 4); }

template <bool a_signed, bool b_signed>
void tdp_int8(tile_file &t, const insn &in) {
    const unsigned d = in.tile, a = in.src1, b = in.src2;
    const unsigned m_rows = t.rows[d], n_cols = t.colsb[d] / 4, k_dwords = t.colsb[a] / 4;
    for (unsigned m = 0; m < m_rows; ++m)
        for (unsigned n = 0; n < n_cols; ++n) {
            uint32_t acc = static_cast<uint32_t>(load_i32(&t.data[d][m][4 * n]));
            for (unsigned k = 0; k < k_dwords; ++k)
                for (unsigned i = 0; i < 4; ++i) {
                    const uint8_t x = t.data[a][m][4 * k + i], y = t.data[b][k][4 * n + i];
                    const int32_t xv = a_signed ? static_cast<int8_t>(x) : x;
                    const int32_t yv = b_signed ? static_cast<int8_t>(y) : y;
                    acc += static_cast<uint32_t>(xv * yv);
                }
            store_i32(&t.data[d][m][4 * n], static_cast<int32_t>(acc));
        }
    t.start_row = 0;
}

uint32_t load_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

float as_float(uint32_t bits) {
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint32_t load_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

uint16_t load_u16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

// The arithmetic of TDPBF16PS, all of it in software but the rounding so that
// it does not depend on how a CPU model treats MXCSR (Valgrind, for one,
// ignores DAZ and FTZ and returns the default NaN for every NaN):
// - round to nearest even (the handler's MXCSR);
// - denormal inputs read as zero (DAZ), results tiny after rounding flushed
//   to zero (FTZ);
// - a NaN operand gives that NaN quieted, the first of a, b, c for a fused
//   step, of a, b for a sum (measured: no other order matches the hardware);
//   an invalid operation (0 x inf, inf - inf) gives the default NaN.
float signed_zero(float x) { return std::signbit(x) ? -0.f : 0.f; }

float daz(float x) { return std::fpclassify(x) == FP_SUBNORMAL ? signed_zero(x) : x; }

float quieted(float x) { return as_float(load_bits(x) | 0x00400000u); }

float default_nan() { return as_float(0xffc00000u); }

__attribute__((target("fma"))) float fma_rne(float a, float b, float c) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

constexpr float two_64 = 0x1p64f, min_normal = 0x1p-126f;

// c + a * b rounded once. Where the result is at most the smallest normal,
// the step is done again with the smaller factor and c scaled by 2^64, which
// rounds to 24 bits as if the exponent were unbounded: tiny after rounding is
// then below 2^-62. (A result that small with |c| or both factors above 2^64
// is impossible unless it is exactly zero.)
float fused(float a, float b, float c) {
    if (std::isnan(a)) return quieted(a);
    if (std::isnan(b)) return quieted(b);
    if (std::isnan(c)) return quieted(c);
    a = daz(a), b = daz(b), c = daz(c);
    const float r = fma_rne(a, b, c);
    if (std::isnan(r)) return default_nan();
    if (std::fabs(r) > min_normal || r == 0.f) return r;
    const float scaled =
        std::fabs(a) <= std::fabs(b) ? fma_rne(a * two_64, b, c * two_64) : fma_rne(a, b * two_64, c * two_64);
    return std::fabs(scaled) < min_normal * two_64 ? signed_zero(scaled) : scaled / two_64;
}

// a + b: a sum below the smallest normal is exact, so tiny means below it.
float sum(float a, float b) {
    if (std::isnan(a)) return quieted(a);
    if (std::isnan(b)) return quieted(b);
    const float r = daz(a) + daz(b);
    if (std::isnan(r)) return default_nan();
    return r != 0.f && std::fabs(r) < min_normal ? signed_zero(r) : r;
}

float bf16_value(const uint8_t *p) { return as_float(static_cast<uint32_t>(load_u16(p)) << 16); }

__attribute__((target("f16c"))) float fp16_value(const uint8_t *p) { return _cvtsh_ss(load_u16(p)); }

// TDPBF16PS / TDPFP16PS: per output element, one chain over the even and one
// over the odd elements of K, each step fused; then dst + (even + odd).
template <float (*value)(const uint8_t *)>
void tdp_float(tile_file &t, const insn &in) {
    const unsigned d = in.tile, a = in.src1, b = in.src2;
    const unsigned m_rows = t.rows[d], n_cols = t.colsb[d] / 4, k_pairs = t.colsb[a] / 4;
    for (unsigned m = 0; m < m_rows; ++m)
        for (unsigned n = 0; n < n_cols; ++n) {
            float even = 0.f, odd = 0.f;
            for (unsigned k = 0; k < k_pairs; ++k) {
                even = fused(value(&t.data[a][m][4 * k]), value(&t.data[b][k][4 * n]), even);
                odd = fused(value(&t.data[a][m][4 * k + 2]), value(&t.data[b][k][4 * n + 2]), odd);
            }
            const float r = sum(as_float(load_u32(&t.data[d][m][4 * n])), sum(even, odd));
            memcpy(&t.data[d][m][4 * n], &r, 4);
        }
    t.start_row = 0;
}

void do_tdp(tile_file &t, const insn &in, uint64_t rip) {
    check_tdp(t, in, rip);
    const uint64_t useful = uint64_t(t.rows[in.tile]) * (t.colsb[in.tile] / 4);
    switch (in.op) {
    case amx_op::tdpbssd: tdp_int8<true, true>(t, in); break;
    case amx_op::tdpbsud: tdp_int8<true, false>(t, in); break;
    case amx_op::tdpbusd: tdp_int8<false, true>(t, in); break;
    case amx_op::tdpbuud: tdp_int8<false, false>(t, in); break;
    case amx_op::tdpbf16ps: tdp_float<bf16_value>(t, in); break;
    case amx_op::tdpfp16ps: tdp_float<fp16_value>(t, in); break;
    default: break;
    }
    const bool int8 = in.op != amx_op::tdpbf16ps && in.op != amx_op::tdpfp16ps;
    const uint64_t k = int8 ? (t.colsb[in.src1] / 4) * 4 : (t.colsb[in.src1] / 4) * 2;
    count(in.op, useful * k, int8 ? 16 * 64 * 16 : 16 * 32 * 16);
}

// The rows a tile load or store touches, through the thread's cache.
void model_tile_access(const tile_file &t, const insn &in) {
    amx_mem_kind k;
    if (in.op == amx_op::tileloadd) k = amx_mem_kind::tileloadd;
    else if (in.op == amx_op::tileloaddt1) k = amx_mem_kind::tileloaddt1;
    else if (in.op == amx_op::tilestored) k = amx_mem_kind::tilestored;
    else return;
    if (!t.configured || in.tile >= n_tiles) return; // faults below
    mem_tally m;
    for (unsigned r = t.start_row; r < t.rows[in.tile]; ++r)
        m.access(in.addr + static_cast<uint64_t>(in.stride) * r, t.colsb[in.tile]);
    m.flush(k);
}

void execute(const insn &in, uint64_t rip) {
    tile_file &t = tiles;
    if (memory_on.load(std::memory_order_relaxed)) model_tile_access(t, in);
    switch (in.op) {
    case amx_op::ldtilecfg: do_ldtilecfg(t, in, rip); break;
    case amx_op::sttilecfg: do_sttilecfg(t, in); break;
    case amx_op::tilerelease: init_state(t); break;
    case amx_op::tilezero: do_tilezero(t, in, rip); break;
    case amx_op::tileloadd:
    case amx_op::tileloaddt1: do_tileload(t, in, rip); break;
    case amx_op::tilestored: do_tilestore(t, in, rip); break;
    default: return do_tdp(t, in, rip);
    }
    count(in.op);
}

// ---------------------------------------------------------------- the handler

struct sigaction previous_action;
std::mutex install_mutex;
int install_count = 0;

// Hands a SIGILL the emulator does not decode to the handler before it; with
// the default action (or SIG_IGN, which Linux does not honour for a faulting
// instruction) the instruction runs again and kills the process with SIGILL.
void hand_on(int sig, siginfo_t *info, void *context) {
    const struct sigaction &p = previous_action;
    if (p.sa_flags & SA_SIGINFO) {
        if (p.sa_sigaction) return p.sa_sigaction(sig, info, context);
    } else if (p.sa_handler != SIG_DFL && p.sa_handler != SIG_IGN) {
        return p.sa_handler(sig);
    }
    signal(SIGILL, SIG_DFL);
}

// On an AMX CPU without the permission only the tile data (XTILEDATA) is
// disabled: LDTILECFG, STTILECFG and TILERELEASE run on the hardware and the
// rest traps. The configuration then lives in the CPU's TILECFG, which the
// signal frame's XSAVE area holds (component 17, standard format; Linux
// restores it from there). Before an instruction the emulator takes over a
// configuration the hardware loaded since it last looked; after it, it
// writes its own back (start_row changes), so that the program's native
// STTILECFG sees it.
int tilecfg_offset = 0; // of component 17 in the XSAVE area; 0: every instruction traps

// The TILECFG bytes of the frame and its XSTATE_BV, or false when the frame
// has no XSAVE area with TILECFG.
bool frame_tilecfg(ucontext_t *uc, uint8_t **cfg, uint64_t **xstate_bv) {
    uint8_t *area = reinterpret_cast<uint8_t *>(uc->uc_mcontext.fpregs);
    if (!area || tilecfg_offset == 0) return false;
    uint32_t magic = 0, xstate_size = 0;
    uint64_t xfeatures = 0;
    memcpy(&magic, area + 464, 4); // struct _fpx_sw_bytes in the FXSAVE area's software bytes
    memcpy(&xfeatures, area + 472, 8);
    memcpy(&xstate_size, area + 480, 4);
    if (magic != 0x46505853u || !((xfeatures >> 17) & 1) || uint32_t(tilecfg_offset) + 64 > xstate_size) return false;
    *cfg = area + tilecfg_offset;
    *xstate_bv = reinterpret_cast<uint64_t *>(area + 512);
    return true;
}

void take_hardware_cfg(tile_file &t, ucontext_t *uc) {
    uint8_t *cfg;
    uint64_t *bv;
    if (!frame_tilecfg(uc, &cfg, &bv)) return;
    uint8_t hw[64] = {};
    if ((*bv >> 17) & 1) memcpy(hw, cfg, 64);
    if (memcmp(hw, t.hardware_cfg, 64) != 0) adopt_cfg(t, hw);
}

void give_hardware_cfg(tile_file &t, ucontext_t *uc) {
    uint8_t *cfg;
    uint64_t *bv;
    if (!frame_tilecfg(uc, &cfg, &bv)) return;
    uint8_t mine[64];
    cfg_image(t, mine);
    if (memcmp(mine, t.hardware_cfg, 64) == 0) return;
    memcpy(t.hardware_cfg, mine, 64);
    if (mine[0] == 0) {
        *bv &= ~(uint64_t(1) << 17); // the init state
    } else {
        memcpy(cfg, mine, 64);
        *bv |= uint64_t(1) << 17;
    }
}

// Decodes and performs the instruction at the context's RIP; false when it
// is none of the emulator's. `op` gets its kind.
bool emulate(ucontext_t *uc, amx_op *op = nullptr) {
    greg_t *g = uc->uc_mcontext.gregs;
    const uint64_t rip = static_cast<uint64_t>(g[REG_RIP]);
    insn in;
    if (!decode(reinterpret_cast<const uint8_t *>(rip), g, in)) return false;
    if (op) *op = in.op;
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(0x1f80); // all exceptions masked, round to nearest even, no FTZ / DAZ
    take_hardware_cfg(tiles, uc);
    execute(in, rip);
    give_hardware_cfg(tiles, uc);
    _mm_setcsr(csr);
    g[REG_RIP] = static_cast<greg_t>(rip + in.length);
    return true;
}

// ---------------------------------------------------------------- stepping

// The memory model's stepping mode: from a thread's first trapped tile
// instruction to its TILERELEASE, EFLAGS.TF is set in the signal frame, so
// the CPU raises a debug trap (SIGTRAP) after every instruction; the handler
// sees the next instruction before it runs, with the registers it will use.
constexpr greg_t trap_flag = 0x100;
thread_local bool stepping __attribute__((tls_model("initial-exec"))) = false;
struct sigaction previous_trap_action;
bool trap_handler_installed = false; // under install_mutex

void stop_stepping(ucontext_t *uc) {
    stepping = false;
    uc->uc_mcontext.gregs[REG_EFL] &= ~trap_flag;
}

// The instruction at the frame's RIP, about to run: a tile instruction ends
// the stepping at TILERELEASE (the others trap, or run on an AMX CPU without
// the permission, and are counted by execute()); a VEX / EVEX one is counted
// and its memory operand goes through the cache.
void step_account(ucontext_t *uc) {
    const greg_t *g = uc->uc_mcontext.gregs;
    const uint8_t *ip = reinterpret_cast<const uint8_t *>(g[REG_RIP]);
    insn in;
    if (decode(ip, g, in)) {
        if (in.op == amx_op::tilerelease) stop_stepping(uc);
        return;
    }
    vector_insn v;
    if (!decode_vector(ip, g, v)) return;
    thread_block();
    memory_block &b = memory_table[counter_slot - 1];
    b.vector_instructions.fetch_add(1, std::memory_order_relaxed);
    if (v.alu) b.vector_alu.fetch_add(1, std::memory_order_relaxed);
    if (!v.memory) return;
    b.vector_memory.fetch_add(1, std::memory_order_relaxed);
    mem_tally m;
    m.access(v.addr, v.size);
    m.flush(v.store ? amx_mem_kind::vector_store : amx_mem_kind::vector_load);
}

void on_sigtrap(int sig, siginfo_t *info, void *context) {
    if (stepping) return step_account(static_cast<ucontext_t *>(context));
    const struct sigaction &p = previous_trap_action;
    if (p.sa_flags & SA_SIGINFO) {
        if (p.sa_sigaction) return p.sa_sigaction(sig, info, context);
    } else if (p.sa_handler != SIG_DFL && p.sa_handler != SIG_IGN) {
        return p.sa_handler(sig);
    }
    signal(SIGTRAP, SIG_DFL);
}

void on_sigill(int sig, siginfo_t *info, void *context) {
    ucontext_t *uc = static_cast<ucontext_t *>(context);
    amx_op op;
    if (!emulate(uc, &op)) return hand_on(sig, info, context);
    if (!memory_step.load(std::memory_order_relaxed)) return;
    // From a configuration on (not from a STTILECFG after TILERELEASE) up to
    // TILERELEASE.
    if (op == amx_op::tilerelease || !tiles.configured) return stop_stepping(uc);
    // The instruction after this one runs before the next trap: counted now.
    stepping = true;
    uc->uc_mcontext.gregs[REG_EFL] |= trap_flag;
    step_account(uc);
}

// ---------------------------------------------------------------- platform

bool env_is(const char *v, const char *s) { return v && strcmp(v, s) == 0; }

std::atomic<int> emulation_count{0};

// QCONV_TEST_AMX=emulate (or no AMX and no setting): a process that links the
// emulator runs emulated from start-up, before anything could ask Linux for
// the AMX permission.
//
// QCONV_TEST_AMX_AGAIN=1 (the amx_emulated ctest cases, which run a binary's
// AMX cases a second time, emulated): on a CPU without AMX the discovered
// cases of the same binary already ran emulated, so the repeat is the same run
// twice; the process exits at once with ctest's skip code (77), naming why.
struct startup_emulation {
    startup_emulation() {
        if (env_is(getenv("QCONV_TEST_AMX_AGAIN"), "1") && !cpu_has_amx()) {
            write_str("skipped: this CPU has no AMX, so the discovered cases of this binary already ran these "
                      "cases under the tile emulator (QCONV_TEST_AMX_AGAIN=1 repeats them only where they "
                      "otherwise run natively)\n");
            _exit(77);
        }
        if (amx_test_mode() == amx_mode::emulate) emulation = new amx_emulation;
    }
    amx_emulation *emulation = nullptr; // lives as long as the process
} startup;

} // namespace

const char *to_string(amx_mode m) {
    switch (m) {
    case amx_mode::native: return "native";
    case amx_mode::emulate: return "emulate";
    case amx_mode::both: return "both";
    }
    return "?";
}

amx_mode amx_test_mode() {
    const char *v = getenv("QCONV_TEST_AMX");
    if (env_is(v, "native")) return amx_mode::native;
    if (env_is(v, "emulate")) return amx_mode::emulate;
    if (env_is(v, "both")) return amx_mode::both;
    if (v && *v) {
        write_str("QCONV_TEST_AMX must be native, emulate or both\n");
        abort();
    }
    return cpu_has_amx() ? amx_mode::native : amx_mode::emulate;
}

bool cpu_has_amx() {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid_max(0, nullptr) < 0x1d) return false;
    __cpuid_count(1, 0, eax, ebx, ecx, edx);
    if (!((ecx >> 27) & 1)) return false; // OSXSAVE
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    const bool tile = (edx >> 24) & 1, int8 = (edx >> 25) & 1, bf16 = (edx >> 22) & 1;
    if (!(tile && int8 && bf16)) return false;
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((lo >> 17) & 3) == 3; // XTILECFG and XTILEDATA enabled
}

bool amx_permission_granted() {
    constexpr long arch_get_xcomp_perm = 0x1022;
    unsigned long long bitmask = 0;
    if (syscall(SYS_arch_prctl, arch_get_xcomp_perm, &bitmask) != 0) return false;
    return (bitmask >> 18) & 1ull;
}

bool request_amx_permission() {
    constexpr long arch_req_xcomp_perm = 0x1023;
    if (syscall(SYS_arch_prctl, arch_req_xcomp_perm, 18L) != 0) return false;
    return amx_permission_granted();
}

void install_amx_handler() {
    std::lock_guard<std::mutex> lock(install_mutex);
    if (install_count++) return;
    if (cpu_has_amx()) {
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
        __cpuid_count(0xd, 17, eax, ebx, ecx, edx);
        tilecfg_offset = eax == 64 ? int(ebx) : 0;
    }
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_sigaction = on_sigill;
    a.sa_flags = SA_SIGINFO;
    sigemptyset(&a.sa_mask);
    sigaction(SIGILL, &a, &previous_action);
}

void remove_amx_handler() {
    std::lock_guard<std::mutex> lock(install_mutex);
    if (install_count == 0 || --install_count) return;
    sigaction(SIGILL, &previous_action, nullptr);
}

amx_emulation::amx_emulation() {
    install_amx_handler();
    emulation_count.fetch_add(1);
    // oneDNN's own AMX kernels would ask for the permission; refused once
    // oneDNN has chosen its ISA, which then stays as it is.
    dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx512_core_bf16);
}

amx_emulation::~amx_emulation() {
    emulation_count.fetch_sub(1);
    remove_amx_handler();
}

// The dispatcher's question (dispatch/host_platform.h, amx_emulated()): the
// library refers to this function weakly and never defines it.
extern "C" bool qconv_test_amx_emulated() { return emulation_count.load() > 0; }

bool amx_config_traps() { return !cpu_has_amx(); }

bool emulate_amx_instruction(void *uc) { return emulate(static_cast<ucontext_t *>(uc)); }

bool amx_emulation::traps() const { return !amx_permission_granted(); }

const char *to_string(amx_op op) {
    constexpr const char *names[n_ops] = {"ldtilecfg",   "sttilecfg",  "tilerelease", "tilezero", "tileloadd",
                                          "tileloaddt1", "tilestored", "tdpbssd",     "tdpbsud",  "tdpbusd",
                                          "tdpbuud",     "tdpbf16ps",  "tdpfp16ps"};
    const unsigned i = static_cast<unsigned>(op);
    return i < n_ops ? names[i] : "?";
}

uint64_t amx_counters::instructions() const {
    uint64_t n = 0;
    for (uint64_t v : ops) n += v;
    return n;
}

uint64_t amx_counters::tdps() const {
    uint64_t n = 0;
    for (amx_op op :
         {amx_op::tdpbssd, amx_op::tdpbsud, amx_op::tdpbusd, amx_op::tdpbuud, amx_op::tdpbf16ps, amx_op::tdpfp16ps})
        n += of(op);
    return n;
}

double amx_counters::utilisation() const { return capacity ? double(macs) / double(capacity) : 0.0; }

amx_counters &amx_counters::operator+=(const amx_counters &o) {
    for (unsigned i = 0; i < n_ops; ++i) ops[i] += o.ops[i];
    macs += o.macs;
    capacity += o.capacity;
    return *this;
}

amx_counters amx_thread_counters() {
    return counter_slot ? read_block(counter_table[counter_slot - 1]) : amx_counters{};
}

amx_counters amx_total_counters() {
    amx_counters c;
    const int n = counter_blocks_claimed.load(std::memory_order_relaxed);
    for (int i = 0; i <= max_counted_threads && i < n; ++i) c += read_block(counter_table[i]);
    return c;
}

void reset_amx_counters() {
    for (counter_block &b : counter_table) {
        for (auto &v : b.ops) v.store(0, std::memory_order_relaxed);
        b.macs.store(0, std::memory_order_relaxed);
        b.capacity.store(0, std::memory_order_relaxed);
    }
}

// ---------------------------------------------------------------- memory model

void set_amx_memory_model(const amx_memory_options &o) {
    std::lock_guard<std::mutex> lock(install_mutex);
    if (o.enabled && !caches) {
        void *p =
            mmap(nullptr, caches_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            write_str("qconv amx emulator: no memory for the cache model\n");
            abort();
        }
        caches = static_cast<cache_model *>(p);
    }
    const bool step = o.enabled && o.step_vectors;
    if (step && !trap_handler_installed) {
        struct sigaction a;
        memset(&a, 0, sizeof a);
        a.sa_sigaction = on_sigtrap;
        a.sa_flags = SA_SIGINFO;
        sigemptyset(&a.sa_mask);
        sigaction(SIGTRAP, &a, &previous_trap_action);
        trap_handler_installed = true;
    } else if (!step && trap_handler_installed) {
        sigaction(SIGTRAP, &previous_trap_action, nullptr);
        trap_handler_installed = false;
    }
    memory_step.store(step);
    memory_on.store(o.enabled);
    if (caches) madvise(caches, caches_bytes, MADV_DONTNEED); // zero pages: empty caches
    reset_amx_memory_counters();
}

void reset_amx_memory_counters() {
    for (memory_block &b : memory_table) {
        for (auto &k : b.bytes)
            for (auto &v : k) v.store(0, std::memory_order_relaxed);
        for (auto &k : b.lines)
            for (auto &v : k) v.store(0, std::memory_order_relaxed);
        b.vector_instructions.store(0, std::memory_order_relaxed);
        b.vector_memory.store(0, std::memory_order_relaxed);
        b.vector_alu.store(0, std::memory_order_relaxed);
    }
}

amx_memory_options amx_memory_model() {
    amx_memory_options o;
    o.enabled = memory_on.load();
    o.step_vectors = memory_step.load();
    return o;
}

void reset_amx_memory_model() { set_amx_memory_model(amx_memory_model()); }

void amx_memory_access(const void *p, uint64_t bytes, bool store) {
    if (!memory_on.load(std::memory_order_relaxed)) return;
    mem_tally m;
    m.access(reinterpret_cast<uint64_t>(p), bytes);
    m.flush(store ? amx_mem_kind::vector_store : amx_mem_kind::vector_load);
}

const char *to_string(amx_mem_kind k) {
    constexpr const char *names[n_kinds] = {"tileloadd", "tileloaddt1", "tilestored", "vector_load", "vector_store"};
    const unsigned i = static_cast<unsigned>(k);
    return i < n_kinds ? names[i] : "?";
}

uint64_t amx_memory_counters::bytes_at(unsigned level) const {
    uint64_t n = 0;
    for (unsigned k = 0; k < n_kinds; ++k) n += bytes[k][level];
    return n;
}

uint64_t amx_memory_counters::lines_at(unsigned level) const {
    uint64_t n = 0;
    for (unsigned k = 0; k < n_kinds; ++k) n += lines[k][level];
    return n;
}

uint64_t amx_memory_counters::bytes_of(amx_mem_kind k) const {
    uint64_t n = 0;
    for (unsigned l = 0; l < n_levels; ++l) n += bytes[static_cast<unsigned>(k)][l];
    return n;
}

amx_memory_counters &amx_memory_counters::operator+=(const amx_memory_counters &o) {
    for (unsigned k = 0; k < n_kinds; ++k)
        for (unsigned l = 0; l < n_levels; ++l) {
            bytes[k][l] += o.bytes[k][l];
            lines[k][l] += o.lines[k][l];
        }
    vector_instructions += o.vector_instructions;
    vector_memory += o.vector_memory;
    vector_alu += o.vector_alu;
    return *this;
}

amx_memory_counters amx_thread_memory_counters() {
    return counter_slot ? read_memory_block(memory_table[counter_slot - 1]) : amx_memory_counters{};
}

amx_memory_counters amx_total_memory_counters() {
    amx_memory_counters c;
    const int n = counter_blocks_claimed.load(std::memory_order_relaxed);
    for (int i = 0; i <= max_counted_threads && i < n; ++i) c += read_memory_block(memory_table[i]);
    return c;
}

double amx_memory_report::share_of_peak(double macs) const {
    return predicted_cycles > 0 ? macs / (predicted_cycles * 1024) : 0.0;
}

amx_memory_report memory_report(const amx_counters &c, const amx_memory_counters &m) {
    amx_memory_report r;
    r.tdps = c.tdps();
    for (unsigned l = 0; l < n_levels; ++l) r.bytes_per_tdp[l] = r.tdps ? double(m.bytes_at(l)) / double(r.tdps) : 0;
    uint64_t loaded = 0, stored = 0;
    for (unsigned l = 0; l < n_levels; ++l) {
        for (amx_mem_kind k : {amx_mem_kind::tileloadd, amx_mem_kind::tileloaddt1, amx_mem_kind::vector_load})
            loaded += m.lines[static_cast<unsigned>(k)][l];
        for (amx_mem_kind k : {amx_mem_kind::tilestored, amx_mem_kind::vector_store})
            stored += m.lines[static_cast<unsigned>(k)][l];
    }
    r.tile_cycles = amx_memory_report::tdp_cycles_each * double(r.tdps);
    r.l1_cycles = double(loaded) / amx_memory_report::l1_load_lines_per_cycle +
                  double(stored) / amx_memory_report::l1_store_lines_per_cycle;
    r.fill_cycles = amx_memory_report::l2_cycles_per_line * double(m.lines_at(1)) +
                    amx_memory_report::beyond_cycles_per_line * double(m.lines_at(2));
    r.vector_cycles = double(m.vector_alu) / amx_memory_report::vector_alu_per_cycle;
    const std::pair<double, const char *> terms[] = {
        {r.tile_cycles, "tile"}, {r.l1_cycles, "l1"}, {r.fill_cycles, "fill"}, {r.vector_cycles, "vector"}};
    for (const auto &t : terms)
        if (t.first > r.predicted_cycles) r.predicted_cycles = t.first, r.bound = t.second;
    return r;
}

} // namespace qconv::test
