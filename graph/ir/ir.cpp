// The graph IR: op names, nodes and the graph container (shape inference:
// graph/ir/infer.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <set>
#include <sstream>

#include "graph/ir/detail.h"
#include "qconv/graph.h"

namespace qconv::graph {

// ----------------------------------------------------------------- types
namespace {
constexpr const char *op_names[] = {
    "Parameter",      "Constant",
    "Convert",        "Subtract",
    "Multiply",       "Add",
    "Reshape",        "Transpose",
    "Convolution",    "GroupConvolution",
    "MatMul",         "Relu",
    "Gelu",           "FakeQuantize",
    "QuantizeLinear", "DequantizeLinear",
    "MaxPool",        "AvgPool",
    "ReduceMean",     "Concat",
    "Clamp",          "PRelu",
    "Flatten",        "Sigmoid",
    "Softmax",        "Divide",
    "Slice",          "Pad",
    "Resize",         "Sqrt",
    "ConvTranspose",  "Erf",
    "Tanh",           "LookupTable",
    "DepthToSpace",   "QConvolution",
    "Result",
};
static_assert(sizeof(op_names) / sizeof(op_names[0]) == static_cast<size_t>(op::Result) + 1, "one name per op");
} // namespace

std::string to_string(const shape_t &s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
    return r + "]";
}
int64_t elems_of(const shape_t &s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
}

void check_shape(const shape_t &s, const std::string &field) {
    int64_t n = 1;
    for (int64_t d : s) {
        if (d <= 0) fail(field, "shape " + to_string(s) + " has a non-positive dimension");
        if (d > max_elems / n) fail(field, "shape " + to_string(s) + " has more than 2^31 elements");
        n *= d;
    }
}

const char *to_string(op k) { return op_names[static_cast<int>(k)]; }
op parse_op(const std::string &s, const std::string &field) {
    for (size_t i = 0; i < sizeof(op_names) / sizeof(op_names[0]); ++i)
        if (s == op_names[i]) return static_cast<op>(i);
    fail(field, "unknown op '" + s + "'");
}
const char *to_string(pad_mode m) {
    switch (m) {
    case pad_mode::explicit_pads: return "explicit";
    case pad_mode::valid: return "valid";
    case pad_mode::same_upper: return "same_upper";
    case pad_mode::same_lower: return "same_lower";
    }
    return "?";
}

// ------------------------------------------------------------- detail
namespace detail {
uint16_t f32_to_f16(float f) { return qconv::f32_to_f16(f); }
float f16_to_f32(uint16_t h) { return qconv::f16_to_f32(h); }
int64_t type_min(dtype t) {
    switch (t) {
    case dtype::u8:
    case dtype::u4: return 0;
    case dtype::s8: return -128;
    case dtype::s4: return -8;
    case dtype::s32: return std::numeric_limits<int32_t>::min();
    case dtype::s64: return std::numeric_limits<int64_t>::min();
    default: return 0;
    }
}
int64_t type_max(dtype t) {
    switch (t) {
    case dtype::u8: return 255;
    case dtype::u4: return 15;
    case dtype::s8: return 127;
    case dtype::s4: return 7;
    case dtype::s32: return std::numeric_limits<int32_t>::max();
    case dtype::s64: return std::numeric_limits<int64_t>::max();
    default: return 0;
    }
}
double to_type(dtype t, double v) {
    if (t == dtype::f32) return static_cast<float>(v);
    if (t == dtype::f16) return round_f16(static_cast<float>(v));
    if (t == dtype::bf16) return qconv::bf16_to_f32(qconv::f32_to_bf16(static_cast<float>(v)));
    if (std::isnan(v)) return 0;
    const double r = std::nearbyint(v); // default rounding mode: half to even
    // The largest double below 2^63 (double(INT64_MAX) rounds up to 2^63).
    const double hi = t == dtype::s64 ? 9223372036854774784.0 : double(type_max(t));
    return std::min<double>(std::max<double>(r, double(type_min(t))), hi);
}
// Element i of an array of T stored unaligned in b.
template <class T>
T get(const uint8_t *b, int64_t i) {
    T v;
    std::memcpy(&v, b + static_cast<int64_t>(sizeof(T)) * i, sizeof(T));
    return v;
}
template <class T>
void put(uint8_t *b, int64_t i, T v) {
    std::memcpy(b + static_cast<int64_t>(sizeof(T)) * i, &v, sizeof(T));
}

double load(dtype t, const uint8_t *b, int64_t i) {
    switch (t) {
    case dtype::f32: return get<float>(b, i);
    case dtype::f16: return f16_to_f32(get<uint16_t>(b, i));
    case dtype::bf16: return qconv::bf16_to_f32(get<uint16_t>(b, i));
    case dtype::u8: return b[i];
    case dtype::s8: return static_cast<int8_t>(b[i]);
    case dtype::u4: return (b[i / 2] >> (4 * (i & 1))) & 0xF;
    case dtype::s4: {
        int v = (b[i / 2] >> (4 * (i & 1))) & 0xF;
        return v >= 8 ? v - 16 : v;
    }
    case dtype::s32: return get<int32_t>(b, i);
    case dtype::s64: return static_cast<double>(get<int64_t>(b, i));
    case dtype::undef: break;
    }
    return 0;
}
void store(dtype t, uint8_t *b, int64_t i, double v) {
    v = to_type(t, v);
    switch (t) {
    case dtype::f32: put(b, i, static_cast<float>(v)); break;
    case dtype::f16: put(b, i, f32_to_f16(static_cast<float>(v))); break;
    case dtype::bf16: put(b, i, qconv::f32_to_bf16(static_cast<float>(v))); break;
    case dtype::u8: b[i] = static_cast<uint8_t>(v); break;
    case dtype::s8: b[i] = static_cast<uint8_t>(static_cast<int8_t>(v)); break;
    case dtype::u4:
    case dtype::s4: {
        const uint8_t nib = static_cast<uint8_t>(static_cast<int>(v) & 0xF);
        const int sh = 4 * (i & 1);
        b[i / 2] = static_cast<uint8_t>((b[i / 2] & ~(0xF << sh)) | (nib << sh));
        break;
    }
    case dtype::s32: put(b, i, static_cast<int32_t>(v)); break;
    case dtype::s64: put(b, i, static_cast<int64_t>(v)); break;
    case dtype::undef: break;
    }
}
std::string fmt_double(double v) {
    char buf[64];
    for (int prec = 6; prec <= 17; ++prec) {
        std::snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (std::strtod(buf, nullptr) == v) break;
    }
    return buf;
}

} // namespace detail

// ------------------------------------------------------------------ node
double node::value(int64_t i) const {
    if (kind != op::Constant || !data) fail(where(), "value() of a node that is not a Constant");
    return detail::load(attr.type, data->bytes.data(), i);
}
std::string node::where() const { return line > 0 ? "line " + std::to_string(line) : "node '" + id + "'"; }

// ----------------------------------------------------------------- graph
graph::graph() = default;
graph::~graph() = default;

std::string graph::unique_id(const std::string &base) const {
    const std::string b = base.empty() ? "n" : base;
    if (!find(b)) return b;
    for (int i = 1;; ++i) {
        std::string c = b + "_" + std::to_string(i);
        if (!find(c)) return c;
    }
}

node *graph::add(op kind, std::vector<node *> inputs, attributes a, const std::string &id) {
    auto n = std::make_unique<node>();
    n->kind = kind;
    n->inputs = std::move(inputs);
    n->attr = std::move(a);
    n->id = unique_id(id.empty() ? std::string(to_string(kind)) : id);
    n->friendly_name = n->id;
    nodes_.push_back(std::move(n));
    return nodes_.back().get();
}
node *graph::parameter(dtype t, shape_t s, const std::string &id) {
    attributes a;
    a.type = t;
    a.shape = std::move(s);
    return add(op::Parameter, {}, a, id);
}
node *graph::constant(dtype t, shape_t s, std::shared_ptr<const constant_data> d, const std::string &id) {
    attributes a;
    a.type = t;
    a.shape = std::move(s);
    node *n = add(op::Constant, {}, a, id);
    n->data = std::move(d);
    return n;
}
node *graph::constant_f32(shape_t s, const std::vector<float> &v, const std::string &id) {
    auto d = std::make_shared<constant_data>();
    d->bytes.resize(v.size() * 4);
    std::memcpy(d->bytes.data(), v.data(), d->bytes.size());
    return constant(dtype::f32, std::move(s), d, id);
}
node *graph::constant_i64(const std::vector<int64_t> &v, const std::string &id) {
    return constant_int(dtype::s64, {static_cast<int64_t>(v.size())}, v, id);
}
node *graph::constant_int(dtype t, shape_t s, const std::vector<int64_t> &v, const std::string &id) {
    auto d = std::make_shared<constant_data>();
    d->bytes.assign(storage_bytes(t, static_cast<int64_t>(v.size())), 0);
    for (size_t i = 0; i < v.size(); ++i) detail::store(t, d->bytes.data(), i, static_cast<double>(v[i]));
    return constant(t, std::move(s), d, id);
}

node *graph::find(const std::string &id) const {
    for (const auto &n : nodes_)
        if (n->id == id) return n.get();
    return nullptr;
}
std::vector<node *> graph::consumers(const node *n) const {
    std::vector<node *> r;
    for (const auto &c : nodes_)
        for (node *in : c->inputs)
            if (in == n) {
                r.push_back(c.get());
                break;
            }
    return r;
}
void graph::replace_uses(node *old, node *with) {
    for (const auto &c : nodes_) {
        if (c.get() == with) continue;
        for (node *&in : c->inputs)
            if (in == old) in = with;
    }
}

std::vector<node *> graph::topo_order() const {
    // Iterative DFS with colors: 0 new, 1 on stack, 2 done.
    std::map<const node *, int> color;
    std::vector<node *> order;
    for (const auto &root : nodes_) {
        if (color[root.get()] == 2) continue;
        std::vector<std::pair<node *, size_t>> stack{{root.get(), 0}};
        color[root.get()] = 1;
        while (!stack.empty()) {
            auto &[n, next] = stack.back();
            if (next < n->inputs.size()) {
                node *in = n->inputs[next++];
                if (!in) fail(n->where(), "input is missing");
                int &c = color[in];
                if (c == 1) fail(in->where(), "cycle through node '" + in->id + "'");
                if (c == 0) {
                    c = 1;
                    stack.push_back({in, 0});
                }
            } else {
                color[n] = 2;
                order.push_back(n);
                stack.pop_back();
            }
        }
    }
    return order;
}
std::vector<node *> graph::parameters() const {
    std::vector<node *> r;
    for (const auto &n : nodes_)
        if (n->kind == op::Parameter) r.push_back(n.get());
    return r;
}
std::vector<node *> graph::results() const {
    std::vector<node *> r;
    for (const auto &n : nodes_)
        if (n->kind == op::Result) r.push_back(n.get());
    return r;
}
void graph::infer() {
    for (node *n : topo_order()) infer_node(*n, dynamic_value_);
}
bool graph::is_dynamic() const {
    for (const auto &n : nodes_)
        if (n->kind == op::Parameter)
            for (int64_t d : n->attr.shape)
                if (d == dynamic_dim) return true;
    return false;
}
void graph::bind_dynamic(int64_t value) {
    if (value < 1 || value > max_elems)
        fail("?", "the run-time dimension must be in [1, 2^31] (got " + std::to_string(value) + ")");
    dynamic_value_ = value;
}
void graph::prune() {
    std::set<const node *> live;
    std::vector<const node *> work;
    for (const auto &n : nodes_)
        if (n->kind == op::Result || n->kind == op::Parameter) work.push_back(n.get());
    while (!work.empty()) {
        const node *n = work.back();
        work.pop_back();
        if (!live.insert(n).second) continue;
        for (const node *in : n->inputs) work.push_back(in);
    }
    nodes_.erase(std::remove_if(nodes_.begin(), nodes_.end(), [&](const auto &n) { return !live.count(n.get()); }),
                 nodes_.end());
}
std::unique_ptr<graph> graph::clone() const {
    auto g = std::make_unique<graph>();
    std::map<const node *, node *> map;
    for (const auto &n : nodes_) {
        auto c = std::make_unique<node>(*n);
        map[n.get()] = c.get();
        g->nodes_.push_back(std::move(c));
    }
    for (const auto &c : g->nodes_)
        for (node *&in : c->inputs) in = map.at(in);
    g->dynamic_value_ = dynamic_value_;
    return g;
}
std::map<std::string, int> graph::count_ops() const {
    std::map<std::string, int> r;
    for (const auto &n : nodes_) ++r[to_string(n->kind)];
    return r;
}

} // namespace qconv::graph
