// Thin base class for every Xbyak generator in qconv (conv and MatMul kernels).
//
// A generator derives from jit_generator, names itself (the implementation
// name, e.g. "jit:conv_x8s8:avx512_core_vnni") and emits its code in generate(),
// preferably as a sequence of small emit_*() member functions. create() runs
// generate() once and then readyRE(): the code buffer is allocated with
// Xbyak::DontSetProtectRWE, so its pages are read-write while code is
// emitted and read-execute afterwards (create() switches them with
// setProtectModeRE(), which Xbyak's ready() skips for fixed-size buffers) --
// never writable and executable at once.
//
// Debug aids (environment, read at create()):
//   QCONV_JIT_DUMP=1     writes the code to qconv_jit_<name>.<n>.bin in the
//                        working directory (':' in names becomes '_');
//                        disassemble with objdump -D -b binary -mi386:x86-64
//   QCONV_JIT_PROFILE=1  appends "<addr> <size> qconv_jit_<name>" to
//                        /tmp/perf-<pid>.map so that perf report names JIT code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include <xbyak/xbyak.h>

namespace qconv::jit {

class jit_generator : public Xbyak::CodeGenerator {
public:
    explicit jit_generator(size_t max_code_size = 256 * 1024)
        : Xbyak::CodeGenerator(max_code_size, Xbyak::DontSetProtectRWE) {}
    ~jit_generator() override = default;
    jit_generator(const jit_generator &) = delete;
    jit_generator &operator=(const jit_generator &) = delete;

    // The implementation name (also used for dump and profile file names).
    virtual const char *name() const = 0;

    // Emits the code, makes the pages read+execute, dumps/registers if asked.
    // Idempotent: the second call does nothing. Throws qconv::error on failure.
    void create();
    bool created() const { return created_; }

    // Entry point of the generated code as a function pointer type F.
    template <typename F>
    F entry() const {
        return reinterpret_cast<F>(const_cast<Xbyak::uint8 *>(getCode()));
    }

protected:
    // Emits the whole kernel, including prologue/epilogue (see preamble()).
    virtual void generate() = 0;

    // System V ABI helpers: push/pop the callee-saved GPRs (rbx, rbp, r12-r15)
    // and vzeroupper on exit. Kernels that touch none of them may skip these.
    void preamble();
    void postamble(); // restores registers, vzeroupper, ret

    // Registers of the first six integer arguments (System V).
    static const Xbyak::Reg64 &abi_param(int i);

    // Every dword lane of v = value, through the 32-bit scratch register r:
    // zmm broadcasts r (AVX-512), ymm goes through v's low xmm (AVX2 has no
    // broadcast from a general register).
    template <class Vmm>
    void broadcast_dword(const Vmm &v, const Xbyak::Reg32 &r, uint32_t value) {
        mov(r, value);
        if constexpr (std::is_same_v<Vmm, Xbyak::Zmm>) {
            vpbroadcastd(v, r);
        } else {
            vmovd(Xbyak::Xmm(v.getIdx()), r);
            vpbroadcastd(v, Xbyak::Xmm(v.getIdx()));
        }
    }

private:
    bool created_ = false;
};

// The two one-instruction kernels every AMX row needs: `ldtilecfg [arg 0]`
// (a 64-byte tile configuration) and `tilerelease`, named after the row
// that owns them (<row>:ldtilecfg, <row>:tilerelease). Created by the
// constructor; call through entry<void (*)(const void *)>() / <void (*)()>().
class amx_tile_helper : public jit_generator {
public:
    enum class op { load_config, release };
    amx_tile_helper(op o, const std::string &row);
    const char *name() const override { return name_.c_str(); }

protected:
    void generate() override;

private:
    op op_;
    std::string name_;
};

} // namespace qconv::jit
