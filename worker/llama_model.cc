#include "worker/llama_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "kernels/rope_table.h"

namespace tpserve {

// Activation buffers, sized once for max_step_tokens (T) by WorkspaceSizes.
struct LlamaModel::Workspace {
  std::vector<float> x;             // [T, hidden] residual stream
  std::vector<float> h;             // [T, hidden] normed input of a block
  std::vector<float> proj;          // [T, hidden] O / down output, summed over ranks
  std::vector<float> q;             // [T, local_heads * head_dim]
  std::vector<float> k;             // [T, local_kv_heads * head_dim]
  std::vector<float> v;             // [T, local_kv_heads * head_dim]
  std::vector<float> attn;          // [T, local_heads * head_dim]
  std::vector<float> gate;          // [T, local_ffn]
  std::vector<float> up;            // [T, local_ffn]
  std::vector<float> partials;      // [chunks, T, hidden]: this rank's O / down chunk sums
  std::vector<float> all_partials;  // [all chunks, T, hidden] gathered (world > 1 only)
  std::vector<float> local_logits;  // [T, vocab_rows_per_rank]
  std::vector<float> gathered;      // [world, T, vocab_rows_per_rank] (world > 1 only)
};

// What Forward derives from a StepBatch once and every layer reuses.
struct LlamaModel::StepPlan {
  int64_t num_tokens = 0;
  std::vector<int32_t> token_ids;       // [T]
  std::vector<int32_t> positions;       // [T]
  std::vector<AttentionSequence> seqs;  // one per sequence, rows in batch order
  std::vector<int64_t> logit_rows;      // rows of x that feed the LM head
};

namespace {

struct WorkspaceSizes {
  int64_t hidden, q, kv, ffn, partials, all_partials, local_logits, gathered;
  int64_t TotalFloats() const {
    return 3 * hidden + 2 * q + 2 * kv + 2 * ffn + partials + all_partials + local_logits +
           gathered;
  }
};

// Row-parallel layers (O, down) reduce over their input dimension. To give the same floats at
// every tensor-parallel degree, that reduction is always cut into the same chunks - one per KV
// head group, whatever the degree - each chunk summed on its own, and the chunk sums added in
// chunk order on every rank (after an all-gather when the chunks live on several ranks). A plain
// all-reduce of per-rank partial sums would associate the additions differently per degree,
// and the next layer's 8-bit activation rounding amplifies those last-bit differences to ~2% of
// the logits over 30 layers. Falls back to one chunk per rank when a chunk would split a
// quantization block (32 values).
int64_t ReductionChunks(const LlamaConfig& c, const ShardingPlan& p) {
  const int64_t g = c.num_kv_heads;
  const bool aligned = (c.num_heads / g * c.head_dim) % 32 == 0 && (c.intermediate_size / g) % 32 == 0 &&
                       c.intermediate_size % g == 0;
  return aligned ? g : p.shard().world_size;
}

// The one place buffer sizes are computed: used for allocation and for the memory report.
WorkspaceSizes SizesFor(const LlamaConfig& c, const ShardingPlan& p, int64_t tokens,
                        int64_t logit_rows) {
  WorkspaceSizes s;
  s.hidden = tokens * c.hidden_size;
  s.q = tokens * p.num_local_heads() * c.head_dim;
  s.kv = tokens * p.num_local_kv_heads() * c.head_dim;
  s.ffn = tokens * p.local_intermediate_size();
  const int64_t world = p.shard().world_size;
  const int64_t chunks = ReductionChunks(c, p), local_chunks = chunks / world;
  s.partials = tokens * c.hidden_size * local_chunks;
  s.all_partials = world > 1 ? tokens * c.hidden_size * chunks : 0;
  s.local_logits = logit_rows * p.vocab_rows_per_rank();
  s.gathered = world > 1 ? world * logit_rows * p.vocab_rows_per_rank() : 0;
  return s;
}

}  // namespace

int64_t NumLogitRows(const StepBatch& batch) {
  int64_t rows = 0;
  for (const SequenceStep& s : batch.sequences) {
    rows += s.all_logits ? static_cast<int64_t>(s.token_ids.size()) : 1;
  }
  return rows;
}

int64_t LlamaModel::WorkspaceBytes(const LlamaConfig& config, const ShardingPlan& plan,
                                   int64_t max_step_tokens, int64_t max_logit_rows) {
  return SizesFor(config, plan, max_step_tokens, max_logit_rows).TotalFloats() *
         static_cast<int64_t>(sizeof(float));
}

LlamaModel::LlamaModel(const LlamaConfig& config, const ShardingPlan& plan, LlamaWeights weights,
                       RopeLayout rope_layout, Backend* backend, Communicator* comm,
                       int64_t max_step_tokens, int64_t max_logit_rows)
    : config_(config),
      plan_(plan),
      weights_(std::move(weights)),
      rope_layout_(rope_layout),
      backend_(backend),
      comm_(comm),
      max_step_tokens_(max_step_tokens),
      max_logit_rows_(max_logit_rows),
      ws_(std::make_unique<Workspace>()) {
  const WorkspaceSizes s = SizesFor(config_, plan_, max_step_tokens_, max_logit_rows_);
  for (std::vector<float>* b : {&ws_->x, &ws_->h, &ws_->proj}) b->resize(s.hidden);
  ws_->q.resize(s.q);
  ws_->attn.resize(s.q);
  ws_->k.resize(s.kv);
  ws_->v.resize(s.kv);
  ws_->gate.resize(s.ffn);
  ws_->up.resize(s.ffn);
  ws_->partials.resize(s.partials);
  ws_->all_partials.resize(s.all_partials);
  ws_->local_logits.resize(s.local_logits);
  ws_->gathered.resize(s.gathered);

  // A GGUF rope_freqs tensor already encodes Llama 3.1 scaling (llama.cpp divides by it).
  std::optional<Llama3RopeScaling> scaling;
  if (config_.rope_scaling.enabled && weights_.rope_freq_factors.empty()) {
    const RopeScaling& r = config_.rope_scaling;
    scaling = Llama3RopeScaling{r.factor, r.low_freq_factor, r.high_freq_factor,
                                static_cast<double>(r.original_max_position_embeddings)};
  }
  inv_freq_ = RopeInverseFrequencies(config_.head_dim, config_.rope_theta, scaling);
  for (size_t i = 0; i < weights_.rope_freq_factors.size(); ++i) {
    inv_freq_[i] /= weights_.rope_freq_factors[i];
  }
}

LlamaModel::~LlamaModel() = default;

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(const LlamaConfig& config,
                                                             const WeightSource& source,
                                                             ShardSpec shard, Backend* backend,
                                                             Communicator* comm,
                                                             const LlamaLoadOptions& options) {
  TP_RETURN_IF_ERROR(config.Validate());
  TP_ASSIGN_OR_RETURN(ShardingPlan plan, ShardingPlan::Create(config, shard));
  if (comm->rank() != shard.rank || comm->world_size() != shard.world_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "communicator is rank %d of %d but the shard spec says rank %d of %d", comm->rank(),
        comm->world_size(), shard.rank, shard.world_size));
  }
  if (options.max_step_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_step_tokens = %d must be >= 1", options.max_step_tokens));
  }
  const int64_t max_logit_rows =
      options.max_logit_rows > 0 ? options.max_logit_rows : options.max_step_tokens;
  TP_ASSIGN_OR_RETURN(LlamaWeights weights, LoadLlamaWeights(config, source, plan, *backend));
  // GGUF converters permute Q/K rows so that neighbours pair up; HF checkpoints rotate halves.
  const RopeLayout layout = source.format() == CheckpointFormat::kGguf
                                ? RopeLayout::kInterleaved
                                : RopeLayout::kRotateHalf;
  return std::unique_ptr<LlamaModel>(new LlamaModel(config, plan, std::move(weights), layout,
                                                    backend, comm, options.max_step_tokens,
                                                    max_logit_rows));
}

KvCacheShape LlamaModel::KvShape(int64_t num_blocks, int64_t block_size_tokens) const {
  return KvCacheShape{config_.num_layers, num_blocks, block_size_tokens,
                      plan_.num_local_kv_heads(), config_.head_dim};
}

MemoryFootprint LlamaModel::footprint() const {
  return MemoryFootprint{weights_.bytes_viewed + weights_.bytes_copied, weights_.bytes_copied,
                         WorkspaceBytes(config_, plan_, max_step_tokens_, max_logit_rows_)};
}

absl::Status LlamaModel::Validate(const StepBatch& batch, const KvCache& cache) const {
  const KvCacheShape& kv = cache.shape();
  if (kv.num_layers != config_.num_layers || kv.num_kv_heads != plan_.num_local_kv_heads() ||
      kv.head_dim != config_.head_dim) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "KV cache shape (layers %d, kv heads %d, head_dim %d) does not match this rank "
        "(layers %d, kv heads %d, head_dim %d)", kv.num_layers, kv.num_kv_heads, kv.head_dim,
        config_.num_layers, plan_.num_local_kv_heads(), config_.head_dim));
  }
  if (batch.sequences.empty()) return absl::InvalidArgumentError("step batch has no sequences");
  int64_t total = 0;
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const SequenceStep& s = batch.sequences[i];
    const int64_t n = static_cast<int64_t>(s.token_ids.size());
    if (n == 0) return absl::InvalidArgumentError(absl::StrFormat("sequence %d: no tokens", i));
    total += n;
    if (s.start_position < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("sequence %d: start_position = %d is negative", i, s.start_position));
    }
    const int64_t end = s.start_position + n;
    if (config_.max_context_tokens > 0 && end > config_.max_context_tokens) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sequence %d: positions up to %d exceed max_context_tokens = %d", i, end,
          config_.max_context_tokens));
    }
    for (int32_t id : s.token_ids) {
      if (id < 0 || id >= config_.vocab_size) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "sequence %d: token id %d is outside [0, %d)", i, id, config_.vocab_size));
      }
    }
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
  if (total > max_step_tokens_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "step has %d tokens, more than max_step_tokens = %d", total, max_step_tokens_));
  }
  if (NumLogitRows(batch) > max_logit_rows_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "step asks for %d rows of logits, more than max_logit_rows = %d", NumLogitRows(batch),
        max_logit_rows_));
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::Forward(const StepBatch& batch, KvCache* cache, float* logits) {
  TP_RETURN_IF_ERROR(Validate(batch, *cache));
  StepPlan step;
  for (const SequenceStep& s : batch.sequences) {
    const int64_t n = static_cast<int64_t>(s.token_ids.size());
    step.seqs.push_back(AttentionSequence{step.num_tokens, n, s.start_position, s.block_table});
    for (int64_t i = 0; i < n; ++i) {
      step.token_ids.push_back(s.token_ids[i]);
      step.positions.push_back(static_cast<int32_t>(s.start_position + i));
      if (s.all_logits || i == n - 1) step.logit_rows.push_back(step.num_tokens + i);
    }
    step.num_tokens += n;
  }
  TP_RETURN_IF_ERROR(Embed(step));
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    TP_RETURN_IF_ERROR(AttentionBlock(l, step, cache));
    TP_RETURN_IF_ERROR(FeedForwardBlock(l, step));
  }
  TP_RETURN_IF_ERROR(LmHead(step, logits));
  return backend_->Synchronize();
}

absl::Status LlamaModel::Embed(const StepPlan& step) {
  const int64_t t = step.num_tokens;
  backend_->EmbeddingRows(weights_.embedding.matrix, plan_.first_vocab_row(),
                          step.token_ids.data(), t, ws_->x.data());
  // Rows of other ranks' vocab came out zero; the sum restores every row everywhere.
  if (plan_.shard().world_size == 1) return absl::OkStatus();
  return comm_->AllReduceSum(absl::MakeSpan(ws_->x.data(), t * config_.hidden_size));
}

absl::Status LlamaModel::AttentionBlock(int64_t layer, const StepPlan& step, KvCache* cache) {
  const LlamaLayerWeights& w = weights_.layers[layer];
  const int64_t t = step.num_tokens, hidden = config_.hidden_size, hd = config_.head_dim;
  const int64_t heads = plan_.num_local_heads(), kv_heads = plan_.num_local_kv_heads();
  Workspace& ws = *ws_;
  backend_->RmsNorm(ws.x.data(), w.attn_norm.data(), t, hidden,
                    static_cast<float>(config_.rms_norm_eps), ws.h.data());
  backend_->MatMul(ws.h.data(), t, w.q.matrix, ws.q.data());   // [t, heads * hd]
  backend_->MatMul(ws.h.data(), t, w.k.matrix, ws.k.data());   // [t, kv_heads * hd]
  backend_->MatMul(ws.h.data(), t, w.v.matrix, ws.v.data());   // [t, kv_heads * hd]
  backend_->Rope(ws.q.data(), t, heads, hd, step.positions.data(), inv_freq_.data(), rope_layout_);
  backend_->Rope(ws.k.data(), t, kv_heads, hd, step.positions.data(), inv_freq_.data(),
                 rope_layout_);
  const KvPoolView pool = cache->layer(layer);
  backend_->WriteKv(ws.k.data(), ws.v.data(), step.seqs, pool);
  backend_->PagedAttention(ws.q.data(), heads, 1.0f / std::sqrt(static_cast<float>(hd)),
                           step.seqs, pool, ws.attn.data());
  TP_RETURN_IF_ERROR(RowParallel(ws.attn.data(), t, w.o.matrix));  // -> ws.proj
  backend_->Add(ws.x.data(), ws.proj.data(), t * hidden, ws.x.data());
  return absl::OkStatus();
}

absl::Status LlamaModel::FeedForwardBlock(int64_t layer, const StepPlan& step) {
  const LlamaLayerWeights& w = weights_.layers[layer];
  const int64_t t = step.num_tokens, hidden = config_.hidden_size;
  const int64_t ffn = plan_.local_intermediate_size();
  Workspace& ws = *ws_;
  backend_->RmsNorm(ws.x.data(), w.ffn_norm.data(), t, hidden,
                    static_cast<float>(config_.rms_norm_eps), ws.h.data());
  backend_->MatMul(ws.h.data(), t, w.gate.matrix, ws.gate.data());  // [t, ffn]
  backend_->MatMul(ws.h.data(), t, w.up.matrix, ws.up.data());      // [t, ffn]
  backend_->SiluMul(ws.gate.data(), ws.up.data(), t * ffn, ws.gate.data());
  TP_RETURN_IF_ERROR(RowParallel(ws.gate.data(), t, w.down.matrix));  // -> ws.proj
  backend_->Add(ws.x.data(), ws.proj.data(), t * hidden, ws.x.data());
  return absl::OkStatus();
}

absl::Status LlamaModel::RowParallel(const float* x, int64_t t, const WeightMatrix& w) {
  Workspace& ws = *ws_;
  const int world = plan_.shard().world_size;
  const int64_t chunks = ReductionChunks(config_, plan_), local_chunks = chunks / world;
  const int64_t n = w.rows;  // hidden
  if (chunks == 1) {  // one rank, one chunk: nothing to put in order
    backend_->MatMul(x, t, w, ws.proj.data());
    return absl::OkStatus();
  }
  // This rank's chunk sums: [local_chunks, t, n], each exactly what that chunk alone gives.
  backend_->MatMulChunked(x, t, w, local_chunks, ws.partials.data());
  const float* all = ws.partials.data();
  if (world > 1) {  // rank order is chunk order
    TP_RETURN_IF_ERROR(comm_->AllGather(
        absl::MakeConstSpan(ws.partials.data(), local_chunks * t * n),
        absl::MakeSpan(ws.all_partials.data(), chunks * t * n)));
    all = ws.all_partials.data();
  }
  // Sum the chunks in order: ((c0 + c1) + c2) + ... on every rank and at every degree.
  std::memcpy(ws.proj.data(), all, t * n * sizeof(float));
  for (int64_t c = 1; c < chunks; ++c) {
    backend_->Add(ws.proj.data(), all + c * t * n, t * n, ws.proj.data());
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::LmHead(const StepPlan& step, float* logits) {
  const int64_t rows = static_cast<int64_t>(step.logit_rows.size());
  const int64_t hidden = config_.hidden_size, vocab = config_.vocab_size;
  Workspace& ws = *ws_;
  // Only the rows that need logits go through the final norm and the (large) LM head.
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(ws.h.data() + r * hidden, ws.x.data() + step.logit_rows[r] * hidden,
                hidden * sizeof(float));
  }
  backend_->RmsNorm(ws.h.data(), weights_.output_norm.data(), rows, hidden,
                    static_cast<float>(config_.rms_norm_eps), ws.h.data());
  const int world = plan_.shard().world_size;
  if (world == 1) {
    backend_->MatMul(ws.h.data(), rows, weights_.LmHead(), logits);
    return absl::OkStatus();
  }
  // Local logits [rows, local_vocab] padded to [rows, vocab_rows_per_rank] so every rank
  // contributes the same size, then gathered as [world, rows, vocab_rows_per_rank].
  const int64_t per_rank = plan_.vocab_rows_per_rank(), local = plan_.num_local_vocab_rows();
  backend_->MatMul(ws.h.data(), rows, weights_.LmHead(), ws.gathered.data());
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = ws.local_logits.data() + r * per_rank;
    std::memcpy(dst, ws.gathered.data() + r * local, local * sizeof(float));
    std::fill(dst + local, dst + per_rank, 0.0f);
  }
  TP_RETURN_IF_ERROR(comm_->AllGather(
      absl::MakeConstSpan(ws.local_logits.data(), rows * per_rank),
      absl::MakeSpan(ws.gathered.data(), world * rows * per_rank)));
  for (int64_t r = 0; r < rows; ++r) {
    for (int rank = 0; rank < world; ++rank) {
      const int64_t begin = rank * per_rank;
      const int64_t count = std::min(vocab, begin + per_rank) - begin;
      if (count <= 0) break;
      std::memcpy(logits + r * vocab + begin,
                  ws.gathered.data() + (rank * rows + r) * per_rank, count * sizeof(float));
    }
  }
  return absl::OkStatus();
}

}  // namespace tpserve
