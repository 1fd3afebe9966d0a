// ONNX test models built in C++ with ONNX's protobuf classes (libonnx-dev), so
// the ONNX tests need no Python: a small builder and the models of
// tests/test_onnx.cpp, each with the values it was made from, so a test can
// compute the expected outputs independently of the reader.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace qconv::test::onnx_model {

// TensorProto data types (int4/uint4 are newer than ONNX 1.12's enum).
enum : int { FLOAT = 1, UINT8 = 2, INT8 = 3, INT32 = 6, INT64 = 7, FLOAT16 = 10, DOUBLE = 11, UINT4 = 21, INT4 = 22 };

class builder {
public:
    // Imports ai.onnx at `opset`, and com.microsoft (version 1) when `microsoft`.
    explicit builder(int64_t opset = 17, bool microsoft = false);
    ::onnx::ModelProto model;
    ::onnx::GraphProto &graph() { return *model.mutable_graph(); }

    // A graph input; a negative dim is the symbolic dim `symbol`.
    void input(const std::string &name, int type, const std::vector<int64_t> &dims, const std::string &symbol = "N");
    void output(const std::string &name, int type = FLOAT);
    // Initializers: f32 values in raw_data (or float_data when !raw), i64 in
    // int64_data, any type from its packed bytes in raw_data.
    ::onnx::TensorProto &init_f32(const std::string &name, const std::vector<int64_t> &dims,
                                  const std::vector<float> &v, bool raw = true);
    ::onnx::TensorProto &init_i64(const std::string &name, const std::vector<int64_t> &v);
    ::onnx::TensorProto &init_raw(const std::string &name, int type, const std::vector<int64_t> &dims,
                                  const std::vector<uint8_t> &bytes);
    ::onnx::NodeProto &node(const std::string &op, const std::vector<std::string> &in,
                            const std::vector<std::string> &out, const std::string &name = "",
                            const std::string &domain = "");
    // Moves every initializer's raw_data into an external data file `file`
    // (location/offset/length), written by save() next to the model.
    void externalize(const std::string &file);
    std::string bytes() const;
    void save(const std::string &path) const;

private:
    std::string external_file_, external_blob_;
};

void attr(::onnx::NodeProto &n, const std::string &name, int64_t v);
void attr(::onnx::NodeProto &n, const std::string &name, float v);
void attr(::onnx::NodeProto &n, const std::string &name, const std::string &v);
void attr(::onnx::NodeProto &n, const std::string &name, const std::vector<int64_t> &v);

// Deterministic values (splitmix64): floats uniform in [lo, hi), integers in [lo, hi].
std::vector<float> uniform(uint64_t seed, size_t n, float lo, float hi);
std::vector<int> integers(uint64_t seed, size_t n, int lo, int hi);
// Elements packed two per byte, element 2i in the low nibble of byte i.
std::vector<uint8_t> pack4(const std::vector<int> &v);

// The transformer feed-forward block y = W2·gelu(W1·x + b1) + b2 with 4-bit
// group-quantized weights (hidden → inner → hidden, groups of `block` along K,
// uint4 values and zero points), x of shape [1, tokens, hidden] with a
// symbolic token count. `w1`, `w2` hold [N][K] values, `s*`/`z*` [N][K/block].
struct ffn_weights {
    int64_t hidden = 0, inner = 0, block = 0;
    std::vector<int> w1, z1, w2, z2;
    std::vector<float> s1, s2, b1, b2;
};
ffn_weights make_ffn_weights(int64_t hidden, int64_t inner, int64_t block, uint64_t seed);
// com.microsoft MatMulNBits (opset 17; Gelu in its erf form, Div/Erf/Add/Mul/Mul),
// zero points packed (`typed_zp`: as f32 values).
builder ffn_matmulnbits(const ffn_weights &w, bool typed_zp = false);
// Opset 21: blocked uint4 DequantizeLinear (axis 0, block_size) + MatMul, Gelu.
builder ffn_dequantize(const ffn_weights &w);
// The expected output of the FFN for x [tokens][hidden] (double accumulation).
std::vector<double> ffn_reference(const ffn_weights &w, const std::vector<float> &x, int64_t tokens);

// A small float CNN on x [1, 4, 8, 8]: Conv 3x3 (pads 1) + bias → Relu →
// grouped Conv 3x3 stride 2 (group 2, auto_pad SAME_UPPER), plus a 1x1
// stride-2 Conv of the first conv's output → Add → Reshape [1, -1] (shape from
// an initializer) → Gemm (transB = 1, alpha 0.5, beta 2, C) → Mul by a Constant
// node → y [1, 10].
builder small_cnn(uint64_t seed);
std::vector<double> small_cnn_reference(uint64_t seed, const std::vector<float> &x);

} // namespace qconv::test::onnx_model
