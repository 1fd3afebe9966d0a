// jit_generator: create() with W^X pages, dump and perf-map support.
#include "kernels/jit/base/jit_base.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include <unistd.h>

#include "qconv/types.h"

namespace qconv::jit {
namespace {

bool env_on(const char *var) {
    const char *v = std::getenv(var);
    return v && *v && std::strcmp(v, "0") != 0;
}

std::string file_safe(const char *name) {
    std::string s(name);
    for (char &c : s)
        if (c == ':' || c == '/' || c == ' ') c = '_';
    return s;
}

std::atomic<int> dump_counter{0};
std::mutex profile_mutex;

void dump_code(const char *name, const uint8_t *code, size_t size) {
    const int n = dump_counter.fetch_add(1);
    const std::string path = "qconv_jit_" + file_safe(name) + "." + std::to_string(n) + ".bin";
    if (FILE *f = std::fopen(path.c_str(), "wb")) {
        std::fwrite(code, 1, size, f);
        std::fclose(f);
    }
}

void register_perf_map(const char *name, const uint8_t *code, size_t size) {
    std::lock_guard<std::mutex> lock(profile_mutex);
    const std::string path = "/tmp/perf-" + std::to_string(::getpid()) + ".map";
    if (FILE *f = std::fopen(path.c_str(), "a")) {
        std::fprintf(f, "%lx %zx qconv_jit_%s\n", (unsigned long)(uintptr_t)code, size, file_safe(name).c_str());
        std::fclose(f);
    }
}

} // namespace

void jit_generator::create() {
    if (created_) return;
    try {
        generate();
        readyRE();
        // Xbyak 6.x changes page protection in ready() only for AutoGrow
        // buffers; a fixed buffer allocated with DontSetProtectRWE is still
        // read-write here and becomes read-execute now.
        if (!isAutoGrow()) setProtectModeRE();
    } catch (const Xbyak::Error &e) {
        fail("jit", std::string(name()) + ": code generation failed: " + e.what());
    }
    created_ = true;
    const uint8_t *code = getCode();
    const size_t size = getSize();
    if (env_on("QCONV_JIT_DUMP")) dump_code(name(), code, size);
    if (env_on("QCONV_JIT_PROFILE")) register_perf_map(name(), code, size);
}

const Xbyak::Reg64 &jit_generator::abi_param(int i) {
    static const Xbyak::Reg64 regs[6] = {Xbyak::util::rdi, Xbyak::util::rsi, Xbyak::util::rdx,
                                         Xbyak::util::rcx, Xbyak::util::r8,  Xbyak::util::r9};
    return regs[i];
}

void jit_generator::preamble() {
    push(rbx);
    push(rbp);
    push(r12);
    push(r13);
    push(r14);
    push(r15);
}

amx_tile_helper::amx_tile_helper(op o, const std::string &row)
    : jit_generator(4096), op_(o), name_(row + (o == op::load_config ? ":ldtilecfg" : ":tilerelease")) {
    create();
}

void amx_tile_helper::generate() {
    if (op_ == op::load_config) ldtilecfg(ptr[abi_param(0)]);
    else tilerelease();
    ret();
}

void jit_generator::postamble() {
    pop(r15);
    pop(r14);
    pop(r13);
    pop(r12);
    pop(rbp);
    pop(rbx);
    vzeroupper();
    ret();
}

} // namespace qconv::jit
