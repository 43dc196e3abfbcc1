// Packs one step's metadata (StepInputs: token ids, positions, sequences with their block
// tables, logit rows) into one array of int32 words, so the CUDA backend uploads it with a
// single host-to-device copy, plus the work lists the attention kernels walk (decode
// sequences, prefill query tiles). Plain C++: tested without a GPU.
//
//   PackedStep packed = PackStep(step);
//   cudaMemcpyAsync(device_words, packed.words.data(), packed.words.size() * 4, ...);
//   DeviceStep d = packed.Resolve(static_cast<const int32_t*>(device_words));
//
// Thread-safe: pure functions and a value type.
#ifndef TPSERVE_KERNELS_CUDA_STEP_METADATA_H_
#define TPSERVE_KERNELS_CUDA_STEP_METADATA_H_

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/device_types.h"

namespace tpserve::cuda {

struct PackedStep {
  // Layout, in words: token_ids | positions | row_seq | seqs (4 words each) | logit_rows |
  // decode_seqs | prefill_tiles (2 words each) | fi_qo_indptr | fi_kv_indptr | fi_kv_len |
  // fi_row_qo_indptr | fi_row_kv_indptr | fi_row_kv_len | block tables. Padding sequences
  // have table_offset -1; the tables hold one word (page 0) for each, where their
  // fi_kv_indptr points (FlashInfer reads one key for them).
  std::vector<int32_t> words;
  DeviceStep counts;  // counts filled in, pointers null
  int64_t offset_token_ids = 0;
  int64_t offset_positions = 0;
  int64_t offset_row_seq = 0;
  int64_t offset_seqs = 0;
  int64_t offset_tables = 0;
  int64_t offset_logit_rows = 0;
  int64_t offset_decode = 0;
  int64_t offset_prefill = 0;
  int64_t offset_fi_qo_indptr = 0;
  int64_t offset_fi_kv_indptr = 0;
  int64_t offset_fi_kv_len = 0;
  int64_t offset_fi_row_qo_indptr = 0;
  int64_t offset_fi_row_kv_indptr = 0;
  int64_t offset_fi_row_kv_len = 0;

  // `counts` with every pointer set into `base`, a device copy of `words`.
  DeviceStep Resolve(const int32_t* base) const;
};

// REQUIRES: sequences cover disjoint row ranges; every count and table length fits int32.
PackedStep PackStep(const StepInputs& step);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_STEP_METADATA_H_
