// Problems for table-driven suites: for any row of conv_list() / matmul_list()
// find a small problem that row supports on this machine, so suites that
// must touch *every* implementation (concurrency, W^X, fuzz seeds) cover rows
// added later without new code.
//
// The candidates span the kernel families: 1x1 and 3x3, strided, grouped and
// depthwise shapes; u8 and s8 sources; no / per-tensor / per-channel zero
// point; no post-ops, relu, per-channel FakeQuantize, per-OC binary add; u8
// and f32 destinations; a 1x1 with a fused depthwise item. MatMul: u8/s8/u4/s4 weights, per-OC and group-wise
// scales, every zero-point kind, with and without dynamic quantization.
#pragma once

#include <string>
#include <vector>

#include "qconv/conv.h"
#include "qconv/matmul.h"
#include "rows/row.h"

namespace qconv::test {

struct conv_candidate {
    conv_problem p;
    conv_hints hints; // enforce_brgconv set, impl = the row's name
};
// Every candidate problem, in a fixed order (small shapes first).
std::vector<conv_problem> conv_candidates();
// The same sweep over shapes whose first or last output rows/columns read
// nothing but padding (begin and end pads of a kernel extent or more; 1x1,
// 3x3, strided, grouped, depthwise): those outputs are bias and post-ops of a
// zero sum (docs/semantics.md §2).
std::vector<conv_problem> conv_pad_only_candidates();
// The first candidate `row` supports with some attribute set on the host
// platform; false (and *why holds the last reason) when none does.
bool find_conv_problem(const impl::conv_entry &row, conv_candidate *out, std::string *why = nullptr);

struct matmul_candidate {
    matmul_desc d;
    matmul_hints hints; // impl = the row's name
};
std::vector<matmul_candidate> matmul_candidates();
bool find_matmul_problem(const impl::matmul_entry &row, matmul_candidate *out, std::string *why = nullptr);

// Deterministic weights/scales/zp/bias/input for a MatMul descriptor, in the
// ranges of the weight type.
struct matmul_buffers {
    std::vector<uint8_t> wei;
    std::vector<float> scale, bias, x;
    std::vector<int32_t> zp;
    matmul_buffers(const matmul_desc &d, unsigned seed);
    matmul_weights weights() const;
};

} // namespace qconv::test
