// NumPy .npy files in and out (the driver's --input and --output-dir).
//
// Format (numpy.lib.format): the magic "\x93NUMPY", a major and a minor
// version byte, the header length (2 bytes little-endian in version 1.0, 4 in
// 2.0 and 3.0), then the header — a Python dict literal with 'descr',
// 'fortran_order' and 'shape' — padded with spaces and ended by '\n', then
// the data. Only little-endian (or one-byte) f4, f2, u1, i1, i4 and i8 arrays
// in C order are read; everything else is refused naming the field.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "graph/io/file_io.h"
#include "graph/ir/detail.h"
#include "qconv/graph.h"
#include "qconv/graph_onnx.h"

namespace qconv::graph {

namespace {

// The value of key `key` in the header dict: the text up to the next ',' at
// depth 0 (or the closing '}'), spaces trimmed.
std::string dict_value(const std::string &h, const std::string &key, const std::string &what) {
    const std::string k1 = "'" + key + "'", k2 = "\"" + key + "\"";
    size_t p = h.find(k1);
    if (p == std::string::npos) p = h.find(k2);
    if (p == std::string::npos) fail(what, "the header has no '" + key + "'");
    p = h.find(':', p + k1.size());
    if (p == std::string::npos) fail(what, "the header's '" + key + "' has no value");
    ++p;
    int depth = 0;
    size_t e = p;
    for (; e < h.size(); ++e) {
        const char c = h[e];
        if (c == '(' || c == '[') ++depth;
        else if (c == ')' || c == ']') --depth;
        else if ((c == ',' || c == '}') && depth == 0) break;
    }
    std::string v = h.substr(p, e - p);
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.front()))) v.erase(v.begin());
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
    return v;
}

} // namespace

tensor parse_npy(const void *data, size_t size, const std::string &what) {
    const auto *b = static_cast<const uint8_t *>(data);
    if (size < 10 || std::memcmp(b, "\x93NUMPY", 6) != 0) fail(what, "not a .npy file (no \\x93NUMPY magic)");
    const int major = b[6];
    size_t hlen, hstart;
    if (major == 1) {
        hlen = b[8] | (size_t(b[9]) << 8);
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (size < 12) fail(what, "truncated header");
        hlen = b[8] | (size_t(b[9]) << 8) | (size_t(b[10]) << 16) | (size_t(b[11]) << 24);
        hstart = 12;
    } else {
        fail(what, "format version " + std::to_string(major) + "." + std::to_string(b[7]) +
                       " is not supported (1.0, 2.0, 3.0)");
    }
    if (hlen > size - hstart) fail(what, "truncated header");
    const std::string h(reinterpret_cast<const char *>(b + hstart), hlen);
    if (h.empty() || h.front() != '{') fail(what, "the header is not a dict");

    std::string descr = dict_value(h, "descr", what);
    if (descr.size() < 2 || (descr.front() != '\'' && descr.front() != '"') || descr.back() != descr.front())
        fail(what, "descr " + descr + " is not a simple type string (structured arrays are not supported)");
    descr = descr.substr(1, descr.size() - 2);
    if (descr.size() < 3) fail(what, "descr '" + descr + "' is not supported");
    const char order = descr[0];
    const std::string kind = descr.substr(1);
    dtype t;
    int item;
    if (kind == "f4") t = dtype::f32, item = 4;
    else if (kind == "f2") t = dtype::f16, item = 2;
    else if (kind == "u1") t = dtype::u8, item = 1;
    else if (kind == "i1") t = dtype::s8, item = 1;
    else if (kind == "i4") t = dtype::s32, item = 4;
    else if (kind == "i8") t = dtype::s64, item = 8;
    else fail(what, "descr '" + descr + "' is not supported (f4, f2, u1, i1, i4, i8)");
    if (order == '>' && item > 1) fail(what, "descr '" + descr + "' is big-endian (little-endian only)");
    if (order != '<' && order != '|' && !(order == '>' && item == 1))
        fail(what, "descr '" + descr + "' has an unknown byte order");

    const std::string fo = dict_value(h, "fortran_order", what);
    if (fo == "True") fail(what, "fortran_order is True (C order only)");
    if (fo != "False") fail(what, "fortran_order '" + fo + "' is not False");

    const std::string sh = dict_value(h, "shape", what);
    if (sh.size() < 2 || sh.front() != '(' || sh.back() != ')') fail(what, "shape " + sh + " is not a tuple");
    shape_t shape;
    std::string num;
    for (size_t i = 1; i < sh.size(); ++i) {
        const char c = sh[i];
        if (c >= '0' && c <= '9') {
            num += c;
            if (num.size() > 12) fail(what, "shape " + sh + " has a dimension above 2^31");
        } else if (c == ',' || c == ')') {
            if (!num.empty()) shape.push_back(std::stoll(num));
            else if (c == ',' || !shape.empty()) {
                if (c == ',') fail(what, "shape " + sh + " is malformed");
            }
            num.clear();
        } else if (!std::isspace(static_cast<unsigned char>(c)) && c != 'L') {
            fail(what, "shape " + sh + " is malformed");
        }
    }
    if (shape.size() > 8) fail(what, "shape " + sh + " has rank above 8");
    check_shape(shape, what); // no zero or oversized dims, before allocating
    const int64_t n = elems_of(shape);
    const size_t body = size - hstart - hlen;
    if (static_cast<uint64_t>(body) != static_cast<uint64_t>(n) * item)
        fail(what, "holds " + std::to_string(body) + " data bytes, shape " + to_string(shape) + " of " + descr +
                       " needs " + std::to_string(n * item) +
                       (body < static_cast<uint64_t>(n) * item ? " (truncated)" : ""));
    // The data is the tensor's storage as it is (every type read is stored
    // natively, little-endian).
    const uint8_t *d = b + hstart + hlen;
    tensor out(t, shape);
    if (n) std::memcpy(out.bytes.data(), d, static_cast<size_t>(n) * item);
    return out;
}

tensor read_npy(const std::string &path) {
    const std::string bytes =
        detail::read_regular_file(path, max_npy_bytes, "2 GiB (graph::max_npy_bytes)", "a .npy file");
    return parse_npy(bytes.data(), bytes.size(), "npy '" + path + "'");
}

void write_npy(const std::string &path, const tensor &t) {
    if (static_cast<int64_t>(t.bytes.size()) != storage_bytes(t.type, t.elems()))
        fail("npy", "tensor of shape " + to_string(t.shape) + " holds " + std::to_string(t.bytes.size()) + " bytes");
    // Types with a NumPy dtype are written as they are, in plain (row-major) order;
    // bf16, u4 and i4 as f32.
    std::string descr;
    tensor v = t.to_layout(layout::plain);
    switch (t.type) {
    case dtype::f32: descr = "<f4"; break;
    case dtype::f16: descr = "<f2"; break;
    case dtype::u8: descr = "|u1"; break;
    case dtype::s8: descr = "|i1"; break;
    case dtype::s32: descr = "<i4"; break;
    case dtype::s64: descr = "<i8"; break;
    default:
        descr = "<f4";
        v = tensor::from_values(dtype::f32, t.shape, t.values());
        break;
    }
    std::string shape = "(";
    for (size_t i = 0; i < t.shape.size(); ++i)
        shape += std::to_string(t.shape[i]) + (t.shape.size() == 1 ? "," : i + 1 < t.shape.size() ? ", " : "");
    shape += ")";
    std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
    // Total header (magic 6 + version 2 + length 2 + dict + '\n') a multiple of 64.
    const size_t total = 10 + h.size() + 1;
    h.append((64 - total % 64) % 64, ' ');
    h += '\n';
    std::ofstream f(path, std::ios::binary);
    if (!f) fail("file", "cannot write '" + path + "'");
    const char head[10] = {
        '\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<char>(h.size() & 0xFF), static_cast<char>(h.size() >> 8)};
    f.write(head, 10);
    f << h;
    f.write(reinterpret_cast<const char *>(v.bytes.data()), static_cast<std::streamsize>(v.bytes.size()));
    if (!f) fail("file", "write to '" + path + "' failed");
}

} // namespace qconv::graph
