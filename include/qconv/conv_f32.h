// An f32 convolution primitive: NHWC f32 source and destination, plain f32
// weights [G·OCg][ICg][KH][KW] and an optional f32 bias of OC values, no
// post-ops. Like every qconv primitive it is chosen from an ordered table
// (oneDNN's f32 convolution, then the reference: conv_f32_implementations())
// and printed by QCONV_VERBOSE; the graph executor runs its f32
// Convolution nodes through it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "qconv/conv_desc.h"

namespace qconv {

namespace impl {
class conv_f32_primitive;
}

class convolution_f32 {
public:
    // impl: "auto" (the first row that can run d) or a row name. The
    // weights are copied or reordered: they may be freed afterwards. Throws
    // qconv::error naming the field for bad input, or "impl" when the named
    // row cannot run d.
    convolution_f32(const conv_desc &d, const float *weights, const float *bias, const std::string &impl = "auto");
    ~convolution_f32();
    convolution_f32(convolution_f32 &&) noexcept;
    convolution_f32 &operator=(convolution_f32 &&) noexcept;

    // src NHWC [mb][ih][iw][ic], dst NHWC [mb][oh][ow][oc]; threads 0: all the runtime's threads (qconv/threadpool.h).
    void execute(const float *src, float *dst, int threads = 0) const;
    // The row that runs it ("onednn:conv_f32", "ref:conv_f32").
    const std::string &impl_name() const;
    const conv_desc &desc() const;

private:
    std::unique_ptr<impl::conv_f32_primitive> p_;
};

// The f32 convolution table, in dispatch order.
std::vector<std::string> conv_f32_implementations();

} // namespace qconv
