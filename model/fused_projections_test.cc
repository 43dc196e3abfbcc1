// The fused layouts of real shapes: Llama-3.1-405B at TP 8 in fp8 128x128 tiles (q/k/v and
// gate/up each one GEMM, the q|k and k|v boundaries on tile edges), SmolLM2-135M at TP 3 (9
// heads, 3 KV heads of 64: 192 + 64 + 64 rows), and layers that cannot fuse, each with its
// reason: SmolLM2's q (576 rows at TP 1) ending inside a 128-row fp8 tile, and a Q4_K_M-style
// layer whose v is held in another format. On the code before this file there was no fused
// layout at all: every MatMulMany was one GEMM per matrix (the CUDA backend's default).
#include "model/fused_projections.h"

#include <string>

#include "gtest/gtest.h"
#include "kernels/cuda/weight_placement.h"

namespace tpserve {
namespace {

ModelSpec Shape(int64_t hidden, int64_t ffn, int64_t layers, int64_t heads, int64_t kv_heads,
                int64_t head_dim) {
  ModelSpec c;
  c.name = "shape";
  c.vocab_size = 49152;
  c.hidden_size = hidden;
  c.intermediate_size = ffn;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.max_context_tokens = 8192;
  return c;
}

ModelSpec Llama405B() { return Shape(16384, 53248, 126, 128, 8, 128); }
ModelSpec SmolLm2() { return Shape(576, 1536, 30, 9, 3, 64); }

ShardingPlan Plan(const ModelSpec& c, const WeightFormats& f, int rank, int world) {
  absl::StatusOr<ShardingPlan> p = ShardingPlan::Create(c, f, {rank, world});
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

const Backend::ProjectionFusion kCuda = cuda::CudaProjectionFusion();

TEST(FusedLayoutFor, Llama405BAtTp8InFp8TilesFusesBothGroupsOnTileEdges) {
  const ModelSpec c = Llama405B();
  const WeightFormats f = *WeightFormatsPreset("fp8-block");
  for (int rank : {0, 5, 7}) {
    const ShardingPlan p = Plan(c, f, rank, 8);
    const FusedLayout qkv = FusedLayoutFor(c, p, f, 0, FusedGroup::kQkv, kCuda);
    EXPECT_TRUE(qkv.fused) << qkv.why_not;
    EXPECT_FALSE(qkv.fallback);
    // 16 query heads and 1 KV head of 128 per rank: [2304, 16384], k at 2048, v at 2176.
    EXPECT_EQ(qkv.rows, 2304);
    EXPECT_EQ(qkv.cols, 16384);
    ASSERT_EQ(qkv.parts.size(), 3u);
    EXPECT_EQ(qkv.parts[0], (FusedPart{TensorRole::kQ, 0, 2048}));
    EXPECT_EQ(qkv.parts[1], (FusedPart{TensorRole::kK, 2048, 128}));
    EXPECT_EQ(qkv.parts[2], (FusedPart{TensorRole::kV, 2176, 128}));
    const FusedLayout gate_up = FusedLayoutFor(c, p, f, 125, FusedGroup::kGateUp, kCuda);
    EXPECT_TRUE(gate_up.fused) << gate_up.why_not;
    EXPECT_EQ(gate_up.rows, 13312);  // 53248 / 8 = 6656 = 52 tiles of 128, twice
    ASSERT_EQ(gate_up.parts.size(), 2u);
    EXPECT_EQ(gate_up.parts[0], (FusedPart{TensorRole::kGate, 0, 6656}));
    EXPECT_EQ(gate_up.parts[1], (FusedPart{TensorRole::kUp, 6656, 6656}));
  }
}

TEST(FusedLayoutFor, SmolLm2AtTp3FusesItsOneKvHeadBesideThreeQueryHeads) {
  const ModelSpec c = SmolLm2();
  for (const char* preset : {"bf16", "int4-g64"}) {
    SCOPED_TRACE(preset);
    const WeightFormats f = *WeightFormatsPreset(preset);
    const ShardingPlan p = Plan(c, f, 2, 3);
    const FusedLayout qkv = FusedLayoutFor(c, p, f, 0, FusedGroup::kQkv, kCuda);
    EXPECT_TRUE(qkv.fused) << qkv.why_not;
    EXPECT_EQ(qkv.rows, 320);
    EXPECT_EQ(qkv.cols, 576);
    EXPECT_EQ(qkv.parts[1], (FusedPart{TensorRole::kK, 192, 64}));
    EXPECT_EQ(qkv.parts[2], (FusedPart{TensorRole::kV, 256, 64}));
    const FusedLayout gate_up = FusedLayoutFor(c, p, f, 0, FusedGroup::kGateUp, kCuda);
    EXPECT_TRUE(gate_up.fused) << gate_up.why_not;
    EXPECT_EQ(gate_up.parts[1], (FusedPart{TensorRole::kUp, 512, 512}));
  }
  // fp8 tiles cannot even be sharded at TP 3 (192 query rows per rank cut a tile).
  EXPECT_FALSE(ShardingPlan::Create(c, *WeightFormatsPreset("fp8-block"), {0, 3}).ok());
}

TEST(FusedLayoutFor, SmolLm2InFp8TilesKeepsQkvApartAndSaysWhy) {
  const ModelSpec c = SmolLm2();
  const WeightFormats f = *WeightFormatsPreset("fp8-block");
  const ShardingPlan p = Plan(c, f, 0, 1);
  const FusedLayout qkv = FusedLayoutFor(c, p, f, 0, FusedGroup::kQkv, kCuda);
  EXPECT_FALSE(qkv.fused);
  EXPECT_TRUE(qkv.fallback);
  EXPECT_EQ(qkv.why_not,
            "q's 576 rows end inside a 128-row scale tile of fp8-block, which k's first rows "
            "would share");
  // Its MLP's 1536 rows are 12 whole tiles: gate/up still fuse.
  EXPECT_TRUE(FusedLayoutFor(c, p, f, 0, FusedGroup::kGateUp, kCuda).fused);
}

TEST(FusedLayoutFor, ALayerWhoseVIsHeldApartFallsBackOncePerReason) {
  const ModelSpec c = SmolLm2();
  WeightFormats f = *WeightFormatsPreset("q4_0");
  for (int64_t layer : {3, 7}) {
    f.layer_overrides[{TensorRole::kV, layer}] = TensorFormat::Of(FormatKind::kQ8_0);
  }
  const ShardingPlan p = Plan(c, f, 0, 1);
  EXPECT_TRUE(FusedLayoutFor(c, p, f, 0, FusedGroup::kQkv, kCuda).fused);
  FusionFallbackLog log;
  const FusedLayout l3 = FusedLayoutFor(c, p, f, 3, FusedGroup::kQkv, kCuda);
  EXPECT_FALSE(l3.fused);
  EXPECT_EQ(log.Add(l3, 3, "cuda:0"),
            "q/k/v of layer 3 stays 3 GEMMs (cuda:0): v is held as q8_0, q as q4_0");
  EXPECT_EQ(log.Add(FusedLayoutFor(c, p, f, 7, FusedGroup::kQkv, kCuda), 7, "cuda:0"),
            std::nullopt);  // said once
}

TEST(FusedLayoutFor, ABackendThatDoesNotFuseGetsPartsButNoFallback) {
  const ModelSpec c = SmolLm2();
  const WeightFormats f = *WeightFormatsPreset("bf16");
  const FusedLayout l =
      FusedLayoutFor(c, Plan(c, f, 0, 1), f, 0, FusedGroup::kQkv, Backend::ProjectionFusion{});
  EXPECT_FALSE(l.fused);
  EXPECT_FALSE(l.fallback);
  EXPECT_EQ(l.parts.size(), 3u);
  FusionFallbackLog log;
  EXPECT_EQ(log.Add(l, 0, "cpu"), std::nullopt);
}

TEST(FusedLayoutFor, TheBackendsRowTileMustHoldForEveryPart) {
  // Heads of 8: 2 query heads and 1 KV head per rank give 16 + 8 + 8 rows; 8 is off the CUDA
  // backend's 16-row tile (the mixed GEMM's n % 16), so the 32-row stack could be prepared
  // while its 8-row parts would not.
  const ModelSpec c = Shape(64, 128, 2, 8, 4, 8);
  const WeightFormats f = *WeightFormatsPreset("bf16");
  const FusedLayout l = FusedLayoutFor(c, Plan(c, f, 0, 4), f, 0, FusedGroup::kQkv, kCuda);
  EXPECT_FALSE(l.fused);
  EXPECT_EQ(l.why_not,
            "k's 8 rows are not a multiple of the backend's 16-row tile, so the stack could be "
            "held in another form than its parts");
}

}  // namespace
}  // namespace tpserve
