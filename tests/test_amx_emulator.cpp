// The AMX emulator (tests/support/amx_emulator.h) and its fidelity.
//
// Random tile programs are assembled with Xbyak and run three ways: natively
// (an AMX CPU, in a child that asks for the AMX permission), trapped (a child
// without it, where the tile instructions raise SIGILL) and stepped (every
// instruction through emulate_amx_instruction(), nothing executed).
// STTILECFG and every byte of the output buffers must agree. Without AMX the
// outputs recorded from the hardware (tests/data/amx/programs.txt) are
// replayed instead; regenerate them on an AMX machine with (one line)
//   QCONV_AMX_EMU_RECORD=tests/data/amx/programs.txt
//     build/tests/test_amx_emulator --gtest_filter=AmxRecord.*
// QCONV_AMX_EMU_PROGRAMS=N runs N random programs instead of the default.
// The faults, the hand-over of unknown instructions, the counters, threads,
// MXCSR and the dispatcher's switch have tests of their own below.
//
// Every trapped run is a child process that never asked for the permission,
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

#include <oneapi/dnnl/dnnl.h>
#include <xbyak/xbyak.h>

#include "dispatch/host_platform.h"
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

void set_handler(int sig, void (*handler)(int, siginfo_t *, void *)) {
    struct sigaction a = {};
    a.sa_sigaction = handler;
    a.sa_flags = SA_SIGINFO;
    sigaction(sig, &a, nullptr);
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
    set_handler(SIGILL, on_native_fault);
    set_handler(SIGSEGV, on_native_fault);
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
            const uint8_t lo = ext[r.range(0, 6)], hi = ext[r.range(0, 6)];
            v = uint16_t(lo | (hi << 8));
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
    // [base + index * scale + disp] with index = stride / scale; base is rsi
    // (input) / rdx (output) or a copy in r10 / r11 / r13 (VEX.B).
    Xbyak::Address tile_operand(bool output, rng &r, int64_t stride, int disp, std::ostringstream &text) {
        const Xbyak::Reg64 index_regs[] = {r8, r9, rax, r12};
        const int scales[] = {1, 2, 4, 8};
        int si = r.range(0, 3);
        while (stride % scales[si]) --si;
        const Xbyak::Reg64 index = index_regs[r.range(0, 3)];
        mov(index, stride / scales[si]);
        Xbyak::Reg64 base = output ? rdx : rsi;
        switch (r.range(0, 3)) {
        case 0:
        case 1: base = output ? r11 : r10; break;
        case 2: base = r13; break; // [r13 + ...] needs a disp8 even when the displacement is 0
        default: break;
        }
        if (base.getIdx() != (output ? rdx : rsi).getIdx()) mov(base, output ? rdx : rsi);
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
    // What follows LDTILECFG first, and the start_row it sees: a load (which
    // starts there; the rows above stay zero), a store or a TDP of the zeroed
    // tiles, or STTILECFG with any start_row (LDTILECFG takes it) and a TDP.
    enum { first_load, first_store, first_tdp, first_sttilecfg } opening = first_load;
    switch (r.range(0, 9)) {
    case 6: opening = first_store; break;
    case 7: opening = first_tdp; break;
    case 8: opening = first_sttilecfg; break;
    default: break;
    }
    if (opening == first_sttilecfg) p.cfg[1] = uint8_t(r.range(0, 255));
    else if (opening == first_tdp) p.cfg[1] = uint8_t(r.range(0, 15));
    else if (r.chance(opening == first_store ? 70 : 25)) p.cfg[1] = uint8_t(r.range(0, t.shape[loads[0]].rows - 1));

    tile_asm g;
    std::ostringstream text;
    g.push(g.r12);
    g.push(g.r13);
    auto note = [&](const std::string &s) {
        text << "  " << s << "\n";
        ++p.instructions;
        if (s.find("tilecfg") != std::string::npos || s == "tilerelease") ++p.config_instructions;
    };
    // LDTILECFG through [rdi], [r10 + disp], [rdi + rax * 8 + disp] or a copy
    // of the configuration after the code ([rip + disp32]).
    const std::string start_row = " (start_row " + std::to_string(p.cfg[1]) + ")";
    Xbyak::Label cfg_in_code;
    bool cfg_after_code = false;
    switch (r.range(0, 4)) {
    case 0: {
        const int disp = r.range(-300, 300);
        g.lea(g.r10, g.ptr[g.rdi - disp]);
        g.ldtilecfg(g.ptr[g.r10 + disp]);
        note("ldtilecfg [r10 + " + std::to_string(disp) + "]" + start_row);
        break;
    }
    case 1: {
        const int k = r.range(-20, 20);
        g.mov(g.rax, k);
        g.ldtilecfg(g.ptr[g.rdi + g.rax * 8 - 8 * k]);
        note("ldtilecfg [rdi + rax*8 + " + std::to_string(-8 * k) + "]" + start_row);
        break;
    }
    case 2:
        cfg_after_code = true;
        g.ldtilecfg(g.ptr[g.rip + cfg_in_code]);
        note("ldtilecfg [rip + cfg in the code]" + start_row);
        break;
    default: g.ldtilecfg(g.ptr[g.rdi]); note("ldtilecfg [rdi]" + start_row);
    }
    if (opening == first_sttilecfg || r.chance(30)) {
        g.sttilecfg(g.ptr[g.rcx]);
        note("sttilecfg [cfg_out + 0]");
    }
    auto tdp = [&](int d) {
        const amx_op op = p.kind <= data_kind::int8_extreme && r.chance(10) ? amx_op::tdpbf16ps : random_tdp(r, p.kind);
        emit_tdp(g, op, d, t.a, t.b);
        note(std::string(to_string(op)) + " tmm" + std::to_string(d) + ", tmm" + std::to_string(t.a) + ", tmm" +
             std::to_string(t.b));
    };
    auto store = [&](int tile) {
        std::ostringstream s;
        s << "tilestored ";
        const int64_t stride = random_stride(r, t.shape[tile].colsb);
        const int disp = random_disp(r);
        const Xbyak::Address a = g.tile_operand(true, r, stride, disp, s);
        g.tilestored(a, g.tmm(tile));
        s << ", tmm" << tile;
        note(s.str());
    };
    if (opening == first_store) store(loads[0]);
    if (opening == first_tdp || opening == first_sttilecfg) tdp(t.d);
    // Loads; sometimes one from the very bytes the previous load read.
    int64_t last_stride = 0;
    int last_disp = 0;
    auto load = [&](int tile) {
        std::ostringstream s;
        const bool t1 = r.chance(30);
        const bool alias = r.chance(20);
        const int64_t stride = alias ? last_stride : random_stride(r, t.shape[tile].colsb);
        const int disp = alias ? last_disp : random_disp(r);
        last_stride = stride, last_disp = disp;
        s << (t1 ? "tileloaddt1 tmm" : "tileloadd tmm") << tile << ", ";
        const Xbyak::Address a = g.tile_operand(false, r, stride, disp, s);
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
        tdp(t.d2 >= 0 && r.chance(50) ? t.d2 : t.d);
        if (r.chance(25)) load(r.chance(50) ? t.a : t.b); // new sources for the next TDP
    }
    for (int tile : loads)
        if (!r.chance(10)) store(tile);
    g.sttilecfg(g.ptr[g.rcx + 64]);
    note("sttilecfg [cfg_out + 64]");
    g.tilerelease();
    note("tilerelease");
    g.sttilecfg(g.ptr[g.rcx + 128]);
    note("sttilecfg [cfg_out + 128]");
    g.pop(g.r13);
    g.pop(g.r12);
    g.ret();
    if (cfg_after_code) {
        g.L(cfg_in_code);
        for (uint8_t b : p.cfg) g.db(b);
    }
    g.ready();
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
// immediate or a register, lea, push / pop r12 / r13, ret) here. So every instruction,
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
        if (p[0] == 0x41 && (p[1] == 0x54 || p[1] == 0x55 || p[1] == 0x5c || p[1] == 0x5d)) {
            // push / pop r12 / r13: the registers are not touched
            g[REG_RIP] += 2;
        } else if (op[0] >= 0xb8 && op[0] <= 0xbf && !(rex_bits & 8)) { // mov r32, imm32
            memcpy(&imm, op + 1, 4);
            g[reg[(op[0] - 0xb8) | ((rex_bits & 1) << 3)]] = greg_t(uint32_t(imm));
            g[REG_RIP] += (op - p) + 5;
        } else if ((rex_bits & 8) && op[0] == 0xc7 && (op[1] & 0xf8) == 0xc0) { // mov r64, simm32
            memcpy(&imm, op + 2, 4);
            g[reg[(op[1] & 7) | ((rex_bits & 1) << 3)]] = greg_t(int64_t(imm));
            g[REG_RIP] += 7;
        } else if ((rex_bits & 8) && op[0] == 0x8d && (op[1] >> 6) != 3 && (op[1] & 7) != 4 &&
                   (op[1] & 0xc7) != 5) { // lea r64, [r64 (+ disp8 / disp32)]
            const unsigned mod = op[1] >> 6, disp_bytes = mod == 0 ? 0 : mod == 1 ? 1 : 4;
            int32_t disp = 0;
            if (mod == 1) disp = int8_t(op[2]);
            if (mod == 2) memcpy(&disp, op + 2, 4);
            g[reg[((op[1] >> 3) & 7) | ((rex_bits & 4) << 1)]] = g[reg[(op[1] & 7) | ((rex_bits & 1) << 3)]] + disp;
            g[REG_RIP] += 3 + disp_bytes;
        } else if ((rex_bits & 8) && op[0] == 0x89 && (op[1] >> 6) == 3) { // mov r64, r64
            g[reg[(op[1] & 7) | ((rex_bits & 1) << 3)]] = g[reg[((op[1] >> 3) & 7) | ((rex_bits & 4) << 1)]];
            g[REG_RIP] += 3;
        } else if (!emulate_amx_instruction(&uc)) {
            fprintf(stderr, "step_program: no step for the bytes at +%td:", p - code);
            for (int i = 0; i < 8; ++i) fprintf(stderr, " %02x", p[i]);
            fprintf(stderr, "\n");
            return false;
        }
    }
    fprintf(stderr, "step_program: no ret after 100000 steps\n");
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
// `counters` the child's counters; with `memory` the memory model runs (and
// steps the code between the tile instructions), `memory_counters` gets its.
child_result run_emulated(const std::vector<program> &ps, const code_pages &code, uint8_t *results,
                          amx_counters *counters, const amx_memory_options &memory = {},
                          amx_memory_counters *memory_counters = nullptr) {
    return run_child([&] {
        become_emulated();
        set_amx_memory_model(memory);
        reset_amx_counters();
        run_programs(ps, code, results);
        *counters = amx_thread_counters();
        if (memory_counters) *memory_counters = amx_thread_memory_counters();
    });
}

// The native run of `ps` in a child that asks for the permission.
child_result run_native(const std::vector<program> &ps, const code_pages &code, uint8_t *results) {
    return run_child([&] {
        become_native();
        run_programs(ps, code, results);
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
    const child_result hw = run_native(ps, code, native.data);
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
    const child_result hw = run_native(ps, code, native.data);
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

// The recorded programs and their hashes.
void read_vectors(std::vector<program> &ps, std::vector<uint64_t> &want) {
    std::ifstream f(vectors_path());
    ASSERT_TRUE(f) << vectors_path();
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
}

// The memory model on, in its stepping mode, changes no result: the recorded
// programs replay exactly, and their tile rows went through the cache.
TEST(AmxEmulator, ReplaysRecordedVectorsWithTheMemoryModel) {
    std::vector<program> ps;
    std::vector<uint64_t> want;
    read_vectors(ps, want);
    if (HasFatalFailure()) return;
    const code_pages code(ps);
    shared_buffer emulated(ps.size() * result_bytes), counters(sizeof(amx_counters)),
        memory(sizeof(amx_memory_counters));
    amx_counters *c = reinterpret_cast<amx_counters *>(counters.data);
    amx_memory_counters *m = reinterpret_cast<amx_memory_counters *>(memory.data);
    amx_memory_options o;
    o.enabled = true;
    o.step_vectors = true;
    const child_result emu = run_emulated(ps, code, emulated.data, c, o, m);
    ASSERT_TRUE(emu.exited_ok()) << emu.describe();
    size_t mismatches = 0, trapped = 0;
    for (size_t i = 0; i < ps.size(); ++i) {
        trapped += size_t(ps[i].trapped());
        if (result_hash(emulated.data + i * result_bytes) != want[i] && ++mismatches <= 3)
            ADD_FAILURE() << "seed " << ps[i].seed << " differs with the memory model on\n" << ps[i].listing;
    }
    EXPECT_EQ(mismatches, 0u);
    EXPECT_EQ(c->instructions(), trapped);
    EXPECT_GT(m->bytes_of(amx_mem_kind::tileloadd), 0u);
    EXPECT_GT(m->bytes_of(amx_mem_kind::tilestored), 0u);
    printf("[ amx      ] memory model: %" PRIu64 " bytes loaded by tiles (%" PRIu64 " from L1), %" PRIu64
           " stored, %" PRIu64 " vector instructions stepped\n",
           m->bytes_of(amx_mem_kind::tileloadd), m->bytes[0][0], m->bytes_of(amx_mem_kind::tilestored),
           m->vector_instructions);
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

namespace qconv::test {
namespace {

// ---------------------------------------------------------------- small programs

using tile_fn = void (*)(const uint8_t *cfg, const uint8_t *in, uint8_t *out, uint8_t *cfg_out);

// A program assembled by `body` after ldtilecfg [rdi], ending in tilerelease.
struct small_program {
    tile_asm g;
    explicit small_program(const std::function<void(tile_asm &)> &body, bool release = true) {
        g.ldtilecfg(g.ptr[g.rdi]);
        body(g);
        if (release) g.tilerelease();
        g.ret();
        g.ready();
    }
    tile_fn fn() const { return reinterpret_cast<tile_fn>(const_cast<uint8_t *>(g.getCode())); }
    const uint8_t *code() const { return g.getCode(); }
};

// Configuration images.
struct cfg_bytes {
    uint8_t b[64] = {};
    cfg_bytes &tile(int i, int rows, int colsb) {
        b[0] = 1;
        b[16 + 2 * i] = uint8_t(colsb);
        b[48 + i] = uint8_t(rows);
        return *this;
    }
    cfg_bytes &set(int byte, uint8_t v) {
        b[byte] = v;
        return *this;
    }
};

alignas(64) uint8_t small_in[buffer_bytes], small_out[buffer_bytes], small_cfg_out[cfg_out_bytes];

void run_small(const small_program &p, const cfg_bytes &c) {
    p.fn()(c.b, small_in + buffer_middle, small_out + buffer_middle, small_cfg_out);
}

// ---------------------------------------------------------------- faults

enum class fault { gp, ud, undecoded };

struct fault_case {
    const char *name;
    fault kind;
    bool config; // the faulting instruction is LDTILECFG (runs natively on an AMX CPU)
    cfg_bytes cfg;
    std::function<void(tile_asm &)> body;
};

std::vector<fault_case> fault_cases() {
    auto load0 = [](tile_asm &g) {
        g.mov(g.r8, 64);
        g.tileloadd(g.tmm0, g.ptr[g.rsi + g.r8]);
    };
    auto store0 = [](tile_asm &g) {
        g.mov(g.r8, 64);
        g.tilestored(g.ptr[g.rdx + g.r8], g.tmm0);
    };
    auto tdp012 = [](tile_asm &g) { g.tdpbssd(g.tmm0, g.tmm1, g.tmm2); };
    auto trio = [](int drows, int dcolsb, int arows, int acolsb, int brows, int bcolsb) {
        return cfg_bytes().tile(0, drows, dcolsb).tile(1, arows, acolsb).tile(2, brows, bcolsb);
    };
    auto none = [](tile_asm &) {};
    return {
        {"palette 2", fault::gp, true, cfg_bytes().set(0, 2), none},
        {"reserved byte 5", fault::gp, true, cfg_bytes().tile(0, 4, 16).set(5, 1), none},
        {"reserved byte 40", fault::gp, true, cfg_bytes().tile(0, 4, 16).set(40, 1), none},
        {"reserved byte 60", fault::gp, true, cfg_bytes().tile(0, 4, 16).set(60, 1), none},
        {"17 rows", fault::gp, true, cfg_bytes().tile(0, 17, 16), none},
        {"65 bytes per row", fault::gp, true, cfg_bytes().tile(0, 4, 65), none},
        {"rows without columns", fault::gp, true, cfg_bytes().tile(0, 4, 0), none},
        {"columns without rows", fault::gp, true, cfg_bytes().tile(0, 0, 4), none},
        {"load, not configured", fault::ud, false, cfg_bytes(), load0},
        {"load of a tile with no rows", fault::ud, false, cfg_bytes().tile(1, 4, 16), load0},
        {"load, colsb 6", fault::ud, false, cfg_bytes().tile(0, 4, 6), load0},
        {"store, colsb 23", fault::ud, false, cfg_bytes().tile(0, 4, 23), store0},
        {"load, start_row 5 of 4 rows", fault::ud, false, cfg_bytes().tile(0, 4, 16).set(1, 5), load0},
        {"tilezero, not configured", fault::ud, false, cfg_bytes(), [](tile_asm &g) { g.tilezero(g.tmm1); }},
        {"tdp, not configured", fault::ud, false, cfg_bytes(), tdp012},
        {"tdp, dst rows != src1 rows", fault::ud, false, trio(4, 16, 5, 16, 4, 16), tdp012},
        {"tdp, src2 rows != src1 colsb / 4", fault::ud, false, trio(4, 16, 4, 16, 5, 16), tdp012},
        {"tdp, src2 colsb != dst colsb", fault::ud, false, trio(4, 16, 4, 16, 4, 20), tdp012},
        {"tdp, colsb 6", fault::ud, false, trio(4, 4, 4, 6, 1, 4), tdp012},
        {"tdp, src1 = src2", fault::ud, false, trio(4, 16, 4, 16, 4, 16),
         [](tile_asm &g) { g.tdpbssd(g.tmm0, g.tmm1, g.tmm1); }},
        {"tdp, dst = src1", fault::ud, false, trio(4, 16, 4, 16, 4, 16),
         [](tile_asm &g) { g.tdpbusd(g.tmm0, g.tmm0, g.tmm2); }},
        {"tdp, an unconfigured source", fault::ud, false, trio(4, 16, 4, 16, 4, 16),
         [](tile_asm &g) { g.tdpbf16ps(g.tmm0, g.tmm1, g.tmm3); }},
        {"tilestored without an index (Xbyak's invalid form)", fault::undecoded, false, cfg_bytes().tile(0, 4, 16),
         [](tile_asm &g) { g.tilestored(g.ptr[g.rdx], g.tmm0); }},
    };
}

// Whether the emulator's death says the fault and an address.
bool says(const child_result &r, fault f) {
    const char *kind = f == fault::gp ? "qconv amx emulator: #GP" : "qconv amx emulator: #UD";
    return r.killed_by(SIGABRT) && r.err.find(kind) != std::string::npos && r.err.find(" at 0x") != std::string::npos;
}

TEST(AmxEmulator, FaultsLikeTheHardwareAndLoudly) {
    int checked_native = 0;
    for (const fault_case &c : fault_cases()) {
        SCOPED_TRACE(c.name);
        const small_program p(c.body);
        const int hw_signal = c.kind == fault::gp ? SIGSEGV : SIGILL;
        if (cpu_has_amx()) {
            const child_result hw = run_child([&] {
                become_native();
                signal(SIGSEGV, SIG_DFL), signal(SIGILL, SIG_DFL);
                run_small(p, c.cfg);
            });
            EXPECT_TRUE(hw.killed_by(hw_signal)) << "hardware: " << hw.describe();
            ++checked_native;
        }
        // Trapped: on an AMX CPU a bad LDTILECFG faults on the hardware itself.
        const child_result emu = run_child([&] {
            become_emulated();
            signal(SIGSEGV, SIG_DFL); // not a sanitizer's report
            run_small(p, c.cfg);
        });
        if (c.kind == fault::undecoded) EXPECT_TRUE(emu.killed_by(SIGILL)) << emu.describe();
        else if (c.config && !amx_config_traps()) EXPECT_TRUE(emu.killed_by(SIGSEGV)) << emu.describe();
        else EXPECT_TRUE(says(emu, c.kind)) << emu.describe();
        // Stepped: the emulator's own check, whatever the CPU.
        const child_result step = run_child([&] {
            if (!step_program(p.code(), c.cfg.b, small_in + buffer_middle, small_out + buffer_middle, small_cfg_out))
                _exit(7);
        });
        if (c.kind == fault::undecoded) EXPECT_TRUE(WIFEXITED(step.status) && WEXITSTATUS(step.status) == 7);
        else EXPECT_TRUE(says(step, c.kind)) << step.describe();
    }
    if (!cpu_has_amx()) printf("[ amx      ] no AMX: the hardware's faults were not checked\n");
    else printf("[ amx      ] %d fault cases checked on the hardware\n", checked_native);
}

// ---------------------------------------------------------------- unknown SIGILL

std::atomic<int> previous_handler_calls{0};

void previous_handler(int, siginfo_t *, void *context) {
    previous_handler_calls.fetch_add(1);
    static_cast<ucontext_t *>(context)->uc_mcontext.gregs[REG_RIP] += 2; // over ud2
}

TEST(AmxEmulator, HandsUnknownInstructionsOn) {
    tile_asm g;
    g.ud2();
    g.ret();
    g.ready();
    auto fn = reinterpret_cast<void (*)()>(const_cast<uint8_t *>(g.getCode()));
    // To the handler installed before the emulator's.
    const child_result chained = run_child([&] {
        set_handler(SIGILL, previous_handler);
        install_amx_handler();
        fn();
        fn();
        _exit(previous_handler_calls.load() == 2 ? 0 : 9);
    });
    EXPECT_TRUE(chained.exited_ok()) << chained.describe();
    // To the default action.
    const child_result dies = run_child([&] {
        install_amx_handler();
        fn();
    });
    EXPECT_TRUE(dies.killed_by(SIGILL)) << dies.describe();
    // Removing the handler restores the previous one.
    const child_result removed = run_child([&] {
        set_handler(SIGILL, previous_handler);
        install_amx_handler();
        remove_amx_handler();
        struct sigaction now = {};
        sigaction(SIGILL, nullptr, &now);
        _exit(now.sa_sigaction == previous_handler ? 0 : 9);
    });
    EXPECT_TRUE(removed.exited_ok()) << removed.describe();
}

// ---------------------------------------------------------------- counters

TEST(AmxEmulator, CountsInstructionsAndMultiplyAdds) {
    // dst 10 x 7 dwords, src1 10 x 12 dwords, src2 12 x 7 dwords.
    const cfg_bytes cfg = cfg_bytes().tile(0, 10, 28).tile(1, 10, 48).tile(2, 12, 28);
    // The encodings the SDM gives (and the issue quotes), as Xbyak assembles them.
    {
        tile_asm g;
        g.ldtilecfg(g.ptr[g.rdi]);
        g.tdpbusd(g.tmm0, g.tmm4, g.tmm6);
        const uint8_t want[] = {0xc4, 0xe2, 0x78, 0x49, 0x07, 0xc4, 0xe2, 0x49, 0x5e, 0xc4};
        ASSERT_EQ(g.getSize(), sizeof want);
        EXPECT_EQ(memcmp(g.getCode(), want, sizeof want), 0);
    }
    const small_program p([](tile_asm &g) {
        g.tilezero(g.tmm0);
        g.mov(g.r8, 64);
        g.tileloadd(g.tmm1, g.ptr[g.rsi + g.r8]);
        g.tileloaddt1(g.tmm2, g.ptr[g.rsi + g.r8]);
        g.tdpbusd(g.tmm0, g.tmm1, g.tmm2);
        g.tdpbssd(g.tmm0, g.tmm1, g.tmm2);
        g.tdpbf16ps(g.tmm0, g.tmm1, g.tmm2);
        g.tilestored(g.ptr[g.rdx + g.r8], g.tmm0);
        g.sttilecfg(g.ptr[g.rcx]);
    });
    reset_amx_counters();
    const amx_counters before = amx_thread_counters();
    EXPECT_EQ(before.instructions(), 0u);
    ASSERT_TRUE(step_program(p.code(), cfg.b, small_in + buffer_middle, small_out + buffer_middle, small_cfg_out));
    const amx_counters c = amx_thread_counters();
    EXPECT_EQ(c.of(amx_op::ldtilecfg), 1u);
    EXPECT_EQ(c.of(amx_op::sttilecfg), 1u);
    EXPECT_EQ(c.of(amx_op::tilerelease), 1u);
    EXPECT_EQ(c.of(amx_op::tilezero), 1u);
    EXPECT_EQ(c.of(amx_op::tileloadd), 1u);
    EXPECT_EQ(c.of(amx_op::tileloaddt1), 1u);
    EXPECT_EQ(c.of(amx_op::tilestored), 1u);
    EXPECT_EQ(c.of(amx_op::tdpbusd), 1u);
    EXPECT_EQ(c.of(amx_op::tdpbssd), 1u);
    EXPECT_EQ(c.of(amx_op::tdpbf16ps), 1u);
    EXPECT_EQ(c.instructions(), 10u);
    EXPECT_EQ(c.tdps(), 3u);
    EXPECT_EQ(c.macs, 2u * 10 * 48 * 7 + 10u * 24 * 7);       // int8: rows x K bytes x N; bf16: K pairs x 2
    EXPECT_EQ(c.capacity, 2u * 16 * 64 * 16 + 16u * 32 * 16); // the TDPs' full-size work
    EXPECT_DOUBLE_EQ(c.utilisation(), double(8400) / double(40960));
    EXPECT_EQ(amx_total_counters().instructions(), 10u);
    reset_amx_counters();
    EXPECT_EQ(amx_thread_counters().instructions(), 0u);
    EXPECT_EQ(amx_total_counters().macs, 0u);
}

// ---------------------------------------------------------------- threads, MXCSR, cost

TEST(AmxEmulator, OpenMPThreadsEachHaveTheirOwnTiles) {
    const std::vector<program> ps = make_programs(5001, 64);
    const code_pages code(ps);
    std::vector<uint8_t> want(ps.size() * result_bytes);
    ASSERT_TRUE(step_programs(ps, want.data()));
    shared_buffer got(ps.size() * result_bytes), info(64);
    const child_result r = run_child([&] {
        become_emulated();
        reset_amx_counters(); // the parent's stepped run counted too
        int threads = 0;
#pragma omp parallel num_threads(4)
        {
#pragma omp single
            threads = omp_get_num_threads();
            // Interleaved: each thread's program runs while the others run theirs.
            std::vector<uint8_t> in(buffer_bytes);
#pragma omp for schedule(static, 1)
            for (int i = 0; i < int(ps.size()); ++i) {
                uint8_t *res = got.data + size_t(i) * result_bytes;
                memset(res, 0xa5, result_bytes);
                memcpy(in.data(), ps[size_t(i)].input.data(), buffer_bytes);
                code.entry(size_t(i))(ps[size_t(i)].cfg, in.data() + buffer_middle, res + cfg_out_bytes + buffer_middle,
                                      res);
            }
        }
        const uint64_t total = amx_total_counters().instructions();
        memcpy(info.data, &threads, sizeof threads);
        memcpy(info.data + 8, &total, sizeof total);
    });
    ASSERT_TRUE(r.exited_ok()) << r.describe();
    int threads = 0;
    uint64_t total = 0;
    memcpy(&threads, info.data, sizeof threads);
    memcpy(&total, info.data + 8, sizeof total);
    EXPECT_EQ(threads, 4);
    size_t trapped = 0;
    for (size_t i = 0; i < ps.size(); ++i) {
        trapped += size_t(ps[i].trapped());
        EXPECT_EQ(first_difference(ps[i], want.data() + i * result_bytes, got.data + i * result_bytes), "");
    }
    EXPECT_EQ(total, trapped); // the sum over the threads' counters
}

TEST(AmxEmulator, IgnoresAndKeepsTheCallersMxcsr) {
    std::vector<program> ps;
    for (uint64_t seed = 7001; ps.size() < 40; ++seed) { // bf16 programs
        program p = make_program(seed);
        if (p.kind == data_kind::bf16_random || p.kind == data_kind::bf16_special) ps.push_back(std::move(p));
    }
    const code_pages code(ps);
    std::vector<uint8_t> want(ps.size() * result_bytes);
    ASSERT_TRUE(step_programs(ps, want.data()));
    shared_buffer got(ps.size() * result_bytes);
    const child_result r = run_child([&] {
        become_emulated();
        const unsigned odd_csr = 0x1f80 | 0x6000; // round toward zero, no FTZ / DAZ
        _mm_setcsr(odd_csr);
        run_programs(ps, code, got.data);
        if (_mm_getcsr() != odd_csr) _exit(8);
    });
    ASSERT_TRUE(r.exited_ok()) << r.describe();
    for (size_t i = 0; i < ps.size(); ++i)
        EXPECT_EQ(first_difference(ps[i], want.data() + i * result_bytes, got.data + i * result_bytes), "");
}

TEST(AmxEmulator, CostOfATrappedInstruction) {
    const cfg_bytes cfg = cfg_bytes().tile(0, 16, 64);
    constexpr int n = 2000;
    const small_program p([](tile_asm &g) {
        for (int i = 0; i < n; ++i) g.tilezero(g.tmm0);
    });
    shared_buffer out(16);
    const child_result r = run_child([&] {
        become_emulated();
        reset_amx_counters();
        const auto t0 = std::chrono::steady_clock::now();
        run_small(p, cfg);
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        const uint64_t zeros = amx_thread_counters().of(amx_op::tilezero);
        memcpy(out.data, &us, 8);
        memcpy(out.data + 8, &zeros, 8);
    });
    ASSERT_TRUE(r.exited_ok()) << r.describe();
    double us = 0;
    uint64_t zeros = 0;
    memcpy(&us, out.data, 8);
    memcpy(&zeros, out.data + 8, 8);
    EXPECT_EQ(zeros, uint64_t(n));
    printf("[ amx      ] %.2f us per trapped tilezero\n", us / n);
}

// ---------------------------------------------------------------- the dispatcher

TEST(AmxEmulator, GivesTheDispatcherAmx) {
    // Whether the host can have the emulated platform (this child's detection
    // asks for the permission: it is a child).
    const child_result r = run_child([] {
        const impl::feature_set f = impl::detected_features();
        _exit(f.has(impl::cpu_feature::avx512_core_vnni) && f.has(impl::cpu_feature::avx512_bf16) ? 0 : 10);
    });
    // A child whose first detection happens under the switch.
    const child_result e = run_child([] {
        if (amx_permission_granted()) _exit(4);
        {
            amx_emulation emu;
            const impl::platform p = impl::host_platform();
            const impl::feature_set f = impl::detected_features();
            const bool host_ok = f.has(impl::cpu_feature::avx512_core_vnni) && f.has(impl::cpu_feature::avx512_bf16);
            if (!host_ok) _exit(11); // nothing to emulate on
            if (!p.has(impl::cpu_feature::amx_int8) || !p.has(impl::cpu_feature::amx_bf16)) _exit(12);
            if (max_cpu_isa() == isa::avx512_core_bf16 && getenv("QCONV_MAX_CPU_ISA") == nullptr) _exit(13);
            if (!emu.traps() || amx_permission_granted()) _exit(14); // the detection did not ask
            // A tile instruction traps and is counted.
            reset_amx_counters();
            const cfg_bytes cfg = cfg_bytes().tile(0, 2, 8);
            const small_program prog([](tile_asm &g) { g.tilezero(g.tmm0); });
            run_small(prog, cfg);
            if (amx_thread_counters().of(amx_op::tilezero) != 1) _exit(15);
            // oneDNN is capped below AMX and did not ask for the permission either.
            if (dnnl_get_effective_cpu_isa() != dnnl_cpu_isa_avx512_core_bf16 || amx_permission_granted()) _exit(18);
        }
        // Off again, unless QCONV_TEST_AMX=emulate keeps the process emulated.
        if (impl::host_platform().has(impl::cpu_feature::amx_int8) != (amx_test_mode() == amx_mode::emulate)) _exit(16);
        if (amx_permission_granted()) _exit(17);
    });
    if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 10)
        GTEST_SKIP() << "needs AVX-512 VNNI and BF16 for the emulated AMX platform";
    EXPECT_TRUE(e.exited_ok()) << e.describe();
}

TEST(AmxEmulator, ModeFromTheEnvironment) {
    const amx_mode m = amx_test_mode();
    const char *v = getenv("QCONV_TEST_AMX");
    if (!v || !*v) EXPECT_EQ(m, cpu_has_amx() ? amx_mode::native : amx_mode::emulate);
    else EXPECT_STREQ(to_string(m), v);
}

} // namespace
} // namespace qconv::test

namespace qconv::test {
namespace {

// TDPBF16PS near the smallest normal: a chain 2^-126, + 2^-149, then + x,
// with x = -1.25 * 2^-149 (exact 2^-126 - 2^-151: rounds to 2^-126 as if the
// exponent were unbounded) or x = -1.375 * 2^-149 (exact 2^-126 - 1.5 *
// 2^-151: rounds to 2^-126 - 2^-150, tiny, so flushed; gradual underflow would
// round it to 2^-126).
uint32_t bf16_edge(uint16_t x_mantissa) {
    const cfg_bytes cfg = cfg_bytes().tile(0, 1, 4).tile(1, 1, 12).tile(2, 3, 4);
    const uint16_t a[6] = {0x2000, 0, 0x1a00, 0, uint16_t(0x1a00 | x_mantissa), 0}; // 2^-63, 2^-75, m * 2^-75
    const uint16_t b[3] = {0x2000, 0x1a80, 0x9a80};                                 // 2^-63, 2^-74, -2^-74
    memset(small_in, 0, sizeof small_in);
    memcpy(small_in + buffer_middle, a, sizeof a);
    for (int k = 0; k < 3; ++k) memcpy(small_in + buffer_middle + 64 * (k + 1), &b[k], 2);
    const small_program p([](tile_asm &g) {
        g.tilezero(g.tmm0);
        g.mov(g.r8, 64);
        g.tileloadd(g.tmm1, g.ptr[g.rsi + g.r8]);
        g.tileloadd(g.tmm2, g.ptr[g.rsi + g.r8 + 64]);
        g.tdpbf16ps(g.tmm0, g.tmm1, g.tmm2);
        g.tilestored(g.ptr[g.rdx + g.r8], g.tmm0);
    });
    uint32_t r = 0;
    if (!step_program(p.code(), cfg.b, small_in + buffer_middle, small_out + buffer_middle, small_cfg_out)) return 1;
    memcpy(&r, small_out + buffer_middle, 4);
    if (cpu_has_amx()) { // and the hardware
        shared_buffer hw(4);
        const child_result c = run_child([&] {
            become_native();
            run_small(p, cfg);
            memcpy(hw.data, small_out + buffer_middle, 4);
        });
        uint32_t h = 0;
        memcpy(&h, hw.data, 4);
        EXPECT_TRUE(c.exited_ok()) << c.describe();
        EXPECT_EQ(h, r) << "hardware vs emulator";
    }
    return r;
}

TEST(AmxEmulator, FlushesWhatIsTinyAfterRounding) {
    EXPECT_EQ(bf16_edge(0x20), 0x00800000u); // 2^-126
    EXPECT_EQ(bf16_edge(0x30), 0x00000000u); // +0
}

} // namespace
} // namespace qconv::test

#if defined(__SANITIZE_ADDRESS__)
namespace qconv::test {
namespace {

// Under AddressSanitizer the emulator's copies are checked: a tile load past
// the end of a buffer is reported, which the hardware would not do.
TEST(AmxEmulator, TileLoadsAreCheckedByAsan) {
    const cfg_bytes cfg = cfg_bytes().tile(0, 2, 64);
    const small_program p([](tile_asm &g) {
        g.mov(g.r8, 64);
        g.tileloadd(g.tmm0, g.ptr[g.rsi + g.r8]);
    });
    const child_result r = run_child([&] {
        std::vector<uint8_t> one_row(64); // the load reads two
        step_program(p.code(), cfg.b, one_row.data(), small_out, small_cfg_out);
    });
    EXPECT_FALSE(r.exited_ok());
    EXPECT_NE(r.err.find("heap-buffer-overflow"), std::string::npos) << r.describe();
}

} // namespace
} // namespace qconv::test
#endif

// The dispatcher learns of the emulator only through the test suite's own
// qconv_test_amx_emulated(), which the library references weakly (libqconv
// exports no switch of its own): on while an amx_emulation lives, and back to
// what it was after (off, unless this process keeps one for all its tests).
extern "C" bool qconv_test_amx_emulated();
TEST(AmxEmulatorHook, OnExactlyWhileAnEmulationLives) {
    const bool before = qconv_test_amx_emulated();
    EXPECT_EQ(qconv::impl::amx_emulated(), before);
    {
        const qconv::test::amx_emulation outer;
        EXPECT_TRUE(qconv::impl::amx_emulated());
        {
            const qconv::test::amx_emulation inner; // nestable
            EXPECT_TRUE(qconv::impl::amx_emulated());
        }
        EXPECT_TRUE(qconv::impl::amx_emulated());
    }
    EXPECT_EQ(qconv::impl::amx_emulated(), before);
}
