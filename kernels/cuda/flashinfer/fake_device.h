// A CUDA device for FlashInfer's host-side schedulers to query on a machine without one, so
// that plan_check and mla_plan_check plan a batch as it is planned on the GPU we serve.
//
//   SetFakeDevice(kFakeH100);              // what the next plan sees
//   FakeDevice small = kFakeH100;
//   small.max_shared_memory_per_block_optin = 30000;
//
// This library defines cudaGetDevice and cudaDeviceGetAttribute, the only device queries those
// schedulers make (the SM count; the compute capability and the opt-in shared memory per block
// that FA2DetermineCtaTileQ, flashinfer/utils.cuh, picks the query tile by). It is linked
// statically into the test binary, so these definitions take the place of libcudart's there:
// link it into host-only tests, never into a binary that runs on a GPU. Any other attribute is
// answered cudaErrorInvalidValue. Test support only; not thread-safe (a test sets it, then plans).
#ifndef TPSERVE_KERNELS_CUDA_FLASHINFER_FAKE_DEVICE_H_
#define TPSERVE_KERNELS_CUDA_FLASHINFER_FAKE_DEVICE_H_

namespace tpserve::cuda::fi {

struct FakeDevice {
  int compute_capability_major = 9;
  int compute_capability_minor = 0;
  int multiprocessors = 132;
  int max_shared_memory_per_block_optin = 232448;  // 227 KiB: every compute capability 9.0 GPU
};

// An H100 SXM (and an H200: the same SMs and shared memory): compute capability 9.0, 132 SMs.
inline constexpr FakeDevice kFakeH100{};

// What cudaGetDevice / cudaDeviceGetAttribute answer from now on (kFakeH100 until set).
void SetFakeDevice(const FakeDevice& device);
const FakeDevice& CurrentFakeDevice();

}  // namespace tpserve::cuda::fi

#endif  // TPSERVE_KERNELS_CUDA_FLASHINFER_FAKE_DEVICE_H_
