#include "step/rank_load.h"

namespace tpserve {
namespace {

bool SameAssignments(const std::vector<tpserve::worker::v1::ShardAssignment>& a,
                     const std::vector<tpserve::worker::v1::ShardAssignment>& b) {
  if (a.size() != b.size()) return false;
  for (size_t r = 0; r < a.size(); ++r) {
    if (a[r].SerializeAsString() != b[r].SerializeAsString()) return false;
  }
  return true;
}

bool SameModel(const ModelLoad& a, const ModelLoad& b) {
  return a.path == b.path && a.weights == b.weights && a.max_logit_rows == b.max_logit_rows &&
         a.mtp == b.mtp &&
         SameAssignments(a.assignments, b.assignments);
}

}  // namespace

bool RankLoad::operator==(const RankLoad& other) const {
  return world_size == other.world_size && pipeline_stages == other.pipeline_stages &&
         SameModel(model, other.model) &&
         draft.has_value() == other.draft.has_value() &&
         (!draft.has_value() || SameModel(*draft, *other.draft)) &&
         vocab_size == other.vocab_size && kv_dtype == other.kv_dtype &&
         num_kv_blocks == other.num_kv_blocks && block_size_tokens == other.block_size_tokens &&
         max_tokens_per_step == other.max_tokens_per_step &&
         max_context_tokens == other.max_context_tokens &&
         threads_per_rank == other.threads_per_rank &&
         deterministic_tp == other.deterministic_tp &&
         deterministic_tp_chunks == other.deterministic_tp_chunks &&
         expert_parallel == other.expert_parallel && attention_dp == other.attention_dp &&
         strict_kernels == other.strict_kernels && enforce_eager == other.enforce_eager &&
         collective_timeout == other.collective_timeout &&
         startup_timeout == other.startup_timeout;
}

RankLoad DraftLoad(const RankLoad& load) {
  RankLoad draft = load;
  draft.model = *load.draft;
  draft.draft.reset();
  draft.expert_parallel = false;  // a draft's experts, where it has any, are split
  draft.attention_dp = false;     // (refused with a draft: deploy/cluster_plan.cc)
  draft.deterministic_tp_chunks = 0;  // the count is the target's; the draft keeps its default
  return draft;
}

}  // namespace tpserve
