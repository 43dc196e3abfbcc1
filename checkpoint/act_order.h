// GPTQ act-order (desc_act): the group index g_idx of a quantized linear, checked, and turned
// into the engine's int4 layout for one rank's columns: the columns of each group gathered
// into one run of group_size stored columns, and the permutation that says which input each
// stored column multiplies (WeightMatrix::input_perm).
//
//   TP_RETURN_IF_ERROR(ValidateGroupIndex("...down_proj.g_idx", g_idx, 32));
//   TP_ASSIGN_OR_RETURN(GroupedColumns mine, GroupColumns(name, g_idx, 32, 4096, 4096));
//   // stored column j = input column col_begin + mine.perm[j], in group mine.groups[j / 32]
//
// The rule for tensor parallelism: every group must lie whole in one rank's columns. A rank
// applies the scale and zero point of a group to the columns it holds, and the int4 layout
// (kernels/weight_matrix.h) gives each group exactly group_size stored columns with one
// scale and zero per row, so a group split between ranks has no representation there.
// Reassigning input columns to ranks by group instead would mean permuting the previous
// layer's outputs as well (possible for down_proj through gate/up, impossible across o_proj's
// heads), so a degree that splits a group is refused, with the numbers.
// Thread-safe: pure functions.
#ifndef TPSERVE_CHECKPOINT_ACT_ORDER_H_
#define TPSERVE_CHECKPOINT_ACT_ORDER_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tpserve {

// OK when every g_idx value lies in [0, size / group_size) and each group has exactly
// group_size columns (which GPTQ's act-order always writes). INVALID_ARGUMENT naming `name`,
// the index, the value and the bound otherwise. REQUIRES: group_size > 0.
absl::Status ValidateGroupIndex(std::string_view name, absl::Span<const int32_t> g_idx,
                                int64_t group_size);

// True when g_idx[c] == c / group_size for every c: groups in column order, no permutation.
bool IsSequentialGroupIndex(absl::Span<const int32_t> g_idx, int64_t group_size);

struct GroupedColumns {
  // Stored column j multiplies input column col_begin + perm[j]; empty when that is column j
  // itself (the columns already run group by group).
  std::vector<int32_t> perm;
  // The checkpoint group of stored columns [t * group_size, (t + 1) * group_size).
  std::vector<int64_t> groups;
};

// Columns [col_begin, col_begin + num_cols) of a matrix whose group index is `g_idx` (as
// validated above), grouped. An empty g_idx means sequential groups. INVALID_ARGUMENT naming
// `name`, the group, its columns here and the degree, when a group is not whole in the range
// (sequential groups: when the range is not aligned to group_size).
absl::StatusOr<GroupedColumns> GroupColumns(std::string_view name, absl::Span<const int32_t> g_idx,
                                            int64_t group_size, int64_t col_begin, int64_t num_cols,
                                            int64_t cols);

}  // namespace tpserve

#endif  // TPSERVE_CHECKPOINT_ACT_ORDER_H_
