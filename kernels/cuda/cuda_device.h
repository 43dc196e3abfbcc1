// The CUDA devices of this machine, asked without starting anything heavy, and how a host
// thread waits inside the driver on one. Plain C++ (no CUDA headers), so launchers and tests can
// include it.
//
//   absl::StatusOr<int> n = CudaDeviceCount();   // error: no driver, or it cannot answer
//   TP_RETURN_IF_ERROR(SetHostSyncMode(ordinal, kDefaultHostSyncMode));
//
// Thread-safe (the host-sync mode is the device's, for the whole process: the last set wins).
#ifndef TPSERVE_KERNELS_CUDA_CUDA_DEVICE_H_
#define TPSERVE_KERNELS_CUDA_CUDA_DEVICE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tpserve {

// Number of visible CUDA devices. FAILED_PRECONDITION "no CUDA driver found" on a machine
// without a GPU driver (the runtime's own word for it is "driver version is insufficient",
// which misleads there); FAILED_PRECONDITION "cudaGetDeviceCount failed: ..." when a driver is
// installed but cannot answer (e.g. older than the runtime). A count of 0 is returned as 0.
absl::StatusOr<int> CudaDeviceCount();

// cudaDeviceProp.name (e.g. "NVIDIA H100 80GB HBM3") and .totalGlobalMem of `ordinal`.
absl::Status CudaDeviceNameAndMemory(int ordinal, std::string* name, int64_t* memory_bytes);

// "NVIDIA H200, 139.8 GiB, sm_90" for `ordinal`; an error as for CudaDeviceCount.
absl::StatusOr<std::string> CudaDeviceDescription(int ordinal);

// How a host thread waits inside the CUDA driver's own blocking calls (the device's
// cudaDeviceSchedule* flag). The backend's own waits never block there: they poll an event or
// the stream with a sleeping back-off and a deadline (device_wait.h, staged_copy.h). What is
// left are the driver's implicit waits: cudaFree's device synchronisation when a scratch buffer
// grows (after a bounded wait has found the stream idle), cudaFreeHost and cudaGraphExecDestroy
// at teardown, library set-up. The driver's default (kAuto) spins a core through such a wait
// whenever the process has no more CUDA contexts than the machine has cores, which is always.
enum class HostSyncMode {
  // cudaDeviceScheduleBlockingSync: the thread sleeps on an OS primitive until the device is
  // done. Frees the core; costs a wake-up (microseconds to tens of them) per driver wait.
  kBlockingSync,
  // cudaDeviceScheduleYield: spins, calling sched_yield between polls. Other runnable threads
  // get the core, but an otherwise idle core stays busy.
  kYield,
  kSpin,  // cudaDeviceScheduleSpin: spins (the lowest latency; holds the core)
  kAuto,  // cudaDeviceScheduleAuto: the driver's heuristic (spin while contexts <= cores)
};

// The choice: block. A rank's host thread shares the machine's cores with the other ranks'
// threads, the gRPC server and the tokenizer; none of the driver waits left is on a steady
// step's path, so their wake-up latency costs nothing per token, while a spinning wait would hold
// a core for as long as the device work it waits behind (a whole step). Not measured on a GPU
// yet (docs/ARCHITECTURE.md, "Every host wait"); TPSERVE_CUDA_HOST_SYNC overrides it for that.
inline constexpr HostSyncMode kDefaultHostSyncMode = HostSyncMode::kBlockingSync;

// "blocking_sync", "yield", "spin" or "auto".
std::string_view HostSyncModeName(HostSyncMode mode);
// The inverse of HostSyncModeName. INVALID_ARGUMENT naming the value and the choices.
absl::StatusOr<HostSyncMode> ParseHostSyncMode(std::string_view name);
// Device flags `flags` (cudaGetDeviceFlags) with the schedule bits replaced by `mode`'s and
// every other bit (cudaDeviceMapHost, cudaDeviceLmemResizeToMax) kept.
unsigned int DeviceFlagsWithHostSync(unsigned int flags, HostSyncMode mode);
// Sets `mode` on device `ordinal` (and makes it the calling thread's current device). Applies
// at once, also when the device's context already exists. FAILED_PRECONDITION naming the call.
absl::Status SetHostSyncMode(int ordinal, HostSyncMode mode);
// The mode device `ordinal` has now (and makes it the calling thread's current device).
absl::StatusOr<HostSyncMode> HostSyncModeOf(int ordinal);

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_CUDA_CUDA_DEVICE_H_
