#include "worker/shard_assignment.h"

namespace tpserve {

tpserve::worker::v1::ShardAssignment ToAssignment(const ShardingPlan& plan) {
  tpserve::worker::v1::ShardAssignment a;
  a.set_first_head(plan.first_head());
  a.set_num_heads(plan.num_local_heads());
  a.set_first_kv_head(plan.first_kv_head());
  a.set_num_kv_heads(plan.num_local_kv_heads());
  a.set_first_ffn_row(plan.first_ffn_row());
  a.set_num_ffn_rows(plan.local_intermediate_size());
  a.set_first_vocab_row(plan.first_vocab_row());
  a.set_num_vocab_rows(plan.num_local_vocab_rows());
  a.set_first_expert(plan.first_local_expert());
  a.set_num_experts(plan.num_local_experts());
  a.set_first_layer(plan.first_layer());
  a.set_num_layers(plan.num_local_layers());
  return a;
}

}  // namespace tpserve
