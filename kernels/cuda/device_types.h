// Plain structs that describe tensors and one step's metadata to the CUDA kernels: the only
// types the kernel files (.cu) and the backend (.cc) share, so the launcher headers stay plain
// C++ (no CUDA or Abseil includes).
//
//   DeviceWeight w = ToDeviceWeight(matrix);        // cuda_backend.cc
//   LaunchFp8Gemv(x, m, w, y, /*y_f32=*/false, stream);
//
// Every pointer is device memory. Thread-safe: plain values.
#ifndef TPSERVE_KERNELS_CUDA_DEVICE_TYPES_H_
#define TPSERVE_KERNELS_CUDA_DEVICE_TYPES_H_

#include <cstdint>

namespace tpserve::cuda {

// A launcher's result: a cudaError_t as int (0 == cudaSuccess), read with cudaGetLastError()
// right after the launch.
using LaunchResult = int;

// How a weight matrix stores its values (mirrors the FormatKinds the CUDA backend supports).
enum class WeightKind : int32_t {
  kF32,
  kF16,
  kBF16,
  kFp8,            // plain e4m3, scale 1
  kFp8PerChannel,  // e4m3; f32 scale per row
  kFp8Block128,    // e4m3; f32 scale per 128x128 tile
  kInt4Group,      // GGML Q4_0 nibble order per 32 columns; f16 scale and zero per group
};

// W[rows, cols] as in kernels/weight_matrix.h.
struct DeviceWeight {
  WeightKind kind = WeightKind::kBF16;
  int32_t group_size = 0;  // kInt4Group
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_bytes = 0;
  const void* scales = nullptr;  // f32 (fp8 kinds) or f16 (int4); nullptr: 1
  const void* zeros = nullptr;   // f16 (int4)
  int64_t scale_stride = 0;
  const float* bias = nullptr;   // f32 [rows] the GEMVs add to each output row; nullptr: none
};

enum class KvKind : int32_t { kF32, kF16, kBF16, kFp8 };

// One layer's paged pools: [num_blocks][block_size][num_kv_heads][head_dim].
struct DeviceKvPool {
  void* k = nullptr;
  void* v = nullptr;
  KvKind kind = KvKind::kF16;
  float k_scale = 1.0f;  // fp8: stored code = value / scale
  float v_scale = 1.0f;
  int64_t num_blocks = 0;
  int64_t block_size = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
};

// One sequence of the step (AttentionSequence, with its block table flattened).
struct DeviceSeq {
  int32_t first_row;
  int32_t num_tokens;
  int32_t start_position;
  int32_t table_offset;  // index of its logical block 0 in DeviceStep::block_tables; -1: a
                         // padding row (no KV write, zero attention output)
};

// Device pointers into the step's metadata buffer (see step_metadata.h for the packing) and
// the host-side counts the launchers size their grids with.
struct DeviceStep {
  const int32_t* token_ids = nullptr;  // [num_token_ids]
  int32_t num_token_ids = 0;
  const int32_t* positions = nullptr;  // [num_positions]
  int32_t num_positions = 0;
  const int32_t* row_seq = nullptr;  // [num_rows]: sequence of each row, -1 for none
  int32_t num_rows = 0;
  const DeviceSeq* seqs = nullptr;  // [num_seqs]
  int32_t num_seqs = 0;
  const int32_t* block_tables = nullptr;
  const int32_t* logit_rows = nullptr;  // [num_logit_rows]
  int32_t num_logit_rows = 0;
  const int32_t* decode_seqs = nullptr;  // [num_decode]: sequences with one query token
                                         // (padding ones included)
  int32_t num_decode = 0;
  const int32_t* prefill_tiles = nullptr;  // [num_prefill_tiles][2]: (sequence, first query)
  int32_t num_prefill_tiles = 0;
  int32_t max_decode_context = 0;  // most keys a (non-padding) decode row attends to
  int32_t num_padding = 0;         // padding sequences (AttentionSequence::padding)
  // FlashInfer's view of the step (flashinfer/flashinfer_attention.h): every sequence is a
  // request, padding ones included (one key: their table word, page 0), in step order.
  const int32_t* fi_qo_indptr = nullptr;  // [num_seqs + 1]: first row of each, then num_rows
  const int32_t* fi_kv_indptr = nullptr;  // [num_seqs + 1]: each one's first word in
                                          // block_tables (FlashInfer's page indices)
  const int32_t* fi_kv_len = nullptr;     // [num_seqs]: keys each attends to (padding: 1)
  // The same with every query row a request of its own (the deterministic plan: a row's floats
  // then depend on nothing but its own query and keys): rows, each row's sequence's first
  // table word, and its key count (its position + 1).
  const int32_t* fi_row_qo_indptr = nullptr;  // [num_rows + 1]: 0, 1, ..., num_rows
  const int32_t* fi_row_kv_indptr = nullptr;  // [num_rows + 1]
  const int32_t* fi_row_kv_len = nullptr;     // [num_rows]
  int32_t fi_max_kv_len = 0;  // the most keys a request attends to
  bool fi_rows_in_order = false;  // sequences cover rows 0.. in order, without gaps (what
                                  // FlashInfer's request layout needs)
};

// Query rows per prefill attention tile (the packer cuts multi-token sequences into these).
inline constexpr int32_t kPrefillTileRows = 32;

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_DEVICE_TYPES_H_
