// Consumer of an installed qconv (the kernel library alone, no graph layer):
// one small convolution, checked by hand.
//
// 3x3 convolution, pad 1, over a 3x3 image of 4 channels where x[.., c] = c+1,
// weights of output channel 0 all 1 and of channel 1 equal to the input
// channel index. At the centre every tap is inside the image:
//   oc0 = 9·(1+2+3+4) = 90,  oc1 = 9·(0·1+1·2+2·3+3·4) = 180;
// at the top-left corner only 4 taps are: oc0 = 40. With a per-tensor zero
// point of 1 the centre of oc0 is 9·(0+1+2+3) = 54.
#include <cstdint>
#include <cstdio>
#include <vector>

#include <qconv/qconv.h>

namespace {
int failures = 0;

void expect(const char *what, int32_t got, int32_t want) {
    if (got != want) {
        std::printf("FAIL %s: got %d, expected %d\n", what, got, want);
        ++failures;
    }
}

std::vector<int32_t> run(const qconv::zero_point &zp) {
    qconv::conv_problem p;
    p.desc = qconv::conv_desc::parse("mb1ic4ih3oc2oh3kh3ph1");
    p.src_dt = qconv::dtype::u8;
    p.dst_dt = qconv::dtype::s32;
    p.src_zp = zp;
    std::vector<int8_t> wei(2 * 4 * 3 * 3);
    for (int oc = 0; oc < 2; ++oc)
        for (int ic = 0; ic < 4; ++ic)
            for (int k = 0; k < 9; ++k) wei[(oc * 4 + ic) * 9 + k] = static_cast<int8_t>(oc == 0 ? 1 : ic);
    std::vector<uint8_t> src(3 * 3 * 4);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i % 4 + 1);
    std::vector<int32_t> dst(3 * 3 * 2, -1);
    const qconv::convolution conv(p, wei.data(), nullptr);
    conv.execute(src.data(), dst.data());
    std::printf("consumer: ran on %s\n", conv.impl_name().c_str());
    return dst;
}
} // namespace

int main() {
    const auto d = run(qconv::zero_point::none());
    const int centre = (1 * 3 + 1) * 2;
    expect("centre oc0", d[centre], 90);
    expect("centre oc1", d[centre + 1], 180);
    expect("corner oc0", d[0], 40);
    const auto z = run(qconv::zero_point::tensor(1));
    expect("centre oc0 with zp 1", z[centre], 54);

    bool threw = false;
    try {
        qconv::conv_desc::parse("mb1ic0ih3oc2oh3kh3ph1");
    } catch (const qconv::error &) {
        threw = true;
    }
    if (!threw) {
        std::printf("FAIL: ic0 was accepted\n");
        ++failures;
    }
    std::printf(failures ? "consumer: FAILED\n" : "consumer: ok\n");
    return failures ? 1 : 0;
}
