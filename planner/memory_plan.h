// The product's memory plan: for a model, formats, parallelism and device, every byte each
// rank holds (weights by role, step buffers, communicator buffers, reserves) and, from what is
// left, how many KV-cache blocks it can hold. The engine sizes its KV pool and its step
// buffers from this plan and refuses configurations whose plan does not fit. Every size here
// comes from the function the engine allocates with (named below), never from a second
// formula, so allocation and planning cannot drift apart.
//
//   TP_ASSIGN_OR_RETURN(MemoryPlan plan, PlanMemory(inputs));
//   BlockManager blocks(plan.num_kv_blocks, plan.inputs.kv_block_size_tokens);
//
// Weights per rank: the sharding table's bytes of each role as the rank's backend holds them
// (on a GPU the CUDA backend's own form included: PlanSharding with WeightDeviceOf(device)).
// Per rank of stage s, the step buffers are exactly what the engine allocates (one function,
// StepBuffersFor in model/step_buffers.h: residual, normed, proj, q, k, v, attn, gate, up, the
// row-parallel chunk sums, the logits), plus the attention workspace: on a GPU exactly what the
// CUDA backend reserves at load (AttentionReservationFor + kernels/cuda/attention_workspace.h:
// FlashInfer's split-key partials and work lists, or the SIMT kernels' split scratch); on the
// CPU host the f32 scores bound q_heads_local * T * C * 4 that its kernels' per-thread score
// rows stay within. KV per token: KvBytesPerToken (the KV cache's own).
// Thread-safe: value types and pure functions.
#ifndef TPSERVE_PLANNER_MEMORY_PLAN_H_
#define TPSERVE_PLANNER_MEMORY_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/step_budget.h"
#include "model/config.h"
#include "planner/gpu_spec.h"
#include "model/sharding.h"
#include "model/step_buffers.h"
#include "planner/sharding_table.h"
#include "formats/tensor_format.h"
#include "model/weight_formats.h"

namespace tpserve {

// Speculative decoding's draft model (coordinator/speculative/draft_model.h): it runs on the
// same ranks at the same tensor-parallel degree, so each rank holds its slice of the draft's
// weights, the draft's step buffers, and in every KV block of the pool the draft's KV for the
// block's tokens beside the target's. So a draft costs its weights and buffers once and a
// share of every block: the pool gets fewer blocks. A multi-token-prediction draft (its
// model is_mtp_draft) adds to its KV the target's last hidden state per token, which it reads.
struct DraftPlanInputs {
  ModelSpec model;
  WeightFormats weights;
  int64_t max_sequences_per_step = 1;  // rows of logits of a draft step (one per sequence)
};

struct PlanInputs {
  ModelSpec model;
  WeightFormats weights;
  FormatKind kv_cache_dtype = FormatKind::kBF16;    // f32, f16, bf16 or fp8-e4m3
  FormatKind activation_dtype = FormatKind::kBF16;  // f32 on the CPU host
  int tp = 1;                                       // tensor-parallel degree
  int pp = 1;                                       // pipeline stages
  GpuSpec device;
  int64_t max_context_tokens = 0;           // per sequence, prompt + output; <= the model's
  int64_t max_tokens_per_step = kGpuMaxTokensPerStep;  // chunked-prefill budget of one step
  int64_t max_sequences_per_step = 256;     // rows of logits; <= max_tokens_per_step
  int64_t target_concurrent_sequences = 1;  // each at max_context_tokens
  int64_t kv_block_size_tokens = 16;
  // Row-parallel reduction (model/step_buffers.h): false = one all-reduce per layer in the
  // activation dtype; true = the chunked all-gather of --deterministic_tp.
  bool deterministic_tp = false;
  // Its chunk count (--deterministic_tp_chunks, model/step_buffers.h's CheckReductionChunks);
  // 0: the engine's default.
  int64_t deterministic_tp_chunks = 0;
  // Mixture-of-experts layers with whole experts per rank (model/sharding.h): each rank holds
  // num_experts / tp experts whole and the shared expert whole; false: each expert split.
  bool expert_parallel = false;
  // Data-parallel attention (--attention_dp, model/sharding.h): every rank holds the whole
  // attention and a KV cache of its own sequences only, so the ranks' caches add up: the pool
  // is tp partitions of num_kv_blocks each.
  bool attention_dp = false;
  // Decode steps recorded as CUDA graphs and replayed (the engine's default; false:
  // --enforce_eager). A GPU rank then keeps a recording per batch and context bucket
  // (kernels/step_capture.h), counted in ActivationBuffers::graph_bytes.
  bool cuda_graphs = true;
  std::optional<int64_t> runtime_reserve_bytes;  // overrides device.runtime_reserve_bytes
  std::optional<double> safety_fraction;         // overrides device.safety_fraction
  std::optional<DraftPlanInputs> draft;          // speculative decoding's draft model
};

// The degree the attention is split at: 1 with data-parallel attention (every rank holds all
// of it), else tp (ShardingPlan::attention_degree's).
inline int AttentionDegree(const PlanInputs& in) { return in.attention_dp ? 1 : in.tp; }

// One step's buffers on one rank, each allocated once at start-up.
// The row-parallel reduction the engine runs for these inputs.
inline TpReduction Reduction(const PlanInputs& in) {
  return in.deterministic_tp ? TpReduction::kDeterministic : TpReduction::kAllReduce;
}

struct ActivationBuffers {
  StepBufferSizes step;         // the engine's workspace, buffer by buffer
  int64_t attention_bytes = 0;  // attention workspace (see above)
  // The recorded decode steps (CUDA graphs) a GPU rank may keep: one per batch bucket of
  // max_sequences_per_step and context bucket of max_context_tokens, each RecordedStepBytes
  // (kernels/step_capture.h): an ESTIMATE per recording (launches per layer x bytes per
  // launch; no exact figure exists), and an upper bound on their number (they are made as
  // steps reach the buckets). 0 on the CPU host, with cuda_graphs off (--enforce_eager), under
  // deterministic_tp (the CUDA backend does not record there), and for a model that never
  // records (RecordsDecodeSteps, model/step_buffers.h; a target with a multi-token-prediction
  // draft copies its hidden states on the host's schedule, so neither records).
  int64_t graph_bytes = 0;
  int64_t recordings = 0;  // how many graph_bytes counts
  // A fused q/k/v or gate/up GEMM's product before its split into the outputs (the CUDA
  // backend's fused-product scratch, reserved at load): max_tokens_per_step rows of the widest
  // fused matrix on the rank, bf16. 0 on the CPU host (it does not fuse) and where nothing fuses.
  int64_t fused_product_bytes = 0;
  int64_t Total() const {
    return step.Total() + attention_bytes + graph_bytes + fused_product_bytes;
  }
};

struct CommBuffers {
  int64_t allreduce_bytes = 0;
  int64_t pipeline_bytes = 0;
  int64_t fixed_bytes = 0;  // communicator's own (NCCL) buffers
  int64_t Total() const;
};

// One rank of pipeline stage `stage` (all tp ranks of a stage hold the same byte counts).
struct StageMemory {
  int stage = 0;
  int64_t device_bytes = 0;
  int64_t runtime_reserve_bytes = 0;
  int64_t safety_bytes = 0;
  int64_t weight_bytes = 0;
  ActivationBuffers activations;
  CommBuffers comm;
  // The draft model's share (0 without one): its slice of weights and its step buffers.
  int64_t draft_weight_bytes = 0;
  ActivationBuffers draft_activations;
  // KV per token and per block of the pool: the target's plus the draft's.
  int64_t kv_bytes_per_token = 0;
  int64_t kv_bytes_per_block = 0;
  int64_t draft_kv_bytes_per_token = 0;  // of kv_bytes_per_token
  int64_t available_for_kv_bytes = 0;  // negative when the fixed parts alone don't fit
  int64_t kv_blocks_fit = 0;           // what this stage alone could hold
  int64_t kv_pool_bytes = 0;           // num_kv_blocks (plan-wide) * kv_bytes_per_block
  int64_t kv_target_bytes = 0;         // target sequences * blocks_per_sequence * block bytes
  int64_t unallocated_bytes = 0;       // device bytes no line above claims (>= 0 when fits)

  // Everything but the KV pool: reserve + safety + weights + activations + comm (and the
  // draft's weights and activations).
  int64_t FixedBytes() const;
};

struct MemoryPlan {
  PlanInputs inputs;
  ShardingTable sharding;
  std::vector<StageMemory> stages;
  int64_t num_ranks = 1;
  int64_t num_kv_blocks = 0;             // per rank, min over stages: each rank's cache
  // The pools the block manager gets num_kv_blocks each of: tp with data-parallel attention
  // (each rank caches its own sequences), else 1 (every rank caches every sequence).
  int64_t kv_partitions = 1;
  int64_t kv_token_capacity = 0;         // kv_partitions * num_kv_blocks * kv_block_size_tokens
  int64_t blocks_per_sequence = 0;       // ceil(max_context_tokens / kv_block_size_tokens)
  // kv_partitions * (num_kv_blocks / blocks_per_sequence): a sequence lives in one partition.
  int64_t max_concurrent_sequences = 0;
  // With a draft model: what the pool would hold without it (what the draft takes from the KV
  // cache is the difference); equal to num_kv_blocks without one.
  int64_t num_kv_blocks_without_draft = 0;
  bool weights_fit = false;              // reserve + safety + weights fit on every rank
  bool buffers_fit = false;              // ... and the step and communicator buffers
  bool meets_target = false;             // ... and KV for the target sequences
  // Bytes one rank lacks for the target (0 when it is met): the worst stage.
  int64_t shortfall_bytes_per_rank = 0;
  // All ranks: reserve + weights + step and comm buffers + KV for the target sequences
  // (the safety margin excluded): the "how much memory does this deployment need" figure.
  int64_t required_bytes_all_ranks = 0;
  std::string verdict;  // one line: what fits, or what is over and by how much
};

// How `device` holds weights: a GPU rank runs the CUDA backend, which keeps the int4 and fp8
// matrices its mixed-input GEMM takes in a form of its own (kernels/cuda/weight_placement.h);
// the CPU host holds every weight as stored.
WeightDevice WeightDeviceOf(const GpuSpec& device);

// INVALID_ARGUMENT naming the PlanInputs field, its value and the bound for bad inputs, and
// passing through PlanSharding's errors. A plan that does not fit is a result, not an error.
absl::StatusOr<MemoryPlan> PlanMemory(const PlanInputs& inputs);

// The per-rank buffers of one stage: StepBuffersFor of rank 0's plan (the logits only on the
// last stage) plus the attention workspace and the recorded decode steps.
ActivationBuffers ActivationBuffersFor(const PlanInputs& inputs, const ShardingPlan& rank0,
                                       bool last_stage);
CommBuffers CommBuffersFor(const PlanInputs& inputs);
int64_t KvBytesPerToken(const PlanInputs& inputs);  // per rank of any stage (layers / pp)

// "12.34 GiB" / "567.8 MiB" / "12 B" for tables and messages.
std::string FormatBytes(int64_t bytes);

}  // namespace tpserve

#endif  // TPSERVE_PLANNER_MEMORY_PLAN_H_
