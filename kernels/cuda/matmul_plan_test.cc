// The CUDA MatMul's path choice (matmul_plan.h) over every weight format the backend takes,
// batch sizes 1..64 and every combination of operand alignment: decode-sized batches never
// quantize activations (before this rule was a function, an fp8 batch of m <= 16 whose x was
// not 16-byte aligned fell through to the fp8-activation GEMM), larger fp8 batches take the
// scaled cuBLASLt GEMMs, and deterministic mode has one path per format.
#include "kernels/cuda/matmul_plan.h"

#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/testing/parity_bounds.h"

namespace tpserve::cuda {
namespace {

static_assert(kExactActivationRowsMax == parity::kFp8QuantizedRowsAbove,
              "the CUDA backend quantizes exactly the batches the parity bounds allow");

std::vector<TensorFormat> Formats() {
  return {TensorFormat::Of(FormatKind::kF32),
          TensorFormat::Of(FormatKind::kF16),
          TensorFormat::Of(FormatKind::kBF16),
          TensorFormat::Of(FormatKind::kF8E4M3),
          TensorFormat::Of(FormatKind::kFp8PerChannel),
          TensorFormat::Of(FormatKind::kFp8Block128),
          TensorFormat::Int4(32),
          TensorFormat::Int4(128)};
}

bool IsFp8(const TensorFormat& f) {
  return f.kind == FormatKind::kF8E4M3 || f.kind == FormatKind::kFp8PerChannel ||
         f.kind == FormatKind::kFp8Block128;
}

std::vector<OperandFacts> AllFacts() {
  std::vector<OperandFacts> all;
  for (bool x_aligned : {true, false}) {
    for (bool w_aligned : {true, false}) {
      for (bool refused : {false, true}) all.push_back({x_aligned, w_aligned, refused});
    }
  }
  return all;
}

std::string Describe(const TensorFormat& f, int64_t m, int64_t n, int64_t k,
                     const OperandFacts& facts) {
  return TensorFormatName(f) + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
         " k=" + std::to_string(k) + " x_aligned=" + std::to_string(facts.x_aligned) +
         " w_aligned=" + std::to_string(facts.w_aligned) +
         " refused=" + std::to_string(facts.fp8_gemm_refused);
}

// (n, k) pairs: aligned model shapes and the parity suite's odd ones (k = 72: not whole
// 16-column steps; n = 33: not a multiple of 16).
const std::pair<int64_t, int64_t> kShapes[] = {{4096, 4096}, {96, 256},   {33, 512},
                                               {40, 72},     {272, 1024}, {1024, 384}};

TEST(MatMulPlanTest, DecodeSizedBatchesNeverQuantizeActivations) {
  int checked = 0;
  for (const TensorFormat& f : Formats()) {
    for (const auto& [n, k] : kShapes) {
      if (f.kind == FormatKind::kInt4Group && k % f.group_size != 0) continue;
      for (const OperandFacts& facts : AllFacts()) {
        for (int64_t m = 1; m <= kExactActivationRowsMax; ++m) {
          const MatMulPlan plan = ChooseMatMulPath(f, m, n, k, facts, false);
          EXPECT_FALSE(QuantizesActivations(plan.path))
              << Describe(f, m, n, k, facts) << " -> " << MatMulPathName(plan.path);
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 3000);
}

TEST(MatMulPlanTest, UnalignedActivationsAreCopiedForTheGemv) {
  const OperandFacts unaligned_x{.x_aligned = false, .w_aligned = true};
  for (const TensorFormat& f :
       {TensorFormat::Of(FormatKind::kF8E4M3), TensorFormat::Of(FormatKind::kFp8PerChannel),
        TensorFormat::Of(FormatKind::kFp8Block128), TensorFormat::Int4(128)}) {
    for (int64_t m : {1, 7, 16}) {
      EXPECT_EQ(ChooseMatMulPath(f, m, 4096, 4096, unaligned_x, false),
                (MatMulPlan{MatMulPath::kGemv, /*stage_x=*/true}))
          << TensorFormatName(f) << " m=" << m;
    }
  }
  // A weight the GEMV cannot stream (k = 72: not whole 16-column steps) is decoded to bf16:
  // still exact activations.
  EXPECT_EQ(ChooseMatMulPath(TensorFormat::Of(FormatKind::kFp8PerChannel), 7, 40, 72,
                             OperandFacts{}, false),
            (MatMulPlan{MatMulPath::kDecodedGemm, false}));
}

TEST(MatMulPlanTest, LargerFp8BatchesTakeTheScaledCublasLtGemm) {
  for (const TensorFormat& f : Formats()) {
    if (!IsFp8(f)) continue;
    const MatMulPath scaled = f.kind == FormatKind::kFp8Block128 ? MatMulPath::kFp8BlockScaledGemm
                                                                 : MatMulPath::kFp8RowScaledGemm;
    for (const auto& [n, k] : kShapes) {
      for (const OperandFacts& facts : AllFacts()) {
        const bool takes = facts.w_aligned && n % 16 == 0 && k % 16 == 0 && !facts.fp8_gemm_refused;
        for (int64_t m = kExactActivationRowsMax + 1; m <= 64; ++m) {
          const MatMulPlan plan = ChooseMatMulPath(f, m, n, k, facts, false);
          // x's alignment does not matter: it is quantized into aligned scratch.
          EXPECT_EQ(plan, (MatMulPlan{takes ? scaled : MatMulPath::kDecodedGemm, false}))
              << Describe(f, m, n, k, facts) << " -> " << MatMulPathName(plan.path);
        }
      }
    }
  }
}

TEST(MatMulPlanTest, FloatWeightsAlwaysTakeCublasLt) {
  for (int64_t m : {1, 16, 17, 64}) {
    for (const OperandFacts& facts : AllFacts()) {
      for (bool deterministic : {false, true}) {
        EXPECT_EQ(
            ChooseMatMulPath(TensorFormat::Of(FormatKind::kBF16), m, 33, 72, facts, deterministic)
                .path,
            MatMulPath::kBf16Gemm);
        EXPECT_EQ(
            ChooseMatMulPath(TensorFormat::Of(FormatKind::kF16), m, 33, 72, facts, deterministic)
                .path,
            MatMulPath::kWideGemm);
      }
    }
  }
}

TEST(MatMulPlanTest, Int4AboveDecodeSizeIsDecodedUntilAMixedInputGemm) {
  EXPECT_EQ(ChooseMatMulPath(TensorFormat::Int4(128), 17, 4096, 4096, OperandFacts{}, false).path,
            MatMulPath::kDecodedGemm);
  EXPECT_EQ(ChooseMatMulPath(TensorFormat::Int4(128), 16, 4096, 4096, OperandFacts{}, false).path,
            MatMulPath::kGemv);
}

TEST(MatMulPlanTest, DeterministicModeHasOnePathPerFormatForEveryBatch) {
  for (const TensorFormat& f : Formats()) {
    for (const auto& [n, k] : kShapes) {
      if (f.kind == FormatKind::kInt4Group && k % f.group_size != 0) continue;
      for (const OperandFacts& facts : AllFacts()) {
        const MatMulPlan first = ChooseMatMulPath(f, 1, n, k, facts, true);
        EXPECT_FALSE(QuantizesActivations(first.path)) << Describe(f, 1, n, k, facts);
        for (int64_t m = 2; m <= 64; ++m) {
          EXPECT_EQ(ChooseMatMulPath(f, m, n, k, facts, true), first)
              << Describe(f, m, n, k, facts);
        }
      }
    }
  }
  // fp8 / int4 weights the GEMV streams: its 16-row slices for every batch.
  EXPECT_EQ(ChooseMatMulPath(TensorFormat::Of(FormatKind::kFp8Block128), 64, 4096, 4096,
                             OperandFacts{}, true),
            (MatMulPlan{MatMulPath::kGemvRowSlices, false}));
}

TEST(MatMulPlanTest, ChunkedProductsUseOneGemvOnlyForWholeSteps) {
  const OperandFacts aligned;
  const TensorFormat fp8 = TensorFormat::Of(FormatKind::kFp8PerChannel);
  const TensorFormat block = TensorFormat::Of(FormatKind::kFp8Block128);
  // Decode size, chunks of whole steps: one launch.
  EXPECT_EQ(ChooseChunkedPath(fp8, 7, 48, 768, 3, aligned, false).path, MatMulPath::kGemv);
  // Chunks of 64 columns cut 128-column tiles: each chunk on its own.
  EXPECT_EQ(ChooseChunkedPath(block, 7, 48, 768, 12, aligned, false).path,
            MatMulPath::kChunkByChunk);
  // int4 chunks must hold whole groups.
  EXPECT_EQ(ChooseChunkedPath(TensorFormat::Int4(128), 1, 48, 768, 12, aligned, false).path,
            MatMulPath::kChunkByChunk);
  EXPECT_EQ(ChooseChunkedPath(TensorFormat::Int4(128), 1, 48, 768, 6, aligned, false).path,
            MatMulPath::kGemv);
  // Larger batches: chunk by chunk (each through the scaled GEMM), or in deterministic mode
  // one GEMV over 16-row slices.
  EXPECT_EQ(ChooseChunkedPath(fp8, 33, 48, 768, 3, aligned, false).path, MatMulPath::kChunkByChunk);
  EXPECT_EQ(ChooseChunkedPath(fp8, 33, 48, 768, 3, aligned, true).path, MatMulPath::kGemvRowSlices);
  // bf16 always chunk by chunk.
  EXPECT_EQ(
      ChooseChunkedPath(TensorFormat::Of(FormatKind::kBF16), 1, 48, 768, 3, aligned, true).path,
      MatMulPath::kChunkByChunk);
}

TEST(MatMulPlanTest, PathNamesAreDistinct) {
  std::set<std::string> names;
  for (MatMulPath p :
       {MatMulPath::kBf16Gemm, MatMulPath::kWideGemm, MatMulPath::kGemv, MatMulPath::kGemvRowSlices,
        MatMulPath::kFp8RowScaledGemm, MatMulPath::kFp8BlockScaledGemm, MatMulPath::kDecodedGemm,
        MatMulPath::kChunkByChunk}) {
    EXPECT_TRUE(names.insert(std::string(MatMulPathName(p))).second) << MatMulPathName(p);
  }
}

}  // namespace
}  // namespace tpserve::cuda
