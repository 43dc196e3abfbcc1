// A request field that is wrong, as structured data on the status: INVALID_ARGUMENT whose
// message opens with the field's path (its proto path in the public request, e.g.
// "sampling.temperature" or "chat.messages[2].role") and whose payload holds that path, so
// each protocol names the field its own way (gRPC: the message; HTTP: OpenAI's `param`, in the
// client's spelling) from the same data, without reading the message text.
//
//   return FieldError("sampling.top_p", absl::StrCat(" = ", v, " is out of range: ..."));
//   if (std::optional<std::string> path = ErrorField(status)) ...
#ifndef TPSERVE_BASE_FIELD_ERROR_H_
#define TPSERVE_BASE_FIELD_ERROR_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace tpserve {

inline constexpr char kErrorFieldPayload[] = "type.tpserve/error.field";
inline constexpr char kErrorReasonPayload[] = "type.tpserve/error.reason";

// INVALID_ARGUMENT "<path><rest>" carrying `path`.
inline absl::Status FieldError(std::string_view path, std::string_view rest) {
  absl::Status s = absl::InvalidArgumentError(std::string(path).append(rest));
  s.SetPayload(kErrorFieldPayload, absl::Cord(std::string(path)));
  return s;
}

// The payload under `key` as a string, if the status carries one.
inline std::optional<std::string> PayloadString(const absl::Status& status, absl::string_view key) {
  auto p = status.GetPayload(key);  // absl::optional here, not std::optional
  if (!p.has_value()) return std::nullopt;
  return std::string(*p);
}

// The path FieldError attached, if any.
inline std::optional<std::string> ErrorField(const absl::Status& status) {
  return PayloadString(status, kErrorFieldPayload);
}

// A machine-readable reason beside the message (e.g. "context_length_exceeded").
inline absl::Status WithErrorReason(absl::Status status, std::string_view reason) {
  status.SetPayload(kErrorReasonPayload, absl::Cord(std::string(reason)));
  return status;
}

inline std::optional<std::string> ErrorReason(const absl::Status& status) {
  return PayloadString(status, kErrorReasonPayload);
}

}  // namespace tpserve

#endif  // TPSERVE_BASE_FIELD_ERROR_H_
