#include "worker/rank_runtime.h"

#include "base/status_macros.h"
#include "base/str_cat.h"

namespace tpserve {
namespace {

absl::Status WithRank(int rank, const absl::Status& s) {
  return absl::Status(s.code(), StrCat("rank ", rank, ": ", s.message()));
}

// Collectives work on the memory the model's activations live in: host memory for the
// in-process, shm and Gloo communicators (and auto's choice), device memory (of the backend's
// GPU) for NCCL.
absl::Status CheckPairing(const RankRuntimeOptions& options, const Backend& backend) {
  const CommunicatorKind kind = options.comm.kind;
  const bool host_comm = CommunicatorUsesHostMemory(kind) && kind != CommunicatorKind::kSingleRank;
  if ((kind == CommunicatorKind::kNccl && backend.host_memory()) ||
      (host_comm && !backend.host_memory())) {
    return absl::InvalidArgumentError(StrCat(
        "communicator ", CommunicatorKindName(kind), " cannot serve the ", backend.name(),
        " backend: nccl needs a GPU backend, shm, gloo, auto and in_process a CPU one"));
  }
  if (kind == CommunicatorKind::kNccl &&
      options.comm.device_ordinal != options.backend.device_ordinal) {
    return absl::InvalidArgumentError(
        StrCat("communicator device_ordinal ", options.comm.device_ordinal,
               " differs from the backend's ", options.backend.device_ordinal));
  }
  return absl::OkStatus();
}

}  // namespace

RankRuntime::~RankRuntime() {
  // The model and cache hold backend memory: free it before the backend goes.
  cache_.reset();
  model_.reset();
  from_prev_.reset();
  to_next_.reset();
}

absl::StatusOr<std::unique_ptr<RankRuntime>> RankRuntime::Create(
    const ModelSpec& config, std::shared_ptr<const WeightSource> weights,
    const RankRuntimeOptions& options) {
  std::unique_ptr<RankRuntime> rt(new RankRuntime());
  rt->rank_ = options.comm.rank;
  rt->weights_ = std::move(weights);
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateBackend(options.backend);
  if (!backend.ok()) return WithRank(rt->rank_, backend.status());
  rt->backend_ = *std::move(backend);
  if (absl::Status s = CheckPairing(options, *rt->backend_); !s.ok()) {
    return WithRank(rt->rank_, s);
  }
  absl::StatusOr<std::unique_ptr<Communicator>> comm = rt->MakeOnStream(options.comm);
  if (!comm.ok()) return WithRank(rt->rank_, comm.status());
  rt->comm_ = std::make_unique<TimedCommunicator>(*std::move(comm));
  LlamaLoadOptions load = options.load;
  TP_ASSIGN_OR_RETURN(load.pipeline, rt->MakeLinks(options));
  absl::StatusOr<std::unique_ptr<LlamaModel>> model = LlamaModel::Load(
      config, *rt->weights_,
      ShardSpec{options.comm.rank, options.comm.world_size, options.expert_parallel,
                options.attention_dp, options.stage, options.num_stages},
      rt->backend_.get(), rt->comm_.get(), load);
  if (!model.ok()) return WithRank(rt->rank_, model.status());
  rt->model_ = *std::move(model);
  absl::StatusOr<std::unique_ptr<KvCache>> cache = KvCache::Create(
      rt->model_->KvShape(options.num_kv_blocks, options.block_size_tokens, options.kv_dtype),
      *rt->backend_);
  if (!cache.ok()) return WithRank(rt->rank_, cache.status());
  rt->cache_ = *std::move(cache);
  if (absl::Status s = rt->model_->ReserveAttention(options.kv_dtype, options.block_size_tokens);
      !s.ok()) {
    return WithRank(rt->rank_, s);
  }
  return rt;
}

absl::StatusOr<std::unique_ptr<Communicator>> RankRuntime::MakeOnStream(
    CommunicatorOptions options) const {
  // NCCL enqueues on the backend's stream, in order with the model's ops (no per-call sync).
  if (options.cuda_stream == nullptr) options.cuda_stream = backend_->stream();
  return MakeCommunicator(options);
}

absl::StatusOr<PipelineLinks> RankRuntime::MakeLinks(const RankRuntimeOptions& options) {
  const std::pair<const std::optional<CommunicatorOptions>*, std::unique_ptr<Communicator>*>
      links[] = {{&options.from_prev, &from_prev_}, {&options.to_next, &to_next_}};
  for (const auto& [link_options, link] : links) {
    link->reset();
    if (!link_options->has_value()) continue;
    absl::StatusOr<std::unique_ptr<Communicator>> made = MakeOnStream(**link_options);
    if (!made.ok()) {
      return WithRank(rank_, absl::Status(made.status().code(),
                                          StrCat("pipeline link: ", made.status().message())));
    }
    *link = *std::move(made);
  }
  return PipelineLinks{from_prev_.get(), to_next_.get()};
}

absl::Status RankRuntime::Regroup(const RankRuntimeOptions& options) {
  absl::Status s = [&]() -> absl::Status {
    if (!backend_->host_memory()) {
      // NCCL: the failed step's collectives may still wait on the lost peer on the backend's
      // stream, the rest of the step queued behind them. Destroying the aborted communicators
      // (ncclCommAbort) ends those kernels; then the stream drains and the backend drops its
      // recorded steps, which hold the old communicators. Only then are the new ones made.
      RequestAbort();
      comm_->Replace(nullptr);
      from_prev_.reset();
      to_next_.reset();
      if (absl::Status r = backend_->RecoverFromAbort(); !r.ok()) return WithRank(rank_, r);
    }
    absl::StatusOr<std::unique_ptr<Communicator>> comm = MakeOnStream(options.comm);
    if (!comm.ok()) return WithRank(rank_, comm.status());
    comm_->Replace(*std::move(comm));
    TP_ASSIGN_OR_RETURN(const PipelineLinks links, MakeLinks(options));
    return model_->SetPipelineLinks(links);
  }();
  // Half re-formed (or, on a GPU, without its old communicators), the rank must not step.
  unusable_ = s.ok() ? absl::OkStatus()
                     : absl::FailedPreconditionError(StrCat(
                           "rank ", rank_, " cannot step: its group was not re-formed (",
                           s.message(), ")"));
  return s;
}

absl::Status RankRuntime::AttachMtpDraft(RankRuntime& draft) {
  if (backend_->kind() != BackendKind::kCpu || draft.backend_->kind() != BackendKind::kCpu) {
    return WithRank(rank_, absl::UnimplementedError(
                               "--speculative=mtp on GPU ranks: the draft reads the target's "
                               "hidden states across the two backends' streams, not built yet"));
  }
  const KvCacheShape& kv = cache_->shape();
  absl::StatusOr<std::unique_ptr<KvCache>> store = KvCache::Create(
      HiddenStoreShape(model_->config(), kv.num_blocks, kv.block_size_tokens,
                       backend_->activation_dtype()),
      *backend_);
  if (!store.ok()) return WithRank(rank_, store.status());
  hidden_store_ = *std::move(store);
  TP_RETURN_IF_ERROR(model_->SetHiddenStore(hidden_store_.get()));
  return draft.model_->SetHiddenStore(hidden_store_.get());
}

absl::Status RankRuntime::Step(const StepBatch& batch, float* logits) {
  TP_RETURN_IF_ERROR(unusable_);
  absl::Status s = model_->Forward(batch, cache_.get(), logits);
  if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) RequestAbort();
  return s;
}

absl::Status RankRuntime::SampleHeld(const SamplingRows& rows, absl::Span<RowSample> out) {
  TP_RETURN_IF_ERROR(unusable_);
  absl::Status s = model_->SampleHeld(rows, out);
  if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) RequestAbort();
  return s;
}

void RankRuntime::RequestAbort() {
  backend_->RequestAbort();
  comm_->RequestAbort();
  for (Communicator* link : {from_prev_.get(), to_next_.get()}) {
    if (link != nullptr) link->RequestAbort();
  }
}

}  // namespace tpserve
