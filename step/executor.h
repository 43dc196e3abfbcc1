// What the engine asks of the model: run one step (a StepBatch) on every rank, then score and
// sample the rows it asked for (StepSampling), where the logits are. In-process ranks
// (LocalExecutor) and worker processes over gRPC (RemoteExecutor) both sit behind this.
//
//   TP_ASSIGN_OR_RETURN(StepResult r, executor->Execute(batch));
//   ... the structured-output masks, computed while the step ran ...
//   TP_ASSIGN_OR_RETURN(std::vector<SequenceSamples> s, executor->Sample(r, sampling));
//
// Threading: called from the engine's step thread only.
#ifndef TPSERVE_STEP_EXECUTOR_H_
#define TPSERVE_STEP_EXECUTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "step/step_batch.h"
#include "step/step_sampling.h"

namespace tpserve {

// How a step's tokens spread over a mixture of experts' experts (empty for a dense model):
// what expert-parallel deployments tune against, since the rank with the busiest experts sets
// each layer's pace. Every rank routes every token alike, so rank 0's count is the whole
// model's.
struct ExpertLoad {
  std::vector<int64_t> tokens;  // [num_experts]: slots routed to each expert, all MoE layers
  int64_t layers = 0;           // MoE layers run (one per layer per step)
  // Over those layers: the busiest expert's slots over the mean per expert (1 = even).
  double imbalance_sum = 0.0;

  // Mean over the layers of max / mean (0 when no MoE layer ran).
  double Imbalance() const { return layers > 0 ? imbalance_sum / layers : 0.0; }
  // One MoE layer's routing: ids [slots], each in [0, num_experts).
  void AddLayer(absl::Span<const int32_t> ids, int64_t num_experts);
  void Add(const ExpertLoad& other);
  bool empty() const { return layers == 0; }
};

struct StepResult {
  // [batch.num_logit_rows(), vocab_size]; empty when logits_held.
  std::vector<float> logits;
  // The executor left the logits where they were made (the sampling rank), for Sample.
  bool logits_held = false;
  int64_t vocab_size = 0;
  double compute_s = 0.0;      // model time on rank 0
  double allreduce_s = 0.0;    // of which in collectives
  std::vector<double> rank_compute_s;  // each rank's model time, where the executor knows it
  ExpertLoad expert_load;  // every MoE layer's: TP rank 0's of each stage (TP peers route alike)
  // Rank 0's weight bytes decoded whole to multiply them this step (Backend::
  // TakeDecodedWeightBytes: a GEMM library's refusal taken as a fallback); 0 normally.
  int64_t decoded_weight_bytes = 0;
  absl::Span<const float> Row(size_t i) const {
    return absl::MakeConstSpan(logits).subspan(i * vocab_size, vocab_size);
  }
};

class ModelExecutor {
 public:
  virtual ~ModelExecutor() = default;
  // UNAVAILABLE when a rank has died or stopped answering: the engine then asks Recover, and
  // when that fails too, fails every request and reports NOT_SERVING.
  virtual absl::StatusOr<StepResult> Execute(const StepBatch& batch) = 0;
  // After a failed Execute or Sample: replaces the ranks that are gone, in place, and re-forms
  // the group, so that steps can run again; the ranks' KV caches hold nothing the engine may
  // rely on afterwards (it recomputes every sequence). OK once it can step; otherwise why not
  // (the default: UNIMPLEMENTED, nothing to replace).
  virtual absl::Status Recover(const absl::Status& failure);
  // Scores and samples the rows of the step that gave `step` as `sampling` says (SampleStep's
  // contract and errors). The one place a step's tokens are chosen: the default runs
  // SampleStep on the logits `step` holds.
  virtual absl::StatusOr<std::vector<SequenceSamples>> Sample(const StepResult& step,
                                                              const StepSampling& sampling);
  virtual int64_t vocab_size() const = 0;
  virtual std::string Describe() const = 0;
};

}  // namespace tpserve

#endif  // TPSERVE_STEP_EXECUTOR_H_
