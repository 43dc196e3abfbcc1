// What `launch --gpus` plans for, with the device query's answer injected: no driver (the
// build machine; it used to plan for an H200 and print the runtime's "driver version is
// insufficient"), the GPUs found, fewer than asked, a model without a preset, and a --gpu that
// contradicts the hardware.
#include "deploy/gpu_target.h"

#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace tpserve {
namespace {

constexpr int64_t kH100Bytes = int64_t{85520809984};   // 81559 MiB, as the driver reports
constexpr int64_t kH200Bytes = int64_t{150754820096};  // 143771 MiB

absl::StatusOr<std::vector<CudaDeviceInfo>> Cards(int n, const std::string& name, int64_t bytes) {
  return std::vector<CudaDeviceInfo>(n, CudaDeviceInfo{name, bytes});
}

TEST(GpuTarget, WithoutADriverPlansForTheProductsH100AndSaysSoInOneLine) {
  const absl::StatusOr<GpuTarget> target =
      ChooseGpuTarget("", 8, absl::FailedPreconditionError("no CUDA driver found"));
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(target->spec.name, "h100-80g");
  EXPECT_EQ(target->spec.memory_bytes, kH100Bytes);
  EXPECT_TRUE(target->devices.empty());
  EXPECT_EQ(MissingDevicesLine(*target, 8),
            "no CUDA driver found; the plan above is for 8 x h100-80g (--gpu=NAME plans for "
            "another GPU); run on CPU ranks with --ranks=N");
}

TEST(GpuTarget, WithoutDevicesGpuNamesThePreset) {
  const absl::StatusOr<GpuTarget> target =
      ChooseGpuTarget("h200", 8, std::vector<CudaDeviceInfo>{});
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(target->spec.name, "h200");
  EXPECT_EQ(MissingDevicesLine(*target, 8),
            "no CUDA device found; the plan above is for 8 x h200 (--gpu=NAME plans for another "
            "GPU); run on CPU ranks with --ranks=N");
  const absl::StatusOr<GpuTarget> unknown =
      ChooseGpuTarget("h300", 8, absl::FailedPreconditionError("no CUDA driver found"));
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(unknown.status().message(), "--gpu=h300: unknown GPU \"h300\""))
      << unknown.status();
}

TEST(GpuTarget, PlansForTheGpusItFindsWithTheirOwnMemory) {
  // An H200 that reports a little less than the preset's figure: the device's figure counts.
  const int64_t reported = kH200Bytes - (int64_t{256} << 20);
  const absl::StatusOr<GpuTarget> target =
      ChooseGpuTarget("", 8, Cards(8, "NVIDIA H200", reported));
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(target->spec.name, "h200");
  EXPECT_EQ(target->spec.memory_bytes, reported);
  EXPECT_EQ(target->devices.size(), 8u);
  EXPECT_EQ(MissingDevicesLine(*target, 8), "");
  // --gpu naming the same model is fine.
  EXPECT_TRUE(ChooseGpuTarget("h200", 8, Cards(8, "NVIDIA H200", reported)).ok());
}

TEST(GpuTarget, PlansForTheSmallestCardTheRanksUse) {
  std::vector<CudaDeviceInfo> cards(8, CudaDeviceInfo{"NVIDIA H100 80GB HBM3", kH100Bytes});
  cards[5].memory_bytes = kH100Bytes - (int64_t{1} << 30);  // one card with less usable memory
  cards.push_back({"NVIDIA H100 80GB HBM3", kH100Bytes / 2});  // ninth: no rank runs on it
  const absl::StatusOr<GpuTarget> target = ChooseGpuTarget("", 8, cards);
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(target->spec.name, "h100-80g");
  EXPECT_EQ(target->spec.memory_bytes, kH100Bytes - (int64_t{1} << 30));
}

TEST(GpuTarget, FewerGpusThanAskedIsOneLine) {
  const absl::StatusOr<GpuTarget> target =
      ChooseGpuTarget("", 8, Cards(2, "NVIDIA H100 80GB HBM3", kH100Bytes));
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(MissingDevicesLine(*target, 8),
            "--gpus=8 needs 8 CUDA devices on this machine; found 2 (NVIDIA H100 80GB HBM3); the "
            "plan above is for 8 x h100-80g; run on CPU ranks with --ranks=N");
}

TEST(GpuTarget, GpuThatContradictsTheHardwareIsRefused) {
  const absl::StatusOr<GpuTarget> target =
      ChooseGpuTarget("h200", 8, Cards(8, "NVIDIA H100 80GB HBM3", kH100Bytes));
  EXPECT_EQ(target.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(target.status().message(),
            "--gpu=h200, but this machine's GPUs are NVIDIA H100 80GB HBM3 (h100-80g): leave "
            "--gpu out to plan for them");
}

TEST(GpuTarget, AModelWithoutPresetNeedsGpuForItsSpeeds) {
  const int64_t nvl = int64_t{99857989632};  // an H100 NVL: 94 GB, no preset
  const absl::StatusOr<GpuTarget> refused =
      ChooseGpuTarget("", 2, Cards(2, "NVIDIA H100 NVL", nvl));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(refused.status().message(),
                               "CUDA device 0 is an NVIDIA H100 NVL (93.0 GiB), which no GPU "
                               "preset describes: pass --gpu=PRESET for its speed figures (a100-"))
      << refused.status();
  const absl::StatusOr<GpuTarget> target =
      ChooseGpuTarget("h100-pcie", 2, Cards(2, "NVIDIA H100 NVL", nvl));
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(target->spec.name, "h100-pcie");
  EXPECT_EQ(target->spec.memory_bytes, nvl);
  EXPECT_EQ(target->spec.description,
            "NVIDIA H100 NVL with the speed figures of NVIDIA H100 PCIe 80GB");
}

TEST(GpuTarget, EveryKnownModelMapsToAPresetThatExists) {
  for (const char* name : {"NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB",
                           "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe",
                           "NVIDIA H200", "NVIDIA B200", "NVIDIA L40S",
                           "NVIDIA GeForce RTX 4090"}) {
    const std::string_view preset = PresetForCudaName(name);
    ASSERT_FALSE(preset.empty()) << name;
    EXPECT_TRUE(GpuPreset(preset).ok()) << name << " -> " << preset;
  }
  EXPECT_EQ(PresetForCudaName("NVIDIA H100 80GB HBM3"), "h100-80g");
  EXPECT_EQ(PresetForCudaName("NVIDIA H200 NVL"), "");
}

TEST(GpuTarget, RanksElsewherePlanForTheGpuNamedWhateverThisMachineHas) {
  // --spawn_ranks=false: the coordinator's pod has no GPU (or others than the ranks').
  const absl::StatusOr<GpuTarget> target = RemoteGpuTarget("h200", 16);
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(target->spec.name, "h200");
  EXPECT_EQ(target->spec.memory_bytes, kH200Bytes);
  EXPECT_TRUE(target->devices.empty());
  const absl::StatusOr<GpuTarget> unnamed = RemoteGpuTarget("", 16);
  EXPECT_EQ(unnamed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(unnamed.status().message(),
                               "--spawn_ranks=false with --gpus=16: the ranks' GPUs are on their "
                               "own machines, which this one cannot see; name their kind with "
                               "--gpu=PRESET (a100-40g, "))
      << unnamed.status();
  EXPECT_EQ(RemoteGpuTarget("h300", 16).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tpserve
