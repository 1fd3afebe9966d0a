// f32 helpers on oneDNN for the rest of qconv (internal).
//
// - conv_f32: an f32 convolution on NHWC data (the graph executor's f32 conv
//   and a peer for it); weights given plain [G·OCg][ICg][KH][KW] f32 and
//   reordered once into the layout oneDNN's chosen implementation wants.
// - sgemm(): Y[M,N] = X[M,K]·W[N,K]ᵀ (+ bias) with dnnl_sgemm, row-major,
//   no packing — the "dequantize then sgemm" peer of the compressed MatMul.
// - matmul_f32: the same product with a dnnl::matmul primitive whose weights
//   are reordered once (format_tag::any) — the "oneDNN f32 matmul" peer.
//
// All three are thread-safe to execute concurrently on different buffers
// (a dnnl::stream and a user scratchpad per call). oneDNN with OpenMP fixes
// a primitive's thread split when it is created, so conv_f32 and matmul_f32
// keep one primitive per thread count; `threads` 0 means OpenMP's default.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qconv/conv_desc.h"
#include "qconv/matmul.h"
#include "rows/row.h"

namespace qconv::impl::onednn {

class conv_f32 {
public:
    // bias: OC values or null; post: the chain after it (qconv/conv_f32.h).
    // Throws qconv::error if oneDNN cannot run it.
    conv_f32(const conv_desc &d, const float *wei, const float *bias, const f32_post_ops &post = {});
    ~conv_f32();
    // src NHWC [mb][ih][iw][ic], dst NHWC [mb][oh][ow][oc].
    void execute(const float *src, float *dst, int threads = 0) const;
    // oneDNN's implementation name (e.g. "brgconv:avx512_core").
    std::string impl_info() const;

private:
    struct state;
    std::unique_ptr<state> s_;
};

// Y[M,N] = X[M,K]·W[N,K]ᵀ + bias[N] (bias may be null) with dnnl_sgemm.
void sgemm(int64_t m, int64_t n, int64_t k, const float *x, const float *w, const float *bias, float *y,
           int threads = 0);

class matmul_f32 {
public:
    // w: [N][K] row-major f32; bias: N values or null.
    matmul_f32(int64_t m, int64_t k, int64_t n, const float *w, const float *bias);
    ~matmul_f32();
    // x: [M][K], y: [M][N], row-major.
    void execute(const float *x, float *y, int threads = 0) const;
    std::string impl_info() const;

private:
    struct state;
    std::unique_ptr<state> s_;
};

// deq(W) as f32 [N][K] for a compressed-MatMul weight set (docs/semantics.md
// §7): (W[n,k] − zp[n, k/GS]) · scale[n, k/GS].
std::vector<float> dequantize(const matmul_desc &d, const matmul_weights &w);

} // namespace qconv::impl::onednn

namespace qconv::impl {

// Table rows: oneDNN's f32 convolution (dispatch/conv_f32_list.cpp,
// onednn:conv_f32) and the oneDNN f32 peers of the compressed MatMul on
// dequantized weights (dispatch/matmul_list.cpp): onednn:matmul_f32:dequantized
// (the matmul primitive) and onednn:sgemm_f32:dequantized (dnnl_sgemm).
conv_f32_entry onednn_conv_f32_row(const std::string &name);
enum class f32_gemm { matmul_primitive, sgemm };
matmul_entry onednn_f32_row(const std::string &name, f32_gemm gemm);

} // namespace qconv::impl
