#include "kernels/cuda/flashinfer/plan_check.h"

#include <algorithm>

#include <flashinfer/allocator.h>
#include <flashinfer/attention/scheduler.cuh>

namespace tpserve::cuda::fi {

Fa2PlanBytes FlashInferFa2PlanBytes(const std::vector<int32_t>& qo_lens,
                                    const std::vector<int32_t>& kv_lens, int32_t num_qo_heads,
                                    int32_t num_kv_heads, int32_t head_dim, int32_t page_size,
                                    int32_t max_batch_size_if_split, bool cuda_graph,
                                    int32_t fixed_split_pages) {
  const uint32_t batch = static_cast<uint32_t>(qo_lens.size());
  std::vector<int32_t> qo_indptr = {0}, kv_page_indptr = {0};
  for (uint32_t i = 0; i < batch; ++i) {
    qo_indptr.push_back(qo_indptr.back() + qo_lens[i]);
    kv_page_indptr.push_back(kv_page_indptr.back() + (kv_lens[i] + page_size - 1) / page_size);
  }
  const uint32_t rows = static_cast<uint32_t>(qo_indptr.back());
  auto [split_kv, new_batch_size, padded_batch_size, cta_tile_q, kv_chunk_size, request_indices,
        qo_tile_indices, kv_tile_indices, merge_indptr, o_indptr] =
      flashinfer::PrefillSplitQOKVIndptr(
          qo_indptr.data(), kv_page_indptr.data(), rows, batch, num_qo_heads, num_kv_heads,
          head_dim, page_size, max_batch_size_if_split, cuda_graph, /*window_left=*/-1,
          /*fixed_split_size=*/fixed_split_pages > 0 ? fixed_split_pages : -1,
          /*disable_split_kv=*/false, /*uniform_q_len=*/0,
          /*fixed_uniform_q_len=*/false, head_dim, /*kv_dtype_bytes=*/2);
  (void)new_batch_size;
  // The allocations of PrefillPlanImpl, in its order and alignments.
  flashinfer::AlignedAllocator ints, floats;
  const size_t id = sizeof(int32_t);
  ints.aligned_alloc_offset(id * padded_batch_size, 16, "request_indices");
  ints.aligned_alloc_offset(id * padded_batch_size, 16, "qo_tile_indices");
  ints.aligned_alloc_offset(id * padded_batch_size, 16, "kv_tile_indices");
  ints.aligned_alloc_offset(id * (batch + 1), 16, "o_indptr");
  ints.aligned_alloc_offset(id, 1, "kv_chunk_size_ptr");
  if (cuda_graph) ints.aligned_alloc_offset(sizeof(uint32_t), 16, "total_num_rows");
  if (split_kv) {
    const uint32_t group = num_qo_heads / num_kv_heads;
    const size_t partial_rows =
        flashinfer::ceil_div(static_cast<size_t>(padded_batch_size) * cta_tile_q, group);
    floats.aligned_alloc_offset(num_qo_heads * partial_rows * head_dim * sizeof(float), 16,
                                "tmp_v");
    floats.aligned_alloc_offset(num_qo_heads * partial_rows * sizeof(float), 16, "tmp_s");
    ints.aligned_alloc_offset(id * (rows + 1), 16, "merge_indptr");
  }
  if (cuda_graph) ints.aligned_alloc_offset(sizeof(bool) * padded_batch_size, 16, "mask");
  Fa2PlanBytes out;
  out.float_bytes = static_cast<int64_t>(floats.num_allocated_bytes());
  out.int_bytes = static_cast<int64_t>(ints.num_allocated_bytes());
  out.split_kv = split_kv;
  out.cta_tile_q = cta_tile_q;
  out.kv_chunk_tokens = kv_chunk_size;
  for (uint32_t b = 0; b < batch; ++b) {
    out.chunks.push_back((o_indptr[b + 1] - o_indptr[b]) / std::max(qo_lens[b], 1));
  }
  return out;
}

}  // namespace tpserve::cuda::fi
