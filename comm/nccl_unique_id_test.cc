// The group's NCCL id: rank 0 makes it and publishes it in the ranks' rendezvous store (here an
// in-memory one behind gloo's Store interface, as the coordinator's is), the other ranks read
// the same 128 bytes; the id generator is injected, so no NCCL or GPU is needed. And
// NewNcclUniqueId itself, which needs NCCL but no GPU.
#include "comm/nccl_unique_id.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "comm/rendezvous_store.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gtest/gtest.h"

namespace tpserve {
namespace {

std::string FakeId() {
  std::string id(kNcclUniqueIdBytes, '\0');
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(i * 7 + 3);
  return id;
}

TEST(ShareNcclUniqueId, RankZeroPublishesAndEveryRankGetsTheSameBytes) {
  InMemoryRendezvousKv kv;
  KvGlooStore store(&kv);
  constexpr int kWorld = 3;
  int made = 0;
  std::vector<absl::StatusOr<std::string>> ids(kWorld, absl::UnknownError("not run"));
  std::vector<std::thread> ranks;
  // The other ranks start waiting first, as they do when rank 0 is slower to load.
  for (int rank = kWorld - 1; rank >= 0; --rank) {
    ranks.emplace_back([&, rank] {
      gloo::rendezvous::PrefixStore run_store("run42", store);
      ShareNcclUniqueIdOptions options;
      options.world_size = kWorld;
      options.timeout = absl::Seconds(20);
      options.key_prefix = "run42";
      options.make_id = [&made]() -> absl::StatusOr<std::string> {
        ++made;
        return FakeId();
      };
      ids[rank] = ShareNcclUniqueId(run_store, rank, options);
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(made, 1);  // rank 0 only
  for (int rank = 0; rank < kWorld; ++rank) {
    ASSERT_TRUE(ids[rank].ok()) << "rank " << rank << ": " << ids[rank].status();
    EXPECT_EQ(*ids[rank], FakeId()) << "rank " << rank;
  }
  absl::StatusOr<std::string> stored = kv.Get("run42/nccl_unique_id");  // the launch's key
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(*stored, FakeId());
}

TEST(ShareNcclUniqueId, ARankWhoseRankZeroNeverPublishesTimesOutNamingKeyAndTimeout) {
  InMemoryRendezvousKv kv;
  KvGlooStore store(&kv);
  gloo::rendezvous::PrefixStore run_store("run42", store);
  ShareNcclUniqueIdOptions options;
  options.world_size = 2;
  options.timeout = absl::Milliseconds(200);
  options.key_prefix = "run42";
  const absl::StatusOr<std::string> id = ShareNcclUniqueId(run_store, 1, options);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kDeadlineExceeded) << id.status();
  EXPECT_TRUE(absl::StartsWith(id.status().message(),
                               "rank 1 of 2: rank 0 did not publish the NCCL unique id under key "
                               "'run42/nccl_unique_id' in the rendezvous store within 200ms"))
      << id.status();
}

TEST(ShareNcclUniqueId, RankZerosGeneratorErrorIsReturnedAndNothingIsPublished) {
  InMemoryRendezvousKv kv;
  KvGlooStore store(&kv);
  ShareNcclUniqueIdOptions options;
  options.world_size = 2;
  options.make_id = []() -> absl::StatusOr<std::string> {
    return absl::UnimplementedError("no NCCL here");
  };
  const absl::StatusOr<std::string> id = ShareNcclUniqueId(store, 0, options);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(kv.size(), 0u);
}

TEST(ShareNcclUniqueId, AValueOfTheWrongSizeIsRefused) {
  InMemoryRendezvousKv kv;
  ASSERT_TRUE(kv.Set("nccl_unique_id", "short").ok());
  KvGlooStore store(&kv);
  ShareNcclUniqueIdOptions options;
  options.world_size = 2;
  const absl::StatusOr<std::string> id = ShareNcclUniqueId(store, 1, options);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(id.status().message(),
            "rank 1 of 2: the NCCL unique id under key 'nccl_unique_id' has 5 bytes, expected "
            "128");
}

#if TPSERVE_WITH_CUDA
// ncclGetUniqueId needs NCCL and a network interface, not a GPU: it runs on the build machine.
TEST(NcclUniqueId, FreshIdsHaveTheNcclSizeAndDiffer) {
  absl::StatusOr<std::string> a = NewNcclUniqueId();
  absl::StatusOr<std::string> b = NewNcclUniqueId();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->size(), kNcclUniqueIdBytes);
  EXPECT_NE(*a, *b);
}
#else
TEST(NcclUniqueId, UnimplementedWithoutCuda) {
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  EXPECT_EQ(id.status().code(), absl::StatusCode::kUnimplemented) << id.status();
}
#endif

}  // namespace
}  // namespace tpserve
