// A rank's RankRuntimeOptions (and so its LlamaLoadOptions) from the RankLoad every rank of its
// group was given (step/rank_load.h): the one place the description becomes a rank's options,
// for the worker process (WorkerService) and the in-process ranks (LocalExecutor) alike.
//
//   TP_ASSIGN_OR_RETURN(RankRuntimeOptions o, RankRuntimeOptionsFor(load, rank, files));
//   o.backend.kind = BackendKind::kCpu;  o.comm.kind = CommunicatorKind::kGloo;  ...
//   TP_ASSIGN_OR_RETURN(auto runtime, RankRuntime::Create(files.config, files.weights, o));
//
// Thread-safe: a pure function of its arguments.
#ifndef TPSERVE_WORKER_RANK_LOAD_OPTIONS_H_
#define TPSERVE_WORKER_RANK_LOAD_OPTIONS_H_

#include "absl/status/statusor.h"
#include "checkpoint/model_files.h"
#include "step/rank_load.h"
#include "worker/rank_runtime.h"

namespace tpserve {

// Rank `rank`'s options for load.model, whose checkpoint is `files`: the formats its weights
// are held in (load.model.weights resolved against the stored ones, as every rank resolves
// them), the step's bounds, the KV cache, the threads, the reduction (and a GPU backend's
// deterministic mode) and the collective timeout. The backend's kind and device and the
// communicator's kind, group and rendezvous are the caller's: they say where the rank runs.
// FAILED_PRECONDITION when load.model.assignments[rank] differs from this rank's own sharding
// plan (the coordinator planned another model, or with other code); INVALID_ARGUMENT when the
// model's vocabulary is not load.vocab_size (when set), or for an unknown weights preset.
absl::StatusOr<RankRuntimeOptions> RankRuntimeOptionsFor(const RankLoad& load, int rank,
                                                         const ModelFiles& files);

// Where the load has pipeline stages, `o` placed for the whole cluster (its communicator's kind
// and rendezvous set by the caller) becomes its stage's: the stage's tensor-parallel group
// meets under run_id + "/stage<s>" (one rank: kSingleRank), and its links to the neighbouring
// stages under run_id + "/pipe<s>.<t>" (from_prev and to_next). Without stages: nothing.
void PlacePipeline(RankRuntimeOptions& o);

}  // namespace tpserve

#endif  // TPSERVE_WORKER_RANK_LOAD_OPTIONS_H_
