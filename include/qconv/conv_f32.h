// An f32 convolution primitive: NHWC f32 source and destination, plain f32
// weights [G·OCg][ICg][KH][KW], an optional f32 bias of OC values and an
// optional chain of post-ops. Like every qconv primitive it is chosen from an ordered table
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

// One operation of an f32 convolution's post-op chain, applied in order to
// every output after the bias (docs/semantics.md §5, "f32 convolution
// post-ops"): add / multiply are one f32 addition / product each (as the
// graph's Add and Multiply), relu is max(y, 0), clip min(max(y, lo), hi);
// hardswish is y·min(max(y + 3, 0), 6)/6, which an optimized row may round
// differently (within 2^-21 of y·relu6(y + 3)/6, a few f32 ulps).
struct f32_post_op {
    enum class kind { relu, clip, hardswish, add, multiply };
    kind k = kind::relu;
    float lo = 0.f, hi = 0.f;  // clip
    std::vector<float> values; // add / multiply: one value (every output) or OC values (per channel)
};
using f32_post_ops = std::vector<f32_post_op>;
const char *to_string(f32_post_op::kind k);

class convolution_f32 {
public:
    // impl: "auto" (the first row that can run d) or a row name. The
    // weights are copied or reordered: they may be freed afterwards. Throws
    // qconv::error naming the field for bad input, or "impl" when the named
    // row cannot run d.
    // post: the chain after the bias (empty: none); a value count other than
    // 1 or OC is refused naming "post".
    convolution_f32(const conv_desc &d, const float *weights, const float *bias, const std::string &impl = "auto",
                    const f32_post_ops &post = {});
    ~convolution_f32();
    convolution_f32(convolution_f32 &&) noexcept;
    convolution_f32 &operator=(convolution_f32 &&) noexcept;

    // src NHWC [mb][ih][iw][ic], dst NHWC [mb][oh][ow][oc]; threads 0: all the runtime's threads (qconv/threadpool.h).
    void execute(const float *src, float *dst, int threads = 0) const;
    // The row that runs it ("onednn:conv_f32", "ref:conv_f32").
    const std::string &impl_name() const;
    const conv_desc &desc() const;
    const f32_post_ops &post_ops() const;

private:
    std::unique_ptr<impl::conv_f32_primitive> p_;
};

// The f32 convolution table, in dispatch order.
std::vector<std::string> conv_f32_implementations();

} // namespace qconv
