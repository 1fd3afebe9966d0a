// Conv mode --dump=DIR: one folder DIR/NNNN/ per run of a problem on an
// implementation, enough to recompute the result with nothing but a loop.
//
//   problem.txt  key=value lines: desc (fully spelled benchdnn text), dt, zp,
//                post_ops, impl, attr, status, seed, data (random: compare bit
//                for bit; extreme: integers may differ by 1, README), the shape as separate keys
//                (pads top/left/bottom/right, dilation 1 = dense), scale,
//                bias, dst_zp, post_op_count and post_op<i>=<kind> k=v... lines
//   src.bin      NHWC, source type          wei.bin   s8 [G·OCg][ICg][KH][KW]
//   scale.bin    f32, 1 or OC values        bias.bin  f32 OC (only with bias)
//   zp.bin       s32, 1 or IC values (only with a zero point)
//   dst.bin      NHWC, destination type, as computed by the implementation
//   dst_prev.bin the destination before execution (only with a sum post-op)
//   post_op<i>_<param>.bin   f32 parameter vectors of post-op i (1 or OC values;
//                            `full` for a full binary tensor, NHWC); a dw_conv
//                            item: _wei.bin s8 [OC][3][3], _bias.bin, _scale.bin
//                            (its line gives stride, mid_dt and the depthwise
//                            desc; dst.bin then has that desc's shape)
// All arrays are raw little-endian.
#include <cstdio>
#include <fstream>

#include "qconv/post_ops.h"
#include "tools/conv_case.h"

namespace qconv::driver {

namespace {

std::string zp_text(const zero_point &z) {
    switch (z.k) {
    case zero_point::kind::none: return "none";
    case zero_point::kind::per_tensor: return "tensor:" + std::to_string(z.values.at(0));
    case zero_point::kind::per_channel: return "channel";
    }
    return "?";
}

const char *kind_name(post_op::kind k) {
    switch (k) {
    case post_op::kind::eltwise: return "eltwise";
    case post_op::kind::binary: return "binary";
    case post_op::kind::sum: return "sum";
    case post_op::kind::scale_shift: return "scale_shift";
    case post_op::kind::prelu: return "prelu";
    case post_op::kind::fake_quantize: return "fake_quantize";
    case post_op::kind::dw_conv: return "dw_conv";
    }
    return "?";
}

template <class T, class A>
void write_vec(const std::string &path, const std::vector<T, A> &v) {
    write_file(path, v.data(), v.size() * sizeof(T));
}

// Scalar fields of post-op i as "kind k=v ..." and its vectors as files.
std::string describe_post_op(const std::string &dir, size_t i, const post_op &op, int &full_index, const conv_case &c) {
    const std::string pre = dir + "/post_op" + std::to_string(i) + "_";
    std::string s = kind_name(op.k);
    auto vec = [&](const char *name, const std::vector<float> &v) {
        if (v.empty()) return;
        write_vec(pre + name + ".bin", v);
        s += std::string(" ") + name + "=" + std::to_string(v.size());
    };
    switch (op.k) {
    case post_op::kind::eltwise:
        s += std::string(" alg=") + to_string(op.alg) + " alpha=" + format_double(op.alpha, 9) +
             " beta=" + format_double(op.beta, 9);
        break;
    case post_op::kind::binary:
        s += std::string(" alg=") + to_string(op.balg) + " broadcast=" + to_string(op.bcast);
        if (op.bcast == broadcast::full) {
            write_vec(pre + "full.bin", c.full.at(static_cast<size_t>(full_index++)));
            s += " full=file";
        } else {
            vec("scale", op.scale);
        }
        break;
    case post_op::kind::sum:
        s += " scale=" + format_double(op.sum_scale, 9) + " zp=" + std::to_string(op.sum_zp);
        break;
    case post_op::kind::scale_shift:
        vec("scale", op.scale);
        vec("shift", op.shift);
        break;
    case post_op::kind::prelu: vec("scale", op.scale); break;
    case post_op::kind::fake_quantize:
        s += " levels=" + std::to_string(op.levels);
        vec("in_lo", op.in_lo);
        vec("in_hi", op.in_hi);
        vec("out_lo", op.out_lo);
        vec("out_hi", op.out_hi);
        break;
    case post_op::kind::dw_conv: {
        // The depthwise half: its shape, intermediate type, weights, bias and
        // scales; the items after this one are its post-ops, dst_dt and
        // dst_zp its destination's (docs/semantics.md §5).
        const conv_desc dd = c.p.dst_desc();
        s += " stride=" + std::to_string(op.dw_stride) + " mid_dt=" + to_string(op.dw_mid_dt) +
             " kernel=3 pad=1 desc=" + dd.str() + " mid_shape=" + std::to_string(c.p.desc.mb) + "x" +
             std::to_string(c.p.desc.oh) + "x" + std::to_string(c.p.desc.ow) + "x" + std::to_string(c.p.desc.oc);
        write_vec(pre + "wei.bin", op.dw_wei);
        s += " wei=" + std::to_string(op.dw_wei.size()) + "(s8,[OC][3][3])";
        vec("bias", op.dw_bias);
        vec("scale", op.dw_scales);
        break;
    }
    }
    return s;
}

} // namespace

void dump_run(const std::string &root, int index, const conv_case &c, const conv_settings &s, const std::string &impl,
              int attr_id, const std::string &status, const aligned_vector<uint8_t> &dst) {
    char num[16];
    std::snprintf(num, sizeof num, "%04d", index);
    const std::string dir = root + "/" + num;
    make_dirs(dir, "--dump");
    const conv_problem &p = c.p;
    const conv_desc &d = p.desc;

    std::ofstream t(dir + "/problem.txt");
    t << "desc=" << d.str() << "\n" // every field spelled out
      << "dst_desc=" << p.dst_desc().str() << "\n"
      << "dt=" << to_string(p.src_dt) << ":s8:" << to_string(p.dst_dt) << "\n"
      << "zp=" << zp_text(p.src_zp) << "\n"
      << "post_ops=" << to_string(p.ops) << "\n"
      << "impl=" << impl << "\n"
      << "attr=" << attr_id << "\n"
      << "status=" << status << "\n"
      << "seed=" << c.seed << "\n"
      << "data=" << (s.data == data_kind::extreme ? "extreme" : "random") << "\n";
    const std::pair<const char *, int64_t> shape[] = {
        {"mb", d.mb}, {"g", d.g},   {"ic", d.ic}, {"ih", d.ih}, {"iw", d.iw}, {"oc", d.oc},
        {"oh", d.oh}, {"ow", d.ow}, {"kh", d.kh}, {"kw", d.kw}, {"sh", d.sh}, {"sw", d.sw},
        {"pt", d.pt}, {"pl", d.pl}, {"pb", d.pb}, {"pr", d.pr}, {"dh", d.dh}, {"dw", d.dw}};
    for (const auto &kv : shape) t << kv.first << "=" << kv.second << "\n";
    t << "scale="
      << (p.scales.empty()       ? "none"
          : p.scales.size() == 1 ? "tensor"
                                 : "per_oc")
      << "\n"
      << "bias=" << (p.with_bias ? 1 : 0) << "\n"
      << "dst_zp=" << p.dst_zp << "\n"
      << "post_op_count=" << p.ops.size() << "\n";
    int full_index = 0;
    for (size_t i = 0; i < p.ops.size(); ++i)
        t << "post_op" << i << "=" << describe_post_op(dir, i, p.ops[i], full_index, c) << "\n";
    if (!t) throw usage_error("--dump: cannot write '" + dir + "/problem.txt'");

    write_vec(dir + "/src.bin", c.src);
    write_vec(dir + "/wei.bin", c.wei);
    write_vec(dir + "/scale.bin", p.scales.empty() ? std::vector<float>{1.f} : p.scales);
    if (p.with_bias) write_vec(dir + "/bias.bin", c.bias);
    if (p.src_zp.k != zero_point::kind::none) write_vec(dir + "/zp.bin", p.src_zp.values);
    write_vec(dir + "/dst.bin", dst);
    for (const auto &op : p.ops)
        if (op.k == post_op::kind::sum) {
            write_vec(dir + "/dst_prev.bin", c.dst_init);
            break;
        }
}

} // namespace qconv::driver
