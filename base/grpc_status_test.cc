#include "base/grpc_status.h"

#include <gtest/gtest.h>

namespace tpserve {
namespace {

TEST(GrpcStatus, CodesAndMessagesSurviveTheRoundTrip) {
  const std::pair<absl::Status, grpc::StatusCode> cases[] = {
      {absl::InvalidArgumentError("top_p = 2"), grpc::StatusCode::INVALID_ARGUMENT},
      {absl::UnavailableError("rank 1 died"), grpc::StatusCode::UNAVAILABLE},
      {absl::DeadlineExceededError("deadline"), grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::ResourceExhaustedError("kv"), grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::CancelledError("gone"), grpc::StatusCode::CANCELLED},
      {absl::InternalError("bug"), grpc::StatusCode::INTERNAL},
  };
  for (const auto& [status, code] : cases) {
    grpc::Status g = ToGrpcStatus(status);
    EXPECT_EQ(g.error_code(), code);
    EXPECT_EQ(g.error_message(), status.message());
    EXPECT_EQ(FromGrpcStatus(g), status);
  }
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

}  // namespace
}  // namespace tpserve
