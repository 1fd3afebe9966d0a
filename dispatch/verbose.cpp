// Verbose output (see verbose.h).
#include "dispatch/verbose.h"

#include <chrono>
#include <cstdio>

namespace qconv::impl {

std::string verbose_problem(const conv_problem &p) {
    std::string s = p.desc.str();
    s += std::string(",dt=") + to_string(p.src_dt) + ":s8:" + to_string(p.dst_dt);
    s += std::string(",zp=") + to_string(p.src_zp.effective_kind());
    if (p.src_zp.effective_kind() == zero_point::kind::per_tensor) s += ":" + std::to_string(p.src_zp.at(0));
    if (!p.scales.empty()) s += p.scales.size() == 1 ? ",scales=per_tensor" : ",scales=per_oc";
    if (p.with_bias) s += ",bias";
    if (!p.ops.empty()) s += ",post_ops=" + to_string(p.ops);
    if (p.dst_zp != 0) s += ",dst_zp=" + std::to_string(p.dst_zp);
    return s;
}

std::string verbose_problem(const matmul_desc &d, const matmul_hints &h) {
    std::string s = d.str();
    s += std::string(",wei=") + to_string(d.wei_dt);
    s += ",group=" + std::to_string(d.group_size());
    s += std::string(",zp=") + to_string(d.zp);
    if (d.with_bias) s += ",bias";
    if (d.scale_dt == dtype::f16) s += ",scale=f16";
    if (d.src_dt != dtype::f32 || d.dst_dt != dtype::f32)
        s += std::string(",dt=") + to_string(d.src_dt) + ":" + to_string(d.dst_dt);
    if (h.dynamic_quantization) s += ",dynamic_quantization";
    return s;
}

double now_ms() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}

std::string verbose_ms(double ms) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4f", ms);
    return buf;
}

} // namespace qconv::impl
