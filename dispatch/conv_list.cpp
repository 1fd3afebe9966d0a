// The conv implementation table, in dispatch order: the dispatcher walks the
// rows top to bottom and, for each row, the attribute sets (attr[0] then
// attr[1]); the first row that accepts a set wins. A row needs its declared
// CPU features (the row constructor says which), peers run only when forced
// by name, the reference is last. docs/dispatch.md gives the ordering rules
// and the measurements behind them, and how a row is added.
#include "dispatch/conv_dw_pair.h"
#include "kernels/jit/conv/conv_rows.h"
#include "kernels/jit/conv_amx/conv_amx.h"
#include "kernels/onednn/onednn_conv.h"
#include "reference/ref_rows.h"

namespace qconv::impl {

namespace {
using jit::conv_isa;

std::vector<conv_entry> build_conv_list() {
    return {
        // AMX: qconv's tile kernel first: it takes every zero point and
        // legacy post-op (attr[0] included), which no oneDNN AMX row takes
        // (ResNet-50 mb1, 1 thread: 2.66x the VNNI row, 0.99x oneDNN's AMX
        // rows; per-tensor zp 3.04x onednn:any; docs/jit_conv_amx.md).
        jit::conv_amx_row("jit:conv_x8s8:avx512_core_amx"),
        // AMX: oneDNN's AMX JIT convolution (no source zero point, no legacy
        // post-ops in attr[0]): swept clean on the AMX Xeon at 1, 2 and 3
        // threads; 3.66 ms on ResNet-50 mb1 against 3.58 ms for the best of
        // oneDNN's AMX rows. oneDNN's brgconv AMX is a peer (below).
        onednn::jit_row("onednn:jit:avx512_core_amx", isa::avx512_core_amx),

        // Depthwise (groups == IC == OC): the row kernel (VNNI + VBMI), then
        // the micro-kernel rows; they beat every dense row on these problems.
        jit::conv_dw_rows_row("jit:conv_dw_x8s8_rows:avx512_core_vnni"),
        jit::conv_dw_row("jit:conv_dw_x8s8:avx512_core_vnni", conv_isa::avx512_core_vnni),

        // AVX-512 VNNI: qconv's kernel ahead of brgconv (measured faster on
        // ResNet-50, MobileNet and the 1x1 list, and it takes every zero point
        // and post-op in attr[0]); brgconv stays for what it refuses.
        jit::conv_row("jit:conv_x8s8:avx512_core_vnni", conv_isa::avx512_core_vnni),
        onednn::brgconv_row("onednn:brgconv_1x1:avx512_core_vnni", "brgconv_1x1", isa::avx512_core_vnni),
        onednn::brgconv_row("onednn:brgconv:avx512_core_vnni", "brgconv", isa::avx512_core_vnni),

        // Without AVX-512 VNNI, on a CPU that has both AVX-512 and AVX-VNNI
        // (Zen 5 under a cap at avx512_core): depthwise is faster on zmm
        // (vpmaddwd, 16 channels; 1.6x), dense on ymm vpdpbusd (1.05-1.3x,
        // conv1 3.5x).
        jit::conv_dw_row("jit:conv_dw_x8s8:avx512_core", conv_isa::avx512_core),
        jit::conv_dw_row("jit:conv_dw_x8s8:avx2_vnni", conv_isa::avx2_vnni),
        jit::conv_row("jit:conv_x8s8:avx2_vnni", conv_isa::avx2_vnni),
        jit::conv_row("jit:conv_x8s8:avx512_core", conv_isa::avx512_core),
        // 1x1 + fused depthwise item (AVX2 machines' MobileNet blocks): both
        // halves on this ISA's kernels, band by band through a ring of
        // intermediate rows; measured against the composite row below
        // (docs/perf_log.md, issue #27).
        jit::conv_1x1_dw_row("jit:conv_1x1_dw_x8s8:avx2_vnni", conv_isa::avx2_vnni),
        jit::conv_1x1_dw_row("jit:conv_1x1_dw_x8s8:avx2", conv_isa::avx2),
        jit::conv_dw_row("jit:conv_dw_x8s8:avx2", conv_isa::avx2),
        jit::conv_row("jit:conv_x8s8:avx2", conv_isa::avx2),

        // A 1x1 with a fused depthwise item that no fused row above takes:
        // the two halves as two primitives through the normal dispatch (each
        // half on its fastest exact row), on every ISA; the rows above refuse
        // the dw item, so nothing falls to the reference.
        conv_dw_pair_row(),

        // Peers (run when forced by name, never chosen by auto). oneDNN's
        // brgconv on AMX: wrong results that depend on the thread count (the
        // wrapped-row sweep on the AMX Xeon; docs/dispatch.md), so it is
        // timed as what oneDNN would give, labelled exact=0.
        onednn::brgconv_peer_row("onednn:brgconv_1x1:avx512_core_amx", "brgconv_1x1", isa::avx512_core_amx),
        onednn::brgconv_peer_row("onednn:brgconv:avx512_core_amx", "brgconv", isa::avx512_core_amx),
        // Whatever oneDNN picks first (known-wrong and untrusted
        // implementations passed over).
        // oneDNN's 1x1 + dw (append_dw; oneDNN 2.6.3 runs it as its
        // ref_fused_convolution of two sub-primitives), for comparison:
        // peers, outside the wrapped-row sweep (docs/dispatch.md).
        onednn::conv_1x1_dw_row("onednn:conv_1x1_dw:avx512_core_amx", isa::avx512_core_amx, true),
        onednn::conv_1x1_dw_row("onednn:conv_1x1_dw:avx512_core_vnni", isa::avx512_core_vnni, true),
        onednn::conv_1x1_dw_row("onednn:conv_1x1_dw:avx512_core", isa::avx512_core, true),
        onednn::conv_1x1_dw_row("onednn:conv_1x1_dw:avx2_vnni", isa::avx2_vnni, true),
        onednn::conv_1x1_dw_row("onednn:conv_1x1_dw:avx2", isa::avx2, true),
        onednn::any_row(),
        // The reference: always last.
        ref_conv_row(),
    };
}
} // namespace

const std::vector<conv_entry> &conv_list() {
    static const std::vector<conv_entry> list = build_conv_list();
    return list;
}

} // namespace qconv::impl
