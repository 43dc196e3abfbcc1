// FlashInfer's own FA2 scheduler (PrefillSplitQOKVIndptr, scheduler.cuh: host code, no GPU
// needed) run over one batch as it is planned on the device we serve, reporting the workspace
// bytes PrefillPlanImpl would allocate for it: what attention_workspace_flashinfer_test checks
// our bound against. Test support only.
//
//   Fa2PlanCase c;  c.qo_lens = {1, 1};  c.kv_lens = {300, 9000};  ...
//   c.kv_dtype = DType::kF8E4M3;
//   Fa2PlanBytes got = FlashInferFa2PlanBytes(c);   // as on an H100
//
// What the device decides is FA2's query tile (FA2DetermineCtaTileQ, flashinfer/utils.cuh): it
// reads the compute capability and, for a 16-row tile, the opt-in shared memory per block
// against the KV element size. The FakeDevice given answers (an H100 unless told otherwise; a
// host without a GPU would read compute capability 0 and get 64-row tiles where an H100 gets
// 16), and the KV element size is the case's KV dtype's (1 byte for e4m3), as the CUDA backend
// passes it (PlanRequest::kv_bytes).
#ifndef TPSERVE_KERNELS_CUDA_FLASHINFER_PLAN_CHECK_H_
#define TPSERVE_KERNELS_CUDA_FLASHINFER_PLAN_CHECK_H_

#include <cstdint>
#include <vector>

#include "formats/dtype.h"
#include "kernels/cuda/flashinfer/fake_device.h"

namespace tpserve::cuda::fi {

// One batch, as the CUDA backend hands it to FlashInfer's FA2 planner.
struct Fa2PlanCase {
  std::vector<int32_t> qo_lens, kv_lens;  // per request; keys, not pages
  int32_t num_qo_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t page_size = 16;
  DType kv_dtype = DType::kBF16;  // bf16, f16 or e4m3: what FlashInfer serves
  // As PrefillPlanImpl derives it: 2 * SMs / KV heads.
  int32_t max_batch_size_if_split = 0;
  bool cuda_graph = false;
  int32_t fixed_split_pages = 0;  // the deterministic plan's chunk, in pages; 0: FlashInfer's
};

struct Fa2PlanBytes {
  int64_t float_bytes = 0;
  int64_t int_bytes = 0;
  bool split_kv = false;
  int64_t cta_tile_q = 0;
  int64_t kv_chunk_tokens = 0;
  int64_t padded_batch_size = 0;  // CTAs of the grid
  std::vector<int32_t> chunks;    // key chunks of each request
};

// The bytes of one KV element FlashInfer is told for `kv_dtype`: 1 for e4m3, 2 for bf16 / f16.
int32_t KvElementBytes(DType kv_dtype);

// Plans `c` with FlashInfer's scheduler on `device` (SetFakeDevice; it stays set after).
Fa2PlanBytes FlashInferFa2PlanBytes(const Fa2PlanCase& c, const FakeDevice& device = kFakeH100);

}  // namespace tpserve::cuda::fi

#endif  // TPSERVE_KERNELS_CUDA_FLASHINFER_PLAN_CHECK_H_
