// How a launch sizes itself: which model file a name means, and, from the memory plan
// (planner/memory_plan.h) with this host as the device, how many KV blocks each rank gets.
// A configuration the plan says cannot fit is refused with the plan's verdict. From the plan,
// RankLoadFor makes the one description of what every rank loads (step/rank_load.h) that the
// executors are given, in-process or remote.
//
//   TP_ASSIGN_OR_RETURN(std::string path, ResolveModelPath("smollm2"));
//   TP_ASSIGN_OR_RETURN(ClusterPlan plan, PlanCluster(files, {.ranks = 3, ...}));
//   TP_ASSIGN_OR_RETURN(RankLoad load, RankLoadFor(plan, request));
#ifndef TPSERVE_DEPLOY_CLUSTER_PLAN_H_
#define TPSERVE_DEPLOY_CLUSTER_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/step_budget.h"
#include "checkpoint/model_files.h"
#include "coordinator/engine.h"
#include "formats/dtype.h"
#include "planner/gpu_spec.h"
#include "planner/memory_plan.h"
#include "step/rank_load.h"

namespace tpserve {

struct ClusterRequest {
  int ranks = 1;  // the tensor-parallel degree (of each pipeline stage)
  // Pipeline stages (--pp): ranks x pp rank processes, stage s of contiguous layers on ranks
  // [s * ranks, (s + 1) * ranks).
  int pp = 1;
  int64_t context_tokens = 4096;   // capped at the model's window
  int max_seqs = 8;                // sequences served at once, each up to context_tokens
  int64_t max_tokens_per_step = kCpuMaxTokensPerStep;  // launch: --max_tokens_per_step
  int64_t block_size_tokens = 16;
  // The host's memory budget for all ranks together; 0 = MemTotal of /proc/meminfo.
  int64_t host_memory_bytes = 0;
  // "" = weights as the checkpoint stores them; a preset ("fp8", "int4", ...) quantizes on load.
  std::string weights;
  DType kv_dtype = DType::kF16;
  bool deterministic_tp = false;  // --deterministic_tp: sizes its step buffers and collectives
  int64_t deterministic_tp_chunks = 0;  // --deterministic_tp_chunks (0: the default count)
  bool expert_parallel = false;   // --expert_parallel: whole experts per rank (model/sharding.h)
  // --attention_dp: the whole attention on every rank, each caching its own sequences
  // (model/sharding.h); the engine's KV blocks are the ranks' caches together.
  bool attention_dp = false;
  // Speculative decoding (--speculative ...): the engine's options; the target's rows of
  // logits make room for the drafts of the sequences that may draft at once.
  SpeculativeOptions speculative;
  // The draft model, with speculative.method kDraft (ResolveDraftModel) or kMtp (MtpDraftPlan:
  // the target's own MTP layer): planned on the same ranks (planner/memory_plan.h's
  // DraftPlanInputs; its max_sequences_per_step is set here).
  std::optional<DraftPlanInputs> draft;
  // Not planned, only passed to the ranks (RankLoadFor): what they open, the model's files
  // and the draft's (--draft_weights: "" = as stored), their CPU threads (0 = the plan's:
  // cores / ranks, 1 on GPUs) and how long a collective may wait.
  std::string model_path;
  std::string draft_model_path;
  std::string draft_weights;
  int threads_per_rank = 0;
  bool strict_kernels = false;  // --strict_kernels: RankLoad::strict_kernels
  bool enforce_eager = false;   // --enforce_eager: RankLoad::enforce_eager
  absl::Duration collective_timeout = absl::Seconds(30);
  absl::Duration startup_timeout = absl::Seconds(120);  // --startup_timeout_ms
};

// A draft model named by --draft_model (a path, or "smollm2") and held as --draft_weights ("" =
// as stored) on `ranks` ranks: its plan inputs, and its path in `path`.
absl::StatusOr<DraftPlanInputs> ResolveDraftModel(const std::string& name,
                                                  const std::string& weights, int ranks,
                                                  std::string* path);

// --speculative=mtp: the multi-token-prediction layer of the opened `target` as its draft, held
// as `weights` (the target's --weights) on `ranks` ranks. MtpDraftSpec's FAILED_PRECONDITION for
// a model without one; NOT_FOUND for a missing tensor.
absl::StatusOr<DraftPlanInputs> MtpDraftPlan(const ModelFiles& target, const std::string& weights,
                                             int ranks);

// Rows of logits a step may return: one per sequence, and a drafted token's each for the
// sequences that may draft at once (capped at the step's tokens).
int64_t LogitRows(const ClusterRequest& request);

struct ClusterPlan {
  MemoryPlan memory;
  WeightFormats formats;  // what each rank holds (the checkpoint's, or the --weights preset)
  int32_t num_kv_blocks = 0;
  int32_t block_size_tokens = 16;
  int threads_per_rank = 1;
  EngineOptions engine;  // everything but eos_token_ids
  std::string summary;   // a few lines for the operator
};

// "smollm2" (the bundled model under $TPSERVE_MODEL_DIR or ~/.cache/tpserve) or a path.
// NOT_FOUND for a preset shape with no weights (say "use //deploy:vram to plan it") or a
// missing path.
absl::StatusOr<std::string> ResolveModelPath(const std::string& name);

// The plan for serving `files` on `request.ranks` CPU ranks of this host. FAILED_PRECONDITION
// with the plan's verdict when the weights, buffers or KV for max_seqs do not fit.
absl::StatusOr<ClusterPlan> PlanCluster(const ModelFiles& files, const ClusterRequest& request);

// The memory plan of `config` held as `formats` on `gpus` GPUs like `gpu` (a planner preset,
// or the GPUs found: deploy/gpu_target.h): bf16 activations, the requested KV dtype, KV for
// max_seqs sequences of context_tokens. A plan that does not fit is a result (see
// MemoryPlan::meets_target).
absl::StatusOr<MemoryPlan> PlanGpus(const ModelSpec& config, const WeightFormats& formats,
                                    int gpus, const GpuSpec& gpu, const ClusterRequest& request);

// For the plan's GPUs: the KV blocks and engine options, as PlanCluster gives for CPU ranks.
// FAILED_PRECONDITION with the verdict when the plan does not meet its target.
absl::StatusOr<ClusterPlan> GpuClusterPlan(MemoryPlan plan, const ClusterRequest& request);

// What every rank loads and how it steps, from the plan and the request it was made for: the
// model (and the draft) with the weights the plan holds them in and every rank's slices, the
// KV cache, the step's bounds, the reduction. Sent whole to every rank by RemoteExecutor,
// given to LocalExecutor. The sharding plan's INVALID_ARGUMENT for a model it cannot split.
absl::StatusOr<RankLoad> RankLoadFor(const ClusterPlan& plan, const ClusterRequest& request);

// The plan's inputs for CPU ranks (f32 activations, the requested KV dtype, weights as stored
// or as the --weights preset says): shared by PlanCluster and the test that checks real
// allocations against the plan.
absl::StatusOr<PlanInputs> CpuPlanInputs(const ModelFiles& files, const ClusterRequest& request);

}  // namespace tpserve

#endif  // TPSERVE_DEPLOY_CLUSTER_PLAN_H_
