// Engine events -> OpenAI response objects: chat.completion, chat.completion.chunk,
// text_completion; usage; logprobs in each endpoint's shape.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "coordinator/http/openai_api.h"
#include "coordinator/tokenizer/utf8.h"

namespace tpserve {

using Json = nlohmann::json;

const char* OpenAiFinishReason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kEos:  // the model's EOS or one of the request's stop_token_ids
    case FinishReason::kStopSequence:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kToolCalls:
      return "tool_calls";
    default:
      return nullptr;
  }
}

int32_t CachedPromptTokens(const Usage& usage) { return usage.cached_tokens; }

Json UsageObject(const Usage& usage) {
  Json out = {{"prompt_tokens", usage.prompt_tokens},
              {"completion_tokens", usage.completion_tokens},
              {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", CachedPromptTokens(usage)}}}};
  if (usage.speculative_steps > 0) {
    // OpenAI's names for predicted tokens the model did and did not take, and ours beside.
    out["completion_tokens_details"] = {
        {"accepted_prediction_tokens", usage.accepted_draft_tokens},
        {"rejected_prediction_tokens", usage.draft_tokens - usage.accepted_draft_tokens}};
    out["speculative"] = {{"draft_tokens", usage.draft_tokens},
                          {"accepted_draft_tokens", usage.accepted_draft_tokens},
                          {"steps", usage.speculative_steps},
                          {"acceptance_rate", DraftAcceptanceRate(usage)},
                          {"mean_accepted_length", MeanAcceptedLength(usage)}};
  }
  return out;
}

std::string DumpJson(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string SseData(const Json& value) { return absl::StrCat("data: ", DumpJson(value), "\n\n"); }

ResponseBuilder::ResponseBuilder(const OpenAiRequest& request, std::string request_id,
                                 std::string model, int64_t created_unix_s,
                                 const Tokenizer* tokenizer)
    : endpoint_(request.endpoint),
      logprobs_(request.logprobs),
      include_usage_(request.include_usage),
      id_(absl::StrCat(request.endpoint == Endpoint::kChatCompletions ? "chatcmpl-" : "cmpl-",
                       request_id)),
      model_(std::move(model)),
      created_unix_s_(created_unix_s),
      tokenizer_(tokenizer),
      choices_(static_cast<size_t>(std::max(1, request.n))) {
  if (request.echo && request.endpoint == Endpoint::kCompletions) {
    if (request.proto.has_text()) {
      echo_ = request.proto.text();
    } else if (request.proto.has_token_ids() && tokenizer_ != nullptr) {
      const auto& ids = request.proto.token_ids().ids();
      absl::StatusOr<std::string> text =
          tokenizer_->Decode(std::vector<int32_t>(ids.begin(), ids.end()));
      if (text.ok()) echo_ = SanitizeUtf8(*text);
    }
  }
  for (Choice& c : choices_) c.logprobs = LogprobsObject(c, {});
}

namespace {

// A token's text for display (a byte token in the middle of a character becomes U+FFFD) and
// its exact bytes, which is what OpenAI's `bytes` field is for.
std::pair<std::string, Json> TokenTextAndBytes(const Tokenizer& tokenizer, int32_t id) {
  absl::StatusOr<std::string_view> raw = tokenizer.TokenBytes(id);
  std::string_view bytes = raw.ok() ? *raw : std::string_view();
  Json list = Json::array();
  for (char c : bytes) list.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return {SanitizeUtf8(bytes), std::move(list)};
}

// One call as OpenAI's tool_calls lists it. Streamed and whole alike: calls arrive complete.
Json ToolCallObject(const ToolCallDelta& call) {
  return {{"index", call.index},
          {"id", call.id},
          {"type", "function"},
          {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

// structured_output: {completed, dropped_keywords, annotations}, for a constrained request's
// last object.
Json StructuredObject(const StructuredOutcome& outcome) {
  return {{"completed", outcome.completed},
          {"dropped_keywords", outcome.dropped_keywords},
          {"annotations", outcome.annotations}};
}

}  // namespace

// Chat: {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}.
// Completions: {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}, where
// text_offset counts bytes of the choice's text before the token.
Json ResponseBuilder::LogprobsObject(Choice& choice, const std::vector<SampledToken>& tokens) {
  Json out;
  if (endpoint_ == Endpoint::kChatCompletions) {
    out["content"] = Json::array();
    for (const SampledToken& t : tokens) {
      auto [text, bytes] = TokenTextAndBytes(*tokenizer_, t.id);
      Json top = Json::array();
      for (const auto& [id, logprob] : t.top_logprobs) {
        auto [alt_text, alt_bytes] = TokenTextAndBytes(*tokenizer_, id);
        top.push_back({{"token", alt_text}, {"logprob", logprob}, {"bytes", alt_bytes}});
      }
      out["content"].push_back({{"token", text},
                                {"logprob", t.logprob},
                                {"bytes", bytes},
                                {"top_logprobs", std::move(top)}});
    }
    return out;
  }
  out = {{"tokens", Json::array()},
         {"token_logprobs", Json::array()},
         {"top_logprobs", Json::array()},
         {"text_offset", Json::array()}};
  for (const SampledToken& t : tokens) {
    auto [text, bytes] = TokenTextAndBytes(*tokenizer_, t.id);
    Json top = Json::object();
    for (const auto& [id, logprob] : t.top_logprobs) {
      std::string alt = TokenTextAndBytes(*tokenizer_, id).first;
      if (!top.contains(alt)) top[alt] = logprob;  // two byte tokens may both show as U+FFFD
    }
    out["tokens"].push_back(text);
    out["token_logprobs"].push_back(t.logprob);
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(choice.text_offset_bytes);
    choice.text_offset_bytes += static_cast<int64_t>(bytes.size());
  }
  return out;
}

Json ResponseBuilder::PromptLogprobsObject(Choice& choice) {
  Json out = LogprobsObject(choice, {});
  if (prompt_ids_.empty()) return out;
  // The first prompt token has no logprob (nothing precedes it).
  SampledToken first;
  first.id = prompt_ids_.front();
  Json head = LogprobsObject(choice, {first});
  out["tokens"].push_back(head["tokens"][0]);
  out["token_logprobs"].push_back(nullptr);
  out["top_logprobs"].push_back(nullptr);
  out["text_offset"].push_back(head["text_offset"][0]);
  Json rest = LogprobsObject(choice, prompt_logprobs_);
  for (auto& [key, values] : rest.items()) {
    for (Json& v : values) out[key].push_back(std::move(v));
  }
  return out;
}

Json ResponseBuilder::ChunkShell() const {
  Json chunk = {{"id", id_},
                {"object", endpoint_ == Endpoint::kChatCompletions ? "chat.completion.chunk"
                                                                  : "text_completion"},
                {"created", created_unix_s_},
                {"model", model_}};
  if (include_usage_) chunk["usage"] = nullptr;  // as OpenAI does: only the last chunk has it
  return chunk;
}

std::pair<std::string, Json> ResponseBuilder::Take(Choice& choice, const GenerationEvent& event) {
  if (!event.prompt_logprobs.empty()) prompt_logprobs_ = event.prompt_logprobs;
  std::string text;
  Json logprobs = nullptr;
  const bool first = !choice.started;
  choice.started = true;
  if (first && !echo_.empty()) text = echo_;  // the echoed prompt opens every choice's text
  text += event.text;
  const bool echo_logprobs = first && logprobs_ && !prompt_ids_.empty() && !echo_.empty();
  if (echo_logprobs || (logprobs_ && !event.logprobs.empty())) {
    logprobs = echo_logprobs ? PromptLogprobsObject(choice) : LogprobsObject(choice, {});
    Json more = LogprobsObject(choice, event.logprobs);
    for (auto& [key, values] : more.items()) {
      for (Json& v : values) logprobs[key].push_back(std::move(v));
    }
  }
  return {std::move(text), std::move(logprobs)};
}

void ResponseBuilder::RecordFinish(Choice& choice, const GenerationEvent& event) {
  if (event.finish == FinishReason::kNone || choice.finished) return;
  choice.finished = true;
  ++finished_;
  choice.finish_reason = OpenAiFinishReason(event.finish);
  if (event.index == 0) {
    const int32_t completion = usage_.completion_tokens;
    usage_ = event.usage;
    usage_.completion_tokens += completion;
    structured_ = event.structured;
  } else {
    usage_.completion_tokens += event.usage.completion_tokens;
  }
}

std::vector<Json> ResponseBuilder::StreamChunks(const GenerationEvent& event) {
  if (event.index < 0 || event.index >= static_cast<int32_t>(choices_.size())) return {};
  Choice& c = choices_[event.index];
  const bool finished = event.finish != FinishReason::kNone;
  RecordFinish(c, event);
  const bool chat = endpoint_ == Endpoint::kChatCompletions;
  const bool first_chat_chunk = chat && !c.sent_role;
  auto [text, logprobs] = Take(c, event);
  const bool parsed = !event.reasoning_text.empty() || !event.tool_calls.empty();
  if (text.empty() && logprobs.is_null() && !parsed && !finished && !first_chat_chunk) return {};

  Json choice = {{"index", event.index}};
  if (chat) {
    Json delta = Json::object();
    if (first_chat_chunk) delta["role"] = "assistant";
    if (first_chat_chunk || !text.empty() || !logprobs.is_null()) delta["content"] = text;
    if (!event.reasoning_text.empty()) delta["reasoning_content"] = event.reasoning_text;
    if (!event.tool_calls.empty()) {
      delta["tool_calls"] = Json::array();
      for (const ToolCallDelta& call : event.tool_calls) {
        delta["tool_calls"].push_back(ToolCallObject(call));
      }
    }
    choice["delta"] = std::move(delta);
    c.sent_role = true;
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = c.finish_reason != nullptr ? Json(c.finish_reason) : Json(nullptr);
  Json chunk = ChunkShell();
  chunk["choices"] = Json::array({std::move(choice)});
  if (finished && event.structured.has_value()) {
    chunk["structured_output"] = StructuredObject(*event.structured);
  }
  return {std::move(chunk)};
}

Json ResponseBuilder::UsageChunk() const {
  if (!include_usage_) return nullptr;
  Json chunk = ChunkShell();
  chunk["choices"] = Json::array();
  chunk["usage"] = UsageObject(usage_);
  return chunk;
}

void ResponseBuilder::Append(const GenerationEvent& event) {
  if (event.index < 0 || event.index >= static_cast<int32_t>(choices_.size())) return;
  Choice& c = choices_[event.index];
  auto [text, logprobs] = Take(c, event);
  c.text += text;
  c.reasoning += event.reasoning_text;
  for (const ToolCallDelta& call : event.tool_calls) {
    Json whole = ToolCallObject(call);
    whole.erase("index");  // a message's calls are a list; the index is only for chunks
    c.tool_calls.push_back(std::move(whole));
  }
  if (!logprobs.is_null()) {
    for (auto& [key, values] : logprobs.items()) {
      for (Json& v : values) c.logprobs[key].push_back(std::move(v));
    }
  }
  RecordFinish(c, event);
}

Json ResponseBuilder::Final() const {
  const bool chat = endpoint_ == Endpoint::kChatCompletions;
  Json choices = Json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    Json choice = {{"index", i}};
    if (chat) {
      // The spec requires `refusal` on every response message; this server never refuses.
      Json message = {{"role", "assistant"},
                      {"content", c.text.empty() && !c.tool_calls.empty() ? Json(nullptr)
                                                                          : Json(c.text)},
                      {"refusal", nullptr}};
      if (!c.reasoning.empty()) message["reasoning_content"] = c.reasoning;
      if (!c.tool_calls.empty()) message["tool_calls"] = c.tool_calls;
      choice["message"] = std::move(message);
    } else {
      choice["text"] = c.text;
    }
    choice["logprobs"] = logprobs_ ? c.logprobs : Json(nullptr);
    choice["finish_reason"] = c.finish_reason != nullptr ? Json(c.finish_reason) : Json(nullptr);
    choices.push_back(std::move(choice));
  }
  Json out = {{"id", id_},
              {"object", chat ? "chat.completion" : "text_completion"},
              {"created", created_unix_s_},
              {"model", model_},
              {"choices", std::move(choices)},
              {"usage", UsageObject(usage_)}};
  if (structured_.has_value()) out["structured_output"] = StructuredObject(*structured_);
  return out;
}

}  // namespace tpserve
