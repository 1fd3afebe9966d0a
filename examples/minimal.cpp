// The smallest programs of the C++ API: an int8 convolution and a
// weight-compressed MatMul, each created once, executed, and checked against a
// plain loop. Built with the library (target example_minimal, CTest
// example_minimal); outside this tree link qconv::qconv (README).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <qconv/qconv.h>

int main() {
    // ---- int8 convolution: 3x3, 8 -> 16 channels, 6x6 image, pad 1 ------
    // u8 source (NHWC) with a per-tensor zero point of 128, s8 weights
    // ([OC][IC][KH][KW]), f32 destination (NHWC), one scale per output channel.
    qconv::conv_problem p;
    p.desc = qconv::conv_desc::parse("mb1ic8ih6oc16oh6kh3ph1");
    p.src_dt = qconv::dtype::u8;
    p.dst_dt = qconv::dtype::f32;
    p.src_zp = qconv::zero_point::tensor(128);
    p.scales.assign(16, 0.5f);
    std::vector<uint8_t> src(6 * 6 * 8);
    std::vector<int8_t> wei(16 * 8 * 3 * 3);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 37 % 256);
    for (size_t i = 0; i < wei.size(); ++i) wei[i] = static_cast<int8_t>(int(i * 11 % 255) - 127);
    std::vector<float> dst(6 * 6 * 16);

    const qconv::convolution conv(p, wei.data(), /*bias=*/nullptr); // the dispatcher picks the row
    conv.execute(src.data(), dst.data());

    int bad = 0;
    for (int oh = 0; oh < 6; ++oh)
        for (int ow = 0; ow < 6; ++ow)
            for (int oc = 0; oc < 16; ++oc) {
                int32_t acc = 0;
                for (int kh = 0; kh < 3; ++kh)
                    for (int kw = 0; kw < 3; ++kw) {
                        const int ih = oh + kh - 1, iw = ow + kw - 1;
                        if (ih < 0 || ih >= 6 || iw < 0 || iw >= 6) continue; // padding adds nothing
                        for (int ic = 0; ic < 8; ++ic)
                            acc += wei[((oc * 8 + ic) * 3 + kh) * 3 + kw] * (src[(ih * 6 + iw) * 8 + ic] - 128);
                    }
                bad += dst[(oh * 6 + ow) * 16 + oc] != acc * 0.5f;
            }
    std::printf("convolution %s on %s: %d of %zu outputs differ\n", p.desc.str().c_str(), conv.impl_name().c_str(), bad,
                dst.size());

    // ---- compressed MatMul: Y[4x32] = X[4x64] . deq(W)^T, u4 weights --------
    // group-wise: one scale and zero point per 32 weights of a row.
    qconv::matmul_desc d = qconv::matmul_desc::parse("m4k64n32");
    d.wei_dt = qconv::dtype::u4;
    d.group = 32;
    d.zp = qconv::matmul_desc::zp_kind::per_group;
    std::vector<uint8_t> w4(d.wei_bytes()); // two per byte, element 2i in the low nibble
    std::vector<float> scale(d.scale_elems());
    std::vector<int32_t> zp(d.zp_elems());
    for (size_t i = 0; i < w4.size(); ++i) w4[i] = static_cast<uint8_t>(i * 29 % 256);
    for (size_t i = 0; i < scale.size(); ++i) scale[i] = 0.01f * static_cast<float>(i % 7 + 1);
    for (size_t i = 0; i < zp.size(); ++i) zp[i] = static_cast<int32_t>(i % 16);
    qconv::matmul_weights w;
    w.wei = w4.data();
    w.scale = scale.data();
    w.zp = zp.data();
    std::vector<float> x(4 * 64), y(4 * 32);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.1f * static_cast<float>(i));

    const qconv::matmul mm(d, w);
    mm.execute(x.data(), y.data());

    double worst = 0; // the contract: |y - exact| <= 1e-5 * sum |x * deq(w)| (docs/semantics.md §7)
    for (int m = 0; m < 4; ++m)
        for (int n = 0; n < 32; ++n) {
            double exact = 0, mag = 0;
            for (int k = 0; k < 64; ++k) {
                const int64_t e = int64_t(n) * 64 + k; // element index in W
                const int q = e % 2 ? w4[e / 2] >> 4 : w4[e / 2] & 15;
                const int64_t g = int64_t(n) * 2 + k / 32;
                const double deq = double(q - zp[g]) * scale[g];
                exact += x[m * 64 + k] * deq;
                mag += std::fabs(x[m * 64 + k] * deq);
            }
            worst = std::fmax(worst, std::fabs(y[m * 32 + n] - exact) / (1e-5 * mag + 1e-30));
        }
    std::printf("matmul %s u4 g32 on %s: error %.3f of the bound\n", d.str().c_str(), mm.impl_name().c_str(), worst);
    return bad == 0 && worst <= 1.0 ? 0 : 1;
}
