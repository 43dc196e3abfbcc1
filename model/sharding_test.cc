#include "model/sharding.h"

#include <algorithm>
#include <string>

#include "gtest/gtest.h"

namespace tpserve {
namespace {

ModelSpec SmolLm2Shapes() {
  ModelSpec c;
  c.vocab_size = 49152;
  c.hidden_size = 576;
  c.intermediate_size = 1536;
  c.num_layers = 30;
  c.num_heads = 9;
  c.num_kv_heads = 3;
  c.head_dim = 64;
  return c;
}

WeightFormats Formats(std::string_view preset) { return *WeightFormatsPreset(preset); }

TEST(ShardingPlanTest, KvGroupsStayWithTheirQueryHeads) {
  for (int rank = 0; rank < 3; ++rank) {
    absl::StatusOr<ShardingPlan> p = ShardingPlan::Create(SmolLm2Shapes(), Formats("q4_1"),
                                                          {rank, 3});
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

TEST(ShardingPlanTest, SlicesFollowTheMegatronTable) {
  const ShardingPlan p = *ShardingPlan::Create(SmolLm2Shapes(), Formats("f32"), {1, 3});
  EXPECT_EQ(p.Slice(TensorRole::kQ), (TensorSlice{192, 192, 0, 576}));  // heads 3..5 of 64
  EXPECT_EQ(p.Slice(TensorRole::kK), (TensorSlice{64, 64, 0, 576}));    // KV head 1
  EXPECT_EQ(p.Slice(TensorRole::kO), (TensorSlice{0, 576, 192, 192}));  // row-parallel
  EXPECT_EQ(p.Slice(TensorRole::kGate), (TensorSlice{512, 512, 0, 576}));
  EXPECT_EQ(p.Slice(TensorRole::kDown), (TensorSlice{0, 576, 512, 512}));
  EXPECT_EQ(p.Slice(TensorRole::kEmbedding), (TensorSlice{16384, 16384, 0, 576}));
  EXPECT_EQ(p.Slice(TensorRole::kAttnNorm), (TensorSlice{0, 1, 0, 576}));  // replicated
}

// Qwen2's biases go with their heads' output rows; QK-norms and Gemma's sandwich norms are
// replicated; and a Llama has none of them.
TEST(ShardingPlanTest, FamilyVectorsSplitWithTheirHeadsOrAreReplicated) {
  ModelSpec c = SmolLm2Shapes();
  c.qkv_bias = c.qk_norm = c.sandwich_norms = true;
  for (int rank = 0; rank < 3; ++rank) {
    absl::StatusOr<ShardingPlan> p = ShardingPlan::Create(c, Formats("q8_0"), {rank, 3});
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->Slice(TensorRole::kQBias), (TensorSlice{rank * 192, 192, 0, 1}));
    EXPECT_EQ(p->Slice(TensorRole::kKBias), (TensorSlice{rank * 64, 64, 0, 1}));
    EXPECT_EQ(p->Slice(TensorRole::kVBias), p->Slice(TensorRole::kKBias));
    EXPECT_EQ(p->Slice(TensorRole::kQNorm), (TensorSlice{0, 1, 0, 64}));
    EXPECT_EQ(p->Slice(TensorRole::kPostFfnNorm), (TensorSlice{0, 1, 0, 576}));
  }
  EXPECT_EQ(ShardKindFor(TensorRole::kQBias), ShardKind::kColumn);
  EXPECT_EQ(ShardKindFor(TensorRole::kKNorm), ShardKind::kReplicated);
  for (TensorRole role : {TensorRole::kQBias, TensorRole::kQNorm, TensorRole::kPostAttnNorm}) {
    EXPECT_TRUE(HasRole(c, role)) << TensorRoleName(role);
    EXPECT_FALSE(HasRole(SmolLm2Shapes(), role)) << TensorRoleName(role);
  }
}

TEST(ShardingPlanTest, UnevenVocabLeavesTheLastRanksShort) {
  ModelSpec c = SmolLm2Shapes();
  c.vocab_size = 99;
  c.num_heads = 8;
  c.num_kv_heads = 4;
  const ShardingPlan last = *ShardingPlan::Create(c, Formats("f32"), {3, 4});
  EXPECT_EQ(last.vocab_rows_per_rank(), 25);
  EXPECT_EQ(last.first_vocab_row(), 75);
  EXPECT_EQ(last.num_local_vocab_rows(), 24);
}

TEST(ShardingPlanTest, Fp8TilesRoundTheVocabShareUpToWholeTiles) {
  ModelSpec c = SmolLm2Shapes();
  c.vocab_size = 1000;
  WeightFormats f = Formats("f32");
  f[TensorRole::kEmbedding] = TensorFormat::Of(FormatKind::kFp8Block128);
  const ShardingPlan p = *ShardingPlan::Create(c, f, {2, 3});
  EXPECT_EQ(p.vocab_rows_per_rank(), 384);  // ceil(1000 / (3 * 128)) tiles of 128 each
  EXPECT_EQ(p.first_vocab_row(), 768);
  EXPECT_EQ(p.num_local_vocab_rows(), 232);
}

TEST(ShardingPlanTest, RejectsIndivisibleShapesNamingTheField) {
  absl::StatusOr<ShardingPlan> p = ShardingPlan::Create(SmolLm2Shapes(), Formats("f32"), {0, 2});
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("num_heads = 9"), std::string::npos) << p.status();
  EXPECT_NE(p.status().message().find("valid degrees"), std::string::npos) << p.status();
  ModelSpec c = SmolLm2Shapes();
  c.num_heads = 12;
  p = ShardingPlan::Create(c, Formats("f32"), {0, 4});  // 12 % 4 == 0 but 3 KV heads do not
  EXPECT_NE(p.status().message().find("num_kv_heads = 3"), std::string::npos) << p.status();
  c = SmolLm2Shapes();
  c.intermediate_size = 2;  // fewer rows than ranks
  p = ShardingPlan::Create(c, Formats("f32"), {0, 3});
  EXPECT_NE(p.status().message().find("tensor-parallel degree 3 does not divide intermediate_size "
                                      "= 2 into a row each"),
            std::string::npos)
      << p.status();
  c.intermediate_size = 1537;  // not 3 equal parts, nor whole units of 32
  p = ShardingPlan::Create(c, Formats("f32"), {0, 3});
  EXPECT_NE(p.status().message().find("intermediate_size = 1537 does not divide by "
                                      "tensor-parallel degree 3, and an uneven split needs whole "
                                      "units of 32 values"),
            std::string::npos)
      << p.status();
  c.intermediate_size = 64;  // two units of 32 for three ranks
  p = ShardingPlan::Create(c, Formats("q4_1"), {0, 3});
  EXPECT_NE(p.status().message().find("intermediate_size = 64 holds 2 units of 32 values, fewer "
                                      "than tensor-parallel degree 3"),
            std::string::npos)
      << p.status();
  p = ShardingPlan::Create(SmolLm2Shapes(), Formats("f32"), {3, 3});
  EXPECT_NE(p.status().message().find("rank = 3 is outside [0, 3)"), std::string::npos);
}

TEST(ShardingPlanTest, RefusesADegreeThatSplitsAQuantizationGroupWithTheNumbers) {
  ModelSpec c = SmolLm2Shapes();
  c.hidden_size = 1024;
  c.num_heads = 16;
  c.num_kv_heads = 4;
  c.intermediate_size = 2816;  // 22 groups of 128
  // o's input, 16 heads of 64, is 64 columns a rank at TP 16: half a group.
  absl::StatusOr<ShardingPlan> p = ShardingPlan::Create(c, Formats("int4-g128"), {0, 16});
  ASSERT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("o is row-parallel: its input dim 1024 / tp 16 = 64 is not "
                                       "a multiple of the int4-g128 block of 128 values"),
            std::string::npos)
      << p.status();
  EXPECT_NE(p.status().message().find("degrees that keep every block on one rank: 1, 2, 4, 8"),
            std::string::npos)
      << p.status();
  EXPECT_TRUE(ShardingPlan::Create(c, Formats("int4-g64"), {3, 16}).ok());
  // The MLP's 22 groups at TP 4: 6, 6, 5 and 5 of them, each rank's columns whole groups.
  for (int rank = 0; rank < 4; ++rank) {
    p = ShardingPlan::Create(c, Formats("int4-g128"), {rank, 4});
    ASSERT_TRUE(p.ok()) << p.status();
    const int64_t groups = rank < 2 ? 6 : 5, first = rank * 5 + std::min(rank, 2);
    EXPECT_EQ(p->Slice(TensorRole::kDown), (TensorSlice{0, 1024, first * 128, groups * 128}));
    EXPECT_EQ(p->Slice(TensorRole::kUp), (TensorSlice{first * 128, groups * 128, 0, 1024}));
  }
}

// SmolLM2 at TP 9 (issue 40): 9 heads, one a rank; 3 KV heads, each copied to 3 ranks; the
// MLP's 48 Q4_1 blocks of 32 as 6 on ranks 0-2 and 5 on ranks 3-8, every row held once.
TEST(ShardingPlanTest, AnMlpWhoseBlocksDoNotDivideIsSplitUnevenlyOnBlockBoundaries) {
  int64_t next_row = 0;
  for (int rank = 0; rank < 9; ++rank) {
    absl::StatusOr<ShardingPlan> p = ShardingPlan::Create(SmolLm2Shapes(), Formats("q4_1"),
                                                          {rank, 9});
    ASSERT_TRUE(p.ok()) << p.status();
    const int64_t rows = rank < 3 ? 192 : 160;
    EXPECT_EQ(p->first_ffn_row(), next_row) << "rank " << rank;
    EXPECT_EQ(p->local_intermediate_size(), rows) << "rank " << rank;
    EXPECT_EQ(p->min_local_intermediate_size(), 160);
    EXPECT_EQ(p->ffn_unit(), 32);
    EXPECT_EQ(p->Slice(TensorRole::kGate), (TensorSlice{next_row, rows, 0, 576}));
    EXPECT_EQ(p->Slice(TensorRole::kDown), (TensorSlice{0, 576, next_row, rows}));
    EXPECT_EQ(p->num_local_heads(), 1);
    EXPECT_EQ(p->first_kv_head(), rank / 3);
    next_row += rows;
  }
  EXPECT_EQ(next_row, 1536);
}

TEST(ShardingPlanTest, ValidDegreesDivideHeadsKvHeadsAndTheFfn) {
  ModelSpec c = SmolLm2Shapes();
  EXPECT_EQ(ValidTpDegrees(c), (std::vector<int>{1, 3, 9}));  // 9: the MLP split unevenly
  c.num_heads = 128;
  c.num_kv_heads = 8;
  c.intermediate_size = 53248;
  EXPECT_EQ(ValidTpDegrees(c), (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128}));
  // 96 heads, 16 KV heads: 3, 6, 12 and 24 divide the heads but neither divide nor are
  // multiples of the KV heads.
  c.num_heads = 96;
  c.num_kv_heads = 16;
  c.intermediate_size = 12288;
  EXPECT_EQ(ValidTpDegrees(c), (std::vector<int>{1, 2, 4, 8, 16, 32, 48, 96}));
}

// Past the KV-head count each KV head is copied to the ranks whose query heads read it.
TEST(ShardingPlanTest, KvHeadsPastTheirCountAreCopiedToTheRanksThatReadThem) {
  ModelSpec c = SmolLm2Shapes();
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.intermediate_size = 1536;
  EXPECT_EQ(LocalKvHeads(c, 2), 1);
  EXPECT_EQ(KvHeadCopies(c, 2), 1);
  EXPECT_EQ(LocalKvHeads(c, 8), 1);
  EXPECT_EQ(KvHeadCopies(c, 8), 4);
  for (int rank = 0; rank < 8; ++rank) {
    absl::StatusOr<ShardingPlan> p = ShardingPlan::Create(c, Formats("bf16"), {rank, 8});
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->num_local_heads(), 1);
    EXPECT_EQ(p->first_head(), rank);
    EXPECT_EQ(p->num_local_kv_heads(), 1);
    // Query head h reads KV head h / (8 / 2): ranks 0-3 hold KV head 0, ranks 4-7 KV head 1.
    EXPECT_EQ(p->first_kv_head(), rank / 4);
    EXPECT_EQ(p->kv_head_copies(), 4);
    EXPECT_EQ(p->Slice(TensorRole::kK), (TensorSlice{rank / 4 * 64, 64, 0, c.hidden_size}));
    EXPECT_EQ(p->Slice(TensorRole::kVBias), (TensorSlice{rank / 4 * 64, 64, 0, 1}));
    EXPECT_EQ(p->KindOf(TensorRole::kV), ShardKind::kColumn);
    EXPECT_EQ(p->CopiesOf(TensorRole::kV), 4);
    EXPECT_EQ(p->CopiesOf(TensorRole::kQ), 1);
    EXPECT_EQ(p->CopiesOf(TensorRole::kAttnNorm), 8);
  }
  // At 4 ranks each KV head is on two, at 2 on one.
  EXPECT_EQ(ShardingPlan::Create(c, Formats("bf16"), {3, 4})->first_kv_head(), 1);
  EXPECT_EQ(ShardingPlan::Create(c, Formats("bf16"), {1, 2})->first_kv_head(), 1);
  EXPECT_EQ(ShardingPlan::Create(c, Formats("bf16"), {1, 2})->CopiesOf(TensorRole::kK), 1);
  // 6 ranks: neither divides nor is a multiple of 2 KV heads... and does not divide 8 heads.
  absl::StatusOr<ShardingPlan> six = ShardingPlan::Create(c, Formats("bf16"), {0, 6});
  EXPECT_EQ(six.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FitInt4GroupsTest, PlainInt4TakesTheLargestGroupThatFitsEveryRank) {
  // SmolLM2: inputs are 576 wide (1536 for down): 128 does not divide 576, 96 divides both; at
  // three ranks down's 512 columns per rank take 64.
  WeightFormats f = Formats("int4");
  EXPECT_EQ(f[TensorRole::kQ].group_size, 128);
  FitInt4Groups(SmolLm2Shapes(), 1, &f);
  EXPECT_EQ(f[TensorRole::kQ].group_size, 96);
  EXPECT_EQ(f[TensorRole::kDown].group_size, 96);
  WeightFormats three = Formats("int4");
  FitInt4Groups(SmolLm2Shapes(), 3, &three);
  EXPECT_EQ(three[TensorRole::kDown].group_size, 64);
  EXPECT_TRUE(ShardingPlan::Create(SmolLm2Shapes(), three, {0, 3}).ok());
  // 405B-like widths keep 128 at 8 ranks; an explicit group is never changed.
  ModelSpec big = SmolLm2Shapes();
  big.hidden_size = 16384;
  big.num_heads = 128;
  big.num_kv_heads = 8;
  big.head_dim = 128;
  big.intermediate_size = 53248;
  WeightFormats g = Formats("int4");
  FitInt4Groups(big, 8, &g);
  EXPECT_EQ(g[TensorRole::kO].group_size, 128);
  WeightFormats explicit128 = Formats("int4-g128");
  FitInt4Groups(SmolLm2Shapes(), 1, &explicit128);
  EXPECT_EQ(explicit128[TensorRole::kQ].group_size, 128);
}

// Every expert split as the dense MLP is (gate and up by rows, down by columns), the router
// whole on every rank; a model whose every layer is MoE has no dense MLP roles.
TEST(ShardingPlanTest, ExpertsSplitLikeTheDenseMlpAndTheRouterIsReplicated) {
  ModelSpec c = SmolLm2Shapes();
  c.num_layers = 4;
  c.moe.routing = {.score = RoutingScore::kSoftmax, .num_experts = 8, .top_k = 2,
                   .renormalize = true};
  c.moe.expert_intermediate_size = 96;
  c.layers.assign(4, LayerSpec{});
  for (LayerSpec& l : c.layers) l.moe = true;
  absl::StatusOr<ShardingPlan> plan = ShardingPlan::Create(c, Formats("bf16"), {1, 3});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->local_expert_intermediate_size(), 32);
  EXPECT_EQ(plan->Slice(TensorRole::kExpertGate), (TensorSlice{32, 32, 0, 576}));
  EXPECT_EQ(plan->Slice(TensorRole::kExpertUp), (TensorSlice{32, 32, 0, 576}));
  EXPECT_EQ(plan->Slice(TensorRole::kExpertDown), (TensorSlice{0, 576, 32, 32}));
  EXPECT_EQ(plan->Slice(TensorRole::kRouter), (TensorSlice{0, 8, 0, 576}));
  EXPECT_FALSE(HasRole(c, TensorRole::kGate));
  EXPECT_EQ(RoleTensorsInLayer(c, TensorRole::kExpertUp, 2), 8);
  EXPECT_EQ(RoleTensorsInLayer(c, TensorRole::kDown, 2), 0);
  EXPECT_EQ(RoleTensorCount(c, TensorRole::kRouter, 1, 3), 3);
  EXPECT_EQ(RoleTensorCount(c, TensorRole::kExpertDown, 0, 4), 32);
  // A first dense layer (DeepSeek-V3's first_k_dense_replace) brings the dense roles back.
  c.layers[0].moe = false;
  EXPECT_TRUE(HasRole(c, TensorRole::kGate));
  EXPECT_EQ(RoleTensorCount(c, TensorRole::kGate, 0, 4), 1);
  EXPECT_EQ(RoleTensorCount(c, TensorRole::kExpertGate, 0, 4), 24);
  // The experts' width must split too, and the error says so.
  c.moe.expert_intermediate_size = 100;
  const absl::Status s = ValidateTpDegree(c, 3);
  EXPECT_NE(s.message().find("tensor-parallel degree 3 does not divide "
                             "moe.expert_intermediate_size = 100"),
            std::string::npos)
      << s;
}

// Expert parallelism: rank r holds experts [r*E/W, (r+1)*E/W) whole, the shared expert whole,
// the router whole; attention and the dense MLP stay split. The experts' width need not divide
// the degree, their count must, and a dense model is refused.
TEST(ShardingPlanTest, ExpertParallelismPlacesWholeExpertsOnRanks) {
  ModelSpec c = SmolLm2Shapes();
  c.num_layers = 4;
  c.moe.routing = {.score = RoutingScore::kSoftmax, .num_experts = 8, .top_k = 2,
                   .renormalize = true};
  c.moe.expert_intermediate_size = 100;  // not a multiple of 3: fine when whole
  c.moe.shared_expert_intermediate_size = 50;
  c.layers.assign(4, LayerSpec{});
  for (LayerSpec& l : c.layers) l.moe = true;
  c.layers[0].moe = false;  // a dense first layer: its MLP is still split
  EXPECT_FALSE(ShardingPlan::Create(c, Formats("bf16"), {1, 3}).ok());  // 100 / 3 as TP
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.intermediate_size = 1536;
  c.head_dim = 72;
  absl::StatusOr<ShardingPlan> plan = ShardingPlan::Create(c, Formats("bf16"), {1, 4, true});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->expert_parallel());
  EXPECT_EQ(plan->first_local_expert(), 2);
  EXPECT_EQ(plan->num_local_experts(), 2);
  EXPECT_EQ(plan->ExpertOwner(0), 0);
  EXPECT_EQ(plan->ExpertOwner(3), 1);
  EXPECT_EQ(plan->ExpertOwner(7), 3);
  EXPECT_EQ(plan->local_expert_intermediate_size(), 100);
  EXPECT_EQ(plan->Slice(TensorRole::kExpertGate), (TensorSlice{0, 100, 0, 576}));
  EXPECT_EQ(plan->Slice(TensorRole::kExpertDown), (TensorSlice{0, 576, 0, 100}));
  EXPECT_EQ(plan->Slice(TensorRole::kSharedUp), (TensorSlice{0, 50, 0, 576}));
  EXPECT_EQ(plan->Slice(TensorRole::kSharedDown), (TensorSlice{0, 576, 0, 50}));
  EXPECT_EQ(plan->Slice(TensorRole::kGate), (TensorSlice{384, 384, 0, 576}));
  EXPECT_EQ(plan->Slice(TensorRole::kQ), (TensorSlice{2 * 72, 2 * 72, 0, 576}));
  EXPECT_EQ(plan->KindOf(TensorRole::kExpertUp), ShardKind::kExpert);
  EXPECT_EQ(plan->KindOf(TensorRole::kSharedGate), ShardKind::kReplicated);
  EXPECT_EQ(plan->KindOf(TensorRole::kDown), ShardKind::kRow);
  EXPECT_EQ(ShardKindName(ShardKind::kExpert), "expert");
  // Without it, every rank holds all 8, each a slice (here one of 4 of the 100... refused).
  absl::StatusOr<ShardingPlan> tp = ShardingPlan::Create(c, Formats("bf16"), {1, 4});
  EXPECT_FALSE(tp.ok());
  c.moe.expert_intermediate_size = 96;
  c.moe.shared_expert_intermediate_size = 48;
  tp = ShardingPlan::Create(c, Formats("bf16"), {1, 4});
  ASSERT_TRUE(tp.ok()) << tp.status();
  EXPECT_EQ(tp->first_local_expert(), 0);
  EXPECT_EQ(tp->num_local_experts(), 8);
  EXPECT_EQ(tp->KindOf(TensorRole::kExpertUp), ShardKind::kColumn);
  // 8 experts do not go evenly on 3 ranks (heads aside): the count is named.
  c.num_heads = c.num_kv_heads = 3;
  c.head_dim = 192;
  c.intermediate_size = 1536;
  const absl::Status three = ShardingPlan::Create(c, Formats("bf16"), {0, 3, true}).status();
  EXPECT_NE(three.message().find("does not divide moe.num_experts = 8"), std::string::npos)
      << three;
  // A dense model has no experts to place.
  const absl::Status dense =
      ShardingPlan::Create(SmolLm2Shapes(), Formats("bf16"), {0, 3, true}).status();
  EXPECT_NE(dense.message().find("expert parallelism needs a mixture-of-experts model"),
            std::string::npos)
      << dense;
}

// Multi-head latent attention (DeepSeek-V3 at TP 8): the query's and the up-projections' rows
// go with their heads, o's columns with their heads' values; q_a and kv_a are replicated; the
// latent cache is one entry of 512 + 64 that every rank holds whole.
TEST(ShardingPlanTest, LatentAttentionSplitsByHeadsAndKeepsTheLatentWhole) {
  const ModelSpec v3 = *ModelSpecPreset("deepseek-v3");
  const absl::StatusOr<ShardingPlan> p = ShardingPlan::Create(v3, Formats("bf16"), {3, 8});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->num_local_heads(), 16);
  EXPECT_EQ(p->Slice(TensorRole::kQB), (TensorSlice{3 * 16 * 192, 16 * 192, 0, 1536}));
  EXPECT_EQ(p->Slice(TensorRole::kKvB), (TensorSlice{3 * 16 * 256, 16 * 256, 0, 512}));
  EXPECT_EQ(p->Slice(TensorRole::kKB), (TensorSlice{3 * 16 * 512, 16 * 512, 0, 128}));
  EXPECT_EQ(p->Slice(TensorRole::kVB), (TensorSlice{3 * 16 * 128, 16 * 128, 0, 512}));
  EXPECT_EQ(p->Slice(TensorRole::kO), (TensorSlice{0, 7168, 3 * 16 * 128, 16 * 128}));
  EXPECT_EQ(p->Slice(TensorRole::kQA), (TensorSlice{0, 1536, 0, 7168}));
  EXPECT_EQ(p->Slice(TensorRole::kKvA), (TensorSlice{0, 576, 0, 7168}));
  EXPECT_EQ(p->KindOf(TensorRole::kKvA), ShardKind::kReplicated);
  EXPECT_FALSE(HasRole(v3, TensorRole::kQ));
  EXPECT_FALSE(HasRole(v3, TensorRole::kK));
  EXPECT_FALSE(HasRole(v3, TensorRole::kV));
  const KvEntry entry = KvEntryOf(v3, 8);
  EXPECT_EQ(entry.heads, 1);
  EXPECT_EQ(entry.dim, 576);
  EXPECT_EQ(entry.pools, 1);
  // 128 heads split whole; the 128 "KV heads" are no constraint (there is one latent).
  EXPECT_EQ(ValidTpDegrees(v3), (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128}));
  const absl::Status three = ValidateTpDegree(v3, 3);
  EXPECT_EQ(three.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(three.message().find("does not divide num_heads = 128"), std::string::npos) << three;
}

// --attention_dp (DeepSeek-V3 on 8 ranks): every rank holds the whole attention (every head,
// q_b, kv_b, o whole), so the heads impose no degree; the dense MLP stays split, the experts
// whole with expert parallelism, and the latent cache entry is the same.
TEST(ShardingPlanTest, DataParallelAttentionHoldsTheWholeAttentionOnEveryRank) {
  const ModelSpec v3 = *ModelSpecPreset("deepseek-v3");
  const absl::StatusOr<ShardingPlan> p =
      ShardingPlan::Create(v3, Formats("bf16"), {3, 8, /*expert_parallel=*/true,
                                                 /*attention_dp=*/true});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->attention_dp());
  EXPECT_EQ(p->attention_degree(), 1);
  EXPECT_EQ(p->num_local_heads(), 128);
  EXPECT_EQ(p->first_head(), 0);
  EXPECT_EQ(p->Slice(TensorRole::kQB), (TensorSlice{0, 128 * 192, 0, 1536}));
  EXPECT_EQ(p->Slice(TensorRole::kKB), (TensorSlice{0, 128 * 512, 0, 128}));
  EXPECT_EQ(p->Slice(TensorRole::kO), (TensorSlice{0, 7168, 0, 128 * 128}));
  EXPECT_EQ(p->KindOf(TensorRole::kO), ShardKind::kReplicated);
  EXPECT_EQ(p->KindOf(TensorRole::kQB), ShardKind::kReplicated);
  EXPECT_EQ(p->CopiesOf(TensorRole::kKvB), 8);
  EXPECT_EQ(p->KindOf(TensorRole::kDown), ShardKind::kRow);  // the dense layers' MLP: split
  EXPECT_EQ(p->Slice(TensorRole::kGate), (TensorSlice{3 * 2304, 2304, 0, 7168}));
  EXPECT_EQ(p->KindOf(TensorRole::kExpertUp), ShardKind::kExpert);
  EXPECT_EQ(p->num_local_experts(), 32);
  // A degree the heads would refuse: 3 does not divide 128 heads, only the MLP and experts
  // matter (18432 / 3 yes, 256 experts / 3 no: named).
  const absl::Status three = ValidateTpDegree(v3, 3, /*expert_parallel=*/true, true);
  EXPECT_NE(three.message().find("does not divide moe.num_experts = 256"), std::string::npos)
      << three;
  EXPECT_EQ(three.message().find("num_heads = 128 or"), std::string::npos) << three;
  EXPECT_TRUE(ValidateTpDegree(v3, 3, /*expert_parallel=*/false, true).ok() ==
              (v3.moe.expert_intermediate_size % 3 == 0 && v3.intermediate_size % 3 == 0));
  // A GQA model's KV heads are whole on every rank too: the cache entry is every KV head's.
  ModelSpec gqa = SmolLm2Shapes();
  const absl::StatusOr<ShardingPlan> g = ShardingPlan::Create(gqa, Formats("bf16"),
                                                              {1, 3, false, true});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->num_local_kv_heads(), gqa.num_kv_heads);
  EXPECT_EQ(g->first_kv_head(), 0);
  EXPECT_EQ(KvEntryOf(gqa, g->attention_degree()).heads, gqa.num_kv_heads);
}


// Pipeline stages hold contiguous, equal runs of layers; the first embeds, the last samples
// (its rank 0); a stage count that does not divide the layers, or a stage outside it, is refused.
TEST(ShardingPlanTest, PipelineStagesHoldContiguousLayers) {
  const ModelSpec c = SmolLm2Shapes();  // 30 layers
  for (int stage = 0; stage < 3; ++stage) {
    const ShardingPlan p = *ShardingPlan::Create(c, Formats("q4_1"), {1, 3, false, false, stage, 3});
    EXPECT_EQ(p.first_layer(), 10 * stage);
    EXPECT_EQ(p.num_local_layers(), 10);
    EXPECT_EQ(p.first_stage(), stage == 0);
    EXPECT_EQ(p.last_stage(), stage == 2);
    EXPECT_FALSE(p.samples());  // rank 1
    EXPECT_EQ(p.local_intermediate_size(), 512);  // the stage's TP split is unchanged
  }
  EXPECT_TRUE(ShardingPlan::Create(c, Formats("q4_1"), {0, 3, false, false, 2, 3})->samples());
  EXPECT_FALSE(ShardingPlan::Create(c, Formats("q4_1"), {0, 3, false, false, 1, 3})->samples());
  EXPECT_EQ(ShardingPlan::Create(c, Formats("q4_1"), {0, 1, false, false, 0, 4}).status().message(),
            "pipeline stages = 4 must be >= 1 and divide num_layers = 30");
  EXPECT_EQ(ShardingPlan::Create(c, Formats("q4_1"), {0, 1, false, false, 2, 2}).status().message(),
            "stage = 2 is outside [0, 2)");
  EXPECT_EQ(StageLayersOf(126, 2, 1).first, 63);
}

}  // namespace
}  // namespace tpserve
