#include "kernels/jit/base/conv_isa.h"

#include <algorithm>

#include "qconv/types.h"

namespace qconv::jit {

constexpr bool in_enum_order() {
    for (int i = 0; i < conv_isa_count; ++i)
        if (static_cast<int>(conv_isa_table[i].isa) != i) return false;
    return true;
}
static_assert(in_enum_order(), "conv_isa_table: one line per conv_isa value, in the enum's order");

namespace {
const conv_isa_line &line_of(conv_isa i) {
    const int k = static_cast<int>(i);
    if (k < 0 || k >= conv_isa_count) fail("isa", "not a conv_isa value");
    return conv_isa_table[k];
}
} // namespace

const char *to_string(conv_isa i) { return line_of(i).name; }
impl::feature_set required_features(conv_isa i) { return line_of(i).features; }

isa_fact_set isa_facts(conv_isa i) {
    const conv_isa_line &l = line_of(i);
    return isa_fact_set{l.width.lanes, l.width.vbytes, l.width.n_vregs, l.width.evex, l.vnni, l.pairs16};
}

int oc_lanes(conv_isa i) { return isa_facts(i).lanes; }
int max_oc_vectors(conv_isa i) { return isa_facts(i).evex ? 4 : 2; }
// VEX: at most 12 accumulators, so that the fused epilogue has ymm12..15.
int max_accumulators(conv_isa i, int nb) {
    const isa_fact_set f = isa_facts(i);
    if (f.evex) return 25;
    // weights, bcast, then 0x80 (VNNI) / two temporaries (widened) / a temporary, the 16-bit 1s and 0x80 (pairs16)
    return std::min(12, 16 - nb - (f.pairs16 ? 4 : f.vnni ? 2 : 3));
}
int src_elem_bytes(conv_isa i) { return isa_facts(i).vnni ? 1 : 2; }
int max_accumulators_dw(conv_isa i, int kw) {
    // KW weights, two sources, a temporary (not with vpdpwssd on ymm).
    const isa_fact_set f = isa_facts(i);
    if (!f.evex) return std::min(12, 16 - kw - (f.vnni ? 2 : 3));
    return std::min(25, 32 - kw - 3);
}

} // namespace qconv::jit
