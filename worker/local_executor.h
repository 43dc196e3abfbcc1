// Runs the model in this process: TP ranks as threads joined by the in-process communicator
// (one rank: no threads at all). The single-process engine of the chat program and the
// reference that the multi-process cluster is compared with.
//
//   TP_ASSIGN_OR_RETURN(auto exec, LocalExecutor::Create(config, std::move(source), options));
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
#include "step/executor.h"
#include "formats/weight_source.h"
#include "model/config.h"
#include "worker/llama_model.h"
#include "worker/rank_runtime.h"

namespace tpserve {

struct LocalExecutorOptions {
  int tp_degree = 1;
  int threads_per_rank = 1;
  int64_t num_kv_blocks = 0;
  int64_t block_size_tokens = 16;
  DType kv_dtype = DType::kF16;
  int64_t max_step_tokens = 512;
  int64_t max_logit_rows = 0;  // sequences per step; 0 = max_step_tokens
  int64_t max_context_tokens = 0;  // the engine's context window; 0 = the model's
  std::optional<WeightFormats> formats;  // unset: as stored; a preset quantizes on load
  QuantScheme scheme;                    // how the checkpoint stores quantized linears
  TpReduction reduction = TpReduction::kAllReduce;  // see model/step_buffers.h
};

class LocalExecutor final : public ModelExecutor {
 public:
  static absl::StatusOr<std::unique_ptr<LocalExecutor>> Create(
      const ModelSpec& config, std::shared_ptr<const WeightSource> source,
      const LocalExecutorOptions& options);
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
};

}  // namespace tpserve

#endif  // TPSERVE_WORKER_LOCAL_EXECUTOR_H_
