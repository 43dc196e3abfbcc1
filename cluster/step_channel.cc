#include "cluster/step_channel.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "comm/shm_layout.h"

namespace tpserve {
namespace {

constexpr uint32_t kMagic = 0x54505343;  // "TPSC"
constexpr size_t kLine = 64;
constexpr size_t kMessageBytes = 512;
// A rank spins (yielding) this long for the next request before it sleeps: the coordinator
// samples and posts within a few hundred microseconds of the last step's end.
constexpr absl::Duration kRankSpin = absl::Microseconds(500);
constexpr absl::Duration kMaxSleep = absl::Milliseconds(50);

size_t RoundUp(size_t bytes) { return (bytes + kLine - 1) / kLine * kLine; }

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool Reached(uint32_t have, uint32_t want) { return static_cast<int32_t>(have - want) >= 0; }

}  // namespace

struct StepChannel::Header {
  uint32_t magic;
  uint32_t world_size;
  uint64_t request_capacity;
  uint64_t logits_capacity;
  uint64_t expert_capacity;
  alignas(kLine) std::atomic<uint32_t> request_seq;
  uint32_t request_bytes;
};

struct alignas(kLine) StepChannel::RankSlot {
  std::atomic<uint32_t> done_seq;
  std::atomic<int64_t> heartbeat_ns;
  int32_t code;
  uint32_t message_bytes;
  double compute_s;
  double allreduce_s;
  uint64_t logits_bytes;
  uint32_t num_experts;  // counts in this rank's expert area (0: it reports none)
  int64_t expert_layers;
  double expert_imbalance_sum;
  int64_t decoded_weight_bytes;
  char message[kMessageBytes];
};

static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<int64_t>::is_always_lock_free);

StepChannel::StepChannel(ShmSegment segment, int rank)
    : segment_(std::move(segment)), rank_(rank) {}

StepChannel::Header* StepChannel::header() const {
  return static_cast<Header*>(segment_.data());
}

StepChannel::RankSlot* StepChannel::slot(int rank) const {
  return reinterpret_cast<RankSlot*>(static_cast<uint8_t*>(segment_.data()) +
                                     RoundUp(sizeof(Header))) +
         rank;
}

uint8_t* StepChannel::request_area() const {
  return reinterpret_cast<uint8_t*>(slot(header()->world_size));
}

float* StepChannel::logits_area() const {
  return reinterpret_cast<float*>(request_area() + RoundUp(header()->request_capacity));
}

int StepChannel::world_size() const { return static_cast<int>(header()->world_size); }
size_t StepChannel::logits_capacity() const { return header()->logits_capacity; }

int64_t* StepChannel::expert_area(int rank) const {
  return reinterpret_cast<int64_t*>(reinterpret_cast<uint8_t*>(logits_area()) +
                                    RoundUp(header()->logits_capacity)) +
         static_cast<size_t>(rank) * header()->expert_capacity;
}

size_t StepChannel::SegmentBytes(size_t world_size, size_t request_capacity,
                                 size_t logits_capacity, size_t expert_capacity) {
  return RoundUp(sizeof(Header)) + world_size * sizeof(RankSlot) + RoundUp(request_capacity) +
         RoundUp(logits_capacity) + world_size * expert_capacity * sizeof(int64_t);
}

absl::StatusOr<StepChannel> StepChannel::Create(int world_size, size_t request_capacity,
                                                size_t logits_capacity, size_t expert_capacity) {
  if (world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("step channel world_size ", world_size,
                                                   " must be >= 1"));
  }
  const size_t bytes =
      SegmentBytes(world_size, request_capacity, logits_capacity, expert_capacity);
  absl::StatusOr<ShmSegment> segment = ShmSegment::Create("tpserve-step", bytes);
  if (!segment.ok()) return segment.status();
  StepChannel channel(*std::move(segment), -1);
  Header* h = channel.header();  // the segment is zero-filled: atomics start at 0
  h->world_size = static_cast<uint32_t>(world_size);
  h->request_capacity = request_capacity;
  h->logits_capacity = logits_capacity;
  h->expert_capacity = expert_capacity;
  const int64_t now = NowNs();
  for (int r = 0; r < world_size; ++r) channel.slot(r)->heartbeat_ns.store(now);
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kMagic;
  return channel;
}

absl::StatusOr<StepChannel> StepChannel::Open(const std::string& name, int rank) {
  absl::StatusOr<ShmSegment> segment = ShmSegment::Open(name);
  if (!segment.ok()) return segment.status();
  if (segment->size() < sizeof(Header) ||
      static_cast<const Header*>(segment->data())->magic != kMagic) {
    return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a step channel"));
  }
  StepChannel channel(*std::move(segment), rank);
  const Header* h = channel.header();
  const size_t need = SegmentBytes(h->world_size, h->request_capacity, h->logits_capacity,
                                   h->expert_capacity);
  if (channel.segment_.size() < need) {
    return absl::InvalidArgumentError(absl::StrCat("step channel '", name, "' has ",
                                                   channel.segment_.size(), " bytes, its header "
                                                   "needs ", need));
  }
  if (rank < 0 || rank >= static_cast<int>(h->world_size)) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is outside the step "
                                                   "channel's [0, ", h->world_size, ")"));
  }
  channel.Heartbeat();
  return channel;
}

bool StepChannel::Fits(size_t request_bytes) const {
  return request_bytes <= header()->request_capacity;
}

void StepChannel::Post(const std::string& request) {
  Header* h = header();
  std::memcpy(request_area(), request.data(), request.size());
  h->request_bytes = static_cast<uint32_t>(request.size());
  h->request_seq.fetch_add(1, std::memory_order_release);
  FutexWakeAll(&h->request_seq);
}

absl::Status StepChannel::AwaitAll(absl::Time deadline, absl::Duration heartbeat_timeout) {
  const uint32_t seq = header()->request_seq.load(std::memory_order_relaxed);
  const int world = world_size();
  for (int r = 0; r < world; ++r) {
    RankSlot* s = slot(r);
    for (;;) {
      const uint32_t done = s->done_seq.load(std::memory_order_acquire);
      if (Reached(done, seq)) break;
      // Every rank still out, not only the one waited on: a live rank may be waiting on a
      // dead one's collective (for up to its collective timeout).
      for (int o = r; o < world; ++o) {
        const RankSlot* out = slot(o);
        if (Reached(out->done_seq.load(std::memory_order_acquire), seq)) continue;
        const int64_t silent_ns = NowNs() - out->heartbeat_ns.load(std::memory_order_relaxed);
        if (silent_ns > absl::ToInt64Nanoseconds(heartbeat_timeout)) {
          return absl::UnavailableError(absl::StrCat(
              "rank ", o, " stopped answering on the step channel (no heartbeat for ",
              silent_ns / 1000000, " ms: dead or stopped)"));
        }
      }
      const absl::Time now = absl::Now();
      if (now >= deadline) {
        std::vector<int> busy;
        for (int b = r; b < world; ++b) {
          if (!Reached(slot(b)->done_seq.load(), seq)) busy.push_back(b);
        }
        return absl::DeadlineExceededError(absl::StrCat(
            "step ", seq, " not finished by rank(s) ", absl::StrJoin(busy, ", "),
            " within the step deadline"));
      }
      FutexWait(&s->done_seq, done, std::min({deadline - now, kMaxSleep, heartbeat_timeout}));
    }
  }
  for (int r = 0; r < world; ++r) {
    const RankSlot* s = slot(r);
    if (s->code != 0) {
      return absl::Status(static_cast<absl::StatusCode>(s->code),
                          absl::string_view(s->message, s->message_bytes));
    }
  }
  return absl::OkStatus();
}

double StepChannel::compute_s(int rank) const { return slot(rank)->compute_s; }
double StepChannel::allreduce_s(int rank) const { return slot(rank)->allreduce_s; }

std::string_view StepChannel::result_bytes(int rank) const {
  return std::string_view(reinterpret_cast<const char*>(logits_area()),
                          slot(rank)->logits_bytes);
}

absl::Span<const float> StepChannel::logits(int rank) const {
  return absl::MakeConstSpan(logits_area(), slot(rank)->logits_bytes / sizeof(float));
}

int64_t StepChannel::decoded_weight_bytes() const { return slot(0)->decoded_weight_bytes; }

ExpertLoad StepChannel::expert_load() const {
  ExpertLoad load;
  for (int r = 0; r < world_size(); ++r) {
    const RankSlot* s = slot(r);
    ExpertLoad rank_load;
    const int64_t* counts = expert_area(r);
    rank_load.tokens.assign(counts, counts + s->num_experts);
    rank_load.layers = s->expert_layers;
    rank_load.imbalance_sum = s->expert_imbalance_sum;
    load.Add(rank_load);
  }
  return load;
}

size_t StepChannel::expert_capacity() const { return header()->expert_capacity; }

bool StepChannel::WaitRequest(uint32_t* seq, std::string* request,
                              const std::atomic<bool>& stop) {
  Header* h = header();
  const absl::Time spin_until = absl::Now() + kRankSpin;
  for (;;) {
    const uint32_t have = h->request_seq.load(std::memory_order_acquire);
    if (have != *seq) {
      *seq = have;
      request->assign(reinterpret_cast<const char*>(request_area()), h->request_bytes);
      return true;
    }
    if (stop.load()) return false;
    if (absl::Now() < spin_until) {
      sched_yield();  // anyone runnable (the coordinator, a peer) gets this core first
    } else {
      FutexWait(&h->request_seq, have, kMaxSleep);
    }
  }
}

void StepChannel::Finish(uint32_t seq, const absl::Status& status, double compute_s,
                         double allreduce_s, size_t logits_bytes, const ExpertLoad& expert_load,
                         int64_t decoded_weight_bytes) {
  RankSlot* s = slot(rank_);
  s->code = static_cast<int32_t>(status.code());
  const absl::string_view message = status.message();
  s->message_bytes = static_cast<uint32_t>(std::min(message.size(), kMessageBytes));
  if (s->message_bytes > 0) {  // an OK status's message may be a null pointer
    std::memcpy(s->message, message.data(), s->message_bytes);
  }
  s->compute_s = compute_s;
  s->allreduce_s = allreduce_s;
  s->logits_bytes = logits_bytes;
  const size_t experts = std::min(expert_load.tokens.size(), expert_capacity());
  s->num_experts = static_cast<uint32_t>(experts);
  if (experts > 0) {
    std::memcpy(expert_area(rank_), expert_load.tokens.data(), experts * sizeof(int64_t));
  }
  s->expert_layers = expert_load.layers;
  s->expert_imbalance_sum = expert_load.imbalance_sum;
  s->decoded_weight_bytes = decoded_weight_bytes;
  s->done_seq.store(seq, std::memory_order_release);
  FutexWakeAll(&s->done_seq);
}

void StepChannel::Heartbeat() { slot(rank_)->heartbeat_ns.store(NowNs()); }

void StepChannel::MarkGone(int rank) { slot(rank)->heartbeat_ns.store(0); }

}  // namespace tpserve
