// FlashInfer's multi-head latent attention (DeepSeek-V2/V3's absorbed form) behind plain C++:
// the Hopper kernel of flashinfer/attention/mla_hopper.cuh (BatchMLAPageAttentionHopper) and
// its scheduler (MLAPlan, flashinfer/attention/scheduler.cuh), over our latent pool.
//
//   MlaPlan plan;  std::string error;
//   if (PlanMla(request, ws, stream, &plan, &error) != 0) ...   // once per step
//   TPK_LAUNCH(RunMlaBf16(batch, plan, stream));                 // per layer
//
// What is built: q and output bf16 over a latent cache in bf16 or e4m3 (one scale for the
// whole pool, FlashInfer's ckv_scale = kpe_scale); head_dim_ckv 512 and head_dim_kpe 64
// (kMlaCkvDim, kMlaKpeDim of kernels/cuda/mla_plan.h); causal; sm_90a only. Our tensors are
// read and written in place through FlashInfer's strides (MLAParams, mla_params.cuh), no copy:
//   q [rows, heads, 576] = [W_UK^T q_nope (512), q_rope (64)]: q_nope = q, q_pe = q + 512, both
//     with stride_n = heads * 576, stride_h = 576;
//   the pool [pages, page_size, 576] = [c (512), k_rope (64)]: ckv = pool, kpe = pool + 512,
//     both with stride_page = page_size * 576, stride_n = 576;
//   out [rows, heads, 576]: FlashInfer writes the 512 attention-weighted c of each head
//     (o_stride_n = heads * 576, o_stride_h = 576) and never the last 64 (mla_attention.h
//     zeroes them).
// Every pointer is device memory. Thread-safe: stateless.
#ifndef TPSERVE_KERNELS_CUDA_FLASHINFER_MLA_LAUNCH_H_
#define TPSERVE_KERNELS_CUDA_FLASHINFER_MLA_LAUNCH_H_

#include <cstdint>
#include <string>

#include "kernels/cuda/flashinfer/plan.h"

namespace tpserve::cuda::fi {

// One launch over the step's requests (launch.h's PagedBatch in MLA's terms).
struct MlaBatch {
  const void *q = nullptr;     // [rows, num_heads, 576]
  void *o = nullptr;           // [rows, num_heads, 576]; the first 512 of each head written
  const void *pool = nullptr;  // [pages, page_size, 576]
  int32_t num_heads = 0;
  int32_t page_size = 0;
  const int32_t *kv_indices = nullptr;  // page ids (the step's block tables)
  float sm_scale = 1.0f;
  float kv_scale = 1.0f;  // e4m3: value = code * kv_scale (RunMlaFp8 only)
};

// MLAPlan's result resolved to device pointers into the workspace
// (MLAPlanInfo's offsets).
struct MlaPlan {
  int32_t num_blks_x = 0;  // CTAs per cluster (1 or 2)
  int32_t num_blks_y = 0;  // clusters
  int32_t *q_indptr = nullptr;
  int32_t *kv_indptr = nullptr;
  int32_t *partial_indptr = nullptr;
  int32_t *merge_packed_offset_start = nullptr;
  int32_t *merge_packed_offset_end = nullptr;
  int32_t *merge_partial_packed_offset_start = nullptr;
  int32_t *merge_partial_packed_offset_end = nullptr;
  int32_t *merge_partial_stride = nullptr;
  int32_t *q_len = nullptr;
  int32_t *kv_len = nullptr;
  int32_t *q_start = nullptr;
  int32_t *kv_start = nullptr;
  int32_t *kv_end = nullptr;
  int32_t *work_indptr = nullptr;
  void *partial_o = nullptr;  // bf16 split partials (float workspace)
  float *partial_lse = nullptr;
};

// The step as MLAPlan sees it (host arrays): request b has query rows
// [qo_indptr[b], qo_indptr[b+1]) and attends causally to kv_len[b] keys whose
// pages start at kv_indices[kv_indptr[b]].
struct MlaPlanRequest {
  const int32_t *qo_indptr = nullptr;  // [num_requests + 1]
  const int32_t *kv_indptr = nullptr;  // [num_requests + 1]
  const int32_t *kv_len = nullptr;     // [num_requests]
  int32_t num_requests = 0;
  int32_t num_heads = 0;
};

// Runs MLAPlan (host; it reads the device's multiprocessor count), then queues
// on `stream` the copy of the work lists it staged at ws.int_host to
// ws.int_device (FlashInfer's own Python wrapper makes that copy itself).
// ws.float_device holds the split partials. Returns 0, a cudaError_t, or -1
// with FlashInfer's message in `error` (it throws when the workspace is short).
// REQUIRES: MlaWorkBound (mla_plan.h) of the request <= kMlaMaxWorks: MLAPlan
// writes its work lists past their arrays otherwise, without a check of its
// own.
int PlanMla(const MlaPlanRequest &request, const PlanWorkspace &ws, void *stream, MlaPlan *plan,
            std::string *error);

// Queue the Hopper MLA kernel (a cooperative launch of num_blks_x x num_blks_y
// CTAs) over a bf16 or an e4m3 pool. Return a cudaError_t as int. REQUIRES:
// PlanMla for this step; compute capability 9.0.
int RunMlaBf16(const MlaBatch &batch, const MlaPlan &plan, void *stream);
int RunMlaFp8(const MlaBatch &batch, const MlaPlan &plan, void *stream);

}  // namespace tpserve::cuda::fi

#endif  // TPSERVE_KERNELS_CUDA_FLASHINFER_MLA_LAUNCH_H_
