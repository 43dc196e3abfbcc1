// One tensor-parallel rank as a gRPC service (tpserve.worker.v1.Worker): it joins its group,
// loads only its own slices of the checkpoint, keeps its slice of the paged KV cache, and runs
// each step the coordinator sends in lockstep with the other ranks. Rank 0 returns the logits.
//
//   WorkerService service({.cluster_secret = secret, .rendezvous_store = &client.store()});
//   builder.RegisterService(&service);  ...  service.WaitForShutdown();
//
// Every call must carry the cluster secret (cluster/secret.h); one without it, or with another,
// gets UNAUTHENTICATED and changes nothing.
// Threading: gRPC handler threads; Load and Step are serialized by a mutex (one step at a time,
// as the model requires).
#ifndef TPSERVE_WORKER_WORKER_SERVICE_H_
#define TPSERVE_WORKER_WORKER_SERVICE_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "checkpoint/model_files.h"
#include "cluster/step_channel.h"
#include "gloo/rendezvous/store.h"
#include "model/sharding.h"
#include "proto/worker.grpc.pb.h"
#include "worker/rank_runtime.h"
#include "worker/shard_assignment.h"  // IWYU pragma: export (ToAssignment)

namespace tpserve {

struct WorkerServiceOptions {
  // What every call must carry; empty refuses every call.
  std::string cluster_secret;
  // Where ranks meet when LoadRequest.rendezvous_dir is empty: the coordinator's store
  // (cluster/control_client.h). Must outlive the service.
  gloo::rendezvous::Store* rendezvous_store = nullptr;
  // The address Gloo listens on and gives its peers: the one they reach this rank at.
  std::string gloo_hostname = "127.0.0.1";
  // The sampling rank samples a held step's logits where they are (Backend::SampleRows) when
  // its backend prefers that (a GPU: they never leave the device); with this, always (a CPU
  // rank then runs the device sampler's passes on the host: tests of that path).
  bool always_sample_rows = false;
};

class WorkerService final : public tpserve::worker::v1::Worker::Service {
 public:
  explicit WorkerService(WorkerServiceOptions options) : options_(std::move(options)) {}
  // Stops the step channel's threads, if any.
  ~WorkerService() override;

  grpc::Status Load(grpc::ServerContext* context, const tpserve::worker::v1::LoadRequest* request,
                    grpc::ServerWriter<tpserve::worker::v1::LoadProgress>* writer) override;
  grpc::Status Step(grpc::ServerContext* context, const tpserve::worker::v1::StepRequest* request,
                    tpserve::worker::v1::StepResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context,
                         const tpserve::worker::v1::HeartbeatRequest* request,
                         tpserve::worker::v1::HeartbeatResponse* response) override;
  // Also aborts the step in flight, if any (RankRuntime::RequestAbort): a rank told to exit
  // must not wait out a collective whose peers are gone.
  grpc::Status Shutdown(grpc::ServerContext* context,
                        const tpserve::worker::v1::ShutdownRequest* request,
                        tpserve::worker::v1::ShutdownResponse* response) override;
  // A rank was replaced: aborts the step in flight (stuck on the lost rank's collectives),
  // then re-forms the communicators under the request's prefix (RankRuntime::Regroup), the
  // draft's too; the weights stay.
  grpc::Status Regroup(grpc::ServerContext* context,
                       const tpserve::worker::v1::RegroupRequest* request,
                       tpserve::worker::v1::RegroupResponse* response) override;

  // Blocks until a Shutdown call arrives.
  void WaitForShutdown() { shutdown_.WaitForNotification(); }
  bool shutdown_requested() const { return shutdown_.HasBeenNotified(); }

 private:
  // One step: logits_for(floats) gives the buffer the sampling rank's logits go to (called
  // there only, and not when the request holds them: the other ranks receive no logits);
  // its outcome (StepOutcome) comes back too. A sample request (StepRequest.sample) runs no step: the sampling rank samples the
  // logits it holds into `samples`, the others do nothing.
  // What a step reports besides its logits.
  struct StepOutcome {
    double allreduce_s = 0;        // in collectives
    ExpertLoad load;               // how it routed its tokens (mixtures of experts)
    int64_t decoded_weight_bytes = 0;  // Backend::TakeDecodedWeightBytes
  };
  absl::Status RunStepLocked(const tpserve::worker::v1::StepRequest& request,
                             const std::function<absl::StatusOr<float*>(size_t)>& logits_for,
                             StepOutcome* outcome, tpserve::worker::v1::SampleResponse* samples)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The sample request `request` on the logits held from its step (FAILED_PRECONDITION
  // naming both steps when another step's, or none, are held); SampleStep's errors.
  absl::Status SampleHeldLocked(const tpserve::worker::v1::StepRequest& request,
                                tpserve::worker::v1::SampleResponse* samples)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Serves the step channel until stop_ is set; and its heartbeat.
  void ServeChannel();
  void BeatChannel();
  absl::Status LoadLocked(const tpserve::worker::v1::LoadRequest& request,
                          grpc::ServerWriter<tpserve::worker::v1::LoadProgress>* writer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const WorkerServiceOptions options_;
  absl::Mutex mu_;
  int rank_ ABSL_GUARDED_BY(mu_) = -1;
  // Where the runtimes were placed at load (before their stages': PlacePipeline), for Regroup.
  RankRuntimeOptions placed_ ABSL_GUARDED_BY(mu_);
  RankRuntimeOptions placed_draft_ ABSL_GUARDED_BY(mu_);
  // The rank that ends a step with the logits (RankLoad::sampling_rank: the last stage's
  // first).
  int sampling_rank_ ABSL_GUARDED_BY(mu_) = kSamplingRank;
  ModelFiles files_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<RankRuntime> runtime_ ABSL_GUARDED_BY(mu_);
  // runtime_, for Shutdown to abort a step in flight without taking mu_ (which the step holds).
  std::atomic<RankRuntime*> abortable_runtime_{nullptr};
  // Speculative decoding's draft model, when the LoadRequest names one; and for Shutdown.
  ModelFiles draft_files_ ABSL_GUARDED_BY(mu_);  // its weights outlive the runtime's views
  std::unique_ptr<RankRuntime> draft_runtime_ ABSL_GUARDED_BY(mu_);
  std::atomic<RankRuntime*> abortable_draft_{nullptr};
  // The sampling rank: the logits of step held_step_id_ (-1: none), kept for its sample
  // request (StepRequest.hold_logits).
  std::vector<float> held_logits_ ABSL_GUARDED_BY(mu_);
  // Whether the held step's logits stayed on the rank's backend (RankRuntime::SampleHeld)
  // rather than in held_logits_.
  bool held_on_backend_ ABSL_GUARDED_BY(mu_) = false;
  RankRuntime* held_runtime_ ABSL_GUARDED_BY(mu_) = nullptr;  // the model that ran that step
  int64_t held_step_id_ ABSL_GUARDED_BY(mu_) = -1;
  absl::Notification shutdown_;
  StepChannel channel_;  // set once by Load, before the threads start
  std::atomic<bool> stop_{false};
  std::thread channel_thread_;
  std::thread heartbeat_thread_;
};

}  // namespace tpserve

#endif  // TPSERVE_WORKER_WORKER_SERVICE_H_
