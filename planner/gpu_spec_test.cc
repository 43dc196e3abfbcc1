#include "planner/gpu_spec.h"

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"

namespace tpserve {
namespace {

TEST(GpuSpecTest, H100MemoryIsWhatTheDriverReports) {
  absl::StatusOr<GpuSpec> h100 = GpuPreset("h100-80g");
  ASSERT_TRUE(h100.ok());
  EXPECT_EQ(h100->memory_bytes, int64_t{81559} << 20);  // nvidia-smi: 81559MiB
  EXPECT_EQ(h100->nominal_memory, "80 GB");
  EXPECT_DOUBLE_EQ(h100->memory_bandwidth_bytes_per_s, 3.35e12);
  EXPECT_DOUBLE_EQ(h100->interconnect.bandwidth_bytes_per_s, 450e9);
  EXPECT_EQ(h100->runtime_reserve_bytes, int64_t{1} << 30);
  EXPECT_FALSE(h100->is_host);
}

TEST(GpuSpecTest, EveryPresetHasSpecSheetNumbers) {
  ASSERT_EQ(GpuPresetNames().size(), 9u);
  for (const std::string& name : GpuPresetNames()) {
    absl::StatusOr<GpuSpec> g = GpuPreset(name);
    ASSERT_TRUE(g.ok()) << name;
    EXPECT_GT(g->memory_bytes, int64_t{20} << 30) << name;
    EXPECT_GT(g->memory_bandwidth_bytes_per_s, 800e9) << name;
    EXPECT_GT(g->peak_flops, 100e12) << name;
    EXPECT_GT(g->interconnect.bandwidth_bytes_per_s, 0) << name;
  }
  EXPECT_DOUBLE_EQ(GpuPreset("a100-40g")->memory_bandwidth_bytes_per_s, 1555e9);
  EXPECT_DOUBLE_EQ(GpuPreset("a100-80g")->memory_bandwidth_bytes_per_s, 2039e9);
  EXPECT_DOUBLE_EQ(GpuPreset("h100-pcie")->memory_bandwidth_bytes_per_s, 2.0e12);
  EXPECT_DOUBLE_EQ(GpuPreset("h200")->memory_bandwidth_bytes_per_s, 4.8e12);
  EXPECT_DOUBLE_EQ(GpuPreset("b200")->memory_bandwidth_bytes_per_s, 8.0e12);
  EXPECT_DOUBLE_EQ(GpuPreset("l40s")->memory_bandwidth_bytes_per_s, 864e9);
  EXPECT_DOUBLE_EQ(GpuPreset("rtx4090")->memory_bandwidth_bytes_per_s, 1008e9);
}

TEST(GpuSpecTest, UnknownPresetListsNames) {
  absl::Status s = GpuPreset("h900").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("known: a100-40g"), std::string::npos) << s;
  EXPECT_NE(s.message().find("cpu-host"), std::string::npos) << s;
}

TEST(GpuSpecTest, ParsesMemTotalInKiB) {
  EXPECT_EQ(*ParseMemTotalBytes("MemTotal:       24683656 kB\nMemFree: 1 kB\n"),
            int64_t{24683656} * 1024);
  EXPECT_EQ(ParseMemTotalBytes("MemFree: 1 kB\n").status().message(), "meminfo: no MemTotal line");
  EXPECT_FALSE(ParseMemTotalBytes("MemTotal: lots kB\n").ok());
  EXPECT_FALSE(ParseMemTotalBytes("MemTotal: 100 MB\n").ok());
}

TEST(GpuSpecTest, HostSpecFromMeminfoFile) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/meminfo";
  std::ofstream(path) << "MemTotal:        1048576 kB\n";
  absl::StatusOr<GpuSpec> host = HostCpuSpec(path, 20e9, 100e9);
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(host->memory_bytes, int64_t{1} << 30);
  EXPECT_EQ(host->runtime_reserve_bytes, 0);
  EXPECT_EQ(host->comm_fixed_bytes, 0);
  EXPECT_DOUBLE_EQ(host->safety_fraction, 0.10);
  EXPECT_TRUE(host->is_host);
  EXPECT_DOUBLE_EQ(host->memory_bandwidth_bytes_per_s, 20e9);

  EXPECT_EQ(HostCpuSpec(path, 0, 100e9).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HostCpuSpec(path + ".missing", 20e9, 100e9).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tpserve
