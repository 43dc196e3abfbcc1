// The Llama forward pass of one tensor-parallel rank over a compute Backend: embedding, the
// decoder layers (RMSNorm, Q/K/V, RoPE, paged GQA attention, O, residual, RMSNorm, gate/up,
// SwiGLU, down, residual), final norm and LM head, for a batch of sequences at once.
//
//   TP_ASSIGN_OR_RETURN(auto model, LlamaModel::Load(cfg, *source, {0, 1}, backend, &comm));
//   TP_RETURN_IF_ERROR(model->Forward(batch, cache.get(), logits.data()));
//
// Tensor parallelism follows the sharding table (model/sharding.h): every rank of a replica
// loads its own slice and all ranks call Forward with the same batch; each layer reduces twice
// (after O and after down), the embedding all-reduces once, and the LM head gathers its vocab
// slices to the sampling rank (kSamplingRank, step/step_batch.h), the one rank that ends with
// the full logits; the others send their slice and receive none. All activations live in
// backend memory (the model never assumes host memory); only the sampling rank's final logits
// are copied to the host. Collectives may be only
// enqueued (NCCL, on the backend's stream): Forward waits for them once, through
// Communicator::AwaitCollectives(), right before that copy, and returns its error. A decode
// step may run as a recording the backend replays (Backend::RunCaptured: CUDA graphs, at any
// degree where the communicator's collectives can be recorded), padded to a batch bucket: the
// layers' collectives and the LM head's gather inside it, that wait and copy after it.
// Threading: Forward is not reentrant; one call at a time per model (and per Backend).
#ifndef TPSERVE_WORKER_LLAMA_MODEL_H_
#define TPSERVE_WORKER_LLAMA_MODEL_H_

#include <cstdint>
#include <array>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/step_budget.h"
#include "checkpoint/quant_scheme.h"
#include "comm/communicator.h"
#include "formats/weight_source.h"
#include "kernels/backend.h"
#include "model/config.h"
#include "worker/kv_cache.h"
#include "model/sharding.h"
#include "model/step_buffers.h"
#include "model/weight_formats.h"
#include "step/executor.h"
#include "step/step_batch.h"
#include "worker/llama_weights.h"

namespace tpserve {

struct MemoryFootprint {
  int64_t weight_bytes_resident = 0;  // weight bytes this rank reads (in place + copies)
  int64_t weight_bytes_copied = 0;    // of which allocated by the model (copies, f32 norms)
  std::array<int64_t, kNumTensorRoles> weight_bytes_by_role{};
  int64_t workspace_bytes = 0;        // step buffers, as allocated
  int64_t attention_bytes = 0;        // the backend's attention workspace (ReserveAttention)
};

// A pipeline stage's links (ShardSpec::stage, num_stages > 1): two-rank groups joining this rank
// to the same tensor-parallel rank of the previous stage (this rank is its rank 1) and of the
// next (its rank 0). A stage's rows go on as a broadcast from rank 0: the send and the receive.
struct PipelineLinks {
  Communicator* from_prev = nullptr;  // null on the first stage
  Communicator* to_next = nullptr;    // null on the last stage
};

struct LlamaLoadOptions {
  int64_t max_tokens_per_step = kCpuMaxTokensPerStep;  // most new tokens in one Forward
  // Most rows of logits one Forward returns (sequences per step, unless some ask for all
  // their tokens' logits); 0 = max_tokens_per_step. Sizes the LM head's buffers.
  int64_t max_logit_rows = 0;
  // The longest sequence (prompt + output) a step attends over: the engine's context window
  // (the memory plan's); 0 = the model's max_context_tokens. Sizes the attention workspace.
  int64_t max_context_tokens = 0;
  // The format each role is held in; unset: as the checkpoint stores it. A preset such as
  // "fp8" or "int4" quantizes on load.
  std::optional<WeightFormats> formats;
  // How the checkpoint stores quantized linears (its quantization_config).
  QuantScheme scheme;
  // How row-parallel layers combine ranks (model/step_buffers.h): one all-reduce in the
  // activation dtype, or --deterministic_tp's same-floats-at-every-degree chunked reduction.
  TpReduction reduction = TpReduction::kAllReduce;
  // kDeterministic's chunk count (--deterministic_tp_chunks; CheckReductionChunks); 0: the
  // default, ReductionChunks'.
  int64_t reduction_chunks = 0;
  // Multi-head latent attention: expand a fresh prefill (a sequence from position 0: keys and
  // values per head from the latent, Backend::PrefillAttention) instead of absorbing it as
  // every other step is. Off by default: which form a position takes would then depend on how
  // the scheduler chunked its prompt and on prefix-cache hits (a continuing chunk absorbs), and
  // the two forms differ in the last bits, so a request's tokens could depend on its batch.
  bool mla_expand_fresh_prefill = false;
  // Decode steps (one new token per sequence) run as recordings the backend replays
  // (Backend::RunCaptured: CUDA graphs), padded to a batch bucket (kernels/step_capture.h),
  // where the backend records, the model allows it (RecordsDecodeSteps) and, at tp > 1, the
  // communicator's collectives can sit inside a recording (Communicator::capturable). false
  // (--enforce_eager): every step runs op by op and nothing is recorded.
  bool record_decode_steps = true;
  // Pipeline stages: the links to the neighbouring stages (they outlive the model).
  PipelineLinks pipeline;
};

// Which forms multi-head latent attention layers ran in, counted over steps: expanded (a fresh
// prefill with LlamaLoadOptions::mla_expand_fresh_prefill: keys and values expanded from the
// latent) or absorbed (W_UK folded into the query, attention over the cached latents: every
// other sequence). A layer of a step holding both kinds of sequence counts once in each.
struct LatentPaths {
  int64_t expanded_layers = 0;
  int64_t absorbed_layers = 0;
};

// The store of a target's last hidden states its multi-token-prediction draft reads
// (LlamaModel::SetHiddenStore): one pool of [hidden] rows in the activation dtype, per token of
// the target's blocks.
KvCacheShape HiddenStoreShape(const ModelSpec& config, int64_t num_blocks,
                              int64_t block_size_tokens, DType activation_dtype);

class LlamaModel {
 public:
  // Errors: the config's or plan's INVALID_ARGUMENT; the loader's (see LoadLlamaWeights);
  // INVALID_ARGUMENT when the communicator's rank/world_size differ from `shard`.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Load(const ModelSpec& config,
                                                          const WeightSource& source,
                                                          ShardSpec shard, Backend* backend,
                                                          Communicator* comm,
                                                          const LlamaLoadOptions& options = {});
  ~LlamaModel();

  // The communicator of this rank's tensor-parallel group (the one Load was given).
  Communicator& communicator() const { return *comm_; }
  // The group re-formed (RankRuntime::Regroup): new links to the neighbouring stages, checked as
  // Load checks them.
  absl::Status SetPipelineLinks(const PipelineLinks& links);

  // Runs one step; on the sampling rank (kSamplingRank) writes logits
  // [batch.num_logit_rows(), vocab_size] (f32, row-major) to `logits`, which the other ranks
  // never touch (nullptr is fine there). INVALID_ARGUMENT naming the sequence and field for a batch whose shape is off
  // (StepBatch::CheckShape), a token id outside
  // [0, vocab_size), too many tokens, a block table that misses positions or names a block
  // outside the cache, or a cache whose shape does not match this rank; a communicator error
  // as returned.
  // On the sampling rank, `logits` == nullptr keeps them where the step made them (backend
  // memory, no copy to the host) for SampleHeld.
  absl::Status Forward(const StepBatch& batch, KvCache* cache, float* logits);

  // Samples the logits the last Forward kept (logits == nullptr on the sampling rank) with
  // Backend::SampleRows, in place, once: `rows` has one entry per logit row of that step.
  // FAILED_PRECONDITION on another rank or when no step's logits are kept; INVALID_ARGUMENT
  // when the row counts differ; SampleRows' errors.
  absl::Status SampleHeld(const SamplingRows& rows, absl::Span<RowSample> out);

  // Multi-token prediction. On the target (no MTP draft itself): every step writes its rows'
  // last hidden states (before the final norm) into `store` at their positions. On an MTP
  // draft (ModelSpec::is_mtp_draft): each step reads them from it, the hidden state at position
  // p - 1 beside the token at p. One store for both, of HiddenStoreShape, with the target's
  // blocks; null: none. INVALID_ARGUMENT for a store of another shape; UNIMPLEMENTED with
  // data-parallel attention.
  // An MTP draft's Forward takes the batch as any draft model's (each sequence's known tokens
  // from start_position on) and predicts, at each token's row, the token after it; a sequence
  // from position 0 loses its first row (there is no hidden state before it).
  absl::Status SetHiddenStore(KvCache* store);

  // Has the backend allocate its attention workspace, once, for this model's steps over a KV
  // cache of `kv_dtype` in blocks of `block_size_tokens` (AttentionReservationFor, which the
  // memory plan counts too). Without it the backend sizes it from the steps it sees.
  // The backend's RESOURCE_EXHAUSTED when the memory is not there.
  absl::Status ReserveAttention(DType kv_dtype, int64_t block_size_tokens);

  // The KV cache shape this rank needs for `num_blocks` blocks of `block_size_tokens` tokens
  // stored as `dtype`.
  KvCacheShape KvShape(int64_t num_blocks, int64_t block_size_tokens, DType dtype) const;

  const ModelSpec& config() const { return config_; }
  const ShardingPlan& plan() const { return plan_; }
  TpReduction reduction() const { return reduction_; }
  const WeightFormats& formats() const { return formats_; }
  int64_t max_tokens_per_step() const { return max_tokens_per_step_; }
  int64_t max_context_tokens() const { return max_context_tokens_; }
  MemoryFootprint footprint() const;
  // How the steps since the last call routed their tokens (empty for a dense model).
  ExpertLoad TakeExpertLoad() { return std::exchange(expert_load_, {}); }
  // The forms multi-head latent attention ran in since the last call (zeros without MLA).
  LatentPaths TakeLatentPaths() { return std::exchange(latent_paths_, {}); }

 private:
  struct Workspace;
  // Every step buffer with the bytes StepBuffersFor plans for it: what Init allocates and
  // what footprint() reports, one list.
  static std::vector<std::pair<DeviceBuffer*, int64_t>> WorkspaceBuffers(
      Workspace& ws, const StepBufferSizes& sizes);

  LlamaModel(const ModelSpec& config, const ShardingPlan& plan, const WeightFormats& formats,
             LlamaWeights weights, RopeLayout rope_layout, Backend* backend, Communicator* comm,
             int64_t max_tokens_per_step, int64_t max_logit_rows, TpReduction reduction);
  absl::Status Init();
  // A step at pipeline stages: the batch in micro-batches (MicroBatches), each through this
  // stage's layers and on to the next stage while this one starts the next; the last stage
  // gathers their rows and runs one LM head over the step.
  absl::Status PipelinedForward(const StepBatch& batch, KvCache* cache, float* logits);
  // `rows` rows of ws.x over a pipeline link: sent on the earlier stage, received on the later.
  absl::Status PipeTransfer(Communicator& link, int64_t rows);

  absl::Status Validate(const StepBatch& batch, const KvCache& cache) const;
  // The padded batch size a decode step is recorded and replayed at (Backend::RunCaptured), or
  // 0 to run it op by op: one new token and one logit row per sequence, a backend that
  // records, a model RecordsDecodeSteps allows, at tp > 1 a capturable communicator, and
  // record_decode_steps on.
  int64_t CaptureBucket(const StepBatch& batch) const;
  // A decode step padded to `bucket` rows as the backend's recording: embedding, layers and the
  // LM head's device work (its gather to the sampling rank included) inside it, watched by
  // the communicator as one collective (Communicator::RunRecorded); the wait for the
  // collectives and the logits' copy to the host after it.
  absl::Status RecordedStep(const StepInputs& step, int64_t bucket, int64_t logit_rows,
                            KvCache* cache, float* logits);
  // The backend's view of the batch (positions, each sequence's rows, the rows that feed the LM
  // head), padded to `bucket` rows when it is larger; valid until the next call.
  StepInputs PrepareStep(const StepBatch& batch, int64_t bucket);
  // Embedding (or the previous stage's rows) and this stage's decoder layers (then on to the
  // next stage).
  absl::Status RunLayers(const StepInputs& step, KvCache* cache);
  // An MTP draft's batch at its own positions: the token at p as the row of MTP position p - 1.
  absl::StatusOr<StepBatch> MtpRows(const StepBatch& batch) const;
  // An MTP draft's input rows in ws.x: eh_proj [enorm(embedding), hnorm(target's hidden)].
  void MtpInput(const StepInputs& step);
  absl::Status Embed(const StepInputs& step);
  // One layer's attention over the rows of `step` (the step's, or with data-parallel attention
  // this rank's sequences' rows, from attention_first_row_ of the step on), its output summed
  // into the residual stream of every row.
  absl::Status AttentionBlock(int64_t layer, const StepInputs& step, KvCache* cache);
  // The attention of the step's rows normed in ws.h into ws.attn ([t, heads * value dim]):
  // grouped-query attention over the paged K and V pools, or multi-head latent attention
  // (ModelSpec::mla): the latent cache, the absorbed form, and the expanded one for the
  // step's fresh prefills (sequences from position 0) where
  // LlamaLoadOptions::mla_expand_fresh_prefill asks.
  absl::Status GroupedQueryAttention(int64_t layer, const StepInputs& step, KvCache* cache);
  absl::Status LatentAttention(int64_t layer, const StepInputs& step, KvCache* cache);
  struct LatentForms {
    bool expanded = false;  // some sequence is a fresh prefill
    bool absorbed = false;  // some sequence continues (every one, unless expand_fresh_prefill_)
  };
  LatentForms FormsOf(const StepInputs& step) const;
  absl::Status FeedForwardBlock(int64_t layer, const StepInputs& step);
  absl::Status LmHead(const StepInputs& step, float* logits);
  // The LM head's device work for the step's first `rows` logit rows: this rank's logits into
  // ws.logits_local (one rank), or padded to vocab_rows_per_rank and gathered to the sampling
  // rank into ws.logits_gathered as [world, rows, vocab_rows_per_rank].
  absl::Status QueueLogits(int64_t rows);
  // After QueueLogits(rows): the step's one wait for its collectives (world > 1), then on the
  // sampling rank the first `wanted` rows' logits copied to `logits` (f32 [wanted, vocab]), or
  // kept for SampleHeld when `logits` is null.
  absl::Status ReceiveLogits(int64_t rows, int64_t wanted, float* logits);
  // Final norm of the logit rows and this rank's LM head rows into `out` (f32 [rows, local]).
  void QueueLocalLogits(int64_t rows, void* out);
  // ws.proj[t, hidden] = x[t, w.cols] * w^T summed over every rank: one all-reduce, or (with
  // TpReduction::kDeterministic) in a fixed chunk order, the same floats at every degree; the
  // dense MLP's down (`dense_down`) in its units where down_chunks_ says so.
  absl::Status RowParallel(const void* x, int64_t t, const WeightMatrix& w,
                           bool dense_down = false);
  // The attention's output projection of `t` rows of x into ws.proj: RowParallel, or with
  // data-parallel attention this rank's whole o (one rank's floats: its chunk sums in order)
  // into rows [attention_first_row_, + t) of ws.proj, zeros in the others' rows, summed over
  // the ranks into every row of the step.
  absl::Status AttentionOutput(const void* x, int64_t t, const WeightMatrix& w);
  // A MoE layer's feed-forward of the normed rows in ws.h: route, run the experts (each
  // split across the ranks as a dense MLP is), and reduce into ws.proj as RowParallel does.
  absl::Status ExpertsBlock(int64_t layer, int64_t t);
  // ExpertsBlock's second half with expert parallelism: each rank runs its own experts' slots
  // for every row, an all-to-all brings each slot's output to the rank that combines its row,
  // and the combined rows are gathered into ws.proj on every rank (the same floats as one
  // rank's MoeExperts and chunk sums, at every degree).
  absl::Status ExpertParallelBlock(const LlamaLayerWeights& w, const Backend::ExpertMlp* shared,
                                   int64_t t);
  // ws.partials (this rank's local chunks, f32 [local, t, hidden]) summed over every rank's
  // chunks in chunk order into ws.proj (activation dtype).
  absl::Status ReduceChunks(int64_t t, int64_t local_chunks);

  ModelSpec config_;
  ShardingPlan plan_;
  WeightFormats formats_;
  LlamaWeights weights_;
  RopeLayout rope_layout_;
  Backend* backend_;
  Communicator* comm_;
  PipelineLinks pipeline_;  // LlamaLoadOptions'
  int64_t max_tokens_per_step_;
  int64_t max_logit_rows_;
  ExpertLoad expert_load_;  // since the last TakeExpertLoad
  LatentPaths latent_paths_;  // since the last TakeLatentPaths
  bool expand_fresh_prefill_ = false;  // LlamaLoadOptions::mla_expand_fresh_prefill
  int64_t max_context_tokens_ = 0;  // LlamaLoadOptions', 0 resolved to the model's
  TpReduction reduction_;
  int64_t requested_chunks_ = 0;  // LlamaLoadOptions::reduction_chunks
  int64_t reduction_chunks_ = 1;
  DownChunks down_chunks_;  // the dense MLP's down under --deterministic_tp
  // The KV pools the backend's recordings of this model's steps write (RunCaptured bakes
  // addresses): another cache makes the model drop them first.
  const void* captured_pool_ = nullptr;
  int64_t captured_pool_bytes_ = 0;
  // The logits the last Forward kept on the backend for SampleHeld: its `held_rows_` logit
  // rows (-1: none) in a layout of `held_layout_rows_` rows (the bucket a recorded step ran).
  int64_t held_rows_ = -1;
  int64_t held_layout_rows_ = 0;
  bool record_decode_steps_ = true;  // LlamaLoadOptions'
  StepBufferSizes sizes_;
  int64_t attention_bytes_ = 0;  // ReserveAttention's
  // The RoPE tables (f32 [head_dim / 2] each) and which one each layer uses.
  std::vector<float> InverseFrequencies(const LayerSpec& layer) const;
  std::vector<DeviceBuffer> inv_freq_;
  std::vector<int> layer_table_;
  std::vector<Backend::AttentionParams> layer_attention_;  // per layer, from the description
  // f32 [head_dim] of ones: the weights of a weightless QK-norm (Llama 4's L2 norm); empty when
  // no layer has one.
  DeviceBuffer unit_norm_;
  std::unique_ptr<Workspace> ws_;
  // PrepareStep's storage, reused step after step (host memory the backend reads).
  std::vector<int32_t> padded_token_ids_;
  std::vector<int32_t> positions_;
  std::vector<AttentionSequence> seqs_;
  std::vector<int32_t> logit_rows_;
  // Data-parallel attention: this rank's sequences as a step of their own (rows from 0), where
  // they start in the step, and its storage.
  StepInputs attention_step_;
  int64_t attention_first_row_ = 0;
  int64_t step_rows_ = 0;  // rows of the step (padding included)
  KvCache* hidden_store_ = nullptr;  // SetHiddenStore's
  std::vector<int32_t> own_token_ids_;
  std::vector<int32_t> own_positions_;
  std::vector<AttentionSequence> own_seqs_;
};

}  // namespace tpserve

#endif  // TPSERVE_WORKER_LLAMA_MODEL_H_
