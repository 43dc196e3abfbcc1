#include "worker/worker_service.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "coordinator/grpc_status.h"
#include "checkpoint/stored_formats.h"
#include "worker/comm/communicator_factory.h"

namespace tpserve {
namespace {
namespace wpb = ::tpserve::worker::v1;
}  // namespace

wpb::ShardAssignment ToAssignment(const ShardingPlan& plan) {
  wpb::ShardAssignment a;
  a.set_first_head(plan.first_head());
  a.set_num_heads(plan.num_local_heads());
  a.set_first_kv_head(plan.first_kv_head());
  a.set_num_kv_heads(plan.num_local_kv_heads());
  a.set_first_ffn_row(plan.first_ffn_row());
  a.set_num_ffn_rows(plan.local_intermediate_size());
  a.set_first_vocab_row(plan.first_vocab_row());
  a.set_num_vocab_rows(plan.num_local_vocab_rows());
  return a;
}

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

  // The coordinator said which slices to load; this rank's own plan must agree, or the two
  // were built from different models or code.
  TP_ASSIGN_OR_RETURN(WeightFormats formats,
                      ResolveWeightFormats(files_.stored_formats, request.weights(),
                                           files_.config, request.world_size()));
  TP_ASSIGN_OR_RETURN(ShardingPlan plan,
                      ShardingPlan::Create(files_.config, formats,
                                           {request.rank(), request.world_size()}));
  const wpb::ShardAssignment mine = ToAssignment(plan);
  if (mine.SerializeAsString() != request.assignment().SerializeAsString()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the coordinator assigned {", request.assignment().ShortDebugString(),
        "} but this rank's sharding plan is {", mine.ShortDebugString(), "}"));
  }

  RankRuntimeOptions o;
  TP_ASSIGN_OR_RETURN(o.backend.kind, ParseBackendKind(request.backend().empty()
                                                           ? "cpu" : request.backend()));
  o.backend.num_threads = std::max(1, request.num_threads());
  o.backend.device_ordinal = request.device_ordinal();
  TP_ASSIGN_OR_RETURN(o.comm.kind, ParseCommunicatorKind(request.comm_kind()));
  o.comm.rank = request.rank();
  o.comm.world_size = request.world_size();
  o.comm.store_dir = request.rendezvous_dir();
  o.comm.run_id = request.rendezvous_prefix();
  o.comm.device_ordinal = request.device_ordinal();
  o.comm.nccl_unique_id = request.nccl_unique_id();
  o.comm.timeout = absl::Milliseconds(request.collective_timeout_ms() > 0
                                          ? request.collective_timeout_ms() : 10000);
  o.load.max_step_tokens = request.max_step_tokens();
  o.load.max_logit_rows = request.max_logit_rows();
  o.load.formats = formats;
  o.load.scheme = files_.scheme;
  o.load.reduction =
      request.deterministic_tp() ? TpReduction::kDeterministic : TpReduction::kAllReduce;
  o.num_kv_blocks = request.num_kv_blocks();
  o.block_size_tokens = request.block_size_tokens();
  TP_ASSIGN_OR_RETURN(o.kv_dtype, ParseKvDtype(request.kv_dtype()));
  TP_ASSIGN_OR_RETURN(runtime_, RankRuntime::Create(files_.config, files_.weights, o));
  rank_ = request.rank();
  const MemoryFootprint fp = runtime_->footprint();
  progress.set_layers_loaded(static_cast<int32_t>(files_.config.num_layers));
  progress.set_ready(true);
  progress.set_weight_bytes(fp.weight_bytes_resident);
  progress.set_kv_cache_bytes(runtime_->kv_cache_bytes());
  writer->Write(progress);
  return absl::OkStatus();
}

grpc::Status WorkerService::Load(grpc::ServerContext*, const wpb::LoadRequest* request,
                                 grpc::ServerWriter<wpb::LoadProgress>* writer) {
  absl::MutexLock lock(&mu_);
  absl::Status s = LoadLocked(*request, writer);
  if (!s.ok()) {
    return ToGrpcStatus(absl::Status(
        s.code(), absl::StrCat("rank ", request->rank(), " failed to load: ", s.message())));
  }
  return grpc::Status::OK;
}

grpc::Status WorkerService::Step(grpc::ServerContext*, const wpb::StepRequest* request,
                                 wpb::StepResponse* response) {
  absl::MutexLock lock(&mu_);
  if (runtime_ == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "Step before Load");
  }
  const auto start = std::chrono::steady_clock::now();
  StepBatch batch;
  for (const wpb::SequenceChunk& c : request->chunks()) {
    SequenceStep& s = batch.sequences.emplace_back();
    s.token_ids.assign(c.token_ids().begin(), c.token_ids().end());
    s.start_position = c.start_position();
    s.block_table.assign(c.block_table().begin(), c.block_table().end());
  }
  const int64_t vocab = files_.config.vocab_size;
  const size_t logit_floats = static_cast<size_t>(NumLogitRows(batch)) * vocab;
  // Rank 0 writes its logits straight into the response (no copy of ~200 KB per row).
  float* logits = nullptr;
  if (rank_ == 0) {
    std::string* bytes = response->mutable_logits();
    bytes->resize(logit_floats * sizeof(float));
    logits = reinterpret_cast<float*>(bytes->data());
  } else {
    logits_.resize(logit_floats);
    logits = logits_.data();
  }
  absl::Status s = runtime_->Step(batch, logits);
  if (!s.ok()) {
    return ToGrpcStatus(absl::Status(s.code(), absl::StrCat("rank ", rank_, ": ", s.message())));
  }
  response->set_step_id(request->step_id());
  response->set_vocab_size(static_cast<int32_t>(vocab));
  response->set_allreduce_s(runtime_->comm().TakeSeconds());
  response->set_compute_s(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return grpc::Status::OK;
}

grpc::Status WorkerService::Heartbeat(grpc::ServerContext*, const wpb::HeartbeatRequest*,
                                      wpb::HeartbeatResponse* response) {
  // Must answer while a step runs, so it reads no model state.
  response->set_ready(true);
  return grpc::Status::OK;
}

grpc::Status WorkerService::Shutdown(grpc::ServerContext*, const wpb::ShutdownRequest*,
                                     wpb::ShutdownResponse*) {
  if (!shutdown_.HasBeenNotified()) shutdown_.Notify();
  return grpc::Status::OK;
}

}  // namespace tpserve
