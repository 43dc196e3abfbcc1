#include "worker/comm/communicator_factory.h"

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "worker/comm/comm_test_util.h"
#include "worker/comm/rendezvous_store.h"

namespace tpserve {
namespace {

TEST(ParseCommunicatorKind, RoundTripsNamesAndRejectsOthers) {
  for (CommunicatorKind kind : {CommunicatorKind::kSingleRank, CommunicatorKind::kInProcess,
                                CommunicatorKind::kGloo, CommunicatorKind::kNccl}) {
    absl::StatusOr<CommunicatorKind> parsed = ParseCommunicatorKind(CommunicatorKindName(kind));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, kind);
  }
  absl::StatusOr<CommunicatorKind> bad = ParseCommunicatorKind("mpi");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "unknown communicator kind 'mpi'; expected single, in_process, gloo or nccl");
}

TEST(MakeCommunicator, RejectsOptionsThatCannotWork) {
  CommunicatorOptions options;
  options.world_size = 2;
  EXPECT_EQ(MakeCommunicator(options).status().message(),
            "CommunicatorOptions.world_size is 2 for kind single");
  options.rank = 2;
  EXPECT_EQ(MakeCommunicator(options).status().message(),
            "CommunicatorOptions.rank is 2, must be in [0, 2)");
  options.rank = 0;
  options.kind = CommunicatorKind::kInProcess;
  EXPECT_EQ(MakeCommunicator(options).status().message(),
            "CommunicatorOptions.in_process_group is null");
  options.in_process_group = std::make_shared<InProcessGroup>(3);
  EXPECT_EQ(MakeCommunicator(options).status().message(),
            "CommunicatorOptions.in_process_group has world size 3, options say 2");
  options.kind = CommunicatorKind::kGloo;
  EXPECT_EQ(MakeCommunicator(options).status().message(),
            "CommunicatorOptions.run_id is empty (needed for gloo)");
  options.run_id = "r";
  EXPECT_EQ(MakeCommunicator(options).status().message(),
            "CommunicatorOptions: gloo needs gloo_store or store_dir, both are empty");
  options.kind = CommunicatorKind::kNccl;
#if TPSERVE_WITH_CUDA
  EXPECT_EQ(MakeCommunicator(options).status().message(),
            "NcclOptions.unique_id has 0 bytes, expected 128");
  options.timeout = absl::ZeroDuration();
  EXPECT_EQ(MakeCommunicator(options).status().code(), absl::StatusCode::kInvalidArgument);
#else
  EXPECT_EQ(MakeCommunicator(options).status().code(), absl::StatusCode::kUnimplemented);
#endif
}

TEST(MakeCommunicator, SingleRankIsIdentity) {
  absl::StatusOr<std::unique_ptr<Communicator>> comm = MakeCommunicator(CommunicatorOptions{});
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->Describe(), "single rank");
}

// Runs the shared workload on two ranks made by the factory; returns rank 1's results.
CollectiveResults RunTwoRanks(const CommunicatorOptions& base) {
  std::vector<CollectiveResults> results = RunOnThreads(2, {1, 576}, [&](int rank) {
    CommunicatorOptions options = base;
    options.rank = rank;
    return MakeCommunicator(options);
  });
  EXPECT_TRUE(results[0].status.ok()) << results[0].status;
  EXPECT_TRUE(results[1].status.ok()) << results[1].status;
  return results[1];
}

TEST(MakeCommunicator, InProcessFileStoreGlooAndKvGlooGiveTheSameResults) {
  CommunicatorOptions in_process;
  in_process.kind = CommunicatorKind::kInProcess;
  in_process.world_size = 2;
  in_process.in_process_group = std::make_shared<InProcessGroup>(2);
  const std::string reference = RunTwoRanks(in_process).Serialize();

  CommunicatorOptions file_gloo;
  file_gloo.kind = CommunicatorKind::kGloo;
  file_gloo.world_size = 2;
  const char* tmp = std::getenv("TEST_TMPDIR");
  file_gloo.store_dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/factory_store";
  file_gloo.run_id = "factory-" + std::to_string(::getpid());
  EXPECT_TRUE(RunTwoRanks(file_gloo).Serialize() == reference);

  InMemoryRendezvousKv kv;
  KvGlooStore store(&kv);
  CommunicatorOptions kv_gloo = file_gloo;
  kv_gloo.store_dir.clear();
  kv_gloo.gloo_store = &store;
  EXPECT_TRUE(RunTwoRanks(kv_gloo).Serialize() == reference);
}

}  // namespace
}  // namespace tpserve
