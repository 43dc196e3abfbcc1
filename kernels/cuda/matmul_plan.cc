#include "kernels/cuda/matmul_plan.h"

namespace tpserve::cuda {
namespace {

bool IsFp8(FormatKind kind) {
  return kind == FormatKind::kF8E4M3 || kind == FormatKind::kFp8PerChannel ||
         kind == FormatKind::kFp8Block128;
}

// The GEMV kernels' conditions on the weight (gemv_kernels.h Fp8GemvFits / Int4GemvFits, less
// x's alignment, which staging provides): whole 16-column steps (int4: 32-column chunks of
// whole groups) and 16-byte aligned rows.
bool GemvTakesWeight(const TensorFormat& f, int64_t k, const OperandFacts& facts) {
  if (!facts.w_aligned) return false;
  if (IsFp8(f.kind)) return k % 16 == 0;
  if (f.kind == FormatKind::kInt4Group) {
    return f.group_size > 0 && f.group_size % 32 == 0 && k % 32 == 0;
  }
  return false;
}

// Chunks of whole GEMV steps (gemv_kernels.cu ChunksFit): 16 fp8 columns, 128-column tiles
// for fp8-block, whole int4 groups.
bool GemvTakesChunks(const TensorFormat& f, int64_t k, int64_t num_chunks) {
  if (num_chunks < 1 || k % num_chunks != 0 || num_chunks > (1 << 20)) return false;
  const int64_t kc = k / num_chunks;
  switch (f.kind) {
    case FormatKind::kInt4Group: return kc % 32 == 0 && kc % f.group_size == 0;
    case FormatKind::kFp8Block128: return kc % 128 == 0;
    default: return kc % 16 == 0;
  }
}

// cuBLASLt's fp8 kernels: "TN" layout with k and n multiples of 16 and 16-byte aligned W
// (x is quantized into aligned scratch, so its alignment does not matter).
bool Fp8GemmTakes(int64_t n, int64_t k, const OperandFacts& facts) {
  return facts.w_aligned && k % 16 == 0 && n % 16 == 0 && !facts.fp8_gemm_refused;
}

}  // namespace

std::string_view MatMulPathName(MatMulPath path) {
  switch (path) {
    case MatMulPath::kBf16Gemm: return "cublaslt-bf16";
    case MatMulPath::kWideGemm: return "cublaslt-f16/f32";
    case MatMulPath::kGemv: return "gemv";
    case MatMulPath::kGemvRowSlices: return "gemv-16-row-slices";
    case MatMulPath::kFp8RowScaledGemm: return "cublaslt-fp8-outer-vector-scales";
    case MatMulPath::kFp8BlockScaledGemm: return "cublaslt-fp8-1x128x128x128-scales";
    case MatMulPath::kDecodedGemm: return "decoded-bf16-gemm";
    case MatMulPath::kChunkByChunk: return "chunk-by-chunk";
  }
  return "?";
}

bool QuantizesActivations(MatMulPath path) {
  return path == MatMulPath::kFp8RowScaledGemm || path == MatMulPath::kFp8BlockScaledGemm;
}

MatMulPlan ChooseMatMulPath(const TensorFormat& format, int64_t m, int64_t n, int64_t k,
                            const OperandFacts& facts, bool deterministic) {
  MatMulPlan plan;
  switch (format.kind) {
    case FormatKind::kBF16: plan.path = MatMulPath::kBf16Gemm; return plan;
    case FormatKind::kF16:
    case FormatKind::kF32: plan.path = MatMulPath::kWideGemm; return plan;
    default: break;
  }
  const bool gemv = GemvTakesWeight(format, k, facts);
  if (deterministic) {
    // One path for every m. The GEMV sums each (row, token) in an order that depends on k
    // alone (gemv_kernels.cu: lane l takes the 16-byte steps at bytes l*16 + 512 i of the row,
    // i = 0, 1, ..., whatever the batch template), so slicing the batch changes no float.
    plan.path = gemv ? MatMulPath::kGemvRowSlices : MatMulPath::kDecodedGemm;
    plan.stage_x = gemv && !facts.x_aligned;
    return plan;
  }
  if (m <= kExactActivationRowsMax) {
    // Exact bf16 activations whatever the alignment: an unaligned x is copied, an unaligned
    // weight is decoded.
    plan.path = gemv ? MatMulPath::kGemv : MatMulPath::kDecodedGemm;
    plan.stage_x = gemv && !facts.x_aligned;
    return plan;
  }
  switch (format.kind) {
    case FormatKind::kF8E4M3:
    case FormatKind::kFp8PerChannel:
      plan.path =
          Fp8GemmTakes(n, k, facts) ? MatMulPath::kFp8RowScaledGemm : MatMulPath::kDecodedGemm;
      return plan;
    case FormatKind::kFp8Block128:
      plan.path =
          Fp8GemmTakes(n, k, facts) ? MatMulPath::kFp8BlockScaledGemm : MatMulPath::kDecodedGemm;
      return plan;
    default:  // int4
      plan.path = MatMulPath::kDecodedGemm;
      return plan;
  }
}

MatMulPlan ChooseChunkedPath(const TensorFormat& format, int64_t m, int64_t n, int64_t k,
                             int64_t num_chunks, const OperandFacts& facts, bool deterministic) {
  const MatMulPlan whole = ChooseMatMulPath(format, m, n, k, facts, deterministic);
  const bool one_launch =
      (whole.path == MatMulPath::kGemv || whole.path == MatMulPath::kGemvRowSlices) &&
      GemvTakesChunks(format, k, num_chunks);
  if (one_launch) return whole;
  return MatMulPlan{MatMulPath::kChunkByChunk, false};
}

}  // namespace tpserve::cuda
