// ONNX models and NumPy arrays in and out of the graph layer
// (graph/onnx_reader.cpp, graph/npy.cpp; docs/graph.md, "ONNX").
//
// The reader maps an ONNX model (opsets 13–21 of the default domain, and
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
#include <memory>
#include <string>

#include "qconv/graph.h"

namespace qconv::graph {

// Largest model file, external data file or .npy file read (protobuf's own
// limit for one message is 2 GiB); checked before anything is allocated.
constexpr int64_t max_file_bytes = (int64_t(1) << 31) - 1;

// Reads an ONNX model file; external data files are read from the model's
// folder (a location outside it is refused). graph::load_file calls it for a
// name ending in ".onnx".
std::unique_ptr<graph> load_onnx(const std::string &path);
// Reads a serialized ModelProto from memory. External data is read relative
// to `base_dir`; with an empty base_dir a model with external data is refused.
std::unique_ptr<graph> parse_onnx(const void *data, size_t size, const std::string &base_dir = "");

// NumPy .npy files (format versions 1.0, 2.0 and 3.0, little-endian, C order):
// f32, f16, u8, i8, i32 and i64 arrays (i32/i64 values within ±2^24, exact in
// the tensor's f32 storage). Anything else is a qconv::error naming the file
// and the header field.
tensor read_npy(const std::string &path);
tensor parse_npy(const void *data, size_t size, const std::string &what = "npy");
// Writes t's values as a little-endian f32 array of t's shape (format 1.0).
void write_npy(const std::string &path, const tensor &t);

} // namespace qconv::graph
