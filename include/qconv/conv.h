// The int8 convolution primitive.
//
// A conv_problem says *what* to compute: shape (conv_desc), data types, the
// source zero point, output scales, bias and the logical post-op chain. A
// convolution is created once from a problem plus its weights and bias: the
// dispatcher builds the attribute sets, walks the ordered implementation list
// and the first implementation that supports the problem packs the weights.
// execute() may then be called any number of times, from any number of
// threads at once (each with its own buffers).
//
// Output pipeline per element (docs/semantics.md):
//   acc = Σ w·(x − zp)   exact int32, padding contributes zero
//   y   = acc·scale[c] + bias[c]  → post-ops in order → + dst_zp → store
//   (integers: round half to even, saturate)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qconv/conv_desc.h"
#include "qconv/post_ops.h"
#include "qconv/threadpool.h"
#include "qconv/types.h"

namespace qconv {

struct conv_problem {
    conv_desc desc;
    dtype src_dt = dtype::u8; // u8 or s8
    dtype dst_dt = dtype::u8; // f32, s32, s8 or u8
    zero_point src_zp;
    std::vector<float> scales; // empty (1.0), 1 value, or OC values
    bool with_bias = false;
    post_ops ops;
    int32_t dst_zp = 0;

    void validate() const; // throws qconv::error naming the field
    float scale(int64_t c) const { return scales.empty() ? 1.f : scales.size() == 1 ? scales[0] : scales[c]; }
    // The fused depthwise item (post_op::kind::dw_conv) of ops, or null.
    const post_op *dw() const;
    // The destination's shape: desc, or with a dw item the depthwise
    // convolution's (g = ic = oc = OC, 3x3, padding 1, its stride) over desc's
    // output. execute() writes dst_desc().dst_elems() elements of dst_dt.
    conv_desc dst_desc() const;
    int64_t dst_elems() const { return dst_desc().dst_elems(); }
    // Stable text identity of everything above, values included (cache key).
    std::string key() const;
    bool operator==(const conv_problem &o) const;
};

// Execution-time arguments besides src and dst.
struct exec_args {
    // One f32 NHWC tensor of dst's shape per `full` binary post-op, in chain order.
    std::vector<const float *> binary;
    int threads = 0; // 0: all the runtime's threads (the pool's, else OpenMP's default)
    // The caller's pool for this call (qconv/threadpool.h); null: the
    // thread's threadpool_scope, else the default pool, else OpenMP.
    threadpool *pool = nullptr;
};

struct conv_hints {
    // Allow oneDNN brgconv with binary post-ops on AVX-512 VNNI (OpenVINO's
    // runtime-info switch; docs/dispatch.md, Attribute sets).
    bool enforce_brgconv = false;
    // "auto" or an implementation name (see implementations()).
    std::string impl = "auto";
    // Tuned dispatch (also QCONV_DISPATCH=tune): every row that accepts the
    // problem is timed once at creation on data of its shape and the fastest
    // is kept for this problem in the process (docs/dispatch.md). Every row
    // "auto" may pick is exact, so the choice changes the speed, never the
    // result. Off by default: dispatch stays deterministic.
    bool tune = false;
};

namespace impl {
class conv_primitive;
}

class convolution {
public:
    // weights: plain [G·OCg][ICg][KH][KW] s8; bias: OC f32 (null iff !with_bias).
    convolution(const conv_problem &p, const int8_t *weights, const float *bias, const conv_hints &hints = {});
    ~convolution();
    convolution(convolution &&) noexcept;
    convolution &operator=(convolution &&) noexcept;

    // src NHWC of src_dt, dst NHWC of dst_dt (read too when a sum post-op is present).
    void execute(const void *src, void *dst, const exec_args &args = {}) const;

    const std::string &impl_name() const;
    int attr_id() const;
    const conv_problem &problem() const;
    // Whether the implementation returns the reference's bits for every
    // input. Always true for what "auto" picks; false for a peer forced by
    // name that runs a saturating oneDNN kernel (below VNNI).
    bool exact() const;

private:
    std::unique_ptr<impl::conv_primitive> p_;
};

// Names of the conv implementations in dispatch order (peers included).
std::vector<std::string> conv_implementations();

} // namespace qconv
