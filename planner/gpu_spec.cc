#include "planner/gpu_spec.h"

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/str_cat.h"

namespace tpserve {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

// Fixed costs, the same for every GPU preset (see docs/CAPACITY.md "Constants").
constexpr int64_t kCudaRuntimeReserveBytes = 1 * kGiB;
constexpr int64_t kNcclFixedBytes = 512 * kMiB;
constexpr double kGpuSafetyFraction = 0.05;
constexpr double kHostSafetyFraction = 0.10;

// Link figures: NVIDIA quotes NVLink and PCIe bidirectionally; the ring model needs one
// direction. Latencies are stated assumptions (order of an NCCL small-message all-reduce).
InterconnectSpec NvLink3() { return {"NVLink 3 (600 GB/s bidirectional)", 300e9, 10e-6}; }
InterconnectSpec NvLink4() {
  return {"NVLink 4 via NVSwitch (900 GB/s bidirectional)", 450e9, 10e-6};
}
InterconnectSpec NvLink5() {
  return {"NVLink 5 via NVSwitch (1.8 TB/s bidirectional)", 900e9, 10e-6};
}
InterconnectSpec PcieGen4() { return {"PCIe 4.0 x16 (64 GB/s bidirectional)", 32e9, 25e-6}; }
InterconnectSpec PcieGen5() { return {"PCIe 5.0 x16 (128 GB/s bidirectional)", 64e9, 25e-6}; }

struct Preset {
  std::string_view name;
  std::string_view description;
  std::string_view nominal_memory;
  int64_t driver_total_mib;  // nvidia-smi memory.total
  double bandwidth_bytes_per_s;
  double peak_bf16_flops;
  InterconnectSpec (*link)();
  int num_sms;  // the whitepapers' SM counts of these products
  int compute_capability;
};

const Preset kPresets[] = {
    {"a100-40g", "NVIDIA A100-SXM4-40GB", "40 GB", 40960, 1555e9, 312e12, NvLink3, 108, 80},
    {"a100-40g-pcie", "NVIDIA A100-PCIE-40GB", "40 GB", 40960, 1555e9, 312e12, PcieGen4, 108, 80},
    {"a100-80g", "NVIDIA A100-SXM4-80GB", "80 GB", 81920, 2039e9, 312e12, NvLink3, 108, 80},
    {"h100-80g", "NVIDIA H100 80GB HBM3 (SXM5)", "80 GB", 81559, 3.35e12, 989e12, NvLink4, 132, 90},
    {"h100-pcie", "NVIDIA H100 PCIe 80GB", "80 GB", 81559, 2.0e12, 756e12, PcieGen5, 114, 90},
    {"h200", "NVIDIA H200 141GB HBM3e (SXM)", "141 GB", 143771, 4.8e12, 989e12, NvLink4, 132, 90},
    {"b200", "NVIDIA B200 (HGX, 180 GB per GPU)", "180 GB", 183359, 8.0e12, 2.25e15, NvLink5, 148,
     100},
    {"l40s", "NVIDIA L40S 48GB GDDR6 (ECC on)", "48 GB", 46068, 864e9, 362e12, PcieGen4, 142, 89},
    {"rtx4090", "NVIDIA GeForce RTX 4090 24GB GDDR6X", "24 GB", 24564, 1008e9, 165.2e12, PcieGen4,
     128, 89},
};

}  // namespace

absl::StatusOr<GpuSpec> GpuPreset(std::string_view name) {
  for (const Preset& p : kPresets) {
    if (p.name != name) continue;
    GpuSpec spec;
    spec.name = std::string(p.name);
    spec.description = std::string(p.description);
    spec.nominal_memory = std::string(p.nominal_memory);
    spec.memory_bytes = p.driver_total_mib * kMiB;
    spec.memory_bandwidth_bytes_per_s = p.bandwidth_bytes_per_s;
    spec.peak_flops = p.peak_bf16_flops;
    spec.interconnect = p.link();
    spec.num_sms = p.num_sms;
    spec.compute_capability = p.compute_capability;
    spec.runtime_reserve_bytes = kCudaRuntimeReserveBytes;
    spec.comm_fixed_bytes = kNcclFixedBytes;
    spec.safety_fraction = kGpuSafetyFraction;
    return spec;
  }
  return absl::NotFoundError(StrCat(
      "unknown GPU \"", name, "\"; known: ", absl::StrJoin(GpuPresetNames(), ", "), ", cpu-host"));
}

std::vector<std::string> GpuPresetNames() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.emplace_back(p.name);
  return names;
}

absl::StatusOr<int64_t> ParseMemTotalBytes(std::string_view meminfo_text) {
  const absl::string_view text(meminfo_text.data(), meminfo_text.size());
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, "MemTotal:")) continue;
    absl::string_view number = absl::StripAsciiWhitespace(line);
    const bool in_kib = absl::ConsumeSuffix(&number, "kB");
    int64_t value = 0;
    if (!in_kib || !absl::SimpleAtoi(absl::StripAsciiWhitespace(number), &value) || value <= 0) {
      return absl::InvalidArgumentError(StrCat("meminfo: malformed MemTotal line \"", line, "\""));
    }
    return value * 1024;  // /proc/meminfo's "kB" is KiB
  }
  return absl::InvalidArgumentError("meminfo: no MemTotal line");
}

GpuSpec HostCpuSpecFromMemTotal(int64_t mem_total_bytes, double memory_bandwidth_bytes_per_s,
                                double peak_flops) {
  GpuSpec spec;
  spec.name = "cpu-host";
  spec.description = "this machine's CPU and RAM (MemTotal from /proc/meminfo)";
  spec.nominal_memory = StrCat(mem_total_bytes / kMiB, " MiB");
  spec.memory_bytes = mem_total_bytes;
  spec.memory_bandwidth_bytes_per_s = memory_bandwidth_bytes_per_s;
  spec.peak_flops = peak_flops;
  // Ranks on one host exchange through shared memory; half the measured memory bandwidth
  // (a copy reads and writes) and a thread hand-off latency, both stated assumptions.
  spec.interconnect = {"host shared memory", memory_bandwidth_bytes_per_s / 2, 20e-6};
  spec.runtime_reserve_bytes = 0;
  spec.comm_fixed_bytes = 0;
  spec.safety_fraction = kHostSafetyFraction;
  spec.is_host = true;
  return spec;
}

absl::StatusOr<GpuSpec> HostCpuSpec(const std::string& meminfo_path,
                                    double memory_bandwidth_bytes_per_s, double peak_flops) {
  if (!(memory_bandwidth_bytes_per_s > 0)) {
    return absl::InvalidArgumentError(
        StrCat("host memory bandwidth ", memory_bandwidth_bytes_per_s, " B/s must be > 0"));
  }
  if (!(peak_flops > 0)) {
    return absl::InvalidArgumentError(StrCat("host peak FLOP/s ", peak_flops, " must be > 0"));
  }
  std::ifstream in(meminfo_path);
  if (!in) return absl::NotFoundError(StrCat("cannot read ", meminfo_path));
  std::stringstream text;
  text << in.rdbuf();
  auto mem_total = ParseMemTotalBytes(text.str());
  if (!mem_total.ok()) {
    return absl::InvalidArgumentError(StrCat(meminfo_path, ": ", mem_total.status().message()));
  }
  return HostCpuSpecFromMemTotal(*mem_total, memory_bandwidth_bytes_per_s, peak_flops);
}

}  // namespace tpserve
