// The ONNX reader: a ModelProto (ONNX's generated protobuf classes, Debian's
// libonnx-dev) into the graph IR. docs/graph.md, "ONNX", has the op table.
//
// One pass over the nodes, in the file's (topological) order: every ONNX value
// name maps to the IR node that produces it; each ONNX node adds its IR nodes
// and infers them at once, so a shape or type that does not fit is reported
// with the ONNX node. A weight decompression is rewritten on the way:
//  * a weight decompression — MatMulNBits, or DequantizeLinear of constant
//    weights feeding a MatMul — is written as the executor's compressed-MatMul
//    pattern, MatMul(X, [Reshape](Multiply(Convert(Wq) − Convert(ZP), Scale)),
//    transpose_b=true), with Wq, ZP and Scale laid out [N, K/G, G] / [N, K/G, 1].
// Unused nodes are pruned at the end, and the forms of Gelu written with Erf or
// Tanh (read as those ops) become Gelu nodes (fuse_gelu, graph/passes/fuse_gelu.cpp). Errors: qconv::error starting with
// "node 'NAME' (#INDEX, OP)" or "node #INDEX (OP)", the attribute or input
// named after it; whole-model problems start with "model", "opset", "input",
// "output" or "initializer 'NAME'".
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>

#include "graph/io/file_io.h"
#include "graph/ir/detail.h"
#include "graph/ops/ops.h"
#include "qconv/graph.h"
#include "qconv/graph_onnx.h"

namespace qconv::graph {

namespace {

namespace pb = ::onnx;
namespace fs = std::filesystem;

// TensorProto.DataType values. data_type is an int32 field, so the 4-bit types
// of newer ONNX (UINT4 = 21, INT4 = 22; not in ONNX 1.12's enum) read as integers.
enum onnx_type : int {
    t_float = 1,
    t_uint8 = 2,
    t_int8 = 3,
    t_uint16 = 4,
    t_int16 = 5,
    t_int32 = 6,
    t_int64 = 7,
    t_string = 8,
    t_bool = 9,
    t_float16 = 10,
    t_double = 11,
    t_uint32 = 12,
    t_uint64 = 13,
    t_bfloat16 = 16,
    t_uint4 = 21,
    t_int4 = 22,
};

std::string onnx_type_name(int t) {
    switch (t) {
    case t_float: return "FLOAT";
    case t_uint8: return "UINT8";
    case t_int8: return "INT8";
    case t_uint16: return "UINT16";
    case t_int16: return "INT16";
    case t_int32: return "INT32";
    case t_int64: return "INT64";
    case t_string: return "STRING";
    case t_bool: return "BOOL";
    case t_float16: return "FLOAT16";
    case t_double: return "DOUBLE";
    case t_uint32: return "UINT32";
    case t_uint64: return "UINT64";
    case t_bfloat16: return "BFLOAT16";
    case t_uint4: return "UINT4";
    case t_int4: return "INT4";
    default: return "type " + std::to_string(t);
    }
}

std::optional<dtype> to_dtype(int t) {
    switch (t) {
    case t_float: return dtype::f32;
    case t_float16: return dtype::f16;
    case t_bfloat16: return dtype::bf16;
    case t_uint8: return dtype::u8;
    case t_int8: return dtype::s8;
    case t_uint4: return dtype::u4;
    case t_int4: return dtype::s4;
    case t_int32: return dtype::s32;
    case t_int64: return dtype::s64;
    default: return std::nullopt;
    }
}
const char *supported_types = "FLOAT, FLOAT16, BFLOAT16, UINT8, INT8, UINT4, INT4, INT32 or INT64";

bool is_float(dtype t) { return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16; }

// A name usable as a node id in the text format (letters, digits, _ . - / :).
std::string id_of(const std::string &name) {
    std::string r;
    for (char c : name) {
        const bool ok =
            std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' || c == '/' || c == ':';
        r += ok ? c : '_';
    }
    if (r.empty()) r = "v";
    return r;
}
// A friendly name the text format can quote (no '"', no control characters).
std::string quotable(const std::string &s) {
    std::string r;
    for (char c : s) r += (c == '"' || static_cast<unsigned char>(c) < 0x20) ? '_' : c;
    return r;
}

// A decoded tensor: type, shape and packed IR storage.
struct tensor_value {
    dtype type = dtype::f32;
    shape_t shape;
    std::shared_ptr<constant_data> data;
};

// ---------------------------------------------------------- tensor data
class data_reader {
public:
    explicit data_reader(std::string base_dir) : base_(std::move(base_dir)) {}

    // `field` names the tensor in errors ("initializer 'w'", "node ... attribute 'value'").
    tensor_value read(const pb::TensorProto &t, const std::string &field) const {
        tensor_value v;
        const int dt = t.data_type();
        const auto et = to_dtype(dt);
        if (!et) fail(field, "element type " + onnx_type_name(dt) + " is not supported (" + supported_types + ")");
        v.type = *et;
        if (t.has_segment()) fail(field, "segmented tensors are not supported");
        if (t.dims_size() > 8) fail(field, "rank " + std::to_string(t.dims_size()) + " is above 8");
        for (int64_t d : t.dims()) v.shape.push_back(d);
        check_shape(v.shape, field); // before anything is allocated
        const int64_t n = elems_of(v.shape);
        const int64_t bytes = storage_bytes(v.type, n);
        v.data = std::make_shared<constant_data>();
        auto &out = v.data->bytes;
        if (t.data_location() == pb::TensorProto::EXTERNAL) {
            out = external(t, field, bytes);
            return v;
        }
        if (t.has_raw_data()) {
            if (static_cast<int64_t>(t.raw_data().size()) != bytes)
                fail(field, "raw_data holds " + std::to_string(t.raw_data().size()) + " bytes, " + ir_name(v.type) +
                                to_string(v.shape) + " needs " + std::to_string(bytes));
            out.assign(t.raw_data().begin(), t.raw_data().end());
            check_packed_padding(v, field);
            return v;
        }
        auto count = [&](int64_t have, int64_t want, const char *what) {
            if (have != want)
                fail(field, std::string(what) + " holds " + std::to_string(have) + " values, " + ir_name(v.type) +
                                to_string(v.shape) + " needs " + std::to_string(want));
        };
        out.assign(bytes, 0);
        switch (v.type) {
        case dtype::f32:
            count(t.float_data_size(), n, "float_data");
            std::memcpy(out.data(), t.float_data().data(), bytes);
            break;
        case dtype::s64:
            count(t.int64_data_size(), n, "int64_data");
            std::memcpy(out.data(), t.int64_data().data(), bytes);
            break;
        case dtype::s32:
            count(t.int32_data_size(), n, "int32_data");
            std::memcpy(out.data(), t.int32_data().data(), bytes);
            break;
        case dtype::f16:
        case dtype::bf16:
            // int32_data holds the 16-bit patterns, one per entry.
            count(t.int32_data_size(), n, "int32_data");
            for (int64_t i = 0; i < n; ++i) {
                const int32_t b = t.int32_data(static_cast<int>(i));
                if (b < 0 || b > 0xFFFF) fail(field, "int32_data[" + std::to_string(i) + "] is not a 16-bit pattern");
                const uint16_t h = static_cast<uint16_t>(b);
                std::memcpy(out.data() + 2 * i, &h, 2);
            }
            break;
        case dtype::u8:
        case dtype::s8:
            count(t.int32_data_size(), n, "int32_data");
            for (int64_t i = 0; i < n; ++i) {
                const int32_t x = t.int32_data(static_cast<int>(i));
                if (x < detail::type_min(v.type) || x > detail::type_max(v.type))
                    fail(field, "int32_data[" + std::to_string(i) + "] = " + std::to_string(x) + " is outside " +
                                    ir_name(v.type));
                out[i] = static_cast<uint8_t>(x);
            }
            break;
        case dtype::u4:
        case dtype::s4:
            // int32_data holds the packed bytes (two elements each, the first in the low nibble).
            count(t.int32_data_size(), bytes, "int32_data (packed bytes)");
            for (int64_t i = 0; i < bytes; ++i) {
                const int32_t x = t.int32_data(static_cast<int>(i));
                if (x < 0 || x > 255) fail(field, "int32_data[" + std::to_string(i) + "] is not a packed byte");
                out[i] = static_cast<uint8_t>(x);
            }
            check_packed_padding(v, field);
            break;
        case dtype::undef: fail(field, "has no element type");
        }
        return v;
    }

private:
    // An odd count of 4-bit elements leaves a high nibble unused: it must be 0
    // (so that the data means one thing whichever way it is read).
    static void check_packed_padding(tensor_value &v, const std::string &field) {
        if (bits_of(v.type) != 4) return;
        const int64_t n = elems_of(v.shape);
        if ((n & 1) && (v.data->bytes.back() >> 4)) fail(field, "the unused high nibble of the last byte is not 0");
    }

    std::vector<uint8_t> external(const pb::TensorProto &t, const std::string &field, int64_t bytes) const {
        std::string location;
        int64_t offset = 0, length = -1;
        for (const auto &kv : t.external_data()) {
            auto number = [&](const std::string &s) {
                int64_t x = 0;
                if (s.empty() || s.size() > 18)
                    fail(field, "external_data '" + kv.key() + "' = '" + s + "' is not a number");
                for (char c : s) {
                    if (c < '0' || c > '9')
                        fail(field, "external_data '" + kv.key() + "' = '" + s + "' is not a non-negative integer");
                    x = x * 10 + (c - '0');
                }
                return x;
            };
            if (kv.key() == "location") location = kv.value();
            else if (kv.key() == "offset") offset = number(kv.value());
            else if (kv.key() == "length") length = number(kv.value());
            else if (kv.key() == "checksum") continue; // not verified
            else fail(field, "external_data key '" + kv.key() + "' is not supported (location, offset, length)");
        }
        if (location.empty()) fail(field, "external data without a location");
        if (base_.empty())
            fail(field, "external data '" + location + "' needs the model's folder (load it from a file)");
        const fs::path rel(location);
        if (rel.is_absolute() || rel.has_root_name() || rel.has_root_directory())
            fail(field, "external data location '" + location + "' is absolute: it must lie in the model's folder");
        for (const auto &part : rel)
            if (part == "..") fail(field, "external data location '" + location + "' leaves the model's folder ('..')");
        std::error_code ec;
        const fs::path base = fs::canonical(base_, ec);
        if (ec) fail(field, "cannot resolve the model's folder '" + base_ + "'");
        const fs::path full = fs::weakly_canonical(base / rel, ec);
        if (ec) fail(field, "cannot resolve external data location '" + location + "'");
        // Symbolic links may point elsewhere: the resolved path must still lie below the folder.
        const auto mis = std::mismatch(base.begin(), base.end(), full.begin(), full.end());
        if (mis.first != base.end())
            fail(field, "external data location '" + location + "' resolves outside the model's folder");
        if (!fs::is_regular_file(full, ec)) fail(field, "external data file '" + location + "' is not a regular file");
        const auto size = static_cast<int64_t>(fs::file_size(full, ec));
        if (ec) fail(field, "cannot read the size of external data file '" + location + "'");
        if (size > max_onnx_bytes) fail(field, "external data file '" + location + "' is larger than 2 GiB");
        if (length >= 0 && length != bytes)
            fail(field, "external data length " + std::to_string(length) + " differs from the " +
                            std::to_string(bytes) + " bytes the tensor needs");
        if (offset > size || bytes > size - offset)
            fail(field, "external data file '" + location + "' holds " + std::to_string(size) +
                            " bytes, the tensor needs " + std::to_string(bytes) + " from offset " +
                            std::to_string(offset) + " (truncated?)");
        std::ifstream f(full, std::ios::binary);
        if (!f) fail(field, "cannot open external data file '" + location + "'");
        std::vector<uint8_t> out(static_cast<size_t>(bytes));
        f.seekg(offset);
        f.read(reinterpret_cast<char *>(out.data()), bytes);
        if (!f || f.gcount() != bytes) fail(field, "reading external data file '" + location + "' failed");
        return out;
    }

    std::string base_;
};

// Element i of a decoded tensor as a double.
double at(const tensor_value &v, int64_t i) { return detail::load(v.type, v.data->bytes.data(), i); }

// Element i of a decoded i64 tensor, exactly (a double cannot hold every int64).
int64_t i64_at(const tensor_value &v, int64_t i) {
    int64_t x;
    std::memcpy(&x, v.data->bytes.data() + i * static_cast<int64_t>(sizeof x), sizeof x);
    return x;
}

// A tensor with a zero dim and no data (an absent optional input's stand-in:
// Resize's roi or scales as exporters write them).
bool is_empty(const pb::TensorProto &t) {
    bool zero = false;
    for (int64_t d : t.dims()) {
        if (d < 0) return false;
        zero |= d == 0;
    }
    return zero && t.dims_size() <= 8 && t.raw_data().empty() && t.float_data_size() == 0 && t.int32_data_size() == 0 &&
           t.int64_data_size() == 0 && t.data_location() != pb::TensorProto::EXTERNAL;
}
std::string dims_text(const pb::TensorProto &t) { return to_string(shape_t(t.dims().begin(), t.dims().end())); }

// ------------------------------------------------------------- the reader
// One ONNX node being read: the error prefix and attribute access.
struct onnx_node {
    const pb::NodeProto &p;
    int index;
    std::string field() const {
        return (p.name().empty() ? "node #" + std::to_string(index) + " ("
                                 : "node '" + p.name() + "' (#" + std::to_string(index) + ", ") +
               p.op_type() + ")";
    }
    [[noreturn]] void fail(const std::string &what) const { qconv::fail(field(), what); }
    [[noreturn]] void fail_attr(const std::string &name, const std::string &what) const {
        fail("attribute '" + name + "': " + what);
    }
    [[noreturn]] void fail_input(int i, const std::string &what) const {
        fail("input " + std::to_string(i) + (i < p.input_size() ? " '" + p.input(i) + "'" : "") + ": " + what);
    }
    const pb::AttributeProto *attr(const std::string &name) const {
        for (const auto &a : p.attribute())
            if (a.name() == name) return &a;
        return nullptr;
    }
    // Every attribute must be one the op's reader knows.
    void known_attrs(std::initializer_list<const char *> names) const {
        for (const auto &a : p.attribute()) {
            bool ok = false;
            for (const char *k : names) ok |= a.name() == k;
            if (!ok) fail_attr(a.name(), "is not supported for " + p.op_type());
            if (!a.ref_attr_name().empty()) fail_attr(a.name(), "attribute references are not supported");
        }
    }
    const pb::AttributeProto *typed(const std::string &name, pb::AttributeProto::AttributeType t,
                                    const char *what) const {
        const auto *a = attr(name);
        if (a && a->type() != t) fail_attr(name, std::string("expected ") + what);
        return a;
    }
    int64_t get_int(const std::string &name, int64_t def) const {
        const auto *a = typed(name, pb::AttributeProto::INT, "an int");
        return a ? a->i() : def;
    }
    bool has(const std::string &name) const { return attr(name) != nullptr; }
    float get_float(const std::string &name, float def) const {
        const auto *a = typed(name, pb::AttributeProto::FLOAT, "a float");
        return a ? a->f() : def;
    }
    std::string get_string(const std::string &name, const std::string &def) const {
        const auto *a = typed(name, pb::AttributeProto::STRING, "a string");
        return a ? a->s() : def;
    }
    std::vector<int64_t> get_ints(const std::string &name, std::vector<int64_t> def) const {
        const auto *a = typed(name, pb::AttributeProto::INTS, "a list of ints");
        if (!a) return def;
        return std::vector<int64_t>(a->ints().begin(), a->ints().end());
    }
    // The number of inputs given (trailing empty names are absent inputs).
    int inputs() const {
        int n = p.input_size();
        while (n > 0 && p.input(n - 1).empty()) --n;
        return n;
    }
};

// A DequantizeLinear of constant data, kept so that a MatMul reading it can
// lay the weights out for the compressed MatMul.
struct dequantize_info {
    tensor_value x, scale;
    std::optional<tensor_value> zp;
    int64_t axis = 1, block = 0;
};

class reader {
public:
    reader(const pb::ModelProto &m, std::string base_dir, const onnx_options &o)
        : m_(m), data_(std::move(base_dir)), opt_(o) {}

    std::unique_ptr<graph> run();

private:
    // -- values
    node *value(const onnx_node &n, int i) {
        if (i >= n.p.input_size() || n.p.input(i).empty()) n.fail_input(i, "is required");
        const auto it = values_.find(n.p.input(i));
        if (it != values_.end()) return it->second;
        if (empty_.count(n.p.input(i)))
            n.fail_input(i, "is an empty tensor (shape " + empty_.at(n.p.input(i)) +
                                "): the IR has no empty tensors (only optional inputs such as Resize's roi, "
                                "scales or sizes read one, as absent)");
        n.fail_input(i, "is not defined (by an input, initializer or earlier node)");
    }
    node *optional_value(const onnx_node &n, int i) {
        if (i >= n.p.input_size() || n.p.input(i).empty()) return nullptr;
        return value(n, i);
    }
    // The constant an input holds (an initializer or a Constant node's
    // output), or the values of a DequantizeLinear of constants (evaluated
    // once, on first use: dequantized_constant).
    const tensor_value *constant_of(const onnx_node &n, int i) {
        if (i >= n.p.input_size() || n.p.input(i).empty()) return nullptr;
        node *v = value(n, i);
        const auto it = constants_.find(n.p.input(i));
        return it == constants_.end() ? dequantized_constant(n.p.input(i), v) : &it->second;
    }
    // The values of `name` when it is the output of a DequantizeLinear of
    // constants (its IR chain `v`, Convert(x) [− Convert(zp)] · scale
    // [→ Reshape]), evaluated by the IR ops' own evaluation: (x − zp)·scale
    // in the scale's type, each operation rounded once. Null otherwise.
    const tensor_value *dequantized_constant(const std::string &name, node *v);
    const tensor_value &need_constant(const onnx_node &n, int i, const char *why) {
        const tensor_value *c = constant_of(n, i);
        if (!c) n.fail_input(i, std::string("must be a constant (an initializer or a Constant node): ") + why);
        return *c;
    }
    void define(const onnx_node &n, int out, node *v) {
        if (out >= n.p.output_size() || n.p.output(out).empty()) return;
        values_[n.p.output(out)] = v;
    }

    // -- building IR nodes for ONNX node n
    node *add(const onnx_node &n, op kind, std::vector<node *> in, attributes a = {}, const std::string &suffix = "") {
        const std::string base = n.p.output_size() && !n.p.output(0).empty() ? n.p.output(0) : n.p.op_type();
        node *r = g_->add(kind, std::move(in), std::move(a), g_->unique_id(id_of(base) + suffix));
        finish(n, r);
        return r;
    }
    node *constant(const onnx_node *n, const tensor_value &v, const std::string &id) {
        node *r = g_->constant(v.type, v.shape, v.data, g_->unique_id(id_of(id)));
        if (n) finish(*n, r);
        else infer_node(*r);
        return r;
    }
    node *scalar(const onnx_node &n, dtype t, double x, const std::string &suffix) {
        tensor_value v;
        v.type = t;
        v.shape = {};
        v.data = std::make_shared<constant_data>();
        v.data->bytes.assign(storage_bytes(t, 1), 0);
        detail::store(t, v.data->bytes.data(), 0, x);
        return constant(&n, v, (n.p.output_size() ? n.p.output(0) : n.p.op_type()) + suffix);
    }
    void finish(const onnx_node &n, node *r) {
        r->rt_info["origin"] =
            quotable("onnx:" + (n.p.name().empty() ? n.p.op_type() + "#" + std::to_string(n.index) : n.p.name()));
        try {
            infer_node(*r, g_->dynamic_value());
        } catch (const error &e) {
            n.fail(e.what());
        }
    }

    void read_opsets();
    void read_inputs();
    // The IR shape of graph input `in`: its dims, symbolic ones from
    // opt_.input_shapes when given, else `?` (all of one name, `symbol`).
    shape_t input_shape(const pb::ValueInfoProto &in, const std::string &field, std::string &symbol);
    void read_node(const onnx_node &n);
    void simple_op(const onnx_node &n);
    void read_outputs();

    // op readers
    void conv(const onnx_node &n);
    void conv_transpose(const onnx_node &n);
    void pow(const onnx_node &n);
    // A Convolution / GroupConvolution (+ bias Add) of x with weights w and
    // bias b (may be null); `wd` / `bd`: their dequantization when they are a
    // DequantizeLinear of constants (the chain is then written in the shape the
    // convolution reads, [G, OCg, ICg, KH, KW] / [1, OC, 1, 1]).
    node *conv_ir(const onnx_node &n, node *x, node *w, const dequantize_info *wd, node *b, const dequantize_info *bd,
                  int wi, int bi);
    void qlinear_conv(const onnx_node &n);
    void qlinear_matmul(const onnx_node &n);
    void quantize(const onnx_node &n);
    void pool(const onnx_node &n);
    void global_average_pool(const onnx_node &n);
    void concat(const onnx_node &n);
    void clip(const onnx_node &n);
    void flatten(const onnx_node &n);
    void prelu(const onnx_node &n);
    void softmax(const onnx_node &n);
    void batch_norm(const onnx_node &n);
    void div(const onnx_node &n);
    void hard_sigmoid(const onnx_node &n);
    void slice(const onnx_node &n);
    void split(const onnx_node &n);
    void pad(const onnx_node &n);
    void resize(const onnx_node &n);
    void depth_to_space(const onnx_node &n);
    void squeeze(const onnx_node &n);
    // Shape computations on constants and known shapes, evaluated at load.
    void shape(const onnx_node &n);
    void gather(const onnx_node &n);
    void range(const onnx_node &n);
    void expand(const onnx_node &n);
    void constant_of_shape(const onnx_node &n);
    // Output `out` of n is the constant v (a Constant node, known as a constant).
    void define_constant(const onnx_node &n, int out, const tensor_value &v);
    // Defines output 0 of n as r, or, when every input of r is a Constant, as
    // a Constant of r's values (evaluated now: Concat, Slice, Squeeze, Unsqueeze
    // of constants — the shape subgraphs whose results Reshape reads).
    void define_folded(const onnx_node &n, node *r);
    void reduce_mean(const onnx_node &n);
    // The axes of Squeeze / Unsqueeze / ReduceMean / Split's sizes: the attribute `name`
    // before opset `since` (an input from then on: input `i`); `given` says whether any was.
    std::vector<int64_t> axes_of(const onnx_node &n, const char *name, int i, int64_t since, bool *given);
    // A Reshape of x to `target`; a dim of x that follows the run-time dimension `?`
    // is copied (0) when it is one of the first `keep` dims, else refused
    // (the first `keep` dims stay where they are).
    node *reshape_to(const onnx_node &n, node *x, const shape_t &target, size_t keep, const std::string &suffix);
    // Per dim of v's shape: whether it changes with the run-time dimension `?`.
    std::vector<bool> dynamic_dims(const node *v) const;
    bool any_dynamic(const node *v) const;
    // An opset check: fails naming the attribute when the model imports less than `since`.
    void need_opset(const onnx_node &n, const char *attr, int64_t since, const std::string &what) const {
        if (opset_ < since)
            n.fail_attr(attr, what + " needs opset " + std::to_string(since) + " (the model imports opset " +
                                  std::to_string(opset_) + ")");
    }
    // Resize's scales (input 2) or sizes (input 3) into a's scales / sizes of the last two dims.
    void resize_targets(const onnx_node &n, const node *x, attributes &a);
    // A constant 1-D i64 or i32 input as integers (`what` names it in errors).
    std::vector<int64_t> int_list(const onnx_node &n, int i, const char *what);
    // Whether optional input i is given (named).
    bool given(const onnx_node &n, int i) const { return i < n.p.input_size() && !n.p.input(i).empty(); }
    // Whether optional input i is given and not an empty tensor (which reads as absent).
    bool given_nonempty(const onnx_node &n, int i) const { return given(n, i) && !empty_.count(n.p.input(i)); }
    // Whether dim d of v's shape changes with the run-time dimension `?`.
    bool follows_dynamic(const node *v, size_t d) const;
    // Convert(q) [− Convert(zp)] · scale of constants, q read in shape `qs` and
    // scale / zero point in shape `ss` (the same data).
    node *dequant_chain(const onnx_node &n, const dequantize_info &d, const shape_t &qs, const shape_t &ss,
                        const std::string &name, const std::string &suffix);
    // DequantizeLinear of an activation x (IR op), scale and zero point IR values.
    node *dequant_act(const onnx_node &n, node *x, node *scale, node *zp, int64_t axis, const std::string &suffix);
    // The dequantization info of a QLinear op's constant input q (scale, zp given).
    dequantize_info qlinear_const(const onnx_node &n, int q, int scale, int zp, int64_t axis);
    void gemm(const onnx_node &n);
    void matmul(const onnx_node &n);
    void matmul_nbits(const onnx_node &n);
    void dequantize(const onnx_node &n);
    // Before opset 13 QuantizeLinear / DequantizeLinear are per tensor: no
    // axis, one scale (refused otherwise).
    void per_tensor_before_13(const onnx_node &n) {
        if (opset_ >= 13) return;
        if (n.has("axis")) need_opset(n, "axis", 13, "a per-axis scale");
        const node *s = value(n, 1);
        if (elems_of(s->out_shape) != 1)
            n.fail_input(1,
                         "holds " + std::to_string(elems_of(s->out_shape)) +
                             " values: before opset 13 the scale is one value, per tensor (the model imports opset " +
                             std::to_string(opset_) + ")");
    }
    void binary(const onnx_node &n, op kind);
    void reshape(const onnx_node &n);
    void transpose(const onnx_node &n);
    void cast(const onnx_node &n);
    void constant_node(const onnx_node &n);
    void gelu(const onnx_node &n);
    // The compressed-MatMul pattern for weights Wq [N, NG, G] (or [N, K]),
    // ZP and Scale [N, NG, 1] (or [N, 1] / one value) of activation type T.
    node *compressed_matmul(const onnx_node &n, node *x, const tensor_value &wq, const tensor_value *zp,
                            const tensor_value &scale, int64_t N, int64_t K);

    const pb::ModelProto &m_;
    data_reader data_;
    const onnx_options &opt_;
    std::unique_ptr<graph> g_;
    std::map<std::string, node *> values_;
    std::map<std::string, tensor_value> constants_;
    std::map<std::string, dequantize_info> dequantized_;
    std::map<std::string, tensor_value> dequantized_values_; // dequantized_constant's answers
    // Empty tensors (a zero dim: an initializer or a Constant node) → their shape.
    std::map<std::string, std::string> empty_;
    int64_t opset_ = 0;
    bool ms_domain_ = false;
};

void reader::read_opsets() {
    bool found = false;
    for (const auto &o : m_.opset_import()) {
        if (o.domain().empty() || o.domain() == "ai.onnx") {
            found = true;
            opset_ = o.version();
            if (opset_ < 11 || opset_ > 21)
                fail("opset", "ai.onnx opset " + std::to_string(opset_) + " is not supported (11 to 21)");
        } else if (o.domain() == "com.microsoft") {
            ms_domain_ = true;
        }
    }
    if (!found) fail("opset", "the model imports no ai.onnx opset (11 to 21 are supported)");
}

shape_t reader::input_shape(const pb::ValueInfoProto &in, const std::string &field, std::string &symbol) {
    const auto &tt = in.type().tensor_type();
    const auto given = opt_.input_shapes.find(in.name());
    const shape_t *want = given == opt_.input_shapes.end() ? nullptr : &given->second;
    if (!tt.has_shape() && !want)
        fail(field, "has no shape (the IR needs ranks and static dims, one run-time dim '?'; give its shape)");
    if (!tt.has_shape()) {
        check_shape(*want, field);
        return *want;
    }
    const int rank = tt.shape().dim_size();
    if (rank > 8) fail(field, "rank " + std::to_string(rank) + " is above 8");
    if (want && static_cast<int>(want->size()) != rank)
        fail(field, "the shape given " + to_string(*want) + " has rank " + std::to_string(want->size()) +
                        ", the model's input rank " + std::to_string(rank));
    shape_t s;
    for (int i = 0; i < rank; ++i) {
        const auto &d = tt.shape().dim(i);
        const std::string dim = "dim " + std::to_string(i);
        // A dim_value of -1 (some exporters write it) is a symbolic dim without a name.
        const bool symbolic = !d.has_dim_value() || d.dim_value() == -1;
        if (!symbolic && (d.dim_value() <= 0 || d.dim_value() > max_elems))
            fail(field, dim + ": " + std::to_string(d.dim_value()) + " is not in [1, 2^31]");
        if (want) {
            const int64_t v = (*want)[i];
            if (v < 1 || v > max_elems)
                fail(field, dim + ": the shape given " + to_string(*want) + " has " + std::to_string(v) +
                                ", not in [1, 2^31]");
            if (!symbolic && v != d.dim_value())
                fail(field, dim + " is " + std::to_string(d.dim_value()) + " in the model, the shape given " +
                                to_string(*want) + " has " + std::to_string(v));
            s.push_back(v);
            continue;
        }
        if (!symbolic) {
            s.push_back(d.dim_value());
            continue;
        }
        const std::string sym = d.has_dim_param() ? d.dim_param() : "";
        if (!symbol.empty() && sym != symbol)
            fail(field, dim + ": symbolic dims '" + symbol + "' and '" + sym +
                            "' differ: the graph IR has one run-time dimension '?' (give the input's shape: "
                            "qconv-driver --shape=NAME=D,D,..., onnx_options::input_shapes)");
        symbol = sym.empty() ? "<unnamed>" : sym;
        s.push_back(dynamic_dim);
    }
    if (want) check_shape(s, field);
    return s;
}

void reader::read_inputs() {
    const auto &gp = m_.graph();
    if (gp.sparse_initializer_size())
        fail("initializer '" + gp.sparse_initializer(0).values().name() + "'", "sparse initializers are not supported");
    for (const auto &t : gp.initializer()) {
        const std::string field = "initializer '" + t.name() + "'";
        if (t.name().empty()) fail("initializer", "an initializer has no name");
        if (constants_.count(t.name()) || empty_.count(t.name())) fail(field, "defined twice");
        if (is_empty(t)) {
            empty_[t.name()] = dims_text(t);
            continue;
        }
        tensor_value v = data_.read(t, field);
        values_[t.name()] = constant(nullptr, v, t.name());
        values_[t.name()]->friendly_name = quotable(t.name());
        constants_[t.name()] = std::move(v);
    }
    // Inputs; one that is also an initializer (older exporters list them) is the constant.
    std::string symbol;
    for (const auto &[name, shape] : opt_.input_shapes) {
        bool found = false;
        for (const auto &in : gp.input()) found |= in.name() == name && !constants_.count(name) && !empty_.count(name);
        std::string names;
        for (const auto &in : gp.input())
            if (!constants_.count(in.name()) && !empty_.count(in.name()))
                names += (names.empty() ? "" : ", ") + in.name();
        if (!found)
            fail("input '" + name + "'",
                 "a shape is given, but the model has no input '" + name + "' (inputs: " + names + ")");
    }
    for (const auto &in : gp.input()) {
        if (constants_.count(in.name()) || empty_.count(in.name())) continue;
        const std::string field = "input '" + in.name() + "'";
        if (in.name().empty()) fail("input", "a graph input has no name");
        if (values_.count(in.name())) fail(field, "defined twice");
        if (!in.type().has_tensor_type()) fail(field, "only tensor inputs are supported");
        const auto &tt = in.type().tensor_type();
        const auto et = to_dtype(tt.elem_type());
        if (!et)
            fail(field,
                 "element type " + onnx_type_name(tt.elem_type()) + " is not supported (" + supported_types + ")");
        const shape_t s = input_shape(in, field, symbol);
        node *p = g_->parameter(*et, s, g_->unique_id(id_of(in.name())));
        p->friendly_name = quotable(in.name());
        try {
            infer_node(*p, g_->dynamic_value());
        } catch (const error &e) {
            fail(field, e.what());
        }
        values_[in.name()] = p;
    }
}

// ------------------------------------------------------------ the op table
struct op_entry {
    const char *name;
    void (reader::*read)(const onnx_node &);
    const char *pending; // non-null: refused with this note
};

void reader::read_node(const onnx_node &n) {
    const std::string &domain = n.p.domain(), &type = n.p.op_type();
    // Split's outputs are each read; BatchNormalization names its training outputs itself.
    const bool several = (domain.empty() || domain == "ai.onnx") && (type == "Split" || type == "BatchNormalization");
    for (int i = 1; i < n.p.output_size() && !several; ++i)
        if (!n.p.output(i).empty())
            n.fail("output " + std::to_string(i) + " '" + n.p.output(i) + "' is not supported (one output per node)");
    if (n.p.output_size() == 0 || n.p.output(0).empty()) n.fail("has no output");
    for (const auto &o : n.p.output())
        if (!o.empty() && (values_.count(o) || empty_.count(o))) n.fail("output '" + o + "' is defined twice");
    if (domain == "com.microsoft") {
        if (!ms_domain_) n.fail("domain 'com.microsoft' is not imported by the model (opset_import)");
        if (type == "MatMulNBits") return matmul_nbits(n);
        if (type == "Gelu") {
            n.known_attrs({});
            define(n, 0, add(n, op::Gelu, {value(n, 0)}));
            return;
        }
        n.fail("op com.microsoft." + type + " is not supported (com.microsoft: MatMulNBits, Gelu)");
    }
    if (!domain.empty() && domain != "ai.onnx")
        n.fail("domain '" + domain + "' is not supported (ai.onnx, com.microsoft)");
    static const op_entry table[] = {
        {"Conv", &reader::conv, nullptr},
        {"Gemm", &reader::gemm, nullptr},
        {"MatMul", &reader::matmul, nullptr},
        {"Relu", &reader::simple_op, nullptr},
        {"Gelu", &reader::gelu, nullptr},
        {"Add", &reader::simple_op, nullptr},
        {"Mul", &reader::simple_op, nullptr},
        {"Sub", &reader::simple_op, nullptr},
        {"Reshape", &reader::reshape, nullptr},
        {"Transpose", &reader::transpose, nullptr},
        {"Cast", &reader::cast, nullptr},
        {"Constant", &reader::constant_node, nullptr},
        {"Identity", &reader::simple_op, nullptr},
        {"DequantizeLinear", &reader::dequantize, nullptr},
        {"QuantizeLinear", &reader::quantize, nullptr},
        {"QLinearConv", &reader::qlinear_conv, nullptr},
        {"QLinearMatMul", &reader::qlinear_matmul, nullptr},
        {"MaxPool", &reader::pool, nullptr},
        {"AveragePool", &reader::pool, nullptr},
        {"GlobalAveragePool", &reader::global_average_pool, nullptr},
        {"Concat", &reader::concat, nullptr},
        {"Clip", &reader::clip, nullptr},
        {"Flatten", &reader::flatten, nullptr},
        {"PRelu", &reader::prelu, nullptr},
        {"Sigmoid", &reader::simple_op, nullptr},
        {"Softmax", &reader::softmax, nullptr},
        {"BatchNormalization", &reader::batch_norm, nullptr},
        {"Div", &reader::div, nullptr},
        {"HardSigmoid", &reader::hard_sigmoid, nullptr},
        {"HardSwish", &reader::hard_sigmoid, nullptr},
        {"Slice", &reader::slice, nullptr},
        {"Split", &reader::split, nullptr},
        {"Pad", &reader::pad, nullptr},
        {"Resize", &reader::resize, nullptr},
        {"DepthToSpace", &reader::depth_to_space, nullptr},
        {"Squeeze", &reader::squeeze, nullptr},
        {"Unsqueeze", &reader::squeeze, nullptr},
        {"ReduceMean", &reader::reduce_mean, nullptr},
        {"Shape", &reader::shape, nullptr},
        {"Gather", &reader::gather, nullptr},
        {"Range", &reader::range, nullptr},
        {"Expand", &reader::expand, nullptr},
        {"ConstantOfShape", &reader::constant_of_shape, nullptr},
        {"ConvTranspose", &reader::conv_transpose, nullptr},
        {"Pow", &reader::pow, nullptr},
        {"Sqrt", &reader::simple_op, nullptr},
        {"Erf", &reader::simple_op, nullptr},
        {"Tanh", &reader::simple_op, nullptr},
    };
    for (const auto &e : table) {
        if (type != e.name) continue;
        if (e.pending) n.fail(std::string("op ") + type + " " + e.pending);
        return (this->*e.read)(n);
    }
    n.fail("op " + type + " is not supported");
}

// Ops without attributes that map onto one IR op (or onto their input).
void reader::simple_op(const onnx_node &n) {
    n.known_attrs({});
    const std::string &type = n.p.op_type();
    if (type == "Relu") define(n, 0, add(n, op::Relu, {value(n, 0)}));
    else if (type == "Sigmoid") define(n, 0, add(n, op::Sigmoid, {value(n, 0)}));
    else if (type == "Sqrt") define(n, 0, add(n, op::Sqrt, {value(n, 0)}));
    else if (type == "Erf") define(n, 0, add(n, op::Erf, {value(n, 0)}));
    else if (type == "Tanh") define(n, 0, add(n, op::Tanh, {value(n, 0)}));
    else if (type == "Add") define(n, 0, add(n, op::Add, {value(n, 0), value(n, 1)}));
    else if (type == "Mul") define(n, 0, add(n, op::Multiply, {value(n, 0), value(n, 1)}));
    else if (type == "Sub") define(n, 0, add(n, op::Subtract, {value(n, 0), value(n, 1)}));
    else if (type == "Identity") {
        node *v = value(n, 0);
        values_[n.p.output(0)] = v;
        if (constants_.count(n.p.input(0))) constants_[n.p.output(0)] = constants_[n.p.input(0)];
        if (dequantized_.count(n.p.input(0))) dequantized_[n.p.output(0)] = dequantized_[n.p.input(0)];
    }
}

void reader::gelu(const onnx_node &n) {
    n.known_attrs({"approximate"});
    if (opset_ < 20) n.fail("Gelu needs opset 20 (the model imports opset " + std::to_string(opset_) + ")");
    const std::string a = n.get_string("approximate", "none");
    attributes at;
    if (a == "tanh") at.gelu_tanh = true;
    else if (a != "none") n.fail_attr("approximate", "'" + a + "' is not none or tanh");
    define(n, 0, add(n, op::Gelu, {value(n, 0)}, at));
}

// auto_pad, strides, dilations and pads of a 2-D Conv or pooling node.
attributes window_attrs(const onnx_node &n) {
    attributes a;
    const std::string ap = n.get_string("auto_pad", "NOTSET");
    if (ap == "NOTSET") a.auto_pad = pad_mode::explicit_pads;
    else if (ap == "VALID") a.auto_pad = pad_mode::valid;
    else if (ap == "SAME_UPPER") a.auto_pad = pad_mode::same_upper;
    else if (ap == "SAME_LOWER") a.auto_pad = pad_mode::same_lower;
    else n.fail_attr("auto_pad", "'" + ap + "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID");
    constexpr int64_t lim = int64_t(1) << 24;
    auto pair = [&](const char *name, int64_t lo) {
        const auto v = n.get_ints(name, {lo == 0 ? 0 : 1, lo == 0 ? 0 : 1});
        if (v.size() != 2) n.fail_attr(name, "needs 2 values for a 2-D window, got " + std::to_string(v.size()));
        for (int64_t e : v)
            if (e < lo || e > lim)
                n.fail_attr(name, std::to_string(e) + " is not in [" + std::to_string(lo) + ", 2^24]");
        return v;
    };
    a.strides = pair("strides", 1);
    a.dilations = pair("dilations", 1);
    const auto pads = n.get_ints("pads", {0, 0, 0, 0});
    if (pads.size() != 4)
        n.fail_attr("pads", "needs 4 values (top, left, bottom, right), got " + std::to_string(pads.size()));
    for (int64_t e : pads)
        if (e < 0 || e > lim) n.fail_attr("pads", std::to_string(e) + " is not in [0, 2^24]");
    if (n.has("pads") && ap != "NOTSET") n.fail_attr("pads", "cannot be given with auto_pad " + ap);
    a.pads_begin = {pads[0], pads[1]};
    a.pads_end = {pads[2], pads[3]};
    return a;
}

void reader::conv(const onnx_node &n) {
    n.known_attrs({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
    node *x = value(n, 0), *w = value(n, 1);
    node *b = optional_value(n, 2);
    const auto wd = dequantized_.find(n.p.input(1));
    const auto bd = b ? dequantized_.find(n.p.input(2)) : dequantized_.end();
    define(n, 0,
           conv_ir(n, x, w, wd == dequantized_.end() ? nullptr : &wd->second, b,
                   bd == dequantized_.end() ? nullptr : &bd->second, 1, 2));
}

node *reader::conv_ir(const onnx_node &n, node *x, node *w, const dequantize_info *wd, node *b,
                      const dequantize_info *bd, int wi, int bi) {
    if (x->out_shape.size() != 4)
        n.fail_input(0, "only 2-D convolutions are supported (NCHW, rank 4), got " + to_string(x->out_shape));
    if (w->out_shape.size() != 4) n.fail_input(wi, "weights must be rank 4 (OIHW), got " + to_string(w->out_shape));
    if (!is_float(x->out_type))
        n.fail_input(0, std::string("element type ") + ir_name(x->out_type) + " is not floating point");
    const attributes a = window_attrs(n);
    const shape_t ws = w->out_shape;
    if (n.has("kernel_shape")) {
        const auto k = n.get_ints("kernel_shape", {});
        if (k != std::vector<int64_t>{ws[2], ws[3]})
            n.fail_attr("kernel_shape", to_string(k) + " differs from the weights' " + to_string(ws));
    }
    const int64_t group = n.get_int("group", 1);
    const int64_t C = x->out_shape[1], OC = ws[0];
    if (group < 1 || C % group || OC % group || C / group != ws[1])
        n.fail_attr("group", std::to_string(group) + " does not fit " + std::to_string(C) +
                                 " input channels and weights " + to_string(ws));
    // A per-tensor or per-output-channel dequantization of constants can be
    // written in the shape the convolution reads.
    auto fits = [](const dequantize_info *d) {
        return d && d->block == 0 && (elems_of(d->scale.shape) == 1 || d->axis == 0);
    };
    node *y;
    if (group == 1) {
        y = add(n, op::Convolution, {x, w}, a, b ? "_conv" : "");
    } else {
        const shape_t gs = {group, OC / group, ws[1], ws[2], ws[3]};
        node *wg;
        const std::string wname = n.p.input(wi);
        if (fits(wd)) {
            const bool per_tensor = elems_of(wd->scale.shape) == 1;
            wg = dequant_chain(n, *wd, gs, per_tensor ? wd->scale.shape : shape_t{group, OC / group, 1, 1, 1},
                               wname + "_grouped", "_weights_grouped");
        } else if (const tensor_value *c = constant_of(n, wi)) {
            tensor_value v = *c;
            v.shape = gs;
            wg = constant(&n, v, wname + "_grouped");
        } else {
            attributes r;
            r.target = gs;
            wg = add(n, op::Reshape, {w}, r, "_weights_grouped");
        }
        y = add(n, op::GroupConvolution, {x, wg}, a, b ? "_conv" : "");
    }
    if (b) {
        if (b->out_shape != shape_t{OC})
            n.fail_input(bi, "bias must be [" + std::to_string(OC) + "], got " + to_string(b->out_shape));
        node *b4;
        const std::string bname = n.p.input(bi);
        if (fits(bd)) {
            const bool per_tensor = elems_of(bd->scale.shape) == 1;
            b4 = dequant_chain(n, *bd, {1, OC, 1, 1}, per_tensor ? bd->scale.shape : shape_t{1, OC, 1, 1},
                               bname + "_nchw", "_bias");
        } else if (const tensor_value *c = constant_of(n, bi)) {
            tensor_value v = *c;
            v.shape = {1, OC, 1, 1};
            b4 = constant(&n, v, bname + "_nchw");
        } else {
            attributes r;
            r.target = {1, OC, 1, 1};
            b4 = add(n, op::Reshape, {b}, r, "_bias");
        }
        y = add(n, op::Add, {y, b4});
    }
    return y;
}

// ConvTranspose (2-D, NCHW; `strides`, `pads`, `dilations`, `output_padding`,
// `group`, `kernel_shape` checked; `auto_pad` NOTSET or VALID; `output_shape`
// refused): the IR's ConvTranspose, a bias B as an Add of [1, OC, 1, 1].
void reader::conv_transpose(const onnx_node &n) {
    n.known_attrs(
        {"auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads", "strides"});
    node *x = value(n, 0), *w = value(n, 1), *b = optional_value(n, 2);
    if (x->out_shape.size() != 4)
        n.fail_input(0,
                     "only 2-D transposed convolutions are supported (NCHW, rank 4), got " + to_string(x->out_shape));
    if (w->out_shape.size() != 4)
        n.fail_input(1, "weights must be rank 4 ([C, OC/group, KH, KW]), got " + to_string(w->out_shape));
    if (!is_float(x->out_type))
        n.fail_input(0, std::string("element type ") + ir_name(x->out_type) + " is not floating point");
    if (n.has("output_shape")) n.fail_attr("output_shape", "is not supported (pads and output_padding are)");
    const std::string ap = n.get_string("auto_pad", "NOTSET");
    if (ap != "NOTSET" && ap != "VALID") n.fail_attr("auto_pad", "'" + ap + "' is not supported (NOTSET, VALID)");
    attributes a = window_attrs(n);
    a.auto_pad = pad_mode::explicit_pads; // VALID: no pads (window_attrs refuses pads with it)
    const shape_t &ws = w->out_shape;
    if (n.has("kernel_shape") && n.get_ints("kernel_shape", {}) != std::vector<int64_t>{ws[2], ws[3]})
        n.fail_attr("kernel_shape",
                    to_string(n.get_ints("kernel_shape", {})) + " differs from the weights' " + to_string(ws));
    a.output_padding = n.get_ints("output_padding", {0, 0});
    if (a.output_padding.size() != 2)
        n.fail_attr("output_padding", "needs 2 values, got " + std::to_string(a.output_padding.size()));
    for (size_t i = 0; i < 2; ++i)
        if (a.output_padding[i] < 0 || (a.output_padding[i] >= a.strides[i] && a.output_padding[i] >= a.dilations[i]))
            n.fail_attr("output_padding", to_string(a.output_padding) + " must be below the stride or the dilation");
    a.group = n.get_int("group", 1);
    if (a.group < 1 || x->out_shape[1] % a.group || ws[0] != x->out_shape[1])
        n.fail_attr("group", std::to_string(a.group) + " does not fit " + std::to_string(x->out_shape[1]) +
                                 " input channels and weights " + to_string(ws));
    node *y = add(n, op::ConvTranspose, {x, w}, a, b ? "_conv" : "");
    if (b) {
        const int64_t OC = y->out_shape[1];
        if (b->out_shape != shape_t{OC})
            n.fail_input(2, "bias must be [" + std::to_string(OC) + "], got " + to_string(b->out_shape));
        attributes r;
        r.target = {1, OC, 1, 1};
        node *b4 = add(n, op::Reshape, {b}, r, "_bias");
        y = add(n, op::Add, {y, b4});
    }
    define(n, 0, y);
}

// Pow with a constant exponent of one value: 2 as Multiply(x, x) (the
// square rounded once, as pow gives it), 1 as x itself; others refused.
void reader::pow(const onnx_node &n) {
    n.known_attrs({});
    node *x = value(n, 0);
    if (!is_float(x->out_type))
        n.fail_input(0, std::string("element type ") + ir_name(x->out_type) + " is not floating point");
    const tensor_value *e = constant_of(n, 1);
    if (!e) n.fail_input(1, "must be a constant (the exponent)");
    if (elems_of(e->shape) != 1 || e->shape.size() > x->out_shape.size())
        n.fail_input(1, "must be one value that does not broadcast x, got " + to_string(e->shape));
    const double v = e->type == dtype::s64 ? double(i64_at(*e, 0)) : at(*e, 0);
    if (v == 2) define(n, 0, add(n, op::Multiply, {x, x}));
    else if (v == 1) values_[n.p.output(0)] = x;
    else n.fail_input(1, "exponent " + detail::fmt_double(v) + " is not supported (2: x·x, 1: x)");
}

void reader::gemm(const onnx_node &n) {
    n.known_attrs({"alpha", "beta", "transA", "transB"});
    node *A = value(n, 0), *B = value(n, 1);
    if (A->out_shape.size() != 2) n.fail_input(0, "must be rank 2, got " + to_string(A->out_shape));
    if (B->out_shape.size() != 2) n.fail_input(1, "must be rank 2, got " + to_string(B->out_shape));
    const dtype T = A->out_type;
    if (!is_float(T)) n.fail_input(0, std::string("element type ") + ir_name(T) + " is not floating point");
    attributes a;
    const int64_t ta = n.get_int("transA", 0), tb = n.get_int("transB", 0);
    if (ta != 0 && ta != 1) n.fail_attr("transA", "must be 0 or 1");
    if (tb != 0 && tb != 1) n.fail_attr("transB", "must be 0 or 1");
    a.transpose_a = ta;
    a.transpose_b = tb;
    const float alpha = n.get_float("alpha", 1.f), beta = n.get_float("beta", 1.f);
    if (!std::isfinite(alpha)) n.fail_attr("alpha", "is not finite");
    if (!std::isfinite(beta)) n.fail_attr("beta", "is not finite");
    node *C = beta != 0.f ? optional_value(n, 2) : nullptr;
    node *y = add(n, op::MatMul, {A, B}, a, alpha != 1.f || C ? "_matmul" : "");
    const shape_t mn = y->out_shape;
    if (alpha != 1.f) y = add(n, op::Multiply, {y, scalar(n, T, alpha, "_alpha")}, {}, C ? "_scaled" : "");
    if (C) {
        if (beta != 1.f) {
            if (const tensor_value *c = constant_of(n, 2)) {
                if (c->type != T)
                    n.fail_input(2, std::string("element type ") + ir_name(c->type) + " differs from A's");
                tensor_value v = *c;
                v.data = std::make_shared<constant_data>(*c->data);
                for (int64_t i = 0; i < elems_of(v.shape); ++i)
                    detail::store(T, v.data->bytes.data(), i, static_cast<double>(beta) * at(*c, i));
                C = constant(&n, v, n.p.input(2) + "_beta");
            } else {
                C = add(n, op::Multiply, {C, scalar(n, T, beta, "_beta_value")}, {}, "_beta");
            }
        }
        y = add(n, op::Add, {y, C});
        if (y->out_shape != mn)
            n.fail_input(2, "C of shape " + to_string(C->out_shape) + " does not broadcast to " + to_string(mn));
    }
    define(n, 0, y);
}

node *reader::compressed_matmul(const onnx_node &n, node *x, const tensor_value &wq, const tensor_value *zp,
                                const tensor_value &scale, int64_t N, int64_t K) {
    const std::string out = n.p.output(0);
    const dtype T = scale.type;
    attributes to;
    to.type = T;
    node *q = constant(&n, wq, out + "_wq");
    node *d = add(n, op::Convert, {q}, to, "_wq_" + std::string(ir_name(T)));
    if (zp) {
        node *z = constant(&n, *zp, out + "_zp");
        node *cz = add(n, op::Convert, {z}, to, "_zp_" + std::string(ir_name(T)));
        d = add(n, op::Subtract, {d, cz}, {}, "_wq_centered");
    }
    node *s = constant(&n, scale, out + "_scale");
    node *w = add(n, op::Multiply, {d, s}, {}, "_weights");
    if (wq.shape.size() != 2) {
        attributes r;
        r.target = {N, K};
        w = add(n, op::Reshape, {w}, r, "_weights_nk");
    }
    attributes mm;
    mm.transpose_b = true;
    return add(n, op::MatMul, {x, w}, mm, "_matmul");
}

void reader::matmul(const onnx_node &n) {
    n.known_attrs({});
    node *A = value(n, 0), *B = value(n, 1);
    if (A->out_shape.size() < 2) n.fail_input(0, "rank-1 inputs are not supported, got " + to_string(A->out_shape));
    if (B->out_shape.size() < 2) n.fail_input(1, "rank-1 inputs are not supported, got " + to_string(B->out_shape));
    const auto dq = dequantized_.find(n.p.input(1));
    if (dq != dequantized_.end() && dq->second.x.shape.size() == 2 && A->out_type == dq->second.scale.type) {
        // DequantizeLinear(Wq [K, N]) → MatMul: the weights transposed to [N, K] for the compressed MatMul.
        const dequantize_info &d = dq->second;
        const int64_t K = d.x.shape[0], N = d.x.shape[1];
        const bool per_tensor = elems_of(d.scale.shape) == 1 && d.block == 0;
        const bool per_n = d.block == 0 && d.axis == 1;
        const bool blocked_k = d.block > 0 && d.axis == 0;
        if (per_tensor || per_n || blocked_k) {
            const int64_t G = blocked_k ? d.block : K, NG = K / G;
            auto transposed = [&](const tensor_value &src, shape_t shape, bool per_elem) {
                // per_elem: src is [K, N] → [N, K]; else src is [NG, N] (or [N]) → [N, NG].
                tensor_value t;
                t.type = src.type;
                t.shape = std::move(shape);
                t.data = std::make_shared<constant_data>();
                const int64_t rows = per_elem ? K : NG, cnt = rows * N;
                t.data->bytes.assign(storage_bytes(t.type, cnt), 0);
                for (int64_t r = 0; r < rows; ++r)
                    for (int64_t c = 0; c < N; ++c)
                        detail::store(t.type, t.data->bytes.data(), c * rows + r, at(src, r * N + c));
                return t;
            };
            const shape_t wshape = NG > 1 ? shape_t{N, NG, G} : shape_t{N, K};
            const shape_t sshape = NG > 1 ? shape_t{N, NG, 1} : shape_t{N, 1};
            const tensor_value wq = transposed(d.x, wshape, true);
            const tensor_value scale = per_tensor ? d.scale : transposed(d.scale, sshape, false);
            std::optional<tensor_value> zp;
            if (d.zp) zp = per_tensor ? *d.zp : transposed(*d.zp, sshape, false);
            node *y = compressed_matmul(n, A, wq, zp ? &*zp : nullptr, scale, N, K);
            y->id = y->friendly_name = g_->unique_id(id_of(n.p.output(0)));
            define(n, 0, y);
            return;
        }
    }
    define(n, 0, add(n, op::MatMul, {A, B}));
}

void reader::matmul_nbits(const onnx_node &n) {
    n.known_attrs({"K", "N", "bits", "block_size", "accuracy_level"});
    for (const char *req : {"K", "N", "block_size"})
        if (!n.has(req)) n.fail_attr(req, "is required");
    const int64_t K = n.get_int("K", 0), N = n.get_int("N", 0), bits = n.get_int("bits", 4);
    const int64_t bs = n.get_int("block_size", 0);
    n.get_int("accuracy_level", 0); // a hint for ONNX Runtime's kernels; the result is the formula's either way
    if (K < 1 || K > max_elems) n.fail_attr("K", std::to_string(K) + " is not in [1, 2^31]");
    if (N < 1 || N > max_elems) n.fail_attr("N", std::to_string(N) + " is not in [1, 2^31]");
    if (bits != 4 && bits != 8) n.fail_attr("bits", std::to_string(bits) + " is not supported (4 or 8)");
    if (bs < 2 || bs > K || (bs * bits) % 8)
        n.fail_attr("block_size", std::to_string(bs) + " does not fit K = " + std::to_string(K));
    if (K % bs)
        n.fail_attr("block_size", "K = " + std::to_string(K) + " is not a multiple of " + std::to_string(bs) +
                                      " (a partial last block is not supported)");
    if (n.p.input_size() > 4 && !n.p.input(4).empty()) n.fail_input(4, "g_idx (act-order) is not supported");
    if (n.inputs() > 6) n.fail("has " + std::to_string(n.inputs()) + " inputs (at most 6)");
    node *A = value(n, 0);
    const dtype T = A->out_type;
    if (!is_float(T)) n.fail_input(0, std::string("element type ") + ir_name(T) + " is not floating point");
    if (A->out_shape.size() < 2 || A->out_shape.back() != K)
        n.fail_input(0, "must be [..., " + std::to_string(K) + "], got " + to_string(A->out_shape));
    const int64_t NG = K / bs, blob = bs * bits / 8;
    const tensor_value &B = need_constant(n, 1, "the packed weights");
    if (B.type != dtype::u8 || B.shape != shape_t{N, NG, blob})
        n.fail_input(1, "must be u8[" + std::to_string(N) + "," + std::to_string(NG) + "," + std::to_string(blob) +
                            "], got " + ir_name(B.type) + to_string(B.shape));
    // Elements in B's byte order: row n, block g, element j — the low nibble first.
    tensor_value wq;
    wq.type = bits == 4 ? dtype::u4 : dtype::u8;
    wq.shape = NG > 1 ? shape_t{N, NG, bs} : shape_t{N, K};
    wq.data = B.data;
    const tensor_value &S = need_constant(n, 2, "the scales");
    if (S.type != T || elems_of(S.shape) != N * NG)
        n.fail_input(2, "must hold " + std::to_string(N * NG) + " " + ir_name(T) + " values, got " + ir_name(S.type) +
                            to_string(S.shape));
    const shape_t gshape = NG > 1 ? shape_t{N, NG, 1} : shape_t{N, 1};
    tensor_value scale = S;
    scale.shape = gshape;
    tensor_value zp;
    zp.type = wq.type;
    zp.data = std::make_shared<constant_data>();
    const int64_t zmax = (int64_t(1) << bits) - 1;
    if (const tensor_value *Z = constant_of(n, 3)) {
        zp.shape = gshape;
        zp.data->bytes.assign(storage_bytes(zp.type, N * NG), 0);
        const int64_t row_bytes = (NG * bits + 7) / 8;
        if (Z->type == dtype::u8 && elems_of(Z->shape) == N * row_bytes) {
            for (int64_t r = 0; r < N; ++r)
                for (int64_t g = 0; g < NG; ++g) {
                    const uint8_t byte = Z->data->bytes[r * row_bytes + (bits == 4 ? g / 2 : g)];
                    const int v = bits == 4 ? (byte >> (4 * (g & 1))) & 0xF : byte;
                    detail::store(zp.type, zp.data->bytes.data(), r * NG + g, v);
                }
        } else if (Z->type == T && elems_of(Z->shape) == N * NG) {
            for (int64_t i = 0; i < N * NG; ++i) {
                const double v = at(*Z, i);
                if (!(v >= 0 && v <= zmax && v == std::floor(v)))
                    n.fail_input(3, "zero point " + detail::fmt_double(v) + " is not an integer in [0, " +
                                        std::to_string(zmax) + "]");
                detail::store(zp.type, zp.data->bytes.data(), i, v);
            }
        } else {
            n.fail_input(3, "must be u8[" + std::to_string(N * row_bytes) + "] (packed) or " + ir_name(T) + "[" +
                                std::to_string(N * NG) + "], got " + ir_name(Z->type) + to_string(Z->shape));
        }
    } else {
        if (n.p.input_size() > 3 && !n.p.input(3).empty()) n.fail_input(3, "must be a constant");
        zp.shape = {1}; // the default: the middle of the range
        zp.data->bytes.assign(storage_bytes(zp.type, 1), 0);
        detail::store(zp.type, zp.data->bytes.data(), 0, double(int64_t(1) << (bits - 1)));
    }
    const tensor_value *bias = constant_of(n, 5);
    if (n.p.input_size() > 5 && !n.p.input(5).empty() && !bias) n.fail_input(5, "bias must be a constant");
    if (bias && (bias->type != T || elems_of(bias->shape) != N))
        n.fail_input(5, "bias must hold " + std::to_string(N) + " " + ir_name(T) + " values, got " +
                            ir_name(bias->type) + to_string(bias->shape));
    node *y = compressed_matmul(n, A, wq, &zp, scale, N, K);
    if (bias) {
        tensor_value b = *bias;
        b.shape = {N};
        y = add(n, op::Add, {y, constant(&n, b, n.p.output(0) + "_bias")});
    } else {
        y->id = y->friendly_name = g_->unique_id(id_of(n.p.output(0)));
    }
    define(n, 0, y);
}

node *reader::dequant_chain(const onnx_node &n, const dequantize_info &d, const shape_t &qs, const shape_t &ss,
                            const std::string &name, const std::string &suffix) {
    const dtype T = d.scale.type;
    attributes to;
    to.type = T;
    tensor_value q = d.x, sc = d.scale;
    q.shape = qs;
    sc.shape = ss;
    node *y = add(n, op::Convert, {constant(&n, q, name + "_q")}, to, suffix + "_" + std::string(ir_name(T)));
    if (d.zp) {
        tensor_value z = *d.zp;
        z.shape = ss;
        node *cz = add(n, op::Convert, {constant(&n, z, name + "_zp")}, to, suffix + "_zp_" + std::string(ir_name(T)));
        y = add(n, op::Subtract, {y, cz}, {}, suffix + "_centered");
    }
    return add(n, op::Multiply, {y, constant(&n, sc, name + "_scale")}, {}, suffix);
}

node *reader::dequant_act(const onnx_node &n, node *x, node *scale, node *zp, int64_t axis, const std::string &suffix) {
    attributes a;
    a.axis = axis;
    std::vector<node *> in = {x, scale};
    if (zp) in.push_back(zp);
    return add(n, op::DequantizeLinear, in, a, suffix);
}

// The scale (and zero point) of a QuantizeLinear / DequantizeLinear of
// activations: per tensor (one value) or per axis (1-D, x.shape[axis] values).
void check_qdq_params(const onnx_node &n, const node *x, const node *s, const node *z, int si, int zi, int64_t axis) {
    if (!is_float(s->out_type))
        n.fail_input(si, std::string("element type ") + ir_name(s->out_type) + " is not floating point");
    const int64_t r = static_cast<int64_t>(x->out_shape.size());
    if (elems_of(s->out_shape) != 1) {
        if (axis < -r || axis >= r) n.fail_attr("axis", std::to_string(axis) + " is outside rank " + std::to_string(r));
        const int64_t ax = axis < 0 ? axis + r : axis;
        if (s->out_shape != shape_t{x->out_shape[ax]})
            n.fail_input(si, "a per-axis scale must be [" + std::to_string(x->out_shape[ax]) + "] (axis " +
                                 std::to_string(axis) + " of " + to_string(x->out_shape) + "), got " +
                                 to_string(s->out_shape));
    }
    // [] with [1] (ONNX Runtime's one-channel per-axis bias): per tensor, as ORT reads it.
    if (z && z->out_shape != s->out_shape && !(elems_of(z->out_shape) == 1 && elems_of(s->out_shape) == 1))
        n.fail_input(zi, "shape " + to_string(z->out_shape) + " differs from the scale's " + to_string(s->out_shape));
}

void reader::dequantize(const onnx_node &n) {
    n.known_attrs({"axis", "block_size"});
    per_tensor_before_13(n);
    const tensor_value *xc = constant_of(n, 0);
    if (!xc) {
        // Activations: the IR's DequantizeLinear (u8/i8/i32 → the scale's type).
        node *x = value(n, 0), *s = value(n, 1), *z = optional_value(n, 2);
        if (n.get_int("block_size", 0) != 0)
            n.fail_attr("block_size", "blocked DequantizeLinear of activations (input 0 is not a constant) is not "
                                      "supported; constant weights are read");
        if (x->out_type != dtype::u8 && x->out_type != dtype::s8 && x->out_type != dtype::s32)
            n.fail_input(0, std::string("element type ") + ir_name(x->out_type) +
                                " is not supported for activations (u8, i8, i32)");
        if (z && z->out_type != x->out_type)
            n.fail_input(2, std::string("element type ") + ir_name(z->out_type) + " differs from x's");
        const int64_t axis = n.get_int("axis", 1);
        check_qdq_params(n, x, s, z, 1, 2, axis);
        define(n, 0, dequant_act(n, x, s, z, axis, ""));
        return;
    }
    const tensor_value &x = *xc;
    if (x.type != dtype::u8 && x.type != dtype::s8 && x.type != dtype::u4 && x.type != dtype::s4 &&
        x.type != dtype::s32)
        n.fail_input(0, std::string("element type ") + ir_name(x.type) + " is not supported (u8, i8, u4, i4, i32)");
    if (bits_of(x.type) == 4 && opset_ < 21)
        n.fail_input(0, "4-bit DequantizeLinear needs opset 21 (the model imports " + std::to_string(opset_) + ")");
    const tensor_value &scale = need_constant(n, 1, "the scale");
    if (!is_float(scale.type))
        n.fail_input(1, std::string("element type ") + ir_name(scale.type) + " is not floating point");
    const tensor_value *zp = constant_of(n, 2);
    if (n.p.input_size() > 2 && !n.p.input(2).empty() && !zp) n.fail_input(2, "must be a constant");
    if (zp && zp->type != x.type)
        n.fail_input(2, std::string("element type ") + ir_name(zp->type) + " differs from x's");
    if (zp && zp->shape != scale.shape && !(elems_of(zp->shape) == 1 && elems_of(scale.shape) == 1))
        n.fail_input(2, "shape " + to_string(zp->shape) + " differs from the scale's " + to_string(scale.shape));
    if (n.has("block_size") && opset_ < 21)
        n.fail_attr("block_size", "needs opset 21 (the model imports " + std::to_string(opset_) + ")");
    const int64_t r = static_cast<int64_t>(x.shape.size());
    int64_t axis = n.get_int("axis", 1);
    const int64_t block = n.get_int("block_size", 0);
    if (block < 0) n.fail_attr("block_size", "is negative");
    const bool per_tensor = elems_of(scale.shape) == 1 && scale.shape.size() <= 1 && block == 0;
    if (!per_tensor) {
        if (axis < -r || axis >= r) n.fail_attr("axis", std::to_string(axis) + " is outside rank " + std::to_string(r));
        if (axis < 0) axis += r;
    }
    const shape_t &xs = x.shape;
    tensor_value wq = x, s = scale;
    std::optional<tensor_value> z;
    if (zp) z = *zp;
    if (per_tensor) {
    } else if (block == 0) {
        if (scale.shape != shape_t{xs[axis]})
            n.fail_input(1, "per-axis scale must be [" + std::to_string(xs[axis]) + "], got " + to_string(scale.shape));
        shape_t bs(r, 1);
        bs[axis] = xs[axis];
        s.shape = bs;
        if (z) z->shape = bs;
    } else {
        if (xs[axis] % block)
            n.fail_attr("block_size", std::to_string(block) + " does not divide dimension " + std::to_string(axis) +
                                          " of " + to_string(xs) + " (a partial last block is not supported)");
        shape_t want = xs;
        want[axis] = xs[axis] / block;
        if (scale.shape != want)
            n.fail_input(1, "blocked scale must be " + to_string(want) + ", got " + to_string(scale.shape));
        // Split the blocked dim: x [.., d/B, B, ..], scale and zero point [.., d/B, 1, ..] (the same data).
        shape_t ws = xs, ss = want;
        ws[axis] = xs[axis] / block;
        ws.insert(ws.begin() + axis + 1, block);
        ss.insert(ss.begin() + axis + 1, 1);
        wq.shape = ws;
        s.shape = ss;
        if (z) z->shape = ss;
    }
    const dtype T = scale.type;
    attributes to;
    to.type = T;
    node *y = add(n, op::Convert, {constant(&n, wq, n.p.input(0) + "_q")}, to, "_" + std::string(ir_name(T)));
    if (z) {
        node *cz = add(n, op::Convert, {constant(&n, *z, n.p.input(0) + "_zp")}, to, "_zp_" + std::string(ir_name(T)));
        y = add(n, op::Subtract, {y, cz}, {}, "_centered");
    }
    y = add(n, op::Multiply, {y, constant(&n, s, n.p.input(0) + "_scale")}, {}, block ? "_blocks" : "");
    if (block) {
        attributes rs;
        rs.target = xs;
        y = add(n, op::Reshape, {y}, rs);
    }
    dequantize_info info;
    info.x = x;
    info.scale = scale;
    if (zp) info.zp = *zp;
    info.axis = axis;
    info.block = block;
    dequantized_[n.p.output(0)] = std::move(info);
    define(n, 0, y);
}

void reader::quantize(const onnx_node &n) {
    n.known_attrs({"axis", "saturate", "output_dtype", "block_size"});
    per_tensor_before_13(n);
    node *x = value(n, 0), *s = value(n, 1), *z = optional_value(n, 2);
    if (n.get_int("block_size", 0) != 0) n.fail_attr("block_size", "blocked QuantizeLinear is not supported");
    // saturate concerns float8 outputs only; the u8/i8 outputs read here always saturate.
    n.get_int("saturate", 1);
    if (!is_float(x->out_type))
        n.fail_input(0, std::string("element type ") + ir_name(x->out_type) + " is not floating point");
    if (s->out_type != x->out_type)
        n.fail_input(1,
                     std::string("element type ") + ir_name(s->out_type) + " differs from x's " + ir_name(x->out_type));
    if (z && z->out_type != dtype::u8 && z->out_type != dtype::s8)
        n.fail_input(2, std::string("element type ") + ir_name(z->out_type) + " is not supported (u8, i8)");
    const int64_t axis = n.get_int("axis", 1);
    check_qdq_params(n, x, s, z, 1, 2, axis);
    if (n.has("output_dtype")) {
        const int64_t dt = n.get_int("output_dtype", 0);
        const auto et = to_dtype(static_cast<int>(dt));
        if (dt != 0 && et != dtype::u8 && et != dtype::s8)
            n.fail_attr("output_dtype", onnx_type_name(static_cast<int>(dt)) + " is not supported (UINT8, INT8)");
        if (dt != 0 && z && z->out_type != *et)
            n.fail_attr("output_dtype", onnx_type_name(static_cast<int>(dt)) + " differs from the zero point's type");
        if (dt != 0 && !z && *et == dtype::s8) {
            // The IR's QuantizeLinear takes its output type from the zero point: a zero i8 one.
            tensor_value zv;
            zv.type = dtype::s8;
            zv.shape = s->out_shape;
            zv.data = std::make_shared<constant_data>();
            zv.data->bytes.assign(storage_bytes(dtype::s8, elems_of(zv.shape)), 0);
            z = constant(&n, zv, n.p.output(0) + "_zero_point");
        }
    }
    attributes a;
    a.axis = axis;
    std::vector<node *> in = {x, s};
    if (z) in.push_back(z);
    // Of constants (a quantizer's weights held in Constant nodes): a Constant
    // of the IR op's own values, so that a DequantizeLinear of it reads constants.
    define_folded(n, add(n, op::QuantizeLinear, in, a));
}

dequantize_info reader::qlinear_const(const onnx_node &n, int q, int scale, int zp, int64_t axis) {
    dequantize_info d;
    d.x = need_constant(n, q, "the quantized weights");
    if (d.x.type != dtype::u8 && d.x.type != dtype::s8)
        n.fail_input(q, std::string("element type ") + ir_name(d.x.type) + " is not supported (u8, i8)");
    d.scale = need_constant(n, scale, "the weights' scale");
    if (d.scale.type != dtype::f32)
        n.fail_input(scale, std::string("element type ") + ir_name(d.scale.type) + " is not f32");
    const int64_t ns = elems_of(d.scale.shape);
    const int64_t r = static_cast<int64_t>(d.x.shape.size());
    if (ns != 1 && (d.scale.shape.size() != 1 || axis >= r || d.scale.shape[0] != d.x.shape[axis]))
        n.fail_input(scale, "must hold one value or one per " + std::string(axis == 0 ? "output channel" : "column") +
                                ", got " + to_string(d.scale.shape));
    if (const tensor_value *z = constant_of(n, zp)) {
        if (z->type != d.x.type)
            n.fail_input(zp, std::string("element type ") + ir_name(z->type) + " differs from the weights'");
        if (elems_of(z->shape) != ns)
            n.fail_input(zp, "shape " + to_string(z->shape) + " differs from the scale's " + to_string(d.scale.shape));
        bool zero = true;
        for (int64_t i = 0; i < ns; ++i) zero &= at(*z, i) == 0;
        if (!zero) {
            d.zp = *z;
            d.zp->shape = d.scale.shape;
        }
    } else if (zp < n.p.input_size() && !n.p.input(zp).empty()) {
        n.fail_input(zp, "must be a constant");
    }
    if (ns != 1) {
        shape_t bs(r, 1);
        bs[axis] = d.x.shape[axis];
        d.scale.shape = bs;
        if (d.zp) d.zp->shape = bs;
    }
    d.axis = axis;
    return d;
}

// QLinearConv: its QDQ equivalent, DequantizeLinear(x) → Conv(DequantizeLinear(w),
// DequantizeLinear(B, x_scale·w_scale)) → QuantizeLinear(y_scale, y_zero_point).
void reader::qlinear_conv(const onnx_node &n) {
    n.known_attrs({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
    node *xq = value(n, 0), *xs = value(n, 1), *xz = optional_value(n, 2);
    if (xq->out_type != dtype::u8 && xq->out_type != dtype::s8)
        n.fail_input(0, std::string("element type ") + ir_name(xq->out_type) + " is not supported (u8, i8)");
    if (xs->out_type != dtype::f32) n.fail_input(1, "x_scale must be f32");
    if (elems_of(xs->out_shape) != 1) n.fail_input(1, "x_scale must hold one value (per tensor)");
    if (xz && (xz->out_type != xq->out_type || elems_of(xz->out_shape) != 1))
        n.fail_input(2, "x_zero_point must be one value of x's type");
    node *ys = value(n, 6), *yz = optional_value(n, 7);
    if (ys->out_type != dtype::f32 || elems_of(ys->out_shape) != 1) n.fail_input(6, "y_scale must be one f32 value");
    if (yz && ((yz->out_type != dtype::u8 && yz->out_type != dtype::s8) || elems_of(yz->out_shape) != 1))
        n.fail_input(7, "y_zero_point must be one u8 or i8 value");
    const dequantize_info wd = qlinear_const(n, 3, 4, 5, 0);
    if (wd.x.shape.size() != 4) n.fail_input(3, "weights must be rank 4 (OIHW), got " + to_string(wd.x.shape));
    node *x = dequant_act(n, xq, xs, xz, 1, "_x");
    node *w = dequant_chain(n, wd, wd.x.shape, wd.scale.shape, n.p.input(3), "_w");
    std::optional<dequantize_info> bd;
    node *b = nullptr;
    if (n.inputs() > 8) {
        // The int32 bias, dequantized with scale x_scale·w_scale (per output channel when w's scale is).
        const tensor_value &bq = need_constant(n, 8, "the bias");
        const int64_t OC = wd.x.shape[0];
        if (bq.type != dtype::s32 || bq.shape != shape_t{OC})
            n.fail_input(8,
                         "bias must be i32[" + std::to_string(OC) + "], got " + ir_name(bq.type) + to_string(bq.shape));
        const tensor_value &xsc = need_constant(n, 1, "x_scale (the bias's scale is x_scale·w_scale)");
        const int64_t ns = elems_of(wd.scale.shape);
        dequantize_info d;
        d.x = bq;
        d.scale.type = dtype::f32;
        d.scale.shape = ns == 1 ? shape_t{} : shape_t{OC};
        d.scale.data = std::make_shared<constant_data>();
        d.scale.data->bytes.assign(storage_bytes(dtype::f32, ns), 0);
        for (int64_t i = 0; i < ns; ++i)
            detail::store(dtype::f32, d.scale.data->bytes.data(), i,
                          static_cast<double>(static_cast<float>(at(xsc, 0)) * static_cast<float>(at(wd.scale, i))));
        d.axis = 0;
        bd = d;
        b = dequant_chain(n, d, d.x.shape, d.scale.shape, n.p.input(8), "_bias_1d");
    }
    node *y = conv_ir(n, x, w, &wd, b, bd ? &*bd : nullptr, 3, 8);
    attributes qa;
    qa.axis = 1;
    std::vector<node *> in = {y, ys};
    if (yz) in.push_back(yz);
    define(n, 0, add(n, op::QuantizeLinear, in, qa, "_q"));
}

// QLinearMatMul: DequantizeLinear(a) × DequantizeLinear(b) → QuantizeLinear(y_scale, y_zero_point).
void reader::qlinear_matmul(const onnx_node &n) {
    n.known_attrs({});
    node *aq = value(n, 0), *as = value(n, 1), *az = optional_value(n, 2);
    if (aq->out_type != dtype::u8 && aq->out_type != dtype::s8)
        n.fail_input(0, std::string("element type ") + ir_name(aq->out_type) + " is not supported (u8, i8)");
    if (as->out_type != dtype::f32 || elems_of(as->out_shape) != 1) n.fail_input(1, "a_scale must be one f32 value");
    if (az && (az->out_type != aq->out_type || elems_of(az->out_shape) != 1))
        n.fail_input(2, "a_zero_point must be one value of a's type");
    node *ys = value(n, 6), *yz = optional_value(n, 7);
    if (ys->out_type != dtype::f32 || elems_of(ys->out_shape) != 1) n.fail_input(6, "y_scale must be one f32 value");
    if (yz && ((yz->out_type != dtype::u8 && yz->out_type != dtype::s8) || elems_of(yz->out_shape) != 1))
        n.fail_input(7, "y_zero_point must be one u8 or i8 value");
    node *A = dequant_act(n, aq, as, az, 1, "_a");
    node *B;
    if (constant_of(n, 3)) {
        const auto &bv = need_constant(n, 3, "");
        if (bv.shape.size() != 2) n.fail_input(3, "constant b must be rank 2, got " + to_string(bv.shape));
        const dequantize_info bd = qlinear_const(n, 3, 4, 5, 1); // per column of b [K, N]
        B = dequant_chain(n, bd, bd.x.shape, bd.scale.shape, n.p.input(3), "_b");
    } else {
        node *bq = value(n, 3), *bs = value(n, 4), *bz = optional_value(n, 5);
        if (bq->out_type != dtype::u8 && bq->out_type != dtype::s8)
            n.fail_input(3, std::string("element type ") + ir_name(bq->out_type) + " is not supported (u8, i8)");
        if (bs->out_type != dtype::f32 || elems_of(bs->out_shape) != 1)
            n.fail_input(4, "b_scale of a non-constant b must be one f32 value");
        if (bz && (bz->out_type != bq->out_type || elems_of(bz->out_shape) != 1))
            n.fail_input(5, "b_zero_point must be one value of b's type");
        B = dequant_act(n, bq, bs, bz, 1, "_b");
    }
    if (A->out_shape.size() < 2) n.fail_input(0, "rank-1 inputs are not supported, got " + to_string(A->out_shape));
    if (B->out_shape.size() < 2) n.fail_input(3, "rank-1 inputs are not supported, got " + to_string(B->out_shape));
    node *y = add(n, op::MatMul, {A, B}, {}, "_matmul");
    attributes qa;
    qa.axis = 1;
    std::vector<node *> in = {y, ys};
    if (yz) in.push_back(yz);
    define(n, 0, add(n, op::QuantizeLinear, in, qa, "_q"));
}

// MaxPool / AveragePool (2-D, NCHW).
void reader::pool(const onnx_node &n) {
    const bool avg = n.p.op_type() == "AveragePool";
    if (avg)
        n.known_attrs({"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"});
    else n.known_attrs({"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"});
    node *x = value(n, 0);
    if (x->out_shape.size() != 4)
        n.fail_input(0, "only 2-D pooling is supported (NCHW, rank 4), got " + to_string(x->out_shape));
    if (avg && !is_float(x->out_type))
        n.fail_input(0, std::string("element type ") + ir_name(x->out_type) + " is not floating point");
    if (!avg && x->out_type != dtype::u8 && x->out_type != dtype::s8 && !is_float(x->out_type))
        n.fail_input(0, std::string("element type ") + ir_name(x->out_type) + " is not supported (floats, u8, i8)");
    if (!avg && !is_float(x->out_type) && opset_ < 12)
        n.fail_input(0, "8-bit MaxPool needs opset 12 (the model imports opset " + std::to_string(opset_) + ")");
    attributes a = window_attrs(n);
    if (a.dilations != std::vector<int64_t>{1, 1})
        n.fail_attr("dilations", to_string(a.dilations) + " is not supported (1, 1 only)");
    if (!n.has("kernel_shape")) n.fail_attr("kernel_shape", "is required");
    a.kernel = n.get_ints("kernel_shape", {});
    if (a.kernel.size() != 2)
        n.fail_attr("kernel_shape", "needs 2 values for 2-D pooling, got " + std::to_string(a.kernel.size()));
    for (int64_t k : a.kernel)
        if (k < 1 || k > (int64_t(1) << 24)) n.fail_attr("kernel_shape", std::to_string(k) + " is not in [1, 2^24]");
    const int64_t ceil = n.get_int("ceil_mode", 0);
    if (ceil != 0 && ceil != 1) n.fail_attr("ceil_mode", "must be 0 or 1");
    a.ceil_mode = ceil == 1;
    if (avg) {
        const int64_t cip = n.get_int("count_include_pad", 0);
        if (cip != 0 && cip != 1) n.fail_attr("count_include_pad", "must be 0 or 1");
        a.exclude_pad = cip == 0;
    } else {
        const int64_t so = n.get_int("storage_order", 0);
        if (so != 0 && so != 1) n.fail_attr("storage_order", "must be 0 or 1"); // it orders Indices only
    }
    if (a.ceil_mode && a.auto_pad == pad_mode::explicit_pads) {
        // Runtimes differ on a last window that starts in the end padding
        // (PyTorch and ONNX Runtime drop it): refused rather than guessed.
        for (int i = 0; i < 2; ++i) {
            const int64_t in = x->out_shape[2 + i], s = a.strides[i];
            const int64_t span = in + a.pads_begin[i] + a.pads_end[i] - a.kernel[i];
            if (span < 0) break; // the IR's inference names it
            const int64_t o = (span + s - 1) / s + 1;
            if ((o - 1) * s >= in + a.pads_begin[i])
                n.fail_attr("ceil_mode", "the last window along dimension " + std::to_string(2 + i) +
                                             " starts in the end padding (runtimes differ on it): not supported");
        }
    }
    define(n, 0, add(n, avg ? op::AvgPool : op::MaxPool, {x}, a));
}

// GlobalAveragePool: ReduceMean over the spatial axes, kept (OpenVINO's form).
void reader::global_average_pool(const onnx_node &n) {
    n.known_attrs({});
    node *x = value(n, 0);
    const int64_t r = static_cast<int64_t>(x->out_shape.size());
    if (r < 3) n.fail_input(0, "must have rank 3 or more (N, C, spatial...), got " + to_string(x->out_shape));
    attributes a;
    for (int64_t i = 2; i < r; ++i) a.axes.push_back(i);
    a.keep_dims = true;
    define(n, 0, add(n, op::ReduceMean, {x}, a));
}

void reader::concat(const onnx_node &n) {
    n.known_attrs({"axis"});
    if (!n.has("axis")) n.fail_attr("axis", "is required");
    attributes a;
    a.axis = n.get_int("axis", 0);
    std::vector<node *> in;
    for (int i = 0; i < n.p.input_size(); ++i) {
        if (n.p.input(i).empty()) n.fail_input(i, "is empty");
        in.push_back(value(n, i));
    }
    if (in.empty()) n.fail("has no inputs");
    define_folded(n, add(n, op::Concat, in, a));
}

// Clip (opset 11+: min and max as optional inputs) → Clamp; both must be constants.
void reader::clip(const onnx_node &n) {
    n.known_attrs({});
    node *x = value(n, 0);
    attributes a;
    const dtype T = x->out_type;
    a.clamp_min = is_integer(T) ? static_cast<double>(detail::type_min(T)) : -HUGE_VAL;
    a.clamp_max = is_integer(T) ? static_cast<double>(detail::type_max(T)) : HUGE_VAL;
    for (int i : {1, 2}) {
        if (i >= n.p.input_size() || n.p.input(i).empty()) continue;
        const tensor_value &c = need_constant(n, i, i == 1 ? "the minimum" : "the maximum");
        if (c.type != T) n.fail_input(i, std::string("element type ") + ir_name(c.type) + " differs from x's");
        if (elems_of(c.shape) != 1) n.fail_input(i, "must be a scalar, got " + to_string(c.shape));
        const double v = at(c, 0);
        if (std::isnan(v)) n.fail_input(i, "is NaN");
        (i == 1 ? a.clamp_min : a.clamp_max) = v;
    }
    if (!(a.clamp_min <= a.clamp_max))
        n.fail("min " + detail::fmt_double(a.clamp_min) + " is above max " + detail::fmt_double(a.clamp_max) +
               " (ONNX gives max everywhere; not supported)");
    define(n, 0, add(n, op::Clamp, {x}, a));
}

void reader::flatten(const onnx_node &n) {
    n.known_attrs({"axis"});
    attributes a;
    a.axis = n.get_int("axis", 1);
    define(n, 0, add(n, op::Flatten, {value(n, 0)}, a));
}

// PRelu: the slope broadcasts onto x numpy-style (ONNX). The IR reads a 1-D
// slope with x.shape[1] values per channel (OpenVINO's rule), so a 1-D slope
// of x of rank 3+ is given its numpy alignment (the last axis) by a Reshape.
void reader::prelu(const onnx_node &n) {
    n.known_attrs({});
    node *x = value(n, 0), *slope = value(n, 1);
    const size_t r = x->out_shape.size();
    if (slope->out_shape.size() == 1 && r > 2 && slope->out_shape[0] != 1) {
        shape_t t(r, 1);
        t.back() = slope->out_shape[0];
        if (const tensor_value *c = constant_of(n, 1)) {
            tensor_value v = *c;
            v.shape = t;
            slope = constant(&n, v, n.p.input(1) + "_aligned");
        } else {
            attributes ra;
            ra.target = t;
            slope = add(n, op::Reshape, {slope}, ra, "_slope");
        }
    }
    define(n, 0, add(n, op::PRelu, {x, slope}));
}

// Softmax: from opset 13 along one axis (default the last). Before 13 (axis
// default 1) over x flattened to [∏d[:axis], ∏d[axis:]]: along the last axis
// when axis is the last, else a Reshape to those two dims, a Softmax along
// dim 1 and a Reshape back.
void reader::softmax(const onnx_node &n) {
    n.known_attrs({"axis"});
    node *x = value(n, 0);
    attributes a;
    a.axis = n.get_int("axis", opset_ < 13 ? 1 : -1);
    const int64_t r = static_cast<int64_t>(x->out_shape.size());
    if (opset_ >= 13) {
        define(n, 0, add(n, op::Softmax, {x}, a));
        return;
    }
    if (a.axis < -r || a.axis >= r)
        n.fail_attr("axis", std::to_string(a.axis) + " is outside rank " + std::to_string(r));
    const int64_t ax = a.axis < 0 ? a.axis + r : a.axis;
    if (ax == r - 1) {
        a.axis = -1;
        define(n, 0, add(n, op::Softmax, {x}, a));
        return;
    }
    if (any_dynamic(x))
        n.fail_attr("axis", std::to_string(a.axis) + ": before opset 13 Softmax flattens x " + to_string(x->out_shape) +
                                " around the axis, and its dims follow the run-time dimension '?' (give the input's "
                                "shape)");
    attributes flat;
    flat.target = {1, 1};
    for (int64_t d = 0; d < r; ++d) flat.target[d < ax ? 0 : 1] *= x->out_shape[d];
    node *y = add(n, op::Reshape, {x}, flat, "_2d");
    a.axis = 1;
    y = add(n, op::Softmax, {y}, a, "_softmax");
    attributes back;
    back.target = x->out_shape;
    define(n, 0, add(n, op::Reshape, {y}, back));
}

std::vector<int64_t> reader::axes_of(const onnx_node &n, const char *name, int i, int64_t since, bool *given_any) {
    const std::string imports = " (the model imports opset " + std::to_string(opset_) + ")";
    if (opset_ < since) {
        if (given(n, i))
            n.fail_input(i, std::string(name) + " is an input from opset " + std::to_string(since) + imports +
                                ": the attribute before");
        *given_any = n.has(name);
        return n.get_ints(name, {});
    }
    if (n.has(name)) n.fail_attr(name, "is an input from opset " + std::to_string(since) + imports);
    *given_any = given_nonempty(n, i);
    return *given_any ? int_list(n, i, name) : std::vector<int64_t>{};
}

std::vector<bool> reader::dynamic_dims(const node *v) const {
    std::vector<bool> r(v->out_shape.size(), false);
    if (!g_->is_dynamic()) return r;
    auto probe = g_->clone();
    probe->bind_dynamic(g_->dynamic_value() == 2 ? 3 : 2);
    try {
        probe->infer();
    } catch (const error &) {
        return std::vector<bool>(r.size(), true);
    }
    const node *p = probe->find(v->id);
    for (size_t d = 0; d < r.size(); ++d)
        r[d] = !p || p->out_shape.size() != r.size() || p->out_shape[d] != v->out_shape[d];
    return r;
}

bool reader::any_dynamic(const node *v) const {
    const auto d = dynamic_dims(v);
    return std::find(d.begin(), d.end(), true) != d.end();
}

node *reader::reshape_to(const onnx_node &n, node *x, const shape_t &target, size_t keep, const std::string &suffix) {
    attributes a;
    a.target = target;
    const auto dyn = dynamic_dims(x);
    for (size_t d = 0; d < dyn.size(); ++d) {
        if (!dyn[d]) continue;
        if (d >= keep)
            n.fail_input(0, "dimension " + std::to_string(d) + " of " + to_string(x->out_shape) +
                                " follows the run-time dimension '?' and moves (give the input's shape)");
        a.target[d] = 0; // copies the input's dim
        a.special_zero = true;
    }
    return add(n, op::Reshape, {x}, a, suffix);
}

// Squeeze / Unsqueeze (axes: an attribute before opset 13, an input from 13)
// as a Reshape; Squeeze without axes removes every dim of size 1.
void reader::squeeze(const onnx_node &n) {
    const bool un = n.p.op_type() == "Unsqueeze";
    n.known_attrs({"axes"});
    node *x = value(n, 0);
    bool has = false;
    const std::vector<int64_t> axes = axes_of(n, "axes", 1, 13, &has);
    auto bad = [&](const std::string &what) {
        if (opset_ < 13) n.fail_attr("axes", what);
        n.fail_input(1, what);
    };
    if (un && !has) bad("is required");
    const shape_t &xs = x->out_shape;
    const int64_t r = static_cast<int64_t>(xs.size());
    const int64_t lim = un ? r + static_cast<int64_t>(axes.size()) : r;
    std::vector<bool> at(static_cast<size_t>(lim), false);
    size_t first = static_cast<size_t>(lim);
    for (int64_t ax : axes) {
        const int64_t k = ax < 0 ? ax + lim : ax;
        if (k < 0 || k >= lim || at[k])
            bad("axis " + std::to_string(ax) + " is outside rank " + std::to_string(lim) + " or repeated");
        at[k] = true;
        first = std::min(first, static_cast<size_t>(k));
    }
    shape_t t;
    for (int64_t d = 0, k = 0; d < lim; ++d) {
        if (un) {
            t.push_back(at[d] ? 1 : xs[k++]);
        } else if (has ? at[d] : xs[d] == 1) {
            if (xs[d] != 1) bad("dimension " + std::to_string(d) + " of " + to_string(xs) + " is not 1");
            first = std::min(first, static_cast<size_t>(d));
        } else {
            t.push_back(xs[d]);
        }
    }
    if (!un && !has && any_dynamic(x))
        n.fail_input(0, "Squeeze without axes of " + to_string(xs) + ", whose dims follow the run-time dimension '?'");
    define_folded(n, reshape_to(n, x, t, first, ""));
}

// ReduceMean: axes an attribute before opset 18, an input from 18 (none:
// every axis, or x itself with noop_with_empty_axes=1); keepdims default 1.
void reader::reduce_mean(const onnx_node &n) {
    n.known_attrs({"axes", "keepdims", "noop_with_empty_axes"});
    node *x = value(n, 0);
    if (!is_float(x->out_type))
        n.fail_input(0, std::string("element type ") + ir_name(x->out_type) + " is not floating point");
    bool has = false;
    attributes a;
    a.axes = axes_of(n, "axes", 1, 18, &has);
    const int64_t keep = n.get_int("keepdims", 1);
    if (keep != 0 && keep != 1) n.fail_attr("keepdims", "must be 0 or 1");
    a.keep_dims = keep == 1;
    if (n.has("noop_with_empty_axes")) need_opset(n, "noop_with_empty_axes", 18, "the attribute");
    const int64_t noop = n.get_int("noop_with_empty_axes", 0);
    if (noop != 0 && noop != 1) n.fail_attr("noop_with_empty_axes", "must be 0 or 1");
    if (a.axes.empty() && noop) {
        values_[n.p.output(0)] = x;
        return;
    }
    if (a.axes.empty())
        for (int64_t d = 0; d < static_cast<int64_t>(x->out_shape.size()); ++d) a.axes.push_back(d);
    define(n, 0, add(n, op::ReduceMean, {x}, a));
}

// BatchNormalization (inference): y = x·a + b per channel (axis 1), with
// a = scale / sqrtf(input_var + epsilon) and b = B − input_mean·a computed
// here in f32 (each operation rounded once) from the constant statistics —
// a Multiply and an Add of [1, C, 1, ...] Constants of x's type, the form the
// low-precision lowering folds into a convolution's per-channel chain.
void reader::batch_norm(const onnx_node &n) {
    n.known_attrs({"epsilon", "momentum", "training_mode"});
    if (n.has("training_mode")) need_opset(n, "training_mode", 14, "the attribute");
    const int64_t training = n.get_int("training_mode", 0);
    if (training != 0) n.fail_attr("training_mode", std::to_string(training) + " is not supported (inference only: 0)");
    for (int i = 1; i < n.p.output_size(); ++i)
        if (!n.p.output(i).empty())
            n.fail("output " + std::to_string(i) + " '" + n.p.output(i) +
                   "' is not supported (running statistics are outputs of training mode only)");
    node *x = value(n, 0);
    const dtype T = x->out_type;
    if (!is_float(T)) n.fail_input(0, std::string("element type ") + ir_name(T) + " is not floating point");
    const shape_t &xs = x->out_shape;
    if (xs.size() < 2) n.fail_input(0, "must have rank 2 or more (N, C, ...), got " + to_string(xs));
    const int64_t C = xs[1];
    const char *what[] = {"", "the scale", "the bias B", "the mean", "the variance"};
    const tensor_value *v[5] = {};
    for (int i = 1; i <= 4; ++i) {
        v[i] = &need_constant(n, i, what[i]);
        if (!is_float(v[i]->type))
            n.fail_input(i, std::string("element type ") + ir_name(v[i]->type) + " is not floating point");
        if (v[i]->shape != shape_t{C})
            n.fail_input(i,
                         "must be [" + std::to_string(C) + "] (one value per channel), got " + to_string(v[i]->shape));
    }
    const float eps = n.get_float("epsilon", 1e-5f);
    if (!(eps >= 0.f) || !std::isfinite(eps)) n.fail_attr("epsilon", "is not a finite value >= 0");
    shape_t cs(xs.size(), 1);
    cs[1] = C;
    tensor_value a, b;
    for (tensor_value *t : {&a, &b}) {
        t->type = T;
        t->shape = cs;
        t->data = std::make_shared<constant_data>();
        t->data->bytes.assign(storage_bytes(T, C), 0);
    }
    for (int64_t c = 0; c < C; ++c) {
        const float scale = static_cast<float>(at(*v[1], c)), bias = static_cast<float>(at(*v[2], c));
        const float mean = static_cast<float>(at(*v[3], c)), var = static_cast<float>(at(*v[4], c));
        const float d = var + eps;
        if (!(d > 0.f) || !std::isfinite(d))
            n.fail_input(4, "input_var + epsilon is not a finite positive value at channel " + std::to_string(c));
        const float ac = scale / std::sqrt(d);
        const float bc = bias - mean * ac;
        if (!std::isfinite(ac) || !std::isfinite(bc))
            n.fail("channel " + std::to_string(c) + ": the folded scale or shift is not finite");
        detail::store(T, a.data->bytes.data(), c, ac);
        detail::store(T, b.data->bytes.data(), c, bc);
    }
    const std::string out = n.p.output(0);
    node *y = add(n, op::Multiply, {x, constant(&n, a, out + "_bn_scale")}, {}, "_scaled");
    define(n, 0, add(n, op::Add, {y, constant(&n, b, out + "_bn_shift")}));
}

// Div of floating-point values: a Multiply by the reciprocal when b is a
// Constant of powers of two whose reciprocals x's type holds (x / 2^k and
// x · 2^-k are the same real number, rounded once), else a Divide. ONNX's
// integer Div truncates: refused.
void reader::div(const onnx_node &n) {
    n.known_attrs({});
    node *a = value(n, 0), *b = value(n, 1);
    const dtype T = a->out_type;
    if (!is_float(T))
        n.fail_input(0, std::string("element type ") + ir_name(T) +
                            " is not floating point (integer Div truncates: not supported)");
    if (const tensor_value *c = constant_of(n, 1); c && c->type == T) {
        tensor_value r = *c;
        r.data = std::make_shared<constant_data>(*c->data);
        bool exact = true;
        for (int64_t i = 0; exact && i < elems_of(c->shape); ++i) {
            int e = 0;
            const double v = at(*c, i), m = std::frexp(v, &e);
            const double inv = 1.0 / v;
            exact = std::fabs(m) == 0.5 && std::isfinite(inv) && detail::to_type(T, inv) == inv;
            detail::store(T, r.data->bytes.data(), i, inv);
        }
        if (exact) {
            define(n, 0, add(n, op::Multiply, {a, constant(&n, r, n.p.input(1) + "_reciprocal")}));
            return;
        }
    }
    define(n, 0, add(n, op::Divide, {a, b}));
}

// HardSigmoid: max(0, min(1, alpha·x + beta)) as Multiply(x, alpha) →
// Add(beta) → Clamp(0, 1), each in f32 rounded once; HardSwish (opset 14):
// x · HardSigmoid(x) with alpha = 1/6 (as an f32, 0.16666667) and beta = 0.5,
// one more Multiply by x.
void reader::hard_sigmoid(const onnx_node &n) {
    const bool swish = n.p.op_type() == "HardSwish";
    if (swish) n.known_attrs({});
    else n.known_attrs({"alpha", "beta"});
    if (swish && opset_ < 14)
        n.fail("HardSwish needs opset 14 (the model imports opset " + std::to_string(opset_) + ")");
    node *x = value(n, 0);
    const dtype T = x->out_type;
    if (!is_float(T)) n.fail_input(0, std::string("element type ") + ir_name(T) + " is not floating point");
    const float alpha = swish ? 1.f / 6.f : n.get_float("alpha", 0.2f);
    const float beta = swish ? 0.5f : n.get_float("beta", 0.5f);
    if (!std::isfinite(alpha)) n.fail_attr("alpha", "is not finite");
    if (!std::isfinite(beta)) n.fail_attr("beta", "is not finite");
    node *y = add(n, op::Multiply, {x, scalar(n, T, alpha, "_alpha")}, {}, "_alpha_x");
    y = add(n, op::Add, {y, scalar(n, T, beta, "_beta")}, {}, "_plus_beta");
    attributes c;
    c.clamp_min = 0;
    c.clamp_max = 1;
    y = add(n, op::Clamp, {y}, c, swish ? "_hard_sigmoid" : "");
    if (swish) y = add(n, op::Multiply, {x, y});
    define(n, 0, y);
}

std::vector<int64_t> reader::int_list(const onnx_node &n, int i, const char *what) {
    const tensor_value &t = need_constant(n, i, what);
    if ((t.type != dtype::s64 && t.type != dtype::s32) || t.shape.size() != 1)
        n.fail_input(i, "must be a 1-D i64 or i32 tensor, got " + std::string(ir_name(t.type)) + to_string(t.shape));
    std::vector<int64_t> r;
    for (int64_t k = 0; k < t.shape[0]; ++k)
        r.push_back(t.type == dtype::s64 ? i64_at(t, k) : static_cast<int64_t>(at(t, k)));
    return r;
}

bool reader::follows_dynamic(const node *v, size_t d) const {
    if (!g_->is_dynamic()) return false;
    auto probe = g_->clone();
    probe->bind_dynamic(g_->dynamic_value() == 2 ? 3 : 2);
    try {
        probe->infer();
    } catch (const error &) {
        return true;
    }
    const node *p = probe->find(v->id);
    return !p || p->out_shape.size() != v->out_shape.size() || p->out_shape[d] != v->out_shape[d];
}

// Slice (opset 13+: starts, ends, axes, steps as constant inputs): the IR's
// Slice, which resolves negative indices and clamps as ONNX does when shapes
// are inferred (so a slice of the run-time dimension follows its value).
void reader::slice(const onnx_node &n) {
    n.known_attrs({});
    node *x = value(n, 0);
    const int64_t r = static_cast<int64_t>(x->out_shape.size());
    attributes a;
    a.starts = int_list(n, 1, "the starts");
    a.ends = int_list(n, 2, "the ends");
    const size_t k = a.starts.size();
    if (k == 0) n.fail_input(1, "is empty");
    if (a.ends.size() != k)
        n.fail_input(2, "holds " + std::to_string(a.ends.size()) + " values, starts " + std::to_string(k));
    if (given(n, 3)) {
        a.axes = int_list(n, 3, "the axes");
        if (a.axes.size() != k)
            n.fail_input(3, "holds " + std::to_string(a.axes.size()) + " values, starts " + std::to_string(k));
        std::vector<bool> seen(r, false);
        for (int64_t ax : a.axes) {
            if (ax < -r || ax >= r)
                n.fail_input(3, "axis " + std::to_string(ax) + " is outside rank " + std::to_string(r));
            if (seen[ax < 0 ? ax + r : ax]) n.fail_input(3, "axis " + std::to_string(ax) + " is given twice");
            seen[ax < 0 ? ax + r : ax] = true;
        }
    } else if (static_cast<int64_t>(k) > r) {
        n.fail_input(1, std::to_string(k) + " values for rank " + std::to_string(r));
    }
    if (given(n, 4)) {
        a.steps = int_list(n, 4, "the steps");
        if (a.steps.size() != k)
            n.fail_input(4, "holds " + std::to_string(a.steps.size()) + " values, starts " + std::to_string(k));
        for (int64_t s : a.steps)
            if (s == 0) n.fail_input(4, "a step of 0 is invalid");
    }
    define_folded(n, add(n, op::Slice, {x}, a));
}

// The part sizes of a Split along a dim of size `dim` into `parts` outputs.
std::vector<int64_t> split_sizes(const onnx_node &n, int64_t dim, int64_t parts, int64_t opset, bool sizes_given) {
    std::vector<int64_t> sizes;
    if (n.has("num_outputs")) {
        if (opset < 18)
            n.fail_attr("num_outputs", "needs opset 18 (the model imports opset " + std::to_string(opset) + ")");
        if (sizes_given) n.fail_attr("num_outputs", "cannot be given with the input 'split'");
        const int64_t k = n.get_int("num_outputs", 0);
        if (k != parts)
            n.fail_attr("num_outputs",
                        std::to_string(k) + " differs from the node's " + std::to_string(parts) + " outputs");
        // ceil(dim / k) each, the last one what remains.
        const int64_t chunk = (dim + k - 1) / k, last = dim - chunk * (k - 1);
        if (last <= 0)
            n.fail_attr("num_outputs", std::to_string(k) + " parts of " + std::to_string(chunk) +
                                           " do not fit dimension " + std::to_string(dim) +
                                           " (an empty last part; the IR has no empty tensors)");
        sizes.assign(static_cast<size_t>(k), chunk);
        sizes.back() = last;
        return sizes;
    }
    if (dim % parts)
        n.fail_attr("axis", "dimension " + std::to_string(dim) + " does not split into " + std::to_string(parts) +
                                " equal parts (give the input 'split')");
    return std::vector<int64_t>(static_cast<size_t>(parts), dim / parts);
}

// Split (before opset 13: the attribute `split`; from 13 the optional input
// `split`; opset 18: or `num_outputs`):
// one IR Slice per output along `axis`, each output name mapped to its Slice.
void reader::split(const onnx_node &n) {
    n.known_attrs({"axis", "num_outputs", "split"});
    node *x = value(n, 0);
    const int64_t r = static_cast<int64_t>(x->out_shape.size());
    int64_t axis = n.get_int("axis", 0);
    if (axis < -r || axis >= r) n.fail_attr("axis", std::to_string(axis) + " is outside rank " + std::to_string(r));
    if (axis < 0) axis += r;
    const int64_t dim = x->out_shape[axis], parts = n.p.output_size();
    if (follows_dynamic(x, static_cast<size_t>(axis)))
        n.fail_attr("axis", "dimension " + std::to_string(axis) + " of " + to_string(x->out_shape) +
                                " follows the run-time dimension '?': its parts would be fixed (not supported)");
    // The part sizes: the attribute `split` before opset 13, the input from 13.
    bool have = false;
    std::vector<int64_t> sizes = axes_of(n, "split", 1, 13, &have);
    auto bad = [&](const std::string &what) {
        if (opset_ < 13) n.fail_attr("split", what);
        n.fail_input(1, what);
    };
    if (have) {
        if (static_cast<int64_t>(sizes.size()) != parts)
            bad("holds " + std::to_string(sizes.size()) + " sizes for " + std::to_string(parts) + " outputs");
        int64_t sum = 0;
        for (int64_t s : sizes) {
            if (s <= 0 || s > dim)
                bad("a part of " + std::to_string(s) + " (sizes must be in [1, " + std::to_string(dim) +
                    "]; the IR has no empty tensors)");
            sum += s;
        }
        if (sum != dim)
            bad("the sizes add up to " + std::to_string(sum) + ", dimension " + std::to_string(axis) + " is " +
                std::to_string(dim));
    }
    if (sizes.empty() || n.has("num_outputs")) sizes = split_sizes(n, dim, parts, opset_, have);
    int64_t at = 0;
    for (int64_t i = 0; i < parts; ++i) {
        attributes a;
        a.starts = {at};
        a.ends = {at + sizes[i]};
        a.axes = {axis};
        at += sizes[i];
        if (n.p.output(static_cast<int>(i)).empty()) continue;
        node *s = g_->add(op::Slice, {x}, a, g_->unique_id(id_of(n.p.output(static_cast<int>(i)))));
        finish(n, s);
        define(n, static_cast<int>(i), s);
    }
}

// Pad: the IR's Pad, pads_begin / pads_end per dim from the constant `pads`
// (opset 18: for the dims `axes` names, the others 0); mode constant with the
// value from `constant_value` (x's type; absent: 0; negative pads crop),
// edge, reflect (one mirror image: pads below the dim) or wrap (opset 19).
void reader::pad(const onnx_node &n) {
    n.known_attrs({"mode"});
    const std::string mode = n.get_string("mode", "constant");
    if (mode != "constant" && mode != "edge" && mode != "reflect" && mode != "wrap")
        n.fail_attr("mode", "'" + mode + "' is not constant, edge, reflect or wrap");
    if (mode == "wrap" && opset_ < 19)
        n.fail_attr("mode", "wrap needs opset 19 (the model imports " + std::to_string(opset_) + ")");
    node *x = value(n, 0);
    const int64_t r = static_cast<int64_t>(x->out_shape.size());
    const std::vector<int64_t> pads = int_list(n, 1, "the pads");
    std::vector<int64_t> axes;
    if (given(n, 3)) {
        if (opset_ < 18) n.fail_input(3, "axes need opset 18 (the model imports " + std::to_string(opset_) + ")");
        axes = int_list(n, 3, "the axes");
    } else {
        for (int64_t d = 0; d < r; ++d) axes.push_back(d);
    }
    const int64_t k = static_cast<int64_t>(axes.size());
    if (static_cast<int64_t>(pads.size()) != 2 * k)
        n.fail_input(1, "holds " + std::to_string(pads.size()) + " values, " + std::to_string(2 * k) +
                            " needed (begin and end of each of " + std::to_string(k) + " axes)");
    attributes a;
    a.padding = mode;
    a.pads_begin.assign(r, 0);
    a.pads_end.assign(r, 0);
    std::vector<bool> seen(r, false);
    for (int64_t i = 0; i < k; ++i) {
        const int64_t ax = axes[i] < 0 ? axes[i] + r : axes[i];
        if (ax < 0 || ax >= r || seen[ax])
            n.fail_input(3,
                         "axis " + std::to_string(axes[i]) + " is outside rank " + std::to_string(r) + " or repeated");
        seen[ax] = true;
        a.pads_begin[ax] = pads[i];
        a.pads_end[ax] = pads[k + i];
    }
    for (int64_t d = 0; d < r && mode != "constant"; ++d) {
        const int64_t most = std::max(a.pads_begin[d], a.pads_end[d]);
        if (std::min(a.pads_begin[d], a.pads_end[d]) < 0)
            n.fail_input(1, "negative pads (a crop) with mode " + mode + " are not supported");
        if (mode == "reflect" && most > x->out_shape[d] - 1)
            n.fail_input(1, "reflect pads of " + std::to_string(most) + " on dim " + std::to_string(d) + " of " +
                                to_string(x->out_shape) + " (at most " + std::to_string(x->out_shape[d] - 1) +
                                ": one mirror image)");
    }
    if (given(n, 2) && mode == "constant") {
        const tensor_value &c = need_constant(n, 2, "the padding value");
        if (c.type != x->out_type || elems_of(c.shape) != 1)
            n.fail_input(2, "must be one " + std::string(ir_name(x->out_type)) + " value, got " + ir_name(c.type) +
                                to_string(c.shape));
        a.pad_value = at(c, 0);
    }
    define(n, 0, add(n, op::Pad, {x}, a));
}

void reader::resize_targets(const onnx_node &n, const node *x, attributes &a) {
    const int64_t r = static_cast<int64_t>(x->out_shape.size());
    std::vector<int64_t> axes = n.get_ints("axes", {});
    if (!axes.empty() && opset_ < 18) n.fail_attr("axes", "needs opset 18");
    if (axes.empty())
        for (int64_t d = 0; d < r; ++d) axes.push_back(d);
    std::vector<bool> seen(r, false);
    for (int64_t &ax : axes) {
        if (ax < -r || ax >= r || seen[ax < 0 ? ax + r : ax])
            n.fail_attr("axes", std::to_string(ax) + " is outside rank " + std::to_string(r) + " or repeated");
        if (ax < 0) ax += r;
        seen[ax] = true;
    }
    const bool scales = given_nonempty(n, 2), sizes = given_nonempty(n, 3);
    if (scales && sizes) n.fail_input(3, "sizes cannot be given with scales (input 2)");
    if (!scales && !sizes) n.fail_input(2, "one of scales (input 2) and sizes (input 3) is required");
    const int i = scales ? 2 : 3;
    std::vector<double> sv;
    std::vector<int64_t> zv;
    if (scales) {
        const tensor_value &s = need_constant(n, 2, "the scales");
        if (s.type != dtype::f32 || s.shape.size() != 1)
            n.fail_input(2, "must be a 1-D f32 tensor, got " + std::string(ir_name(s.type)) + to_string(s.shape));
        for (int64_t k = 0; k < s.shape[0]; ++k) sv.push_back(at(s, k));
    } else {
        zv = int_list(n, 3, "the sizes");
    }
    const size_t cnt = scales ? sv.size() : zv.size();
    if (cnt != axes.size())
        n.fail_input(i, "holds " + std::to_string(cnt) + " values for " + std::to_string(axes.size()) + " axes");
    // The last two dims' targets; one not named keeps its size.
    double sc[2] = {1.0, 1.0};
    int64_t sz[2] = {x->out_shape[r - 2], x->out_shape[r - 1]};
    for (size_t k = 0; k < axes.size(); ++k) {
        const int64_t ax = axes[k];
        if (ax >= r - 2) {
            if (scales) sc[ax - (r - 2)] = sv[k];
            else sz[ax - (r - 2)] = zv[k];
        } else if (scales ? sv[k] != 1.0 : zv[k] != x->out_shape[ax]) {
            n.fail_input(i, "resizes dimension " + std::to_string(ax) + " of " + to_string(x->out_shape) +
                                ": only the last two dims are resized");
        }
    }
    if (scales) a.scales.assign(sc, sc + 2);
    else a.sizes.assign(sz, sz + 2);
}

// Resize (opset 13+): nearest or linear (bilinear) on the last two dims, as
// the IR's Resize; roi (unused by these modes) may be absent or empty, scales
// and sizes are constants (an empty one reads as absent).
void reader::resize(const onnx_node &n) {
    n.known_attrs({"mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a", "exclude_outside",
                   "extrapolation_value", "antialias", "axes", "keep_aspect_ratio_policy"});
    node *x = value(n, 0);
    if (x->out_shape.size() < 2) n.fail_input(0, "must have rank 2 or more, got " + to_string(x->out_shape));
    attributes a;
    a.resize_mode = n.get_string("mode", "nearest");
    if (a.resize_mode != "nearest" && a.resize_mode != "linear")
        n.fail_attr("mode", "'" + a.resize_mode + "' is not supported (nearest, linear)");
    a.coordinate_mode = n.get_string("coordinate_transformation_mode", "half_pixel");
    if (a.coordinate_mode != "half_pixel" && a.coordinate_mode != "pytorch_half_pixel" &&
        a.coordinate_mode != "align_corners" && a.coordinate_mode != "asymmetric")
        n.fail_attr("coordinate_transformation_mode",
                    "'" + a.coordinate_mode +
                        "' is not supported (half_pixel, pytorch_half_pixel, align_corners, asymmetric)");
    a.nearest_mode = n.get_string("nearest_mode", "round_prefer_floor");
    if (a.nearest_mode != "round_prefer_floor" && a.nearest_mode != "round_prefer_ceil" && a.nearest_mode != "floor" &&
        a.nearest_mode != "ceil")
        n.fail_attr("nearest_mode",
                    "'" + a.nearest_mode + "' is not round_prefer_floor, round_prefer_ceil, floor or ceil");
    if (n.get_int("exclude_outside", 0) != 0) n.fail_attr("exclude_outside", "1 is not supported");
    if (n.get_int("antialias", 0) != 0) n.fail_attr("antialias", "1 is not supported");
    const std::string policy = n.get_string("keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch") n.fail_attr("keep_aspect_ratio_policy", "'" + policy + "' is not supported (stretch)");
    n.get_float("cubic_coeff_a", -0.75f);    // cubic only
    n.get_float("extrapolation_value", 0.f); // tf_crop_and_resize only
    if (given_nonempty(n, 1)) value(n, 1);   // roi: unused by these modes, but it must exist
    resize_targets(n, x, a);
    define(n, 0, add(n, op::Resize, {x}, a));
}

// DepthToSpace (NCHW, `blocksize`, `mode` DCR or CRD; mode from opset 11).
void reader::depth_to_space(const onnx_node &n) {
    n.known_attrs({"blocksize", "mode"});
    node *x = value(n, 0);
    if (x->out_shape.size() != 4) n.fail_input(0, "must have rank 4 (NCHW), got " + to_string(x->out_shape));
    if (!n.has("blocksize")) n.fail_attr("blocksize", "is required");
    const int64_t b = n.get_int("blocksize", 1);
    if (b < 1 || b > 4096) n.fail_attr("blocksize", std::to_string(b) + " is not in [1, 4096]");
    if (x->out_shape[1] % (b * b))
        n.fail_attr("blocksize", std::to_string(x->out_shape[1]) + " channels do not split into blocks of " +
                                     std::to_string(b) + "x" + std::to_string(b));
    const std::string mode = n.get_string("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") n.fail_attr("mode", "'" + mode + "' is not DCR or CRD");
    if (n.has("mode")) need_opset(n, "mode", 11, "the attribute");
    attributes a;
    a.block = {b, b};
    a.crd = mode == "CRD";
    define(n, 0, add(n, op::DepthToSpace, {x}, a));
}

void reader::reshape(const onnx_node &n) {
    n.known_attrs({"allowzero"});
    node *x = value(n, 0);
    const tensor_value &s = need_constant(n, 1, "the target shape");
    if (s.type != dtype::s64 || s.shape.size() != 1)
        n.fail_input(1, "must be a 1-D i64 tensor, got " + std::string(ir_name(s.type)) + to_string(s.shape));
    if (n.has("allowzero")) need_opset(n, "allowzero", 14, "the attribute");
    const int64_t allowzero = n.get_int("allowzero", 0);
    if (allowzero != 0 && allowzero != 1) n.fail_attr("allowzero", "must be 0 or 1");
    attributes a;
    a.special_zero = true; // a 0 copies the input's dim (allowzero = 0)
    for (int64_t i = 0; i < s.shape[0]; ++i) {
        const int64_t v = i64_at(s, i);
        if (v < -1) n.fail_input(1, "dimension " + std::to_string(v) + " is invalid");
        if (v == 0 && allowzero)
            n.fail_attr("allowzero", "1 with a 0 in the shape makes an empty tensor (not supported)");
        a.target.push_back(v);
    }
    define(n, 0, add(n, op::Reshape, {x}, a));
}

void reader::transpose(const onnx_node &n) {
    n.known_attrs({"perm"});
    node *x = value(n, 0);
    const int64_t r = static_cast<int64_t>(x->out_shape.size());
    std::vector<int64_t> rev;
    for (int64_t i = r - 1; i >= 0; --i) rev.push_back(i);
    attributes a;
    a.order = n.get_ints("perm", rev);
    if (static_cast<int64_t>(a.order.size()) != r)
        n.fail_attr("perm", to_string(a.order) + " does not match rank " + std::to_string(r));
    define(n, 0, add(n, op::Transpose, {x}, a));
}

// ----------------------------------------------------- shape computations
// ONNX's Cast of a constant, exactly: floats to integers truncate (toward
// zero; NaN or a value outside the type is undefined in ONNX: refused),
// integers wrap to a narrower type (two's complement), anything to a float
// type rounds to nearest.
tensor_value cast_constant(const onnx_node &n, const tensor_value &c, dtype to) {
    if (bits_of(c.type) == 4 || bits_of(to) == 4)
        n.fail_attr("to", "a cast of constants from or to a 4-bit type is not supported");
    tensor_value v;
    v.type = to;
    v.shape = c.shape;
    v.data = std::make_shared<constant_data>();
    const int64_t cnt = elems_of(c.shape);
    v.data->bytes.assign(storage_bytes(to, cnt), 0);
    for (int64_t i = 0; i < cnt; ++i) {
        if (!is_integer(to)) {
            detail::store(to, v.data->bytes.data(), i, c.type == dtype::s64 ? double(i64_at(c, i)) : at(c, i));
            continue;
        }
        int64_t x;
        if (is_integer(c.type)) {
            x = c.type == dtype::s64 ? i64_at(c, i) : static_cast<int64_t>(at(c, i));
        } else {
            const double t = std::trunc(at(c, i));
            if (!(t >= double(detail::type_min(to)) && t <= double(detail::type_max(to))))
                n.fail_input(0, "element " + std::to_string(i) + " = " + detail::fmt_double(at(c, i)) + " is outside " +
                                    ir_name(to) + " (the cast is undefined in ONNX)");
            x = static_cast<int64_t>(t);
        }
        const int bytes = bits_of(to) / 8;
        const uint64_t u = static_cast<uint64_t>(x);
        std::memcpy(v.data->bytes.data() + i * bytes, &u, static_cast<size_t>(bytes)); // the low bytes: wraps
    }
    return v;
}

void reader::define_constant(const onnx_node &n, int out, const tensor_value &v) {
    if (out >= n.p.output_size() || n.p.output(out).empty()) return;
    check_shape(v.shape, n.field() + " output " + std::to_string(out));
    node *c = constant(&n, v, n.p.output(out));
    c->friendly_name = quotable(n.p.output(out));
    constants_[n.p.output(out)] = v;
    define(n, out, c);
}

namespace {
tensor_value value_of(const tensor &t) {
    tensor_value v;
    v.type = t.type;
    v.shape = t.shape;
    v.data = std::make_shared<constant_data>();
    v.data->bytes.assign(t.bytes.begin(), t.bytes.end());
    return v;
}
} // namespace

const tensor_value *reader::dequantized_constant(const std::string &name, node *v) {
    if (!dequantized_.count(name)) return nullptr;
    if (auto it = dequantized_values_.find(name); it != dequantized_values_.end()) return &it->second;
    std::map<const node *, tensor> memo;
    if (!detail::fold_constant(v, {4, std::numeric_limits<int64_t>::max()}, &memo)) return nullptr; // a few nodes deep
    return &(dequantized_values_[name] = value_of(memo.at(v)));
}

void reader::define_folded(const onnx_node &n, node *r) {
    for (const node *i : r->inputs)
        if (i->kind != op::Constant) return define(n, 0, r);
    std::vector<tensor> in;
    in.reserve(r->inputs.size());
    std::vector<const tensor *> ptrs;
    for (const node *i : r->inputs) {
        in.push_back(detail::constant_value(*i));
        ptrs.push_back(&in.back());
    }
    tensor o;
    detail::eval_node(*r, ptrs, o);
    r->id = g_->unique_id(r->id + "_unfolded"); // nothing reads it: pruned
    define_constant(n, 0, value_of(o));
}

// The most elements a value evaluated at load (Gather, Range, Expand,
// ConstantOfShape) may have: shape computations are small; a larger one is
// refused before anything is allocated.
constexpr int64_t max_load_elems = int64_t(1) << 24;
void check_load_elems(const onnx_node &n, const shape_t &s) {
    check_shape(s, n.field() + " output");
    if (elems_of(s) > max_load_elems)
        n.fail("the output " + to_string(s) +
               " has more than 2^24 elements (values evaluated at load are shape "
               "computations: not supported)");
}

// A 1-D i64 tensor_value of the values.
tensor_value i64_value(const std::vector<int64_t> &vals, shape_t shape) {
    tensor_value v;
    v.type = dtype::s64;
    v.shape = std::move(shape);
    v.data = std::make_shared<constant_data>();
    v.data->bytes.resize(vals.size() * sizeof(int64_t));
    if (!vals.empty()) std::memcpy(v.data->bytes.data(), vals.data(), v.data->bytes.size());
    return v;
}

// Shape (`start`, `end`: opset 15) of a value whose dims are known at load:
// an i64 Constant. A dim that follows the run-time dimension `?` is refused.
void reader::shape(const onnx_node &n) {
    n.known_attrs({"start", "end"});
    node *x = value(n, 0);
    for (const char *a : {"start", "end"})
        if (n.has(a)) need_opset(n, a, 15, "the attribute");
    const int64_t r = static_cast<int64_t>(x->out_shape.size());
    auto clamp = [&](int64_t v) { return std::min(std::max(v < 0 ? v + r : v, int64_t(0)), r); };
    const int64_t start = clamp(n.get_int("start", 0)), end = clamp(n.get_int("end", r));
    if (end <= start) n.fail_attr("end", "the dims taken are none (the IR has no empty tensors)");
    const auto dyn = dynamic_dims(x);
    std::vector<int64_t> dims;
    for (int64_t d = start; d < end; ++d) {
        if (dyn[d])
            n.fail_input(0, "dimension " + std::to_string(d) + " of " + to_string(x->out_shape) +
                                " follows the run-time dimension '?': Shape is evaluated at load (give the input's "
                                "shape: --shape=NAME=D,D,..., onnx_options::input_shapes)");
        dims.push_back(x->out_shape[d]);
    }
    define_constant(n, 0, i64_value(dims, {end - start}));
}

// Gather (`axis`) of constant data at constant indices (i32/i64, negative
// ones from the end), evaluated at load.
void reader::gather(const onnx_node &n) {
    n.known_attrs({"axis"});
    const tensor_value *d = constant_of(n, 0);
    if (!d) n.fail_input(0, "must be a constant: Gather is read on constants and shapes, evaluated at load");
    const tensor_value *ix = constant_of(n, 1);
    if (!ix) n.fail_input(1, "must be a constant: Gather is read on constants and shapes, evaluated at load");
    if (ix->type != dtype::s64 && ix->type != dtype::s32) n.fail_input(1, "must be i32 or i64");
    if (bits_of(d->type) < 8) n.fail_input(0, "4-bit data is not supported");
    const int64_t r = static_cast<int64_t>(d->shape.size());
    int64_t axis = n.get_int("axis", 0);
    if (r == 0 || axis < -r || axis >= r)
        n.fail_attr("axis", std::to_string(axis) + " is outside rank " + std::to_string(r));
    if (axis < 0) axis += r;
    shape_t out(d->shape.begin(), d->shape.begin() + axis);
    out.insert(out.end(), ix->shape.begin(), ix->shape.end());
    out.insert(out.end(), d->shape.begin() + axis + 1, d->shape.end());
    const int64_t outer = elems_of(shape_t(d->shape.begin(), d->shape.begin() + axis)), K = d->shape[axis];
    const int64_t inner = elems_of(shape_t(d->shape.begin() + axis + 1, d->shape.end()));
    const int64_t cnt = elems_of(ix->shape), es = bits_of(d->type) / 8;
    check_load_elems(n, out);
    tensor_value v;
    v.type = d->type;
    v.shape = out;
    v.data = std::make_shared<constant_data>();
    v.data->bytes.resize(static_cast<size_t>(outer * cnt * inner * es));
    for (int64_t j = 0; j < cnt; ++j) {
        int64_t k = ix->type == dtype::s64 ? i64_at(*ix, j) : static_cast<int64_t>(at(*ix, j));
        if (k < -K || k >= K)
            n.fail_input(1, "index " + std::to_string(k) + " is outside [" + std::to_string(-K) + ", " +
                                std::to_string(K) + ")");
        if (k < 0) k += K;
        for (int64_t o = 0; o < outer; ++o)
            std::memcpy(v.data->bytes.data() + ((o * cnt + j) * inner) * es,
                        d->data->bytes.data() + ((o * K + k) * inner) * es, static_cast<size_t>(inner * es));
    }
    define_constant(n, 0, v);
}

// Range of constant scalars start, limit, delta (one type): start + i·delta
// for i < max(ceil((limit − start) / delta), 0), evaluated at load.
void reader::range(const onnx_node &n) {
    n.known_attrs({});
    const tensor_value *c[3];
    const char *what[] = {"start", "limit", "delta"};
    for (int i = 0; i < 3; ++i) {
        c[i] = constant_of(n, i);
        if (!c[i] || elems_of(c[i]->shape) != 1 || !c[i]->shape.empty())
            n.fail_input(i, std::string(what[i]) + " must be a constant scalar");
        if (c[i]->type != c[0]->type) n.fail_input(i, "element type differs from start's");
    }
    const dtype t = c[0]->type;
    auto get = [&](int i) { return t == dtype::s64 ? double(i64_at(*c[i], 0)) : at(*c[i], 0); };
    const double start = get(0), limit = get(1), delta = get(2);
    if (delta == 0 || !std::isfinite(delta)) n.fail_input(2, "delta must be finite and not 0");
    const double count = std::ceil((limit - start) / delta);
    if (!(count >= 1)) n.fail("the range is empty (the IR has no empty tensors)");
    if (count > double(max_load_elems))
        n.fail("the range has more than 2^24 elements (values evaluated at load are shape computations: not "
               "supported)");
    const int64_t cnt = static_cast<int64_t>(count);
    tensor_value v;
    v.type = t;
    v.shape = {cnt};
    v.data = std::make_shared<constant_data>();
    v.data->bytes.assign(storage_bytes(t, cnt), 0);
    for (int64_t i = 0; i < cnt; ++i) {
        if (t == dtype::s64) {
            const int64_t x = i64_at(*c[0], 0) + i * i64_at(*c[2], 0);
            std::memcpy(v.data->bytes.data() + i * 8, &x, 8);
        } else {
            detail::store(t, v.data->bytes.data(), i, start + double(i) * delta);
        }
    }
    define_constant(n, 0, v);
}

// Expand of a constant to a constant shape (numpy broadcast both ways), evaluated at load.
void reader::expand(const onnx_node &n) {
    n.known_attrs({});
    const tensor_value *x = constant_of(n, 0);
    if (!x) n.fail_input(0, "must be a constant: Expand is read on constants, evaluated at load");
    if (bits_of(x->type) < 8) n.fail_input(0, "4-bit data is not supported");
    const std::vector<int64_t> want = int_list(n, 1, "the shape");
    const size_t r = std::max(want.size(), x->shape.size());
    shape_t out(r);
    for (size_t i = 0; i < r; ++i) {
        const int64_t a = i + x->shape.size() >= r ? x->shape[i + x->shape.size() - r] : 1;
        const int64_t b = i + want.size() >= r ? want[i + want.size() - r] : 1;
        if (a != b && a != 1 && b != 1)
            n.fail_input(1, "shape " + to_string(want) + " does not broadcast with " + to_string(x->shape));
        out[i] = a == 1 ? b : a;
    }
    check_load_elems(n, out);
    const auto st = detail::bstrides(x->shape, out);
    const int64_t cnt = elems_of(out), es = bits_of(x->type) / 8;
    tensor_value v;
    v.type = x->type;
    v.shape = out;
    v.data = std::make_shared<constant_data>();
    v.data->bytes.resize(static_cast<size_t>(cnt * es));
    for (int64_t i = 0; i < cnt; ++i) {
        int64_t rem = i, off = 0;
        for (size_t d = r; d-- > 0;) {
            off += (rem % out[d]) * st[d];
            rem /= out[d];
        }
        std::memcpy(v.data->bytes.data() + i * es, x->data->bytes.data() + off * es, static_cast<size_t>(es));
    }
    define_constant(n, 0, v);
}

// ConstantOfShape: a constant shape (1-D i64) filled with `value` (one
// element; absent: f32 0), evaluated at load.
void reader::constant_of_shape(const onnx_node &n) {
    n.known_attrs({"value"});
    const std::vector<int64_t> dims = int_list(n, 0, "the shape");
    tensor_value fill;
    if (const auto *a = n.typed("value", pb::AttributeProto::TENSOR, "a tensor")) {
        fill = data_.read(a->t(), n.field() + " attribute 'value'");
        if (elems_of(fill.shape) != 1) n.fail_attr("value", "must hold one element");
    } else {
        fill.type = dtype::f32;
        fill.data = std::make_shared<constant_data>();
        fill.data->bytes.assign(4, 0);
    }
    if (bits_of(fill.type) < 8) n.fail_attr("value", "a 4-bit value is not supported");
    shape_t out(dims.begin(), dims.end());
    for (int64_t d : out)
        if (d <= 0) n.fail_input(0, "shape " + to_string(out) + " has a dim <= 0 (the IR has no empty tensors)");
    check_load_elems(n, out);
    const int64_t cnt = elems_of(out), es = bits_of(fill.type) / 8;
    tensor_value v;
    v.type = fill.type;
    v.shape = out;
    v.data = std::make_shared<constant_data>();
    v.data->bytes.resize(static_cast<size_t>(cnt * es));
    for (int64_t i = 0; i < cnt; ++i)
        std::memcpy(v.data->bytes.data() + i * es, fill.data->bytes.data(), static_cast<size_t>(es));
    define_constant(n, 0, v);
}

void reader::cast(const onnx_node &n) {
    n.known_attrs({"to", "saturate"});
    node *x = value(n, 0);
    if (!n.has("to")) n.fail_attr("to", "is required");
    const int64_t to = n.get_int("to", 0);
    const auto et = to_dtype(static_cast<int>(to));
    if (!et) n.fail_attr("to", onnx_type_name(static_cast<int>(to)) + " is not supported (" + supported_types + ")");
    if (const tensor_value *c = constant_of(n, 0)) {
        define_constant(n, 0, cast_constant(n, *c, *et));
        return;
    }
    const dtype from = x->out_type;
    // The IR's Convert rounds to nearest and saturates; ONNX's Cast truncates
    // floats and wraps integers: only casts where the two agree are taken.
    if (is_integer(*et) && !is_integer(from))
        n.fail_attr("to", std::string("a cast from ") + ir_name(from) + " to " + ir_name(*et) +
                              " truncates in ONNX (the IR's Convert rounds): not supported");
    if (is_integer(*et) && is_integer(from) &&
        (detail::type_min(from) < detail::type_min(*et) || detail::type_max(from) > detail::type_max(*et)))
        n.fail_attr("to", std::string("a narrowing cast from ") + ir_name(from) + " to " + ir_name(*et) +
                              " wraps in ONNX (the IR's Convert saturates): not supported");
    attributes a;
    a.type = *et;
    define(n, 0, add(n, op::Convert, {x}, a));
}

void reader::constant_node(const onnx_node &n) {
    n.known_attrs({"value", "value_float", "value_floats", "value_int", "value_ints"});
    if (n.p.attribute_size() != 1) n.fail("needs exactly one value attribute");
    const auto &a = n.p.attribute(0);
    if (a.name() != "value") need_opset(n, a.name().c_str(), 12, "the attribute");
    tensor_value v;
    v.data = std::make_shared<constant_data>();
    auto fill = [&](dtype t, shape_t s, auto values) {
        v.type = t;
        v.shape = std::move(s);
        v.data->bytes.assign(storage_bytes(t, static_cast<int64_t>(values.size())), 0);
        for (size_t i = 0; i < values.size(); ++i)
            detail::store(t, v.data->bytes.data(), i, static_cast<double>(values[i]));
    };
    if (a.name() == "value") {
        if (a.type() != pb::AttributeProto::TENSOR) n.fail_attr("value", "expected a tensor");
        if (is_empty(a.t())) {
            empty_[n.p.output(0)] = dims_text(a.t());
            return;
        }
        v = data_.read(a.t(), n.field() + " attribute 'value'");
    } else if (a.name() == "value_float") {
        n.get_float("value_float", 0);
        fill(dtype::f32, {}, std::vector<float>{a.f()});
    } else if (a.name() == "value_int") {
        n.get_int("value_int", 0);
        fill(dtype::s64, {}, std::vector<int64_t>{a.i()});
    } else if (a.name() == "value_floats") {
        n.typed("value_floats", pb::AttributeProto::FLOATS, "a list of floats");
        if (a.floats_size() == 0) n.fail_attr("value_floats", "is empty");
        fill(dtype::f32, {a.floats_size()}, std::vector<float>(a.floats().begin(), a.floats().end()));
    } else {
        const auto ints = n.get_ints("value_ints", {});
        if (ints.empty()) n.fail_attr("value_ints", "is empty");
        fill(dtype::s64, {static_cast<int64_t>(ints.size())}, ints);
    }
    node *c = constant(&n, v, n.p.output(0));
    c->friendly_name = quotable(n.p.output(0));
    constants_[n.p.output(0)] = v;
    define(n, 0, c);
}

void reader::read_outputs() {
    const auto &gp = m_.graph();
    if (gp.output_size() == 0) fail("model", "the graph has no output: nothing would be computed");
    for (const auto &o : gp.output()) {
        const auto it = values_.find(o.name());
        if (it == values_.end() && empty_.count(o.name()))
            fail("output '" + o.name() + "'", "is an empty tensor (the IR has no empty tensors)");
        if (it == values_.end()) fail("output '" + o.name() + "'", "is not produced by any node, input or initializer");
        node *r = g_->add(op::Result, {it->second}, {}, g_->unique_id(id_of(o.name()) + "_out"));
        r->friendly_name = quotable(o.name());
        infer_node(*r, g_->dynamic_value());
    }
}

std::unique_ptr<graph> reader::run() {
    if (!m_.has_graph()) fail("model", "has no graph");
    g_ = std::make_unique<graph>();
    read_opsets();
    read_inputs();
    const auto &gp = m_.graph();
    for (int i = 0; i < gp.node_size(); ++i) read_node(onnx_node{gp.node(i), i});
    read_outputs();
    g_->prune();
    // The forms of Gelu read as written (Erf or Tanh and the elementwise ops
    // around it) become Gelu nodes, as the op they stand for.
    fuse_gelu(*g_);
    try {
        g_->infer();
    } catch (const error &e) {
        fail("model", e.what());
    }
    // As parse() does for a .qg file: a graph whose run needs more memory than
    // this process may use is refused before anything runs.
    check_run_memory(*g_);
    return std::move(g_);
}

} // namespace

std::unique_ptr<graph> parse_onnx(const void *data, size_t size, const std::string &base_dir) {
    return parse_onnx(data, size, base_dir, onnx_options{});
}

std::unique_ptr<graph> parse_onnx(const void *data, size_t size, const std::string &base_dir, const onnx_options &o) {
    if (static_cast<uint64_t>(size) > static_cast<uint64_t>(max_onnx_bytes))
        fail("model", "larger than 2 GiB (protobuf's limit)");
    pb::ModelProto m;
    if (!m.ParseFromArray(data, static_cast<int>(size)))
        fail("model", "not a valid ONNX model: the protobuf data is truncated or corrupt");
    return reader(m, base_dir, o).run();
}

std::unique_ptr<graph> load_onnx(const std::string &path) { return load_onnx(path, onnx_options{}); }

std::unique_ptr<graph> load_onnx(const std::string &path, const onnx_options &o) {
    const std::string bytes =
        detail::read_regular_file(path, max_onnx_bytes, "2 GiB (protobuf's limit)", "a model file");
    std::string dir = fs::path(path).parent_path().string();
    if (dir.empty()) dir = ".";
    try {
        return parse_onnx(bytes.data(), bytes.size(), dir, o);
    } catch (const error &e) {
        throw error(std::string(e.what()) + " (in " + path + ")");
    }
}

} // namespace qconv::graph
