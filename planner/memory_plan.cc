#include "planner/memory_plan.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "base/str_cat.h"
#include "kernels/cuda/attention_workspace.h"
#include "kernels/cuda/mla_plan.h"
#include "kernels/cuda/weight_placement.h"
#include "kernels/step_capture.h"
#include "model/fused_projections.h"
#include "model/sharding.h"

namespace tpserve {
namespace {

constexpr int64_t kF32Bytes = 4;  // scores and logits are kept in f32 whatever the activations

absl::Status OutOfRange(std::string_view field, int64_t value, std::string_view bound) {
  return absl::InvalidArgumentError(StrCat(field, "=", value, ": must be ", bound));
}

absl::Status ValidateInputs(const PlanInputs& in) {
  if (!IsPlainFormat(in.kv_cache_dtype)) {
    return absl::InvalidArgumentError(
        StrCat("kv_cache_dtype=", TensorFormatName(TensorFormat::Of(in.kv_cache_dtype)),
               ": must be f32, f16, bf16 or fp8-e4m3"));
  }
  if (!IsPlainFormat(in.activation_dtype) || in.activation_dtype == FormatKind::kF8E4M3) {
    return absl::InvalidArgumentError(
        StrCat("activation_dtype=", TensorFormatName(TensorFormat::Of(in.activation_dtype)),
               ": must be f32, f16 or bf16"));
  }
  const int64_t model_ctx = in.model.max_context_tokens;
  if (in.max_context_tokens < 1 || (model_ctx > 0 && in.max_context_tokens > model_ctx)) {
    return OutOfRange("max_context_tokens", in.max_context_tokens,
                      StrCat("in [1, ", model_ctx, "] (the model's context length)"));
  }
  if (in.max_tokens_per_step < 1) {
    return OutOfRange("max_tokens_per_step", in.max_tokens_per_step, ">= 1");
  }
  if (in.max_sequences_per_step < 1 || in.max_sequences_per_step > in.max_tokens_per_step) {
    return OutOfRange("max_sequences_per_step", in.max_sequences_per_step,
                      StrCat("in [1, max_tokens_per_step=", in.max_tokens_per_step, "]"));
  }
  if (in.target_concurrent_sequences < 1) {
    return OutOfRange("target_concurrent_sequences", in.target_concurrent_sequences, ">= 1");
  }
  if (in.kv_block_size_tokens < 1 || in.kv_block_size_tokens > in.max_context_tokens) {
    return OutOfRange("kv_block_size_tokens", in.kv_block_size_tokens,
                      StrCat("in [1, max_context_tokens=", in.max_context_tokens, "]"));
  }
  if (in.device.memory_bytes < 1) {
    return OutOfRange("device.memory_bytes", in.device.memory_bytes, ">= 1");
  }
  if (!in.device.is_host && in.device.num_sms < 1) {  // attention's workspace scales with it
    return OutOfRange("device.num_sms", in.device.num_sms, ">= 1 for a GPU");
  }
  if (!in.device.is_host && in.model.mla.enabled() && in.tp > 0) {
    // FlashInfer's MLA scheduler lists at most kMlaMaxWorks items, which the CUDA backend
    // refuses at load to exceed (kernels/cuda/mla_plan.h): every rank's heads over a full step.
    const int64_t heads = in.model.num_heads / AttentionDegree(in);
    const int64_t works = cuda::MlaWorkBoundWithin(in.max_tokens_per_step,
                                                   in.max_sequences_per_step, heads,
                                                   in.device.num_sms);
    if (works > cuda::kMlaMaxWorks) {
      return OutOfRange("max_tokens_per_step", in.max_tokens_per_step,
                        StrCat("small enough that ", heads, " latent-attention heads per GPU "
                               "over a step stay within FlashInfer's MLA work lists (",
                               works, " items, at most ", cuda::kMlaMaxWorks, ")"));
    }
  }
  if (in.deterministic_tp_chunks != 0 && !in.deterministic_tp) {
    return OutOfRange("deterministic_tp_chunks", in.deterministic_tp_chunks,
                      "0 without deterministic_tp (it sets that reduction's chunk count)");
  }
  if (in.deterministic_tp) {
    TP_RETURN_IF_ERROR(
        CheckReductionChunks(in.model, in.weights, in.tp, in.deterministic_tp_chunks));
  }
  if (in.attention_dp && in.pp > 1) {
    return absl::InvalidArgumentError(StrCat(
        "attention_dp: data-parallel attention runs on the ranks of one pipeline stage; pp=",
        in.pp, " is not supported with it"));
  }
  if (in.draft.has_value()) {
    if (in.attention_dp) {
      return absl::InvalidArgumentError(
          "draft: a draft model keeps its KV in the target's blocks, which data-parallel "
          "attention (attention_dp) partitions by rank; not supported together");
    }
    if (in.pp > 1) {
      return absl::InvalidArgumentError(StrCat(
          "draft: a draft model runs on the target's ranks of one pipeline stage; pp=", in.pp,
          " is not supported with one"));
    }
    if (in.draft->model.vocab_size != in.model.vocab_size) {
      return absl::InvalidArgumentError(StrCat(
          "draft.model.vocab_size=", in.draft->model.vocab_size,
          ": a draft model must share the target's vocabulary of ", in.model.vocab_size,
          " tokens"));
    }
    if (in.draft->max_sequences_per_step < 1 ||
        in.draft->max_sequences_per_step > in.max_tokens_per_step) {
      return OutOfRange("draft.max_sequences_per_step", in.draft->max_sequences_per_step,
                        StrCat("in [1, max_tokens_per_step=", in.max_tokens_per_step, "]"));
    }
  }
  const double safety = in.safety_fraction.value_or(in.device.safety_fraction);
  if (!(safety >= 0 && safety < 1)) {
    return absl::InvalidArgumentError(StrCat("safety_fraction=", safety, ": must be in [0, 1)"));
  }
  if (in.runtime_reserve_bytes.has_value() && *in.runtime_reserve_bytes < 0) {
    return OutOfRange("runtime_reserve_bytes", *in.runtime_reserve_bytes, ">= 0");
  }
  return absl::OkStatus();
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The draft model's plan inputs: the target's, with the draft's model, formats and rows.
PlanInputs DraftInputs(const PlanInputs& in) {
  PlanInputs d = in;
  d.model = in.draft->model;
  d.weights = in.draft->weights;
  d.max_sequences_per_step = in.draft->max_sequences_per_step;
  d.draft.reset();
  d.expert_parallel = false;  // as step/rank_load.h's DraftLoad
  d.attention_dp = false;
  d.deterministic_tp_chunks = 0;
  return d;
}

// The draft's share of a rank: its weights, buffers and KV per token.
absl::Status AddDraft(const PlanInputs& in, StageMemory& m) {
  const PlanInputs d = DraftInputs(in);
  auto draft_error = [](const absl::Status& s) {
    return absl::Status(s.code(), StrCat("draft: ", s.message()));
  };
  absl::StatusOr<ShardingTable> shards =
      PlanSharding(d.model, d.weights, d.tp, 1, WeightDeviceOf(d.device));
  if (!shards.ok()) return draft_error(shards.status());
  absl::StatusOr<ShardingPlan> rank0 = ShardingPlan::Create(d.model, d.weights, {0, d.tp});
  if (!rank0.ok()) return draft_error(rank0.status());
  m.draft_weight_bytes = shards->stages[0].weight_bytes_per_rank;
  m.draft_activations = ActivationBuffersFor(d, *rank0, /*last_stage=*/true);
  m.draft_kv_bytes_per_token = KvBytesPerToken(d);
  if (d.model.is_mtp_draft()) {
    // The target's last hidden state per token, which the draft steps on (worker/
    // llama_model.h's HiddenStoreShape): every rank holds all of it.
    m.draft_kv_bytes_per_token += d.model.hidden_size * PlainElementBytes(in.activation_dtype);
  }
  return absl::OkStatus();
}

StageMemory FixedStageMemory(const PlanInputs& in, const ShardingTable& shards,
                             const ShardingPlan& rank0, int stage, const StageMemory& draft) {
  StageMemory m;
  m.stage = stage;
  m.device_bytes = in.device.memory_bytes;
  m.runtime_reserve_bytes = in.runtime_reserve_bytes.value_or(in.device.runtime_reserve_bytes);
  const double safety = in.safety_fraction.value_or(in.device.safety_fraction);
  m.safety_bytes =
      static_cast<int64_t>(std::ceil(safety * static_cast<double>(std::max<int64_t>(
                                                  0, m.device_bytes - m.runtime_reserve_bytes))));
  m.weight_bytes = shards.stages[stage].weight_bytes_per_rank;
  m.activations = ActivationBuffersFor(in, rank0, stage == in.pp - 1);
  m.comm = CommBuffersFor(in);
  m.draft_weight_bytes = draft.draft_weight_bytes;
  m.draft_activations = draft.draft_activations;
  m.draft_kv_bytes_per_token = draft.draft_kv_bytes_per_token;
  m.kv_bytes_per_token = KvBytesPerToken(in) + m.draft_kv_bytes_per_token;
  m.kv_bytes_per_block = m.kv_bytes_per_token * in.kv_block_size_tokens;
  m.available_for_kv_bytes = m.device_bytes - m.FixedBytes();
  m.kv_blocks_fit = m.available_for_kv_bytes > 0 && m.kv_bytes_per_block > 0
                        ? m.available_for_kv_bytes / m.kv_bytes_per_block
                        : 0;
  return m;
}

// The one-line verdict: the first thing that does not fit, with the amount, or what fits.
std::string Verdict(const MemoryPlan& plan) {
  const PlanInputs& in = plan.inputs;
  const StageMemory* worst = &plan.stages[0];
  for (const StageMemory& m : plan.stages) {
    if (m.available_for_kv_bytes - m.kv_target_bytes <
        worst->available_for_kv_bytes - worst->kv_target_bytes) {
      worst = &m;
    }
  }
  const StageMemory& m = *worst;
  const int64_t budget = m.device_bytes - m.runtime_reserve_bytes - m.safety_bytes;
  const std::string where = plan.stages.size() > 1 ? StrCat(" (stage ", m.stage, ")") : "";
  if (!plan.weights_fit) {
    return StrCat("DOES NOT FIT: weights need ", FormatBytes(m.weight_bytes), " per rank", where,
                  " but only ", FormatBytes(budget), " is usable; over by ",
                  FormatBytes(m.weight_bytes - budget));
  }
  if (!plan.buffers_fit) {
    return StrCat("DOES NOT FIT: weights + step buffers + communicator buffers need ",
                  FormatBytes(m.FixedBytes() - m.runtime_reserve_bytes - m.safety_bytes),
                  " per rank", where, " of ", FormatBytes(budget), " usable; over by ",
                  FormatBytes(-m.available_for_kv_bytes));
  }
  if (!plan.meets_target) {
    return StrCat("SHORT: KV for ", in.target_concurrent_sequences, " sequences x ",
                  in.max_context_tokens, " tokens needs ", FormatBytes(m.kv_target_bytes),
                  " per rank", where, ", ", FormatBytes(m.available_for_kv_bytes),
                  " is left; over by ", FormatBytes(plan.shortfall_bytes_per_rank), "; fits ",
                  plan.max_concurrent_sequences,
                  plan.max_concurrent_sequences == 1 ? " sequence" : " sequences");
  }
  return StrCat("FITS: ", plan.max_concurrent_sequences, " sequences of ", in.max_context_tokens,
                " tokens (target ", in.target_concurrent_sequences, "), ", plan.num_kv_blocks,
                " KV blocks of ", in.kv_block_size_tokens, " tokens",
                plan.kv_partitions > 1
                    ? StrCat(" on each of ", plan.kv_partitions,
                             " ranks (data-parallel attention: each caches its own sequences)")
                    : "");
}

}  // namespace

WeightDevice WeightDeviceOf(const GpuSpec& device) {
  return WeightDevice{!device.is_host, device.compute_capability};
}

int64_t CommBuffers::Total() const { return allreduce_bytes + pipeline_bytes + fixed_bytes; }

int64_t StageMemory::FixedBytes() const {
  return runtime_reserve_bytes + safety_bytes + weight_bytes + activations.Total() + comm.Total() +
         draft_weight_bytes + draft_activations.Total();
}

ActivationBuffers ActivationBuffersFor(const PlanInputs& in, const ShardingPlan& rank0,
                                       bool last_stage) {
  const ModelSpec& c = in.model;
  const int64_t t = in.max_tokens_per_step;
  ActivationBuffers b;
  b.step = StepBuffersFor(c, rank0, t, last_stage ? in.max_sequences_per_step : 0,
                          PlainElementBytes(in.activation_dtype),
                          ReductionChunks(c, rank0, in.weights, Reduction(in),
                                          in.deterministic_tp_chunks));
  // The recordings the model makes (LlamaModel::CaptureBucket) and the CUDA backend keeps.
  const bool mtp_target = in.draft.has_value() && in.draft->model.is_mtp_draft();
  if (!in.device.is_host && in.cuda_graphs && !in.deterministic_tp && !mtp_target &&
      RecordsDecodeSteps(c, in.attention_dp)) {
    const int64_t rows = std::min(t, in.max_sequences_per_step);
    b.recordings = static_cast<int64_t>(CaptureBatchBuckets(rows).size()) *
                   NumCaptureContextBuckets(in.max_context_tokens);
    b.graph_bytes = RecordedStepsBytes(c.num_layers / in.pp, rows, in.max_context_tokens);
  }
  if (!in.device.is_host) {  // the widest matrix the loader fuses, as the backend places it
    const Backend::ProjectionFusion fusion = cuda::CudaProjectionFusion();
    int64_t widest = 0;
    for (int64_t layer = 0; layer < c.num_layers; ++layer) {
      for (FusedGroup group : {FusedGroup::kQkv, FusedGroup::kGateUp}) {
        const FusedLayout f = FusedLayoutFor(c, rank0, in.weights, layer, group, fusion);
        if (f.fused) widest = std::max(widest, f.rows);
      }
    }
    b.fused_product_bytes = t * widest * 2;  // bf16
  }
  if (in.device.is_host) {
    b.attention_bytes = rank0.num_local_heads() * t * in.max_context_tokens * kF32Bytes;
  } else {  // FlashInfer's (MLA's for a latent cache) or the SIMT kernels'
    const Backend::AttentionReservation r = AttentionReservationFor(
        c, rank0, t, in.max_sequences_per_step, in.max_context_tokens,
        *ElementDType(TensorFormat::Of(in.kv_cache_dtype)), in.kv_block_size_tokens);
    b.attention_bytes =
        cuda::AttentionWorkspaceFor(cuda::AttentionLimitsFor(
                                        r, in.device.num_sms, in.device.compute_capability,
                                        in.deterministic_tp))
            .DeviceBytes();
  }
  return b;
}

CommBuffers CommBuffersFor(const PlanInputs& in) {
  const int64_t step_hidden_bytes =
      in.max_tokens_per_step * in.model.hidden_size * PlainElementBytes(in.activation_dtype);
  CommBuffers b;
  if (in.tp > 1) b.allreduce_bytes = step_hidden_bytes;
  if (in.pp > 1) b.pipeline_bytes = 2 * step_hidden_bytes;
  if (in.tp * in.pp > 1) b.fixed_bytes = in.device.comm_fixed_bytes;
  return b;
}

int64_t KvBytesPerToken(const PlanInputs& in) {
  const ModelSpec& c = in.model;
  return KvBytesPerToken(c.num_layers / in.pp, KvEntryOf(c, AttentionDegree(in)),
                         *ElementDType(TensorFormat::Of(in.kv_cache_dtype)));
}

absl::StatusOr<MemoryPlan> PlanMemory(const PlanInputs& inputs) {
  TP_RETURN_IF_ERROR(ValidateInputs(inputs));
  MemoryPlan plan;
  plan.inputs = inputs;
  TP_ASSIGN_OR_RETURN(plan.sharding,
                      PlanSharding(inputs.model, inputs.weights, inputs.tp, inputs.pp,
                                   WeightDeviceOf(inputs.device), inputs.expert_parallel,
                                   inputs.attention_dp));
  plan.num_ranks = int64_t{inputs.tp} * inputs.pp;
  plan.kv_partitions = inputs.attention_dp ? inputs.tp : 1;
  // Each rank's share of the target sequences (data-parallel attention spreads them).
  const int64_t target_per_partition =
      CeilDiv(inputs.target_concurrent_sequences, plan.kv_partitions);
  plan.blocks_per_sequence = CeilDiv(inputs.max_context_tokens, inputs.kv_block_size_tokens);
  plan.weights_fit = plan.buffers_fit = true;
  plan.num_kv_blocks = INT64_MAX;
  StageMemory draft;
  if (inputs.draft.has_value()) TP_RETURN_IF_ERROR(AddDraft(inputs, draft));
  int64_t no_draft_blocks = INT64_MAX;
  for (int s = 0; s < inputs.pp; ++s) {
    // Rank 0 of stage s: its buffers are its stage's (the logits on the last one alone).
    TP_ASSIGN_OR_RETURN(const ShardingPlan stage_rank0,
                        ShardingPlan::Create(inputs.model, inputs.weights,
                                             {0, inputs.tp, inputs.expert_parallel,
                                              inputs.attention_dp, s, inputs.pp}));
    StageMemory m = FixedStageMemory(inputs, plan.sharding, stage_rank0, s, draft);
    m.kv_target_bytes = target_per_partition * plan.blocks_per_sequence * m.kv_bytes_per_block;
    plan.weights_fit &= m.runtime_reserve_bytes + m.safety_bytes + m.weight_bytes <= m.device_bytes;
    plan.buffers_fit &= m.available_for_kv_bytes >= 0;
    plan.num_kv_blocks = std::min(plan.num_kv_blocks, m.kv_blocks_fit);
    const int64_t no_draft_available =
        m.available_for_kv_bytes + m.draft_weight_bytes + m.draft_activations.Total();
    const int64_t no_draft_block = m.kv_bytes_per_block - m.draft_kv_bytes_per_token *
                                                              inputs.kv_block_size_tokens;
    no_draft_blocks = std::min(no_draft_blocks, no_draft_available > 0 && no_draft_block > 0
                                                    ? no_draft_available / no_draft_block
                                                    : 0);
    plan.shortfall_bytes_per_rank =
        std::max(plan.shortfall_bytes_per_rank, m.kv_target_bytes - m.available_for_kv_bytes);
    plan.required_bytes_all_ranks +=
        inputs.tp * (m.FixedBytes() - m.safety_bytes + m.kv_target_bytes);
    plan.stages.push_back(m);
  }
  for (StageMemory& m : plan.stages) {
    m.kv_pool_bytes = plan.num_kv_blocks * m.kv_bytes_per_block;
    m.unallocated_bytes = m.device_bytes - m.FixedBytes() - m.kv_pool_bytes;
  }
  plan.num_kv_blocks_without_draft = no_draft_blocks;
  plan.kv_token_capacity =
      plan.kv_partitions * plan.num_kv_blocks * inputs.kv_block_size_tokens;
  plan.max_concurrent_sequences =
      plan.kv_partitions * (plan.num_kv_blocks / plan.blocks_per_sequence);
  plan.meets_target =
      plan.buffers_fit && plan.max_concurrent_sequences >= inputs.target_concurrent_sequences;
  plan.verdict = Verdict(plan);
  return plan;
}

std::string FormatBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  const double mag = std::fabs(b);
  if (mag >= 1024.0 * 1024 * 1024) return absl::StrFormat("%.2f GiB", b / (1 << 30));
  if (mag >= 1024.0 * 1024) return absl::StrFormat("%.1f MiB", b / (1 << 20));
  if (mag >= 1024.0) return absl::StrFormat("%.1f KiB", b / 1024);
  return StrCat(bytes, " B");
}

}  // namespace tpserve
