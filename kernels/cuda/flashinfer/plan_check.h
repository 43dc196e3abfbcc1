// FlashInfer's own FA2 scheduler (PrefillSplitQOKVIndptr, scheduler.cuh: host code, no GPU
// needed) run over one batch, reporting the workspace bytes PrefillPlanImpl would allocate for
// it: what attention_workspace_test checks our bound against. Test support only.
#ifndef TPSERVE_KERNELS_CUDA_FLASHINFER_PLAN_CHECK_H_
#define TPSERVE_KERNELS_CUDA_FLASHINFER_PLAN_CHECK_H_

#include <cstdint>
#include <vector>

namespace tpserve::cuda::fi {

struct Fa2PlanBytes {
  int64_t float_bytes = 0;
  int64_t int_bytes = 0;
  bool split_kv = false;
  int64_t cta_tile_q = 0;
  int64_t kv_chunk_tokens = 0;
  std::vector<int32_t> chunks;  // key chunks of each request
};

// qo_lens / kv_lens per request (keys, not pages); `max_batch_size_if_split` as PrefillPlanImpl
// derives it (2 * SMs / KV heads).
Fa2PlanBytes FlashInferFa2PlanBytes(const std::vector<int32_t>& qo_lens,
                                    const std::vector<int32_t>& kv_lens, int32_t num_qo_heads,
                                    int32_t num_kv_heads, int32_t head_dim, int32_t page_size,
                                    int32_t max_batch_size_if_split, bool cuda_graph,
                                    int32_t fixed_split_pages = 0);

}  // namespace tpserve::cuda::fi

#endif  // TPSERVE_KERNELS_CUDA_FLASHINFER_PLAN_CHECK_H_
