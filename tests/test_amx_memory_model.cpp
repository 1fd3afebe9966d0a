// The tile emulator's memory model (tests/support/amx_cache_model.h,
// set_amx_memory_model in amx_emulator.h; docs/amx_emulator.md): the cache on
// access patterns whose answers are known, a tile load's rows through it, the
// stepping mode's view of vector loads and stores, and — where
// QCONV_AMX_MEMORY_TABLE=1 — the model's table of the AMX conv row over
// ResNet-50 mb1 (docs/jit_conv_amx.md).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <ucontext.h>

#include <xbyak/xbyak.h>

#include "dispatch/dispatcher.h"
#include "dispatch/host_platform.h"
#include "qconv/qconv.h"
#include "reference/reference.h"
#include "tests/support/amx_cache_model.h"
#include "tests/support/amx_emulator.h"
#include "tests/support/conv_tester.h"
#include "tests/support/testdata.h"

namespace qconv::test {
namespace {

constexpr unsigned L1 = static_cast<unsigned>(cache_level::l1), L2 = static_cast<unsigned>(cache_level::l2),
                   beyond = static_cast<unsigned>(cache_level::beyond);

struct tally {
    uint64_t bytes[3] = {}, lines[3] = {};
};

// One pass over [base, base + n) in 64-byte accesses.
tally pass(cache_model &c, uint64_t base, uint64_t n) {
    tally t;
    for (uint64_t a = base; a < base + n; a += 64) c.access(a, 64, t.bytes, t.lines);
    return t;
}

std::unique_ptr<cache_model> empty_cache() {
    auto c = std::make_unique<cache_model>();
    c->clear();
    return c;
}

TEST(AmxCacheModel, GeometryIsSapphireRapidsL1AndL2) {
    EXPECT_EQ(cache_model::l1_sets * cache_model::l1_ways * cache_model::line_bytes, 48u * 1024);
    EXPECT_EQ(cache_model::l2_sets * cache_model::l2_ways * cache_model::line_bytes, 2048u * 1024);
    EXPECT_EQ(cache_model::l1_sets, 64u);
    EXPECT_EQ(cache_model::l2_sets, 2048u);
}

TEST(AmxCacheModel, ALoopSmallerThanL1HitsAfterTheFirstPass) {
    auto c = empty_cache();
    const uint64_t base = 0x10000000, n = 32 * 1024;
    const tally first = pass(*c, base, n);
    EXPECT_EQ(first.bytes[beyond], n);
    EXPECT_EQ(first.lines[beyond], n / 64);
    for (int p = 0; p < 3; ++p) {
        const tally t = pass(*c, base, n);
        EXPECT_EQ(t.bytes[L1], n) << "pass " << p + 2;
        EXPECT_EQ(t.bytes[L2] + t.bytes[beyond], 0u);
    }
}

TEST(AmxCacheModel, AStreamOf1MiBMissesL1AndHitsL2OnTheSecondPass) {
    auto c = empty_cache();
    const uint64_t base = 0x20000000, n = 1024 * 1024;
    EXPECT_EQ(pass(*c, base, n).bytes[beyond], n);
    const tally second = pass(*c, base, n);
    EXPECT_EQ(second.bytes[L1], 0u); // LRU over 256 lines per L1 set: each evicted before its reuse
    EXPECT_EQ(second.bytes[L2], n);
    EXPECT_EQ(second.bytes[beyond], 0u);
    // 4 MiB exceed L2 as well: a second pass is served from beyond again.
    auto d = empty_cache();
    pass(*d, base, 4 * n);
    EXPECT_EQ(pass(*d, base, 4 * n).bytes[beyond], 4 * n);
}

TEST(AmxCacheModel, EvictsTheLeastRecentlyUsedLineOfASet) {
    auto c = empty_cache();
    // Lines 64 apart map to one L1 set; 13 of them overflow its 12 ways.
    const uint64_t set_stride = cache_model::l1_sets;
    for (uint64_t i = 0; i < 12; ++i) EXPECT_EQ(c->access_line(i * set_stride), cache_level::beyond);
    EXPECT_EQ(c->access_line(0), cache_level::l1); // line 0 becomes the most recently used
    EXPECT_EQ(c->access_line(12 * set_stride), cache_level::beyond);
    EXPECT_TRUE(c->in_l1(0));
    EXPECT_FALSE(c->in_l1(1 * set_stride)); // the least recently used went
    for (uint64_t i = 2; i <= 12; ++i) EXPECT_TRUE(c->in_l1(i * set_stride)) << i;
    // It is still in L2, and comes back from there, evicting the next oldest.
    EXPECT_TRUE(c->in_l2(1 * set_stride));
    EXPECT_EQ(c->access_line(1 * set_stride), cache_level::l2);
    EXPECT_FALSE(c->in_l1(2 * set_stride));
    // Other sets are untouched.
    EXPECT_FALSE(c->in_l1(1));
}

TEST(AmxCacheModel, L2EvictsWithoutTouchingL1) {
    auto c = empty_cache();
    // Lines 2048 apart share an L2 set (and an L1 set); 17 overflow L2's 16 ways.
    const uint64_t set_stride = cache_model::l2_sets;
    for (uint64_t i = 0; i < 17; ++i) c->access_line(i * set_stride);
    EXPECT_FALSE(c->in_l2(0));
    EXPECT_FALSE(c->in_l1(0)); // L1 (12 ways) dropped it earlier
    // A line kept hot in L1 is not refreshed in L2: non-inclusive.
    auto d = empty_cache();
    d->access_line(0);
    for (uint64_t i = 1; i < 17; ++i) {
        d->access_line(i * set_stride);
        EXPECT_EQ(d->access_line(0), cache_level::l1) << i;
    }
    EXPECT_TRUE(d->in_l1(0));
    EXPECT_FALSE(d->in_l2(0));
}

TEST(AmxCacheModel, CountsTheBytesOfEachLineAnAccessTouches) {
    auto c = empty_cache();
    tally t;
    c->access(0x30000000 + 40, 64, t.bytes, t.lines); // bytes 40..103: two lines
    EXPECT_EQ(t.lines[beyond], 2u);
    EXPECT_EQ(t.bytes[beyond], 64u);
    tally u;
    c->access(0x30000000 + 64, 16, u.bytes, u.lines);
    EXPECT_EQ(u.lines[L1], 1u);
    EXPECT_EQ(u.bytes[L1], 16u);
}

// ---------------------------------------------------------------- through the emulator

// Enables the model for a test and turns it off after.
struct model_on {
    explicit model_on(bool step) {
        amx_memory_options o;
        o.enabled = true;
        o.step_vectors = step;
        set_amx_memory_model(o);
    }
    ~model_on() { set_amx_memory_model(amx_memory_options{}); }
};

uint64_t kind(const amx_memory_counters &m, amx_mem_kind k, unsigned level) {
    return m.bytes[static_cast<unsigned>(k)][level];
}

// LDTILECFG [rdi], TILELOADD tmm0, [rsi + rdx], TILESTORED [rsi + rdx], tmm0
// stepped through emulate_amx_instruction() (no signal, any CPU).
TEST(AmxMemoryModel, ATileLoadWithAStrideTouchesTheLinesOfItsRows) {
    static const uint8_t code[] = {0xc4, 0xe2, 0x78, 0x49, 0x07,        // ldtilecfg [rdi]
                                   0xc4, 0xe2, 0x7b, 0x4b, 0x04, 0x16,  // tileloadd tmm0, [rsi + rdx]
                                   0xc4, 0xe2, 0x7b, 0x4b, 0x04, 0x16,  // tileloadd tmm0, [rsi + rdx]
                                   0xc4, 0xe2, 0x7a, 0x4b, 0x04, 0x16}; // tilestored [rsi + rdx], tmm0
    alignas(64) uint8_t cfg[64] = {};
    cfg[0] = 1;
    cfg[16] = 48; // tmm0: 10 rows of 48 bytes
    cfg[48] = 10;
    std::vector<uint8_t> buf(64 * 1024 + 64);
    const uint64_t base = (reinterpret_cast<uint64_t>(buf.data()) + 63) / 64 * 64 + 32; // 32 bytes into a line
    model_on on(false);
    ucontext_t uc;
    memset(&uc, 0, sizeof uc);
    greg_t *g = uc.uc_mcontext.gregs;
    g[REG_RDI] = greg_t(cfg);
    g[REG_RSI] = greg_t(base);
    g[REG_RDX] = 256; // stride: rows 4 lines apart
    g[REG_RIP] = greg_t(code);
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(emulate_amx_instruction(&uc)) << i;
    const amx_memory_counters m = amx_thread_memory_counters();
    // Each row covers bytes 32..79 of its 256-byte step: 32 bytes of one line,
    // 16 of the next. The first load misses both lines of every row, the
    // second load and the store find them in L1.
    const unsigned load = static_cast<unsigned>(amx_mem_kind::tileloadd);
    EXPECT_EQ(m.lines[load][beyond], 20u);
    EXPECT_EQ(m.lines[load][L1], 20u);
    EXPECT_EQ(kind(m, amx_mem_kind::tileloadd, beyond), 10u * 48);
    EXPECT_EQ(kind(m, amx_mem_kind::tileloadd, L1), 10u * 48);
    EXPECT_EQ(kind(m, amx_mem_kind::tilestored, L1), 10u * 48);
    EXPECT_EQ(m.lines[static_cast<unsigned>(amx_mem_kind::tilestored)][L1], 20u);
    EXPECT_EQ(m.bytes_at(L2), 0u);
}

TEST(AmxMemoryModel, OffTheModelCountsNothing) {
    set_amx_memory_model(amx_memory_options{});
    static const uint8_t code[] = {0xc4, 0xe2, 0x78, 0x49, 0x07, 0xc4, 0xe2, 0x7b, 0x4b, 0x04, 0x16};
    alignas(64) uint8_t cfg[64] = {};
    cfg[0] = 1;
    cfg[16] = 64;
    cfg[48] = 16;
    alignas(64) static uint8_t buf[16 * 64];
    ucontext_t uc;
    memset(&uc, 0, sizeof uc);
    greg_t *g = uc.uc_mcontext.gregs;
    g[REG_RDI] = greg_t(cfg);
    g[REG_RSI] = greg_t(buf);
    g[REG_RDX] = 64;
    g[REG_RIP] = greg_t(code);
    ASSERT_TRUE(emulate_amx_instruction(&uc));
    ASSERT_TRUE(emulate_amx_instruction(&uc));
    const amx_memory_counters m = amx_total_memory_counters();
    for (unsigned l = 0; l < 3; ++l) EXPECT_EQ(m.bytes_at(l), 0u);
}

// Whether the host runs AVX-512F/BW (EVEX) code; asked of the CPU directly so
// that no dispatcher detection (which may ask Linux for the AMX permission)
// happens before the tests above check the permission.
bool host_has_avx512() { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"); }

// Stepping: the vector instructions between a trapped tile instruction and
// TILERELEASE are seen with their EVEX disp8 x N addresses and sizes.
struct vector_snippet : Xbyak::CodeGenerator {
    vector_snippet() {
        // rdi: TILECFG, rsi: source, rdx: destination
        ldtilecfg(ptr[rdi]);
        tilezero(tmm0);                            // traps: the stepping starts after it
        vmovups(zmm0, ptr[rsi]);                   // load 64
        vmovups(zmm1, ptr[rsi + 128]);             // load 64, EVEX disp8 2 x 64
        vbroadcastss(zmm2, ptr[rsi + 260]);        // load 4, disp8 65 x 4
        vfmadd231ps(zmm0, zmm1, ptr_b[rsi + 512]); // load 4 (broadcast), an ALU op
        vaddps(zmm0, zmm0, zmm2);                  // ALU, no memory
        vmovups(ptr[rdx], zmm0);                   // store 64
        vpmovusdb(ptr[rdx + 64], zmm0);            // store 16, disp8 4 x 16; an ALU op
        vmovdqu(ymm3, ptr[rsi + 1024]);            // VEX load 32
        vmovss(ptr[rdx + 4096], xmm3);             // VEX store 4
        tilerelease();                             // the stepping ends
        vmovups(zmm4, ptr[rsi + 2048]);            // not seen
        vzeroupper();
        ret();
    }
};

TEST(AmxMemoryModel, SteppingSeesTheVectorLoadsAndStores) {
    if (!amx_config_traps() || amx_permission_granted())
        GTEST_SKIP() << "needs trapping tile instructions (a CPU without AMX)";
    if (!host_has_avx512())
        GTEST_SKIP() << "the snippet's vector instructions are AVX-512 (EVEX): this CPU has none (AVX2 only)";
    amx_emulation emu;
    vector_snippet code;
    using fn = void (*)(const void *, const void *, void *);
    alignas(64) uint8_t cfg[64] = {};
    cfg[0] = 1;
    cfg[16] = 64;
    cfg[48] = 16;
    std::vector<uint8_t> src(8192 + 64), dst(8192 + 64);
    uint8_t *s = reinterpret_cast<uint8_t *>((reinterpret_cast<uint64_t>(src.data()) + 63) / 64 * 64);
    uint8_t *d = reinterpret_cast<uint8_t *>((reinterpret_cast<uint64_t>(dst.data()) + 63) / 64 * 64);
    {
        model_on on(true);
        code.getCode<fn>()(cfg, s, d);
        const amx_memory_counters m = amx_thread_memory_counters();
        EXPECT_EQ(m.vector_instructions, 9u);
        EXPECT_EQ(m.vector_memory, 8u);
        EXPECT_EQ(m.vector_alu, 3u); // vfmadd231ps, vaddps, vpmovusdb
        EXPECT_EQ(m.bytes_of(amx_mem_kind::vector_load), 64u + 64 + 4 + 4 + 32);
        EXPECT_EQ(m.bytes_of(amx_mem_kind::vector_store), 64u + 16 + 4);
        EXPECT_EQ(m.bytes_at(L1), 0u); // every line touched once
        // Exactly the lines expected: loads at +0, +128, +256, +512, +1024;
        // stores at +0, +64, +4096.
        EXPECT_EQ(m.lines[static_cast<unsigned>(amx_mem_kind::vector_load)][beyond], 5u);
        EXPECT_EQ(m.lines[static_cast<unsigned>(amx_mem_kind::vector_store)][beyond], 3u);
        // A second call: the same lines from L1.
        reset_amx_memory_counters();
        code.getCode<fn>()(cfg, s, d);
        const amx_memory_counters n = amx_thread_memory_counters();
        EXPECT_EQ(n.bytes_at(L1), 64u + 64 + 4 + 4 + 32 + 64 + 16 + 4);
        EXPECT_EQ(n.bytes_at(beyond), 0u);
    }
    // The model off: nothing is stepped.
    reset_amx_memory_model();
    code.getCode<fn>()(cfg, s, d);
    EXPECT_EQ(amx_thread_memory_counters().vector_instructions, 0u);
}

TEST(AmxMemoryModel, ReportsTheBoundOfTheLargestTerm) {
    amx_counters c;
    c.ops[static_cast<unsigned>(amx_op::tdpbusd)] = 100;
    amx_memory_counters m;
    m.lines[static_cast<unsigned>(amx_mem_kind::tileloadd)][L1] = 1000; // 500 cycles
    m.lines[static_cast<unsigned>(amx_mem_kind::tileloadd)][L2] = 300;  // 150 port + 600 fill
    m.lines[static_cast<unsigned>(amx_mem_kind::tilestored)][L1] = 100; // 100
    m.bytes[static_cast<unsigned>(amx_mem_kind::tileloadd)][L2] = 300 * 64;
    m.vector_alu = 1000; // 500
    const amx_memory_report r = memory_report(c, m);
    EXPECT_EQ(r.tdps, 100u);
    EXPECT_DOUBLE_EQ(r.tile_cycles, 1600);
    EXPECT_DOUBLE_EQ(r.l1_cycles, 650 + 100);
    EXPECT_DOUBLE_EQ(r.fill_cycles, 600);
    EXPECT_DOUBLE_EQ(r.vector_cycles, 500);
    EXPECT_DOUBLE_EQ(r.predicted_cycles, 1600);
    EXPECT_STREQ(r.bound, "tile");
    EXPECT_DOUBLE_EQ(r.bytes_per_tdp[L2], 192);
    EXPECT_DOUBLE_EQ(r.share_of_peak(100.0 * 16 * 64 * 16), 1.0);
}

// ---------------------------------------------------------------- the model's table

// QCONV_AMX_MEMORY_LAYERS=a,b: only the layers named (default: all);
// QCONV_AMX_MEMORY_POST_OPS / QCONV_AMX_MEMORY_ZP: another chain and zero
// point (the driver's spellings; default relu, none).
bool in_layer_list(const std::string &name) {
    const char *v = std::getenv("QCONV_AMX_MEMORY_LAYERS");
    if (!v || !*v) return true;
    const std::string list = std::string(",") + v + ",";
    return list.find("," + name + ",") != std::string::npos;
}

// QCONV_AMX_MEMORY_TABLE=1: the AMX conv row over ResNet-50 v1.5 mb1 (u8 ->
// u8, bias, per-OC scales, ReLU; 1 thread), each layer run twice back to back
// with the model in its stepping mode, the second run counted (warm, as a
// benchmark's repetitions are) and checked against the reference. Prints the
// table of docs/jit_conv_amx.md.
TEST(AmxMemoryModel, ResNet50Table) {
    const char *v = std::getenv("QCONV_AMX_MEMORY_TABLE");
    if (!v || std::strcmp(v, "1") != 0)
        GTEST_SKIP() << "set QCONV_AMX_MEMORY_TABLE=1 (minutes: every instruction of the row is stepped)";
    if (!amx_config_traps() || amx_permission_granted())
        GTEST_SKIP() << "the model runs where the tile instructions trap (a CPU without AMX)";
    if (!host_has_avx512())
        GTEST_SKIP() << "the AMX row's vector code is AVX-512: the emulated platform needs an AVX-512 host";
    amx_emulation emu;
    ASSERT_TRUE(impl::host_platform().has(impl::cpu_feature::amx_int8));
    const std::string row = "jit:conv_x8s8:avx512_core_amx";
    std::ifstream in(std::string(QCONV_SOURCE_DIR) + "/bench/shapes/shapes_resnet_50_v1_5");
    std::printf("| layer | count | tdpbusd | B/tdp L1 | B/tdp L2 | B/tdp beyond | vector ops/tdp | tile | l1 | fill | "
                "vector | predicted cycles | bound | share of peak |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    double total_macs = 0, total_cycles = 0;
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        conv_problem p;
        p.desc = conv_desc::parse(line);
        p.desc.mb = 1;
        std::string name = p.desc.name;
        const size_t colon = name.find(':');
        if (colon != std::string::npos) name = name.substr(colon + 1);
        const size_t star = name.find('*');
        const double count = star == std::string::npos ? 1 : std::atof(name.c_str() + star + 1);
        if (star != std::string::npos) name = name.substr(0, star);
        if (!in_layer_list(name)) continue;
        p.src_dt = dtype::u8;
        p.dst_dt = dtype::u8;
        p.scales = testdata::make_scales(p.desc.oc, false, 1);
        p.with_bias = true;
        const char *chain = std::getenv("QCONV_AMX_MEMORY_POST_OPS"), *zp = std::getenv("QCONV_AMX_MEMORY_ZP");
        p.ops = testdata::make_post_ops(chain ? chain : "relu", p.desc.oc, 1);
        p.src_zp = testdata::make_zp(zp ? zp : "none", p.desc.ic, p.src_dt, testdata::data_kind::random, 1);
        p.validate();
        const auto src = testdata::make_src(p, testdata::data_kind::random, 1);
        const auto wei = testdata::make_weights(p.desc, testdata::data_kind::random, 1);
        const auto bias = testdata::make_bias(p.desc, 1);
        conv_hints hints;
        hints.impl = row;
        convolution conv(p, wei.data(), bias.data(), hints);
        ASSERT_EQ(conv.impl_name(), row);
        exec_args args;
        args.threads = 1;
        auto got = testdata::make_dst(p, 1);
        model_on on(true);
        conv.execute(src.data(), got.data(), args); // warms the caches
        reset_amx_counters();
        reset_amx_memory_counters();
        conv.execute(src.data(), got.data(), args);
        const amx_counters c = amx_total_counters();
        const amx_memory_counters m = amx_total_memory_counters();
        const amx_memory_report r = memory_report(c, m);
        auto want = testdata::make_dst(p, 1);
        const auto attrs = impl::conv_attrs(p, impl::host_platform(), hints);
        ref::conv(p, attrs.at(static_cast<size_t>(conv.attr_id())), src.data(), wei.data(), bias.data(), want.data(),
                  args);
        std::string report;
        EXPECT_EQ(compare_dst(p, got.data(), want.data(), 0, &report), 0) << name << ": " << report;
        const double macs = p.desc.ops() / 2;
        std::printf(
            "| %s | %g | %llu | %.0f | %.0f | %.0f | %.1f | %.0f | %.0f | %.0f | %.0f | %.0f | %s | %.0f %% |\n",
            name.c_str(), count, static_cast<unsigned long long>(r.tdps), r.bytes_per_tdp[L1], r.bytes_per_tdp[L2],
            r.bytes_per_tdp[beyond], r.tdps ? double(m.vector_alu) / double(r.tdps) : 0.0, r.tile_cycles, r.l1_cycles,
            r.fill_cycles, r.vector_cycles, r.predicted_cycles, r.bound, 100 * r.share_of_peak(macs));
        std::fflush(stdout);
        total_macs += count * macs;
        total_cycles += count * r.predicted_cycles;
    }
    std::printf("network (weighted by the counts): %.0f predicted cycles, %.1f %% of the tdpbusd peak\n", total_cycles,
                100 * total_macs / (total_cycles * 1024));
}

} // namespace
} // namespace qconv::test
