// The one sharding table of a Llama model: which slice of every weight each tensor-parallel
// rank holds (Megatron style). The loader cuts checkpoint tensors with it and the memory plan
// counts bytes with it, so what a rank loads and what the planner promises cannot differ.
//
//   TP_ASSIGN_OR_RETURN(ShardingPlan plan, ShardingPlan::Create(config, formats, {1, 3}));
//   TensorSlice q = plan.Slice(TensorRole::kQ);   // rows [3 heads * hd, 6 heads * hd)
//
//   role                 kind         split                          after it
//   q, k, v              column       output rows, whole heads       -
//   gate, up             column       output rows, whole blocks      -
//   o, down              row          input columns (down: whole     a reduction each
//                                     blocks, as gate's and up's rows)
//   embedding, lm_head   vocab        rows, ceil(V / W) per rank     embedding: all-reduce
//                                     (a multiple of the fp8 tile)   lm_head: all-gather
//   q/k/v biases         column       with their output rows         -
//   norms, QK-norms      replicated   -                              -
//   router, expert bias  replicated   -                              -
//   experts              column/row   each expert as a dense MLP     (with the MoE block's)
//   shared expert        column/row   as a dense MLP                 (with the MoE block's)
//   MLA q_b, k_b, v_b    column       rows of whole heads            -
//   MLA q_a, kv_a        replicated   -                              -
// With multi-head latent attention (ModelSpec::mla) the KV cache holds one latent per token,
// which no head split divides: every rank holds all of it (KvEntryOf, KvHeadCopies = tp).
// With expert parallelism (ShardSpec::expert_parallel, --expert_parallel) the experts are
// placed whole instead: rank r holds experts [r*E/W, (r+1)*E/W) of every MoE layer (kind
// "expert"), and the shared expert is replicated, so each rank can run it for the tokens whose
// outputs it combines (worker/llama_model.cc); attention and the dense layers stay split.
// With data-parallel attention (ShardSpec::attention_dp, --attention_dp) every rank holds the
// whole attention (IsAttentionRole: kind "replicated") and attends for its own sequences only,
// with a KV cache of their blocks alone, so the ranks' caches add up instead of repeating the
// latent; the MLPs and experts stay split (or placed whole) and run over every rank's rows.
// Rank r holds query heads [r*H/W, (r+1)*H/W) and KV heads [r*KV/W, (r+1)*KV/W): with
// H % W == 0 and KV % W == 0 each KV group stays on the rank of its query heads. The last
// ranks may hold fewer vocab rows (or none): the others' padding.
// A quantization block (GGML block, int4 group, fp8 tile) never straddles two ranks: a degree
// that would split one is refused with the numbers. The dense MLP's inner width need not divide
// by the degree: where it does not (in whole blocks) it is cut into units (DenseFfnUnit: its
// formats' blocks, 32 values at least) and the first ranks take one unit more (SmolLM2's 1,536
// at TP 9: 48 units of 32, 6 on ranks 0-2, 5 on ranks 3-8); the experts' widths must divide.
// A rank's column-parallel slices of one input (q, k, v; gate, up) are whole and share their
// columns, so a backend that fuses stacks them along n into one matrix for one GEMM, each slice
// a contiguous range of its output columns (model/fused_projections.h says when and where).
// Thread-compatible value type.
#ifndef TPSERVE_MODEL_SHARDING_H_
#define TPSERVE_MODEL_SHARDING_H_

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/config.h"
#include "model/weight_formats.h"

namespace tpserve {

enum class ShardKind : uint8_t { kColumn, kRow, kVocab, kReplicated, kExpert };
// The split of `role` under tensor parallelism (never kExpert: ShardingPlan::KindOf says how a
// plan with expert parallelism places the experts).
ShardKind ShardKindFor(TensorRole role);
std::string_view ShardKindName(ShardKind kind);

// KV heads per rank at tensor-parallel degree tp (a valid one, ValidateTpDegree): their share,
// or one where tp exceeds their count (each KV head then copied to tp / num_kv_heads ranks, the
// ranks whose query heads read it, as vLLM does).
int64_t LocalKvHeads(const ModelSpec& config, int tp);
// How many ranks hold each KV head at degree tp: 1, or tp / num_kv_heads past their count.
int64_t KvHeadCopies(const ModelSpec& config, int tp);
// What the KV cache stores per token and layer on a rank at degree tp: `heads` entries of `dim`
// values in `pools` pools (K and V: 2); with MLA one latent entry of kv_lora_rank +
// qk_rope_head_dim values, the value being its first kv_lora_rank (1 pool), held whole by
// every rank.
struct KvEntry {
  int64_t heads = 0;
  int64_t dim = 0;
  int64_t pools = 2;
};
KvEntry KvEntryOf(const ModelSpec& config, int tp);
// The K and V projections and their biases: the roles copied past the KV-head count.
bool IsKvRole(TensorRole role);

// Unsharded [rows, cols] of one tensor of `role` (norms are [1, hidden], QK-norms
// [1, head_dim], biases [output rows, 1]).
std::array<int64_t, 2> FullShape(const ModelSpec& config, TensorRole role);

// Whether a model of this description has tensors of `role` (biases, QK-norms and sandwich
// norms only in the families that have them; the LM head even when tied, as a role; MLA's
// kv_b never: see sharding.cc).
bool HasRole(const ModelSpec& config, TensorRole role);

// How many tensors of `role` layer `layer` holds: 0 or 1, except num_experts for an expert role
// in a MoE layer; the dense MLP's roles only in layers that are not MoE, the router and the
// experts only in those that are. For a role not per layer: 1 at layer 0 where the model has it.
int64_t RoleTensorsInLayer(const ModelSpec& config, TensorRole role, int64_t layer);
// The same summed over layers [first_layer, first_layer + num_layers) (1 or 0 for a role not
// per layer): what a pipeline stage of those layers holds of `role`.
int64_t RoleTensorCount(const ModelSpec& config, TensorRole role, int64_t first_layer,
                        int64_t num_layers);

// Tensor-parallel degrees that split the query heads and the experts' widths (unless
// `expert_parallel`: then the experts' count instead) evenly, the KV heads evenly or, past
// their count, into whole copies (tp a multiple of num_kv_heads), and give every rank a row of
// the dense MLP (its blocks, and so whether a degree fits them, are the formats':
// ShardingPlan::Create).
// With `attention_dp` the heads need not split (every rank holds them all).
std::vector<int> ValidTpDegrees(const ModelSpec& config, bool expert_parallel = false,
                                bool attention_dp = false);

// INVALID_ARGUMENT when tp < 1, does not divide num_heads or an expert's width, exceeds
// intermediate_size, or neither divides nor is a multiple of num_kv_heads (naming which, and
// listing the valid degrees). With `expert_parallel`:
// the model must have experts and tp must divide their count (the experts' widths need not
// split).
absl::Status ValidateTpDegree(const ModelSpec& config, int tp, bool expert_parallel = false,
                              bool attention_dp = false);

// For weights from the plain "int4" preset: group 128 where every rank's input width is a
// whole number of groups, else the largest multiple of 32 below 128 that is (SmolLM2's
// 576-wide inputs get 96 on one rank, 64 on three). Explicit "int4-g<N>" and other presets are
// left as asked; the planner and the engine both call this, so "int4" means the same to both.
void FitInt4Groups(const ModelSpec& config, int tp, WeightFormats* formats);

// The unit an uneven split of the dense MLP's inner width is made of, and the chunk
// --deterministic_tp cuts down into where equal chunks would split a block: the least multiple
// of 32 and of every block of down's input and every tile of gate's and up's output rows.
int64_t DenseFfnUnit(const ModelSpec& config, const WeightFormats& formats);

// gate, up and down: the dense MLP's matrices, whose inner width ShardingPlan splits in
// whole blocks (unevenly where the degree does not divide it).
bool IsDenseMlpRole(TensorRole role);

// What a --deterministic_tp chunk of a row-parallel input (o, down, the experts' down) must be
// whole blocks of: every block of those inputs' formats, and 8 values at least (16-byte rows of
// bf16, what the GPU GEMMs align to; model/step_buffers.h).
int64_t ReductionBlock(const ModelSpec& config, const WeightFormats& formats);

struct ShardSpec {
  int rank = 0;
  int world_size = 1;
  // Experts placed whole on ranks rather than each split (the file comment).
  bool expert_parallel = false;
  // The whole attention on every rank, each attending for its own sequences (the file comment).
  bool attention_dp = false;
  // Pipeline parallelism: this rank's stage of num_stages, each a contiguous run of
  // StageLayers' layers; rank and world_size are the rank's place in its stage's
  // tensor-parallel group. Stage 0 embeds, the last stage computes the logits.
  int stage = 0;
  int num_stages = 1;
};

// Layers [first, first + count) of pipeline stage `stage` of `num_stages`: num_layers split
// evenly (ValidateParallelism refuses a stage count that does not divide it).
struct StageLayers {
  int64_t first = 0;
  int64_t count = 0;
};
StageLayers StageLayersOf(int64_t num_layers, int num_stages, int stage);

// Rows [row_begin, row_begin + num_rows) and columns [col_begin, col_begin + num_cols) of the
// full [rows, cols] matrix.
struct TensorSlice {
  int64_t row_begin = 0;
  int64_t num_rows = 0;
  int64_t col_begin = 0;
  int64_t num_cols = 0;
  friend bool operator==(const TensorSlice&, const TensorSlice&) = default;
};

class ShardingPlan {
 public:
  // INVALID_ARGUMENT naming the bound when world_size < 1, rank is outside [0, world_size), a
  // dimension does not split evenly, or a split would cut a quantization block of `formats`
  // (naming tensor, dimension, block and the degrees that work).
  static absl::StatusOr<ShardingPlan> Create(const ModelSpec& config,
                                             const WeightFormats& formats, ShardSpec shard);

  ShardSpec shard() const { return shard_; }
  // This rank's pipeline stage: layers [first_layer(), + num_local_layers()).
  int64_t first_layer() const { return layers_.first; }
  int64_t num_local_layers() const { return layers_.count; }
  bool first_stage() const { return shard_.stage == 0; }
  bool last_stage() const { return shard_.stage == shard_.num_stages - 1; }
  // Whether this rank ends a step with the logits: the last stage's rank 0 (kSamplingRank,
  // step/step_batch.h, a layer above).
  bool samples() const { return last_stage() && shard_.rank == 0; }
  bool attention_dp() const { return shard_.attention_dp; }
  // The degree the attention is split at: 1 with data-parallel attention, else world_size.
  int attention_degree() const { return shard_.attention_dp ? 1 : shard_.world_size; }
  int64_t first_head() const { return shard_.attention_dp ? 0 : shard_.rank * num_local_heads_; }
  int64_t num_local_heads() const { return num_local_heads_; }
  // Past the KV-head count, ranks [h * copies, (h + 1) * copies) all hold KV head h (their
  // query heads are its group's), each with its own copy of its cache.
  int64_t first_kv_head() const {
    return shard_.attention_dp ? 0 : shard_.rank / kv_head_copies_ * num_local_kv_heads_;
  }
  int64_t num_local_kv_heads() const { return num_local_kv_heads_; }
  int64_t kv_head_copies() const { return kv_head_copies_; }
  // This rank's rows of the dense MLP's inner width (gate's and up's rows, down's columns):
  // [first_ffn_row(), + local_intermediate_size()); split unevenly, in whole ffn_unit()s, the
  // last ranks hold min_local_intermediate_size().
  int64_t first_ffn_row() const { return first_ffn_row_; }
  int64_t local_intermediate_size() const { return local_intermediate_size_; }
  int64_t min_local_intermediate_size() const { return min_local_intermediate_size_; }
  // Ranks [0, this) hold the wider share, local_intermediate_size() of rank 0 (all of them when
  // the split is even).
  int64_t wider_ffn_ranks() const { return wider_ffn_ranks_; }
  int64_t ffn_unit() const { return ffn_unit_; }  // DenseFfnUnit
  int64_t reduction_block() const { return reduction_block_; }  // ReductionBlock
  // Each expert's width on this rank (every expert split as the dense MLP is; whole with
  // expert parallelism).
  int64_t local_expert_intermediate_size() const { return local_expert_intermediate_size_; }
  // The shared expert's width on this rank (0 without one; whole with expert parallelism).
  int64_t local_shared_intermediate_size() const { return local_shared_intermediate_size_; }
  bool expert_parallel() const { return shard_.expert_parallel; }
  // The experts of each MoE layer this rank holds: [first_local_expert(), + num_local_experts())
  // (all of them, each a slice, without expert parallelism; 0 for a dense model).
  int64_t first_local_expert() const { return first_local_expert_; }
  int64_t num_local_experts() const { return num_local_experts_; }
  // The rank that holds expert `e` whole (expert parallelism), e in [0, num_experts).
  int ExpertOwner(int64_t e) const { return static_cast<int>(e / num_local_experts_); }
  // How this plan splits `role`: ShardKindFor's, except with expert parallelism the experts'
  // roles (kExpert) and the shared expert's (kReplicated), and with data-parallel attention the
  // attention's (kReplicated).
  ShardKind KindOf(TensorRole role) const;
  // How many ranks hold each slice of `role`: 1 for a split, world_size for a replicated role,
  // kv_head_copies() for the K and V projections.
  int64_t CopiesOf(TensorRole role) const;
  // Vocab rows are vocab_rows_per_rank() per rank; the last ranks may hold fewer (or none).
  int64_t vocab_rows_per_rank() const { return vocab_rows_per_rank_; }
  int64_t first_vocab_row() const { return first_vocab_row_; }
  int64_t num_local_vocab_rows() const { return num_local_vocab_rows_; }

  // This rank's slice of the full matrix of `role` (of each expert's, for an expert role).
  TensorSlice Slice(TensorRole role) const;

 private:
  ModelSpec config_;
  ShardSpec shard_;
  StageLayers layers_;
  int64_t num_local_heads_ = 0;
  int64_t num_local_kv_heads_ = 0;
  int64_t kv_head_copies_ = 1;
  int64_t local_intermediate_size_ = 0;
  int64_t first_ffn_row_ = 0;
  int64_t min_local_intermediate_size_ = 0;
  int64_t wider_ffn_ranks_ = 1;
  int64_t ffn_unit_ = 32;
  int64_t reduction_block_ = 8;
  int64_t local_expert_intermediate_size_ = 0;
  int64_t local_shared_intermediate_size_ = 0;
  int64_t first_local_expert_ = 0;
  int64_t num_local_experts_ = 0;
  int64_t vocab_rows_per_rank_ = 0;
  int64_t first_vocab_row_ = 0;
  int64_t num_local_vocab_rows_ = 0;
};

}  // namespace tpserve

#endif  // TPSERVE_MODEL_SHARDING_H_
