// The device a rank runs on, as the memory plan and the roofline see it: how much memory the
// driver reports, how fast it is read, peak matmul rate, the link between ranks, and the fixed
// costs (runtime reserve, communicator buffers, safety margin). Presets carry spec-sheet
// numbers (sources in docs/CAPACITY.md); the CPU host preset is built from /proc/meminfo.
//
//   TP_ASSIGN_OR_RETURN(GpuSpec h100, GpuPreset("h100-80g"));
//   TP_ASSIGN_OR_RETURN(GpuSpec host, HostCpuSpec("/proc/meminfo", 20e9, 100e9));
//
// Units: bytes are binary-exact integers; "GB" in names and spec sheets is 10^9 bytes, "GiB"
// 2^30. Bandwidths are bytes/s (10^9 = 1 GB/s). Thread-safe: value types and pure functions.
#ifndef TPSERVE_PLANNER_GPU_SPEC_H_
#define TPSERVE_PLANNER_GPU_SPEC_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tpserve {

struct InterconnectSpec {
  std::string name;                  // "NVLink 4 via NVSwitch"
  double bandwidth_bytes_per_s = 0;  // per GPU, per direction (half the bidirectional figure)
  double latency_s = 0;              // lumped fixed cost of one collective
};

struct GpuSpec {
  std::string name;            // preset name, e.g. "h100-80g"
  std::string description;     // "NVIDIA H100 80GB HBM3 (SXM5)"
  std::string nominal_memory;  // the spec-sheet label, e.g. "80 GB"
  // Total memory the driver reports (nvidia-smi memory.total), which is what cudaMemGetInfo
  // starts from; for the CPU host, MemTotal.
  int64_t memory_bytes = 0;
  double memory_bandwidth_bytes_per_s = 0;
  double peak_flops = 0;  // dense BF16 tensor-core FLOP/s (no sparsity)
  // Streaming multiprocessors (cudaDevAttrMultiProcessorCount): attention's work partition,
  // and so its workspace, scales with them (kernels/cuda/attention_workspace.h). 0: the host.
  int num_sms = 0;
  // Compute capability as major * 10 + minor (90: Hopper); 0 for the host. FlashInfer's kernels
  // are built for sm_90a only (tools/cuda.bzl), so it decides which attention kernels run.
  int compute_capability = 0;
  InterconnectSpec interconnect;
  // CUDA context, cuBLAS/cuBLASLt workspaces and kernel images: never available to the plan.
  int64_t runtime_reserve_bytes = 0;
  // Communicator's own buffers (NCCL channels), charged only when the plan has > 1 rank.
  int64_t comm_fixed_bytes = 0;
  // Fraction of (memory_bytes - runtime_reserve_bytes) kept free for allocator fragmentation.
  double safety_fraction = 0;
  bool is_host = false;
};

// Presets: "a100-40g", "a100-40g-pcie", "a100-80g", "h100-80g" (SXM), "h100-pcie", "h200",
// "b200", "l40s", "rtx4090". NOT_FOUND lists the names.
absl::StatusOr<GpuSpec> GpuPreset(std::string_view name);
std::vector<std::string> GpuPresetNames();

// The value of "MemTotal:  24683656 kB" in /proc/meminfo text, in bytes (kB there is KiB).
// INVALID_ARGUMENT when the line is missing or malformed.
absl::StatusOr<int64_t> ParseMemTotalBytes(std::string_view meminfo_text);

// A CPU host rank: memory = MemTotal of `meminfo_path`, no runtime reserve, 10% safety margin
// for the OS and page cache, ranks talk through host memory. `memory_bandwidth_bytes_per_s`
// and `peak_flops` are measured or stated by the caller. INVALID_ARGUMENT names a value <= 0;
// NOT_FOUND/INVALID_ARGUMENT when the file can't be read or parsed.
absl::StatusOr<GpuSpec> HostCpuSpec(const std::string& meminfo_path,
                                    double memory_bandwidth_bytes_per_s, double peak_flops);
// The same from an already-known MemTotal.
GpuSpec HostCpuSpecFromMemTotal(int64_t mem_total_bytes, double memory_bandwidth_bytes_per_s,
                                double peak_flops);

}  // namespace tpserve

#endif  // TPSERVE_PLANNER_GPU_SPEC_H_
