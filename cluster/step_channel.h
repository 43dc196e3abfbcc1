// The coordinator's per-step call to ranks on its own host, through shared memory instead of a
// gRPC round trip: the serialized StepRequest in, each rank's status and rank 0's logits out
// (or, for a sample request, rank 0's serialized SampleResponse in the same area).
// gRPC stays for Load, Heartbeat and Shutdown, for ranks on other hosts, and for a request too
// large for the channel.
//
// A rank may also report how the step routed its tokens over a mixture of experts' experts
// (ExpertLoad: TP rank 0 of each pipeline stage, for its stage's layers), in an area of its
// own of `expert_capacity` counts; a rank whose model has more experts does not serve the
// channel (its steps stay on gRPC).
//
//   coordinator:  TP_ASSIGN_OR_RETURN(StepChannel ch, StepChannel::Create(3, 1 << 20, logits));
//                 (send ch.name() in every LoadRequest; once all ranks opened it: ch.Unlink())
//                 ch.Post(bytes);  TP_RETURN_IF_ERROR(ch.AwaitAll(deadline, absl::Seconds(2)));
//   rank r:       TP_ASSIGN_OR_RETURN(StepChannel ch, StepChannel::Open(name, r));
//                 while (ch.WaitRequest(&seq, &bytes, stop)) { ...; ch.Finish(seq, status, ...); }
//                 (and ch.Heartbeat() every ~100 ms from another thread)
//
// Why: on the 2-core VM this was built on, a gRPC unary Step cost 1.2-1.4 ms of control plane
// per step (each hop between gRPC's threads is a wake-up), a tenth of a SmolLM2 decode step.
// Waiting: a rank spins (yielding its core to anyone runnable) for a short while after a step,
// then sleeps on a futex; the coordinator sleeps on each rank's done word, which a rank wakes.
// Death: a rank's heartbeat (a timestamp written by a thread of its own) older than
// `heartbeat_timeout` fails AwaitAll with UNAVAILABLE naming the rank, so a killed or stopped
// rank never hangs the engine, whatever the step's deadline.
// Threading: the coordinator's calls come from one thread; a rank's WaitRequest/Finish from
// one thread and Heartbeat from any.
#ifndef TPSERVE_CLUSTER_STEP_CHANNEL_H_
#define TPSERVE_CLUSTER_STEP_CHANNEL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/shm_segment.h"
#include "step/executor.h"

namespace tpserve {

class StepChannel {
 public:
  // Experts a channel reports per step unless told otherwise: more than any released model
  // has (DeepSeek-V3 256, Kimi K2 384).
  static constexpr size_t kDefaultExpertCapacity = 1024;

  // A new channel for `world_size` ranks: requests of up to `request_capacity` bytes, logits
  // of up to `logits_capacity` bytes, the load of up to `expert_capacity` experts.
  static absl::StatusOr<StepChannel> Create(int world_size, size_t request_capacity,
                                            size_t logits_capacity,
                                            size_t expert_capacity = kDefaultExpertCapacity);
  // Rank `rank`'s view of the channel the coordinator created. INVALID_ARGUMENT for a rank
  // outside the channel's world or a segment that is not a step channel.
  static absl::StatusOr<StepChannel> Open(const std::string& name, int rank);

  StepChannel() = default;
  StepChannel(StepChannel&&) noexcept = default;
  StepChannel& operator=(StepChannel&&) noexcept = default;

  bool valid() const { return segment_.data() != nullptr; }
  const std::string& name() const { return segment_.name(); }
  absl::Status Unlink() { return segment_.Unlink(); }
  int world_size() const;

  // ---- Coordinator ----
  bool Fits(size_t request_bytes) const;
  // Publishes the next request. REQUIRES: Fits(request.size()), the previous one awaited.
  void Post(const std::string& request);
  // Waits until every rank has finished the last request. The first rank (in rank order) that
  // failed: its status as it reported it (a rank names itself); UNAVAILABLE naming a rank whose heartbeat is
  // older than heartbeat_timeout; DEADLINE_EXCEEDED naming the ranks still busy at `deadline`.
  absl::Status AwaitAll(absl::Time deadline, absl::Duration heartbeat_timeout);
  // After AwaitAll: what rank r reported, and rank 0's logits.
  double compute_s(int rank) const;
  double allreduce_s(int rank) const;
  // (Of the rank that writes the area, the sampling rank: 0 but with pipeline stages.)
  absl::Span<const float> logits(int rank = 0) const;
  // The same area as bytes: what rank 0 wrote there (a sample request's serialized answer).
  std::string_view result_bytes(int rank = 0) const;
  ExpertLoad expert_load() const;  // the sum of every rank's report
  // Rank `rank` is known to be gone (its process exited): its heartbeat reads as stale from now
  // on, so the AwaitAll in progress names it within one sleep (50 ms) rather than after the
  // heartbeat timeout. Any thread.
  void MarkGone(int rank);
  int64_t decoded_weight_bytes() const;  // rank 0's (Backend::TakeDecodedWeightBytes)

  // ---- Rank ----
  // Waits for a request newer than *seq and copies it into *request; false once `stop` is set
  // (checked at least every 50 ms).
  bool WaitRequest(uint32_t* seq, std::string* request, const std::atomic<bool>& stop);
  float* logits_area() const;
  size_t logits_capacity() const;
  size_t expert_capacity() const;
  // Reports the outcome of request `seq`; `logits_bytes` written to logits_area(), the
  // step's expert load and the weight bytes it decoded whole (rank 0).
  // REQUIRES: expert_load.tokens.size() <= expert_capacity().
  void Finish(uint32_t seq, const absl::Status& status, double compute_s, double allreduce_s,
              size_t logits_bytes, const ExpertLoad& expert_load = {},
              int64_t decoded_weight_bytes = 0);
  void Heartbeat();

 private:
  struct Header;
  struct RankSlot;
  StepChannel(ShmSegment segment, int rank);
  Header* header() const;
  RankSlot* slot(int rank) const;
  uint8_t* request_area() const;
  int64_t* expert_area(int rank) const;
  // Bytes of a channel with this header.
  static size_t SegmentBytes(size_t world_size, size_t request_capacity, size_t logits_capacity,
                             size_t expert_capacity);

  ShmSegment segment_;
  int rank_ = -1;  // -1: the coordinator
};

}  // namespace tpserve

#endif  // TPSERVE_CLUSTER_STEP_CHANNEL_H_
