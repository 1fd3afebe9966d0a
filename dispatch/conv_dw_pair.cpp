// composite:conv_1x1_dw: the two halves of split_dw() as two primitives.
// pack() creates them (the 1x1 with the problem's weights, the depthwise with
// the item's); execute() runs them back to back through an intermediate of
// the item's type kept per calling thread. Both halves are exact rows, so the
// composite is exact too.
#include "dispatch/conv_dw_pair.h"

#include <memory>

#include "core/buffers.h"
#include "core/dw_fusion.h"
#include "qconv/conv.h"

namespace qconv::impl {
namespace {

struct pair_packed : packed {
    std::unique_ptr<convolution> pw, dw;
};

class pair_kernel : public conv_kernel {
public:
    explicit pair_kernel(const conv_problem &p) : h_(split_dw(p)) {}

    std::shared_ptr<const packed> pack(const int8_t *wei, const float *bias) const override {
        auto pk = std::make_shared<pair_packed>();
        pk->pw = std::make_unique<convolution>(h_.pw, wei, bias);
        pk->dw =
            std::make_unique<convolution>(h_.dw, h_.dw_wei.data(), h_.dw_bias.empty() ? nullptr : h_.dw_bias.data());
        return pk;
    }

    void execute(const packed &w, const void *src, void *dst, const exec_args &args) const override {
        const auto &pk = static_cast<const pair_packed &>(w);
        uint8_t *mid = thread_scratch(scratch_use::composite_mid, static_cast<size_t>(h_.pw.desc.dst_elems()));
        exec_args a1;
        a1.threads = args.threads;
        pk.pw->execute(src, mid, a1);
        pk.dw->execute(mid, dst, args); // every full binary operand is the depthwise's
    }

private:
    dw_halves h_;
};

} // namespace

conv_entry conv_dw_pair_row() {
    conv_entry e;
    e.name = "composite:conv_1x1_dw";
    e.family = impl::row_family::composite;
    e.only_1x1 = true;
    e.only_dw_item = true;
    e.decide = decide_by([](const conv_problem &p, const attr_set &, const platform &, std::string *why) {
        return p.dw() ? true : reject(why, "no fused dw conv item (the composite runs only 1x1 + dw chains)");
    });
    e.build = [](const conv_problem &p, const attr_set &, const plan &) -> std::shared_ptr<const conv_kernel> {
        return std::make_shared<pair_kernel>(p);
    };
    return e;
}

} // namespace qconv::impl
