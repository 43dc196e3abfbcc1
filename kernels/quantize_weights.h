// Quantize-on-load: encodes f32 weight rows into any weight format the backends multiply
// (plain floats, fp8 per-channel or 128x128 tiles, int4 groups, GGML blocks), as a HostMatrix
// whose DequantizeWeightRow is the inverse up to the format's rounding.
//
//   HostMatrix w = QuantizeWeights(TensorFormat::Int4(128), rows_f32, 4096, 4096);
//   DequantizeWeightRow(w.matrix, 0, out);   // ~= rows_f32[0, :]
//
// Schemes (the ones serving engines use for round-to-nearest quantization):
//   fp8 (per-channel)  s[r] = max|W[r, :]| / 448 (1 for an all-zero row); code = e4m3(W / s)
//   fp8-block          s[tile] = max|W[tile]| / 448 over each 128x128 tile
//   int4-g<G>          per row and group of G: s = fp16((max - min) / 15), zero = fp16(-min / s)
//                      (fractional: the layout stores zero points as f16), code = clamp(round(W / s
//                      + zero), 0, 15); asymmetric, so the group's min and max are both on the
//                      grid (GGML Q4_1's scheme; AWQ/GPTQ exports round the zero to an integer)
//   f32/f16/bf16/fp8-e4m3 and GGML types: QuantizeRow (kernels/quantize.h)
// Thread-safe: pure functions.
#ifndef TPSERVE_KERNELS_QUANTIZE_WEIGHTS_H_
#define TPSERVE_KERNELS_QUANTIZE_WEIGHTS_H_

#include <cstdint>

#include "formats/tensor_format.h"
#include "kernels/weight_matrix.h"

namespace tpserve {

// Encodes src [rows, cols] (row-major f32). REQUIRES: cols fits the format (a multiple of its
// input block; MatrixBytes(format, rows, cols) succeeds).
HostMatrix QuantizeWeights(const TensorFormat& format, const float* src, int64_t rows,
                           int64_t cols);

// A HostMatrix of `format` with room for [rows, cols] and its scales, zeroed.
HostMatrix AllocateHostMatrix(const TensorFormat& format, int64_t rows, int64_t cols);

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_QUANTIZE_WEIGHTS_H_
