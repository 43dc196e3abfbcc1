#include "kernels/cuda/attention_workspace.h"

#include <algorithm>
#include <vector>

#include "kernels/check.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/mla_plan.h"

namespace tpserve::cuda {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One AlignedAllocator::aligned_alloc_offset of `bytes` at `alignment` (scheduler.cuh): at
// most alignment - 1 bytes of padding before it.
int64_t Aligned(int64_t bytes, int64_t alignment) { return bytes + alignment - 1; }

// The query tiles FlashInfer's FA2 may pick for an average packed query length
// (FA2DetermineCtaTileQ, utils.cuh, head_dim < 256): 128 above 64 rows; otherwise 64 above 16,
// and at or below 16 either 16 or, where one 16-row step does not fit shared memory (or the
// device is not sm_80+), 64. On the GPUs FlashInfer serves here (compute capability 9.0, 227 KiB
// per block) at head_dim 64 and 128 it is always 16, for bf16 and e4m3 KV alike
// (attention_workspace_flashinfer_test plans on a faked H100); 64 is kept as a margin.
std::vector<int64_t> Fa2CtaTilesQ(int64_t avg_packed_qo_len) {
  if (avg_packed_qo_len > 64) return {128};
  if (avg_packed_qo_len > 16) return {64};
  return {16, 64};
}

// The deterministic plan: num_rows requests of one row each (one query tile of the group's
// packed heads each), every row's keys in chunks of DeterministicChunkTokens.
AttentionWorkspace DeterministicWorkspace(const AttentionLimits& l) {
  const int64_t group = l.num_qo_heads / l.num_kv_heads;
  const int64_t t = l.max_tokens_per_step;
  const int64_t chunks = CeilDiv(l.max_context, DeterministicChunkTokens(l.max_context,
                                                                          l.page_size));
  int64_t ctas = 0, rows = 0;
  for (int64_t tile : Fa2CtaTilesQ(group)) {
    const int64_t tile_ctas = t * CeilDiv(group, tile) * chunks;
    ctas = std::max(ctas, tile_ctas);
    rows = std::max(rows, CeilDiv(tile_ctas * tile, group));
  }
  AttentionWorkspace w;
  w.kernels = AttentionKernels::kFlashInfer;
  w.float_bytes = Aligned(l.num_qo_heads * rows * l.head_dim * 4, 16) +
                  Aligned(l.num_qo_heads * rows * 4, 16);
  w.int_bytes = 3 * Aligned(4 * ctas, 16) + 2 * Aligned(4 * (t + 1), 16) + 4;
  if (l.kv_dtype == DType::kF16) w.convert_bytes = 2 * t * l.num_qo_heads * l.head_dim * 2;
  return w;
}

AttentionWorkspace FlashInferWorkspace(const AttentionLimits& l) {
  if (l.deterministic) return DeterministicWorkspace(l);
  const int64_t group = l.num_qo_heads / l.num_kv_heads;
  const int64_t t = l.max_tokens_per_step, s = l.max_decode_rows;
  // PrefillPlanImpl: max_batch_size_if_split = 2 CTAs per SM / KV heads. Keys are split only
  // when the split batch fits that; a recorded decode batch (enable_cuda_graph) always splits,
  // over a padded grid of max(that, its query tiles + requests - 1). Partial rows:
  // ceil(padded_batch * cta_tile_q / group), each with head_dim floats per head (FlashInfer
  // sizes tmp_v in f32 whatever the output type) and one log-sum-exp.
  const int64_t split_batch = 2 * l.num_sms / l.num_kv_heads;
  int64_t rows = CeilDiv(split_batch * 128, group);
  int64_t graph_batch = split_batch;
  for (int64_t tile : Fa2CtaTilesQ(group)) {
    const int64_t padded = std::max(split_batch, CeilDiv(s * group, tile) + s - 1);
    graph_batch = std::max(graph_batch, padded);
    rows = std::max(rows, CeilDiv(padded * tile, group));
  }
  AttentionWorkspace w;
  w.kernels = AttentionKernels::kFlashInfer;
  w.float_bytes = Aligned(l.num_qo_heads * rows * l.head_dim * 4, 16) +
                  Aligned(l.num_qo_heads * rows * 4, 16);
  // FA2's work lists: request, query-tile and key-tile indices per CTA (at most the split
  // batch, the graph batch, or one CTA per 16 packed rows of a request: tiles + requests),
  // o_indptr and merge_indptr per request / row, the chunk size, the graph's row count and
  // its CTA mask.
  const int64_t fa2_ctas = std::max({split_batch, graph_batch, CeilDiv(t * group, 16) + t});
  const int64_t fa2 = 3 * Aligned(4 * fa2_ctas, 16) + Aligned(4 * (t + 1), 16) + 4 +
                      Aligned(4, 16) + Aligned(4 * (t + 1), 16) + Aligned(fa2_ctas, 16);
  // FA3 (PrefillSM90Plan): seven int arrays of one entry per (query tile of at least 128 rows,
  // request, query head), and work_indptr per SM.
  const int64_t fa3_works = l.num_qo_heads * (CeilDiv(t, 128) + t);
  const int64_t fa3 = 7 * Aligned(4 * fa3_works, 16) + Aligned(4 * (l.num_sms + 1), 16);
  w.int_bytes = std::max(fa2, fa3);
  if (l.kv_dtype == DType::kF16) w.convert_bytes = 2 * t * l.num_qo_heads * l.head_dim * 2;
  return w;
}

}  // namespace

AttentionKernels AttentionKernelsFor(DType kv_dtype, int64_t head_dim, int compute_capability) {
  if (head_dim == kMlaEntryDim) {
    return compute_capability == 90 && (kv_dtype == DType::kBF16 || kv_dtype == DType::kF8E4M3)
               ? AttentionKernels::kMla
               : AttentionKernels::kSimt;
  }
  const bool types = kv_dtype == DType::kBF16 || kv_dtype == DType::kF16 ||
                     kv_dtype == DType::kF8E4M3;
  return compute_capability == 90 && types && (head_dim == 64 || head_dim == 128)
             ? AttentionKernels::kFlashInfer
             : AttentionKernels::kSimt;
}

int64_t DeterministicChunkTokens(int64_t max_context, int64_t page_size) {
  const int64_t tokens = std::max<int64_t>(2048, CeilDiv(max_context, 8));
  return CeilDiv(tokens, page_size) * page_size;
}

AttentionLimits AttentionLimitsFor(const Backend::AttentionReservation& r, int num_sms,
                                   int compute_capability, bool deterministic) {
  AttentionLimits l;
  l.num_qo_heads = r.num_heads;
  l.num_kv_heads = r.num_kv_heads;
  l.head_dim = r.head_dim;
  l.kv_dtype = r.kv_dtype;
  l.page_size = r.block_size_tokens;
  l.max_tokens_per_step = r.max_tokens_per_step;
  l.max_decode_rows = r.max_sequences;
  l.max_context = r.max_context;
  l.num_sms = num_sms;
  l.compute_capability = compute_capability;
  l.deterministic = deterministic;
  return l;
}

AttentionWorkspace AttentionWorkspaceFor(const AttentionLimits& l) {
  TP_CHECK(l.num_qo_heads > 0 && l.num_kv_heads > 0 && l.num_qo_heads % l.num_kv_heads == 0,
           "attention heads");
  TP_CHECK(l.head_dim > 0 && l.page_size > 0 && l.max_tokens_per_step > 0 &&
               l.max_decode_rows > 0 && l.max_context > 0 && l.num_sms > 0,
           "attention limits");
  const AttentionKernels kernels =
      AttentionKernelsFor(l.kv_dtype, l.head_dim, l.compute_capability);
  if (kernels == AttentionKernels::kFlashInfer) return FlashInferWorkspace(l);
  if (kernels == AttentionKernels::kMla) {
    const MlaWorkspaceBytes mla = MlaWorkspaceFor(l.num_sms);
    AttentionWorkspace w;
    w.kernels = AttentionKernels::kMla;
    w.float_bytes = mla.float_bytes;
    w.int_bytes = mla.int_bytes;
    return w;
  }
  DeviceKvPool pool;
  pool.num_kv_heads = l.num_kv_heads;
  pool.head_dim = l.head_dim;
  pool.block_size = l.page_size;
  AttentionWorkspace w;
  w.kernels = AttentionKernels::kSimt;
  // A recorded decode step plans for its context's power-of-two bucket (at least 256; see
  // CudaBackend::RunCaptured), which may exceed max_context.
  int64_t context = 256;
  while (context < l.max_context) context *= 2;
  w.float_bytes = MaxAttentionScratchBytes(l.num_qo_heads, pool, l.max_decode_rows, context,
                                           l.num_sms);
  return w;
}

}  // namespace tpserve::cuda
