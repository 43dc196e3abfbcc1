// The CUDA MatMul's path choice (matmul_plan.h) over every weight format the backend takes,
// batch sizes 1..64, every combination of operand alignment, and weights held in the mixed
// GEMM's form or as stored: decode-sized batches never quantize activations (before this rule
// was a function, an fp8 batch of m <= 16 whose x was not 16-byte aligned fell through to the
// fp8-activation GEMM), prepared weights take the mixed GEMM (int4 at every m, fp8 at decode
// size), int4 is never decoded to bf16 and a prepared int4 weight never goes to a path that
// reads its stored form, larger fp8 batches take the scaled cuBLASLt GEMMs, and deterministic
// mode has one path per format.
#include "kernels/cuda/matmul_plan.h"

#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/mixed_gemm/mixed_gemm.h"
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

// Every combination of alignment and cuBLASLt refusal, held as stored, and (where the placement
// would prepare it: weight_placement.h asks MixedGemmTakesWeight) in the mixed GEMM's form.
std::vector<OperandFacts> AllFacts(const TensorFormat& f, int64_t n, int64_t k) {
  std::vector<bool> prepared = {false};
  if (MixedGemmTakesWeight(f, n, k)) prepared.push_back(true);
  std::vector<OperandFacts> all;
  for (bool x_aligned : {true, false}) {
    for (bool w_aligned : {true, false}) {
      for (bool refused : {false, true}) {
        for (bool p : prepared) all.push_back({x_aligned, w_aligned, refused, p});
      }
    }
  }
  return all;
}

std::string Describe(const TensorFormat& f, int64_t m, int64_t n, int64_t k,
                     const OperandFacts& facts) {
  return TensorFormatName(f) + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
         " k=" + std::to_string(k) + " x_aligned=" + std::to_string(facts.x_aligned) +
         " w_aligned=" + std::to_string(facts.w_aligned) +
         " refused=" + std::to_string(facts.fp8_gemm_refused) +
         " prepared=" + std::to_string(facts.w_prepared);
}

// (n, k) pairs: aligned model shapes and the parity suite's odd ones (k = 72: not whole
// 16-column steps; n = 33, 40: not a multiple of 16, so not for the mixed GEMM either).
const std::pair<int64_t, int64_t> kShapes[] = {{4096, 4096}, {96, 256},   {33, 512},
                                               {40, 72},     {272, 1024}, {1024, 384}};

TEST(MatMulPlanTest, DecodeSizedBatchesNeverQuantizeActivations) {
  int checked = 0;
  for (const TensorFormat& f : Formats()) {
    for (const auto& [n, k] : kShapes) {
      if (f.kind == FormatKind::kInt4Group && k % f.group_size != 0) continue;
      for (const OperandFacts& facts : AllFacts(f, n, k)) {
        for (int64_t m = 1; m <= kExactActivationRowsMax; ++m) {
          const MatMulPlan plan = ChooseMatMulPath(f, m, n, k, facts, false);
          EXPECT_FALSE(QuantizesActivations(plan.path))
              << Describe(f, m, n, k, facts) << " -> " << MatMulPathName(plan.path);
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 4000);
}

// A prepared int4 weight has no stored form on the device: it takes the mixed GEMM at every
// batch size, in both modes, and nothing else; an int4 weight held as stored (group 32, rows
// not whole 16-row atoms) streams through the GEMV, on 16-row slices above decode size. No int4
// weight is ever decoded to bf16.
TEST(MatMulPlanTest, Int4TakesTheMixedGemmWhenPreparedAndIsNeverDecoded) {
  for (const TensorFormat& f : {TensorFormat::Int4(32), TensorFormat::Int4(128),
                                TensorFormat::Int4(128, /*act_order=*/true)}) {
    for (const auto& [n, k] : kShapes) {
      if (k % f.group_size != 0) continue;
      for (const OperandFacts& facts : AllFacts(f, n, k)) {
        for (bool deterministic : {false, true}) {
          for (int64_t m = 1; m <= 64; ++m) {
            const MatMulPlan plan = ChooseMatMulPath(f, m, n, k, facts, deterministic);
            const std::string why = Describe(f, m, n, k, facts) + " det=" +
                                    std::to_string(deterministic) + " -> " +
                                    std::string(MatMulPathName(plan.path));
            EXPECT_NE(plan.path, MatMulPath::kDecodedGemm) << why;
            if (facts.w_prepared) {
              EXPECT_EQ(plan, (MatMulPlan{MatMulPath::kMixedGemm, !facts.x_aligned})) << why;
            } else if (facts.w_aligned) {
              const MatMulPath gemv = m <= kExactActivationRowsMax && !deterministic
                                          ? MatMulPath::kGemv
                                          : MatMulPath::kGemvRowSlices;
              EXPECT_EQ(plan, (MatMulPlan{gemv, !facts.x_aligned})) << why;
            } else {
              EXPECT_EQ(plan.path, MatMulPath::kNoKernel) << why;
            }
          }
        }
      }
    }
  }
}

// fp8 weights in the mixed GEMM's form: decode-sized batches on its tensor cores, larger ones
// quantize x for cuBLASLt's fp8 GEMM as before (the stored codes stay on the device for it).
TEST(MatMulPlanTest, PreparedFp8TakesTheMixedGemmAtDecodeSize) {
  OperandFacts prepared;
  prepared.w_prepared = true;
  for (FormatKind kind :
       {FormatKind::kF8E4M3, FormatKind::kFp8PerChannel, FormatKind::kFp8Block128}) {
    const TensorFormat f = TensorFormat::Of(kind);
    for (int64_t m = 1; m <= kExactActivationRowsMax; ++m) {
      EXPECT_EQ(ChooseMatMulPath(f, m, 4096, 4096, prepared, false),
                (MatMulPlan{MatMulPath::kMixedGemm, false}))
          << TensorFormatName(f) << " m=" << m;
    }
    EXPECT_EQ(ChooseMatMulPath(f, 17, 4096, 4096, prepared, false).path,
              kind == FormatKind::kFp8Block128 ? MatMulPath::kFp8BlockScaledGemm
                                               : MatMulPath::kFp8RowScaledGemm);
    // Deterministic mode: the batch-invariant plan at every m, exact activations.
    EXPECT_EQ(ChooseMatMulPath(f, 2048, 4096, 4096, prepared, true).path, MatMulPath::kMixedGemm);
  }
}

TEST(MatMulPlanTest, UnalignedActivationsAreCopiedForTheGemvAndTheMixedGemm) {
  for (bool prepared : {false, true}) {
    OperandFacts unaligned_x{.x_aligned = false, .w_aligned = true};
    unaligned_x.w_prepared = prepared;
    for (const TensorFormat& f :
         {TensorFormat::Of(FormatKind::kF8E4M3), TensorFormat::Of(FormatKind::kFp8PerChannel),
          TensorFormat::Of(FormatKind::kFp8Block128), TensorFormat::Int4(128)}) {
      for (int64_t m : {1, 7, 16}) {
        EXPECT_EQ(ChooseMatMulPath(f, m, 4096, 4096, unaligned_x, false),
                  (MatMulPlan{prepared ? MatMulPath::kMixedGemm : MatMulPath::kGemv,
                              /*stage_x=*/true}))
            << TensorFormatName(f) << " m=" << m << " prepared=" << prepared;
      }
    }
  }
  // An fp8 weight the GEMV cannot stream (k = 72: not whole 16-column steps) is decoded to
  // bf16: still exact activations.
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
      for (const OperandFacts& facts : AllFacts(f, n, k)) {
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
    for (const OperandFacts& facts : AllFacts(TensorFormat::Of(FormatKind::kBF16), 33, 72)) {
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

TEST(MatMulPlanTest, DeterministicModeHasOnePathPerFormatForEveryBatch) {
  for (const TensorFormat& f : Formats()) {
    for (const auto& [n, k] : kShapes) {
      if (f.kind == FormatKind::kInt4Group && k % f.group_size != 0) continue;
      for (const OperandFacts& facts : AllFacts(f, n, k)) {
        const MatMulPlan first = ChooseMatMulPath(f, 1, n, k, facts, true);
        EXPECT_FALSE(QuantizesActivations(first.path)) << Describe(f, 1, n, k, facts);
        for (int64_t m = 2; m <= 64; ++m) {
          EXPECT_EQ(ChooseMatMulPath(f, m, n, k, facts, true), first)
              << Describe(f, m, n, k, facts);
        }
      }
    }
  }
  // fp8 / int4 weights the GEMV streams: its 16-row slices for every batch; prepared ones the
  // mixed GEMM with its batch-invariant plan.
  EXPECT_EQ(ChooseMatMulPath(TensorFormat::Of(FormatKind::kFp8Block128), 64, 4096, 4096,
                             OperandFacts{}, true),
            (MatMulPlan{MatMulPath::kGemvRowSlices, false}));
  OperandFacts prepared;
  prepared.w_prepared = true;
  EXPECT_EQ(ChooseMatMulPath(TensorFormat::Of(FormatKind::kFp8Block128), 64, 4096, 4096,
                             prepared, true),
            (MatMulPlan{MatMulPath::kMixedGemm, false}));
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
  // Prepared weights: one mixed-GEMM launch when every chunk is whole 64-column K tiles and
  // whole groups (128 columns for fp8), as the chunk alone (placed on its own) would run.
  OperandFacts prepared;
  prepared.w_prepared = true;
  EXPECT_EQ(ChooseChunkedPath(TensorFormat::Int4(128), 1, 48, 768, 6, prepared, false),
            (MatMulPlan{MatMulPath::kMixedGemm, false}));
  EXPECT_EQ(ChooseChunkedPath(TensorFormat::Int4(128), 33, 48, 768, 3, prepared, false).path,
            MatMulPath::kMixedGemm);
  EXPECT_EQ(ChooseChunkedPath(fp8, 7, 48, 768, 3, prepared, false).path, MatMulPath::kMixedGemm);
  OperandFacts prepared_unaligned_x = prepared;
  prepared_unaligned_x.x_aligned = false;
  EXPECT_EQ(ChooseChunkedPath(fp8, 7, 48, 768, 3, prepared_unaligned_x, false),
            (MatMulPlan{MatMulPath::kMixedGemm, true}));
  // fp8 chunks of 64 columns cut its 128-column scale groups: the stored form's GEMV, in one
  // launch (a 64-column chunk alone is not prepared either).
  EXPECT_EQ(ChooseChunkedPath(fp8, 7, 48, 768, 12, prepared, false).path, MatMulPath::kGemv);
  // Larger fp8 batches: chunk by chunk through the scaled GEMM; deterministic: one launch of
  // the batch-invariant mixed GEMM.
  EXPECT_EQ(ChooseChunkedPath(fp8, 33, 48, 768, 3, prepared, false).path,
            MatMulPath::kChunkByChunk);
  EXPECT_EQ(ChooseChunkedPath(fp8, 33, 48, 768, 3, prepared, true).path, MatMulPath::kMixedGemm);
  // A prepared int4 weight cut through its groups has no kernel (the chunked contract's
  // chunks hold whole groups, so the backend never sees this).
  EXPECT_EQ(ChooseChunkedPath(TensorFormat::Int4(128), 1, 48, 768, 12, prepared, false).path,
            MatMulPath::kNoKernel);
  // Stored int4 above decode size: one GEMV launch on 16-row slices (never decoded).
  EXPECT_EQ(ChooseChunkedPath(TensorFormat::Int4(32), 33, 48, 768, 3, aligned, false).path,
            MatMulPath::kGemvRowSlices);
  // bf16 always chunk by chunk.
  EXPECT_EQ(
      ChooseChunkedPath(TensorFormat::Of(FormatKind::kBF16), 1, 48, 768, 3, aligned, true).path,
      MatMulPath::kChunkByChunk);
}

TEST(MatMulPlanTest, PathNamesAreDistinct) {
  std::set<std::string> names;
  for (MatMulPath p :
       {MatMulPath::kBf16Gemm, MatMulPath::kWideGemm, MatMulPath::kMixedGemm, MatMulPath::kGemv,
        MatMulPath::kGemvRowSlices, MatMulPath::kFp8RowScaledGemm,
        MatMulPath::kFp8BlockScaledGemm, MatMulPath::kDecodedGemm, MatMulPath::kChunkByChunk,
        MatMulPath::kNoKernel}) {
    EXPECT_TRUE(names.insert(std::string(MatMulPathName(p))).second) << MatMulPathName(p);
  }
}

// Qwen2's q/k/v biases: a bf16 or f16 checkpoint's projections get theirs from the GEMM's
// epilogue at every batch size, deterministic or not, and so does every fp8 or int4 weight the
// GEMVs stream; the mixed GEMM and the scaled fp8 GEMMs never do (their f32 sums take one more
// pass, cuda_matmul.h), so no path is left that would drop a bias silently.
TEST(MatMulPlanTest, WhichPathsAddABiasInTheirKernel) {
  const int64_t n = 3584, k = 3584;  // Qwen2.5-7B's q projection
  for (bool deterministic : {false, true}) {
    for (int64_t m = 1; m <= 64; ++m) {
      for (FormatKind kind : {FormatKind::kBF16, FormatKind::kF16, FormatKind::kF32}) {
        const MatMulPlan plan = ChooseMatMulPath(TensorFormat::Of(kind), m, n, k, {},
                                                 deterministic);
        EXPECT_TRUE(AddsBiasInKernel(plan.path)) << MatMulPathName(plan.path) << " m=" << m;
      }
      OperandFacts prepared;
      prepared.w_prepared = true;
      const MatMulPlan mixed = ChooseMatMulPath(TensorFormat::Of(FormatKind::kFp8PerChannel), m,
                                                n, k, prepared, deterministic);
      if (mixed.path == MatMulPath::kMixedGemm) {
        EXPECT_FALSE(AddsBiasInKernel(mixed.path)) << "m=" << m;
      }
      // int4 group 32 is not for the mixed GEMM: the GEMV (on 16-row slices above 16 rows).
      const MatMulPlan gemv =
          ChooseMatMulPath(TensorFormat::Int4(32), m, n, k, {}, deterministic);
      EXPECT_TRUE(gemv.path == MatMulPath::kGemv || gemv.path == MatMulPath::kGemvRowSlices)
          << MatMulPathName(gemv.path) << " m=" << m;
      EXPECT_TRUE(AddsBiasInKernel(gemv.path)) << MatMulPathName(gemv.path) << " m=" << m;
    }
  }
  for (MatMulPath path : {MatMulPath::kMixedGemm, MatMulPath::kFp8RowScaledGemm,
                          MatMulPath::kFp8BlockScaledGemm}) {
    EXPECT_FALSE(AddsBiasInKernel(path)) << MatMulPathName(path);
  }
}

}  // namespace
}  // namespace tpserve::cuda
