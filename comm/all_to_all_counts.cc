#include "comm/all_to_all_counts.h"

#include "absl/strings/str_cat.h"

namespace tpserve {

std::vector<int64_t> AllToAllCountsRow(absl::Span<const int64_t> send_counts,
                                       absl::Span<const int64_t> recv_counts) {
  std::vector<int64_t> row(send_counts.begin(), send_counts.end());
  row.insert(row.end(), recv_counts.begin(), recv_counts.end());
  return row;
}

absl::Status CheckAllToAllPairs(int world_size, absl::Span<const int64_t> table) {
  const size_t row = 2 * static_cast<size_t>(world_size);
  for (int p = 0; p < world_size; ++p) {
    for (int q = 0; q < world_size; ++q) {
      const int64_t sent = table[p * row + q];
      const int64_t expected = table[q * row + world_size + p];
      if (sent != expected) {
        return absl::InvalidArgumentError(absl::StrCat(
            "rank ", p, " sends ", sent, " elements to rank ", q, ", which expects ", expected));
      }
    }
  }
  return absl::OkStatus();
}

std::vector<size_t> AllToAllByteOffsets(absl::Span<const int64_t> counts, size_t elem_bytes) {
  std::vector<size_t> offsets(counts.size() + 1, 0);
  for (size_t r = 0; r < counts.size(); ++r) {
    offsets[r + 1] = offsets[r] + static_cast<size_t>(counts[r]) * elem_bytes;
  }
  return offsets;
}

}  // namespace tpserve
