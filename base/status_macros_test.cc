#include "base/status_macros.h"

#include <gtest/gtest.h>

namespace tpserve {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("x is odd");
  return x / 2;
}

absl::Status Quarter(int x, int* out) {
  TP_ASSIGN_OR_RETURN(int half, Half(x));
  TP_ASSIGN_OR_RETURN(*out, Half(half));
  return absl::OkStatus();
}

TEST(StatusMacros, AssignOrReturnPropagatesTheFirstError) {
  int out = -1;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  absl::Status s = Quarter(6, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "x is odd");
}

absl::Status CheckBoth(absl::Status a, absl::Status b) {
  TP_RETURN_IF_ERROR(a);
  TP_RETURN_IF_ERROR(b);
  return absl::OkStatus();
}

TEST(StatusMacros, ReturnIfErrorStopsAtTheFirstFailure) {
  EXPECT_TRUE(CheckBoth(absl::OkStatus(), absl::OkStatus()).ok());
  EXPECT_EQ(CheckBoth(absl::NotFoundError("a"), absl::InternalError("b")).message(), "a");
}

}  // namespace
}  // namespace tpserve
