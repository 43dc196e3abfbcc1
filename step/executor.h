// What the engine asks of the model: run one step (a StepBatch) on every rank and return the
// logits of the rows it asked for. In-process ranks (LocalExecutor) and worker processes over
// gRPC (RemoteExecutor) both sit behind this.
//
//   TP_ASSIGN_OR_RETURN(StepResult r, executor->Execute(batch));
//   absl::Span<const float> row = r.Row(i);  // vocab_size logits of logit row i
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

namespace tpserve {

struct StepResult {
  std::vector<float> logits;  // [batch.num_logit_rows(), vocab_size]
  int64_t vocab_size = 0;
  double compute_s = 0.0;      // model time on rank 0
  double allreduce_s = 0.0;    // of which in collectives
  std::vector<double> rank_compute_s;  // each rank's model time, where the executor knows it
  absl::Span<const float> Row(size_t i) const {
    return absl::MakeConstSpan(logits).subspan(i * vocab_size, vocab_size);
  }
};

class ModelExecutor {
 public:
  virtual ~ModelExecutor() = default;
  // UNAVAILABLE when a rank has died or stopped answering: the engine then fails every
  // request and reports NOT_SERVING.
  virtual absl::StatusOr<StepResult> Execute(const StepBatch& batch) = 0;
  virtual int64_t vocab_size() const = 0;
  virtual std::string Describe() const = 0;
};

}  // namespace tpserve

#endif  // TPSERVE_STEP_EXECUTOR_H_
