// Multi-head latent attention on the CUDA backend (FlashInfer's MLA kernels,
// kernels/cuda/flashinfer/mla_launch.h): which pools it serves, and the host arithmetic of
// FlashInfer's MLA scheduler (MLAPlan, flashinfer/attention/scheduler.cuh) that the workspace
// and the per-step checks need. Plain C++: tested without a GPU (mla_plan_test; FlashInfer's
// scheduler itself in mla_plan_flashinfer_test).
//
//   if (IsLatentPool(pool.num_kv_heads, pool.head_dim)) ...       // route to MLA
//   const MlaWorkspaceBytes ws = MlaWorkspaceFor(num_sms);         // what MLAPlan may use
//   if (MlaWorkBound(qo_indptr, n, heads, num_sms) > kMlaMaxWorks) ...  // refuse the step
//
// The step's requests are the FlashInfer arrays every step already carries (step_metadata.h:
// fi_qo_indptr, fi_kv_indptr into the block tables, fi_kv_len), the same ones FA3 reads: MLA
// takes request b's key k from page kv_indices[kv_indptr[b] + k / page_size], slot
// k % page_size, and its query row i (of qo_len) sees keys [0, kv_len - qo_len + i].
// Thread-safe: pure functions.
#ifndef TPSERVE_KERNELS_CUDA_MLA_PLAN_H_
#define TPSERVE_KERNELS_CUDA_MLA_PLAN_H_

#include <cstdint>

namespace tpserve::cuda {

// The latent entry the MLA kernels are built for (DeepSeek-V2/V3): kv_lora_rank
// 512 and qk_rope_head_dim 64, one KV "head" per token.
inline constexpr int64_t kMlaCkvDim = 512;
inline constexpr int64_t kMlaKpeDim = 64;
inline constexpr int64_t kMlaEntryDim = kMlaCkvDim + kMlaKpeDim;
// MLAPlan's max_total_num_works: each of its work-list arrays holds this many
// items.
inline constexpr int64_t kMlaMaxWorks = 16384;
// MLAPlan's query tile per CTA (packed rows: query rows x heads).
inline constexpr int64_t kMlaCtaTileQ = 64;

// A latent pool: one KV head whose entry is [c (512), k_rope (64)].
bool IsLatentPool(int64_t num_kv_heads, int64_t head_dim);

// MLAPlan's cluster: 2 CTAs when the average packed query length (rows x heads
// per request, integer division) is above 64, else 1. REQUIRES: num_requests >
// 0.
int64_t MlaClusterSize(const int32_t *qo_indptr, int64_t num_requests, int64_t num_heads);

// An upper bound on MLAPlan's work items for this batch: each request's query
// tiles (of cluster x 64 packed rows) plus one per cluster, since no tile's
// keys are split in more chunks than their share of the batch's keys over the
// clusters' key limit, plus one.
int64_t MlaWorkBound(const int32_t *qo_indptr, int64_t num_requests, int64_t num_heads,
                     int64_t num_sms);

// The same bound for any step within the limits: max_tokens_per_step rows over at
// most max_sequences requests.
int64_t MlaWorkBoundWithin(int64_t max_tokens_per_step, int64_t max_sequences, int64_t num_heads,
                           int64_t num_sms);

// The bytes MLAPlan allocates (alignment padding included): the int work lists
// (eleven arrays of kMlaMaxWorks and five of one entry per SM, mirrored in
// pinned host memory) and the split partials (bf16 [2 x clusters x cluster
// tile, 512] and their f32 log-sum-exps), whatever the batch.
struct MlaWorkspaceBytes {
  int64_t float_bytes = 0;
  int64_t int_bytes = 0;
};
MlaWorkspaceBytes MlaWorkspaceFor(int64_t num_sms);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_MLA_PLAN_H_
