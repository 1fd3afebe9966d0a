// The wrapped-row sweep: every oneDNN row (the brgconv rows and the
// `onednn:any` peer) over a generated family of shapes, compared with the
// reference by qconv-driver.
//
// The family covers IC/OC up to 512 with tails, groups and depthwise, strides
// 1..4 both below and above the kernel size, dilation, asymmetric padding and
// mini-batch 1..3; each configuration adds a data type, a zero-point kind, a
// post-op chain, an ISA cap and a thread count. The problems run in child
// processes (the driver, in chunks), so a crash inside oneDNN fails the test
// with the shape that caused it instead of taking the test binary down; the
// sweep then resumes after that shape.
//
// Every oneDNN row of the table runs, including oneDNN's AMX JIT convolution,
// and where the CPU has AMX the AMX rows run again at the configuration's two
// other thread counts of 1, 2 and 3 (oneDNN's AMX errors depend on the thread
// count). A run marked exact=0 — a peer whose oneDNN kernel saturates below
// VNNI, or the untrusted brgconv AMX peers — may mismatch without failing: it
// is printed and counted, and never a ratio= baseline; a crash is run again
// row by row to name the row, and a crash of an untrusted brgconv AMX peer is
// counted too. Every other mismatch (rows auto can pick, and the
// exact-labelled `onednn:any` baseline), failure or crash fails.
//
// Size: QCONV_SWEEP_SHAPES shapes per configuration (default 150; 30 under
// QCONV_TEST_QUICK), QCONV_SWEEP_SEED picks another family. The long opt-in
// run: QCONV_SWEEP_SHAPES=3000 ctest -R OnednnSweep (about 4 minutes here).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dispatch/host_platform.h"
#include "rows/row.h"
#include "tests/support/quick.h"
#include "tests/support/run_driver.h"
#include "tests/support/testdata.h"

namespace {

using qconv::test::driver_result;
using qconv::test::run_driver;

// Every oneDNN row of the table; the AMX ones also run at the other thread counts.
const std::vector<std::string> amx_rows = {"onednn:jit:avx512_core_amx", "onednn:brgconv_1x1:avx512_core_amx",
                                           "onednn:brgconv:avx512_core_amx"};
const std::vector<std::string> rows = {"onednn:jit:avx512_core_amx",      "onednn:brgconv_1x1:avx512_core_amx",
                                       "onednn:brgconv:avx512_core_amx",  "onednn:brgconv_1x1:avx512_core_vnni",
                                       "onednn:brgconv:avx512_core_vnni", "onednn:any"};

// Which shapes a configuration draws: the whole family, half of them
// depthwise, or half of them tiny grouped ones (an image of 1..3 pixels a
// side, mb 1: single output pixels and windows wholly in the padding).
enum class family { dense, depthwise_heavy, tiny_grouped_heavy };

struct sweep_config {
    std::string name; // the test's parameter name
    std::vector<std::string> args;
    family shapes = family::dense;
};

std::ostream &operator<<(std::ostream &os, const sweep_config &c) { return os << c.name; }

const std::vector<sweep_config> configs = {
    {"u8_nozp_relu_t1", {"--dt=u8:s8:u8", "--post-ops=relu", "--threads=1"}},
    {"u8_nozp_relu_t3", {"--dt=u8:s8:u8", "--post-ops=relu", "--threads=3"}},
    {"u8_tensorzp_relu_t2", {"--dt=u8:s8:u8", "--zp=tensor:random", "--post-ops=relu", "--threads=2"}},
    {"s8_tensorzp_sum_s8dst_t1", {"--dt=s8:s8:s8", "--zp=tensor:random", "--post-ops=sum:0.5:3", "--threads=1"}},
    {"u8_binary_f32dst_t2", {"--dt=u8:s8:f32", "--post-ops=add:per_oc;mul:per_tensor;relu", "--threads=2"}},
    {"u8_tensorzp_fq_t1", {"--dt=u8:s8:u8", "--zp=tensor:random", "--post-ops=fq:per_channel", "--threads=1"}},
    {"u8_channelzp_fq_t1", {"--dt=u8:s8:u8", "--zp=channel:random", "--post-ops=fq:per_channel", "--threads=1"}},
    {"u8_extreme_s32dst_t1", {"--dt=u8:s8:s32", "--data=extreme", "--threads=1"}},
    {"u8_dstzp_clip_t1", {"--dt=u8:s8:u8", "--dst-zp=5", "--post-ops=clip:0:6", "--threads=1"}},
    {"u8_depthwise_fq_f32dst_t1",
     {"--dt=u8:s8:f32", "--post-ops=fq:per_channel", "--dst-zp=-4", "--threads=1"},
     family::depthwise_heavy},
    {"avx2_binary_t1", {"--isa=avx2", "--post-ops=add:per_tensor:3", "--threads=1"}, family::depthwise_heavy},
    {"avx2_vnni_binary_t2", {"--isa=avx2_vnni", "--post-ops=add:per_oc;relu", "--threads=2"}, family::depthwise_heavy},
    {"u8_sum_f32dst_t1", {"--dt=u8:s8:f32", "--post-ops=sum:0.5", "--threads=1"}},
    {"tiny_grouped_sum_t2", {"--dt=u8:s8:u8", "--post-ops=relu;sum:1:-1", "--threads=2"}, family::tiny_grouped_heavy},
    {"tiny_grouped_per_oc_t1",
     {"--dt=u8:s8:u8", "--post-ops=mul:per_oc;add:per_oc;sub:full", "--threads=1"},
     family::tiny_grouped_heavy},
    {"tiny_grouped_s8_per_oc_f32dst_t2",
     {"--dt=s8:s8:f32", "--post-ops=max:per_oc;mul:per_oc", "--dst-zp=-2", "--threads=2"},
     family::tiny_grouped_heavy},
    {"avx512_core_s8_t1", {"--isa=avx512_core", "--dt=s8:s8:s8", "--threads=1"}},
};

int env_int(const char *name, int def) {
    const char *v = std::getenv(name);
    return v && *v ? std::atoi(v) : def;
}

// One shape of the family, in benchdnn syntax; MACs bounded so the
// reference stays fast.
std::string make_shape(std::mt19937 &rng, bool depthwise, bool tiny_grouped) {
    auto pick = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    auto channels = [&] {
        switch (pick(0, 3)) {
        case 0: return pick(1, 16);
        case 1: return pick(17, 96);
        case 2: return 16 * pick(1, 32); // whole vectors up to 512
        default: return pick(97, 512);   // large with a tail
        }
    };
    for (;;) {
        int g = 1, icg = channels(), ocg = channels();
        if (depthwise) {
            g = pick(1, 4) == 1 ? pick(1, 16) : pick(2, 160);
            icg = ocg = 1;
        } else if (tiny_grouped || pick(0, 6) == 0) {
            g = pick(2, 4);
            icg = std::max(1, icg / g);
            ocg = std::max(1, ocg / g);
        }
        const int kernels[] = {1, 1, 2, 3, 3, 5, 7};
        const int kh = kernels[pick(0, 6)], kw = pick(0, 3) == 0 ? kernels[pick(0, 6)] : kh;
        const int sh = pick(1, 4), sw = pick(0, 2) == 0 ? pick(1, 4) : sh;
        const int dh = pick(0, 4) == 0 ? pick(2, 3) : 1, dw = pick(0, 4) == 0 ? pick(2, 3) : 1;
        const int ekh = (kh - 1) * dh + 1, ekw = (kw - 1) * dw + 1;
        const int pt = pick(0, 3) == 0 ? pick(0, ekh - 1) : 0, pb = pick(0, 3) == 0 ? pick(0, ekh - 1) : pt;
        const int pl = pick(0, 3) == 0 ? pick(0, ekw - 1) : 0, pr = pick(0, 3) == 0 ? pick(0, ekw - 1) : pl;
        const int ih = tiny_grouped ? pick(1, 3) : pick(1, 24);
        const int iw = tiny_grouped ? pick(1, 3) : pick(0, 1) ? ih : pick(1, 32);
        const int mb = !tiny_grouped && pick(0, 3) == 0 ? pick(2, 3) : 1;
        const int oh = (ih + pt + pb - ekh) / sh + 1, ow = (iw + pl + pr - ekw) / sw + 1;
        if (ih + pt + pb < ekh || iw + pl + pr < ekw || oh < 1 || ow < 1) continue;
        const double macs = double(mb) * g * ocg * oh * ow * icg * kh * kw;
        if (macs > 2e7) continue;
        std::ostringstream s;
        s << "g" << g << "mb" << mb << "ic" << g * icg << "ih" << ih << "iw" << iw << "oc" << g * ocg << "oh" << oh
          << "ow" << ow << "kh" << kh << "kw" << kw << "sh" << sh << "sw" << sw << "ph" << pt << "pw" << pl << "dh"
          << dh - 1 << "dw" << dw - 1;
        // Asymmetric padding is given by the output size: the driver derives
        // the bottom/right padding from oh/ow.
        (void)pb;
        (void)pr;
        return s.str();
    }
}

std::string field(const std::string &line, const std::string &key) {
    const std::string k = " " + key + "=";
    const size_t at = line.find(k);
    if (at == std::string::npos) return "";
    size_t end = line.find(' ', at + k.size());
    if (line.compare(at + k.size(), 1, "\"") == 0) end = line.find('"', at + k.size() + 1) + 1;
    return line.substr(at + k.size(), end == std::string::npos ? std::string::npos : end - at - k.size());
}

// What one pass of the sweep saw.
struct sweep_tally {
    std::map<std::string, int> ran;     // row -> problems it ran and matched
    std::map<std::string, int> inexact; // row -> mismatches of its exact=0 runs
    int crashes = 0, peer_crashes = 0;
};

// The untrusted brgconv AMX peers (docs/dispatch.md): their errors, crashes
// included, are counted, never failures; auto never runs them.
bool is_untrusted_peer(const std::string &row) {
    return row == "onednn:brgconv_1x1:avx512_core_amx" || row == "onednn:brgconv:avx512_core_amx";
}

// Which of `impls` makes the driver die on `shapes` (run one row at a time,
// the untrusted peers first; "" when none does alone).
std::string crashing_row(const std::vector<std::string> &shapes, std::vector<std::string> impls,
                         const std::vector<std::string> &args) {
    std::stable_partition(impls.begin(), impls.end(), is_untrusted_peer);
    char path[] = "/tmp/qconv_sweep_XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) return "";
    close(fd);
    {
        std::ofstream f(path);
        for (const auto &s : shapes) f << s << "\n";
    }
    std::string found;
    for (const auto &impl : impls) {
        std::vector<std::string> a = {"conv", "--mode=C", "--impl=" + impl, std::string("--batch=") + path};
        a.insert(a.end(), args.begin(), args.end());
        const driver_result r = run_driver(a);
        if (r.rc != 0 && r.rc != 1) {
            found = impl;
            break;
        }
    }
    std::remove(path);
    return found;
}

// Runs `impls` on every shape with the driver arguments `args` (chunks of at
// most 20 problems per child; after a crash, the next child starts after the
// problem that crashed) and checks every line.
void sweep_pass(const std::string &name, const std::vector<std::string> &shapes, const std::vector<std::string> &impls,
                const std::vector<std::string> &args, sweep_tally *tally) {
    std::string impl_list;
    for (const auto &r : impls) impl_list += (impl_list.empty() ? "" : ",") + r;
    size_t next = 0;
    while (next < shapes.size()) {
        const size_t end = std::min(shapes.size(), next + 20);
        char path[] = "/tmp/qconv_sweep_XXXXXX";
        const int fd = mkstemp(path);
        ASSERT_GE(fd, 0);
        close(fd);
        {
            std::ofstream f(path);
            for (size_t i = next; i < end; ++i) f << shapes[i] << "\n";
        }
        std::vector<std::string> a = {"conv", "--mode=C", "--impl=" + impl_list, std::string("--batch=") + path};
        a.insert(a.end(), args.begin(), args.end());
        const driver_result r = run_driver(a);
        std::remove(path);

        size_t lines = 0;
        std::istringstream out(r.out);
        for (std::string line; std::getline(out, line);) {
            if (line.rfind("op=conv ", 0) != 0 || line.find(" total=") != std::string::npos) continue;
            const size_t problem = next + lines / impls.size();
            ++lines;
            const std::string status = field(line, "status"), impl = field(line, "impl");
            if (status == "ok") ++tally->ran[impl];
            if (status == "inexact") { // differs, and labelled exact=0
                // Printed (the first of each row, every one when verbose) and counted.
                if (tally->inexact[impl]++ == 0 || std::getenv("QCONV_TEST_VERBOSE"))
                    std::printf("exact=0 peer mismatch (not a failure): %s\n", line.c_str());
                continue;
            }
            EXPECT_TRUE(status == "ok" || status == "unimplemented") // a mismatch: a row labelled exact
                << name << " problem " << problem << " (" << shapes[problem] << "):\n  " << line;
        }
        const size_t done = lines / impls.size();
        if (r.rc != 0 && r.rc != 1) {
            // The child died inside the problem after the last complete one.
            const size_t at = std::min(next + done, end - 1);
            const std::string row =
                crashing_row(std::vector<std::string>(shapes.begin() + next, shapes.begin() + at + 1), impls, args);
            if (is_untrusted_peer(row)) {
                ++tally->peer_crashes;
                std::printf("untrusted peer %s crashed (not a failure) on %s\n", row.c_str(), shapes[at].c_str());
            } else {
                ++tally->crashes;
                ADD_FAILURE() << name << ": the driver died (exit " << r.rc << ") on " << shapes[at] << " with args "
                              << testing::PrintToString(args) << " in "
                              << (row.empty() ? "a row not found again alone" : row) << "\n  stderr: " << r.err;
            }
            next = at + 1;
            continue;
        }
        ASSERT_EQ(done, end - next) << "the driver printed " << lines << " lines for " << end - next << " problems\n"
                                    << r.out << r.err;
        next = end;
    }
}

class OnednnSweep : public ::testing::TestWithParam<sweep_config> {};

TEST_P(OnednnSweep, RowsMatchTheReference) {
    const sweep_config &cfg = GetParam();
    const int n = env_int("QCONV_SWEEP_SHAPES", qconv::test::quick_mode() ? 30 : 150);
    std::mt19937 rng(static_cast<uint32_t>(env_int("QCONV_SWEEP_SEED", 1)) * 7919u +
                     static_cast<uint32_t>(std::hash<std::string>()(cfg.name)));
    std::vector<std::string> shapes;
    for (int i = 0; i < n; ++i)
        shapes.push_back(make_shape(rng, cfg.shapes == family::depthwise_heavy && i % 2 == 0,
                                    cfg.shapes == family::tiny_grouped_heavy && i % 2 == 0));

    sweep_tally tally;
    sweep_pass(cfg.name, shapes, rows, cfg.args, &tally);
    // The AMX rows at the two other thread counts (an ISA cap leaves no AMX).
    const bool capped =
        std::any_of(cfg.args.begin(), cfg.args.end(), [](const std::string &a) { return a.rfind("--isa=", 0) == 0; });
    if (!capped && qconv::impl::host_platform().has(qconv::impl::cpu_feature::amx_int8))
        for (const char *threads : {"--threads=1", "--threads=2", "--threads=3"}) {
            if (std::find(cfg.args.begin(), cfg.args.end(), threads) != cfg.args.end()) continue;
            std::vector<std::string> args;
            for (const auto &a : cfg.args)
                if (a.rfind("--threads=", 0) != 0) args.push_back(a);
            args.push_back(threads);
            sweep_pass(cfg.name + " " + threads, shapes, amx_rows, args, &tally);
        }
    std::string matched, inexact;
    for (const auto &[row, count] : tally.ran) matched += " " + row + "=" + std::to_string(count);
    for (const auto &[row, count] : tally.inexact) inexact += " " + row + "=" + std::to_string(count);
    std::printf("sweep %s: %d shapes; matched:%s; exact=0 peer mismatches (not failures):%s; untrusted peer "
                "crashes (not failures): %d; crashes: %d\n",
                cfg.name.c_str(), n, matched.c_str(), inexact.empty() ? " none" : inexact.c_str(), tally.peer_crashes,
                tally.crashes);
}

INSTANTIATE_TEST_SUITE_P(Configs, OnednnSweep, ::testing::ValuesIn(configs),
                         [](const ::testing::TestParamInfo<sweep_config> &i) { return i.param.name; });

// The first line of the driver's output for `impl` (empty when none).
std::string line_of(const driver_result &r, const std::string &impl) {
    std::istringstream out(r.out);
    for (std::string line; std::getline(out, line);)
        if (line.find(" impl=" + impl + " ") != std::string::npos && line.find(" total=") == std::string::npos)
            return line;
    return "";
}

// The onednn:any peer matched the reference: status=ok where the peer is
// exact on this CPU. Where it is labelled exact=0 (oneDNN below VNNI
// saturates 16-bit partial sums and halves s8-source weights) its bits make
// no claim, and the check is skipped with that reason.
void expect_peer_ok(const driver_result &r, const std::string &what = "") {
    const std::string line = line_of(r, "onednn:any");
    if (field(line, "exact") == "0") {
        [&] { GTEST_SKIP() << "onednn:any is labelled inexact (exact=0) on this CPU " << what; }();
        return;
    }
    EXPECT_EQ(field(line, "status"), "ok") << what << "\n" << r.out;
}

// The two default-path reproducers: `auto` picked brgconv on AMX, which is
// wrong (thread-count dependent) with a stride larger than the kernel, and
// corrupts the heap on the second shape. The rows now refuse that; `auto`
// must match the reference at 1, 2 and 3 threads on every machine.
TEST(OnednnKnownWrong, StrideBeyondKernelOnTheDefaultPath) {
    for (const char *desc : {"mb1ic228ih19oc4kh2sh3", "mb1ic72ih30iw25oc18kh1kw7sh2sw3", "mb1ic96ih20oc32kh2sh3"})
        for (const char *threads : {"--threads=1", "--threads=2", "--threads=3"}) {
            const driver_result r = run_driver({"conv", "--impl=auto", threads, desc});
            EXPECT_EQ(r.rc, 0) << desc << " " << threads << " (exit 1: a mismatch)\n" << r.out << r.err;
            EXPECT_NE(r.out.find("status=ok"), std::string::npos) << r.out;
        }
    // Where brgconv runs on AMX, both brgconv AMX rows refuse with the reason.
    const driver_result r =
        run_driver({"conv", "--impl=onednn:brgconv:avx512_core_amx,onednn:brgconv_1x1:avx512_core_amx",
                    "mb1ic228ih19oc4kh2sh3", "mb1ic64ih8oc64kh1sh2"});
    EXPECT_EQ(r.rc, 0) << r.out << r.err;
    if (!qconv::impl::host_platform().has(qconv::impl::cpu_feature::amx_int8))
        GTEST_SKIP() << "needs AMX-INT8 (a Sapphire Rapids class Xeon) for the brgconv AMX rows' refusal";
    EXPECT_EQ(r.out.find("status=ok"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("stride larger than the kernel"), std::string::npos) << r.out;
}

// oneDNN 2.6.3's brgconv on AMX computes these wrongly at some thread counts
// (the wrapped-row sweep on an AMX Xeon; the last three through `onednn:any`,
// which took brgconv AMX as oneDNN's first choice). The brgconv AMX rows are
// peers now and `onednn:any` passes over them: `auto` and the peer must match
// the reference at 1, 2 and 3 threads on every machine, and where the CPU has
// AMX `auto` never runs brgconv AMX.
struct amx_reproducer {
    const char *desc, *dt, *post_ops;
};
const amx_reproducer brgconv_amx_reproducers[] = {
    {"g1mb2ic507ih20iw20oc10oh6ow5kh5kw5sh3sw4ph0pw3", "u8:s8:f32", "sum:0.5"},
    {"g1mb2ic507ih20iw20oc10oh6ow5kh5kw5sh3sw4ph0pw3", "u8:s8:u8", "relu"},
    {"g1mb1ic160ih24iw15oc167oh5ow4kh5kw5sh4sw4ph0pw1", "u8:s8:u8", ""},
    {"g1mb1ic400ih17iw13oc15oh4ow3kh5kw5sh4sw4ph0pw0", "u8:s8:u8", "relu;sum:1:-1"},
    {"g1mb1ic352ih13iw4oc75oh6ow2kh3kw3sh2sw2ph0pw1", "u8:s8:f32", "add:per_oc;mul:per_tensor;relu"},
    {"g1mb1ic496ih9iw8oc418oh2ow1kh5kw5sh4sw4ph0pw0", "u8:s8:f32", "add:per_oc;mul:per_tensor;relu"},
    {"g1mb1ic192ih11iw11oc95oh2ow2kh5kw5sh4sw4ph0pw0", "u8:s8:u8", "relu;sum:1:-1"},
    {"g1mb1ic381ih9iw9oc16oh3ow3kh7kw7sh1sw3ph0pw0", "s8:s8:f32", "max:per_oc;mul:per_oc"},
    {"g1mb1ic502ih20iw15oc3oh4ow3kh5kw5sh4sw4ph0pw0", "u8:s8:f32", "add:per_oc;mul:per_tensor;relu"},
    {"g1mb1ic276ih5iw5oc416oh1ow1kh5kw5sh4sw4ph0pw0", "u8:s8:u8", "relu;sum:1:-1"},
    {"g1mb1ic164ih9iw9oc304oh8ow2kh2kw5sh1sw4ph0pw0", "u8:s8:u8", "relu;sum:1:-1"},
};

TEST(OnednnKnownWrong, BrgconvAmxIsNeverOnTheDefaultPath) {
    const bool amx = qconv::impl::host_platform().has(qconv::impl::cpu_feature::amx_int8);
    for (const amx_reproducer &c : brgconv_amx_reproducers)
        for (const char *threads : {"--threads=1", "--threads=2", "--threads=3"}) {
            std::vector<std::string> args = {"conv", "--impl=auto,onednn:any", threads, std::string("--dt=") + c.dt,
                                             c.desc};
            if (*c.post_ops) args.push_back(std::string("--post-ops=") + c.post_ops);
            const driver_result r = run_driver(args);
            const std::string what = std::string(c.desc) + " " + c.dt + " " + c.post_ops + " " + threads;
            EXPECT_EQ(r.rc, 0) << what << " (exit 1: a mismatch)\n" << r.out << r.err;
            EXPECT_EQ(r.out.find("status=mismatch"), std::string::npos) << what << "\n" << r.out;
            expect_peer_ok(r, what);
            // The first line is auto's: the row it chose.
            const std::string chosen = field(r.out.substr(0, r.out.find('\n')), "impl");
            EXPECT_FALSE(chosen.rfind("onednn:brgconv", 0) == 0 && chosen.find("amx") != std::string::npos)
                << what << ": auto chose " << chosen;
        }
    // Forced by name, the brgconv AMX rows run as peers labelled exact=0.
    const driver_result p = run_driver({"conv", "--impl=onednn:brgconv:avx512_core_amx", "--dt=u8:s8:f32",
                                        "--post-ops=sum:0.5", brgconv_amx_reproducers[0].desc});
    if (!amx) GTEST_SKIP() << "needs AMX-INT8 (a Sapphire Rapids class Xeon) for the peer's own run";
    EXPECT_EQ(field(line_of(p, "onednn:brgconv:avx512_core_amx"), "exact"), "0") << p.out << p.err;
}

// oneDNN's AMX JIT convolution is measured slower than the JIT rows on small
// problems and with a per-channel FakeQuantize on short reductions: its row
// defers those to the rows below (a pure rule, checked on every machine);
// forced by name it still runs and matches (the sweep forces it on small
// shapes), where the CPU has AMX.
TEST(OnednnAmxJit, DefersWhereTheJitRowsAreFaster) {
    const qconv::impl::conv_entry *row = nullptr;
    for (const auto &e : qconv::impl::conv_list())
        if (e.name == "onednn:jit:avx512_core_amx") row = &e;
    ASSERT_NE(row, nullptr);
    ASSERT_TRUE(row->defer);
    auto problem = [](const char *desc, const char *ops) {
        qconv::conv_problem p;
        p.desc = qconv::conv_desc::parse(desc);
        p.ops = qconv::testdata::make_post_ops(ops, p.desc.oc, 1);
        return p;
    };
    struct {
        const char *desc, *post_ops, *reason;
    } cases[] = {{"mb1ic1024ih1oc5kh1", "relu", "under 10 M MACs"},
                 {"mb1ic64ih56oc64oh56kh1", "relu", "a reduction ICg*KH*KW under 128"},
                 {"mb1ic64ih75oc128oh75kh1", "relu", "a reduction ICg*KH*KW under 128"},
                 {"mb1ic256ih56oc64oh56kh1", "fq:per_channel", "a per-channel FakeQuantize"},
                 {"mb1ic512ih7oc512kh3ph1", "relu", ""},
                 {"mb1ic512ih7oc512kh3ph1", "fq:per_channel", ""}};
    const bool amx = qconv::impl::host_platform().has(qconv::impl::cpu_feature::amx_int8);
    for (const auto &c : cases) {
        // The oneDNN rows' defer reads the problem only: any plan serves.
        const std::string why =
            row->defer(problem(c.desc, c.post_ops), {}, qconv::impl::host_platform(), qconv::impl::plan{});
        EXPECT_EQ(why.substr(0, std::string(c.reason).size()), c.reason) << c.desc << " " << c.post_ops << ": " << why;
        if (!*c.reason) {
            EXPECT_EQ(why, "") << c.desc;
        }
        if (!amx) continue;
        const driver_result f = run_driver({"conv", "--impl=onednn:jit:avx512_core_amx", "--threads=1",
                                            std::string("--post-ops=") + c.post_ops, c.desc});
        EXPECT_EQ(field(line_of(f, "onednn:jit:avx512_core_amx"), "status"), "ok") << c.desc << "\n" << f.out;
    }
}

// oneDNN 2.6's jit_uni_int8 kernels apply binary post-ops to depthwise channel
// tails wrongly (G % 8 != 0): `onednn:any --isa=avx2` gave 227 wrong elements
// on g7. The peer now steps to oneDNN's next implementation.
TEST(OnednnKnownWrong, DepthwiseBinaryTailBelowAvx512) {
    for (const char *cap : {"--isa=avx2", "--isa=avx2_vnni"})
        for (const char *desc : {"g7mb1ic7ih8oc7kh3ph1", "g15mb1ic15ih8oc15kh3ph1", "g2mb1ic2ih5oc2kh3ph1"}) {
            const driver_result r = run_driver({"conv", "--impl=onednn:any", cap, "--post-ops=add:per_tensor:3", desc});
            EXPECT_EQ(r.rc, 0) << cap << " " << desc << "\n" << r.out << r.err;
            expect_peer_ok(r);
        }
}

// Found by the sweep: oneDNN's gemm convolution on a grouped 1x1 with a
// source zero point (x64:gemm_s8u8s32:jit, 27 of 200 wrong at any thread
// count). The peer now passes over gemm for grouped problems with a zp.
TEST(OnednnKnownWrong, GroupedGemmWithZeroPoint) {
    const driver_result r = run_driver({"conv", "--impl=onednn:any", "--zp=tensor:9", "--threads=1",
                                        "g4mb1ic32ih18iw18oc8oh5ow5kh1kw1sh4sw4ph0pw0dh1dw0"});
    EXPECT_EQ(r.rc, 0) << r.out << r.err;
    expect_peer_ok(r);
}

// Found by fuzz_diff with the peer on: oneDNN's brdgmm_dw applies per-channel
// post-op operands wrongly when the output is a single pixel (g19 FakeQuantize
// per channel: 3 of 19 wrong; g40 add per OC: 22 of 40). The peer now takes
// oneDNN's next implementation there.
TEST(OnednnKnownWrong, BrdgmmSinglePixelPerChannelOperands) {
    for (const char *desc :
         {"g19mb1ic19ih2iw2oc19oh1ow1kh1kw1sh3sw2", "g40mb1ic40ih1iw1oc40kh1kw1", "g19mb1ic19ih3iw3oc19kh3kw3"})
        for (const char *ops : {"--post-ops=fq:per_channel", "--post-ops=add:per_oc"}) {
            const driver_result r =
                run_driver({"conv", "--impl=onednn:any", "--dt=u8:s8:f32", "--dst-zp=-4", "--bias=0", ops, desc});
            EXPECT_EQ(r.rc, 0) << desc << " " << ops << "\n" << r.out << r.err;
            expect_peer_ok(r);
        }
}

// Found by fuzz_diff on the rows themselves: brgconv on a grouped convolution
// with one output pixel whose window lies wholly in the padding reads the
// per-channel post-op operands of later groups at group 0's channels (g3 oc33,
// scale-shift per channel on brgconv:avx512_core_vnni: 21 of 33 wrong). Every
// oneDNN row passes over brgconv there; no row may mismatch.
TEST(OnednnKnownWrong, BrgconvGroupedSinglePixelPerChannelOperands) {
    for (const char *desc :
         {"g3mb1ic63ih1iw4oc33oh1ow1kh2kw2sh2sw3ph1pw0dh2dw1", "g2mb1ic34ih1iw1oc34oh1ow1kh2kw1ph1pw0dh2dw0"})
        for (const char *ops : {"--post-ops=mul:per_oc;add:per_oc", "--post-ops=add:full", "--post-ops=scale_shift"}) {
            const driver_result r = run_driver({"conv", "--impl=all", ops, desc});
            EXPECT_EQ(r.rc, 0) << desc << " " << ops << "\n" << r.out << r.err;
            EXPECT_EQ(r.out.find("status=mismatch"), std::string::npos) << desc << " " << ops << "\n" << r.out;
            expect_peer_ok(r);
        }
}

// Found by fuzz_diff on the rows (a crash) and the sum sweeps: brgconv with a
// sum post-op where an output pixel's window lies wholly in the padding sums
// wrongly (mb1 ic16 ih4 oh6 kh3 ph1: 56 of 96 wrong) and, with another post-op
// before or after the sum, crashes. Every oneDNN row passes over brgconv there.
TEST(OnednnKnownWrong, BrgconvSumWherePixelsSeeOnlyPadding) {
    for (const char *desc : {"mb1ic16ih4iw4oc16oh6ow4kh3kw3ph1pw1", "g3mb1ic60ih1iw3oc75oh4ow3kh3kw3sh1sw1ph3pw0dh2dw0",
                             "g1mb1ic1ih1iw3oc1oh1ow1kh3kw2sh1sw3ph1pw0dh2dw0"})
        for (const char *ops : {"--post-ops=sum", "--post-ops=relu;sum:1:-1", "--post-ops=abs;sum;relu"}) {
            const driver_result r = run_driver({"conv", "--impl=all", "--dt=u8:s8:f32", ops, desc});
            EXPECT_EQ(r.rc, 0) << desc << " " << ops << "\n" << r.out << r.err;
            EXPECT_EQ(r.out.find("status=mismatch"), std::string::npos) << desc << " " << ops << "\n" << r.out;
        }
}

// Found by fuzz_diff with the peer on: oneDNN's gemm convolution with an s8
// source on a grouped problem (x64:gemm_s8s8s32:jit; odd ICg >= 17 with a
// window mostly in the padding: every element wrong, no post-op needed). The
// peer passes over gemm for grouped problems with an s8 source.
TEST(OnednnKnownWrong, GroupedGemmWithS8Source) {
    for (const char *desc :
         {"g2mb1ic886ih1iw1oc10oh1ow3kh4kw4sh3sw1ph1pw5dh0dw1", "g2mb1ic34ih1iw1oc10oh1ow3kh4kw4sh3sw1ph1pw5"}) {
        const driver_result r = run_driver({"conv", "--impl=onednn:any", "--dt=s8:s8:s32", "--dst-zp=-1", desc});
        EXPECT_EQ(r.rc, 0) << desc << "\n" << r.out << r.err;
        expect_peer_ok(r);
    }
}

// Found by the long sweep: oneDNN's jit_uni_int8_1x1:avx2_vnni computes a
// strided 1x1 convolution wrongly at 2 threads (mb2, OC 496: 105 wrong, with
// or without post-ops). The peer passes over it at every thread count.
TEST(OnednnKnownWrong, StridedOneByOneOnAvx2VnniAtTwoThreads) {
    if (!qconv::impl::host_platform().has(qconv::impl::cpu_feature::avx2_vnni))
        GTEST_SKIP() << "needs AVX-VNNI (or AVX-512 VNNI) for oneDNN's jit_uni_int8_1x1:avx2_vnni";
    for (const char *threads : {"--threads=1", "--threads=2", "--threads=3"})
        for (const char *ops : {"--post-ops=relu", "--post-ops=add:per_oc;relu"}) {
            const driver_result r = run_driver({"conv", "--impl=onednn:any", "--isa=avx2_vnni", threads, ops,
                                                "g1mb2ic8ih3iw27oc496oh1ow9kh1kw1sh3sw3"});
            EXPECT_EQ(r.rc, 0) << threads << " " << ops << "\n" << r.out << r.err;
            expect_peer_ok(r);
        }
}

// Below VNNI oneDNN halves the weights of an s8 source: the peer's line says
// exact=0, and a performance run never takes it as the ratio= baseline.
TEST(OnednnKnownWrong, InexactPeerIsLabelledAndNeverTheBaseline) {
    const driver_result r =
        run_driver({"conv", "--impl=onednn:any", "--isa=avx512_core", "--dt=s8:s8:s8", "g1mb1ic64ih1iw1oc1000kh1"});
    const std::string line = line_of(r, "onednn:any");
    ASSERT_FALSE(line.empty()) << r.out << r.err;
    EXPECT_EQ(field(line, "exact"), "0") << line;

    const driver_result p = run_driver({"conv", "--mode=P", "--reps=1", "--impl=auto", "--isa=avx512_core",
                                        "--dt=s8:s8:s8", "g1mb1ic64ih1iw1oc1000kh1"});
    EXPECT_EQ(p.rc, 0) << p.out << p.err;
    EXPECT_EQ(p.out.find("ratio="), std::string::npos) << "an inexact peer was used as the baseline:\n" << p.out;

    // At the native level the peer is either labelled or exact and matching.
    const driver_result v = run_driver({"conv", "--impl=onednn:any", "--dt=s8:s8:s8", "g1mb1ic64ih1iw1oc1000kh1"});
    const std::string native = line_of(v, "onednn:any");
    if (field(native, "exact") != "0") {
        EXPECT_EQ(field(native, "status"), "ok") << native;
    }
}

} // namespace
