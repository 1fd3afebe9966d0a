// The int8 peak of this machine, measured once per table report.
//
// A short timed loop of the multiply-accumulate the int8 kernels use at the
// ISA level qconv runs at (qconv::max_cpu_isa(), so --isa lowers it too):
//   AMX (avx512_core_amx, AMX-INT8 usable): tdpbusd on four independent
//                                      16x16 s32 tiles from two A and two B
//                                      tiles, 16·16·64 products each — what
//                                      jit:conv_x8s8:avx512_core_amx issues;
//   VNNI (avx512_core_vnni and above): vpdpbusd zmm, 64 u8·s8 products;
//   AVX-VNNI (avx2_vnni):              {vex} vpdpbusd ymm, 32 products;
//   avx512_core / avx2 / sse41:        vpmaddubsw + vpmaddwd + vpaddd, 64/32/16.
// The loop is generated with Xbyak on qconv's JIT base (so the instruction
// stream is exactly what is measured, no compiler register shuffling): twelve
// independent accumulators hide the latency, so it runs at the throughput of
// the unit. The single-thread rate times the thread count is the peak (2
// operations per product, as conv_desc::ops() counts them). Only instructions
// of the ISA level in use are emitted, so none the CPU lacks ever runs.

#include <algorithm>
#include <cstdint>

#include "core/parallel.h"
#include "dispatch/host_platform.h"
#include "kernels/jit/base/jit_base.h"
#include "qconv/types.h"
#include "tools/driver.h"

namespace qconv::driver {

namespace {

constexpr int64_t iterations = 1 << 18;
constexpr int accumulators = 12;

enum class peak_kind { amx, vnni512, vnni256, madd512, madd256, madd128 };

// Palette 1: tiles 0-7 of 16 rows x 64 bytes (C 0-3, A 4-5, B 6-7).
struct alignas(64) tile_config {
    uint8_t bytes[64] = {};
    tile_config() {
        bytes[0] = 1; // palette
        for (int t = 0; t < 8; ++t) {
            bytes[16 + 2 * t] = 64; // colsb (little-endian u16)
            bytes[48 + t] = 16;     // rows
        }
    }
};

// void loop(int64_t n, const tile_config *cfg, const uint8_t *ops): n
// iterations of four tdpbusd; the A and B tiles hold `ops` (16 rows of 64
// bytes, 3 in every byte, as the vector loops use), the C tiles start at 0.
class amx_peak_loop_gen : public jit::jit_generator {
public:
    amx_peak_loop_gen() : jit::jit_generator(4096) {}
    const char *name() const override { return "driver:int8_peak_amx"; }

protected:
    void generate() override {
        using namespace Xbyak;
        const Reg64 n = abi_param(0), cfg = abi_param(1), ops = abi_param(2), stride = rax;
        ldtilecfg(ptr[cfg]);
        mov(stride, 64);
        for (int t = 0; t < 4; ++t) tilezero(Tmm(t));
        for (int t = 4; t < 8; ++t) tileloadd(Tmm(t), ptr[ops + stride]);
        Label loop, done;
        test(n, n);
        jle(done, T_NEAR);
        L(loop);
        for (int c = 0; c < 4; ++c) tdpbusd(Tmm(c), Tmm(4 + c / 2), Tmm(6 + c % 2));
        dec(n);
        jnz(loop, T_NEAR);
        L(done);
        tilerelease();
        ret();
    }
};

// void loop(int64_t n): n iterations of `accumulators` multiply-accumulates.
class peak_loop_gen : public jit::jit_generator {
public:
    explicit peak_loop_gen(peak_kind k) : jit::jit_generator(4096), kind_(k) {}
    const char *name() const override { return "driver:int8_peak"; }

protected:
    void generate() override {
        using namespace Xbyak;
        const Reg64 n = abi_param(0);
        const bool sse = kind_ == peak_kind::madd128;
        emit_constants();
        Label loop, done;
        for (int i = 0; i < accumulators; ++i) {
            if (sse) pxor(vreg(i), vreg(i));
            else if (vregs() == 32) vpxord(vreg(i), vreg(i), vreg(i));
            else vpxor(vreg(i), vreg(i), vreg(i));
        }
        test(n, n);
        jle(done, T_NEAR);
        L(loop);
        for (int i = 0; i < accumulators; ++i) emit_madd(i);
        dec(n);
        jnz(loop, T_NEAR);
        L(done);
        if (!sse) vzeroupper();
        ret();
    }

private:
    peak_kind kind_;
    int vregs() const { return kind_ == peak_kind::vnni512 || kind_ == peak_kind::madd512 ? 32 : 16; }
    Xbyak::Xmm vreg(int i) const {
        switch (kind_) {
        case peak_kind::vnni512:
        case peak_kind::madd512: return Xbyak::Zmm(i);
        case peak_kind::vnni256:
        case peak_kind::madd256: return Xbyak::Ymm(i);
        case peak_kind::madd128:
        case peak_kind::amx: break; // the tile loop has its own generator
        }
        return Xbyak::Xmm(i);
    }
    // The last registers hold the operands (12 accumulators + 3 fit in 16).
    Xbyak::Xmm src() const { return vreg(vregs() - 1); }
    Xbyak::Xmm ones() const { return vreg(vregs() - 2); }
    Xbyak::Xmm tmp() const { return vreg(vregs() - 3); }
    // src = 3 in every byte (both the u8 and the s8 operand), ones = 1 in every word.
    void emit_constants() {
        const Xbyak::Xmm s(src().getIdx()), o(ones().getIdx());
        if (kind_ == peak_kind::madd128) {
            mov(eax, 0x03030303);
            movd(s, eax);
            pshufd(s, s, 0);
            mov(eax, 0x00010001);
            movd(o, eax);
            pshufd(o, o, 0);
            return;
        }
        mov(eax, 0x03030303);
        vmovd(s, eax);
        vpbroadcastd(src(), s);
        mov(eax, 0x00010001);
        vmovd(o, eax);
        vpbroadcastd(ones(), o);
    }
    void emit_madd(int i) {
        const Xbyak::Xmm acc = vreg(i);
        switch (kind_) {
        case peak_kind::vnni512: vpdpbusd(acc, src(), src()); return;
        case peak_kind::vnni256: vpdpbusd(acc, src(), src(), Xbyak::VexEncoding); return;
        case peak_kind::madd512:
        case peak_kind::madd256:
            vpmaddubsw(tmp(), src(), src());
            vpmaddwd(tmp(), tmp(), ones());
            vpaddd(acc, acc, tmp());
            return;
        case peak_kind::madd128:
            movdqa(tmp(), src());
            pmaddubsw(tmp(), src());
            pmaddwd(tmp(), ones());
            paddd(acc, tmp());
            return;
        case peak_kind::amx: return; // the tile loop has its own generator
        }
    }
};

struct peak_loop {
    peak_kind kind;
    int products; // u8·s8 products per accumulator step
    const char *what;
};

peak_loop loop_for(isa level) {
    // The tile unit only where the row that uses it can run (AMX usable, uncapped).
    if (level >= isa::avx512_core_amx && impl::host_platform().has(impl::cpu_feature::amx_int8))
        return {peak_kind::amx, 16 * 16 * 64, "tdpbusd"};
    if (level >= isa::avx512_core_vnni) return {peak_kind::vnni512, 64, "vpdpbusd zmm"};
    if (level == isa::avx2_vnni) return {peak_kind::vnni256, 32, "vpdpbusd ymm"};
    if (level == isa::avx512_core) return {peak_kind::madd512, 64, "vpmaddubsw+vpmaddwd zmm"};
    if (level == isa::avx2) return {peak_kind::madd256, 32, "vpmaddubsw+vpmaddwd ymm"};
    return {peak_kind::madd128, 16, "pmaddubsw+pmaddwd xmm"};
}

} // namespace

// The best of five timed runs of `run(iterations)` after a warm-up, in ms.
template <class F>
double best_ms_of(F run, int64_t iters) {
    run(iters / 4); // warm up (clock, caches)
    double best = 0;
    for (int rep = 0; rep < 5; ++rep) {
        const double t0 = now_ms();
        run(iters);
        const double ms = now_ms() - t0;
        if (rep == 0 || ms < best) best = ms;
    }
    return best;
}

peak_info measure_int8_peak(int threads) {
    const peak_loop l = loop_for(max_cpu_isa());
    double best_ms = 0, ops = 0;
    if (l.kind == peak_kind::amx) {
        amx_peak_loop_gen gen;
        gen.create();
        const auto fn = gen.entry<void (*)(int64_t, const tile_config *, const uint8_t *)>();
        const tile_config cfg;
        alignas(64) uint8_t operands[16 * 64];
        std::fill(operands, operands + sizeof operands, uint8_t(3));
        const int64_t iters = iterations / 64; // four tdpbusd are 4096 vpdpbusd zmm of products
        best_ms = best_ms_of([&](int64_t k) { fn(k, &cfg, operands); }, iters);
        ops = 2.0 * l.products * 4 * double(iters);
    } else {
        peak_loop_gen gen(l.kind);
        gen.create();
        const auto fn = gen.entry<void (*)(int64_t)>();
        best_ms = best_ms_of(fn, iterations);
        ops = 2.0 * l.products * accumulators * double(iterations);
    }
    peak_info p;
    p.threads = threads > 0 ? threads : impl::openmp_max_threads();
    p.gops = ops / (best_ms * 1e6) * p.threads;
    p.what = std::string(l.what) + ", " + to_string(max_cpu_isa());
    return p;
}

} // namespace qconv::driver
