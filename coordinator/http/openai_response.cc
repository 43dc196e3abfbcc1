// Engine events -> OpenAI response objects: chat.completion, chat.completion.chunk,
// text_completion; usage; logprobs in each endpoint's shape.
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
    default:
      return nullptr;
  }
}

int32_t CachedPromptTokens(const Usage& usage) { return usage.cached_tokens; }

Json UsageObject(const Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", CachedPromptTokens(usage)}}}};
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
      tokenizer_(tokenizer) {
  logprobs_all_ = LogprobsObject({});
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

// structured_output: {completed, dropped_keywords}, for a constrained request's last object.
Json StructuredObject(const StructuredOutcome& outcome) {
  return {{"completed", outcome.completed}, {"dropped_keywords", outcome.dropped_keywords}};
}

}  // namespace

// Chat: {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}.
// Completions: {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}, where
// text_offset counts bytes of the completion text before the token.
Json ResponseBuilder::LogprobsObject(const std::vector<SampledToken>& tokens) {
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
    out["text_offset"].push_back(text_offset_bytes_);
    text_offset_bytes_ += static_cast<int64_t>(bytes.size());
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

std::vector<Json> ResponseBuilder::StreamChunks(const GenerationEvent& event) {
  const bool finished = event.finish != FinishReason::kNone;
  if (finished) {
    usage_ = event.usage;
    finish_reason_ = OpenAiFinishReason(event.finish);
  }
  const bool with_logprobs = logprobs_ && !event.logprobs.empty();
  const bool chat = endpoint_ == Endpoint::kChatCompletions;
  const bool first_chat_chunk = chat && !sent_role_;
  std::string text = std::move(echo_) + event.text;  // the echoed prompt opens the first chunk
  echo_.clear();
  if (text.empty() && !with_logprobs && !finished && !first_chat_chunk) return {};

  Json choice = {{"index", 0}};
  if (chat) {
    Json delta = Json::object();
    if (first_chat_chunk) delta["role"] = "assistant";
    if (first_chat_chunk || !text.empty() || with_logprobs) delta["content"] = text;
    choice["delta"] = std::move(delta);
    sent_role_ = true;
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = with_logprobs ? LogprobsObject(event.logprobs) : Json(nullptr);
  choice["finish_reason"] = finish_reason_ != nullptr ? Json(finish_reason_) : Json(nullptr);
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
  if (!echo_.empty()) text_ = std::move(echo_);
  echo_.clear();
  text_ += event.text;
  if (logprobs_ && !event.logprobs.empty()) {
    Json more = LogprobsObject(event.logprobs);
    for (auto& [key, values] : more.items()) {
      for (Json& v : values) logprobs_all_[key].push_back(std::move(v));
    }
  }
  if (event.finish != FinishReason::kNone) {
    usage_ = event.usage;
    finish_reason_ = OpenAiFinishReason(event.finish);
    structured_ = event.structured;
  }
}

Json ResponseBuilder::Final() const {
  const bool chat = endpoint_ == Endpoint::kChatCompletions;
  Json choice = {{"index", 0}};
  if (chat) {
    // The spec requires `refusal` on every response message; this server never refuses.
    choice["message"] = {{"role", "assistant"}, {"content", text_}, {"refusal", nullptr}};
  } else {
    choice["text"] = text_;
  }
  choice["logprobs"] = logprobs_ ? logprobs_all_ : Json(nullptr);
  choice["finish_reason"] = finish_reason_ != nullptr ? Json(finish_reason_) : Json(nullptr);
  Json out = {{"id", id_},
              {"object", chat ? "chat.completion" : "text_completion"},
              {"created", created_unix_s_},
              {"model", model_},
              {"choices", Json::array({std::move(choice)})},
              {"usage", UsageObject(usage_)}};
  if (structured_.has_value()) out["structured_output"] = StructuredObject(*structured_);
  return out;
}

}  // namespace tpserve
