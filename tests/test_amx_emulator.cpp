// The AMX emulator (tests/support/amx_emulator.h) and its fidelity.
//
// Random tile programs are assembled with Xbyak and run twice: natively (an
// AMX CPU, in a child that asks for the AMX permission) and emulated (a child
// without it, where every tile instruction traps). STTILECFG and every byte of
// the output buffers must agree. Without AMX the outputs recorded from the
// hardware (tests/data/amx/programs.txt) are replayed instead; regenerate them
// on an AMX machine with
//   QCONV_AMX_EMU_RECORD=tests/data/amx/programs.txt
//     build/tests/test_amx_emulator --gtest_filter=AmxRecord.*
// (one command line).
// QCONV_AMX_EMU_PROGRAMS=N runs N random programs instead of the default.
//
// Every emulated run is a child process (fork before any permission request),
// so this binary works whatever QCONV_TEST_AMX says.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <immintrin.h>
#include <omp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include <xbyak/xbyak.h>

#include "dispatch/platform.h"
#include "tests/support/amx_emulator.h"

namespace qconv::test {
namespace {

// ---------------------------------------------------------------- children

// Shared memory a child writes its results to.
struct shared_buffer {
    explicit shared_buffer(size_t n) : size(n) {
        data = static_cast<uint8_t *>(mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
        if (data == MAP_FAILED) data = nullptr;
    }
    ~shared_buffer() {
        if (data) munmap(data, size);
    }
    uint8_t *data;
    size_t size;
};

struct child_result {
    int status = 0;
    std::string err; // the child's stderr
    bool exited_ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
    bool killed_by(int sig) const { return WIFSIGNALED(status) && WTERMSIG(status) == sig; }
    std::string describe() const {
        std::ostringstream s;
        if (WIFEXITED(status)) s << "exit " << WEXITSTATUS(status);
        else if (WIFSIGNALED(status)) s << "signal " << WTERMSIG(status) << " (" << strsignal(WTERMSIG(status)) << ")";
        s << ", stderr: \"" << err << "\"";
        return s.str();
    }
};

// Runs `body` in a forked child (exit 0 when it returns) and collects its
// status and stderr.
child_result run_child(const std::function<void()> &body) {
    int fds[2];
    child_result r;
    if (pipe(fds) != 0) return r;
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDERR_FILENO);
        body();
        fflush(stdout);
        _exit(0);
    }
    close(fds[1]);
    char buf[512];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) r.err.append(buf, size_t(n));
    close(fds[0]);
    waitpid(pid, &r.status, 0);
    return r;
}

// A hardware fault in a native child: "fault at <rip>" on stderr, then the
// default action.
void on_native_fault(int sig, siginfo_t *, void *context) {
    const uint64_t rip = uint64_t(static_cast<ucontext_t *>(context)->uc_mcontext.gregs[REG_RIP]);
    char buf[40] = "fault at 0x";
    for (int i = 0; i < 16; ++i) buf[11 + i] = "0123456789abcdef"[(rip >> (60 - 4 * i)) & 0xf];
    buf[27] = '\n';
    if (write(STDERR_FILENO, buf, 28) < 0) _exit(5);
    signal(sig, SIG_DFL);
}

// The body of a native child: asks for the AMX permission first.
void become_native() {
    if (!request_amx_permission()) {
        fprintf(stderr, "no AMX permission\n");
        _exit(3);
    }
    struct sigaction a = {};
    a.sa_sigaction = on_native_fault;
    a.sa_flags = SA_SIGINFO;
    sigaction(SIGILL, &a, nullptr);
    sigaction(SIGSEGV, &a, nullptr);
}

// The body of an emulated child: the permission must be absent (so tile
// instructions trap), then the handler goes in.
void become_emulated() {
    if (amx_permission_granted()) {
        fprintf(stderr, "the AMX permission is granted: tile instructions would not trap\n");
        _exit(4);
    }
    install_amx_handler();
}

#define NEED_AMX()                                                                                                     \
    if (!cpu_has_amx()) GTEST_SKIP() << "needs a CPU with AMX-INT8 and AMX-BF16 (Sapphire Rapids or later)"

// ---------------------------------------------------------------- random

struct rng {
    uint64_t s;
    uint64_t next() {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    // Uniform in [lo, hi].
    int range(int lo, int hi) { return lo + int(next() % uint64_t(hi - lo + 1)); }
    bool chance(int percent) { return range(0, 99) < percent; }
};

uint64_t fnv1a(const uint8_t *p, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

// ---------------------------------------------------------------- programs

constexpr size_t buffer_bytes = 16384;  // input and output buffers
constexpr int64_t buffer_middle = 8192; // the pointers the program gets
constexpr size_t cfg_out_bytes = 192;   // three STTILECFG results
constexpr int max_stride = 448;

enum class data_kind { int8_random, int8_extreme, bf16_random, bf16_special };

struct tile_shape {
    int rows = 0, colsb = 0;
};

// A tile program: its configuration, input data and code. Run as
// fn(cfg, in + middle, out + middle, cfg_out).
struct program {
    uint64_t seed = 0;
    data_kind kind = data_kind::int8_random;
    uint8_t cfg[64] = {};
    std::vector<uint8_t> input = std::vector<uint8_t>(buffer_bytes);
    std::string listing; // the instructions, for messages
    int instructions = 0;
    int config_instructions = 0; // LDTILECFG, STTILECFG, TILERELEASE
    std::vector<uint8_t> code;
    // The instructions that trap where the CPU has AMX but not the permission
    // (amx_config_traps()).
    int trapped() const { return amx_config_traps() ? instructions : instructions - config_instructions; }
    uint64_t identity() const { // code, configuration and input
        return fnv1a(input.data(), input.size(), fnv1a(cfg, 64, fnv1a(code.data(), code.size())));
    }
};

uint16_t random_bf16(rng &r, bool specials) {
    const uint16_t sign = r.chance(50) ? 0x8000 : 0;
    if (specials && r.chance(40)) {
        constexpr uint16_t table[] = {0x0000, 0x0001, 0x007f, 0x0040, 0x0080, 0x7f7f, 0x7f80, 0x7fc0,
                                      0x7fa1, 0x7f00, 0x3f80, 0x0100, 0x7e00, 0x00ff, 0x0081, 0x3f81};
        return uint16_t(sign | table[r.range(0, int(sizeof table / sizeof table[0]) - 1)]);
    }
    const int exp = specials ? r.range(1, 254) : r.range(120, 134);
    return uint16_t(sign | (exp << 7) | r.range(0, 127));
}

void fill_input(program &p, rng &r) {
    for (size_t i = 0; i < buffer_bytes; i += 2) {
        uint16_t v;
        switch (p.kind) {
        case data_kind::int8_random: v = uint16_t(r.next()); break;
        case data_kind::int8_extreme: {
            constexpr uint8_t ext[] = {255, 128, 127, 0, 1, 255, 128};
            v = uint16_t(ext[r.range(0, 6)] | (ext[r.range(0, 6)] << 8));
            break;
        }
        case data_kind::bf16_random: v = random_bf16(r, false); break;
        default: v = random_bf16(r, true); break;
        }
        memcpy(&p.input[i], &v, 2);
    }
    if (p.kind == data_kind::int8_extreme) { // a block of 255 and one of -128 for full-size products
        memset(&p.input[1024], 255, 1024);
        memset(&p.input[4096], 128, 1024);
        for (size_t i = 12288; i + 4 <= buffer_bytes; i += 4) { // accumulators near the int32 limits
            const uint32_t v = r.chance(50) ? 0x80000000u + uint32_t(r.range(0, 1 << 20))
                                            : 0x7fffffffu - uint32_t(r.range(0, 1 << 20));
            memcpy(&p.input[i], &v, 4);
        }
    }
}

// Assembles a program from its description, one instruction at a time.
class tile_asm : public Xbyak::CodeGenerator {
public:
    tile_asm() : Xbyak::CodeGenerator(65536) {}
    const Xbyak::Tmm &tmm(int i) const {
        const Xbyak::Tmm *t[8] = {&tmm0, &tmm1, &tmm2, &tmm3, &tmm4, &tmm5, &tmm6, &tmm7};
        return *t[i];
    }
    // [base + index * scale + disp] with index = stride >> log2(scale);
    // base is rsi (input) / rdx (output) or a copy in r10 / r11 (VEX.B).
    Xbyak::Address tile_operand(bool output, rng &r, int64_t stride, int disp, std::ostringstream &text) {
        const Xbyak::Reg64 index_regs[] = {r8, r9, rax, r12};
        const int scales[] = {1, 2, 4, 8};
        int si = r.range(0, 3);
        while (stride % scales[si]) --si;
        const Xbyak::Reg64 index = index_regs[r.range(0, 3)];
        mov(index, stride / scales[si]);
        Xbyak::Reg64 base = output ? rdx : rsi;
        if (r.chance(50)) {
            base = output ? r11 : r10;
            mov(base, output ? rdx : rsi);
        }
        text << "[" << base.toString() << " + " << index.toString() << "*" << scales[si] << " + " << disp << "]"
             << " stride " << stride;
        return ptr[base + index * scales[si] + disp];
    }
};

int64_t random_stride(rng &r, int colsb) {
    switch (r.range(0, 5)) {
    case 0: return 0;
    case 1: return colsb;
    case 2: return 64;
    case 3: return -r.range(1, max_stride);
    default: return r.range(1, max_stride);
    }
}

int random_disp(rng &r) {
    switch (r.range(0, 2)) {
    case 0: return 0;
    case 1: return r.range(-128, 127);
    default: return r.range(-200, 200) * 3;
    }
}

// The tiles of a program: one TDP trio dst (M x 4N), a (M x 4K), b (K x 4N),
// sometimes a second dst of the dst's shape reading the same sources; the
// other tiles random shapes or unconfigured.
struct tile_plan {
    tile_shape shape[8];
    int d = 0, a = 1, b = 2, d2 = -1;
};

tile_plan plan_tiles(rng &r, data_kind kind) {
    tile_plan t;
    int order[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    for (int i = 7; i > 0; --i) std::swap(order[i], order[r.range(0, i)]);
    t.d = order[0], t.a = order[1], t.b = order[2];
    const bool full = kind == data_kind::int8_extreme && r.chance(50);
    const int m = full ? 16 : r.range(1, 16), k = full ? 16 : r.range(1, 16), n = full ? 16 : r.range(1, 16);
    t.shape[t.d] = {m, 4 * n};
    t.shape[t.a] = {m, 4 * k};
    t.shape[t.b] = {k, 4 * n};
    if (r.chance(40)) {
        t.d2 = order[3];
        t.shape[t.d2] = t.shape[t.d];
    }
    for (int i = t.d2 >= 0 ? 4 : 3; i < 8; ++i)
        if (r.chance(70)) t.shape[order[i]] = {r.range(1, 16), 4 * r.range(1, 16)}; // loads need whole dwords
    return t;
}

amx_op random_tdp(rng &r, data_kind kind) {
    if (kind == data_kind::bf16_random || kind == data_kind::bf16_special) return amx_op::tdpbf16ps;
    const amx_op ops[] = {amx_op::tdpbssd, amx_op::tdpbsud, amx_op::tdpbusd, amx_op::tdpbuud};
    return ops[r.range(0, 3)];
}

void emit_tdp(tile_asm &g, amx_op op, int d, int a, int b) {
    switch (op) {
    case amx_op::tdpbssd: g.tdpbssd(g.tmm(d), g.tmm(a), g.tmm(b)); break;
    case amx_op::tdpbsud: g.tdpbsud(g.tmm(d), g.tmm(a), g.tmm(b)); break;
    case amx_op::tdpbusd: g.tdpbusd(g.tmm(d), g.tmm(a), g.tmm(b)); break;
    case amx_op::tdpbuud: g.tdpbuud(g.tmm(d), g.tmm(a), g.tmm(b)); break;
    default: g.tdpbf16ps(g.tmm(d), g.tmm(a), g.tmm(b)); break;
    }
}

program make_program(uint64_t seed) {
    program p;
    p.seed = seed;
    rng r{seed * 0x2545f4914f6cdd1dull + 1};
    p.kind = static_cast<data_kind>(r.range(0, 3));
    fill_input(p, r);
    const tile_plan t = plan_tiles(r, p.kind);
    p.cfg[0] = 1;
    for (int i = 0; i < 8; ++i) {
        p.cfg[16 + 2 * i] = uint8_t(t.shape[i].colsb);
        p.cfg[48 + i] = uint8_t(t.shape[i].rows);
    }
    std::vector<int> loads;
    for (int i = 0; i < 8; ++i)
        if (t.shape[i].rows) loads.push_back(i);
    for (size_t i = loads.size(); i > 1; --i) std::swap(loads[i - 1], loads[size_t(r.range(0, int(i) - 1))]);
    // start_row: the first load then starts there (the rows above stay zero).
    if (r.chance(25)) p.cfg[1] = uint8_t(r.range(0, t.shape[loads[0]].rows - 1));

    tile_asm g;
    std::ostringstream text;
    g.push(g.r12);
    auto note = [&](const std::string &s) {
        text << "  " << s << "\n";
        ++p.instructions;
        if (s.find("tilecfg") != std::string::npos || s == "tilerelease") ++p.config_instructions;
    };
    g.ldtilecfg(g.ptr[g.rdi]);
    note("ldtilecfg [cfg] start_row " + std::to_string(p.cfg[1]));
    if (r.chance(30)) {
        g.sttilecfg(g.ptr[g.rcx]);
        note("sttilecfg [cfg_out + 0]");
    }
    auto load = [&](int tile) {
        std::ostringstream s;
        const bool t1 = r.chance(30);
        s << (t1 ? "tileloaddt1 tmm" : "tileloadd tmm") << tile << ", ";
        const Xbyak::Address a = g.tile_operand(false, r, random_stride(r, t.shape[tile].colsb), random_disp(r), s);
        if (t1) g.tileloaddt1(g.tmm(tile), a);
        else g.tileloadd(g.tmm(tile), a);
        note(s.str());
    };
    for (int tile : loads) {
        if (r.chance(10)) {
            g.tilezero(g.tmm(tile));
            note("tilezero tmm" + std::to_string(tile));
        } else {
            load(tile);
        }
    }
    const int n_tdp = r.range(1, 3);
    for (int i = 0; i < n_tdp; ++i) {
        const amx_op op = random_tdp(r, p.kind);
        const bool second = t.d2 >= 0 && r.chance(50);
        const int d = second ? t.d2 : t.d;
        emit_tdp(g, op, d, t.a, t.b);
        note(std::string(to_string(op)) + " tmm" + std::to_string(d) + ", tmm" + std::to_string(t.a) + ", tmm" +
             std::to_string(t.b));
        if (r.chance(25)) load(r.chance(50) ? t.a : t.b); // new sources for the next TDP
    }
    for (int tile : loads) {
        if (r.chance(10)) continue;
        std::ostringstream s;
        s << "tilestored ";
        const Xbyak::Address a = g.tile_operand(true, r, random_stride(r, t.shape[tile].colsb), random_disp(r), s);
        g.tilestored(a, g.tmm(tile));
        s << ", tmm" << tile;
        note(s.str());
    }
    g.sttilecfg(g.ptr[g.rcx + 64]);
    note("sttilecfg [cfg_out + 64]");
    g.tilerelease();
    note("tilerelease");
    g.sttilecfg(g.ptr[g.rcx + 128]);
    note("sttilecfg [cfg_out + 128]");
    g.pop(g.r12);
    g.ret();
    p.code.assign(g.getCode(), g.getCode() + g.getSize());
    p.listing = text.str();
    return p;
}

// Executable copies of programs' code.
class code_pages {
public:
    explicit code_pages(const std::vector<program> &ps) {
        for (const program &p : ps) size_ += (p.code.size() + 63) / 64 * 64;
        base_ = static_cast<uint8_t *>(
            mmap(nullptr, size_ ? size_ : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        size_t off = 0;
        for (const program &p : ps) {
            memcpy(base_ + off, p.code.data(), p.code.size());
            entries_.push_back(base_ + off);
            off += (p.code.size() + 63) / 64 * 64;
        }
        mprotect(base_, size_ ? size_ : 1, PROT_READ | PROT_EXEC);
    }
    ~code_pages() { munmap(base_, size_ ? size_ : 1); }
    using fn = void (*)(const uint8_t *, const uint8_t *, uint8_t *, uint8_t *);
    fn entry(size_t i) const { return reinterpret_cast<fn>(entries_[i]); }
    // "program i + offset" for a code address in a child's message.
    std::string locate(const std::string &message) const {
        const size_t at = message.find("0x");
        if (at == std::string::npos) return "";
        const uint8_t *rip = reinterpret_cast<const uint8_t *>(strtoull(message.c_str() + at, nullptr, 16));
        for (size_t i = entries_.size(); i-- > 0;)
            if (rip >= entries_[i]) return "program " + std::to_string(i) + " + " + std::to_string(rip - entries_[i]);
        return "";
    }

private:
    uint8_t *base_ = nullptr;
    size_t size_ = 0;
    std::vector<uint8_t *> entries_;
};

constexpr size_t result_bytes = cfg_out_bytes + buffer_bytes;

// Runs every program; result i = 192 bytes of STTILECFG output, then the
// output buffer (filled with 0xa5 before).
void run_programs(const std::vector<program> &ps, const code_pages &code, uint8_t *results) {
    std::vector<uint8_t> in(buffer_bytes);
    for (size_t i = 0; i < ps.size(); ++i) {
        uint8_t *res = results + i * result_bytes;
        memset(res, 0xa5, result_bytes);
        memcpy(in.data(), ps[i].input.data(), buffer_bytes);
        code.entry(i)(ps[i].cfg, in.data() + buffer_middle, res + cfg_out_bytes + buffer_middle, res);
    }
}

// Runs a program's code without executing it: the tile instructions through
// emulate_amx_instruction(), the few others the generator emits (mov of an
// immediate or a register, push / pop r12, ret) here. So every instruction,
// LDTILECFG and STTILECFG too, goes through the emulator even on an AMX CPU.
bool step_program(const uint8_t *code, const uint8_t *cfg, const uint8_t *in, uint8_t *out, uint8_t *cfg_out) {
    ucontext_t uc;
    memset(&uc, 0, sizeof uc); // no XSAVE area: the emulator keeps the whole state
    greg_t *g = uc.uc_mcontext.gregs;
    constexpr int reg[16] = {REG_RAX, REG_RCX, REG_RDX, REG_RBX, REG_RSP, REG_RBP, REG_RSI, REG_RDI,
                             REG_R8,  REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15};
    g[REG_RDI] = greg_t(cfg), g[REG_RSI] = greg_t(in), g[REG_RDX] = greg_t(out), g[REG_RCX] = greg_t(cfg_out);
    g[REG_RIP] = greg_t(code);
    for (int steps = 0; steps < 100000; ++steps) {
        const uint8_t *p = reinterpret_cast<const uint8_t *>(g[REG_RIP]);
        int32_t imm;
        const bool rex = (p[0] & 0xf0) == 0x40;
        const uint8_t rex_bits = rex ? p[0] : 0;
        const uint8_t *op = p + (rex ? 1 : 0);
        if (p[0] == 0xc3) return true;
        if (p[0] == 0x41 && (p[1] == 0x54 || p[1] == 0x5c)) { // push / pop r12: the register is not touched
            g[REG_RIP] += 2;
        } else if (op[0] >= 0xb8 && op[0] <= 0xbf && !(rex_bits & 8)) { // mov r32, imm32
            memcpy(&imm, op + 1, 4);
            g[reg[(op[0] - 0xb8) | ((rex_bits & 1) << 3)]] = greg_t(uint32_t(imm));
            g[REG_RIP] += (op - p) + 5;
        } else if ((rex_bits & 8) && op[0] == 0xc7 && (op[1] & 0xf8) == 0xc0) { // mov r64, simm32
            memcpy(&imm, op + 2, 4);
            g[reg[(op[1] & 7) | ((rex_bits & 1) << 3)]] = greg_t(int64_t(imm));
            g[REG_RIP] += 7;
        } else if ((rex_bits & 8) && op[0] == 0x89 && (op[1] >> 6) == 3) { // mov r64, r64
            g[reg[(op[1] & 7) | ((rex_bits & 1) << 3)]] = g[reg[((op[1] >> 3) & 7) | ((rex_bits & 4) << 1)]];
            g[REG_RIP] += 3;
        } else if (!emulate_amx_instruction(&uc)) {
            return false;
        }
    }
    return false;
}

// run_programs() through step_program().
bool step_programs(const std::vector<program> &ps, uint8_t *results) {
    std::vector<uint8_t> in(buffer_bytes);
    for (size_t i = 0; i < ps.size(); ++i) {
        uint8_t *res = results + i * result_bytes;
        memset(res, 0xa5, result_bytes);
        memcpy(in.data(), ps[i].input.data(), buffer_bytes);
        if (!step_program(ps[i].code.data(), ps[i].cfg, in.data() + buffer_middle, res + cfg_out_bytes + buffer_middle,
                          res))
            return false;
    }
    return true;
}

std::vector<program> make_programs(uint64_t first_seed, size_t n) {
    std::vector<program> ps;
    for (size_t i = 0; i < n; ++i) ps.push_back(make_program(first_seed + i));
    return ps;
}

size_t programs_to_run(size_t default_n) {
    const char *v = getenv("QCONV_AMX_EMU_PROGRAMS");
    return v && *v ? size_t(strtoull(v, nullptr, 10)) : default_n;
}

// The emulated run of `ps` in a child; `results` gets the outputs and
// `counters` the child's counters.
child_result run_emulated(const std::vector<program> &ps, const code_pages &code, uint8_t *results,
                          amx_counters *counters) {
    return run_child([&] {
        become_emulated();
        reset_amx_counters();
        run_programs(ps, code, results);
        *counters = amx_thread_counters();
    });
}

// First difference between two results of program `p`, described.
std::string first_difference(const program &p, const uint8_t *want, const uint8_t *got) {
    for (size_t j = 0; j < result_bytes; ++j)
        if (want[j] != got[j]) {
            std::ostringstream s;
            s << "program seed " << p.seed << ": byte " << j
              << (j < cfg_out_bytes ? " of the STTILECFG output" : " of the output buffer") << " hardware 0x"
              << std::hex << int(want[j]) << " emulator 0x" << int(got[j]) << std::dec << "\n"
              << p.listing;
            return s.str();
        }
    return "";
}

// ---------------------------------------------------------------- differential

TEST(AmxEmulator, MatchesHardwareOnRandomPrograms) {
    NEED_AMX();
    const size_t n = programs_to_run(3000);
    const std::vector<program> ps = make_programs(1, n);
    const code_pages code(ps);
    shared_buffer native(n * result_bytes), emulated(n * result_bytes), counters(sizeof(amx_counters));
    ASSERT_TRUE(native.data && emulated.data && counters.data);
    const auto t0 = std::chrono::steady_clock::now();
    const child_result hw = run_child([&] {
        become_native();
        run_programs(ps, code, native.data);
    });
    ASSERT_TRUE(hw.exited_ok()) << "native run: " << hw.describe() << " " << code.locate(hw.err) << "\n"
                                << ps[0].listing;
    const auto t1 = std::chrono::steady_clock::now();
    amx_counters *c = reinterpret_cast<amx_counters *>(counters.data);
    const child_result emu = run_emulated(ps, code, emulated.data, c);
    ASSERT_TRUE(emu.exited_ok()) << "emulated run: " << emu.describe();
    const auto t2 = std::chrono::steady_clock::now();

    size_t instructions = 0, trapped = 0, mismatches = 0;
    for (size_t i = 0; i < n; ++i) {
        instructions += size_t(ps[i].instructions);
        trapped += size_t(ps[i].trapped());
        const std::string diff =
            first_difference(ps[i], native.data + i * result_bytes, emulated.data + i * result_bytes);
        if (!diff.empty() && ++mismatches <= 3) ADD_FAILURE() << diff;
    }
    EXPECT_EQ(mismatches, 0u) << "of " << n << " programs";
    EXPECT_EQ(c->instructions(), trapped); // every instruction that traps reached the emulator

    // Stepped: every instruction (the configuration ones too) emulated.
    std::vector<uint8_t> stepped(n * result_bytes);
    ASSERT_TRUE(step_programs(ps, stepped.data()));
    size_t stepped_mismatches = 0;
    for (size_t i = 0; i < n; ++i) {
        const std::string diff =
            first_difference(ps[i], native.data + i * result_bytes, stepped.data() + i * result_bytes);
        if (!diff.empty() && ++stepped_mismatches <= 3) ADD_FAILURE() << "stepped: " << diff;
    }
    EXPECT_EQ(stepped_mismatches, 0u) << "of " << n << " stepped programs";
    const double ms_native = std::chrono::duration<double, std::milli>(t1 - t0).count();
    const double ms_emulated = std::chrono::duration<double, std::milli>(t2 - t1).count();
    printf("[ amx      ] %zu programs, %zu instructions (%zu trapped, %" PRIu64 " TDPs), %zu bytes compared; native "
           "%.1f ms, emulated %.1f ms (%.1f us per trapped instruction)\n",
           n, instructions, trapped, c->tdps(), n * result_bytes, ms_native, ms_emulated,
           1000 * ms_emulated / double(trapped));
}

// ---------------------------------------------------------------- recorded vectors

std::string vectors_path() { return std::string(QCONV_SOURCE_DIR) + "/tests/data/amx/programs.txt"; }

uint64_t result_hash(const uint8_t *res) { return fnv1a(res, result_bytes); }

TEST(AmxRecord, Vectors) {
    const char *out = getenv("QCONV_AMX_EMU_RECORD");
    if (!out || !*out) GTEST_SKIP() << "set QCONV_AMX_EMU_RECORD=<file> to record the hardware's outputs";
    NEED_AMX();
    const size_t n = programs_to_run(1000);
    const std::vector<program> ps = make_programs(1000001, n);
    const code_pages code(ps);
    shared_buffer native(n * result_bytes);
    const child_result hw = run_child([&] {
        become_native();
        run_programs(ps, code, native.data);
    });
    ASSERT_TRUE(hw.exited_ok()) << hw.describe();
    std::string cpu = "an AMX CPU";
    std::ifstream info("/proc/cpuinfo");
    for (std::string line; std::getline(info, line);)
        if (line.rfind("model name", 0) == 0) {
            cpu = line.substr(line.find(':') + 2);
            break;
        }
    std::ofstream f(out);
    f << "# Outputs of random AMX tile programs (tests/test_amx_emulator.cpp, make_program) on " << cpu
      << ".\n"
         "# Regenerate on an AMX machine:\n"
         "#   QCONV_AMX_EMU_RECORD=tests/data/amx/programs.txt build/tests/test_amx_emulator "
         "--gtest_filter=AmxRecord.*\n"
         "# seed, FNV-1a of code + configuration + input, FNV-1a of the 192 bytes of STTILECFG output and the\n"
         "# 16384-byte output buffer, the instruction count.\n";
    for (size_t i = 0; i < n; ++i)
        f << ps[i].seed << " " << std::hex << ps[i].identity() << " " << result_hash(native.data + i * result_bytes)
          << std::dec << " " << ps[i].instructions << "\n";
    ASSERT_TRUE(f.good());
}

TEST(AmxEmulator, ReplaysRecordedVectors) {
    std::ifstream f(vectors_path());
    ASSERT_TRUE(f) << vectors_path();
    std::vector<program> ps;
    std::vector<uint64_t> want;
    std::string line;
    while (std::getline(f, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream s(line);
        uint64_t seed = 0, identity = 0, hash = 0;
        int instructions = 0;
        s >> seed >> std::hex >> identity >> hash >> std::dec >> instructions;
        ps.push_back(make_program(seed));
        ASSERT_EQ(ps.back().identity(), identity)
            << "seed " << seed << ": the program generator changed; record the vectors again (see the file)";
        ASSERT_EQ(ps.back().instructions, instructions);
        want.push_back(hash);
    }
    ASSERT_GE(ps.size(), 100u);
    const code_pages code(ps);
    shared_buffer emulated(ps.size() * result_bytes), counters(sizeof(amx_counters));
    amx_counters *c = reinterpret_cast<amx_counters *>(counters.data);
    const child_result emu = run_emulated(ps, code, emulated.data, c);
    ASSERT_TRUE(emu.exited_ok()) << emu.describe();
    size_t mismatches = 0, instructions = 0, trapped = 0;
    for (size_t i = 0; i < ps.size(); ++i) {
        instructions += size_t(ps[i].instructions);
        trapped += size_t(ps[i].trapped());
        if (result_hash(emulated.data + i * result_bytes) != want[i] && ++mismatches <= 3)
            ADD_FAILURE() << "seed " << ps[i].seed << " differs from the recorded hardware output\n" << ps[i].listing;
    }
    EXPECT_EQ(mismatches, 0u);
    EXPECT_EQ(c->instructions(), trapped);
    std::vector<uint8_t> stepped(ps.size() * result_bytes);
    ASSERT_TRUE(step_programs(ps, stepped.data()));
    size_t stepped_mismatches = 0;
    for (size_t i = 0; i < ps.size(); ++i)
        if (result_hash(stepped.data() + i * result_bytes) != want[i] && ++stepped_mismatches <= 3)
            ADD_FAILURE() << "stepped: seed " << ps[i].seed << " differs from the recorded hardware output\n"
                          << ps[i].listing;
    EXPECT_EQ(stepped_mismatches, 0u);
    printf("[ amx      ] %zu recorded programs, %zu instructions, %zu bytes compared (hashed)\n", ps.size(),
           instructions, ps.size() * result_bytes);
}

} // namespace
} // namespace qconv::test
