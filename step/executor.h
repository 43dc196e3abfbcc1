// What the engine asks of the model: run one step over a batch of sequence chunks on every rank
// and return the logits of each chunk's last token. In-process ranks (LocalExecutor) and worker
// processes over gRPC (RemoteExecutor) both sit behind this.
//
//   TP_ASSIGN_OR_RETURN(StepResult r, executor->Execute(chunks));
//   absl::Span<const float> row = r.Row(i);  // vocab_size logits of chunk i
//
// Threading: called from the engine's step thread only.
#ifndef TPSERVE_STEP_EXECUTOR_H_
#define TPSERVE_STEP_EXECUTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tpserve {

struct ExecutorChunk {
  int64_t seq_id = 0;
  std::vector<int32_t> token_ids;  // the new tokens of this step
  int64_t start_position = 0;      // position of token_ids[0]
  std::vector<int32_t> block_table;
};

struct StepResult {
  std::vector<float> logits;  // [num_chunks, vocab_size]
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
  virtual absl::StatusOr<StepResult> Execute(absl::Span<const ExecutorChunk> chunks) = 0;
  virtual int64_t vocab_size() const = 0;
  virtual std::string Describe() const = 0;
};

}  // namespace tpserve

#endif  // TPSERVE_STEP_EXECUTOR_H_
