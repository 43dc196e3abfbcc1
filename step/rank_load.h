// What every rank of a tensor-parallel group loads and how it steps: the model (and the draft
// model) with its weight format and slices, the KV cache, the step's bounds, the reduction and
// the collective timeout. Decided once, from the cluster plan (deploy/cluster_plan.h's
// RankLoadFor), and given whole to whoever runs the ranks: RemoteExecutor sends it to every
// rank in its LoadRequest (step/rank_load_proto.h), LocalExecutor builds its ranks from it, and
// a rank's RankRuntimeOptions are derived from it in one function (worker/rank_load_options.h).
// Where the ranks run and how they reach each other (addresses, backend, communicator,
// rendezvous, the secret) is the executors' own, not here.
//
//   TP_ASSIGN_OR_RETURN(RankLoad load, RankLoadFor(plan, request));
//   TP_ASSIGN_OR_RETURN(auto exec, LocalExecutor::Create(files, load));
#ifndef TPSERVE_STEP_RANK_LOAD_H_
#define TPSERVE_STEP_RANK_LOAD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "base/step_budget.h"
#include "formats/dtype.h"
#include "proto/worker.pb.h"

namespace tpserve {

// One model the ranks hold (the target, or speculative decoding's draft).
struct ModelLoad {
  // The checkpoint every rank opens (a .gguf file or a Hugging Face directory); "" where the
  // executor is handed the weights (LocalExecutor).
  std::string path;
  std::string weights;  // "" = as the checkpoint stores them; a preset (fp8, int4, ...) quantizes on load
  // Most rows of logits one step returns (sequences per step, unless some ask for all their
  // tokens' logits); 0 = max_tokens_per_step.
  int32_t max_logit_rows = 0;
  // Rank r's slices of every layer (index = rank), from the coordinator's sharding plan: the
  // rank derives its own and refuses to load when they differ. Empty: not checked.
  std::vector<tpserve::worker::v1::ShardAssignment> assignments;
  // A draft that is `path`'s multi-token-prediction layer (model/config.h's MtpDraftSpec),
  // stepping on the target's hidden states; false: a model of its own.
  bool mtp = false;
};

struct RankLoad {
  int32_t world_size = 1;  // the tensor-parallel degree
  // Pipeline stages (model/sharding.h's ShardSpec): rank r is tensor-parallel rank
  // r % world_size of stage r / world_size; the model's assignments have an entry per rank of
  // every stage.
  int32_t pipeline_stages = 1;
  int32_t total_ranks() const { return world_size * pipeline_stages; }
  // The rank that ends a step with the logits and samples: the last stage's kSamplingRank.
  int32_t sampling_rank() const { return (pipeline_stages - 1) * world_size; }
  ModelLoad model;
  // Speculative decoding's draft model, beside the target on the same ranks at the same
  // degree, its KV in the same block ids (coordinator/speculative/draft_model.h).
  std::optional<ModelLoad> draft;
  int64_t vocab_size = 0;  // the model's, as the coordinator knows it; 0 = not checked
  DType kv_dtype = DType::kF16;  // f32, f16, bf16 or fp8 (IsKvDtype)
  int32_t num_kv_blocks = 0;  // from the memory plan
  int32_t block_size_tokens = 16;
  int32_t max_tokens_per_step = kCpuMaxTokensPerStep;  // the scheduler's budget per step
  // The engine's context window (the memory plan's; 0 = the model's): the longest sequence a
  // step attends over, which sizes the attention workspace.
  int32_t max_context_tokens = 0;
  int32_t threads_per_rank = 1;  // a CPU rank's compute threads
  // Row-parallel layers reduce in fixed chunks so every degree gives the same floats
  // (model/step_buffers.h's TpReduction; on GPUs also pinned GEMMs); false: one all-reduce.
  bool deterministic_tp = false;
  int32_t deterministic_tp_chunks = 0;  // its chunk count; 0: the default (model/step_buffers.h)
  // Whole experts on ranks, their outputs brought to the tokens by an all-to-all
  // (model/sharding.h); false: each expert split like a dense MLP.
  bool expert_parallel = false;
  // Data-parallel attention (model/sharding.h): every rank holds the whole attention and a KV
  // cache of num_kv_blocks for the sequences it attends for (StepBatch's attention_rank).
  bool attention_dp = false;
  // --strict_kernels: a GPU rank refuses to start rather than multiply a matrix by decoding it
  // whole to bf16 (kernels/cuda/matmul_plan_load.h); false: it says so at load, once per role.
  bool strict_kernels = false;
  // --enforce_eager: every step runs op by op; false: a GPU rank records its decode steps and
  // replays them (CUDA graphs; LlamaLoadOptions::record_decode_steps).
  bool enforce_eager = false;
  absl::Duration collective_timeout = absl::Seconds(30);  // a collective that waits longer fails
  // The communicator's start: the rendezvous, its init (NCCL's) and the first collectives,
  // which set up connections lazily; the longer of the two bounds them.
  absl::Duration startup_timeout = absl::Seconds(120);

  bool operator==(const RankLoad& other) const;
};

// The draft model's load: `load` with *load.draft as its model and no draft of its own (and
// its experts, where it has any, split rather than placed whole).
// REQUIRES: load.draft has a value.
RankLoad DraftLoad(const RankLoad& load);

}  // namespace tpserve

#endif  // TPSERVE_STEP_RANK_LOAD_H_
