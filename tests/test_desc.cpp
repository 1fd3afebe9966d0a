// Descriptors: benchdnn syntax parse/print round trips over the project's
// shape lists, defaults, derived sizes and pads, dilation, separators; the
// matmul descriptor and packed weight access; the post-op text form and its
// generated values; conv_problem identity.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "qconv/qconv.h"
#include "tests/support/testdata.h"

using namespace qconv;

namespace {

// Problem lines of a benchdnn shape list: '#' starts a comment (outside a
// quoted name), blank lines are skipped.
std::vector<std::string> problem_lines(const std::string &path) {
    std::ifstream in(path);
    EXPECT_TRUE(in.good()) << path;
    std::vector<std::string> out;
    std::string line;
    while (std::getline(in, line)) {
        bool quoted = false;
        size_t cut = line.size();
        for (size_t i = 0; i < line.size(); ++i) {
            if (line[i] == '"') quoted = !quoted;
            if (line[i] == '#' && !quoted) {
                cut = i;
                break;
            }
        }
        line = line.substr(0, cut);
        const size_t b = line.find_first_not_of(" \t\r");
        if (b == std::string::npos) continue;
        out.push_back(line.substr(b, line.find_last_not_of(" \t\r") - b + 1));
    }
    return out;
}

bool is_pow2(float v) {
    int e;
    return v > 0 && std::frexp(v, &e) == 0.5f;
}

// The named fields of a descriptor as "name=value ..." (one comparison that
// prints every field when it fails): fields(d, "oh pb") == "oh=112 pb=2".
std::string fields(const conv_desc &d, const std::string &names) {
    const std::pair<const char *, int64_t> all[] = {
        {"g", d.g},   {"mb", d.mb}, {"ic", d.ic}, {"ih", d.ih}, {"iw", d.iw}, {"oc", d.oc},
        {"oh", d.oh}, {"ow", d.ow}, {"kh", d.kh}, {"kw", d.kw}, {"sh", d.sh}, {"sw", d.sw},
        {"pt", d.pt}, {"pl", d.pl}, {"pb", d.pb}, {"pr", d.pr}, {"dh", d.dh}, {"dw", d.dw}};
    std::string out, name;
    std::istringstream in(names);
    while (in >> name) {
        bool found = false;
        for (const auto &f : all)
            if (name == f.first) out += (out.empty() ? "" : " ") + name + "=" + std::to_string(f.second), found = true;
        if (!found) ADD_FAILURE() << "no field '" << name << "'";
    }
    return out;
}

} // namespace

// ------------------------------------------------------------ round trips
TEST(ConvDesc, RoundTripOverEveryShapeList) {
    const std::string dir = std::string(QCONV_SOURCE_DIR) + "/bench/shapes/";
    const char *lists[] = {"shapes_1x1",       "shapes_mobilenet",      "shapes_mobilenet_dw",
                           "shapes_resnet_50", "shapes_resnet_50_v1_5", "shapes_ssd_mobilenet"};
    size_t total = 0;
    for (const char *l : lists) {
        const auto lines = problem_lines(dir + l);
        EXPECT_GT(lines.size(), 5u) << l;
        for (const auto &line : lines) {
            SCOPED_TRACE(std::string(l) + ": " + line);
            conv_desc d, back;
            try {
                d = conv_desc::parse(line);
                back = conv_desc::parse(d.str());
            } catch (const qconv::error &e) {
                ADD_FAILURE() << l << ": '" << line << "': " << e.what();
                continue;
            }
            const std::string s = d.str();
            EXPECT_EQ(back, d) << s;
            EXPECT_EQ(back.str(), s); // printing is a fixed point
            EXPECT_EQ(back.pb, d.pb); // given oh: the pads are derived identically
            EXPECT_EQ(back.pr, d.pr);
            EXPECT_GE(d.oh, 1);
            EXPECT_GT(d.ops(), 0.0);
            ++total;
        }
    }
    EXPECT_GE(total, 100u); // the lists hold 128 problem lines
}

// ------------------------------------------------------- hand-checked values
TEST(ConvDesc, ResNetConv1) {
    const auto d = conv_desc::parse("g1mb50ic3ih224iw224oc64oh112ow112kh7kw7sh2sw2ph3pw3n\"resnet_50:conv1\"");
    // pb = (112-1)*2 + 7 - 224 - 3 = 2
    EXPECT_EQ(fields(d, "mb oh ow pt pb pl pr"), "mb=50 oh=112 ow=112 pt=3 pb=2 pl=3 pr=2");
    EXPECT_EQ(d.name, "resnet_50:conv1");
    EXPECT_EQ(d.kh_extent(), 7);
    EXPECT_DOUBLE_EQ(d.ops(), 2.0 * 50 * 112 * 112 * 64 * 3 * 7 * 7);
    EXPECT_DOUBLE_EQ(d.ops(), 11801395200.0);
    EXPECT_EQ(d.src_elems(), 50LL * 224 * 224 * 3);
    EXPECT_EQ(d.wei_elems(), 64LL * 3 * 7 * 7);
    EXPECT_EQ(d.str(), "g1mb50ic3ih224iw224oc64oh112ow112kh7kw7sh2sw2ph3pw3dh0dw0n\"resnet_50:conv1\"");
}

TEST(ConvDesc, Defaults) {
    const auto d = conv_desc::parse("ic16ih10oc32kh3");
    EXPECT_EQ(fields(d, "g mb ic oc ih iw kh kw sh sw pt pl pb pr dh dw oh ow"),
              "g=1 mb=2 ic=16 oc=32 ih=10 iw=10 kh=3 kw=3 sh=1 sw=1 pt=0 pl=0 pb=0 pr=0 dh=1 dw=1 oh=8 ow=8");
    EXPECT_EQ(d.name, "");
    EXPECT_EQ(d.str(), "g1mb2ic16ih10iw10oc32oh8ow8kh3kw3sh1sw1ph0pw0dh0dw0");
    EXPECT_DOUBLE_EQ(d.ops(), 2.0 * 2 * 8 * 8 * 32 * 16 * 9);
}

TEST(ConvDesc, ExplicitAndDefaultFormsAreEqual) {
    const auto a = conv_desc::parse("ic64ih56oc64oh56kh3ph1");
    const auto b = conv_desc::parse("g1mb2ic64ih56iw56oc64oh56ow56kh3kw3sh1sw1ph1pw1dh0dw0");
    const auto c = conv_desc::parse("ic64ih56oc64kh3ph1"); // derived oh
    EXPECT_EQ(a, b);
    EXPECT_EQ(a, c);
    EXPECT_EQ(a.str(), c.str());
    EXPECT_NE(a, conv_desc::parse("ic64ih56oc64oh56kh3ph1n\"x\""));
    EXPECT_NE(a, conv_desc::parse("mb1ic64ih56oc64oh56kh3ph1"));
    EXPECT_NE(a, conv_desc::parse("ic64ih56oc64oh56kh3ph2dh1"));
}

TEST(ConvDesc, DerivedOutputSizeUsesSymmetricPadding) {
    // oh missing: oh = (224 + 2*3 - 7) / 2 + 1 = 112, pb = pt.
    const auto d = conv_desc::parse("ic3ih224oc64kh7sh2ph3");
    EXPECT_EQ(fields(d, "oh ow pt pb"), "oh=112 ow=112 pt=3 pb=3");
    // The same problem with oh given has the minimal bottom pad; both describe
    // the same computation and compare equal.
    const auto e = conv_desc::parse("ic3ih224oc64oh112kh7sh2ph3");
    EXPECT_EQ(e.pb, 2);
    EXPECT_EQ(d, e);
    EXPECT_EQ(conv_desc::parse(d.str()), d);
    // Non-divisible: (10 + 0 - 3) / 2 + 1 = 4.
    EXPECT_EQ(fields(conv_desc::parse("ic1ih10oc1kh3sh2"), "oh pb"), "oh=4 pb=0");
}

TEST(ConvDesc, GivenOutputSizeDerivesBottomPad) {
    // Strided 1x1 skipping the last row: pb = 27*2 + 1 - 56 - 0 = -1.
    EXPECT_EQ(fields(conv_desc::parse("ic256ih56oc512oh28kh1sh2"), "pt pb pr"), "pt=0 pb=-1 pr=-1");
    // Asymmetric: pb = (6-1)*1 + 3 - 6 - 0 = 2 (pad only at the bottom).
    EXPECT_EQ(fields(conv_desc::parse("ic1ih6oc1oh6kh3ph0"), "pt pb"), "pt=0 pb=2");
}

// End pads of a kernel extent or more are valid (semantics §2): the last
// outputs read nothing but padding, as the first do under a large top pad.
TEST(ConvDesc, EndPadsMayLeaveOutputsReadingOnlyPadding) {
    // pb = 8 + 3 - 5 - 1 = 5 > pt + 2: outputs 6..8 read rows >= 5 only.
    EXPECT_EQ(fields(conv_desc::parse("ic4ih5oc4oh9kh3ph1"), "pt pb pl pr"), "pt=1 pb=5 pl=1 pr=5");
    // The graph case: 1x1, pads_begin [1,0], pads_end [0,1].
    EXPECT_EQ(fields(conv_desc::parse("ic4ih6iw6oc4oh7ow7kh1ph1pw0"), "pt pb pl pr"), "pt=1 pb=0 pl=0 pr=1");
    // Strided: pb = 55*2 + 3 - 56 - 1 = 56.
    EXPECT_EQ(fields(conv_desc::parse("ic4ih56oc4oh56kh3sh2ph1"), "pb"), "pb=56");
    EXPECT_EQ(fields(conv_desc::parse("ic4ih10iw10oc4oh8ow11kh3ph0"), "pb pr"), "pb=0 pr=3");
    for (const char *t : {"ic4ih5oc4oh9kh3ph1", "ic4ih6iw6oc4oh7ow7kh1ph1pw0", "ic4ih56oc4oh56kh3sh2ph1"}) {
        const conv_desc d = conv_desc::parse(t);
        EXPECT_NO_THROW(d.validate()) << t;
        EXPECT_EQ(conv_desc::parse(d.str()), d) << t;
    }
    // A built descriptor with pads on both ends larger than the kernel.
    conv_desc d;
    d.mb = 1, d.ic = d.oc = 4, d.ih = d.iw = 3, d.kh = d.kw = 1;
    d.pt = 2, d.pb = 3, d.pl = 0, d.pr = 4;
    d.oh = 8, d.ow = 7;
    EXPECT_NO_THROW(d.validate());
    d.ow = 8; // pads 0,4 give 7
    EXPECT_THROW(d.validate(), qconv::error);
}

TEST(ConvDesc, GivenOutputSizeWithoutPadDerivesTopPadLikeBenchdnn) {
    EXPECT_EQ(fields(conv_desc::parse("ic64ih56oc64oh56kh3"), "pt pb"), "pt=1 pb=1");
    // ((112-1)*2 - 224 + 7) / 2 = 2, the odd remainder goes to the bottom.
    EXPECT_EQ(fields(conv_desc::parse("ic3ih224oc64oh112kh7sh2"), "pt pb"), "pt=2 pb=3");
    // A larger oh is reached by padding both sides: (8 - 5 + 3) / 2.
    EXPECT_EQ(fields(conv_desc::parse("ic4ih5oc4oh9kh3"), "pt pb"), "pt=3 pb=3");
    // Negative would-be pads become 0.
    EXPECT_EQ(fields(conv_desc::parse("ic8ih56oc8oh28kh1sh2"), "pt pb"), "pt=0 pb=-1");
}

TEST(ConvDesc, OneDimensionalProblemsHaveHeightOne) {
    // benchdnn: a text with w keys only is a 1-D convolution; pr = 11*4 + 1 - 48.
    const auto d = conv_desc::parse("ic228oc126_iw48ow12kw1sw4dw0pw0n\"conv1d\"");
    EXPECT_EQ(fields(d, "ih kh oh sh pt pb iw ow sw pr"), "ih=1 kh=1 oh=1 sh=1 pt=0 pb=0 iw=48 ow=12 sw=4 pr=-3");
    EXPECT_EQ(conv_desc::parse(d.str()), d);
    EXPECT_EQ(conv_desc::parse("ic2iw9oc2kw3").ow, 7);
    // kw is not taken from the (absent) height.
    EXPECT_THROW(conv_desc::parse("ic2iw9oc2"), qconv::error);
}

TEST(ConvDesc, DilationIsZeroBasedInText) {
    const auto d = conv_desc::parse("ic8ih10oc8kh3dh1");
    EXPECT_EQ(fields(d, "dh dw oh ow"), "dh=2 dw=2 oh=6 ow=6"); // oh = 10 - 5 + 1
    EXPECT_EQ(d.kh_extent(), 5);
    EXPECT_NE(d.str().find("dh1dw1"), std::string::npos) << d.str();
    EXPECT_EQ(conv_desc::parse("ic8ih10oc8oh10kh3ph2dh1").pb, 2); // 9 + 5 - 10 - 2
    EXPECT_EQ(fields(conv_desc::parse("ic8ih10oc8kh3dh0"), "dh oh"), "dh=1 oh=8");
    // ow = 10 - 7 + 1
    EXPECT_EQ(fields(conv_desc::parse("ic8ih10oc8kh3dw2"), "dh dw oh ow"), "dh=1 dw=3 oh=8 ow=4");
}

TEST(ConvDesc, UnderscoreSeparatorsAndWhitespace) {
    const auto a = conv_desc::parse("mb2_g1ic3oc32_ih224oh112kh3sh2dh0ph1_iw224ow112kw3sw2dw0pw1_n\"x\"");
    const auto b = conv_desc::parse("g1mb2ic3ih224oc32oh112kh3sh2ph1n\"x\"");
    EXPECT_EQ(a, b);
    EXPECT_EQ(a.oh, 112);
    EXPECT_EQ(a.pb, 0); // 111*2 + 3 - 224 - 1
    EXPECT_EQ(conv_desc::parse("  ic3ih5oc3kh3\r\n"), conv_desc::parse("ic3ih5oc3kh3"));
    EXPECT_EQ(conv_desc::parse("_ic3__ih5_oc3kh3_"), conv_desc::parse("ic3ih5oc3kh3"));
}

TEST(ConvDesc, NonSquareAndWidthDefaults) {
    EXPECT_EQ(fields(conv_desc::parse("ic4ih6iw9oc4kh3kw1"), "oh ow"), "oh=4 ow=9");
    // ow missing and the w dimension differs from h: derived from the w keys.
    const auto b = conv_desc::parse("ic4ih8iw4oc4oh8kh3ph1");
    EXPECT_EQ(fields(b, "iw pl ow pr"), "iw=4 pl=1 ow=4 pr=1");
    // ow mirrors a given oh when w mirrors h entirely.
    const auto c = conv_desc::parse("ic4ih5oc4oh5kh3");
    EXPECT_EQ(fields(c, "ow pl pr"), "ow=5 pl=1 pr=1");
    EXPECT_EQ(conv_desc::parse(b.str()), b);
    EXPECT_EQ(conv_desc::parse(c.str()), c);
}

TEST(ConvDesc, GroupsAndDepthwise) {
    const auto d = conv_desc::parse("g32mb1ic32ih112iw112oc32oh112ow112kh3kw3sh1sw1ph1pw1n\"mobilenet:conv2_1/dw\"");
    EXPECT_TRUE(d.is_depthwise());
    EXPECT_EQ(d.icg(), 1);
    EXPECT_EQ(d.ocg(), 1);
    EXPECT_EQ(d.wei_elems(), 32 * 9);
    EXPECT_DOUBLE_EQ(d.ops(), 2.0 * 112 * 112 * 32 * 9);
    const auto g = conv_desc::parse("g2ic8ih4oc6kh1");
    EXPECT_FALSE(g.is_depthwise());
    EXPECT_EQ(g.icg(), 4);
    EXPECT_EQ(g.ocg(), 3);
    EXPECT_EQ(g.wei_elems(), 6 * 4);
}

TEST(ConvDesc, NamesKeepTheirCharacters) {
    const auto d = conv_desc::parse("ic3ih5oc3kh3n\"a b:c/d*3_ph9\"");
    EXPECT_EQ(d.name, "a b:c/d*3_ph9");
    EXPECT_EQ(d.pt, 0);
    EXPECT_EQ(conv_desc::parse(d.str()), d);
    // The name may come first.
    EXPECT_EQ(conv_desc::parse("n\"a b:c/d*3_ph9\"ic3ih5oc3kh3"), d);
}

TEST(ConvDesc, BuiltDescriptorsValidateAndPrint) {
    // An OpenVINO-style symmetric pad (pb = 3) is accepted; it reads no more rows.
    conv_desc d;
    d.mb = 1, d.ic = 3, d.ih = d.iw = 224, d.oc = 64, d.oh = d.ow = 112, d.kh = d.kw = 7;
    d.sh = d.sw = 2, d.pt = d.pl = d.pb = d.pr = 3;
    EXPECT_NO_THROW(d.validate());
    EXPECT_EQ(conv_desc::parse(d.str()), d);
    EXPECT_EQ(conv_desc::parse(d.str()).pb, 2);
}

// -------------------------------------------------------------- matmul desc
TEST(MatmulDesc, ParsePrintAndSizes) {
    const auto d = matmul_desc::parse("m1k4096n4096");
    EXPECT_EQ(d.m, 1);
    EXPECT_EQ(d.k, 4096);
    EXPECT_EQ(d.n, 4096);
    EXPECT_EQ(d.str(), "m1k4096n4096");
    const auto e = matmul_desc::parse("m7_k64_n3");
    EXPECT_EQ(e.m, 7);
    EXPECT_EQ(e.str(), "m7k64n3");
    EXPECT_EQ(matmul_desc::parse(e.str()).m, 7);
    EXPECT_EQ(matmul_desc::parse("k64n3").m, 1); // m defaults to 1
    EXPECT_DOUBLE_EQ(e.flops(), 2.0 * 7 * 64 * 3);

    matmul_desc w = matmul_desc::parse("m1k5n3");
    w.wei_dt = dtype::u4;
    EXPECT_EQ(w.wei_bytes(), 8); // ceil(15 / 2)
    w.wei_dt = dtype::s4;
    EXPECT_EQ(w.wei_bytes(), 8);
    w.wei_dt = dtype::s8;
    EXPECT_EQ(w.wei_bytes(), 15);

    matmul_desc g = matmul_desc::parse("m2k64n3");
    g.group = 16;
    g.validate();
    EXPECT_EQ(g.n_groups(), 4);
    EXPECT_EQ(g.scale_elems(), 12);
    EXPECT_EQ(g.zp_elems(), 0);
    g.zp = matmul_desc::zp_kind::per_tensor;
    EXPECT_EQ(g.zp_elems(), 1);
    g.zp = matmul_desc::zp_kind::per_group;
    EXPECT_EQ(g.zp_elems(), 12);
    g.group = 0;
    EXPECT_EQ(g.zp_elems(), 3);
    EXPECT_STREQ(to_string(matmul_desc::zp_kind::per_group), "per_group");
    EXPECT_STREQ(to_string(matmul_desc::zp_kind::none), "none");
    EXPECT_STREQ(to_string(matmul_desc::zp_kind::per_tensor), "per_tensor");
}

TEST(MatmulDesc, KeyDistinguishesEveryField) {
    matmul_desc a = matmul_desc::parse("m1k64n32");
    std::set<std::string> keys{a.key()};
    matmul_desc b = a;
    b.wei_dt = dtype::s4;
    keys.insert(b.key());
    matmul_desc c = a;
    c.group = 32;
    keys.insert(c.key());
    matmul_desc d = a;
    d.zp = matmul_desc::zp_kind::per_tensor;
    keys.insert(d.key());
    matmul_desc e = a;
    e.with_bias = true;
    keys.insert(e.key());
    matmul_desc f = a;
    f.m = 2;
    keys.insert(f.key());
    EXPECT_EQ(keys.size(), 6u);
    matmul_desc g = a;
    g.group = 64; // group K == per output channel
    EXPECT_EQ(g.key(), a.key());
}

TEST(MatmulDesc, WeightAtNibbleOrder) {
    // Element 2i in the low nibble of byte i.
    const uint8_t w[] = {0x21, 0xF3, 0x08};
    const int32_t u4[] = {1, 2, 3, 15, 8, 0};
    const int32_t s4[] = {1, 2, 3, -1, -8, 0};
    for (int i = 0; i < 6; ++i) {
        EXPECT_EQ(weight_at(w, dtype::u4, i), u4[i]) << i;
        EXPECT_EQ(weight_at(w, dtype::s4, i), s4[i]) << i;
    }
    const uint8_t b[] = {0x7F, 0x80, 0xFF};
    EXPECT_EQ(weight_at(b, dtype::u8, 0), 127);
    EXPECT_EQ(weight_at(b, dtype::u8, 1), 128);
    EXPECT_EQ(weight_at(b, dtype::u8, 2), 255);
    EXPECT_EQ(weight_at(b, dtype::s8, 0), 127);
    EXPECT_EQ(weight_at(b, dtype::s8, 1), -128);
    EXPECT_EQ(weight_at(b, dtype::s8, 2), -1);
    // Every s4 value round-trips through a packed byte.
    for (int lo = -8; lo < 8; ++lo)
        for (int hi = -8; hi < 8; ++hi) {
            const uint8_t p = uint8_t((lo & 0xF) | ((hi & 0xF) << 4));
            EXPECT_EQ(weight_at(&p, dtype::s4, 0), lo);
            EXPECT_EQ(weight_at(&p, dtype::s4, 1), hi);
        }
}

// --------------------------------------------------------------- post-ops
TEST(PostOpsText, ParsesEveryForm) {
    const int64_t oc = 3;
    const auto ops = parse_post_ops("relu;relu:0.5;clip:0:6;linear:2:1;gelu_erf;swish;add:per_oc:1,-2,3;"
                                    "mul:per_tensor:0.5;max:full;sum;sum:0.5:3;scale_shift:0.5,1,2:-1,0,4;"
                                    "prelu:0.25,0.5,0.25;prelu:0.125;fq:256:0,-32,-64:255,223,191:-128:127;"
                                    "fq:16:-4:26:0:7.5",
                                    oc);
    ASSERT_EQ(ops.size(), 16u);
    EXPECT_EQ(ops[0].k, post_op::kind::eltwise);
    EXPECT_EQ(ops[0].alg, eltwise_alg::relu);
    EXPECT_EQ(ops[0].alpha, 0.f);
    EXPECT_EQ(ops[1].alpha, 0.5f);
    EXPECT_EQ(ops[2].alg, eltwise_alg::clip);
    EXPECT_EQ(ops[2].alpha, 0.f);
    EXPECT_EQ(ops[2].beta, 6.f);
    EXPECT_EQ(ops[3].alg, eltwise_alg::linear);
    EXPECT_EQ(ops[3].alpha, 2.f);
    EXPECT_EQ(ops[3].beta, 1.f);
    EXPECT_EQ(ops[4].alg, eltwise_alg::gelu_erf);
    EXPECT_EQ(ops[5].alg, eltwise_alg::swish);
    EXPECT_EQ(ops[5].alpha, 1.f);
    EXPECT_EQ(ops[6].k, post_op::kind::binary);
    EXPECT_EQ(ops[6].balg, binary_alg::add);
    EXPECT_EQ(ops[6].bcast, broadcast::per_oc);
    EXPECT_EQ(ops[6].scale, (std::vector<float>{1.f, -2.f, 3.f}));
    EXPECT_EQ(ops[7].balg, binary_alg::mul);
    EXPECT_EQ(ops[7].bcast, broadcast::per_tensor);
    EXPECT_EQ(ops[7].scale, std::vector<float>{0.5f});
    EXPECT_EQ(ops[8].bcast, broadcast::full);
    EXPECT_TRUE(ops[8].scale.empty());
    EXPECT_EQ(ops[9].k, post_op::kind::sum);
    EXPECT_EQ(ops[9].sum_scale, 1.f);
    EXPECT_EQ(ops[9].sum_zp, 0);
    EXPECT_EQ(ops[10].sum_scale, 0.5f);
    EXPECT_EQ(ops[10].sum_zp, 3);
    EXPECT_EQ(ops[11].k, post_op::kind::scale_shift);
    EXPECT_EQ(ops[11].scale, (std::vector<float>{0.5f, 1.f, 2.f}));
    EXPECT_EQ(ops[11].shift, (std::vector<float>{-1.f, 0.f, 4.f}));
    EXPECT_EQ(ops[12].k, post_op::kind::prelu);
    EXPECT_EQ(ops[12].scale, (std::vector<float>{0.25f, 0.5f, 0.25f}));
    EXPECT_EQ(ops[13].scale, std::vector<float>{0.125f});
    EXPECT_EQ(ops[14].k, post_op::kind::fake_quantize);
    EXPECT_EQ(ops[14].levels, 256);
    EXPECT_EQ(ops[14].in_lo, (std::vector<float>{0.f, -32.f, -64.f}));
    EXPECT_EQ(ops[14].in_hi, (std::vector<float>{255.f, 223.f, 191.f}));
    EXPECT_EQ(ops[14].out_lo, std::vector<float>{-128.f});
    EXPECT_EQ(ops[14].out_hi, std::vector<float>{127.f});
    EXPECT_EQ(ops[15].levels, 16);
    EXPECT_EQ(ops[15].out_hi, std::vector<float>{7.5f});
    // The dw item (no sum or full binary before it: those would read the intermediate).
    const post_op dw = parse_post_ops(
        "relu;dw:2:s8:-4,-3,-2,-1,0,1,2,3,4,-4,-3,-2,-1,0,1,2,3,4,-4,-3,-2,-1,0,1,2,3,4:none:0.5;sum", oc)[1];
    EXPECT_EQ(dw.k, post_op::kind::dw_conv);
    EXPECT_EQ(dw.dw_stride, 2);
    EXPECT_EQ(dw.dw_mid_dt, dtype::s8);
    ASSERT_EQ(dw.dw_wei.size(), 27u);
    EXPECT_EQ(dw.dw_wei[0], -4);
    EXPECT_EQ(dw.dw_wei[26], 4);
    EXPECT_TRUE(dw.dw_bias.empty());
    EXPECT_EQ(dw.dw_scales, std::vector<float>{0.5f});
    EXPECT_TRUE(parse_post_ops("", oc).empty());
    EXPECT_TRUE(parse_post_ops("none", oc).empty());
}

TEST(PostOpsText, FullTextRoundTrips) {
    // Values that need every digit of a float, and the ones the generator draws.
    post_ops ops = {post_op::eltwise(eltwise_alg::linear, 0.1f, -1.f / 3.f),
                    post_op::binary(binary_alg::div, broadcast::per_oc, {0.3f, 7.f, 1e-20f, 3e20f}),
                    post_op::scale_shift_op({0.7f}, {1.f, 2.f, 3.f, -0.f}), post_op::prelu({0.01f}),
                    post_op::fake_quantize(7, {-1.5f}, {2.25f, 3.f, 4.f, 5.f}, {0.f}, {1.f / 7.f})};
    EXPECT_EQ(parse_post_ops(to_text(ops), 4), ops) << to_text(ops);
    const auto generated = testdata::make_post_ops(
        "relu:0.25;add:per_oc;sub:per_tensor;max:full;sum:2:-4;scale_shift;prelu:per_tensor;fq:per_channel:16", 4, 9);
    EXPECT_EQ(parse_post_ops(to_text(generated), 4), generated) << to_text(generated);
    EXPECT_EQ(to_text(post_ops{}), "");
}

TEST(PostOpsText, ShortFormRoundTripsThroughTheGenerator) {
    const std::string text =
        "relu;relu:0.25;clip;clip:-1:3;linear:2:1;linear:0.5;gelu_tanh;mish;add:per_oc;"
        "sub:per_tensor:-3;div:per_oc;max:full;sum;sum:0.5;sum:2:-4;scale_shift;scale_shift:per_tensor;"
        "prelu;prelu:per_tensor;fq:per_channel;fq:per_tensor;fq:per_channel:2";
    const auto ops = testdata::make_post_ops(text, 16, 3);
    EXPECT_EQ(to_string(ops), text);
    const std::string dw_text = "relu;dw:2:s8:nobias;add:full;sum";
    EXPECT_EQ(to_string(testdata::make_post_ops(dw_text, 16, 3)), dw_text);
    EXPECT_EQ(testdata::make_post_ops(dw_text, 16, 3), testdata::make_post_ops(dw_text, 16, 3));
    // Same (text, oc, seed): same values, so the short form regenerates the chain.
    EXPECT_EQ(testdata::make_post_ops(to_string(ops), 16, 3), ops);
    EXPECT_EQ(to_string(post_ops{}), "");
}

TEST(PostOpsText, GenerationIsDeterministicAndSeeded) {
    const auto a = testdata::make_post_ops("scale_shift;add:per_oc;fq:per_channel", 64, 1);
    EXPECT_EQ(testdata::make_post_ops("scale_shift;add:per_oc;fq:per_channel", 64, 1), a);
    EXPECT_FALSE(testdata::make_post_ops("scale_shift;add:per_oc;fq:per_channel", 64, 2) == a);
    // Different chain items draw different values.
    const auto b = testdata::make_post_ops("add:per_oc;add:per_oc", 64, 1);
    EXPECT_NE(b[0].scale, b[1].scale);
}

TEST(PostOpsText, GeneratedValuesKeepThePipelineExact) {
    const int64_t oc = 256;
    const auto ops = testdata::make_post_ops(
        "scale_shift;prelu;add:per_oc;sub:per_oc;mul:per_oc;div:per_oc;max:per_oc;min:per_oc;fq:per_channel;"
        "fq:per_channel:16;fq:per_tensor",
        oc, 11);
    const std::set<float> ss_scale{0.5f, 1.f, 2.f}, slopes{0.25f, 0.5f}, muls{-2.f, -1.f, 1.f, 2.f, 3.f};
    for (int64_t c = 0; c < oc; ++c) {
        EXPECT_TRUE(ss_scale.count(ops[0].scale[c]));
        EXPECT_EQ(ops[0].shift[c], std::nearbyint(ops[0].shift[c]));
        EXPECT_LE(std::fabs(ops[0].shift[c]), 4.f);
        EXPECT_TRUE(slopes.count(ops[1].scale[c]));
        for (int b : {2, 3, 6, 7}) {
            EXPECT_EQ(ops[b].scale[c], std::nearbyint(ops[b].scale[c]));
            EXPECT_LE(std::fabs(ops[b].scale[c]), 4.f);
        }
        EXPECT_TRUE(muls.count(ops[4].scale[c]));
        EXPECT_TRUE(is_pow2(ops[5].scale[c])) << ops[5].scale[c];
    }
    for (int f : {8, 9, 10}) {
        const post_op &q = ops[f];
        const int64_t n = int64_t(q.in_lo.size());
        EXPECT_EQ(n, f == 10 ? 1 : oc);
        const float steps = float(q.levels - 1);
        std::set<float> distinct_isc;
        for (int64_t c = 0; c < n; ++c) {
            const float isc = steps / (q.in_hi[c] - q.in_lo[c]);
            const float ish = -q.in_lo[c] * isc;
            const float osc = (q.out_hi[c] - q.out_lo[c]) / steps;
            EXPECT_TRUE(is_pow2(isc)) << isc;
            EXPECT_TRUE(is_pow2(osc)) << osc;
            EXPECT_EQ(ish, std::nearbyint(ish));
            EXPECT_EQ(q.out_lo[c], std::nearbyint(q.out_lo[c]));
            EXPECT_LT(q.in_lo[c], q.in_hi[c]);
            distinct_isc.insert(isc);
        }
        if (n > 1) {
            EXPECT_GT(distinct_isc.size(), 1u); // channels really differ
        }
    }
    EXPECT_EQ(ops[9].levels, 16);
}

// ------------------------------------------------------------ conv_problem
TEST(ConvProblem, ValidatesAndKeysEveryField) {
    conv_problem p;
    p.desc = conv_desc::parse("ic4ih5oc8kh3ph1");
    p.src_zp = zero_point::channel({0, 1, 128, 255});
    p.scales = std::vector<float>(8, 0.25f);
    p.with_bias = true;
    p.ops = testdata::make_post_ops("relu;fq:per_channel", 8, 1);
    EXPECT_NO_THROW(p.validate());
    const conv_problem q = p;
    EXPECT_EQ(p, q);
    EXPECT_EQ(p.key(), q.key());
    EXPECT_NE(p.key().find(p.desc.str()), std::string::npos);

    std::set<std::string> keys{p.key()};
    auto vary = [&](auto change) {
        conv_problem r = p;
        change(r);
        EXPECT_NO_THROW(r.validate());
        EXPECT_FALSE(r == p);
        keys.insert(r.key());
    };
    vary([](conv_problem &r) { r.scales[3] = 0.5f; });
    vary([](conv_problem &r) { r.src_zp.values[2] = 127; });
    vary([](conv_problem &r) { r.src_zp = zero_point::tensor(3); });
    vary([](conv_problem &r) { r.dst_dt = dtype::f32; });
    vary([](conv_problem &r) {
        r.src_dt = dtype::s8;
        r.src_zp = zero_point::none();
    });
    vary([](conv_problem &r) { r.with_bias = false; });
    vary([](conv_problem &r) { r.ops[1].out_hi[0] += 1.f; });
    vary([](conv_problem &r) { r.dst_zp = 3; });
    vary([](conv_problem &r) { r.desc.mb = 1; });
    EXPECT_EQ(keys.size(), 10u);
}

TEST(ConvProblem, AcceptsTheBoundaryValues) {
    conv_problem p;
    p.desc = conv_desc::parse("ic2ih3oc2kh1");
    p.src_dt = dtype::s8;
    p.src_zp = zero_point::tensor(-128);
    EXPECT_NO_THROW(p.validate());
    p.src_zp = zero_point::tensor(127);
    EXPECT_NO_THROW(p.validate());
    p.src_dt = dtype::u8;
    p.src_zp = zero_point::tensor(255);
    EXPECT_NO_THROW(p.validate());
    p.src_zp = zero_point::channel({0, 255});
    for (dtype dt : {dtype::f32, dtype::s32, dtype::s8, dtype::u8}) {
        p.dst_dt = dt;
        EXPECT_NO_THROW(p.validate()) << to_string(dt);
    }
    p.scales = {0.5f};
    EXPECT_NO_THROW(p.validate());
}
