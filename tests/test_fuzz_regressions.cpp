// Regression tests for what the fuzzers found (tests/fuzz/). Each test is the
// minimal reproducer of one finding, named after it; a finding still open in
// code owned elsewhere is DISABLED_ here (and skipped by fuzz_diff's
// known_finding()) until its fix lands, then enabled. All are fixed today.
#include <gtest/gtest.h>

#include <string>

#include "dispatch/attr_builder.h"
#include "dispatch/host_platform.h"
#include "qconv/qconv.h"
#include "rows/row.h"
#include "tests/support/conv_tester.h"

using namespace qconv;

// fuzz_diff: an s8 source with a per-tensor zero point. Below AVX-512 VNNI
// (and whenever ref:conv is forced) the attr builder gives attr[0] with the
// legacy per-channel mechanism; ref:conv's supports() accepts it, then
// ref::conv throws "src_zp: the per-channel (legacy) zero point needs a u8
// source" at execute(). Same with `qconv-driver conv mb1ic4ih4oc4kh1
// --dt=s8:s8:s32 --zp=tensor:3 --isa=avx2` (status=failed). Fixed: the
// reference pads an s8 source with the zp too.
TEST(FuzzRegression, S8SourceWithLegacyZeroPoint) {
    test::ConvTester t;
    t.desc("mb1ic4ih4oc4kh1").src(dtype::s8).dst(dtype::s32).zp("tensor:3");
    EXPECT_NO_THROW(t.run("ref:conv"));
}

// fuzz_diff: two sum post-ops with different scale or zero point. The oneDNN
// rows (onednn:brgconv_1x1:avx512_core_vnni, onednn:any) accept the chain and
// differ from the reference in most elements, e.g. `qconv-driver conv
// mb2ic16ih4oc16kh1 --post-ops="sum:1:3;sum" --impl=onednn:any` → mismatch.
// Fixed: the oneDNN rows refuse a second sum (each row either refuses, i.e.
// the case is skipped, or must match).
TEST(FuzzRegression, OnednnTwoSumsWithDifferentParameters) {
    for (const auto &row : impl::conv_list()) {
        if (row.family != qconv::impl::row_family::onednn) continue;
        for (const char *zp : {"none", "tensor:3"}) {
            SCOPED_TRACE(row.name + " zp=" + zp);
            test::ConvTester()
                .desc("mb2ic16ih4oc16kh1")
                .zp(zp)
                .post_ops("sum:1:3;sum:0.5:-1")
                .enforce_brgconv()
                .run(row.name);
        }
    }
}

// fuzz_diff: two per-tensor PReLUs (slopes −2, −1) with an s8 source, f32
// destination and a per-tensor zero point. The oneDNN rows' supports() throws
// dnnl::error "could not append an elementwise post-op" (from
// kernels/onednn/conv_post_ops.h, chain_builder::eltwise) instead of answering, so
// creating the primitive lets a non-qconv exception escape. Fixed: the
// wrapper's supports() turns a refusal by oneDNN into a reason.
TEST(FuzzRegression, OnednnSupportsThrowsDnnlError) {
    const post_ops ops = {post_op::prelu({-2.f}), post_op::prelu({-1.f})};
    for (const auto &row : impl::conv_list()) {
        if (row.family != qconv::impl::row_family::onednn) continue;
        SCOPED_TRACE(row.name);
        EXPECT_NO_THROW(test::ConvTester()
                            .desc("g2mb1ic42ih4iw5oc12oh2ow2kh3kw2sh2sw3ph2pw1")
                            .src(dtype::s8)
                            .dst(dtype::f32)
                            .zp("tensor:-2")
                            .dst_zp(-3)
                            .post_ops(ops)
                            .enforce_brgconv()
                            .run(row.name));
    }
}

// fuzz_diff: the AVX2 depthwise JIT kernel on a depthwise conv with large
// padding and dilation differs from the reference, with or without zero
// point, on random and extreme data: `qconv-driver conv
// g33mb2ic33ih4iw4oc33oh4ow7kh3kw2sh2sw1ph5pw3dh1dw1 --impl=jit:conv_dw_x8s8:avx2`
// → status=mismatch errors=59 (first at oh=1 ow=3). Fixed: the two OC-block
// kinds have different pixel-block widths, and the entry-point table was
// indexed with one kind's blocks-per-row for both.
TEST(FuzzRegression, JitDepthwiseAvx2WidePadding) {
    test::ConvTester().desc("g33mb2ic33ih4iw4oc33oh4ow7kh3kw2sh2sw1ph5pw3dh1dw1").run("jit:conv_dw_x8s8:avx2");
    test::ConvTester()
        .desc("g33mb2ic33ih4iw4oc33oh4ow7kh3kw2sh2sw1ph5pw3dh1dw1")
        .zp("channel:random")
        .data("extreme")
        .run("jit:conv_dw_x8s8:avx2");
}

// fuzz_diff (fuzz_diff-onednn_any-stock-zp-tail-channel): onednn:any with a
// per-tensor source zero point on a conv whose windows cover padding, with an
// OC tail (22 = 16 + 6). On an AMX machine oneDNN 2.6.3 picks
// jit:avx512_core_amx_int8, which gets the last channel wrong (oc 21: 47
// instead of 30). Fixed: onednn:any passes over that implementation when a
// zero point is present (kernels/onednn/known_wrong.cpp); on other
// machines oneDNN's first choice runs and must match as well.
TEST(FuzzRegression, OnednnAnyStockZeroPointTailChannel) {
    for (const char *data : {"random", "extreme"})
        for (uint32_t seed : {1u, 2u, 3u}) {
            SCOPED_TRACE(std::string(data) + " seed " + std::to_string(seed));
            test::ConvTester()
                .desc("mb1ic14ih5iw7oc22oh6ow3kh3kw1sh1sw3ph3pw0dh2dw1")
                .dst(dtype::s8)
                .zp("tensor:95")
                .dst_zp(-4)
                .data(data)
                .seed(seed)
                .run("onednn:any");
        }
}

// fuzz_diff (fuzz_diff-onednn_any-grouped-per_oc-binary): onednn:any on a
// grouped conv with a per-OC binary post-op. oneDNN 2.6.3 picks its
// gemm-based convolution (x64:gemm_s8s8s32:jit), which reads the operand of
// the second group at the first group's channels: `qconv-driver conv
// g2mb1ic4ih5iw7oc54oh3ow7kh2kw1sh2sw1ph2pw0dh1dw0 --dt=s8:s8:f32
// --post-ops="min:per_oc;relu;relu" --impl=onednn:any` → 66 errors. Fixed:
// onednn:any passes over gemm implementations for grouped convs with
// per-channel or full-tensor operands (kernels/onednn/known_wrong.cpp).
TEST(FuzzRegression, OnednnAnyGroupedPerChannelOperands) {
    for (const char *ops : {"min:per_oc;relu;relu", "add:per_oc", "mul:full", "scale_shift:per_oc"}) {
        SCOPED_TRACE(ops);
        test::ConvTester()
            .desc("g2mb1ic4ih5iw7oc54oh3ow7kh2kw1sh2sw1ph2pw0dh1dw0")
            .src(dtype::s8)
            .dst(dtype::f32)
            .post_ops(ops)
            .dst_zp(-4)
            .run("onednn:any");
    }
}

// fuzz_diff with the peer on (fuzz_diff-onednn_any-round-parameters-before-fq):
// a round eltwise with (ignored) parameters, then a FakeQuantize converted
// for oneDNN: its round was refused as "round twice with different
// parameters", the refusal was dropped and the FakeQuantize ran without its
// rounding (−96.75 for −97). Fixed: parameterless algorithms reach oneDNN as
// (0, 0), and a refused step fails the whole chain.
TEST(FuzzRegression, OnednnRoundWithParametersBeforeFakeQuantize) {
    for (const char *desc :
         {"mb1ic16ih8oc16kh1", "g16mb1ic16ih8oc16kh3ph1", "g115mb1ic115ih15iw8oc115oh4ow2kh2kw2sh4sw3ph1pw0dh2dw1"})
        for (const char *ops :
             {"round:4:2;fq:per_channel", "round:4:2;add:per_oc;fq:per_channel", "abs:1;fq:per_tensor;abs"}) {
            SCOPED_TRACE(std::string(desc) + " " + ops);
            test::ConvTester().desc(desc).src(dtype::s8).dst(dtype::f32).post_ops(ops).run("onednn:any");
        }
}

// fuzz_diff (fuzz_diff-onednn_any-nan-to-u8): sqrt of a negative value is
// NaN; qconv stores NaN to an integer destination as 0 (docs/semantics.md),
// oneDNN as whatever its conversion gives (13 here). Fixed: the oneDNN rows
// refuse sqrt before an integer destination, so a JIT row or ref:conv runs it.
TEST(FuzzRegression, OnednnSqrtBeforeIntegerDestination) {
    conv_problem p;
    p.desc = conv_desc::parse("mb1ic16ih4oc16kh1");
    p.ops = parse_post_ops("linear:-1:0;sqrt", p.desc.oc);
    conv_hints hints;
    hints.enforce_brgconv = true;
    const impl::platform plat = impl::host_platform();
    int refused = 0;
    for (const attr_set &a : impl::build_attrs(p, plat, hints))
        for (const auto &row : impl::conv_list()) {
            if (row.family != qconv::impl::row_family::onednn) continue;
            std::string why;
            EXPECT_FALSE(row.supports(p, a, plat, &why)) << row.name;
            if (why.find("sqrt before an integer destination") != std::string::npos) ++refused;
        }
    EXPECT_GT(refused, 0); // at least onednn:any answers with the reason
    p.dst_dt = dtype::f32; // NaN is a value in f32: the oneDNN rows take it
    bool taken = false;
    for (const attr_set &a : impl::build_attrs(p, plat, hints))
        for (const auto &row : impl::conv_list())
            if (row.name == "onednn:any") taken = taken || row.supports(p, a, plat, nullptr);
    EXPECT_TRUE(taken);
    // auto runs it on a row that stores NaN as 0, like the reference.
    test::ConvTester().desc("mb1ic16ih4oc16kh1").dst(dtype::u8).post_ops("linear:-1:0;sqrt").run("auto");
}

// fuzz_diff (fuzz_diff-onednn_any-create-fails): oneDNN 2.6.3 offers a
// descriptor for this grouped, W-dilated conv with a FakeQuantize chain whose
// primitive it then fails to create ("could not create a primitive"), so
// onednn:any accepted the problem in supports() and failed in create().
// Fixed: the selection creates the primitive and steps to oneDNN's next
// implementation when that fails (kernels/onednn/conv_select.cpp, creatable()).
TEST(FuzzRegression, OnednnAnyAcceptsOnlyCreatablePrimitives) {
    const char *desc = "g3mb2ic24ih4iw9oc48oh1ow12kh2kw3sh3sw1ph0pw3dh0dw2";
    conv_problem p;
    p.desc = conv_desc::parse(desc);
    p.src_dt = dtype::s8;
    p.dst_dt = dtype::f32;
    p.ops = testdata::make_post_ops("fq:per_tensor", p.desc.oc, 1);
    p.dst_zp = 4;
    const impl::platform plat = impl::host_platform();
    const std::vector<int8_t> wei(static_cast<size_t>(p.desc.wei_elems()), 1);
    int accepted = 0;
    for (const attr_set &a : impl::build_attrs(p, plat, conv_hints{}))
        for (const auto &row : impl::conv_list()) {
            if (row.name != "onednn:any") continue;
            const impl::plan_ptr pl = row.supports(p, a, plat, nullptr);
            if (!pl) continue;
            ++accepted;
            EXPECT_NO_THROW(row.create(p, a, *pl)) << "attr[" << a.id << "]";
        }
    EXPECT_GT(accepted, 0); // oneDNN has implementations that can run it
    test::ConvTester().desc(desc).src(dtype::s8).dst(dtype::f32).post_ops("fq:per_tensor").dst_zp(4).run("onednn:any");
}
