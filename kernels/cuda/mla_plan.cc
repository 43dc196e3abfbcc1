#include "kernels/cuda/mla_plan.h"

#include <algorithm>

namespace tpserve::cuda {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One AlignedAllocator::aligned_alloc_offset of `bytes` at 16 (scheduler.cuh):
// at most 15 bytes of padding before it.
int64_t Aligned16(int64_t bytes) { return bytes + 15; }

}  // namespace

bool IsLatentPool(int64_t num_kv_heads, int64_t head_dim) {
  return num_kv_heads == 1 && head_dim == kMlaEntryDim;
}

int64_t MlaClusterSize(const int32_t *qo_indptr, int64_t num_requests, int64_t num_heads) {
  // MLAPlan: avg_packed_qo_len = sum(qo_len * heads) / batch_size in int.
  const int64_t packed = (static_cast<int64_t>(qo_indptr[num_requests]) - qo_indptr[0]) * num_heads;
  return packed / num_requests > 64 ? 2 : 1;
}

int64_t MlaWorkBound(const int32_t *qo_indptr, int64_t num_requests, int64_t num_heads,
                     int64_t num_sms) {
  if (num_requests <= 0) return 0;
  const int64_t cluster = MlaClusterSize(qo_indptr, num_requests, num_heads);
  const int64_t tile = cluster * kMlaCtaTileQ;
  int64_t tiles = 0;
  for (int64_t b = 0; b < num_requests; ++b) {
    // A request of no rows still gets no tile (MLAPlan loops over ceil(0 /
    // tile) tiles).
    tiles += CeilDiv(static_cast<int64_t>(qo_indptr[b + 1] - qo_indptr[b]) * num_heads, tile);
  }
  // Each tile's keys r_j go in ceil(r_j / limit) pieces (one for none), limit
  // >= total / clusters: sum ceil(r_j / limit) <= tiles + total / limit <=
  // tiles + clusters.
  return tiles + num_sms / cluster;
}

int64_t MlaWorkBoundWithin(int64_t max_tokens_per_step, int64_t max_sequences, int64_t num_heads,
                           int64_t num_sms) {
  // Tiles of 64 packed rows are the smallest (cluster 1); each request adds at
  // most one partial tile; the clusters are at most num_sms.
  const int64_t requests = std::min(max_sequences, max_tokens_per_step);
  return CeilDiv(max_tokens_per_step * num_heads, kMlaCtaTileQ) + requests + num_sms;
}

MlaWorkspaceBytes MlaWorkspaceFor(int64_t num_sms) {
  MlaWorkspaceBytes w;
  w.int_bytes = 11 * Aligned16(4 * kMlaMaxWorks) + 5 * Aligned16(4 * num_sms);
  // Clusters x cluster tile = (num_sms / cluster) * cluster * 64 <= num_sms *
  // 64 rows; the partial outputs are in the output type (bf16) at head_dim_ckv.
  const int64_t rows = num_sms * kMlaCtaTileQ;
  w.float_bytes = Aligned16(2 * rows * 2 * kMlaCkvDim) + Aligned16(2 * rows * 4);
  return w;
}

}  // namespace tpserve::cuda
