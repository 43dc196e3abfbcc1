#include "model/sharding.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/str_cat.h"
#include "formats/tensor_format.h"

namespace tpserve {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t RoundUp(int64_t n, int64_t multiple) { return CeilDiv(n, multiple) * multiple; }

bool HasDenseMlp(const ModelSpec& c) {
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (!c.IsMoeLayer(l)) return true;
  }
  return false;
}

// The MLP widths tensor parallelism must split evenly: the experts' where the model has them
// (unless expert parallelism places them whole). The dense MLP's is split on its formats' block
// boundaries, evenly or not (DenseFfnUnit).
std::vector<std::pair<std::string_view, int64_t>> FfnWidths(const ModelSpec& c, bool ep) {
  std::vector<std::pair<std::string_view, int64_t>> widths;
  if (ep) return widths;
  if (c.moe.enabled()) {
    widths.push_back({"moe.expert_intermediate_size", c.moe.expert_intermediate_size});
  }
  if (c.moe.enabled() && c.moe.shared_expert_intermediate_size > 0) {
    widths.push_back(
        {"moe.shared_expert_intermediate_size", c.moe.shared_expert_intermediate_size});
  }
  return widths;
}

// KV heads split whole, or, past their count, each held by tp / num_kv_heads ranks.
bool SplitsKvHeads(const ModelSpec& c, int tp) {
  if (c.mla.enabled()) return true;  // one latent, held whole by every rank
  return c.num_kv_heads % tp == 0 || tp % c.num_kv_heads == 0;
}

bool SplitsEvenly(const ModelSpec& c, int tp, bool ep, bool adp) {
  bool ok = adp || (c.num_heads % tp == 0 && SplitsKvHeads(c, tp));
  // The dense MLP: at least one row per rank (its blocks are counted with the formats).
  ok = ok && (!HasDenseMlp(c) || c.intermediate_size >= tp);
  for (const auto& [name, width] : FfnWidths(c, ep)) ok = ok && width % tp == 0;
  if (ep) ok = ok && c.moe.enabled() && c.moe.routing.num_experts % tp == 0;
  return ok;
}

// Expert parallelism places the experts and the shared expert whole; data-parallel attention
// the attention.
bool PlacedWhole(TensorRole role, bool ep, bool adp) {
  return (ep && (IsExpertRole(role) || IsSharedExpertRole(role))) ||
         (adp && IsAttentionRole(role));
}

// Vocab rows per rank: ceil(V / W), rounded up to the fp8 tile when a vocab-parallel tensor
// is stored in tiles (a tile must not straddle two ranks).
int64_t VocabRowsPerRank(const ModelSpec& c, const WeightFormats& formats, int tp) {
  const int64_t tile = std::max(OutputBlockRows(formats[TensorRole::kEmbedding]),
                                OutputBlockRows(formats[TensorRole::kLmHead]));
  return tp == 1 ? c.vocab_size : RoundUp(c.vocab_size, tp * tile) / tp;
}

// OK when the split of `role` at `tp` keeps each quantization block on one rank.
absl::Status CheckAlignment(const ModelSpec& config, const TensorFormat& f, TensorRole role,
                            int tp, bool ep, bool adp) {
  const ShardKind kind = ShardKindFor(role);
  const std::array<int64_t, 2> full = FullShape(config, role);
  TP_RETURN_IF_ERROR(MatrixBytes(f, full[0], full[1], TensorRoleName(role)).status());
  if (tp == 1 || PlacedWhole(role, ep, adp)) return absl::OkStatus();
  if (IsDenseMlpRole(role)) return absl::OkStatus();  // whole blocks by construction (Create)
  if (kind == ShardKind::kRow && (full[1] / tp) % InputBlockValues(f) != 0) {
    return absl::InvalidArgumentError(
        StrCat(TensorRoleName(role), " is row-parallel: its input dim ", full[1], " / tp ", tp,
               " = ", full[1] / tp, " is not a multiple of the ", TensorFormatName(f),
               " block of ", InputBlockValues(f), " values, so a block would be split"));
  }
  // k and v past the KV-head count: one whole head per rank (copied, not split).
  const int64_t local_rows =
      IsKvRole(role) ? LocalKvHeads(config, tp) * config.head_dim : full[0] / tp;
  if (kind == ShardKind::kColumn && local_rows % OutputBlockRows(f) != 0) {
    return absl::InvalidArgumentError(
        StrCat(TensorRoleName(role), " is column-parallel: its output dim ", full[0], " / tp ",
               tp, " = ", local_rows, " is not a multiple of the ", TensorFormatName(f),
               " tile of ", OutputBlockRows(f), " rows, so a tile would be split"));
  }
  return absl::OkStatus();
}

int64_t Lcm(int64_t a, int64_t b) { return a / std::gcd(a, b) * b; }

// The least multiple of every block of down's input and every tile of gate's and up's output
// rows, in every layer: a split of the dense MLP's inner width on multiples of it keeps every
// block on one rank.
int64_t DenseFfnBlock(const ModelSpec& c, const WeightFormats& formats) {
  int64_t g = 1;
  if (!HasDenseMlp(c)) return g;
  for (TensorRole role : {TensorRole::kGate, TensorRole::kUp, TensorRole::kDown}) {
    for (const TensorFormat& f : formats.AllOf(role)) {
      const int64_t block = role == TensorRole::kDown ? InputBlockValues(f) : OutputBlockRows(f);
      g = Lcm(g, std::max<int64_t>(block, 1));
    }
  }
  return g;
}

// Whether tp splits the dense MLP evenly, each rank whole blocks.
bool SplitsDenseFfnEvenly(const ModelSpec& c, const WeightFormats& formats, int tp) {
  return c.intermediate_size % tp == 0 &&
         (c.intermediate_size / tp) % DenseFfnBlock(c, formats) == 0;
}

// OK when tp splits the dense MLP evenly, or unevenly into whole units (DenseFfnUnit) with one
// at least on each rank.
absl::Status CheckDenseFfnSplit(const ModelSpec& c, const WeightFormats& formats, int tp) {
  if (!HasDenseMlp(c) || tp == 1 || SplitsDenseFfnEvenly(c, formats, tp)) {
    return absl::OkStatus();
  }
  const int64_t u = DenseFfnUnit(c, formats);
  if (c.intermediate_size % u != 0) {
    return absl::InvalidArgumentError(StrCat(
        "intermediate_size = ", c.intermediate_size, " does not divide by tensor-parallel degree ",
        tp, ", and an uneven split needs whole units of ", u,
        " values (the MLP's blocks, 32 at least), which it is not"));
  }
  if (c.intermediate_size / u < tp) {
    const int64_t units = c.intermediate_size / u;
    return absl::InvalidArgumentError(StrCat(
        "intermediate_size = ", c.intermediate_size, " holds ", units,
        units == 1 ? " unit" : " units", " of ", u, " values, fewer than tensor-parallel degree ",
        tp, ": a rank would hold none of the MLP"));
  }
  return absl::OkStatus();
}

absl::Status CheckAllAlignment(const ModelSpec& config, const WeightFormats& formats, int tp,
                               bool ep, bool adp) {
  TP_RETURN_IF_ERROR(CheckDenseFfnSplit(config, formats, tp));
  for (TensorRole role : kAllTensorRoles) {
    if (!HasRole(config, role)) continue;
    for (const TensorFormat& f : formats.AllOf(role)) {
      TP_RETURN_IF_ERROR(CheckAlignment(config, f, role, tp, ep, adp));
    }
  }
  return absl::OkStatus();
}

}  // namespace

int64_t KvHeadCopies(const ModelSpec& config, int tp) {
  if (config.mla.enabled()) return tp;
  return tp > config.num_kv_heads && config.num_kv_heads > 0 ? tp / config.num_kv_heads : 1;
}

int64_t LocalKvHeads(const ModelSpec& config, int tp) {
  if (config.mla.enabled()) return 1;
  return tp > config.num_kv_heads ? 1 : config.num_kv_heads / tp;
}

KvEntry KvEntryOf(const ModelSpec& config, int tp) {
  if (config.mla.enabled()) return {1, config.mla.latent_dim(), 1};
  return {LocalKvHeads(config, tp), config.head_dim, 2};
}

bool IsKvRole(TensorRole role) {
  return role == TensorRole::kK || role == TensorRole::kV || role == TensorRole::kKBias ||
         role == TensorRole::kVBias;
}

ShardKind ShardKindFor(TensorRole role) {
  switch (role) {
    case TensorRole::kQ:
    case TensorRole::kK:
    case TensorRole::kV:
    case TensorRole::kGate:
    case TensorRole::kUp:
    case TensorRole::kQBias:  // a bias goes with its output rows
    case TensorRole::kKBias:
    case TensorRole::kVBias:
    case TensorRole::kExpertGate:  // each expert split as a dense MLP is
    case TensorRole::kExpertUp:
    case TensorRole::kSharedGate:
    case TensorRole::kSharedUp:
    case TensorRole::kQB:  // MLA: by heads
    case TensorRole::kKvB:
    case TensorRole::kKB:
    case TensorRole::kVB:
      return ShardKind::kColumn;
    case TensorRole::kO:
    case TensorRole::kDown:
    case TensorRole::kExpertDown:
    case TensorRole::kSharedDown:
      return ShardKind::kRow;
    case TensorRole::kEmbedding:
    case TensorRole::kLmHead:
      return ShardKind::kVocab;
    default:
      return ShardKind::kReplicated;
  }
}

std::string_view ShardKindName(ShardKind kind) {
  switch (kind) {
    case ShardKind::kColumn:
      return "column";
    case ShardKind::kRow:
      return "row";
    case ShardKind::kVocab:
      return "vocab";
    case ShardKind::kReplicated:
      return "replicated";
    case ShardKind::kExpert:
      return "expert";
  }
  return "?";
}

std::array<int64_t, 2> FullShape(const ModelSpec& c, TensorRole role) {
  const int64_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  const MlaSpec& m = c.mla;
  switch (role) {
    case TensorRole::kQA:
      return {m.q_lora_rank, c.hidden_size};
    case TensorRole::kQANorm:
      return {1, m.q_lora_rank};
    case TensorRole::kQB:
      return {q_dim, m.q_lora_rank};
    case TensorRole::kKvA:
      return {m.latent_dim(), c.hidden_size};
    case TensorRole::kKvANorm:
      return {1, m.kv_lora_rank};
    case TensorRole::kKvB:
      return {c.num_heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank};
    case TensorRole::kKB:
      return {c.num_heads * m.kv_lora_rank, m.qk_nope_head_dim};
    case TensorRole::kVB:
      return {c.num_heads * m.v_head_dim, m.kv_lora_rank};
    case TensorRole::kEmbedding:
    case TensorRole::kLmHead:
      return {c.vocab_size, c.hidden_size};
    case TensorRole::kMtpEhProj:
      return {c.hidden_size, 2 * c.hidden_size};
    case TensorRole::kQ:
      return {q_dim, c.hidden_size};
    case TensorRole::kK:
    case TensorRole::kV:
      return {kv_dim, c.hidden_size};
    case TensorRole::kO:
      return {c.hidden_size, c.num_heads * c.ValueHeadDim()};
    case TensorRole::kGate:
    case TensorRole::kUp:
      return {c.intermediate_size, c.hidden_size};
    case TensorRole::kDown:
      return {c.hidden_size, c.intermediate_size};
    case TensorRole::kQBias:  // [n, 1]: one value per output row, split as those rows are
      return {q_dim, 1};
    case TensorRole::kKBias:
    case TensorRole::kVBias:
      return {kv_dim, 1};
    case TensorRole::kQNorm:  // one weight per element of a head, the same for every head
    case TensorRole::kKNorm:
      return {1, c.head_dim};
    case TensorRole::kRouter:
      return {c.moe.routing.num_experts, c.hidden_size};
    case TensorRole::kExpertGate:
    case TensorRole::kExpertUp:
      return {c.moe.expert_intermediate_size, c.hidden_size};
    case TensorRole::kExpertDown:
      return {c.hidden_size, c.moe.expert_intermediate_size};
    case TensorRole::kExpertBias:
      return {1, c.moe.routing.num_experts};
    case TensorRole::kSharedGate:
    case TensorRole::kSharedUp:
      return {c.moe.shared_expert_intermediate_size, c.hidden_size};
    case TensorRole::kSharedDown:
      return {c.hidden_size, c.moe.shared_expert_intermediate_size};
    default:
      return {1, c.hidden_size};  // norms
  }
}

bool HasRole(const ModelSpec& c, TensorRole role) {
  switch (role) {
    case TensorRole::kQ:
      return !c.mla.enabled() || c.mla.q_lora_rank == 0;
    case TensorRole::kK:
    case TensorRole::kV:
      return !c.mla.enabled();
    case TensorRole::kQA:
    case TensorRole::kQANorm:
    case TensorRole::kQB:
      return c.mla.enabled() && c.mla.q_lora_rank > 0;
    case TensorRole::kKvA:
    case TensorRole::kKvANorm:
    case TensorRole::kKB:
    case TensorRole::kVB:
      return c.mla.enabled();
    case TensorRole::kKvB:
      // The expanded form's W_UK and W_UV together: held only by a model that asks for that
      // form (LlamaLoadOptions::mla_expand_fresh_prefill, not a served option), so no plan
      // counts it; the absorbed form's k_b and v_b are cut from the same tensor.
      return false;
    case TensorRole::kQBias:
    case TensorRole::kKBias:
    case TensorRole::kVBias:
      return c.qkv_bias;
    case TensorRole::kQNorm:
    case TensorRole::kKNorm:
      return c.qk_norm;
    case TensorRole::kPostAttnNorm:
    case TensorRole::kPostFfnNorm:
      return c.sandwich_norms;
    case TensorRole::kGate:
    case TensorRole::kUp:
    case TensorRole::kDown:
      return HasDenseMlp(c);
    case TensorRole::kRouter:
    case TensorRole::kExpertGate:
    case TensorRole::kExpertUp:
    case TensorRole::kExpertDown:
      return c.moe.enabled();
    case TensorRole::kExpertBias:
      return c.moe.enabled() && c.moe.correction_bias;
    case TensorRole::kSharedGate:
    case TensorRole::kSharedUp:
    case TensorRole::kSharedDown:
      return c.moe.enabled() && c.moe.shared_expert_intermediate_size > 0;
    case TensorRole::kMtpENorm:
    case TensorRole::kMtpHNorm:
    case TensorRole::kMtpEhProj:
      return c.is_mtp_draft();
    default:
      return true;
  }
}

int64_t RoleTensorsInLayer(const ModelSpec& c, TensorRole role, int64_t layer) {
  if (!HasRole(c, role)) return 0;
  if (!IsPerLayerRole(role)) return layer == 0 ? 1 : 0;
  switch (role) {
    case TensorRole::kGate:
    case TensorRole::kUp:
    case TensorRole::kDown:
      return c.IsMoeLayer(layer) ? 0 : 1;
    case TensorRole::kRouter:
    case TensorRole::kExpertBias:
    case TensorRole::kSharedGate:
    case TensorRole::kSharedUp:
    case TensorRole::kSharedDown:
      return c.IsMoeLayer(layer) ? 1 : 0;
    case TensorRole::kExpertGate:
    case TensorRole::kExpertUp:
    case TensorRole::kExpertDown:
      return c.IsMoeLayer(layer) ? c.moe.routing.num_experts : 0;
    default:
      return 1;
  }
}

int64_t RoleTensorCount(const ModelSpec& c, TensorRole role, int64_t first_layer,
                        int64_t num_layers) {
  if (!IsPerLayerRole(role)) return HasRole(c, role) ? 1 : 0;
  int64_t n = 0;
  for (int64_t l = first_layer; l < first_layer + num_layers; ++l) {
    n += RoleTensorsInLayer(c, role, l);
  }
  return n;
}

std::vector<int> ValidTpDegrees(const ModelSpec& config, bool expert_parallel,
                                bool attention_dp) {
  std::vector<int> out;
  if (config.num_heads <= 0 || config.num_kv_heads <= 0) return out;
  for (const auto& [name, width] : FfnWidths(config, expert_parallel)) {
    if (width <= 0) return out;
  }
  for (int64_t d = 1; d <= config.num_heads; ++d) {
    if (SplitsEvenly(config, static_cast<int>(d), expert_parallel, attention_dp)) {
      out.push_back(static_cast<int>(d));
    }
  }
  return out;
}

absl::Status ValidateTpDegree(const ModelSpec& config, int tp, bool expert_parallel,
                              bool attention_dp) {
  if (tp < 1) {
    return absl::InvalidArgumentError(StrCat("tensor-parallel degree ", tp, " must be >= 1"));
  }
  if (expert_parallel && !config.moe.enabled()) {
    return absl::InvalidArgumentError(StrCat(
        "expert parallelism needs a mixture-of-experts model; ", config.name, " is dense"));
  }
  if (SplitsEvenly(config, tp, expert_parallel, attention_dp)) return absl::OkStatus();
  std::vector<std::string> fails;
  if (!attention_dp && config.num_heads % tp != 0) {
    fails.push_back(StrCat("num_heads = ", config.num_heads));
  }
  if (!attention_dp && !SplitsKvHeads(config, tp)) {
    fails.push_back(StrCat("num_kv_heads = ", config.num_kv_heads, " (nor is a multiple of it)"));
  }
  if (HasDenseMlp(config) && config.intermediate_size < tp) {
    fails.push_back(StrCat("intermediate_size = ", config.intermediate_size, " into a row each"));
  }
  std::string divisors = StrCat("num_heads = ", config.num_heads);
  for (const auto& [name, width] : FfnWidths(config, expert_parallel)) {
    if (width % tp != 0) fails.push_back(StrCat(name, " = ", width));
    divisors += StrCat(" and ", name, " = ", width);
  }
  if (expert_parallel) {
    const int64_t experts = config.moe.routing.num_experts;
    if (experts % tp != 0) fails.push_back(StrCat("moe.num_experts = ", experts));
    divisors += StrCat(" and, placed whole by expert parallelism, moe.num_experts = ", experts);
  }
  return absl::InvalidArgumentError(StrCat(
      "tensor-parallel degree ", tp, " does not divide ", absl::StrJoin(fails, " or "),
      "; query heads are split whole, KV heads whole or, past their count, copied to the ranks "
      "that share one, so valid degrees (divisors of ",
      divisors, " that divide or are multiples of num_kv_heads = ", config.num_kv_heads,
      ") are: ", absl::StrJoin(ValidTpDegrees(config, expert_parallel, attention_dp), ", ")));
}

void FitInt4Groups(const ModelSpec& config, int tp, WeightFormats* formats) {
  if (formats->preset != "int4" || tp < 1) return;
  for (int64_t group = 128; group >= 32; group -= 32) {
    bool fits = true;
    for (TensorRole role : kAllTensorRoles) {
      if ((*formats)[role].kind != FormatKind::kInt4Group) continue;
      const std::array<int64_t, 2> full = FullShape(config, role);
      const int64_t cols = ShardKindFor(role) == ShardKind::kRow ? full[1] / tp : full[1];
      fits = fits && full[1] % tp == 0 && cols % group == 0;
    }
    if (!fits) continue;
    for (TensorRole role : kAllTensorRoles) {
      if ((*formats)[role].kind == FormatKind::kInt4Group) formats->Set(role, TensorFormat::Int4(group));
    }
    return;
  }
}

StageLayers StageLayersOf(int64_t num_layers, int num_stages, int stage) {
  const int64_t count = num_layers / num_stages;
  return StageLayers{stage * count, count};
}

absl::StatusOr<ShardingPlan> ShardingPlan::Create(const ModelSpec& config,
                                                  const WeightFormats& formats, ShardSpec shard) {
  if (shard.num_stages < 1 || config.num_layers % shard.num_stages != 0) {
    return absl::InvalidArgumentError(
        StrCat("pipeline stages = ", shard.num_stages, " must be >= 1 and divide num_layers = ",
               config.num_layers));
  }
  if (shard.stage < 0 || shard.stage >= shard.num_stages) {
    return absl::InvalidArgumentError(
        StrCat("stage = ", shard.stage, " is outside [0, ", shard.num_stages, ")"));
  }
  if (shard.world_size < 1) {
    return absl::InvalidArgumentError(StrCat("world_size = ", shard.world_size, " must be >= 1"));
  }
  if (shard.rank < 0 || shard.rank >= shard.world_size) {
    return absl::InvalidArgumentError(
        StrCat("rank = ", shard.rank, " is outside [0, ", shard.world_size, ")"));
  }
  if (config.vocab_size <= 0) {
    return absl::InvalidArgumentError(
        StrCat("vocab_size = ", config.vocab_size, " must be positive"));
  }
  const bool ep = shard.expert_parallel, adp = shard.attention_dp;
  TP_RETURN_IF_ERROR(ValidateTpDegree(config, shard.world_size, ep, adp));
  TP_RETURN_IF_ERROR(formats.Validate());
  if (absl::Status aligned = CheckAllAlignment(config, formats, shard.world_size, ep, adp);
      !aligned.ok()) {
    std::vector<int> ok_degrees;
    for (int d : ValidTpDegrees(config, ep, adp)) {
      if (CheckAllAlignment(config, formats, d, ep, adp).ok()) ok_degrees.push_back(d);
    }
    // Whole experts need no split of their own (the FP8 Qwen3-235B at TP 8, as vLLM).
    const bool ep_would_fit = !ep && config.moe.enabled() &&
                              ValidateTpDegree(config, shard.world_size, true, adp).ok() &&
                              CheckAllAlignment(config, formats, shard.world_size, true, adp).ok();
    return absl::InvalidArgumentError(
        StrCat(aligned.message(), "; tensor-parallel degrees that keep every block on one rank: ",
               ok_degrees.empty() ? "none" : absl::StrJoin(ok_degrees, ", "),
               ep_would_fit ? StrCat("; or ", shard.world_size,
                                     " with expert parallelism, which places experts whole")
                            : ""));
  }
  ShardingPlan plan;
  plan.config_ = config;
  plan.shard_ = shard;
  plan.layers_ = StageLayersOf(config.num_layers, shard.num_stages, shard.stage);
  const int attention_split = adp ? 1 : shard.world_size;  // data-parallel: every head
  plan.num_local_heads_ = config.num_heads / attention_split;
  plan.kv_head_copies_ = adp ? shard.world_size : KvHeadCopies(config, shard.world_size);
  plan.num_local_kv_heads_ = LocalKvHeads(config, attention_split);
  // Evenly where the degree divides it in whole blocks; else in units, the first
  // (units % world_size) ranks one more: SmolLM2's 48 units of 32 at TP 9 are 6 on ranks 0-2
  // and 5 on ranks 3-8. (One rank holds the whole width, even a partial tile: an fp8 tile of a
  // 96-wide MLP.)
  plan.ffn_unit_ = DenseFfnUnit(config, formats);
  plan.reduction_block_ = ReductionBlock(config, formats);
  if (shard.world_size == 1 || !HasDenseMlp(config) ||
      SplitsDenseFfnEvenly(config, formats, shard.world_size)) {
    plan.local_intermediate_size_ = config.intermediate_size / shard.world_size;
    plan.first_ffn_row_ = shard.rank * plan.local_intermediate_size_;
    plan.min_local_intermediate_size_ = plan.local_intermediate_size_;
    plan.wider_ffn_ranks_ = shard.world_size;
  } else {
    const int64_t units = config.intermediate_size / plan.ffn_unit_;
    const int64_t base = units / shard.world_size, extra = units % shard.world_size;
    plan.local_intermediate_size_ = (base + (shard.rank < extra ? 1 : 0)) * plan.ffn_unit_;
    plan.first_ffn_row_ =
        (shard.rank * base + std::min<int64_t>(shard.rank, extra)) * plan.ffn_unit_;
    plan.min_local_intermediate_size_ = base * plan.ffn_unit_;
    plan.wider_ffn_ranks_ = extra;
  }
  const int ffn_split = ep ? 1 : shard.world_size;  // EP: the experts whole
  plan.local_expert_intermediate_size_ = config.moe.expert_intermediate_size / ffn_split;
  plan.local_shared_intermediate_size_ = config.moe.shared_expert_intermediate_size / ffn_split;
  const int64_t experts = config.moe.enabled() ? config.moe.routing.num_experts : 0;
  plan.num_local_experts_ = ep ? experts / shard.world_size : experts;
  plan.first_local_expert_ = ep ? shard.rank * plan.num_local_experts_ : 0;
  plan.vocab_rows_per_rank_ = VocabRowsPerRank(config, formats, shard.world_size);
  plan.first_vocab_row_ = std::min(config.vocab_size, shard.rank * plan.vocab_rows_per_rank_);
  plan.num_local_vocab_rows_ =
      std::min(config.vocab_size, plan.first_vocab_row_ + plan.vocab_rows_per_rank_) -
      plan.first_vocab_row_;
  return plan;
}

int64_t ShardingPlan::CopiesOf(TensorRole role) const {
  const ShardKind kind = KindOf(role);
  if (kind == ShardKind::kReplicated) return shard_.world_size;
  return IsKvRole(role) ? kv_head_copies_ : 1;
}

bool IsDenseMlpRole(TensorRole role) {
  return role == TensorRole::kGate || role == TensorRole::kUp || role == TensorRole::kDown;
}

int64_t ReductionBlock(const ModelSpec& config, const WeightFormats& formats) {
  int64_t block = 8;
  for (TensorRole role : {TensorRole::kO, TensorRole::kDown, TensorRole::kExpertDown,
                          TensorRole::kSharedDown}) {
    if (!HasRole(config, role)) continue;
    for (const TensorFormat& f : formats.AllOf(role)) block = std::max(block, InputBlockValues(f));
  }
  return block;
}

int64_t DenseFfnUnit(const ModelSpec& config, const WeightFormats& formats) {
  return Lcm(DenseFfnBlock(config, formats), 32);
}

ShardKind ShardingPlan::KindOf(TensorRole role) const {
  if (!PlacedWhole(role, shard_.expert_parallel, shard_.attention_dp)) return ShardKindFor(role);
  return IsExpertRole(role) ? ShardKind::kExpert : ShardKind::kReplicated;
}

TensorSlice ShardingPlan::Slice(TensorRole role) const {
  const std::array<int64_t, 2> full = FullShape(config_, role);
  const int64_t hd = config_.head_dim;
  TensorSlice s{0, full[0], 0, full[1]};
  if (PlacedWhole(role, shard_.expert_parallel, shard_.attention_dp)) return s;
  switch (role) {
    case TensorRole::kQ:
    case TensorRole::kQBias:
      s.row_begin = first_head() * hd;
      s.num_rows = num_local_heads_ * hd;
      break;
    case TensorRole::kK:
    case TensorRole::kV:
    case TensorRole::kKBias:
    case TensorRole::kVBias:
      s.row_begin = first_kv_head() * hd;
      s.num_rows = num_local_kv_heads_ * hd;
      break;
    case TensorRole::kO:
      s.col_begin = first_head() * config_.ValueHeadDim();
      s.num_cols = num_local_heads_ * config_.ValueHeadDim();
      break;
    case TensorRole::kQB:  // MLA: this rank's heads' rows
    case TensorRole::kKvB:
    case TensorRole::kKB:
    case TensorRole::kVB:
      s.row_begin = first_head() * (full[0] / config_.num_heads);
      s.num_rows = num_local_heads_ * (full[0] / config_.num_heads);
      break;
    case TensorRole::kGate:  // an MLP's inner width: gate and up by rows, down by columns
    case TensorRole::kUp:
    case TensorRole::kDown:
    case TensorRole::kExpertGate:
    case TensorRole::kExpertUp:
    case TensorRole::kExpertDown:
    case TensorRole::kSharedGate:
    case TensorRole::kSharedUp:
    case TensorRole::kSharedDown: {
      const int64_t local = role == TensorRole::kGate || role == TensorRole::kUp ||
                                    role == TensorRole::kDown
                                ? local_intermediate_size_
                            : IsExpertRole(role) ? local_expert_intermediate_size_
                                                 : local_shared_intermediate_size_;
      int64_t& begin = ShardKindFor(role) == ShardKind::kColumn ? s.row_begin : s.col_begin;
      int64_t& count = ShardKindFor(role) == ShardKind::kColumn ? s.num_rows : s.num_cols;
      const bool dense = IsDenseMlpRole(role);
      begin = dense ? first_ffn_row_ : shard_.rank * local;
      count = local;
      break;
    }
    case TensorRole::kEmbedding:
    case TensorRole::kLmHead:
      s.row_begin = first_vocab_row_;
      s.num_rows = num_local_vocab_rows_;
      break;
    default:
      break;  // norms: replicated
  }
  return s;
}

}  // namespace tpserve
