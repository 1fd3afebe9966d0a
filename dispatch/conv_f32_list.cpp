// The f32 convolution table, in dispatch order (see dispatch/conv_list.cpp
// for how a table is read): oneDNN's f32 convolution, then the reference for
// what oneDNN refuses.
#include "kernels/onednn/onednn_f32.h"
#include "reference/ref_rows.h"

namespace qconv::impl {

namespace {
std::vector<conv_f32_entry> build_conv_f32_list() {
    return {
        onednn_conv_f32_row("onednn:conv_f32"),
        // The reference: always last.
        ref_conv_f32_row(),
    };
}
} // namespace

const std::vector<conv_f32_entry> &conv_f32_list() {
    static const std::vector<conv_f32_entry> list = build_conv_f32_list();
    return list;
}

} // namespace qconv::impl
