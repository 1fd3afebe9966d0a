// qconv::convolution_f32: validation, the walk over conv_f32_list() (a row
// whose creation fails records the reason and the next row is tried), and
// execution with verbose lines like the other primitives.
#include "qconv/conv_f32.h"
#include "dispatch/host_platform.h"

#include "dispatch/dispatcher.h"
#include "dispatch/environment.h"
#include "dispatch/verbose.h"
#include "qconv/types.h"

namespace qconv {

namespace impl {
class conv_f32_primitive {
public:
    conv_desc desc;
    f32_post_ops post;
    std::string name, verbose_desc;
    std::shared_ptr<const conv_f32_kernel> kernel;
};

namespace {
std::string join(const std::vector<std::string> &v) {
    std::string s;
    for (const auto &x : v) s += (s.empty() ? "" : "; ") + x;
    return s;
}

std::string valid_names() {
    std::string s = "auto";
    for (const auto &e : conv_f32_list()) s += ", " + e.name;
    return s;
}

// The first row of the table (or the named one) that builds a kernel for d.
void choose(const conv_desc &d, const float *wei, const float *bias, const std::string &impl, const f32_post_ops &post,
            conv_f32_primitive *out) {
    const platform plat = host_platform();
    const bool forced = !is_auto(impl);
    bool known = !forced;
    std::vector<std::string> skipped;
    for (const auto &e : conv_f32_list()) {
        if (forced && e.name != impl) continue;
        known = true;
        std::string why;
        if (!plat.has_all(e.needs)) why = "platform " + plat.str() + " lacks " + plat.features.missing(e.needs);
        else if (e.decide(d, plat, &why)) try {
                out->kernel = e.build(d, wei, bias, post);
                out->name = e.name;
                return;
            } catch (const error &err) {
                why = err.what();
            }
        if (verbose_level() >= 2) verbose_print("skip," + e.name + ",-," + why);
        skipped.push_back(e.name + ": " + why);
    }
    if (!known) fail("impl", "unknown implementation '" + impl + "' (valid: " + valid_names() + ")");
    fail("impl", (forced ? "'" + impl + "' does not support this problem: " : "no implementation supports it: ") +
                     join(skipped));
}
void check_post_ops(const conv_desc &d, const f32_post_ops &post) {
    for (size_t i = 0; i < post.size(); ++i) {
        const f32_post_op &o = post[i];
        const std::string at = "post[" + std::to_string(i) + "] (" + to_string(o.k) + ")";
        const bool binary = o.k == f32_post_op::kind::add || o.k == f32_post_op::kind::multiply;
        if (binary && o.values.size() != 1 && static_cast<int64_t>(o.values.size()) != d.oc)
            fail("post",
                 at + ": " + std::to_string(o.values.size()) + " values, expected 1 or oc = " + std::to_string(d.oc));
        if (!binary && !o.values.empty()) fail("post", at + ": takes no values");
        if (o.k == f32_post_op::kind::clip && !(o.lo <= o.hi))
            fail("post", at + ": lo " + std::to_string(o.lo) + " is not <= hi " + std::to_string(o.hi));
    }
}

std::string post_ops_str(const f32_post_ops &post) {
    std::string s;
    for (const auto &o : post) s += (s.empty() ? "" : ";") + std::string(to_string(o.k));
    return s;
}
} // namespace
} // namespace impl

const char *to_string(f32_post_op::kind k) {
    switch (k) {
    case f32_post_op::kind::relu: return "relu";
    case f32_post_op::kind::clip: return "clip";
    case f32_post_op::kind::hardswish: return "hardswish";
    case f32_post_op::kind::add: return "add";
    case f32_post_op::kind::multiply: return "multiply";
    }
    return "?";
}

convolution_f32::convolution_f32(const conv_desc &d, const float *weights, const float *bias, const std::string &impl,
                                 const f32_post_ops &post) {
    const double t0 = impl::now_ms();
    d.validate();
    if (!weights) fail("weights", "null pointer");
    impl::check_post_ops(d, post);
    impl::check_openmp_threads();
    auto p = std::make_unique<impl::conv_f32_primitive>();
    p->desc = d;
    p->post = post;
    impl::choose(d, weights, bias, impl, post, p.get());
    if (impl::verbose_level() >= 1) {
        p->verbose_desc = d.str() + ",dt=f32:f32:f32" + (post.empty() ? "" : ",post=" + impl::post_ops_str(post));
        impl::verbose_print(std::string("create,cache_miss,") + p->name + ",-," + p->verbose_desc + "," +
                            impl::verbose_ms(impl::now_ms() - t0));
    }
    p_ = std::move(p);
}

convolution_f32::~convolution_f32() = default;
convolution_f32::convolution_f32(convolution_f32 &&) noexcept = default;
convolution_f32 &convolution_f32::operator=(convolution_f32 &&) noexcept = default;

void convolution_f32::execute(const float *src, float *dst, int threads) const {
    if (!p_) fail("convolution_f32", "moved-from primitive");
    if (!src) fail("src", "null pointer");
    if (!dst) fail("dst", "null pointer");
    impl::check_threads_argument(threads);
    impl::verbose_exec(
        p_->name, [&] { p_->kernel->execute(src, dst, threads); },
        [&] { return p_->verbose_desc.empty() ? p_->desc.str() + ",dt=f32:f32:f32" : p_->verbose_desc; });
}

const std::string &convolution_f32::impl_name() const { return p_->name; }
const conv_desc &convolution_f32::desc() const { return p_->desc; }
const f32_post_ops &convolution_f32::post_ops() const { return p_->post; }

std::vector<std::string> conv_f32_implementations() {
    std::vector<std::string> names;
    for (const auto &e : impl::conv_f32_list()) names.push_back(e.name);
    return names;
}

} // namespace qconv
