// The depthwise kernels' shared host code (declared in conv_dw_common.h):
// compensation and bias at pack(), the padded u8 copy of the source and the
// state every execute() starts from.
#include "kernels/jit/conv_dw/conv_dw_common.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/buffers.h"
#include "core/compensation.h"
#include "core/parallel.h"

namespace qconv::jit::dw {

// comp (conv_comp: −Σ w·(zp + shift)) and the padded bias.
void fill_comp_bias(dw_packed &pk, const conv_problem &p, const attr_set &a, const int8_t *wei, const float *bias) {
    const int64_t c_ = p.desc.oc;
    pk.comp = shifted_compensation(p, a, wei, 16);
    if (p.with_bias) {
        pk.bias.assign(static_cast<size_t>(c_ + 16), 0.f);
        std::copy(bias, bias + c_, pk.bias.begin());
    }
}

// Indices of the full-tensor binary operands (convolution::execute checked
// that exec_args carries each).
std::vector<int> full_operands(const attr_set &a) {
    std::vector<int> full_idx;
    for (const auto &op : a.ops)
        if (op.k == lowered_op::kind::binary && op.bcast == broadcast::full) full_idx.push_back(op.full_index);
    return full_idx;
}

padded_copy::padded_copy(const conv_problem &p, const attr_set &a) : d(p.desc) {
    c = d.oc;
    cpad = rnd_up(c, 16);
    rows = (d.oh - 1) * d.sh + (d.kh - 1) * d.dh + 1;
    cols = (d.ow - 1) * d.sw + (d.kw - 1) * d.dw + 1;
    flip = p.src_dt == dtype::s8 ? 0x80 : 0x00;
    pad_pixel.assign(static_cast<size_t>(cpad), 0);
    for (int64_t ch = 0; ch < c; ++ch) pad_pixel[ch] = pad_byte(p, a, ch);
}

void padded_copy::row_into(const uint8_t *s, uint8_t *out, int64_t n, int64_t r, int64_t c0, int64_t c1) const {
    const int64_t ih = r - d.pt;
    const int64_t cv = std::min(c1, c) - c0; // source channels of the range; c1 − c0 − cv padding channels
    const bool whole = !flip && cpad == c && c0 == 0 && c1 == cpad;
    for (int64_t col = 0; col < cols; ++col) {
        uint8_t *px = out + col * cpad + c0;
        const int64_t iw = col - d.pl;
        if (ih < 0 || ih >= d.ih || iw < 0 || iw >= d.iw) {
            std::memcpy(px, pad_pixel.data() + c0, static_cast<size_t>(c1 - c0));
            continue;
        }
        const uint8_t *x = s + ((n * d.ih + ih) * d.iw + iw) * c + c0;
        if (whole) { // same layout: the whole valid run at once
            const int64_t run = std::min(d.iw - iw, cols - col);
            std::memcpy(px, x, static_cast<size_t>(run * c));
            col += run - 1;
            continue;
        }
        if (flip)
            for (int64_t ch = 0; ch < cv; ++ch) px[ch] = static_cast<uint8_t>(x[ch] ^ flip);
        else std::memcpy(px, x, static_cast<size_t>(cv));
        std::memset(px + cv, 0, static_cast<size_t>(c1 - c0 - cv));
    }
}

// pack()'s argument checks, then an empty packed set.
std::shared_ptr<dw_packed> new_packed(const conv_problem &p, const int8_t *wei, const float *bias) {
    if (!wei) fail("wei", "is null");
    if (p.with_bias && !bias) fail("bias", "with_bias is set but no bias was given");
    return std::make_shared<dw_packed>();
}

dw_exec::dw_exec(const conv_problem &p, const attr_set &a, const padded_copy &pc, bool whole_copy,
                 const impl::packed &w, const void *s, const void *dst, const exec_args &args)
    : src(static_cast<const uint8_t *>(s)), full_idx(full_operands(a)), pk(dynamic_cast<const dw_packed &>(w)),
      threads(impl::resolve_threads(args.threads)),
      buf(!whole_copy ? nullptr : impl::thread_scratch(impl::scratch_use::dw_copy, pc.bytes(p.desc.mb))),
      dst_bytes(p.dst_dt == dtype::f32 || p.dst_dt == dtype::s32 ? 4 : 1),
      bias(p.with_bias ? pk.bias.data() : nullptr) {}

} // namespace qconv::jit::dw
