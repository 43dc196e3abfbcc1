#include "deploy/gpu_target.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/str_cat.h"

namespace tpserve {
namespace {

// cudaDeviceProp.name of each GPU model a preset describes (planner/gpu_spec.h).
struct CudaModel {
  std::string_view cuda_name;
  std::string_view preset;
};
constexpr CudaModel kCudaModels[] = {
    {"NVIDIA A100-SXM4-40GB", "a100-40g"}, {"NVIDIA A100-PCIE-40GB", "a100-40g-pcie"},
    {"NVIDIA A100-SXM4-80GB", "a100-80g"}, {"NVIDIA H100 80GB HBM3", "h100-80g"},
    {"NVIDIA H100 PCIe", "h100-pcie"},     {"NVIDIA H200", "h200"},
    {"NVIDIA B200", "b200"},               {"NVIDIA L40S", "l40s"},
    {"NVIDIA GeForce RTX 4090", "rtx4090"},
};

std::string Gib(int64_t bytes) {
  return absl::StrFormat("%.1f GiB", static_cast<double>(bytes) / (int64_t{1} << 30));
}

absl::StatusOr<GpuSpec> PresetFlag(std::string_view preset) {
  absl::StatusOr<GpuSpec> spec = GpuPreset(preset);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(StrCat("--gpu=", preset, ": ", spec.status().message()));
  }
  return spec;
}

}  // namespace

std::string_view PresetForCudaName(std::string_view cuda_name) {
  for (const CudaModel& m : kCudaModels) {
    if (m.cuda_name == cuda_name) return m.preset;
  }
  return "";
}

absl::StatusOr<GpuTarget> ChooseGpuTarget(
    std::string_view gpu_flag, int gpus,
    const absl::StatusOr<std::vector<CudaDeviceInfo>>& devices) {
  GpuTarget target;
  if (!devices.ok() || devices->empty()) {
    absl::StatusOr<GpuSpec> spec = PresetFlag(gpu_flag.empty() ? kProductGpuPreset : gpu_flag);
    if (!spec.ok()) return spec.status();
    target.spec = *std::move(spec);
    target.why_none =
        devices.ok() ? "no CUDA device found" : std::string(devices.status().message());
    return target;
  }
  target.devices = *devices;
  // Every rank gets the same plan, so it must fit the smallest card the ranks run on.
  const int used = std::clamp(gpus, 1, static_cast<int>(devices->size()));
  int smallest = 0;
  for (int i = 1; i < used; ++i) {
    if ((*devices)[i].memory_bytes < (*devices)[smallest].memory_bytes) smallest = i;
  }
  const CudaDeviceInfo& card = (*devices)[smallest];
  const std::string_view found = PresetForCudaName(card.name);
  if (!found.empty() && !gpu_flag.empty() && gpu_flag != found) {
    return absl::InvalidArgumentError(StrCat("--gpu=", gpu_flag, ", but this machine's GPUs are ",
                                             card.name, " (", found,
                                             "): leave --gpu out to plan for them"));
  }
  if (found.empty() && gpu_flag.empty()) {
    return absl::InvalidArgumentError(StrCat(
        "CUDA device ", smallest, " is an ", card.name, " (", Gib(card.memory_bytes),
        "), which no GPU preset describes: pass --gpu=PRESET for its speed figures (",
        absl::StrJoin(GpuPresetNames(), ", "), "); the memory is taken from the device"));
  }
  absl::StatusOr<GpuSpec> spec = PresetFlag(found.empty() ? gpu_flag : found);
  if (!spec.ok()) return spec.status();
  target.spec = *std::move(spec);
  if (found.empty()) {
    target.spec.description =
        StrCat(card.name, " with the speed figures of ", target.spec.description);
  }
  target.spec.memory_bytes = card.memory_bytes;  // the card's own figure beats the preset's
  return target;
}

std::string MissingDevicesLine(const GpuTarget& target, int gpus) {
  const int found = static_cast<int>(target.devices.size());
  if (found >= gpus) return "";
  const std::string plan = StrCat("the plan above is for ", gpus, " x ", target.spec.name);
  if (found == 0) {
    return StrCat(target.why_none, "; ", plan,
                  " (--gpu=NAME plans for another GPU); run on CPU ranks with --ranks=N");
  }
  return StrCat("--gpus=", gpus, " needs ", gpus, " CUDA devices on this machine; found ", found,
                " (", target.devices[0].name, "); ", plan, "; run on CPU ranks with --ranks=N");
}

absl::StatusOr<GpuTarget> RemoteGpuTarget(std::string_view gpu_flag, int gpus) {
  if (gpu_flag.empty()) {
    return absl::InvalidArgumentError(StrCat(
        "--spawn_ranks=false with --gpus=", gpus, ": the ranks' GPUs are on their own machines, "
        "which this one cannot see; name their kind with --gpu=PRESET (",
        absl::StrJoin(GpuPresetNames(), ", "), "): every rank's KV cache is sized for it"));
  }
  absl::StatusOr<GpuSpec> spec = PresetFlag(gpu_flag);
  if (!spec.ok()) return spec.status();
  GpuTarget target;
  target.spec = *std::move(spec);
  return target;
}

}  // namespace tpserve
