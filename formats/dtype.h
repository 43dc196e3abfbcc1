// Element types of weight tensors as they sit in checkpoint files, and their byte sizes.
//
//   int64_t bytes = RowBytes(DType::kQ4_1, 4096);   // 4096 / 32 blocks * 20 bytes
//                                                   // (K-quants: 4096 / 256 super-blocks)
//   DequantizeRow(DType::kQ4_1, row_ptr, out, 4096);
//
// Quantized types store blocks along the innermost (contiguous) dimension; a row length must be
// a multiple of BlockElems(dtype). Thread-safe: pure functions.
#ifndef TPSERVE_FORMATS_DTYPE_H_
#define TPSERVE_FORMATS_DTYPE_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace tpserve {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kF8E4M3,  // OCP FP8 E4M3 ("float8_e4m3fn"): no infinities, one NaN pattern.
  kQ8_0,    // GGML: 32 elems, fp16 scale d, int8 q[32]; x = d * q.                 34 bytes
  kQ4_0,    // GGML: 32 elems, fp16 d, 16 bytes of nibbles; x = d * (q - 8).         18 bytes
  kQ4_1,    // GGML: 32 elems, fp16 d, fp16 m, 16 bytes of nibbles; x = d * q + m.   20 bytes
  kQ5_0,    // GGML: 32 elems, fp16 d, 4 bytes of high bits, nibbles; x = d * (q - 16). 22 bytes
  kQ5_1,    // GGML: 32 elems, fp16 d, fp16 m, high bits, nibbles; x = d * q + m.      24 bytes
  // GGML K-quants: super-blocks of 256 elems with per-sub-block scales (layout: k_quant.h).
  kQ4_K,  // 8 x 32: fp16 d, dmin, 6-bit scales/mins, nibbles; x = d*s*q - dmin*m.  144 bytes
  kQ5_K,  // as Q4_K plus one high bit per element; q in 0..31.                       176 bytes
  kQ6_K,  // 16 x 16: 6-bit q, int8 scales, fp16 d; x = d * s * (q - 32).             210 bytes
  // Little-endian int32: not weight values but what quantized checkpoints store beside them
  // (AWQ/GPTQ packed 4-bit codes and zero points, GPTQ g_idx). IsIntegerDType says so.
  kI32,
};

std::string_view DTypeName(DType t);

// True for kI32: integers (packed codes, indices) that a weight or norm must never be read as.
// Every other type decodes to weight values.
bool IsIntegerDType(DType t);

// Elements per block (1 for the plain float types) and bytes per block.
int64_t BlockElems(DType t);
int64_t BlockBytes(DType t);

// Bytes of one row of `n` elements; nullopt when `n` is negative, not a multiple of the block
// size, or the product overflows int64.
std::optional<int64_t> RowBytes(DType t, int64_t n);

// Decodes `n` elements (a multiple of BlockElems) starting at `src` into fp32. Bit-exact with
// the gguf Python package for the GGML types, and with torch for F16, BF16 and F8E4M3; I32
// gives each integer's value (exact up to 2^24 in magnitude, rounded to nearest beyond).
void DequantizeRow(DType t, const void* src, float* dst, int64_t n);

// Scalar conversions, exposed for kernels and tests.
float F16ToF32(uint16_t h);
uint16_t F32ToF16(float f);  // round to nearest even
float BF16ToF32(uint16_t b);
float F8E4M3ToF32(uint8_t v);

}  // namespace tpserve

#endif  // TPSERVE_FORMATS_DTYPE_H_
