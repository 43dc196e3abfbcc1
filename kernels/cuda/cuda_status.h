// CUDA runtime and cuBLAS(Lt) return codes as absl::Status naming the failed call, file and
// line: the kernels package's own copy of comm/cuda_status.h's TP_CUDA_CALL idea (kernels/
// is below comm/ and must not depend on it). Plain C++: codes are passed as int.
//
//   TP_RETURN_IF_ERROR(TPK_CUDA(cudaSetDevice(ordinal)));
//   Record(TPK_LAUNCH(LaunchRmsNorm(...)));   // a launcher's cudaGetLastError()
//
// Codes: bad arguments -> INVALID_ARGUMENT, no device or driver -> FAILED_PRECONDITION, out of
// memory -> RESOURCE_EXHAUSTED, cuBLAS "not supported" -> UNIMPLEMENTED, the rest -> INTERNAL.
// Thread-safe: pure functions.
#ifndef TPSERVE_KERNELS_CUDA_CUDA_STATUS_H_
#define TPSERVE_KERNELS_CUDA_CUDA_STATUS_H_

#include "absl/status/status.h"

namespace tpserve::cuda {

absl::Status CudaCallStatus(int cuda_error, const char* call, const char* file, int line);
absl::Status CublasCallStatus(int cublas_status, const char* call, const char* file, int line);

}  // namespace tpserve::cuda

#define TPK_CUDA(call) \
  ::tpserve::cuda::CudaCallStatus(static_cast<int>(call), #call, __FILE__, __LINE__)
#define TPK_CUBLAS(call) \
  ::tpserve::cuda::CublasCallStatus(static_cast<int>(call), #call, __FILE__, __LINE__)
// A kernel launcher returns cudaGetLastError() after its launch (device_types.h).
#define TPK_LAUNCH(call) \
  ::tpserve::cuda::CudaCallStatus((call), #call, __FILE__, __LINE__)

#endif  // TPSERVE_KERNELS_CUDA_CUDA_STATUS_H_
