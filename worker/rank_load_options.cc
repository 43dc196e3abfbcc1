#include "worker/rank_load_options.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "checkpoint/stored_formats.h"
#include "model/sharding.h"
#include "worker/shard_assignment.h"

namespace tpserve {

absl::StatusOr<RankRuntimeOptions> RankRuntimeOptionsFor(const RankLoad& load, int rank,
                                                         const ModelFiles& files) {
  const ModelLoad& model = load.model;
  if (load.pipeline_stages < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline_stages = ", load.pipeline_stages, " must be at least 1"));
  }
  if (rank < 0 || rank >= load.total_ranks()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is not in [0, ", load.total_ranks(), ")"));
  }
  // Rank `rank` of all is rank tp_rank of its stage's tensor-parallel group.
  const int stage = rank / load.world_size, tp_rank = rank % load.world_size;
  if (load.vocab_size > 0 && files.config.vocab_size != load.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the coordinator planned a vocabulary of ", load.vocab_size, " tokens, but ",
        files.path.empty() ? files.config.name : files.path, " has ", files.config.vocab_size));
  }
  TP_ASSIGN_OR_RETURN(WeightFormats formats,
                      ResolveWeightFormats(files.stored_formats, model.weights, files.config,
                                           load.world_size));
  if (!model.assignments.empty()) {
    // They were built from different models or code otherwise.
    TP_ASSIGN_OR_RETURN(ShardingPlan plan,
                        ShardingPlan::Create(files.config, formats,
                                             {tp_rank, load.world_size, load.expert_parallel,
                                              load.attention_dp, stage, load.pipeline_stages}));
    const tpserve::worker::v1::ShardAssignment mine = ToAssignment(plan);
    const tpserve::worker::v1::ShardAssignment& assigned = model.assignments.at(rank);
    if (mine.SerializeAsString() != assigned.SerializeAsString()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the coordinator assigned {", assigned.ShortDebugString(),
          "} but this rank's sharding plan is {", mine.ShortDebugString(), "}"));
    }
  }
  RankRuntimeOptions o;
  o.backend.num_threads = std::max(1, load.threads_per_rank);
  // A GPU backend's part of --deterministic_tp: pinned GEMMs, per-row attention splits.
  o.backend.deterministic = load.deterministic_tp;
  // And its load-time kernel checks: the batch sizes they plan, and whether a decode-to-bf16
  // fallback refuses the load (--strict_kernels).
  o.backend.strict_kernels = load.strict_kernels;
  o.backend.max_tokens_per_step = load.max_tokens_per_step;
  // --enforce_eager: no step recorded, by the model (which asks) or the backend (which would).
  o.backend.cuda_graphs = !load.enforce_eager;
  o.load.record_decode_steps = !load.enforce_eager;
  o.expert_parallel = load.expert_parallel;
  o.attention_dp = load.attention_dp;
  o.comm.rank = tp_rank;
  o.comm.world_size = load.world_size;
  o.stage = stage;
  o.num_stages = load.pipeline_stages;
  o.comm.timeout = load.collective_timeout;
  o.comm.startup_timeout = load.startup_timeout;
  o.load.max_tokens_per_step = load.max_tokens_per_step;
  o.load.max_logit_rows = model.max_logit_rows;
  o.load.max_context_tokens = load.max_context_tokens;
  o.load.formats = std::move(formats);
  o.load.scheme = files.scheme;
  o.load.reduction = load.deterministic_tp ? TpReduction::kDeterministic : TpReduction::kAllReduce;
  o.load.reduction_chunks = load.deterministic_tp_chunks;
  o.num_kv_blocks = load.num_kv_blocks;
  o.block_size_tokens = load.block_size_tokens;
  o.kv_dtype = load.kv_dtype;
  return o;
}

void PlacePipeline(RankRuntimeOptions& o) {
  if (o.num_stages == 1) return;
  const CommunicatorOptions placed = o.comm;
  const auto group = [&](const std::string& name, int rank, int world) {
    CommunicatorOptions g = placed;
    g.run_id = absl::StrCat(placed.run_id, "/", name);
    g.rank = rank;
    g.world_size = world;
    return g;
  };
  // The stage's own tensor-parallel group (one rank: no collectives to meet for).
  o.comm = group(absl::StrCat("stage", o.stage), placed.rank, placed.world_size);
  if (placed.world_size == 1) o.comm.kind = CommunicatorKind::kSingleRank;
  // Link s joins tensor-parallel rank t of stages s and s + 1.
  const auto link = [&](int s) { return absl::StrCat("pipe", s, ".", placed.rank); };
  if (o.stage > 0) o.from_prev = group(link(o.stage - 1), 1, 2);
  if (o.stage < o.num_stages - 1) o.to_next = group(link(o.stage), 0, 2);
}

}  // namespace tpserve
