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
//  * Decode-sized batches (m <= kExactActivationRowsMax, parity_bounds.h's
//    kFp8QuantizedRowsAbove) never quantize activations: fp8 and int4 weights take the GEMV
//    (x staged into aligned scratch when x is not 16-byte aligned) or, when the weight itself
//    is not aligned for it, W decoded to bf16 and a bf16 GEMM.
//  * Larger fp8 batches quantize x to e4m3 and multiply in cuBLASLt with the scales applied
//    inside the GEMM (per row x per channel, or 1x128 x 128x128); shapes cuBLASLt cannot take,
//    or an UNIMPLEMENTED answer (`fp8_gemm_refused`), decode W to bf16 instead.
//  * Deterministic mode: one path per format whatever m is (a row's floats then cannot depend
//    on the batch), exact bf16 activations everywhere, and GEMMs through pinned algorithms
//    (gemm_request.h).
// Thread-safe: pure functions.
#ifndef TPSERVE_KERNELS_CUDA_MATMUL_PLAN_H_
#define TPSERVE_KERNELS_CUDA_MATMUL_PLAN_H_

#include <cstdint>
#include <string_view>

#include "formats/tensor_format.h"

namespace tpserve::cuda {

// Most rows that count as decode-sized: up to here activations stay exact bf16 (and the GEMVs
// take them, gemv_kernels.h kGemvMaxRows).
inline constexpr int64_t kExactActivationRowsMax = 16;

enum class MatMulPath : uint8_t {
  kBf16Gemm,            // bf16 W: cuBLASLt bf16 on x as it is
  kWideGemm,            // f16 / f32 W: x converted to f16 / f32, cuBLASLt
  kGemv,                // fp8 / int4 W, m <= 16: the weight-streaming GEMV, exact bf16 x
  kGemvRowSlices,       // deterministic fp8 / int4: the GEMV on 16-row slices, any m
  kFp8RowScaledGemm,    // fp8 plain / per channel, m > 16: x -> e4m3 per row, cuBLASLt fp8,
                        // y = acc * s_x[t] * s_w[j] inside the GEMM (outer-vector scales)
  kFp8BlockScaledGemm,  // fp8 128x128, m > 16: x -> e4m3 per 1x128 group, cuBLASLt fp8 with
                        // 1x128 x 128x128 scales inside the GEMM
  kDecodedGemm,         // W decoded to bf16 scratch, cuBLASLt bf16: what the others refuse,
                        // and int4 for m > 16 (until a mixed-input GEMM replaces it)
  kChunkByChunk,        // MatMulChunked only: each chunk copied out and run as its own MatMul
};

std::string_view MatMulPathName(MatMulPath path);
// True for the paths that round activations to fp8 (parity_bounds.h kFp8ActivationBound).
bool QuantizesActivations(MatMulPath path);

// What the path choice needs to know about the operands.
struct OperandFacts {
  bool x_aligned = true;  // x's address is a multiple of 16 bytes
  bool w_aligned = true;  // W's address and its row stride (row_bytes) are multiples of 16
  // cuBLASLt answered UNIMPLEMENTED for this fp8 GEMM (no algorithm): take the bf16 fallback.
  bool fp8_gemm_refused = false;
};

struct MatMulPlan {
  MatMulPath path = MatMulPath::kBf16Gemm;
  bool stage_x = false;  // copy x into 16-byte-aligned scratch first (the GEMV needs it)
  friend bool operator==(const MatMulPlan&, const MatMulPlan&) = default;
};

// The path of y[m, n] = x[m, k] * W^T for W in `format` (after any act-order gather of x).
// REQUIRES: CudaMatMulSupports(format), m >= 1, n >= 1, k >= 1.
MatMulPlan ChooseMatMulPath(const TensorFormat& format, int64_t m, int64_t n, int64_t k,
                            const OperandFacts& facts, bool deterministic);

// MatMulChunked of `num_chunks` equal chunks of k: one GEMV launch over every chunk where the
// GEMV takes the weight and its chunks (kGemv, kGemvRowSlices), else kChunkByChunk (each chunk
// then gets ChooseMatMulPath of its own, with dense aligned operands). Either way a chunk's
// floats are those of a MatMul of that chunk alone.
MatMulPlan ChooseChunkedPath(const TensorFormat& format, int64_t m, int64_t n, int64_t k,
                             int64_t num_chunks, const OperandFacts& facts, bool deterministic);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_MATMUL_PLAN_H_
