#include "planner/plan_json.h"

#include <string>

namespace tpserve {
namespace {

using nlohmann::json;

std::string Name(FormatKind kind) { return TensorFormatName(TensorFormat::Of(kind)); }

json DeviceJson(const PlanInputs& in) {
  const GpuSpec& d = in.device;
  return {{"name", d.name},
          {"description", d.description},
          {"nominal_memory", d.nominal_memory},
          {"memory_bytes", d.memory_bytes},
          {"memory_bandwidth_bytes_per_s", d.memory_bandwidth_bytes_per_s},
          {"peak_flops", d.peak_flops},
          {"interconnect",
           {{"name", d.interconnect.name},
            {"bandwidth_bytes_per_s", d.interconnect.bandwidth_bytes_per_s},
            {"latency_s", d.interconnect.latency_s}}},
          {"runtime_reserve_bytes", in.runtime_reserve_bytes.value_or(d.runtime_reserve_bytes)},
          {"comm_fixed_bytes", d.comm_fixed_bytes},
          {"safety_fraction", in.safety_fraction.value_or(d.safety_fraction)},
          {"is_host", d.is_host}};
}

json InputsJson(const PlanInputs& in) {
  const ModelSpec& c = in.model;
  json formats = json::object();
  for (TensorRole role : kAllTensorRoles) {
    if (!HasRole(c, role)) continue;
    formats[std::string(TensorRoleName(role))] = TensorFormatName(in.weights[role]);
  }
  return {{"model",
           {{"name", c.name},
            {"vocab_size", c.vocab_size},
            {"hidden_size", c.hidden_size},
            {"intermediate_size", c.intermediate_size},
            {"num_layers", c.num_layers},
            {"num_heads", c.num_heads},
            {"num_kv_heads", c.num_kv_heads},
            {"head_dim", c.head_dim},
            {"max_context_tokens", c.max_context_tokens},
            {"tie_word_embeddings", c.tie_word_embeddings}}},
          {"weights_preset", in.weights.preset},
          {"weight_formats", formats},
          {"kv_cache_dtype", Name(in.kv_cache_dtype)},
          {"activation_dtype", Name(in.activation_dtype)},
          {"tp", in.tp},
          {"pp", in.pp},
          {"max_context_tokens", in.max_context_tokens},
          {"max_tokens_per_step", in.max_tokens_per_step},
          {"max_sequences_per_step", in.max_sequences_per_step},
          {"target_concurrent_sequences", in.target_concurrent_sequences},
          {"kv_block_size_tokens", in.kv_block_size_tokens},
          {"deterministic_tp", in.deterministic_tp},
          {"deterministic_tp_chunks", in.deterministic_tp_chunks},
          {"expert_parallel", in.expert_parallel},
          {"draft", in.draft.has_value()
                        ? json{{"model", in.draft->model.name},
                               {"weights_preset", in.draft->weights.preset},
                               {"num_layers", in.draft->model.num_layers},
                               {"hidden_size", in.draft->model.hidden_size},
                               {"max_sequences_per_step", in.draft->max_sequences_per_step}}
                        : json(nullptr)}};
}

json StageJson(const MemoryPlan& plan, const StageMemory& m) {
  const StageShards& shards = plan.sharding.stages[m.stage];
  json weights = json::object();
  for (const RoleShard& r : shards.roles) {
    weights[std::string(TensorRoleName(r.role))] = {
        {"shard", ShardKindName(r.kind)},
        {"copies", r.copies},  // ranks holding each slice
        {"format", TensorFormatName(plan.inputs.weights[r.role])},
        {"num_tensors", r.num_tensors},
        {"local_shape", {r.local_shape[0], r.local_shape[1]}},  // rank 0's, the largest
        // The dense MLP split unevenly: ranks from ranks_with_local_shape on hold this.
        {"smallest_local_shape", {r.smallest_local_shape[0], r.smallest_local_shape[1]}},
        {"ranks_with_local_shape", r.ranks_with_local_shape},
        {"bytes_per_rank", r.bytes_per_rank},
        // Of bytes_per_rank: the CUDA backend's own form beyond the stored one.
        {"backend_form_bytes_per_rank", r.backend_form_bytes_per_rank},
        {"tied_to_embedding", r.tied_to_embedding}};
  }
  const ActivationBuffers& a = m.activations;
  return {{"stage", m.stage},
          {"first_layer", shards.first_layer},
          {"num_layers", shards.num_layers},
          {"device_bytes", m.device_bytes},
          {"runtime_reserve_bytes", m.runtime_reserve_bytes},
          {"safety_bytes", m.safety_bytes},
          {"weight_bytes", m.weight_bytes},
          {"weights", weights},
          {"activations",
           {{"residual_bytes", a.step.residual},
            {"normed_bytes", a.step.normed},
            {"proj_bytes", a.step.proj},
            {"q_bytes", a.step.q},
            {"k_bytes", a.step.k},
            {"v_bytes", a.step.v},
            {"attn_bytes", a.step.attn},
            {"gate_bytes", a.step.gate},
            {"up_bytes", a.step.up},
            {"chunk_sum_bytes", a.step.partials + a.step.all_partials},
            {"experts_bytes", a.step.router_logits + a.step.expert_ids + a.step.expert_weights +
                                  a.step.expert_rows + a.step.expert_gate + a.step.expert_up +
                                  a.step.expert_down},
            {"expert_all_to_all_bytes", a.step.expert_send_pos + a.step.expert_recv_pos +
                                            a.step.expert_send + a.step.expert_recv +
                                            a.step.expert_gathered},
            {"logits_local_bytes", a.step.logits_local},
            {"logits_gathered_bytes", a.step.logits_gathered},
            {"attention_bytes", a.attention_bytes},
            {"fused_product_bytes", a.fused_product_bytes},
            {"cuda_graph_bytes", a.graph_bytes},
            {"cuda_graph_recordings", a.recordings},
            {"total_bytes", a.Total()}}},
          {"comm",
           {{"allreduce_bytes", m.comm.allreduce_bytes},
            {"pipeline_bytes", m.comm.pipeline_bytes},
            {"fixed_bytes", m.comm.fixed_bytes},
            {"total_bytes", m.comm.Total()}}},
          {"draft_weight_bytes", m.draft_weight_bytes},
          {"draft_activations_bytes", m.draft_activations.Total()},
          {"draft_kv_bytes_per_token", m.draft_kv_bytes_per_token},
          {"kv_bytes_per_token", m.kv_bytes_per_token},
          {"kv_bytes_per_block", m.kv_bytes_per_block},
          {"available_for_kv_bytes", m.available_for_kv_bytes},
          {"kv_pool_bytes", m.kv_pool_bytes},
          {"kv_target_bytes", m.kv_target_bytes},
          {"unallocated_bytes", m.unallocated_bytes}};
}

json RooflineJson(const Roofline& r) {
  return {{"memory_bandwidth_bytes_per_s", r.memory_bandwidth_bytes_per_s},
          {"peak_flops", r.peak_flops},
          {"prefill_efficiency", r.prefill_efficiency},
          {"decode_efficiency", r.decode_efficiency},
          {"link_bandwidth_bytes_per_s", r.link_bandwidth_bytes_per_s},
          {"link_latency_s", r.link_latency_s},
          {"concurrency", r.concurrency},
          {"context_tokens", r.context_tokens},
          {"prompt_tokens", r.prompt_tokens},
          {"weight_bytes_read", r.weight_bytes_read},
          {"kv_bytes_read", r.kv_bytes_read},
          {"reduction", r.reduction},
          {"reduction_chunks", r.reduction_chunks},
          {"collectives_per_step", r.collectives_per_step},
          {"row_parallel_bytes", r.row_parallel_bytes},
          {"expert_all_to_all_bytes", r.expert_all_to_all_bytes},
          {"logits_gather_bytes", r.logits_gather_bytes},
          {"memory_time_s", r.memory_time_s},
          {"collective_time_s", r.collective_time_s},
          {"pipeline_time_s", r.pipeline_time_s},
          {"decode_step_s", r.decode_step_s},
          {"tokens_per_s_per_user", r.tokens_per_s_per_user},
          {"tokens_per_s_aggregate", r.tokens_per_s_aggregate},
          {"prefill_flops", r.prefill_flops},
          {"prefill_compute_s", r.prefill_compute_s},
          {"prefill_allreduce_s", r.prefill_allreduce_s},
          {"prefill_s", r.prefill_s}};
}

json PlanCore(const MemoryPlan& plan) {
  json stages = json::array();
  for (const StageMemory& m : plan.stages) stages.push_back(StageJson(plan, m));
  const ShardingTable& s = plan.sharding;
  return {{"inputs", InputsJson(plan.inputs)},
          {"device", DeviceJson(plan.inputs)},
          {"num_ranks", plan.num_ranks},
          {"vocab_padded", s.vocab_padded},
          {"stages", stages},
          {"num_kv_blocks", plan.num_kv_blocks},
          {"kv_token_capacity", plan.kv_token_capacity},
          {"blocks_per_sequence", plan.blocks_per_sequence},
          {"max_concurrent_sequences", plan.max_concurrent_sequences},
          {"num_kv_blocks_without_draft", plan.num_kv_blocks_without_draft},
          {"weights_fit", plan.weights_fit},
          {"buffers_fit", plan.buffers_fit},
          {"meets_target", plan.meets_target},
          {"shortfall_bytes_per_rank", plan.shortfall_bytes_per_rank},
          {"required_bytes_all_ranks", plan.required_bytes_all_ranks},
          {"totals",
           {{"checkpoint_bytes", s.checkpoint_bytes},
            {"padding_bytes", s.padding_bytes},
            {"replica_bytes", s.replica_bytes},
            {"all_ranks_weight_bytes", s.AllRanksWeightBytes()}}},
          {"verdict", plan.verdict}};
}

}  // namespace

json PlanToJson(const MemoryPlan& plan, const Roofline& roofline) {
  json j = PlanCore(plan);
  j["roofline"] = RooflineJson(roofline);
  return j;
}

json FitToJson(const FitResult& fit, const RooflineAssumptions& assumptions) {
  json j = {{"found", fit.found},
            {"weights_only_min_gpus", fit.weights_only_min_gpus},
            {"rejected", fit.rejected}};
  if (fit.found) j["plan"] = PlanToJson(*fit.plan, EstimateRoofline(*fit.plan, assumptions));
  return j;
}

json SuggestionsToJson(const std::vector<Suggestion>& suggestions) {
  json out = json::array();
  for (const Suggestion& s : suggestions)
    out.push_back({{"change", s.change}, {"plan", PlanCore(s.plan)}});
  return out;
}

}  // namespace tpserve
