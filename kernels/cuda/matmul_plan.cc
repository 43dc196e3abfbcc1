#include "kernels/cuda/matmul_plan.h"

#include "base/str_cat.h"
#include "kernels/cuda/mixed_gemm/mixed_gemm.h"

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

// Why GemvTakesWeight refuses an fp8 W ("" when it takes it).
std::string GemvRefusal(int64_t k, const OperandFacts& facts) {
  if (!facts.w_aligned) return "the fp8 GEMV needs 16-byte aligned rows of W, and these are not";
  if (k % 16 != 0) {
    return StrCat("the fp8 GEMV takes k in whole 16-column steps; k = ", k, " is not");
  }
  return "";
}

const char* ScaleModes(FormatKind kind) {
  return kind == FormatKind::kFp8Block128 ? "128x128 (W) / 1x128 (x)"
                                          : "per-channel (W) / per-token (x) outer-vector";
}

}  // namespace

std::string DecodedGemmReason(const TensorFormat& format, int64_t m, int64_t n, int64_t k,
                              const OperandFacts& facts, bool deterministic) {
  if (ChooseMatMulPath(format, m, n, k, facts, deterministic).path != MatMulPath::kDecodedGemm) {
    return "";
  }
  if (deterministic || m <= kExactActivationRowsMax) {
    // The batch keeps exact bf16 activations: the GEMV or the mixed GEMM, and neither took it.
    const std::string gemv = GemvRefusal(k, facts);
    const std::string mixed =
        MixedGemmTakesWeight(format, n, k)
            ? std::string("W is not held in the mixed GEMM's form (it runs on Hopper only)")
            : StrCat("the mixed GEMM takes fp8 with k % ", kFp8ScaleGroup, " == 0 and n % ",
                     kMixedGemmRowMultiple, " == 0 only (n = ", n, ", k = ", k, ")");
    return StrCat(deterministic ? "deterministic mode keeps activations exact at every batch: "
                                : "a decode-sized batch keeps activations exact: ",
                  gemv, ", and ", mixed);
  }
  if (!facts.w_aligned) {
    return "cuBLASLt's fp8 GEMMs need 16-byte aligned rows of W, and these are not";
  }
  if (k % 16 != 0 || n % 16 != 0) {
    return StrCat("cuBLASLt's fp8 GEMMs need n and k multiples of 16; n = ", n, ", k = ", k);
  }
  return StrCat("cuBLASLt has no fp8 GEMM with ", ScaleModes(format.kind), " scales for it");
}

int64_t MatMulDecodedBytes(MatMulPath path, int64_t n, int64_t k) {
  return path == MatMulPath::kDecodedGemm ? n * k * 2 : 0;
}

std::string_view MatMulPathName(MatMulPath path) {
  switch (path) {
    case MatMulPath::kBf16Gemm: return "cublaslt-bf16";
    case MatMulPath::kWideGemm: return "cublaslt-f16/f32";
    case MatMulPath::kMixedGemm: return "cutlass-mixed-input";
    case MatMulPath::kGemv: return "gemv";
    case MatMulPath::kGemvRowSlices: return "gemv-16-row-slices";
    case MatMulPath::kFp8RowScaledGemm: return "cublaslt-fp8-outer-vector-scales";
    case MatMulPath::kFp8BlockScaledGemm: return "cublaslt-fp8-1x128x128x128-scales";
    case MatMulPath::kDecodedGemm: return "decoded-bf16-gemm";
    case MatMulPath::kChunkByChunk: return "chunk-by-chunk";
    case MatMulPath::kNoKernel: return "no-kernel";
  }
  return "?";
}

bool QuantizesActivations(MatMulPath path) {
  return path == MatMulPath::kFp8RowScaledGemm || path == MatMulPath::kFp8BlockScaledGemm;
}

bool AddsBiasInKernel(MatMulPath path) {
  switch (path) {
    case MatMulPath::kBf16Gemm:
    case MatMulPath::kWideGemm:
    case MatMulPath::kDecodedGemm:
    case MatMulPath::kGemv:
    case MatMulPath::kGemvRowSlices: return true;
    case MatMulPath::kMixedGemm:
    case MatMulPath::kFp8RowScaledGemm:
    case MatMulPath::kFp8BlockScaledGemm:
    case MatMulPath::kChunkByChunk:
    case MatMulPath::kNoKernel: return false;
  }
  return false;
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
  const bool int4 = format.kind == FormatKind::kInt4Group;
  if (facts.w_prepared) {
    // Tensor cores on exact bf16 activations; deterministic mode asks for the batch-invariant
    // plan, which takes fp8 at every m too.
    if (MixedGemmSupports(format, m, n, k, deterministic)) {
      plan.path = MatMulPath::kMixedGemm;
      plan.stage_x = !facts.x_aligned;  // TMA loads of x need 16-byte alignment
      return plan;
    }
    if (int4) {  // its stored form is not on the device
      plan.path = MatMulPath::kNoKernel;
      return plan;
    }
    // fp8 keeps its stored form: the paths below (m > 16 outside deterministic mode).
  }
  const bool gemv = GemvTakesWeight(format, k, facts);
  if (int4) {
    // Never decoded to bf16: the GEMV, on 16-row slices above decode size (prefill then reads
    // W once per 16 tokens). Its order of summation depends on k alone (lane l takes the
    // 16-byte steps at bytes l*16 + 512 i of the row), so slicing changes no float and
    // deterministic mode takes the same kernel at every m.
    if (!gemv) {
      plan.path = MatMulPath::kNoKernel;
      return plan;
    }
    plan.path = m <= kExactActivationRowsMax && !deterministic ? MatMulPath::kGemv
                                                               : MatMulPath::kGemvRowSlices;
    plan.stage_x = !facts.x_aligned;
    return plan;
  }
  if (deterministic) {
    // One path for every m: the GEMV's slices (see above) or a pinned bf16 GEMM.
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
  const MatMulPath scaled = format.kind == FormatKind::kFp8Block128
                                ? MatMulPath::kFp8BlockScaledGemm
                                : MatMulPath::kFp8RowScaledGemm;
  plan.path = Fp8GemmTakes(n, k, facts) ? scaled : MatMulPath::kDecodedGemm;
  return plan;
}

MatMulPlan ChooseChunkedPath(const TensorFormat& format, int64_t m, int64_t n, int64_t k,
                             int64_t num_chunks, const OperandFacts& facts, bool deterministic) {
  const bool whole_chunks = num_chunks >= 1 && k % num_chunks == 0;
  if (facts.w_prepared) {
    // One launch, each chunk an entry of CUTLASS's batch with the plan of the chunk alone.
    if (whole_chunks && MixedGemmSupports(format, m, n, k / num_chunks, deterministic)) {
      return MatMulPlan{MatMulPath::kMixedGemm, !facts.x_aligned};
    }
    if (format.kind == FormatKind::kInt4Group) return MatMulPlan{MatMulPath::kNoKernel, false};
  }
  OperandFacts stored = facts;
  stored.w_prepared = false;
  const MatMulPlan whole = ChooseMatMulPath(format, m, n, k, stored, deterministic);
  const bool one_launch =
      (whole.path == MatMulPath::kGemv || whole.path == MatMulPath::kGemvRowSlices) &&
      GemvTakesChunks(format, k, num_chunks);
  if (one_launch) return whole;
  return MatMulPlan{MatMulPath::kChunkByChunk, false};
}

}  // namespace tpserve::cuda
