#include "coordinator/remote_executor.h"

#include <chrono>
#include <algorithm>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/grpc_status.h"
#include "base/status_macros.h"
#include "cluster/secret.h"
#include "step/rank_load_proto.h"
#include "step/step_batch_proto.h"
#include "step/step_sampling_proto.h"

namespace tpserve {
namespace {

namespace wpb = ::tpserve::worker::v1;

// Bytes of the largest StepRequest the step channel carries (larger ones go over gRPC): token
// ids and block tables of a full step, a few bytes each.
constexpr size_t kStepChannelRequestBytes = size_t{4} << 20;

// The stub of the rank serving at `address` (replies up to 256 MiB: a step's logits).
std::unique_ptr<wpb::Worker::Stub> NewWorkerStub(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  return wpb::Worker::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

// 0, 1, ..., world - 1.
std::vector<int> AllRanks(int world) {
  std::vector<int> all(world);
  for (int r = 0; r < world; ++r) all[r] = r;
  return all;
}

absl::Status RankError(int rank, const std::string& address, const grpc::Status& s) {
  return absl::UnavailableError(absl::StrCat("rank ", rank, " (", address, ") failed: ",
                                             s.error_message(), " [grpc code ",
                                             static_cast<int>(s.error_code()), "]"));
}

// Runs fn(rank, context) for every rank on its own thread. When one fails, the others'
// calls are cancelled so that nobody waits on a dead peer; returns the first failure.
// `keep_going`, when set, is asked every 100 ms until all are done: an error from it cancels
// every call the same way and is returned.
absl::Status ForAllRanks(int world, absl::Duration timeout, const std::string& secret,
                         const std::function<absl::Status(int, grpc::ClientContext*)>& fn,
                         const std::function<absl::Status()>& keep_going = nullptr) {
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts(world);
  const auto deadline = absl::ToChronoTime(absl::Now() + timeout);
  for (auto& c : contexts) {
    c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(deadline);
    AttachClusterSecret(c.get(), secret);
  }
  absl::Mutex mu;
  absl::Status first_error;
  int done = 0;
  const auto fail = [&](const absl::Status& s, int except) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (!first_error.ok()) return;
    first_error = s;
    for (int other = 0; other < world; ++other) {
      if (other != except) contexts[other]->TryCancel();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(world);
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      absl::Status s = fn(r, contexts[r].get());
      absl::MutexLock lock(&mu);
      ++done;
      if (!s.ok()) fail(s, r);
    });
  }
  if (keep_going) {
    absl::MutexLock lock(&mu);
    const auto all_done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return done == world; };
    while (!mu.AwaitWithTimeout(absl::Condition(&all_done), absl::Milliseconds(100))) {
      mu.Unlock();  // keep_going may take its time
      absl::Status s = keep_going();
      mu.Lock();
      if (!s.ok()) fail(s, /*except=*/-1);
    }
  }
  for (auto& t : threads) t.join();
  return first_error;
}

}  // namespace

RemoteExecutor::RemoteExecutor(std::vector<std::string> addresses, RankLoad load,
                               RemoteExecutorOptions options)
    : addresses_(std::move(addresses)), load_(std::move(load)), options_(std::move(options)) {}

RemoteExecutor::~RemoteExecutor() = default;

absl::StatusOr<std::unique_ptr<RemoteExecutor>> RemoteExecutor::Connect(
    const std::vector<std::string>& addresses, const RankLoad& load,
    const RemoteExecutorOptions& options, const LoadProgressCallback& on_progress) {
  std::unique_ptr<RemoteExecutor> exec(new RemoteExecutor(addresses, load, options));
  const int world = static_cast<int>(addresses.size());
  if (load.total_ranks() != world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the load is for ", load.world_size, " ranks x ", load.pipeline_stages,
        " pipeline stage(s), not the ", world, " addresses"));
  }
  if (load.model.assignments.size() != addresses.size()) {
    return absl::InvalidArgumentError(absl::StrCat("sharding plan has ",
                                                   load.model.assignments.size(),
                                                   " assignments for ", world, " ranks"));
  }
  if (load.draft.has_value() && load.draft->assignments.size() != addresses.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the draft model's sharding plan has ",
                                                   load.draft->assignments.size(),
                                                   " assignments for ", world, " ranks"));
  }
  if (!options.device_ordinals.empty() && options.device_ordinals.size() != addresses.size()) {
    return absl::InvalidArgumentError(absl::StrCat("device_ordinals has ",
                                                   options.device_ordinals.size(),
                                                   " entries for ", world, " ranks"));
  }
  for (const std::string& address : addresses) exec->stubs_.push_back(NewWorkerStub(address));
  exec->weight_bytes_.assign(world, 0);
  exec->kv_cache_bytes_.assign(world, 0);
  exec->draft_weight_bytes_.assign(world, 0);
  exec->draft_kv_cache_bytes_.assign(world, 0);
  StepChannel channel;
  if (options.step_channel && load.vocab_size > 0) {
    // A channel that cannot be made leaves the steps on gRPC: slower, not wrong.
    absl::StatusOr<StepChannel> made = StepChannel::Create(
        world, kStepChannelRequestBytes,
        static_cast<size_t>(load.model.max_logit_rows) * load.vocab_size * sizeof(float));
    if (made.ok()) channel = *std::move(made);
  }
  std::vector<char> serves_channel(world, 0);
  absl::Mutex progress_mu;
  absl::Status loaded = ForAllRanks(world, options.load_timeout, options.cluster_secret,
                                    [&](int r, grpc::ClientContext* ctx) {
    return exec->LoadRank(r, options.rendezvous_prefix, channel.valid() ? channel.name() : "",
                          ctx, [&](const wpb::LoadProgress& p) {
                            serves_channel[r] = p.ready() && p.step_channel();
                            absl::MutexLock lock(&progress_mu);
                            if (on_progress) on_progress(p);
                          });
  }, options.keep_loading);
  if (channel.valid()) {
    // Every rank that will ever open it has: the name can go (the memory stays mapped).
    (void)channel.Unlink();
    if (loaded.ok() && std::count(serves_channel.begin(), serves_channel.end(), 1) == world) {
      exec->channel_ = std::move(channel);
    }
  }
  if (!loaded.ok()) return loaded;
  return exec;
}

absl::Status RemoteExecutor::LoadRank(int r, const std::string& rendezvous_prefix,
                                      const std::string& step_channel, grpc::ClientContext* ctx,
                                      const LoadProgressCallback& on_progress) {
  wpb::LoadRequest req;
  ToLoadRequest(load_, &req);
  req.set_rank(r);
  req.set_comm_kind(world_size() == 1 ? "single" : options_.comm_kind);
  req.set_backend(options_.backend);
  req.set_device_ordinal(options_.device_ordinals.empty() ? r : options_.device_ordinals[r]);
  req.set_rendezvous_dir(options_.rendezvous_dir);
  req.set_rendezvous_prefix(rendezvous_prefix);
  req.set_step_channel(step_channel);
  ctx->set_wait_for_ready(true);  // the rank process may still be starting its server
  auto reader = stubs_[r]->Load(ctx, req);
  wpb::LoadProgress p;
  while (reader->Read(&p)) {
    if (p.ready()) {
      weight_bytes_[r] = p.weight_bytes();
      kv_cache_bytes_[r] = p.kv_cache_bytes();
      draft_weight_bytes_[r] = p.draft_weight_bytes();
      draft_kv_cache_bytes_[r] = p.draft_kv_cache_bytes();
    }
    if (on_progress) on_progress(p);
  }
  grpc::Status s = reader->Finish();
  return s.ok() ? absl::OkStatus() : RankError(r, addresses_[r], s);
}

absl::Status RemoteExecutor::Recover(const absl::Status& failure) {
  if (!options_.replace_rank) return ModelExecutor::Recover(failure);
  const absl::Time deadline = absl::Now() + options_.rank_replace_timeout;
  std::vector<int> gone;
  for (const auto& [r, why] : SilentRankIds(AllRanks(world_size()))) gone.push_back(r);
  if (gone.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("every rank answers; nothing to replace after: ", failure.message()));
  }
  for (int r : gone) {
    absl::StatusOr<std::string> address = options_.replace_rank(r, deadline - absl::Now());
    if (!address.ok()) {
      return absl::UnavailableError(absl::StrCat("rank ", r, " (", addresses_[r],
                                                 ") is gone and was not replaced: ",
                                                 address.status().message()));
    }
    absl::WriterMutexLock lock(&stubs_mu_);
    addresses_[r] = *address;
    stubs_[r] = NewWorkerStub(*address);
  }
  // The group re-forms under a fresh prefix, all at once: the successors load their shards,
  // the others keep theirs and regroup. The successors do not join the step channel: steps
  // go over gRPC from now on.
  const std::string prefix = absl::StrCat(options_.rendezvous_prefix, "-r", ++regroups_);
  {
    absl::MutexLock lock(&channel_mu_);
    channel_ = StepChannel();
  }
  held_step_id_ = -1;
  return ForAllRanks(world_size(), deadline - absl::Now(), options_.cluster_secret,
                     [&](int r, grpc::ClientContext* ctx) {
    if (std::find(gone.begin(), gone.end(), r) != gone.end()) {
      return LoadRank(r, prefix, "", ctx, nullptr);
    }
    wpb::RegroupRequest req;
    req.set_rendezvous_prefix(prefix);
    wpb::RegroupResponse resp;
    grpc::Status s = stubs_[r]->Regroup(ctx, req, &resp);
    return s.ok() ? absl::OkStatus() : RankError(r, addresses_[r], s);
  });
}

class RemoteExecutor::Draft final : public ModelExecutor {
 public:
  explicit Draft(RemoteExecutor* target) : target_(target) {}
  absl::StatusOr<StepResult> Execute(const StepBatch& batch) override {
    return target_->ExecuteModel(batch, /*draft=*/true);
  }
  absl::StatusOr<std::vector<SequenceSamples>> Sample(const StepResult& step,
                                                      const StepSampling& sampling) override {
    return target_->Sample(step, sampling);
  }
  int64_t vocab_size() const override { return target_->vocab_size(); }
  std::string Describe() const override {
    return absl::StrCat(target_->load_.draft->path, " on the same ",
                        target_->world_size(), " rank(s)");
  }

 private:
  RemoteExecutor* const target_;
};

std::unique_ptr<ModelExecutor> RemoteExecutor::DraftExecutor() {
  return std::make_unique<Draft>(this);
}

absl::StatusOr<StepResult> RemoteExecutor::Execute(const StepBatch& batch) {
  return ExecuteModel(batch, /*draft=*/false);
}

absl::StatusOr<StepResult> RemoteExecutor::ExecuteModel(const StepBatch& batch, bool draft) {
  const int64_t step_id = next_step_id_++;
  wpb::StepRequest req = ToProto(batch, step_id);
  req.set_draft(draft);
  // The logits stay on the sampling rank, which samples them (Sample): the target's, and a
  // draft model's, whose proposals (DraftModelProposer) are drawn there too. None come back.
  req.set_hold_logits(true);
  held_step_id_ = -1;
  const auto held = [&](StepResult r) {
    r.logits_held = true;
    held_step_id_ = step_id;
    return r;
  };
  if (channel_.valid()) {
    const std::string bytes = req.SerializeAsString();
    if (channel_.Fits(bytes.size())) {
      TP_ASSIGN_OR_RETURN(StepResult r, ExecuteOnChannel(bytes));
      return held(std::move(r));
    }
  }
  std::vector<wpb::StepResponse> responses(world_size());
  bool named = false;  // the step's own probe named the silent ranks: no second probe
  if (absl::Status s = StepAllRanks(req, responses, &named); !s.ok()) {
    return named ? s : NameSilentRanks(s);
  }
  StepResult result;
  result.vocab_size = load_.vocab_size;
  if (const size_t bytes = responses[load_.sampling_rank()].logits().size(); bytes != 0) {
    return absl::InternalError(absl::StrCat("rank ", load_.sampling_rank(), " returned ", bytes,
                                            " bytes of logits for a step whose logits it holds"));
  }
  result.compute_s = responses[0].compute_s();
  result.allreduce_s = responses[0].allreduce_s();
  for (const wpb::StepResponse& r : responses) result.rank_compute_s.push_back(r.compute_s());
  for (const wpb::StepResponse& r : responses) {  // each stage's TP rank 0 reports its layers
    ExpertLoad load;
    load.tokens.assign(r.expert_tokens().begin(), r.expert_tokens().end());
    load.layers = r.expert_layers();
    load.imbalance_sum = r.expert_imbalance_sum();
    result.expert_load.Add(load);
  }
  result.decoded_weight_bytes = responses[0].decoded_weight_bytes();
  return held(std::move(result));
}

absl::StatusOr<std::vector<SequenceSamples>> RemoteExecutor::Sample(
    const StepResult& step, const StepSampling& sampling) {
  if (!step.logits_held) return ModelExecutor::Sample(step, sampling);
  if (sampling.sequences.empty()) return std::vector<SequenceSamples>();  // nothing to draw
  if (held_step_id_ < 0) {
    return absl::FailedPreconditionError("Sample: no step's logits are held on the ranks");
  }
  wpb::StepRequest req;
  req.set_step_id(held_step_id_);
  held_step_id_ = -1;  // sampled once
  *req.mutable_sample() = ToProto(sampling);
  wpb::SampleResponse answer;
  const std::string bytes = channel_.valid() ? req.SerializeAsString() : std::string();
  if (channel_.valid() && channel_.Fits(bytes.size())) {
    channel_.Post(bytes);
    absl::Status s = channel_.AwaitAll(absl::Now() + options_.step_timeout,
                                       options_.channel_heartbeat_timeout);
    if (!s.ok()) {
      return NameSilentRanks(
          absl::UnavailableError(absl::StrCat("step channel (sampling): ", s.message())));
    }
    const std::string_view area = channel_.result_bytes(load_.sampling_rank());
    if (!answer.ParseFromArray(area.data(), static_cast<int>(area.size()))) {
      return absl::InternalError("rank 0's sample answer on the step channel does not parse");
    }
  } else {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + options_.step_timeout));
    AttachClusterSecret(&context, options_.cluster_secret);
    wpb::StepResponse response;
    const int rank = load_.sampling_rank();
    const grpc::Status st = stubs_[rank]->Step(&context, req, &response);
    if (!st.ok()) {
      return NameSilentRanks(RankError(rank, addresses_[rank], st));
    }
    answer = std::move(*response.mutable_samples());
  }
  absl::StatusOr<std::vector<SequenceSamples>> out = FromProto(answer);
  if (out.ok() && out->size() != sampling.sequences.size()) {
    return absl::InternalError(absl::StrCat("rank 0 sampled ", out->size(),
                                            " sequences, asked for ",
                                            sampling.sequences.size()));
  }
  return out;
}

absl::StatusOr<StepResult> RemoteExecutor::ExecuteOnChannel(const std::string& request) {
  channel_.Post(request);
  absl::Status s = channel_.AwaitAll(absl::Now() + options_.step_timeout,
                                     options_.channel_heartbeat_timeout);
  if (!s.ok()) {
    return NameSilentRanks(absl::UnavailableError(absl::StrCat("step channel: ", s.message())));
  }
  StepResult result;
  result.vocab_size = load_.vocab_size;
  if (const size_t floats = channel_.logits(load_.sampling_rank()).size(); floats != 0) {
    return absl::InternalError(absl::StrCat("rank 0 returned ", floats,
                                            " floats of logits for a step whose logits it holds"));
  }
  result.compute_s = channel_.compute_s(0);
  result.allreduce_s = channel_.allreduce_s(0);
  for (int r = 0; r < world_size(); ++r) {
    result.rank_compute_s.push_back(channel_.compute_s(r));
  }
  result.expert_load = channel_.expert_load();
  result.decoded_weight_bytes = channel_.decoded_weight_bytes();
  return result;
}

absl::Status RemoteExecutor::StepAllRanks(const wpb::StepRequest& req,
                                          std::vector<wpb::StepResponse>& responses,
                                          bool* named) {
  // Every rank's call in flight at once through gRPC's callback API: no thread per rank and
  // step (ForAllRanks's), whose creation a busy host delays. The first failure cancels the
  // other calls, so nobody waits on a dead peer.
  const int world = world_size();
  std::vector<grpc::ClientContext> contexts(world);
  const auto deadline = absl::ToChronoTime(absl::Now() + options_.step_timeout);
  for (grpc::ClientContext& c : contexts) {
    c.set_deadline(deadline);
    AttachClusterSecret(&c, options_.cluster_secret);
  }
  absl::Mutex mu;
  int pending = world;
  std::vector<char> answered(world, 0);
  absl::Status first_error;
  // Outside the lock: a cancelled call's callback may run inline and take it.
  const auto cancel_all_but = [&](int keep) {
    for (int other = 0; other < world; ++other) {
      if (other != keep) contexts[other].TryCancel();
    }
  };
  for (int r = 0; r < world; ++r) {
    stubs_[r]->async()->Step(&contexts[r], &req, &responses[r], [&, r](grpc::Status st) {
      bool cancel = false;
      {
        absl::MutexLock lock(&mu);
        if (!st.ok() && first_error.ok()) {
          first_error = RankError(r, addresses_[r], st);
          cancel = true;
        }
      }
      if (cancel) cancel_all_but(r);
      absl::MutexLock lock(&mu);
      answered[r] = 1;
      --pending;
    });
  }
  // A rank that is gone may fail no peer's collective: a later pipeline stage, whose earlier
  // stages have sent it their rows and answered. So while ranks are still out, each is asked
  // for a heartbeat every step_probe_interval; one that does not answer fails the step.
  mu.Lock();
  while (!mu.AwaitWithTimeout(absl::Condition(+[](int* p) { return *p == 0; }, &pending),
                              options_.step_probe_interval)) {
    if (!first_error.ok()) continue;  // the cancelled calls are finishing
    std::vector<int> out;
    for (int r = 0; r < world; ++r) {
      if (!answered[r]) out.push_back(r);
    }
    mu.Unlock();
    const std::vector<std::string> silent = SilentRanks(out);
    mu.Lock();
    if (silent.empty() || !first_error.ok()) continue;
    first_error = absl::UnavailableError(
        absl::StrCat(absl::StrJoin(silent, "; "), " during a step"));
    *named = true;
    mu.Unlock();
    cancel_all_but(-1);
    mu.Lock();
  }
  mu.Unlock();
  return first_error;
}

std::vector<std::pair<int, std::string>> RemoteExecutor::SilentRankIds(
    const std::vector<int>& ranks) const {
  // Every rank at once, none cancelled: all the silent ones are wanted, not the first. A
  // blocking call on a thread of its own per rank: each reply is parsed on the thread that
  // made the response, which a probe during a step (gRPC's executor threads busy with its
  // calls) keeps simple.
  const int n = static_cast<int>(ranks.size());
  std::vector<grpc::Status> results(n);
  const auto deadline = absl::ToChronoTime(absl::Now() + options_.failure_probe_timeout);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      grpc::ClientContext context;
      context.set_deadline(deadline);
      AttachClusterSecret(&context, options_.cluster_secret);
      wpb::HeartbeatResponse response;
      results[i] = stubs_[ranks[i]]->Heartbeat(&context, wpb::HeartbeatRequest(), &response);
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<std::pair<int, std::string>> silent;
  for (int i = 0; i < n; ++i) {
    if (results[i].ok()) continue;
    silent.emplace_back(ranks[i], absl::StrCat("rank ", ranks[i], " (", addresses_[ranks[i]],
                                               ") does not answer (", results[i].error_message(),
                                               ")"));
  }
  return silent;
}

std::vector<std::string> RemoteExecutor::SilentRanks(const std::vector<int>& ranks) const {
  std::vector<std::string> out;
  for (auto& [r, why] : SilentRankIds(ranks)) out.push_back(std::move(why));
  return out;
}

absl::Status RemoteExecutor::NameSilentRanks(const absl::Status& failure) const {
  const std::vector<std::string> silent = SilentRanks(AllRanks(world_size()));
  if (silent.empty()) return failure;
  return absl::UnavailableError(
      absl::StrCat(absl::StrJoin(silent, "; "), "; the step failed: ", failure.message()));
}

absl::Status RemoteExecutor::Ping(absl::Duration timeout) const {
  return ForAllRanks(world_size(), timeout, options_.cluster_secret,
                     [&](int r, grpc::ClientContext* ctx) {
    wpb::HeartbeatResponse resp;
    absl::ReaderMutexLock lock(&stubs_mu_);
    grpc::Status st = stubs_[r]->Heartbeat(ctx, wpb::HeartbeatRequest(), &resp);
    return st.ok() ? absl::OkStatus() : RankError(r, addresses_[r], st);
  });
}

void RemoteExecutor::ShutdownRanks() {
  ForAllRanks(world_size(), absl::Seconds(2), options_.cluster_secret,
              [&](int r, grpc::ClientContext* ctx) {
    wpb::ShutdownResponse resp;
    absl::ReaderMutexLock lock(&stubs_mu_);
    stubs_[r]->Shutdown(ctx, wpb::ShutdownRequest(), &resp);
    return absl::OkStatus();
  }).IgnoreError();
}

void RemoteExecutor::RankGone(int rank) {
  absl::MutexLock lock(&channel_mu_);
  if (channel_.valid() && rank >= 0 && rank < world_size()) channel_.MarkGone(rank);
}

std::string RemoteExecutor::Describe() const {
  absl::ReaderMutexLock lock(&stubs_mu_);
  return absl::StrCat(world_size(), " worker rank(s) over gRPC (", options_.comm_kind, "): ",
                      absl::StrJoin(addresses_, ", "));
}

}  // namespace tpserve
