#include "comm/all_to_all_counts.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace tpserve {
namespace {

// The table of three ranks whose counts pair up: rank p sends kSends[p][q] to rank q, and rank
// q expects kSends[p][q] from rank p.
constexpr int kWorld = 3;
const std::vector<std::vector<int64_t>> kSends = {{4, 0, 7}, {1, 2, 0}, {5, 3, 6}};

std::vector<int64_t> Table(const std::vector<std::vector<int64_t>>& sends) {
  std::vector<int64_t> table;
  for (int p = 0; p < kWorld; ++p) {
    std::vector<int64_t> recv(kWorld);
    for (int q = 0; q < kWorld; ++q) recv[q] = sends[q][p];
    const std::vector<int64_t> row = AllToAllCountsRow(sends[p], recv);
    table.insert(table.end(), row.begin(), row.end());
  }
  return table;
}

TEST(AllToAllCounts, RowIsSendsThenReceives) {
  EXPECT_EQ(AllToAllCountsRow(std::vector<int64_t>{4, 0, 7}, std::vector<int64_t>{4, 1, 5}),
            (std::vector<int64_t>{4, 0, 7, 4, 1, 5}));
}

TEST(AllToAllCounts, PairsThatMatchPass) {
  EXPECT_TRUE(CheckAllToAllPairs(kWorld, Table(kSends)).ok());
  EXPECT_TRUE(CheckAllToAllPairs(1, std::vector<int64_t>{3, 3}).ok());
}

TEST(AllToAllCounts, TheFirstPairThatDoesNotMatchIsNamed) {
  std::vector<int64_t> table = Table(kSends);
  table[2 * kWorld * 2 + 1] = 9;           // rank 2 now sends 9 to rank 1, which expects 3
  table[2 * kWorld * 1 + kWorld + 0] = 8;  // rank 1 now expects 8 from rank 0, which sends 0
  absl::Status status = CheckAllToAllPairs(kWorld, table);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "rank 0 sends 0 elements to rank 1, which expects 8");
  // A rank's own piece must pair up too.
  EXPECT_EQ(CheckAllToAllPairs(1, std::vector<int64_t>{3, 2}).message(),
            "rank 0 sends 3 elements to rank 0, which expects 2");
}

TEST(AllToAllCounts, ByteOffsetsArePrefixSums) {
  EXPECT_EQ(AllToAllByteOffsets(std::vector<int64_t>{4, 0, 7}, 2),
            (std::vector<size_t>{0, 8, 8, 22}));
  EXPECT_EQ(AllToAllByteOffsets({}, 4), (std::vector<size_t>{0}));
}

}  // namespace
}  // namespace tpserve
