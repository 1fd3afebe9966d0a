// Candidate problems per implementation row (see row_problems.h).
#include "tests/support/row_problems.h"

#include "dispatch/attr_builder.h"
#include "dispatch/host_platform.h"
#include "tests/support/testdata.h"

namespace qconv::test {

namespace {
// One candidate: desc with source type dt, zero point zp, the post-op text op,
// per-OC scales and bias; none for an s8 source with a per-channel zero point.
void add_candidate(std::vector<conv_problem> &out, const char *desc, const char *dt, const char *zp, const char *op,
                   dtype dst) {
    conv_problem p;
    p.desc = conv_desc::parse(desc);
    p.src_dt = parse_dtype(dt);
    if (p.src_dt == dtype::s8 && std::string(zp) == "channel:random") return;
    p.dst_dt = dst;
    p.src_zp = testdata::make_zp(zp, p.desc.ic, p.src_dt, testdata::data_kind::random, 1);
    p.scales = testdata::make_scales(p.desc.oc, false, 1);
    p.with_bias = true;
    p.ops = testdata::make_post_ops(op, p.desc.oc, 1);
    out.push_back(std::move(p));
}

std::vector<conv_problem> sweep(const std::vector<const char *> &descs) {
    static const char *ops[] = {"", "relu", "fq:per_channel", "add:per_oc"};
    static const char *zps[] = {"none", "tensor:3", "channel:random"};
    std::vector<conv_problem> out;
    for (const char *dt : {"u8", "s8"})
        for (const char *zp : zps)
            for (const char *op : ops)
                for (const char *d : descs)
                    for (dtype dst : {dtype::u8, dtype::f32}) add_candidate(out, d, dt, zp, op, dst);
    // A 1x1 with a fused depthwise item (stride 1 and 2, u8 and s8 intermediates).
    for (const char *dt : {"u8", "s8"})
        for (const char *zp : zps)
            for (const char *op : {"relu;dw:1:u8;relu", "dw:2:s8;add:per_oc"})
                for (dtype dst : {dtype::u8, dtype::f32}) add_candidate(out, "mb2ic19ih6iw5oc24kh1", dt, zp, op, dst);
    return out;
}
} // namespace

std::vector<conv_problem> conv_pad_only_candidates() {
    return sweep({
        "mb1ic32ih6iw6oc48kh1ph1pw0oh7ow7",    // 1x1, pads_begin [1,0] pads_end [0,1] (the graph case)
        "mb2ic16ih5oc24kh3ph1oh8",             // 3x3, end pad 4: the last 2 rows/columns pad-only
        "mb1ic16ih8oc32kh3sh2ph4oh7",          // strided, pad-only first and last row
        "g2mb1ic16ih4oc24kh1ph2oh8",           // grouped 1x1, 2 pad-only rows/columns each end
        "g32mb1ic32ih5oc32kh3ph3oh10",         // depthwise, pad-only first and last 2
        "mb1ic64ih4iw3oc64kh1kw3ph0pw2oh6ow7", // 1x1 rows, 3-wide columns, channels of 64
    });
}

std::vector<conv_problem> conv_candidates() {
    return sweep({
        "mb2ic32ih6oc48kh1",       // 1x1
        "mb1ic16ih7oc40kh3ph1",    // 3x3
        "mb1ic16ih8oc32kh3sh2ph1", // strided
        "g2mb1ic16ih5oc24kh3ph1",  // grouped
        "g32mb1ic32ih7oc32kh3ph1", // depthwise
        "mb1ic64ih4oc64kh1",       // 1x1, channel multiples of 64
    });
}

bool find_conv_problem(const impl::conv_entry &row, conv_candidate *out, std::string *why) {
    const impl::platform plat = impl::host_platform();
    conv_hints h;
    h.enforce_brgconv = true;
    h.impl = row.name;
    for (const conv_problem &p : conv_candidates()) {
        for (const attr_set &a : impl::build_attrs(p, plat, h)) {
            if (!row.supports(p, a, plat, why)) continue;
            out->p = p;
            out->hints = h;
            return true;
        }
    }
    return false;
}

std::vector<matmul_candidate> matmul_candidates() {
    std::vector<matmul_candidate> out;
    for (bool dq : {false, true})
        for (dtype wdt : {dtype::u4, dtype::u8, dtype::s4, dtype::s8})
            for (int64_t group : {int64_t(0), int64_t(32)})
                for (auto zp :
                     {matmul_desc::zp_kind::per_group, matmul_desc::zp_kind::none, matmul_desc::zp_kind::per_tensor}) {
                    matmul_candidate c;
                    c.d = matmul_desc::parse("m3k128n40");
                    c.d.wei_dt = wdt;
                    c.d.group = group;
                    c.d.zp = zp;
                    c.d.with_bias = true;
                    c.hints.dynamic_quantization = dq;
                    out.push_back(c);
                }
    return out;
}

bool find_matmul_problem(const impl::matmul_entry &row, matmul_candidate *out, std::string *why) {
    const impl::platform plat = impl::host_platform();
    for (matmul_candidate c : matmul_candidates()) {
        c.hints.impl = row.name;
        if (!row.supports(c.d, c.hints, plat, why)) continue;
        *out = c;
        return true;
    }
    return false;
}

matmul_buffers::matmul_buffers(const matmul_desc &d, unsigned seed) {
    testdata::rng r(seed);
    wei.resize(size_t(d.wei_bytes()));
    for (auto &b : wei) b = uint8_t(r.next());
    scale.resize(size_t(d.scale_elems()));
    for (auto &s : scale) s = float(r.uniform(1, 8)) / 64.f;
    const bool four = d.wei_dt == dtype::u4 || d.wei_dt == dtype::s4;
    const bool sign = d.wei_dt == dtype::s8 || d.wei_dt == dtype::s4;
    const int32_t lo = sign ? (four ? -8 : -128) : 0, hi = sign ? (four ? 7 : 127) : (four ? 15 : 255);
    zp.resize(size_t(d.zp_elems()));
    for (auto &z : zp) z = r.uniform(lo, hi);
    bias.resize(size_t(d.n));
    for (auto &b : bias) b = float(r.uniform(-8, 8));
    x.resize(size_t(d.m * d.k));
    for (auto &v : x) v = float(r.uniform(-16, 16)) / 8.f;
}

matmul_weights matmul_buffers::weights() const {
    return {wei.data(), scale.data(), zp.empty() ? nullptr : zp.data(), bias.data()};
}

} // namespace qconv::test
