// ONNX models and NumPy arrays in and out of the graph layer
// (graph/io/onnx_reader.cpp, graph/io/npy.cpp; docs/graph.md, "ONNX").
//
// The reader maps an ONNX model (opsets 11–21 of the default domain, and
// com.microsoft's MatMulNBits) onto the graph IR of qconv/graph.h:
// initializers and Constant nodes become Constants, graph inputs Parameters
// (symbolic dims the run-time dimension `?`), graph outputs Results. A weight
// decompression — MatMulNBits, or a blocked / per-axis DequantizeLinear of
// constant weights feeding a MatMul — is lowered onto the pattern the executor
// runs as one compressed MatMul. Anything it does not take (an op, an
// attribute, a type, a shape, a truncated or corrupt file, an external data
// path outside the model's folder) is a qconv::error naming the node (name
// or index), its op type and the attribute; nothing is changed silently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "qconv/graph.h"

namespace qconv::graph {

// Largest model file or external data file read (protobuf's own limit for one
// message is 2 GiB; a ResNet-50 is ~100 MB in f32, ~25 MB in int8) and largest
// .npy file; checked before anything is allocated. Only regular files are read.
// The graph read is then held to check_run_memory (qconv/graph.h) like a .qg file.
constexpr int64_t max_onnx_bytes = (int64_t(1) << 31) - 1;
constexpr int64_t max_npy_bytes = (int64_t(1) << 31) - 1;

// What the reader is told besides the model.
struct onnx_options {
    // Shapes of graph inputs, by the inputs' ONNX names, bound before any
    // shape is inferred: each symbolic dim of that input (a dim_param, no
    // value, or -1) takes the value given, and the graph read has no `?` there.
    // A fixed dim that differs, another rank, a value outside [1, 2^31] or a
    // name that is not an input is a qconv::error naming the input (and dim).
    // Inputs not named keep their symbolic dims as the run-time dimension `?`,
    // which must then all carry one name.
    std::map<std::string, shape_t> input_shapes;
};

// Reads an ONNX model file; external data files are read from the model's
// folder (a location outside it is refused). graph::load_file calls it for a
// name ending in ".onnx".
std::unique_ptr<graph> load_onnx(const std::string &path);
std::unique_ptr<graph> load_onnx(const std::string &path, const onnx_options &o);
// Reads a serialized ModelProto from memory. External data is read relative
// to `base_dir`; with an empty base_dir a model with external data is refused.
std::unique_ptr<graph> parse_onnx(const void *data, size_t size, const std::string &base_dir = "");
std::unique_ptr<graph> parse_onnx(const void *data, size_t size, const std::string &base_dir, const onnx_options &o);

// NumPy .npy files (format versions 1.0, 2.0 and 3.0, little-endian, C order):
// f32, f16, u8, i8, i32 and i64 arrays, read into a tensor of that type.
// Anything else is a qconv::error naming the file and the header field.
tensor read_npy(const std::string &path);
tensor parse_npy(const void *data, size_t size, const std::string &what = "npy");
// Writes t as a little-endian array of t's shape and type (format 1.0): f32,
// f16, u8, i8, i32 and i64 as they are, bf16/u4/i4 as f32.
void write_npy(const std::string &path, const tensor &t);

} // namespace qconv::graph
