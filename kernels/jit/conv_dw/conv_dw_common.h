// What the two depthwise kernels (conv_dw_ukernel.cpp, conv_dw_row_kernel.cpp)
// share: the packed weights and per-channel arrays (dw_packed), the row
// kernel's lane order (native_order), compensation and bias at pack(), the
// padded u8 copy of the source (padded_copy), the start of execute()
// (dw_exec), and the two kernels' factories. The design of the family is at
// the top of conv_dw_x8s8.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/lowering.h"
#include "kernels/jit/conv/conv_plan.h"
#include "kernels/jit/conv/conv_ukernel.h"
#include "rows/row.h"

namespace qconv::jit::dw {

struct dw_packed : impl::packed {
    std::vector<int32_t> wei;       // conv_ukernel: [kh][kw][cpad]
    std::vector<uint8_t> wei8;      // row kernel: [block][kh][kw][vector][64]
    std::vector<uint8_t> wei8_pair; // pair mode: [block][set][kw][64]
    std::vector<int32_t> comp;      // C + 16
    std::vector<float> bias;        // C + 16 (empty without bias)
    // Native row kernel: comp and bias in its lane order.
    std::vector<int32_t> comp_nat;
    std::vector<float> bias_nat;
};

// Lane order of the native row kernel: position g·64 + 16q + i holds
// channel g·64 + 4i + q (n: rounded up to 64, plus 16 of padding).
template <typename T>
std::vector<T> native_order(const std::vector<T> &v, int64_t c) {
    if (v.empty()) return v;
    std::vector<T> out(static_cast<size_t>(rnd_up(c, 64) + 16), T(0));
    for (int64_t pos = 0; pos < rnd_up(c, 64); ++pos) {
        const int64_t g = pos / 64, q = (pos % 64) / 16, i = pos % 16, ch = g * 64 + 4 * i + q;
        if (ch < c && ch < static_cast<int64_t>(v.size())) out[static_cast<size_t>(pos)] = v[static_cast<size_t>(ch)];
    }
    return out;
}

// comp (conv_comp: −Σ w·(zp + shift)) and the padded bias.
void fill_comp_bias(dw_packed &pk, const conv_problem &p, const attr_set &a, const int8_t *wei, const float *bias);

// Indices of the full-tensor binary operands (convolution::execute checked
// that exec_args carries each).
std::vector<int> full_operands(const attr_set &a);

// The padded u8 copy of the source (s8 shifted by +128): rows × cols pixels
// of cpad bytes per image.
struct padded_copy {
    int64_t rows = 0, cols = 0, cpad = 0, c = 0;
    conv_desc d;
    uint8_t flip = 0;
    std::vector<uint8_t> pad_pixel;

    padded_copy(const conv_problem &p, const attr_set &a);
    size_t bytes(int64_t mb) const { return static_cast<size_t>(mb * rows * cols * cpad + 64); }
    // Row nr = n · rows + r of the copy.
    void row(const uint8_t *s, uint8_t *buf, int64_t nr) const {
        row_into(s, buf + nr * cols * cpad, nr / rows, nr % rows, 0, cpad);
    }
    // Row r of image n's copy written to out (cols pixels of cpad bytes), only
    // channels [c0, c1) of each pixel (c1 ≤ cpad; channels from c on are 0).
    void row_into(const uint8_t *s, uint8_t *out, int64_t n, int64_t r, int64_t c0, int64_t c1) const;
};

// pack()'s argument checks, then an empty packed set.
std::shared_ptr<dw_packed> new_packed(const conv_problem &p, const int8_t *wei, const float *bias);

// What both kernels' execute() start from: the source, the full-tensor
// operands, the thread count and the buffer of the whole padded u8 copy (s8
// shifted by +128; null unless whole_copy: the source read in place, or
// copied row by row). The buffer is the calling thread's, kept
// and reused while it is large enough: no allocation and no zero-filling per
// call (the copy writes every byte of every row).
struct dw_exec {
    const uint8_t *src;
    std::vector<int> full_idx;
    const dw_packed &pk;
    int threads;
    uint8_t *buf;
    int64_t dst_bytes;
    const float *bias; // padded bias or null

    dw_exec(const conv_problem &p, const attr_set &a, const padded_copy &pc, bool whole_copy, const impl::packed &w,
            const void *s, const void *dst, const exec_args &args);
};

// What the micro-kernel path (conv_dw_ukernel.cpp, every ISA) decides:
// plan_ukernel(), a pure function the table row runs in supports(), printed
// in the plan ("source=direct oc_blocks=4x2 pixels=12/12 pipeline=fused").
struct ukernel_geometry : conv_plan_detail {
    int lanes = 16;      // OC lanes per vector
    int nb_big = 1;      // OC vectors per full block
    int64_t n_ob = 1;    // OC blocks (the last may hold fewer vectors)
    int ur_big = 1;      // pixels per call of a full block
    int ur_last = 1;     // pixels per call of the last block
    bool fused = false;  // the output pipeline inside the micro-kernels
    bool direct = false; // u8 source without zero point read in place, else a padded copy
    std::string str() const override;
};
ukernel_geometry plan_ukernel(conv_isa isa, const conv_problem &p, const attr_set &a, const conv_knobs &k);
std::shared_ptr<const impl::conv_kernel> make_dw_ukernel(conv_isa isa, const conv_problem &p, const attr_set &a,
                                                         const ukernel_geometry &g);
// What the row kernel (conv_dw_row_kernel.cpp: avx512_core_vnni with VBMI)
// builds: plan_rows(), a pure function the table row runs in supports(),
// printed in the plan ("variant=row_pairs source=direct oc_blocks=1
// pixels=14+14 pipeline=fused").
struct rows_geometry : conv_plan_detail {
    bool fused = false;    // the output pipeline runs inside the kernel
    bool direct = false;   // u8 source read in place (no zero point), else a padded copy:
    bool row_copy = false; // made per output row into a per-thread buffer (strided single-row
                           // kernels: the kernel rows stay in L1), else of the whole source first
    bool native = false;   // the byte layout ("bytes": 64 channels, strided rows)
    bool pair = false;     // two output rows per call (3x3 stride 1, "row_pairs")
    int nb = 1;            // 16-channel vectors per block
    int ur = 1;            // pixels per block of the single-row kernels
    int ur_pair = 0;       // pixels per block of the row-pair kernels
    std::string str() const override;
};
rows_geometry plan_rows(const conv_problem &p, const attr_set &a, const conv_knobs &k);
std::shared_ptr<const impl::conv_kernel> make_dw_row_kernel(const conv_problem &p, const attr_set &a,
                                                            const rows_geometry &g);
// Whether the row kernel's registers fit the kernel: the weights of a
// 16-channel block plus one accumulator (VBMI is the row's declared feature).
bool row_kernel_fits(const conv_desc &d);

} // namespace qconv::jit::dw
