// CUDA and NCCL return codes as absl::Status, carrying the failed call, file and line. CUDA
// codes map as the kernels' own (kernels/cuda/cuda_status.h, the one mapping); NCCL's are here.
//
//   TP_RETURN_IF_ERROR(TP_CUDA_CALL(cudaSetDevice(device_ordinal)));
//   TP_RETURN_IF_ERROR(TP_NCCL_CALL(ncclGetUniqueId(&id)));
//
// Codes: bad arguments -> INVALID_ARGUMENT, no device or driver -> FAILED_PRECONDITION, out of
// memory -> RESOURCE_EXHAUSTED, NCCL remote/system errors (a peer or the network) ->
// UNAVAILABLE, everything else -> INTERNAL. ncclInProgress is OK: with the non-blocking
// communicators used here it means "enqueued; poll ncclCommGetAsyncError".
// Threading: pure functions.
#ifndef TPSERVE_COMM_CUDA_STATUS_H_
#define TPSERVE_COMM_CUDA_STATUS_H_

#include <cuda_runtime.h>
#include <nccl.h>

#include "absl/status/status.h"
#include "kernels/cuda/cuda_status.h"

namespace tpserve {

absl::Status CudaStatus(cudaError_t error, const char* call, const char* file, int line);
absl::Status NcclStatus(ncclResult_t result, const char* call, const char* file, int line);

}  // namespace tpserve

#define TP_CUDA_CALL(call) ::tpserve::CudaStatus((call), #call, __FILE__, __LINE__)
#define TP_NCCL_CALL(call) ::tpserve::NcclStatus((call), #call, __FILE__, __LINE__)

#endif  // TPSERVE_COMM_CUDA_STATUS_H_
