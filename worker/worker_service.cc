#include "worker/worker_service.h"

#include <chrono>
#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/grpc_status.h"
#include "base/status_macros.h"
#include "cluster/secret.h"
#include "comm/communicator_factory.h"
#include "step/rank_load_proto.h"
#include "step/step_batch_proto.h"
#include "step/step_sampling.h"
#include "step/step_sampling_proto.h"
#include "worker/rank_load_options.h"

namespace tpserve {
namespace {
namespace wpb = ::tpserve::worker::v1;
}  // namespace

absl::Status WorkerService::LoadLocked(const wpb::LoadRequest& request,
                                       grpc::ServerWriter<wpb::LoadProgress>* writer) {
  if (runtime_ != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("rank ", rank_, " is already loaded"));
  }
  TP_ASSIGN_OR_RETURN(files_, OpenModelFiles(request.model_path()));
  wpb::LoadProgress progress;
  progress.set_rank(request.rank());
  progress.set_num_layers(static_cast<int32_t>(files_.config.num_layers));
  writer->Write(progress);  // opened; joining the group next

  TP_ASSIGN_OR_RETURN(const RankLoad load, RankLoadFromRequest(request));
  // Where this rank runs and how it meets its peers; what it loads is the RankLoad's.
  const auto place = [&](RankRuntimeOptions& o) -> absl::Status {
    TP_ASSIGN_OR_RETURN(o.backend.kind, ParseBackendKind(request.backend().empty()
                                                             ? "cpu" : request.backend()));
    o.backend.device_ordinal = request.device_ordinal();
    TP_ASSIGN_OR_RETURN(o.comm.kind, ParseCommunicatorKind(request.comm_kind()));
    o.comm.store_dir = request.rendezvous_dir();
    if (request.rendezvous_dir().empty()) o.comm.gloo_store = options_.rendezvous_store;
    o.comm.gloo_hostname = options_.gloo_hostname;
    o.comm.run_id = request.rendezvous_prefix();
    o.comm.device_ordinal = request.device_ordinal();
    return absl::OkStatus();
  };
  TP_ASSIGN_OR_RETURN(RankRuntimeOptions o, RankRuntimeOptionsFor(load, request.rank(), files_));
  TP_RETURN_IF_ERROR(place(o));
  placed_ = o;
  PlacePipeline(o);  // a stage's own group and its links, where the load has stages
  if (load.draft.has_value() && load.pipeline_stages > 1) {
    return absl::UnimplementedError(absl::StrCat(
        "a draft model with ", load.pipeline_stages,
        " pipeline stages: not supported (a draft runs on the target's ranks of one stage)"));
  }
  TP_ASSIGN_OR_RETURN(std::unique_ptr<RankRuntime> runtime,
                      RankRuntime::Create(files_.config, files_.weights, o));
  if (load.draft.has_value()) {
    // The draft: the same ranks, its own communicator (a rendezvous of its own), its KV cache
    // with a slot for every block of the target's.
    if (load.draft->mtp) {  // the target's own multi-token-prediction layer
      TP_ASSIGN_OR_RETURN(draft_files_, MtpDraftFiles(files_));
    } else {
      TP_ASSIGN_OR_RETURN(draft_files_, OpenModelFiles(load.draft->path));
    }
    if (draft_files_.config.vocab_size != files_.config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "draft model ", load.draft->path, " has ", draft_files_.config.vocab_size,
          " tokens in its vocabulary, the target ", files_.config.vocab_size));
    }
    TP_ASSIGN_OR_RETURN(RankRuntimeOptions d,
                        RankRuntimeOptionsFor(DraftLoad(load), request.rank(), draft_files_));
    TP_RETURN_IF_ERROR(place(d));
    d.comm.run_id = absl::StrCat(request.rendezvous_prefix(), "-draft");
    placed_draft_ = d;
    TP_ASSIGN_OR_RETURN(draft_runtime_,
                        RankRuntime::Create(draft_files_.config, draft_files_.weights, d));
    if (load.draft->mtp) TP_RETURN_IF_ERROR(runtime->AttachMtpDraft(*draft_runtime_));
    abortable_draft_.store(draft_runtime_.get());
    progress.set_draft_weight_bytes(draft_runtime_->footprint().weight_bytes_resident);
    progress.set_draft_kv_cache_bytes(draft_runtime_->kv_cache_bytes() +
                                      runtime->hidden_store_bytes());
  }
  runtime_ = std::move(runtime);
  abortable_runtime_.store(runtime_.get());
  rank_ = request.rank();
  sampling_rank_ = load.sampling_rank();
  const MemoryFootprint fp = runtime_->footprint();
  progress.set_layers_loaded(static_cast<int32_t>(files_.config.num_layers));
  progress.set_ready(true);
  progress.set_weight_bytes(fp.weight_bytes_resident);
  progress.set_kv_cache_bytes(runtime_->kv_cache_bytes());
  if (!request.step_channel().empty()) {
    // Without it the coordinator keeps to gRPC: a channel that will not open is no failure.
    absl::StatusOr<StepChannel> channel = StepChannel::Open(request.step_channel(), rank_);
    // A model with more experts than the channel reports stays on gRPC, where the whole load
    // fits, rather than report part of it.
    const size_t experts = static_cast<size_t>(
        files_.config.moe.enabled() ? files_.config.moe.routing.num_experts : 0);
    if (channel.ok() && experts <= channel->expert_capacity()) {
      channel_ = *std::move(channel);
      channel_thread_ = std::thread([this] { ServeChannel(); });
      heartbeat_thread_ = std::thread([this] { BeatChannel(); });
      progress.set_step_channel(true);
    }
  }
  writer->Write(progress);
  return absl::OkStatus();
}

WorkerService::~WorkerService() {
  stop_ = true;
  if (channel_thread_.joinable()) channel_thread_.join();
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
}

void WorkerService::BeatChannel() {
  while (!stop_.load()) {
    channel_.Heartbeat();
    absl::SleepFor(absl::Milliseconds(100));
  }
}

void WorkerService::ServeChannel() {
  uint32_t seq = 0;
  std::string bytes;
  wpb::StepRequest request;
  while (channel_.WaitRequest(&seq, &bytes, stop_)) {
    const auto start = std::chrono::steady_clock::now();
    absl::Status s;
    StepOutcome outcome;
    size_t logits_bytes = 0;
    if (!request.ParseFromString(bytes)) {
      s = absl::InvalidArgumentError("the step channel held an unparsable StepRequest");
    } else {
      absl::MutexLock lock(&mu_);
      wpb::SampleResponse samples;
      s = RunStepLocked(request, [&](size_t floats) -> absl::StatusOr<float*> {
            if (floats * sizeof(float) > channel_.logits_capacity()) {
              return absl::ResourceExhaustedError(absl::StrCat(
                  floats, " floats of logits exceed the step channel's ",
                  channel_.logits_capacity(), " bytes"));
            }
            logits_bytes = floats * sizeof(float);
            return channel_.logits_area();
          }, &outcome, &samples);
      if (s.ok() && request.has_sample() && rank_ == sampling_rank_) {
        // The answer travels serialized in the logits area (the logits stayed here).
        const size_t bytes = samples.ByteSizeLong();
        if (bytes > channel_.logits_capacity()) {
          s = absl::ResourceExhaustedError(absl::StrCat(
              "a sample answer of ", bytes, " bytes exceeds the step channel's ",
              channel_.logits_capacity(), " bytes"));
        } else {
          samples.SerializeWithCachedSizesToArray(
              reinterpret_cast<uint8_t*>(channel_.logits_area()));
          logits_bytes = bytes;
        }
      }
    }
    channel_.Finish(seq, s, std::chrono::duration<double>(
                                std::chrono::steady_clock::now() - start).count(),
                    outcome.allreduce_s, logits_bytes, outcome.load,
                    outcome.decoded_weight_bytes);
  }
}

grpc::Status WorkerService::Load(grpc::ServerContext* context, const wpb::LoadRequest* request,
                                 grpc::ServerWriter<wpb::LoadProgress>* writer) {
  if (grpc::Status s = CheckClusterSecret(*context, options_.cluster_secret); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  absl::Status s = LoadLocked(*request, writer);
  if (!s.ok()) {
    return ToGrpcStatus(absl::Status(
        s.code(), absl::StrCat("rank ", request->rank(), " failed to load: ", s.message())));
  }
  return grpc::Status::OK;
}

absl::Status WorkerService::RunStepLocked(
    const wpb::StepRequest& request,
    const std::function<absl::StatusOr<float*>(size_t)>& logits_for, StepOutcome* outcome,
    wpb::SampleResponse* samples) {
  if (runtime_ == nullptr) return absl::FailedPreconditionError("Step before Load");
  if (request.has_sample()) {  // sampling the logits of the last step, on rank 0 alone
    if (rank_ != sampling_rank_) return absl::OkStatus();
    return SampleHeldLocked(request, samples);
  }
  RankRuntime* runtime = runtime_.get();
  if (request.draft()) {
    if (draft_runtime_ == nullptr) {
      return absl::FailedPreconditionError("a draft step, but no draft model was loaded");
    }
    runtime = draft_runtime_.get();
  }
  TP_ASSIGN_OR_RETURN(const StepBatch batch, FromProto(request));
  const size_t logit_floats =
      static_cast<size_t>(batch.num_logit_rows()) * static_cast<size_t>(files_.config.vocab_size);
  float* logits = nullptr;  // only the sampling rank receives logits
  held_step_id_ = -1;
  const bool holds = rank_ == sampling_rank_ && request.hold_logits();
  held_on_backend_ = holds && (options_.always_sample_rows || runtime->PrefersSampleRows());
  if (holds && !held_on_backend_) {
    held_logits_.resize(logit_floats);
    logits = held_logits_.data();
  } else if (rank_ == sampling_rank_ && !holds) {
    TP_ASSIGN_OR_RETURN(logits, logits_for(logit_floats));
  }
  absl::Status s = runtime->Step(batch, logits);
  outcome->allreduce_s = runtime->comm().TakeSeconds();
  outcome->load = runtime->TakeExpertLoad();
  outcome->decoded_weight_bytes = runtime->TakeDecodedWeightBytes();
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat("rank ", rank_, ": ", s.message()));
  if (holds) {
    held_step_id_ = request.step_id();
    held_runtime_ = runtime;
  }
  return absl::OkStatus();
}

absl::Status WorkerService::SampleHeldLocked(const wpb::StepRequest& request,
                                             wpb::SampleResponse* samples) {
  if (held_step_id_ < 0 || held_step_id_ != request.step_id()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", rank_, ": a sample request for step ", request.step_id(),
        held_step_id_ < 0 ? std::string(", but no step's logits are held")
                          : absl::StrCat(", but the logits held are step ", held_step_id_, "'s")));
  }
  held_step_id_ = -1;  // sampled once
  TP_ASSIGN_OR_RETURN(const StepSampling sampling, FromProto(request.sample()));
  std::vector<SequenceSamples> out;
  if (held_on_backend_) {  // where the step left them (a GPU: on the device)
    TP_ASSIGN_OR_RETURN(const SamplingRows rows,
                        ToSamplingRows(files_.config.vocab_size, sampling));
    std::vector<RowSample> sampled(rows.rows.size());
    absl::Status s = held_runtime_->SampleHeld(rows, absl::MakeSpan(sampled));
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat("rank ", rank_, ": ", s.message()));
    TP_ASSIGN_OR_RETURN(out, FromRowSamples(sampling, sampled));
  } else {
    TP_ASSIGN_OR_RETURN(out, SampleStep(held_logits_, files_.config.vocab_size, sampling));
  }
  *samples = ToProto(out);
  return absl::OkStatus();
}

grpc::Status WorkerService::Step(grpc::ServerContext* context, const wpb::StepRequest* request,
                                 wpb::StepResponse* response) {
  if (grpc::Status s = CheckClusterSecret(*context, options_.cluster_secret); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  const auto start = std::chrono::steady_clock::now();
  StepOutcome outcome;
  // Rank 0 writes its logits straight into the response (no copy of ~200 KB per row).
  absl::Status s = RunStepLocked(*request, [&](size_t floats) -> absl::StatusOr<float*> {
        std::string* bytes = response->mutable_logits();
        bytes->resize(floats * sizeof(float));
        return reinterpret_cast<float*>(bytes->data());
      }, &outcome, response->mutable_samples());
  if (!s.ok()) return ToGrpcStatus(s);
  response->set_step_id(request->step_id());
  response->set_vocab_size(static_cast<int32_t>(files_.config.vocab_size));
  response->set_allreduce_s(outcome.allreduce_s);
  response->set_decoded_weight_bytes(outcome.decoded_weight_bytes);
  const ExpertLoad& load = outcome.load;
  if (!load.empty()) {
    response->mutable_expert_tokens()->Add(load.tokens.begin(), load.tokens.end());
    response->set_expert_layers(load.layers);
    response->set_expert_imbalance_sum(load.imbalance_sum);
  }
  response->set_compute_s(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return grpc::Status::OK;
}

grpc::Status WorkerService::Heartbeat(grpc::ServerContext* context, const wpb::HeartbeatRequest*,
                                      wpb::HeartbeatResponse* response) {
  if (grpc::Status s = CheckClusterSecret(*context, options_.cluster_secret); !s.ok()) return s;
  // Must answer while a step runs, so it reads no model state.
  response->set_ready(true);
  return grpc::Status::OK;
}

grpc::Status WorkerService::Regroup(grpc::ServerContext* context,
                                    const wpb::RegroupRequest* request, wpb::RegroupResponse*) {
  if (grpc::Status s = CheckClusterSecret(*context, options_.cluster_secret); !s.ok()) return s;
  // A step may be waiting on the lost rank (it holds mu_): end it first.
  if (RankRuntime* runtime = abortable_runtime_.load()) runtime->RequestAbort();
  if (RankRuntime* draft = abortable_draft_.load()) draft->RequestAbort();
  absl::MutexLock lock(&mu_);
  absl::Status s = [&]() -> absl::Status {
    if (runtime_ == nullptr) return absl::FailedPreconditionError("Regroup before Load");
    RankRuntimeOptions o = placed_;
    o.comm.run_id = request->rendezvous_prefix();
    PlacePipeline(o);
    TP_RETURN_IF_ERROR(runtime_->Regroup(o));
    if (draft_runtime_ != nullptr) {
      RankRuntimeOptions d = placed_draft_;
      d.comm.run_id = absl::StrCat(request->rendezvous_prefix(), "-draft");
      PlacePipeline(d);
      TP_RETURN_IF_ERROR(draft_runtime_->Regroup(d));
    }
    held_step_id_ = -1;  // the coordinator recomputes every sequence: no logits are wanted
    return absl::OkStatus();
  }();
  if (!s.ok()) {
    return ToGrpcStatus(
        absl::Status(s.code(), absl::StrCat("rank ", rank_, " failed to regroup: ", s.message())));
  }
  return grpc::Status::OK;
}

grpc::Status WorkerService::Shutdown(grpc::ServerContext* context, const wpb::ShutdownRequest*,
                                     wpb::ShutdownResponse*) {
  if (grpc::Status s = CheckClusterSecret(*context, options_.cluster_secret); !s.ok()) return s;
  if (RankRuntime* runtime = abortable_runtime_.load()) runtime->RequestAbort();
  if (RankRuntime* draft = abortable_draft_.load()) draft->RequestAbort();
  if (!shutdown_.HasBeenNotified()) shutdown_.Notify();
  return grpc::Status::OK;
}

}  // namespace tpserve
