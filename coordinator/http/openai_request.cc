// OpenAI request JSON -> tpserve::v1::GenerateRequest (see openai_api.h for the field list).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "coordinator/http/openai_api.h"
#include "coordinator/validation.h"
#include "coordinator/tokenizer/utf8.h"

namespace tpserve {
namespace {

// Ordered: a JSON Schema in the body keeps its property order (the order it is generated in).
using Json = nlohmann::ordered_json;

absl::Status Invalid(const std::string& param, const std::string& message) {
  return WithParam(absl::InvalidArgumentError(message), param);
}

absl::Status TypeError(const std::string& field, const Json& value, const std::string& expected) {
  return Invalid(field, absl::StrCat(field, " has type ", value.type_name(), "; expected ",
                                     expected));
}

// Field accessors: std::nullopt for a missing or null field, an error naming the field for a
// value of the wrong type.
const Json* Find(const Json& obj, const std::string& key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

absl::StatusOr<std::optional<bool>> GetBool(const Json& obj, const std::string& key) {
  const Json* v = Find(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return TypeError(key, *v, "a boolean");
  return v->get<bool>();
}

absl::StatusOr<std::optional<double>> GetNumber(const Json& obj, const std::string& key) {
  const Json* v = Find(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return TypeError(key, *v, "a number");
  return v->get<double>();
}

absl::StatusOr<int64_t> ToInteger(const Json& v, const std::string& field, int64_t min,
                                  int64_t max) {
  if (!v.is_number()) return TypeError(field, v, "an integer");
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(max)) {
      return Invalid(field, absl::StrCat(field, " = ", u, " is invalid: must be at most ", max));
    }
    return static_cast<int64_t>(u);
  }
  int64_t i;
  if (v.is_number_integer()) {
    i = v.get<int64_t>();
  } else {
    const double d = v.get<double>();
    if (d != std::floor(d) || std::fabs(d) > 9.0e18) {
      return Invalid(field, absl::StrCat(field, " = ", d, " is invalid: must be an integer"));
    }
    i = static_cast<int64_t>(d);
  }
  if (i < min || i > max) {
    return Invalid(field, absl::StrCat(field, " = ", i, " is invalid: must be in [", min, ", ",
                                       max, "]"));
  }
  return i;
}

absl::StatusOr<std::optional<int64_t>> GetInteger(
    const Json& obj, const std::string& key, int64_t min = std::numeric_limits<int32_t>::min(),
    int64_t max = std::numeric_limits<int32_t>::max()) {
  const Json* v = Find(obj, key);
  if (v == nullptr) return std::nullopt;
  TP_ASSIGN_OR_RETURN(int64_t i, ToInteger(*v, key, min, max));
  return i;
}

// Fields that do not change what is generated: accepted and not used.
constexpr std::string_view kIgnored[] = {"user", "metadata", "store", "service_tier"};

bool IsKnownField(Endpoint endpoint, const std::string& key) {
  static constexpr std::string_view kCommon[] = {
      "model", "stream", "stream_options", "max_tokens", "temperature", "top_p", "seed",
      "presence_penalty", "frequency_penalty", "stop", "n", "logprobs", "logit_bias",
      "top_k", "min_p", "repetition_penalty", "ignore_eos", "stop_token_ids",
      "response_format", "structured_outputs", "speculative"};
  static constexpr std::string_view kChat[] = {
      "messages", "max_completion_tokens", "top_logprobs", "tools",
      "tool_choice", "parallel_tool_calls", "functions", "function_call",
      "chat_template_kwargs", "add_generation_prompt"};
  static constexpr std::string_view kCompletions[] = {"prompt", "echo", "suffix", "best_of"};
  if (endpoint == Endpoint::kTokenize) {
    static constexpr std::string_view kTokenize[] = {
        "model", "messages", "prompt", "tools", "tool_choice", "parallel_tool_calls",
        "add_generation_prompt", "chat_template_kwargs", "return_token_strs"};
    return std::find(std::begin(kTokenize), std::end(kTokenize), key) != std::end(kTokenize);
  }
  for (std::string_view k : kIgnored) if (k == key) return true;
  for (std::string_view k : kCommon) if (k == key) return true;
  if (endpoint == Endpoint::kChatCompletions) {
    for (std::string_view k : kChat) if (k == key) return true;
  } else {
    for (std::string_view k : kCompletions) if (k == key) return true;
  }
  return false;
}

absl::Status Unsupported(const std::string& field, const std::string& why) {
  return WithCode(Invalid(field, absl::StrCat(field, " is not supported by this server: ", why)),
                  "unsupported_parameter");
}

// Fields we know but cannot honour: an error unless they ask for the default behaviour.
absl::Status CheckUnsupported(const Json& body, Endpoint endpoint) {
  if (const Json* v = Find(body, "functions"); v != nullptr && !(v->is_array() && v->empty())) {
    return Unsupported("functions", "the deprecated functions API; send tools");
  }
  if (const Json* v = Find(body, "function_call"); v != nullptr && *v != "none") {
    return Unsupported("function_call", "the deprecated functions API; send tool_choice");
  }
  if (endpoint == Endpoint::kCompletions) {
    if (const Json* v = Find(body, "suffix"); v != nullptr && *v != "") {
      return Unsupported("suffix", "insertion (suffix) is not implemented");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> GetString(const Json& obj, const std::string& key,
                                      const std::string& path, bool required) {
  const Json* v = Find(obj, key);
  if (v == nullptr) {
    if (required) return Invalid(path, path + " is required");
    return std::string();
  }
  if (!v->is_string()) return TypeError(path, *v, "a string");
  return v->get<std::string>();
}

absl::Status CheckKeys(const Json& obj, const std::string& path,
                       std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, value] : obj.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string names;
      for (std::string_view a : allowed) {
        absl::StrAppend(&names, names.empty() ? "" : ", ", absl::string_view(a.data(), a.size()));
      }
      return Unsupported(absl::StrCat(path, ".", key), absl::StrCat(path, " takes ", names));
    }
  }
  return absl::OkStatus();
}

// A message's content: a string, text parts (joined), or null (OpenAI allows it for an
// assistant message with tool calls).
absl::Status ParseContent(const Json& m, const std::string& path, tpserve::v1::ChatMessage* out) {
  const Json* content = Find(m, "content");
  const std::string content_path = path + ".content";
  if (content == nullptr) {
    if (out->tool_calls_size() > 0) return absl::OkStatus();
    return Invalid(content_path, content_path + " is required");
  }
  if (content->is_string()) {
    out->set_content(content->get<std::string>());
    return absl::OkStatus();
  }
  if (!content->is_array()) {
    return TypeError(content_path, *content, "a string or an array of text parts");
  }
  for (size_t j = 0; j < content->size(); ++j) {
    const Json& part = (*content)[j];
    const std::string part_path = absl::StrCat(content_path, "[", j, "]");
    if (!part.is_object()) return TypeError(part_path, part, "a content part object");
    const Json* type = Find(part, "type");
    if (type == nullptr || *type != "text") {
      return Unsupported(part_path + ".type", "only text content parts");
    }
    const Json* text = Find(part, "text");
    if (text == nullptr || !text->is_string()) {
      return TypeError(part_path + ".text", text ? *text : Json(), "a string");
    }
    out->mutable_content()->append(text->get<std::string>());
  }
  return absl::OkStatus();
}

// An assistant message's tool_calls: [{id, type: "function", function: {name, arguments}}],
// arguments a JSON string (OpenAI's form; an object is accepted too, as some clients send).
absl::Status ParseHistoryToolCalls(const Json& calls, const std::string& path,
                                   tpserve::v1::ChatMessage* out) {
  if (!calls.is_array()) return TypeError(path, calls, "an array of tool calls");
  for (size_t j = 0; j < calls.size(); ++j) {
    const Json& call = calls[j];
    const std::string call_path = absl::StrCat(path, "[", j, "]");
    if (!call.is_object()) return TypeError(call_path, call, "a tool call object");
    TP_RETURN_IF_ERROR(CheckKeys(call, call_path, {"id", "type", "function", "index"}));
    if (const Json* type = Find(call, "type"); type != nullptr && *type != "function") {
      return Unsupported(call_path + ".type", "only \"function\" tool calls");
    }
    const Json* function = Find(call, "function");
    const std::string function_path = call_path + ".function";
    if (function == nullptr) return Invalid(function_path, function_path + " is required");
    if (!function->is_object()) return TypeError(function_path, *function, "an object");
    TP_RETURN_IF_ERROR(CheckKeys(*function, function_path, {"name", "arguments"}));
    tpserve::v1::ToolCall* to = out->add_tool_calls();
    TP_ASSIGN_OR_RETURN(*to->mutable_id(), GetString(call, "id", call_path + ".id", false));
    TP_ASSIGN_OR_RETURN(*to->mutable_name(),
                        GetString(*function, "name", function_path + ".name", true));
    const Json* arguments = Find(*function, "arguments");
    if (arguments == nullptr) continue;
    if (arguments->is_string()) {
      to->set_arguments(arguments->get<std::string>());
    } else if (arguments->is_object()) {
      to->set_arguments(arguments->dump());
    } else {
      return TypeError(function_path + ".arguments", *arguments, "a JSON string");
    }
  }
  return absl::OkStatus();
}

absl::Status ParseMessages(const Json& body, tpserve::v1::GenerateRequest& proto) {
  const Json* messages = Find(body, "messages");
  if (messages == nullptr) return Invalid("messages", "messages is required");
  if (!messages->is_array()) return TypeError("messages", *messages, "an array of messages");
  tpserve::v1::Chat* chat = proto.mutable_chat();
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    const std::string path = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) return TypeError(path, m, "an object");
    TP_RETURN_IF_ERROR(CheckKeys(m, path, {"role", "content", "name", "tool_calls",
                                           "tool_call_id", "reasoning_content", "refusal"}));
    tpserve::v1::ChatMessage* out = chat->add_messages();
    TP_ASSIGN_OR_RETURN(std::string role, GetString(m, "role", path + ".role", true));
    // OpenAI's newer name for the system role.
    out->set_role(role == "developer" ? std::string("system") : role);
    if (const Json* calls = Find(m, "tool_calls"); calls != nullptr) {
      TP_RETURN_IF_ERROR(ParseHistoryToolCalls(*calls, path + ".tool_calls", out));
    }
    TP_RETURN_IF_ERROR(ParseContent(m, path, out));
    TP_ASSIGN_OR_RETURN(*out->mutable_name(), GetString(m, "name", path + ".name", false));
    TP_ASSIGN_OR_RETURN(*out->mutable_tool_call_id(),
                        GetString(m, "tool_call_id", path + ".tool_call_id", false));
    TP_ASSIGN_OR_RETURN(*out->mutable_reasoning_content(),
                        GetString(m, "reasoning_content", path + ".reasoning_content", false));
  }
  return absl::OkStatus();
}

// tools, tool_choice, parallel_tool_calls, and vLLM's chat_template_kwargs and
// add_generation_prompt.
absl::Status ParseTools(const Json& body, tpserve::v1::Chat* chat) {
  if (const Json* tools = Find(body, "tools"); tools != nullptr) {
    if (!tools->is_array()) return TypeError("tools", *tools, "an array of tools");
    for (size_t i = 0; i < tools->size(); ++i) {
      const Json& tool = (*tools)[i];
      const std::string path = absl::StrCat("tools[", i, "]");
      if (!tool.is_object()) return TypeError(path, tool, "a tool object");
      TP_RETURN_IF_ERROR(CheckKeys(tool, path, {"type", "function"}));
      if (const Json* type = Find(tool, "type"); type == nullptr || *type != "function") {
        return Unsupported(path + ".type", "only \"function\" tools");
      }
      const Json* function = Find(tool, "function");
      const std::string function_path = path + ".function";
      if (function == nullptr) return Invalid(function_path, function_path + " is required");
      if (!function->is_object()) return TypeError(function_path, *function, "an object");
      // strict: the arguments are always constrained to the schema, so it changes nothing.
      TP_RETURN_IF_ERROR(
          CheckKeys(*function, function_path, {"name", "description", "parameters", "strict"}));
      tpserve::v1::Tool* out = chat->add_tools();
      TP_ASSIGN_OR_RETURN(*out->mutable_name(),
                          GetString(*function, "name", function_path + ".name", true));
      TP_ASSIGN_OR_RETURN(*out->mutable_description(),
                          GetString(*function, "description", function_path + ".description",
                                    false));
      if (const Json* parameters = Find(*function, "parameters"); parameters != nullptr) {
        if (!parameters->is_object()) {
          return TypeError(function_path + ".parameters", *parameters, "a JSON Schema object");
        }
        out->set_parameters(parameters->dump());
      }
    }
  }
  using Choice = tpserve::v1::ToolChoice;
  if (const Json* choice = Find(body, "tool_choice"); choice != nullptr) {
    Choice* out = chat->mutable_tool_choice();
    if (choice->is_string()) {
      const std::string mode = choice->get<std::string>();
      if (mode == "auto") {
        out->set_mode(Choice::AUTO);
      } else if (mode == "none") {
        out->set_mode(Choice::NONE);
      } else if (mode == "required") {
        out->set_mode(Choice::REQUIRED);
      } else {
        return Invalid("tool_choice",
                       absl::StrCat("tool_choice = \"", mode.substr(0, 40),
                                    "\" is invalid: must be \"none\", \"auto\", \"required\" or "
                                    "{\"type\": \"function\", \"function\": {\"name\": ...}}"));
      }
    } else if (choice->is_object()) {
      TP_RETURN_IF_ERROR(CheckKeys(*choice, "tool_choice", {"type", "function"}));
      const Json* function = Find(*choice, "function");
      if (function == nullptr || !function->is_object()) {
        return TypeError("tool_choice.function", function ? *function : Json(),
                         "an object with a name");
      }
      out->set_mode(Choice::FUNCTION);
      TP_ASSIGN_OR_RETURN(*out->mutable_function_name(),
                          GetString(*function, "name", "tool_choice.function.name", true));
    } else {
      return TypeError("tool_choice", *choice, "a string or an object");
    }
  }
  TP_ASSIGN_OR_RETURN(std::optional<bool> parallel, GetBool(body, "parallel_tool_calls"));
  if (parallel) chat->set_parallel_tool_calls(*parallel);
  TP_ASSIGN_OR_RETURN(std::optional<bool> generation_prompt,
                      GetBool(body, "add_generation_prompt"));
  if (generation_prompt) chat->set_add_generation_prompt(*generation_prompt);
  if (const Json* kwargs = Find(body, "chat_template_kwargs"); kwargs != nullptr) {
    if (!kwargs->is_object()) return TypeError("chat_template_kwargs", *kwargs, "an object");
    chat->set_template_kwargs(kwargs->dump());
  }
  return absl::OkStatus();
}

absl::Status ParseTokenIds(const Json& ids, const std::string& path, tpserve::v1::TokenIds* out) {
  for (size_t i = 0; i < ids.size(); ++i) {
    TP_ASSIGN_OR_RETURN(int64_t id, ToInteger(ids[i], absl::StrCat(path, "[", i, "]"), 0,
                                              std::numeric_limits<int32_t>::max()));
    out->add_ids(static_cast<int32_t>(id));
  }
  return absl::OkStatus();
}

absl::Status ParsePrompt(const Json& body, tpserve::v1::GenerateRequest& proto) {
  const Json* prompt = Find(body, "prompt");
  if (prompt == nullptr) return Invalid("prompt", "prompt is required");
  const std::string kExpected =
      "a string, an array of token ids, or a one-element array of either";
  if (prompt->is_string()) {
    proto.set_text(prompt->get<std::string>());
    return absl::OkStatus();
  }
  if (!prompt->is_array()) return TypeError("prompt", *prompt, kExpected);
  if (prompt->empty()) return Invalid("prompt", "prompt = [] is invalid: the prompt must not be empty");
  const Json& first = (*prompt)[0];
  if (first.is_number()) return ParseTokenIds(*prompt, "prompt", proto.mutable_token_ids());
  if (prompt->size() != 1) {
    return Unsupported("prompt", absl::StrCat("a batch of ", prompt->size(),
                                              " prompts; send one request per prompt"));
  }
  if (first.is_string()) {
    proto.set_text(first.get<std::string>());
    return absl::OkStatus();
  }
  if (first.is_array()) return ParseTokenIds(first, "prompt[0]", proto.mutable_token_ids());
  return TypeError("prompt[0]", first, kExpected);
}

absl::Status ParseStop(const Json& body, OpenAiRequest& r) {
  const Json* stop = Find(body, "stop");
  if (stop == nullptr) return absl::OkStatus();
  if (stop->is_string()) {
    r.stop_is_string = true;
    r.proto.add_stop_sequences(stop->get<std::string>());
    return absl::OkStatus();
  }
  if (!stop->is_array()) return TypeError("stop", *stop, "a string or an array of strings");
  for (size_t i = 0; i < stop->size(); ++i) {
    const Json& s = (*stop)[i];
    if (!s.is_string()) return TypeError(absl::StrCat("stop[", i, "]"), s, "a string");
    r.proto.add_stop_sequences(s.get<std::string>());
  }
  return absl::OkStatus();
}

absl::Status ParseSampling(const Json& body, tpserve::v1::SamplingParams& s) {
  TP_ASSIGN_OR_RETURN(std::optional<double> temperature, GetNumber(body, "temperature"));
  if (temperature) s.set_temperature(static_cast<float>(*temperature));
  TP_ASSIGN_OR_RETURN(std::optional<double> top_p, GetNumber(body, "top_p"));
  if (top_p) s.set_top_p(static_cast<float>(*top_p));
  TP_ASSIGN_OR_RETURN(std::optional<double> min_p, GetNumber(body, "min_p"));
  if (min_p) s.set_min_p(static_cast<float>(*min_p));
  TP_ASSIGN_OR_RETURN(std::optional<double> rep, GetNumber(body, "repetition_penalty"));
  if (rep) s.set_repetition_penalty(static_cast<float>(*rep));
  TP_ASSIGN_OR_RETURN(std::optional<double> presence, GetNumber(body, "presence_penalty"));
  if (presence) s.set_presence_penalty(static_cast<float>(*presence));
  TP_ASSIGN_OR_RETURN(std::optional<double> frequency, GetNumber(body, "frequency_penalty"));
  if (frequency) s.set_frequency_penalty(static_cast<float>(*frequency));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> top_k, GetInteger(body, "top_k"));
  if (top_k) s.set_top_k(static_cast<int32_t>(*top_k));
  // OpenAI's seed is a signed 64-bit integer; ours is any 64-bit pattern.
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> seed,
                      GetInteger(body, "seed", std::numeric_limits<int64_t>::min(),
                                 std::numeric_limits<int64_t>::max()));
  if (seed) s.set_seed(static_cast<uint64_t>(*seed));
  return absl::OkStatus();
}

// logit_bias: {"<token id>": bias, ...}; the door checks the ids and the bounds.
absl::Status ParseLogitBias(const Json& body, tpserve::v1::SamplingParams& s) {
  const Json* bias = Find(body, "logit_bias");
  if (bias == nullptr) return absl::OkStatus();
  if (!bias->is_object()) return TypeError("logit_bias", *bias, "an object of token id -> bias");
  for (const auto& [key, value] : bias->items()) {
    const std::string path = absl::StrCat("logit_bias.", key);
    int64_t id = 0;
    if (!absl::SimpleAtoi(key, &id) || id < 0 || id > std::numeric_limits<int32_t>::max()) {
      return Invalid("logit_bias", absl::StrCat("logit_bias has the key \"", key,
                                                "\": keys must be token ids (\"50256\")"));
    }
    if (!value.is_number()) return TypeError(path, value, "a number in [-100, 100]");
    (*s.mutable_logit_bias())[static_cast<int32_t>(id)] = static_cast<float>(value.get<double>());
  }
  return absl::OkStatus();
}

// A JSON Schema given as an object (or, for structured_outputs.json, also as text).
absl::StatusOr<std::string> SchemaText(const Json& schema, const std::string& field,
                                       bool allow_text) {
  if (schema.is_object() || schema.is_boolean()) return schema.dump();
  if (allow_text && schema.is_string()) return schema.get<std::string>();
  return TypeError(field, schema, allow_text ? "a JSON Schema (an object or its text)"
                                             : "a JSON Schema object");
}

// OpenAI's response_format and vLLM's structured_outputs -> the proto's constraint.
absl::Status ParseConstraint(const Json& body, OpenAiRequest& r) {
  const Json* format = Find(body, "response_format");
  const Json* outputs = Find(body, "structured_outputs");
  if (format != nullptr && outputs != nullptr) {
    return Invalid("structured_outputs", "set only one of response_format and structured_outputs");
  }
  tpserve::v1::GenerateRequest& p = r.proto;
  if (format != nullptr) {
    if (!format->is_object()) return TypeError("response_format", *format, "an object");
    const Json* type = Find(*format, "type");
    if (type == nullptr || !type->is_string()) {
      return Invalid("response_format.type",
                     "response_format.type is required: \"text\", \"json_object\" or \"json_schema\"");
    }
    for (const auto& [key, value] : format->items()) {
      if (key != "type" && !(key == "json_schema" && *type == "json_schema")) {
        return Unsupported(absl::StrCat("response_format.", key),
                           absl::StrCat("not a field of a ", type->get<std::string>(), " format"));
      }
    }
    if (*type == "text") return absl::OkStatus();
    if (*type == "json_object") {
      p.mutable_json_object();
      r.constraint_field = "response_format";
      return absl::OkStatus();
    }
    if (*type != "json_schema") {
      return Invalid("response_format.type",
                     absl::StrCat("response_format.type = \"", type->get<std::string>(),
                                  "\" is invalid: must be \"text\", \"json_object\" or \"json_schema\""));
    }
    const Json* js = Find(*format, "json_schema");
    if (js == nullptr) return Invalid("response_format.json_schema", "response_format.json_schema is required");
    if (!js->is_object()) return TypeError("response_format.json_schema", *js, "an object");
    for (const auto& [key, value] : js->items()) {
      if (key != "name" && key != "schema" && key != "strict" && key != "description") {
        return Unsupported(absl::StrCat("response_format.json_schema.", key),
                           "json_schema takes name, description, schema and strict");
      }
    }
    const Json* name = Find(*js, "name");
    if (name == nullptr || !name->is_string() || name->get<std::string>().empty() ||
        name->get<std::string>().size() > 64) {
      return Invalid("response_format.json_schema.name",
                     "response_format.json_schema.name is required: a string of 1 to 64 characters");
    }
    const Json* schema = Find(*js, "schema");
    if (schema == nullptr) {
      return Invalid("response_format.json_schema.schema",
                     "response_format.json_schema.schema is required");
    }
    TP_ASSIGN_OR_RETURN(*p.mutable_json_schema(),
                        SchemaText(*schema, "response_format.json_schema.schema", false));
    TP_ASSIGN_OR_RETURN(std::optional<bool> strict, GetBool(*js, "strict"));
    p.set_strict(strict.value_or(false));  // OpenAI's default
    r.constraint_field = "response_format.json_schema.schema";
    return absl::OkStatus();
  }
  if (outputs == nullptr) return absl::OkStatus();
  if (!outputs->is_object()) return TypeError("structured_outputs", *outputs, "an object");
  int set = 0;
  for (const auto& [key, value] : outputs->items()) {
    if (value.is_null()) continue;
    const std::string field = absl::StrCat("structured_outputs.", key);
    if (++set > 1) {
      return Invalid(field, "structured_outputs takes one of json, regex, choice, grammar and "
                            "json_object");
    }
    r.constraint_field = field;
    if (key == "json") {
      TP_ASSIGN_OR_RETURN(*p.mutable_json_schema(), SchemaText(value, field, true));
    } else if (key == "regex" || key == "grammar") {
      if (!value.is_string()) return TypeError(field, value, "a string");
      key == "regex" ? p.set_regex(value.get<std::string>()) : p.set_grammar(value.get<std::string>());
    } else if (key == "choice") {
      if (!value.is_array()) return TypeError(field, value, "an array of strings");
      for (size_t i = 0; i < value.size(); ++i) {
        if (!value[i].is_string()) return TypeError(absl::StrCat(field, "[", i, "]"), value[i], "a string");
        p.mutable_choice()->add_choices(value[i].get<std::string>());
      }
    } else if (key == "json_object") {
      if (!value.is_boolean()) return TypeError(field, value, "a boolean");
      if (!value.get<bool>()) {
        --set;
        r.constraint_field.clear();
        continue;
      }
      p.mutable_json_object();
    } else {
      return Unsupported(field, "structured_outputs takes json, regex, choice, grammar and "
                                "json_object");
    }
  }
  return absl::OkStatus();
}

absl::Status ParseLimitsAndLogprobs(const Json& body, OpenAiRequest& r) {
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> max_tokens, GetInteger(body, "max_tokens"));
  std::optional<int64_t> max_completion_tokens;
  if (r.endpoint == Endpoint::kChatCompletions) {
    TP_ASSIGN_OR_RETURN(max_completion_tokens, GetInteger(body, "max_completion_tokens"));
  }
  if (max_tokens && max_completion_tokens) {
    return Invalid("max_completion_tokens",
                   "set only one of max_tokens and max_completion_tokens");
  }
  if (max_completion_tokens) r.max_tokens_field = "max_completion_tokens";
  if (max_tokens || max_completion_tokens) {
    r.proto.set_max_new_tokens(static_cast<int32_t>(max_tokens ? *max_tokens : *max_completion_tokens));
  } else if (r.endpoint == Endpoint::kCompletions) {
    r.proto.set_max_new_tokens(kCompletionsDefaultMaxTokens);  // OpenAI's documented default
  }

  if (r.endpoint == Endpoint::kChatCompletions) {
    TP_ASSIGN_OR_RETURN(std::optional<bool> logprobs, GetBool(body, "logprobs"));
    TP_ASSIGN_OR_RETURN(std::optional<int64_t> top, GetInteger(body, "top_logprobs"));
    if (top.has_value() && !logprobs.value_or(false)) {
      return Invalid("top_logprobs", "top_logprobs requires logprobs = true");
    }
    r.logprobs = logprobs.value_or(false);
    r.top_logprobs = static_cast<int32_t>(top.value_or(0));
  } else {
    // Completions: logprobs is the number of alternatives; 0 still reports the chosen token.
    TP_ASSIGN_OR_RETURN(std::optional<int64_t> logprobs, GetInteger(body, "logprobs"));
    r.logprobs = logprobs.has_value();
    r.top_logprobs = static_cast<int32_t>(logprobs.value_or(0));
  }
  r.proto.set_logprobs(r.logprobs);
  r.proto.set_top_logprobs(r.top_logprobs);

  TP_ASSIGN_OR_RETURN(std::optional<bool> ignore_eos, GetBool(body, "ignore_eos"));
  r.proto.set_ignore_eos(ignore_eos.value_or(false));
  TP_ASSIGN_OR_RETURN(std::optional<bool> speculative, GetBool(body, "speculative"));
  if (speculative.has_value()) r.proto.set_speculative(*speculative);
  if (const Json* ids = Find(body, "stop_token_ids"); ids != nullptr) {
    if (!ids->is_array()) return TypeError("stop_token_ids", *ids, "an array of token ids");
    for (size_t i = 0; i < ids->size(); ++i) {
      TP_ASSIGN_OR_RETURN(int64_t id, ToInteger((*ids)[i], absl::StrCat("stop_token_ids[", i, "]"),
                                                0, std::numeric_limits<int32_t>::max()));
      r.proto.add_stop_token_ids(static_cast<int32_t>(id));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseStreaming(const Json& body, OpenAiRequest& r) {
  TP_ASSIGN_OR_RETURN(std::optional<bool> stream, GetBool(body, "stream"));
  r.stream = stream.value_or(false);
  const Json* options = Find(body, "stream_options");
  if (options == nullptr) return absl::OkStatus();
  if (!r.stream) return Invalid("stream_options", "stream_options requires stream = true");
  if (!options->is_object()) return TypeError("stream_options", *options, "an object");
  for (const auto& [key, value] : options->items()) {
    if (key != "include_usage") return Unsupported("stream_options." + key, "only include_usage");
  }
  const Json* include = Find(*options, "include_usage");
  if (include != nullptr && !include->is_boolean()) {
    return TypeError("stream_options.include_usage", *include, "a boolean");
  }
  r.include_usage = include != nullptr && include->get<bool>();
  return absl::OkStatus();
}

// n, best_of and echo (with logprobs: the prompt's logprobs). Their bounds are the door's.
absl::Status ParseChoices(const Json& body, OpenAiRequest& r) {
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> n, GetInteger(body, "n"));
  // As sent (GetInteger keeps it in int32): the door checks [1, 16] and names the value.
  if (n.has_value()) r.proto.set_n(static_cast<int32_t>(*n));
  r.n = static_cast<int32_t>(std::clamp<int64_t>(n.value_or(1), 1, kMaxChoices));
  if (r.endpoint != Endpoint::kCompletions) return absl::OkStatus();
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> best_of, GetInteger(body, "best_of"));
  if (best_of.has_value()) {
    r.proto.set_best_of(static_cast<int32_t>(*best_of));
    // As OpenAI's: the best candidates are known only once all have finished.
    if (r.stream && *best_of > n.value_or(1)) {
      return Invalid("best_of", absl::StrCat("best_of = ", *best_of, " > n = ", n.value_or(1),
                                             " cannot be used with stream = true"));
    }
  }
  TP_ASSIGN_OR_RETURN(std::optional<bool> echo, GetBool(body, "echo"));
  r.echo = echo.value_or(false);
  r.proto.set_prompt_logprobs(r.echo && r.logprobs);
  return absl::OkStatus();
}

// POST /tokenize, vLLM's: a chat (messages, tools, add_generation_prompt,
// chat_template_kwargs) or a prompt; return_token_strs adds each token's text.
absl::StatusOr<OpenAiRequest> ParseTokenizeBody(const Json& body, OpenAiRequest r) {
  if (Find(body, "messages") != nullptr) {
    if (Find(body, "prompt") != nullptr) {
      return Invalid("prompt", "send either messages or prompt, not both");
    }
    TP_RETURN_IF_ERROR(ParseMessages(body, r.proto));
    TP_RETURN_IF_ERROR(ParseTools(body, r.proto.mutable_chat()));
  } else {
    TP_RETURN_IF_ERROR(ParsePrompt(body, r.proto));
  }
  TP_ASSIGN_OR_RETURN(std::optional<bool> token_strs, GetBool(body, "return_token_strs"));
  r.return_token_strs = token_strs.value_or(false);
  return r;
}

absl::StatusOr<OpenAiRequest> ParseBody(Endpoint endpoint, const Json& body,
                                        std::string_view served_model) {
  if (!body.is_object()) return TypeError("body", body, "a JSON object");
  OpenAiRequest r;
  r.endpoint = endpoint;
  for (const auto& [key, value] : body.items()) {
    if (!IsKnownField(endpoint, key)) {
      return WithCode(Invalid(key, absl::StrCat("unrecognized request field: ", key)),
                      "unsupported_parameter");
    }
  }
  if (const Json* model = Find(body, "model"); model != nullptr) {
    if (!model->is_string()) return TypeError("model", *model, "a string");
    r.model = model->get<std::string>();
    if (r.model != served_model) {
      return WithCode(WithParam(absl::NotFoundError(absl::StrCat(
                                    "the model `", r.model, "` does not exist; this server serves `",
                                    std::string(served_model), "`")),
                                "model"),
                      "model_not_found");
    }
  }
  if (endpoint == Endpoint::kTokenize) return ParseTokenizeBody(body, std::move(r));
  TP_RETURN_IF_ERROR(CheckUnsupported(body, endpoint));
  if (endpoint == Endpoint::kChatCompletions) {
    TP_RETURN_IF_ERROR(ParseMessages(body, r.proto));
    TP_RETURN_IF_ERROR(ParseTools(body, r.proto.mutable_chat()));
  } else {
    TP_RETURN_IF_ERROR(ParsePrompt(body, r.proto));
  }
  TP_RETURN_IF_ERROR(ParseSampling(body, *r.proto.mutable_sampling()));
  TP_RETURN_IF_ERROR(ParseLogitBias(body, *r.proto.mutable_sampling()));
  TP_RETURN_IF_ERROR(ParseConstraint(body, r));
  TP_RETURN_IF_ERROR(ParseLimitsAndLogprobs(body, r));
  TP_RETURN_IF_ERROR(ParseStop(body, r));
  TP_RETURN_IF_ERROR(ParseStreaming(body, r));
  TP_RETURN_IF_ERROR(ParseChoices(body, r));
  return r;
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(Endpoint endpoint, std::string_view body,
                                                 std::string_view served_model) {
  if (!IsValidUtf8(body)) {
    return absl::InvalidArgumentError("the request body is not valid UTF-8");
  }
  Json json;
  try {
    json = Json::parse(body);
  } catch (const Json::exception& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 2: ...".
    std::string what = e.what();
    if (size_t p = what.find("] "); p != std::string::npos) what.erase(0, p + 2);
    return absl::InvalidArgumentError(absl::StrCat("the request body is not valid JSON: ", what));
  }
  // Every accessor above checks types first, but a nlohmann exception must never become a 500.
  try {
    return ParseBody(endpoint, json, served_model);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed request: ", e.what()));
  }
}

}  // namespace tpserve
