// The graph text format: parser and writer (grammar in include/qconv/graph.h
// and examples/README.md). Parsing is two-phase — every line first, then the
// input names are resolved — so forward references work and cycles and
// dangling inputs are reported with their line.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "graph/io/qconv_text.h"
#include "graph/ir/detail.h"
#include "qconv/graph.h"
#include "qconv/graph_onnx.h"

namespace qconv::graph {

namespace {

struct token {
    enum kind { word, str, punct, end } k = end;
    std::string text;
};

class lexer {
public:
    lexer(const std::string &s, int line) : s_(s), line_(line) {}
    token next() {
        skip();
        token t;
        if (p_ >= s_.size() || s_[p_] == '#') return t;
        const char c = s_[p_];
        if (c == '"') {
            size_t e = s_.find('"', p_ + 1);
            if (e == std::string::npos) err("unterminated string");
            t = {token::str, s_.substr(p_ + 1, e - p_ - 1)};
            p_ = e + 1;
        } else if (std::string("()[]{},=").find(c) != std::string::npos) {
            t = {token::punct, std::string(1, c)};
            ++p_;
        } else if (is_word(c)) {
            size_t e = p_;
            while (e < s_.size() && is_word(s_[e])) ++e;
            t = {token::word, s_.substr(p_, e - p_)};
            p_ = e;
        } else {
            err(std::string("unexpected character '") + c + "'");
        }
        return t;
    }
    token peek() {
        const size_t save = p_;
        token t = next();
        p_ = save;
        return t;
    }
    void expect(const std::string &punct) {
        token t = next();
        if (t.k != token::punct || t.text != punct)
            err("expected '" + punct + "'" +
                (t.k == token::end ? " before the end of the line" : " before '" + t.text + "'"));
    }
    std::string word(const char *what) {
        token t = next();
        if (t.k != token::word) err(std::string("expected ") + what);
        return t.text;
    }
    // Everything up to the matching ')' (for generator specs), p_ just after '('.
    std::string raw_until_close() {
        size_t e = s_.find(')', p_);
        if (e == std::string::npos) err("missing ')'");
        std::string r = s_.substr(p_, e - p_);
        p_ = e + 1;
        return r;
    }
    [[noreturn]] void err(const std::string &what) const { fail("line " + std::to_string(line_), what); }

private:
    static bool is_word(char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' || c == '+' ||
               c == ':' || c == '/' || c == '?';
    }
    void skip() {
        while (p_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[p_]))) ++p_;
    }
    const std::string &s_;
    size_t p_ = 0;
    int line_;
};

int64_t to_int(lexer &lx, const std::string &w) {
    try {
        size_t pos = 0;
        const long long v = std::stoll(w, &pos);
        if (pos != w.size()) throw std::invalid_argument(w);
        return v;
    } catch (const std::exception &) {
        lx.err("expected an integer, got '" + w + "'");
    }
}
double to_double(lexer &lx, const std::string &w) {
    try {
        size_t pos = 0;
        const double v = std::stod(w, &pos);
        if (pos != w.size()) throw std::invalid_argument(w);
        return v;
    } catch (const std::exception &) {
        lx.err("expected a number, got '" + w + "'");
    }
}
std::vector<std::string> word_list(lexer &lx) {
    lx.expect("[");
    std::vector<std::string> r;
    if (lx.peek().k == token::punct && lx.peek().text == "]") {
        lx.next();
        return r;
    }
    for (;;) {
        r.push_back(lx.word("a value"));
        token t = lx.next();
        if (t.k == token::punct && t.text == "]") return r;
        if (t.k != token::punct || t.text != ",") lx.err("expected ',' or ']' in a list");
    }
}
std::vector<int64_t> int_list(lexer &lx) {
    std::vector<int64_t> r;
    for (const auto &w : word_list(lx)) r.push_back(to_int(lx, w));
    return r;
}
bool to_bool(lexer &lx, const std::string &w) {
    if (w == "true") return true;
    if (w == "false") return false;
    lx.err("expected true or false, got '" + w + "'");
}

// A node as written, before its inputs are resolved.
struct pending {
    node *n;
    std::vector<std::string> inputs;
    std::string generator; // a Constant's "random(1, 0, 15)": run once every shape is known
};

// A generator's name and arguments, checked (everything but the shape).
struct generator_spec {
    std::string name;
    std::vector<double> a;
    std::string text() const; // "random(1, 0, 15)"
};
generator_spec check_generator(dtype t, const std::string &spec);

// Attributes of the ops of graph/ops/data_movement.cpp: Slice, Pad, Resize, DepthToSpace.
void parse_moving_attr(lexer &lx, attributes &a, op k, const std::string &key) {
    auto one_of = [&](std::initializer_list<const char *> names) {
        const std::string w = lx.word("a word");
        std::string all;
        for (const char *s : names) {
            if (w == s) return w;
            all += (all.empty() ? "" : ", ") + std::string(s);
        }
        lx.err(key + " must be one of " + all + ", got '" + w + "'");
    };
    if (k == op::Slice && key == "starts") a.starts = int_list(lx);
    else if (k == op::Slice && key == "ends") a.ends = int_list(lx);
    else if (k == op::Slice && key == "axes") a.axes = int_list(lx);
    else if (k == op::Slice && key == "steps") a.steps = int_list(lx);
    else if (k == op::Pad && key == "pads_begin") a.pads_begin = int_list(lx);
    else if (k == op::Pad && key == "pads_end") a.pads_end = int_list(lx);
    else if (k == op::Pad && key == "value") a.pad_value = to_double(lx, lx.word("a number"));
    else if (k == op::Pad && key == "mode") a.padding = one_of({"constant", "edge", "reflect", "wrap"});
    else if (k == op::Resize && key == "mode") a.resize_mode = one_of({"nearest", "linear"});
    else if (k == op::Resize && key == "coordinate_mode")
        a.coordinate_mode = one_of({"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"});
    else if (k == op::Resize && key == "nearest_mode")
        a.nearest_mode = one_of({"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"});
    else if (k == op::Resize && key == "sizes") a.sizes = int_list(lx);
    else if (k == op::DepthToSpace && key == "block") a.block = int_list(lx);
    else if (k == op::DepthToSpace && key == "mode") a.crd = one_of({"DCR", "CRD"}) == "CRD";
    else if (k == op::Resize && key == "scales") {
        a.scales.clear();
        for (const auto &w : word_list(lx)) a.scales.push_back(to_double(lx, w));
    } else lx.err(std::string("unknown attribute '") + key + "' for " + to_string(k));
}

// Attributes of ConvTranspose.
void parse_conv_transpose_attr(lexer &lx, attributes &a, const std::string &key) {
    if (key == "strides") a.strides = int_list(lx);
    else if (key == "pads_begin") a.pads_begin = int_list(lx);
    else if (key == "pads_end") a.pads_end = int_list(lx);
    else if (key == "dilations") a.dilations = int_list(lx);
    else if (key == "output_padding") a.output_padding = int_list(lx);
    else if (key == "group") a.group = to_int(lx, lx.word("an integer"));
    else lx.err("unknown attribute '" + key + "' for ConvTranspose");
}

void parse_attr(lexer &lx, node &n, const std::string &key) {
    auto &a = n.attr;
    const op k = n.kind;
    const bool pool = k == op::MaxPool || k == op::AvgPool;
    const bool conv = k == op::Convolution || k == op::GroupConvolution || pool;
    const bool has_axis =
        k == op::QuantizeLinear || k == op::DequantizeLinear || k == op::Concat || k == op::Flatten || k == op::Softmax;
    if (key == "name") {
        token t = lx.next();
        if (t.k != token::str && t.k != token::word) lx.err("name needs a value");
        n.friendly_name = t.text;
    } else if (key == "rt") {
        lx.expect("{");
        if (lx.peek().k == token::punct && lx.peek().text == "}") {
            lx.next();
            return;
        }
        for (;;) {
            const std::string rk = lx.word("an rt key");
            lx.expect("=");
            token v = lx.next();
            if (v.k != token::word && v.k != token::str) lx.err("rt value expected");
            n.rt_info[rk] = v.text;
            token t = lx.next();
            if (t.k == token::punct && t.text == "}") return;
            if (t.k != token::punct || t.text != ",") lx.err("expected ',' or '}' in rt");
        }
    } else if (k == op::ConvTranspose) {
        parse_conv_transpose_attr(lx, a, key);
    } else if (k == op::Convert && key == "to") {
        a.type = parse_dtype(lx.word("a type"), "line " + std::to_string(n.line));
    } else if (k == op::Reshape && key == "shape") {
        a.target = int_list(lx);
    } else if (k == op::Reshape && key == "special_zero") {
        a.special_zero = to_bool(lx, lx.word("true or false"));
    } else if (k == op::Transpose && key == "order") {
        a.order = int_list(lx);
    } else if (conv && key == "strides") {
        a.strides = int_list(lx);
    } else if (conv && key == "pads_begin") {
        a.pads_begin = int_list(lx);
    } else if (conv && key == "pads_end") {
        a.pads_end = int_list(lx);
    } else if (conv && !pool && key == "dilations") {
        a.dilations = int_list(lx);
    } else if (conv && key == "auto_pad") {
        const std::string w = lx.word("a pad mode");
        if (w == "explicit") a.auto_pad = pad_mode::explicit_pads;
        else if (w == "valid") a.auto_pad = pad_mode::valid;
        else if (w == "same_upper") a.auto_pad = pad_mode::same_upper;
        else if (w == "same_lower") a.auto_pad = pad_mode::same_lower;
        else lx.err("auto_pad must be explicit, valid, same_upper or same_lower, got '" + w + "'");
    } else if (k == op::MatMul && key == "transpose_a") {
        a.transpose_a = to_bool(lx, lx.word("true or false"));
    } else if (k == op::MatMul && key == "transpose_b") {
        a.transpose_b = to_bool(lx, lx.word("true or false"));
    } else if (k == op::Gelu && key == "approximation") {
        const std::string w = lx.word("erf or tanh");
        if (w != "erf" && w != "tanh") lx.err("approximation must be erf or tanh");
        a.gelu_tanh = w == "tanh";
    } else if (k == op::FakeQuantize && key == "levels") {
        a.levels = to_int(lx, lx.word("an integer"));
    } else if (has_axis && key == "axis") {
        a.axis = to_int(lx, lx.word("an integer"));
    } else if (pool && key == "kernel") {
        a.kernel = int_list(lx);
    } else if (pool && key == "rounding_type") {
        const std::string w = lx.word("floor or ceil");
        if (w != "floor" && w != "ceil") lx.err("rounding_type must be floor or ceil, got '" + w + "'");
        a.ceil_mode = w == "ceil";
    } else if (k == op::AvgPool && key == "exclude_pad") {
        a.exclude_pad = to_bool(lx, lx.word("true or false"));
    } else if (k == op::ReduceMean && key == "axes") {
        a.axes = int_list(lx);
    } else if (k == op::Slice || k == op::Pad || k == op::Resize || k == op::DepthToSpace) {
        parse_moving_attr(lx, a, k, key);
    } else if (k == op::ReduceMean && key == "keep_dims") {
        a.keep_dims = to_bool(lx, lx.word("true or false"));
    } else if (k == op::QConvolution && key == "qconv") {
        token t = lx.next();
        if (t.k != token::str) lx.err("qconv needs a quoted value");
        a.qconv = std::make_shared<const detail::qconv_spec>(
            detail::parse_qconv_text(t.text, "line " + std::to_string(n.line) + ": qconv"));
    } else if (k == op::QConvolution && key == "to") {
        a.type = parse_dtype(lx.word("a type"), "line " + std::to_string(n.line));
    } else if (k == op::Clamp && key == "min") {
        a.clamp_min = to_double(lx, lx.word("a number"));
    } else if (k == op::Clamp && key == "max") {
        a.clamp_max = to_double(lx, lx.word("a number"));
    } else {
        lx.err(std::string("unknown attribute '") + key + "' for " + to_string(k));
    }
}

// "f32[1,2,3]"; a Parameter's dims may be `?` (dynamic_dim), checked at 1.
void parse_typed_shape(lexer &lx, node &n) {
    n.attr.type = parse_dtype(lx.word("an element type"), "line " + std::to_string(n.line));
    n.attr.shape.clear();
    shape_t probe;
    for (const std::string &w : word_list(lx)) {
        if (w == "?" && n.kind != op::Parameter)
            lx.err("'?' (a run-time dimension) is allowed in Parameter shapes only");
        n.attr.shape.push_back(w == "?" ? dynamic_dim : to_int(lx, w));
        probe.push_back(w == "?" ? 1 : n.attr.shape.back());
    }
    try {
        check_shape(probe, "shape");
    } catch (const error &e) {
        lx.err(e.what());
    }
}

// "[1,?,1024]"
std::string shape_text(const shape_t &s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + (s[i] == dynamic_dim ? "?" : std::to_string(s[i]));
    return r + "]";
}

std::shared_ptr<constant_data> inline_values(lexer &lx, const node &n) {
    const auto words = word_list(lx);
    const int64_t count = elems_of(n.attr.shape);
    if (static_cast<int64_t>(words.size()) != count)
        lx.err(std::to_string(words.size()) + " values given, shape " + to_string(n.attr.shape) + " needs " +
               std::to_string(count));
    auto d = std::make_shared<constant_data>();
    d->bytes.assign(storage_bytes(n.attr.type, count), 0);
    for (int64_t i = 0; i < count; ++i) {
        const double v = to_double(lx, words[i]);
        if (is_integer(n.attr.type) &&
            (v != std::floor(v) || v < detail::type_min(n.attr.type) || v > detail::type_max(n.attr.type)))
            lx.err("value " + words[i] + " is not a valid " + ir_name(n.attr.type));
        detail::store(n.attr.type, d->bytes.data(), i, v);
    }
    return d;
}

pending parse_line(graph &g, const std::string &text, int line) {
    lexer lx(text, line);
    const std::string id = lx.word("a node id");
    lx.expect("=");
    const std::string opname = lx.word("an op name");
    op kind;
    try {
        kind = parse_op(opname, "line " + std::to_string(line));
    } catch (const error &) {
        lx.err("unknown op '" + opname + "'");
    }
    if (g.find(id)) lx.err("node id '" + id + "' is defined twice");
    node *n = g.add(kind, {}, {}, id);
    n->line = line;
    pending p{n, {}, {}};
    if (kind == op::Parameter || kind == op::Constant) {
        parse_typed_shape(lx, *n);
        if (kind == op::Constant) {
            token t = lx.peek();
            if (t.k == token::punct && t.text == "[") {
                n->data = inline_values(lx, *n);
            } else if (t.k == token::word) {
                const std::string gen = lx.word("a generator");
                lx.expect("(");
                p.generator = gen + "(" + lx.raw_until_close() + ")";
                try {
                    (void)check_generator(n->attr.type, p.generator); // the data comes once every shape is known
                } catch (const error &e) {
                    lx.err(e.what());
                }
            } else {
                lx.err("a Constant needs values: [..], random(seed, lo, hi), pow2(seed, emin, emax) or fill(v)");
            }
        }
    } else {
        lx.expect("(");
        if (!(lx.peek().k == token::punct && lx.peek().text == ")")) {
            for (;;) {
                p.inputs.push_back(lx.word("an input id"));
                token t = lx.next();
                if (t.k == token::punct && t.text == ")") break;
                if (t.k != token::punct || t.text != ",") lx.err("expected ',' or ')' in the input list");
            }
        } else {
            lx.next();
        }
    }
    std::set<std::string> given;
    for (token t = lx.next(); t.k != token::end; t = lx.next()) {
        if (t.k != token::word) lx.err("expected an attribute, got '" + t.text + "'");
        lx.expect("=");
        parse_attr(lx, *n, t.text);
        given.insert(t.text);
    }
    if (kind == op::Convert && !given.count("to")) lx.err("Convert needs to=<type>");
    if (kind == op::Clamp && (!given.count("min") || !given.count("max"))) lx.err("Clamp needs min=<v> and max=<v>");
    if ((kind == op::MaxPool || kind == op::AvgPool) && !given.count("kernel"))
        lx.err(std::string(to_string(kind)) + " needs kernel=[kh,kw]");
    if (kind == op::ReduceMean && !given.count("axes")) lx.err("ReduceMean needs axes=[...]");
    if (kind == op::Slice && (!given.count("starts") || !given.count("ends")))
        lx.err("Slice needs starts=[...] and ends=[...]");
    if (kind == op::Pad && (!given.count("pads_begin") || !given.count("pads_end")))
        lx.err("Pad needs pads_begin=[...] and pads_end=[...]");
    if (kind == op::Resize && given.count("scales") == given.count("sizes"))
        lx.err("Resize needs scales=[...] or sizes=[...] (one of them)");
    return p;
}

std::string gen_args(const std::string &spec, std::vector<double> *out) {
    const size_t l = spec.find('('), r = spec.rfind(')');
    if (l == std::string::npos || r == std::string::npos || r < l) fail("generator", "malformed '" + spec + "'");
    std::string name = spec.substr(0, l);
    std::stringstream ss(spec.substr(l + 1, r - l - 1));
    std::string item;
    while (std::getline(ss, item, ',')) {
        size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
        if (b == std::string::npos) fail("generator", "empty argument in '" + spec + "'");
        item = item.substr(b, e - b + 1);
        try {
            size_t pos = 0;
            out->push_back(std::stod(item, &pos));
            if (pos != item.size()) throw std::invalid_argument(item);
        } catch (const std::exception &) {
            fail("generator", "argument '" + item + "' of " + name + " is not a number");
        }
    }
    return name;
}

// Shortest text that reads back as the same float.
std::string fmt_float(float v) {
    char buf[64];
    for (int prec = 6; prec <= 9; ++prec) {
        std::snprintf(buf, sizeof buf, "%.*g", prec, static_cast<double>(v));
        if (static_cast<float>(std::strtod(buf, nullptr)) == v) break;
    }
    return buf;
}

std::string attrs_text(const node &n) {
    const auto &a = n.attr;
    std::string r;
    auto list = [](const std::vector<int64_t> &v) { return to_string(v); };
    switch (n.kind) {
    case op::Convert: r += std::string(" to=") + ir_name(a.type); break;
    case op::Reshape: r += " shape=" + list(a.target) + (a.special_zero ? " special_zero=true" : ""); break;
    case op::Transpose: r += " order=" + list(a.order); break;
    case op::Convolution:
    case op::GroupConvolution:
        r += " strides=" + list(a.strides) + " pads_begin=" + list(a.pads_begin) + " pads_end=" + list(a.pads_end) +
             " dilations=" + list(a.dilations);
        if (a.auto_pad != pad_mode::explicit_pads) r += std::string(" auto_pad=") + to_string(a.auto_pad);
        break;
    case op::ConvTranspose:
        r += " strides=" + list(a.strides) + " pads_begin=" + list(a.pads_begin) + " pads_end=" + list(a.pads_end) +
             " dilations=" + list(a.dilations);
        if (a.output_padding != std::vector<int64_t>{0, 0}) r += " output_padding=" + list(a.output_padding);
        if (a.group != 1) r += " group=" + std::to_string(a.group);
        break;
    case op::MatMul:
        if (a.transpose_a) r += " transpose_a=true";
        if (a.transpose_b) r += " transpose_b=true";
        break;
    case op::Gelu:
        if (a.gelu_tanh) r += " approximation=tanh";
        break;
    case op::MaxPool:
    case op::AvgPool:
        r += " kernel=" + list(a.kernel) + " strides=" + list(a.strides) + " pads_begin=" + list(a.pads_begin) +
             " pads_end=" + list(a.pads_end);
        if (a.ceil_mode) r += " rounding_type=ceil";
        if (a.auto_pad != pad_mode::explicit_pads) r += std::string(" auto_pad=") + to_string(a.auto_pad);
        if (n.kind == op::AvgPool && a.exclude_pad) r += " exclude_pad=true";
        break;
    case op::FakeQuantize: r += " levels=" + std::to_string(a.levels); break;
    case op::QuantizeLinear:
    case op::DequantizeLinear:
    case op::Concat:
    case op::Flatten:
    case op::Softmax: r += " axis=" + std::to_string(a.axis); break;
    case op::ReduceMean: r += " axes=" + list(a.axes) + (a.keep_dims ? " keep_dims=true" : ""); break;
    case op::Clamp: r += " min=" + detail::fmt_double(a.clamp_min) + " max=" + detail::fmt_double(a.clamp_max); break;
    case op::QConvolution:
        r += std::string(" to=") + ir_name(a.type) + " qconv=\"" +
             (a.qconv ? detail::qconv_text(*a.qconv) : std::string()) + "\"";
        break;
    case op::Slice:
        r += " starts=" + list(a.starts) + " ends=" + list(a.ends);
        if (!a.axes.empty()) r += " axes=" + list(a.axes);
        if (!a.steps.empty()) r += " steps=" + list(a.steps);
        break;
    case op::Pad:
        r += " pads_begin=" + list(a.pads_begin) + " pads_end=" + list(a.pads_end);
        if (a.padding != "constant") r += " mode=" + a.padding;
        else r += " value=" + detail::fmt_double(a.pad_value);
        break;
    case op::Resize: {
        r += " mode=" + a.resize_mode + " coordinate_mode=" + a.coordinate_mode;
        if (a.resize_mode == "nearest") r += " nearest_mode=" + a.nearest_mode;
        if (!a.sizes.empty()) r += " sizes=" + list(a.sizes);
        std::string s;
        for (double v : a.scales) s += (s.empty() ? "" : ",") + detail::fmt_double(v);
        if (!a.scales.empty()) r += " scales=[" + s + "]";
        break;
    }
    case op::DepthToSpace: r += " block=" + list(a.block) + (a.crd ? " mode=CRD" : " mode=DCR"); break;
    default: break;
    }
    return r;
}

std::string generator_spec::text() const {
    std::string r = name + "(";
    for (size_t i = 0; i < a.size(); ++i) r += (i ? ", " : "") + detail::fmt_double(a[i]);
    return r + ")";
}

generator_spec check_generator(dtype t, const std::string &spec) {
    generator_spec g;
    g.name = gen_args(spec, &g.a);
    const std::vector<double> &a = g.a;
    const bool integer = is_integer(t);
    auto check_int = [&](double v) {
        if (integer && (v != std::floor(v) || v < detail::type_min(t) || v > detail::type_max(t)))
            fail("generator", g.text() + ": " + detail::fmt_double(v) + " is not a valid " + ir_name(t));
    };
    if (g.name == "fill") {
        if (a.size() != 1) fail("generator", "fill(v) takes one argument");
        check_int(a[0]);
    } else if (g.name == "random") {
        if (a.size() != 3) fail("generator", "random(seed, lo, hi) takes three arguments");
        if (a[0] < 0 || a[0] != std::floor(a[0]) || a[0] > 9007199254740992.0)
            fail("generator", "random: seed must be an integer in [0, 2^53]");
        if (a[1] > a[2]) fail("generator", "random: lo > hi");
        if (integer && (std::fabs(a[1]) > 9007199254740992.0 || std::fabs(a[2]) > 9007199254740992.0))
            fail("generator", "random: integer bounds must be within ±2^53");
        check_int(a[1]);
        check_int(a[2]);
    } else if (g.name == "pow2") {
        if (a.size() != 3) fail("generator", "pow2(seed, emin, emax) takes three arguments");
        if (integer) fail("generator", "pow2 needs a floating-point type");
        if (a[1] > a[2] || a[1] != std::floor(a[1]) || a[2] != std::floor(a[2]) || a[1] < -200 || a[2] > 200)
            fail("generator", "pow2: emin, emax must be integers in [-200, 200] with emin <= emax");
        if (a[0] < 0 || a[0] != std::floor(a[0]) || a[0] > 9007199254740992.0)
            fail("generator", "pow2: seed must be an integer in [0, 2^53]");
    } else {
        fail("generator", "unknown generator '" + g.name + "' (expected random, pow2 or fill)");
    }
    return g;
}

} // namespace

std::shared_ptr<constant_data> generate(dtype t, const shape_t &s, const std::string &spec) {
    const generator_spec g = check_generator(t, spec);
    const std::vector<double> &a = g.a;
    check_shape(s, "generator");
    const int64_t n = elems_of(s);
    auto d = std::make_shared<constant_data>();
    d->bytes.assign(storage_bytes(t, n), 0);
    const bool integer = is_integer(t);
    if (g.name == "fill") {
        for (int64_t i = 0; i < n; ++i) detail::store(t, d->bytes.data(), i, a[0]);
    } else if (g.name == "random") {
        detail::rng r(static_cast<uint64_t>(a[0]));
        for (int64_t i = 0; i < n; ++i) {
            const double v =
                integer ? static_cast<double>(r.integer(static_cast<int64_t>(a[1]), static_cast<int64_t>(a[2])))
                        : a[1] + r.uniform() * (a[2] - a[1]);
            detail::store(t, d->bytes.data(), i, v);
        }
    } else { // pow2
        detail::rng r(static_cast<uint64_t>(a[0]));
        for (int64_t i = 0; i < n; ++i) {
            const int e = static_cast<int>(r.integer(static_cast<int64_t>(a[1]), static_cast<int64_t>(a[2])));
            const double v = (r.next() & 1 ? -1.0 : 1.0) * std::ldexp(1.0, e);
            detail::store(t, d->bytes.data(), i, v);
        }
    }
    d->generator = g.text();
    return d;
}

std::unique_ptr<graph> parse(const std::string &text) {
    auto g = std::make_unique<graph>();
    std::vector<pending> nodes;
    std::istringstream in(text);
    std::string line;
    for (int no = 1; std::getline(in, line); ++no) {
        size_t b = line.find_first_not_of(" \t\r");
        if (b == std::string::npos || line[b] == '#') continue;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        nodes.push_back(parse_line(*g, line, no));
    }
    for (auto &p : nodes)
        for (const auto &name : p.inputs) {
            node *in = g->find(name);
            if (!in) fail("line " + std::to_string(p.n->line), "input '" + name + "' is not defined");
            p.n->inputs.push_back(in);
        }
    // Every shape before any data: topological order first (cycles are
    // reported before shapes), then shapes, then what a run needs — and only
    // then are the constants generated.
    detail::infer_shapes(*g);
    check_run_memory(*g);
    for (auto &p : nodes) {
        if (p.generator.empty()) continue;
        try {
            p.n->data = generate(p.n->attr.type, p.n->attr.shape, p.generator);
        } catch (const error &e) {
            fail("line " + std::to_string(p.n->line), e.what());
        }
    }
    g->infer();
    return g;
}

std::unique_ptr<graph> load_file(const std::string &path) {
    // By extension: an ONNX model (graph/io/onnx_reader.cpp), else the text format.
    if (path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0) return load_onnx(path);
    // A model file describes something to compute: a directory, an empty
    // file and a graph without a Result are bad input, not an empty run.
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) fail("file", "'" + path + "' is a directory, not a graph file");
    std::ifstream f(path, std::ios::binary);
    if (!f) fail("file", "cannot open '" + path + "'");
    // At most max_file_bytes, whatever the file is (a device or a pipe may never
    // end), text only, lines of at most max_line_bytes.
    std::string text;
    char buf[65536];
    while (f.read(buf, sizeof buf) || f.gcount() > 0) {
        const size_t got = static_cast<size_t>(f.gcount());
        if (std::memchr(buf, '\0', got)) fail("file", "'" + path + "' holds a NUL byte: not a graph text file");
        text.append(buf, got);
        if (static_cast<int64_t>(text.size()) > max_file_bytes)
            fail("file", "'" + path + "' is larger than the limit of " + std::to_string(max_file_bytes >> 20) +
                             " MiB (graph::max_file_bytes)");
    }
    if (f.bad()) fail("file", "error reading '" + path + "'");
    int line = 1;
    for (size_t b = 0; b < text.size(); ++line) {
        const size_t e = std::min(text.find('\n', b), text.size());
        if (static_cast<int64_t>(e - b) > max_line_bytes)
            fail("file", "'" + path + "' line " + std::to_string(line) + " is longer than the limit of " +
                             std::to_string(max_line_bytes >> 20) + " MiB (graph::max_line_bytes)");
        b = e + 1;
    }
    std::unique_ptr<graph> g;
    try {
        g = parse(text);
    } catch (const error &e) {
        throw error(std::string(e.what()) + " (in " + path + ")");
    }
    if (g->nodes().empty()) fail("file", "'" + path + "' holds no node");
    if (g->results().empty()) fail("file", "'" + path + "' has no Result node: nothing would be computed");
    return g;
}

std::string to_text(const graph &g) {
    std::string out;
    // With `?`: the inferred shapes at two values tell which dims follow it
    // (printed `?` in the trailing comments).
    std::map<std::string, shape_t> other;
    if (g.is_dynamic()) try {
            auto probe = g.clone();
            probe->bind_dynamic(g.dynamic_value() == 2 ? 3 : 2);
            probe->infer();
            for (const auto &n : probe->nodes()) other[n->id] = n->out_shape;
        } catch (const error &) {
            other.clear();
        }
    auto out_shape = [&](const node &n) {
        shape_t s = n.out_shape;
        auto it = other.find(n.id);
        if (it != other.end() && it->second.size() == s.size())
            for (size_t i = 0; i < s.size(); ++i)
                if (it->second[i] != s[i]) s[i] = dynamic_dim;
        return shape_text(s);
    };
    for (const node *n : g.topo_order()) {
        std::string l = n->id + " = " + to_string(n->kind);
        if (n->kind == op::Parameter || n->kind == op::Constant) {
            l += std::string(" ") + ir_name(n->attr.type) + shape_text(n->attr.shape);
            if (n->kind == op::Constant) {
                if (n->data && !n->data->generator.empty()) {
                    l += " " + n->data->generator;
                } else {
                    l += " [";
                    const int64_t cnt = elems_of(n->attr.shape);
                    const bool f32 = !is_integer(n->attr.type);
                    for (int64_t i = 0; i < cnt; ++i)
                        l += (i ? ", " : "") +
                             (f32 ? fmt_float(static_cast<float>(n->value(i))) : detail::fmt_double(n->value(i)));
                    l += "]";
                }
            }
        } else {
            l += "(";
            for (size_t i = 0; i < n->inputs.size(); ++i) l += (i ? ", " : "") + n->inputs[i]->id;
            l += ")";
        }
        l += attrs_text(*n);
        if (n->friendly_name != n->id) l += " name=\"" + n->friendly_name + "\"";
        if (!n->rt_info.empty()) {
            l += " rt={";
            bool first = true;
            for (const auto &[k, v] : n->rt_info) {
                l += (first ? "" : ", ") + k + "=\"" + v + "\"";
                first = false;
            }
            l += "}";
        }
        if (n->kind != op::Parameter && n->kind != op::Constant && !n->out_shape.empty())
            l += "  # " + std::string(ir_name(n->out_type)) + out_shape(*n);
        out += l + "\n";
    }
    return out;
}

void save_file(const graph &g, const std::string &path) {
    std::ofstream f(path);
    if (!f) fail("file", "cannot write '" + path + "'");
    f << to_text(g);
    if (!f) fail("file", "write to '" + path + "' failed");
}

} // namespace qconv::graph
