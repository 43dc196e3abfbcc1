// Encoders from fp32 into every weight type the backends read: the exact inverse direction of
// DequantizeRow (formats/dtype.h). Used to build synthetic checkpoints in tests and fakes, and
// as the documented definition of the GGML block schemes we multiply against.
//
//   std::vector<uint8_t> q(RowBytes(DType::kQ4_1, 64).value());
//   QuantizeRow(DType::kQ4_1, src, q.data(), 64);
//
// The Q8_0/Q4_0/Q4_1 encoders follow llama.cpp's reference quantizers (quantize_row_*_ref), so a
// round trip through them reproduces what a GGUF converter would have written. The K-quant
// encoders are a simpler min/max scheme of our own (llama.cpp searches scales iteratively): valid
// blocks any GGUF reader decodes, with a guaranteed error bound, not llama.cpp's exact bytes.
// Thread-safe: pure functions.
#ifndef TPSERVE_KERNELS_QUANTIZE_H_
#define TPSERVE_KERNELS_QUANTIZE_H_

#include <cstdint>
#include <vector>

#include "formats/dtype.h"

namespace tpserve {

// Encodes n floats into `dst` (RowBytes(t, n) bytes). REQUIRES: n % BlockElems(t) == 0.
//   Q8_0: d = max|x| / 127, q = round(x / d).
//   Q4_0: d = (the x of largest magnitude) / -8, q = min(15, trunc(x / d + 8.5)).
//   Q4_1: d = (max - min) / 15, m = min, q = min(15, trunc((x - m) / d + 0.5)).
//   Q4_K/Q5_K (L = 15 / 31 levels): per sub-block j of 32, lo_j = min(0, min x), hi_j = max x;
//     dmin and d are the fp16s rounded up from max_j(-lo_j) / 63 and max_j(step_j) / 63, the
//     6-bit codes m_j, s_j are rounded up (so the grid always covers [lo_j, hi_j]), and with
//     step_j = d * s_j: q = round((x + dmin * m_j) / step_j), x' = step_j * q - dmin * m_j.
//     Error bound: |x' - x| <= step_j / 2, where
//     step_j <= (hi_j - lo_j + dmin) / L + d,  dmin ~ R / 63,  d ~ (R + R / 63) / (63 L),
//     R = max_j (max(hi_j, 0) - lo_j) over the super-block (fp16 rounding up of d and dmin
//     adds a factor <= 1 + 2^-10).
//   Q6_K: per 16 values, step_s >= max|x| / 31 (d = fp16 up of max_s(max|x|) / (31 * 127), int8
//     scale rounded up), q = round(x / step_s) in -31..31. Error bound: |x' - x| <= step_s / 2,
//     step_s <= max|x|_s / 31 + d.
//   K types REQUIRE finite x small enough for d and dmin to stay finite in fp16 (|x| < 4e6).
//   F16/BF16/F8E4M3: round to nearest even (F8 saturates at +-448).
//   I32: nearest integer, ties away from zero, saturated to the int32 range; NaN gives 0.
void QuantizeRow(DType t, const float* src, void* dst, int64_t n);

// Encodes a row-major [rows, cols] matrix; returns rows * RowBytes(t, cols) bytes.
std::vector<uint8_t> QuantizeMatrix(DType t, const float* src, int64_t rows, int64_t cols);

// Scalar encoders, exposed for tests.
uint16_t F32ToBF16(float f);
uint8_t F32ToF8E4M3(float f);

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_QUANTIZE_H_
