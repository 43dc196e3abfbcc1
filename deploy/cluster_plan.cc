#include "deploy/cluster_plan.h"

#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "checkpoint/stored_formats.h"
#include "model/bundled_model.h"
#include "model/sharding.h"
#include "planner/gpu_spec.h"
#include "model/weight_formats.h"
#include "worker/shard_assignment.h"

namespace tpserve {
namespace {

// Sizing memory needs no speeds; the plan still wants them for its time estimates, which a
// launch does not print. (docs/PERFORMANCE.md has this host's measured figures.)
constexpr double kTimeOnlyBandwidth = 10e9;
constexpr double kTimeOnlyFlops = 100e9;

// The draft model's line of a plan summary ("" without one).
std::string DraftSummary(const MemoryPlan& m) {
  if (!m.inputs.draft.has_value()) return "";
  const StageMemory& s = m.stages[0];
  return absl::StrFormat(
      "plan: draft model %s as %s, per rank: weights %s, step buffers %s, %s of KV per token; "
      "memory for %d KV blocks instead of %d\n",
      m.inputs.draft->model.name, m.inputs.draft->weights.preset,
      FormatBytes(s.draft_weight_bytes), FormatBytes(s.draft_activations.Total()),
      FormatBytes(s.draft_kv_bytes_per_token), m.num_kv_blocks, m.num_kv_blocks_without_draft);
}

}  // namespace

absl::StatusOr<std::string> ResolveModelPath(const std::string& name) {
  if (BundledModelFile(name).has_value()) return BundledModelPath(name);
  if (std::filesystem::exists(name)) return name;
  if (ModelSpecPreset(name.substr(0, name.find('-'))).ok()) {
    return absl::NotFoundError(absl::StrCat(
        "--model=", name, " names a model shape, not weights: pass a checkpoint path to serve it, "
        "or plan it with `bazel run //deploy:vram -- --model=", name.substr(0, name.find('-')),
        "`"));
  }
  return absl::NotFoundError(absl::StrCat("--model=", name, ": no such file or directory"));
}

absl::StatusOr<DraftPlanInputs> ResolveDraftModel(const std::string& name,
                                                  const std::string& weights, int ranks,
                                                  std::string* path) {
  absl::StatusOr<std::string> resolved = ResolveModelPath(name);
  if (!resolved.ok()) {
    return absl::Status(resolved.status().code(),
                        absl::StrCat("--draft_model: ", resolved.status().message()));
  }
  TP_ASSIGN_OR_RETURN(ModelFiles files, OpenModelFiles(*resolved));
  DraftPlanInputs draft;
  draft.model = files.config;
  absl::StatusOr<WeightFormats> formats =
      ResolveWeightFormats(files.stored_formats, weights, files.config, ranks);
  if (!formats.ok()) {
    return absl::Status(formats.status().code(),
                        absl::StrCat("--draft_weights: ", formats.status().message()));
  }
  draft.weights = *std::move(formats);
  *path = *std::move(resolved);
  return draft;
}

absl::StatusOr<DraftPlanInputs> MtpDraftPlan(const ModelFiles& target, const std::string& weights,
                                             int ranks) {
  TP_ASSIGN_OR_RETURN(ModelFiles files, MtpDraftFiles(target));
  DraftPlanInputs draft;
  draft.model = files.config;
  TP_ASSIGN_OR_RETURN(draft.weights,
                      ResolveWeightFormats(files.stored_formats, weights, files.config, ranks));
  return draft;
}

int64_t LogitRows(const ClusterRequest& request) {
  int64_t rows = request.max_seqs;
  const SpeculativeOptions& spec = request.speculative;
  if (spec.method != SpeculativeMethod::kOff) {
    const int64_t drafting = spec.max_batch > 0 ? std::min(spec.max_batch, request.max_seqs)
                                                : request.max_seqs;
    rows += drafting * spec.num_speculative_tokens;
  }
  return std::min(rows, request.max_tokens_per_step);
}

namespace {

// The speculative part of a plan's inputs and of its engine options.
void ApplySpeculation(const ClusterRequest& request, PlanInputs& in) {
  in.max_sequences_per_step = LogitRows(request);
  if (request.draft.has_value()) {
    in.draft = request.draft;
    in.draft->max_sequences_per_step = std::min<int64_t>(request.max_seqs, request.max_tokens_per_step);
  }
}

void SpeculativeEngine(const ClusterRequest& request, const PlanInputs& in, EngineOptions& engine) {
  engine.speculative = request.speculative;
  engine.scheduler.max_logit_rows = static_cast<int32_t>(in.max_sequences_per_step);
}

}  // namespace

absl::StatusOr<PlanInputs> CpuPlanInputs(const ModelFiles& files, const ClusterRequest& request) {
  PlanInputs in;
  in.model = files.config;
  TP_ASSIGN_OR_RETURN(in.weights, ResolveWeightFormats(files.stored_formats, request.weights,
                                                       files.config, request.ranks));
  in.kv_cache_dtype = FormatOfDType(request.kv_dtype).kind;
  in.deterministic_tp = request.deterministic_tp;
  in.cuda_graphs = !request.enforce_eager;
  in.deterministic_tp_chunks = request.deterministic_tp_chunks;
  in.expert_parallel = request.expert_parallel;
  in.attention_dp = request.attention_dp;
  in.activation_dtype = FormatKind::kF32;
  in.tp = request.ranks;
  in.pp = request.pp;
  int64_t host_bytes = request.host_memory_bytes;
  if (host_bytes == 0) {
    TP_ASSIGN_OR_RETURN(GpuSpec host, HostCpuSpec("/proc/meminfo", kTimeOnlyBandwidth,
                                                  kTimeOnlyFlops));
    host_bytes = host.memory_bytes;
  }
  // The ranks share the host: each plans against its share.
  in.device = HostCpuSpecFromMemTotal(host_bytes / (request.ranks * request.pp),
                                      kTimeOnlyBandwidth,
                                      kTimeOnlyFlops);
  in.max_context_tokens = std::min(request.context_tokens, files.config.max_context_tokens);
  in.max_tokens_per_step = request.max_tokens_per_step;
  in.max_sequences_per_step = std::min<int64_t>(request.max_seqs, request.max_tokens_per_step);
  in.target_concurrent_sequences = request.max_seqs;
  in.kv_block_size_tokens = request.block_size_tokens;
  ApplySpeculation(request, in);
  return in;
}

absl::StatusOr<ClusterPlan> PlanCluster(const ModelFiles& files, const ClusterRequest& request) {
  TP_ASSIGN_OR_RETURN(PlanInputs inputs, CpuPlanInputs(files, request));
  ClusterPlan plan;
  plan.formats = inputs.weights;
  TP_ASSIGN_OR_RETURN(plan.memory, PlanMemory(inputs));
  const MemoryPlan& m = plan.memory;
  if (!m.meets_target) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this configuration does not fit: ", m.verdict,
        " (plan it with `bazel run //deploy:vram`)"));
  }
  // CPU ranks take the KV for the target sequences (each rank its share of them with
  // data-parallel attention), not all of host memory.
  const int64_t seqs_per_rank = (request.max_seqs + m.kv_partitions - 1) / m.kv_partitions;
  plan.num_kv_blocks = static_cast<int32_t>(
      std::min(m.num_kv_blocks, m.blocks_per_sequence * seqs_per_rank));
  plan.block_size_tokens = static_cast<int32_t>(inputs.kv_block_size_tokens);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  plan.threads_per_rank = std::max(1, cores / (request.ranks * request.pp));
  plan.engine.num_kv_blocks = static_cast<int32_t>(plan.num_kv_blocks * m.kv_partitions);
  plan.engine.kv_partitions = static_cast<int32_t>(m.kv_partitions);
  plan.engine.block_size_tokens = plan.block_size_tokens;
  plan.engine.context_length = inputs.max_context_tokens;
  plan.engine.scheduler.max_num_seqs = request.max_seqs;
  plan.engine.scheduler.max_tokens_per_step = static_cast<int32_t>(request.max_tokens_per_step);
  SpeculativeEngine(request, inputs, plan.engine);
  const StageMemory& s = m.stages[0];
  plan.summary = DraftSummary(m) + absl::StrFormat(
      "plan: %d CPU rank(s)%s%s%s, per rank%s: weights %s, step buffers %s, KV cache %d blocks x "
      "%d tokens = %s (%d sequences of %d tokens)\n",
      request.ranks,
      request.pp > 1 ? absl::StrFormat(" x %d pipeline stages", request.pp) : std::string(),
      inputs.expert_parallel ? " with whole experts each" : "",
      inputs.attention_dp ? ", data-parallel attention (each caches its own sequences)" : "",
      request.pp > 1 ? " of stage 0" : "", FormatBytes(s.weight_bytes),
      FormatBytes(s.activations.Total() + s.comm.Total()), plan.num_kv_blocks,
      plan.block_size_tokens,
      FormatBytes(int64_t{plan.num_kv_blocks} * s.kv_bytes_per_block), request.max_seqs,
      inputs.max_context_tokens);
  return plan;
}

absl::StatusOr<MemoryPlan> PlanGpus(const ModelSpec& config, const WeightFormats& formats,
                                    int gpus, const GpuSpec& gpu, const ClusterRequest& request) {
  PlanInputs in;
  in.model = config;
  in.weights = formats;
  in.kv_cache_dtype = FormatOfDType(request.kv_dtype).kind;
  in.deterministic_tp = request.deterministic_tp;
  in.cuda_graphs = !request.enforce_eager;
  in.deterministic_tp_chunks = request.deterministic_tp_chunks;
  in.expert_parallel = request.expert_parallel;
  in.attention_dp = request.attention_dp;
  in.activation_dtype = FormatKind::kBF16;  // the CUDA backend's activations
  in.tp = gpus;
  in.pp = request.pp;
  in.device = gpu;
  in.max_context_tokens = std::min(request.context_tokens, config.max_context_tokens);
  in.max_tokens_per_step = request.max_tokens_per_step;
  in.max_sequences_per_step = std::min<int64_t>(request.max_seqs, request.max_tokens_per_step);
  in.target_concurrent_sequences = request.max_seqs;
  in.kv_block_size_tokens = request.block_size_tokens;
  ApplySpeculation(request, in);
  return PlanMemory(in);
}

absl::StatusOr<ClusterPlan> GpuClusterPlan(MemoryPlan memory, const ClusterRequest& request) {
  if (!memory.meets_target) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this configuration does not fit: ", memory.verdict,
        " (plan it with `bazel run //deploy:vram`)"));
  }
  ClusterPlan plan;
  plan.formats = memory.inputs.weights;
  // GPU ranks take every block the plan fits: KV is what a GPU's memory is for.
  plan.num_kv_blocks = static_cast<int32_t>(std::min<int64_t>(memory.num_kv_blocks, INT32_MAX));
  plan.block_size_tokens = static_cast<int32_t>(memory.inputs.kv_block_size_tokens);
  plan.threads_per_rank = 1;
  plan.engine.num_kv_blocks =
      static_cast<int32_t>(std::min<int64_t>(plan.num_kv_blocks * memory.kv_partitions, INT32_MAX));
  plan.engine.kv_partitions = static_cast<int32_t>(memory.kv_partitions);
  plan.engine.block_size_tokens = plan.block_size_tokens;
  plan.engine.context_length = memory.inputs.max_context_tokens;
  plan.engine.scheduler.max_num_seqs = request.max_seqs;
  plan.engine.scheduler.max_tokens_per_step = static_cast<int32_t>(request.max_tokens_per_step);
  SpeculativeEngine(request, memory.inputs, plan.engine);
  const StageMemory& s = memory.stages[0];
  plan.summary = DraftSummary(memory) + absl::StrFormat(
      "plan: %d x %s%s%s, per GPU: weights %s, step buffers %s, KV cache %d blocks x %d tokens = "
      "%s\n",
      memory.inputs.tp, memory.inputs.device.name,
      memory.inputs.expert_parallel ? " with whole experts each" : "",
      memory.inputs.attention_dp ? ", data-parallel attention" : "", FormatBytes(s.weight_bytes),
      FormatBytes(s.activations.Total() + s.comm.Total()), plan.num_kv_blocks,
      plan.block_size_tokens, FormatBytes(s.kv_pool_bytes));
  plan.memory = std::move(memory);
  return plan;
}

namespace {

// One model the ranks hold, with every rank's slices of it.
absl::StatusOr<ModelLoad> ModelLoadFor(const ModelSpec& config, const WeightFormats& formats,
                                       int world_size, int stages, bool expert_parallel,
                                       bool attention_dp, std::string path,
                                       std::string weights, int64_t max_logit_rows) {
  ModelLoad model;
  model.path = std::move(path);
  model.weights = std::move(weights);
  model.max_logit_rows = static_cast<int32_t>(max_logit_rows);
  for (int stage = 0; stage < stages; ++stage) {  // rank stage * world_size + r
    for (int r = 0; r < world_size; ++r) {
      TP_ASSIGN_OR_RETURN(ShardingPlan shards,
                          ShardingPlan::Create(config, formats,
                                               {r, world_size, expert_parallel, attention_dp,
                                                stage, stages}));
      model.assignments.push_back(ToAssignment(shards));
    }
  }
  return model;
}

}  // namespace

absl::StatusOr<RankLoad> RankLoadFor(const ClusterPlan& plan, const ClusterRequest& request) {
  const PlanInputs& in = plan.memory.inputs;
  RankLoad load;
  load.world_size = static_cast<int32_t>(in.tp);
  load.pipeline_stages = static_cast<int32_t>(in.pp);
  TP_ASSIGN_OR_RETURN(load.model,
                      ModelLoadFor(in.model, plan.formats, load.world_size, in.pp,
                                   in.expert_parallel,
                                   in.attention_dp, request.model_path, request.weights,
                                   plan.engine.scheduler.max_logit_rows));
  if (in.draft.has_value()) {
    // The draft's experts, where it has any, are split: DraftLoad.
    TP_ASSIGN_OR_RETURN(load.draft, ModelLoadFor(in.draft->model, in.draft->weights,
                                                 load.world_size, /*stages=*/1,
                                                 /*expert_parallel=*/false,
                                                 /*attention_dp=*/false,
                                                 request.draft_model_path,
                                                 request.draft_weights,
                                                 in.draft->max_sequences_per_step));
    load.draft->mtp = in.draft->model.is_mtp_draft();
  }
  load.vocab_size = in.model.vocab_size;
  load.kv_dtype = request.kv_dtype;
  load.num_kv_blocks = plan.num_kv_blocks;
  load.block_size_tokens = plan.block_size_tokens;
  load.max_tokens_per_step = plan.engine.scheduler.max_tokens_per_step;
  load.max_context_tokens = static_cast<int32_t>(plan.engine.context_length);
  load.threads_per_rank =
      request.threads_per_rank > 0 ? request.threads_per_rank : plan.threads_per_rank;
  load.deterministic_tp = request.deterministic_tp;
  load.deterministic_tp_chunks = static_cast<int32_t>(request.deterministic_tp_chunks);
  load.expert_parallel = in.expert_parallel;
  load.attention_dp = in.attention_dp;
  load.strict_kernels = request.strict_kernels;
  load.enforce_eager = request.enforce_eager;
  load.collective_timeout = request.collective_timeout;
  load.startup_timeout = request.startup_timeout;
  return load;
}

}  // namespace tpserve
