// The FlashInfer kernels we instantiate (kernels/cuda/flashinfer/*.cu), behind plain C++ entry
// points: FlashInfer's paged attention of FA2 (any sm_80+, here built for sm_90a) and FA3
// (Hopper's TMA/wgmma path), over our paged KV pools. Plain C++ (no CUDA or FlashInfer
// includes), so the .cc side of the backend can call them; every pointer is device memory.
//
//   PagedBatch batch = ...;  Fa2Plan plan = ...;   // FlashInferAttention fills them
//   TPK_LAUNCH(RunFa2(FiTypes::kBf16, batch, plan, stream));   // a cudaError_t as int
//
// What is built (and nothing else, to keep the cold build inside CI's budget):
//   FA2  q bf16 over KV bf16 or e4m3 (output bf16), q f16 over KV f16 (output f16);
//        head_dim 64 (SmolLM2) and 128 (Llama 3.x); query tiles of 16, 64 and 128 rows.
//   FA3  q, KV and output bf16; head_dim 64 and 128.
// Both causal, no custom mask. FA2 in three variants (scoring.h): plain, with a sliding window,
// and with a window and a logit soft-cap; FA3 plain only (a plan avoids it for layers with a
// window or cap, scoring.h's PlanConstraints). RoPE is applied before the KV write
// (elementwise_kernels.h), so FlashInfer's own positional encoding is off.
// Thread-safe: stateless.
#ifndef TPSERVE_KERNELS_CUDA_FLASHINFER_LAUNCH_H_
#define TPSERVE_KERNELS_CUDA_FLASHINFER_LAUNCH_H_

#include <cstdint>

#include "kernels/cuda/flashinfer/scoring.h"

namespace tpserve::cuda::fi {

// Element types of one instantiation: q and output, and the KV pool.
enum class FiTypes : int32_t {
  kBf16,     // q, KV, out bf16
  kBf16Fp8,  // q, out bf16; KV e4m3 (its scale folded into sm_scale and applied to out after)
  kF16,      // q, KV, out f16 (the backend converts q from bf16 and out back)
};

// Whether an instantiation exists for this shape.
bool Fa2Built(FiTypes types, int32_t head_dim);
bool Fa3Built(FiTypes types, int32_t head_dim);

// A batch of requests over the paged pools, in FlashInfer's terms (see DeviceStep's fi_*
// arrays, step_metadata.h): request b has query rows [q_indptr[b], q_indptr[b+1]), attends
// causally to kv_len[b] keys whose pages are kv_indices[kv_indptr[b] ...].
struct PagedBatch {
  const void* q = nullptr;  // [rows, num_qo_heads, head_dim]
  void* o = nullptr;        // [rows, num_qo_heads, head_dim]
  const void* k_pool = nullptr;  // [pages, page_size, num_kv_heads, head_dim]
  const void* v_pool = nullptr;
  int32_t num_qo_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t page_size = 0;
  int32_t num_requests = 0;
  int32_t num_rows = 0;
  const int32_t* q_indptr = nullptr;    // [num_requests + 1]
  const int32_t* kv_indptr = nullptr;   // [num_requests + 1], into kv_indices
  const int32_t* kv_indices = nullptr;  // page ids
  const int32_t* kv_len = nullptr;      // [num_requests]
  float sm_scale = 1.0f;                // softmax scale (times the K scale for e4m3 KV)
  FiScoring scoring;                    // window and soft-cap (FA3: plain only)
};

// The FA2 work partition of one launch: FlashInfer's PrefillPlanInfo resolved to device
// pointers into the int workspace, plus the float partials when the keys are split.
struct Fa2Plan {
  int32_t cta_tile_q = 0;           // 16, 64 or 128
  int32_t padded_batch_size = 0;    // CTAs along x
  bool split_kv = false;            // partials in tmp_v/tmp_s, then FlashInfer's merge
  int32_t* request_indices = nullptr;
  int32_t* qo_tile_indices = nullptr;
  int32_t* kv_tile_indices = nullptr;
  int32_t* merge_indptr = nullptr;  // split_kv only
  int32_t* o_indptr = nullptr;
  int32_t* kv_chunk_size_ptr = nullptr;
  bool* block_valid_mask = nullptr;       // CUDA-graph plans only
  uint32_t* total_num_rows = nullptr;     // CUDA-graph plans only
  void* tmp_v = nullptr;                  // split_kv: partial outputs (output type)
  float* tmp_s = nullptr;                 // split_kv: their log-sum-exps
};

// The FA3 work partition: FlashInfer's PrefillPlanSM90Info resolved to device pointers.
struct Fa3Plan {
  int32_t* qo_tile_indices = nullptr;
  int32_t* qo_indptr = nullptr;
  int32_t* kv_indptr = nullptr;
  int32_t* qo_lens = nullptr;
  int32_t* kv_lens = nullptr;
  int32_t* head_indices = nullptr;
  int32_t* work_indptr = nullptr;
  int32_t* batch_indices = nullptr;
  bool same_schedule_for_all_heads = false;  // not built: planning refuses it (see .cc)
};

// Queue causal paged attention on `stream` (a cudaStream_t). Returns a cudaError_t as int
// (cudaErrorNotSupported when no instantiation matches, FA3 with a window or cap included).
// REQUIRES: Fa2Built / Fa3Built; for FA2 with a window, a plan that does not split keys
// (scoring.h).
int RunFa2(FiTypes types, const PagedBatch& batch, const Fa2Plan& plan, void* stream);
int RunFa3(FiTypes types, const PagedBatch& batch, const Fa3Plan& plan, void* stream);

// The per-head-dim entry points the instantiation files define (RunFa2 dispatches to them).
int RunFa2Bf16Hd64(const PagedBatch& batch, const Fa2Plan& plan, void* stream);
int RunFa2Bf16Hd128(const PagedBatch& batch, const Fa2Plan& plan, void* stream);
int RunFa2Fp8Hd64(const PagedBatch& batch, const Fa2Plan& plan, void* stream);
int RunFa2Fp8Hd128(const PagedBatch& batch, const Fa2Plan& plan, void* stream);
int RunFa2F16Hd64(const PagedBatch& batch, const Fa2Plan& plan, void* stream);
int RunFa2F16Hd128(const PagedBatch& batch, const Fa2Plan& plan, void* stream);
int RunFa3Bf16Hd64(const PagedBatch& batch, const Fa3Plan& plan, void* stream);
int RunFa3Bf16Hd128(const PagedBatch& batch, const Fa3Plan& plan, void* stream);

}  // namespace tpserve::cuda::fi

#endif  // TPSERVE_KERNELS_CUDA_FLASHINFER_LAUNCH_H_
