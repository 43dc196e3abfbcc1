// Int4 test weights as the checkpoint loaders leave AWQ and GPTQ matrices (checkpoint/
// stored_matrix_int4.cc: integer zero points, f16 scales, the engine's nibble order), and as
// QuantizeWeights makes them (fractional f16 zero points); bf16-exact activations.
//
//   HostMatrix w = MakeInt4Weight(Int4Style::kAwq, 256, 1024, 128, /*seed=*/7, 0.01);
//
// Weights are Gaussian (sigma 0.02, as in Llama projections), a fraction of them times 8: the
// heavy tails real weights have, which stretch a group's range while most values stay near its
// middle (the case where a zero-point formulation's cancellation hurts most).
// Thread-safe: pure functions.
#ifndef TPSERVE_KERNELS_CUDA_MIXED_GEMM_TEST_WEIGHTS_H_
#define TPSERVE_KERNELS_CUDA_MIXED_GEMM_TEST_WEIGHTS_H_

#include <cstdint>
#include <vector>

#include "kernels/weight_matrix.h"

namespace tpserve::cuda {

enum class Int4Style {
  kAwq,      // AutoAWQ: s = (max - min) / 15, zero = round(-min / s) in [0, 15]
  kGptqSym,  // GPTQ sym: s = 2 max|w| / 15, zero 8 (stored 7, read + 1)
  // GPTQ v1 asym: zero = round(-min / s), stored as zero - 1 in 4 bits and read back + 1, so a
  // zero of 0 becomes 16. Every other group holds |w| (min >= 0, zero 0) to produce such 16s.
  kGptqV1Asym,
  kFractional,  // QuantizeWeights (kernels/quantize_weights.h): zero = -min / s in f16
};

HostMatrix MakeInt4Weight(Int4Style style, int64_t rows, int64_t cols, int64_t group, uint32_t seed,
                          double outlier_fraction);

// Gaussian fp8 weights of `format` (kF8E4M3, kFp8PerChannel or kFp8Block128) by
// QuantizeWeights.
HostMatrix MakeFp8Weight(FormatKind kind, int64_t rows, int64_t cols, uint32_t seed);

// `count` standard-normal values rounded to bf16 (as activations reach the GEMM).
std::vector<float> RandomBf16Activations(int64_t count, uint32_t seed);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_MIXED_GEMM_TEST_WEIGHTS_H_
