// Why `onednn:any` is a peer and never chosen by "auto": below VNNI, oneDNN
// 2.6's int8 convolutions multiply u8·s8 pairs with vpmaddubsw, whose int16
// sum of two products saturates. This binary caps oneDNN at AVX2 (the
// variable must be set before oneDNN's first use, hence a static initializer
// in a binary of its own) and runs u8 255 × s8 127 (and × −128) over IC=64
// with a 1x1 kernel: the exact sum is 64·255·127 = 2072640 (and −2088960),
// the reference gives exactly that, and oneDNN's non-VNNI kernel gives
// something else (recorded, not hard-coded). The brgconv rows, which need
// VNNI, are unsupported under the cap and say what oneDNN offered instead.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "dispatch/host_platform.h"
#include "kernels/onednn/onednn_conv.h"
#include "reference/reference.h"

namespace {
const bool onednn_capped = [] { return setenv("ONEDNN_MAX_CPU_ISA", "AVX2", 1) == 0; }();
} // namespace

namespace qconv {
namespace {

using impl::onednn::selector;

conv_problem saturation_problem() {
    conv_problem p;
    p.desc = conv_desc::parse("mb1ic64ih2oc16kh1");
    p.src_dt = dtype::u8;
    p.dst_dt = dtype::s32;
    return p;
}

attr_set no_ops() {
    attr_set a;
    a.id = 1;
    return a;
}

// Runs `sel` on all-255 sources with the given weight value; returns dst.
std::vector<int32_t> run(const selector &sel, const conv_problem &p, int8_t w_value, std::string *info) {
    const std::vector<uint8_t> src(static_cast<size_t>(p.desc.src_elems()), 255);
    const std::vector<int8_t> wei(static_cast<size_t>(p.desc.wei_elems()), w_value);
    const auto k = impl::onednn::create(sel, p, no_ops(), impl::host_platform());
    *info = impl::onednn::impl_info(*k);
    const auto w = k->pack(wei.data(), nullptr);
    std::vector<int32_t> dst(static_cast<size_t>(p.desc.dst_elems()), 0);
    k->execute(*w, src.data(), dst.data(), {});
    return dst;
}

std::vector<int32_t> reference(const conv_problem &p, int8_t w_value) {
    const std::vector<uint8_t> src(static_cast<size_t>(p.desc.src_elems()), 255);
    const std::vector<int8_t> wei(static_cast<size_t>(p.desc.wei_elems()), w_value);
    std::vector<int32_t> dst(static_cast<size_t>(p.desc.dst_elems()), 0);
    ref::conv(p, no_ops(), src.data(), wei.data(), nullptr, dst.data(), {});
    return dst;
}

bool is_vnni(const std::string &info) {
    return info.find("vnni") != std::string::npos || info.find("amx") != std::string::npos;
}

TEST(OnednnSaturation, EnvironmentCapIsSetBeforeOnednnStarts) {
    ASSERT_TRUE(onednn_capped);
    EXPECT_STREQ(std::getenv("ONEDNN_MAX_CPU_ISA"), "AVX2");
}

TEST(OnednnSaturation, NonVnniKernelSaturatesWhereTheReferenceIsExact) {
    const conv_problem p = saturation_problem();
    for (const int8_t w : {int8_t(127), int8_t(-128)}) {
        const int32_t exact = 64 * 255 * static_cast<int32_t>(w);
        const auto want = reference(p, w);
        for (int32_t v : want) ASSERT_EQ(v, exact);

        std::string info;
        const auto got = run(selector::any(), p, w, &info);
        ::testing::Test::RecordProperty(w > 0 ? "onednn_255x127" : "onednn_255xm128", std::to_string(got[0]));
        ::testing::Test::RecordProperty("onednn_impl", info);
        std::printf("onednn:any = %s: 255 x %d over IC=64 -> %d (exact %d)\n", info.c_str(), w, got[0], exact);
        ASSERT_FALSE(is_vnni(info)) << "ONEDNN_MAX_CPU_ISA=AVX2 was not honoured: " << info;
        for (int32_t v : got) EXPECT_NE(v, exact) << info << " did not saturate";
    }
}

TEST(OnednnSaturation, BrgconvRowsAreUnsupportedBelowVnni) {
    const conv_problem p = saturation_problem();
    for (const selector &sel : {selector::brgconv("brgconv_1x1", isa::avx512_core_vnni),
                                selector::brgconv("brgconv", isa::avx512_core_vnni)}) {
        std::string why;
        // The platform claims VNNI; oneDNN (capped) offers no brgconv.
        EXPECT_FALSE(impl::onednn::supports(sel, p, no_ops(), impl::platform{isa::avx512_core_vnni}, &why));
        EXPECT_NE(why.find("offered: jit_uni_int8"), std::string::npos) << why;
    }
}

} // namespace
} // namespace qconv
