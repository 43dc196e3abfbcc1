// What a generation request asks the engine to stop on, and how a request ends: shared by the
// door (coordinator/admission.h), the engine and both protocols.
#ifndef TPSERVE_COORDINATOR_REQUEST_H_
#define TPSERVE_COORDINATOR_REQUEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tpserve {

struct StopConditions {
  int32_t max_new_tokens = 0;          // > 0
  std::vector<std::string> stop_sequences;
  std::vector<int32_t> stop_token_ids;  // besides the model's EOS ids
  bool ignore_eos = false;
};

// kToolCalls: the model ended its turn (EOS) after tool calls; set by the frontend's output
// parser (coordinator/tools), never by the engine.
enum class FinishReason {
  kNone,
  kEos,
  kLength,
  kStopSequence,
  kCancelled,
  kDeadline,
  kError,
  kToolCalls,
};

// The one status a finished request's stream ends with, on every protocol: OK for a normal end
// (EOS, length, a stop sequence), CANCELLED or DEADLINE_EXCEEDED for those ends, and for kError
// the engine's `error` (INTERNAL if it carries none).
absl::Status FinishStatus(FinishReason reason, const absl::Status& error);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_REQUEST_H_
