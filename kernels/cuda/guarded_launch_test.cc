// GuardedLaunch: a library launcher that throws (as FlashInfer's do on a batch they refuse)
// becomes INTERNAL naming the kernel, the shape and the library's message, never a terminate;
// a returned CUDA error becomes its code's status naming the kernel and shape.
#include "kernels/cuda/guarded_launch.h"

#include <stdexcept>

#include "gtest/gtest.h"

namespace tpserve::cuda {
namespace {

// What flashinfer::Error is: a std::exception whose what() carries function, file and message.
struct LibraryError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

TEST(GuardedLaunchTest, AThrowIsAStatusNamingKernelShapeAndMessage) {
  const absl::Status s = GuardedLaunch("FlashInfer FA2", "rows 9000, heads 16/2, head_dim 128",
                                       []() -> int {
                                         throw LibraryError(
                                           "Error in function 'BatchPrefill': too many tiles");
                                       });
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(),
            "FlashInfer FA2 (rows 9000, heads 16/2, head_dim 128) threw: Error in function "
            "'BatchPrefill': too many tiles");
  const absl::Status odd = GuardedLaunch("CUTLASS", "m 1", []() -> int { throw 7; });
  EXPECT_EQ(odd.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(odd.message(), "CUTLASS (m 1) threw a non-standard exception");
}

TEST(GuardedLaunchTest, ReturnedCodesKeepTheirMeaningAndNameTheKernel) {
  EXPECT_TRUE(GuardedLaunch("FlashInfer FA3", "rows 1", [] { return 0; }).ok());
  const absl::Status bad = GuardedLaunch("FlashInfer MLA", "rows 3, heads 128", [] { return 1; });
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);  // cudaErrorInvalidValue
  EXPECT_NE(bad.message().find("FlashInfer MLA (rows 3, heads 128)"), std::string::npos) << bad;
}

}  // namespace
}  // namespace tpserve::cuda
