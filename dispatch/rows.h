// The row constructors of every kernel family, for the two tables
// (dispatch/conv_list.cpp, dispatch/matmul_list.cpp). Each takes the row's
// full name, so that the name stands in one line of the table and grep finds
// it, and checks it against the configuration it builds (a mismatch is a
// qconv::error when the table is first used). The conv families declare
// theirs in their own headers (kernels/jit/conv_x8s8.h,
// kernels/onednn/onednn_conv.h).
#pragma once

#include <string>

#include "dispatch/impl.h"

namespace qconv::impl {

// The references (dispatch/ref_entries.cpp): `ref:conv`, `ref:matmul`.
conv_entry ref_conv_row();
matmul_entry ref_matmul_row();

// JIT compressed MatMul (kernels/jit/matmul_wc.cpp, matmul_wc_dq.cpp):
// jit:matmul_wc_{x8,x4}:{avx512_core,avx2} and the opt-in dynamic
// quantization jit:matmul_wc_dq:avx512_core_vnni.
matmul_entry matmul_wc_row(const std::string &name, bool zmm, bool x4);
matmul_entry matmul_wc_dq_row(const std::string &name);
// AMX-BF16 at f32 accuracy (kernels/jit/matmul_wc_amx.cpp): jit:matmul_wc_{x8,x4}:avx512_core_amx.
matmul_entry matmul_wc_amx_row(const std::string &name, bool x4);

// oneDNN f32 peers on dequantized weights (kernels/onednn/onednn_f32.cpp):
// onednn:matmul_f32:dequantized (use_matmul) and onednn:sgemm_f32:dequantized.
matmul_entry onednn_f32_row(const std::string &name, bool use_matmul);

} // namespace qconv::impl
