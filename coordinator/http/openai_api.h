// OpenAI's HTTP API <-> tpserve's public request and the engine's events, as pure functions: no
// sockets, no threads, no engine. The HTTP server (http_server.h) parses a body here, sends the
// proto through the one door (coordinator/frontend.h), and turns the door's events back into
// OpenAI JSON here. Everything a client can get wrong is reported as an absl::Status whose
// message and `param` name the field the client sent (e.g. `max_tokens`, `stop[0]`), and every
// status becomes an HTTP status and an OpenAI error object in one place (ToHttpError).
//
//   TP_ASSIGN_OR_RETURN(OpenAiRequest r, ParseOpenAiRequest(Endpoint::kChat, body, "model"));
//   ResponseBuilder out(r, request_id, "model", created, &tokenizer);
//   for (GenerationEvent& e : events) for (auto& chunk : out.StreamChunks(e)) send(SseData(chunk));
//
// Requests (https://platform.openai.com/docs/api-reference/chat/create, .../completions/create):
//   messages (string or text-part content; role "developer" is read as "system") | prompt (a
//   string, a list of token ids, or a one-element list of either); max_tokens or
//   max_completion_tokens -> max_new_tokens; temperature, top_p, seed, presence_penalty,
//   frequency_penalty -> sampling; stop (string or list) -> stop_sequences; chat logprobs (bool)
//   + top_logprobs (int), completions logprobs (int = number of alternatives); stream,
//   stream_options.include_usage. Extensions as in vLLM: top_k, min_p, repetition_penalty,
//   ignore_eos, stop_token_ids. n (choices, each its own index and finish), completions'
//   best_of (not with stream) and echo (with logprobs: the prompt's tokens and their logprobs
//   open each choice's logprobs, the first token's null). Ignored as harmless: user, metadata,
//   store, service_tier. Tools: tools, tool_choice, parallel_tool_calls, assistant tool_calls
//   and tool messages in the history (docs/API.md, "Tool calls"); vLLM's chat_template_kwargs
//   and add_generation_prompt. Anything else that would change the result (the deprecated
//   functions API, suffix, unknown fields) is a 400 naming the field: a silently ignored field
//   gives the client an answer to a question it did not ask. JSON null means "absent"
//   everywhere.
//
// Threading: all functions are pure; a ResponseBuilder belongs to one request and one thread.
#ifndef TPSERVE_COORDINATOR_HTTP_OPENAI_API_H_
#define TPSERVE_COORDINATOR_HTTP_OPENAI_API_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/engine.h"
#include "coordinator/tokenizer/tokenizer.h"
#include "proto/tpserve.pb.h"

namespace tpserve {

// kTokenize: POST /tokenize (vLLM's), a chat or a prompt to render and tokenize.
enum class Endpoint { kChatCompletions, kCompletions, kTokenize };

// max_tokens of a /v1/completions request without one (OpenAI's API reference: "Defaults to 16").
inline constexpr int32_t kCompletionsDefaultMaxTokens = 16;

struct OpenAiRequest {
  Endpoint endpoint = Endpoint::kChatCompletions;
  tpserve::v1::GenerateRequest proto;  // request_id is left to the server (X-Request-Id)
  std::string model;                   // as the client sent it (checked against the served one)
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: the prompt's text opens the choice's text
  int32_t n = 1;               // choices (the door checks the bound)
  bool logprobs = false;       // report the chosen tokens' logprobs
  int32_t top_logprobs = 0;    // alternatives per token
  // How the client spelled fields that have more than one spelling, so errors use its words.
  std::string max_tokens_field = "max_tokens";  // or "max_completion_tokens"
  bool stop_is_string = false;                  // "stop": "x" rather than ["x"]
  // Where the client put a structured-output constraint ("response_format.json_schema.schema",
  // "structured_outputs.regex", ...), named by errors about it.
  std::string constraint_field;
  bool return_token_strs = false;  // kTokenize: each token's text beside the ids
};

// Parses and checks one request body. INVALID_ARGUMENT (with param) for a body that is not
// UTF-8, not JSON, not an object, a field of the wrong type or value, or an unsupported field;
// NOT_FOUND (code "model_not_found") when `model` is given and is not `served_model`. Bounds
// that the door checks (temperature range, context window, ...) are left to the door.
absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(Endpoint endpoint, std::string_view body,
                                                 std::string_view served_model);

// ---- Errors -------------------------------------------------------------------------------

// Attach the OpenAI error object's `param` / `code` to a status (as status payloads).
absl::Status WithParam(absl::Status status, std::string_view param);
absl::Status WithCode(absl::Status status, std::string_view code);

// A door error names proto paths ("max_new_tokens = 0 is invalid ...", "stop_sequences[1] =
// ...", "sampling.temperature = ..."); this rewrites the leading path into the field the client
// sent ("max_tokens = 0 ...") and sets `param` to it. Other statuses pass unchanged.
absl::Status ToClientFieldNames(const absl::Status& status, const OpenAiRequest& request);

// The one mapping from a status code to an HTTP status: INVALID_ARGUMENT, OUT_OF_RANGE,
// FAILED_PRECONDITION 400; UNAUTHENTICATED 401; PERMISSION_DENIED 403; NOT_FOUND 404;
// RESOURCE_EXHAUSTED 429; CANCELLED 499; UNAVAILABLE 503; DEADLINE_EXCEEDED 504; others 500.
int HttpStatusFor(absl::StatusCode code);

// {"error": {"message", "type", "param", "code"}} for a non-OK status.
nlohmann::json ErrorObject(const absl::Status& status);

struct HttpError {
  int http_status = 500;
  std::string body;  // ErrorObject, serialized
};
HttpError ToHttpError(const absl::Status& status);

// ---- Responses ----------------------------------------------------------------------------

// OpenAI's finish_reason for a normal end ("stop" for EOS, a stop token or a stop sequence;
// "length"); nullptr for the ends that are errors (cancelled, deadline, error).
const char* OpenAiFinishReason(FinishReason reason);

// usage.prompt_tokens_details.cached_tokens: Usage::cached_tokens, the prompt tokens the
// prefix cache served when the request was first admitted.
int32_t CachedPromptTokens(const Usage& usage);
nlohmann::json UsageObject(const Usage& usage);

// Builds a request's response objects from its events: chat.completion(.chunk) or
// text_completion, with id "chatcmpl-<request_id>" / "cmpl-<request_id>", one choice per
// GenerationEvent::index (n of them).
class ResponseBuilder {
 public:
  // `tokenizer` (for the logprobs' token text and bytes) must outlive the builder.
  ResponseBuilder(const OpenAiRequest& request, std::string request_id, std::string model,
                  int64_t created_unix_s, const Tokenizer* tokenizer);

  const std::string& id() const { return id_; }
  // echo with logprobs: the prompt's ids (Admitted::prompt_ids), whose tokens and logprobs
  // (the first one's null) open each choice's logprobs, as OpenAI's legacy completions do.
  void SetPromptIds(std::vector<int32_t> ids) { prompt_ids_ = std::move(ids); }
  // Every choice has had its finishing event.
  bool done() const { return finished_ == static_cast<int32_t>(choices_.size()); }

  // Streaming: the chunks one event produces (none for an event with nothing to show). A
  // chat choice's first chunk carries delta.role; its finishing one carries finish_reason.
  // A parsed chat output adds delta.reasoning_content and delta.tool_calls (each call whole in
  // one chunk: {index, id, type, function: {name, arguments}}).
  // REQUIRES: FinishStatus(event.finish, event.error) is OK (an error end is the server's to
  // report).
  std::vector<nlohmann::json> StreamChunks(const GenerationEvent& event);
  // The closing chunk with empty choices and the usage, when stream_options.include_usage was
  // set (null otherwise). REQUIRES: done().
  nlohmann::json UsageChunk() const;

  // Non-streaming: add every event, then take the whole object. A constrained request's object
  // (and its finishing chunks, streamed) carries "structured_output": {completed,
  // dropped_keywords} (of choice 0). Usage: the prompt once, the completion tokens of every
  // choice returned. A choice that called tools has message.tool_calls (content null when
  // it said nothing else); reasoning, message.reasoning_content.
  void Append(const GenerationEvent& event);
  nlohmann::json Final() const;

 private:
  struct Choice {
    bool started = false;  // its first event has been seen (the echo went out with it)
    bool sent_role = false;
    int64_t text_offset_bytes = 0;  // completions logprobs' text_offset
    std::string text;               // non-streaming: accumulated
    std::string reasoning;          // non-streaming: accumulated reasoning_content
    nlohmann::json tool_calls = nlohmann::json::array();  // non-streaming: message.tool_calls
    nlohmann::json logprobs;        // non-streaming: accumulated entries
    const char* finish_reason = nullptr;
    bool finished = false;
  };

  nlohmann::json ChunkShell() const;
  // The logprobs entries of `tokens` (their text offsets continuing the choice's).
  nlohmann::json LogprobsObject(Choice& choice, const std::vector<SampledToken>& tokens);
  // Completions echo with logprobs: the prompt's entries, the first token's logprob null.
  nlohmann::json PromptLogprobsObject(Choice& choice);
  // What an event adds to its choice: the echo (on its first event), text and logprobs.
  std::pair<std::string, nlohmann::json> Take(Choice& choice, const GenerationEvent& event);
  void RecordFinish(Choice& choice, const GenerationEvent& event);

  const Endpoint endpoint_;
  const bool logprobs_;
  const bool include_usage_;
  const std::string id_;
  const std::string model_;
  const int64_t created_unix_s_;
  const Tokenizer* const tokenizer_;

  std::string echo_;  // completions echo: the prompt's text
  std::vector<int32_t> prompt_ids_;
  std::vector<SampledToken> prompt_logprobs_;  // from the event that brought them
  std::vector<Choice> choices_;
  int32_t finished_ = 0;
  Usage usage_;  // choice 0's, with completion_tokens summed over the choices
  std::optional<StructuredOutcome> structured_;
};

// One server-sent event: "data: <json>\n\n". Invalid UTF-8 (never expected) is replaced.
std::string SseData(const nlohmann::json& value);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";
// Serialized JSON, invalid UTF-8 replaced rather than thrown on.
std::string DumpJson(const nlohmann::json& value);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_HTTP_OPENAI_API_H_
