// FlashInfer's Hopper MLA kernel (mla_hopper.cuh) for q and output bf16 over a
// latent cache of DTypeKV (bf16 or e4m3), head_dim_ckv 512, head_dim_kpe 64,
// causal: our MLAParams and the launch (see mla_launch.h for the strides).
// Included only by the mla_*.cu instantiation files.
#ifndef TPSERVE_KERNELS_CUDA_FLASHINFER_MLA_RUN_CUH_
#define TPSERVE_KERNELS_CUDA_FLASHINFER_MLA_RUN_CUH_

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
// Before FlashInfer's headers: its per-launch device queries and kernel attributes, answered
// once (cached_cuda_queries.h).
#include "kernels/cuda/cached_cuda_queries.h"

#include <flashinfer/attention/mla_hopper.cuh>
#include <flashinfer/attention/mla_params.cuh>
#include <flashinfer/fastdiv.cuh>

#include "kernels/cuda/flashinfer/mla_launch.h"

namespace tpserve::cuda::fi {

// The instantiated latent entry: [c (512), k_rope (64)] (mla_plan.h's
// kMlaCkvDim, kMlaKpeDim).
inline constexpr uint32_t kRunCkv = 512;
inline constexpr uint32_t kRunKpe = 64;
inline constexpr uint32_t kRunEntry = kRunCkv + kRunKpe;

template <typename DTypeKV>
int RunMlaTyped(const MlaBatch &b, const MlaPlan &plan, void *stream) {
  using Params = flashinfer::MLAParams<__nv_bfloat16, DTypeKV, __nv_bfloat16, int32_t>;
  using flashinfer::uint_fastdiv;
  Params p{};
  auto *q = static_cast<__nv_bfloat16 *>(const_cast<void *>(b.q));
  auto *pool = static_cast<DTypeKV *>(const_cast<void *>(b.pool));
  p.q_nope = q;
  p.q_pe = q + kRunCkv;
  p.ckv = pool;
  p.kpe = pool + kRunCkv;
  p.partial_o = static_cast<__nv_bfloat16 *>(plan.partial_o);
  p.partial_lse = plan.partial_lse;
  p.final_o = static_cast<__nv_bfloat16 *>(b.o);
  p.final_lse = nullptr;
  p.q_indptr = plan.q_indptr;
  p.kv_indptr = plan.kv_indptr;
  p.partial_indptr = plan.partial_indptr;
  p.merge_packed_offset_start = plan.merge_packed_offset_start;
  p.merge_packed_offset_end = plan.merge_packed_offset_end;
  p.merge_partial_packed_offset_start = plan.merge_partial_packed_offset_start;
  p.merge_partial_packed_offset_end = plan.merge_partial_packed_offset_end;
  p.merge_partial_stride = plan.merge_partial_stride;
  p.kv_indices = const_cast<int32_t *>(b.kv_indices);
  p.q_len = plan.q_len;
  p.kv_len = plan.kv_len;
  p.q_start = plan.q_start;
  p.kv_start = plan.kv_start;
  p.kv_end = plan.kv_end;
  p.work_indptr = plan.work_indptr;
  p.block_size = uint_fastdiv(static_cast<uint32_t>(b.page_size));
  p.num_heads = uint_fastdiv(static_cast<uint32_t>(b.num_heads));
  const uint32_t row = static_cast<uint32_t>(b.num_heads) * kRunEntry;
  p.q_nope_stride_n = row;
  p.q_nope_stride_h = kRunEntry;
  p.q_pe_stride_n = row;
  p.q_pe_stride_h = kRunEntry;
  p.ckv_stride_page = static_cast<uint32_t>(b.page_size) * kRunEntry;
  p.ckv_stride_n = kRunEntry;
  p.kpe_stride_page = static_cast<uint32_t>(b.page_size) * kRunEntry;
  p.kpe_stride_n = kRunEntry;
  p.o_stride_n = row;
  p.o_stride_h = kRunEntry;
  p.sm_scale = b.sm_scale;
  // e4m3: FlashInfer multiplies the codes by these (in bf16) before its MMAs; 1
  // for bf16.
  p.ckv_scale = b.kv_scale;
  p.kpe_scale = b.kv_scale;
  p.ckv_scale_arr = nullptr;
  p.return_lse_base_on_e = false;
  return static_cast<int>(
      flashinfer::mla::BatchMLAPageAttentionHopper<flashinfer::MaskMode::kCausal, kRunCkv, kRunKpe>(
          p, static_cast<uint32_t>(plan.num_blks_x), static_cast<uint32_t>(plan.num_blks_y),
          static_cast<cudaStream_t>(stream)));
}

}  // namespace tpserve::cuda::fi

#endif  // TPSERVE_KERNELS_CUDA_FLASHINFER_MLA_RUN_CUH_
