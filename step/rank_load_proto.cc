#include "step/rank_load_proto.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "formats/tensor_format.h"

namespace tpserve {
namespace {

namespace wpb = tpserve::worker::v1;

// A collective timeout the request leaves at 0.
constexpr int32_t kDefaultCollectiveTimeoutMs = 10000;

absl::Status CheckAssignments(const char* field, int count, int world_size) {
  if (count == 0 || count == world_size) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, " has ", count, " entries for ",
                                                 world_size, " ranks (one per rank, or none)"));
}

}  // namespace

void ToLoadRequest(const RankLoad& load, wpb::LoadRequest* request) {
  request->set_world_size(load.world_size);
  request->set_pipeline_stages(load.pipeline_stages);
  request->set_model_path(load.model.path);
  request->set_weights(load.model.weights);
  request->set_max_logit_rows(load.model.max_logit_rows);
  request->mutable_assignments()->Assign(load.model.assignments.begin(),
                                         load.model.assignments.end());
  request->clear_draft_model_path();
  request->clear_draft_weights();
  request->clear_draft_max_logit_rows();
  request->clear_draft_assignments();
  request->clear_draft_mtp();
  if (load.draft.has_value()) {
    request->set_draft_model_path(load.draft->path);
    request->set_draft_weights(load.draft->weights);
    request->set_draft_max_logit_rows(load.draft->max_logit_rows);
    request->set_draft_mtp(load.draft->mtp);
    request->mutable_draft_assignments()->Assign(load.draft->assignments.begin(),
                                                 load.draft->assignments.end());
  }
  request->set_vocab_size(load.vocab_size);
  request->set_kv_dtype(std::string(KvDtypeName(load.kv_dtype)));
  request->set_num_kv_blocks(load.num_kv_blocks);
  request->set_block_size_tokens(load.block_size_tokens);
  request->set_max_tokens_per_step(load.max_tokens_per_step);
  request->set_max_context_tokens(load.max_context_tokens);
  request->set_num_threads(load.threads_per_rank);
  request->set_deterministic_tp(load.deterministic_tp);
  request->set_deterministic_tp_chunks(load.deterministic_tp_chunks);
  request->set_expert_parallel(load.expert_parallel);
  request->set_attention_dp(load.attention_dp);
  request->set_strict_kernels(load.strict_kernels);
  request->set_enforce_eager(load.enforce_eager);
  request->set_collective_timeout_ms(
      static_cast<int32_t>(absl::ToInt64Milliseconds(load.collective_timeout)));
  request->set_startup_timeout_ms(
      static_cast<int32_t>(absl::ToInt64Milliseconds(load.startup_timeout)));
}

absl::StatusOr<RankLoad> RankLoadFromRequest(const wpb::LoadRequest& request) {
  if (request.world_size() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("world_size = ", request.world_size(), " must be at least 1"));
  }
  if (request.pipeline_stages() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline_stages = ", request.pipeline_stages(), " must be at least 1 (0: 1)"));
  }
  RankLoad load;
  load.world_size = request.world_size();
  load.pipeline_stages = std::max(1, request.pipeline_stages());
  load.model.path = request.model_path();
  load.model.weights = request.weights();
  load.model.max_logit_rows = request.max_logit_rows();
  if (absl::Status s =
          CheckAssignments("assignments", request.assignments_size(), load.total_ranks());
      !s.ok()) {
    return s;
  }
  load.model.assignments.assign(request.assignments().begin(), request.assignments().end());
  if (!request.draft_model_path().empty()) {
    if (absl::Status s = CheckAssignments("draft_assignments", request.draft_assignments_size(),
                                          load.total_ranks());
        !s.ok()) {
      return s;
    }
    ModelLoad& draft = load.draft.emplace();
    draft.path = request.draft_model_path();
    draft.weights = request.draft_weights();
    draft.max_logit_rows = request.draft_max_logit_rows();
    draft.mtp = request.draft_mtp();
    draft.assignments.assign(request.draft_assignments().begin(),
                             request.draft_assignments().end());
  }
  load.vocab_size = request.vocab_size();
  absl::StatusOr<DType> kv_dtype = ParseKvDtype(request.kv_dtype());
  if (!kv_dtype.ok()) return kv_dtype.status();
  load.kv_dtype = *kv_dtype;
  load.num_kv_blocks = request.num_kv_blocks();
  load.block_size_tokens = request.block_size_tokens();
  load.max_tokens_per_step = request.max_tokens_per_step();
  load.max_context_tokens = request.max_context_tokens();
  load.threads_per_rank = request.num_threads();
  load.deterministic_tp = request.deterministic_tp();
  load.deterministic_tp_chunks = request.deterministic_tp_chunks();
  load.expert_parallel = request.expert_parallel();
  load.attention_dp = request.attention_dp();
  load.strict_kernels = request.strict_kernels();
  load.enforce_eager = request.enforce_eager();
  load.collective_timeout = absl::Milliseconds(request.collective_timeout_ms() > 0
                                                   ? request.collective_timeout_ms()
                                                   : kDefaultCollectiveTimeoutMs);
  load.startup_timeout = absl::Milliseconds(std::max(0, request.startup_timeout_ms()));
  return load;
}

}  // namespace tpserve
