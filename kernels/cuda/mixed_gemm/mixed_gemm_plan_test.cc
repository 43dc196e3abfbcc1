// Which weights and batches the mixed GEMM takes, and its tile and split-K plan.
#include "gtest/gtest.h"
#include "kernels/cuda/mixed_gemm/mixed_gemm.h"

namespace tpserve::cuda {
namespace {

const TensorFormat kInt4G128 = TensorFormat::Int4(128);
const TensorFormat kFp8Channel = TensorFormat::Of(FormatKind::kFp8PerChannel);

TEST(MixedGemmTakesWeight, Int4GroupsOfWholeKTilesAndRowsOfWholeAtoms) {
  EXPECT_TRUE(MixedGemmTakesWeight(kInt4G128, 4096, 4096));
  EXPECT_TRUE(MixedGemmTakesWeight(TensorFormat::Int4(64), 1024, 4096));
  EXPECT_TRUE(MixedGemmTakesWeight(TensorFormat::Int4(128, /*act_order=*/true), 4096, 14336));
  // Library gap: a group of 32 is shorter than the collective's 64-column K tile.
  EXPECT_FALSE(MixedGemmTakesWeight(TensorFormat::Int4(32), 4096, 4096));
  EXPECT_FALSE(MixedGemmTakesWeight(TensorFormat::Int4(96), 4096, 4032));
  // Rows not a whole number of 16-row atoms (the parity suite's n = 33 and 40).
  EXPECT_FALSE(MixedGemmTakesWeight(kInt4G128, 33, 256));
  EXPECT_FALSE(MixedGemmTakesWeight(kInt4G128, 40, 256));
  EXPECT_FALSE(MixedGemmTakesWeight(kInt4G128, 0, 256));
}

TEST(MixedGemmTakesWeight, Fp8KindsWithWholeScaleGroupsOnly) {
  for (FormatKind kind :
       {FormatKind::kF8E4M3, FormatKind::kFp8PerChannel, FormatKind::kFp8Block128}) {
    EXPECT_TRUE(MixedGemmTakesWeight(TensorFormat::Of(kind), 4096, 4096));
    EXPECT_FALSE(MixedGemmTakesWeight(TensorFormat::Of(kind), 4096, 4032));  // partial tile
  }
  for (FormatKind kind : {FormatKind::kBF16, FormatKind::kF16, FormatKind::kF32, FormatKind::kQ4_0,
                          FormatKind::kQ4_K}) {
    EXPECT_FALSE(MixedGemmTakesWeight(TensorFormat::Of(kind), 4096, 4096));
  }
}

TEST(MixedGemmSupports, Fp8OnlyForDecodeBatchesInt4ForAll) {
  EXPECT_TRUE(MixedGemmSupports(kFp8Channel, 1, 4096, 4096));
  EXPECT_TRUE(MixedGemmSupports(kFp8Channel, 16, 4096, 4096));
  EXPECT_FALSE(MixedGemmSupports(kFp8Channel, 17, 4096, 4096));
  for (int64_t m : {1, 16, 17, 2048}) EXPECT_TRUE(MixedGemmSupports(kInt4G128, m, 4096, 4096));
  EXPECT_FALSE(MixedGemmSupports(kInt4G128, 0, 4096, 4096));
}

TEST(PlanMixedGemm, DecodeTileUpTo16TokensLargeTileAbove) {
  EXPECT_EQ(PlanMixedGemm(kInt4G128, 16, 4096, 4096, 132).tile, MixedGemmTile::kDecode);
  EXPECT_EQ(PlanMixedGemm(kInt4G128, 17, 4096, 4096, 132).tile, MixedGemmTile::kLarge);
  EXPECT_EQ(PlanMixedGemm(kInt4G128, 1, 4096, 4096, 132).kind, MixedGemmKind::kInt4);
  EXPECT_EQ(PlanMixedGemm(kFp8Channel, 1, 4096, 4096, 132).kind, MixedGemmKind::kFp8);
}

// Decode matrices have fewer 128-row tiles than SMs: k is split until every SM has work.
TEST(PlanMixedGemm, SplitsKUntilTheSmsAreBusy) {
  // n = 4096: 32 tiles on 132 SMs -> 5 splits of 64 K tiles.
  EXPECT_EQ(PlanMixedGemm(kInt4G128, 1, 4096, 4096, 132).splits, 5);
  // n = 14336: 112 tiles -> 2 splits.
  EXPECT_EQ(PlanMixedGemm(kInt4G128, 1, 14336, 4096, 132).splits, 2);
  // n = 1024 (k/v under TP): 8 tiles -> 16 (the cap), each still 4 K tiles of k = 4096.
  EXPECT_EQ(PlanMixedGemm(kInt4G128, 1, 1024, 4096, 132).splits, 16);
  // Short k keeps at least 4 K tiles per split.
  EXPECT_EQ(PlanMixedGemm(kInt4G128, 1, 1024, 512, 132).splits, 2);
  EXPECT_EQ(PlanMixedGemm(kInt4G128, 1, 1024, 128, 132).splits, 1);
  // Prefill: 32 x 16 tiles fill the GPU alone.
  EXPECT_EQ(PlanMixedGemm(kInt4G128, 2048, 4096, 4096, 132).splits, 1);
}

// Every batch of 1..16 tokens runs the same tile and the same K split, so a token's floats
// do not depend on how many tokens share the decode step.
TEST(PlanMixedGemm, IsTheSameForEveryDecodeBatchSize) {
  const MixedGemmPlan one = PlanMixedGemm(kInt4G128, 1, 4096, 4096, 132);
  for (int64_t m = 2; m <= 16; ++m) {
    EXPECT_EQ(PlanMixedGemm(kInt4G128, m, 4096, 4096, 132), one) << "m " << m;
  }
}

// Deterministic mode: one tile and split count for every m, fp8 included (exact bf16
// activations at every batch size), and for every n: a column-parallel rank's slice of the
// rows sums each row as the whole matrix does.
TEST(PlanMixedGemm, BatchInvariantPlansIgnoreTheBatchSizeAndTheRows) {
  EXPECT_TRUE(MixedGemmSupports(kFp8Channel, 2048, 4096, 4096, /*batch_invariant=*/true));
  for (const TensorFormat& f : {kInt4G128, kFp8Channel}) {
    const MixedGemmPlan one = PlanMixedGemm(f, 1, 4096, 4096, 132, true);
    EXPECT_EQ(one.tile, MixedGemmTile::kDecode);
    EXPECT_EQ(one.splits, 4);
    for (int64_t m : {16, 17, 64, 2048}) {
      EXPECT_EQ(PlanMixedGemm(f, m, 4096, 4096, 132, true), one) << "m " << m;
    }
    // The Q rows of an 8B rank at TP 2, 4, 8, its K/V heads, gate/up; another GPU's SMs.
    for (int64_t n : {2048, 1024, 512, 128, 14336}) {
      EXPECT_EQ(PlanMixedGemm(f, 7, n, 4096, 132, true), one) << "n " << n;
    }
    EXPECT_EQ(PlanMixedGemm(f, 7, 4096, 4096, 114, true), one) << "114 SMs";
  }
  // Without the flag the same rows split by the SMs they leave idle (the control).
  EXPECT_NE(PlanMixedGemm(kInt4G128, 1, 512, 4096, 132).splits,
            PlanMixedGemm(kInt4G128, 1, 4096, 4096, 132).splits);
  // Short k: each split keeps 4 K tiles (k = 512: 8 tiles, 2 splits; k = 128: one).
  EXPECT_EQ(PlanMixedGemm(kInt4G128, 1, 4096, 512, 132, true).splits, 2);
  EXPECT_EQ(PlanMixedGemm(kInt4G128, 1, 4096, 128, 132, true).splits, 1);
}

// What the kernels' TMA descriptors need, refused on the host before any launch.
TEST(MixedGemmCallFits, WantsAlignedOperandsAndStrides) {
  alignas(16) static uint8_t buffer[4096];
  MixedGemmWeight w;
  w.kind = MixedGemmKind::kInt4;
  w.codes = buffer;
  w.scales = reinterpret_cast<const float*>(buffer);
  w.offsets = reinterpret_cast<const float*>(buffer);
  w.group_size = 128;
  w.n = 256;
  w.k = 512;
  const MixedGemmPlan plan = PlanMixedGemm(kInt4G128, 4, 256, 512, 132);
  const MixedGemmCall ok{buffer, 1024, 4, 2, buffer, false, nullptr, 0, 132};
  EXPECT_TRUE(MixedGemmCallFits(w, ok, plan));
  MixedGemmCall c = ok;
  c.x = buffer + 2;  // a bf16 view into the middle of a row
  EXPECT_FALSE(MixedGemmCallFits(w, c, plan));
  c = ok;
  c.x_row_elems = 1020;  // rows not 16-byte multiples
  EXPECT_FALSE(MixedGemmCallFits(w, c, plan));
  c = ok;
  c.x_row_elems = 512;  // narrower than two chunks
  EXPECT_FALSE(MixedGemmCallFits(w, c, plan));
  c = ok;
  c.y = buffer + 4;
  EXPECT_FALSE(MixedGemmCallFits(w, c, plan));
  MixedGemmWeight no_offsets = w;
  no_offsets.offsets = nullptr;
  EXPECT_FALSE(MixedGemmCallFits(no_offsets, ok, plan));
  // An fp8 weight with an int4 plan, and fp8 rows that are not 16-byte strides.
  MixedGemmWeight fp8 = w;
  fp8.kind = MixedGemmKind::kFp8;
  EXPECT_FALSE(MixedGemmCallFits(fp8, ok, plan));
  const MixedGemmPlan fp8_plan = PlanMixedGemm(kFp8Channel, 4, 256, 512, 132);
  fp8.row_bytes = 1024;
  EXPECT_TRUE(MixedGemmCallFits(fp8, ok, fp8_plan));
  fp8.row_bytes = 1032 - 4;
  EXPECT_FALSE(MixedGemmCallFits(fp8, ok, fp8_plan));
}

}  // namespace
}  // namespace tpserve::cuda
