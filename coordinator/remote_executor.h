// Drives worker rank processes over the worker protocol: Load on every rank at once (with
// progress), then one Step RPC per rank per step, all in flight together. The first rank that
// fails or stops answering fails the step with UNAVAILABLE naming it; the other calls are
// cancelled, so nothing waits on a dead rank. A rank that fails because a peer vanished (its
// collective timed out) is not the culprit: after a failed step every rank gets a short
// heartbeat, and the error names first the ranks that did not answer; while a step waits, the
// ranks still out are probed the same way (step_probe_interval), so a rank that fails no peer
// (a later pipeline stage cut off) is named too. Every call carries the cluster secret.
// With pipeline stages (RankLoad::pipeline_stages) the addresses are every stage's ranks, stage
// by stage; each step goes to all of them, and the last stage's first rank samples.
//
//   TP_ASSIGN_OR_RETURN(auto exec, RemoteExecutor::Connect(addresses, load, options, on_progress));
//   Engine engine(engine_options, std::move(exec), &tokenizer);
//
// Threading: Execute from the engine's step thread; Ping from any thread.
#ifndef TPSERVE_COORDINATOR_REMOTE_EXECUTOR_H_
#define TPSERVE_COORDINATOR_REMOTE_EXECUTOR_H_

#include <functional>
#include <utility>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cluster/step_channel.h"
#include "proto/worker.grpc.pb.h"
#include "step/executor.h"
#include "step/rank_load.h"

namespace tpserve {

// Where the ranks run and how they are reached: the worker plane's own. What they load is the
// RankLoad (step/rank_load.h).
struct RemoteExecutorOptions {
  // Sent with every call (cluster/secret.h); the ranks refuse calls without it.
  std::string cluster_secret;
  // "auto", "shm" or "gloo" (CPU ranks) or "nccl" (GPU ranks); a single rank is always sent
  // "single". For "nccl" rank 0 makes the group's NCCL id and the others read it from the
  // rendezvous store (comm/nccl_unique_id.h): this process needs no NCCL.
  std::string comm_kind = "auto";
  // LoadRequest.backend of every rank: "cpu" or "cuda".
  std::string backend = "cpu";
  // backend "cuda": rank r runs on GPU device_ordinals[r] of its host; empty: on GPU r.
  std::vector<int32_t> device_ordinals;
  std::string rendezvous_dir;
  std::string rendezvous_prefix = "tpserve";
  absl::Duration load_timeout = absl::Minutes(10);
  // Asked every 100 ms while the ranks load: a status other than OK stops the load (every
  // rank's call cancelled) and is what Connect returns (the launcher's SIGTERM). Null: none.
  std::function<absl::Status()> keep_loading;
  absl::Duration step_timeout = absl::Seconds(60);
  // Ranks on this host: send steps through a shared-memory channel (cluster/step_channel.h)
  // instead of a gRPC call each, when every rank opens it; gRPC otherwise, and for a request
  // too large for it. A rank silent on the channel for channel_heartbeat_timeout is dead.
  bool step_channel = false;
  absl::Duration channel_heartbeat_timeout = absl::Seconds(2);
  // After a failed step: how long each rank has to answer a heartbeat before it is named as
  // the one that does not answer.
  absl::Duration failure_probe_timeout = absl::Seconds(1);
  // While a step over gRPC waits on ranks: how often those still out are asked for a
  // heartbeat (each within failure_probe_timeout); one that does not answer fails the step.
  // A rank whose host is gone may fail no peer's collective (a later pipeline stage).
  absl::Duration step_probe_interval = absl::Seconds(2);
  // Recover: brings up a successor for rank `rank`, which is gone, and returns its worker
  // address once it has joined, within `timeout` (the launcher spawns one, or waits for a
  // standby to join by address); null: no rank is replaced (a lost rank fails the cluster).
  std::function<absl::StatusOr<std::string>(int rank, absl::Duration timeout)> replace_rank;
  // How long Recover may take in all: the successors' start, join and load, the regroup.
  absl::Duration rank_replace_timeout = absl::Seconds(60);
};

using LoadProgressCallback = std::function<void(const tpserve::worker::v1::LoadProgress&)>;

class RemoteExecutor final : public ModelExecutor {
 public:
  // Connects to every rank (addresses[r] serves rank r) and has each load `load`, sent whole to
  // every rank (step/rank_load_proto.h). INVALID_ARGUMENT when load.world_size is not the
  // number of addresses, or load's assignments (the draft's too) or device_ordinals do not
  // have one entry per rank; else the first rank's failure, as UNAVAILABLE naming it.
  static absl::StatusOr<std::unique_ptr<RemoteExecutor>> Connect(
      const std::vector<std::string>& addresses, const RankLoad& load,
      const RemoteExecutorOptions& options, const LoadProgressCallback& on_progress);
  ~RemoteExecutor() override;

  // The target's logits stay on the sampling rank (StepResult::logits_held) for Sample.
  absl::StatusOr<StepResult> Execute(const StepBatch& batch) override;
  // Sends `sampling` to the sampling rank alone (through the step channel when it serves it),
  // which samples the logits it held from the last Execute and answers with the tokens:
  // a few hundred bytes a row instead of vocab_size floats. UNAVAILABLE naming the rank when
  // it fails or does not answer.
  absl::StatusOr<std::vector<SequenceSamples>> Sample(const StepResult& step,
                                                      const StepSampling& sampling) override;
  // The ranks that do not answer a heartbeat are gone: each is replaced (options.replace_rank)
  // and loads its shard while the others regroup under a fresh rendezvous (the Regroup RPC),
  // keeping their weights; steps go over gRPC afterwards. FAILED_PRECONDITION when every rank
  // answers; UNAVAILABLE naming the rank when one is not replaced in time; the default's
  // UNIMPLEMENTED without replace_rank.
  absl::Status Recover(const absl::Status& failure) override;
  int64_t vocab_size() const override { return load_.vocab_size; }
  std::string Describe() const override;

  // OK when every rank answers a heartbeat within `timeout`; UNAVAILABLE naming the first
  // that does not.
  absl::Status Ping(absl::Duration timeout) const;
  // Asks every rank to exit (best effort).
  void ShutdownRanks();
  // Rank `rank`'s process is known to have exited (the launcher reaped it): a step waiting on
  // it over the step channel fails at once instead of after channel_heartbeat_timeout (a gRPC
  // call fails on its own). Any thread.
  void RankGone(int rank);
  int world_size() const { return static_cast<int>(stubs_.size()); }
  int64_t weight_bytes(int rank) const { return weight_bytes_.at(rank); }
  int64_t kv_cache_bytes(int rank) const { return kv_cache_bytes_.at(rank); }
  int64_t draft_weight_bytes(int rank) const { return draft_weight_bytes_.at(rank); }
  int64_t draft_kv_cache_bytes(int rank) const { return draft_kv_cache_bytes_.at(rank); }

  // The draft model's steps on the same ranks (StepRequest.draft), as an executor of its own
  // for the draft proposer. REQUIRES: the load had a draft; this executor outlives
  // the returned one, and both are used from one thread.
  std::unique_ptr<ModelExecutor> DraftExecutor();

 private:
  RemoteExecutor(std::vector<std::string> addresses, RankLoad load, RemoteExecutorOptions options);
  // Sends `req` to every rank at once; responses[r] is rank r's. The first failure (as
  // UNAVAILABLE naming the rank) cancels the other calls and is returned; *named is set when
  // that failure is the step's own heartbeat probe, which already names the silent ranks.
  absl::Status StepAllRanks(const tpserve::worker::v1::StepRequest& req,
                            std::vector<tpserve::worker::v1::StepResponse>& responses,
                            bool* named);
  // `failure` with the ranks that do not answer a heartbeat named in front.
  absl::Status NameSilentRanks(const absl::Status& failure) const;
  // Of `ranks`, those that do not answer a heartbeat within failure_probe_timeout, each as
  // "rank r (address) does not answer (why)".
  std::vector<std::string> SilentRanks(const std::vector<int>& ranks) const;
  std::vector<std::pair<int, std::string>> SilentRankIds(const std::vector<int>& ranks) const;
  // Has rank r load load_ (meeting its group under rendezvous_prefix; step_channel "" = none),
  // recording its sizes; on_progress (if set) sees every message.
  absl::Status LoadRank(int r, const std::string& rendezvous_prefix,
                        const std::string& step_channel, grpc::ClientContext* ctx,
                        const LoadProgressCallback& on_progress);
  // One step through channel_: `request` serialized; no logits come back (the sampling rank
  // holds them).
  absl::StatusOr<StepResult> ExecuteOnChannel(const std::string& request);
  // A step of the target, or of the draft model.
  absl::StatusOr<StepResult> ExecuteModel(const StepBatch& batch, bool draft);
  class Draft;

  // A replaced rank's entries change (Recover, on the step thread): other threads (Ping,
  // ShutdownRanks) read them under stubs_mu_.
  mutable absl::Mutex stubs_mu_;
  std::vector<std::string> addresses_;
  const RankLoad load_;
  const RemoteExecutorOptions options_;
  std::vector<std::unique_ptr<tpserve::worker::v1::Worker::Stub>> stubs_;
  int regroups_ = 0;  // Recover's, naming each new rendezvous
  std::vector<int64_t> weight_bytes_;
  std::vector<int64_t> kv_cache_bytes_;
  std::vector<int64_t> draft_weight_bytes_;
  std::vector<int64_t> draft_kv_cache_bytes_;
  int64_t next_step_id_ = 1;
  int64_t held_step_id_ = -1;  // the step whose logits the sampling rank holds
  // Valid when every rank serves it. Recover drops it (on the step thread) under channel_mu_,
  // which RankGone (any thread) takes too.
  absl::Mutex channel_mu_;
  StepChannel channel_;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_REMOTE_EXECUTOR_H_
