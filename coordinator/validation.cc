#include "coordinator/validation.h"

#include <algorithm>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "base/field_error.h"
#include "base/status_macros.h"
#include "coordinator/tokenizer/utf8.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/unknown_field_set.h"

namespace tpserve {
namespace {

constexpr size_t kMaxRequestIdBytes = 128;

absl::Status Invalid(const std::string& field, const std::string& value, const std::string& bound) {
  return FieldError(field, absl::StrCat(" = ", value, " is invalid: ", bound));
}

absl::Status ValidateTokenIds(const std::string& field, const google::protobuf::RepeatedField<int32_t>& ids,
                              int64_t vocab_size) {
  for (int i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size) {
      return Invalid(absl::StrCat(field, "[", i, "]"), absl::StrCat(ids[i]),
                     absl::StrCat("token ids must be in [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

SamplingParams FromProto(const tpserve::v1::SamplingParams& p) {
  SamplingParams s;
  if (p.has_temperature()) s.temperature = p.temperature();
  if (p.has_top_k()) s.top_k = p.top_k();
  if (p.has_top_p()) s.top_p = p.top_p();
  if (p.has_min_p()) s.min_p = p.min_p();
  if (p.has_seed()) s.seed = p.seed();
  if (p.has_repetition_penalty()) s.repetition_penalty = p.repetition_penalty();
  if (p.has_presence_penalty()) s.presence_penalty = p.presence_penalty();
  if (p.has_frequency_penalty()) s.frequency_penalty = p.frequency_penalty();
  s.logit_bias.assign(p.logit_bias().begin(), p.logit_bias().end());
  std::sort(s.logit_bias.begin(), s.logit_bias.end());  // a map's order is unspecified
  return s;
}

// The request's constraint, if any, with the proto path of the field that carried it.
ConstraintSpec ConstraintFromProto(const tpserve::v1::GenerateRequest& proto) {
  using Req = tpserve::v1::GenerateRequest;
  ConstraintSpec c;
  c.strict = !proto.has_strict() || proto.strict();
  switch (proto.constraint_case()) {
    case Req::kJsonSchema:
      c.kind = ConstraintKind::kJsonSchema;
      c.text = proto.json_schema();
      c.field = "json_schema";
      break;
    case Req::kJsonObject:
      c.kind = ConstraintKind::kJsonObject;
      c.field = "json_object";
      break;
    case Req::kRegex:
      c.kind = ConstraintKind::kRegex;
      c.text = proto.regex();
      c.field = "regex";
      break;
    case Req::kGrammar:
      c.kind = ConstraintKind::kGrammar;
      c.text = proto.grammar();
      c.field = "grammar";
      break;
    case Req::kChoice:
      c.kind = ConstraintKind::kChoice;
      c.choices.assign(proto.choice().choices().begin(), proto.choice().choices().end());
      c.field = "choice.choices";
      break;
    default:
      break;
  }
  return c;
}

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

// A role or a function name: 1 to `max` characters of [A-Za-z0-9_.-].
absl::Status ValidateName(const std::string& field, const std::string& name, size_t max) {
  if (name.empty() || name.size() > max || !std::all_of(name.begin(), name.end(), IsNameChar)) {
    return Invalid(field, absl::StrCat("\"", name.substr(0, 80), "\""),
                   absl::StrCat("must be 1 to ", max, " characters of [A-Za-z0-9_.-]"));
  }
  return absl::OkStatus();
}

// `text` parses as a JSON object (empty is allowed when `allow_empty`: an empty object).
absl::Status ValidateJsonObject(const std::string& field, const std::string& text,
                                bool allow_empty) {
  if (text.empty() && allow_empty) return absl::OkStatus();
  const nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !value.is_object()) {
    return Invalid(field, absl::StrCat(text.size(), " bytes"), "must be a JSON object");
  }
  return absl::OkStatus();
}

constexpr int kMaxTools = 128;
constexpr size_t kMaxRoleBytes = 32;
constexpr size_t kMaxFunctionNameBytes = 64;
constexpr size_t kMaxToolCallIdBytes = 64;

absl::Status ValidateChat(const tpserve::v1::Chat& chat, const ModelLimits& limits) {
  const auto& msgs = chat.messages();
  if (msgs.empty()) return Invalid("chat.messages", "[]", "at least one message is required");
  if (msgs.size() > limits.max_chat_messages) {
    return Invalid("chat.messages", absl::StrCat(msgs.size(), " messages"),
                   absl::StrCat("at most ", limits.max_chat_messages));
  }
  int64_t bytes = 0;
  for (int i = 0; i < msgs.size(); ++i) {
    const tpserve::v1::ChatMessage& m = msgs[i];
    const std::string at = absl::StrCat("chat.messages[", i, "]");
    TP_RETURN_IF_ERROR(ValidateName(at + ".role", m.role(), kMaxRoleBytes));
    if (m.tool_calls_size() > 0 && m.role() != "assistant") {
      return Invalid(at + ".tool_calls", absl::StrCat(m.tool_calls_size(), " calls"),
                     absl::StrCat("only an assistant message has tool calls, not \"", m.role(),
                                  "\""));
    }
    for (int j = 0; j < m.tool_calls_size(); ++j) {
      const tpserve::v1::ToolCall& call = m.tool_calls(j);
      const std::string call_at = absl::StrCat(at, ".tool_calls[", j, "]");
      TP_RETURN_IF_ERROR(ValidateName(call_at + ".name", call.name(), kMaxFunctionNameBytes));
      if (call.id().size() > kMaxToolCallIdBytes) {
        return Invalid(call_at + ".id", absl::StrCat(call.id().size(), " bytes"),
                       absl::StrCat("at most ", kMaxToolCallIdBytes, " bytes"));
      }
      TP_RETURN_IF_ERROR(ValidateJsonObject(call_at + ".arguments", call.arguments(),
                                            /*allow_empty=*/true));
      bytes += static_cast<int64_t>(call.arguments().size());
    }
    if (m.tool_call_id().size() > kMaxToolCallIdBytes) {
      return Invalid(at + ".tool_call_id", absl::StrCat(m.tool_call_id().size(), " bytes"),
                     absl::StrCat("at most ", kMaxToolCallIdBytes, " bytes"));
    }
    if (!m.name().empty()) {
      TP_RETURN_IF_ERROR(ValidateName(at + ".name", m.name(), kMaxFunctionNameBytes));
    }
    bytes += static_cast<int64_t>(m.content().size() + m.reasoning_content().size());
  }
  if (chat.tools_size() > kMaxTools) {
    return Invalid("chat.tools", absl::StrCat(chat.tools_size(), " tools"),
                   absl::StrCat("at most ", kMaxTools));
  }
  for (int i = 0; i < chat.tools_size(); ++i) {
    const tpserve::v1::Tool& tool = chat.tools(i);
    const std::string at = absl::StrCat("chat.tools[", i, "]");
    TP_RETURN_IF_ERROR(ValidateName(at + ".name", tool.name(), kMaxFunctionNameBytes));
    for (int k = 0; k < i; ++k) {
      if (chat.tools(k).name() == tool.name()) {
        return Invalid(at + ".name", absl::StrCat("\"", tool.name(), "\""),
                       absl::StrCat("tool names must be unique; chat.tools[", k, "] has it too"));
      }
    }
    TP_RETURN_IF_ERROR(ValidateJsonObject(at + ".parameters", tool.parameters(),
                                          /*allow_empty=*/true));
    // Every call format writes the arguments as one JSON object.
    if (!tool.parameters().empty()) {
      const nlohmann::json type =
          nlohmann::json::parse(tool.parameters()).value("type", nlohmann::json());
      if (!type.is_null() && type != "object") {
        return Invalid(at + ".parameters.type", type.dump(),
                       "must be \"object\" (a function's arguments are a JSON object)");
      }
    }
    bytes += static_cast<int64_t>(tool.description().size() + tool.parameters().size());
  }
  using Choice = tpserve::v1::ToolChoice;
  const Choice& choice = chat.tool_choice();
  if ((choice.mode() == Choice::REQUIRED || choice.mode() == Choice::FUNCTION) &&
      chat.tools_size() == 0) {
    return Invalid("chat.tool_choice.mode", Choice::Mode_Name(choice.mode()),
                   "a call is required but chat.tools is empty");
  }
  if (choice.mode() == Choice::FUNCTION) {
    const bool known = std::any_of(chat.tools().begin(), chat.tools().end(),
                                   [&](const tpserve::v1::Tool& t) {
                                     return t.name() == choice.function_name();
                                   });
    if (!known) {
      return Invalid("chat.tool_choice.function_name",
                     absl::StrCat("\"", choice.function_name().substr(0, 80), "\""),
                     "must name one of chat.tools");
    }
  } else if (!choice.function_name().empty()) {
    return Invalid("chat.tool_choice.function_name",
                   absl::StrCat("\"", choice.function_name().substr(0, 80), "\""),
                   "is only used with mode FUNCTION");
  }
  TP_RETURN_IF_ERROR(ValidateJsonObject("chat.template_kwargs", chat.template_kwargs(),
                                        /*allow_empty=*/true));
  bytes += static_cast<int64_t>(chat.template_kwargs().size());
  if (bytes > limits.max_prompt_bytes) {
    return Invalid("chat", absl::StrCat(bytes, " bytes of content, tools and arguments"),
                   absl::StrCat("at most ", limits.max_prompt_bytes, " bytes"));
  }
  return absl::OkStatus();
}

// Walks the wire form of a message of type `type` field by field (as an UnknownFieldSet, which
// checks no UTF-8) and names the first string field whose bytes are not UTF-8.
absl::Status FindInvalidUtf8(const google::protobuf::Descriptor& type, std::string_view wire,
                             const std::string& prefix) {
  google::protobuf::UnknownFieldSet fields;
  if (!fields.ParseFromArray(wire.data(), static_cast<int>(wire.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("request: ", wire.size(), " bytes are not a valid ", type.full_name(),
                     prefix.empty() ? "" : absl::StrCat(" (in ", prefix, ")")));
  }
  std::unordered_map<int, int> seen;  // occurrences so far of each repeated field number
  for (int i = 0; i < fields.field_count(); ++i) {
    const google::protobuf::UnknownField& f = fields.field(i);
    const google::protobuf::FieldDescriptor* fd = type.FindFieldByNumber(f.number());
    if (fd == nullptr || f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) continue;
    std::string path = absl::StrCat(prefix, fd->name());
    if (fd->is_repeated()) absl::StrAppend(&path, "[", seen[f.number()]++, "]");
    const std::string& bytes = f.length_delimited();
    if (fd->type() == google::protobuf::FieldDescriptor::TYPE_STRING && !IsValidUtf8(bytes)) {
      size_t bad = 0;
      while (bad < bytes.size()) {
        const size_t len = Utf8SequenceLength(bytes, bad);
        if (len == 0) break;
        bad += len;
      }
      return Invalid(path, absl::StrCat(bytes.size(), " bytes"),
                     absl::StrCat("text must be valid UTF-8; the first bad byte is at offset ", bad));
    }
    if (fd->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE) {
      TP_RETURN_IF_ERROR(FindInvalidUtf8(*fd->message_type(), bytes, path + "."));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseRequestBytes(std::string_view wire, google::protobuf::Message* out) {
  if (out->ParseFromArray(wire.data(), static_cast<int>(wire.size()))) return absl::OkStatus();
  TP_RETURN_IF_ERROR(FindInvalidUtf8(*out->GetDescriptor(), wire, ""));
  return absl::InvalidArgumentError(
      absl::StrCat("request: ", wire.size(), " bytes are not a valid ",
                   out->GetDescriptor()->full_name()));
}

absl::StatusOr<ValidatedInput> ValidateGenerateRequest(const tpserve::v1::GenerateRequest& proto,
                                                       const ModelLimits& limits) {
  ValidatedInput in;
  using Req = tpserve::v1::GenerateRequest;
  switch (proto.input_case()) {
    case Req::kText:
      if (proto.text().empty()) return Invalid("text", "\"\"", "the prompt must not be empty");
      if (static_cast<int64_t>(proto.text().size()) > limits.max_prompt_bytes) {
        return Invalid("text", absl::StrCat(proto.text().size(), " bytes"),
                       absl::StrCat("at most ", limits.max_prompt_bytes, " bytes"));
      }
      in.kind = ValidatedInput::Kind::kText;
      in.text = proto.text();
      break;
    case Req::kChat:
      TP_RETURN_IF_ERROR(ValidateChat(proto.chat(), limits));
      in.kind = ValidatedInput::Kind::kChat;
      in.chat = proto.chat();
      break;
    case Req::kTokenIds:
      if (proto.token_ids().ids().empty()) {
        return Invalid("token_ids.ids", "[]", "the prompt must not be empty");
      }
      TP_RETURN_IF_ERROR(ValidateTokenIds("token_ids.ids", proto.token_ids().ids(), limits.vocab_size));
      in.kind = ValidatedInput::Kind::kTokenIds;
      in.token_ids.assign(proto.token_ids().ids().begin(), proto.token_ids().ids().end());
      break;
    default:
      return absl::InvalidArgumentError(
          "input is missing: set exactly one of text, chat or token_ids");
  }
  in.allow_special_tokens = proto.allow_special_tokens();

  in.request_id = proto.request_id();
  in.sampling = FromProto(proto.sampling());
  in.sampling.top_logprobs = proto.top_logprobs();
  if (proto.request_id().size() > kMaxRequestIdBytes) {
    return Invalid("request_id", absl::StrCat(proto.request_id().size(), " bytes"),
                   absl::StrCat("at most ", kMaxRequestIdBytes, " bytes"));
  }
  TP_RETURN_IF_ERROR(ValidateSamplingParams(in.sampling, limits.vocab_size));
  in.logprobs = proto.logprobs() || proto.top_logprobs() > 0;
  in.prompt_logprobs = proto.prompt_logprobs();
  in.speculative = !proto.has_speculative() || proto.speculative();
  if (proto.has_n()) {
    if (proto.n() < 1 || proto.n() > kMaxChoices) {
      return Invalid("n", absl::StrCat(proto.n()), absl::StrCat("must be in [1, ", kMaxChoices, "]"));
    }
    in.n = proto.n();
  }
  in.best_of = in.n;
  if (proto.has_best_of()) {
    if (proto.best_of() < in.n || proto.best_of() > kMaxChoices) {
      return Invalid("best_of", absl::StrCat(proto.best_of()),
                     absl::StrCat("must be in [n = ", in.n, ", ", kMaxChoices, "]"));
    }
    in.best_of = proto.best_of();
  }

  if (proto.has_max_new_tokens()) {
    if (proto.max_new_tokens() < 1) {
      return Invalid("max_new_tokens", absl::StrCat(proto.max_new_tokens()), "must be at least 1");
    }
    in.max_new_tokens = proto.max_new_tokens();
  }
  if (proto.stop_sequences_size() > limits.max_stop_sequences) {
    return Invalid("stop_sequences", absl::StrCat(proto.stop_sequences_size(), " entries"),
                   absl::StrCat("at most ", limits.max_stop_sequences));
  }
  for (int i = 0; i < proto.stop_sequences_size(); ++i) {
    const std::string& s = proto.stop_sequences(i);
    const std::string field = absl::StrCat("stop_sequences[", i, "]");
    if (s.empty()) return Invalid(field, "\"\"", "must not be empty");
    if (static_cast<int64_t>(s.size()) > limits.max_stop_sequence_bytes) {
      return Invalid(field, absl::StrCat(s.size(), " bytes"),
                     absl::StrCat("at most ", limits.max_stop_sequence_bytes, " bytes"));
    }
    in.stop_sequences.push_back(s);
  }
  TP_RETURN_IF_ERROR(ValidateTokenIds("stop_token_ids", proto.stop_token_ids(), limits.vocab_size));
  in.stop_token_ids.assign(proto.stop_token_ids().begin(), proto.stop_token_ids().end());
  in.ignore_eos = proto.ignore_eos();
  in.constraint = ConstraintFromProto(proto);
  if (proto.has_strict() && in.constraint.kind != ConstraintKind::kJsonSchema) {
    return Invalid("strict", proto.strict() ? "true" : "false", "applies to json_schema only");
  }
  return in;
}

absl::StatusOr<int32_t> CheckContextWindow(int64_t prompt_tokens,
                                           std::optional<int32_t> max_new_tokens,
                                           const ModelLimits& limits) {
  const int64_t room = limits.context_length - prompt_tokens;
  if (room < 1 || (max_new_tokens.has_value() && *max_new_tokens > room)) {
    return WithErrorReason(
        absl::InvalidArgumentError(absl::StrCat(
            kContextLengthExceeded, ": prompt has ", prompt_tokens,
            " tokens and max_new_tokens is ",
            max_new_tokens.has_value() ? absl::StrCat(*max_new_tokens) : std::string("at least 1"),
            ", together ", prompt_tokens + max_new_tokens.value_or(1),
            " > the context length of ", limits.context_length, " tokens")),
        kContextLengthExceeded);
  }
  return max_new_tokens.has_value() ? *max_new_tokens : static_cast<int32_t>(room);
}

}  // namespace tpserve
