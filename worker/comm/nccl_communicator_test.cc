#include "worker/comm/nccl_communicator.h"

#include <cuda_runtime.h>

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "worker/comm/comm_test_util.h"

namespace tpserve {
namespace {

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

// Device copy of host floats; freed on destruction.
class DeviceFloats {
 public:
  explicit DeviceFloats(const std::vector<float>& host) : count_(host.size()) {
    EXPECT_EQ(cudaMalloc(&ptr_, std::max<size_t>(1, count_) * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(ptr_, host.data(), count_ * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  ~DeviceFloats() { cudaFree(ptr_); }
  absl::Span<float> span() { return absl::MakeSpan(ptr_, count_); }
  std::vector<float> ToHost() const {
    std::vector<float> host(count_);
    EXPECT_EQ(cudaMemcpy(host.data(), ptr_, count_ * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }

 private:
  float* ptr_ = nullptr;
  size_t count_;
};

std::vector<float> Values(int rank, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = RankValue(rank, i);
  return v;
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
}

TEST(NcclCommunicator, SingleRankCollectivesOnOneGpu) {
  SKIP_UNLESS_DEVICES(1);
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  NcclOptions options;
  options.unique_id = *id;
  options.timeout = absl::Seconds(60);
  auto comm = NcclCommunicator::Create(options);
  ASSERT_TRUE(comm.ok()) << comm.status();
  constexpr size_t kN = 1001;
  DeviceFloats data(Values(0, kN));
  ASSERT_TRUE((*comm)->AllReduceSum(data.span()).ok());
  EXPECT_EQ(data.ToHost(), Values(0, kN));
  DeviceFloats gathered(std::vector<float>(kN, -1.0f));
  ASSERT_TRUE((*comm)->AllGather(data.span(), gathered.span()).ok());
  EXPECT_EQ(gathered.ToHost(), Values(0, kN));
  DeviceFloats bytes(Values(0, 8));
  auto byte_span = absl::MakeSpan(reinterpret_cast<uint8_t*>(bytes.span().data()), 32);
  ASSERT_TRUE((*comm)->Broadcast(byte_span, 0).ok());
  EXPECT_EQ(bytes.ToHost(), Values(0, 8));
  EXPECT_TRUE((*comm)->Barrier().ok());
  EXPECT_EQ((*comm)->Describe(), "nccl rank 0/1 on cuda:0");
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
      DeviceFloats data(Values(rank, kN));
      DeviceFloats all(std::vector<float>(kWorld * kN));
      DeviceFloats bytes(Values(rank, 8));
      absl::Status s = (*comm)->AllGather(data.span(), all.span());
      if (s.ok()) s = (*comm)->AllReduceSum(data.span());
      auto byte_span = absl::MakeSpan(reinterpret_cast<uint8_t*>(bytes.span().data()), 32);
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

}  // namespace
}  // namespace tpserve
