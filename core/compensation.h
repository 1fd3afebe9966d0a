// Zero-point compensation: the one module that computes it, for the
// reference and the JIT kernels' packing (docs/semantics.md §3; the oneDNN
// wrapper passes oneDNN's own runtime zero point and needs none).
//
//   legacy zero point   padded taps hold zp, comp[c] = −Σ w·zp, so every tap
//                       contributes w·(x − zp)
//   the kernels' view   an s8 source is read as the u8 x + 128 (shift 128,
//                       0 for u8): padded taps hold zp + shift, comp[c] =
//                       −Σ w·(zp + shift) over all taps (int32 wrap-around)
//   skipped taps        a kernel that skips the padded taps of a pixel adds
//                       back Σ over them of w·(zp + shift): the per-tap sums
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/lowering.h"
#include "qconv/conv.h"
#include "qconv/post_ops.h"

namespace qconv {

// comp[c] = −Σ_{ic,kh,kw} w[c,ic,kh,kw] · zp[g·ICg + ic]; weights plain
// [G·OCg][ICg][KH][KW]; zp has 1 or IC values. Throws qconv::error naming
// `zp` when a sum leaves int32.
std::vector<int32_t> zp_compensation(const conv_desc &d, const int8_t *wei, const std::vector<int32_t> &zp);

// 128 for an s8 source (the kernels read x ^ 0x80 = x + 128), 0 for u8.
int32_t source_shift(dtype src);

// Whether attr's zero-point values can stand in the padding as source bytes
// (what pad_byte() and the compensation assume): 1 or IC values, each in the
// source type's range; false with the reason in *why otherwise.
bool zp_fits_padding(const conv_problem &p, const attr_set &a, std::string *why);

// The source zero point of input channel ic: attr's value for it (1 or IC
// values, either mechanism), 0 without a zero point.
int32_t source_zp(const attr_set &a, int64_t ic);

// The byte a padded tap of input channel ic holds in the kernels' view:
// zp[ic] + shift (the legacy zero point of attr, 0 without one).
uint8_t pad_byte(const conv_problem &p, const attr_set &a, int64_t ic);

// −Σ over all taps of w·(zp + shift) per output channel, int32 wrap-around;
// OC + extra entries, the extra ones 0.
std::vector<int32_t> shifted_compensation(const conv_problem &p, const attr_set &a, const int8_t *wei, int64_t extra);

// s[c·KH·KW + t] = Σ_ic w[c, ic, t] · pad_byte(ic) (uint32: int32 wrap-around)
// for every output channel c and tap t = kh·KW + kw: what a skipped tap of a
// padded pixel adds back.
std::vector<uint32_t> padded_tap_sums(const conv_problem &p, const attr_set &a, const int8_t *wei);

} // namespace qconv
