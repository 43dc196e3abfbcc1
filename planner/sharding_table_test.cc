#include "planner/sharding_table.h"

#include <tuple>

#include "gtest/gtest.h"
#include "planner/test_models.h"

namespace tpserve {
namespace {

WeightFormats Preset(const char* name) { return *WeightFormatsPreset(name); }

// A small config whose row-parallel inputs (768 / tp) stop being multiples of 128 at tp = 4.
ModelSpec Width768() {
  ModelSpec c = Llama31_8B();
  c.name = "width-768";
  c.hidden_size = 768;
  c.num_heads = 12;
  c.num_kv_heads = 4;
  c.head_dim = 64;
  c.intermediate_size = 2304;
  c.num_layers = 4;
  c.vocab_size = 32001;
  return c;
}

TEST(ShardingPlanTest, ValidDegreesSplitHeadsAndKvHeadsEvenly) {
  // Past its 8 KV heads, each copied to tp / 8 ranks.
  EXPECT_EQ(ValidTpDegrees(Llama31_405B()), (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128}));
  // 9: one head a rank, each KV head on 3, the MLP's blocks 6 or 5 a rank.
  EXPECT_EQ(ValidTpDegrees(SmolLM2_135M()), (std::vector<int>{1, 3, 9}));
  EXPECT_EQ(ValidPipelineDegrees(SmolLM2_135M()), (std::vector<int>{1, 2, 3, 5, 6, 10, 15, 30}));
}

TEST(ShardingPlanTest, InvalidTpNamesHeadsAndValidDegrees) {
  absl::Status six = ValidateParallelism(Llama31_405B(), 6, 1);
  EXPECT_EQ(six.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(six.message().find(
                "tensor-parallel degree 6 does not divide num_heads = 128 or num_kv_heads = 8 (nor "
                "is a multiple of it);"),
            std::string::npos)
      << six;
  EXPECT_NE(six.message().find("multiples of num_kv_heads = 8) are: 1, 2, 4, 8, 16, 32, 64, 128"),
            std::string::npos)
      << six;
  // SmolLM2: 9 heads, 3 KV heads; 9 divides 9 heads and copies each KV head to 3 ranks, and
  // splits the MLP's 1536 unevenly; 2 divides neither head count.
  EXPECT_TRUE(ValidateParallelism(SmolLM2_135M(), 9, 1).ok());
  absl::Status two = ValidateParallelism(SmolLM2_135M(), 2, 1);
  EXPECT_NE(two.message().find("degree 2 does not divide num_heads = 9"), std::string::npos)
      << two;
  EXPECT_NE(two.message().find(") are: 1, 3, 9"), std::string::npos) << two;
  absl::Status pp = ValidateParallelism(Llama31_405B(), 8, 4);
  EXPECT_NE(pp.message().find("pipeline stages 4 does not divide num_layers=126"),
            std::string::npos)
      << pp;
  EXPECT_FALSE(PlanSharding(Llama31_405B(), Preset("fp8"), 6, 1).ok());
}

// SmolLM2 Q4_1 at TP 9: gate, up and down 6 blocks of 32 on ranks 0-2, 5 on ranks 3-8; the
// per-rank figure is rank 0's, and the report and JSON name both shapes.
TEST(ShardingPlanTest, AnUnevenMlpSplitSaysBothShapes) {
  ShardingTable p = *PlanSharding(SmolLM2_135M(), Preset("q4_1"), 9, 1);
  const StageShards& s = p.stages[0];
  for (TensorRole role : {TensorRole::kGate, TensorRole::kUp, TensorRole::kDown}) {
    const RoleShard& r = *s.Find(role);
    const bool down = role == TensorRole::kDown;
    EXPECT_EQ(r.local_shape, down ? (std::array<int64_t, 2>{576, 192})
                                  : (std::array<int64_t, 2>{192, 576}));
    EXPECT_EQ(r.smallest_local_shape, down ? (std::array<int64_t, 2>{576, 160})
                                           : (std::array<int64_t, 2>{160, 576}));
    EXPECT_EQ(r.ranks_with_local_shape, 3);
    // 30 layers, ranks 3-8 one block of 32 narrower: 576 rows x 20 bytes of Q4_1 a tensor.
    EXPECT_EQ(r.uneven_bytes, 6 * 30 * 576 * 20);
  }
  EXPECT_EQ(s.Find(TensorRole::kQ)->smallest_local_shape, s.Find(TensorRole::kQ)->local_shape);
}

TEST(ShardingPlanTest, HeadsSplitWholeAndGqaGroupsKept) {
  ShardingTable p = *PlanSharding(Llama31_405B(), Preset("fp8"), 8, 1);
  const StageShards& s = p.stages[0];
  EXPECT_EQ(s.Find(TensorRole::kQ)->local_shape, (std::array<int64_t, 2>{16 * 128, 16384}));
  EXPECT_EQ(s.Find(TensorRole::kK)->local_shape, (std::array<int64_t, 2>{1 * 128, 16384}));
  EXPECT_EQ(s.Find(TensorRole::kO)->local_shape, (std::array<int64_t, 2>{16384, 2048}));
  EXPECT_EQ(s.Find(TensorRole::kDown)->local_shape, (std::array<int64_t, 2>{16384, 6656}));
  EXPECT_EQ(s.Find(TensorRole::kEmbedding)->local_shape, (std::array<int64_t, 2>{16032, 16384}));
  EXPECT_EQ(s.Find(TensorRole::kAttnNorm)->kind, ShardKind::kReplicated);
  EXPECT_EQ(s.Find(TensorRole::kQ)->num_tensors, 126);
}

// Sum over every rank of what it holds == checkpoint + padding + replicated copies, and the
// checkpoint part never depends on the layout.
TEST(ShardingPlanTest, RanksSumToCheckpointPlusPaddingAndReplicas) {
  const std::vector<std::tuple<ModelSpec, const char*, int, int>> cases = {
      {Llama31_405B(), "fp8", 8, 1},       {Llama31_405B(), "int4", 4, 2},
      {Llama31_405B(), "fp8-block", 16, 1}, {Llama31_405B(), "bf16", 32, 2},
      {Llama31_405B(), "fp8-block", 8, 3}, {Llama33_70B(), "bf16", 2, 5},
      {SmolLM2_135M(), "q4_1", 3, 1},      {SmolLM2_135M(), "f32", 3, 2},
      {SmolLM2_135M(), "q4_1", 9, 1},      {SmolLM2_135M(), "int4-g64", 9, 2},
      {Width768(), "int4-g128", 2, 1},     {Width768(), "q8_0", 4, 4},
      {Llama33_70B(), "q4_k", 8, 2},       {Llama31_8B(), "q6_k", 4, 1}};
  // Held as stored (CPU hosts), and as the CUDA backend holds them on a Hopper GPU (the
  // mixed-input GEMM's form of the int4 and fp8 projections on top).
  for (const auto& [config, format, tp, pp] : cases) {
   for (const WeightDevice device : {WeightDevice{}, WeightDevice{true, 90}}) {
    SCOPED_TRACE(config.name + " " + format + " tp=" + std::to_string(tp) +
                 " pp=" + std::to_string(pp) + (device.cuda ? " cuda" : " host"));
    absl::StatusOr<ShardingTable> whole = PlanSharding(config, Preset(format), 1, 1, device);
    absl::StatusOr<ShardingTable> split = PlanSharding(config, Preset(format), tp, pp, device);
    ASSERT_TRUE(whole.ok()) << whole.status();
    ASSERT_TRUE(split.ok()) << split.status();
    int64_t all_ranks = 0;
    for (const StageShards& s : split->stages) all_ranks += tp * s.weight_bytes_per_rank;
    // Rank 0 holds the most; an MLP split unevenly leaves the narrower ranks uneven_bytes less.
    EXPECT_EQ(all_ranks, split->AllRanksWeightBytes() + split->uneven_bytes);
    EXPECT_EQ(split->AllRanksWeightBytes(), split->checkpoint_bytes + split->padding_bytes +
                                                split->replica_bytes + split->backend_form_bytes);
    EXPECT_EQ(split->uneven_bytes > 0, tp == 9);
    const bool mixed = device.cuda && (std::string(format).find("int4") != std::string::npos ||
                                       std::string(format).find("fp8") != std::string::npos);
    EXPECT_EQ(split->backend_form_bytes > 0, mixed);
    EXPECT_EQ(split->checkpoint_bytes, whole->checkpoint_bytes);
    EXPECT_EQ(whole->padding_bytes, 0);
    // One rank holds one copy of everything, but norms as the f32 the engine computes with.
    const TensorFormat norm = Preset(format)[TensorRole::kAttnNorm];
    EXPECT_EQ(whole->replica_bytes, (2 * config.num_layers + 1) * config.hidden_size *
                                        (4 - PlainElementBytes(norm.kind)));
   }
  }
}

TEST(ShardingPlanTest, VocabPaddedToMultipleOfTpAndPaddingCounted) {
  // 32001 rows at tp=4 -> 32004; 3 padding rows of 768 bf16 values, embedding and LM head.
  ShardingTable p = *PlanSharding(Width768(), Preset("bf16"), 4, 1);
  EXPECT_EQ(p.vocab_padded, 32004);
  EXPECT_EQ(p.padding_bytes, 2 * 3 * 768 * 2);
  EXPECT_EQ(p.stages[0].Find(TensorRole::kLmHead)->local_shape[0], 8001);
}

TEST(ShardingPlanTest, ReplicatedNormsAndPerChannelScalesCounted) {
  // 405B, tp=8: every rank holds all 2*126+1 norms (16384 values, stored bf16, held as f32)
  // and, for the row-parallel o and down, the fp32 scale of every one of their 16384 output
  // rows.
  ShardingTable p = *PlanSharding(Llama31_405B(), Preset("fp8"), 8, 1);
  const int64_t norm_values = (2 * 126 + 1) * int64_t{16384};
  const int64_t scales = 2 * 126 * int64_t{16384} * 4;
  EXPECT_EQ(p.replica_bytes, 8 * norm_values * 4 - norm_values * 2 + 7 * scales);
}

TEST(ShardingPlanTest, TiedLmHeadSharesOrCopiesTheEmbedding) {
  ShardingTable one = *PlanSharding(SmolLM2_135M(), Preset("q8_0"), 1, 1);
  const RoleShard* head = one.stages[0].Find(TensorRole::kLmHead);
  ASSERT_NE(head, nullptr);
  EXPECT_TRUE(head->tied_to_embedding);
  EXPECT_EQ(head->bytes_per_rank, 0);

  // Two stages: the last one needs its own copy (49152 x 576 in q8_0 = 30,081,024 bytes).
  ShardingTable two = *PlanSharding(SmolLM2_135M(), Preset("q8_0"), 1, 2);
  EXPECT_EQ(two.stages[0].Find(TensorRole::kLmHead), nullptr);
  EXPECT_EQ(two.stages[1].Find(TensorRole::kEmbedding), nullptr);
  EXPECT_EQ(two.stages[1].Find(TensorRole::kLmHead)->bytes_per_rank, 30081024);
  EXPECT_EQ(two.replica_bytes, 30081024);
  EXPECT_EQ(two.stages[1].first_layer, 15);
}

TEST(ShardingPlanTest, SplitThroughQuantizationGroupIsRefused) {
  absl::Status s = PlanSharding(Width768(), Preset("int4-g128"), 4, 1).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("o is row-parallel: its input dim 768 / tp 4 = 192 is not a "
                             "multiple of the int4-g128 block of 128 values"),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("degrees that keep every block on one rank: 1, 2"), std::string::npos)
      << s;
  absl::Status tile = PlanSharding(Width768(), Preset("fp8-block"), 4, 1).status();
  EXPECT_NE(tile.message().find("is column-parallel: its output dim 768 / tp 4 = 192 is not a "
                                "multiple of the fp8-block tile of 128 rows"),
            std::string::npos)
      << tile;
  // K-quant super-blocks of 256 values are split units too.
  absl::Status k_quant = PlanSharding(Width768(), Preset("q4_k"), 2, 1).status();
  EXPECT_NE(k_quant.message().find("o is row-parallel: its input dim 768 / tp 2 = 384 is not a "
                                   "multiple of the q4_k block of 256 values"),
            std::string::npos)
      << k_quant;
  // Unsplit, SmolLM2's 576-wide rows are not a multiple of 128 either.
  absl::Status whole = PlanSharding(SmolLM2_135M(), Preset("int4-g128"), 1, 1).status();
  EXPECT_NE(whole.message().find("input dim 576 is not a multiple of the int4-g128 block"),
            std::string::npos)
      << whole;
}

// Expert parallelism holds E / tp whole experts per rank where tensor parallelism holds a
// 1 / tp slice of all E: the same expert bytes per rank, counted as whole tensors; the
// checkpoint part is the same either way, and the ranks still sum to what the table says.
TEST(ShardingPlanTest, ExpertParallelHoldsWholeExpertsAndTheSameCheckpoint) {
  const ModelSpec qwen = *ModelSpecPreset("qwen3-30b-a3b");  // 128 experts of 768, 48 layers
  absl::StatusOr<ShardingTable> tp = PlanSharding(qwen, Preset("bf16"), 4, 1);
  absl::StatusOr<ShardingTable> ep = PlanSharding(qwen, Preset("bf16"), 4, 1, {}, true);
  ASSERT_TRUE(tp.ok()) << tp.status();
  ASSERT_TRUE(ep.ok()) << ep.status();
  const RoleShard* split = tp->stages[0].Find(TensorRole::kExpertDown);
  const RoleShard* whole = ep->stages[0].Find(TensorRole::kExpertDown);
  ASSERT_NE(split, nullptr);
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(split->kind, ShardKind::kRow);
  EXPECT_EQ(split->num_tensors, 48 * 128);
  EXPECT_EQ(split->local_shape, (std::array<int64_t, 2>{2048, 768 / 4}));
  EXPECT_EQ(whole->kind, ShardKind::kExpert);
  EXPECT_EQ(whole->num_tensors, 48 * 128 / 4);
  EXPECT_EQ(whole->local_shape, (std::array<int64_t, 2>{2048, 768}));
  EXPECT_EQ(whole->bytes_per_rank, int64_t{48} * 32 * 2048 * 768 * 2);
  EXPECT_EQ(whole->bytes_per_rank, split->bytes_per_rank);
  EXPECT_EQ(whole->unsharded_bytes, int64_t{48} * 128 * 2048 * 768 * 2);
  EXPECT_EQ(ep->checkpoint_bytes, tp->checkpoint_bytes);
  EXPECT_EQ(ep->stages[0].weight_bytes_per_rank, tp->stages[0].weight_bytes_per_rank);
  EXPECT_EQ(4 * ep->stages[0].weight_bytes_per_rank, ep->AllRanksWeightBytes());
  // 128 experts do not go on 3 ranks, and the error names the count.
  const absl::Status three = PlanSharding(qwen, Preset("bf16"), 3, 1, {}, true).status();
  EXPECT_NE(three.message().find("moe.num_experts = 128"), std::string::npos) << three;
}

// Past the KV-head count each rank holds one whole KV head, copied to the tp / K ranks that
// read it: the copies are replicas, and a head of 128 rows is a whole fp8 tile.
TEST(ShardingPlanTest, KvHeadsPastTheirCountAreCopiesCountedAsReplicas) {
  absl::StatusOr<ShardingTable> t8 = PlanSharding(Llama31_405B(), Preset("fp8-block"), 8, 1);
  absl::StatusOr<ShardingTable> t16 = PlanSharding(Llama31_405B(), Preset("fp8-block"), 16, 1);
  ASSERT_TRUE(t8.ok()) << t8.status();
  ASSERT_TRUE(t16.ok()) << t16.status();
  for (TensorRole role : {TensorRole::kK, TensorRole::kV}) {
    const RoleShard* k8 = t8->stages[0].Find(role);
    const RoleShard* k16 = t16->stages[0].Find(role);
    EXPECT_EQ(k8->copies, 1);
    EXPECT_EQ(k16->copies, 2);
    EXPECT_EQ(k16->kind, ShardKind::kColumn);
    // One head of 128 rows per rank at both degrees: the same bytes per rank, so at 16 ranks
    // the 16 slices are two copies of the tensor, one of them replicas.
    EXPECT_EQ(k16->local_shape, (std::array<int64_t, 2>{128, 16384}));
    EXPECT_EQ(k16->bytes_per_rank, k8->bytes_per_rank);
    EXPECT_EQ(k8->replica_bytes, 0);
    EXPECT_EQ(k16->replica_bytes, k16->unsharded_bytes);
    EXPECT_EQ(16 * k16->bytes_per_rank, 2 * k16->unsharded_bytes);
  }
  // Query heads and the MLP halve.
  EXPECT_EQ(t16->stages[0].Find(TensorRole::kQ)->local_shape,
            (std::array<int64_t, 2>{8 * 128, 16384}));
  EXPECT_EQ(t16->stages[0].Find(TensorRole::kQ)->copies, 1);
  EXPECT_EQ(t16->stages[0].Find(TensorRole::kAttnNorm)->copies, 16);
}

// Qwen3-235B-A22B FP8 (128x128 blocks) at 8 GPUs: its 4 KV heads are copied to pairs of ranks,
// but 1536 / 8 = 192 expert rows split a 128-row tile, as vLLM finds; whole experts (expert
// parallelism) do not, and the refusal says so.
TEST(ShardingPlanTest, Qwen3_235BAtEightRanksNeedsExpertParallelismWithBlockFp8) {
  const ModelSpec qwen = *ModelSpecPreset("qwen3-235b-a22b");
  const absl::Status split = PlanSharding(qwen, Preset("fp8-block"), 8, 1).status();
  EXPECT_EQ(split.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(split.message().find("expert_gate is column-parallel: its output dim 1536 / tp 8 = "
                                 "192 is not a multiple of the fp8-block tile of 128 rows"),
            std::string::npos)
      << split;
  EXPECT_NE(split.message().find("degrees that keep every block on one rank: 1, 2, 4; or 8 "
                                 "with expert parallelism, which places experts whole"),
            std::string::npos)
      << split;
  absl::StatusOr<ShardingTable> ep = PlanSharding(qwen, Preset("fp8-block"), 8, 1, {}, true);
  ASSERT_TRUE(ep.ok()) << ep.status();
  EXPECT_EQ(ep->stages[0].Find(TensorRole::kK)->copies, 2);
  EXPECT_EQ(ep->stages[0].Find(TensorRole::kExpertGate)->num_tensors, 94 * 128 / 8);
  // Per-channel fp8 has no row tiles: the experts split at 8 too.
  EXPECT_TRUE(PlanSharding(qwen, Preset("fp8"), 8, 1).ok());
}

}  // namespace
}  // namespace tpserve
