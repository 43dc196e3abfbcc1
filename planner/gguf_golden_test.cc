// The plan of SmolLM2-135M-Instruct.Q4_1.gguf, built from the file's own tensor types, counts
// exactly the bytes the `gguf` Python package reports for each tensor
// (testdata/make_gguf_golden.py wrote the golden file from the real checkpoint).
#include <cstdlib>
#include <fstream>
#include <map>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "planner/memory_plan.h"
#include "planner/test_models.h"

namespace tpserve {
namespace {

nlohmann::json Golden() {
  const std::string path = std::string(std::getenv("TEST_SRCDIR")) + "/" +
                           std::getenv("TEST_WORKSPACE") +
                           "/planner/testdata/smollm2_q4_1_tensor_bytes.json";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);
}

std::vector<NamedTensorType> TensorTypes(const nlohmann::json& golden) {
  std::vector<NamedTensorType> out;
  for (const auto& t : golden["tensors"]) out.push_back({t["name"], t["type"]});
  return out;
}

TEST(GgufGoldenTest, ShapeMatchesTheTestConfig) {
  const nlohmann::json g = Golden();
  const ModelSpec c = SmolLM2_135M();
  EXPECT_EQ(g["metadata"]["llama.block_count"], c.num_layers);
  EXPECT_EQ(g["metadata"]["llama.embedding_length"], c.hidden_size);
  EXPECT_EQ(g["metadata"]["llama.feed_forward_length"], c.intermediate_size);
  EXPECT_EQ(g["metadata"]["llama.attention.head_count"], c.num_heads);
  EXPECT_EQ(g["metadata"]["llama.attention.head_count_kv"], c.num_kv_heads);
  EXPECT_EQ(g["metadata"]["llama.vocab_size"], c.vocab_size);
}

TEST(GgufGoldenTest, PerRoleBytesEqualTheFile) {
  const nlohmann::json g = Golden();
  absl::StatusOr<WeightFormats> formats = WeightFormatsFromTensorTypes(TensorTypes(g), true);
  ASSERT_TRUE(formats.ok()) << formats.status();
  EXPECT_EQ((*formats)[TensorRole::kEmbedding].kind, FormatKind::kQ8_0);
  EXPECT_EQ((*formats)[TensorRole::kQ].kind, FormatKind::kQ4_1);
  EXPECT_EQ((*formats)[TensorRole::kAttnNorm].kind, FormatKind::kF32);

  std::map<TensorRole, int64_t> file_bytes;
  for (const auto& t : g["tensors"]) {
    file_bytes[*TensorRoleFromGgufName(t["name"].get<std::string>())] += t["nbytes"].get<int64_t>();
  }
  absl::StatusOr<ShardingTable> plan = PlanSharding(SmolLM2_135M(), *formats, 1, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const RoleShard& r : plan->stages[0].roles) {
    SCOPED_TRACE(std::string(TensorRoleName(r.role)));
    EXPECT_EQ(r.unsharded_bytes, file_bytes[r.role]);  // tied lm_head: 0 in both
    EXPECT_EQ(r.bytes_per_rank, file_bytes[r.role]);
  }
  EXPECT_EQ(plan->checkpoint_bytes, g["total_tensor_bytes"].get<int64_t>());
  EXPECT_EQ(plan->checkpoint_bytes, 96'576'768);
}

TEST(GgufGoldenTest, ThreeRanksSplitTheFileExactly) {
  const nlohmann::json g = Golden();
  const WeightFormats formats = *WeightFormatsFromTensorTypes(TensorTypes(g), true);
  absl::StatusOr<ShardingTable> plan = PlanSharding(SmolLM2_135M(), formats, 3, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // 49152 rows split 3 ways: no padding; the 61 f32 norms of 576 values are on every rank.
  EXPECT_EQ(plan->padding_bytes, 0);
  EXPECT_EQ(plan->replica_bytes, 2 * 61 * 576 * 4);
  EXPECT_EQ(3 * plan->stages[0].weight_bytes_per_rank,
            g["total_tensor_bytes"].get<int64_t>() + 2 * 61 * 576 * 4);
}

}  // namespace
}  // namespace tpserve
