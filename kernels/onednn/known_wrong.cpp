#include "kernels/onednn/known_wrong.h"

#include "kernels/onednn/onednn_conv.h"

namespace qconv::impl::onednn {

namespace {
// Whether output position o (stride s, start padding pad, k taps dil apart)
// reads no source position in [0, size): its window lies wholly in the padding.
bool in_padding(int64_t o, int64_t s, int64_t pad, int64_t k, int64_t dil, int64_t size) {
    for (int64_t i = 0; i < k; ++i) {
        const int64_t x = o * s - pad + i * dil;
        if (x >= 0 && x < size) return false;
    }
    return true;
}
// Whether output pixel (oh, ow) reads no source pixel.
bool pixel_in_padding(const conv_desc &d, int64_t oh, int64_t ow) {
    return in_padding(oh, d.sh, d.pt, d.kh, d.dh, d.ih) || in_padding(ow, d.sw, d.pl, d.kw, d.dw, d.iw);
}
// Whether some output pixel's window lies wholly in the padding.
bool some_pixel_in_padding(const conv_desc &d) {
    for (int64_t oh = 0; oh < d.oh; ++oh)
        if (in_padding(oh, d.sh, d.pt, d.kh, d.dh, d.ih)) return true;
    for (int64_t ow = 0; ow < d.ow; ++ow)
        if (in_padding(ow, d.sw, d.pl, d.kw, d.dw, d.iw)) return true;
    return false;
}

// Whether a post-op operand varies over channels (per-OC values, the bias as
// a post-op, or a full tensor).
bool per_channel_operand(const recipe &r) {
    for (const operand &o : r.operands)
        if (o.from != operand::source::values || o.values.size() > 1) return true;
    return false;
}
} // namespace

// Implementations of oneDNN 2.6.3 that compute some problems wrong. Every
// row passes over them (a brgconv row then has no implementation; the
// `onednn:any` peer takes oneDNN's next choice); docs/dispatch.md lists them
// with the reproducers, tests/test_fuzz_regressions.cpp and the wrapped-row
// sweep (tests/test_onednn_sweep.cpp) check each refusal:
//   - `jit:avx512_core_amx_int8` with a source zero point: the last channels
//     of an OC tail are wrong where the window covers padding (ic14 oc22 kh3
//     dh2 ph3: oc 21 off by 17);
//   - `gemm_*` on a grouped convolution with per-channel or full-tensor post-op
//     operands: the operands of the second and later groups are read at the
//     wrong channel offset (g2 oc54, binary min per OC: 147 of 1134 wrong);
//   - `gemm_*` on a grouped convolution with a source zero point (the
//     wrapped-row sweep: g4 ic32 ih18 oc8 kh1 s4 with zp 9, 27 of 200 wrong;
//     other grouped shapes pass, so the rule is wider than the finding);
//   - brgconv on AMX with a stride larger than the kernel along H or W: wrong
//     results that change with the thread count (mb1ic228ih19oc4kh2sh3: 9 of
//     24 wrong at 1 thread) and heap corruption (mb1ic72ih30iw25oc18kh1kw7sh2sw3,
//     `malloc(): corrupted top size`). Reported for IC >= 96 on an AMX Xeon;
//     refused for every IC, since the boundary in IC was not swept on AMX;
//   - `jit_uni_int8_1x1:avx2_vnni` and `:avx2` on a strided 1x1 convolution:
//     wrong at 2 threads (the wrapped-row sweep, seed 11: mb2 ic8 iw27 oc496
//     s3, 105 of 8 928 wrong; also without post-ops; 1 and 3 threads pass; on
//     an AVX2-only Zen 3 the avx2 kernel: 28 wrong at 2 threads, none at 1, 3);
//   - `brdgmm_dw` and `brgconv` on a grouped convolution with per-channel
//     (or full-tensor) post-op operands when the output is one pixel
//     (mb·OH·OW = 1; for brgconv, one whose window lies wholly in the
//     padding): channels past the first vector or group are wrong (peer
//     fuzzing: g19 ih2 iw2 kh1 s3x2, FakeQuantize per channel, 3 of 19 wrong;
//     g40 1x1 on one pixel, add per OC: 22 of 40; fuzz_diff on the rows:
//     brgconv:avx512_core_vnni, g3 ic63 oc33 ih1 kh2 dh2 ph1, a window wholly
//     in the padding, scale-shift per channel: 21 of 33 wrong, later groups
//     read group 0's operands);
//   - `brgconv` with a sum post-op when an output pixel's window lies wholly
//     in the padding: wrong sums (mb1 ic16 ih4 oc16 oh6 kh3 ph1: 56 of 96
//     wrong) and, with another post-op in the chain, a crash (fuzz_diff on the
//     rows: g1 ic1 ih1 kh3 dh2 ph1, abs then sum; the wrapped-row sweep: g3
//     ic60 ih1 oh4 kh3 dh2 ph3, relu then sum);
//   - `gemm_*` with an s8 source on a grouped convolution (peer fuzzing: g2
//     ic886 ih1 iw1 kh4 kw4 s3x1 ph1 pw5, s32 destination, no post-ops: all 30
//     wrong; odd ICg ≥ 17 with that padding; a u8 source passes);
//   - `jit_uni_int8` (avx2, avx2_vnni, sse41) on a depthwise convolution
//     whose group count is not a multiple of 8, with binary post-ops: the
//     tail channels are wrong (g7 ic7 oc7 kh3 ph1, add per-tensor: 227 of 448
//     wrong; G = 1..33 on avx2: wrong for G % 8 >= 2; sse41 also for G = 6).
std::string known_wrong(const std::string &info, const recipe &r) {
    const conv_desc &d = r.shape;
    if (r.src_zp && info.find("avx512_core_amx_int8") != std::string::npos)
        return "oneDNN 2.6 computes OC tails over padding wrong with a source zero point";
    const bool grouped_gemm = r.grouped && info.find("gemm") != std::string::npos;
    if (grouped_gemm && r.src_zp)
        return "oneDNN 2.6 gemm convolution is wrong on some grouped problems with a source zero point";
    if (grouped_gemm && r.src_md.data_type() == dt_t::s8)
        return "oneDNN 2.6 gemm convolution with an s8 source is wrong on some grouped problems";
    if (grouped_gemm && per_channel_operand(r))
        return "oneDNN 2.6 reads per-channel post-op operands of later groups at the wrong offset";
    if (info.rfind("jit_uni_int8_1x1:avx2", 0) == 0 && (d.sh > 1 || d.sw > 1))
        return "oneDNN 2.6 jit_uni_int8_1x1 (avx2, avx2_vnni) computes strided 1x1 layers wrongly at some thread "
               "counts";
    // One output pixel: brdgmm_dw fails for any window, brgconv when the
    // window lies wholly in the padding.
    const bool brdgmm = info.rfind("brdgmm", 0) == 0, brgconv = info.rfind("brg", 0) == 0;
    if (r.grouped && d.mb * d.oh * d.ow == 1 && (brdgmm || (brgconv && pixel_in_padding(d, 0, 0))) &&
        per_channel_operand(r))
        return "oneDNN 2.6 brgconv/brdgmm reads per-channel post-op operands of a grouped convolution wrongly "
               "for a single output pixel";
    if (brgconv && r.sum_op && some_pixel_in_padding(d))
        return "oneDNN 2.6 brgconv computes a sum post-op wrongly (or crashes) where an output pixel's window lies "
               "wholly in the padding";
    if ((d.sh > d.kh || d.sw > d.kw) && brgconv && info.find("amx") != std::string::npos)
        return "oneDNN 2.6 brgconv on AMX is wrong (and corrupts the heap) with a stride larger than the kernel";
    if (d.is_depthwise() && d.g % 8 != 0 && r.binary_ops && info.rfind("jit_uni_int8:", 0) == 0)
        return "oneDNN 2.6 jit_uni_int8 applies binary post-ops to depthwise channel tails (G % 8 != 0) wrongly";
    return "";
}

// Whether `info` is one of oneDNN's brgconv implementations on AMX
// ("brgconv_1x1:avx512_core_amx_int8", "brg:avx512_core_amx_int8").
bool brgconv_on_amx(const std::string &info) {
    return info.rfind("brg", 0) == 0 && info.find("amx") != std::string::npos;
}

// oneDNN 2.6.3's brgconv on AMX is untrusted: on an AMX Xeon the wrapped-row
// sweep found wrong results that depend on the thread count, so no rule on
// the shape can describe them (g1mb2ic507ih20iw20oc10oh6ow5kh5kw5sh3sw4ph0pw3:
// wrong at 1 and 2 threads, right at 3; g1mb1ic160ih24iw15oc167oh5ow4kh5kw5sh4sw4ph0pw1:
// right at 1, 140 of 3 340 wrong at 2; docs/dispatch.md lists the
// reproducers). Its rows are peers labelled inexact (exact=0), and the
// `onednn:any` peer passes over it, so the ratio= baseline stays exact.
extern const char *const brgconv_amx_untrusted;
const char *const brgconv_amx_untrusted =
    "oneDNN 2.6 brgconv on AMX is untrusted (wrong results that depend on the thread count)";

// Whether oneDNN's implementation `info` returns the reference's int32 sums
// for every input: VNNI-class instructions (vpdpbusd, AMX tiles) and the
// reference do; below VNNI, oneDNN's int8 kernels multiply with vpmaddubsw
// (16-bit saturation) and halve the weights of an s8 source. Its gemm
// follows the ISA it runs on. brgconv on AMX is untrusted (above).
bool exact_impl(const std::string &info) {
    if (info.rfind("ref", 0) == 0) return true;
    if (brgconv_on_amx(info)) return false;
    std::string kind;
    isa level = isa::sse41;
    if (parse_impl_info(info, &kind, &level)) return level_has_vnni(level);
    if (info.find("gemm") == std::string::npos) return false;
    switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx2_vnni:
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx: return true;
    default: return false;
    }
}

} // namespace qconv::impl::onednn
