// NCCL on the GPUs of this machine: option checks (anywhere), single-rank collectives in every
// dtype on a caller's stream, their ordering (enqueued, not waited for), that compute queued
// before a collective does not count against its deadline, the abort paths that one GPU can
// reach, a single-rank all-to-all and its argument checks, and on two GPUs: agreement with the
// rank-order sum, all-to-all pieces at their offsets, and the timeout of a collective a peer
// never enters. Tests that need a device skip with "no CUDA device: ..." elsewhere.
// (CollectiveClock's own test checks the deadline logic without a GPU.)
#include "comm/nccl_communicator.h"

#include <cuda_runtime.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "comm/comm_test_util.h"
#include "gtest/gtest.h"
#include "kernels/cuda/stream_gate.h"

namespace tpserve {
namespace {

using cuda::StreamGate;

// Skips the calling test unless `needed` CUDA devices are visible.
#define SKIP_UNLESS_DEVICES(needed)                                            \
  do {                                                                         \
    absl::StatusOr<int> count = CudaDeviceCount();                             \
    if (!count.ok()) {                                                         \
      GTEST_SKIP() << "no CUDA device: " << count.status().message()           \
                   << "; NCCL communicator not exercised";                     \
    }                                                                          \
    if (*count < (needed)) {                                                   \
      GTEST_SKIP() << "no CUDA device: " << *count << " visible, " << (needed) \
                   << " needed; NCCL communicator not exercised";              \
    }                                                                          \
  } while (0)

// A device copy of host values; freed on destruction.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : count_(host.size()) {
    EXPECT_EQ(cudaMalloc(&ptr_, std::max<size_t>(1, count_) * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(ptr_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  ~DeviceArray() { cudaFree(ptr_); }
  T* data() { return ptr_; }
  absl::Span<T> span() { return absl::MakeSpan(ptr_, count_); }
  // Waits for the whole device (the legacy-stream copy does not order after other streams).
  std::vector<T> ToHost() const {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<T> host(count_);
    EXPECT_EQ(cudaMemcpy(host.data(), ptr_, count_ * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }

 private:
  T* ptr_ = nullptr;
  size_t count_;
};

std::vector<float> Values(int rank, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = RankValue(rank, i);
  return v;
}

// Finite 16-bit patterns (bf16: upper halves of floats; f16: 1.0 plus mantissa steps).
std::vector<uint16_t> Bits16(DType dtype, size_t n, int salt) {
  std::vector<uint16_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    if (dtype == DType::kBF16) {
      uint32_t bits;
      const float f = RankValue(salt, i);
      std::memcpy(&bits, &f, sizeof(bits));
      v[i] = static_cast<uint16_t>(bits >> 16);
    } else {
      v[i] = static_cast<uint16_t>(0x3C00 + (i * 7 + salt) % 1024);
    }
  }
  return v;
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> OneRank(cudaStream_t stream,
                                                          absl::Duration timeout) {
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  if (!id.ok()) return id.status();
  NcclOptions options;
  options.unique_id = *id;
  options.timeout = timeout;
  options.stream = stream;
  return NcclCommunicator::Create(options);
}

TEST(NcclCommunicator, RejectsBadOptionsWithoutTouchingTheDevice) {
  NcclOptions options;
  options.unique_id = std::string(kNcclUniqueIdBytes - 1, 'x');
  auto comm = NcclCommunicator::Create(options);
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(comm.status().message(), "NcclOptions.unique_id has 127 bytes, expected 128");
  options.unique_id = std::string(kNcclUniqueIdBytes, 'x');
  options.rank = 1;
  EXPECT_EQ(NcclCommunicator::Create(options).status().message(),
            "NcclOptions.rank is 1, must be in [0, 1)");
  EXPECT_TRUE(NcclSupportsDType(DType::kBF16));
  EXPECT_TRUE(NcclSupportsDType(DType::kF16));
  EXPECT_FALSE(NcclSupportsDType(DType::kQ8_0));
}

TEST(NcclCommunicator, SingleRankF32CollectivesOnItsOwnStream) {
  SKIP_UNLESS_DEVICES(1);
  auto comm = OneRank(nullptr, absl::Seconds(60));
  ASSERT_TRUE(comm.ok()) << comm.status();
  constexpr size_t kN = 1001;
  DeviceArray<float> data(Values(0, kN));
  ASSERT_TRUE((*comm)->AllReduceSum(data.span()).ok());
  DeviceArray<float> gathered(std::vector<float>(kN, -1.0f));
  ASSERT_TRUE((*comm)->AllGather(data.span(), gathered.span()).ok());
  DeviceArray<float> bytes(Values(0, 8));
  auto byte_span = absl::MakeSpan(reinterpret_cast<uint8_t*>(bytes.data()), 32);
  ASSERT_TRUE((*comm)->Broadcast(byte_span, 0).ok());
  ASSERT_TRUE((*comm)->AwaitCollectives().ok());
  EXPECT_EQ((*comm)->num_pending(), 0);
  EXPECT_EQ(data.ToHost(), Values(0, kN));
  EXPECT_EQ(gathered.ToHost(), Values(0, kN));
  EXPECT_EQ(bytes.ToHost(), Values(0, 8));
  EXPECT_TRUE((*comm)->Barrier().ok());
  EXPECT_EQ((*comm)->Describe(), "nccl rank 0/1 on cuda:0");
}

TEST(NcclCommunicator, TypedCollectivesAreEnqueuedInOrderOnTheCallersStream) {
  SKIP_UNLESS_DEVICES(1);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  {
    auto comm = OneRank(stream, absl::Seconds(60));
    ASSERT_TRUE(comm.ok()) << comm.status();
    EXPECT_EQ(static_cast<void*>((*comm)->stream()), static_cast<void*>(stream));
    Watchdog watchdog(absl::Seconds(60), "typed collectives behind a gate");
    constexpr size_t kN = 4099;
    for (DType dtype : {DType::kBF16, DType::kF16}) {
      SCOPED_TRACE(std::string(DTypeName(dtype)));
      const std::vector<uint16_t> values = Bits16(dtype, kN, 3);
      const std::vector<uint16_t> poison(kN, 0x7BFF);
      DeviceArray<uint16_t> data(values), gathered(poison);
      StreamGate gate(stream);
      // Both calls return with the stream held: enqueued, not waited for.
      ASSERT_TRUE((*comm)->AllReduceSum(data.data(), kN, dtype).ok());
      ASSERT_TRUE((*comm)->AllGather(data.data(), kN, dtype, gathered.data()).ok());
      EXPECT_EQ((*comm)->num_pending(), 2);
      std::vector<uint16_t> early(kN);
      ASSERT_EQ(cudaMemcpy(early.data(), gathered.data(), kN * 2, cudaMemcpyDeviceToHost),
                cudaSuccess);
      EXPECT_EQ(early, poison) << "the gather ran before the work queued ahead of it";
      gate.Open();
      ASSERT_TRUE((*comm)->AwaitCollectives().ok());
      EXPECT_EQ((*comm)->num_pending(), 0);
      EXPECT_EQ(data.ToHost(), values);  // one rank: the sum is the identity
      EXPECT_EQ(gathered.ToHost(), values);
    }
    absl::Status q8 = (*comm)->AllReduceSum(nullptr, 32, DType::kQ8_0);
    EXPECT_EQ(q8.code(), absl::StatusCode::kInvalidArgument) << q8;
    EXPECT_EQ(q8.message(), "AllReduceSum of Q8_0: NCCL collectives here take F32, BF16 or F16");
  }
  cudaStreamDestroy(stream);
}

// CUDA graphs (issue 38): a step recorded with its collectives inside and replayed. A
// collective enqueued while the stream is captured records no events of its own (a replay
// would not record them again, and querying an event last recorded in a capture is an error);
// RunRecorded brackets every run and replay with one pair, so AwaitCollectives waits for the
// replay, not for stale events. On the old code (no RunRecorded: a replay the communicator
// never sees) the await after a replay returned at once with nothing pending, before the
// replay ran: the ">= 400 ms" assertion; and a collective captured with its events made the
// next await query events last recorded in a capture (cudaErrorCapturedEvent).
TEST(NcclCommunicator, RecordedCollectivesAreAwaitedThroughTheReplaysBracket) {
  SKIP_UNLESS_DEVICES(1);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  {
    auto comm = OneRank(stream, absl::Seconds(60));
    ASSERT_TRUE(comm.ok()) << comm.status();
    EXPECT_TRUE((*comm)->capturable());
    Watchdog watchdog(absl::Seconds(60), "recorded collectives");
    constexpr size_t kN = 513;
    const std::vector<uint16_t> values = Bits16(DType::kBF16, kN, 5);
    const std::vector<uint16_t> poison(kN, 0x7BFF);
    DeviceArray<uint16_t> data(values), gathered(poison);
    // Eager through RunRecorded (a step's first run): the bracket and its collective pend.
    ASSERT_TRUE((*comm)
                    ->RunRecorded("decode step of 1 row", [&] {
                      return (*comm)->AllGather(data.data(), kN, DType::kBF16, gathered.data());
                    })
                    .ok());
    EXPECT_EQ((*comm)->num_pending(), 2);
    ASSERT_TRUE((*comm)->AwaitCollectives().ok());
    EXPECT_EQ(gathered.ToHost(), values);
    // Recorded: the collective inside the capture adds nothing to wait for but the bracket.
    ASSERT_EQ(cudaMemcpy(gathered.data(), poison.data(), kN * 2, cudaMemcpyHostToDevice),
              cudaSuccess);
    cudaGraphExec_t exec = nullptr;
    ASSERT_TRUE((*comm)
                    ->RunRecorded("decode step of 1 row", [&]() -> absl::Status {
                      if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) !=
                          cudaSuccess) {
                        return absl::InternalError("cudaStreamBeginCapture");
                      }
                      const absl::Status gathered_status =
                          (*comm)->AllGather(data.data(), kN, DType::kBF16, gathered.data());
                      cudaGraph_t graph = nullptr;
                      const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
                      if (!gathered_status.ok()) return gathered_status;
                      if (ended != cudaSuccess) return absl::InternalError("EndCapture");
                      const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
                      cudaGraphDestroy(graph);
                      if (made != cudaSuccess) return absl::InternalError("Instantiate");
                      return cudaGraphLaunch(exec, stream) == cudaSuccess
                                 ? absl::OkStatus()
                                 : absl::InternalError("cudaGraphLaunch");
                    })
                    .ok());
    EXPECT_EQ((*comm)->num_pending(), 1);
    ASSERT_TRUE((*comm)->AwaitCollectives().ok());
    EXPECT_EQ(gathered.ToHost(), values);
    // Replayed behind a gate: the await holds until the replay has run.
    ASSERT_EQ(cudaMemcpy(gathered.data(), poison.data(), kN * 2, cudaMemcpyHostToDevice),
              cudaSuccess);
    StreamGate gate(stream);
    ASSERT_TRUE((*comm)
                    ->RunRecorded("decode step of 1 row", [&] {
                      return cudaGraphLaunch(exec, stream) == cudaSuccess
                                 ? absl::OkStatus()
                                 : absl::InternalError("cudaGraphLaunch");
                    })
                    .ok());
    EXPECT_EQ((*comm)->num_pending(), 1);
    std::thread opener([&gate] {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      gate.Open();
    });
    const absl::Time start = absl::Now();
    const absl::Status waited = (*comm)->AwaitCollectives();
    opener.join();
    EXPECT_TRUE(waited.ok()) << waited;
    EXPECT_GE(absl::Now() - start, absl::Milliseconds(400)) << "returned before the replay ran";
    std::vector<uint16_t> after(kN);
    ASSERT_EQ(cudaMemcpy(after.data(), gathered.data(), kN * 2, cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(after, values);
    cudaGraphExecDestroy(exec);
  }
  cudaStreamDestroy(stream);
}

// The review's finding: the deadline ran from the start of the wait, so compute queued before
// a collective (a long prefill) counted against it and aborted the communicator. Now a
// collective's clock starts when its inputs are ready.
TEST(NcclCommunicator, ComputeBeforeACollectiveDoesNotCountAgainstItsTimeout) {
  SKIP_UNLESS_DEVICES(1);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  {
    auto comm = OneRank(stream, absl::Seconds(1));
    ASSERT_TRUE(comm.ok()) << comm.status();
    DeviceArray<float> data(Values(0, 64));
    Watchdog watchdog(absl::Seconds(60), "AwaitCollectives behind 3 s of 'compute'");
    StreamGate gate(stream);  // stands in for 3 s of prefill before the all-reduce
    ASSERT_TRUE((*comm)->AllReduceSum(data.span()).ok());
    std::thread opener([&gate] {
      std::this_thread::sleep_for(std::chrono::seconds(3));
      gate.Open();
    });
    const absl::Time start = absl::Now();
    const absl::Status waited = (*comm)->AwaitCollectives();
    opener.join();
    EXPECT_TRUE(waited.ok()) << waited;
    EXPECT_GE(absl::Now() - start, absl::Seconds(2));
    EXPECT_EQ((*comm)->num_pending(), 0);
    EXPECT_TRUE((*comm)->Barrier().ok());  // not broken
  }
  cudaStreamDestroy(stream);
}

// The wait ends when the collectives are done, not when the whole stream is: work queued after
// them is the backend's to wait for (with its own deadline).
TEST(NcclCommunicator, AwaitEndsWithTheCollectivesNotWithLaterWork) {
  SKIP_UNLESS_DEVICES(1);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  {
    auto comm = OneRank(stream, absl::Seconds(1));
    ASSERT_TRUE(comm.ok()) << comm.status();
    DeviceArray<uint16_t> data(Bits16(DType::kBF16, 1024, 1));
    Watchdog watchdog(absl::Seconds(60), "AwaitCollectives with work queued after them");
    ASSERT_TRUE((*comm)->AllReduceSum(data.data(), 1024, DType::kBF16).ok());
    StreamGate gate(stream);  // later work that does not finish before the wait
    const absl::Time start = absl::Now();
    const absl::Status waited = (*comm)->AwaitCollectives();
    EXPECT_TRUE(waited.ok()) << waited;
    EXPECT_LT(absl::Now() - start, absl::Seconds(1));
    gate.Open();
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  cudaStreamDestroy(stream);
}

TEST(NcclCommunicator, RequestAbortEndsTheWaitWithUnavailable) {
  SKIP_UNLESS_DEVICES(1);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  {
    auto comm = OneRank(stream, absl::Seconds(60));
    ASSERT_TRUE(comm.ok()) << comm.status();
    DeviceArray<float> data(Values(0, 64));
    Watchdog watchdog(absl::Seconds(60), "RequestAbort during AwaitCollectives");
    StreamGate gate(stream);  // the all-reduce waits behind it, as behind a long step
    ASSERT_TRUE((*comm)->AllReduceSum(data.span()).ok());
    std::thread supervisor([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      (*comm)->RequestAbort();  // e.g. the coordinator saw a peer process exit
      std::this_thread::sleep_for(std::chrono::seconds(3));
      gate.Open();
    });
    const absl::Status waited = (*comm)->AwaitCollectives();
    EXPECT_EQ(waited.code(), absl::StatusCode::kUnavailable) << waited;
    EXPECT_EQ(waited.message(),
              "AllReduceSum of 64 F32 on nccl rank 0/1 on cuda:0: aborted on request");
    supervisor.join();
    EXPECT_EQ((*comm)->Barrier().code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  cudaStreamDestroy(stream);
}

TEST(NcclCommunicator, InitTimesOutAndAbortsWhenAPeerNeverJoins) {
  SKIP_UNLESS_DEVICES(1);
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  Watchdog watchdog(absl::Seconds(60), "NCCL init without its peer");
  NcclOptions options{.rank = 0,
                      .world_size = 2,
                      .device_ordinal = 0,
                      .unique_id = *id,
                      .timeout = absl::Seconds(3)};
  auto comm = NcclCommunicator::Create(options);  // rank 1 never calls ncclCommInitRank
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded) << comm.status();
  EXPECT_NE(comm.status().message().find(
                "ncclCommInitRankConfig on nccl rank 0/2 on cuda:0 did not complete within 3s"),
            std::string::npos)
      << comm.status();
}

TEST(NcclCommunicator, TwoRanksOnTwoGpusAgreeWithRankOrderSum) {
  SKIP_UNLESS_DEVICES(2);
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  constexpr int kWorld = 2;
  constexpr size_t kN = 65537;
  std::vector<std::vector<float>> reduced(kWorld), gathered(kWorld), received(kWorld);
  std::vector<absl::Status> statuses(kWorld);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kWorld; ++rank) {
    threads.emplace_back([&, rank] {
      cudaSetDevice(rank);
      NcclOptions options{.rank = rank,
                          .world_size = kWorld,
                          .device_ordinal = rank,
                          .unique_id = *id,
                          .timeout = absl::Seconds(60)};
      auto comm = NcclCommunicator::Create(options);
      if (!comm.ok()) {
        statuses[rank] = comm.status();
        return;
      }
      DeviceArray<float> data(Values(rank, kN));
      DeviceArray<float> all(std::vector<float>(kWorld * kN));
      DeviceArray<float> bytes(Values(rank, 8));
      absl::Status s = (*comm)->AllGather(data.span(), all.span());
      if (s.ok()) s = (*comm)->AllReduceSum(data.span());
      auto byte_span = absl::MakeSpan(reinterpret_cast<uint8_t*>(bytes.data()), 32);
      if (s.ok()) s = (*comm)->Broadcast(byte_span, /*root=*/1);
      if (s.ok()) s = (*comm)->Barrier();
      statuses[rank] = s;
      reduced[rank] = data.ToHost();
      gathered[rank] = all.ToHost();
      received[rank] = bytes.ToHost();
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < kWorld; ++rank) {
    ASSERT_TRUE(statuses[rank].ok()) << "rank " << rank << ": " << statuses[rank];
  }
  std::vector<float> sum(kN), concat;
  for (size_t i = 0; i < kN; ++i) sum[i] = RankValue(0, i) + RankValue(1, i);
  for (int rank = 0; rank < kWorld; ++rank) {
    for (float v : Values(rank, kN)) concat.push_back(v);
  }
  for (int rank = 0; rank < kWorld; ++rank) {
    EXPECT_EQ(reduced[rank], sum) << "rank " << rank;  // a + b is exact-commutative
    EXPECT_EQ(gathered[rank], concat) << "rank " << rank;
    EXPECT_EQ(received[rank], Values(1, 8)) << "rank " << rank;
  }
}

TEST(NcclCommunicator, SingleRankAllToAllIsEnqueuedAndCopiesItsOwnPiece) {
  SKIP_UNLESS_DEVICES(1);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  {
    auto comm = OneRank(stream, absl::Seconds(60));
    ASSERT_TRUE(comm.ok()) << comm.status();
    Watchdog watchdog(absl::Seconds(60), "single-rank all-to-all behind a gate");
    const AllToAllCounts counts = {{1001}};
    const std::vector<uint8_t> expected = ExpectedAllToAll(counts, 0, 2);
    DeviceArray<uint8_t> in(AllToAllInput(counts, 0, 2));
    DeviceArray<uint8_t> out(std::vector<uint8_t>(expected.size(), kAllToAllPoison));
    StreamGate gate(stream);
    ASSERT_TRUE((*comm)->AllToAll(in.data(), counts[0], out.data(), counts[0], DType::kBF16).ok());
    EXPECT_EQ((*comm)->num_pending(), 1);
    std::vector<uint8_t> early(expected.size());
    ASSERT_EQ(cudaMemcpy(early.data(), out.data(), early.size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(early, std::vector<uint8_t>(expected.size(), kAllToAllPoison))
        << "the all-to-all ran before the work queued ahead of it";
    gate.Open();
    ASSERT_TRUE((*comm)->AwaitCollectives().ok());
    EXPECT_EQ(out.ToHost(), expected);
    const std::vector<int64_t> none = {0}, one = {1}, two = {2, 2}, negative = {-1};
    ASSERT_TRUE((*comm)->AllToAll(nullptr, none, nullptr, none, DType::kF32).ok());
    EXPECT_EQ((*comm)->num_pending(), 0);  // nothing to move: nothing enqueued
    absl::Status own = (*comm)->AllToAll(in.data(), counts[0], out.data(), one, DType::kBF16);
    EXPECT_EQ(own.code(), absl::StatusCode::kInvalidArgument) << own;
    EXPECT_EQ(own.message(),
              "AllToAll on nccl rank 0/1 on cuda:0: this rank sends itself 1001 elements but "
              "expects 1");
    EXPECT_EQ((*comm)->AllToAll(in.data(), two, out.data(), two, DType::kF32).message(),
              "AllToAll: send_counts has 2 entries, expected one per rank (1)");
    EXPECT_EQ((*comm)->AllToAll(in.data(), negative, out.data(), one, DType::kF32).message(),
              "AllToAll: send_counts[0] is -1, below 0");
    EXPECT_EQ((*comm)->AllToAll(in.data(), one, out.data(), one, DType::kQ8_0).message(),
              "AllToAll: Q8_0 is block-quantized; it moves whole elements");
    EXPECT_TRUE((*comm)->Barrier().ok());  // refused calls leave it usable
  }
  cudaStreamDestroy(stream);
}

// Rank p sends kSends[p][q] elements to rank q: a zero pair, own pieces, different sizes.
TEST(NcclCommunicator, TwoRanksAllToAllPutEveryPieceAtItsOffset) {
  SKIP_UNLESS_DEVICES(2);
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  Watchdog watchdog(absl::Seconds(90), "two-rank all-to-all");
  const AllToAllCounts kSends = {{4099, 0}, {65537, 7}};
  const std::vector<DType> dtypes = {DType::kBF16, DType::kF32};
  std::vector<std::vector<std::vector<uint8_t>>> outs(2);  // [rank][dtype]
  std::vector<absl::Status> statuses(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      cudaSetDevice(rank);
      NcclOptions options{.rank = rank,
                          .world_size = 2,
                          .device_ordinal = rank,
                          .unique_id = *id,
                          .timeout = absl::Seconds(60)};
      auto comm = NcclCommunicator::Create(options);
      statuses[rank] = comm.status();
      for (DType dtype : dtypes) {
        if (!statuses[rank].ok()) return;
        const size_t elem_bytes = BlockBytes(dtype);
        const std::vector<int64_t> recv = {kSends[0][rank], kSends[1][rank]};
        DeviceArray<uint8_t> in(AllToAllInput(kSends, rank, elem_bytes));
        DeviceArray<uint8_t> out(std::vector<uint8_t>(
            (recv[0] + recv[1]) * elem_bytes + kAllToAllGuardBytes, kAllToAllPoison));
        statuses[rank] = (*comm)->AllToAll(in.data(), kSends[rank], out.data(), recv, dtype);
        if (statuses[rank].ok()) statuses[rank] = (*comm)->AwaitCollectives();
        outs[rank].push_back(out.ToHost());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(statuses[rank].ok()) << "rank " << rank << ": " << statuses[rank];
    for (size_t d = 0; d < dtypes.size(); ++d) {
      EXPECT_TRUE(outs[rank][d] == ExpectedAllToAll(kSends, rank, BlockBytes(dtypes[d])))
          << "rank " << rank << " " << DTypeName(dtypes[d]);
    }
  }
}

// A collective whose peer never enters it: rank 0's all-reduce is ready and never completes,
// so the wait times out one timeout after its inputs were ready, aborts, and names it.
TEST(NcclCommunicator, AwaitTimesOutWhenAPeerNeverEntersTheCollective) {
  SKIP_UNLESS_DEVICES(2);
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  Watchdog watchdog(absl::Seconds(90), "AwaitCollectives without the peer's collective");
  std::vector<std::unique_ptr<NcclCommunicator>> comms(2);
  std::vector<absl::Status> created(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      NcclOptions options{.rank = rank,
                          .world_size = 2,
                          .device_ordinal = rank,
                          .unique_id = *id,
                          .timeout = absl::Seconds(2)};
      auto comm = NcclCommunicator::Create(options);
      created[rank] = comm.status();
      if (comm.ok()) comms[rank] = *std::move(comm);
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(created[0].ok()) << created[0];
  ASSERT_TRUE(created[1].ok()) << created[1];
  cudaSetDevice(0);
  DeviceArray<uint16_t> data(Bits16(DType::kBF16, 1024, 1));
  ASSERT_TRUE(comms[0]->AllReduceSum(data.data(), 1024, DType::kBF16).ok());
  const absl::Status waited = comms[0]->AwaitCollectives();  // rank 1 never all-reduces
  EXPECT_EQ(waited.code(), absl::StatusCode::kDeadlineExceeded) << waited;
  EXPECT_EQ(waited.message(),
            "AllReduceSum of 1024 BF16 on nccl rank 0/2 on cuda:0 did not complete within 2s "
            "of its inputs being ready; NCCL communicator aborted");
  const absl::Status after = comms[0]->AllGather(data.data(), 1, DType::kBF16, data.data());
  EXPECT_EQ(after.code(), absl::StatusCode::kUnavailable) << after;
  EXPECT_NE(after.message().find("AllGather on nccl rank 0/2 on cuda:0: communicator is "
                                 "broken by an earlier failure"),
            std::string::npos)
      << after;
  comms[1]->RequestAbort();  // its peer is gone: abort rather than finalize
}

}  // namespace
}  // namespace tpserve
