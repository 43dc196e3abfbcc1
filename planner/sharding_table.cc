#include "planner/sharding_table.h"

#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/str_cat.h"
#include "kernels/backend.h"
#include "kernels/cuda/weight_placement.h"

namespace tpserve {
namespace {

std::vector<int> Divisors(int64_t n) {
  std::vector<int> out;
  for (int64_t d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(static_cast<int>(d));
  }
  return out;
}

// The [rows, cols] of rank 0's slice: the largest any rank holds (later ranks may hold fewer
// vocab rows; the plan counts the difference as padding).
std::array<int64_t, 2> LocalShape(const ShardingPlan& rank0, TensorRole role) {
  const TensorSlice s = rank0.Slice(role);
  return {s.num_rows, s.num_cols};
}

// Extra bytes every rank holds for one row-parallel tensor whose scales are per output row:
// each rank needs all of them.
int64_t RowScaleReplicaBytes(const ModelSpec& config, const TensorFormat& f, TensorRole role,
                             ShardKind kind, int tp) {
  if (kind == ShardKind::kRow && f.kind == FormatKind::kFp8PerChannel) {
    return (tp - 1) * FullShape(config, role)[0] * 4;  // fp32 scale per output row
  }
  return 0;
}

// Device bytes a CUDA rank holds for one [rows, cols] tensor of `role` beyond the stored form:
// the backend's placement decides by the same function (kernels/cuda/weight_placement.h). The
// engine loads the embedding as a table (EmbeddingRows reads it; a tied LM head is it, and a
// tied copy on a later stage would be its copy) and every other matrix for MatMul only.
int64_t BackendFormBytes(const WeightDevice& device, const TensorFormat& held, TensorRole role,
                         std::array<int64_t, 2> shape, bool tied_copy) {
  if (!device.cuda || IsVectorRole(role)) return 0;
  const WeightUse use =
      role == TensorRole::kEmbedding || tied_copy ? WeightUse::kTable : WeightUse::kMatMul;
  return cuda::CudaWeightExtraBytes(held, shape[0], shape[1], use, device.compute_capability);
}

// Fills one role's tensors on a stage (layers [first_layer, first_layer + num_tensors) for a
// per-layer role, each in its own format); `tied_copy` marks a tied LM head that this stage
// must store itself because the embedding lives on another stage. The engine holds norm
// weights as f32 whatever the checkpoint stores, so that is what a rank's bytes count.
absl::StatusOr<RoleShard> ShardRole(const ModelSpec& config, const WeightFormats& formats,
                                    const ShardingPlan& rank0, TensorRole role,
                                    int64_t first_layer, int64_t num_layers,
                                    int64_t vocab_padded, bool tied_copy,
                                    const WeightDevice& device) {
  const int tp = rank0.shard().world_size;
  RoleShard r{role, rank0.KindOf(role), rank0.CopiesOf(role)};
  // Each rank holds num_local_experts() of a layer's experts (all of them without expert
  // parallelism, each a slice).
  const auto local_tensors = [&](int64_t tensors) {
    return IsExpertRole(role) ? tensors / config.moe.routing.num_experts * rank0.num_local_experts()
                              : tensors;
  };
  r.num_tensors = local_tensors(RoleTensorCount(config, role, first_layer, num_layers));
  const std::array<int64_t, 2> full = FullShape(config, role);
  r.local_shape = LocalShape(rank0, role);
  r.smallest_local_shape = r.local_shape;
  r.ranks_with_local_shape = tp;
  if (IsDenseMlpRole(role) && rank0.wider_ffn_ranks() < tp) {
    r.smallest_local_shape[role == TensorRole::kDown ? 1 : 0] =
        rank0.min_local_intermediate_size();
    r.ranks_with_local_shape = rank0.wider_ffn_ranks();
  }
  const std::string what = std::string(TensorRoleName(role));
  // Each tensor with its layer's format (a layer's experts share one).
  std::vector<const TensorFormat*> tensors;
  if (!IsPerLayerRole(role)) tensors.push_back(&formats[role]);
  for (int64_t l = first_layer; IsPerLayerRole(role) && l < first_layer + num_layers; ++l) {
    tensors.insert(tensors.end(), local_tensors(RoleTensorsInLayer(config, role, l)),
                   &formats.At(role, l));
  }
  for (const TensorFormat* format : tensors) {
    const TensorFormat& f = *format;
    const TensorFormat& held = IsVectorRole(role) ? TensorFormat::Of(FormatKind::kF32) : f;
    TP_ASSIGN_OR_RETURN(int64_t full_bytes, MatrixBytes(f, full[0], full[1], what));
    TP_ASSIGN_OR_RETURN(int64_t local_bytes,
                        MatrixBytes(held, r.local_shape[0], r.local_shape[1], what));
    const int64_t backend_form =
        BackendFormBytes(device, held, role, r.local_shape, tied_copy);
    r.bytes_per_rank += local_bytes + backend_form;
    r.backend_form_bytes_per_rank += backend_form;
    if (r.smallest_local_shape != r.local_shape) {
      TP_ASSIGN_OR_RETURN(int64_t small_bytes, MatrixBytes(held, r.smallest_local_shape[0],
                                                           r.smallest_local_shape[1], what));
      const int64_t small_form =
          BackendFormBytes(device, held, role, r.smallest_local_shape, tied_copy);
      const int64_t narrower = tp - r.ranks_with_local_shape;
      r.uneven_bytes += narrower * (local_bytes + backend_form - small_bytes - small_form);
      r.uneven_form_bytes += narrower * (backend_form - small_form);
    }
    if (tied_copy) {
      r.replica_bytes += local_bytes * tp;  // the whole (padded) copy; the checkpoint has none
      continue;
    }
    // An expert placed whole: the other ranks hold the layer's other experts.
    r.unsharded_bytes += r.kind == ShardKind::kExpert ? tp * full_bytes : full_bytes;
    if (r.kind == ShardKind::kVocab) {
      TP_ASSIGN_OR_RETURN(int64_t pad, MatrixBytes(f, vocab_padded - full[0], full[1], what));
      r.padding_bytes += pad;
    }
    // A slice on several ranks (a replicated role, held as f32 even on one rank; k and v past
    // the KV-head count): the tp slices hold r.copies copies of the tensor.
    r.replica_bytes += r.kind == ShardKind::kReplicated || r.copies > 1
                           ? tp * local_bytes - full_bytes
                                    : RowScaleReplicaBytes(config, f, role, r.kind, tp);
  }
  return r;
}

absl::StatusOr<StageShards> ShardStage(const ModelSpec& config, const WeightFormats& formats,
                                       const ShardingPlan& rank0, int stage, int pp,
                                       int64_t vocab_padded, const WeightDevice& device) {
  StageShards s;
  s.stage = stage;
  const StageLayers layers = StageLayersOf(config.num_layers, pp, stage);  // the engine's
  s.num_layers = layers.count;
  s.first_layer = layers.first;
  const bool first = stage == 0, last = stage == pp - 1;
  for (TensorRole role : kAllTensorRoles) {
    if (RoleTensorCount(config, role, s.first_layer, s.num_layers) == 0) continue;
    if (role == TensorRole::kEmbedding && !first) continue;
    if ((role == TensorRole::kFinalNorm || role == TensorRole::kLmHead) && !last) continue;
    if (role == TensorRole::kLmHead && config.tie_word_embeddings && first) {
      RoleShard tied{role, ShardKind::kVocab};
      tied.local_shape = tied.smallest_local_shape = LocalShape(rank0, role);
      tied.ranks_with_local_shape = rank0.shard().world_size;
      tied.tied_to_embedding = true;
      s.roles.push_back(tied);
      continue;
    }
    const bool tied_copy = role == TensorRole::kLmHead && config.tie_word_embeddings;
    TP_ASSIGN_OR_RETURN(RoleShard r, ShardRole(config, formats, rank0, role, s.first_layer,
                                                s.num_layers, vocab_padded, tied_copy, device));
    s.weight_bytes_per_rank += r.bytes_per_rank;
    s.roles.push_back(r);
  }
  return s;
}

}  // namespace

std::vector<int> ValidPipelineDegrees(const ModelSpec& config) {
  return config.num_layers > 0 ? Divisors(config.num_layers) : std::vector<int>{};
}

absl::Status ValidateParallelism(const ModelSpec& config, int tp, int pp,
                                 bool expert_parallel, bool attention_dp) {
  if (pp < 1) {
    return absl::InvalidArgumentError(StrCat("pipeline stages ", pp, " must be >= 1"));
  }
  TP_RETURN_IF_ERROR(ValidateTpDegree(config, tp, expert_parallel, attention_dp));
  if (config.num_layers % pp != 0) {
    return absl::InvalidArgumentError(
        StrCat("pipeline stages ", pp, " does not divide num_layers=", config.num_layers,
               "; valid stage counts are: ", absl::StrJoin(ValidPipelineDegrees(config), ", ")));
  }
  return absl::OkStatus();
}

const RoleShard* StageShards::Find(TensorRole role) const {
  for (const RoleShard& r : roles) {
    if (r.role == role) return &r;
  }
  return nullptr;
}

int64_t ShardingTable::MaxWeightBytesPerRank() const {
  int64_t max_bytes = 0;
  for (const StageShards& s : stages) max_bytes = std::max(max_bytes, s.weight_bytes_per_rank);
  return max_bytes;
}

int64_t ShardingTable::AllRanksWeightBytes() const {
  return checkpoint_bytes + padding_bytes + replica_bytes + backend_form_bytes;
}

absl::StatusOr<ShardingTable> PlanSharding(const ModelSpec& config, const WeightFormats& formats,
                                          int tp, int pp, WeightDevice device,
                                          bool expert_parallel, bool attention_dp) {
  TP_RETURN_IF_ERROR(config.Validate());
  TP_RETURN_IF_ERROR(formats.Validate());
  TP_RETURN_IF_ERROR(ValidateParallelism(config, tp, pp, expert_parallel, attention_dp));
  TP_ASSIGN_OR_RETURN(const ShardingPlan rank0, ShardingPlan::Create(config, formats,
                                                                     {0, tp, expert_parallel,
                                                                      attention_dp}));
  ShardingTable plan;
  plan.tp = tp;
  plan.pp = pp;
  plan.vocab_padded = rank0.vocab_rows_per_rank() * tp;
  for (int stage = 0; stage < pp; ++stage) {
    TP_ASSIGN_OR_RETURN(StageShards s, ShardStage(config, formats, rank0, stage, pp,
                                                  plan.vocab_padded, device));
    for (const RoleShard& r : s.roles) {
      plan.checkpoint_bytes += r.unsharded_bytes;
      plan.padding_bytes += r.padding_bytes;
      plan.replica_bytes += r.replica_bytes;
      plan.backend_form_bytes += tp * r.backend_form_bytes_per_rank - r.uneven_form_bytes;
      plan.uneven_bytes += r.uneven_bytes;
    }
    plan.stages.push_back(std::move(s));
  }
  return plan;
}

}  // namespace tpserve
