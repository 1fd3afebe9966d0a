// Bad input: every malformed, inconsistent, overflowing or out-of-range input
// raises qconv::error whose message starts with the offending field's name
// ("field: what"), and mentions what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "qconv/qconv.h"
#include "tests/support/expect_error.h"
#include "tests/support/testdata.h"

using namespace qconv;

namespace {

// Runs f, which must throw qconv::error with a message starting with
// "<field>:" and containing `detail` (if given).
void expect_error(const std::function<void()> &f, const std::string &field, const std::string &detail = "") {
    test::expect_error_prefix(f, field + ":", detail);
}

struct bad_desc {
    const char *text, *field, *detail;
};

conv_problem good_problem() {
    conv_problem p;
    p.desc = conv_desc::parse("ic4ih5oc8kh3ph1");
    return p;
}

} // namespace

// -------------------------------------------------------- conv descriptors
TEST(BadInput, ConvDescriptorText) {
    const bad_desc cases[] = {
        {"ic0ih5oc4kh3", "ic", "positive"},
        {"ic4ih-5oc4kh3", "ih", "positive"},
        {"mb0ic4ih5oc4kh3", "mb", "positive"},
        {"ic4ih5oc0kh3", "oc", "positive"},
        {"ic4ih5oc4kh0", "kh", "positive"},
        {"ic4ih5oc4kh3sh0", "sh", "positive"},
        {"ic4ih5oc4kh3ph-1", "ph", "non-negative"},
        {"ic4ih5oc4kh3dh-1", "dh", "non-negative"},
        {"ic8ih56oc8oh27kh1sh2", "oh", "inconsistent output size"},       // pb = -3 <= -sh
        {"ic8ih8iw56oc8oh4ow27kh1sh2", "ow", "inconsistent output size"}, // pr = -3 <= -sw
        {"g3ic4ih5oc6kh3", "g", "do not divide ic"},
        {"g4ic8ih5oc6kh3", "g", "do not divide oc"},
        {"g0ic8ih5oc8kh3", "g", "positive"},
        {"ic4ih2oc4kh5", "kh", "kernel larger than padded input"},
        {"ic4ih5iw2oc4kh1kw5", "kw", "kernel larger than padded input"},
        {"ic4ih5oc4kh3dh2", "kh", "kernel larger than padded input"},                        // extent 7 > 5
        {"mb1048576ic1048576ih1048576oc1kh1", "src", "overflows int64"},                     // 2^80 elements
        {"mb2048ic1024ih1024oc1kh1", "src", "exceeds the limit"},                            // 2^41 elements
        {"ic1ih1099511627776oc1oh1099511627776kh1sh1099511627776", "oh", "overflows int64"}, // (oh-1)*sh
        {"ic1ih4oc1kh1099511627776dh1099511627775", "dh", "overflows int64"},                // (kh-1)*dh
        {"ic1099511627777ih1oc1kh1", "ic", "exceeds the size limit"},
        {"ic99999999999999999999ih1oc1kh1", "ic", "number too large"},
        {"ic4ih5oc4kh3sh1099511627777", "sh", "exceeds the size limit"},
        {"ic4id5ih5oc4kh3", "id", "3-D"},
        {"ic4ih5oc4kh3kd3", "kd", "3-D"},
        {"ic4ih5oc4kh3pd1", "pd", "3-D"},
        {"ic4ih5oc4kh3n\"x\"zz", "desc", "unknown key 'zz'"}, // trailing junk
        {"ic4ih5oc4kh3#", "desc", "unexpected character '#'"},
        {"ic4ih5oc4kh3 x", "desc", "unexpected character ' '"},
        {"ic4ih5oc4kh3xy1", "desc", "unknown key 'xy'"},
        {"IC4ih5oc4kh3", "desc", "unexpected character 'I'"},
        {"ic4ic8ih5oc4kh3", "ic", "given twice"},
        {"ic4ih5oc4kh3ph1ph1", "ph", "given twice"},
        {"ih5oc4kh3", "ic", "missing"},
        {"ic4ih5kh3", "oc", "missing"},
        {"ic4oc4kh3", "ih", "missing"},
        {"ic4ih5oc4", "kh", "missing"},
        {"ic4ih5oc4kh", "kh", "expected a number"},
        {"ic4ih5oc4kh3n\"unterminated", "n", "unterminated"},
        {"ic4ih5oc4kh3n5", "n", "quoted name"},
        {"ic4ih5oc4kh3nabc", "desc", "unknown key 'nabc'"},
        {"", "desc", "empty"},
        {"   ", "desc", "empty"},
    };
    for (const auto &c : cases) {
        SCOPED_TRACE(c.text);
        expect_error([&] { conv_desc::parse(c.text); }, c.field, c.detail);
    }
    // dst or wei above the limit while the other tensors are small.
    expect_error([] { conv_desc::parse("mb1ic1ih1024oc2097152kh1"); }, "dst", "exceeds the limit"); // 2^41
    expect_error([] { conv_desc::parse("ic1048576ih2oc1048576kh2"); }, "wei", "exceeds the limit"); // 2^42
}

TEST(BadInput, BuiltConvDescriptor) {
    const conv_desc good = conv_desc::parse("ic4ih5oc8kh3ph1");
    auto bad = [&](auto change, const char *field, const char *detail) {
        conv_desc d = good;
        change(d);
        SCOPED_TRACE(field);
        expect_error([&] { d.validate(); }, field, detail);
    };
    bad([](conv_desc &d) { d.oh = 6; }, "oh", "inconsistent output size");
    bad([](conv_desc &d) { d.ow = 4; }, "ow", "inconsistent output size");
    bad([](conv_desc &d) { d.pb = 3; }, "oh", "inconsistent output size"); // would give oh 7
    bad([](conv_desc &d) { d.pt = -1; }, "pt", "non-negative");
    bad([](conv_desc &d) { d.dh = 0; }, "dh", "positive");
    bad(
        [](conv_desc &d) {
            d.kh = 9;
            d.pt = d.pb = 1;
        },
        "kh", "kernel larger than padded input");
    bad([](conv_desc &d) { d.g = 3; }, "g", "do not divide");
    bad([](conv_desc &d) { d.name = "a\"b"; }, "n", "must not contain");
    bad(
        [](conv_desc &d) {
            d.ic = d.oc = int64_t(1) << 40;
            d.kh = d.kw = 1;
            d.oh = d.ow = 7;
            d.pt = d.pl = d.pb = d.pr = 1;
        },
        "src", "exceeds the limit");
    bad(
        [](conv_desc &d) {
            d.dh = int64_t(1) << 40;
            d.kh = int64_t(1) << 40;
        },
        "dh", "overflows int64");
    bad([](conv_desc &d) { d.mb = std::numeric_limits<int64_t>::max(); }, "mb", "exceeds the size limit");
}

// ------------------------------------------------------------ conv_problem
TEST(BadInput, ConvProblem) {
    auto bad = [](auto change, const char *field, const char *detail) {
        conv_problem p = good_problem();
        change(p);
        SCOPED_TRACE(field + std::string(" / ") + detail);
        expect_error([&] { p.validate(); }, field, detail);
    };
    bad([](conv_problem &p) { p.src_dt = dtype::f32; }, "src_dt", "u8 or s8");
    bad([](conv_problem &p) { p.dst_dt = dtype::bf16; }, "dst_dt", "f32, s32, s8 or u8");
    bad([](conv_problem &p) { p.src_zp = zero_point::channel({1, 2, 3}); }, "src_zp", "IC=4");
    bad([](conv_problem &p) { p.src_zp = zero_point::channel({1, 2, 3, 256}); }, "src_zp", "256");
    bad([](conv_problem &p) { p.src_zp = zero_point::channel({1, -1, 3, 4}); }, "src_zp", "-1");
    bad(
        [](conv_problem &p) {
            p.src_dt = dtype::s8;
            p.src_zp = zero_point::channel({1, 2, 3, 4});
        },
        "src_zp", "needs a u8 source");
    bad([](conv_problem &p) { p.src_zp = zero_point::tensor(-1); }, "src_zp", "[0, 255]");
    bad(
        [](conv_problem &p) {
            p.src_dt = dtype::s8;
            p.src_zp = zero_point::tensor(200);
        },
        "src_zp", "[-128, 127]");
    bad([](conv_problem &p) { p.src_zp = {zero_point::kind::per_tensor, {1, 2}}; }, "src_zp", "exactly 1");
    bad([](conv_problem &p) { p.scales = {1.f, 2.f}; }, "scales", "OC=8");
    bad([](conv_problem &p) { p.scales = {std::nanf("")}; }, "scales", "not finite");
    bad(
        [](conv_problem &p) {
            p.scales = std::vector<float>(8, 1.f);
            p.scales[5] = INFINITY;
        },
        "scales", "#5");
    bad([](conv_problem &p) { p.dst_zp = 256; }, "dst_zp", "[0, 255]");
    bad(
        [](conv_problem &p) {
            p.dst_dt = dtype::s8;
            p.dst_zp = -129;
        },
        "dst_zp", "[-128, 127]");
    bad([](conv_problem &p) { p.desc.oh = 9; }, "oh", "inconsistent");
    bad([](conv_problem &p) { p.ops = {post_op::prelu({0.5f, 0.5f})}; }, "post_ops[0].scale", "OC=8");
}

// ------------------------------------------------------------------ dtypes
TEST(BadInput, UnknownDtype) {
    expect_error([] { parse_dtype("f8", "src_dt"); }, "src_dt");
    expect_error([] { parse_dtype("", "dst_dt"); }, "dst_dt");
    const uint8_t w[1] = {0};
    expect_error([&] { weight_at(w, dtype::f32, 0); }, "wei_dt", "not a weight type");
}

// ------------------------------------------------------------------ matmul
TEST(BadInput, MatmulDescriptor) {
    const bad_desc cases[] = {
        {"m1k0n4", "k", "positive"},
        {"m0k4n4", "m", "positive"},
        {"m1k4n-4", "n", "positive"},
        {"m1k4", "n", "missing"},
        {"m1n4", "k", "missing"},
        {"hello", "desc", "unknown key 'hello'"},
        {"m1k4n4x", "desc", "unknown key 'x'"},
        {"m1k4n4g2", "desc", "unknown key 'g'"},
        {"m1k4k4n4", "k", "given twice"},
        {"m1k4n4!", "desc", "unexpected character '!'"},
        {"m1k4n4n\"x\"", "n", "given twice"},
        {"m1k_n4", "k", "expected a number"},
        {"m1kn4", "desc", "unknown key 'kn'"},
        {"", "desc", "empty"},
        {"m1099511627777k1n1", "m", "exceeds the size limit"},
        {"m2097152k1048576n1", "x", "exceeds the limit"},
        {"m1099511627776k1099511627776n1", "x", "overflows int64"},
    };
    for (const auto &c : cases) {
        SCOPED_TRACE(c.text);
        expect_error([&] { matmul_desc::parse(c.text); }, c.field, c.detail);
    }
    auto bad = [](auto change, const char *field, const char *detail) {
        matmul_desc d = matmul_desc::parse("m1k4096n64");
        change(d);
        SCOPED_TRACE(field);
        expect_error([&] { d.validate(); }, field, detail);
    };
    bad([](matmul_desc &d) { d.group = 96; }, "group", "does not divide k");
    bad([](matmul_desc &d) { d.group = 8192; }, "group", "does not divide k");
    bad([](matmul_desc &d) { d.group = -1; }, "group", "positive");
    bad([](matmul_desc &d) { d.wei_dt = dtype::f32; }, "wei_dt", "u8, s8, u4 or s4");
    bad([](matmul_desc &d) { d.wei_dt = dtype::s32; }, "wei_dt", "u8, s8, u4 or s4");
    bad(
        [](matmul_desc &d) {
            d.n = int64_t(1) << 40;
            d.k = 4096;
            d.group = 0;
        },
        "wei", "exceeds the limit");
}

// ---------------------------------------------------------------- post-ops
TEST(BadInput, PostOpText) {
    const std::pair<const char *, const char *> cases[] = {
        {"relu;xyz", "unknown post-op 'xyz'"},
        {"fq:1:0:1:0:1", "levels must be in [2, 65536]"},
        {"fq:70000:0:1:0:1", "levels must be in [2, 65536]"},
        {"fq:abc:0:1:0:1", "not a 32-bit integer"},
        {"fq:per_channel", "expected fq:LEVELS:IN_LO:IN_HI:OUT_LO:OUT_HI"},
        {"relu:abc", "not a finite number"},
        {"relu:nan", "not a finite number"},
        {"linear:inf:1", "not a finite number"},
        {"relu:1:2:3", "too many fields"},
        {"add", "give the operand (add:per_tensor:V"},
        {"mul:per_oc", "give the operand"},
        {"add:full:1", "full tensor takes no value"},
        {"add:per_nothing:1", "unknown broadcast"},
        {"scale_shift:1", "expected scale_shift:SCALES:SHIFTS"},
        {"prelu", "expected prelu:SLOPES"},
        {"prelu:0.5,x", "slope 'x' is not a finite number"},
        {"relu;;relu", "empty item"},
        {"sum:0.5:x", "not a 32-bit integer"},
        {"Relu", "unknown post-op 'Relu'"},
    };
    for (const auto &c : cases) {
        SCOPED_TRACE(c.first);
        expect_error([&] { parse_post_ops(c.first, 8); }, "post_ops", c.second);
    }
    expect_error([] { parse_post_ops("div:per_tensor:0", 8); }, "post_ops[0].scale", "division by zero");
    expect_error([] { parse_post_ops("relu;add:per_oc:1,2", 8); }, "post_ops[1].scale", "needs OC=8 values (got 2)");
    expect_error([] { parse_post_ops("scale_shift:1:1,2", 8); }, "post_ops[0].shift",
                 "expected 1 or OC=8 values (got 2)");
    expect_error([] { parse_post_ops("fq:4:1:0:0:3", 8); }, "post_ops[0].in_lo", "must be below in_hi");
    expect_error([] { parse_post_ops("relu", 0); }, "oc", "positive");
    // The generator's shorthand reaches the same checks.
    expect_error([] { testdata::make_post_ops("relu;fq:per_tensor:1", 8, 1); }, "post_ops",
                 "levels must be in [2, 65536]");
    expect_error([] { testdata::make_post_ops("add:per_nothing", 8, 1); }, "post_ops", "unknown broadcast");
    expect_error([] { testdata::make_post_ops("relu", 0, 1); }, "oc", "positive");
}

TEST(BadInput, PostOpValidation) {
    const float nan = std::nanf("");
    auto bad = [](post_ops ops, const char *field, const char *detail) {
        SCOPED_TRACE(field);
        expect_error([&] { validate(ops, 8); }, field, detail);
    };
    bad({post_op::relu(), post_op::scale_shift_op(std::vector<float>(8, 1.f), std::vector<float>(3, 0.f))},
        "post_ops[1].shift", "OC=8");
    bad({post_op::scale_shift_op({nan}, {0.f})}, "post_ops[0].scale", "finite");
    bad({post_op::prelu({0.5f, INFINITY, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f})}, "post_ops[0].scale", "#1");
    bad({post_op::eltwise(eltwise_alg::linear, 1.f, nan)}, "post_ops[0].beta", "finite");
    bad({post_op::eltwise(eltwise_alg::relu, INFINITY)}, "post_ops[0].alpha", "finite");
    bad({post_op::sum(nan)}, "post_ops[0].sum_scale", "finite");
    bad({post_op::fake_quantize(1, {0.f}, {255.f}, {0.f}, {255.f})}, "post_ops[0].levels", "[2, 65536]");
    bad({post_op::fake_quantize(256, {10.f}, {10.f}, {0.f}, {255.f})}, "post_ops[0].in_lo", "below in_hi");
    bad({post_op::fake_quantize(256, {0.f}, {255.f}, {0.f}, {nan})}, "post_ops[0].out_hi", "finite");
    bad({post_op::fake_quantize(256, std::vector<float>(5, 0.f), {255.f}, {0.f}, {255.f})}, "post_ops[0].in_lo",
        "OC=8");
    bad({post_op::binary(binary_alg::add, broadcast::per_oc, {1.f})}, "post_ops[0].scale", "OC=8");
    bad({post_op::binary(binary_alg::add, broadcast::per_tensor, {})}, "post_ops[0].scale", "1 value");
    bad({post_op::binary(binary_alg::max, broadcast::full, {1.f})}, "post_ops[0].scale", "execution");
    bad({post_op::binary(binary_alg::mul, broadcast::per_tensor, {nan})}, "post_ops[0].scale", "finite");
    bad({post_op::relu(), post_op::relu(), post_op::binary(binary_alg::div, broadcast::per_tensor, {0.f})},
        "post_ops[2].scale", "division by zero");
}

// ------------------------------------------------------- mutated text
// Random edits of valid texts either parse (and then round-trip) or raise
// qconv::error — never another exception, a crash or a hang.
TEST(BadInput, MutatedTextsFailCleanly) {
    const std::string seeds[] = {
        "g1mb50ic3ih224iw224oc64oh112ow112kh7kw7sh2sw2ph3pw3n\"resnet_50:conv1\"",
        "mb8_g32ic32oc32_ih150oh150kh3sh1dh0ph1_iw150ow150kw3sw1dw0pw1",
        "ic228oc126_iw48ow12kw1sw4dw0pw0n\"conv1d\"",
    };
    const std::string alphabet = "0123456789_-\"#abcdghikmnoprswxz ";
    uint32_t state = 12345;
    auto next = [&] {
        state = state * 1664525u + 1013904223u;
        return state >> 8;
    };
    int parsed = 0, rejected = 0;
    for (int iter = 0; iter < 3000; ++iter) {
        std::string t = seeds[iter % 3];
        const int edits = 1 + int(next() % 3);
        for (int e = 0; e < edits; ++e) {
            const size_t pos = next() % (t.size() + 1);
            const char c = alphabet[next() % alphabet.size()];
            switch (next() % 3) {
            case 0: t.insert(t.begin() + pos, c); break;
            case 1:
                if (pos < t.size()) t.erase(pos, 1);
                break;
            default:
                if (pos < t.size()) t[pos] = c;
                break;
            }
        }
        try {
            const conv_desc d = conv_desc::parse(t);
            EXPECT_EQ(conv_desc::parse(d.str()), d) << t;
            ++parsed;
        } catch (const qconv::error &) {
            ++rejected;
        } catch (const std::exception &e) {
            ADD_FAILURE() << "'" << t << "' threw a non-qconv error: " << e.what();
        }
    }
    EXPECT_GT(parsed, 100); // the edits are small: many texts stay valid
    EXPECT_GT(rejected, 100);
    for (int iter = 0; iter < 1000; ++iter) {
        std::string t = "relu;add:per_oc;fq:per_channel:16;sum:0.5:3";
        const size_t pos = next() % t.size();
        t[pos] = ":;0123456789.-abcefilnpqrsu"[next() % 27];
        try {
            const post_ops ops = testdata::make_post_ops(t, 8, 1);
            EXPECT_NO_THROW(validate(ops, 8)) << t;
        } catch (const qconv::error &) {
        } catch (const std::exception &e) {
            ADD_FAILURE() << "'" << t << "' threw a non-qconv error: " << e.what();
        }
    }
}
