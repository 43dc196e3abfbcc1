#include "worker/local_executor.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/communicator_factory.h"
#include "comm/in_process_communicator.h"

namespace tpserve {

absl::StatusOr<std::unique_ptr<LocalExecutor>> LocalExecutor::Create(
    const ModelSpec& config, std::shared_ptr<const WeightSource> source,
    const LocalExecutorOptions& options) {
  if (options.tp_degree < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("tp_degree = ", options.tp_degree, " must be at least 1"));
  }
  std::unique_ptr<LocalExecutor> exec(new LocalExecutor());
  exec->vocab_size_ = config.vocab_size;
  exec->threads_per_rank_ = options.threads_per_rank;
  auto group = std::make_shared<InProcessGroup>(options.tp_degree);
  exec->ranks_.resize(options.tp_degree);
  // Build the ranks concurrently: each reads only its own slices, and the in-process
  // communicators of a group meet each other while they are made.
  std::vector<absl::Status> loaded(options.tp_degree);
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < options.tp_degree; ++r) {
      threads.emplace_back([&, r] {
        RankRuntimeOptions o;
        o.backend.kind = BackendKind::kCpu;
        o.backend.num_threads = options.threads_per_rank;
        o.comm.kind = options.tp_degree == 1 ? CommunicatorKind::kSingleRank
                                             : CommunicatorKind::kInProcess;
        o.comm.rank = r;
        o.comm.world_size = options.tp_degree;
        o.comm.in_process_group = group;
        o.load.max_step_tokens = options.max_step_tokens;
        o.load.max_logit_rows = options.max_logit_rows;
        o.load.max_context_tokens = options.max_context_tokens;
        o.load.formats = options.formats;
        o.load.scheme = options.scheme;
        o.load.reduction = options.reduction;
        o.num_kv_blocks = options.num_kv_blocks;
        o.block_size_tokens = options.block_size_tokens;
        o.kv_dtype = options.kv_dtype;
        absl::StatusOr<std::unique_ptr<RankRuntime>> rank = RankRuntime::Create(config, source, o);
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

LocalExecutor::~LocalExecutor() = default;

absl::StatusOr<StepResult> LocalExecutor::Execute(const StepBatch& batch) {
  const auto start = std::chrono::steady_clock::now();
  StepResult result;
  result.vocab_size = vocab_size_;
  result.logits.resize(static_cast<size_t>(batch.num_logit_rows()) * vocab_size_);
  const int tp = static_cast<int>(ranks_.size());
  if (tp == 1) {
    TP_RETURN_IF_ERROR(ranks_[0]->Step(batch, result.logits.data()));
  } else {
    // Every rank ends with the full logits (the LM head all-gathers); rank 0's are returned.
    std::vector<std::vector<float>> scratch(tp - 1, std::vector<float>(result.logits.size()));
    std::vector<absl::Status> status(tp);
    std::vector<std::thread> threads;
    for (int r = 1; r < tp; ++r) {
      threads.emplace_back([&, r] {
        status[r] = ranks_[r]->Step(batch, scratch[r - 1].data());
      });
    }
    status[0] = ranks_[0]->Step(batch, result.logits.data());
    for (auto& t : threads) t.join();
    for (const absl::Status& s : status) TP_RETURN_IF_ERROR(s);
  }
  result.compute_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.allreduce_s = ranks_[0]->comm().TakeSeconds();
  for (size_t r = 1; r < ranks_.size(); ++r) ranks_[r]->comm().TakeSeconds();
  return result;
}

std::string LocalExecutor::Describe() const {
  return absl::StrCat("local: ", ranks_.size(), " rank(s) x ", threads_per_rank_, " thread(s), ",
                      std::string(ranks_[0]->backend().name()));
}

MemoryFootprint LocalExecutor::footprint(int rank) const { return ranks_.at(rank)->footprint(); }

int64_t LocalExecutor::kv_cache_bytes(int rank) const { return ranks_.at(rank)->kv_cache_bytes(); }

}  // namespace tpserve
