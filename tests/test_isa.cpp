// ISA detection and the ISA cap.
//
// Detection is checked against the flags of /proc/cpuinfo, read here
// independently (the kernel only lists features the OS enables). AMX may be
// listed yet withheld (tile permission, palette): then the level is
// avx512_core_bf16; it is never AMX without the amx flags.
//
// The environment cap is read once per process, so it is tested in a child:
// this binary re-executed with a gtest filter selecting IsaChild.Report, which
// writes what it sees to the file named by QCONV_TEST_ISA_OUT.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include "dispatch/host_platform.h"
#include "qconv/types.h"

namespace qconv {
namespace {

std::set<std::string> cpuinfo_flags() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    std::set<std::string> flags;
    while (std::getline(f, line)) {
        if (line.rfind("flags", 0) != 0) continue;
        std::istringstream s(line.substr(line.find(':') + 1));
        std::string w;
        while (s >> w) flags.insert(w);
        break;
    }
    return flags;
}

// The highest level below AMX that the flags allow.
isa level_from_flags(const std::set<std::string> &f) {
    auto has = [&](const char *x) { return f.count(x) > 0; };
    if (!has("avx2") || !has("fma")) return isa::sse41;
    if (!(has("avx512f") && has("avx512bw") && has("avx512dq") && has("avx512vl")))
        return has("avx_vnni") ? isa::avx2_vnni : isa::avx2;
    if (!has("avx512_vnni")) return isa::avx512_core;
    if (!has("avx512_bf16")) return isa::avx512_core_vnni;
    return isa::avx512_core_bf16;
}

TEST(Isa, DetectionMatchesCpuinfo) {
    const auto flags = cpuinfo_flags();
    if (flags.empty()) GTEST_SKIP() << "/proc/cpuinfo has no flags line";
    const isa expected = level_from_flags(flags);
    const isa got = impl::detected_isa();
    if (got == isa::avx512_core_amx) {
        EXPECT_EQ(expected, isa::avx512_core_bf16);
        EXPECT_TRUE(flags.count("amx_int8") && flags.count("amx_tile")) << "AMX detected without amx flags";
    } else {
        EXPECT_EQ(got, expected) << "detected " << to_string(got) << ", cpuinfo says " << to_string(expected);
    }
}

// AVX-VNNI is a feature of its own: not implied by AVX-512 VNNI (Zen 4 lacks it).
TEST(Isa, AvxVnniIsDetectedApartFromTheLevel) {
    using impl::cpu_feature;
    const auto flags = cpuinfo_flags();
    if (flags.empty()) GTEST_SKIP() << "/proc/cpuinfo has no flags line";
    const bool expected = flags.count("avx_vnni") && flags.count("avx2");
    EXPECT_EQ(impl::detected_features().has(cpu_feature::avx2_vnni), expected);
    set_max_cpu_isa(isa::avx512_core_amx);
    EXPECT_EQ(impl::host_platform().has(cpu_feature::avx2_vnni), expected);
}

// Every feature cpu_features and CPUID report is in the detected set, and
// only those (the flags Linux prints for each).
TEST(Isa, FeaturesFollowCpuinfo) {
    using impl::cpu_feature;
    const auto flags = cpuinfo_flags();
    if (flags.empty()) GTEST_SKIP() << "/proc/cpuinfo has no flags line";
    const impl::feature_set f = impl::detected_features();
    const bool avx512 =
        flags.count("avx512f") && flags.count("avx512bw") && flags.count("avx512dq") && flags.count("avx512vl");
    EXPECT_EQ(f.has(cpu_feature::avx2), flags.count("avx2") && flags.count("fma"));
    EXPECT_EQ(f.has(cpu_feature::avx512_core), avx512);
    EXPECT_EQ(f.has(cpu_feature::avx512_core_vnni), avx512 && flags.count("avx512_vnni"));
    EXPECT_EQ(f.has(cpu_feature::avx512_vbmi), avx512 && flags.count("avx512vbmi"));
    EXPECT_EQ(f.has(cpu_feature::avx512_bf16), avx512 && flags.count("avx512_bf16"));
    if (!flags.count("amx_int8")) {
        EXPECT_FALSE(f.has(cpu_feature::amx_int8));
    }
}

TEST(Isa, CapClearsTheFeaturesAboveIt) {
    using impl::cpu_feature;
    const bool detected = impl::detected_features().has(cpu_feature::avx2_vnni);
    set_max_cpu_isa(isa::avx2_vnni);
    EXPECT_EQ(impl::host_platform().has(cpu_feature::avx2_vnni), detected);
    EXPECT_EQ(impl::host_platform().level,
              impl::detected_isa() < isa::avx2_vnni ? impl::detected_isa() : isa::avx2_vnni);
    EXPECT_FALSE(impl::host_platform().has(cpu_feature::avx512_core));
    set_max_cpu_isa(isa::avx2);
    EXPECT_FALSE(impl::host_platform().has(cpu_feature::avx2_vnni));
    set_max_cpu_isa(isa::avx512_core);
    EXPECT_FALSE(impl::host_platform().has(cpu_feature::avx512_core_vnni));
    EXPECT_FALSE(impl::host_platform().has(cpu_feature::avx512_vbmi));
    set_max_cpu_isa(isa::avx512_core_amx);
    EXPECT_EQ(impl::host_platform().features.bits(), impl::detected_features().bits());
    // Simulated platforms: the level's features; AVX-VNNI and VBMI only when said.
    EXPECT_FALSE(impl::platform{isa::avx512_core_vnni}.has(cpu_feature::avx2_vnni));
    EXPECT_FALSE(impl::platform{isa::avx2_vnni}.has(cpu_feature::avx2_vnni));
    EXPECT_TRUE((impl::platform{isa::avx2_vnni, true}.has(cpu_feature::avx2_vnni)));
    EXPECT_TRUE((impl::platform{isa::avx512_core, true}.has(cpu_feature::avx2_vnni)));
    EXPECT_FALSE(impl::platform{isa::avx512_core_bf16}.has(cpu_feature::avx512_vbmi));
    EXPECT_TRUE(impl::platform{isa::avx512_core_vnni}.with(cpu_feature::avx512_vbmi).has(cpu_feature::avx512_vbmi));
    EXPECT_EQ(impl::platform{isa::avx512_core_amx}.key(),
              "avx512_core_amx:avx2+avx512_core+avx512_core_vnni+avx512_bf16+amx_int8+amx_bf16");
}

TEST(Isa, DetectionIsStable) {
    const isa a = impl::detected_isa();
    EXPECT_EQ(impl::detected_isa(), a);
}

TEST(Isa, SetMaxCpuIsaCapsAndRestores) {
    const isa detected = impl::detected_isa();
    set_max_cpu_isa(isa::avx2);
    EXPECT_EQ(max_cpu_isa(), detected < isa::avx2 ? detected : isa::avx2);
    EXPECT_EQ(impl::host_platform().level, max_cpu_isa());
    EXPECT_FALSE(impl::host_platform().has(impl::cpu_feature::avx512_core));
    set_max_cpu_isa(isa::avx512_core);
    EXPECT_EQ(max_cpu_isa(), detected < isa::avx512_core ? detected : isa::avx512_core);
    // A cap above the CPU never raises the level.
    set_max_cpu_isa(isa::avx512_core_amx);
    EXPECT_EQ(max_cpu_isa(), detected);
}

TEST(Isa, ParseRejectsUnknownNamesListingValidOnes) {
    try {
        parse_isa("avx1024", "QCONV_MAX_CPU_ISA");
        FAIL() << "no error";
    } catch (const error &e) {
        const std::string m = e.what();
        EXPECT_EQ(m.rfind("QCONV_MAX_CPU_ISA", 0), 0u) << m;
        for (const char *n :
             {"sse41", "avx2", "avx2_vnni", "avx512_core", "avx512_core_vnni", "avx512_core_bf16", "avx512_core_amx"})
            EXPECT_NE(m.find(n), std::string::npos) << n << " missing from: " << m;
    }
}

// ---- child process: reports max_cpu_isa() (or the error) under its environment.
TEST(IsaChild, Report) {
    const char *out = std::getenv("QCONV_TEST_ISA_OUT");
    if (!out) GTEST_SKIP() << "runs only as the child of Isa.EnvironmentCap*";
    std::ofstream f(out);
    try {
        const isa level = max_cpu_isa();
        f << "isa " << to_string(level) << (impl::host_platform().has(impl::cpu_feature::avx2_vnni) ? " avx_vnni" : "")
          << "\n";
    } catch (const error &e) {
        f << "error " << e.what() << "\n";
    }
}

// Runs the child with QCONV_MAX_CPU_ISA=value; returns its report line.
std::string run_child(const std::string &value) {
    char path[] = "/tmp/qconv_isa_child_XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) return "mkstemp failed";
    close(fd);
    const pid_t pid = fork();
    if (pid == 0) {
        setenv("QCONV_MAX_CPU_ISA", value.c_str(), 1);
        setenv("QCONV_TEST_ISA_OUT", path, 1);
        execl("/proc/self/exe", "test_isa", "--gtest_filter=IsaChild.Report", static_cast<char *>(nullptr));
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    std::ifstream f(path);
    std::string line;
    std::getline(f, line);
    unlink(path);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "child failed: " + line;
    return line;
}

TEST(Isa, EnvironmentCapIsHonoured) {
    const isa detected = impl::detected_isa();
    const std::string vnni = impl::detected_features().has(impl::cpu_feature::avx2_vnni) ? " avx_vnni" : "";
    const isa want = detected < isa::avx2 ? detected : isa::avx2;
    EXPECT_EQ(run_child("avx2"), std::string("isa ") + to_string(want));
    // avx2_vnni selects exactly that level; AVX-VNNI stays if the CPU has it.
    const isa want_vnni = detected < isa::avx2_vnni ? detected : isa::avx2_vnni;
    EXPECT_EQ(run_child("avx2_vnni"), std::string("isa ") + to_string(want_vnni) + vnni);
    const isa want512 = detected < isa::avx512_core ? detected : isa::avx512_core;
    EXPECT_EQ(run_child("AVX512_CORE"), std::string("isa ") + to_string(want512) + vnni);
}

TEST(Isa, EnvironmentCapUnknownNameIsAnError) {
    const std::string r = run_child("avx9000");
    EXPECT_EQ(r.rfind("error QCONV_MAX_CPU_ISA", 0), 0u) << r;
    EXPECT_NE(r.find("avx512_core_vnni"), std::string::npos) << r;
    EXPECT_NE(r.find("avx9000"), std::string::npos) << r;
}

// The ISA table (core/isa_table.h) and what derives from it.
TEST(IsaTable, NamesRoundTripAndLevelsAreInOrder) {
    int i = 0;
    for (const impl::isa_level &l : impl::isa_levels()) {
        EXPECT_EQ(static_cast<int>(l.level), i++) << l.name;
        EXPECT_STREQ(to_string(l.level), l.name);
        EXPECT_EQ(parse_isa(l.name), l.level);
        EXPECT_EQ(impl::level_of(l.features), l.level) << l.name; // a level's own features name it
    }
    EXPECT_EQ(i, impl::isa_level_count);
    EXPECT_STREQ(impl::isa_level_of(isa::avx512_core_vnni).onednn_cap, "AVX512_CORE_VNNI");
}

TEST(IsaTable, CapsAdmitWhatTheLevelsBelowHave) {
    using impl::cap_allows;
    using impl::cpu_feature;
    EXPECT_FALSE(cap_allows(isa::sse41, cpu_feature::avx2));
    EXPECT_TRUE(cap_allows(isa::avx2, cpu_feature::avx2));
    EXPECT_FALSE(cap_allows(isa::avx2, cpu_feature::avx2_vnni));
    EXPECT_TRUE(cap_allows(isa::avx2_vnni, cpu_feature::avx2_vnni));
    EXPECT_TRUE(cap_allows(isa::avx512_core, cpu_feature::avx2_vnni)); // a level below it has it
    EXPECT_FALSE(cap_allows(isa::avx512_core, cpu_feature::avx512_core_vnni));
    EXPECT_FALSE(cap_allows(isa::avx512_core, cpu_feature::avx512_vbmi));
    EXPECT_TRUE(cap_allows(isa::avx512_core_vnni, cpu_feature::avx512_vbmi)); // admitted by the cap
    EXPECT_FALSE(cap_allows(isa::avx512_core_vnni, cpu_feature::avx512_bf16));
    EXPECT_FALSE(cap_allows(isa::avx512_core_bf16, cpu_feature::amx_int8));
    for (cpu_feature f : impl::all_cpu_features) EXPECT_TRUE(cap_allows(isa::avx512_core_amx, f)) << to_string(f);
}

TEST(IsaTable, LevelOfFeatureSets) {
    using impl::cpu_feature;
    using impl::feature_set;
    EXPECT_EQ(impl::level_of({}), isa::sse41);
    EXPECT_EQ(impl::level_of({cpu_feature::avx2, cpu_feature::avx2_vnni}), isa::avx2_vnni); // Alder Lake
    EXPECT_EQ(impl::level_of({cpu_feature::avx2, cpu_feature::avx2_vnni, cpu_feature::avx512_core}), isa::avx512_core);
    EXPECT_EQ(impl::level_of({cpu_feature::avx2, cpu_feature::avx512_core, cpu_feature::avx512_core_vnni,
                              cpu_feature::avx512_vbmi, cpu_feature::avx512_bf16}),
              isa::avx512_core_bf16);                                                                 // Zen 4
    EXPECT_EQ(impl::level_of({cpu_feature::avx512_core, cpu_feature::avx512_core_vnni}), isa::sse41); // no AVX2
    EXPECT_FALSE(impl::level_has_vnni(isa::avx2));
    EXPECT_TRUE(impl::level_has_vnni(isa::avx2_vnni));
    EXPECT_FALSE(impl::level_has_vnni(isa::avx512_core));
    EXPECT_TRUE(impl::level_has_vnni(isa::avx512_core_vnni));
    EXPECT_TRUE(impl::level_has_vnni(isa::avx512_core_amx));
}

} // namespace
} // namespace qconv
