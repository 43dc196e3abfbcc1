// The device memory the CUDA backend's attention needs beyond its inputs and outputs, computed
// in one place: the backend allocates exactly this at load (Backend::ReserveAttention) and the
// memory plan counts exactly this (planner/memory_plan.cc), so they cannot drift apart.
//
//   const AttentionWorkspace ws = AttentionWorkspaceFor(limits);
//   ws.DeviceBytes();      // what one rank allocates for attention
//
// Which kernels serve a shape decides the workspace:
//   FlashInfer (Hopper; KV bf16, f16 or e4m3; head_dim 64 or 128): FA2's split-key partials
//     (FlashInfer's tmp_v/tmp_s, float_bytes), two int work-list regions (FA2's and FA3's plans,
//     int_bytes each, mirrored in pinned host memory), and for f16 KV the f16 copies of q and
//     the output.
//     The bounds follow FlashInfer's own allocation (flashinfer/attention/scheduler.cuh,
//     PrefillPlanImpl and PrefillSM90Plan) at the worst batch within the limits.
//   FlashInfer's MLA (Hopper; a latent pool of one 576-wide head, KV bf16 or e4m3; mla_plan.h):
//     MLAPlan's split partials and its one int work-list region (pinned mirror too), both of
//     fixed size for the device whatever the batch.
//   Our SIMT kernels (f32 KV, other head dims, other GPUs): the decode splits' scratch
//     (attention_plan.h) at the power-of-two context bucket a recorded step plans for.
// Thread-safe: pure functions.
#ifndef TPSERVE_KERNELS_CUDA_ATTENTION_WORKSPACE_H_
#define TPSERVE_KERNELS_CUDA_ATTENTION_WORKSPACE_H_

#include <cstdint>

#include "formats/dtype.h"
#include "kernels/backend.h"

namespace tpserve::cuda {

enum class AttentionKernels { kFlashInfer, kSimt, kMla };

// FlashInfer on a Hopper GPU (compute capability 9.0: its kernels are built as sm_90a SASS
// only) for KV in bf16, f16 or e4m3 with head_dim 64 or 128 (what kernels/cuda/flashinfer
// instantiates); FlashInfer's MLA for head_dim 576 (mla_plan.h's latent entry, bf16 or e4m3)
// on the same GPUs; our SIMT kernels otherwise (which serve no latent pool: a 576-wide head is
// beyond them, and the CUDA backend refuses it at ReserveAttention).
AttentionKernels AttentionKernelsFor(DType kv_dtype, int64_t head_dim, int compute_capability);

// One rank's attention, and the most any step asks of it.
struct AttentionLimits {
  int64_t num_qo_heads = 0;  // this rank's query heads
  int64_t num_kv_heads = 0;  // this rank's KV heads
  int64_t head_dim = 0;
  DType kv_dtype = DType::kBF16;
  int64_t page_size = 16;        // KV block size in tokens
  int64_t max_tokens_per_step = 0;   // query rows of one step
  int64_t max_decode_rows = 0;   // sequences of one step (recorded decode batches included)
  int64_t max_context = 0;       // keys one row attends to
  int num_sms = 0;               // the device's multiprocessors
  int compute_capability = 90;   // the device's, major * 10 + minor
  // The deterministic plan (--deterministic_tp): every query row its own request, keys split
  // in chunks of DeterministicChunkTokens (FlashInfer only).
  bool deterministic = false;
};

// The key chunk of the deterministic plan: at least 2,048 keys and at most 8 chunks per row,
// a whole number of pages. A function of the limits only, so a row's split points (and so its
// floats) are the same in every batch and at every tensor-parallel degree.
int64_t DeterministicChunkTokens(int64_t max_context, int64_t page_size);

struct AttentionWorkspace {
  AttentionKernels kernels = AttentionKernels::kSimt;
  int64_t float_bytes = 0;    // FA2 split partials, or the SIMT splits' scratch
  int64_t int_bytes = 0;      // FlashInfer: one plan's work lists (two plans per step)
  int64_t convert_bytes = 0;  // FlashInfer over f16 KV: q and output in f16
  // FA2 and FA3 plans each have their work lists; MLA's one plan has one region.
  int64_t IntRegions() const { return kernels == AttentionKernels::kMla ? 1 : 2; }
  int64_t DeviceBytes() const { return float_bytes + IntRegions() * int_bytes + convert_bytes; }
  int64_t PinnedHostBytes() const { return IntRegions() * int_bytes; }
};

// A reservation (Backend::ReserveAttention) on a device with `num_sms` multiprocessors of
// `compute_capability`: how the backend and the memory plan both see it.
AttentionLimits AttentionLimitsFor(const Backend::AttentionReservation& reservation, int num_sms,
                                   int compute_capability, bool deterministic);

// REQUIRES: every count positive; num_qo_heads a multiple of num_kv_heads.
AttentionWorkspace AttentionWorkspaceFor(const AttentionLimits& limits);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_ATTENTION_WORKSPACE_H_
