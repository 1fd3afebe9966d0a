// Where the rows of the implementation tables come from.
//
// Each kernel family contributes its rows through one function, defined in
// the family's own folder, so adding a kernel never edits the table files:
//
//   onednn_conv_entries()   kernels/onednn/  brgconv rows (best first) and the
//                                            `onednn:any` peer row
//   jit_conv_entries()      kernels/jit/     JIT conv rows, best first
//   ref_conv_entries()      dispatch/        `ref:conv`
//   onednn_matmul_entries() kernels/onednn/  oneDNN matmul peers
//   jit_matmul_entries()    kernels/jit/     JIT compressed-MatMul rows
//   ref_matmul_entries()    dispatch/        `ref:matmul`
//
// conv_list() = onednn ++ jit ++ ref; matmul_list() = jit ++ onednn ++ ref
// (dispatch/conv_list.cpp, dispatch/matmul_list.cpp). Peers (entry.peer) may
// sit anywhere: "auto" never picks them. Until a family lands, a weak default
// in dispatch/ returns no rows; the family's (strong) definition replaces it.
#pragma once

#include <vector>

#include "dispatch/impl.h"

namespace qconv::impl {

std::vector<conv_entry> onednn_conv_entries();
std::vector<conv_entry> jit_conv_entries();
std::vector<conv_entry> ref_conv_entries();

std::vector<matmul_entry> onednn_matmul_entries();
std::vector<matmul_entry> jit_matmul_entries();
std::vector<matmul_entry> ref_matmul_entries();

} // namespace qconv::impl
