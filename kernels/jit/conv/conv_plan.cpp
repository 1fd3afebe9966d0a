#include "kernels/jit/conv/conv_plan.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/jit/conv/conv_ukernel.h"

namespace qconv::jit {

conv_knobs conv_knobs::from_env() {
    auto flag = [](const char *name) { // "0" turns a default-on switch off
        const char *v = std::getenv(name);
        return !(v && std::strcmp(v, "0") == 0);
    };
    auto number = [](const char *name) {
        const char *v = std::getenv(name);
        return v && *v ? std::max(0, std::atoi(v)) : 0;
    };
    auto choice = [](const char *name) { // "0" / "1" (any other number) forces, unset leaves -1: the default
        const char *v = std::getenv(name);
        return v && *v ? int(std::atoi(v) != 0) : -1;
    };
    conv_knobs k;
    k.ur = number("QCONV_JIT_CONV_UR");
    k.nb = number("QCONV_JIT_CONV_NB");
    k.direct = flag("QCONV_JIT_CONV_DIRECT");
    k.flat2d = flag("QCONV_JIT_CONV_FLAT2D");
    k.taps_inner = flag("QCONV_JIT_CONV_TAPS_INNER");
    k.fused = flag("QCONV_JIT_CONV_FUSED");
    k.dw_direct = flag("QCONV_JIT_CONV_DW_DIRECT");
    k.dw_pair = flag("QCONV_JIT_CONV_DW_PAIR");
    k.dw_row_copy = flag("QCONV_JIT_CONV_DW_ROW_COPY");
    k.dw_row = flag("QCONV_JIT_CONV_DW_ROW");
    k.dw_band = number("QCONV_JIT_CONV_DW_BAND");
    k.amx_hoist = flag("QCONV_JIT_CONV_AMX_HOIST");
    k.amx_phases = flag("QCONV_JIT_CONV_AMX_PHASES");
    k.amx_k_ranges = flag("QCONV_JIT_CONV_AMX_K_RANGES");
    k.amx_row_taps = flag("QCONV_JIT_CONV_AMX_ROW_TAPS");
    k.amx_pack = choice("QCONV_JIT_CONV_AMX_PACK");
    k.amx_l1_kib = number("QCONV_JIT_CONV_AMX_L1_KIB");
    k.amx_group = number("QCONV_JIT_CONV_AMX_GROUP");
    if (const char *v = std::getenv("QCONV_JIT_CONV_AMX_PREFETCH"); v && *v) k.amx_prefetch = std::max(0, std::atoi(v));
    k.dense_prefetch = number("QCONV_JIT_CONV_DENSE_PREFETCH");
    k.dense_prefetch_next = choice("QCONV_JIT_CONV_DENSE_PREFETCH_NEXT");
    k.pairs = flag("QCONV_JIT_CONV_PAIRS");
    const char *n = std::getenv("QCONV_JIT_CONV_DW_NATIVE");
    k.dw_native = n && std::strcmp(n, "0") == 0 ? 0 : n && std::strcmp(n, "1") == 0 ? 1 : -1;
    return k;
}

std::string conv_knobs::str() const {
    const conv_knobs d;
    std::string s;
    auto add = [&s](const char *name, int v) {
        s += (s.empty() ? "" : ",") + std::string(name) + "=" + std::to_string(v);
    };
    if (ur != d.ur) add("ur", ur);
    if (nb != d.nb) add("nb", nb);
    if (direct != d.direct) add("direct", direct);
    if (flat2d != d.flat2d) add("flat2d", flat2d);
    if (taps_inner != d.taps_inner) add("taps_inner", taps_inner);
    if (fused != d.fused) add("fused", fused);
    if (dw_direct != d.dw_direct) add("dw_direct", dw_direct);
    if (dw_pair != d.dw_pair) add("dw_pair", dw_pair);
    if (dw_row_copy != d.dw_row_copy) add("dw_row_copy", dw_row_copy);
    if (dw_row != d.dw_row) add("dw_row", dw_row);
    if (dw_native != d.dw_native) add("dw_native", dw_native);
    if (dw_band != d.dw_band) add("dw_band", dw_band);
    if (amx_hoist != d.amx_hoist) add("amx_hoist", amx_hoist);
    if (amx_phases != d.amx_phases) add("amx_phases", amx_phases);
    if (amx_k_ranges != d.amx_k_ranges) add("amx_k_ranges", amx_k_ranges);
    if (amx_row_taps != d.amx_row_taps) add("amx_row_taps", amx_row_taps);
    if (amx_pack != d.amx_pack) add("amx_pack", amx_pack);
    if (amx_l1_kib != d.amx_l1_kib) add("amx_l1_kib", amx_l1_kib);
    if (amx_group != d.amx_group) add("amx_group", amx_group);
    if (amx_prefetch != d.amx_prefetch) add("amx_prefetch", amx_prefetch);
    if (dense_prefetch != d.dense_prefetch) add("dense_prefetch", dense_prefetch);
    if (dense_prefetch_next != d.dense_prefetch_next) add("dense_prefetch_next", dense_prefetch_next);
    if (pairs != d.pairs) add("pairs", pairs);
    return s.empty() ? "default" : s;
}

std::shared_ptr<conv_plan> conv_plan::make(conv_isa i, kind k, const conv_knobs &knobs) {
    auto pl = std::make_shared<conv_plan>();
    pl->isa = i;
    pl->k = k;
    pl->knobs = knobs;
    return pl;
}

std::string conv_plan::str() const {
    const char *kinds[] = {"dense", "depthwise", "depthwise_rows"};
    return std::string(kinds[static_cast<int>(k)]) + ":" + to_string(isa) +
           (detail ? " " + detail->str() : std::string()) + " knobs=" + knobs.str() +
           (pairs_variant ? " | weights without overflowing pairs: " + pairs_variant->str() : std::string());
}

bool pipeline_fusable(const attr_set &a, const conv_knobs &k) {
    int n_full = 0;
    bool transcendental = false;
    for (const auto &op : a.ops) {
        if (op.k == lowered_op::kind::binary && op.bcast == broadcast::full) ++n_full;
        if (op.k == lowered_op::kind::eltwise && is_transcendental(op.alg)) transcendental = true;
    }
    return !transcendental && n_full <= max_fused_full && k.fused;
}

impl::conv_entry jit_conv_entry(const std::string &name, const std::string &canonical, conv_isa i, conv_plan::kind k,
                                impl::conv_entry::decide_fn decide, impl::conv_entry::build_fn build) {
    impl::conv_entry e = impl::named_entry<impl::conv_entry>(name, canonical, impl::row_family::jit);
    e.only_depthwise = k != conv_plan::kind::dense;
    e.needs = required_features(i);
    if (k == conv_plan::kind::depthwise_rows) e.needs.add(impl::cpu_feature::avx512_vbmi);
    e.decide = std::move(decide);
    e.build = std::move(build);
    return e;
}

} // namespace qconv::jit
