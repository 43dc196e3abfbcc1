#include "coordinator/request.h"

#include <gtest/gtest.h>

namespace tpserve {
namespace {

TEST(FinishStatus, NormalEndsAreOkAndTheOthersNameWhatEndedThem) {
  const absl::Status none;
  for (FinishReason normal : {FinishReason::kEos, FinishReason::kLength,
                              FinishReason::kStopSequence}) {
    EXPECT_TRUE(FinishStatus(normal, none).ok());
  }
  EXPECT_EQ(FinishStatus(FinishReason::kCancelled, none),
            absl::CancelledError("the request was cancelled"));
  EXPECT_EQ(FinishStatus(FinishReason::kDeadline, none),
            absl::DeadlineExceededError("the request's deadline passed before it finished"));
  const absl::Status rank_lost = absl::UnavailableError("rank 1 stopped answering");
  EXPECT_EQ(FinishStatus(FinishReason::kError, rank_lost), rank_lost);
  EXPECT_EQ(FinishStatus(FinishReason::kError, none), absl::InternalError("the engine failed"));
}

}  // namespace
}  // namespace tpserve
