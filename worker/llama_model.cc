#include "worker/llama_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/str_cat.h"
#include "checkpoint/stored_formats.h"
#include "kernels/rope_table.h"
#include "kernels/step_capture.h"

namespace tpserve {

// Step buffers in backend memory, sized once by StepBuffersFor (model/step_buffers.h).
struct LlamaModel::Workspace {
  DeviceBuffer x;                // [T, hidden] residual stream
  DeviceBuffer h;                // [T, hidden] normed input of a block
  DeviceBuffer proj;             // [T, hidden] O / down output, summed over ranks
  DeviceBuffer q;                // [T, local_heads * head_dim]
  DeviceBuffer k;                // [T, local_kv_heads * head_dim]
  DeviceBuffer v;                // [T, local_kv_heads * head_dim]
  DeviceBuffer attn;             // [T, local_heads * head_dim]
  DeviceBuffer gate;             // [T, local_ffn]
  DeviceBuffer up;               // [T, local_ffn]
  DeviceBuffer partials;         // f32 [local chunks, T, hidden]: this rank's O / down chunks
  DeviceBuffer all_partials;     // f32 [chunks, T, hidden] gathered (world > 1 only)
  DeviceBuffer logits_local;     // f32 [S, vocab_rows_per_rank]
  DeviceBuffer logits_gathered;  // f32 [world, S, vocab_rows_per_rank] (world > 1 only)
  DeviceBuffer router_logits;    // f32 [T, experts] (MoE models only)
  DeviceBuffer expert_ids;       // int32 [T, top_k]
  DeviceBuffer expert_weights;   // f32 [T, top_k]
  DeviceBuffer expert_rows;      // [T * top_k, hidden] slots' inputs grouped by expert
  DeviceBuffer expert_gate;      // [T * top_k, local_expert_ffn]
  DeviceBuffer expert_up;        // [T * top_k, local_expert_ffn]
  DeviceBuffer expert_down;      // f32 [local chunks * T * top_k * hidden]
  // Expert parallelism only (StepBufferSizes says what each holds).
  DeviceBuffer expert_send_pos;  // int32 [T * top_k]
  DeviceBuffer expert_recv_pos;  // int32 [rows * top_k]
  DeviceBuffer expert_send;      // f32 [T * top_k, chunks, hidden]
  DeviceBuffer expert_recv;      // f32 [rows * top_k, chunks, hidden]
  DeviceBuffer expert_gathered;  // [world + 1, rows, hidden]
  std::vector<float> host_gathered;  // host copy of the gathered logits (world > 1 only)
  // Expert parallelism's routing plan, on the host: the step's expert ids, each slot's place
  // in the send and receive buffers, and the elements to and from each rank.
  std::vector<int32_t> host_ids, send_pos, recv_pos;
  std::vector<int64_t> send_counts, recv_counts;
  // Multi-head latent attention only (StepBufferSizes::mla_*).
  DeviceBuffer mla_q_latent;     // [T, q_lora]
  DeviceBuffer mla_entry;        // [T, kv_lora + rope]: the rows' cache entries
  DeviceBuffer mla_latent;       // [T, kv_lora] normed
  DeviceBuffer mla_q_absorbed;   // [T, local_heads, kv_lora + rope]
  DeviceBuffer mla_attn_latent;  // [T, local_heads, kv_lora + rope]
  DeviceBuffer mla_head_in;      // [T, max(nope, kv_lora)]
  DeviceBuffer mla_head_out;     // [T, max(kv_lora, v)]
  DeviceBuffer mla_expanded;     // [T, local_heads * (nope + v)]
  DeviceBuffer mtp_concat;       // [T, 2 * hidden]: an MTP draft's normed embedding and hidden
  DeviceBuffer pipeline_rows;    // [T, hidden]: the last stage's micro-batches' rows
};


std::vector<std::pair<DeviceBuffer*, int64_t>> LlamaModel::WorkspaceBuffers(
    Workspace& ws, const StepBufferSizes& s) {
  return {{&ws.x, s.residual},
          {&ws.h, s.normed},
          {&ws.proj, s.proj},
          {&ws.q, s.q},
          {&ws.k, s.k},
          {&ws.v, s.v},
          {&ws.attn, s.attn},
          {&ws.gate, s.gate},
          {&ws.up, s.up},
          {&ws.partials, s.partials},
          {&ws.all_partials, s.all_partials},
          {&ws.logits_local, s.logits_local},
          {&ws.logits_gathered, s.logits_gathered},
          {&ws.router_logits, s.router_logits},
          {&ws.expert_ids, s.expert_ids},
          {&ws.expert_weights, s.expert_weights},
          {&ws.expert_rows, s.expert_rows},
          {&ws.expert_gate, s.expert_gate},
          {&ws.expert_up, s.expert_up},
          {&ws.expert_down, s.expert_down},
          {&ws.expert_send_pos, s.expert_send_pos},
          {&ws.expert_recv_pos, s.expert_recv_pos},
          {&ws.expert_send, s.expert_send},
          {&ws.expert_recv, s.expert_recv},
          {&ws.expert_gathered, s.expert_gathered},
          {&ws.mla_q_latent, s.mla_q_latent},
          {&ws.mla_entry, s.mla_entry},
          {&ws.mla_latent, s.mla_latent},
          {&ws.mla_q_absorbed, s.mla_q_absorbed},
          {&ws.mla_attn_latent, s.mla_attn_latent},
          {&ws.mla_head_in, s.mla_head_in},
          {&ws.mla_head_out, s.mla_head_out},
          {&ws.mla_expanded, s.mla_expanded},
          {&ws.mtp_concat, s.mtp_concat},
          {&ws.pipeline_rows, s.pipeline_rows}};
}

LlamaModel::LlamaModel(const ModelSpec& config, const ShardingPlan& plan,
                       const WeightFormats& formats, LlamaWeights weights, RopeLayout rope_layout,
                       Backend* backend, Communicator* comm, int64_t max_tokens_per_step,
                       int64_t max_logit_rows, TpReduction reduction)
    : config_(config),
      plan_(plan),
      formats_(formats),
      weights_(std::move(weights)),
      rope_layout_(rope_layout),
      backend_(backend),
      comm_(comm),
      max_tokens_per_step_(max_tokens_per_step),
      max_logit_rows_(max_logit_rows),
      reduction_(reduction),
      ws_(std::make_unique<Workspace>()) {}

namespace {

// Layer `l`'s attention as the description says it.
Backend::AttentionParams AttentionParamsOf(const ModelSpec& c, int64_t l) {
  const LayerSpec layer = c.Layer(l);
  Backend::AttentionParams p{static_cast<float>(c.AttentionScale(l)), layer.sliding_window,
                             static_cast<float>(c.attn_logit_softcap)};
  p.attention_chunk = layer.attention_chunk;
  p.temperature_floor = layer.temperature_floor;
  p.temperature_scale = static_cast<float>(layer.temperature_scale);
  return p;
}

// UNIMPLEMENTED naming what of the description `backend` cannot compute (the first layer whose
// attention it lacks, its experts), so that nothing is ever computed otherwise.
absl::Status RefuseWhatTheBackendLacks(const ModelSpec& c,
                                       absl::Span<const Backend::AttentionParams> attention,
                                       const Backend& backend) {
  std::vector<std::string> missing;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (backend.SupportsAttention(attention[l])) continue;
    missing.push_back(StrCat("layer ", l, "'s ", Backend::AttentionExtrasString(attention[l])));
    break;
  }
  if (c.mla.enabled() && !backend.SupportsLatentAttention()) {
    missing.push_back("multi-head latent attention");
  }
  if (c.moe.enabled() && !backend.SupportsExperts()) {
    missing.push_back(StrCat("mixture-of-experts layers (", ExpertRoutingString(c.moe.routing),
                             ")"));
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::UnimplementedError(StrCat(c.name, " has ", absl::StrJoin(missing, " and "),
                                         ", which the ", backend.name(),
                                         " backend cannot run yet; the CPU backend can"));
}

}  // namespace

namespace {

// The links a stage needs, each a two-rank group in which this rank has its place; what a
// pipeline stage cannot run yet refused by name.
absl::Status CheckPipelineLinks(const ModelSpec& config, const ShardingPlan& plan,
                                const PipelineLinks& links) {
  const ShardSpec s = plan.shard();
  if (s.num_stages == 1) return absl::OkStatus();
  if (config.is_mtp_draft() || s.attention_dp) {
    return absl::UnimplementedError(StrCat(
        "pipeline stages (", s.num_stages, ") with ",
        s.attention_dp ? "data-parallel attention" : "a multi-token-prediction draft",
        ": not supported (one stage runs them)"));
  }
  struct Link {
    const char* name;
    const Communicator* comm;
    bool needed;
    int rank;  // this rank's place in it
  };
  const Link checks[] = {{"from_prev", links.from_prev, !plan.first_stage(), 1},
                         {"to_next", links.to_next, !plan.last_stage(), 0}};
  for (const Link& l : checks) {
    if (l.needed != (l.comm != nullptr)) {
      return absl::InvalidArgumentError(StrCat("stage ", s.stage, " of ", s.num_stages,
                                               ": pipeline link ", l.name, " is ",
                                               l.needed ? "missing" : "set, but it has none"));
    }
    if (l.comm != nullptr && (l.comm->world_size() != 2 || l.comm->rank() != l.rank)) {
      return absl::InvalidArgumentError(StrCat("stage ", s.stage, ": pipeline link ", l.name,
                                               " is rank ", l.comm->rank(), " of ",
                                               l.comm->world_size(), "; it must be rank ",
                                               l.rank, " of 2"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LlamaModel::SetPipelineLinks(const PipelineLinks& links) {
  TP_RETURN_IF_ERROR(CheckPipelineLinks(config_, plan_, links));
  pipeline_ = links;
  return absl::OkStatus();
}

absl::Status LlamaModel::Init() {
  // Each layer's attention as the description says it, once rather than at every step.
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    layer_attention_.push_back(AttentionParamsOf(config_, l));
  }
  TP_RETURN_IF_ERROR(RefuseWhatTheBackendLacks(config_, layer_attention_, *backend_));
  if (config_.mla.enabled() && expand_fresh_prefill_ && !backend_->SupportsPrefillAttention()) {
    return absl::UnimplementedError(StrCat(
        "mla_expand_fresh_prefill: the ", backend_->name(),
        " backend has no expanded-form prefill attention (PrefillAttention); the absorbed form, "
        "the default, serves every step"));
  }
  reduction_chunks_ = ReductionChunks(config_, plan_, formats_, reduction_, requested_chunks_);
  down_chunks_ = DenseDownChunks(config_, plan_, reduction_chunks_);
  // Logits only where the last stage makes them.
  sizes_ = StepBuffersFor(config_, plan_, max_tokens_per_step_,
                          plan_.last_stage() ? max_logit_rows_ : 0, ActivationBytes(*backend_),
                          reduction_chunks_);
  for (const auto& [buffer, bytes] : WorkspaceBuffers(*ws_, sizes_)) {
    if (bytes == 0) continue;
    TP_ASSIGN_OR_RETURN(*buffer, backend_->Allocate(bytes, "step buffer"));
  }
  static_assert(kSamplingRank == 0, "ShardingPlan::samples() names rank 0");
  if (plan_.samples()) {  // the others receive no logits
    ws_->host_gathered.resize(sizes_.logits_gathered / sizeof(float));
  }

  // One frequency table per distinct (base, scaling) among the layers: Gemma 3's local and
  // global layers differ; every other family has one.
  std::vector<std::vector<float>> tables;
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    std::vector<float> table = InverseFrequencies(config_.Layer(l));
    auto same = std::find(tables.begin(), tables.end(), table);
    if (same == tables.end()) {
      tables.push_back(std::move(table));
      same = tables.end() - 1;
    }
    layer_table_.push_back(static_cast<int>(same - tables.begin()));
  }
  for (const std::vector<float>& table : tables) {
    TP_ASSIGN_OR_RETURN(DeviceBuffer b, Upload(*backend_, table.data(),
                                               table.size() * sizeof(float), "rope frequencies"));
    inv_freq_.push_back(std::move(b));
  }
  bool unit_norm = false;
  for (int64_t l = 0; l < config_.num_layers; ++l) unit_norm |= config_.Layer(l).qk_l2_norm;
  if (unit_norm) {
    const std::vector<float> ones(config_.head_dim, 1.0f);
    TP_ASSIGN_OR_RETURN(unit_norm_, Upload(*backend_, ones.data(),
                                           config_.head_dim * sizeof(float), "qk l2 norm"));
  }
  return absl::OkStatus();
}

std::vector<float> LlamaModel::InverseFrequencies(const LayerSpec& layer) const {
  const RopeScaling& r = layer.rope_scaling;
  const int64_t rope_dim = config_.RopeDim();
  std::vector<float> inv_freq;
  if (r.type == RopeScalingType::kYarn) {
    inv_freq = YarnInverseFrequencies(
        rope_dim, layer.rope_theta,
        YarnRopeScaling{r.factor, static_cast<double>(r.original_max_position_embeddings),
                        r.beta_fast, r.beta_slow});
  } else {
    // A GGUF rope_freqs tensor already encodes Llama 3.1 scaling (llama.cpp divides by it).
    std::optional<Llama3RopeScaling> llama3;
    if (r.type == RopeScalingType::kLlama3 && weights_.rope_freq_factors.empty()) {
      llama3 = Llama3RopeScaling{r.factor, r.low_freq_factor, r.high_freq_factor,
                                 static_cast<double>(r.original_max_position_embeddings)};
    }
    inv_freq = RopeInverseFrequencies(rope_dim, layer.rope_theta, llama3);
    if (r.type == RopeScalingType::kLinear) {
      for (float& f : inv_freq) f = static_cast<float>(f / r.factor);
    }
  }
  for (size_t i = 0; i < weights_.rope_freq_factors.size(); ++i) {
    inv_freq[i] /= weights_.rope_freq_factors[i];
  }
  return inv_freq;
}

LlamaModel::~LlamaModel() { backend_->ForgetCaptured(this); }

absl::Status LlamaModel::ReserveAttention(DType kv_dtype, int64_t block_size_tokens) {
  TP_ASSIGN_OR_RETURN(attention_bytes_,
                      backend_->ReserveAttention(AttentionReservationFor(
                          config_, plan_, max_tokens_per_step_, max_logit_rows_,
                          max_context_tokens_, kv_dtype, block_size_tokens)));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(const ModelSpec& config,
                                                             const WeightSource& source,
                                                             ShardSpec shard, Backend* backend,
                                                             Communicator* comm,
                                                             const LlamaLoadOptions& options) {
  TP_RETURN_IF_ERROR(config.Validate());
  WeightFormats formats;
  if (options.formats.has_value()) {
    formats = *options.formats;
  } else {
    TP_ASSIGN_OR_RETURN(formats, StoredWeightFormats(source, options.scheme, config));
  }
  if (comm->rank() != shard.rank || comm->world_size() != shard.world_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "communicator is rank %d of %d but the shard spec says rank %d of %d", comm->rank(),
        comm->world_size(), shard.rank, shard.world_size));
  }
  TP_ASSIGN_OR_RETURN(ShardingPlan plan, ShardingPlan::Create(config, formats, shard));
  TP_RETURN_IF_ERROR(CheckPipelineLinks(config, plan, options.pipeline));
  if (options.max_tokens_per_step < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_tokens_per_step = %d must be >= 1", options.max_tokens_per_step));
  }
  const int64_t max_logit_rows =
      options.max_logit_rows > 0 ? options.max_logit_rows : options.max_tokens_per_step;
  if (options.max_context_tokens < 0 || options.max_context_tokens > config.max_context_tokens) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max_context_tokens = %d must be in [0, %d] (0: the model's context length)",
        options.max_context_tokens, config.max_context_tokens));
  }
  if (options.reduction == TpReduction::kDeterministic) {
    TP_RETURN_IF_ERROR(
        CheckReductionChunks(config, formats, shard.world_size, options.reduction_chunks));
  }
  TP_ASSIGN_OR_RETURN(LlamaWeights weights,
                      LoadLlamaWeights(config, source, options.scheme, plan, formats, *backend,
                                       config.mla.enabled() && options.mla_expand_fresh_prefill));
  // llama.cpp's Llama converter permutes Q/K rows so that neighbours pair up; its Qwen and
  // Gemma files, and Hugging Face checkpoints but Llama 4's, rotate halves.
  const bool interleaved = source.format() == CheckpointFormat::kGguf
                               ? !config.gguf_rope_rotate_half
                               : config.hf_rope_interleaved;
  const RopeLayout layout = interleaved ? RopeLayout::kInterleaved : RopeLayout::kRotateHalf;
  std::unique_ptr<LlamaModel> model(new LlamaModel(config, plan, formats, std::move(weights),
                                                   layout, backend, comm,
                                                   options.max_tokens_per_step, max_logit_rows,
                                                   options.reduction));
  model->requested_chunks_ = options.reduction_chunks;
  model->pipeline_ = options.pipeline;
  model->record_decode_steps_ = options.record_decode_steps;
  model->expand_fresh_prefill_ = options.mla_expand_fresh_prefill;
  model->max_context_tokens_ = options.max_context_tokens > 0 ? options.max_context_tokens
                                                              : config.max_context_tokens;
  TP_RETURN_IF_ERROR(model->Init());
  return model;
}

KvCacheShape LlamaModel::KvShape(int64_t num_blocks, int64_t block_size_tokens,
                                  DType dtype) const {
  const KvEntry entry = KvEntryOf(config_, plan_.attention_degree());
  KvCacheShape shape;
  shape.num_layers = plan_.num_local_layers();  // this pipeline stage's
  shape.num_blocks = num_blocks;
  shape.block_size_tokens = block_size_tokens;
  shape.num_kv_heads = entry.heads;
  shape.head_dim = entry.dim;
  shape.pools = entry.pools;
  shape.dtype = dtype;
  return shape;
}

MemoryFootprint LlamaModel::footprint() const {
  MemoryFootprint fp;
  fp.weight_bytes_resident = weights_.bytes_viewed + weights_.bytes_copied;
  fp.weight_bytes_copied = weights_.bytes_copied;
  fp.weight_bytes_by_role = weights_.role_bytes;
  for (const auto& entry : WorkspaceBuffers(*ws_, sizes_)) {
    fp.workspace_bytes += entry.first->bytes();
  }
  fp.attention_bytes = attention_bytes_;
  return fp;
}

absl::Status LlamaModel::Validate(const StepBatch& batch, const KvCache& cache) const {
  const KvCacheShape& kv = cache.shape();
  const KvEntry entry = KvEntryOf(config_, plan_.attention_degree());
  if (kv.num_layers != plan_.num_local_layers() || kv.num_kv_heads != entry.heads ||
      kv.head_dim != entry.dim || kv.pools != entry.pools) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "KV cache shape (layers %d, kv heads %d, head_dim %d, pools %d) does not match this "
        "rank (layers %d, kv heads %d, head_dim %d, pools %d)", kv.num_layers, kv.num_kv_heads,
        kv.head_dim, kv.pools, plan_.num_local_layers(), entry.heads, entry.dim, entry.pools));
  }
  if (batch.sequences.empty()) return absl::InvalidArgumentError("step batch has no sequences");
  TP_RETURN_IF_ERROR(batch.CheckShape());
  const int world = plan_.shard().world_size;
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const StepBatch::Sequence& s = batch.sequences[i];
    const int64_t end = s.end_position();
    if (plan_.attention_dp() ? s.attention_rank < 0 || s.attention_rank >= world
                             : s.attention_rank != -1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sequence %d: attention_rank = %d, expected %s", i, s.attention_rank,
          plan_.attention_dp() ? absl::StrFormat("a rank in [0, %d) (data-parallel attention)",
                                                 world)
                               : std::string("-1 (attention split over the ranks)")));
    }
    if (end > max_context_tokens_) {  // what the attention workspace was reserved for
      return absl::InvalidArgumentError(absl::StrFormat(
          "sequence %d: positions up to %d exceed max_context_tokens = %d", i, end,
          max_context_tokens_));
    }
    for (int32_t id : batch.tokens(s)) {
      if (id < 0 || id >= config_.vocab_size) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "sequence %d: token id %d is outside [0, %d)", i, id, config_.vocab_size));
      }
    }
    // Another rank's sequence names blocks of that rank's cache.
    if (s.attention_rank >= 0 && s.attention_rank != plan_.shard().rank) continue;
    const int64_t blocks = (end + kv.block_size_tokens - 1) / kv.block_size_tokens;
    if (static_cast<int64_t>(s.block_table.size()) < blocks) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sequence %d: block table has %d blocks, positions up to %d need %d", i,
          s.block_table.size(), end, blocks));
    }
    for (int64_t b = 0; b < blocks; ++b) {
      if (s.block_table[b] < 0 || s.block_table[b] >= kv.num_blocks) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "sequence %d: block_table[%d] = %d is outside the cache's [0, %d)", i, b,
            s.block_table[b], kv.num_blocks));
      }
    }
  }
  const int64_t total = batch.num_tokens();
  if (total > max_tokens_per_step_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "step has %d tokens, more than max_tokens_per_step = %d", total, max_tokens_per_step_));
  }
  if (plan_.last_stage() && batch.num_logit_rows() > max_logit_rows_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "step asks for %d rows of logits, more than max_logit_rows = %d", batch.num_logit_rows(),
        max_logit_rows_));
  }
  return absl::OkStatus();
}

// Rows of the step, padding included.
static int64_t NumRows(const StepInputs& step) {
  return static_cast<int64_t>(step.positions.size());
}

StepInputs LlamaModel::PrepareStep(const StepBatch& batch, int64_t bucket) {
  positions_.clear();
  seqs_.clear();
  logit_rows_.clear();
  for (const StepBatch::Sequence& s : batch.sequences) {
    seqs_.push_back(AttentionSequence{s.first_token, s.num_tokens, s.start_position,
                                      s.block_table});
    for (int64_t i = 0; i < s.num_tokens; ++i) {
      positions_.push_back(static_cast<int32_t>(s.start_position + i));
    }
    for (int64_t row = s.first_token + s.num_tokens - s.num_logits;
         row < s.first_token + s.num_tokens; ++row) {
      logit_rows_.push_back(static_cast<int32_t>(row));
    }
  }
  attention_first_row_ = 0;
  if (plan_.attention_dp()) {
    // This rank's run of sequences (StepBatch keeps each rank's together), rows from 0.
    own_token_ids_.clear();
    own_positions_.clear();
    own_seqs_.clear();
    for (const StepBatch::Sequence& s : batch.sequences) {
      if (s.attention_rank != plan_.shard().rank) continue;
      if (own_seqs_.empty()) attention_first_row_ = s.first_token;
      own_seqs_.push_back(AttentionSequence{s.first_token - attention_first_row_, s.num_tokens,
                                            s.start_position, s.block_table});
      const absl::Span<const int32_t> tokens = batch.tokens(s);
      own_token_ids_.insert(own_token_ids_.end(), tokens.begin(), tokens.end());
      for (int64_t i = 0; i < s.num_tokens; ++i) {
        own_positions_.push_back(static_cast<int32_t>(s.start_position + i));
      }
    }
    attention_step_ = StepInputs{own_token_ids_, own_positions_, own_seqs_, {}};
  }
  absl::Span<const int32_t> token_ids = batch.token_ids;
  if (bucket > batch.num_tokens()) {
    // Padding rows up to the bucket: token 0 at position 0, no KV, their logits dropped.
    padded_token_ids_.assign(batch.token_ids.begin(), batch.token_ids.end());
    for (int64_t row = batch.num_tokens(); row < bucket; ++row) {
      seqs_.push_back(AttentionSequence{row, 1, 0, {}, /*padding=*/true});
      padded_token_ids_.push_back(0);
      positions_.push_back(0);
      logit_rows_.push_back(static_cast<int32_t>(row));
    }
    token_ids = padded_token_ids_;
  }
  step_rows_ = static_cast<int64_t>(positions_.size());
  return StepInputs{token_ids, positions_, seqs_, logit_rows_};
}

absl::StatusOr<StepBatch> LlamaModel::MtpRows(const StepBatch& batch) const {
  StepBatch out;
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const StepBatch::Sequence& s = batch.sequences[i];
    // The token at position p is the input of MTP position p - 1 (none for position 0).
    const int64_t skip = s.start_position == 0 ? 1 : 0;
    const absl::Span<const int32_t> tokens = batch.tokens(s).subspan(skip);
    if (static_cast<int64_t>(tokens.size()) < std::max<int64_t>(1, s.num_logits)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sequence %d: a multi-token-prediction draft predicts from the tokens after position "
          "0; %d token(s) from position %d leave %d row(s) for num_logits = %d",
          i, s.num_tokens, s.start_position, tokens.size(), s.num_logits));
    }
    StepBatch::Sequence& m = out.Add(s.seq_id, std::max<int64_t>(s.start_position, 1) - 1,
                                     tokens, s.block_table, s.num_logits);
    m.attention_rank = s.attention_rank;
  }
  return out;
}

absl::Status LlamaModel::SetHiddenStore(KvCache* store) {
  if (store != nullptr) {
    const KvCacheShape& s = store->shape();
    if (s.num_layers != 1 || s.num_kv_heads != 1 || s.head_dim != config_.hidden_size ||
        s.pools != 1 || s.dtype != backend_->activation_dtype()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "hidden-state store (layers %d, heads %d, dim %d, pools %d, %s) is not one pool of "
          "[%d] %s rows", s.num_layers, s.num_kv_heads, s.head_dim, s.pools,
          DTypeName(s.dtype), config_.hidden_size, DTypeName(backend_->activation_dtype())));
    }
    if (plan_.attention_dp()) {
      return absl::UnimplementedError(
          "a multi-token-prediction draft with data-parallel attention (each rank's blocks "
          "numbered in its own cache) is not built");
    }
  }
  hidden_store_ = store;
  return absl::OkStatus();
}

KvCacheShape HiddenStoreShape(const ModelSpec& config, int64_t num_blocks,
                              int64_t block_size_tokens, DType activation_dtype) {
  KvCacheShape s;
  s.num_layers = 1;
  s.num_blocks = num_blocks;
  s.block_size_tokens = block_size_tokens;
  s.num_kv_heads = 1;
  s.head_dim = config.hidden_size;
  s.dtype = activation_dtype;
  s.pools = 1;
  return s;
}

absl::Status LlamaModel::Forward(const StepBatch& batch_in, KvCache* cache, float* logits) {
  StepBatch shifted;
  if (config_.is_mtp_draft()) {
    if (hidden_store_ == nullptr) {
      return absl::FailedPreconditionError(
          "a multi-token-prediction draft steps with the target's hidden states: no store set "
          "(SetHiddenStore)");
    }
    TP_ASSIGN_OR_RETURN(shifted, MtpRows(batch_in));
  }
  const StepBatch& batch = config_.is_mtp_draft() ? shifted : batch_in;
  TP_RETURN_IF_ERROR(Validate(batch, *cache));
  held_rows_ = -1;  // the workspace's logits are about to be overwritten
  if (plan_.shard().num_stages > 1) return PipelinedForward(batch, cache, logits);
  const int64_t logit_rows = batch.num_logit_rows();
  const int64_t bucket = CaptureBucket(batch);
  const StepInputs step = PrepareStep(batch, bucket);
  backend_->BeginStep(step);
  if (bucket > 0) return RecordedStep(step, bucket, logit_rows, cache, logits);
  TP_RETURN_IF_ERROR(RunLayers(step, cache));
  TP_RETURN_IF_ERROR(LmHead(step, logits));
  return backend_->Synchronize();
}

absl::Status LlamaModel::PipelinedForward(const StepBatch& batch, KvCache* cache,
                                          float* logits) {
  const int64_t row_bytes = config_.hidden_size * ActivationBytes(*backend_);
  // Each micro-batch through this stage's layers and on (RunLayers receives and sends), so
  // the next stage works on one while this one starts the next; the last stage keeps each
  // one's rows, in order, for one LM head over the step.
  int64_t row = 0;
  for (const StepBatch& part : MicroBatches(batch, std::max(2, plan_.shard().num_stages))) {
    const StepInputs step = PrepareStep(part, 0);
    backend_->BeginStep(step);
    TP_RETURN_IF_ERROR(RunLayers(step, cache));
    if (plan_.last_stage()) {
      const int64_t t = NumRows(step);
      backend_->Copy2D(static_cast<uint8_t*>(ws_->pipeline_rows.data()) + row * row_bytes,
                       row_bytes, ws_->x.data(), row_bytes, row_bytes, t);
      row += t;
    }
  }
  for (Communicator* link : {pipeline_.from_prev, pipeline_.to_next}) {
    if (link != nullptr) TP_RETURN_IF_ERROR(link->AwaitCollectives());
  }
  if (plan_.last_stage()) {
    const StepInputs step = PrepareStep(batch, 0);
    backend_->BeginStep(step);
    backend_->Copy2D(ws_->x.data(), row_bytes, ws_->pipeline_rows.data(), row_bytes, row_bytes,
                     row);
    TP_RETURN_IF_ERROR(LmHead(step, logits));
  } else if (plan_.shard().world_size > 1) {
    TP_RETURN_IF_ERROR(comm_->AwaitCollectives());
  }
  return backend_->Synchronize();
}

absl::Status LlamaModel::PipeTransfer(Communicator& link, int64_t rows) {
  const int64_t bytes = rows * config_.hidden_size * ActivationBytes(*backend_);
  // A two-rank group whose root is the earlier stage: the broadcast is its send, and the
  // later stage's receive.
  return link.Broadcast(absl::MakeSpan(static_cast<uint8_t*>(ws_->x.data()), bytes), 0);
}

absl::Status LlamaModel::RecordedStep(const StepInputs& step, int64_t bucket,
                                      int64_t logit_rows, KvCache* cache, float* logits) {
  const void* pool = cache->layer(0).k;
  if (pool != captured_pool_ || cache->bytes() != captured_pool_bytes_) {
    backend_->ForgetCaptured(this);  // recordings of another cache's pools
    captured_pool_ = pool;
    captured_pool_bytes_ = cache->bytes();
  }
  // Every rank records and replays the same collectives in the same order (the bucket is the
  // batch's, which every rank is given), so replays meet their peers' as eager steps do.
  TP_RETURN_IF_ERROR(comm_->RunRecorded(StrCat("decode step of ", bucket, " rows"), [&] {
    return backend_->RunCaptured(this, bucket, [&]() -> absl::Status {
      TP_RETURN_IF_ERROR(RunLayers(step, cache));
      return QueueLogits(bucket);
    });
  }));
  TP_RETURN_IF_ERROR(ReceiveLogits(bucket, logit_rows, logits));
  return backend_->Synchronize();
}

int64_t LlamaModel::CaptureBucket(const StepBatch& batch) const {
  // (An MTP target's hidden states are copied row by row on the host's schedule, which a
  // recording would bake in; RecordsDecodeSteps says what else never records.)
  if (!record_decode_steps_ || !backend_->SupportsStepCapture() ||
      !RecordsDecodeSteps(config_, plan_.attention_dp()) || hidden_store_ != nullptr) {
    return 0;
  }
  // At tp > 1 the layers' collectives sit inside the recording.
  if (plan_.shard().world_size > 1 && !comm_->capturable()) return 0;
  if (plan_.shard().num_stages > 1) return 0;  // micro-batches go stage to stage from the host
  for (const StepBatch::Sequence& s : batch.sequences) {
    if (s.num_tokens != 1 || s.num_logits != 1) return 0;
  }
  return CaptureBatchBucket(static_cast<int64_t>(batch.sequences.size()),
                            std::min(max_tokens_per_step_, max_logit_rows_));
}

absl::Status LlamaModel::RunLayers(const StepInputs& step, KvCache* cache) {
  if (plan_.first_stage()) {
    TP_RETURN_IF_ERROR(Embed(step));
  } else {  // the previous stage's rows
    TP_RETURN_IF_ERROR(PipeTransfer(*pipeline_.from_prev, NumRows(step)));
  }
  if (config_.is_mtp_draft()) MtpInput(step);
  // Data-parallel attention: the attention ops see this rank's sequences only (the backend's
  // ops read the current step), the LM head the whole step again.
  const bool own = plan_.attention_dp();
  if (own && !attention_step_.seqs.empty()) backend_->BeginStep(attention_step_);
  const int64_t first = plan_.first_layer(), end = first + plan_.num_local_layers();
  for (int64_t l = first; l < end; ++l) {
    TP_RETURN_IF_ERROR(AttentionBlock(l, own ? attention_step_ : step, cache));
    TP_RETURN_IF_ERROR(FeedForwardBlock(l, step));
  }
  if (own && !attention_step_.seqs.empty()) backend_->BeginStep(step);
  if (!plan_.last_stage()) {  // on to the next stage
    TP_RETURN_IF_ERROR(PipeTransfer(*pipeline_.to_next, NumRows(step)));
  }
  // The target's last hidden states, for its multi-token-prediction draft (every row's, at its
  // position: the draft reads the positions before the token it drafts from).
  if (hidden_store_ != nullptr && !config_.is_mtp_draft()) {
    backend_->WriteKv(ws_->x.data(), ws_->x.data(), hidden_store_->layer(0));
  }
  return absl::OkStatus();
}

void LlamaModel::MtpInput(const StepInputs& step) {
  const int64_t t = NumRows(step), hidden = config_.hidden_size, a = ActivationBytes(*backend_);
  const float eps = static_cast<float>(config_.rms_norm_eps);
  Workspace& ws = *ws_;
  auto* concat = static_cast<uint8_t*>(ws.mtp_concat.data());
  // [enorm(embedding), hnorm(hidden)] per row, then eh_proj.
  backend_->RmsNorm(ws.x.data(), weights_.mtp_enorm.as<float>(), t, hidden, eps, ws.h.data());
  backend_->Copy2D(concat, 2 * hidden * a, ws.h.data(), hidden * a, hidden * a, t);
  // The target's hidden state at each row's position, a block's run of rows at a time.
  const KvPoolView store = hidden_store_->layer(0);
  const int64_t bs = store.block_size_tokens, row = hidden * a;
  auto* rows = static_cast<uint8_t*>(ws.proj.data());
  for (const AttentionSequence& s : step.seqs) {
    for (int64_t i = 0; i < s.num_query_tokens;) {
      const int64_t pos = s.start_position + i;
      const int64_t run = std::min(s.num_query_tokens - i, bs - pos % bs);
      const auto* src = static_cast<const uint8_t*>(store.k) +
                        (int64_t{s.block_table[pos / bs]} * bs + pos % bs) * row;
      backend_->Copy2D(rows + (s.first_row + i) * row, row, src, row, row, run);
      i += run;
    }
  }
  backend_->RmsNorm(ws.proj.data(), weights_.mtp_hnorm.as<float>(), t, hidden, eps, ws.h.data());
  backend_->Copy2D(concat + hidden * a, 2 * hidden * a, ws.h.data(), hidden * a, hidden * a, t);
  backend_->MatMul(concat, t, weights_.mtp_eh_proj.matrix, ws.x.data(),
                   backend_->activation_dtype());
}

absl::Status LlamaModel::Embed(const StepInputs& step) {
  const int64_t t = NumRows(step);
  backend_->EmbeddingRows(weights_.embedding.matrix, plan_.first_vocab_row(), ws_->x.data());
  // Rows of other ranks' vocab came out zero; the sum restores every row everywhere.
  if (plan_.shard().world_size > 1) {
    TP_RETURN_IF_ERROR(comm_->AllReduceSum(ws_->x.data(), t * config_.hidden_size,
                                           backend_->activation_dtype()));
  }
  if (config_.embedding_multiplier != 1.0) {  // Gemma: sqrt(hidden)
    backend_->Scale(ws_->x.data(), t * config_.hidden_size,
                    static_cast<float>(config_.embedding_multiplier));
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::AttentionBlock(int64_t layer, const StepInputs& step, KvCache* cache) {
  const LlamaLayerWeights& w = weights_.layers[layer];
  const int64_t t = NumRows(step), hidden = config_.hidden_size;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  Workspace& ws = *ws_;
  if (t > 0) {  // with data-parallel attention, a rank may attend for no sequence this step
    const auto* x = static_cast<const uint8_t*>(ws.x.data()) +
                    attention_first_row_ * hidden * ActivationBytes(*backend_);
    backend_->RmsNorm(x, w.attn_norm.as<float>(), t, hidden, eps, ws.h.data());
    TP_RETURN_IF_ERROR(config_.mla.enabled() ? LatentAttention(layer, step, cache)
                                             : GroupedQueryAttention(layer, step, cache));
  }
  TP_RETURN_IF_ERROR(AttentionOutput(ws.attn.data(), t, w.o.matrix));  // -> ws.proj
  if (config_.sandwich_norms) {  // Gemma: the attention's output normed before the residual
    backend_->RmsNorm(ws.proj.data(), w.post_attn_norm.as<float>(), step_rows_, hidden, eps,
                      ws.proj.data());
  }
  backend_->Add(ws.x.data(), ws.proj.data(), step_rows_ * hidden, ws.x.data());
  return absl::OkStatus();
}

absl::Status LlamaModel::GroupedQueryAttention(int64_t layer, const StepInputs& step,
                                               KvCache* cache) {
  const LlamaLayerWeights& w = weights_.layers[layer];
  const int64_t t = NumRows(step), hd = config_.head_dim;
  const int64_t heads = plan_.num_local_heads(), kv_heads = plan_.num_local_kv_heads();
  const DType act = backend_->activation_dtype();
  const float eps = static_cast<float>(config_.rms_norm_eps);
  Workspace& ws = *ws_;
  // q [t, heads * hd], k and v [t, kv_heads * hd]: one op, x read (and quantized) once; Qwen2's
  // biases (this rank's columns) ride on their matrices and are added as each is written.
  // Where the loader stacked them (w.qkv: model/fused_projections.h), one GEMM over the stack.
  const Backend::MatMulOut qkv[] = {
      {&w.q.matrix, ws.q.data()}, {&w.k.matrix, ws.k.data()}, {&w.v.matrix, ws.v.data()}};
  backend_->MatMulMany(ws.h.data(), t, qkv, act, w.FusedQkv());
  if (config_.qk_norm) {  // Qwen3, Gemma 3: RMSNorm over each head, before RoPE
    backend_->RmsNorm(ws.q.data(), w.q_norm.as<float>(), t * heads, hd, eps, ws.q.data());
    backend_->RmsNorm(ws.k.data(), w.k_norm.as<float>(), t * kv_heads, hd, eps, ws.k.data());
  }
  const LayerSpec spec = config_.Layer(layer);
  if (spec.rope) {  // Llama 4's NoPE layers skip it
    const float* inv_freq = inv_freq_[layer_table_[layer]].as<float>();
    backend_->Rope(ws.q.data(), heads, hd, inv_freq, rope_layout_);
    backend_->Rope(ws.k.data(), kv_heads, hd, inv_freq, rope_layout_);
  }
  if (spec.qk_l2_norm) {  // Llama 4: each head RMS-normalized without weights, after RoPE
    backend_->RmsNorm(ws.q.data(), unit_norm_.as<float>(), t * heads, hd, eps, ws.q.data());
    backend_->RmsNorm(ws.k.data(), unit_norm_.as<float>(), t * kv_heads, hd, eps, ws.k.data());
  }
  const KvPoolView pool = cache->layer(layer - plan_.first_layer());
  backend_->WriteKv(ws.k.data(), ws.v.data(), pool);
  backend_->PagedAttention(ws.q.data(), heads, layer_attention_[layer], pool, ws.attn.data());
  return absl::OkStatus();
}

LlamaModel::LatentForms LlamaModel::FormsOf(const StepInputs& step) const {
  LatentForms f;
  for (const AttentionSequence& s : step.seqs) {
    const bool fresh = expand_fresh_prefill_ && s.start_position == 0 && !s.padding;
    f.expanded |= fresh;
    f.absorbed |= !fresh;
  }
  return f;
}

absl::Status LlamaModel::LatentAttention(int64_t layer, const StepInputs& step,
                                         KvCache* cache) {
  const LlamaLayerWeights& w = weights_.layers[layer];
  const MlaSpec& m = config_.mla;
  const int64_t t = NumRows(step), hd = config_.head_dim;
  const int64_t heads = plan_.num_local_heads(), nope = m.qk_nope_head_dim;
  const int64_t rope = m.qk_rope_head_dim, r = m.kv_lora_rank, latent = m.latent_dim();
  const int64_t v = m.v_head_dim;
  const DType act = backend_->activation_dtype();
  const int64_t a = ActivationBytes(*backend_);
  const float eps = static_cast<float>(config_.rms_norm_eps);
  Workspace& ws = *ws_;
  // The query [t, heads, nope + rope] (through its latent where the model has one) and each
  // row's cache entry [t, r + rope]: the latent, normed, then the shared RoPE key, rotated.
  if (m.q_lora_rank > 0) {
    const Backend::MatMulOut first[] = {{&w.q_a.matrix, ws.mla_q_latent.data()},
                                        {&w.kv_a.matrix, ws.mla_entry.data()}};
    backend_->MatMulMany(ws.h.data(), t, first, act, /*fused=*/nullptr);
    backend_->RmsNorm(ws.mla_q_latent.data(), w.q_a_norm.as<float>(), t, m.q_lora_rank, eps,
                      ws.mla_q_latent.data());
    backend_->MatMul(ws.mla_q_latent.data(), t, w.q_b.matrix, ws.q.data(), act);
  } else {
    const Backend::MatMulOut first[] = {{&w.q.matrix, ws.q.data()},
                                        {&w.kv_a.matrix, ws.mla_entry.data()}};
    backend_->MatMulMany(ws.h.data(), t, first, act, /*fused=*/nullptr);
  }
  backend_->Copy2D(ws.mla_latent.data(), r * a, ws.mla_entry.data(), latent * a, r * a, t);
  backend_->RmsNorm(ws.mla_latent.data(), w.kv_a_norm.as<float>(), t, r, eps,
                    ws.mla_latent.data());
  backend_->Copy2D(ws.mla_entry.data(), latent * a, ws.mla_latent.data(), r * a, r * a, t);
  const float* inv_freq = inv_freq_[layer_table_[layer]].as<float>();
  backend_->RopePart(ws.q.data(), heads, hd, nope, rope, inv_freq, rope_layout_);
  backend_->RopePart(ws.mla_entry.data(), 1, latent, r, rope, inv_freq, rope_layout_);
  const KvPoolView pool = cache->layer(layer - plan_.first_layer());
  backend_->WriteKv(ws.mla_entry.data(), ws.mla_entry.data(), pool);  // keys are the values
  auto* q = static_cast<uint8_t*>(ws.q.data());
  auto* out = static_cast<uint8_t*>(ws.attn.data());  // [t, heads * v]
  // Each sequence in one form, whatever the others in the step: absorbed, or, where asked, a
  // fresh prefill expanded (a sequence's form never depends on the other sequences).
  const LatentForms forms = FormsOf(step);
  if (forms.absorbed) {
    // Each head's query [W_UK^T q_nope, q_rope] against the cache's latent entries, read as
    // keys and as values, and W_UV after (rows of fresh prefills come out zero here, and are
    // written below).
    ++latent_paths_.absorbed_layers;
    auto* q_abs = static_cast<uint8_t*>(ws.mla_q_absorbed.data());
    for (int64_t h = 0; h < heads; ++h) {
      backend_->Copy2D(ws.mla_head_in.data(), nope * a, q + h * hd * a, heads * hd * a, nope * a,
                       t);
      backend_->MatMul(ws.mla_head_in.data(), t, w.k_b[h].matrix, ws.mla_head_out.data(), act);
      backend_->Copy2D(q_abs + h * latent * a, heads * latent * a, ws.mla_head_out.data(), r * a,
                       r * a, t);
      backend_->Copy2D(q_abs + (h * latent + r) * a, heads * latent * a,
                       q + (h * hd + nope) * a, heads * hd * a, rope * a, t);
    }
    Backend::AttentionParams params = layer_attention_[layer];
    params.skip_fresh_sequences = forms.expanded;
    backend_->PagedAttention(ws.mla_q_absorbed.data(), heads, params, pool,
                             ws.mla_attn_latent.data());
    const auto* attn_latent = static_cast<const uint8_t*>(ws.mla_attn_latent.data());
    for (int64_t h = 0; h < heads; ++h) {
      backend_->Copy2D(ws.mla_head_in.data(), r * a, attn_latent + h * latent * a,
                       heads * latent * a, r * a, t);
      backend_->MatMul(ws.mla_head_in.data(), t, w.v_b[h].matrix, ws.mla_head_out.data(), act);
      backend_->Copy2D(out + h * v * a, heads * v * a, ws.mla_head_out.data(), v * a, v * a, t);
    }
  }
  if (forms.expanded) {
    // Every head's k_nope and v from the latent (one matmul), each key completed by the shared
    // RoPE key, and each fresh prefill's attention over its own rows.
    ++latent_paths_.expanded_layers;
    backend_->MatMul(ws.mla_latent.data(), t, w.kv_b.matrix, ws.mla_expanded.data(), act);
    const auto* expanded = static_cast<const uint8_t*>(ws.mla_expanded.data());
    auto* k = static_cast<uint8_t*>(ws.k.data());
    auto* vals = static_cast<uint8_t*>(ws.v.data());
    const auto* k_rope = static_cast<const uint8_t*>(ws.mla_entry.data()) + r * a;
    for (int64_t h = 0; h < heads; ++h) {
      const uint8_t* head = expanded + h * (nope + v) * a;
      backend_->Copy2D(k + h * hd * a, heads * hd * a, head, heads * (nope + v) * a, nope * a, t);
      backend_->Copy2D(k + (h * hd + nope) * a, heads * hd * a, k_rope, latent * a, rope * a, t);
      backend_->Copy2D(vals + h * v * a, heads * v * a, head + nope * a, heads * (nope + v) * a,
                       v * a, t);
    }
    backend_->PrefillAttention(ws.q.data(), ws.k.data(), ws.v.data(), heads, hd, v,
                               layer_attention_[layer].scale, ws.attn.data());
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::FeedForwardBlock(int64_t layer, const StepInputs& step) {
  const LlamaLayerWeights& w = weights_.layers[layer];
  const int64_t t = NumRows(step), hidden = config_.hidden_size;
  const int64_t ffn = plan_.local_intermediate_size();
  const DType act = backend_->activation_dtype();
  Workspace& ws = *ws_;
  backend_->RmsNorm(ws.x.data(), w.ffn_norm.as<float>(), t, hidden,
                    static_cast<float>(config_.rms_norm_eps), ws.h.data());
  if (config_.IsMoeLayer(layer)) {
    TP_RETURN_IF_ERROR(ExpertsBlock(layer, t));  // -> ws.proj
  } else {
    const Backend::MatMulOut gate_up[] = {{&w.gate.matrix, ws.gate.data()},   // [t, ffn]
                                           {&w.up.matrix, ws.up.data()}};      // [t, ffn]
    backend_->MatMulMany(ws.h.data(), t, gate_up, act, w.FusedGateUp());
    backend_->GatedActivation(config_.mlp_activation, ws.gate.data(), ws.up.data(), t * ffn,
                              ws.gate.data());
    TP_RETURN_IF_ERROR(RowParallel(ws.gate.data(), t, w.down.matrix, /*dense_down=*/true));
  }
  if (config_.sandwich_norms) {
    backend_->RmsNorm(ws.proj.data(), w.post_ffn_norm.as<float>(), t, hidden,
                      static_cast<float>(config_.rms_norm_eps), ws.proj.data());
  }
  backend_->Add(ws.x.data(), ws.proj.data(), t * hidden, ws.x.data());
  return absl::OkStatus();
}

absl::Status LlamaModel::RowParallel(const void* x, int64_t t, const WeightMatrix& w,
                                     bool dense_down) {
  Workspace& ws = *ws_;
  const int world = plan_.shard().world_size;
  const int64_t chunks = reduction_chunks_, local_chunks = chunks / world;
  const int64_t n = w.rows;  // hidden
  if (chunks == 1) {  // TpReduction::kAllReduce: this rank's partial sum, then one all-reduce
    const DType act = backend_->activation_dtype();
    backend_->MatMul(x, t, w, ws.proj.data(), act);
    if (world == 1) return absl::OkStatus();
    return comm_->AllReduceSum(ws.proj.data(), t * n, act);
  }
  if (dense_down && down_chunks_.units) {
    // The MLP's units in order (DenseDownChunks): this rank's, then zeros up to per_rank.
    const int64_t own = down_chunks_.own, zeros = down_chunks_.per_rank - own;
    auto* partials = ws.partials.as<float>();
    backend_->MatMulChunked(x, t, w, own, partials);
    if (zeros > 0) backend_->FillZero(partials + own * t * n, zeros * t * n * 4);
    return ReduceChunks(t, down_chunks_.per_rank);
  }
  // This rank's chunk sums: [local_chunks, t, n], each exactly what that chunk alone gives.
  backend_->MatMulChunked(x, t, w, local_chunks, ws.partials.as<float>());
  return ReduceChunks(t, local_chunks);
}

absl::Status LlamaModel::AttentionOutput(const void* x, int64_t t, const WeightMatrix& w) {
  if (!plan_.attention_dp()) return RowParallel(x, t, w);
  const int64_t step_rows = step_rows_;
  Workspace& ws = *ws_;
  const int64_t n = w.rows, a = ActivationBytes(*backend_);
  const DType act = backend_->activation_dtype();
  auto* proj = static_cast<uint8_t*>(ws.proj.data());
  uint8_t* own = proj + attention_first_row_ * n * a;
  if (t > 0 && reduction_chunks_ == 1) backend_->MatMul(x, t, w, own, act);
  if (t > 0 && reduction_chunks_ > 1) {  // every chunk here: TP 1's chunk sums, in order
    backend_->MatMulChunked(x, t, w, reduction_chunks_, ws.partials.as<float>());
    backend_->SumChunks(ws.partials.as<float>(), reduction_chunks_, t * n, own);
  }
  // The other ranks' rows are zeros here: the sum gives every row one rank's floats exactly.
  backend_->FillZero(proj, attention_first_row_ * n * a);
  const int64_t after = attention_first_row_ + t;
  if (after < step_rows) backend_->FillZero(proj + after * n * a, (step_rows - after) * n * a);
  if (plan_.shard().world_size == 1) return absl::OkStatus();
  return comm_->AllReduceSum(ws.proj.data(), step_rows * n, act);
}

absl::Status LlamaModel::ReduceChunks(int64_t t, int64_t local_chunks) {
  Workspace& ws = *ws_;
  const int world = plan_.shard().world_size;
  const int64_t n = config_.hidden_size;
  const float* all = ws.partials.as<float>();
  if (world > 1) {  // rank order is chunk order
    TP_RETURN_IF_ERROR(comm_->AllGather(ws.partials.data(), local_chunks * t * n, DType::kF32,
                                        ws.all_partials.data()));
    all = ws.all_partials.as<float>();
  }
  // ((c0 + c1) + c2) + ... on every rank and at every degree.
  backend_->SumChunks(all, local_chunks * world, t * n, ws.proj.data());
  return absl::OkStatus();
}

absl::Status LlamaModel::ExpertsBlock(int64_t layer, int64_t t) {
  const LlamaLayerWeights& w = weights_.layers[layer];
  Workspace& ws = *ws_;
  const ExpertRouting& routing = config_.moe.routing;
  // Every rank holds the whole router, so every rank routes every token the same way.
  backend_->MatMul(ws.h.data(), t, w.router.matrix, ws.router_logits.data(), DType::kF32);
  backend_->RouteExperts(routing, ws.router_logits.as<float>(), t,
                         config_.moe.correction_bias ? w.expert_bias.as<float>() : nullptr,
                         ws.expert_ids.as<int32_t>(), ws.expert_weights.as<float>());
  // The routing on the host: the step's expert load, and expert parallelism's plan.
  ws.host_ids.resize(t * routing.top_k);
  TP_RETURN_IF_ERROR(backend_->CopyToHost(
      ws.host_ids.data(), ws.expert_ids.data(),
      t * routing.top_k * static_cast<int64_t>(sizeof(int32_t))));
  expert_load_.AddLayer(ws.host_ids, routing.num_experts);
  const int world = plan_.shard().world_size;
  const int64_t chunks = reduction_chunks_;
  const int64_t local_chunks = chunks == 1 ? 1 : chunks / world;
  const Backend::ExpertMlp shared = {&w.shared.gate.matrix, &w.shared.up.matrix,
                                     &w.shared.down.matrix};
  const Backend::ExpertMlp* shared_or_null =
      config_.moe.shared_expert_intermediate_size > 0 ? &shared : nullptr;
  if (plan_.expert_parallel() && world > 1) return ExpertParallelBlock(w, shared_or_null, t);
  backend_->MoeExperts(ws.h.data(), t, w.expert_mlps, shared_or_null,
                       config_.mlp_activation,
                       ws.expert_ids.as<int32_t>(), ws.expert_weights.as<float>(),
                       routing.weight_on_input, routing.top_k, local_chunks,
                       {ws.expert_rows.data(), ws.expert_gate.data(), ws.expert_up.data(),
                        ws.expert_down.as<float>()},
                       ws.partials.as<float>());
  if (chunks > 1) return ReduceChunks(t, local_chunks);
  // TpReduction::kAllReduce: this rank's partial sum, rounded once, then one all-reduce.
  const DType act = backend_->activation_dtype();
  backend_->SumChunks(ws.partials.as<float>(), 1, t * config_.hidden_size, ws.proj.data());
  if (world == 1) return absl::OkStatus();
  return comm_->AllReduceSum(ws.proj.data(), t * config_.hidden_size, act);
}

absl::Status LlamaModel::ExpertParallelBlock(const LlamaLayerWeights& w,
                                             const Backend::ExpertMlp* shared, int64_t t) {
  Workspace& ws = *ws_;
  const int world = plan_.shard().world_size, me = plan_.shard().rank;
  const int64_t k = config_.moe.routing.top_k, hidden = config_.hidden_size;
  const int64_t chunks = reduction_chunks_;  // every slot's output travels in all its chunks
  const int64_t act_bytes = ActivationBytes(*backend_);
  // Rank r combines rows [r * per_rank, (r + 1) * per_rank) (the last ranks fewer, or none).
  const int64_t per_rank = (t + world - 1) / world;
  const int64_t first_row = std::min(t, me * per_rank);
  const int64_t mine = std::min(t, first_row + per_rank) - first_row;
  // Every rank routed every token alike (ws.host_ids), so each knows, without asking, which
  // rank runs each slot (its expert's owner) and which combines it (its row's): the
  // all-to-all's counts.
  ws.send_counts.assign(world, 0);
  ws.recv_counts.assign(world, 0);
  const auto runner = [&](int64_t s) { return plan_.ExpertOwner(ws.host_ids[s]); };
  const auto combiner = [&](int64_t s) { return static_cast<int>(s / k / per_rank); };
  for (int64_t s = 0; s < t * k; ++s) {
    if (runner(s) == me) ++ws.send_counts[combiner(s)];
    if (combiner(s) == me) ++ws.recv_counts[runner(s)];
  }
  // Slots in (rank, slot) order in both buffers: each rank's piece in slot order.
  std::vector<int64_t> next_send(world, 0), next_recv(world, 0);
  for (int r = 1; r < world; ++r) {
    next_send[r] = next_send[r - 1] + ws.send_counts[r - 1];
    next_recv[r] = next_recv[r - 1] + ws.recv_counts[r - 1];
  }
  ws.send_pos.assign(t * k, -1);
  ws.recv_pos.assign(mine * k, -1);
  for (int64_t s = 0; s < t * k; ++s) {
    if (runner(s) == me) ws.send_pos[s] = static_cast<int32_t>(next_send[combiner(s)]++);
    if (combiner(s) == me) {
      ws.recv_pos[s - first_row * k] = static_cast<int32_t>(next_recv[runner(s)]++);
    }
  }
  for (int r = 0; r < world; ++r) {  // slots -> elements
    ws.send_counts[r] *= chunks * hidden;
    ws.recv_counts[r] *= chunks * hidden;
  }
  const int64_t i32 = sizeof(int32_t);
  backend_->CopyToDevice(ws.expert_send_pos.data(), ws.send_pos.data(), t * k * i32);
  if (mine > 0) {
    backend_->CopyToDevice(ws.expert_recv_pos.data(), ws.recv_pos.data(), mine * k * i32);
  }
  const Backend::MoeWorkspace scratch = {ws.expert_rows.data(), ws.expert_gate.data(),
                                         ws.expert_up.data(), ws.expert_down.as<float>()};
  backend_->MoeExpertSlots(ws.h.data(), t, w.expert_mlps, plan_.first_local_expert(),
                           config_.mlp_activation, ws.expert_ids.as<int32_t>(),
                           ws.expert_weights.as<float>(), config_.moe.routing.weight_on_input, k,
                           chunks, ws.expert_send_pos.as<int32_t>(), scratch,
                           ws.expert_send.as<float>());
  TP_RETURN_IF_ERROR(comm_->AllToAll(ws.expert_send.data(), ws.send_counts,
                                     ws.expert_recv.data(), ws.recv_counts, DType::kF32));
  // This rank's rows: weighted, summed in slot order, the shared expert added, then the
  // chunks added in order: the floats MoeExperts and ReduceChunks give on one rank.
  auto* own = static_cast<uint8_t*>(ws.expert_gathered.data()) +
              world * per_rank * hidden * act_bytes;
  if (mine > 0) {
    backend_->MoeCombine(static_cast<const uint8_t*>(ws.h.data()) + first_row * hidden * act_bytes,
                         mine, ws.expert_recv.as<float>(), ws.expert_recv_pos.as<int32_t>(),
                         ws.expert_weights.as<float>() + first_row * k,
                         config_.moe.routing.weight_on_input, k, chunks, hidden, shared,
                         config_.mlp_activation, scratch, ws.partials.as<float>());
    backend_->SumChunks(ws.partials.as<float>(), chunks, mine * hidden, own);
  }
  if (mine < per_rank) {  // the last ranks' padding rows travel too: zeros, not stale floats
    backend_->FillZero(own + mine * hidden * act_bytes, (per_rank - mine) * hidden * act_bytes);
  }
  TP_RETURN_IF_ERROR(comm_->AllGather(own, per_rank * hidden, backend_->activation_dtype(),
                                      ws.expert_gathered.data()));
  const int64_t bytes = t * hidden * act_bytes;
  backend_->Copy2D(ws.proj.data(), bytes, ws.expert_gathered.data(), bytes, bytes, 1);
  return absl::OkStatus();
}

void LlamaModel::QueueLocalLogits(int64_t rows, void* out) {
  const int64_t hidden = config_.hidden_size;
  Workspace& ws = *ws_;
  // Only the rows that need logits go through the final norm and the (large) LM head.
  backend_->GatherLogitRows(ws.x.data(), hidden, ws.h.data());
  backend_->RmsNorm(ws.h.data(), weights_.output_norm.as<float>(), rows, hidden,
                    static_cast<float>(config_.rms_norm_eps), ws.h.data());
  backend_->MatMul(ws.h.data(), rows, weights_.LmHead(), out, DType::kF32);
  if (config_.final_logit_softcap > 0) {  // Gemma 2: element-wise, so each rank's own slice
    backend_->SoftCapF32(static_cast<float*>(out), rows * weights_.LmHead().rows,
                         static_cast<float>(config_.final_logit_softcap));
  }
}

absl::Status LlamaModel::LmHead(const StepInputs& step, float* logits) {
  const int64_t rows = static_cast<int64_t>(step.logit_rows.size());
  if (rows == 0) {  // every sequence is a chunk of a longer prompt: nothing to sample
    if (logits == nullptr && plan_.samples()) held_rows_ = 0;
    return plan_.shard().world_size == 1 ? absl::OkStatus() : comm_->AwaitCollectives();
  }
  TP_RETURN_IF_ERROR(QueueLogits(rows));
  return ReceiveLogits(rows, rows, logits);
}

absl::Status LlamaModel::QueueLogits(int64_t rows) {
  Workspace& ws = *ws_;
  if (plan_.shard().world_size == 1) {
    QueueLocalLogits(rows, ws.logits_local.data());
    return absl::OkStatus();
  }
  // Local logits [rows, local_vocab], padded with zeros to [rows, vocab_rows_per_rank] so every
  // rank contributes the same size, then gathered to the sampling rank as
  // [world, rows, vocab_rows_per_rank]: 1/world of an all-gather's bytes, and the other ranks
  // receive nothing they would throw away.
  const int64_t per_rank = plan_.vocab_rows_per_rank(), local = plan_.num_local_vocab_rows();
  const int64_t f32 = sizeof(float);
  const bool sampling = plan_.samples();
  float* scratch = ws.logits_gathered.as<float>();  // [rows, local] before the gather
  if (local > 0) QueueLocalLogits(rows, scratch);
  backend_->FillZero(ws.logits_local.data(), rows * per_rank * f32);
  backend_->Copy2D(ws.logits_local.data(), per_rank * f32, scratch, local * f32, local * f32,
                   rows);
  return comm_->Gather(ws.logits_local.data(), rows * per_rank, DType::kF32,
                       sampling ? ws.logits_gathered.data() : nullptr, kSamplingRank);
}

absl::Status LlamaModel::ReceiveLogits(int64_t rows, int64_t wanted, float* logits) {
  const int64_t vocab = config_.vocab_size, f32 = sizeof(float);
  Workspace& ws = *ws_;
  const int world = plan_.shard().world_size;
  const auto hold = [&] {  // SampleHeld samples them where they are
    held_rows_ = wanted;
    held_layout_rows_ = rows;
    return absl::OkStatus();
  };
  if (world == 1) {
    if (!plan_.samples()) return absl::OkStatus();
    if (logits == nullptr) return hold();
    return backend_->CopyToHost(logits, ws.logits_local.data(), wanted * vocab * f32);
  }
  // The step's one wait for its collectives, on every rank: with NCCL they were only enqueued,
  // and this is where a dead peer or a timeout surfaces (the copy below would hang).
  TP_RETURN_IF_ERROR(comm_->AwaitCollectives());
  if (!plan_.samples()) return absl::OkStatus();
  if (logits == nullptr) return hold();
  const int64_t per_rank = plan_.vocab_rows_per_rank();
  TP_RETURN_IF_ERROR(backend_->CopyToHost(ws.host_gathered.data(), ws.logits_gathered.data(),
                                          world * rows * per_rank * f32));
  for (int64_t r = 0; r < wanted; ++r) {
    for (int rank = 0; rank < world; ++rank) {
      const int64_t begin = rank * per_rank;
      const int64_t count = std::min(vocab, begin + per_rank) - begin;
      if (count <= 0) break;
      std::memcpy(logits + r * vocab + begin,
                  ws.host_gathered.data() + (rank * rows + r) * per_rank, count * f32);
    }
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::SampleHeld(const SamplingRows& rows, absl::Span<RowSample> out) {
  if (!plan_.samples()) {
    return absl::FailedPreconditionError(StrCat(
        "rank ", plan_.shard().rank, " of stage ", plan_.shard().stage,
        " holds no logits: only the sampling rank (", kSamplingRank, " of the last stage) samples"));
  }
  if (held_rows_ < 0) {
    return absl::FailedPreconditionError(
        "no step's logits are held (a Forward with logits = nullptr keeps them)");
  }
  if (static_cast<int64_t>(rows.rows.size()) != held_rows_) {
    return absl::InvalidArgumentError(StrCat("SampleHeld: ", rows.rows.size(),
                                             " rows to sample; the step held ", held_rows_));
  }
  const int64_t layout_rows = held_layout_rows_;
  held_rows_ = -1;  // sampled in place: once
  Workspace& ws = *ws_;
  float* logits = plan_.shard().world_size == 1 ? ws.logits_local.as<float>()
                                                : ws.logits_gathered.as<float>();
  TP_RETURN_IF_ERROR(backend_->SampleRows(logits, config_.vocab_size, plan_.vocab_rows_per_rank(),
                                          layout_rows, rows, out));
  return absl::OkStatus();
}

}  // namespace tpserve
