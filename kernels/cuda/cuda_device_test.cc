// The host-sync mode the CUDA backend sets at device init, without a GPU: the default is
// blocking sync, its names round-trip, a bad name is refused naming the choices, and the flags
// it writes carry the CUDA header's schedule bit while keeping the others. (Before issue 38 the
// backend set no flag, leaving the driver's kAuto, which spins.) That the backend applies it to
// the device is checked on a GPU: device_wait_test's CudaBackendChoosesBlockingSync.
#include "kernels/cuda/cuda_device.h"

#include <cuda_runtime_api.h>

#include "gtest/gtest.h"

namespace tpserve {
namespace {

TEST(HostSyncMode, TheDefaultBlocksTheThreadInsteadOfSpinning) {
  EXPECT_EQ(kDefaultHostSyncMode, HostSyncMode::kBlockingSync);
  EXPECT_EQ(DeviceFlagsWithHostSync(0, kDefaultHostSyncMode), 0x04u);
  EXPECT_EQ(0x04u, static_cast<unsigned int>(cudaDeviceScheduleBlockingSync));
}

TEST(HostSyncMode, FlagsReplaceTheScheduleBitsAndKeepTheOthers) {
  const unsigned int map_host = cudaDeviceMapHost;  // 0x08
  const unsigned int lmem = cudaDeviceLmemResizeToMax;  // 0x10
  EXPECT_EQ(DeviceFlagsWithHostSync(map_host | cudaDeviceScheduleSpin, HostSyncMode::kBlockingSync),
            map_host | cudaDeviceScheduleBlockingSync);
  EXPECT_EQ(DeviceFlagsWithHostSync(map_host | lmem | cudaDeviceScheduleBlockingSync,
                                    HostSyncMode::kYield),
            map_host | lmem | cudaDeviceScheduleYield);
  EXPECT_EQ(DeviceFlagsWithHostSync(cudaDeviceScheduleYield, HostSyncMode::kSpin),
            static_cast<unsigned int>(cudaDeviceScheduleSpin));
  EXPECT_EQ(DeviceFlagsWithHostSync(map_host | cudaDeviceScheduleYield, HostSyncMode::kAuto),
            map_host);
}

TEST(HostSyncMode, NamesRoundTripAndABadOneIsRefusedNamingTheChoices) {
  for (HostSyncMode mode : {HostSyncMode::kBlockingSync, HostSyncMode::kYield,
                            HostSyncMode::kSpin, HostSyncMode::kAuto}) {
    absl::StatusOr<HostSyncMode> parsed = ParseHostSyncMode(HostSyncModeName(mode));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, mode);
  }
  EXPECT_EQ(HostSyncModeName(HostSyncMode::kBlockingSync), "blocking_sync");
  const absl::StatusOr<HostSyncMode> bad = ParseHostSyncMode("blocking");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "host sync mode 'blocking' is not one of blocking_sync, yield, spin, auto");
}

}  // namespace
}  // namespace tpserve
