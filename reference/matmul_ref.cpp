// Reference weight-compressed MatMul: Y[M,N] = X[M,K] · deq(W)ᵀ + bias[N].
//
// Each weight row is dequantized to f32 first,
//   deq(W)[n,k] = f32(W[n,k] − zp[n, k/GS]) · scale[n, k/GS]   (one f32 rounding),
// then dotted with the rows of X in double (f32 products are exact in double),
// rounded once to f32, and the bias is added in f32.
#include <string>
#include <vector>

#include "reference/reference.h"

#include "core/convert.h"
#include "core/parallel.h"

namespace qconv::ref {

namespace {

// Element i of a row-major weight tensor; u4/s4 hold element 2i in the low
// nibble of byte i (and 2i+1 in the high nibble).
int32_t weight_element(const uint8_t *w, dtype dt, int64_t i) {
    switch (dt) {
    case dtype::u8: return w[i];
    case dtype::s8: return static_cast<int8_t>(w[i]);
    case dtype::u4: return (w[i / 2] >> (4 * (i % 2))) & 0xF;
    case dtype::s4: {
        const int32_t v = (w[i / 2] >> (4 * (i % 2))) & 0xF;
        return v >= 8 ? v - 16 : v;
    }
    default: fail("wei_dt", std::string("must be u8, s8, u4 or s4, got ") + to_string(dt));
    }
}

int32_t zero_point_at(const matmul_desc &d, const matmul_weights &w, int64_t n, int64_t g) {
    switch (d.zp) {
    case matmul_desc::zp_kind::none: return 0;
    case matmul_desc::zp_kind::per_tensor: return w.zp[0];
    case matmul_desc::zp_kind::per_group: return w.zp[n * d.n_groups() + g];
    }
    return 0;
}

} // namespace

void matmul(const matmul_desc &d, const matmul_weights &w, const float *x, float *y) {
    d.validate();
    if (!w.wei) fail("wei", "is null");
    if (d.scale_dt == dtype::f16 ? !w.scale_f16 : !w.scale) fail("scale", "is null");
    if (d.zp != matmul_desc::zp_kind::none && !w.zp) fail("zp", "is null but a zero point is declared");
    if (d.with_bias && !w.bias) fail("bias", "with_bias is set but no bias was given");
    if (!x) fail("x", "is null");
    if (!y) fail("y", "is null");
    if (d.src_dt != dtype::f32 || d.dst_dt != dtype::f32) fail("x", "f16/bf16 activations: use matmul_typed");
    weight_element(w.wei, d.wei_dt, 0); // rejects a bad type outside the parallel loop

    const int64_t M = d.m, K = d.k, N = d.n, GS = d.group_size(), NG = d.n_groups();
    impl::parallel(0, [&](int ithr, int nthr) {
        std::vector<float> row(static_cast<size_t>(K));
        int64_t n_b, n_e;
        impl::balance(N, ithr, nthr, n_b, n_e);
        for (int64_t n = n_b; n < n_e; ++n) {
            for (int64_t k = 0; k < K; ++k) {
                const int64_t g = k / GS;
                const int32_t q = weight_element(w.wei, d.wei_dt, n * K + k) - zero_point_at(d, w, n, g);
                row[k] = static_cast<float>(q) * scale_at(d, w, n * NG + g);
            }
            for (int64_t m = 0; m < M; ++m) {
                const float *xr = x + m * K;
                double s = 0.0;
                for (int64_t k = 0; k < K; ++k) s += double(xr[k]) * double(row[k]);
                float r = static_cast<float>(s);
                if (d.with_bias) r += w.bias[n];
                y[m * N + n] = r;
            }
        }
    });
}

void matmul_typed(const matmul_desc &d, const matmul_weights &w, const void *x, void *y) {
    d.validate();
    if (!x) fail("x", "is null");
    if (!y) fail("y", "is null");
    matmul_desc f = d;
    f.src_dt = f.dst_dt = dtype::f32;
    std::vector<float> x32(size_t(d.m * d.k)), y32(size_t(d.m * d.n));
    detail::to_f32(d.src_dt, x, x32.data(), d.m * d.k, false);
    matmul(f, w, x32.data(), y32.data());
    detail::from_f32(d.dst_dt, y32.data(), y, d.m * d.n, false);
}

} // namespace qconv::ref
