#include "checkpoint/act_order.h"

#include <algorithm>
#include <numeric>

#include "base/str_cat.h"

namespace tpserve {
namespace {

// "tp 2" when the range is one of equal parts, else the range alone.
std::string DegreeOf(int64_t num_cols, int64_t cols) {
  return num_cols > 0 && cols % num_cols == 0 ? StrCat(" (tp ", cols / num_cols, ")") : "";
}

}  // namespace

absl::Status ValidateGroupIndex(std::string_view name, absl::Span<const int32_t> g_idx,
                                int64_t group_size) {
  const int64_t size = static_cast<int64_t>(g_idx.size());
  const int64_t num_groups = size / group_size;
  std::vector<int64_t> members(num_groups, 0);
  for (int64_t c = 0; c < size; ++c) {
    if (g_idx[c] < 0 || g_idx[c] >= num_groups) {
      return absl::InvalidArgumentError(StrCat("tensor ", name, ": g_idx[", c, "] = ", g_idx[c],
                                               " is outside [0, ", num_groups, ") (", size,
                                               " input columns / group_size ", group_size, ")"));
    }
    ++members[g_idx[c]];
  }
  for (int64_t g = 0; g < num_groups; ++g) {
    if (members[g] != group_size) {
      return absl::InvalidArgumentError(StrCat("tensor ", name, ": group ", g, " has ", members[g],
                                               " columns; every group must have group_size ",
                                               group_size));
    }
  }
  return absl::OkStatus();
}

bool IsSequentialGroupIndex(absl::Span<const int32_t> g_idx, int64_t group_size) {
  for (size_t c = 0; c < g_idx.size(); ++c) {
    if (g_idx[c] != static_cast<int64_t>(c) / group_size) return false;
  }
  return true;
}

absl::StatusOr<GroupedColumns> GroupColumns(std::string_view name, absl::Span<const int32_t> g_idx,
                                            int64_t group_size, int64_t col_begin, int64_t num_cols,
                                            int64_t cols) {
  GroupedColumns out;
  if (g_idx.empty()) {
    if (col_begin % group_size != 0 || num_cols % group_size != 0) {
      return absl::InvalidArgumentError(
          StrCat(name, ": column slice [", col_begin, ", ", col_begin + num_cols,
                 ") is not aligned to its groups of ", group_size, " input columns"));
    }
    for (int64_t t = 0; t < num_cols / group_size; ++t)
      out.groups.push_back(col_begin / group_size + t);
    return out;
  }
  const absl::Span<const int32_t> mine = g_idx.subspan(col_begin, num_cols);
  std::vector<int32_t> order(num_cols);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return mine[a] < mine[b]; });
  // Sorted, each group is one run; a run shorter than group_size has members elsewhere.
  for (int64_t j = 0; j < num_cols;) {
    const int32_t group = mine[order[j]];
    int64_t end = j;
    while (end < num_cols && mine[order[end]] == group) ++end;
    if (end - j != group_size) {
      return absl::InvalidArgumentError(StrCat(
          "tensor ", name, ": input columns [", col_begin, ", ", col_begin + num_cols, ") hold ",
          end - j, " of the ", group_size, " columns of act-order group ", group,
          "; the others fall in another rank's columns", DegreeOf(num_cols, cols),
          ". A group's scale and zero point apply on one rank only, so this checkpoint loads "
          "only at tensor-parallel degrees that keep each group whole"));
    }
    out.groups.push_back(group);
    j = end;
  }
  bool identity = true;
  for (int64_t j = 0; j < num_cols && identity; ++j) identity = order[j] == j;
  if (!identity) out.perm = std::move(order);
  return out;
}

}  // namespace tpserve
