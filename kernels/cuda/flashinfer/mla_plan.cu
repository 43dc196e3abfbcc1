// PlanMla (mla_launch.h): FlashInfer's MLA scheduler and the upload of what it
// staged.
#include <cuda_runtime.h>
// Before FlashInfer's headers: its per-launch device queries and kernel attributes, answered
// once (cached_cuda_queries.h).
#include "kernels/cuda/cached_cuda_queries.h"

#include <exception>

#include <flashinfer/attention/scheduler.cuh>

#include "kernels/cuda/flashinfer/mla_launch.h"

namespace tpserve::cuda::fi {
namespace {

template <typename T>
T *At(void *base, int64_t offset) {
  return reinterpret_cast<T *>(static_cast<char *>(base) + offset);
}

}  // namespace

int PlanMla(const MlaPlanRequest &r, const PlanWorkspace &ws, void *stream, MlaPlan *plan,
            std::string *error) {
  flashinfer::MLAPlanInfo info;
  size_t staged_bytes = 0;
  cudaError_t status = cudaSuccess;
  try {
    status = flashinfer::MLAPlan<int32_t>(
        ws.float_device, static_cast<size_t>(ws.float_bytes), ws.int_device, ws.int_host,
        static_cast<size_t>(ws.int_bytes), info, staged_bytes, const_cast<int32_t *>(r.qo_indptr),
        const_cast<int32_t *>(r.kv_indptr), const_cast<int32_t *>(r.kv_len),
        static_cast<uint32_t>(r.num_requests), static_cast<uint32_t>(r.num_heads),
        /*head_dim_o=*/512, /*causal=*/true, static_cast<cudaStream_t>(stream));
  } catch (const std::exception &e) {
    *error = e.what();
    return -1;
  }
  if (status != cudaSuccess) return static_cast<int>(status);
  status = cudaMemcpyAsync(ws.int_device, ws.int_host, staged_bytes, cudaMemcpyHostToDevice,
                           static_cast<cudaStream_t>(stream));
  if (status != cudaSuccess) return static_cast<int>(status);
  void *const ints = ws.int_device;
  plan->num_blks_x = static_cast<int32_t>(info.num_blks_x);
  plan->num_blks_y = static_cast<int32_t>(info.num_blks_y);
  plan->q_indptr = At<int32_t>(ints, info.q_indptr_offset);
  plan->kv_indptr = At<int32_t>(ints, info.kv_indptr_offset);
  plan->partial_indptr = At<int32_t>(ints, info.partial_indptr_offset);
  plan->merge_packed_offset_start = At<int32_t>(ints, info.merge_packed_offset_start_offset);
  plan->merge_packed_offset_end = At<int32_t>(ints, info.merge_packed_offset_end_offset);
  plan->merge_partial_packed_offset_start =
      At<int32_t>(ints, info.merge_partial_packed_offset_start_offset);
  plan->merge_partial_packed_offset_end =
      At<int32_t>(ints, info.merge_partial_packed_offset_end_offset);
  plan->merge_partial_stride = At<int32_t>(ints, info.merge_partial_stride_offset);
  plan->q_len = At<int32_t>(ints, info.q_len_offset);
  plan->kv_len = At<int32_t>(ints, info.kv_len_offset);
  plan->q_start = At<int32_t>(ints, info.q_start_offset);
  plan->kv_start = At<int32_t>(ints, info.kv_start_offset);
  plan->kv_end = At<int32_t>(ints, info.kv_end_offset);
  plan->work_indptr = At<int32_t>(ints, info.work_indptr_offset);
  plan->partial_o = At<void>(ws.float_device, info.partial_o_offset);
  plan->partial_lse = At<float>(ws.float_device, info.partial_lse_offset);
  return 0;
}

}  // namespace tpserve::cuda::fi
