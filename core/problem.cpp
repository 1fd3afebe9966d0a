// Validation and identity of conv_problem and matmul_desc, and the packed
// weight accessor of the compressed MatMul.
//
// key() strings are exact: floats are printed in hexadecimal (%a), so two
// problems have the same key iff they hold the same values. They are used as
// kernel-cache keys.
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "core/desc_text.h"
#include "core/dw_fusion.h"
#include "qconv/conv.h"
#include "qconv/matmul.h"

namespace qconv {
namespace {

std::string hexf(float v) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%a", double(v));
    return buf;
}

std::string join(const std::vector<float> &v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + hexf(v[i]);
    return s;
}

std::string join(const std::vector<int32_t> &v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s;
}

// Every field of a post-op, values included.
std::string post_op_key(const post_op &p) {
    std::string s = "k" + std::to_string(int(p.k));
    switch (p.k) {
    case post_op::kind::eltwise:
        s += ":a" + std::to_string(int(p.alg)) + ":" + hexf(p.alpha) + ":" + hexf(p.beta);
        break;
    case post_op::kind::binary:
        s += ":b" + std::to_string(int(p.balg)) + ":" + std::to_string(int(p.bcast)) + ":" + join(p.scale);
        break;
    case post_op::kind::sum: s += ":" + hexf(p.sum_scale) + ":" + std::to_string(p.sum_zp); break;
    case post_op::kind::scale_shift: s += ":" + join(p.scale) + ":" + join(p.shift); break;
    case post_op::kind::prelu: s += ":" + join(p.scale); break;
    case post_op::kind::fake_quantize:
        s += ":" + std::to_string(p.levels) + ":" + join(p.in_lo) + ":" + join(p.in_hi) + ":" + join(p.out_lo) + ":" +
             join(p.out_hi);
        break;
    case post_op::kind::dw_conv: {
        s += ":" + std::to_string(p.dw_stride) + ":" + std::to_string(int(p.dw_mid_dt)) + ":";
        for (size_t i = 0; i < p.dw_wei.size(); ++i) s += (i ? "," : "") + std::to_string(int(p.dw_wei[i]));
        s += ":" + join(p.dw_bias) + ":" + join(p.dw_scales);
        break;
    }
    }
    return s;
}

void check_int_range(const char *field, int64_t v, int64_t lo, int64_t hi, const std::string &why) {
    if (v < lo || v > hi)
        fail(field, "value " + std::to_string(v) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) +
                        "] " + why);
}

} // namespace

// ------------------------------------------------------------- conv_problem
void conv_problem::validate() const {
    desc.validate();
    if (src_dt != dtype::u8 && src_dt != dtype::s8)
        fail("src_dt", std::string("must be u8 or s8 (got ") + to_string(src_dt) + ")");
    if (dst_dt != dtype::f32 && dst_dt != dtype::s32 && dst_dt != dtype::s8 && dst_dt != dtype::u8)
        fail("dst_dt", std::string("must be f32, s32, s8 or u8 (got ") + to_string(dst_dt) + ")");

    if (!scales.empty() && scales.size() != 1 && int64_t(scales.size()) != desc.oc)
        fail("scales",
             "expected 0, 1 or OC=" + std::to_string(desc.oc) + " values (got " + std::to_string(scales.size()) + ")");
    for (size_t i = 0; i < scales.size(); ++i)
        if (!std::isfinite(scales[i])) fail("scales", "value #" + std::to_string(i) + " is not finite");

    switch (src_zp.k) {
    case zero_point::kind::none:
        if (!src_zp.values.empty()) fail("src_zp", "kind none must hold no values");
        break;
    case zero_point::kind::per_tensor:
        if (src_zp.values.size() != 1)
            fail("src_zp",
                 "per-tensor zero point needs exactly 1 value (got " + std::to_string(src_zp.values.size()) + ")");
        if (src_dt == dtype::u8) check_int_range("src_zp", src_zp.values[0], 0, 255, "(u8 source)");
        else check_int_range("src_zp", src_zp.values[0], -128, 127, "(s8 source)");
        break;
    case zero_point::kind::per_channel:
        if (src_dt != dtype::u8) fail("src_zp", "a per-channel zero point needs a u8 source");
        if (int64_t(src_zp.values.size()) != desc.ic)
            fail("src_zp", "per-channel zero point needs IC=" + std::to_string(desc.ic) + " values (got " +
                               std::to_string(src_zp.values.size()) + ")");
        for (int32_t v : src_zp.values) check_int_range("src_zp", v, 0, 255, "(per-channel, u8 source)");
        break;
    default: fail("src_zp", "unknown zero-point kind");
    }

    if (dst_dt == dtype::u8) check_int_range("dst_zp", dst_zp, 0, 255, "(u8 destination)");
    if (dst_dt == dtype::s8) check_int_range("dst_zp", dst_zp, -128, 127, "(s8 destination)");

    qconv::validate(ops, desc.oc);
    if (dw()) {
        // The fused depthwise runs over a 1x1 convolution's output.
        if (desc.kh != 1 || desc.kw != 1)
            fail("post_ops", "a dw conv item needs a 1x1 convolution (got kh=" + std::to_string(desc.kh) +
                                 " kw=" + std::to_string(desc.kw) + ")");
        if (desc.g != 1)
            fail("post_ops",
                 "a dw conv item needs an ungrouped 1x1 convolution (got g=" + std::to_string(desc.g) + ")");
        if (desc.pt != 0 || desc.pl != 0) fail("post_ops", "a dw conv item needs an unpadded 1x1 convolution");
        dst_desc().validate();
    }
}

const post_op *conv_problem::dw() const {
    for (const post_op &op : ops)
        if (op.k == post_op::kind::dw_conv) return &op;
    return nullptr;
}

conv_desc conv_problem::dst_desc() const {
    const post_op *item = dw();
    return item ? dw_desc_over(desc, item->dw_stride) : desc;
}

std::string conv_problem::key() const {
    std::string s = desc.str();
    s += "|src=" + std::string(to_string(src_dt)) + "|dst=" + to_string(dst_dt);
    s += "|zp=" + std::to_string(int(src_zp.k)) + ":" + join(src_zp.values);
    s += "|scales=" + join(scales);
    s += "|bias=" + std::to_string(int(with_bias));
    s += "|ops=";
    for (size_t i = 0; i < ops.size(); ++i) s += (i ? ";" : "") + post_op_key(ops[i]);
    s += "|dst_zp=" + std::to_string(dst_zp);
    return s;
}

bool conv_problem::operator==(const conv_problem &o) const {
    return desc == o.desc && src_dt == o.src_dt && dst_dt == o.dst_dt && src_zp == o.src_zp && scales == o.scales &&
           with_bias == o.with_bias && ops == o.ops && dst_zp == o.dst_zp;
}

// -------------------------------------------------------------- matmul_desc
matmul_desc matmul_desc::parse(const std::string &text_in) {
    const std::string text = detail::trim(text_in);
    // "m?": a run-time M (`?` in place of the whole number; the other sizes are fixed).
    const auto tokens = detail::tokenize_desc(
        text, /*allow_name=*/false,
        [&](const std::string &key) {
            if (key != "m" && key != "k" && key != "n")
                fail("desc", "unknown key '" + key + "' in matmul descriptor '" + text + "' (keys: m k n)");
        },
        /*allow_unknown=*/true);
    matmul_desc d;
    bool has_k = false, has_n = false, runtime_rows = false;
    for (const auto &t : tokens) {
        if (t.unknown && t.key != "m")
            fail(t.key, "only m may be given at run time ('?') in matmul descriptor '" + text + "'");
        if (t.key == "m") d.m = t.unknown ? runtime_m : t.value, runtime_rows = t.unknown;
        else if (t.key == "k") d.k = t.value, has_k = true;
        else d.n = t.value, has_n = true;
    }
    if (!has_k) fail("k", "missing in matmul descriptor '" + text + "'");
    if (!has_n) fail("n", "missing in matmul descriptor '" + text + "'");
    if (d.m == 0 && !runtime_rows) fail("m", "must be positive (got 0; a run-time M is written m?)");
    d.validate();
    return d;
}

std::string matmul_desc::str() const {
    return "m" + (runtime() ? std::string("?") : std::to_string(m)) + "k" + std::to_string(k) + "n" + std::to_string(n);
}

void matmul_desc::validate() const {
    auto check = [](const char *field, int64_t v) {
        if (v < 1) fail(field, "must be positive (got " + std::to_string(v) + ")");
        if (v > detail::size_limit) fail(field, std::to_string(v) + " exceeds the size limit 2^40");
    };
    if (m != runtime_m) check("m", m); // 0: a run-time M
    check("k", k);
    check("n", n);
    if (wei_dt != dtype::u8 && wei_dt != dtype::s8 && wei_dt != dtype::u4 && wei_dt != dtype::s4)
        fail("wei_dt", std::string("must be u8, s8, u4 or s4 (got ") + to_string(wei_dt) + ")");
    if (group < 0) fail("group", "must be 0 (per output channel) or positive (got " + std::to_string(group) + ")");
    if (group > 0 && k % group != 0)
        fail("group", "group size " + std::to_string(group) + " does not divide k=" + std::to_string(k));
    if (zp != zp_kind::none && zp != zp_kind::per_tensor && zp != zp_kind::per_group)
        fail("zp", "unknown zero-point kind");
    if (scale_dt != dtype::f32 && scale_dt != dtype::f16)
        fail("scale_dt", std::string("must be f32 or f16 (got ") + to_string(scale_dt) + ")");
    for (auto [field, dt] : {std::pair<const char *, dtype>{"src_dt", src_dt}, {"dst_dt", dst_dt}})
        if (dt != dtype::f32 && dt != dtype::f16 && dt != dtype::bf16)
            fail(field, std::string("must be f32, f16 or bf16 (got ") + to_string(dt) + ")");
    if (!runtime()) detail::checked_elems({m, k}, "x", "m*k");
    detail::checked_elems({n, k}, "wei", "n*k");
    if (!runtime()) detail::checked_elems({m, n}, "y", "m*n");
}

int64_t matmul_desc::wei_bytes() const {
    return bits_of(wei_dt) == 4 ? (n * k + 1) / 2 : n * k * (bits_of(wei_dt) / 8);
}

int64_t matmul_desc::zp_elems() const {
    switch (zp) {
    case zp_kind::none: return 0;
    case zp_kind::per_tensor: return 1;
    case zp_kind::per_group: return n * n_groups();
    }
    return 0;
}

std::string matmul_desc::key() const {
    return str() + "|wei=" + to_string(wei_dt) + "|group=" + std::to_string(group_size()) + "|zp=" + to_string(zp) +
           "|bias=" + std::to_string(int(with_bias)) + (scale_dt == dtype::f16 ? "|scale=f16" : "") +
           (src_dt != dtype::f32 || dst_dt != dtype::f32
                ? std::string("|dt=") + to_string(src_dt) + ":" + to_string(dst_dt)
                : std::string());
}

const char *to_string(matmul_desc::zp_kind z) {
    switch (z) {
    case matmul_desc::zp_kind::none: return "none";
    case matmul_desc::zp_kind::per_tensor: return "per_tensor";
    case matmul_desc::zp_kind::per_group: return "per_group";
    }
    return "unknown";
}

int32_t weight_at(const uint8_t *w, dtype dt, int64_t i) {
    switch (dt) {
    case dtype::u8: return w[i];
    case dtype::s8: return static_cast<int8_t>(w[i]);
    case dtype::u4: return (i & 1) ? (w[i >> 1] >> 4) : (w[i >> 1] & 0xF);
    case dtype::s4: {
        const int32_t nib = (i & 1) ? (w[i >> 1] >> 4) : (w[i >> 1] & 0xF);
        return (nib ^ 8) - 8; // sign-extend the 4-bit value
    }
    default: fail("wei_dt", std::string("weight_at: not a weight type (") + to_string(dt) + ")");
    }
}

} // namespace qconv
