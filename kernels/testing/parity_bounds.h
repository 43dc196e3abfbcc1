// The normalised-error bounds of the backend-parity suite, sum((a - b)^2) / sum(b^2) of
// candidate a against reference b, and why each is what it is. Inputs are exact in both
// backends (activations pre-rounded to bf16, identical weight bytes), so every difference
// comes from the candidate's own arithmetic: summation order, and the roundings its activation
// type forces.
//
// * f32 activations (e.g. the CPU's AVX2 kernels against its scalar reference): the same
//   operations in another order. f32 relative rounding is 2^-24 ~ 6e-8 per operation, so even
//   sums of thousands of terms stay near 1e-13; kF32OrderBound = 1e-10 leaves three orders of
//   magnitude and still catches any real bug (a wrong element moves the error to ~1e-2).
// * One rounding to bf16 (8 significant bits): the relative error of round-to-nearest is
//   uniform within +-2^-8 of the value's binade, a mean square of (2^-8)^2 / 3 * E[1/(1+f)^2]
//   ~ 2.5e-6 for mantissas f spread over [0, 1). kBf16RoundBound = 1e-5 is four times that,
//   for ops whose only rounding is the output's (norms, RoPE, element-wise ops, attention,
//   embedding rows, the chunk sum).
// * Two roundings (a matmul whose weights were decoded into bf16 for the tensor cores, then
//   its bf16 output): twice that, kBf16TwiceBound = 2e-5.
// * Activations quantized to fp8 e4m3 per row (3 stored mantissa bits) before an fp8 GEMM:
//   relative half-ulp 2^-4, a mean square of (2^-4)^2 / 3 * 0.5 ~ 6.5e-4 per element, which a
//   dot product of independent terms carries into its result unchanged in normalised terms:
//   kFp8ActivationBound = 3e-3 (4.6x). The same bound covers activations quantized per 1x128
//   group (against 128x128-tile fp8 weights): each group's scale is its own amax / 448, so
//   every element is rounded with the same 3 mantissa bits as under a row scale, and a group
//   maximum no larger than the row's only moves fewer small values into e4m3's subnormal range
//   (coarser steps); the weights are the same exact codes times tile scales in both backends,
//   and the f32 accumulation and one bf16 output rounding (2.5e-6) are small beside 6.5e-4.
//   Backends may take these paths only for more than kFp8QuantizedRowsAbove rows (decode-sized
//   batches must use exact bf16 activations, however their buffers are aligned).
// * GGML block weights against 8-bit quantized activations (the CPU's scheme): the activation
//   rounding is about (max|x| / 127)^2 / 12 / E[x^2] ~ 3e-5 relative variance for Gaussian
//   blocks of 32; kQ8ActivationBound = 5e-4 also covers a bf16 output rounding.
// * Exact copies (GatherLogitRows, KV writes of values that are exact in the pool type):
//   kExactBound = 0, except fp8 KV codes, where the candidate's division value / scale must
//   round to the same e4m3 code: also 0 (IEEE division is correctly rounded everywhere).
#ifndef TPSERVE_KERNELS_TESTING_PARITY_BOUNDS_H_
#define TPSERVE_KERNELS_TESTING_PARITY_BOUNDS_H_

#include <cstdint>

namespace tpserve::parity {

inline constexpr double kF32OrderBound = 1e-10;
inline constexpr double kBf16RoundBound = 1e-5;
inline constexpr double kBf16TwiceBound = 2e-5;
inline constexpr double kFp8ActivationBound = 3e-3;
inline constexpr int64_t kFp8QuantizedRowsAbove = 16;
inline constexpr double kQ8ActivationBound = 5e-4;
inline constexpr double kExactBound = 0.0;

}  // namespace tpserve::parity

#endif  // TPSERVE_KERNELS_TESTING_PARITY_BOUNDS_H_
