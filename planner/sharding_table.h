// The Megatron sharding table for a Llama model, and the exact weight bytes each rank holds:
// the byte accounting of the split that worker/sharding_plan.h makes when a rank loads its
// slices (deploy/plan_vs_engine_test.cc checks the two agree byte for byte on a real model).
//
//   TP_ASSIGN_OR_RETURN(ShardingTable shards, PlanSharding(config, formats, /*tp=*/8, /*pp=*/1));
//   int64_t per_rank = shards.stages[0].weight_bytes_per_rank;
//
// Table (a linear weight is [rows = out, cols = in]):
//   q, k, v, gate, up   column-parallel: rows split; q/k/v by whole heads (GQA groups kept)
//   o, down             row-parallel: cols (input dim) split; output summed by all-reduce
//   embedding, lm_head  vocab-parallel: rows split; vocab padded up to a multiple of tp
//   norms               replicated on every rank
// Pipeline stages own contiguous layer ranges; stage 0 holds the embedding, the last stage the
// final norm and LM head (a tied LM head becomes a copy of the embedding when they differ).
// Thread-safe: value types and pure functions.
#ifndef TPSERVE_PLANNER_SHARDING_PLAN_H_
#define TPSERVE_PLANNER_SHARDING_PLAN_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/config.h"
#include "planner/weight_formats.h"

namespace tpserve {

enum class ShardKind : uint8_t { kColumn, kRow, kVocab, kReplicated };
ShardKind ShardKindFor(TensorRole role);
std::string_view ShardKindName(ShardKind kind);

// Unsharded [rows, cols] of one tensor of `role` (norms are [1, hidden]).
std::array<int64_t, 2> FullShape(const LlamaConfig& config, TensorRole role);

// Tensor-parallel degrees that split heads and KV heads evenly: the divisors of
// gcd(num_heads, num_kv_heads). Pipeline degrees: the divisors of num_layers.
std::vector<int> ValidTpDegrees(const LlamaConfig& config);
std::vector<int> ValidPipelineDegrees(const LlamaConfig& config);

// INVALID_ARGUMENT when tp does not divide num_heads or num_kv_heads (naming which, and
// listing the valid degrees), or pp does not divide num_layers, or either is < 1.
absl::Status ValidateParallelism(const LlamaConfig& config, int tp, int pp);

// One role's tensors on one pipeline stage.
struct RoleShard {
  TensorRole role = TensorRole::kEmbedding;
  ShardKind kind = ShardKind::kReplicated;
  int64_t num_tensors = 0;               // tensors of this role on the stage (layers for per-layer)
  std::array<int64_t, 2> local_shape{};  // [rows, cols] of one tensor on one rank
  int64_t bytes_per_rank = 0;            // all num_tensors slices on one rank
  int64_t unsharded_bytes = 0;           // the same tensors as the checkpoint stores them
  int64_t padding_bytes = 0;             // vocab padding rows, all ranks of the stage together
  // Bytes held beyond one copy, all ranks together: replicated norms, per-output-row scales
  // that every row-parallel rank needs, a tied LM head copied onto the last stage.
  int64_t replica_bytes = 0;
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

  int64_t MaxWeightBytesPerRank() const;
  // Sum over every rank: checkpoint_bytes + padding_bytes + replica_bytes.
  int64_t AllRanksWeightBytes() const;
};

// INVALID_ARGUMENT when the config is inconsistent, the parallelism is invalid, or a split
// cuts through a quantization group/block/tile (naming tensor, dims, block, valid tp degrees).
absl::StatusOr<ShardingTable> PlanSharding(const LlamaConfig& config, const WeightFormats& formats,
                                          int tp, int pp);

}  // namespace tpserve

#endif  // TPSERVE_PLANNER_SHARDING_PLAN_H_
