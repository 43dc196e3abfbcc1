// Host emulation of the mixed-input GEMM's arithmetic, operation by operation in the element
// types the CUTLASS collective uses, so its error against the CPU reference can be measured
// (and asserted) here without a GPU; and the formulations it could have used instead, for the
// comparison README.md reports.
//
//   const float v = MmaOperand(prepared.View(), r, c);   // the bf16 the tensor cores multiply
//   std::vector<double> y = EmulatedProduct(operand, n, k, x, m);
//
// What the collective does (sm90_mma_tma_gmma_rs_warpspecialized_mixed_input.hpp,
// MixedInputUtils::dequantize_A_kblock, scale type f32 != MMA type bf16, so it "stages" in
// f32): convert the narrow value to f32 (int4b_t and e4m3 convert exactly), stage * scale
// [+ zero] in f32 (nvcc contracts that expression into one fma by default), convert the stage
// to bf16 round-to-nearest-even, multiply on bf16 tensor cores into f32 accumulators (the
// bf16 x bf16 products are exact; the f32 sums' order is the only other difference, at the
// f32 level).
// Thread-safe: pure functions.
#ifndef TPSERVE_KERNELS_CUDA_MIXED_GEMM_EMULATE_H_
#define TPSERVE_KERNELS_CUDA_MIXED_GEMM_EMULATE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/cuda/mixed_gemm/mixed_gemm.h"
#include "kernels/weight_matrix.h"

namespace tpserve::cuda {

// The value (a bf16, as f32) the tensor cores multiply for W(row, col) of a prepared weight in
// host memory:
//   int4: bf16(fma(q, scale, offset)), q = code - 8, from the prepared nibble, scale, offset
//   fp8:  bf16(e4m3(code) * scale) with the prepared (expanded) f32 scale
float MmaOperand(const MixedGemmWeight& w, int64_t row, int64_t col);

// Ways to turn one int4 (code, f16 scale, f16 zero) into the bf16 the MMA multiplies.
enum class Int4Formula {
  // Ours: signed code q = code - 8, f32 scale, f32 offset (8 - zero) * scale prepared once,
  // bf16(fma(q, scale, offset)); = bf16((code - zero) * scale) for integer zero points.
  kF32ScaleOffset,
  // The same if the compiler did not contract: bf16(f32(f32(q * scale) + offset)).
  kF32ScaleOffsetUnfused,
  // CUTLASS example 55 / TensorRT-LLM fpA_intB with bf16 activations: unsigned code, scale and
  // zero' = -zero * scale held in bf16 (the MMA type, the fast conversion path), then
  // bf16(bf16(code * scale) + zero') (cutlass::bfloat16_t's * and +).
  kBf16ScaleZero,
  // The same with the multiply and add contracted into one bf16 fma (ptxas may fold mul.bf16
  // into add.bf16): bf16(code * scale + zero'), one rounding, scale and zero' still bf16.
  kBf16ScaleZeroFused,
  // Signed code with a bf16 scale and a bf16 offset (8 - zero) * scale: the cancellation of
  // code * scale against the zero term made smaller, not gone.
  kBf16SignedOffset,
};
float Int4Operand(Int4Formula formula, uint32_t code, uint16_t scale_f16, uint16_t zero_f16);

// The operand of every int4 element of `w` (host memory, kInt4Group) by `formula`.
std::function<float(int64_t, int64_t)> Int4FormulaOperand(const WeightMatrix& w,
                                                          Int4Formula formula);

// y[t * n + r] = sum_c x[t * k + c] * operand(r, c), summed in double: the exact value of the
// products the tensor cores make, whose f32 accumulation differs only by its order.
std::vector<double> EmulatedProduct(const std::function<float(int64_t, int64_t)>& operand,
                                    int64_t n, int64_t k, const float* x, int64_t m);

// The CPU reference: DequantizeWeightRow (f32) then exact dot products (double).
std::vector<double> ReferenceProduct(const WeightMatrix& w, const float* x, int64_t m);

// Each value rounded to bf16 (the epilogue's conversion of a bf16 y), as double.
std::vector<double> RoundToBf16(const std::vector<double>& y);

// sum((a - b)^2) / sum(b^2), the parity suite's normalised error. REQUIRES: equal sizes.
double NormalizedError(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_MIXED_GEMM_EMULATE_H_
