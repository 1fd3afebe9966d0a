// The oneDNN int8 convolution rows: brgconv rows, oneDNN's AMX JIT row, the
// untrusted brgconv AMX peers and the `onednn:any` peer (onednn_conv.h).
//
// How a qconv problem becomes a oneDNN primitive:
//   - src/dst: NHWC (format_tag::nhwc); weights: format_tag::any (explicit
//     tags make oneDNN 2.6 fall back to ref), reordered from the plain
//     [G·OCg][ICg][KH][KW] s8 tensor once in pack() (conv_kernel.cpp);
//   - output scales, the stock per-tensor source zero point as a runtime
//     value, the lowered post-ops and the destination zero point: the recipe
//     (conv_recipe.h, conv_post_ops.h);
//   - the implementation: stepping through next_impl() until the selector
//     accepts impl_info_str() (conv_select.h), passing over the known-wrong
//     and untrusted ones (known_wrong.h); no such implementation =
//     unsupported, with the list of what oneDNN offered as the reason.
// brgconv rows take attr[0] only when it carries nothing legacy (plain
// eltwise/sum chains, no zero point): attr[0] with legacy post-ops belongs to
// the JIT kernels, which is how the attribute tables (docs/dispatch.md)
// keep brgconv away from binary post-ops unless attr[1] offers them.
#include "kernels/onednn/onednn_conv.h"

#include "kernels/onednn/conv_kernel.h"
#include "kernels/onednn/onednn_util.h"
#include "rows/row.h"

namespace qconv::impl::onednn {

namespace {

// What a oneDNN row decided: the recipe and the primitive descriptor
// positioned on the implementation it takes, for the default thread count.
struct onednn_plan : plan {
    onednn_plan(const selector &s, recipe rc, pd_t p, int t) : sel(s), r(std::move(rc)), pd(std::move(p)), threads(t) {}
    selector sel;
    recipe r;
    pd_t pd;
    int threads;
    std::string str() const override {
        return std::string("oneDNN ") + pd.impl_info_str() + " threads=" + std::to_string(threads);
    }
};

// The CPU features a selector's implementations need.
feature_set needs_of(const selector &sel) {
    if (sel.first) return {};
    feature_set f = level_features(sel.level);
    f.remove(cpu_feature::avx512_bf16); // oneDNN's int8 kernels use none of the BF16 instructions
    return f;
}

// Whether the chain has a FakeQuantize with per-channel bounds: oneDNN runs
// it as a chain of binary post-ops (clip, scale, round and shift per channel).
bool per_channel_fake_quantize(const post_ops &ops) {
    for (const post_op &o : ops)
        if (o.k == post_op::kind::fake_quantize &&
            (o.in_lo.size() > 1 || o.in_hi.size() > 1 || o.out_lo.size() > 1 || o.out_hi.size() > 1))
            return true;
    return false;
}

// Where a default-path oneDNN row is measured slower than the JIT rows below
// it, auto leaves the problem to them (the row's defer()). For oneDNN's AMX
// JIT convolution, on the AMX Xeon at 1 thread (ResNet-50, MobileNet,
// SSD-MobileNet and the 1x1 list, against the fastest JIT row;
// docs/dispatch.md):
//   - a per-channel FakeQuantize, which oneDNN runs as a chain of binary
//     post-ops, unless ICg·KH·KW >= 1024 and the problem has 40 M MACs:
//     0.17-0.62x against jit:conv_x8s8:avx512_core_vnni (which fuses it) for
//     ICg·KH·KW <= 256, 0.62-1.01x at 512, 0.71x at 2304 with 25 pixels;
//     0.93-1.09x at 1024 and 1.4-1.8x for the 3x3 layers of 1152 and more;
//     the bench_dispatch fq totals were 0.44-0.64 with it first;
//   - small problems: a call costs at least ~12 us, so below 10 M MACs it
//     lost on every layer (0.03x at 1 pixel, 0.73x at 7 M MACs; 11.6 M:
//     1.17x, 13 M: 1.25-1.36x). The rule counts the problem's MACs, not per
//     thread: the thread count is an argument of each execution;
//   - a short reduction (ICg·KH·KW < 128) with fewer than 256 output channels:
//     0.76-0.94x (IC 32 and 64 1x1 layers; with 256 channels 1.03x).
// The reason, or "" (the row's `defer`: auto passes over it, forced by name it runs).
std::string slower_than_the_jit_rows(const selector &sel, const conv_problem &p) {
    if (sel.first || sel.kind != "jit" || sel.level != isa::avx512_core_amx) return "";
    const conv_desc &d = p.desc;
    const double macs = d.ops() / 2, k = double(d.icg() * d.kh * d.kw);
    if (per_channel_fake_quantize(p.ops) && (k < 1024 || macs < 40e6))
        return "a per-channel FakeQuantize becomes a chain of binary post-ops in oneDNN, slower than the JIT rows "
               "that fuse it unless the reduction is long (ICg*KH*KW >= 1024) and the problem large (measured "
               "0.17-0.86x below that, 0.93-1.8x above)";
    if (macs < 10e6) return "under 10 M MACs oneDNN's AMX JIT call costs more than the JIT rows (measured 0.03-0.73x)";
    if (k < 128 && d.ocg() < 256)
        return "a reduction ICg*KH*KW under 128 with OCg under 256 fills AMX tiles poorly (measured 0.76-0.94x of "
               "the JIT rows)";
    return "";
}

plan_ptr decide_checked(const selector &sel, const conv_problem &p, const attr_set &attr, const platform &plat,
                        std::string *why) {
    if (!plat.has_all(needs_of(sel))) {
        reject(why, "platform " + plat.str() + " lacks " + plat.features.missing(needs_of(sel)));
        return nullptr;
    }
    if (!attr_allowed(sel, attr, why)) return nullptr;
    auto r = make_recipe(p, attr, why);
    if (!r) return nullptr;
    const int threads = effective_threads(0);
    auto pd = select_pd(sel, *r, threads, why);
    if (!pd) return nullptr;
    return std::make_shared<onednn_plan>(sel, std::move(*r), std::move(*pd), threads);
}

conv_entry make_row(const std::string &name, const selector &sel, bool peer) {
    conv_entry e = impl::named_entry<conv_entry>(name, sel.row_name(), impl::row_family::onednn);
    e.needs = needs_of(sel);
    e.peer = peer;
    e.only_1x1 = sel.kind == "brgconv_1x1";
    e.decide = [sel](const conv_problem &p, const attr_set &attr, const platform &plat, std::string *why) {
        return onednn::supports(sel, p, attr, plat, why);
    };
    if (!peer)
        e.defer = [sel](const conv_problem &p, const attr_set &, const impl::platform &, const impl::plan &) {
            return slower_than_the_jit_rows(sel, p);
        };
    e.build = [](const conv_problem &p, const attr_set &attr, const plan &pl) { return onednn::create(p, attr, pl); };
    return e;
}

} // namespace

std::string selector::row_name() const {
    return first ? std::string("onednn:any") : "onednn:" + kind + ":" + to_string(level);
}

// supports() answers; it never throws: oneDNN refuses some attribute
// combinations by throwing while the post-ops are built (e.g. two eltwise
// relu with different negative slopes, found by fuzz_diff).
plan_ptr supports(const selector &sel, const conv_problem &p, const attr_set &attr, const platform &plat,
                  std::string *why) {
    try {
        return decide_checked(sel, p, attr, plat, why);
    } catch (const dnnl::error &e) {
        reject(why, std::string("oneDNN refuses the attributes: ") + e.what());
        return nullptr;
    }
}

std::shared_ptr<const conv_kernel> create(const conv_problem &p, const attr_set &attr, const plan &pl) {
    const auto &op = dynamic_cast<const onednn_plan &>(pl);
    try {
        return make_conv_kernel(op.sel, p, op.r, op.pd, op.threads);
    } catch (const dnnl::error &e) {
        fail("impl", op.sel.row_name() + ": oneDNN refuses the attributes: " + e.what());
    }
}

std::shared_ptr<const conv_kernel> create(const selector &sel, const conv_problem &p, const attr_set &attr,
                                          const platform &plat) {
    std::string why;
    const plan_ptr pl = supports(sel, p, attr, plat, &why);
    if (!pl) fail("impl", sel.row_name() + ": " + why);
    return create(p, attr, *pl);
}

conv_entry brgconv_row(const std::string &name, const std::string &kind, isa level) {
    return make_row(name, selector::brgconv(kind, level), false);
}

conv_entry brgconv_peer_row(const std::string &name, const std::string &kind, isa level) {
    return make_row(name, selector::brgconv(kind, level), true);
}

conv_entry jit_row(const std::string &name, isa level) {
    return make_row(name, selector::brgconv("jit", level), false);
}

conv_entry any_row() { return make_row("onednn:any", selector::any(), true); }

} // namespace qconv::impl::onednn
