// Exactness of the depthwise JIT kernels (jit:conv_dw_x8s8:*) on the shapes
// that steer the avx512_core_vnni row kernel's code generation, against the
// reference, through the dispatcher with the implementation forced by name.
//
// The row kernel (VBMI) packs three kernel rows per vpdpbusd and builds the
// source registers with permutes; its generated code differs per channel
// block width (16/32/64 channels and the tail block), per row class (kernel
// rows in the padding, the kernel row that reads the image's last row with
// masked loads), per pixel-block run (edge columns) and per kernel-row chunk
// (KH > 3). Each shape below hits some of these; every one runs with both
// zero-point kinds, u8 and s8 sources, every dst type and post-op chains
// (fused epilogue, full-tensor operands, sum, and the unfused C++ pipeline
// after a transcendental eltwise). The conv_ukernel path (its own row,
// jit:conv_dw_x8s8:avx512_core_vnni) runs the same cases on a sample.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "dispatch/host_platform.h"
#include "qconv/qconv.h"
#include "rows/row.h"
#include "tests/support/conv_tester.h"

using qconv::dtype;
using qconv::test::ConvTester;
using qconv::test::epilogue_chains;

namespace {

using qconv::impl::cpu_feature;

// The row kernel's row (AVX-512 VNNI + VBMI) and the micro-kernel row on VNNI.
const char *const kRow = "jit:conv_dw_x8s8_rows:avx512_core_vnni";
const char *const kRowUkernel = "jit:conv_dw_x8s8:avx512_core_vnni";

bool have_vnni() {
    const auto pl = qconv::impl::host_platform();
    return pl.has(cpu_feature::avx512_core_vnni) && pl.has(cpu_feature::avx512_vbmi);
}
bool have_vnni_only() { return qconv::impl::host_platform().has(cpu_feature::avx512_core_vnni); }

// The AVX-VNNI row (ymm, conv_ukernel in depthwise mode with vpdpwssd).
const char *const kRowAvxVnni = "jit:conv_dw_x8s8:avx2_vnni";
bool have_avx_vnni() { return qconv::impl::host_platform().has(cpu_feature::avx2_vnni); }
std::string no_avx_vnni() {
    return "no AVX-VNNI on this CPU (or QCONV_MAX_CPU_ISA below avx2_vnni): " + qconv::impl::host_platform().str();
}

const std::vector<std::string> &row_shapes() {
    static const std::vector<std::string> s = {
        "g16mb1ic16ih5iw9oc16oh5ow9kh3kw3ph1pw1",             // one 16-channel block
        "g48mb2ic48ih6iw7oc48oh6ow7kh3ph1",                   // 32-channel blocks + a 16-channel tail, mb 2
        "g70mb1ic70ih4oc70oh4kh3ph1",                         // 64-channel block + a 6-lane tail
        "g33mb1ic33ih30iw30oc33oh15ow15kh3sh2ph1",            // stride 2, 1-lane tail
        "g24mb1ic24ih9oc24oh9kh5ph2",                         // two kernel-row chunks (3 + 2)
        "g20mb1ic20ih14iw10oc20kh7kw3dh1ph3pw1",              // 3 chunks, dilation
        "g16mb1ic16ih3oc16kh3ph2",                            // padding wider than the image
        "g40mb1ic40ih1iw5oc40oh1ow5kh3ph1",                   // one image row: middle kernel row masked
        "g16mb1ic16ih3iw60oc16oh3ow60kh3ph1",                 // edge / middle / edge pixel-block runs
        "g64mb1ic64ih8iw8oc64kh3sh2ph0",                      // no padding, stride 2
        "g17mb1ic17ih7iw9oc17oh4ow3kh3kw5sh2sw3dh1dw1ph2pw1", // dilation, strides, 5-wide kernel rows
        "g24mb1ic24ih2iw6oc24kh3ph1",                         // one row pair reading two image rows
        "g50mb2ic50ih7iw4oc50kh3ph1",                         // row pairs + an odd last row, tail, mb 2
        "g32mb1ic32ih6iw5oc32kh3kw5ph1pw2",                   // row pairs with 5-wide kernel rows
    };
    return s;
}

// The k-th chain of epilogue_chains(), cycling.
const std::string &chain(size_t k) { return epilogue_chains()[k % epilogue_chains().size()]; }

// Runs `row` on extreme data (u8 255 / s8 −128 / 127) into an s32 destination
// with no scales and no bias, so every int32 sum is compared bit for bit.
bool run_extreme_sums(const char *row, const std::string &desc, dtype src, const char *zp, uint32_t seed) {
    ConvTester t;
    t.desc(desc).src(src).dst(dtype::s32).data("extreme").scales("none").bias(false).zp(zp).seed(seed);
    return t.run(row);
}

} // namespace

TEST(JitConvDw, RowKernelShapesZpChainsDst) {
    if (!have_vnni()) GTEST_SKIP() << "no AVX-512 VNNI with VBMI";
    const std::vector<dtype> dsts = {dtype::u8, dtype::s8, dtype::s32, dtype::f32};
    int i = 0;
    for (const std::string &desc : row_shapes())
        for (const char *zp : {"none", "tensor:random", "channel:random"})
            for (dtype src : {dtype::u8, dtype::s8}) {
                // Per-channel zero points need a u8 source; s8 takes per-tensor ones (padding byte zp + 128).
                if (src == dtype::s8 && std::string(zp) == "channel:random") continue;
                ConvTester t;
                t.desc(desc).src(src).zp(zp).post_ops(chain(i)).dst(dsts[i % dsts.size()]);
                t.seed(9000 + i).threads(1 + i % 2);
                ++i;
                EXPECT_TRUE(t.run(kRow)) << desc;
                EXPECT_EQ(t.impl_name(), kRow);
                if (HasFailure()) FAIL() << desc << " zp=" << zp << " src=" << qconv::to_string(src);
            }
}

// Every chain on one padded shape with an odd channel count, u8 and f32 dst.
TEST(JitConvDw, RowKernelEveryChain) {
    if (!have_vnni()) GTEST_SKIP() << "no AVX-512 VNNI with VBMI";
    int i = 0;
    for (const std::string &ops : epilogue_chains())
        for (dtype dst : {dtype::u8, dtype::f32}) {
            ConvTester t;
            t.desc("g35mb1ic35ih6iw11oc35kh3ph1").post_ops(ops).dst(dst).seed(9500 + i++);
            EXPECT_TRUE(t.run(kRow)) << ops;
            if (HasFailure()) FAIL() << ops << " dst=" << qconv::to_string(dst);
        }
}

// u8 255 / s8 −128 / 127 and zero points 0 / 255 (u8), −128 / 127 (s8): int32 sums bit-exact.
TEST(JitConvDw, RowKernelExtremeData) {
    if (!have_vnni()) GTEST_SKIP() << "no AVX-512 VNNI with VBMI";
    int i = 0;
    for (const std::string &desc : {row_shapes()[2], row_shapes()[4], row_shapes()[5], row_shapes()[7]})
        for (dtype src : {dtype::u8, dtype::s8})
            for (int zk = 0; zk < 3; ++zk) {
                const char *zp = zk == 0            ? "none"
                                 : src == dtype::u8 ? (zk == 1 ? "tensor:255" : "tensor:0")
                                                    : (zk == 1 ? "tensor:-128" : "tensor:127");
                EXPECT_TRUE(run_extreme_sums(kRow, desc, src, zp, 9700 + i++)) << desc;
                if (HasFailure()) FAIL() << desc << " src=" << qconv::to_string(src) << " zp=" << zp;
            }
}

// 1, 2 and 3 threads write the same bytes (work split over rows and channel-block groups).
TEST(JitConvDw, RowKernelThreadCountDoesNotChangeBytes) {
    if (!have_vnni()) GTEST_SKIP() << "no AVX-512 VNNI with VBMI";
    for (const char *desc : {"g200mb1ic200ih3iw5oc200kh3ph1", "g96mb2ic96ih9oc96kh3sh2ph1"}) {
        std::vector<uint8_t> first;
        for (int threads : {1, 2, 3}) {
            ConvTester t;
            t.desc(desc).post_ops("relu").threads(threads).seed(9800);
            EXPECT_TRUE(t.run(kRow)) << desc;
            if (threads == 1) first = t.result();
            else EXPECT_EQ(t.result(), first) << desc << " threads=" << threads;
        }
    }
}

// The conv_ukernel path on VNNI (CPUs without VBMI) on a sample of the same cases.
TEST(JitConvDw, UkernelPathOnVnni) {
    if (!have_vnni_only()) GTEST_SKIP() << "no AVX-512 VNNI";
    int i = 0;
    for (const std::string &desc : row_shapes())
        for (const char *zp : {"none", "channel:random"}) {
            ConvTester t;
            // Seeds differ from the other tests: the kernel cache holds no row kernel for them.
            t.desc(desc).zp(zp).post_ops(chain(i * 5)).seed(9900 + i);
            ++i;
            EXPECT_TRUE(t.run(kRowUkernel)) << desc;
            if (HasFailure()) break;
        }
}

// The byte-layout variant (chosen for strided rows) forced on every shape,
// and forced off on the strided ones: u8 / s8 dst, chains without sum or
// full-tensor operands (the variant's domain), both zero-point kinds.
TEST(JitConvDw, NativeVariantForcedOnAndOff) {
    if (!have_vnni()) GTEST_SKIP() << "no AVX-512 VNNI with VBMI";
    const std::vector<std::string> ops = {"",         "relu",  "fq:per_channel",        "scale_shift;fq:per_channel",
                                          "clip:0:6", "prelu", "add:per_oc;linear:2:1", "hardswish",
                                          "relu:0.5", "sqrt",  "linear:1073741824:0",   "linear:-4294967296:0;abs"};
    int i = 0;
    for (const char *mode : {"1", "0"}) {
        setenv("QCONV_JIT_CONV_DW_NATIVE", mode, 1);
        for (const std::string &desc : row_shapes())
            for (const char *zp : {"none", "channel:random", "tensor:random"})
                for (dtype src : {dtype::u8, dtype::s8}) {
                    // Per-channel zero points need a u8 source; tensor:random runs with s8 only.
                    if (src == dtype::s8 ? std::string(zp) == "channel:random" : std::string(zp) == "tensor:random")
                        continue;
                    ConvTester t;
                    // Seeds differ per pass: no cached kernel of the other mode is reused.
                    t.desc(desc).src(src).zp(zp).post_ops(ops[i % ops.size()]).dst(i % 3 ? dtype::u8 : dtype::s8);
                    t.seed(10000 + i).threads(1 + i % 2);
                    ++i;
                    EXPECT_TRUE(t.run(kRow)) << desc;
                    if (HasFailure()) break;
                }
        if (HasFailure()) break;
    }
    unsetenv("QCONV_JIT_CONV_DW_NATIVE");
    // Extreme data through the native variant: s32 is not its domain, so u8
    // dst with a unit scale and no bias keeps small sums exact.
    setenv("QCONV_JIT_CONV_DW_NATIVE", "1", 1);
    for (const std::string &desc : {row_shapes()[2], row_shapes()[3], row_shapes()[5]}) {
        ConvTester t;
        t.desc(desc).data("extreme").scales("none").bias(false).zp("tensor:255").seed(10500 + i++);
        EXPECT_TRUE(t.run(kRow)) << desc;
    }
    unsetenv("QCONV_JIT_CONV_DW_NATIVE");
}

// Row pairs (3-row kernels at stride 1 compute two output rows per build)
// switched off: the single-row kernels on the same shapes.
TEST(JitConvDw, RowPairsOff) {
    if (!have_vnni()) GTEST_SKIP() << "no AVX-512 VNNI with VBMI";
    setenv("QCONV_JIT_CONV_DW_PAIR", "0", 1);
    int i = 0;
    for (const std::string &desc : row_shapes())
        for (const char *zp : {"none", "channel:random"}) {
            ConvTester t;
            t.desc(desc).zp(zp).post_ops(chain(i * 7)).dst(i % 2 ? dtype::u8 : dtype::f32);
            t.seed(11000 + i);
            ++i;
            EXPECT_TRUE(t.run(kRow)) << desc;
            if (HasFailure()) break;
        }
    unsetenv("QCONV_JIT_CONV_DW_PAIR");
}

// Strided rows from a copied source (a zero point, or an s8 source): each
// output row's source rows are copied into a per-thread buffer just before the
// row is computed (source=row_copy), or the whole source first
// (QCONV_JIT_CONV_DW_ROW_COPY=0), or row by row with the pipeline unfused
// (QCONV_JIT_CONV_FUSED=0: one work item per channel block, each copying its
// own channels). All against the reference on strided shapes (mb 1 and 2,
// tails, dilation, 5-wide rows, padding wider than the stride, 256 channels
// over 3 rows: channel groups split a row over the threads), both zero-point
// kinds and s8 sources, every dst type, extreme sums, 1-3 threads.
TEST(JitConvDw, StridedRowCopyOnAndOff) {
    if (!have_vnni()) GTEST_SKIP() << "no AVX-512 VNNI with VBMI";
    const std::vector<std::string> shapes = {row_shapes()[3],
                                             row_shapes()[10],
                                             "g70mb2ic70ih11iw13oc70oh5ow6kh3kw3sh2sw2ph0pw0",
                                             "g19mb1ic19ih9iw9oc19oh3ow3kh5kw5sh3sw3ph2pw2dh0dw0",
                                             "g64mb1ic64ih2iw2oc64oh1ow1kh3kw3sh2sw2ph1pw1",
                                             "g250mb1ic250ih5iw5oc250oh3ow3kh3kw3sh2sw2ph1pw1"};
    const std::vector<dtype> dsts = {dtype::u8, dtype::s8, dtype::s32, dtype::f32};
    struct pass {
        const char *name, *env, *value;
    };
    const pass passes[] = {{"row_copy", nullptr, nullptr},
                           {"whole_copy", "QCONV_JIT_CONV_DW_ROW_COPY", "0"},
                           {"unfused", "QCONV_JIT_CONV_FUSED", "0"}};
    int i = 0;
    for (const pass &ps : passes) {
        if (ps.env) setenv(ps.env, ps.value, 1);
        for (const std::string &desc : shapes)
            for (const char *zp : {"tensor:random", "channel:random", "none"})
                for (dtype src : {dtype::u8, dtype::s8}) {
                    if (src == dtype::s8 ? std::string(zp) == "channel:random" : std::string(zp) == "none") continue;
                    ConvTester t;
                    // Seeds differ per pass: no cached kernel of another pass is reused.
                    t.desc(desc).src(src).zp(zp).post_ops(chain(i * 3)).dst(dsts[i % dsts.size()]);
                    if (i % 4 == 3) t.data("extreme").scales("none").bias(false).post_ops("").dst(dtype::s32);
                    t.seed(14000 + i).threads(1 + i % 3);
                    ++i;
                    EXPECT_TRUE(t.run(kRow)) << desc << " zp=" << zp << " pass=" << ps.name;
                    EXPECT_EQ(t.impl_name(), kRow);
                    if (HasFailure()) break;
                }
        if (ps.env) unsetenv(ps.env);
        if (HasFailure()) break;
    }
}

// fuzz_diff: the row kernel on a 3x3 depthwise conv with stride 1 along H and
// a stride of 2 or 3 along W, s32/f32 destination (u8/s8 take the byte-layout
// variant): row pairs were planned for any W stride and summed the wrong
// source columns (`qconv-driver conv g8mb1ic8ih9iw9oc8oh10ow5kh3kw3sh1sw2ph1pw1
// --dt=u8:s8:s32 --impl=jit:conv_dw_x8s8:avx512_core_vnni` → mismatch). Fixed: row
// pairs only for sw == 1; the other W strides run single rows.
TEST(JitConvDw, RowKernelStrideAlongWidthOnly) {
    if (!have_vnni()) GTEST_SKIP() << "no AVX-512 VNNI with VBMI";
    int i = 0;
    for (const char *desc :
         {"g8mb2ic8ih9iw4oc8oh10ow3kh3kw3sh1sw3ph1pw4dh0dw1", "g8mb1ic8ih9iw9oc8oh10ow5kh3kw3sh1sw2ph1pw1",
          "g8mb1ic8ih9iw7oc8oh10ow4kh3kw2sh1sw2ph1pw1", "g24mb1ic24ih9iw12oc24oh10ow4kh3kw3sh1sw3ph1pw1"})
        for (dtype dst : {dtype::s32, dtype::f32, dtype::u8})
            for (const char *zp : {"none", "tensor:8", "channel:random"}) {
                ConvTester t;
                t.desc(desc)
                    .zp(zp)
                    .post_ops(i % 2 ? "min:per_oc;round" : "relu")
                    .dst(dst)
                    .dst_zp(dst == dtype::u8 ? 4 : -4)
                    .seed(12000 + i);
                ++i;
                EXPECT_TRUE(t.run(kRow)) << desc;
                if (HasFailure()) return;
            }
}

// An s8 source with a per-tensor zero point on every depthwise path: padded
// taps hold zp + 128 (the source is copied, shifted by +128) and comp =
// −Σ w·(zp + 128). The row kernel (default, byte-layout variant forced,
// row pairs off), the conv_ukernel path on VNNI, and the avx512_core / avx2
// rows; QCONV_JIT_CONV_DW_DIRECT=1 (in-place reading stays u8-only) and 0.
// Zero points −128 (padding byte 0, comp 0), 127, −1 and random; extreme
// data on a sample; every dst type; a FakeQuantize chain.
TEST(JitConvDw, S8SourceTensorZeroPoint) {
    if (qconv::max_cpu_isa() < qconv::isa::avx2) GTEST_SKIP() << "no AVX2";
    struct pass {
        const char *name, *env, *value;
    };
    const pass passes[] = {{"row", nullptr, nullptr},
                           {"native", "QCONV_JIT_CONV_DW_NATIVE", "1"},
                           {"no-pairs", "QCONV_JIT_CONV_DW_PAIR", "0"},
                           {"direct-off", "QCONV_JIT_CONV_DW_DIRECT", "0"}};
    const std::vector<std::string> rows = {kRow, kRowUkernel, "jit:conv_dw_x8s8:avx512_core", kRowAvxVnni,
                                           "jit:conv_dw_x8s8:avx2"};
    const std::vector<std::string> zps = {"tensor:-128", "tensor:127", "tensor:-1", "tensor:random"};
    const std::vector<dtype> dsts = {dtype::u8, dtype::s8, dtype::s32, dtype::f32};
    const std::vector<std::string> ops = {"", "relu", "fq:per_channel", "scale_shift;fq:per_channel", "clip:0:6"};
    int i = 0, ran = 0;
    setenv("QCONV_JIT_CONV_DW_DIRECT", "1", 1);
    for (const pass &ps : passes) {
        if (ps.env) setenv(ps.env, ps.value, 1);
        const bool native = std::string(ps.name) == "native";
        for (const std::string &row : rows) {
            const bool vnni = row == kRow;
            bool runs = false;
            for (const auto &e : qconv::impl::conv_list())
                if (e.name == row) runs = qconv::impl::host_platform().has_all(e.needs);
            if (!runs) continue;
            // The env switches steer the VNNI row's kernels; the other rows run once.
            if (!vnni && std::string(ps.name) != "row" && std::string(ps.name) != "direct-off") continue;
            for (size_t k = 0; k < row_shapes().size(); ++k) {
                const std::string &desc = row_shapes()[k];
                const std::string &zp = zps[i % zps.size()];
                ConvTester t;
                // Seeds differ per pass and row: no cached kernel of another pass is reused.
                t.desc(desc).src(dtype::s8).zp(zp).post_ops(ops[i % ops.size()]);
                // The byte-layout variant's domain: u8 / s8 dst, no sum / full operands.
                t.dst(native ? (i % 2 ? dtype::u8 : dtype::s8) : dsts[i % dsts.size()]);
                if (i % 5 == 4 && !native) t.data("extreme").scales("none").bias(false).post_ops("").dst(dtype::s32);
                t.seed(13000 + i).threads(1 + i % 2);
                ++i;
                EXPECT_TRUE(t.run(row)) << desc;
                EXPECT_EQ(t.impl_name(), row);
                ++ran;
                if (HasFailure()) break;
            }
            if (HasFailure()) break;
        }
        if (ps.env) unsetenv(ps.env);
        if (HasFailure()) break;
    }
    unsetenv("QCONV_JIT_CONV_DW_DIRECT");
    EXPECT_GT(ran, 0);
}

// ---- jit:conv_dw_x8s8:avx2_vnni: the same shapes, zero points, sources,
// chains and dst types as the row kernel (ymm: 8-channel vectors, tails of
// 1..7 lanes, always a padded copy), extreme data and thread counts.
TEST(JitConvDw, AvxVnniShapesZpChainsDst) {
    if (!have_avx_vnni()) GTEST_SKIP() << no_avx_vnni();
    const std::vector<dtype> dsts = {dtype::u8, dtype::s8, dtype::s32, dtype::f32};
    int i = 0;
    for (const std::string &desc : row_shapes())
        for (const char *zp : {"none", "tensor:random", "channel:random"})
            for (dtype src : {dtype::u8, dtype::s8}) {
                if (src == dtype::s8 && std::string(zp) == "channel:random") continue; // per-channel zp: u8 only
                ConvTester t;
                t.desc(desc).src(src).zp(zp).post_ops(chain(i * 3)).dst(dsts[i % dsts.size()]);
                t.seed(13000 + i).threads(1 + i % 2);
                ++i;
                EXPECT_TRUE(t.run(kRowAvxVnni)) << desc;
                EXPECT_EQ(t.impl_name(), kRowAvxVnni);
                if (HasFailure()) FAIL() << desc << " zp=" << zp << " src=" << qconv::to_string(src);
            }
}

TEST(JitConvDw, AvxVnniExtremeData) {
    if (!have_avx_vnni()) GTEST_SKIP() << no_avx_vnni();
    int i = 0;
    for (const std::string &desc : {row_shapes()[2], row_shapes()[4], row_shapes()[5], row_shapes()[7],
                                    std::string("g19mb1ic19ih13iw13oc19kh11kw11ph5pw5")})
        for (dtype src : {dtype::u8, dtype::s8})
            for (const char *zp : {"none", "tensor:255", "tensor:0", "channel:random"}) {
                if (src == dtype::s8 && std::string(zp) != "none") continue;
                EXPECT_TRUE(run_extreme_sums(kRowAvxVnni, desc, src, zp, 13500 + i++)) << desc;
                if (HasFailure()) FAIL() << desc << " src=" << qconv::to_string(src) << " zp=" << zp;
            }
}

TEST(JitConvDw, AvxVnniThreadCountDoesNotChangeBytes) {
    if (!have_avx_vnni()) GTEST_SKIP() << no_avx_vnni();
    for (const char *desc : {"g200mb1ic200ih3iw5oc200kh3ph1", "g96mb2ic96ih9oc96kh3sh2ph1"}) {
        std::vector<uint8_t> first;
        for (int threads : {1, 2, 3}) {
            ConvTester t;
            t.desc(desc).zp("channel:random").post_ops("fq:per_channel;sum").threads(threads).seed(13800);
            EXPECT_TRUE(t.run(kRowAvxVnni)) << desc;
            if (threads == 1) first = t.result();
            else EXPECT_EQ(t.result(), first) << desc << " threads=" << threads;
        }
    }
}
