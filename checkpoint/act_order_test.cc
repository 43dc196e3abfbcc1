// GPTQ act-order: g_idx validation, grouping a rank's columns, and the one-rank-per-group rule.
#include "checkpoint/act_order.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tpserve {
namespace {

// 16 columns in groups of 4: group g holds columns {g, g + 4, g + 8, g + 12}.
std::vector<int32_t> Strided() {
  std::vector<int32_t> g_idx(16);
  for (int c = 0; c < 16; ++c) g_idx[c] = c % 4;
  return g_idx;
}

TEST(ActOrderTest, ValidatesRangeAndGroupSizes) {
  EXPECT_TRUE(ValidateGroupIndex("w.g_idx", Strided(), 4).ok());
  std::vector<int32_t> bad = Strided();
  bad[5] = 4;
  absl::Status s = ValidateGroupIndex("w.g_idx", bad, 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "tensor w.g_idx: g_idx[5] = 4 is outside [0, 4) (16 input columns / group_size 4)");
  bad[5] = 0;  // group 0 now has 5 members, group 1 has 3
  s = ValidateGroupIndex("w.g_idx", bad, 4);
  EXPECT_EQ(s.message(),
            "tensor w.g_idx: group 0 has 5 columns; every group must have "
            "group_size 4");
}

TEST(ActOrderTest, SequentialGroupsNeedNoPermutation) {
  std::vector<int32_t> seq(16);
  for (int c = 0; c < 16; ++c) seq[c] = c / 4;
  EXPECT_TRUE(IsSequentialGroupIndex(seq, 4));
  EXPECT_FALSE(IsSequentialGroupIndex(Strided(), 4));
  absl::StatusOr<GroupedColumns> g = GroupColumns("w.qweight", {}, 4, 8, 8, 16);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->perm.empty());
  EXPECT_EQ(g->groups, (std::vector<int64_t>{2, 3}));
  g = GroupColumns("w.qweight", {}, 4, 6, 8, 16);
  EXPECT_EQ(g.status().message(),
            "w.qweight: column slice [6, 14) is not aligned to its groups of 4 input columns");
}

TEST(ActOrderTest, WholeRowGathersEachGroupInOrder) {
  absl::StatusOr<GroupedColumns> g = GroupColumns("w.g_idx", Strided(), 4, 0, 16, 16);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->groups, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(g->perm, (std::vector<int32_t>{0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15}));
}

TEST(ActOrderTest, ASliceHoldsOnlyWholeGroups) {
  // Groups {0, 2} in columns [0, 8) and {1, 3} in [8, 16): tp 2 keeps them whole.
  const std::vector<int32_t> g_idx = {2, 0, 0, 2, 0, 2, 2, 0, 1, 3, 3, 1, 1, 1, 3, 3};
  absl::StatusOr<GroupedColumns> second = GroupColumns("w.g_idx", g_idx, 4, 8, 8, 16);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->groups, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(second->perm, (std::vector<int32_t>{0, 3, 4, 5, 1, 2, 6, 7}));  // local columns
  // The strided index puts one column of every group in each quarter: tp 4 splits them all.
  absl::StatusOr<GroupedColumns> split = GroupColumns("w.g_idx", Strided(), 4, 4, 4, 16);
  EXPECT_EQ(split.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(split.status().message(),
            "tensor w.g_idx: input columns [4, 8) hold 1 of the 4 columns of act-order group 0; "
            "the others fall in another rank's columns (tp 4). A group's scale and zero point "
            "apply on one rank only, so this checkpoint loads only at tensor-parallel degrees "
            "that keep each group whole");
}

}  // namespace
}  // namespace tpserve
