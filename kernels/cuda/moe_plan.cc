#include "kernels/cuda/moe_plan.h"

#include <limits>

#include "base/str_cat.h"

namespace tpserve::cuda {

absl::StatusOr<MoeGrouping> GroupSlotsByExpert(absl::Span<const int32_t> ids, int64_t top_k,
                                               ExpertRange range, ForeignIds foreign) {
  const int64_t slots = static_cast<int64_t>(ids.size());
  if (top_k < 1 || slots % top_k != 0) {
    return absl::InvalidArgumentError(
        StrCat("expert grouping: ", slots, " ids are not whole rows of top_k ", top_k));
  }
  if (slots > std::numeric_limits<int32_t>::max() || range.count < 0) {
    return absl::InvalidArgumentError(StrCat("expert grouping: ", slots, " slots over ",
                                             range.count, " experts exceed int32 indexing"));
  }
  MoeGrouping g;
  g.counts.assign(range.count, 0);
  for (int64_t s = 0; s < slots; ++s) {
    const int32_t e = LocalExpert(ids[s], range);
    if (e < 0 && (foreign == ForeignIds::kRefuse || ids[s] < 0)) {
      return absl::InvalidArgumentError(
          StrCat("expert grouping: slot ", s, " (row ", s / top_k, ", choice ", s % top_k,
                 ") has expert id ", ids[s], ", outside [",
                 foreign == ForeignIds::kRefuse ? range.first : 0, ", ",
                 foreign == ForeignIds::kRefuse ? StrCat(range.first + range.count)
                                                : std::string("num_experts"),
                 ")"));
    }
    if (e >= 0) ++g.counts[e];
  }
  g.offsets.resize(range.count + 1);
  ExclusiveScan(g.counts.data(), range.count, g.offsets.data());
  g.order.resize(g.offsets.back());
  g.position.assign(slots, -1);
  std::vector<int32_t> next(g.offsets.begin(), g.offsets.end() - 1);
  for (int64_t s = 0; s < slots; ++s) {  // slot order within each expert: stable
    const int32_t e = LocalExpert(ids[s], range);
    if (e < 0) continue;
    g.position[s] = next[e]++;
    g.order[g.position[s]] = static_cast<int32_t>(s);
  }
  return g;
}

}  // namespace tpserve::cuda
