#include "worker/local_executor.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "checkpoint/stored_formats.h"
#include "comm/communicator_factory.h"
#include "comm/in_process_communicator.h"
#include "worker/rank_load_options.h"

namespace tpserve {

absl::StatusOr<std::unique_ptr<LocalExecutor>> LocalExecutor::Create(const ModelFiles& files,
                                                                     const RankLoad& load) {
  if (load.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("world_size = ", load.world_size, " must be at least 1"));
  }
  const int tp = load.world_size, world = load.total_ranks();
  std::unique_ptr<LocalExecutor> exec(new LocalExecutor());
  exec->vocab_size_ = files.config.vocab_size;
  exec->threads_per_rank_ = std::max(1, load.threads_per_rank);
  exec->sampling_rank_ = load.sampling_rank();
  // A group per pipeline stage, and a two-rank link per stage boundary and tensor-parallel
  // rank (link s, rank t at s * tp + t).
  std::vector<std::shared_ptr<InProcessGroup>> groups, links;
  for (int s = 0; s < load.pipeline_stages; ++s) {
    groups.push_back(std::make_shared<InProcessGroup>(tp));
    for (int t = 0; s > 0 && t < tp; ++t) links.push_back(std::make_shared<InProcessGroup>(2));
  }
  exec->ranks_.resize(world);
  // Build the ranks concurrently: each reads only its own slices, and the in-process
  // communicators of a group meet each other while they are made.
  std::vector<absl::Status> loaded(world);
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        absl::StatusOr<RankRuntimeOptions> o = RankRuntimeOptionsFor(load, r, files);
        if (!o.ok()) {
          loaded[r] = o.status();
          return;
        }
        o->backend.kind = BackendKind::kCpu;
        o->comm.kind = world == 1 ? CommunicatorKind::kSingleRank : CommunicatorKind::kInProcess;
        PlacePipeline(*o);
        o->comm.in_process_group = groups[o->stage];
        const int t = o->comm.rank;
        if (o->from_prev) o->from_prev->in_process_group = links[(o->stage - 1) * tp + t];
        if (o->to_next) o->to_next->in_process_group = links[o->stage * tp + t];
        absl::StatusOr<std::unique_ptr<RankRuntime>> rank =
            RankRuntime::Create(files.config, files.weights, *o);
        if (!rank.ok()) {
          loaded[r] = rank.status();
          return;
        }
        exec->ranks_[r] = *std::move(rank);
      });
    }
    for (auto& t : threads) t.join();
  }
  for (const absl::Status& s : loaded) TP_RETURN_IF_ERROR(s);
  return exec;
}

absl::StatusOr<std::unique_ptr<LocalExecutor>> LocalExecutor::Create(
    const ModelSpec& config, std::shared_ptr<const WeightSource> source, const RankLoad& load) {
  ModelFiles files;
  files.config = config;
  files.weights = std::move(source);
  TP_ASSIGN_OR_RETURN(files.stored_formats,
                      StoredWeightFormats(*files.weights, files.scheme, config));
  return Create(files, load);
}

LocalExecutor::~LocalExecutor() = default;

absl::StatusOr<StepResult> LocalExecutor::Execute(const StepBatch& batch) {
  const auto start = std::chrono::steady_clock::now();
  StepResult result;
  result.vocab_size = vocab_size_;
  result.logits.resize(static_cast<size_t>(batch.num_logit_rows()) * vocab_size_);
  const int world = static_cast<int>(ranks_.size());
  if (world == 1) {
    TP_RETURN_IF_ERROR(ranks_[0]->Step(batch, result.logits.data()));
  } else {
    // Only the sampling rank receives the logits (the LM head gathers to it); the others get
    // no buffer.
    std::vector<absl::Status> status(world);
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      if (r == sampling_rank_) continue;
      threads.emplace_back([&, r] { status[r] = ranks_[r]->Step(batch, nullptr); });
    }
    status[sampling_rank_] = ranks_[sampling_rank_]->Step(batch, result.logits.data());
    for (auto& t : threads) t.join();
    for (const absl::Status& s : status) TP_RETURN_IF_ERROR(s);
  }
  result.compute_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.allreduce_s = ranks_[0]->comm().TakeSeconds();
  result.decoded_weight_bytes = ranks_[0]->TakeDecodedWeightBytes();
  for (size_t r = 1; r < ranks_.size(); ++r) {
    ranks_[r]->comm().TakeSeconds();
    ranks_[r]->TakeDecodedWeightBytes();
  }
  for (const std::unique_ptr<RankRuntime>& rank : ranks_) {
    result.expert_load.Add(rank->TakeExpertLoad());  // each stage's layers, once
  }
  return result;
}

std::string LocalExecutor::Describe() const {
  return absl::StrCat("local: ", ranks_.size(), " rank(s) x ", threads_per_rank_, " thread(s), ",
                      std::string(ranks_[0]->backend().name()));
}

MemoryFootprint LocalExecutor::footprint(int rank) const { return ranks_.at(rank)->footprint(); }

int64_t LocalExecutor::kv_cache_bytes(int rank) const { return ranks_.at(rank)->kv_cache_bytes(); }

}  // namespace tpserve
