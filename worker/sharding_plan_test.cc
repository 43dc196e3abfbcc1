#include "worker/sharding_plan.h"

#include <cstring>

#include "gtest/gtest.h"
#include "kernels/quantize.h"
#include "worker/testing/tiny_llama.h"

namespace tpserve {
namespace {

LlamaConfig SmolLm2Shapes() {
  LlamaConfig c;
  c.vocab_size = 49152;
  c.hidden_size = 576;
  c.intermediate_size = 1536;
  c.num_heads = 9;
  c.num_kv_heads = 3;
  c.head_dim = 64;
  return c;
}

TEST(ShardingPlanTest, KvGroupsStayWithTheirQueryHeads) {
  for (int rank = 0; rank < 3; ++rank) {
    absl::StatusOr<ShardingPlan> p = ShardingPlan::Create(SmolLm2Shapes(), {rank, 3});
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->num_local_heads(), 3);
    EXPECT_EQ(p->first_head(), 3 * rank);
    EXPECT_EQ(p->num_local_kv_heads(), 1);
    EXPECT_EQ(p->first_kv_head(), rank);
    // Query head h uses KV head h / 3: the rank's heads map exactly onto its KV head.
    EXPECT_EQ(p->first_head() / 3, p->first_kv_head());
    EXPECT_EQ(p->local_intermediate_size(), 512);
    EXPECT_EQ(p->first_ffn_row(), 512 * rank);
    EXPECT_EQ(p->vocab_rows_per_rank(), 16384);
  }
}

TEST(ShardingPlanTest, UnevenVocabIsPaddedOnTheLastRanks) {
  LlamaConfig c = TinyLlamaConfig();  // vocab 99
  absl::StatusOr<ShardingPlan> last = ShardingPlan::Create(c, {3, 4});
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->vocab_rows_per_rank(), 25);
  EXPECT_EQ(last->first_vocab_row(), 75);
  EXPECT_EQ(last->num_local_vocab_rows(), 24);
}

TEST(ShardingPlanTest, RejectsIndivisibleShapesNamingTheField) {
  absl::StatusOr<ShardingPlan> p = ShardingPlan::Create(SmolLm2Shapes(), {0, 2});
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("num_heads = 9"), std::string::npos) << p.status();
  LlamaConfig c = SmolLm2Shapes();
  c.num_heads = 12;
  p = ShardingPlan::Create(c, {0, 4});  // 12 % 4 == 0 but 3 KV heads do not split in 4
  EXPECT_NE(p.status().message().find("num_kv_heads = 3"), std::string::npos) << p.status();
  p = ShardingPlan::Create(SmolLm2Shapes(), {3, 3});
  EXPECT_NE(p.status().message().find("rank = 3 is outside [0, 3)"), std::string::npos);
}

TensorView Matrix(const std::vector<uint8_t>& bytes, DType t, int64_t rows, int64_t cols) {
  TensorView v;
  v.name = "blk.0.ffn_down.weight";
  v.dtype = t;
  v.shape = {rows, cols};
  v.data = bytes.data();
  v.nbytes = static_cast<int64_t>(bytes.size());
  return v;
}

TEST(ShardingPlanTest, SliceRowsIsAViewAndCopyColumnsCopiesWholeBlocks) {
  std::vector<float> w(4 * 128);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 97) * 0.01f;
  const std::vector<uint8_t> q = QuantizeMatrix(DType::kQ4_1, w.data(), 4, 128);
  const TensorView t = Matrix(q, DType::kQ4_1, 4, 128);
  absl::StatusOr<WeightMatrix> rows = SliceRows(t, 1, 2);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->data, q.data() + 80);  // row 1 of 80-byte rows, not a copy
  EXPECT_EQ(rows->rows, 2);
  absl::StatusOr<ShardedMatrix> cols = CopyColumns(t, 64, 64);
  ASSERT_TRUE(cols.ok()) << cols.status();
  EXPECT_EQ(cols->matrix.row_bytes, 40);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(std::memcmp(cols->owned.get() + 40 * r, q.data() + 80 * r + 40, 40), 0) << r;
  }
  absl::StatusOr<ShardedMatrix> bad = CopyColumns(t, 48, 48);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find(
                "blk.0.ffn_down.weight: column slice [48, 96) is not aligned to Q4_1 blocks"),
            std::string::npos)
      << bad.status();
  EXPECT_EQ(SliceRows(t, 3, 2).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tpserve
