// The weight bytes each rank holds, role by role and pipeline stage by stage: the byte
// accounting of the one sharding table (model/sharding.h) that the loader also cuts with. Every
// size comes from MatrixBytes of a rank's slice (deploy/plan_vs_engine_test.cc checks real
// allocations against it tensor by tensor), plus, for ranks on a CUDA device, what the CUDA
// backend holds beyond the stored form (the mixed-input GEMM's f32 scales and offsets:
// CudaWeightExtraBytes of kernels/cuda/weight_placement.h, the function its placement obeys).
//
//   TP_ASSIGN_OR_RETURN(ShardingTable shards, PlanSharding(config, formats, /*tp=*/8, /*pp=*/1));
//   int64_t per_rank = shards.stages[0].weight_bytes_per_rank;
//
// The split is ShardingPlan's (model/sharding.h); vocab rows are padded up to tp equal shares.
// Pipeline stages own contiguous layer ranges; stage 0 holds the embedding, the last stage the
// final norm and LM head (a tied LM head becomes a copy of the embedding when they differ).
// Thread-safe: value types and pure functions.
#ifndef TPSERVE_PLANNER_SHARDING_TABLE_H_
#define TPSERVE_PLANNER_SHARDING_TABLE_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/config.h"
#include "model/sharding.h"
#include "model/weight_formats.h"

namespace tpserve {

// Pipeline degrees: the divisors of num_layers.
std::vector<int> ValidPipelineDegrees(const ModelSpec& config);

// INVALID_ARGUMENT when tp is not a valid tensor-parallel degree (ValidateTpDegree, with or
// without expert parallelism), or pp does not divide num_layers, or either is < 1.
absl::Status ValidateParallelism(const ModelSpec& config, int tp, int pp,
                                 bool expert_parallel = false, bool attention_dp = false);

// One role's tensors on one pipeline stage.
struct RoleShard {
  TensorRole role = TensorRole::kEmbedding;
  ShardKind kind = ShardKind::kReplicated;
  // Ranks holding each slice (ShardingPlan::CopiesOf): tp for a replicated role, the KV-head
  // copies for k and v past the KV-head count, else 1.
  int64_t copies = 1;
  int64_t num_tensors = 0;               // tensors of this role on the stage (layers for per-layer)
  std::array<int64_t, 2> local_shape{};  // [rows, cols] of one tensor on rank 0 (the largest)
  // The dense MLP's width split unevenly (model/sharding.h): the shape on the ranks from
  // `ranks_with_local_shape` on, one block narrower; local_shape elsewhere.
  std::array<int64_t, 2> smallest_local_shape{};
  int64_t ranks_with_local_shape = 0;  // ranks [0, this) hold local_shape (all of them: tp)
  // What the ranks holding smallest_local_shape hold less than bytes_per_rank, all together
  // (tp * bytes_per_rank = what all ranks hold + this), and of it the backend form's part.
  int64_t uneven_bytes = 0;
  int64_t uneven_form_bytes = 0;
  int64_t bytes_per_rank = 0;            // all num_tensors slices on one rank
  int64_t unsharded_bytes = 0;           // the same tensors as the checkpoint stores them
  int64_t padding_bytes = 0;             // vocab padding rows, all ranks of the stage together
  // Bytes held beyond one copy, all ranks together: replicated norms, k and v copied past the
  // KV-head count, per-output-row scales that every row-parallel rank needs, a tied LM head
  // copied onto the last stage.
  int64_t replica_bytes = 0;
  // Of bytes_per_rank: what the backend holds beyond the stored form (a CUDA rank's mixed-GEMM
  // scales and offsets: kernels/cuda/weight_placement.h); 0 on CPU hosts.
  int64_t backend_form_bytes_per_rank = 0;
  bool tied_to_embedding = false;  // LM head reuses the embedding's shard (0 bytes)
};

struct StageShards {
  int stage = 0;
  int64_t first_layer = 0;
  int64_t num_layers = 0;
  std::vector<RoleShard> roles;       // roles present on this stage, in kAllTensorRoles order
  int64_t weight_bytes_per_rank = 0;  // sum of roles[i].bytes_per_rank

  const RoleShard* Find(TensorRole role) const;
};

struct ShardingTable {
  int tp = 1;
  int pp = 1;
  int64_t vocab_padded = 0;  // rows of embedding / LM head across the tp ranks
  std::vector<StageShards> stages;
  int64_t checkpoint_bytes = 0;  // all tensors unsharded, as stored (no padding, no copies)
  int64_t padding_bytes = 0;
  int64_t replica_bytes = 0;
  int64_t backend_form_bytes = 0;  // all ranks: backend_form_bytes_per_rank of each role, x tp
  // An MLP split unevenly: what the narrower ranks hold less than rank 0 (RoleShard's, summed);
  // the stages' weight_bytes_per_rank are rank 0's, the most any rank holds.
  int64_t uneven_bytes = 0;

  int64_t MaxWeightBytesPerRank() const;
  // Sum over every rank: checkpoint_bytes + padding_bytes + replica_bytes + backend_form_bytes
  // (= tp * the stages' weight_bytes_per_rank - uneven_bytes).
  int64_t AllRanksWeightBytes() const;
};

// The device the ranks hold their weights on, as far as the bytes depend on it.
struct WeightDevice {
  bool cuda = false;           // false: weights held as stored (CPU hosts)
  int compute_capability = 0;  // CUDA: major * 10 + minor (the mixed GEMM runs on 90 only)
};

// INVALID_ARGUMENT when the config is inconsistent, the parallelism is invalid, or a split
// cuts through a quantization group/block/tile (naming tensor, dims, block, valid tp degrees).
absl::StatusOr<ShardingTable> PlanSharding(const ModelSpec& config, const WeightFormats& formats,
                                          int tp, int pp, WeightDevice device = {},
                                          bool expert_parallel = false,
                                          bool attention_dp = false);

}  // namespace tpserve

#endif  // TPSERVE_PLANNER_SHARDING_TABLE_H_
