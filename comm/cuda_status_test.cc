#include "comm/cuda_status.h"

#include <string>

#include "gtest/gtest.h"

namespace tpserve {
namespace {

absl::Status FailingCudaCall() { return TP_CUDA_CALL(cudaErrorInvalidValue); }

TEST(CudaStatus, NamesTheCallFileLineAndCudaError) {
  absl::Status status = FailingCudaCall();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      status.message().find("cudaErrorInvalidValue failed at comm/cuda_status_test.cc:"),
      std::string::npos)
      << status;
  EXPECT_NE(status.message().find(": cudaErrorInvalidValue (invalid argument)"), std::string::npos)
      << status;
}

TEST(CudaStatus, MapsCodes) {
  EXPECT_TRUE(CudaStatus(cudaSuccess, "f()", "a.cc", 1).ok());
  EXPECT_EQ(CudaStatus(cudaErrorInsufficientDriver, "f()", "a.cc", 1).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudaStatus(cudaErrorNoDevice, "f()", "a.cc", 1).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudaStatus(cudaErrorMemoryAllocation, "cudaMalloc(&p, n)", "a.cc", 9).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CudaStatus(cudaErrorLaunchFailure, "f()", "a.cc", 1).code(),
            absl::StatusCode::kInternal);
}

TEST(NcclStatus, InProgressIsOkAndErrorsNameTheCall) {
  EXPECT_TRUE(TP_NCCL_CALL(ncclSuccess).ok());
  EXPECT_TRUE(TP_NCCL_CALL(ncclInProgress).ok());
  absl::Status remote = NcclStatus(ncclRemoteError, "ncclAllReduce(...)", "b.cc", 12);
  EXPECT_EQ(remote.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(remote.message().find("ncclAllReduce(...) failed at b.cc:12: NCCL error 6 ("),
            std::string::npos)
      << remote;
  EXPECT_EQ(NcclStatus(ncclInvalidUsage, "f()", "b.cc", 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NcclStatus(ncclInternalError, "f()", "b.cc", 1).code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace tpserve
