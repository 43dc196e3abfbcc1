// Everything one tensor-parallel rank runs with: its compute backend, its communicator, its
// slice of the model and its slice of the paged KV cache, built by one factory from one set of
// options. The worker process (WorkerService) and the in-process executor (LocalExecutor) both
// hold RankRuntimes, so neither assembles a rank by hand.
//
//   RankRuntimeOptions o;
//   o.backend = {.kind = BackendKind::kCpu, .num_threads = 2};
//   o.comm = {.kind = CommunicatorKind::kGloo, .rank = 1, .world_size = 2, ...};
//   o.num_kv_blocks = 512;
//   TP_ASSIGN_OR_RETURN(auto rank, RankRuntime::Create(config, weights, o));
//   TP_RETURN_IF_ERROR(rank->Step(batch, logits.data()));
//
// Create blocks until the communicator has joined its peers. A GPU rank's NCCL communicator
// enqueues its collectives on the backend's stream (CommunicatorOptions.cuda_stream is set from
// Backend::stream()), and the step waits for them once, with the collective deadline, before it
// reads logits (Communicator::AwaitCollectives, called by LlamaModel::Forward).
// Threading: Step is not reentrant; one step at a time per runtime (ranks of a group run their
// steps concurrently).
#ifndef TPSERVE_WORKER_RANK_RUNTIME_H_
#define TPSERVE_WORKER_RANK_RUNTIME_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "comm/communicator_factory.h"
#include "formats/weight_source.h"
#include "kernels/backend.h"
#include "kernels/backend_factory.h"
#include "model/config.h"
#include "worker/kv_cache.h"
#include "worker/llama_model.h"
#include "worker/timed_communicator.h"

namespace tpserve {

struct RankRuntimeOptions {
  BackendOptions backend;
  CommunicatorOptions comm;  // rank and world_size are the rank's shard too (in its stage)
  // Pipeline stages (model/sharding.h's ShardSpec): this rank's stage, and the two-rank groups
  // to the same tensor-parallel rank of the stages before and after it (worker/llama_model.h's
  // PipelineLinks; PlacePipeline in worker/rank_load_options.h fills them from `comm`).
  int stage = 0;
  int num_stages = 1;
  std::optional<CommunicatorOptions> from_prev;
  std::optional<CommunicatorOptions> to_next;
  bool expert_parallel = false;  // the shard's experts placed whole (model/sharding.h)
  bool attention_dp = false;     // the whole attention, for this rank's sequences only
  LlamaLoadOptions load;
  int64_t num_kv_blocks = 0;
  int64_t block_size_tokens = 16;
  DType kv_dtype = DType::kF16;
};

class RankRuntime {
 public:
  // The backend's, communicator's, loader's and KV cache's errors, prefixed with the rank;
  // INVALID_ARGUMENT when the communicator cannot work on the backend's memory (nccl with a
  // CPU backend, gloo or in_process with a GPU one) or names another GPU than the backend.
  static absl::StatusOr<std::unique_ptr<RankRuntime>> Create(
      const ModelSpec& config, std::shared_ptr<const WeightSource> weights,
      const RankRuntimeOptions& options);
  ~RankRuntime();

  // One forward step; on the sampling rank (kSamplingRank) writes logits
  // [batch.num_logit_rows(), vocab] to host memory `logits`, or keeps them for SampleHeld when
  // it is nullptr (the other ranks receive none and may pass nullptr).
  // A step that fails with UNAVAILABLE or DEADLINE_EXCEEDED (a collective or a device wait did
  // not finish: a dead peer, a hung device) may leave work queued that never finishes; the
  // runtime then aborts itself, so that no later wait, its destructor's included, hangs on it.
  absl::Status Step(const StepBatch& batch, float* logits);

  // The sampling rank: samples the logits its last Step kept (logits == nullptr) where they
  // are (LlamaModel::SampleHeld); a device wait that fails aborts the runtime, as Step's.
  absl::Status SampleHeld(const SamplingRows& rows, absl::Span<RowSample> out);
  // Whether the sampling rank samples where the logits are (Backend::PrefersSampleRows).
  bool PrefersSampleRows() const { return backend_->PrefersSampleRows(); }

  // Re-forms this rank's communicators as `options` place them (a fresh rendezvous: the group
  // lost a rank and its successor joins), keeping the backend, the weights and the KV cache's
  // memory; blocks until every peer has joined. After a failed step, when a rank was replaced.
  // On a GPU the old NCCL communicators are aborted first and the backend recovers from the
  // abort (Backend::RecoverFromAbort): not yet run on a GPU. The communicators' and the
  // backend's errors; after one, Step and SampleHeld fail FAILED_PRECONDITION naming it.
  absl::Status Regroup(const RankRuntimeOptions& options);

  // Ends the host waits in progress on the device and the communicator, and makes every later
  // one fail at once with UNAVAILABLE (Backend::RequestAbort, Communicator::RequestAbort): for
  // a rank being torn down. The runtime is unusable afterwards. Safe from any thread, also
  // while Step runs.
  void RequestAbort();

  int rank() const { return rank_; }
  Backend& backend() { return *backend_; }
  TimedCommunicator& comm() { return *comm_; }
  // How the steps since the last call routed their tokens through this stage's MoE layers
  // (LlamaModel::TakeExpertLoad), reported by TP rank 0 of the stage: its TP peers route alike,
  // so theirs is taken and dropped (empty), and the stages' reports add up to every layer's.
  ExpertLoad TakeExpertLoad() {
    ExpertLoad load = model_->TakeExpertLoad();
    return rank_ == 0 ? load : ExpertLoad{};
  }
  // Weight bytes the backend decoded whole since the last call (Backend::TakeDecodedWeightBytes).
  int64_t TakeDecodedWeightBytes() { return backend_->TakeDecodedWeightBytes(); }
  LlamaModel& model() { return *model_; }
  KvCache& cache() { return *cache_; }
  MemoryFootprint footprint() const { return model_->footprint(); }
  int64_t kv_cache_bytes() const { return cache_->bytes(); }
  // Makes `draft` (this target's multi-token-prediction draft, on the same rank) step on this
  // runtime's last hidden states: a store of them in this runtime's memory, written by every
  // target step and read by the draft's (LlamaModel::SetHiddenStore). UNIMPLEMENTED where
  // either runtime is not on the host (the hand-off between two GPU backends' streams is not
  // built); the store's allocation errors.
  absl::Status AttachMtpDraft(RankRuntime& draft);
  int64_t hidden_store_bytes() const { return hidden_store_ ? hidden_store_->bytes() : 0; }

 private:
  RankRuntime() = default;
  // `options`' communicator, enqueuing on the backend's stream unless they name another.
  absl::StatusOr<std::unique_ptr<Communicator>> MakeOnStream(CommunicatorOptions options) const;
  // The pipeline links `options` name (none without stages), made anew.
  absl::StatusOr<PipelineLinks> MakeLinks(const RankRuntimeOptions& options);

  int rank_ = 0;
  std::shared_ptr<const WeightSource> weights_;  // views into it outlive nothing
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<TimedCommunicator> comm_;
  std::unique_ptr<Communicator> from_prev_, to_next_;  // pipeline links (RankRuntimeOptions')
  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<KvCache> hidden_store_;  // AttachMtpDraft's
  absl::Status unusable_;  // a failed Regroup's: no step runs on a half-formed group
};

}  // namespace tpserve

#endif  // TPSERVE_WORKER_RANK_RUNTIME_H_
