#include "comm/communicator_factory.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/comm_test_util.h"
#include "comm/rendezvous_store.h"
#include "gtest/gtest.h"

namespace tpserve {
namespace {

TEST(ParseCommunicatorKind, RoundTripsNamesAndRejectsOthers) {
  for (CommunicatorKind kind :
       {CommunicatorKind::kSingleRank, CommunicatorKind::kInProcess, CommunicatorKind::kGloo,
        CommunicatorKind::kShm, CommunicatorKind::kAuto, CommunicatorKind::kNccl}) {
    absl::StatusOr<CommunicatorKind> parsed = ParseCommunicatorKind(CommunicatorKindName(kind));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, kind);
  }
  absl::StatusOr<CommunicatorKind> bad = ParseCommunicatorKind("mpi");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      bad.status().message(),
      "unknown communicator kind 'mpi'; expected single, in_process, gloo, shm, auto or nccl");
  EXPECT_TRUE(CommunicatorUsesHostMemory(CommunicatorKind::kShm));
  EXPECT_TRUE(CommunicatorUsesHostMemory(CommunicatorKind::kAuto));
  EXPECT_FALSE(CommunicatorUsesHostMemory(CommunicatorKind::kNccl));
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
  options.kind = CommunicatorKind::kShm;
  EXPECT_EQ(MakeCommunicator(options).status().message(),
            "CommunicatorOptions: shm needs gloo_store or store_dir, both are empty");
  options.kind = CommunicatorKind::kAuto;
  options.run_id.clear();
  EXPECT_EQ(MakeCommunicator(options).status().message(),
            "CommunicatorOptions.run_id is empty (needed for auto)");
  options.run_id = "r";
  options.kind = CommunicatorKind::kNccl;
#if TPSERVE_WITH_CUDA
  EXPECT_EQ(MakeCommunicator(options).status().message(),
            "CommunicatorOptions: nccl needs gloo_store or store_dir, both are empty");
  options.timeout = absl::ZeroDuration();
  EXPECT_EQ(MakeCommunicator(options).status().code(), absl::StatusCode::kInvalidArgument);
#else
  EXPECT_EQ(MakeCommunicator(options).status().code(), absl::StatusCode::kUnimplemented);
#endif
}

// An NCCL rank meets its group through the store like the others: rank 1 waits for the id
// rank 0 published under the run's key, then hands it to NCCL (whose option check, before any
// device is touched, is as far as a machine without a GPU goes).
TEST(MakeCommunicator, NcclRanksTakeTheUniqueIdRankZeroPublishedInTheStore) {
  InMemoryRendezvousKv kv;
  KvGlooStore store(&kv);
  CommunicatorOptions options;
  options.kind = CommunicatorKind::kNccl;
  options.rank = 1;
  options.world_size = 2;
  options.gloo_store = &store;
  options.run_id = "run7";
  options.timeout = absl::Milliseconds(100);
  options.device_ordinal = -1;
#if TPSERVE_WITH_CUDA
  absl::Status waited = MakeCommunicator(options).status();
  EXPECT_EQ(waited.code(), absl::StatusCode::kDeadlineExceeded) << waited;
  EXPECT_NE(waited.message().find("rank 1 of 2: rank 0 did not publish the NCCL unique id under "
                                  "key 'run7/nccl_unique_id' in the rendezvous store within "
                                  "100ms"),
            std::string::npos)
      << waited;
  ASSERT_TRUE(kv.Set("run7/nccl_unique_id", std::string(128, 'x')).ok());
  EXPECT_EQ(MakeCommunicator(options).status().message(),
            "NcclOptions.device_ordinal is -1, must be >= 0");
#else
  EXPECT_EQ(MakeCommunicator(options).status().code(), absl::StatusCode::kUnimplemented);
#endif
}

TEST(MakeCommunicator, SingleRankIsIdentity) {
  absl::StatusOr<std::unique_ptr<Communicator>> comm = MakeCommunicator(CommunicatorOptions{});
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->Describe(), "single rank");
}

std::string TestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
}

// A run id no other test or test run uses: FileStore keys stay in the directory.
std::string FreshRunId(const std::string& name) {
  return name + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(absl::ToUnixNanos(absl::Now()));
}

// Runs the shared workload on two ranks made by the factory; returns rank 1's results.
// `describe` receives each rank's Describe().
CollectiveResults RunTwoRanks(const CommunicatorOptions& base,
                              std::vector<std::string>* describe = nullptr) {
  if (describe != nullptr) describe->assign(2, "");
  std::vector<CollectiveResults> results =
      RunOnThreads(2, {1, 576}, [&](int rank) -> absl::StatusOr<std::unique_ptr<Communicator>> {
        CommunicatorOptions options = base;
        options.rank = rank;
        absl::StatusOr<std::unique_ptr<Communicator>> comm = MakeCommunicator(options);
        if (comm.ok() && describe != nullptr) (*describe)[rank] = (*comm)->Describe();
        return comm;
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
  file_gloo.store_dir = TestDir("factory_store");
  file_gloo.run_id = FreshRunId("factory");
  EXPECT_TRUE(RunTwoRanks(file_gloo).Serialize() == reference);

  InMemoryRendezvousKv kv;
  KvGlooStore store(&kv);
  CommunicatorOptions kv_gloo = file_gloo;
  kv_gloo.store_dir.clear();
  kv_gloo.gloo_store = &store;
  EXPECT_TRUE(RunTwoRanks(kv_gloo).Serialize() == reference);
}

TEST(MakeCommunicator, ShmThroughEitherStoreGivesTheInProcessResults) {
  CommunicatorOptions in_process;
  in_process.kind = CommunicatorKind::kInProcess;
  in_process.world_size = 2;
  in_process.in_process_group = std::make_shared<InProcessGroup>(2);
  const std::string reference = RunTwoRanks(in_process).Serialize();

  CommunicatorOptions file_shm;
  file_shm.kind = CommunicatorKind::kShm;
  file_shm.world_size = 2;
  file_shm.store_dir = TestDir("factory_store");
  file_shm.run_id = FreshRunId("shm");
  file_shm.shm_max_bytes = 256;  // 576 floats in 9 pieces
  std::vector<std::string> describe;
  EXPECT_TRUE(RunTwoRanks(file_shm, &describe).Serialize() == reference);
  EXPECT_EQ(describe,
            (std::vector<std::string>{"shm rank 0/2 (same host)", "shm rank 1/2 (same host)"}));

  InMemoryRendezvousKv kv;
  KvGlooStore store(&kv);
  CommunicatorOptions kv_shm = file_shm;
  kv_shm.store_dir.clear();
  kv_shm.gloo_store = &store;
  EXPECT_TRUE(RunTwoRanks(kv_shm).Serialize() == reference);
}

TEST(MakeCommunicator, AutoPicksShmOnOneHostAndGlooAcrossHosts) {
  constexpr int kWorld = 3;
  for (const bool one_host : {true, false}) {
    InMemoryRendezvousKv kv;
    KvGlooStore store(&kv);
    std::vector<std::string> describe(kWorld);
    std::vector<CollectiveResults> results = RunOnThreads(
        kWorld, {1, 576}, [&](int rank) -> absl::StatusOr<std::unique_ptr<Communicator>> {
          CommunicatorOptions options;
          options.kind = CommunicatorKind::kAuto;
          options.rank = rank;
          options.world_size = kWorld;
          options.gloo_store = &store;
          options.run_id = "auto";
          // Pretend rank 2 runs elsewhere; left empty, every rank reports this machine.
          if (!one_host && rank == 2) options.host_identity = "elsewhere/0";
          absl::StatusOr<std::unique_ptr<Communicator>> comm = MakeCommunicator(options);
          if (comm.ok()) describe[rank] = (*comm)->Describe();
          return comm;
        });
    for (int rank = 0; rank < kWorld; ++rank) {
      ASSERT_TRUE(results[rank].status.ok()) << results[rank].status;
      EXPECT_EQ(describe[rank], one_host ? absl::StrCat("shm rank ", rank, "/3 (same host)")
                                         : absl::StrCat("gloo rank ", rank, "/3 via 127.0.0.1"));
      EXPECT_TRUE(results[rank].SerializeCommon() == results[0].SerializeCommon());
      EXPECT_TRUE(results[rank].exchanged[1] == ExpectedWorkloadAllToAll(rank, kWorld, 576))
          << "rank " << rank;
    }
    float expected = RankValue(0, 0);
    for (int rank = 1; rank < kWorld; ++rank) expected += RankValue(rank, 0);
    EXPECT_EQ(results[1].reduced[0][0], expected);
  }
}

TEST(MakeCommunicator, AutoNamesARankThatNeverPublishesItsHost) {
  Watchdog watchdog(absl::Seconds(10), "auto choice without rank 1");
  InMemoryRendezvousKv kv;
  KvGlooStore store(&kv);
  CommunicatorOptions options;
  options.kind = CommunicatorKind::kAuto;
  options.world_size = 2;
  options.gloo_store = &store;
  options.run_id = "lonely";
  options.timeout = absl::Milliseconds(200);
  absl::StatusOr<std::unique_ptr<Communicator>> comm = MakeCommunicator(options);
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded) << comm.status();
  EXPECT_NE(comm.status().message().find(
                "auto communicator choice on rank 0 of 2: exchanging host identities"),
            std::string::npos)
      << comm.status();
  EXPECT_NE(comm.status().message().find("lonely/auto_host_1"), std::string::npos) << comm.status();
}

TEST(LocalHostIdentity, IsHostnameSlashBootId) {
  const std::string identity = LocalHostIdentity();
  EXPECT_EQ(identity, LocalHostIdentity());
  char hostname[256] = {};
  ASSERT_EQ(gethostname(hostname, sizeof(hostname) - 1), 0);
  EXPECT_EQ(identity.rfind(std::string(hostname) + "/", 0), 0u) << identity;
  std::ifstream boot_id_file("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  if (boot_id_file >> boot_id) {
    EXPECT_EQ(identity, std::string(hostname) + "/" + boot_id);
  }
}

}  // namespace
}  // namespace tpserve
