// Text form of the logical post-op chain (driver option, problem.txt) and its
// validation. Every value is written out; the seeded shorthand the tests and
// the driver use (`scale_shift`, `add:per_oc`, `fq:per_channel`, ...) is
// completed with generated values by testdata::make_post_ops
// (tests/support/testdata.h) before it reaches this parser.
//
// Items are ';'-separated, fields within an item ':'-separated, lists within
// a field ','-separated (LIST: 1 value, or OC values one per output channel):
//   eltwise   relu[:alpha]  clip[:lo:hi]  linear[:alpha:beta]  swish[:alpha]  elu[:alpha]
//             gelu_erf gelu_tanh hardswish mish logistic tanh abs sqrt square exp round
//             defaults: relu 0, clip 0:6, linear 1:0, swish 1, elu 1
//   binary    add|sub|mul|div|max|min:per_tensor:V   ...:per_oc:v0,..,v(OC-1)   ...:full
//   sum       sum[:scale[:zp]]
//   legacy    scale_shift:SCALE_LIST:SHIFT_LIST   prelu:SLOPE_LIST
//             fq:LEVELS:IN_LO_LIST:IN_HI_LIST:OUT_LO_LIST:OUT_HI_LIST
//   dw conv   dw:STRIDE:MID_DT:WEIGHTS:BIAS:SCALES  (WEIGHTS: 9·OC integers in
//             [−128, 127], [c][kh][kw]; BIAS: OC values or none; SCALES: 1 or
//             OC values or none); the items after it are the depthwise's
// "" and "none" mean an empty chain. to_text() prints this form, so
// parse_post_ops(to_text(ops), oc) == ops for every valid chain.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/text.h"
#include "qconv/post_ops.h"

namespace qconv {
namespace {

using detail::split;
using detail::trim;

struct named_eltwise {
    const char *name;
    eltwise_alg alg;
    float alpha, beta; // defaults
};
const named_eltwise eltwise_table[] = {
    {"relu", eltwise_alg::relu, 0.f, 0.f},
    {"clip", eltwise_alg::clip, 0.f, 6.f},
    {"linear", eltwise_alg::linear, 1.f, 0.f},
    {"gelu_erf", eltwise_alg::gelu_erf, 0.f, 0.f},
    {"gelu_tanh", eltwise_alg::gelu_tanh, 0.f, 0.f},
    {"swish", eltwise_alg::swish, 1.f, 0.f},
    {"hardswish", eltwise_alg::hardswish, 0.f, 0.f},
    {"mish", eltwise_alg::mish, 0.f, 0.f},
    {"logistic", eltwise_alg::logistic, 0.f, 0.f},
    {"tanh", eltwise_alg::tanh, 0.f, 0.f},
    {"elu", eltwise_alg::elu, 1.f, 0.f},
    {"abs", eltwise_alg::abs, 0.f, 0.f},
    {"sqrt", eltwise_alg::sqrt, 0.f, 0.f},
    {"square", eltwise_alg::square, 0.f, 0.f},
    {"exp", eltwise_alg::exp, 0.f, 0.f},
    {"round", eltwise_alg::round, 0.f, 0.f},
};

struct named_binary {
    const char *name;
    binary_alg alg;
};
const named_binary binary_table[] = {
    {"add", binary_alg::add}, {"sub", binary_alg::sub}, {"mul", binary_alg::mul},
    {"div", binary_alg::div}, {"max", binary_alg::max}, {"min", binary_alg::min},
};

const named_eltwise *find_eltwise(const std::string &s) {
    for (const auto &e : eltwise_table)
        if (s == e.name) return &e;
    return nullptr;
}
const named_eltwise *find_eltwise(eltwise_alg a) {
    for (const auto &e : eltwise_table)
        if (a == e.alg) return &e;
    return nullptr;
}
const named_binary *find_binary(const std::string &s) {
    for (const auto &b : binary_table)
        if (s == b.name) return &b;
    return nullptr;
}
const char *binary_name(binary_alg a) {
    for (const auto &b : binary_table)
        if (a == b.alg) return b.name;
    return "unknown";
}

float parse_float(const std::string &item, const std::string &s, const char *what) {
    char *end = nullptr;
    const float v = s.empty() ? 0.f : std::strtof(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !std::isfinite(v))
        fail("post_ops", "'" + item + "': " + what + " '" + s + "' is not a finite number");
    return v;
}

int64_t parse_int(const std::string &item, const std::string &s, const char *what) {
    char *end = nullptr;
    const long long v = s.empty() ? 0 : std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || v < INT32_MIN || v > INT32_MAX)
        fail("post_ops", "'" + item + "': " + what + " '" + s + "' is not a 32-bit integer");
    return v;
}

// Shortest decimal text that reads back as exactly v.
std::string fmt(float v) {
    char buf[64];
    for (int prec = 1; prec <= 9; ++prec) {
        std::snprintf(buf, sizeof buf, "%.*g", prec, double(v));
        if (std::strtof(buf, nullptr) == v) break;
    }
    return buf;
}

void check_args(const std::string &item, const std::vector<std::string> &f, size_t max_fields) {
    if (f.size() > max_fields)
        fail("post_ops", "'" + item + "': too many fields (at most " + std::to_string(max_fields - 1) + ")");
}

// A ','-separated list of finite numbers.
std::vector<float> parse_list(const std::string &item, const std::string &s, const char *what) {
    std::vector<float> v;
    for (const std::string &x : split(s, ',')) v.push_back(parse_float(item, trim(x), what));
    return v;
}

std::string list_text(const std::vector<float> &v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + fmt(v[i]);
    return s;
}

// A binary operand's broadcast (the only post-op that names one).
broadcast parse_bcast(const std::string &item, const std::string &s) {
    if (s == "per_tensor") return broadcast::per_tensor;
    if (s == "per_oc" || s == "per_channel") return broadcast::per_oc;
    if (s == "full") return broadcast::full;
    fail("post_ops", "'" + item + "': unknown broadcast '" + s + "' (per_tensor, per_oc, full)");
}

post_op parse_item(const std::string &item) {
    const auto f = split(item, ':');
    const std::string &name = f[0];
    if (const named_eltwise *e = find_eltwise(name)) {
        check_args(item, f, 3);
        const float alpha = f.size() > 1 ? parse_float(item, f[1], "alpha") : e->alpha;
        const float beta = f.size() > 2 ? parse_float(item, f[2], "beta") : e->beta;
        return post_op::eltwise(e->alg, alpha, beta);
    }
    if (const named_binary *b = find_binary(name)) {
        check_args(item, f, 3);
        const broadcast bc = f.size() > 1 ? parse_bcast(item, f[1]) : broadcast::per_tensor;
        if (bc == broadcast::full) {
            if (f.size() > 2) fail("post_ops", "'" + item + "': a full tensor takes no value");
            return post_op::binary(b->alg, bc, {});
        }
        if (f.size() < 3)
            fail("post_ops",
                 "'" + item + "': give the operand (" + name + ":per_tensor:V or " + name + ":per_oc:v0,v1,...)");
        return post_op::binary(b->alg, bc, parse_list(item, f[2], "value"));
    }
    if (name == "sum") {
        check_args(item, f, 3);
        const float scale = f.size() > 1 ? parse_float(item, f[1], "scale") : 1.f;
        const int32_t zp = f.size() > 2 ? int32_t(parse_int(item, f[2], "zero point")) : 0;
        return post_op::sum(scale, zp);
    }
    if (name == "scale_shift") {
        if (f.size() != 3) fail("post_ops", "'" + item + "': expected scale_shift:SCALES:SHIFTS");
        return post_op::scale_shift_op(parse_list(item, f[1], "scale"), parse_list(item, f[2], "shift"));
    }
    if (name == "prelu") {
        if (f.size() != 2) fail("post_ops", "'" + item + "': expected prelu:SLOPES");
        return post_op::prelu(parse_list(item, f[1], "slope"));
    }
    if (name == "fq") {
        if (f.size() != 6) fail("post_ops", "'" + item + "': expected fq:LEVELS:IN_LO:IN_HI:OUT_LO:OUT_HI");
        const int64_t levels = parse_int(item, f[1], "levels");
        if (levels < 2 || levels > 65536)
            fail("post_ops", "'" + item + "': levels must be in [2, 65536] (got " + std::to_string(levels) + ")");
        return post_op::fake_quantize(int(levels), parse_list(item, f[2], "in_lo"), parse_list(item, f[3], "in_hi"),
                                      parse_list(item, f[4], "out_lo"), parse_list(item, f[5], "out_hi"));
    }
    if (name == "dw" || name == "dw_conv") {
        if (f.size() != 6) fail("post_ops", "'" + item + "': expected dw:STRIDE:MID_DT:WEIGHTS:BIAS:SCALES");
        const int64_t stride = parse_int(item, f[1], "stride");
        const dtype mid = parse_dtype(f[2], "post_ops: '" + item + "': mid_dt");
        std::vector<int8_t> wei;
        for (const std::string &x : split(f[3], ',')) {
            const int64_t v = parse_int(item, trim(x), "weight");
            if (v < -128 || v > 127)
                fail("post_ops", "'" + item + "': weight " + std::to_string(v) + " is outside [-128, 127]");
            wei.push_back(int8_t(v));
        }
        auto opt = [&](const std::string &s, const char *what) {
            return s == "none" ? std::vector<float>() : parse_list(item, s, what);
        };
        return post_op::dw_conv(int(stride), mid, std::move(wei), opt(f[4], "bias"), opt(f[5], "scale"));
    }
    fail("post_ops", "unknown post-op '" + name + "'");
}

// ------------------------------------------------------------- validation
std::string field(size_t i, const char *name) {
    return "post_ops[" + std::to_string(i) + "]" + (name[0] ? "." : "") + name;
}

void check_finite(size_t i, const char *name, float v) {
    if (!std::isfinite(v)) fail(field(i, name), "must be finite (got " + fmt(v) + ")");
}

void check_vec(size_t i, const char *name, const std::vector<float> &v, int64_t oc, bool allow_empty = false) {
    const int64_t n = int64_t(v.size());
    if (!(n == 1 || n == oc || (allow_empty && n == 0)))
        fail(field(i, name), "expected 1 or OC=" + std::to_string(oc) + " values (got " + std::to_string(n) + ")");
    for (size_t j = 0; j < v.size(); ++j)
        if (!std::isfinite(v[j]))
            fail(field(i, name), "value #" + std::to_string(j) + " must be finite (got " + fmt(v[j]) + ")");
}

float at(const std::vector<float> &v, int64_t c) { return v.size() == 1 ? v[0] : v[c]; }

void validate_one(const post_op &p, size_t i, int64_t oc) {
    switch (p.k) {
    case post_op::kind::eltwise:
        if (!find_eltwise(p.alg)) fail(field(i, "alg"), "unknown eltwise algorithm");
        check_finite(i, "alpha", p.alpha);
        check_finite(i, "beta", p.beta);
        if (p.alg == eltwise_alg::clip && p.alpha > p.beta)
            fail(field(i, "alpha"), "clip's lower bound " + fmt(p.alpha) + " is above its upper bound " + fmt(p.beta));
        return;
    case post_op::kind::binary: {
        if (int(p.balg) < 0 || int(p.balg) > int(binary_alg::min)) fail(field(i, "balg"), "unknown binary algorithm");
        const int64_t n = int64_t(p.scale.size());
        switch (p.bcast) {
        case broadcast::per_tensor:
            if (n != 1) fail(field(i, "scale"), "a per_tensor operand needs 1 value (got " + std::to_string(n) + ")");
            break;
        case broadcast::per_oc:
            if (n != oc)
                fail(field(i, "scale"),
                     "a per_oc operand needs OC=" + std::to_string(oc) + " values (got " + std::to_string(n) + ")");
            break;
        case broadcast::full:
            if (n != 0) fail(field(i, "scale"), "a full operand is passed at execution, not as values");
            break;
        default: fail(field(i, "bcast"), "unknown broadcast");
        }
        check_vec(i, "scale", p.scale, oc, /*allow_empty=*/true);
        if (p.balg == binary_alg::div)
            for (float v : p.scale)
                if (v == 0.f) fail(field(i, "scale"), "division by zero");
        return;
    }
    case post_op::kind::sum: check_finite(i, "sum_scale", p.sum_scale); return;
    case post_op::kind::scale_shift:
        check_vec(i, "scale", p.scale, oc);
        check_vec(i, "shift", p.shift, oc);
        return;
    case post_op::kind::prelu: check_vec(i, "scale", p.scale, oc); return;
    case post_op::kind::fake_quantize: {
        if (p.levels < 2 || p.levels > 65536)
            fail(field(i, "levels"), "must be in [2, 65536] (got " + std::to_string(p.levels) + ")");
        check_vec(i, "in_lo", p.in_lo, oc);
        check_vec(i, "in_hi", p.in_hi, oc);
        check_vec(i, "out_lo", p.out_lo, oc);
        check_vec(i, "out_hi", p.out_hi, oc);
        const bool per_c = p.in_lo.size() > 1 || p.in_hi.size() > 1;
        for (int64_t c = 0; c < (per_c ? oc : 1); ++c)
            if (!(at(p.in_lo, c) < at(p.in_hi, c)))
                fail(field(i, "in_lo"), "must be below in_hi (channel " + std::to_string(c) + ": " +
                                            fmt(at(p.in_lo, c)) + " >= " + fmt(at(p.in_hi, c)) + ")");
        return;
    }
    case post_op::kind::dw_conv: {
        if (p.dw_stride != 1 && p.dw_stride != 2)
            fail(field(i, "dw_stride"), "must be 1 or 2 (got " + std::to_string(p.dw_stride) + ")");
        if (p.dw_mid_dt != dtype::u8 && p.dw_mid_dt != dtype::s8)
            fail(field(i, "dw_mid_dt"),
                 std::string("the intermediate must be u8 or s8 (got ") + to_string(p.dw_mid_dt) + ")");
        if (int64_t(p.dw_wei.size()) != 9 * oc)
            fail(field(i, "dw_wei"),
                 "expected 9·OC=" + std::to_string(9 * oc) + " weights (got " + std::to_string(p.dw_wei.size()) + ")");
        if (!p.dw_bias.empty() && int64_t(p.dw_bias.size()) != oc)
            fail(field(i, "dw_bias"), "expected none or OC=" + std::to_string(oc) + " values (got " +
                                          std::to_string(p.dw_bias.size()) + ")");
        for (size_t j = 0; j < p.dw_bias.size(); ++j)
            if (!std::isfinite(p.dw_bias[j]))
                fail(field(i, "dw_bias"), "value #" + std::to_string(j) + " must be finite");
        check_vec(i, "dw_scales", p.dw_scales, oc, /*allow_empty=*/true);
        return;
    }
    }
    fail(field(i, "kind"), "unknown post-op kind " + std::to_string(int(p.k)));
}

} // namespace

post_ops parse_post_ops(const std::string &text, int64_t oc) {
    if (oc < 1) fail("oc", "must be positive (got " + std::to_string(oc) + ")");
    post_ops ops;
    const std::string all = trim(text);
    if (all.empty() || all == "none") return ops;
    const auto items = split(all, ';');
    for (size_t i = 0; i < items.size(); ++i) {
        const std::string item = trim(items[i]);
        if (item.empty()) fail("post_ops", "empty item #" + std::to_string(i) + " in '" + text + "'");
        ops.push_back(parse_item(item));
    }
    validate(ops, oc);
    return ops;
}

std::string to_string(const post_ops &ops) {
    std::string s;
    for (const post_op &p : ops) {
        if (!s.empty()) s += ";";
        switch (p.k) {
        case post_op::kind::eltwise: {
            const named_eltwise *e = find_eltwise(p.alg);
            s += e ? e->name : "unknown_eltwise";
            const float da = e ? e->alpha : 0.f, db = e ? e->beta : 0.f;
            if (p.beta != db) s += ":" + fmt(p.alpha) + ":" + fmt(p.beta);
            else if (p.alpha != da) s += ":" + fmt(p.alpha);
            break;
        }
        case post_op::kind::binary:
            s += binary_name(p.balg);
            s += p.bcast == broadcast::per_tensor ? ":per_tensor" : p.bcast == broadcast::per_oc ? ":per_oc" : ":full";
            if (p.bcast == broadcast::per_tensor && p.scale.size() == 1) s += ":" + fmt(p.scale[0]);
            break;
        case post_op::kind::sum:
            s += "sum";
            if (p.sum_zp != 0) s += ":" + fmt(p.sum_scale) + ":" + std::to_string(p.sum_zp);
            else if (p.sum_scale != 1.f) s += ":" + fmt(p.sum_scale);
            break;
        case post_op::kind::scale_shift:
            s += p.scale.size() == 1 && p.shift.size() == 1 ? "scale_shift:per_tensor" : "scale_shift";
            break;
        case post_op::kind::prelu: s += p.scale.size() == 1 ? "prelu:per_tensor" : "prelu"; break;
        case post_op::kind::fake_quantize: {
            const bool per_c = p.in_lo.size() > 1 || p.in_hi.size() > 1 || p.out_lo.size() > 1 || p.out_hi.size() > 1;
            s += per_c ? "fq:per_channel" : "fq:per_tensor";
            if (p.levels != 256) s += ":" + std::to_string(p.levels);
            break;
        }
        case post_op::kind::dw_conv:
            s += "dw:" + std::to_string(p.dw_stride) + ":" + to_string(p.dw_mid_dt);
            s += p.dw_bias.empty() ? ":nobias" : ":bias";
            break;
        }
    }
    return s;
}

std::string to_text(const post_ops &ops) {
    std::string s;
    for (const post_op &p : ops) {
        if (!s.empty()) s += ";";
        switch (p.k) {
        case post_op::kind::binary:
            s += std::string(binary_name(p.balg)) + ":" + to_string(p.bcast);
            if (p.bcast != broadcast::full) s += ":" + list_text(p.scale);
            break;
        case post_op::kind::scale_shift: s += "scale_shift:" + list_text(p.scale) + ":" + list_text(p.shift); break;
        case post_op::kind::prelu: s += "prelu:" + list_text(p.scale); break;
        case post_op::kind::fake_quantize:
            s += "fq:" + std::to_string(p.levels) + ":" + list_text(p.in_lo) + ":" + list_text(p.in_hi) + ":" +
                 list_text(p.out_lo) + ":" + list_text(p.out_hi);
            break;
        case post_op::kind::dw_conv: {
            s += "dw:" + std::to_string(p.dw_stride) + ":" + to_string(p.dw_mid_dt) + ":";
            for (size_t j = 0; j < p.dw_wei.size(); ++j) s += (j ? "," : "") + std::to_string(int(p.dw_wei[j]));
            s += ":" + (p.dw_bias.empty() ? std::string("none") : list_text(p.dw_bias));
            s += ":" + (p.dw_scales.empty() ? std::string("none") : list_text(p.dw_scales));
            break;
        }
        default: s += to_string(post_ops{p}); // eltwise, sum: the short form has every value
        }
    }
    return s;
}

void validate(const post_ops &ops, int64_t oc) {
    if (oc < 1) fail("oc", "must be positive (got " + std::to_string(oc) + ")");
    int dw = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
        validate_one(ops[i], i, oc);
        if (ops[i].k == post_op::kind::dw_conv && ++dw > 1) fail(field(i, ""), "at most one dw conv item");
        // Before the dw item the post-ops act on the intermediate, which no
        // tensor holds: nothing may read a tensor of its shape.
        if (dw == 0 && ops[i].k == post_op::kind::sum)
            for (size_t j = i + 1; j < ops.size(); ++j)
                if (ops[j].k == post_op::kind::dw_conv)
                    fail(field(i, ""), "a sum before the dw conv item has no destination to read (put it after)");
        if (dw == 0 && ops[i].k == post_op::kind::binary && ops[i].bcast == broadcast::full)
            for (size_t j = i + 1; j < ops.size(); ++j)
                if (ops[j].k == post_op::kind::dw_conv)
                    fail(field(i, ""), "a full-tensor binary before the dw conv item would read the intermediate "
                                       "(put it after)");
    }
}

} // namespace qconv
