#include "model/step_buffers.h"

#include <algorithm>

#include "absl/status/status.h"
#include "base/str_cat.h"

namespace tpserve {
namespace {
constexpr int64_t kF32 = 4;
}  // namespace

int64_t StepBufferSizes::Total() const {
  return residual + normed + proj + q + k + v + attn + gate + up + partials + all_partials +
         logits_local + logits_gathered + router_logits + expert_ids + expert_weights +
         expert_rows + expert_gate + expert_up + expert_down + expert_send_pos + expert_recv_pos +
         expert_send + expert_recv + expert_gathered + mla_q_latent + mla_entry + mla_latent +
         mla_q_absorbed + mla_attn_latent + mla_head_in + mla_head_out + mla_expanded +
         mtp_concat + pipeline_rows;
}

namespace {

// Whether every row-parallel input width (o's, the dense MLP's, each expert's) cuts into g
// chunks of whole blocks (ReductionBlock: which covers the CPU's 8-bit activation blocks, as
// only GGML formats quantize x, and their blocks are 32 or 256 wide). The dense MLP's down may
// instead run in its units (DenseDownChunks) where they are whole and `world`'s shares are
// whole units.
bool ChunksAligned(const ModelSpec& c, const WeightFormats& formats, int64_t g, int64_t world) {
  const int64_t block = ReductionBlock(c, formats);
  bool aligned = c.num_heads % g == 0 && (c.num_heads / g * c.ValueHeadDim()) % block == 0;
  for (TensorRole role : {TensorRole::kDown, TensorRole::kExpertDown, TensorRole::kSharedDown}) {
    if (!HasRole(c, role)) continue;
    const int64_t width = FullShape(c, role)[1];
    const bool equal = width % g == 0 && (width / g) % block == 0;
    if (role != TensorRole::kDown || equal) {
      aligned = aligned && equal;
      continue;
    }
    const int64_t unit = DenseFfnUnit(c, formats);
    absl::StatusOr<ShardingPlan> rank0 =
        ShardingPlan::Create(c, formats, {0, static_cast<int>(world)});
    aligned = aligned && width % unit == 0 && rank0.ok() &&
              rank0->local_intermediate_size() % unit == 0;
  }
  return aligned;
}

}  // namespace

absl::Status CheckReductionChunks(const ModelSpec& c, const WeightFormats& formats,
                                  int64_t world_size, int64_t chunks) {
  if (chunks == 0) return absl::OkStatus();
  if (chunks < 0 || chunks % world_size != 0 || !ChunksAligned(c, formats, chunks, world_size)) {
    return absl::InvalidArgumentError(StrCat(
        "deterministic_tp_chunks = ", chunks, " must be a positive multiple of the ", world_size,
        " tensor-parallel ranks that divides num_heads = ", c.num_heads,
        " and cuts every row-parallel input (o, down, the experts' down) into whole "
        "quantization blocks of at least 8 values (the dense MLP's down may instead run in its "
        "units of ", DenseFfnUnit(c, formats), " values where each rank holds whole units)"));
  }
  return absl::OkStatus();
}

int64_t ReductionChunks(const ModelSpec& c, const ShardingPlan& p,
                        const WeightFormats& formats, TpReduction mode, int64_t chunks) {
  if (mode == TpReduction::kAllReduce) return 1;
  if (chunks > 0) return chunks;  // asked for (CheckReductionChunks)
  // One chunk per KV-head group, or per rank past the KV-head count (each rank's query heads
  // are then one group's share).
  const int64_t g = std::max<int64_t>(c.num_kv_heads, p.shard().world_size);
  return ChunksAligned(c, formats, g, p.shard().world_size) ? g : p.shard().world_size;
}

DownChunks DenseDownChunks(const ModelSpec& c, const ShardingPlan& p, int64_t chunks) {
  const int64_t world = p.shard().world_size;
  const int64_t width = c.intermediate_size;
  const int64_t local = std::max<int64_t>(1, chunks / world);
  const DownChunks equal{local, local, false};
  if (chunks <= 1 || width <= 0 || !HasRole(c, TensorRole::kDown)) return equal;
  if (width % chunks == 0 && (width / chunks) % p.reduction_block() == 0) return equal;
  const int64_t unit = p.ffn_unit();
  // Whole units on every rank: all of them where the split is uneven, rank 0's share otherwise.
  if (width % unit != 0 || p.local_intermediate_size() % unit != 0) {
    return equal;  // the default count's fallback, one chunk a rank (ReductionChunks)
  }
  const int64_t units = width / unit;
  return {p.local_intermediate_size() / unit, (units + world - 1) / world, true};
}

StepBufferSizes StepBuffersFor(const ModelSpec& c, const ShardingPlan& p, int64_t t,
                               int64_t logit_rows, int64_t a, int64_t chunks) {
  const int64_t world = p.shard().world_size;
  StepBufferSizes s;
  s.residual = s.normed = s.proj = t * c.hidden_size * a;
  s.q = t * p.num_local_heads() * c.head_dim * a;
  s.attn = t * p.num_local_heads() * c.ValueHeadDim() * a;
  s.k = s.v = t * p.num_local_kv_heads() * c.head_dim * a;
  if (c.mla.enabled()) {
    const MlaSpec& m = c.mla;
    const int64_t h = p.num_local_heads();
    s.k = t * h * c.head_dim * a;  // a fresh prefill's expanded keys and values
    s.v = t * h * m.v_head_dim * a;
    s.mla_q_latent = t * m.q_lora_rank * a;
    s.mla_entry = t * m.latent_dim() * a;
    s.mla_latent = t * m.kv_lora_rank * a;
    s.mla_q_absorbed = s.mla_attn_latent = t * h * m.latent_dim() * a;
    s.mla_head_in = t * std::max(m.qk_nope_head_dim, m.kv_lora_rank) * a;
    s.mla_head_out = t * std::max(m.kv_lora_rank, m.v_head_dim) * a;
    s.mla_expanded = t * h * (m.qk_nope_head_dim + m.v_head_dim) * a;
  }
  if (c.is_mtp_draft()) s.mtp_concat = t * 2 * c.hidden_size * a;
  if (p.shard().num_stages > 1 && p.last_stage()) s.pipeline_rows = t * c.hidden_size * a;
  // The dense MLP's (none when every layer is experts).
  s.gate = s.up = HasRole(c, TensorRole::kGate) ? t * p.local_intermediate_size() * a : 0;
  const DownChunks down = DenseDownChunks(c, p, chunks);
  s.partials = chunks > 1 || c.moe.enabled()
                   ? std::max<int64_t>({1, chunks / world, down.per_rank}) * t * c.hidden_size *
                         kF32
                   : 0;
  s.all_partials = world > 1 && chunks > 1
                       ? std::max(chunks, down.per_rank * world) * t * c.hidden_size * kF32
                       : 0;
  if (p.attention_dp() && chunks > 1) {
    // Data-parallel attention: a rank's o projection is whole, all its chunks local.
    s.partials = std::max(s.partials, chunks * t * c.hidden_size * kF32);
  }
  s.logits_local = logit_rows * p.vocab_rows_per_rank() * kF32;
  s.logits_gathered = world > 1 ? world * logit_rows * p.vocab_rows_per_rank() * kF32 : 0;
  if (c.moe.enabled()) {
    s.router_logits = t * c.moe.routing.num_experts * kF32;
    const int64_t slots = t * c.moe.routing.top_k;
    s.expert_ids = s.expert_weights = slots * 4;
    s.expert_rows = slots * c.hidden_size * a;
    s.expert_gate = s.expert_up =
        std::max(slots * p.local_expert_intermediate_size(),
                 t * p.local_shared_intermediate_size()) * a;
    s.expert_down = std::max<int64_t>(1, chunks / world) * slots * c.hidden_size * kF32;
  }
  if (c.moe.enabled() && p.expert_parallel() && world > 1) {
    // Each slot's output travels whole, in all `chunks` chunks: the combining rank sums them.
    const int64_t k = c.moe.routing.top_k, rows = (t + world - 1) / world;
    s.expert_send_pos = t * k * 4;
    s.expert_recv_pos = rows * k * 4;
    s.expert_send = t * k * chunks * c.hidden_size * kF32;
    s.expert_recv = rows * k * chunks * c.hidden_size * kF32;
    s.expert_gathered = (world + 1) * rows * c.hidden_size * a;
    // A rank's experts are whole: their down outputs come in every chunk.
    s.expert_down = chunks * t * k * c.hidden_size * kF32;
    // The combined rows' chunk sums, before they are added up.
    s.partials = std::max(s.partials, chunks * rows * c.hidden_size * kF32);
  }
  return s;
}

int64_t KvBytesPerToken(int64_t num_layers, const KvEntry& entry, DType kv_dtype) {
  return entry.pools * num_layers * entry.heads * entry.dim * BlockBytes(kv_dtype);
}

Backend::AttentionReservation AttentionReservationFor(const ModelSpec& config,
                                                      const ShardingPlan& plan,
                                                      int64_t max_tokens_per_step,
                                                      int64_t max_sequences,
                                                      int64_t max_context_tokens, DType kv_dtype,
                                                      int64_t block_size_tokens) {
  Backend::AttentionReservation r;
  r.num_heads = plan.num_local_heads();
  const KvEntry entry = KvEntryOf(config, plan.attention_degree());
  r.num_kv_heads = entry.heads;
  r.head_dim = entry.dim;
  r.kv_dtype = kv_dtype;
  r.block_size_tokens = block_size_tokens;
  r.max_tokens_per_step = max_tokens_per_step;
  r.max_sequences = max_sequences;
  r.max_context = max_context_tokens;
  return r;
}

bool RecordsDecodeSteps(const ModelSpec& config, bool attention_dp) {
  return !config.moe.enabled() && !config.mla.enabled() && !config.is_mtp_draft() &&
         !attention_dp;
}

}  // namespace tpserve
