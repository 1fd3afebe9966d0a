// qconv-driver's dumps recomputed independently.
//
// The driver runs small problems on every implementation with --dump=DIR;
// this test then reads each DIR/NNNN/ folder (problem.txt and the raw arrays)
// and recomputes the destination with its own naive loops — no qconv code
// besides the descriptor parser is involved — and requires the dumped dst.bin
// to be equal element for element (the default data keeps the f32 pipeline
// exact). It also checks the folder's contents (which files exist when) and
// the driver's exit statuses and output fields.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "qconv/conv_desc.h"
#include "tests/support/run_driver.h"

namespace {

using run_result = qconv::test::driver_result;
using qconv::test::run_driver;

std::string make_temp_dir() {
    char tmpl[] = "/tmp/qconv_driver_test_XXXXXX";
    const char *d = mkdtemp(tmpl);
    return d ? d : "";
}

bool exists(const std::string &path) { return std::ifstream(path).good(); }

template <typename T>
std::vector<T> read_array(const std::string &path) {
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    if (!f) return {};
    const auto bytes = static_cast<size_t>(f.tellg());
    std::vector<T> v(bytes / sizeof(T));
    f.seekg(0);
    f.read(reinterpret_cast<char *>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
    return v;
}

std::map<std::string, std::string> read_problem(const std::string &path) {
    std::map<std::string, std::string> kv;
    std::ifstream f(path);
    std::string line;
    while (std::getline(f, line)) {
        const auto eq = line.find('=');
        if (line.empty() || line[0] == '#' || eq == std::string::npos) continue;
        kv[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return kv;
}

// "kind k=v k=v" of a post_op<i> line.
std::map<std::string, std::string> words(const std::string &s, std::string *kind) {
    std::istringstream in(s);
    std::map<std::string, std::string> kv;
    in >> *kind;
    std::string w;
    while (in >> w) {
        const auto eq = w.find('=');
        if (eq != std::string::npos) kv[w.substr(0, eq)] = w.substr(eq + 1);
    }
    return kv;
}

float at(const std::vector<float> &v, int64_t c) { return v.size() == 1 ? v[0] : v.at(static_cast<size_t>(c)); }

// One post-op, written out from docs/semantics.md.
struct post_op_spec {
    std::string kind;
    std::map<std::string, std::string> kv;
    std::map<std::string, std::vector<float>> vec; // parameter vectors from post_op<i>_<name>.bin
};

float round_half_even(float x) { return std::nearbyint(x); }

float apply(const post_op_spec &op, float y, int64_t c, float dst_prev) {
    if (op.kind == "eltwise") {
        const std::string alg = op.kv.at("alg");
        const float alpha = std::stof(op.kv.at("alpha"));
        if (alg == "relu") return y > 0 ? y : y * alpha;
        ADD_FAILURE() << "eltwise " << alg << " not recomputed by this test";
        return y;
    }
    if (op.kind == "scale_shift") return std::fmaf(y, at(op.vec.at("scale"), c), at(op.vec.at("shift"), c));
    if (op.kind == "prelu") return y >= 0 ? y : y * at(op.vec.at("scale"), c);
    if (op.kind == "sum") {
        const float s = std::stof(op.kv.at("scale"));
        return y + s * (dst_prev - static_cast<float>(std::stoi(op.kv.at("zp"))));
    }
    if (op.kind == "binary") {
        const std::string alg = op.kv.at("alg");
        const float b = at(op.vec.at("scale"), c);
        if (alg == "add") return y + b;
        if (alg == "sub") return y - b;
        if (alg == "mul") return y * b;
        if (alg == "div") return y / b;
        if (alg == "max") return std::max(y, b);
        if (alg == "min") return std::min(y, b);
    }
    if (op.kind == "fake_quantize") {
        // OpenVINO's formula; the generated parameters make every step exact.
        const float L = std::stof(op.kv.at("levels"));
        const float il = at(op.vec.at("in_lo"), c), ih = at(op.vec.at("in_hi"), c);
        const float ol = at(op.vec.at("out_lo"), c), oh = at(op.vec.at("out_hi"), c);
        if (y <= std::min(il, ih)) return ol;
        if (y > std::max(il, ih)) return oh;
        const float q = round_half_even((y - il) / (ih - il) * (L - 1));
        return q * ((oh - ol) / (L - 1)) + ol;
    }
    ADD_FAILURE() << "post-op " << op.kind << " not recomputed by this test";
    return y;
}

// Stores as the destination type: round half to even, saturate.
double store(const std::string &dt, float y) {
    if (dt == "f32") return y;
    const double lo = dt == "u8" ? 0 : dt == "s8" ? -128 : -2147483648.0;
    const double hi = dt == "u8" ? 255 : dt == "s8" ? 127 : 2147483647.0;
    if (std::isnan(y)) return 0;
    const double r = std::nearbyint(static_cast<double>(y));
    return std::min(hi, std::max(lo, r));
}

double load(const std::string &dt, const std::vector<uint8_t> &bytes, int64_t i) {
    if (dt == "u8") return bytes.at(static_cast<size_t>(i));
    if (dt == "s8") return static_cast<int8_t>(bytes.at(static_cast<size_t>(i)));
    if (dt == "s32") {
        int32_t v;
        std::memcpy(&v, &bytes.at(static_cast<size_t>(i) * 4), 4);
        return v;
    }
    float v;
    std::memcpy(&v, &bytes.at(static_cast<size_t>(i) * 4), 4);
    return v;
}

std::string field(const std::string &dt, int i) { // "u8:s8:f32" → part i
    std::vector<std::string> parts;
    std::stringstream ss(dt);
    std::string p;
    while (std::getline(ss, p, ':')) parts.push_back(p);
    return parts.at(static_cast<size_t>(i));
}

// Recomputes DIR/NNNN and compares with its dst.bin; returns the number of
// elements checked.
int64_t recompute_and_check(const std::string &dir) {
    auto kv = read_problem(dir + "/problem.txt");
    for (const char *k : {"desc", "dt", "zp", "post_ops", "impl", "status"})
        EXPECT_TRUE(kv.count(k)) << dir << ": no " << k;
    // A peer labelled exact=0 (oneDNN below VNNI) that differs is no claim.
    if (kv["status"] == "inexact") return 0;
    auto I = [&](const char *k) { return std::stoll(kv.at(k)); };
    const int64_t mb = I("mb"), g = I("g"), ic = I("ic"), ih = I("ih"), iw = I("iw"), oc = I("oc"), oh = I("oh"),
                  ow = I("ow"), kh = I("kh"), kw = I("kw"), sh = I("sh"), sw = I("sw"), pt = I("pt"), pl = I("pl"),
                  dh = I("dh"), dw = I("dw");
    // The fully spelled descriptor parses back to the same shape.
    const qconv::conv_desc d = qconv::conv_desc::parse(kv.at("desc"));
    EXPECT_EQ(d.mb, mb);
    EXPECT_EQ(d.ic, ic);
    EXPECT_EQ(d.oh, oh);
    EXPECT_EQ(d.ow, ow);
    EXPECT_EQ(d.pb, I("pb"));
    EXPECT_EQ(d.pr, I("pr"));
    EXPECT_EQ(d.dh, dh);
    const std::string src_dt = field(kv.at("dt"), 0), dst_dt = field(kv.at("dt"), 2);
    const int64_t icg = ic / g, ocg = oc / g;

    const auto src = read_array<uint8_t>(dir + "/src.bin");
    const auto wei = read_array<int8_t>(dir + "/wei.bin");
    const auto scale = read_array<float>(dir + "/scale.bin");
    const auto dst = read_array<uint8_t>(dir + "/dst.bin");
    const size_t dst_bytes = dst_dt == "u8" || dst_dt == "s8" ? 1 : 4;
    EXPECT_EQ(src.size(), static_cast<size_t>(mb * ih * iw * ic));
    EXPECT_EQ(wei.size(), static_cast<size_t>(oc * icg * kh * kw));
    EXPECT_TRUE(scale.size() == 1 || scale.size() == static_cast<size_t>(oc));
    // With a fused dw item the destination has the depthwise's shape (dst_desc).
    const qconv::conv_desc dd = qconv::conv_desc::parse(kv.count("dst_desc") ? kv.at("dst_desc") : kv.at("desc"));
    EXPECT_EQ(dst.size(), static_cast<size_t>(dd.dst_elems()) * dst_bytes);
    const bool with_bias = kv.at("bias") == "1";
    EXPECT_EQ(exists(dir + "/bias.bin"), with_bias);
    const auto bias = read_array<float>(dir + "/bias.bin");
    if (with_bias) {
        EXPECT_EQ(bias.size(), static_cast<size_t>(oc));
    }
    const bool with_zp = kv.at("zp") != "none";
    EXPECT_EQ(exists(dir + "/zp.bin"), with_zp);
    const auto zp = read_array<int32_t>(dir + "/zp.bin");
    if (with_zp) {
        EXPECT_TRUE(zp.size() == 1 || zp.size() == static_cast<size_t>(ic));
    }
    const auto dst_prev = read_array<uint8_t>(dir + "/dst_prev.bin");
    if (::testing::Test::HasFailure()) return 0;

    std::vector<post_op_spec> ops(static_cast<size_t>(I("post_op_count")));
    for (size_t i = 0; i < ops.size(); ++i) {
        ops[i].kv = words(kv.at("post_op" + std::to_string(i)), &ops[i].kind);
        for (const char *name : {"scale", "shift", "in_lo", "in_hi", "out_lo", "out_hi"}) {
            const std::string f = dir + "/post_op" + std::to_string(i) + "_" + name + ".bin";
            if (exists(f)) ops[i].vec[name] = read_array<float>(f);
        }
    }
    const float dst_zp = static_cast<float>(I("dst_zp"));
    // A fused dw item (docs/semantics.md §5): the post-ops before it end the
    // 1x1, whose result is stored as mid_dt into the intermediate; the
    // depthwise then runs over it with the item's weights, bias and scales.
    size_t dwi = ops.size();
    for (size_t i = 0; i < ops.size(); ++i)
        if (ops[i].kind == "dw_conv") dwi = i;
    const bool fused = dwi < ops.size();
    std::vector<double> mid;
    if (fused) mid.resize(static_cast<size_t>(mb * oh * ow * oc));
    int64_t bad = 0, n = 0;
    for (int64_t b = 0; b < mb; ++b)
        for (int64_t y = 0; y < oh; ++y)
            for (int64_t x = 0; x < ow; ++x)
                for (int64_t c = 0; c < oc; ++c) {
                    const int64_t grp = c / ocg;
                    int64_t acc = 0;
                    for (int64_t i = 0; i < icg; ++i)
                        for (int64_t r = 0; r < kh; ++r)
                            for (int64_t s = 0; s < kw; ++s) {
                                const int64_t iy = y * sh - pt + r * dh, ix = x * sw - pl + s * dw;
                                if (iy < 0 || iy >= ih || ix < 0 || ix >= iw) continue;
                                const int64_t ch = grp * icg + i;
                                const uint8_t raw = src[static_cast<size_t>(((b * ih + iy) * iw + ix) * ic + ch)];
                                const int64_t xv = src_dt == "u8" ? raw : static_cast<int8_t>(raw);
                                const int64_t z = !with_zp ? 0 : zp.size() == 1 ? zp[0] : zp[static_cast<size_t>(ch)];
                                acc += wei[static_cast<size_t>(((c * icg + i) * kh + r) * kw + s)] * (xv - z);
                            }
                    const int64_t off = ((b * oh + y) * ow + x) * oc + c;
                    float v = std::fmaf(static_cast<float>(acc), at(scale, c), with_bias ? bias[c] : 0.f);
                    if (fused) {
                        for (size_t i = 0; i < dwi; ++i) v = apply(ops[i], v, c, 0.f);
                        mid[static_cast<size_t>(off)] = store(ops[dwi].kv.at("mid_dt"), v);
                        continue;
                    }
                    const float prev = dst_prev.empty() ? 0.f : static_cast<float>(load(dst_dt, dst_prev, off));
                    for (const auto &op : ops) v = apply(op, v, c, prev);
                    v += dst_zp;
                    const double want = store(dst_dt, v), got = load(dst_dt, dst, off);
                    ++n;
                    if (want != got && bad++ < 5)
                        ADD_FAILURE() << dir << " (" << kv.at("impl") << "): at mb=" << b << " oh=" << y << " ow=" << x
                                      << " oc=" << c << " got " << got << ", recomputed " << want;
                }
    if (fused) {
        const post_op_spec &item = ops[dwi];
        const std::string pre = dir + "/post_op" + std::to_string(dwi) + "_";
        const auto dwei = read_array<int8_t>(pre + "wei.bin");
        const auto dbias = read_array<float>(pre + "bias.bin");
        auto dscale = read_array<float>(pre + "scale.bin");
        if (dscale.empty()) dscale = {1.f};
        EXPECT_EQ(qconv::conv_desc::parse(item.kv.at("desc")), dd);
        EXPECT_EQ(dwei.size(), static_cast<size_t>(9 * oc));
        EXPECT_EQ(dd.kh, 3);
        EXPECT_EQ(dd.ih, oh);
        for (int64_t b = 0; b < mb; ++b)
            for (int64_t y = 0; y < dd.oh; ++y)
                for (int64_t x = 0; x < dd.ow; ++x)
                    for (int64_t c = 0; c < oc; ++c) {
                        int64_t acc = 0;
                        for (int64_t r = 0; r < 3; ++r)
                            for (int64_t t = 0; t < 3; ++t) {
                                const int64_t iy = y * dd.sh - 1 + r, ix = x * dd.sw - 1 + t;
                                if (iy < 0 || iy >= oh || ix < 0 || ix >= ow) continue;
                                acc +=
                                    dwei[static_cast<size_t>(c * 9 + r * 3 + t)] *
                                    static_cast<int64_t>(mid[static_cast<size_t>(((b * oh + iy) * ow + ix) * oc + c)]);
                            }
                        const int64_t off = ((b * dd.oh + y) * dd.ow + x) * oc + c;
                        float v = std::fmaf(static_cast<float>(acc), at(dscale, c), dbias.empty() ? 0.f : dbias[c]);
                        const float prev = dst_prev.empty() ? 0.f : static_cast<float>(load(dst_dt, dst_prev, off));
                        for (size_t i = dwi + 1; i < ops.size(); ++i) v = apply(ops[i], v, c, prev);
                        v += dst_zp;
                        const double want = store(dst_dt, v), got = load(dst_dt, dst, off);
                        ++n;
                        if (want != got && bad++ < 5)
                            ADD_FAILURE() << dir << " (" << kv.at("impl") << "): depthwise at mb=" << b << " oh=" << y
                                          << " ow=" << x << " oc=" << c << " got " << got << ", recomputed " << want;
                    }
    }
    EXPECT_EQ(bad, 0) << dir;
    return n;
}

// Every dump folder DIR/0000, DIR/0001, ... in order.
std::vector<std::string> dump_folders(const std::string &root) {
    std::vector<std::string> out;
    for (int i = 0;; ++i) {
        char num[16];
        std::snprintf(num, sizeof num, "%04d", i);
        const std::string d = root + "/" + num;
        if (!exists(d + "/problem.txt")) return out;
        out.push_back(d);
    }
}

// Runs the driver on `shapes` (default: three dense and grouped problems).
void dump_and_recompute(const std::vector<std::string> &options, int min_folders,
                        const std::vector<std::string> &shapes = {}) {
    const std::string dir = make_temp_dir();
    ASSERT_FALSE(dir.empty());
    std::vector<std::string> args = {"conv"};
    if (shapes.empty())
        args.insert(args.end(), {"g2mb2ic6ih7iw6oc10oh4ow3kh3kw3sh2sw2ph1pw1n\"grouped_strided\"",
                                 "mb1ic19ih5oc7oh5kh3ph1", "mb1ic8ih9oc5oh5kh3dh1ph0"});
    else args.insert(args.end(), shapes.begin(), shapes.end());
    args.insert(args.end(), {"--mode=C", "--impl=all", "--dump=" + dir});
    args.insert(args.end(), options.begin(), options.end());
    const run_result r = run_driver(args);
    EXPECT_EQ(r.rc, 0) << r.out;
    const auto folders = dump_folders(dir);
    EXPECT_GE(static_cast<int>(folders.size()), min_folders) << r.out;
    int64_t checked = 0;
    for (const auto &f : folders) checked += recompute_and_check(f);
    EXPECT_GT(checked, 0);
    if (!::testing::Test::HasFailure()) std::system(("rm -rf '" + dir + "'").c_str());
}

TEST(Driver, DumpRecomputedChannelZpReluU8) {
    // Three problems, at least the reference on each.
    dump_and_recompute({"--dt=u8:s8:u8", "--zp=channel:random", "--post-ops=relu"}, 3);
}

TEST(Driver, DumpRecomputedTensorZpFakeQuantize) {
    dump_and_recompute({"--dt=u8:s8:s8", "--zp=tensor:7", "--post-ops=fq:per_channel", "--scales=tensor"}, 3);
}

TEST(Driver, DumpRecomputedS8SourceScaleShiftSumF32NoBias) {
    dump_and_recompute({"--dt=s8:s8:f32", "--post-ops=scale_shift;sum:0.5", "--bias=0"}, 3);
}

TEST(Driver, DumpRecomputedBinaryS32) {
    dump_and_recompute({"--dt=u8:s8:s32", "--zp=channel:9", "--post-ops=mul:per_oc;max:per_tensor", "--dst-zp=5"}, 3);
}

// A fused dw item: the intermediate and the depthwise recomputed from the
// dump (every row that takes it: fused, composite, oneDNN peers, reference).
TEST(Driver, DumpRecomputedFusedDepthwise) {
    dump_and_recompute({"--dt=u8:s8:s8", "--zp=channel:random", "--post-ops=relu;dw:2:u8;sum:0.5;prelu"}, 2,
                       {"mb2ic9ih7iw5oc11kh1", "mb1ic4ih2oc6kh1"});
    dump_and_recompute({"--dt=s8:s8:f32", "--post-ops=scale_shift;dw:1:s8:nobias;relu", "--dst-zp=0"}, 2,
                       {"mb1ic13ih6iw3oc7kh1"});
}

TEST(Driver, DumpHasNoZpOrBiasFilesWhenAbsent) {
    const std::string dir = make_temp_dir();
    const run_result r =
        run_driver({"conv", "mb1ic4ih3oc2oh3kh3ph1", "--impl=ref:conv", "--bias=0", "--scales=none", "--dump=" + dir});
    ASSERT_EQ(r.rc, 0) << r.out;
    ASSERT_TRUE(exists(dir + "/0000/problem.txt"));
    EXPECT_FALSE(exists(dir + "/0000/bias.bin"));
    EXPECT_FALSE(exists(dir + "/0000/zp.bin"));
    EXPECT_FALSE(exists(dir + "/0001/problem.txt"));
    const auto scale = read_array<float>(dir + "/0000/scale.bin");
    ASSERT_EQ(scale.size(), 1u);
    EXPECT_EQ(scale[0], 1.f);
    auto kv = read_problem(dir + "/0000/problem.txt");
    EXPECT_EQ(kv["impl"], "ref:conv");
    EXPECT_EQ(kv["dt"], "u8:s8:u8");
    EXPECT_EQ(kv["zp"], "none");
    EXPECT_EQ(kv["data"], "random");
    EXPECT_EQ(kv["desc"], "g1mb1ic4ih3iw3oc2oh3ow3kh3kw3sh1sw1ph1pw1dh0dw0");
    recompute_and_check(dir + "/0000");
    std::system(("rm -rf '" + dir + "'").c_str());
}

TEST(Driver, DumpRecordsTheDataMode) {
    const std::string dir = make_temp_dir();
    const run_result r =
        run_driver({"conv", "mb1ic4ih3oc2oh3kh3ph1", "--impl=ref:conv", "--data=extreme", "--dump=" + dir});
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_EQ(read_problem(dir + "/0000/problem.txt")["data"], "extreme");
    std::system(("rm -rf '" + dir + "'").c_str());
}

// The weight value of element (n, k) of a dumped W ([N][K], 4-bit two per byte).
int weight_at(const std::vector<uint8_t> &w, const std::string &type, int64_t k_total, int64_t n, int64_t k) {
    const int64_t i = n * k_total + k;
    if (type == "u8") return w[i];
    if (type == "s8") return static_cast<int8_t>(w[i]);
    const int nib = (w[i / 2] >> (4 * (i % 2))) & 0xF;
    return type == "u4" ? nib : (nib >= 8 ? nib - 16 : nib);
}

// matmul --dump: every folder recomputed with a double-precision loop from
// its own files, within the documented bound.
TEST(Driver, MatmulDumpRecomputed) {
    for (const char *wei : {"u4", "s8"}) {
        const std::string dir = make_temp_dir();
        const run_result r = run_driver({"matmul", "--impl=all", std::string("--wei=") + wei, "--group=32",
                                         "--zp=per_group", "--bias", "--dump=" + dir, "m3k64n40", "m1k96n17"});
        ASSERT_EQ(r.rc, 0) << r.out << r.err;
        const auto folders = dump_folders(dir);
        EXPECT_GE(folders.size(), 2u) << r.out;
        for (const auto &f : folders) {
            auto kv = read_problem(f + "/problem.txt");
            const int64_t M = std::stoll(kv.at("m")), K = std::stoll(kv.at("k")), N = std::stoll(kv.at("n"));
            const int64_t G = std::stoll(kv.at("group")), NG = K / G;
            EXPECT_EQ(kv.at("wei"), wei);
            const auto x = read_array<float>(f + "/x.bin");
            const auto w = read_array<uint8_t>(f + "/w.bin");
            const auto scale = read_array<float>(f + "/scale.bin");
            const auto zp = read_array<int32_t>(f + "/zp.bin");
            const auto bias = read_array<float>(f + "/bias.bin");
            const auto y = read_array<float>(f + "/y.bin");
            ASSERT_EQ(x.size(), size_t(M * K));
            ASSERT_EQ(scale.size(), size_t(N * NG));
            ASSERT_EQ(zp.size(), size_t(N * NG));
            ASSERT_EQ(y.size(), size_t(M * N));
            EXPECT_EQ(read_array<float>(f + "/y_ref.bin").size(), y.size());
            for (int64_t m = 0; m < M; ++m)
                for (int64_t n = 0; n < N; ++n) {
                    double acc = bias[n], mag = std::fabs(bias[n]);
                    for (int64_t k = 0; k < K; ++k) {
                        const double deq =
                            double(weight_at(w, wei, K, n, k) - zp[n * NG + k / G]) * scale[n * NG + k / G];
                        acc += x[m * K + k] * deq;
                        mag += std::fabs(x[m * K + k] * deq);
                    }
                    EXPECT_NEAR(y[m * N + n], acc, 1e-5 * mag + 1e-30)
                        << f << " (" << kv.at("impl") << ") m=" << m << " n=" << n;
                }
        }
        if (!::testing::Test::HasFailure()) std::system(("rm -rf '" + dir + "'").c_str());
    }
}

TEST(Driver, OutputLinesAreKeyValue) {
    const run_result r = run_driver({"conv", "mb1ic4ih3oc2oh3kh3ph1n\"tiny*2\"", "--impl=ref:conv", "--mode=CP",
                                     "--reps=3", "--budget-ms=1", "--baseline=none"});
    ASSERT_EQ(r.rc, 0) << r.out;
    std::istringstream in(r.out);
    std::string line;
    std::getline(in, line);
    for (const char *k :
         {"op=conv ", "impl=ref:conv ", "desc=g1mb1ic4ih3iw3oc2oh3ow3kh3kw3sh1sw1ph1pw1dh0dw0n\"tiny*2\" ",
          "dt=u8:s8:u8 ", "zp=none ", "post_ops=none ", "status=ok ", "ms=", "gops=", "reps="})
        EXPECT_NE(line.find(k), std::string::npos) << k << " missing in: " << line;
    std::getline(in, line);
    EXPECT_EQ(line.rfind("op=conv impl=ref:conv total=1 problems=1 ok=1 mismatch=0 unimplemented=0 failed=0 ms=", 0),
              0u)
        << line;
}

std::vector<std::string> lines_of(const std::string &text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

bool starts_with(const std::string &s, const std::string &prefix) { return s.rfind(prefix, 0) == 0; }

// --report=table on a dense and a depthwise layer, every implementation: a
// header, one row per layer, the depthwise rows collapsed as unimplemented on
// the dense layer, totals, and the raw key=value log named on the last line.
TEST(Driver, ReportTable) {
    const std::string dir = make_temp_dir();
    ASSERT_FALSE(dir.empty());
    const run_result r = run_driver({"conv", "mb1ic16ih8oc16oh8kh3ph1n\"net:dense*2\"",
                                     "g16mb1ic16ih8oc16oh8kh3ph1n\"net:depthwise\"", "--impl=all", "--mode=CP",
                                     "--reps=2", "--budget-ms=1", "--report=table", "--report-dir=" + dir + "/rep"});
    ASSERT_EQ(r.rc, 0) << r.out << r.err;
    EXPECT_EQ(r.out.find("op=conv impl="), std::string::npos) << "key=value lines on stdout:\n" << r.out;
    const std::vector<std::string> lines = lines_of(r.out);
    ASSERT_GE(lines.size(), 6u) << r.out;

    int header = 0, dense = 0, depthwise = 0, collapsed = 0, total = 0;
    for (const auto &l : lines) {
        if (starts_with(l, "layer ")) {
            ++header;
            for (const char *col : {"qconv row", "ms", "GOPS", "%peak", "oneDNN row", "ratio", "exact"})
                EXPECT_NE(l.find(col), std::string::npos) << col << " missing in the header: " << l;
        }
        const bool row = starts_with(l, "dense*2 ") || starts_with(l, "depthwise ");
        if (row) {
            EXPECT_NE(l.find("✓"), std::string::npos) << l;
        }
        dense += starts_with(l, "dense*2 ");
        depthwise += starts_with(l, "depthwise ");
        if (starts_with(l, "jit:conv_dw_x8s8:avx2: unimplemented on ")) {
            ++collapsed;
            EXPECT_NE(l.find(" of 2 problems (first reason: "), std::string::npos) << l;
            EXPECT_LE(l.size(), 120u) << l;
        }
        if (starts_with(l, "total (layers weighted by *N): qconv ")) ++total;
    }
    EXPECT_EQ(header, 1) << r.out;
    EXPECT_EQ(dense, 1) << r.out;
    EXPECT_EQ(depthwise, 1) << r.out;
    EXPECT_EQ(collapsed, 1) << r.out;
    EXPECT_EQ(total, 1) << r.out;

    const std::string last = lines.back(), prefix = "raw log: ";
    ASSERT_TRUE(starts_with(last, prefix)) << last;
    const std::string log = last.substr(prefix.size(), last.find(' ', prefix.size()) - prefix.size());
    EXPECT_EQ(log, dir + "/rep/conv.log");
    const std::vector<std::string> logged = lines_of([&] {
        std::ifstream f(log);
        std::ostringstream ss;
        ss << f.rdbuf();
        return ss.str();
    }());
    ASSERT_FALSE(logged.empty()) << log;
    int runs = 0, totals = 0;
    for (const auto &l : logged) {
        EXPECT_TRUE(starts_with(l, "op=conv impl=")) << l;
        if (l.find(" total=1 ") != std::string::npos) ++totals;
        else if (l.find("n\"net:dense*2\" ") != std::string::npos) ++runs;
    }
    EXPECT_GT(runs, 1);
    EXPECT_GT(totals, 1);
    if (!::testing::Test::HasFailure()) std::system(("rm -rf '" + dir + "'").c_str());
}

TEST(Driver, ExitStatuses) {
    EXPECT_EQ(run_driver({"conv", "--impl=list"}).rc, 0);
    EXPECT_NE(run_driver({"conv", "--impl=list"}).out.find("impl=ref:conv"), std::string::npos);
    EXPECT_EQ(run_driver({"conv", "mb1ic4ih4oc4oh4kh1ph0", "--impl=ref:conv"}).rc, 0);
    EXPECT_EQ(run_driver({"conv", "mb1ic4ih4oc4oh4kh1ph0", "--no-such-option"}).rc, 2);
    EXPECT_EQ(run_driver({"conv", "mb1ic4ih4oc4oh5kh1ph0"}).rc, 0);    // a pad-only last row is valid
    EXPECT_EQ(run_driver({"conv", "mb1ic8ih8oc4oh3kh1sh2ph0"}).rc, 2); // inconsistent oh (pb -3)
    EXPECT_EQ(run_driver({"conv", "mb1ic4ih4oc4oh4kh1ph0", "--zp=channel"}).rc, 2);
    EXPECT_EQ(run_driver({"conv", "mb1ic4ih4oc4oh4kh1ph0", "--threads=-1"}).rc, 2);
    EXPECT_EQ(run_driver({"conv", "mb1ic4ih4oc4oh4kh1ph0", "--mb=x"}).rc, 2);
    EXPECT_EQ(run_driver({"conv", "mb1ic4ih4oc4oh4kh1ph0", "--report=html"}).rc, 2);
    EXPECT_EQ(run_driver({}).rc, 2);
}

} // namespace
