// Weight-compressed MatMul: Y[M,N] = X[M,K] · deq(W)ᵀ + bias[N].
//
// W is [N,K] in u8/s8/u4/s4 (4-bit types packed two per byte, element 2i of
// the whole tensor in the low nibble of byte i);
//   deq(W)[n,k] = (W[n,k] − zp[n, k/GS]) · scale[n, k/GS]
// with GS = K (per output channel) or a group size dividing K. The zero point
// is optional and may be per-tensor. X and Y are row-major, f32, f16 or bf16
// (src_dt/dst_dt: X converted exactly to f32, Y rounded once from the f32
// result, to nearest even; docs/semantics.md §7). Scales are
// f32 or IEEE half (scale_dt f16, as OpenVINO's compressed weights carry them;
// converted exactly to f32 at creation).
//
// M may be left to run time (m = matmul_desc::runtime_m, `m?` in text): the
// MatMul is created for K, N and the weights, and each execute(x, y, m)
// runs m rows on the row the table picks for m's class (every M up to 16,
// multiples of 16 up to 256, chunks of 256 beyond; docs/matmul_wc.md). Every
// class is planned at creation, the weights packed once per row that can run;
// concurrent execute() calls on one primitive are safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qconv/types.h"

namespace qconv {

struct matmul_desc {
    enum class zp_kind { none, per_tensor, per_group }; // per_group = per-OC when group == K
    static constexpr int64_t runtime_m = 0;             // m given to each execute()
    int64_t m = 1, k = 0, n = 0;
    dtype wei_dt = dtype::u8; // u8, s8, u4, s4
    int64_t group = 0;        // 0 or K: per output channel
    zp_kind zp = zp_kind::none;
    bool with_bias = false;
    dtype scale_dt = dtype::f32; // f32 (matmul_weights::scale) or f16 (matmul_weights::scale_f16)
    dtype src_dt = dtype::f32;   // X: f32, f16 or bf16
    dtype dst_dt = dtype::f32;   // Y: f32, f16 or bf16

    // "m1k4096n4096" (keys m k n, optional '_'; "m?" = runtime_m); other
    // fields keep defaults.
    static matmul_desc parse(const std::string &text);
    std::string str() const; // shape text, parse(str()) gives the same m/k/n
    bool runtime() const { return m == runtime_m; }
    void validate() const; // throws qconv::error naming the field
    int64_t group_size() const { return group == 0 ? k : group; }
    int64_t n_groups() const { return k / group_size(); }
    int64_t wei_bytes() const; // packed size of W
    int64_t scale_elems() const { return n * n_groups(); }
    int64_t zp_elems() const; // 0, 1 or n·n_groups
    double flops() const { return 2.0 * m * k * n; }
    std::string key() const;
};
const char *to_string(matmul_desc::zp_kind z);

struct matmul_weights {
    const uint8_t *wei = nullptr;        // wei_bytes() bytes
    const float *scale = nullptr;        // [N][NG], iff scale_dt is f32
    const int32_t *zp = nullptr;         // 1 or [N][NG] values in the weight type's range
    const float *bias = nullptr;         // N, iff with_bias
    const uint16_t *scale_f16 = nullptr; // [N][NG] IEEE half, iff scale_dt is f16
};

struct matmul_hints {
    std::string impl = "auto";
    // Opt-in: quantize X per row to int8 at run time and use integer dot
    // products (bounded error, docs/semantics.md). Never on by default.
    bool dynamic_quantization = false;
};

namespace impl {
class matmul_primitive;
struct platform;
} // namespace impl

class matmul {
public:
    matmul(const matmul_desc &d, const matmul_weights &w, const matmul_hints &hints = {});
    ~matmul();
    matmul(matmul &&) noexcept;
    matmul &operator=(matmul &&) noexcept;
    // x: M rows of K f32; y: M rows of N f32. threads 0: all the runtime's threads (the thread's threadpool_scope or default pool, else OpenMP).
    // For a MatMul created with a fixed M; one with a run-time M throws
    // qconv::error naming "m" (pass the rows: the overload below).
    void execute(const float *x, float *y, int threads = 0) const;
    // x: m rows of K f32; y: m rows of N f32. A run-time-M MatMul takes any
    // m ≥ 1; a fixed-M one only its own M. Bad m: qconv::error naming "m".
    void execute(const float *x, float *y, int64_t m, int threads = 0) const;
    // X and Y of the descriptor's src_dt / dst_dt (f16 and bf16 elements as
    // 16-bit words), M given (m) or the descriptor's (m = 0 on a fixed M).
    // The float* forms above require f32 activations.
    void execute_typed(const void *x, void *y, int64_t m = 0, int threads = 0) const;
    // The row that runs it; for a run-time M the rows per M range, e.g.
    // "jit:matmul_wc_x8:avx512_core(m1-4)+jit:matmul_wc_x8:avx512_core_amx(m5-)".
    const std::string &impl_name() const;
    // The row that runs m rows (any m ≥ 1 for a run-time M).
    const std::string &impl_name(int64_t m) const;
    const matmul_desc &desc() const;

private:
    void run_rows(const void *x, dtype x_dt, float *y, int64_t m, int threads) const;
    void build(const matmul_desc &d, const matmul_weights &w32, const matmul_hints &hints, double t0);
    static std::unique_ptr<impl::matmul_primitive> create_runtime(const matmul_desc &d, const matmul_weights &w,
                                                                  const matmul_hints &hints,
                                                                  const impl::platform &plat);
    std::unique_ptr<impl::matmul_primitive> p_;
};

std::vector<std::string> matmul_implementations();

// Unpacks element i of a packed u4/s4 (or byte) weight tensor as an integer.
int32_t weight_at(const uint8_t *w, dtype dt, int64_t i);
// Scale i ([N][NG] row-major) as f32, of either scale type.
inline float scale_at(const matmul_desc &d, const matmul_weights &w, int64_t i) {
    return d.scale_dt == dtype::f16 ? f16_to_f32(w.scale_f16[i]) : w.scale[i];
}

} // namespace qconv
