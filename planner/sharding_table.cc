#include "planner/sharding_table.h"

#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "formats/str_cat.h"

namespace tpserve {
namespace {

std::vector<int> Divisors(int64_t n) {
  std::vector<int> out;
  for (int64_t d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(static_cast<int>(d));
  }
  return out;
}

int64_t RoundUp(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// Rows of the vocab-parallel tensors: a multiple of tp (and of the fp8 tile when a
// tiled format must not straddle ranks).
int64_t PaddedVocab(const LlamaConfig& config, const WeightFormats& formats, int tp) {
  if (tp == 1) return config.vocab_size;
  const int64_t tile = std::max(OutputBlockRows(formats[TensorRole::kEmbedding]),
                                OutputBlockRows(formats[TensorRole::kLmHead]));
  return RoundUp(config.vocab_size, tp * tile);
}

// The [rows, cols] slice one rank holds; `vocab_padded` only matters for kVocab.
std::array<int64_t, 2> LocalShape(const std::array<int64_t, 2>& full, ShardKind kind, int tp,
                                  int64_t vocab_padded) {
  switch (kind) {
    case ShardKind::kColumn:
      return {full[0] / tp, full[1]};
    case ShardKind::kRow:
      return {full[0], full[1] / tp};
    case ShardKind::kVocab:
      return {vocab_padded / tp, full[1]};
    case ShardKind::kReplicated:
      return full;
  }
  return full;
}

// OK when every split of `role` at `tp` keeps quantization groups/tiles on one rank.
absl::Status CheckAlignment(const LlamaConfig& config, const WeightFormats& formats,
                            TensorRole role, int tp) {
  const TensorFormat& f = formats[role];
  const ShardKind kind = ShardKindFor(role);
  const std::array<int64_t, 2> full = FullShape(config, role);
  TP_RETURN_IF_ERROR(MatrixBytes(f, full[0], full[1], TensorRoleName(role)).status());
  if (tp == 1) return absl::OkStatus();
  if (kind == ShardKind::kRow && (full[1] / tp) % InputBlockValues(f) != 0) {
    return absl::InvalidArgumentError(
        StrCat(TensorRoleName(role), " is row-parallel: its input dim ", full[1], " / tp ", tp,
               " = ", full[1] / tp, " is not a multiple of the ", TensorFormatName(f), " block of ",
               InputBlockValues(f), " values"));
  }
  if (kind == ShardKind::kColumn && (full[0] / tp) % OutputBlockRows(f) != 0) {
    return absl::InvalidArgumentError(
        StrCat(TensorRoleName(role), " is column-parallel: its output dim ", full[0], " / tp ", tp,
               " = ", full[0] / tp, " is not a multiple of the ", TensorFormatName(f), " tile of ",
               OutputBlockRows(f), " rows"));
  }
  return absl::OkStatus();
}

absl::Status CheckAllAlignment(const LlamaConfig& config, const WeightFormats& formats, int tp) {
  for (TensorRole role : kAllTensorRoles) {
    TP_RETURN_IF_ERROR(CheckAlignment(config, formats, role, tp));
  }
  return absl::OkStatus();
}

// Bytes every rank holds beyond its share because the tensor (or its scales) is replicated.
int64_t ReplicaBytesPerTensor(const LlamaConfig& config, const WeightFormats& formats,
                              TensorRole role, int tp, int64_t tensor_bytes) {
  const ShardKind kind = ShardKindFor(role);
  if (kind == ShardKind::kReplicated) return (tp - 1) * tensor_bytes;
  if (kind == ShardKind::kRow && formats[role].kind == FormatKind::kFp8PerChannel) {
    return (tp - 1) * FullShape(config, role)[0] * 4;  // fp32 scale per output row
  }
  return 0;
}

// Fills one role's tensors on a stage; `tied_copy` marks a tied LM head that this stage
// must store itself because the embedding lives on another stage.
absl::StatusOr<RoleShard> ShardRole(const LlamaConfig& config, const WeightFormats& formats,
                                    TensorRole role, int64_t num_tensors, int tp,
                                    int64_t vocab_padded, bool tied_copy) {
  RoleShard r{role, ShardKindFor(role)};
  r.num_tensors = num_tensors;
  const std::array<int64_t, 2> full = FullShape(config, role);
  r.local_shape = LocalShape(full, r.kind, tp, vocab_padded);
  const TensorFormat& f = formats[role];
  const std::string what = std::string(TensorRoleName(role));
  TP_ASSIGN_OR_RETURN(int64_t full_bytes, MatrixBytes(f, full[0], full[1], what));
  TP_ASSIGN_OR_RETURN(int64_t local_bytes,
                      MatrixBytes(f, r.local_shape[0], r.local_shape[1], what));
  r.bytes_per_rank = local_bytes * num_tensors;
  if (tied_copy) {
    r.replica_bytes = local_bytes * tp;  // the whole (padded) copy; the checkpoint has none
    return r;
  }
  r.unsharded_bytes = full_bytes * num_tensors;
  if (r.kind == ShardKind::kVocab) {
    TP_ASSIGN_OR_RETURN(int64_t pad, MatrixBytes(f, vocab_padded - full[0], full[1], what));
    r.padding_bytes = pad * num_tensors;
  }
  r.replica_bytes = ReplicaBytesPerTensor(config, formats, role, tp, full_bytes) * num_tensors;
  return r;
}

absl::StatusOr<StageShards> ShardStage(const LlamaConfig& config, const WeightFormats& formats,
                                       int stage, int tp, int pp, int64_t vocab_padded) {
  StageShards s;
  s.stage = stage;
  s.num_layers = config.num_layers / pp;
  s.first_layer = s.num_layers * stage;
  const bool first = stage == 0, last = stage == pp - 1;
  for (TensorRole role : kAllTensorRoles) {
    int64_t count = IsPerLayerRole(role) ? s.num_layers : 1;
    if (role == TensorRole::kEmbedding && !first) continue;
    if ((role == TensorRole::kFinalNorm || role == TensorRole::kLmHead) && !last) continue;
    if (role == TensorRole::kLmHead && config.tie_word_embeddings && first) {
      RoleShard tied{role, ShardKind::kVocab};
      tied.local_shape = LocalShape(FullShape(config, role), ShardKind::kVocab, tp, vocab_padded);
      tied.tied_to_embedding = true;
      s.roles.push_back(tied);
      continue;
    }
    const bool tied_copy = role == TensorRole::kLmHead && config.tie_word_embeddings;
    TP_ASSIGN_OR_RETURN(RoleShard r,
                        ShardRole(config, formats, role, count, tp, vocab_padded, tied_copy));
    s.weight_bytes_per_rank += r.bytes_per_rank;
    s.roles.push_back(r);
  }
  return s;
}

}  // namespace

ShardKind ShardKindFor(TensorRole role) {
  switch (role) {
    case TensorRole::kQ:
    case TensorRole::kK:
    case TensorRole::kV:
    case TensorRole::kGate:
    case TensorRole::kUp:
      return ShardKind::kColumn;
    case TensorRole::kO:
    case TensorRole::kDown:
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
  }
  return "?";
}

std::array<int64_t, 2> FullShape(const LlamaConfig& c, TensorRole role) {
  const int64_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  switch (role) {
    case TensorRole::kEmbedding:
    case TensorRole::kLmHead:
      return {c.vocab_size, c.hidden_size};
    case TensorRole::kQ:
      return {q_dim, c.hidden_size};
    case TensorRole::kK:
    case TensorRole::kV:
      return {kv_dim, c.hidden_size};
    case TensorRole::kO:
      return {c.hidden_size, q_dim};
    case TensorRole::kGate:
    case TensorRole::kUp:
      return {c.intermediate_size, c.hidden_size};
    case TensorRole::kDown:
      return {c.hidden_size, c.intermediate_size};
    default:
      return {1, c.hidden_size};  // norms
  }
}

std::vector<int> ValidTpDegrees(const LlamaConfig& config) {
  if (config.num_heads <= 0 || config.num_kv_heads <= 0) return {};
  return Divisors(std::gcd(config.num_heads, config.num_kv_heads));
}

std::vector<int> ValidPipelineDegrees(const LlamaConfig& config) {
  return config.num_layers > 0 ? Divisors(config.num_layers) : std::vector<int>{};
}

absl::Status ValidateParallelism(const LlamaConfig& config, int tp, int pp) {
  if (tp < 1 || pp < 1) {
    return absl::InvalidArgumentError(
        StrCat("tensor-parallel degree ", tp, " and pipeline stages ", pp, " must be >= 1"));
  }
  if (config.num_heads % tp != 0 || config.num_kv_heads % tp != 0) {
    std::vector<std::string> fails;
    if (config.num_heads % tp != 0) fails.push_back(StrCat("num_heads=", config.num_heads));
    if (config.num_kv_heads % tp != 0) {
      fails.push_back(StrCat("num_kv_heads=", config.num_kv_heads));
    }
    return absl::InvalidArgumentError(StrCat(
        "tensor-parallel degree ", tp, " does not divide ", absl::StrJoin(fails, " or "),
        "; heads are split whole (GQA groups kept), so valid degrees (divisors of num_heads=",
        config.num_heads, " and num_kv_heads=", config.num_kv_heads,
        ") are: ", absl::StrJoin(ValidTpDegrees(config), ", ")));
  }
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
  return checkpoint_bytes + padding_bytes + replica_bytes;
}

absl::StatusOr<ShardingTable> PlanSharding(const LlamaConfig& config, const WeightFormats& formats,
                                          int tp, int pp) {
  TP_RETURN_IF_ERROR(config.Validate());
  TP_RETURN_IF_ERROR(formats.Validate());
  TP_RETURN_IF_ERROR(ValidateParallelism(config, tp, pp));
  if (absl::Status aligned = CheckAllAlignment(config, formats, tp); !aligned.ok()) {
    std::vector<int> ok_degrees;
    for (int d : ValidTpDegrees(config)) {
      if (CheckAllAlignment(config, formats, d).ok()) ok_degrees.push_back(d);
    }
    return absl::InvalidArgumentError(
        StrCat(aligned.message(), "; tensor-parallel degrees that keep every block on one rank: ",
               ok_degrees.empty() ? "none" : absl::StrJoin(ok_degrees, ", ")));
  }
  ShardingTable plan;
  plan.tp = tp;
  plan.pp = pp;
  plan.vocab_padded = PaddedVocab(config, formats, tp);
  for (int stage = 0; stage < pp; ++stage) {
    TP_ASSIGN_OR_RETURN(StageShards s,
                        ShardStage(config, formats, stage, tp, pp, plan.vocab_padded));
    for (const RoleShard& r : s.roles) {
      plan.checkpoint_bytes += r.unsharded_bytes;
      plan.padding_bytes += r.padding_bytes;
      plan.replica_bytes += r.replica_bytes;
    }
    plan.stages.push_back(std::move(s));
  }
  return plan;
}

}  // namespace tpserve
