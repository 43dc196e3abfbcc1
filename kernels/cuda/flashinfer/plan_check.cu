#include "kernels/cuda/flashinfer/plan_check.h"

#include <algorithm>

#include <flashinfer/allocator.h>
#include <flashinfer/attention/scheduler.cuh>

namespace tpserve::cuda::fi {

int32_t KvElementBytes(DType kv_dtype) { return kv_dtype == DType::kF8E4M3 ? 1 : 2; }

Fa2PlanBytes FlashInferFa2PlanBytes(const Fa2PlanCase& c, const FakeDevice& device) {
  SetFakeDevice(device);
  const uint32_t batch = static_cast<uint32_t>(c.qo_lens.size());
  std::vector<int32_t> qo_indptr = {0}, kv_page_indptr = {0};
  for (uint32_t i = 0; i < batch; ++i) {
    qo_indptr.push_back(qo_indptr.back() + c.qo_lens[i]);
    kv_page_indptr.push_back(kv_page_indptr.back() +
                             (c.kv_lens[i] + c.page_size - 1) / c.page_size);
  }
  const uint32_t rows = static_cast<uint32_t>(qo_indptr.back());
  auto [split_kv, new_batch_size, padded_batch_size, cta_tile_q, kv_chunk_size, request_indices,
        qo_tile_indices, kv_tile_indices, merge_indptr, o_indptr] =
      flashinfer::PrefillSplitQOKVIndptr(
          qo_indptr.data(), kv_page_indptr.data(), rows, batch, c.num_qo_heads, c.num_kv_heads,
          c.head_dim, c.page_size, c.max_batch_size_if_split, c.cuda_graph, /*window_left=*/-1,
          /*fixed_split_size=*/c.fixed_split_pages > 0 ? c.fixed_split_pages : -1,
          /*disable_split_kv=*/false, /*uniform_q_len=*/0,
          /*fixed_uniform_q_len=*/false, c.head_dim, KvElementBytes(c.kv_dtype));
  (void)new_batch_size;
  // The allocations of PrefillPlanImpl, in its order and alignments.
  flashinfer::AlignedAllocator ints, floats;
  const size_t id = sizeof(int32_t);
  ints.aligned_alloc_offset(id * padded_batch_size, 16, "request_indices");
  ints.aligned_alloc_offset(id * padded_batch_size, 16, "qo_tile_indices");
  ints.aligned_alloc_offset(id * padded_batch_size, 16, "kv_tile_indices");
  ints.aligned_alloc_offset(id * (batch + 1), 16, "o_indptr");
  ints.aligned_alloc_offset(id, 1, "kv_chunk_size_ptr");
  if (c.cuda_graph) ints.aligned_alloc_offset(sizeof(uint32_t), 16, "total_num_rows");
  if (split_kv) {
    const uint32_t group = c.num_qo_heads / c.num_kv_heads;
    const size_t partial_rows =
        flashinfer::ceil_div(static_cast<size_t>(padded_batch_size) * cta_tile_q, group);
    floats.aligned_alloc_offset(c.num_qo_heads * partial_rows * c.head_dim * sizeof(float), 16,
                                "tmp_v");
    floats.aligned_alloc_offset(c.num_qo_heads * partial_rows * sizeof(float), 16, "tmp_s");
    ints.aligned_alloc_offset(id * (rows + 1), 16, "merge_indptr");
  }
  if (c.cuda_graph) ints.aligned_alloc_offset(sizeof(bool) * padded_batch_size, 16, "mask");
  Fa2PlanBytes out;
  out.float_bytes = static_cast<int64_t>(floats.num_allocated_bytes());
  out.int_bytes = static_cast<int64_t>(ints.num_allocated_bytes());
  out.split_kv = split_kv;
  out.cta_tile_q = cta_tile_q;
  out.kv_chunk_tokens = kv_chunk_size;
  out.padded_batch_size = static_cast<int64_t>(padded_batch_size);
  for (uint32_t b = 0; b < batch; ++b) {
    out.chunks.push_back((o_indptr[b + 1] - o_indptr[b]) / std::max(c.qo_lens[b], 1));
  }
  return out;
}

}  // namespace tpserve::cuda::fi
