// Encoders from fp32 into every weight type the backends read: the exact inverse direction of
// DequantizeRow (formats/dtype.h). Used to build synthetic checkpoints in tests and fakes, and
// as the documented definition of the GGML block schemes we multiply against.
//
//   std::vector<uint8_t> q(RowBytes(DType::kQ4_1, 64).value());
//   QuantizeRow(DType::kQ4_1, src, q.data(), 64);
//
// The GGML encoders follow llama.cpp's reference quantizers (quantize_row_*_ref), so a round
// trip through them reproduces what a GGUF converter would have written.
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
//   F16/BF16/F8E4M3: round to nearest even (F8 saturates at +-448).
void QuantizeRow(DType t, const float* src, void* dst, int64_t n);

// Encodes a row-major [rows, cols] matrix; returns rows * RowBytes(t, cols) bytes.
std::vector<uint8_t> QuantizeMatrix(DType t, const float* src, int64_t rows, int64_t cols);

// Scalar encoders, exposed for tests.
uint16_t F32ToBF16(float f);
uint8_t F32ToF8E4M3(float f);

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_QUANTIZE_H_
