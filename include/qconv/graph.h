// The graph layer: a small OpenVINO-like IR, its text format, the rewrite
// passes and an executor that runs every node through qconv's primitives.
//
// A graph owns its nodes. Every node has exactly one output with a static
// element type and shape, set by shape inference (graph::infer) from the
// node's inputs and attributes. Layout follows OpenVINO: Convolution data is
// NCHW, weights OIHW ([G, OCg, ICg, KH, KW] for GroupConvolution). Elementwise
// ops broadcast the numpy way. u4/i4 data is packed two per byte, element 2i
// in the low nibble of byte i.
//
// Text format (graph/io/text.cpp, docs in examples/README.md): one node per line,
//   id = Op(input, input) key=value ...   [name="friendly"] [rt={k=v,...}]
//   w  = Constant u4[64,32,1,1] random(1, 0, 15)      (or fill(v), or [v, v, ...])
//   x  = Parameter f32[1,32,4,4]
// '#' starts a comment. Errors name the line ("line 7: ...").
//
// Passes: convert_weight_compressed_conv1x1_to_matmul (docs/graph.md, "The
// conv1x1 → MatMul rewrite") records one decision per candidate Convolution;
// QCONV_VERBOSE=2 prints them.
// Execution: compiled_graph gives each node an implementation; a MatMul whose
// weights are a decompression subgraph becomes one qconv::matmul primitive.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qconv/types.h"

namespace qconv::graph {

namespace detail {
struct qconv_spec; // graph/ir/qconv_spec.h
}

// ------------------------------------------------------------------ types
// Element types are qconv::dtype (include/qconv/types.h), written in the text
// format by their OpenVINO names (ir_name: i8, i32, i64, i4; "s8" parses too).
using ::qconv::bits_of;
using ::qconv::dtype;
using ::qconv::ir_name;
using ::qconv::is_integer;
using ::qconv::parse_dtype;
using ::qconv::storage_bytes;

using shape_t = std::vector<int64_t>;
// `?` in a Parameter's shape: the graph's run-time dimension (a batch or
// sequence length given per run). Every `?` of a graph takes the same value;
// shapes are inferred with it (graph::bind_dynamic, compiled_graph::run).
constexpr int64_t dynamic_dim = -1;
std::string to_string(const shape_t &s); // "[1,2,3]"
int64_t elems_of(const shape_t &s);
// Largest element count of any tensor in a graph (2^31).
constexpr int64_t max_elems = int64_t(1) << 31;
// Throws qconv::error(field, ...) unless every dim is positive and the element
// count is at most max_elems.
void check_shape(const shape_t &s, const std::string &field);

enum class op {
    Parameter,
    Constant,
    Convert,
    Subtract,
    Multiply,
    Add,
    Reshape,
    Transpose,
    Convolution,
    GroupConvolution,
    MatMul,
    Relu,
    Gelu,
    // Quantized CNNs (docs/graph.md, "Ops of quantized CNNs").
    FakeQuantize,     // (x, input_low, input_high, output_low, output_high) levels
    QuantizeLinear,   // (x, scale [, zero_point]) axis: f32 → u8/i8
    DequantizeLinear, // (x, scale [, zero_point]) axis: u8/i8/i32 → scale's type
    MaxPool,          // (x) kernel strides pads_begin pads_end rounding_type auto_pad
    AvgPool,          // as MaxPool, plus exclude_pad
    ReduceMean,       // (x) axes keep_dims (global average pooling: axes=[2,3])
    Concat,           // (x, ...) axis
    Clamp,            // (x) min max (Relu6: min=0 max=6)
    PRelu,            // (x, slope): slope per channel on axis 1, or numpy broadcast
    Flatten,          // (x) axis: [prod(d[:axis]), prod(d[axis:])]
    Sigmoid,          // (x)
    Softmax,          // (x) axis
    Divide,           // (a, b) floating point: a / b, numpy broadcast
    Slice,            // (x) starts ends axes steps, as ONNX's Slice
    Pad,              // (x) pads_begin pads_end mode value: padding per dim (negative pads crop)
    Resize,           // (x) mode coordinate_mode nearest_mode, scales or sizes of the last two dims
    Sqrt,             // (x) floating point
    ConvTranspose,    // (NCHW x, w [C, OC/group, KH, KW]) strides pads_begin pads_end dilations output_padding group
    Erf,              // (x) floating point: erf(x) in f32 (the unfused erf form of Gelu; fuse_gelu)
    Tanh,             // (x) floating point: tanh(x) in f32 (the unfused tanh form of Gelu; fuse_gelu)
    // (a [, b], table) u8/i8: table[a] (256 entries) or table[a·256 + b] (65536), the bytes as
    // unsigned indices, b broadcast onto a; the output takes the table's type and a's shape. An
    // 8-bit elementwise island (tabulate_qdq_islands) as one lookup.
    LookupTable,
    // (NCHW x) block mode: each pixel's C·bh·bw channels become a bh x bw
    // block of C channels, as ONNX's DepthToSpace (bh = bw = blocksize there).
    DepthToSpace,
    // Internal: an int8 convolution made by lower_low_precision (quantized
    // source, s8 weights Constant [, f32 residual]); attributes::qconv holds it.
    QConvolution,
    Result
};
const char *to_string(op k);
op parse_op(const std::string &s, const std::string &field = "op");

enum class pad_mode { explicit_pads, valid, same_upper, same_lower };
const char *to_string(pad_mode m);

struct attributes {
    dtype type = dtype::f32;     // Parameter/Constant type; Convert destination
    shape_t shape;               // Parameter/Constant shape
    std::vector<int64_t> order;  // Transpose permutation
    std::vector<int64_t> target; // Reshape target (0 copies a dim with special_zero, -1 infers)
    bool special_zero = false;
    std::vector<int64_t> strides{1, 1}, pads_begin{0, 0}, pads_end{0, 0}, dilations{1, 1};
    pad_mode auto_pad = pad_mode::explicit_pads;
    bool transpose_a = false, transpose_b = false; // MatMul
    bool gelu_tanh = false;                        // Gelu approximation (default erf)
    int64_t levels = 256;                          // FakeQuantize
    // QuantizeLinear/DequantizeLinear (default 1; per tensor when the scale has
    // one element), Concat (required), Flatten (default 1), Softmax (default 1);
    // negative values count from the end.
    int64_t axis = 1;
    std::vector<int64_t> kernel;         // MaxPool/AvgPool (strides/pads/auto_pad above)
    bool exclude_pad = false;            // AvgPool
    bool ceil_mode = false;              // MaxPool/AvgPool rounding_type=ceil (default floor)
    double clamp_min = 0, clamp_max = 0; // Clamp
    std::vector<int64_t> axes;           // ReduceMean
    bool keep_dims = false;              // ReduceMean
    // Slice: per entry the start, end (exclusive) and step along axes[i]
    // (axes empty: 0, 1, ...; steps empty: 1), ONNX's negative indices and clamping.
    std::vector<int64_t> starts, ends, steps;
    // Pad (pads_begin / pads_end above: one per dim): mode constant (the value),
    // edge, reflect or wrap.
    std::string padding = "constant";
    double pad_value = 0;
    // Resize of the last two dims: mode nearest or linear; coordinate_mode
    // half_pixel, pytorch_half_pixel, align_corners or asymmetric; nearest_mode
    // round_prefer_floor, round_prefer_ceil, floor or ceil; either scales
    // (two f32 values) or sizes (two output dims).
    std::string resize_mode = "nearest", coordinate_mode = "half_pixel", nearest_mode = "round_prefer_floor";
    std::vector<double> scales;
    std::vector<int64_t> sizes;
    // ConvTranspose: extra output rows / columns at the end, and the group count.
    std::vector<int64_t> output_padding{0, 0};
    int64_t group = 1;
    // DepthToSpace: the block's rows and columns (bh, bw), and the mode: DCR
    // (output channel c of block position (a, b) is input channel
    // (a·bw + b)·C + c) or CRD (input channel (c·bh + a)·bw + b).
    std::vector<int64_t> block{1, 1};
    bool crd = false;
    // QConvolution: the lowered problem (graph/ir/qconv_spec.h), immutable and
    // shared by clones; type: its output type.
    std::shared_ptr<const detail::qconv_spec> qconv;
};

// Constant payload, shared between clones and rewrites.
struct constant_data {
    std::vector<uint8_t> bytes; // packed storage of the element type
    std::string generator;      // "random(1, 0, 15)" / "fill(0.5)"; empty: inline values
};

class node {
public:
    std::string id; // unique in the graph (text format left-hand side)
    std::string friendly_name;
    op kind = op::Parameter;
    std::vector<node *> inputs;
    attributes attr;
    std::map<std::string, std::string> rt_info;
    std::shared_ptr<const constant_data> data; // Constant only
    int line = 0;                              // source line in a text file (0: built in code)

    // Set by graph::infer().
    dtype out_type = dtype::f32;
    shape_t out_shape;
    std::vector<int64_t> pads_b, pads_e; // Convolution: pads after auto_pad

    // Constant element i (flat, row-major) as a double.
    double value(int64_t i) const;
    // "line 7" or "node 'id'": the field that error messages start with.
    std::string where() const;
};

class graph {
public:
    graph();
    ~graph();
    graph(const graph &) = delete;
    graph &operator=(const graph &) = delete;

    node *add(op kind, std::vector<node *> inputs, attributes a = {}, const std::string &id = "");
    node *parameter(dtype t, shape_t s, const std::string &id = "");
    node *constant(dtype t, shape_t s, std::shared_ptr<const constant_data> d, const std::string &id = "");
    node *constant_f32(shape_t s, const std::vector<float> &v, const std::string &id = "");
    node *constant_i64(const std::vector<int64_t> &v, const std::string &id = "");
    // Integer constant (u4/i4/u8/i8/i32/i64) from values (packed as required).
    node *constant_int(dtype t, shape_t s, const std::vector<int64_t> &v, const std::string &id = "");

    const std::vector<std::unique_ptr<node>> &nodes() const { return nodes_; }
    node *find(const std::string &id) const;
    std::vector<node *> consumers(const node *n) const;
    // Every input edge that reads `old` reads `with` instead (except edges of `with` itself).
    void replace_uses(node *old, node *with);
    // All nodes in a topological order; throws (naming a line) on a cycle.
    std::vector<node *> topo_order() const;
    std::vector<node *> parameters() const; // in creation order
    std::vector<node *> results() const;    // in creation order
    // Shape and type inference of every node, `?` taking the value bound
    // (default 1); throws qconv::error naming the node's line.
    void infer();
    // Whether some Parameter's shape holds `?` (dynamic_dim).
    bool is_dynamic() const;
    // The value `?` takes in infer() (≥ 1; throws qconv::error naming "?").
    void bind_dynamic(int64_t value);
    int64_t dynamic_value() const { return dynamic_value_; }
    // Removes nodes on which no Result depends (Parameters are kept).
    void prune();
    std::string unique_id(const std::string &base) const;
    std::unique_ptr<graph> clone() const;
    size_t size() const { return nodes_.size(); }
    // Nodes per op kind ("Convolution" → 2).
    std::map<std::string, int> count_ops() const;

private:
    std::vector<std::unique_ptr<node>> nodes_;
    int64_t dynamic_value_ = 1;
};

// Shape inference for one node (inputs already inferred); a Parameter's `?`
// takes `dynamic_value`.
void infer_node(node &n, int64_t dynamic_value = 1);

// ------------------------------------------------------------ text format
// parse() reads every line and infers every shape before it generates any
// constant's data, and refuses a graph check_run_memory() refuses.
std::unique_ptr<graph> parse(const std::string &text);
// The largest graph file load_file() reads (64 MiB) and its longest line
// (16 MiB: a Constant of a few million values written out); a larger file, a
// stream (/dev/zero, a pipe) that goes on past it, a longer line or a NUL byte
// is an error naming the file.
constexpr int64_t max_file_bytes = int64_t(64) << 20;
constexpr int64_t max_line_bytes = int64_t(16) << 20;
// A name ending in ".onnx" is read as an ONNX model (load_onnx, qconv/graph_onnx.h;
// its limit is max_onnx_bytes).
std::unique_ptr<graph> load_file(const std::string &path);
std::string to_text(const graph &g);
void save_file(const graph &g, const std::string &path);

// Generated constant data: random(seed, lo, hi) (integers inclusive, floats
// uniform in [lo, hi)), pow2(seed, emin, emax) (±2^e, for exact tests) or fill(v).
std::shared_ptr<constant_data> generate(dtype t, const shape_t &s, const std::string &spec);

// ----------------------------------------------------------------- passes
struct rewrite_record {
    std::string conv; // Convolution id
    bool rewritten = false;
    std::string reason; // why (not)
};
// Returns true to veto the rewrite of this (matched) Convolution.
using veto_callback = std::function<bool(const node &conv)>;

// Gelu fusion (docs/graph.md, "Gelu fusion"): each erf form
// x·0.5·(1 + erf(x/√2)) and tanh form x·0.5·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
// written with the elementwise ops (Erf, Tanh, Add, Multiply, Divide) whose
// inner values nothing else reads becomes one Gelu (gelu_tanh for the tanh
// form); the pattern's last node turns into it (id, names, rt_info kept) and
// the rest is pruned. Shapes must be inferred. Returns the Gelus made.
int fuse_gelu(graph &g);
std::vector<rewrite_record> convert_weight_compressed_conv1x1_to_matmul(graph &g, const veto_callback &veto = {});
// Removes Transpose pairs that cancel, also across unary elementwise ops
// (Transpose(Gelu(Transpose(x, p)), inv p) → Gelu(x)). Returns pairs removed.
int cancel_transposes(graph &g);
// ConvTranspose with kernel = stride (no pads, output padding or dilation,
// one group) → a 1x1 Convolution to OC·sh·sw channels and a DepthToSpace
// (DCR), moved past a following per-channel bias Add and per-tensor
// QuantizeLinear (docs/graph.md, "ConvTranspose as a convolution"). Returns
// the ConvTransposes rewritten.
int conv_transpose_to_conv(graph &g);
// A LookupTable that alone reads another one reads that one's input through
// one composed table (unary after unary, per channel too; unary after
// binary; binary after unary with one table of 256). Returns the pairs
// composed.
int compose_lookup_tables(graph &g);
// A MatMul of an activation [M, K] by quantized constant weights [K, N]
// (DequantizeLinear of Constants, per tensor or per N) → the same MatMul of
// the weights as [N, K] with transpose_b (the form the int8 lowering takes).
// Returns the MatMuls rewritten.
int matmul_weights_to_nk(graph &g);
// The low-precision lowering (docs/graph.md, "Low-precision lowering"): each
// quantized Convolution / GroupConvolution pattern — quantized activation
// (FakeQuantize levels=256 or DequantizeLinear), i8/u8 weights with a per-OC
// dequantization, [bias] [per-channel Multiply/Add] [Relu|PRelu|Clamp]
// [residual Add] [Relu|Clamp], output FakeQuantize/QuantizeLinear — becomes one
// QConvolution node run by one qconv::convolution; a MatMul [M,K]x[N,K]ᵀ of a
// quantized activation is lowered the same way as a 1x1 convolution. One
// record per candidate (rewritten = lowered); QCONV_VERBOSE=2 prints them.
std::vector<rewrite_record> lower_low_precision(graph &g);
// Runs the rewrite, then cancel_transposes, then lower_low_precision (its
// records in *lowered when given), prune and infer. Records are printed with QCONV_VERBOSE=2.
std::vector<rewrite_record> run_passes(graph &g, const veto_callback &veto = {},
                                       std::vector<rewrite_record> *lowered = nullptr);

// --------------------------------------------------------------- executor
// Memory order of a tensor's elements. `shape` always lists the dims in the
// IR's order (NCHW for 4-D activations); `plain` stores them row-major in that
// order, `nhwc` (4-D only) stores [N,H,W,C] — the order the int8 convolution
// takes, so quantized activations can stay NHWC between int8 operations with
// one layout change at the graph's boundaries.
enum class layout { plain, nhwc };
const char *to_string(layout l);

// A value of the executor: typed storage, packed as Constant data (u4/i4 two
// per byte, element 2i in the low nibble of byte i; f16 as IEEE half; bf16 as
// the top 16 bits of an f32; the others in their native little-endian form).
struct tensor {
    dtype type = dtype::f32;
    shape_t shape;
    layout order = layout::plain;
    aligned_vector<uint8_t> bytes; // storage_bytes(type, elems()); 64-byte aligned (qconv::cacheline_allocator)

    tensor() = default;
    // Zero-filled storage of type t and shape s, in layout o.
    tensor(dtype t, shape_t s, layout o = layout::plain);
    // Values given in the shape's (plain) order, rounded to t as a Convert
    // does (floats: nearest even; integers: half to even, saturated, NaN → 0).
    static tensor from_f32(dtype t, shape_t s, const std::vector<float> &v);
    static tensor from_values(dtype t, shape_t s, const std::vector<double> &v);

    int64_t elems() const { return elems_of(shape); }
    // Element i of the storage (in memory order) as a double / stores one (rounded to the type).
    double get(int64_t i) const;
    void set(int64_t i, double v);
    // All values in the shape's (plain) order, whatever the layout. Integers
    // beyond 2^24 and i64 beyond 2^53 round (use values() / get() for exact ones).
    std::vector<float> to_f32() const;
    std::vector<double> values() const;
    // The same values in layout o (a copy; o == order: unchanged).
    tensor to_layout(layout o) const;
    // f32 storage as floats (throws qconv::error unless type is f32).
    const float *f32() const;
    float *f32();
};

struct compile_options {
    int threads = 0; // 0: all the runtime's threads (a threadpool_scope around run() picks the pool)
    // Evaluate nodes whose inputs are all Constants once, at compile time
    // (a Convolution's decompression subgraph then becomes f32 weights). Off:
    // every node runs at every run() as the graph is written.
    bool fold_constants = true;
    // Opt-in: compressed MatMuls quantize their activations per row to int8 at
    // run time (qconv::matmul_hints::dynamic_quantization; bounded error).
    bool dynamic_quantization = false;
    // f32 elementwise ops of one shape that only each other read run as one
    // step (graph/exec/elementwise_regions.cpp; the same values). Off: one
    // step per op.
    bool elementwise_regions = true;
    // An f32 convolution with constant weights takes the Relu, Clamp,
    // hard-swish and per-channel / per-tensor Add, Subtract and Multiply ops
    // after it as its primitive's post-ops (graph/exec/conv_epilogue.cpp;
    // hard-swish within a few f32 ulps, the others the same values). Off:
    // they run as their own steps (or regions).
    bool conv_post_ops = true;
};

class compiled_graph {
public:
    explicit compiled_graph(const graph &g, int threads = 0);
    compiled_graph(const graph &g, const compile_options &o);
    ~compiled_graph();
    compiled_graph(const compiled_graph &) = delete;
    compiled_graph &operator=(const compiled_graph &) = delete;
    // One tensor per Parameter (graph order); returns one tensor per Result.
    // In a graph with `?` the inputs' shapes give its value (the same at
    // every `?`); the graph is compiled once per value (a few values are
    // kept), its compressed MatMuls are run-time-M primitives shared by all.
    std::vector<tensor> run(const std::vector<tensor> &inputs) const;
    // run() that also gives (node id, milliseconds) for every node that ran, in
    // execution order (a QConvolution's time includes its source's reorder).
    std::vector<tensor> run_profiled(const std::vector<tensor> &inputs,
                                     std::vector<std::pair<std::string, double>> *ms) const;
    // (node id, implementation) for every node, in execution order.
    std::vector<std::pair<std::string, std::string>> impls() const;

private:
    struct state;
    struct dynamic;
    static std::shared_ptr<const state> compile(const graph &g, const compile_options &o, dynamic *d,
                                                int64_t dynamic_value);
    static std::vector<tensor> run_state(const state &s, const std::vector<tensor> &inputs,
                                         std::vector<std::pair<std::string, double>> *ms = nullptr);
    int64_t dynamic_value_of(const std::vector<tensor> &inputs) const;
    std::shared_ptr<const state> s_; // the compilation impls() reports (at the graph's value of `?`)
    std::unique_ptr<dynamic> d_;     // a graph with `?`
};

// Random inputs for every Parameter: f32 uniform in [-1, 1); integer types
// uniform over their range. `?` takes dynamic_value (default: the graph's).
// Inputs that need more memory than the process may use are an error ("inputs").
std::vector<tensor> random_inputs(const graph &g, uint64_t seed, int64_t dynamic_value = 0);

// ----------------------------------------------------------------- memory
// About the bytes one run of g takes (shapes inferred): every node's output
// held in f32 as the executor holds it, the constants' own storage, the
// caller's inputs and the outputs returned.
double run_bytes(const graph &g);
// The most run_bytes() a graph may have (4 GiB).
constexpr int64_t max_run_bytes = int64_t(1) << 32;
// Throws qconv::error naming the largest tensor's node (its line) when
// run_bytes(g) is above max_run_bytes or above the memory this process may use
// (physical memory, cgroup limit, RLIMIT_AS/DATA). parse() checks it before
// any constant is generated, compiled_graph before anything is allocated.
void check_run_memory(const graph &g);

} // namespace qconv::graph
