// FA2 paged attention: our Params struct for FlashInfer's BatchPrefillWithPagedKVCacheDispatched
// (FlashInfer's JIT generates one like it per module from csrc/batch_prefill_customize_config
// .jinja; this is ours, fixed for what we serve) and the launch over one (types, head_dim),
// dispatching the variant (scoring.h) and the query tile the plan chose. Included only by the fa2_*.cu instantiation files.
#ifndef TPSERVE_KERNELS_CUDA_FLASHINFER_FA2_RUN_CUH_
#define TPSERVE_KERNELS_CUDA_FLASHINFER_FA2_RUN_CUH_

#include <cuda_runtime.h>
// Before FlashInfer's headers: its per-launch device queries and kernel attributes, answered
// once (cached_cuda_queries.h).
#include "kernels/cuda/cached_cuda_queries.h"

#include <cstdint>

#include <flashinfer/attention/mask.cuh>
#include <flashinfer/attention/prefill.cuh>
#include <flashinfer/attention/variants.cuh>
#include <flashinfer/fastdiv.cuh>
#include <flashinfer/layout.cuh>
#include <flashinfer/page.cuh>
#include <flashinfer/pos_enc.cuh>

#include "kernels/cuda/flashinfer/launch.h"

namespace tpserve::cuda::fi {

template <typename Q, typename KV, typename O>
struct Fa2Params {
  using DTypeQ = Q;
  using DTypeKV = KV;
  using DTypeO = O;
  using IdType = int32_t;

  DTypeQ* q;
  flashinfer::paged_kv_t<DTypeKV, IdType> paged_kv;
  IdType* q_indptr;
  const IdType* kv_len;  // ours: keys per request (a block table may hold more pages)
  DTypeO* o;
  float* lse;
  flashinfer::uint_fastdiv group_size;

  // What DefaultAttention<false, window, soft_cap, false> reads (no custom mask or alibi).
  uint8_t* maybe_custom_mask;
  IdType* maybe_mask_indptr;
  float* maybe_alibi_slopes;
  float logits_soft_cap;
  float sm_scale;
  float rope_rcp_scale;
  float rope_rcp_theta;

  uint32_t num_qo_heads;
  IdType q_stride_n;
  IdType q_stride_h;
  uint32_t k_sf_stride_page;
  uint32_t k_sf_stride_n;
  uint32_t k_sf_stride_h;
  uint32_t v_sf_stride_page;
  uint32_t v_sf_stride_n;
  uint32_t v_sf_stride_h;
  int32_t window_left;

  IdType* request_indices;
  IdType* qo_tile_indices;
  IdType* kv_tile_indices;
  IdType* merge_indptr;
  IdType* o_indptr;
  bool* block_valid_mask;
  IdType* kv_chunk_size_ptr;
  uint32_t max_total_num_rows;
  uint32_t* total_num_rows;
  uint32_t padded_batch_size;
  bool partition_kv;

  __host__ __device__ __forceinline__ uint32_t get_qo_len(uint32_t b) const {
    return q_indptr[b + 1] - q_indptr[b];
  }
  __host__ __device__ __forceinline__ uint32_t get_kv_len(uint32_t b) const { return kv_len[b]; }
};

// FlashInfer's variant (flashinfer/attention/variants.cuh) for each FiVariant.
template <bool kWindow, bool kSoftCap>
using Fa2Variant = flashinfer::DefaultAttention</*custom_mask=*/false, kWindow, kSoftCap,
                                                /*alibi=*/false>;

template <typename Q, typename KV, typename O, uint32_t kHeadDim, typename Variant>
int RunFa2Variant(const PagedBatch& b, const Fa2Plan& plan, void* stream) {
  using Params = Fa2Params<Q, KV, O>;
  Params p{};
  p.q = static_cast<Q*>(const_cast<void*>(b.q));
  p.paged_kv = flashinfer::paged_kv_t<KV, int32_t>(
      b.num_kv_heads, b.page_size, b.head_dim, b.num_requests, flashinfer::QKVLayout::kNHD,
      static_cast<KV*>(const_cast<void*>(b.k_pool)), static_cast<KV*>(const_cast<void*>(b.v_pool)),
      const_cast<int32_t*>(b.kv_indices), const_cast<int32_t*>(b.kv_indptr),
      /*last_page_len=*/nullptr);
  p.q_indptr = const_cast<int32_t*>(b.q_indptr);
  p.kv_len = b.kv_len;
  p.o = static_cast<O*>(b.o);
  p.lse = nullptr;
  p.group_size = flashinfer::uint_fastdiv(b.num_qo_heads / b.num_kv_heads);
  p.maybe_custom_mask = nullptr;
  p.maybe_mask_indptr = nullptr;
  p.maybe_alibi_slopes = nullptr;
  p.logits_soft_cap = b.scoring.logits_soft_cap;  // read by the soft-cap variant only
  p.sm_scale = b.sm_scale;
  p.rope_rcp_scale = 1.0f;
  p.rope_rcp_theta = 1.0f;
  p.num_qo_heads = b.num_qo_heads;
  p.q_stride_n = b.num_qo_heads * b.head_dim;
  p.q_stride_h = b.head_dim;
  p.window_left = b.scoring.window_left;  // -1: the variant takes kv_len (every key)
  p.request_indices = plan.request_indices;
  p.qo_tile_indices = plan.qo_tile_indices;
  p.kv_tile_indices = plan.kv_tile_indices;
  p.merge_indptr = plan.merge_indptr;
  p.o_indptr = plan.o_indptr;
  p.block_valid_mask = plan.block_valid_mask;
  p.kv_chunk_size_ptr = plan.kv_chunk_size_ptr;
  p.max_total_num_rows = b.num_rows;
  p.total_num_rows = plan.total_num_rows;
  p.padded_batch_size = plan.padded_batch_size;
  p.partition_kv = plan.split_kv;

  const auto s = static_cast<cudaStream_t>(stream);
  O* tmp_v = static_cast<O*>(plan.tmp_v);
  using flashinfer::MaskMode;
  using flashinfer::PosEncodingMode;
#define TPSERVE_FA2_TILE(TILE)                                                              \
  return static_cast<int>(flashinfer::BatchPrefillWithPagedKVCacheDispatched<              \
                          /*SAME_KV_STRIDES=*/true, TILE, kHeadDim, kHeadDim,               \
                          PosEncodingMode::kNone, /*USE_FP16_QK_REDUCTION=*/false,          \
                          MaskMode::kCausal, /*USE_TOKEN_HEAD_SF=*/false, Variant,          \
                          Params>(p, tmp_v, plan.tmp_s, /*enable_pdl=*/false, s))
  switch (plan.cta_tile_q) {
    case 16: TPSERVE_FA2_TILE(16);
    case 64: TPSERVE_FA2_TILE(64);
    case 128: TPSERVE_FA2_TILE(128);
    default: return static_cast<int>(cudaErrorNotSupported);
  }
#undef TPSERVE_FA2_TILE
}

template <typename Q, typename KV, typename O, uint32_t kHeadDim>
int RunFa2Typed(const PagedBatch& b, const Fa2Plan& plan, void* stream) {
  switch (b.scoring.variant) {
    case FiVariant::kPlain:
      return RunFa2Variant<Q, KV, O, kHeadDim, Fa2Variant<false, false>>(b, plan, stream);
    case FiVariant::kWindow:
      return RunFa2Variant<Q, KV, O, kHeadDim, Fa2Variant<true, false>>(b, plan, stream);
    case FiVariant::kWindowSoftCap:
      if (!(b.scoring.logits_soft_cap > 0.0f)) return static_cast<int>(cudaErrorInvalidValue);
      return RunFa2Variant<Q, KV, O, kHeadDim, Fa2Variant<true, true>>(b, plan, stream);
  }
  return static_cast<int>(cudaErrorNotSupported);
}

}  // namespace tpserve::cuda::fi

#endif  // TPSERVE_KERNELS_CUDA_FLASHINFER_FA2_RUN_CUH_
