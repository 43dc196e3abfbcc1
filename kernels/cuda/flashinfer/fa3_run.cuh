// FA3 paged attention: our Params struct for FlashInfer's sm90
// BatchPrefillWithPagedKVCacheDispatched (FlashInfer's JIT generates one like it from
// csrc/batch_prefill_sm90_customize_config.jinja) and the launch for one head_dim. Included
// only by the fa3_*.cu instantiation files.
#ifndef TPSERVE_KERNELS_CUDA_FLASHINFER_FA3_RUN_CUH_
#define TPSERVE_KERNELS_CUDA_FLASHINFER_FA3_RUN_CUH_

#include <cuda_runtime.h>
// Before FlashInfer's headers: its per-launch device queries and kernel attributes, answered
// once (cached_cuda_queries.h).
#include "kernels/cuda/cached_cuda_queries.h"

#include <cstdint>

#include <flashinfer/attention/hopper/attention_updater.cuh>
#include <flashinfer/attention/hopper/prefill_sm90.cuh>
#include <flashinfer/attention/hopper/variant_helper.cuh>
#include <flashinfer/attention/hopper/variants.cuh>
#include <flashinfer/cutlass_utils.cuh>

#include "kernels/cuda/flashinfer/launch.h"

namespace tpserve::cuda::fi {

struct Fa3Params {
  using DTypeQ = flashinfer::cutlass_dtype_t<__nv_bfloat16>;
  using DTypeKV = flashinfer::cutlass_dtype_t<__nv_bfloat16>;
  using DTypeO = flashinfer::cutlass_dtype_t<__nv_bfloat16>;
  using IdType = int32_t;

  DTypeQ* q_ptr;
  DTypeKV* k_ptr;
  DTypeKV* v_ptr;
  DTypeO* o_ptr;
  float* lse_ptr;

  IdType* qo_tile_indices;
  IdType* qo_indptr;
  IdType* kv_indptr;
  IdType* kv_indices;
  IdType* qo_lens;
  IdType* kv_lens;
  IdType* head_indices;
  IdType* work_indptr;
  IdType* batch_indices;

  struct AdditionalParams {  // what StandardAttention reads
    float sm_scale;
    float logits_soft_cap;
  } additional_params;

  int64_t q_stride_n;
  int64_t k_stride_n;
  int64_t v_stride_n;
  int64_t o_stride_n;
  int64_t q_stride_h;
  int64_t k_stride_h;
  int64_t v_stride_h;
  int64_t o_stride_h;
  int64_t nnz_qo;
  int64_t k_page_stride;  // elements between pages
  int64_t v_page_stride;

  int head_dim;
  int num_qo_heads;
  int num_kv_heads;
  int group_size;
  int page_size;
  int window_left;

  bool causal;
};

template <uint32_t kHeadDim>
int RunFa3Typed(const PagedBatch& b, const Fa3Plan& plan, void* stream) {
  if (plan.same_schedule_for_all_heads) return static_cast<int>(cudaErrorNotSupported);
  // Built with StandardAttention and LEFT_SLIDING_WINDOW false: no window, no soft-cap.
  if (!Fa3Serves(b.scoring)) return static_cast<int>(cudaErrorNotSupported);
  using Q = Fa3Params::DTypeQ;
  using KV = Fa3Params::DTypeKV;
  using O = Fa3Params::DTypeO;
  Fa3Params p{};
  p.q_ptr = static_cast<Q*>(const_cast<void*>(b.q));
  p.k_ptr = static_cast<KV*>(const_cast<void*>(b.k_pool));
  p.v_ptr = static_cast<KV*>(const_cast<void*>(b.v_pool));
  p.o_ptr = static_cast<O*>(b.o);
  p.lse_ptr = nullptr;
  p.qo_tile_indices = plan.qo_tile_indices;
  p.qo_indptr = plan.qo_indptr;
  p.kv_indptr = plan.kv_indptr;
  p.kv_indices = const_cast<int32_t*>(b.kv_indices);
  p.qo_lens = plan.qo_lens;
  p.kv_lens = plan.kv_lens;
  p.head_indices = plan.head_indices;
  p.work_indptr = plan.work_indptr;
  p.batch_indices = plan.batch_indices;
  p.additional_params.sm_scale = b.sm_scale;
  p.additional_params.logits_soft_cap = 0.0f;
  const int64_t row = static_cast<int64_t>(b.num_qo_heads) * b.head_dim;
  const int64_t kv_row = static_cast<int64_t>(b.num_kv_heads) * b.head_dim;
  p.q_stride_n = row;
  p.o_stride_n = row;
  p.q_stride_h = b.head_dim;
  p.o_stride_h = b.head_dim;
  p.k_stride_n = kv_row;  // NHD pages: [page][slot][head][dim]
  p.v_stride_n = kv_row;
  p.k_stride_h = b.head_dim;
  p.v_stride_h = b.head_dim;
  p.nnz_qo = b.num_rows;
  p.k_page_stride = kv_row * b.page_size;
  p.v_page_stride = kv_row * b.page_size;
  p.head_dim = b.head_dim;
  p.num_qo_heads = b.num_qo_heads;
  p.num_kv_heads = b.num_kv_heads;
  p.group_size = b.num_qo_heads / b.num_kv_heads;
  p.page_size = b.page_size;
  p.window_left = -1;
  p.causal = true;
  return static_cast<int>(flashinfer::BatchPrefillWithPagedKVCacheDispatched<
                          kHeadDim, kHeadDim, flashinfer::MaskMode::kCausal,
                          /*LEFT_SLIDING_WINDOW=*/false, /*SAME_SCHEDULE_FOR_ALL_HEADS=*/false,
                          flashinfer::StandardAttention, Fa3Params>(
      p, /*enable_pdl=*/false, static_cast<cudaStream_t>(stream)));
}

}  // namespace tpserve::cuda::fi

#endif  // TPSERVE_KERNELS_CUDA_FLASHINFER_FA3_RUN_CUH_
