#include "planner/plan_report.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/str_cat.h"
#include "kernels/cuda/attention_workspace.h"
#include "model/sharding.h"

namespace tpserve {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

std::string Line(std::string_view label, std::string_view detail, int64_t bytes) {
  return absl::StrFormat("  %-18s %-44s %17s %9.2f\n", label, detail, WithThousands(bytes),
                         bytes / kGiB);
}

std::string SubLine(std::string_view label, std::string_view detail, int64_t bytes) {
  return absl::StrFormat("    %-16s %-44s %17s %9.2f\n", label, detail, WithThousands(bytes),
                         bytes / kGiB);
}

// "1 rank", "8 ranks".
std::string Count(int64_t n, std::string_view noun) {
  return absl::StrFormat("%d %s%s", n, noun, n == 1 ? "" : "s");
}

std::string Header(const MemoryPlan& plan) {
  const PlanInputs& in = plan.inputs;
  const GpuSpec& d = in.device;
  std::string out = absl::StrFormat(
      "%s | weights %s | KV cache %s | activations %s | %d x %s (tp=%d, pp=%d%s)\n",
      in.model.name, in.weights.preset, TensorFormatName(TensorFormat::Of(in.kv_cache_dtype)),
      TensorFormatName(TensorFormat::Of(in.activation_dtype)), plan.num_ranks, d.name, in.tp,
      in.pp,
      StrCat(in.expert_parallel ? ", experts placed whole" : "",
             in.attention_dp ? ", data-parallel attention" : ""));
  if (d.is_host) {
    absl::StrAppendFormat(&out, "device  %s: %s bytes (%.2f GiB)\n", d.description,
                          WithThousands(d.memory_bytes), d.memory_bytes / kGiB);
  } else {
    absl::StrAppendFormat(&out,
                          "device  %s: %s nominal; %s bytes total as the driver reports "
                          "(%.2f GiB)\n",
                          d.description, d.nominal_memory, WithThousands(d.memory_bytes),
                          d.memory_bytes / kGiB);
  }
  absl::StrAppendFormat(
      &out,
      "request %s tokens of context x %d users; %s tokens/step, %d sequences/step; "
      "KV blocks of %d tokens\n\n",
      WithThousands(in.max_context_tokens), in.target_concurrent_sequences,
      WithThousands(in.max_tokens_per_step), in.max_sequences_per_step, in.kv_block_size_tokens);
  return out;
}

// The shard kind, with the copies of a split slice held by several ranks (k and v past the
// KV-head count: "column x2").
std::string KindLabel(const RoleShard& r) {
  if (r.kind == ShardKind::kReplicated || r.copies == 1) return std::string(ShardKindName(r.kind));
  return absl::StrFormat("%s x%d", ShardKindName(r.kind), r.copies);
}

std::string WeightLines(const StageShards& stage, const WeightFormats& formats) {
  std::string out;
  for (const RoleShard& r : stage.roles) {
    // Every format the role is stored in ("q4_k+q6_k" for a Q4_K_M ffn_down).
    std::vector<std::string> names;
    for (const TensorFormat& f : formats.AllOf(r.role)) names.push_back(TensorFormatName(f));
    const std::string detail =
        r.tied_to_embedding
            ? std::string("tied: shares the embedding shard")
            : absl::StrFormat("%-10s %-17s %-9s x%d", KindLabel(r),
                              absl::StrFormat("[%d x %d]", r.local_shape[0], r.local_shape[1]),
                              absl::StrJoin(names, "+"), r.num_tensors);
    out += SubLine(TensorRoleName(r.role), detail, r.bytes_per_rank);
    if (!r.tied_to_embedding && r.smallest_local_shape != r.local_shape) {
      out += absl::StrFormat("    (%s: [%d x %d] on ranks 0-%d, [%d x %d] on the others: the "
                             "MLP's blocks do not divide by the degree)\n",
                             TensorRoleName(r.role), r.local_shape[0], r.local_shape[1],
                             r.ranks_with_local_shape - 1, r.smallest_local_shape[0],
                             r.smallest_local_shape[1]);
    }
  }
  for (const RoleShard& r : stage.roles) {
    if (r.kind == ShardKind::kReplicated || r.copies == 1) continue;
    out += absl::StrFormat(
        "    (%s: each slice on %d ranks, the KV heads copied past their count)\n",
        KindLabel(r), r.copies);
    break;
  }
  return out;
}

std::string BufferLines(const PlanInputs& in, const StageMemory& m, int64_t vocab_padded) {
  const StepBufferSizes& b = m.activations.step;
  const ModelSpec& c = in.model;
  const int64_t t = in.max_tokens_per_step;
  const std::string act = TensorFormatName(TensorFormat::Of(in.activation_dtype));
  const int attention_tp = AttentionDegree(in);
  const int64_t q_cols = c.num_heads / attention_tp * c.head_dim;
  const int64_t attn_cols = c.num_heads / attention_tp * c.ValueHeadDim();
  // MLA: no K and V projections; k and v hold a fresh prefill's expanded keys and values.
  const int64_t k_cols =
      c.mla.enabled() ? q_cols : LocalKvHeads(c, attention_tp) * c.head_dim;
  const int64_t v_cols = c.mla.enabled() ? attn_cols : k_cols;
  std::string out =
      Line("step buffers", StrCat("for ", t, " tokens per step"), m.activations.Total());
  out += SubLine("residual x3",
                 absl::StrFormat("x, h, proj: 3 x [%d x %d] %s", t, c.hidden_size, act),
                 b.residual + b.normed + b.proj);
  out += SubLine("q, attn",
                 absl::StrFormat("[%d x %d], [%d x %d] %s", t, q_cols, t, attn_cols, act),
                 b.q + b.attn);
  out += SubLine(c.mla.enabled() ? "k, v expanded" : "k, v",
                 absl::StrFormat("[%d x %d], [%d x %d] %s", t, k_cols, t, v_cols, act),
                 b.k + b.v);
  if (c.mla.enabled()) {
    out += SubLine("latent attn",
                   "q latent, entries, absorbed q/out, expansion",
                   b.mla_q_latent + b.mla_entry + b.mla_latent + b.mla_q_absorbed +
                       b.mla_attn_latent + b.mla_head_in + b.mla_head_out + b.mla_expanded);
  }
  if (b.gate + b.up > 0) {
    // Rank 0's MLP width, the largest where the MLP's blocks do not divide by the degree.
    const int64_t ffn_cols =
        b.gate / std::max<int64_t>(1, t * PlainElementBytes(in.activation_dtype));
    out += SubLine("gate, up", absl::StrFormat("2 x [%d x %d] %s", t, ffn_cols, act),
                   b.gate + b.up);
  }
  if (c.moe.enabled()) {
    const int64_t slots = t * c.moe.routing.top_k;
    out += SubLine("experts",
                   absl::StrFormat("router, %d slots: rows, gate, up, down", slots),
                   b.router_logits + b.expert_ids + b.expert_weights + b.expert_rows +
                       b.expert_gate + b.expert_up + b.expert_down);
  }
  if (b.expert_send > 0) {
    out += SubLine("expert all-to-all",
                   "slots' outputs sent and received (f32), combined rows gathered",
                   b.expert_send_pos + b.expert_recv_pos + b.expert_send + b.expert_recv +
                       b.expert_gathered);
  }
  if (b.partials + b.all_partials > 0) {
    out += SubLine("chunk sums", "row-parallel reduction in a fixed order (f32)",
                   b.partials + b.all_partials);
  }
  std::string attention;
  if (c.mla.enabled() && !in.device.is_host) {
    attention = "FlashInfer MLA: split partials, work lists";
  } else if (in.device.is_host) {
    attention = absl::StrFormat("scores bound [%d heads x %d x %d ctx] f32", c.num_heads / in.tp,
                                t, in.max_context_tokens);
  } else if (cuda::AttentionKernelsFor(*ElementDType(TensorFormat::Of(in.kv_cache_dtype)),
                                       c.head_dim, in.device.compute_capability) ==
             cuda::AttentionKernels::kFlashInfer) {
    attention = "FlashInfer: split-key partials, work lists";
  } else {
    attention = "SIMT kernels: split-key partials";
  }
  out += SubLine("attention", attention, m.activations.attention_bytes);
  if (m.activations.fused_product_bytes > 0) {
    out += SubLine("fused product", "widest fused q/k/v, gate/up GEMM (bf16)",
                   m.activations.fused_product_bytes);
  }
  if (m.activations.graph_bytes > 0) {
    out += SubLine("CUDA graphs",
                   absl::StrFormat("%d recorded decode steps (estimate)",
                                   m.activations.recordings),
                   m.activations.graph_bytes);
  }
  if (b.logits_local > 0) {
    out += SubLine("logits",
                   absl::StrFormat("[%d x %d] + gathered f32", in.max_sequences_per_step,
                                   vocab_padded / in.tp),
                   b.logits_local + b.logits_gathered);
  }
  return out;
}

std::string CommLines(const PlanInputs& in, const StageMemory& m) {
  std::string out =
      Line("communicator", in.tp * in.pp > 1 ? "buffers" : "single rank: none", m.comm.Total());
  if (m.comm.allreduce_bytes > 0) {
    out += SubLine(
        "all-reduce",
        absl::StrFormat("[%d x %d] activations", in.max_tokens_per_step, in.model.hidden_size),
        m.comm.allreduce_bytes);
  }
  if (m.comm.pipeline_bytes > 0) {
    out += SubLine("pipeline", "send + receive of one step's hidden states", m.comm.pipeline_bytes);
  }
  if (m.comm.fixed_bytes > 0) {
    out += SubLine("fixed", "communicator's own buffers (stated constant)", m.comm.fixed_bytes);
  }
  return out;
}

std::string StageBlock(const MemoryPlan& plan, const StageMemory& m) {
  const PlanInputs& in = plan.inputs;
  const StageShards& shards = plan.sharding.stages[m.stage];
  const std::string title =
      absl::StrFormat("PER %s%s (each of %s)", in.device.is_host ? "RANK ON THE CPU HOST" : "GPU",
                      plan.stages.size() > 1
                          ? absl::StrFormat(", stage %d: layers %d-%d", m.stage, shards.first_layer,
                                            shards.first_layer + shards.num_layers - 1)
                          : std::string(),
                      Count(in.tp, "rank"));
  std::string out = absl::StrFormat("%-65s %17s %9s\n", title, "bytes", "GiB");
  out += Line("runtime reserve",
              in.device.is_host ? "none on a CPU host" : "CUDA context, cuBLAS workspaces (stated)",
              m.runtime_reserve_bytes);
  out += Line("safety margin",
              absl::StrFormat("%.0f%% of memory after the reserve",
                              100 * in.safety_fraction.value_or(in.device.safety_fraction)),
              m.safety_bytes);
  out += Line("weights", "this rank's shards, by role", m.weight_bytes);
  out += WeightLines(shards, in.weights);
  out += BufferLines(in, m, plan.sharding.vocab_padded);
  out += CommLines(in, m);
  if (in.draft.has_value()) {
    out += Line("draft model weights",
                absl::StrFormat("%s as %s: this rank's shards", in.draft->model.name,
                                in.draft->weights.preset),
                m.draft_weight_bytes);
    out += Line("draft step buffers", "its activations, attention and logits",
                m.draft_activations.Total());
  }
  out += Line(
      "KV cache pool",
      in.draft.has_value()
          ? absl::StrFormat("%d blocks x %s B (%s B/token, draft's %s)", plan.num_kv_blocks,
                            WithThousands(m.kv_bytes_per_block), WithThousands(m.kv_bytes_per_token),
                            WithThousands(m.draft_kv_bytes_per_token))
          : absl::StrFormat("%d blocks x %s B (%s B/token)", plan.num_kv_blocks,
                            WithThousands(m.kv_bytes_per_block), WithThousands(m.kv_bytes_per_token)),
      m.kv_pool_bytes);
  out +=
      Line("unallocated",
           m.unallocated_bytes < 0 ? "OVER: negative = missing" : "left over (less than one block)",
           m.unallocated_bytes);
  out += Line("= device total", "", m.device_bytes);
  return out + "\n";
}

std::string RooflineBlock(const Roofline& r, const MemoryPlan& plan) {
  const PlanInputs& in = plan.inputs;
  std::string out = absl::StrFormat(
      "ROOFLINE (decode: %d users at %s tokens of context; prefill: one %s-token prompt)\n",
      r.concurrency, WithThousands(r.context_tokens), WithThousands(r.prompt_tokens));
  absl::StrAppendFormat(
      &out,
      "  constants: memory %.0f GB/s; peak %.1f TFLOP/s (%s); prefill efficiency %.2f;\n"
      "             link %s: %.0f GB/s per direction, %.1f us per collective\n",
      r.memory_bandwidth_bytes_per_s / 1e9, r.peak_flops / 1e12,
      in.device.is_host ? "host peak" : "dense bf16", r.prefill_efficiency,
      in.device.interconnect.name, r.link_bandwidth_bytes_per_s / 1e9, r.link_latency_s * 1e6);
  absl::StrAppendFormat(
      &out,
      "  decode step: (%.2f GB weights + %.2f GB KV) per rank / (bandwidth x %.2f) = %.3f ms; "
      "%d collectives (row-parallel: %s of %s B) = %.3f ms; pipeline %.3f ms; "
      "total %.3f ms\n",
      r.weight_bytes_read / 1e9, r.kv_bytes_read / 1e9, r.decode_efficiency,
      r.memory_time_s * 1e3,
      r.collectives_per_step, r.reduction, WithThousands(r.row_parallel_bytes),
      r.collective_time_s * 1e3,
      r.pipeline_time_s * 1e3, r.decode_step_s * 1e3);
  if (r.expert_all_to_all_bytes > 0) {
    absl::StrAppendFormat(&out,
                          "  expert parallel: each MoE layer's down reduction is an all-to-all "
                          "(%s B sent per rank) and an all-gather of the combined rows\n",
                          WithThousands(r.expert_all_to_all_bytes));
  }
  absl::StrAppendFormat(&out, "  => %.1f tokens/s per user, %.1f tokens/s aggregate\n",
                        r.tokens_per_s_per_user, r.tokens_per_s_aggregate);
  absl::StrAppendFormat(
      &out,
      "  prefill: %.3g FLOP / (%d x %.1f TFLOP/s x %.2f) = %.3f s + all-reduce %.3f s "
      "= %.3f s to first token\n",
      r.prefill_flops, in.tp, r.peak_flops / 1e12, r.prefill_efficiency, r.prefill_compute_s,
      r.prefill_allreduce_s, r.prefill_s);
  return out;
}

}  // namespace

std::string WithThousands(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string AttentionLayoutLines(const MemoryPlan& plan) {
  const PlanInputs& in = plan.inputs;
  if (in.tp < 2 || in.pp > 1 || in.draft.has_value() || (!in.model.mla.enabled() && !in.attention_dp)) {
    return "";
  }
  PlanInputs other = in;
  other.attention_dp = !in.attention_dp;
  absl::StatusOr<MemoryPlan> alt = PlanMemory(other);
  if (!alt.ok()) return "";
  const MemoryPlan& split = in.attention_dp ? *alt : plan;
  const MemoryPlan& dp = in.attention_dp ? plan : *alt;
  const std::string unit = in.device.is_host ? "rank" : "GPU";
  const auto row = [&](const MemoryPlan& p, std::string_view label) {
    return absl::StrFormat(
        "          %-44s weights %9.2f GiB/%s, KV %s blocks/%s = %s tokens = %d sequences%s\n",
        label, p.stages[0].weight_bytes / kGiB, unit, WithThousands(p.num_kv_blocks), unit,
        WithThousands(p.kv_token_capacity), p.max_concurrent_sequences,
        &p == &plan ? " (this plan)" : "");
  };
  return StrCat(
      "LAYOUTS   the attention's two layouts on these ", Count(in.tp, unit), ":\n",
      row(split, StrCat("split by heads (the ", in.model.mla.enabled() ? "latent" : "KV",
                        " cache on every ", unit, ")")),
      row(dp, StrCat("data-parallel (--attention_dp, each ", unit, " its own)")));
}

std::string RenderPlanTable(const MemoryPlan& plan, const Roofline& roofline) {
  std::string out = Header(plan);
  for (const StageMemory& m : plan.stages) out += StageBlock(plan, m);
  const ShardingTable& s = plan.sharding;
  absl::StrAppendFormat(
      &out, "CAPACITY  %s KV blocks = %s tokens = %d sequences of %s tokens (target %d)\n",
      plan.kv_partitions > 1
          ? StrCat(plan.kv_partitions, " x ", plan.num_kv_blocks)
          : StrCat(plan.num_kv_blocks),
      WithThousands(plan.kv_token_capacity), plan.max_concurrent_sequences,
      WithThousands(plan.inputs.max_context_tokens), plan.inputs.target_concurrent_sequences);
  out += AttentionLayoutLines(plan);
  if (plan.inputs.draft.has_value()) {
    const StageMemory& m = plan.stages[0];
    const int64_t lost = plan.num_kv_blocks_without_draft - plan.num_kv_blocks;
    absl::StrAppendFormat(
        &out,
        "DRAFT     %s costs %s per rank (weights %s + buffers %s) and %s B of every KV token; "
        "the pool holds %d blocks instead of %d (%d fewer, %.1f%%)\n",
        plan.inputs.draft->model.name,
        FormatBytes(m.draft_weight_bytes + m.draft_activations.Total()),
        FormatBytes(m.draft_weight_bytes), FormatBytes(m.draft_activations.Total()),
        WithThousands(m.draft_kv_bytes_per_token), plan.num_kv_blocks,
        plan.num_kv_blocks_without_draft, lost,
        plan.num_kv_blocks_without_draft > 0
            ? 100.0 * static_cast<double>(lost) / static_cast<double>(plan.num_kv_blocks_without_draft)
            : 0.0);
  }
  absl::StrAppendFormat(&out, "VERDICT   %s\n", plan.verdict);
  absl::StrAppendFormat(
      &out,
      "ALL %s  weights %.2f GB = checkpoint %.2f GB + vocab padding %.3f GB + replicas %.3f GB"
      " + GPU GEMM forms %.3f GB;\n"
      "            required for the target (reserve + weights + buffers + KV, no safety margin) "
      "%.2f GB = %.2f GiB\n\n",
      Count(plan.num_ranks, plan.inputs.device.is_host ? "rank" : "GPU"),
      s.AllRanksWeightBytes() / 1e9, s.checkpoint_bytes / 1e9, s.padding_bytes / 1e9,
      s.replica_bytes / 1e9, s.backend_form_bytes / 1e9, plan.required_bytes_all_ranks / 1e9,
      plan.required_bytes_all_ranks / kGiB);
  return out + RooflineBlock(roofline, plan);
}

std::string RenderFit(const FitResult& fit) {
  std::string out;
  for (const std::string& why : fit.rejected) absl::StrAppend(&out, "  rejected ", why, "\n");
  absl::StrAppendFormat(&out,
                        "capacity bound: the weights alone need %s if they could be split "
                        "anywhere (pooled memory after reserve and safety margin)\n",
                        Count(fit.weights_only_min_gpus, "device"));
  if (!fit.found) return out + "FIT: no runnable layout within the GPU limit meets the target\n";
  const PlanInputs& in = fit.plan->inputs;
  absl::StrAppendFormat(&out, "FIT: %d x %s (tp=%d, pp=%d): %s\n\n", fit.plan->num_ranks,
                        in.device.name, in.tp, in.pp, fit.plan->verdict);
  return out;
}

std::string RenderSuggestions(const std::vector<Suggestion>& suggestions) {
  if (suggestions.empty()) return "SUGGESTIONS: none found\n";
  std::string out = "SUGGESTIONS (each re-planned)\n";
  for (const Suggestion& s : suggestions) {
    const StageMemory& m = s.plan.stages[0];
    absl::StrAppendFormat(&out, "  %-34s %s | weights %.2f GiB/rank, KV %s B/token/rank\n",
                          s.change, s.plan.verdict, m.weight_bytes / kGiB,
                          WithThousands(m.kv_bytes_per_token));
  }
  return out;
}

}  // namespace tpserve
