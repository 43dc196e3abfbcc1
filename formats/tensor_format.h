// How one weight matrix is stored on the device, and exactly how many bytes a [rows, cols]
// slice of it takes, scales, zero points and block padding included. The memory plan counts
// every weight byte through MatrixBytes, so a format added here is planned everywhere.
//
//   TP_ASSIGN_OR_RETURN(TensorFormat int4, ParseTensorFormat("int4-g128"));
//   TP_ASSIGN_OR_RETURN(int64_t bytes, MatrixBytes(int4, 4096, 4096, "blk.0.attn_q"));
//
// A matrix is [rows = output features, cols = input features]; cols are contiguous, so
// quantization groups and GGML blocks run along cols (the input dimension), as in GGUF and in
// GPTQ/AWQ checkpoints. Thread-safe: value types and pure functions.
#ifndef TPSERVE_FORMATS_TENSOR_FORMAT_H_
#define TPSERVE_FORMATS_TENSOR_FORMAT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "formats/dtype.h"

namespace tpserve {

enum class FormatKind : uint8_t {
  kF32,
  kF16,
  kBF16,
  kF8E4M3,         // plain fp8, one per-tensor scale (negligible): KV cache, activations
  kFp8PerChannel,  // fp8 e4m3 weights + one fp32 scale per output row (FBGEMM "rowwise")
  kFp8Block128,    // fp8 e4m3 weights + one fp32 scale per 128x128 tile (DeepSeek-V3 style)
  kInt4Group,      // 2 values/byte + fp16 scale + fp16 zero point per `group_size` inputs
  kQ8_0,           // GGML: 32 values in 34 bytes (fp16 d, int8 q[32])
  kQ4_0,           // GGML: 32 values in 18 bytes (fp16 d, 16 bytes of nibbles)
  kQ4_1,           // GGML: 32 values in 20 bytes (fp16 d, fp16 m, 16 bytes of nibbles)
  kQ4_K,           // GGML K-quant: 256 values in 144 bytes (scales inside the super-block)
  kQ5_K,           // GGML K-quant: 256 values in 176 bytes
  kQ6_K,           // GGML K-quant: 256 values in 210 bytes
  kQ5_0,           // GGML: 32 values in 22 bytes (llama.cpp's fallback for Q4_K rows not of 256)
  kQ5_1,           // GGML: 32 values in 24 bytes
};

struct TensorFormat {
  FormatKind kind = FormatKind::kBF16;
  int64_t group_size = 0;  // kInt4Group only: input values per scale/zero pair
  // kInt4Group only: columns are stored grouped in GPTQ act-order, with a permutation of the
  // input (one int32 per input column) to apply: "int4-g128-act".
  bool act_order = false;

  static TensorFormat Of(FormatKind kind) { return TensorFormat{kind, 0, false}; }
  static TensorFormat Int4(int64_t group_size, bool act_order = false) {
    return TensorFormat{FormatKind::kInt4Group, group_size, act_order};
  }
  friend bool operator==(const TensorFormat&, const TensorFormat&) = default;
};

// Accepts "f32", "f16"/"fp16", "bf16", "fp8-e4m3" (plain), "fp8" (per-channel),
// "fp8-block" (128x128 tiles), "int4" (group 128) / "int4-g<N>" (N a multiple of 32), "q8_0",
// "q4_0", "q4_1", "q4_k", "q5_k", "q6_k".
// INVALID_ARGUMENT lists the accepted names.
absl::StatusOr<TensorFormat> ParseTensorFormat(std::string_view name);
// The canonical name ParseTensorFormat accepts back ("int4-g64", "fp8", ...).
std::string TensorFormatName(const TensorFormat& format);

// Bytes of one element for the plain kinds (f32, f16, bf16, fp8-e4m3); 0 for the others.
int64_t PlainElementBytes(FormatKind kind);
bool IsPlainFormat(FormatKind kind);

// Storage bits per weight value, excluding scales: 32, 16, 8, 4; GGML types by block average
// (q8_0: 8.5, q4_0: 4.5, q4_1: 5.0, q4_k: 4.5, q5_k: 5.5, q6_k: 6.5625 - their scales live
// inside the block).
double BitsPerValue(const TensorFormat& format);

// Input values that share a scale (and must not be split between ranks): the int4 group,
// the GGML block (32; 256 for the K-quants), the fp8 tile (128); 1 for formats with no
// grouping along inputs.
int64_t InputBlockValues(const TensorFormat& format);
// Output rows that share a scale: 128 for fp8 tiles, 1 otherwise.
int64_t OutputBlockRows(const TensorFormat& format);

// Bytes of a [rows, cols] matrix in `format`, scales and zero points included:
//   plain:        rows * cols * elem_bytes
//   fp8 channel:  rows * cols + rows * 4
//   fp8 block:    rows * cols + ceil(rows / 128) * ceil(cols / 128) * 4
//   int4 group g: rows * cols / 2 + rows * (cols / g) * (2 + 2) (+ cols * 4 with act-order)
//   GGML:         rows * (cols / block_values) * block_bytes   (block_values 32 or 256)
// INVALID_ARGUMENT naming `what` when cols is not a multiple of the input block (int4 group,
// GGML block; fp8 tiles pad instead), int4 cols are odd, a size is negative, or int64 overflows.
absl::StatusOr<int64_t> MatrixBytes(const TensorFormat& format, int64_t rows, int64_t cols,
                                    std::string_view what);

// The element type a format's values are stored in (kF8E4M3 for every fp8 kind, the GGML
// block type for GGML kinds); nullopt for int4 groups, whose 4-bit codes are no DType.
std::optional<DType> ElementDType(const TensorFormat& format);
// The format of a checkpoint tensor stored plainly as `dtype` (F8_E4M3 -> plain fp8-e4m3).
// REQUIRES: !IsIntegerDType(dtype) (I32 words are parts of a quantized matrix, never one).
TensorFormat FormatOfDType(DType dtype);

// KV cache element types: f32, f16, bf16, or fp8 e4m3 (stored as value / scale).
bool IsKvDtype(DType dtype);
// "f32", "f16", "bf16", "fp8" (the names of --kv_dtype in every program) and back. "" is the
// default, f16. INVALID_ARGUMENT lists the names.
absl::StatusOr<DType> ParseKvDtype(std::string_view name);
std::string_view KvDtypeName(DType dtype);

// The part of MatrixBytes that stores the values themselves (no scales or zero points):
// rows * cols * bits / 8, the figure "7B params at INT4 = 3.5 GB" write-ups quote.
int64_t DenseValueBytes(const TensorFormat& format, int64_t num_values);

}  // namespace tpserve

#endif  // TPSERVE_FORMATS_TENSOR_FORMAT_H_
