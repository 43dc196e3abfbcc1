// Which kernels a CUDA MatMul runs, as a pure function of the weight format, the shape and the
// operands' alignment: CudaMatMul (cuda_matmul.cc) asks ChooseMatMulPath and does what it
// says, so the rules below are tested on the host (matmul_plan_test.cc) and cannot drift from
// the code that runs. Plain C++.
//
//   const MatMulPlan plan = ChooseMatMulPath(w.format, m, n, k, facts, deterministic);
//   if (plan.stage_x) { ...copy x into aligned scratch... }
//   switch (plan.path) { ... }
//
// The rules (README.md has the table and the reasons):
//  * int4 and fp8 weights the backend placed in the mixed-input GEMM's form (`w_prepared`,
//    weight_placement.h) take that GEMM (CUTLASS, tensor cores, exact bf16 activations): int4
//    at every m, fp8 at m <= 16 (every m in deterministic mode), x staged into aligned scratch
//    when it is not 16-byte aligned.
//  * Other decode-sized batches (m <= kExactActivationRowsMax, parity_bounds.h's
//    kFp8QuantizedRowsAbove) never quantize activations either: fp8 and int4 weights the mixed
//    GEMM does not take (int4 group 32, rows not a multiple of 16, fp8 k % 128 != 0) take the
//    GEMV, or an fp8 weight the GEMV cannot stream is decoded to bf16 for a bf16 GEMM.
//  * Larger fp8 batches quantize x to e4m3 and multiply in cuBLASLt with the scales applied
//    inside the GEMM (per row x per channel, or 1x128 x 128x128); shapes cuBLASLt cannot take,
//    or an UNIMPLEMENTED answer (`fp8_gemm_refused`), decode W to bf16 instead. Larger batches
//    of int4 weights the mixed GEMM does not take run the GEMV on 16-row slices (int4 is never
//    decoded to bf16).
//  * Deterministic mode: one path per format whatever m is (a row's floats then cannot depend
//    on the batch), exact bf16 activations everywhere, the mixed GEMM with its batch-invariant
//    plan, GEMMs through pinned algorithms (gemm_request.h).
// Thread-safe: pure functions.
#ifndef TPSERVE_KERNELS_CUDA_MATMUL_PLAN_H_
#define TPSERVE_KERNELS_CUDA_MATMUL_PLAN_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "formats/tensor_format.h"

namespace tpserve::cuda {

// Most rows that count as decode-sized: up to here activations stay exact bf16 (and the GEMVs
// take them, gemv_kernels.h kGemvMaxRows).
inline constexpr int64_t kExactActivationRowsMax = 16;

enum class MatMulPath : uint8_t {
  kBf16Gemm,            // bf16 W: cuBLASLt bf16 on x as it is
  kWideGemm,            // f16 / f32 W: x converted to f16 / f32, cuBLASLt
  kMixedGemm,           // prepared int4 / fp8 W: CUTLASS's mixed-input GEMM on exact bf16 x
                        // (mixed_gemm/), batch-invariant plan in deterministic mode
  kGemv,                // fp8 / int4 W the mixed GEMM does not take, m <= 16: the GEMV
  kGemvRowSlices,       // the GEMV on 16-row slices, any m: int4 the mixed GEMM does not take
                        // (m > 16), and deterministic fp8 it does not take
  kFp8RowScaledGemm,    // fp8 plain / per channel, m > 16: x -> e4m3 per row, cuBLASLt fp8,
                        // y = acc * s_x[t] * s_w[j] inside the GEMM (outer-vector scales)
  kFp8BlockScaledGemm,  // fp8 128x128, m > 16: x -> e4m3 per 1x128 group, cuBLASLt fp8 with
                        // 1x128 x 128x128 scales inside the GEMM
  kDecodedGemm,         // fp8 W decoded to bf16 scratch, cuBLASLt bf16: what the others refuse
  kChunkByChunk,        // MatMulChunked only: each chunk copied out and run as its own MatMul
  kNoKernel,            // nothing takes the operands (an int4 W with rows not 16-byte aligned
                        // and not prepared: the backend's own placements never are): an error
};

std::string_view MatMulPathName(MatMulPath path);
// True for the paths that round activations to fp8 (parity_bounds.h kFp8ActivationBound).
bool QuantizesActivations(MatMulPath path);
// True for the paths whose kernel adds a matrix's bias where it writes y (cuBLASLt's bias
// epilogue on the bf16 / f16 / f32 / decoded GEMMs, the GEMVs' store). The others (the scaled
// fp8 GEMMs, the mixed GEMM) write f32 sums that one more pass biases and rounds.
bool AddsBiasInKernel(MatMulPath path);

// What the path choice needs to know about the operands.
struct OperandFacts {
  bool x_aligned = true;  // x's address is a multiple of 16 bytes
  bool w_aligned = true;  // W's address and its row stride (row_bytes) are multiples of 16
  // cuBLASLt answered UNIMPLEMENTED for this fp8 GEMM (no algorithm): take the bf16 fallback.
  bool fp8_gemm_refused = false;
  // W is held in the mixed GEMM's form (MixedGemmForm(w) != nullptr, weight_placement.h). An
  // int4 W so held has no stored form left: only kMixedGemm can multiply it.
  bool w_prepared = false;
};

struct MatMulPlan {
  MatMulPath path = MatMulPath::kBf16Gemm;
  bool stage_x = false;  // copy x into 16-byte-aligned scratch first (the GEMV and the mixed
                         // GEMM's TMA loads need it)
  friend bool operator==(const MatMulPlan&, const MatMulPlan&) = default;
};

// The path of y[m, n] = x[m, k] * W^T for W in `format` (after any act-order gather of x).
// REQUIRES: CudaMatMulSupports(format), m >= 1, n >= 1, k >= 1.
MatMulPlan ChooseMatMulPath(const TensorFormat& format, int64_t m, int64_t n, int64_t k,
                            const OperandFacts& facts, bool deterministic);

// Why ChooseMatMulPath(format, m, n, k, facts, deterministic) decodes W to bf16
// (kDecodedGemm): which kernel refused the weight and on what condition, e.g. "the fp8 GEMV
// takes k in whole 16-column steps; k = 72 is not", or "cuBLASLt has no fp8 GEMM with
// 128x128 (W) / 1x128 (x) scales for it" (the caller adds cuBLASLt's own words). "" when the
// path is another. Pure: for the load-time reports (matmul_plan_load.h) and errors.
std::string DecodedGemmReason(const TensorFormat& format, int64_t m, int64_t n, int64_t k,
                              const OperandFacts& facts, bool deterministic);

// Bytes of weight one MatMul of an [n, k] W on `path` decodes: n * k bf16 values for
// kDecodedGemm (the whole matrix, every call), 0 for every other path (they read W as held).
int64_t MatMulDecodedBytes(MatMulPath path, int64_t n, int64_t k);

// MatMulChunked of `num_chunks` equal chunks of k: one launch over every chunk where a kernel
// takes the weight and its chunks, each chunk planned as a call on that chunk alone:
// kMixedGemm for a prepared W whose chunks are whole 64-column K tiles and whole groups (128
// columns for fp8) in a batch the mixed GEMM takes, kGemv / kGemvRowSlices where the GEMV
// streams the stored form; else kChunkByChunk (each chunk then gets ChooseMatMulPath of its
// own, stored form, dense aligned operands). A prepared int4 W whose chunks the mixed GEMM
// cannot cut is kNoKernel (the chunked contract's whole groups never give one). Either way a
// chunk's floats are those of a MatMul of that chunk alone, placed as a weight of its own.
MatMulPlan ChooseChunkedPath(const TensorFormat& format, int64_t m, int64_t n, int64_t k,
                             int64_t num_chunks, const OperandFacts& facts, bool deterministic);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_MATMUL_PLAN_H_
