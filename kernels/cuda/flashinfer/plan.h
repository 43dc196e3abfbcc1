// FlashInfer's host-side schedulers (flashinfer/attention/scheduler.cuh: PrefillPlan for FA2,
// PrefillSM90Plan for FA3) behind plain C++: they split a batch into CTAs (query tiles x key
// chunks), write the work lists to a pinned host buffer and queue one copy of it to the device
// int workspace; the result is the Fa2Plan / Fa3Plan a launch takes (launch.h).
//
//   PlanWorkspace ws{float_ws, float_bytes, int_ws, int_host, int_bytes};
//   Fa2Plan plan;
//   std::string error;
//   if (PlanFa2(request, ws, stream, &plan, &error) != 0) ...   // a cudaError_t, or -1 + error
//
// Both need a CUDA device at plan time (they read its multiprocessor count). FlashInfer
// reports a bad batch or a too-small workspace by throwing; these catch it and return -1 with
// FlashInfer's message in `error`. Thread-safe: stateless (the buffers are the caller's).
#ifndef TPSERVE_KERNELS_CUDA_FLASHINFER_PLAN_H_
#define TPSERVE_KERNELS_CUDA_FLASHINFER_PLAN_H_

#include <cstdint>
#include <string>

#include "kernels/cuda/flashinfer/launch.h"

namespace tpserve::cuda::fi {

// The buffers one plan may use: device float partials (FA2's split keys), and the int work
// lists, written at `int_host` (pinned) and copied to `int_device` (same size).
struct PlanWorkspace {
  void* float_device = nullptr;
  int64_t float_bytes = 0;
  void* int_device = nullptr;
  void* int_host = nullptr;
  int64_t int_bytes = 0;
};

// One launch's batch as the schedulers see it (host arrays).
struct PlanRequest {
  const int32_t* qo_indptr = nullptr;  // [num_requests + 1] rows
  // FA2: [num_requests + 1] cumulative pages each request needs (ceil(kv_len / page_size)):
  // FlashInfer's scheduler takes key lengths from these.
  const int32_t* kv_page_indptr = nullptr;
  // FA3: [num_requests + 1] each request's first page index in the launch's kv_indices, and
  // [num_requests] its key count (FA3's work items carry both to the device).
  const int32_t* kv_indptr = nullptr;
  const int32_t* kv_len = nullptr;
  int32_t num_requests = 0;
  int32_t num_rows = 0;
  int32_t num_qo_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t page_size = 0;
  int32_t kv_bytes = 2;  // bytes of one KV element
  // FA2 under a CUDA graph: a fixed grid (padded batch) and always the split-keys path, so a
  // recording replays over any step of the same shape.
  bool cuda_graph = false;
  // FA2: keys split into chunks of this many pages from each request's first key, whatever the
  // batch (FlashInfer's fixed_split_size); 0: FlashInfer balances the split over the GPU.
  int32_t fixed_split_pages = 0;
  // FA2: never split keys (FlashInfer's disable_split_kv; wins over fixed_split_pages): a plan
  // that layers with and without a sliding window share (scoring.h).
  bool no_split_keys = false;
};

int PlanFa2(const PlanRequest& request, const PlanWorkspace& ws, void* stream, Fa2Plan* plan,
            std::string* error);
int PlanFa3(const PlanRequest& request, const PlanWorkspace& ws, void* stream, Fa3Plan* plan,
            std::string* error);

}  // namespace tpserve::cuda::fi

#endif  // TPSERVE_KERNELS_CUDA_FLASHINFER_PLAN_H_
