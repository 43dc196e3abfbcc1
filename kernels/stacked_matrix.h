// Weight matrices stacked along their rows (output features) into one: how a rank's q, k and v
// slices (or gate and up) become the one matrix a fused GEMM multiplies (model/
// fused_projections.h decides when), and views of each part's rows inside the stack.
//
//   const std::vector<const WeightMatrix*> parts = {&q.matrix, &k.matrix, &v.matrix};
//   if (StackRowsProblem(parts).empty()) qkv = StackRows(parts);   // [nq + nk + nv, hidden]
//   WeightMatrix k_view = RowRange(placed_qkv.matrix, nq, nk);
//
// Row r of the stack is row r - n_i of part i for n_i <= r < n_i + rows_i (n_i: the rows of the
// parts before it), so y = x * stack^T holds part i's product in columns [n_i, n_i + rows_i).
// Each stored array (values, scales, zero points) is the parts' arrays one after the other,
// which is the stack's own array exactly when no part but the last ends inside an output block
// of the format (fp8 128x128 tiles: 128 rows); StackRowsProblem refuses that, and any other
// difference the stack could not carry (format, width, strides, permutation, activation bound).
// Thread-safe: pure functions over host memory.
#ifndef TPSERVE_KERNELS_STACKED_MATRIX_H_
#define TPSERVE_KERNELS_STACKED_MATRIX_H_

#include <cstdint>
#include <string>

#include "absl/types/span.h"
#include "kernels/weight_matrix.h"

namespace tpserve {

// "" when `parts` can be stacked, else why not, naming the part by its index ("part 1's ...").
// Refused: fewer than one part; formats, cols, row_bytes or scale strides that differ; a part
// other than the last whose rows are not a whole number of OutputBlockRows (its last block's
// scales would be shared with the next part's first rows); act-order permutations or fp8
// activation-scale bounds that differ; a part in a backend's own form (prepared) or with a
// bias (the loader stacks before placing and adds biases after).
// REQUIRES: host memory (permutations are compared).
std::string StackRowsProblem(absl::Span<const WeightMatrix* const> parts);

// The parts' rows in order as one matrix that owns its bytes: values, scales and zero points
// each the parts' arrays concatenated (WeightMatrixPartBytes' sizes), the shared permutation
// copied once, the shared activation bound kept. REQUIRES: StackRowsProblem(parts) empty.
HostMatrix StackRows(absl::Span<const WeightMatrix* const> parts);

// Rows [row_begin, row_begin + rows) of `w` as a view into its arrays: values, scales, zero
// points and bias moved to that row, the permutation shared, no backend form (prepared is
// nullptr: a backend multiplies its own form of a stack only whole). Where `w`'s backend form
// replaced its stored arrays (data nullptr), the view's arrays are nullptr too.
// REQUIRES: 0 <= row_begin, row_begin + rows <= w.rows, row_begin a multiple of
// OutputBlockRows(w.format).
WeightMatrix RowRange(const WeightMatrix& w, int64_t row_begin, int64_t rows);

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_STACKED_MATRIX_H_
