// The bytes of every buffer one rank allocates for a step, computed in one place: the model
// allocates exactly these (worker/llama_model.cc) and the memory plan counts exactly these
// (planner/memory_plan.cc), so the plan cannot drift from the engine.
//
//   const StepBufferSizes s = StepBuffersFor(config, plan, 512, 8, /*activation_bytes=*/4);
//   s.Total();  // bytes of the workspace
//
// Per rank (T = max step tokens, S = max logit rows, a = activation bytes, W = world size,
// C = reduction chunks, Vr = vocab rows per rank):
//   residual, normed, proj   T * hidden * a           each
//   q                        T * local_heads * hd * a
//   attn                     T * local_heads * vd * a  (vd: a value head's width, hd but MLA)
//   k, v                     T * local_kv_heads * hd * a (MLA: the expanded keys and values)
//   mla_*                    MLA's (StepBufferSizes says)
//   gate, up                 T * local_ffn * a        each (where a layer has a dense MLP)
//   partials                 C / W * T * hidden * 4   row-parallel chunk sums (f32; C > 1, or
//                                                     a MoE layer's experts at any C); down's
//                                                     DenseDownChunks::per_rank where more
//   all_partials             C * T * hidden * 4       gathered chunks (W > 1, C > 1); down's
//                                                     per_rank * W where more
//   logits_local             S * Vr * 4               this rank's LM head rows (f32)
//   logits_gathered          W * S * Vr * 4           all ranks' (W > 1)
//   router_logits            T * E * 4                a MoE layer's router output (f32)
//   expert_ids, expert_weights  T * k * 4 each        each token's chosen experts (int32, f32)
//   expert_rows              T * k * hidden * a       the slots' inputs grouped by expert
//   expert_gate, expert_up   T * k * local_eff * a    each (or T * the shared expert's local
//                                                     width, when larger)
//   expert_down              max(1, C / W) * T * k * hidden * 4   the slots' down outputs
// Thread-safe: pure functions.
#ifndef TPSERVE_MODEL_STEP_BUFFERS_H_
#define TPSERVE_MODEL_STEP_BUFFERS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "formats/dtype.h"
#include "kernels/backend.h"
#include "model/config.h"
#include "model/sharding.h"
#include "model/weight_formats.h"

namespace tpserve {

struct StepBufferSizes {
  int64_t residual = 0;
  int64_t normed = 0;
  int64_t proj = 0;
  int64_t q = 0;
  int64_t k = 0;
  int64_t v = 0;
  int64_t attn = 0;
  int64_t gate = 0;
  int64_t up = 0;
  int64_t partials = 0;
  int64_t all_partials = 0;
  int64_t logits_local = 0;
  int64_t logits_gathered = 0;
  int64_t router_logits = 0;
  int64_t expert_ids = 0;
  int64_t expert_weights = 0;
  int64_t expert_rows = 0;
  int64_t expert_gate = 0;
  int64_t expert_up = 0;
  int64_t expert_down = 0;
  // Expert parallelism (world > 1) only: where each slot's output goes in the all-to-all's
  // send buffer and comes from in its receive buffer (int32), the two buffers (f32 [slots,
  // chunks, hidden]: at most every slot of the step is this rank's to run, and a rank combines
  // ceil(T / world) rows), and the combined rows gathered back ([world + 1, ceil(T / world),
  // hidden] in the activation dtype: every rank's, then this rank's own).
  int64_t expert_send_pos = 0;
  int64_t expert_recv_pos = 0;
  int64_t expert_send = 0;
  int64_t expert_recv = 0;
  int64_t expert_gathered = 0;
  // Multi-head latent attention only (ModelSpec::mla; H local heads, L = kv_lora_rank,
  // R = qk_rope_head_dim): the query latent [T, q_lora]; each row's cache entry [T, L + R]
  // (kv_a's output, normed and rotated in place); the normed latent [T, L]; the absorbed
  // queries and the attention's latent outputs [T, H, L + R] each; one head's input and output
  // of its per-head matrices [T, max(nope, L)] and [T, max(L, v)]; and a fresh prefill's
  // expansion [T, H * (nope + v)] (k and v above then hold the expanded keys [T, H, nope + R]
  // and values [T, H, v]).
  int64_t mla_q_latent = 0;
  int64_t mla_entry = 0;
  int64_t mla_latent = 0;
  int64_t mla_q_absorbed = 0;
  int64_t mla_attn_latent = 0;
  int64_t mla_head_in = 0;
  int64_t mla_head_out = 0;
  int64_t mla_expanded = 0;
  // A multi-token-prediction draft's input: [T, 2 * hidden], its two normed halves.
  int64_t mtp_concat = 0;
  // The last pipeline stage's step rows [T, hidden], kept micro-batch by micro-batch for one
  // LM head over the step (worker/llama_model.h's PipelinedForward); 0 without stages.
  int64_t pipeline_rows = 0;

  int64_t Total() const;
};

// How row-parallel layers (o, down) combine the ranks' partial sums.
enum class TpReduction {
  // One all-reduce of the layer output in the activation dtype (two per layer): the fewest
  // bytes, as every serving engine does. The floats depend on the degree (summation order).
  kAllReduce,
  // --deterministic_tp: the input dimension is cut into the same chunks at every degree, one
  // per KV-head group; each rank computes its chunks' f32 sums, all ranks all-gather them and
  // add them in chunk order, so every degree gives the same floats (docs/ARCHITECTURE.md).
  // Each collective moves C * T * hidden * 4 bytes: C / (a / 4) times an all-reduce's.
  kDeterministic,
};

// The chunks a row-parallel layer's input dimension is cut into: 1 for kAllReduce; for
// kDeterministic `chunks` where asked (--deterministic_tp_chunks, CheckReductionChunks), else
// one per KV-head group, per rank past the KV-head count, or per rank when a group would split
// a quantization block. Runs with the same count give the same floats at every degree that
// divides it: by default every degree up to num_kv_heads; a degree past them matches the
// others when all run with its count.
int64_t ReductionChunks(const ModelSpec& config, const ShardingPlan& plan,
                        const WeightFormats& formats, TpReduction mode, int64_t chunks = 0);
// OK for chunks = 0 (the default count) or a count that world_size divides and that cuts
// num_heads and every row-parallel input width into whole quantization blocks; otherwise
// INVALID_ARGUMENT naming deterministic_tp_chunks and the bounds.
absl::Status CheckReductionChunks(const ModelSpec& config, const WeightFormats& formats,
                                  int64_t world_size, int64_t chunks);

// How --deterministic_tp cuts the dense MLP's down projection when the reduction has `chunks`
// chunks: into those `chunks` equal chunks where each is whole blocks
// (ShardingPlan::reduction_block()), as every other row-parallel input; otherwise (an MLP
// split unevenly: SmolLM2's 1,536 at 9 chunks) into its units (ShardingPlan::ffn_unit()), in
// order, whatever the degree. Each rank then multiplies its own units (5 or 6 of SmolLM2's 48 at
// TP 9), its last chunks zero up to per_rank so that every rank sends as many to the gather,
// and the ordered sum meets the units in TP 1's order with zeros between: the same floats,
// except that a sum of exactly zero may be +0.0 where TP 1's is -0.0.
struct DownChunks {
  int64_t own = 1;       // this rank's chunks
  int64_t per_rank = 1;  // chunks each rank sends (its own, then zeros up to the most a rank has)
  bool units = false;    // in ffn_unit() chunks rather than the reduction's
};
DownChunks DenseDownChunks(const ModelSpec& config, const ShardingPlan& plan, int64_t chunks);

StepBufferSizes StepBuffersFor(const ModelSpec& config, const ShardingPlan& plan,
                               int64_t max_tokens_per_step, int64_t max_logit_rows,
                               int64_t activation_bytes, int64_t reduction_chunks);

// What one rank's attention is reserved for (Backend::ReserveAttention, at load) and what the
// memory plan counts for it: this rank's heads, steps of at most `max_tokens_per_step` rows and
// `max_sequences` sequences (the LM head's logit rows), keys up to the engine's context window.
Backend::AttentionReservation AttentionReservationFor(const ModelSpec& config,
                                                      const ShardingPlan& plan,
                                                      int64_t max_tokens_per_step,
                                                      int64_t max_sequences,
                                                      int64_t max_context_tokens, DType kv_dtype,
                                                      int64_t block_size_tokens);

// Whether a rank of this model records its decode steps (Backend::RunCaptured: CUDA graphs)
// where the backend and communicator can: not a mixture of experts (its layers wait on the
// host for the experts' row counts), not multi-head latent attention (the CUDA backend plans it
// per step and falls back to eager), not a multi-token-prediction draft (its input is copied
// row by row on the host's schedule), not with data-parallel attention (whose attention begins
// a step of its own inside). LlamaModel asks it, and the memory plan counts the recordings
// (kernels/step_capture.h) of the models it allows.
bool RecordsDecodeSteps(const ModelSpec& config, bool attention_dp);

// KV cache bytes per token on one rank: `num_layers` layers of `entry` (KvEntryOf: K and V
// of the rank's KV heads, or MLA's one latent) in `kv_dtype`.
int64_t KvBytesPerToken(int64_t num_layers, const KvEntry& entry, DType kv_dtype);

}  // namespace tpserve

#endif  // TPSERVE_MODEL_STEP_BUFFERS_H_
