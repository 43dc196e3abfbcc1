// Runs the model in this process: TP ranks as threads joined by the in-process communicator
// (one rank: no threads at all), pipeline stages likewise (a group per stage, two-rank links
// between them), each built from the same RankLoad (step/rank_load.h) a
// worker process is sent, through the same derivation (worker/rank_load_options.h). The
// single-process engine of the chat program and the reference that the multi-process cluster
// is compared with.
//
//   TP_ASSIGN_OR_RETURN(auto exec, LocalExecutor::Create(files, RankLoadFor(plan, request)));
//   Engine engine(engine_options, std::move(exec), &tokenizer);
//
// Threading: Execute is called from the engine's step thread only.
#ifndef TPSERVE_WORKER_LOCAL_EXECUTOR_H_
#define TPSERVE_WORKER_LOCAL_EXECUTOR_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/model_files.h"
#include "formats/weight_source.h"
#include "model/config.h"
#include "model/weight_formats.h"
#include "step/executor.h"
#include "step/rank_load.h"
#include "worker/rank_runtime.h"

namespace tpserve {

class LocalExecutor final : public ModelExecutor {
 public:
  // load.world_size ranks of `files`' model (load.model.path is not opened: the weights are
  // files.weights), on the CPU, with load.threads_per_rank threads each. INVALID_ARGUMENT for
  // a world_size below 1; RankRuntimeOptionsFor's and RankRuntime::Create's errors.
  static absl::StatusOr<std::unique_ptr<LocalExecutor>> Create(const ModelFiles& files,
                                                               const RankLoad& load);
  // The same for weights held in memory (no quantization config; stored formats read off
  // `source`).
  static absl::StatusOr<std::unique_ptr<LocalExecutor>> Create(
      const ModelSpec& config, std::shared_ptr<const WeightSource> source, const RankLoad& load);
  ~LocalExecutor() override;

  absl::StatusOr<StepResult> Execute(const StepBatch& batch) override;
  int64_t vocab_size() const override { return vocab_size_; }
  std::string Describe() const override;

  // Bytes held by rank `rank`: weights (resident), KV cache, workspace.
  MemoryFootprint footprint(int rank) const;
  int64_t kv_cache_bytes(int rank) const;
  RankRuntime& rank(int r) { return *ranks_.at(r); }

 private:
  LocalExecutor() = default;

  std::vector<std::unique_ptr<RankRuntime>> ranks_;
  int64_t vocab_size_ = 0;
  int threads_per_rank_ = 1;
  int sampling_rank_ = kSamplingRank;  // RankLoad::sampling_rank: the last stage's first
};

}  // namespace tpserve

#endif  // TPSERVE_WORKER_LOCAL_EXECUTOR_H_
