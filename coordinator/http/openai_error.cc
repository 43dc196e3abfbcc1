// Status -> HTTP status and OpenAI error object; proto field paths -> the client's field names.
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "base/field_error.h"
#include "coordinator/http/openai_api.h"
#include "coordinator/validation.h"

namespace tpserve {
namespace {

using Json = nlohmann::json;

constexpr char kParamPayload[] = "type.tpserve/openai.param";
constexpr char kCodePayload[] = "type.tpserve/openai.code";

// The door's proto paths and what an OpenAI client calls them. Paths with an index or a
// sub-field keep it: chat.messages[2].role -> messages[2].role. max_new_tokens and a string
// `stop` depend on how the client spelled the request and are handled in ClientPath.
struct FieldName {
  std::string_view proto;
  std::string_view chat;
  std::string_view completions;
};
constexpr FieldName kFieldNames[] = {
    {"sampling.temperature", "temperature", "temperature"},
    {"sampling.top_p", "top_p", "top_p"},
    {"sampling.top_k", "top_k", "top_k"},
    {"sampling.min_p", "min_p", "min_p"},
    {"sampling.seed", "seed", "seed"},
    {"sampling.repetition_penalty", "repetition_penalty", "repetition_penalty"},
    {"sampling.presence_penalty", "presence_penalty", "presence_penalty"},
    {"sampling.frequency_penalty", "frequency_penalty", "frequency_penalty"},
    {"sampling.top_logprobs", "top_logprobs", "logprobs"},
    {"sampling.logit_bias", "logit_bias", "logit_bias"},
    {"top_logprobs", "top_logprobs", "logprobs"},
    {"stop_sequences", "stop", "stop"},
    {"stop_token_ids", "stop_token_ids", "stop_token_ids"},
    {"n", "n", "n"},
    {"best_of", "best_of", "best_of"},
    {"chat.messages", "messages", "messages"},
    {"text", "prompt", "prompt"},
    {"token_ids.ids", "prompt", "prompt"},
};

// The client's name for a proto path, or nullopt when the path is not one we know.
std::optional<std::string> ClientPath(std::string_view path, const OpenAiRequest& r) {
  if (path == "max_new_tokens") return r.max_tokens_field;
  // Tools: the proto flattens OpenAI's {"type": "function", "function": {...}} wrappers.
  if (path == "chat.tool_choice.mode") return std::string("tool_choice");
  if (path == "chat.tool_choice.function_name") return std::string("tool_choice.function.name");
  if (path == "chat.template_kwargs") return std::string("chat_template_kwargs");
  const absl::string_view apath(path.data(), path.size());  // Debian's absl has its own view
  if (absl::StartsWith(apath, "chat.tools")) {
    std::string out = absl::StrCat("tools", apath.substr(10));
    if (const size_t dot = out.find("]."); dot != std::string::npos) {
      out.insert(dot + 1, ".function");
    }
    return out;
  }
  if (const size_t calls = path.find(".tool_calls[");
      absl::StartsWith(apath, "chat.messages") && calls != std::string_view::npos) {
    std::string out = absl::StrCat("messages", apath.substr(13));
    const size_t close = out.find("].", calls - 13 + 12);
    if (close != std::string::npos &&
        (absl::EndsWith(out, ".name") || absl::EndsWith(out, ".arguments"))) {
      out.insert(close + 1, ".function");
    }
    return out;
  }
  // A structured-output constraint: wherever the client put it (choice.choices[1] ->
  // structured_outputs.choice[1]).
  for (std::string_view field : {"json_schema", "json_object", "regex", "grammar", "choice.choices"}) {
    if (!r.constraint_field.empty() && path.substr(0, field.size()) == field &&
        (path.size() == field.size() || path[field.size()] == '[')) {
      return r.constraint_field + std::string(path.substr(field.size()));
    }
  }
  for (const FieldName& f : kFieldNames) {
    if (path.substr(0, f.proto.size()) != f.proto) continue;
    std::string_view rest = path.substr(f.proto.size());
    if (!rest.empty() && rest[0] != '[' && rest[0] != '.') continue;
    if (f.proto == "stop_sequences" && r.stop_is_string && rest == "[0]") rest = "";
    const std::string_view name = r.endpoint == Endpoint::kChatCompletions ? f.chat : f.completions;
    return std::string(name).append(rest);
  }
  return std::nullopt;
}

const char* ErrorType(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kUnauthenticated:  // OpenAI's own 401s use this type too
      return "invalid_request_error";
    case absl::StatusCode::kPermissionDenied:
      return "permission_error";
    case absl::StatusCode::kResourceExhausted:
      return "rate_limit_error";
    case absl::StatusCode::kCancelled:
      return "cancelled";
    case absl::StatusCode::kDeadlineExceeded:
      return "timeout_error";
    default:
      return "server_error";
  }
}

// The code when the status carries none of its own.
const char* DefaultCode(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnauthenticated:
      return "invalid_api_key";
    case absl::StatusCode::kResourceExhausted:
      return "rate_limit_exceeded";
    case absl::StatusCode::kUnavailable:
      return "service_unavailable";
    default:
      return nullptr;
  }
}

}  // namespace

absl::Status WithParam(absl::Status status, std::string_view param) {
  status.SetPayload(kParamPayload, absl::Cord(std::string(param)));
  return status;
}

absl::Status WithCode(absl::Status status, std::string_view code) {
  status.SetPayload(kCodePayload, absl::Cord(std::string(code)));
  return status;
}

absl::Status ToClientFieldNames(const absl::Status& status, const OpenAiRequest& request) {
  if (status.ok() || status.GetPayload(kParamPayload).has_value()) return status;
  const std::string message(status.message());
  if (ErrorReason(status) == kContextLengthExceeded) {
    const char* input = request.endpoint == Endpoint::kChatCompletions ? "messages" : "prompt";
    std::string rewritten =
        absl::StrReplaceAll(message, {{"max_new_tokens", request.max_tokens_field}});
    return WithCode(WithParam(absl::Status(status.code(), rewritten), input),
                    kContextLengthExceeded);
  }
  // The door's field errors carry their proto path (base/field_error.h) and open with it.
  const std::optional<std::string> path = ErrorField(status);
  if (!path.has_value() || !absl::StartsWith(message, *path)) return status;
  std::optional<std::string> client = ClientPath(*path, request);
  if (!client.has_value()) return status;
  absl::Status out(status.code(), absl::StrCat(*client, message.substr(path->size())));
  return WithParam(out, *client);
}

int HttpStatusFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk: return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition: return 400;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kPermissionDenied: return 403;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kCancelled: return 499;  // nginx's "client closed request"
    case absl::StatusCode::kUnavailable: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    default: return 500;
  }
}

Json ErrorObject(const absl::Status& status) {
  Json error = {{"message", std::string(status.message())},
                {"type", ErrorType(status.code())},
                {"param", nullptr},
                {"code", nullptr}};
  if (std::optional<std::string> param = PayloadString(status, kParamPayload)) error["param"] = *param;
  if (std::optional<std::string> code = PayloadString(status, kCodePayload)) {
    error["code"] = *code;
  } else if (const char* code = DefaultCode(status.code())) {
    error["code"] = code;
  }
  return {{"error", std::move(error)}};
}

HttpError ToHttpError(const absl::Status& status) {
  return HttpError{HttpStatusFor(status.code()), DumpJson(ErrorObject(status))};
}

}  // namespace tpserve
