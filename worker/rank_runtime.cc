#include "worker/rank_runtime.h"

#include "base/status_macros.h"
#include "formats/str_cat.h"

namespace tpserve {
namespace {

absl::Status WithRank(int rank, const absl::Status& s) {
  return absl::Status(s.code(), StrCat("rank ", rank, ": ", s.message()));
}

}  // namespace

RankRuntime::~RankRuntime() {
  // The model and cache hold backend memory: free it before the backend goes.
  cache_.reset();
  model_.reset();
}

absl::StatusOr<std::unique_ptr<RankRuntime>> RankRuntime::Create(
    const LlamaConfig& config, std::shared_ptr<const WeightSource> weights,
    const RankRuntimeOptions& options) {
  std::unique_ptr<RankRuntime> rt(new RankRuntime());
  rt->rank_ = options.comm.rank;
  rt->weights_ = std::move(weights);
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateBackend(options.backend);
  if (!backend.ok()) return WithRank(rt->rank_, backend.status());
  rt->backend_ = *std::move(backend);
  absl::StatusOr<std::unique_ptr<Communicator>> comm = MakeCommunicator(options.comm);
  if (!comm.ok()) return WithRank(rt->rank_, comm.status());
  rt->comm_ = std::make_unique<TimedCommunicator>(*std::move(comm));
  absl::StatusOr<std::unique_ptr<LlamaModel>> model = LlamaModel::Load(
      config, *rt->weights_, ShardSpec{options.comm.rank, options.comm.world_size},
      rt->backend_.get(), rt->comm_.get(), options.load);
  if (!model.ok()) return WithRank(rt->rank_, model.status());
  rt->model_ = *std::move(model);
  absl::StatusOr<std::unique_ptr<KvCache>> cache = KvCache::Create(
      rt->model_->KvShape(options.num_kv_blocks, options.block_size_tokens, options.kv_dtype),
      *rt->backend_);
  if (!cache.ok()) return WithRank(rt->rank_, cache.status());
  rt->cache_ = *std::move(cache);
  return rt;
}

absl::Status RankRuntime::Step(const StepBatch& batch, float* logits) {
  return model_->Forward(batch, cache_.get(), logits);
}

}  // namespace tpserve
