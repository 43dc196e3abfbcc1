#include "coordinator/request.h"

namespace tpserve {

absl::Status FinishStatus(FinishReason reason, const absl::Status& error) {
  switch (reason) {
    case FinishReason::kCancelled:
      return absl::CancelledError("the request was cancelled");
    case FinishReason::kDeadline:
      return absl::DeadlineExceededError("the request's deadline passed before it finished");
    case FinishReason::kError:
      return error.ok() ? absl::InternalError("the engine failed") : error;
    case FinishReason::kNone:
    case FinishReason::kEos:
    case FinishReason::kLength:
    case FinishReason::kStopSequence:
    case FinishReason::kToolCalls:
      break;
  }
  return absl::OkStatus();
}

}  // namespace tpserve
