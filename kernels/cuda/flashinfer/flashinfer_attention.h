// The CUDA backend's paged attention on FlashInfer (launch.h, plan.h): owns the workspace the
// memory plan counts for it (attention_workspace.h), plans each step with FlashInfer's own
// schedulers and queues the kernels.
//
//   TP_ASSIGN_OR_RETURN(auto fi, FlashInferAttention::Create(limits, /*fa3=*/true));
//   TP_RETURN_IF_ERROR(fi->Plan(packed, /*cuda_graph=*/false, {}, stream));   // once per step
//   const fi::FiScoring scoring = fi::FiScoringFor(window, softcap);
//   if (!fi->PlanServes(scoring)) ...  // plan again with PlanConstraintsFor(scoring)
//   TP_RETURN_IF_ERROR(fi->Run(q, num_heads, scale, scoring, pool, step, out, stream));
//
// Routing, per step (each request a sequence of the step, in row order, padding rows included):
//   * deterministic limits (--deterministic_tp): FA2 over one request per query row, keys split
//     in chunks of DeterministicChunkTokens (attention_workspace.h): FlashInfer's query tile
//     is then a function of the group size and its split points of the limits, so a row's floats
//     depend only on its own query and keys (every batch, every TP degree). Slower for long
//     prompts (each row reads its keys itself);
//   * a recorded decode step (cuda_graph): FA2 over every request, planned for a fixed grid;
//   * with FA3 (Hopper, bf16 KV) and some request of more than one query row: the leading
//     one-row requests (decodes; the scheduler puts them first) through FA2, whose split keys
//     fill the GPU for a few long decodes, and the rest through FA3;
//   * otherwise FA2 over every request.
// Layers with a sliding window or a logit soft-cap (scoring.h): FA2's variants for them; a plan
// made under PlanConstraints that say so routes no request through FA3 (built plain) and, for
// a window, does not split keys (FA2's split partials are laid out for one window).
// KV in e4m3: FlashInfer reads the codes and converts them; the K scale is folded into the
// softmax scale and the V scale multiplies the output. KV in f16: q is converted to f16 and the
// f16 output back to bf16 (FlashInfer's tensor cores multiply q and K of one type).
// Rows of padding sequences come out as zeros (the backend's contract), whatever FlashInfer
// computed for them.
// Threading: one thread at a time, like the backend that owns it.
#ifndef TPSERVE_KERNELS_CUDA_FLASHINFER_FLASHINFER_ATTENTION_H_
#define TPSERVE_KERNELS_CUDA_FLASHINFER_FLASHINFER_ATTENTION_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/attention_workspace.h"
#include "kernels/cuda/device_types.h"
#include "kernels/cuda/flashinfer/launch.h"
#include "kernels/cuda/step_metadata.h"

namespace tpserve::cuda {

class FlashInferAttention {
 public:
  // Allocates AttentionWorkspaceFor(limits) on the current device. fa3: the device runs FA3
  // (sm_90). INVALID_ARGUMENT when FlashInfer does not serve the shape; RESOURCE_EXHAUSTED
  // naming the buffer when memory is short.
  // `abort` (may be null) ends Plan's wait for the previous upload (device_wait.h).
  static absl::StatusOr<std::unique_ptr<FlashInferAttention>> Create(
      const AttentionLimits& limits, bool fa3, const std::atomic<bool>* abort = nullptr);
  ~FlashInferAttention();
  FlashInferAttention(const FlashInferAttention&) = delete;
  FlashInferAttention& operator=(const FlashInferAttention&) = delete;

  // Plans the step packed in `packed` (host words) and queues the upload of its work lists on
  // `stream` (first waiting until the previous upload has read the pinned buffers it rewrites).
  // INVALID_ARGUMENT when the step exceeds the limits or its rows are not in sequence order;
  // INTERNAL with FlashInfer's message when its scheduler refuses.
  // `constraints`: what the plan avoids so that every layer it serves runs (scoring.h).
  absl::Status Plan(const PackedStep& packed, bool cuda_graph,
                    const fi::PlanConstraints& constraints, void* stream);

  // Whether the planned step runs a layer scored as `scoring` (false: plan again under
  // constraints that include PlanConstraintsFor(scoring)).
  bool PlanServes(const fi::FiScoring& scoring) const;

  // Queues causal attention of the planned step: out (bf16 [rows, num_heads, head_dim]) from q
  // (bf16, same shape) over `pool`, scores scale * q.k under `scoring`'s window and cap.
  // FAILED_PRECONDITION when the plan does not serve `scoring` (PlanServes).
  // REQUIRES: Plan for this step; the pool's shape and dtype those of the limits;
  // num_heads == limits.num_qo_heads.
  absl::Status Run(const void* q, int64_t num_heads, float scale, const fi::FiScoring& scoring,
                   const DeviceKvPool& pool, const DeviceStep& step, void* out, void* stream);

  int64_t device_bytes() const { return workspace_.DeviceBytes(); }
  const AttentionLimits& limits() const { return limits_; }

 private:
  // Plan for limits_.deterministic: FA2 only, one request per query row.
  absl::Status PlanDeterministic(const PackedStep& packed, bool no_split_keys, void* stream);

  FlashInferAttention(const AttentionLimits& limits, bool fa3, const std::atomic<bool>* abort)
      : limits_(limits), fa3_available_(fa3), abort_(abort),
        workspace_(AttentionWorkspaceFor(limits)) {}

  const AttentionLimits limits_;
  const bool fa3_available_;
  const std::atomic<bool>* const abort_;
  const AttentionWorkspace workspace_;
  void* uploaded_ = nullptr;  // cudaEvent_t: recorded after each plan's work-list copies
  fi::FiTypes types_ = fi::FiTypes::kBf16;
  void* float_ws_ = nullptr;
  void* int_ws_[2] = {nullptr, nullptr};   // FA2's plan, FA3's plan
  void* int_host_[2] = {nullptr, nullptr};  // pinned mirrors
  void* convert_ = nullptr;                 // f16 KV: q then output, in f16

  // The planned step: requests [0, fa2_requests_) through FA2, the rest (rows from
  // fa3_first_row_) through FA3 when use_fa3_.
  int32_t num_requests_ = 0;
  int32_t num_rows_ = 0;
  int32_t fa2_requests_ = 0;
  int32_t fa2_rows_ = 0;
  bool use_fa3_ = false;
  bool fa2_splits_keys_ = false;  // the FA2 plan split some request's keys
  // Padding rows to zero: some in this step, or a recorded step (whose replays may have some).
  bool zero_padding_ = false;
  fi::Fa2Plan fa2_plan_;
  fi::Fa3Plan fa3_plan_;
};

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_FLASHINFER_FLASHINFER_ATTENTION_H_
