#include "kernels/cuda/flashinfer/plan.h"

#include <cuda_runtime.h>
// Before FlashInfer's headers: its per-launch device queries and kernel attributes, answered
// once (cached_cuda_queries.h).
#include "kernels/cuda/cached_cuda_queries.h"

#include <exception>

#include <flashinfer/attention/scheduler.cuh>

namespace tpserve::cuda::fi {
namespace {

template <typename T>
T* At(void* base, int64_t offset) {
  return reinterpret_cast<T*>(static_cast<char*>(base) + offset);
}

}  // namespace

int PlanFa2(const PlanRequest& r, const PlanWorkspace& ws, void* stream, Fa2Plan* plan,
            std::string* error) {
  flashinfer::PrefillPlanInfo info;
  cudaError_t status = cudaSuccess;
  try {
    status = flashinfer::PrefillPlan<int32_t>(
        ws.float_device, static_cast<size_t>(ws.float_bytes), ws.int_device, ws.int_host,
        static_cast<size_t>(ws.int_bytes), info, const_cast<int32_t*>(r.qo_indptr),
        const_cast<int32_t*>(r.kv_page_indptr), static_cast<uint32_t>(r.num_rows),
        static_cast<uint32_t>(r.num_requests), static_cast<uint32_t>(r.num_qo_heads),
        static_cast<uint32_t>(r.num_kv_heads), static_cast<uint32_t>(r.head_dim),
        static_cast<uint32_t>(r.head_dim), static_cast<uint32_t>(r.page_size), r.cuda_graph,
        // -1: split points counted over every key (only unsplit plans serve windowed layers).
        /*sizeof_dtype_o=*/2, /*window_left=*/-1,
        /*fixed_split_size=*/r.fixed_split_pages > 0 ? r.fixed_split_pages : -1,
        /*disable_split_kv=*/r.no_split_keys, /*num_colocated_ctas=*/0, /*uniform_q_len=*/0,
        /*fixed_uniform_q_len=*/false, static_cast<cudaStream_t>(stream),
        static_cast<uint32_t>(r.kv_bytes));
  } catch (const std::exception& e) {
    *error = e.what();
    return -1;
  }
  if (status != cudaSuccess) return static_cast<int>(status);
  plan->cta_tile_q = static_cast<int32_t>(info.cta_tile_q);
  plan->padded_batch_size = static_cast<int32_t>(info.padded_batch_size);
  plan->split_kv = info.split_kv;
  plan->request_indices = At<int32_t>(ws.int_device, info.request_indices_offset);
  plan->qo_tile_indices = At<int32_t>(ws.int_device, info.qo_tile_indices_offset);
  plan->kv_tile_indices = At<int32_t>(ws.int_device, info.kv_tile_indices_offset);
  plan->o_indptr = At<int32_t>(ws.int_device, info.o_indptr_offset);
  plan->kv_chunk_size_ptr = At<int32_t>(ws.int_device, info.kv_chunk_size_ptr_offset);
  plan->merge_indptr =
      info.split_kv ? At<int32_t>(ws.int_device, info.merge_indptr_offset) : nullptr;
  plan->block_valid_mask =
      info.enable_cuda_graph ? At<bool>(ws.int_device, info.block_valid_mask_offset) : nullptr;
  plan->total_num_rows =
      info.enable_cuda_graph ? At<uint32_t>(ws.int_device, info.total_num_rows_offset) : nullptr;
  plan->tmp_v = info.split_kv ? At<void>(ws.float_device, info.v_offset) : nullptr;
  plan->tmp_s = info.split_kv ? At<float>(ws.float_device, info.s_offset) : nullptr;
  return 0;
}

int PlanFa3(const PlanRequest& r, const PlanWorkspace& ws, void* stream, Fa3Plan* plan,
            std::string* error) {
  flashinfer::PrefillPlanSM90Info info;
  cudaError_t status = cudaSuccess;
  try {
    status = flashinfer::PrefillSM90Plan<int32_t>(
        ws.float_device, static_cast<size_t>(ws.float_bytes), ws.int_device, ws.int_host,
        static_cast<size_t>(ws.int_bytes), info, const_cast<int32_t*>(r.qo_indptr),
        const_cast<int32_t*>(r.kv_indptr), const_cast<int32_t*>(r.kv_len),
        static_cast<uint32_t>(r.num_rows), static_cast<uint32_t>(r.num_requests),
        static_cast<uint32_t>(r.num_qo_heads), static_cast<uint32_t>(r.num_kv_heads),
        static_cast<uint32_t>(r.head_dim), static_cast<uint32_t>(r.head_dim),
        static_cast<uint32_t>(r.page_size), /*causal=*/true, /*enable_cuda_graph=*/false,
        /*sizeof_dtype_o=*/2, static_cast<cudaStream_t>(stream));
  } catch (const std::exception& e) {
    *error = e.what();
    return -1;
  }
  if (status != cudaSuccess) return static_cast<int>(status);
  if (info.same_schedule_for_all_heads) {
    *error = "FA3 plan wants one schedule for all heads (over 4,096 query tiles per head); "
             "only the per-head scheduler is built";
    return -1;
  }
  plan->qo_tile_indices = At<int32_t>(ws.int_device, info.qo_tile_indices_offset);
  plan->qo_indptr = At<int32_t>(ws.int_device, info.qo_indptr_offset);
  plan->kv_indptr = At<int32_t>(ws.int_device, info.kv_indptr_offset);
  plan->qo_lens = At<int32_t>(ws.int_device, info.qo_len_offset);
  plan->kv_lens = At<int32_t>(ws.int_device, info.kv_len_offset);
  plan->head_indices = At<int32_t>(ws.int_device, info.head_indices_offset);
  plan->work_indptr = At<int32_t>(ws.int_device, info.work_indptr_offset);
  plan->batch_indices = At<int32_t>(ws.int_device, info.batch_indices_offset);
  plan->same_schedule_for_all_heads = false;
  return 0;
}

}  // namespace tpserve::cuda::fi
