#include "kernels/cuda/flashinfer/fake_device.h"

#include <cuda_runtime_api.h>

namespace tpserve::cuda::fi {
namespace {

FakeDevice g_device = kFakeH100;

}  // namespace

void SetFakeDevice(const FakeDevice& device) { g_device = device; }

const FakeDevice& CurrentFakeDevice() { return g_device; }

}  // namespace tpserve::cuda::fi

// The device FlashInfer's schedulers ask about: device 0, answering from the FakeDevice set.
extern "C" cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}

extern "C" cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  const tpserve::cuda::fi::FakeDevice& d = tpserve::cuda::fi::CurrentFakeDevice();
  *value = 0;
  if (device != 0) return cudaErrorInvalidDevice;
  switch (attr) {
    case cudaDevAttrComputeCapabilityMajor:
      *value = d.compute_capability_major;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor:
      *value = d.compute_capability_minor;
      return cudaSuccess;
    case cudaDevAttrMultiProcessorCount:
      *value = d.multiprocessors;
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = d.max_shared_memory_per_block_optin;
      return cudaSuccess;
    default:
      return cudaErrorInvalidValue;
  }
}
