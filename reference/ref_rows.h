// The reference rows, last in every table (reference/ref_rows.cpp): `ref:conv`,
// `ref:matmul` and `ref:conv_f32`, running qconv::ref (reference.h).
#pragma once

#include "rows/row.h"

namespace qconv::impl {

conv_entry ref_conv_row();
matmul_entry ref_matmul_row();
conv_f32_entry ref_conv_f32_row();

} // namespace qconv::impl
