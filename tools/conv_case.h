// The conv mode's pieces: a problem with its data, the reference result,
// comparison and dumps. tools/conv_mode.cpp strings them together.
//
// Data comes from the generators the test suites use (tests/support/testdata.h),
// chosen so the f32 output pipeline is exact: small integer inputs and
// weights, power-of-two output scales, small integer biases — then every
// implementation must match the reference bit for bit.
// `extreme` data saturates instead (u8 255, s8 −128/127, zero points 0 and
// 255): integers may then differ by 1 and f32 by a relative 1e-5, as with
// transcendental eltwise post-ops (docs/semantics.md §8).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qconv/conv.h"
#include "tests/support/testdata.h"
#include "tools/driver.h"

namespace qconv::driver {

using testdata::data_kind;

// Conv-specific options (everything but the common ones).
struct conv_settings {
    dtype src_dt = dtype::u8, wei_dt = dtype::s8, dst_dt = dtype::u8;
    std::string dt_text = "u8:s8:u8";
    std::string zp_text = "none";  // none | tensor:V | channel:random | channel:V
    std::string post_ops_text;     // testdata::make_post_ops syntax
    std::string scales = "per_oc"; // per_oc | tensor | none
    bool bias = true;
    int32_t dst_zp = 0;
    int64_t mb = 0; // 0: as written
    data_kind data = data_kind::random;
    std::string baseline = "auto"; // auto | none | NAME
};
conv_settings parse_conv_settings(const options &o);

// One problem: shape, attributes and all input data.
struct conv_case {
    std::string text;  // as given
    int64_t count = 1; // `*N`
    uint32_t seed = 1;
    conv_problem p;
    aligned_vector<uint8_t> src;          // NHWC, src_dt (64-byte aligned, as a runtime's buffers)
    std::vector<int8_t> wei;              // [G·OCg][ICg][KH][KW]
    std::vector<float> bias;              // OC, empty without bias
    aligned_vector<uint8_t> dst_init;     // NHWC dst_dt: the previous dst (read by sum)
    std::vector<std::vector<float>> full; // one NHWC f32 tensor per `full` binary post-op
    bool tolerant = false;                // extreme data or transcendental eltwise: ±1 / rel 1e-5
    exec_args args(int threads) const;    // binary pointers into `full`

    // The reference result (computed on first use).
    const std::vector<uint8_t> &reference() const;
    mutable std::vector<uint8_t> ref_dst;
    mutable std::string ref_error; // non-empty when the reference cannot run it
};

// Refuses (check_problem_memory) a problem whose data the driver cannot hold,
// from the descriptor and the settings alone: nothing is allocated.
void check_conv_memory(const conv_desc &d, const conv_settings &s);

// Builds the problem and its data (throws qconv::error / usage_error on bad input).
conv_case make_conv_case(const problem_text &t, const conv_settings &s, uint32_t seed);

// Compares a result against the reference; returns the number of elements out
// of tolerance and describes the first one in *first.
int64_t compare_dst(const conv_case &c, const aligned_vector<uint8_t> &got, std::string *first);

// Writes DIR/NNNN/ (problem.txt and the raw arrays) for one run.
void dump_run(const std::string &dir, int index, const conv_case &c, const conv_settings &s, const std::string &impl,
              int attr_id, const std::string &status, const aligned_vector<uint8_t> &dst);

} // namespace qconv::driver
