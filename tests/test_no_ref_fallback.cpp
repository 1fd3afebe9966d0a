// No silent fall to the reference: on every ISA level up to the host's, every
// valid combination of (source type, destination type, zero-point kind,
// post-op class, dense KxK / 1x1 / depthwise) is taken by a row other than
// `ref:conv` when `auto` decides, except the combinations docs/dispatch.md
// lists ("What runs on the reference") with their reason.
//
// The decision is select_conv() on a simulated platform: nothing is created
// or executed, so levels below the host's are checked without capping.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dispatch/dispatcher.h"
#include "dispatch/host_platform.h"
#include "qconv/qconv.h"
#include "tests/support/testdata.h"

namespace qconv {
namespace {

struct combination {
    dtype src, dst;
    std::string zp;    // none | tensor | channel
    std::string chain; // post-op text
    std::string shape; // benchdnn text
};

// The documented exceptions (docs/dispatch.md): nothing but these may fall
// to the reference.
std::string documented_reference_only(const combination &) { return ""; }

zero_point make_zp(const std::string &kind, dtype src, int64_t ic) {
    if (kind == "tensor") return zero_point::tensor(src == dtype::s8 ? -7 : 7);
    if (kind == "channel") {
        std::vector<int32_t> v(static_cast<size_t>(ic));
        for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(3 + i % 5);
        return zero_point::channel(v);
    }
    return {};
}

std::vector<isa> levels_up_to_host() {
    std::vector<isa> out;
    for (const impl::isa_level &l : impl::isa_levels())
        if (l.level >= isa::avx2 && l.level <= impl::detected_isa()) out.push_back(l.level);
    return out;
}

TEST(NoRefFallback, AutoPicksAKernelRowForEveryCombination) {
    const std::vector<std::string> chains = {
        "",        "relu",        "gelu_erf", "add:per_oc",     "mul:full",
        "sum:0.5", "scale_shift", "prelu",    "fq:per_channel", "clip:0:6;fq:per_tensor:16"};
    // The last two: outputs that read only padding (a 1x1 with pads_begin
    // [1,0], pads_end [0,1]; a 3x3 with end pads of 4).
    const std::vector<std::string> shapes = {"mb1ic32ih8oc48kh3ph1", "mb1ic64ih7oc40kh1", "g24mb1ic24ih9oc24kh3ph1",
                                             "mb1ic32ih6iw6oc48kh1ph1pw0oh7ow7", "mb1ic32ih5oc48kh3ph1oh8"};
    int checked = 0, fell = 0;
    for (isa level : levels_up_to_host()) {
        const impl::platform plat{level, level == isa::avx2_vnni};
        for (dtype src : {dtype::u8, dtype::s8})
            for (dtype dst : {dtype::u8, dtype::s8, dtype::s32, dtype::f32})
                for (const char *zp : {"none", "tensor", "channel"}) {
                    if (src == dtype::s8 && std::string(zp) == "channel") continue; // invalid (semantics §3)
                    for (const auto &chain : chains)
                        for (const auto &shape : shapes) {
                            const combination c{src, dst, zp, chain, shape};
                            conv_problem p;
                            p.desc = conv_desc::parse(shape);
                            p.src_dt = src;
                            p.dst_dt = dst;
                            p.src_zp = make_zp(zp, src, p.desc.ic);
                            p.scales.assign(static_cast<size_t>(p.desc.oc), 0.5f);
                            p.with_bias = true;
                            p.ops = qconv::testdata::make_post_ops(chain, p.desc.oc, 1);
                            p.validate();
                            std::vector<std::string> rejections;
                            const auto choice = impl::select_conv(p, plat, {}, &rejections);
                            ++checked;
                            if (choice.name != "ref:conv") continue;
                            ++fell;
                            if (!documented_reference_only(c).empty()) continue;
                            std::string why;
                            for (const auto &r : rejections) why += "\n    " + r;
                            ADD_FAILURE()
                                << to_string(level) << " src " << to_string(src) << " dst " << to_string(dst) << " zp "
                                << zp << " '" << chain << "' " << shape << ": auto runs ref:conv" << why;
                        }
                }
    }
    std::printf("no-ref-fallback: %d combinations on %zu levels, %d on the reference (documented)\n", checked,
                levels_up_to_host().size(), fell);
    // Every combination on every level was asked (2 sources x 4 destinations
    // x 3 zero points, less s8 with a per-channel zp, x chains x shapes).
    EXPECT_EQ(checked, static_cast<int>(levels_up_to_host().size() * 20 * chains.size() * shapes.size()));
}

} // namespace
} // namespace qconv
