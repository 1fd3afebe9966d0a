// Text-format graph pieces shared by the graph tests.
#pragma once

#include <string>

namespace qconv::test {

// The input `x` (f32[1,8,H,W] given as "1,8,H,W") quantized per tensor (u8,
// scale s = 1/16, zero point z = 128) and dequantized (xd), and a 3x3
// convolution c1 of it with 8 dequantized i8 output channels (per-channel
// power-of-two scales, pads 1): the head of a QDQ block. The lines that
// follow read c1, s and z.
inline std::string int8_conv_head(const std::string &x_shape) {
    return "x    = Parameter f32[" + x_shape + "]\n" + R"(s    = Constant f32[] [0.0625]
z    = Constant u8[] [128]
xq   = QuantizeLinear(x, s, z)
xd   = DequantizeLinear(xq, s, z)
w1   = Constant i8[8,8,3,3] random(1, -20, 20)
w1s  = Constant f32[8] [0.0078125,0.015625,0.0078125,0.015625,0.0078125,0.015625,0.0078125,0.015625]
w1d  = DequantizeLinear(w1, w1s) axis=0
c1   = Convolution(xd, w1d) strides=[1,1] pads_begin=[1,1] pads_end=[1,1] dilations=[1,1]
)";
}

} // namespace qconv::test
