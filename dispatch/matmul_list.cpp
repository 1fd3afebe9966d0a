// The weight-compressed MatMul implementation table, in dispatch order (see
// dispatch/conv_list.cpp for how a table is read; docs/dispatch.md).
#include "kernels/jit/matmul/matmul_wc.h"
#include "kernels/onednn/onednn_f32.h"
#include "reference/ref_rows.h"

namespace qconv::impl {

namespace {
std::vector<matmul_entry> build_matmul_list() {
    return {
        // Opt-in dynamic quantization of X (matmul_hints::dynamic_quantization):
        // AMX-INT8 from M = 12 on (its supports()), the same q and bound as the
        // VNNI row: measured 1.5x it at M = 16, 2.0x at M = 32 (u8, K = N = 4096);
        // below, the VNNI row is as fast or faster.
        matmul_wc_dq_amx_row("jit:matmul_wc_dq:avx512_core_amx"),
        matmul_wc_dq_row("jit:matmul_wc_dq:avx512_core_vnni"),
        // f32 accuracy on AMX-BF16 (bf16 hi/lo split of X, 3e-5 bound), before the
        // AVX-512 rows from M = 5 (8-bit) / 3 (4-bit) on (their supports()): measured
        // 4.3-4.8x them at M = 32; below, those are faster (docs/matmul_wc.md).
        matmul_wc_amx_row("jit:matmul_wc_x8:avx512_core_amx", wc_bits::x8),
        matmul_wc_amx_row("jit:matmul_wc_x4:avx512_core_amx", wc_bits::x4),
        // f32 accuracy: decompression into FMAs, zmm then ymm. From a crossing M
        // (their plan; jit::matmul_wc_prefill_min_m, kernels/jit/matmul/matmul_wc.h) the
        // prefill shape instead: weights unpacked to f32 once per call, then a
        // register-blocked FMA sweep over all M. Measured on Zen 4 (K = N = 4096,
        // 1 thread): ymm from M = 24 (8-bit) / 8 (4-bit), 1.12x / 1.24x the
        // blocked shape at M = 128; zmm never (its blocked shape runs at 95-97 %
        // of the f32 FMA peak there, the prefill 90-95 %).
        matmul_wc_row("jit:matmul_wc_x8:avx512_core", wc_width::zmm, wc_bits::x8),
        matmul_wc_row("jit:matmul_wc_x4:avx512_core", wc_width::zmm, wc_bits::x4),
        matmul_wc_row("jit:matmul_wc_x8:avx2", wc_width::ymm, wc_bits::x8),
        matmul_wc_row("jit:matmul_wc_x4:avx2", wc_width::ymm, wc_bits::x4),
        // Peers: oneDNN f32 on weights dequantized at pack time.
        onednn_f32_row("onednn:matmul_f32:dequantized", f32_gemm::matmul_primitive),
        onednn_f32_row("onednn:sgemm_f32:dequantized", f32_gemm::sgemm),
        // The reference: always last.
        ref_matmul_row(),
    };
}
} // namespace

const std::vector<matmul_entry> &matmul_list() {
    static const std::vector<matmul_entry> list = build_matmul_list();
    return list;
}

} // namespace qconv::impl
