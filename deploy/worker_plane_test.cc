// The launcher's worker plane: a private run directory and secret file, the flags external
// workers need, and the address local ranks dial.
#include "deploy/worker_plane.h"

#include <sys/stat.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "cluster/secret.h"

namespace tpserve {
namespace {

TEST(WorkerPlaneTest, SpawnedRanksGetAPrivateRunDirectoryAndSecretFile) {
  std::string run_dir;
  {
    absl::StatusOr<std::unique_ptr<WorkerPlane>> plane =
        StartWorkerPlane({.ranks = 2, .spawn_ranks = true});
    ASSERT_TRUE(plane.ok()) << plane.status();
    run_dir = (*plane)->run_dir;
    struct stat st {};
    ASSERT_EQ(stat(run_dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    ASSERT_EQ(stat((*plane)->secret_file.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_EQ(*ReadClusterSecretFile((*plane)->secret_file), (*plane)->secret);
    EXPECT_EQ((*plane)->secret.size(), 64u);
    EXPECT_EQ((*plane)->local_address.rfind("127.0.0.1:", 0), 0u) << (*plane)->local_address;
    EXPECT_NE((*plane)->local_address, "127.0.0.1:0");
    EXPECT_EQ((*plane)->control->world_size(), 2);
  }
  EXPECT_FALSE(std::filesystem::exists(run_dir)) << run_dir;
}

TEST(WorkerPlaneTest, AnyAddressIsDialledOnLoopback) {
  absl::StatusOr<std::unique_ptr<WorkerPlane>> plane =
      StartWorkerPlane({.ranks = 1, .spawn_ranks = true, .worker_listen = "0.0.0.0:0"});
  ASSERT_TRUE(plane.ok()) << plane.status();
  EXPECT_EQ((*plane)->listen_address.rfind("0.0.0.0:", 0), 0u) << (*plane)->listen_address;
  EXPECT_EQ((*plane)->local_address.rfind("127.0.0.1:", 0), 0u) << (*plane)->local_address;
}

TEST(WorkerPlaneTest, ExternalRanksNeedAnAddressAndASecretFile) {
  absl::StatusOr<std::unique_ptr<WorkerPlane>> plane =
      StartWorkerPlane({.ranks = 2, .spawn_ranks = false, .cluster_secret_file = "/x"});
  EXPECT_EQ(plane.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plane.status().message().find("--spawn_ranks=false needs --worker_listen"),
            std::string::npos)
      << plane.status();
  plane = StartWorkerPlane({.ranks = 2, .spawn_ranks = false, .worker_listen = "127.0.0.1:0"});
  EXPECT_EQ(plane.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plane.status().message().find("--spawn_ranks=false needs --cluster_secret_file"),
            std::string::npos)
      << plane.status();
}

TEST(WorkerPlaneTest, EachHostsRanksTakeItsGpusFromZero) {
  const auto rank = [](const char* host) { return JoinedRank{0, "", host, "boot"}; };
  // Two hosts of a stage each (TP 2 x PP 2), then one more on the first host.
  EXPECT_EQ(DeviceOrdinalsByHost({rank("a"), rank("a"), rank("b"), rank("b"), rank("a")}),
            (std::vector<int32_t>{0, 1, 0, 1, 2}));
  // Pods of one GPU each: every rank its device 0.
  EXPECT_EQ(DeviceOrdinalsByHost({rank("p0"), rank("p1"), rank("p2")}),
            (std::vector<int32_t>{0, 0, 0}));
  // The same name after a reboot is another host.
  EXPECT_EQ(DeviceOrdinalsByHost({rank("a"), JoinedRank{1, "", "a", "other-boot"}}),
            (std::vector<int32_t>{0, 0}));
}

}  // namespace
}  // namespace tpserve
