// Depthwise int8 convolution (groups == IC == OC), any kernel size, stride,
// padding and dilation, both zero-point kinds and every post-op.
//
// Two kernels share the source handling (conv_dw_common.h), each its own table row:
//  * jit:conv_dw_x8s8_rows:avx512_core_vnni (needs VBMI too): the row kernel (dw_row_gen). The source
//    stays u8 bytes and vpdpbusd multiplies them by byte-sparse s8 weights
//    (exact u8·s8 products summed in int32). One call computes whole output
//    rows (or a pair of rows) of a range of channel blocks: pixel blocks
//    with the weights in registers, runs of equal blocks as a loop, the fused
//    output pipeline (single-rounding vfmadd like the reference's madd) at
//    the end of each block. Variants: kernel-row chunks (three kernel rows
//    per dword, built with vpermt2b + vpermb), row pairs (four source rows
//    feed two output rows at stride 1) and the byte layout (strided rows:
//    64 channels used as loaded, lanes 4i + q, no permutes).
//  * jit:conv_dw_x8s8:<isa> (every ISA): conv_ukernel in
//    depthwise mode, one call per pixel block: vpmovzxbd-widened source and
//    int32-stored s16 weights, vpdpwssd (VNNI) or vpmaddwd + vpaddd.
// Source: a u8 source without zero point is read in place on zmm ISAs (taps
// in the padding are skipped or zeroed: they would contribute exactly 0; the
// channel tail and the image's last row are masked loads). Otherwise it is copied once per execution into a
// padded NHWC buffer whose pixels hold the channels rounded up to 16 (s8
// shifted by +128; padded taps: pad_byte() = zp + shift, i.e. zp + 128 for
// s8 sources and 0x80 without a zero point; padded channels 0). The same
// compensation argument as the dense family (conv_x8s8.cpp) makes this exact
// (core/compensation.h): comp[c] = −Σ w·(zp + shift), added in int32.
// Threads split (mb, row or row pair, channel blocks); results do not depend
// on them.
//
// Files: conv_dw_common.h/.cpp (the source handling and packing both kernels
// share), conv_dw_ukernel.cpp (the conv_ukernel path), conv_dw_row_gen.h
// (the row kernel's code generator), conv_dw_row_kernel.cpp (the row
// kernel); here the family's checks and its factory.
#include <memory>
#include <string>

#include "kernels/jit/conv/conv_rows.h"
#include "kernels/jit/conv_dw/conv_dw_common.h"

namespace qconv::jit {

bool conv_dw_supports(conv_isa i, bool rows, const conv_problem &p, const attr_set &a, const conv_knobs &k,
                      std::string *why) {
    using impl::reject;
    const conv_desc &d = p.desc;
    if (!d.is_depthwise()) return reject(why, "not depthwise (needs groups == IC == OC)");
    if (rows) {
        if (!k.dw_row) return reject(why, "turned off (QCONV_JIT_CONV_DW_ROW=0)");
        if (!dw::row_kernel_fits(d)) return reject(why, "kernel too large for the row kernel's registers");
    }
    if (d.kh * d.kw > 121 || max_accumulators_dw(i, static_cast<int>(d.kw)) < 1)
        return reject(why, "kernel wider than the registers allow (every tap is unrolled)");
    // Everything else (types, zero points, post-ops) as the dense kernels.
    return conv_supports(i, false, p, a, why);
}

std::shared_ptr<const impl::conv_kernel> conv_dw_create(const conv_problem &p, const attr_set &a, const conv_plan &pl) {
    if (pl.k == conv_plan::kind::depthwise_rows) {
        const dw::rows_geometry *rows = pl.detail_as<dw::rows_geometry>();
        if (!rows) fail("plan", "a depthwise_rows plan carries the row kernel's geometry (conv_dw_rows_row)");
        return dw::make_dw_row_kernel(p, a, *rows);
    }
    const dw::ukernel_geometry *g = pl.detail_as<dw::ukernel_geometry>();
    if (!g) fail("plan", "a depthwise plan carries the micro-kernel path's geometry (conv_dw_plan)");
    return dw::make_dw_ukernel(pl.isa, p, a, *g);
}

std::shared_ptr<const conv_plan> conv_dw_plan(conv_isa i, const conv_problem &p, const attr_set &a,
                                              const conv_knobs &k) {
    auto pl = conv_plan::make(i, conv_plan::kind::depthwise, k);
    pl->detail = std::make_shared<const dw::ukernel_geometry>(dw::plan_ukernel(i, p, a, k));
    return pl;
}

namespace {
impl::conv_entry::build_fn dw_build() {
    return [](const conv_problem &p, const attr_set &a, const impl::plan &pl) {
        return conv_dw_create(p, a, dynamic_cast<const conv_plan &>(pl));
    };
}
} // namespace

impl::conv_entry conv_dw_row(const std::string &name, conv_isa i) {
    return jit_conv_entry(
        name, std::string("jit:conv_dw_x8s8:") + to_string(i), i, conv_plan::kind::depthwise,
        [i](const conv_problem &p, const attr_set &a, const impl::platform &, std::string *why) {
            const conv_knobs k = conv_knobs::from_env();
            return conv_dw_supports(i, false, p, a, k, why) ? conv_dw_plan(i, p, a, k) : nullptr;
        },
        dw_build());
}

impl::conv_entry conv_dw_rows_row(const std::string &name) {
    constexpr conv_isa vnni = conv_isa::avx512_core_vnni;
    return jit_conv_entry(
        name, std::string("jit:conv_dw_x8s8_rows:") + to_string(vnni), vnni, conv_plan::kind::depthwise_rows,
        [](const conv_problem &p, const attr_set &a, const impl::platform &, std::string *why) {
            const conv_knobs k = conv_knobs::from_env();
            if (!conv_dw_supports(vnni, true, p, a, k, why)) return impl::plan_ptr();
            auto pl = conv_plan::make(vnni, conv_plan::kind::depthwise_rows, k);
            pl->detail = std::make_shared<const dw::rows_geometry>(dw::plan_rows(p, a, k));
            return impl::plan_ptr(pl);
        },
        dw_build());
}

} // namespace qconv::jit
