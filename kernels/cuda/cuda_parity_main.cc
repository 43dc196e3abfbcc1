// The backend-parity suite as a program for GPU machines: CUDA device `--device` (default 0)
// against the CPU's scalar reference, the table to stdout (or only failures with
// --failures_only) and optionally in full to --table=PATH; exit status 0 when every case
// passes, 1 on any failure, 2 when there is no usable device.
//
//   TPSERVE_CUDA_CHECK=1 cuda_parity --failures_only --table=/tmp/parity.txt
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/testing/backend_parity.h"

namespace {

bool Flag(const char* arg, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0) return false;
  if (arg[n] == '\0') {
    *value = "";
    return true;
  }
  if (arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  tpserve::ParityOptions options;
  std::string table_path, value;
  bool failures_only = false;
  int device = 0;
  for (int i = 1; i < argc; ++i) {
    if (Flag(argv[i], "--filter", &value)) {
      options.filter = value;
    } else if (Flag(argv[i], "--table", &value)) {
      table_path = value;
    } else if (Flag(argv[i], "--failures_only", &value)) {
      failures_only = true;
    } else if (Flag(argv[i], "--device", &value)) {
      device = std::atoi(value.c_str());
    } else {
      std::fprintf(stderr, "usage: %s [--filter=OP] [--failures_only] [--table=PATH] [--device=N]\n",
                   argv[0]);
      return 2;
    }
  }
  const absl::StatusOr<int> devices = tpserve::CudaDeviceCount();
  if (!devices.ok() || *devices == 0) {
    std::printf("no CUDA device: %s\n", devices.ok() ? "0 devices visible"
                                                     : std::string(devices.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<std::unique_ptr<tpserve::Backend>> cuda = tpserve::CreateCudaBackend(device);
  if (!cuda.ok()) {
    std::printf("CreateCudaBackend(%d): %s\n", device, cuda.status().ToString().c_str());
    return 2;
  }
  std::printf("candidate: %s; reference: CPU scalar kernels\n",
              std::string((*cuda)->name()).c_str());
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  tpserve::CpuBackend reference(
      tpserve::CpuBackendOptions{.num_threads = threads, .isa = tpserve::CpuIsa::kScalar});
  const std::vector<tpserve::ParityResult> results =
      tpserve::RunBackendParity(**cuda, reference, options);
  if (!table_path.empty()) {
    if (std::FILE* f = std::fopen(table_path.c_str(), "w")) {
      tpserve::PrintParityTable(results, f);
      std::fclose(f);
    }
  }
  tpserve::PrintParityTable(results, stdout, failures_only);
  return tpserve::CountParityFailures(results) == 0 ? 0 : 1;
}
