// Conv mode: options, problem and data generation, the reference result, comparison.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/text.h"
#include "qconv/post_ops.h"
#include "reference/reference.h"
#include "tests/support/testdata.h"
#include "tools/conv_case.h"

namespace qconv::driver {

namespace {

using detail::split;

int64_t parse_int(const std::string &v, const std::string &field, int64_t lo, int64_t hi) {
    char *end = nullptr;
    errno = 0;
    const long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || errno != 0 || x < lo || x > hi)
        throw usage_error(field + ": expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                          "] (got '" + v + "')");
    return x;
}

bool has_sum(const post_ops &ops) {
    for (const auto &op : ops)
        if (op.k == post_op::kind::sum) return true;
    return false;
}

bool has_transcendental(const post_ops &ops) {
    for (const auto &op : ops)
        if (op.k == post_op::kind::eltwise && is_transcendental(op.alg)) return true;
    return false;
}

} // namespace

conv_settings parse_conv_settings(const options &o) {
    conv_settings s;
    s.dt_text = o.get("dt", "u8:s8:u8");
    const auto dts = split(s.dt_text, ':');
    if (dts.size() != 3) throw usage_error("--dt: expected SRC:WEI:DST, e.g. u8:s8:u8 (got '" + s.dt_text + "')");
    s.src_dt = parse_dtype(dts[0], "--dt");
    s.wei_dt = parse_dtype(dts[1], "--dt");
    s.dst_dt = parse_dtype(dts[2], "--dt");
    if (s.src_dt != dtype::u8 && s.src_dt != dtype::s8) throw usage_error("--dt: source must be u8 or s8");
    if (s.wei_dt != dtype::s8) throw usage_error("--dt: weights must be s8");
    if (s.dst_dt != dtype::u8 && s.dst_dt != dtype::s8 && s.dst_dt != dtype::s32 && s.dst_dt != dtype::f32)
        throw usage_error("--dt: destination must be u8, s8, s32 or f32");

    s.zp_text = o.get("zp", "none");
    const auto zp = split(s.zp_text, ':');
    if (!(zp.size() == 1 && zp[0] == "none") && !(zp.size() == 2 && (zp[0] == "tensor" || zp[0] == "channel")))
        throw usage_error("--zp: expected none, tensor:V|random or channel:V|random (got '" + s.zp_text + "')");
    if (zp.size() == 2 && zp[1] != "random") parse_int(zp[1], "--zp", INT32_MIN, INT32_MAX);

    s.post_ops_text = o.get("post-ops", "");
    s.scales = o.get("scales", "per_oc");
    if (s.scales == "per_tensor") s.scales = "tensor";
    if (s.scales != "per_oc" && s.scales != "tensor" && s.scales != "none")
        throw usage_error("--scales: expected per_oc, tensor (per_tensor) or none (got '" + s.scales + "')");
    s.bias = o.get_bool("bias", true);
    s.dst_zp = static_cast<int32_t>(o.get_int("dst-zp", 0, -1000000, 1000000));
    s.mb = o.get_int("mb", 0, 0, 1 << 20);
    const std::string data = o.get("data", "random");
    if (data != "random" && data != "extreme")
        throw usage_error("--data: expected random or extreme (got '" + data + "')");
    s.data = testdata::parse_data_kind(data);
    s.baseline = o.get("baseline", "auto");
    return s;
}

// ------------------------------------------------------------ generation
void check_conv_memory(const conv_desc &d, const conv_settings &s) {
    int full = 0, items = 0; // full-tensor binary operands, post-ops (each with up to OC values)
    if (!s.post_ops_text.empty())
        for (const auto &item : split(s.post_ops_text, ';')) {
            ++items;
            full += item.find("full") != std::string::npos;
        }
    const double dst = double(d.dst_elems()), dst_bytes = bits_of(s.dst_dt) / 8.0;
    // dst: the initial one, a copy per run, the reference, the timing scratch and the
    // reference's accumulators; wei: the given weights and a packed copy of up to 4 bytes each.
    std::vector<std::pair<std::string, double>> parts = {
        {"src", double(d.src_elems()) * bits_of(s.src_dt) / 8.0},
        {"wei", double(d.wei_elems()) * 5},
        {"dst", dst * (4 * dst_bytes + 8)},
        {"oc", double(d.oc) * 4 * (items + 3)},
    };
    if (full) parts.push_back({"post_ops", dst * 4 * full});
    if (s.zp_text.rfind("channel", 0) == 0) parts.push_back({"zp", double(d.ic) * 4});
    check_problem_memory(parts);
}

// The data generators are the ones the test suites use (tests/support/testdata.h).
conv_case make_conv_case(const problem_text &t, const conv_settings &s, uint32_t seed) {
    conv_case c;
    c.text = t.text;
    c.count = t.count;
    c.seed = seed;

    conv_problem &p = c.p;
    p.desc = conv_desc::parse(t.text);
    if (s.mb > 0) p.desc.mb = s.mb;
    p.desc.validate();
    const conv_desc &d = p.desc;
    check_conv_memory(d, s);
    p.src_dt = s.src_dt;
    p.dst_dt = s.dst_dt;
    p.src_zp = testdata::make_zp(s.zp_text, d.ic, s.src_dt, s.data, seed);
    if (s.scales != "none") p.scales = testdata::make_scales(d.oc, s.scales == "tensor", seed);
    p.with_bias = s.bias;
    p.ops = testdata::make_post_ops(s.post_ops_text, d.oc, seed);
    p.dst_zp = s.dst_zp;
    p.validate();

    const std::vector<uint8_t> src = testdata::make_src(p, s.data, seed);
    c.src.assign(src.begin(), src.end());
    c.wei = testdata::make_weights(d, s.data, seed);
    if (s.bias) c.bias = testdata::make_bias(d, seed);
    if (has_sum(p.ops)) {
        const std::vector<uint8_t> d0 = testdata::make_dst(p, seed);
        c.dst_init.assign(d0.begin(), d0.end());
    } else c.dst_init.assign(testdata::bytes_of(s.dst_dt, p.dst_elems()), 0);
    c.full = testdata::make_binary_tensors(p, seed);
    c.tolerant = s.data == data_kind::extreme || has_transcendental(p.ops);
    return c;
}

exec_args conv_case::args(int threads) const {
    exec_args a;
    for (const auto &f : full) a.binary.push_back(f.data());
    a.threads = threads;
    return a;
}

// The ground truth: the reference with the legacy lowering of the chain
// (stock when the legacy form cannot express it) and the zero point in its
// defining mechanism.
const std::vector<uint8_t> &conv_case::reference() const {
    if (!ref_dst.empty() || !ref_error.empty()) return ref_dst;
    try {
        attr_set a;
        a.id = 0;
        switch (p.src_zp.effective_kind()) {
        case zero_point::kind::none: a.zp = zp_mechanism::none; break;
        case zero_point::kind::per_tensor:
            a.zp = zp_mechanism::stock_per_tensor;
            a.zp_values = {p.src_zp.at(0)};
            break;
        case zero_point::kind::per_channel:
            a.zp = zp_mechanism::legacy_per_channel;
            a.zp_values = p.src_zp.values;
            break;
        }
        const bool f32 = p.dst_dt == dtype::f32;
        try {
            a.ops = lower_legacy(p.ops, p.desc.oc, f32);
        } catch (const qconv::error &) {
            a.ops = lower_stock(p.ops, p.desc.oc, f32);
        }
        std::vector<uint8_t> dst(dst_init.begin(), dst_init.end());
        ref::conv(p, a, src.data(), wei.data(), bias.empty() ? nullptr : bias.data(), dst.data(), args(0));
        ref_dst = std::move(dst);
    } catch (const std::exception &e) {
        ref_error = e.what();
        ref_dst.clear();
    }
    return ref_dst;
}

// ------------------------------------------------------------ comparison
namespace {
template <class V>
double value_at(dtype dt, const V &v, int64_t i) {
    switch (dt) {
    case dtype::u8: return v[i];
    case dtype::s8: return static_cast<int8_t>(v[i]);
    case dtype::s32: {
        int32_t x;
        std::memcpy(&x, &v[i * 4], 4);
        return x;
    }
    default: {
        float x;
        std::memcpy(&x, &v[i * 4], 4);
        return x;
    }
    }
}
} // namespace

int64_t compare_dst(const conv_case &c, const aligned_vector<uint8_t> &got, std::string *first) {
    const auto &want = c.reference();
    const dtype dt = c.p.dst_dt;
    const int64_t n = c.p.dst_elems();
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double w = value_at(dt, want, i), r = value_at(dt, got, i);
        bool ok;
        if (std::isnan(w) || std::isnan(r)) ok = std::isnan(w) && std::isnan(r);
        else if (!c.tolerant) ok = w == r; // -0 equals +0
        else if (dt == dtype::f32) ok = std::fabs(w - r) <= 1e-5 * std::max(1.0, std::fabs(w));
        else ok = std::fabs(w - r) <= 1.0;
        if (!ok && bad++ == 0 && first) {
            const conv_desc d = c.p.dst_desc();
            const int64_t oc = i % d.oc, ow = i / d.oc % d.ow, oh = i / d.oc / d.ow % d.oh, mb = i / d.oc / d.ow / d.oh;
            *first = "first at mb=" + std::to_string(mb) + " oh=" + std::to_string(oh) + " ow=" + std::to_string(ow) +
                     " oc=" + std::to_string(oc) + ": got " + format_double(r, 6) + " expected " + format_double(w, 6);
        }
    }
    return bad;
}

} // namespace qconv::driver
