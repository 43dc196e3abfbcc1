// Toolchain check for the GPU machine, built THERE by device_checks.sh with the machine's own
// nvcc (no bazel needed): device query, one kernel, one copy back, checked. Exit 0 when it ran,
// 77 when there is no device, 1 on a wrong result or a CUDA error.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

__global__ void Saxpy(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

#define CHECK(call)                                                        \
  do {                                                                     \
    const cudaError_t e = (call);                                          \
    if (e != cudaSuccess) {                                                \
      std::printf("smoke: %s failed: %s\n", #call, cudaGetErrorString(e)); \
      return 1;                                                            \
    }                                                                      \
  } while (0)

int main() {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::printf("smoke: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0");
    return 77;
  }
  cudaDeviceProp p;
  CHECK(cudaGetDeviceProperties(&p, 0));
  int driver = 0, runtime = 0;
  CHECK(cudaDriverGetVersion(&driver));
  CHECK(cudaRuntimeGetVersion(&runtime));
  const int n = 1 << 24;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 1000) * 0.5f;
    y[i] = static_cast<float>(i % 7);
  }
  float *dx = nullptr, *dy = nullptr;
  CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CHECK(cudaMalloc(&dy, n * sizeof(float)));
  CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  Saxpy<<<(n + 255) / 256, 256>>>(n, 3.0f, dx, dy);
  CHECK(cudaGetLastError());
  std::vector<float> out(n);
  CHECK(cudaMemcpy(out.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
  double max_error = 0;
  for (int i = 0; i < n; ++i)
    max_error = std::fmax(max_error, std::fabs(out[i] - (3.0f * x[i] + y[i])));
  cudaFree(dx);
  cudaFree(dy);
  std::printf(
      "smoke: %s: %s, sm_%d%d, %d SMs, %.1f GiB, driver %d, runtime %d, saxpy max error %g\n",
      max_error == 0 ? "ok" : "WRONG", p.name, p.major, p.minor, p.multiProcessorCount,
      p.totalGlobalMem / 1073741824.0, driver, runtime, max_error);
  return max_error == 0 ? 0 : 1;
}
