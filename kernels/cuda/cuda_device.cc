#include "kernels/cuda/cuda_device.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tpserve {

absl::StatusOr<int> CudaDeviceCount() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    int driver_version = 0;  // 0: no driver installed (libcuda.so.1 not found)
    if (cudaDriverGetVersion(&driver_version) == cudaSuccess && driver_version == 0) {
      return absl::FailedPreconditionError("no CUDA driver found");
    }
    return absl::FailedPreconditionError(
        absl::StrFormat("cudaGetDeviceCount failed: %s", cudaGetErrorString(err)));
  }
  return count;
}

absl::Status CudaDeviceNameAndMemory(int ordinal, std::string* name, int64_t* memory_bytes) {
  cudaDeviceProp prop;
  const cudaError_t err = cudaGetDeviceProperties(&prop, ordinal);
  if (err != cudaSuccess) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "cudaGetDeviceProperties(%d) failed: %s", ordinal, cudaGetErrorString(err)));
  }
  *name = prop.name;
  *memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  return absl::OkStatus();
}

absl::StatusOr<std::string> CudaDeviceDescription(int ordinal) {
  cudaDeviceProp prop;
  const cudaError_t err = cudaGetDeviceProperties(&prop, ordinal);
  if (err != cudaSuccess) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "cudaGetDeviceProperties(%d) failed: %s", ordinal, cudaGetErrorString(err)));
  }
  return absl::StrFormat("%s, %.1f GiB, sm_%d%d", prop.name,
                         static_cast<double>(prop.totalGlobalMem) / (1 << 30), prop.major,
                         prop.minor);
}

namespace {

constexpr HostSyncMode kHostSyncModes[] = {HostSyncMode::kBlockingSync, HostSyncMode::kYield,
                                           HostSyncMode::kSpin, HostSyncMode::kAuto};

unsigned int ScheduleFlag(HostSyncMode mode) {
  switch (mode) {
    case HostSyncMode::kBlockingSync: return cudaDeviceScheduleBlockingSync;
    case HostSyncMode::kYield: return cudaDeviceScheduleYield;
    case HostSyncMode::kSpin: return cudaDeviceScheduleSpin;
    case HostSyncMode::kAuto: return cudaDeviceScheduleAuto;
  }
  return cudaDeviceScheduleAuto;
}

absl::Status CallFailed(const char* call, int ordinal, cudaError_t err) {
  return absl::FailedPreconditionError(
      absl::StrFormat("%s on device %d failed: %s", call, ordinal, cudaGetErrorString(err)));
}

}  // namespace

std::string_view HostSyncModeName(HostSyncMode mode) {
  switch (mode) {
    case HostSyncMode::kBlockingSync: return "blocking_sync";
    case HostSyncMode::kYield: return "yield";
    case HostSyncMode::kSpin: return "spin";
    case HostSyncMode::kAuto: return "auto";
  }
  return "auto";
}

absl::StatusOr<HostSyncMode> ParseHostSyncMode(std::string_view name) {
  for (HostSyncMode mode : kHostSyncModes) {
    if (HostSyncModeName(mode) == name) return mode;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "host sync mode '", absl::string_view(name.data(), name.size()), "' is not one of blocking_sync, yield, spin, auto"));
}

unsigned int DeviceFlagsWithHostSync(unsigned int flags, HostSyncMode mode) {
  return (flags & ~static_cast<unsigned int>(cudaDeviceScheduleMask)) | ScheduleFlag(mode);
}

absl::Status SetHostSyncMode(int ordinal, HostSyncMode mode) {
  if (cudaError_t err = cudaSetDevice(ordinal); err != cudaSuccess) {
    return CallFailed("cudaSetDevice", ordinal, err);
  }
  unsigned int flags = 0;
  if (cudaError_t err = cudaGetDeviceFlags(&flags); err != cudaSuccess) {
    return CallFailed("cudaGetDeviceFlags", ordinal, err);
  }
  if (cudaError_t err = cudaSetDeviceFlags(DeviceFlagsWithHostSync(flags, mode));
      err != cudaSuccess) {
    return CallFailed("cudaSetDeviceFlags", ordinal, err);
  }
  return absl::OkStatus();
}

absl::StatusOr<HostSyncMode> HostSyncModeOf(int ordinal) {
  if (cudaError_t err = cudaSetDevice(ordinal); err != cudaSuccess) {
    return CallFailed("cudaSetDevice", ordinal, err);
  }
  unsigned int flags = 0;
  if (cudaError_t err = cudaGetDeviceFlags(&flags); err != cudaSuccess) {
    return CallFailed("cudaGetDeviceFlags", ordinal, err);
  }
  for (HostSyncMode mode : kHostSyncModes) {
    if ((flags & cudaDeviceScheduleMask) == ScheduleFlag(mode)) return mode;
  }
  return HostSyncMode::kAuto;
}

}  // namespace tpserve
