// Which GPU `launch --gpus=N` plans for: the CUDA devices of this machine when it has them;
// without a driver or devices, the product's GPU (an H100 80GB SXM) or the preset --gpu names,
// so that a machine without GPUs still prints the plan for the real cluster.
//
//   TP_ASSIGN_OR_RETURN(GpuTarget target,
//                       ChooseGpuTarget(flag_gpu, /*gpus=*/8, VisibleCudaDevices()));
//   PlanGpus(config, formats, 8, target.spec, request);
//   if (std::string missing = MissingDevicesLine(target, 8); !missing.empty()) ...
//
// Pure: the device query's answer is an argument, so tests need no GPU. Thread-safe.
#ifndef TPSERVE_DEPLOY_GPU_TARGET_H_
#define TPSERVE_DEPLOY_GPU_TARGET_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cuda_devices.h"
#include "planner/gpu_spec.h"

namespace tpserve {

// What a launch plans for when it finds no GPU and --gpu is not given: the product's GPU.
inline constexpr char kProductGpuPreset[] = "h100-80g";

struct GpuTarget {
  GpuSpec spec;  // what the plan sizes for
  // The CUDA devices found here; empty without a driver or devices.
  std::vector<CudaDeviceInfo> devices;
  // Why none were found, one phrase: "no CUDA driver found", "no CUDA device found", ...
  std::string why_none;
};

// The preset for a device name the driver reports ("NVIDIA H100 80GB HBM3" -> "h100-80g"); ""
// for a model no preset describes.
std::string_view PresetForCudaName(std::string_view cuda_name);

// `gpu_flag`: --gpu as given ("" when not). `devices`: VisibleCudaDevices()'s answer.
// With devices: the preset of device 0's model with the smallest memory among the first
// `gpus` devices (every rank gets the same plan); INVALID_ARGUMENT when --gpu names another
// model than the one found, or when the model has no preset and --gpu does not say whose speed
// figures to use. Without: --gpu's preset, or kProductGpuPreset. INVALID_ARGUMENT for an
// unknown --gpu.
absl::StatusOr<GpuTarget> ChooseGpuTarget(
    std::string_view gpu_flag, int gpus,
    const absl::StatusOr<std::vector<CudaDeviceInfo>>& devices);

// One line for the operator when this machine lacks the `gpus` devices the plan is for
// (printed after the plan, before exiting); "" when they are all there.
std::string MissingDevicesLine(const GpuTarget& target, int gpus);

// With --spawn_ranks=false the ranks run on their own machines, whose GPUs this one cannot see:
// the plan is for the kind `gpu_flag` names, and this machine's devices (if any) play no part.
// INVALID_ARGUMENT naming --gpu and the presets when it names none or an unknown one.
absl::StatusOr<GpuTarget> RemoteGpuTarget(std::string_view gpu_flag, int gpus);

}  // namespace tpserve

#endif  // TPSERVE_DEPLOY_GPU_TARGET_H_
