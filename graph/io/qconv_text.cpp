// The text form of a lowered convolution: the text format's qconv="..."
// attribute (graph/io/qconv_text.h). Nothing but the text writer and reader
// sees this text; the IR holds the typed qconv_spec.
#include "graph/io/qconv_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include "core/lowering.h"
#include "core/text.h"

namespace qconv::graph::detail {

namespace {
// The shortest text of a float that reads back (as the reader does: strtod,
// then the cast to float) to the same float; 9 digits at most for a finite
// one (fmt_double of the widened value would go to 17 and try each length).
std::string fmt_float(float v) {
    char buf[32];
    for (int prec = 6; prec <= 17; ++prec) {
        std::snprintf(buf, sizeof buf, "%.*g", prec, static_cast<double>(v));
        const float back = static_cast<float>(std::strtod(buf, nullptr));
        if (back == v || (std::isnan(back) && std::isnan(v))) break;
    }
    return buf;
}

std::string floats(const std::vector<float> &v) {
    std::string r;
    for (size_t i = 0; i < v.size(); ++i) r += (i ? "," : "") + fmt_float(v[i]);
    return r.empty() ? "none" : r;
}
double number(const std::string &t, const std::string &field) {
    try {
        size_t pos = 0;
        const double v = std::stod(t, &pos);
        if (pos == t.size()) return v;
    } catch (const std::exception &) {
    }
    fail(field, "'" + t + "' is not a number");
}
std::vector<float> float_list(const std::string &t, const std::string &field) {
    std::vector<float> r;
    if (t == "none") return r;
    for (const auto &w : qconv::detail::split(t, ',')) r.push_back(static_cast<float>(number(w, field)));
    return r;
}
} // namespace

std::string qconv_text(const qconv_spec &s) {
    const conv_problem &p = s.p;
    std::ostringstream o;
    conv_desc d = p.desc;
    d.name.clear();
    o << "desc=" << d.str() << ";src=" << qconv::to_string(p.src_dt) << ";dst=" << qconv::to_string(p.dst_dt) << ";zp=";
    const zero_point &z = p.src_zp;
    if (z.k == zero_point::kind::none) o << "none";
    else {
        o << (z.k == zero_point::kind::per_tensor ? "tensor:" : "channel:");
        for (size_t i = 0; i < z.values.size(); ++i) o << (i ? "," : "") << z.values[i];
    }
    o << ";scales=" << floats(p.scales) << ";bias=" << floats(s.bias) << ";dst_zp=" << p.dst_zp << ";residual="
      << (!s.residual ? "none"
          : s.sum     ? "sum"
                      : "add")
      << ";ops=" << to_text(p.ops);
    return o.str();
}

qconv_spec parse_qconv_text(const std::string &text, const std::string &where) {
    qconv_spec s;
    try {
        const size_t ops_at = text.find(";ops=");
        if (ops_at == std::string::npos) fail("qconv", "no ops= field");
        std::map<std::string, std::string> kv;
        for (const auto &f : qconv::detail::split(text.substr(0, ops_at), ';')) {
            const size_t eq = f.find('=');
            if (eq == std::string::npos) fail("qconv", "field '" + f + "' has no '='");
            kv[f.substr(0, eq)] = f.substr(eq + 1);
        }
        for (const char *k : {"desc", "src", "dst", "zp", "scales", "bias", "dst_zp", "residual"})
            if (!kv.count(k)) fail("qconv", std::string("no ") + k + "= field");
        s.p.desc = conv_desc::parse(kv["desc"]);
        s.p.src_dt = parse_dtype(kv["src"], "qconv: src");
        s.p.dst_dt = parse_dtype(kv["dst"], "qconv: dst");
        const std::string &z = kv["zp"];
        if (z != "none") {
            const size_t c = z.find(':');
            const std::string k = z.substr(0, c == std::string::npos ? 0 : c);
            if (k != "tensor" && k != "channel") fail("qconv: zp", "expected none, tensor:V or channel:V,...");
            std::vector<int32_t> v;
            for (const auto &w : qconv::detail::split(z.substr(c + 1), ','))
                v.push_back(static_cast<int32_t>(number(w, "qconv: zp")));
            s.p.src_zp = k == "tensor" ? zero_point::tensor(v.at(0)) : zero_point::channel(v);
        }
        s.p.scales = float_list(kv["scales"], "qconv: scales");
        s.bias = float_list(kv["bias"], "qconv: bias");
        s.p.with_bias = !s.bias.empty();
        s.p.dst_zp = static_cast<int32_t>(number(kv["dst_zp"], "qconv: dst_zp"));
        const std::string &rk = kv["residual"];
        if (rk != "none" && rk != "add" && rk != "sum") fail("qconv: residual", "expected none, add or sum");
        s.residual = rk != "none";
        s.sum = rk == "sum";
        const std::string ops = text.substr(ops_at + 5);
        s.p.ops = ops.empty() ? post_ops{} : parse_post_ops(ops, s.p.desc.oc);
    } catch (const error &e) {
        fail(where, e.what());
    }
    s.check(where);
    return s;
}

} // namespace qconv::graph::detail
