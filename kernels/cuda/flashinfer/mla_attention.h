// The CUDA backend's multi-head latent attention (the absorbed form of DeepSeek-V2/V3's MLA)
// on FlashInfer's Hopper MLA kernel (mla_launch.h): owns the workspace the memory plan counts
// for it (attention_workspace.h, AttentionKernels::kMla), plans each step with FlashInfer's
// MLAPlan and queues one launch per layer.
//
//   TP_ASSIGN_OR_RETURN(auto mla, MlaAttention::Create(limits));
//   TP_RETURN_IF_ERROR(mla->Plan(packed, stream));                               // per step
//   TP_RETURN_IF_ERROR(mla->Run(q_abs, heads, scale, pool, step, out, stream));  // per layer
//
// The pool is the latent cache: one entry [c (512), k_rope (64)] per token (num_kv_heads 1,
// head_dim 576), read as keys and, through the same memory, as values. q and out are
// [rows, heads, 576]; out's first 512 values of each head are the attention-weighted c (what
// the model reads), its last 64 are written as zeros (the CPU backend's are the weighted
// k_rope, which no model reads). Padding rows come out as zeros. e4m3 pools: one scale for
// keys and values (KvPoolView::k_scale == v_scale, since the two are one memory).
// Not built: sliding windows, soft-caps, deterministic plans (MLAPlan splits keys by the
// batch's total), CUDA-graph recording (the plan is host work per step).
// Threading: one thread at a time, like the backend that owns it.
#ifndef TPSERVE_KERNELS_CUDA_FLASHINFER_MLA_ATTENTION_H_
#define TPSERVE_KERNELS_CUDA_FLASHINFER_MLA_ATTENTION_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/attention_workspace.h"
#include "kernels/cuda/device_types.h"
#include "kernels/cuda/flashinfer/mla_launch.h"
#include "kernels/cuda/step_metadata.h"

namespace tpserve::cuda {

class MlaAttention {
 public:
  // Allocates AttentionWorkspaceFor(limits) on the current device.
  // INVALID_ARGUMENT when the MLA kernels do not serve the limits
  // (AttentionKernelsFor is not kMla, deterministic, or a step within them
  // could exceed MLAPlan's kMlaMaxWorks work items); RESOURCE_EXHAUSTED naming
  // the buffer when memory is short. `abort` (may be null) ends Plan's wait for
  // the previous upload (device_wait.h).
  static absl::StatusOr<std::unique_ptr<MlaAttention>> Create(
      const AttentionLimits &limits, const std::atomic<bool> *abort = nullptr);
  ~MlaAttention();
  MlaAttention(const MlaAttention &) = delete;
  MlaAttention &operator=(const MlaAttention &) = delete;

  // Plans the step packed in `packed` and queues the upload of its work lists
  // on `stream` (first waiting until the previous upload has read the pinned
  // buffer it rewrites). INVALID_ARGUMENT when the step exceeds the limits or
  // its rows are not in sequence order; INTERNAL with FlashInfer's message when
  // its scheduler refuses.
  absl::Status Plan(const PackedStep &packed, void *stream);

  // Queues the planned step's attention of q over `pool` into out (shapes in
  // the header), scores scale * q.k. INVALID_ARGUMENT when heads or the pool
  // differ from the limits. REQUIRES: Plan for this step.
  absl::Status Run(const void *q, int64_t num_heads, float scale, const DeviceKvPool &pool,
                   const DeviceStep &step, void *out, void *stream);

  int64_t device_bytes() const { return workspace_.DeviceBytes(); }
  const AttentionLimits &limits() const { return limits_; }

 private:
  MlaAttention(const AttentionLimits &limits, const std::atomic<bool> *abort)
      : limits_(limits), abort_(abort), workspace_(AttentionWorkspaceFor(limits)) {}

  const AttentionLimits limits_;
  const std::atomic<bool> *const abort_;
  const AttentionWorkspace workspace_;
  void *uploaded_ = nullptr;  // cudaEvent_t: recorded after each plan's work-list copy
  void *float_ws_ = nullptr;
  void *int_ws_ = nullptr;
  void *int_host_ = nullptr;  // pinned mirror
  int32_t num_requests_ = 0;
  int32_t num_rows_ = 0;
  bool has_padding_ = false;
  fi::MlaPlan plan_;
};

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_FLASHINFER_MLA_ATTENTION_H_
