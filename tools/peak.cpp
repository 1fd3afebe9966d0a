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
// operations per product, as conv_desc::ops() counts them). Every thread of the
// run executes the loop at the same time, so threads sharing a core (or its
// tile unit) measure what they really share; after a 50 ms warm-up, the best of
// seven runs is the peak and the slowest gives its spread. Only instructions
// of the ISA level in use are emitted, so none the CPU lacks ever runs.
//
// A peak file (--peak-file=FILE, or $QCONV_PEAK_FILE; ./run.sh sets one per
// run) keeps each measurement: a later table of the same run, ISA level and
// thread count reuses it instead of measuring again, so the %peak columns of
// one run share one denominator.

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

// Thread i runs on the i-th CPU it may use while the object lives; its own
// mask is restored after (the runtime's threads are reused by the convolutions).
class pin_to_cpu {
public:
    explicit pin_to_cpu(int i) {
        if (pthread_getaffinity_np(pthread_self(), sizeof old_, &old_) != 0) return;
        for (int c = 0, seen = 0; c < CPU_SETSIZE; ++c) {
            if (!CPU_ISSET(c, &old_) || seen++ != i) continue;
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(c, &one);
            pinned_ = pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
            return;
        }
    }
    ~pin_to_cpu() {
        if (pinned_) pthread_setaffinity_np(pthread_self(), sizeof old_, &old_);
    }
    pin_to_cpu(const pin_to_cpu &) = delete;
    pin_to_cpu &operator=(const pin_to_cpu &) = delete;

private:
    cpu_set_t old_{};
    bool pinned_ = false;
};

// One timed run: every thread of the region runs `run(iters)` at the same time
// (threads that share a core share its unit, as the convolutions' threads do);
// the run takes as long as its slowest thread.
template <class F>
double timed_ms(F run, int64_t iters, int threads) {
    std::vector<double> ms(static_cast<size_t>(threads), 0.0);
    impl::parallel(threads, [&](int ithr, int) {
        const pin_to_cpu pin(ithr);
        const double t0 = now_ms();
        run(iters);
        ms[static_cast<size_t>(ithr)] = now_ms() - t0;
    });
    return *std::max_element(ms.begin(), ms.end());
}

// GOPS of `runs` timed runs after a warm-up of at least 50 ms (the unit's
// clock and power state settle: AMX's first tile products after idle run slow).
template <class F>
std::vector<double> sample_gops(F run, int64_t iters, double ops_per_iter, int threads, int runs) {
    for (double t0 = now_ms(); now_ms() - t0 < 50;) timed_ms(run, iters / 4, threads);
    std::vector<double> g;
    for (int r = 0; r < runs; ++r)
        g.push_back(ops_per_iter * double(iters) * threads / (timed_ms(run, iters, threads) * 1e6));
    std::sort(g.begin(), g.end());
    return g;
}

// "what|threads" identifies a measurement in the peak file.
std::string peak_key(const std::string &what, int threads) { return what + "|" + std::to_string(threads); }

bool read_peak_file(const std::string &file, const std::string &key, peak_info &p) {
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
        // KEY<TAB>best<TAB>low<TAB>runs
        std::istringstream ls(line);
        std::string k;
        double best = 0, low = 0;
        int runs = 0;
        if (std::getline(ls, k, '\t') && k == key && (ls >> best >> low >> runs) && best > 0) {
            p.gops = best, p.low_gops = low, p.runs = runs, p.from_file = file;
            return true;
        }
    }
    return false;
}

} // namespace

peak_info measure_int8_peak(int threads, const std::string &peak_file) {
    const peak_loop l = loop_for(max_cpu_isa());
    peak_info p;
    p.threads = threads > 0 ? threads : impl::openmp_max_threads();
    p.what = std::string(l.what) + ", " + to_string(max_cpu_isa());
    const std::string key = peak_key(p.what, p.threads);
    if (!peak_file.empty() && read_peak_file(peak_file, key, p)) return p;
    constexpr int runs = 7;
    std::vector<double> g;
    if (l.kind == peak_kind::amx) {
        amx_peak_loop_gen gen;
        gen.create();
        const auto fn = gen.entry<void (*)(int64_t, const tile_config *, const uint8_t *)>();
        const tile_config cfg;
        alignas(64) uint8_t operands[16 * 64];
        std::fill(operands, operands + sizeof operands, uint8_t(3));
        const int64_t iters = iterations / 16; // 4 tdpbusd (64 cycles) an iteration: ~1 M cycles a run
        g = sample_gops([&](int64_t k) { fn(k, &cfg, operands); }, iters, 2.0 * l.products * 4, p.threads, runs);
    } else {
        peak_loop_gen gen(l.kind);
        gen.create();
        const auto fn = gen.entry<void (*)(int64_t)>();
        g = sample_gops(fn, iterations, 2.0 * l.products * accumulators, p.threads, runs);
    }
    p.gops = g.back();
    p.low_gops = g.front();
    p.runs = runs;
    if (!peak_file.empty()) {
        std::ofstream out(peak_file, std::ios::app);
        out << key << '\t' << p.gops << '\t' << p.low_gops << '\t' << p.runs << '\n';
    }
    return p;
}

} // namespace qconv::driver
