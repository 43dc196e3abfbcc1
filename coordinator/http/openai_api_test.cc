#include "coordinator/http/openai_api.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/field_error.h"
#include "coordinator/test_support.h"
#include "coordinator/tokenizer/utf8.h"
#include "coordinator/validation.h"

namespace tpserve {
namespace {

using Json = nlohmann::json;
constexpr Endpoint kChat = Endpoint::kChatCompletions;
constexpr Endpoint kCompletions = Endpoint::kCompletions;

OpenAiRequest ParseOk(Endpoint endpoint, const std::string& body) {
  absl::StatusOr<OpenAiRequest> r = ParseOpenAiRequest(endpoint, body, "m");
  EXPECT_TRUE(r.ok()) << body << " -> " << r.status();
  return r.ok() ? *r : OpenAiRequest();
}

// The HTTP status, message and param a client would see for `body`.
struct Seen {
  int http_status;
  std::string message;
  Json param;
  Json code;
};
Seen Refused(Endpoint endpoint, const std::string& body) {
  absl::StatusOr<OpenAiRequest> r = ParseOpenAiRequest(endpoint, body, "m");
  EXPECT_FALSE(r.ok()) << body;
  if (r.ok()) return {200, "", nullptr, nullptr};
  Json e = ErrorObject(r.status())["error"];
  return {HttpStatusFor(r.status().code()), e["message"], e["param"], e["code"]};
}

TEST(ParseOpenAiRequest, ChatFieldsMapOntoTheProto) {
  OpenAiRequest r = ParseOk(kChat, R"({
      "model": "m", "messages": [{"role": "developer", "content": "be brief"},
                                 {"role": "user", "content": [{"type": "text", "text": "안녕"},
                                                              {"type": "text", "text": "!"}]}],
      "max_completion_tokens": 7, "temperature": 0.5, "top_p": 0.9, "seed": 42,
      "presence_penalty": 0.25, "frequency_penalty": -0.5, "stop": ["\n", "END"],
      "logprobs": true, "top_logprobs": 3, "n": 1, "user": "ignored",
      "stream": true, "stream_options": {"include_usage": true}})");
  const auto& p = r.proto;
  ASSERT_TRUE(p.has_chat());
  ASSERT_EQ(p.chat().messages_size(), 2);
  EXPECT_EQ(p.chat().messages(0).role(), "system");
  EXPECT_EQ(p.chat().messages(1).role(), "user");
  EXPECT_EQ(p.chat().messages(1).content(), "안녕!");
  EXPECT_EQ(p.max_new_tokens(), 7);
  EXPECT_EQ(r.max_tokens_field, "max_completion_tokens");
  EXPECT_FLOAT_EQ(p.sampling().temperature(), 0.5f);
  EXPECT_FLOAT_EQ(p.sampling().top_p(), 0.9f);
  EXPECT_EQ(p.sampling().seed(), 42u);
  EXPECT_FLOAT_EQ(p.sampling().presence_penalty(), 0.25f);
  EXPECT_FLOAT_EQ(p.sampling().frequency_penalty(), -0.5f);
  EXPECT_FALSE(p.sampling().has_top_k());
  ASSERT_EQ(p.stop_sequences_size(), 2);
  EXPECT_EQ(p.stop_sequences(1), "END");
  EXPECT_TRUE(p.logprobs());
  EXPECT_EQ(p.top_logprobs(), 3);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.logprobs);
}

TEST(ParseOpenAiRequest, AbsentAndNullFieldsLeaveTheDoorsDefaults) {
  OpenAiRequest r = ParseOk(kChat, R"({"messages": [{"role": "user", "content": "hi"}],
                                       "temperature": null, "max_tokens": null, "stop": null})");
  EXPECT_FALSE(r.proto.has_max_new_tokens());
  EXPECT_FALSE(r.proto.sampling().has_temperature());
  EXPECT_EQ(r.proto.stop_sequences_size(), 0);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.logprobs);
}

TEST(ParseOpenAiRequest, CompletionsPromptFormsAndIntegerLogprobs) {
  OpenAiRequest text = ParseOk(kCompletions, R"({"prompt": "abc", "max_tokens": 3,
                                                 "logprobs": 2, "stop": "x"})");
  EXPECT_EQ(text.proto.text(), "abc");
  EXPECT_EQ(text.proto.max_new_tokens(), 3);
  EXPECT_TRUE(text.proto.logprobs());
  EXPECT_EQ(text.proto.top_logprobs(), 2);
  EXPECT_TRUE(text.stop_is_string);
  EXPECT_EQ(text.proto.stop_sequences(0), "x");

  OpenAiRequest ids = ParseOk(kCompletions, R"({"prompt": [1, 2, 258]})");
  ASSERT_TRUE(ids.proto.has_token_ids());
  EXPECT_EQ(ids.proto.token_ids().ids_size(), 3);
  EXPECT_EQ(ids.proto.token_ids().ids(2), 258);
  EXPECT_EQ(ParseOk(kCompletions, R"({"prompt": ["one"]})").proto.text(), "one");
  EXPECT_EQ(ParseOk(kCompletions, R"({"prompt": [[5, 6]]})").proto.token_ids().ids_size(), 2);
  // logprobs: 0 still reports the chosen tokens, with no alternatives.
  OpenAiRequest zero = ParseOk(kCompletions, R"({"prompt": "a", "logprobs": 0})");
  EXPECT_TRUE(zero.logprobs);
  EXPECT_EQ(zero.top_logprobs, 0);
}

TEST(ParseOpenAiRequest, VllmStyleExtensions) {
  OpenAiRequest r = ParseOk(kCompletions, R"({"prompt": "a", "top_k": 5, "min_p": 0.1,
      "repetition_penalty": 1.2, "ignore_eos": true, "stop_token_ids": [7, 8]})");
  EXPECT_EQ(r.proto.sampling().top_k(), 5);
  EXPECT_FLOAT_EQ(r.proto.sampling().min_p(), 0.1f);
  EXPECT_FLOAT_EQ(r.proto.sampling().repetition_penalty(), 1.2f);
  EXPECT_TRUE(r.proto.ignore_eos());
  EXPECT_EQ(r.proto.stop_token_ids_size(), 2);
}

TEST(ParseOpenAiRequest, BadBodiesAre400s) {
  Seen s = Refused(kChat, "{\"messages\": [");
  EXPECT_EQ(s.http_status, 400);
  EXPECT_EQ(s.message.rfind("the request body is not valid JSON: parse error at line 1", 0), 0u)
      << s.message;
  s = Refused(kChat, "{\"messages\": \"\xff\"}");
  EXPECT_EQ(s.http_status, 400);
  EXPECT_EQ(s.message, "the request body is not valid UTF-8");
  s = Refused(kChat, "[1, 2]");
  EXPECT_EQ(s.message, "body has type array; expected a JSON object");
  s = Refused(kChat, "{}");
  EXPECT_EQ(s.message, "messages is required");
  EXPECT_EQ(s.param, "messages");
}

TEST(ParseOpenAiRequest, WrongTypesNameTheFieldAndTheExpectedType) {
  struct Case {
    Endpoint endpoint;
    std::string body;
    std::string param;
    std::string message;
  };
  const std::string msgs = R"("messages": [{"role": "user", "content": "hi"}])";
  const std::vector<Case> cases = {
      {kChat, "{" + msgs + R"(, "max_tokens": "5"})", "max_tokens",
       "max_tokens has type string; expected an integer"},
      {kChat, "{" + msgs + R"(, "max_tokens": 2.5})", "max_tokens",
       "max_tokens = 2.5 is invalid: must be an integer"},
      {kChat, "{" + msgs + R"(, "max_tokens": 3000000000})", "max_tokens",
       "max_tokens = 3000000000 is invalid: must be at most 2147483647"},
      {kChat, "{" + msgs + R"(, "temperature": "hot"})", "temperature",
       "temperature has type string; expected a number"},
      {kChat, "{" + msgs + R"(, "stream": 1})", "stream", "stream has type number; expected a boolean"},
      {kChat, "{" + msgs + R"(, "stop": [1]})", "stop[0]", "stop[0] has type number; expected a string"},
      {kChat, "{" + msgs + R"(, "logprobs": 2})", "logprobs",
       "logprobs has type number; expected a boolean"},
      {kChat, R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content",
       "messages[0].content has type number; expected a string or an array of text parts"},
      {kChat, R"({"messages": {}})", "messages", "messages has type object; expected an array of messages"},
      {kCompletions, R"({"prompt": 5})", "prompt",
       "prompt has type number; expected a string, an array of token ids, or a one-element array "
       "of either"},
      {kCompletions, R"({"prompt": [1, "a"]})", "prompt[1]", "prompt[1] has type string; expected an integer"},
      {kCompletions, R"({"prompt": [1, -1]})", "prompt[1]",
       "prompt[1] = -1 is invalid: must be in [0, 2147483647]"},
      {kCompletions, R"({"prompt": "a", "logprobs": true})", "logprobs",
       "logprobs has type boolean; expected an integer"},
  };
  for (const Case& c : cases) {
    Seen s = Refused(c.endpoint, c.body);
    EXPECT_EQ(s.http_status, 400) << c.body;
    EXPECT_EQ(s.param, c.param) << c.body;
    EXPECT_EQ(s.message, c.message) << c.body;
  }
}

TEST(ParseOpenAiRequest, SemanticFieldsWeCannotHonourAreRefusedByName) {
  const std::string msgs = R"("messages": [{"role": "user", "content": "hi"}])";
  for (const auto& [body, param] : std::vector<std::pair<std::string, std::string>>{
           {"{" + msgs + R"(, "tools": [{"type": "function"}]})", "tools[0].function"},
           {"{" + msgs + R"(, "tools": [{"type": "code_interpreter"}]})", "tools[0].type"},
           {"{" + msgs + R"(, "tool_choice": "maybe"})", "tool_choice"},
           {"{" + msgs + R"(, "functions": [{"name": "f"}]})", "functions"},
           {"{" + msgs + R"(, "response_format": {"type": "xml"}})", "response_format.type"},
           {"{" + msgs + R"(, "response_format": {"type": "json_schema",
                "json_schema": {"schema": {}}}})", "response_format.json_schema.name"},
           {"{" + msgs + R"(, "response_format": {"type": "json_schema",
                "json_schema": {"name": "x", "schema": "{}"}}})", "response_format.json_schema.schema"},
           {"{" + msgs + R"(, "response_format": {"type": "json_object", "schema": {}}})",
            "response_format.schema"},
           {"{" + msgs + R"(, "structured_outputs": {"regex": "a", "choice": ["b"]}})",
            "structured_outputs.choice"},  // the second one set
           {"{" + msgs + R"(, "structured_outputs": {"whitespace_pattern": "a"}})",
            "structured_outputs.whitespace_pattern"},
           {"{" + msgs + R"(, "response_format": {"type": "text"}, "structured_outputs": {}})",
            "structured_outputs"},
           {"{" + msgs + R"(, "logit_bias": {"x": 10}})", "logit_bias"},
           {"{" + msgs + R"(, "logit_bias": {"5": "up"}})", "logit_bias.5"},
           {"{" + msgs + R"(, "frobnicate": true})", "frobnicate"},
           {"{" + msgs + R"(, "stream_options": {"include_usage": true}})", "stream_options"},
           {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
            "messages[0].content[0].type"},
           {R"({"prompt": "a", "best_of": 3, "stream": true})", "best_of"},
           {R"({"prompt": "a", "n": "2"})", "n"},
           {"{" + msgs + R"(, "best_of": 2})", "best_of"},  // not a chat field
           {R"({"prompt": "a", "suffix": "z"})", "suffix"},
           {R"({"prompt": ["a", "b"]})", "prompt"},
           {R"({"prompt": "a", "max_completion_tokens": 3})", "max_completion_tokens"},
       }) {
    const Endpoint e = body.find("prompt") != std::string::npos ? kCompletions : kChat;
    Seen s = Refused(e, body);
    EXPECT_EQ(s.http_status, 400) << body;
    EXPECT_EQ(s.param, param) << body << ": " << s.message;
  }
  Seen streamed = Refused(kCompletions, R"({"prompt": "a", "n": 2, "best_of": 3, "stream": true})");
  EXPECT_EQ(streamed.message, "best_of = 3 > n = 2 cannot be used with stream = true");
  // Defaults of the same fields are fine.
  ParseOk(kChat, "{" + msgs + R"(, "n": 1, "tools": [], "tool_choice": "none", "logit_bias": {},
                                  "response_format": {"type": "text"}, "store": false})");
}

TEST(ParseOpenAiRequest, ResponseFormatAndStructuredOutputsBecomeTheConstraint) {
  const std::string msgs = R"("messages": [{"role": "user", "content": "a"}])";
  OpenAiRequest schema = ParseOk(kChat, "{" + msgs + R"(, "response_format": {"type": "json_schema",
      "json_schema": {"name": "p", "strict": true, "schema": {"type": "object"}}}})");
  EXPECT_EQ(schema.proto.json_schema(), R"({"type":"object"})");
  // The schema's property order is kept: objects are generated in it.
  EXPECT_EQ(ParseOk(kChat, "{" + msgs + R"(, "structured_outputs": {"json": {"properties":
                {"z": {}, "a": {}}}}})").proto.json_schema(),
            R"({"properties":{"z":{},"a":{}}})");
  EXPECT_TRUE(schema.proto.has_strict() && schema.proto.strict());
  EXPECT_EQ(schema.constraint_field, "response_format.json_schema.schema");
  OpenAiRequest lax = ParseOk(kCompletions, R"({"prompt": "a", "response_format": {"type":
      "json_schema", "json_schema": {"name": "p", "schema": {"type": "object"}}}})");
  EXPECT_FALSE(lax.proto.strict());  // OpenAI's default
  EXPECT_TRUE(ParseOk(kChat, "{" + msgs + R"(, "response_format": {"type": "json_object"}})")
                  .proto.has_json_object());
  OpenAiRequest json = ParseOk(kChat, "{" + msgs + R"(, "structured_outputs": {"json": "{}"}})");
  EXPECT_EQ(json.proto.json_schema(), "{}");
  EXPECT_FALSE(json.proto.has_strict());  // the door's default: strict
  EXPECT_EQ(ParseOk(kCompletions, R"({"prompt": "a", "structured_outputs": {"regex": "a+"}})")
                .proto.regex(), "a+");
  EXPECT_EQ(ParseOk(kChat, "{" + msgs + R"(, "structured_outputs": {"grammar": "root ::= [a]+"}})")
                .proto.grammar(), "root ::= [a]+");
  OpenAiRequest choice = ParseOk(kChat, "{" + msgs + R"(, "structured_outputs": {"choice": ["x", "y"],
      "regex": null}})");
  EXPECT_EQ(choice.proto.choice().choices_size(), 2);
  EXPECT_EQ(choice.constraint_field, "structured_outputs.choice");
  OpenAiRequest bias = ParseOk(kChat, "{" + msgs + R"(, "logit_bias": {"5": 10, "7": -100}})");
  EXPECT_EQ(bias.proto.sampling().logit_bias().at(5), 10.0f);
  EXPECT_EQ(bias.proto.sampling().logit_bias().at(7), -100.0f);
  // /v1/completions without max_tokens: 16, as OpenAI's reference says; chat: the door decides.
  EXPECT_EQ(ParseOk(kCompletions, R"({"prompt": "a"})").proto.max_new_tokens(), 16);
  EXPECT_FALSE(ParseOk(kChat, "{" + msgs + "}").proto.has_max_new_tokens());
}

TEST(ParseOpenAiRequest, ConstraintErrorsFromTheDoorNameTheClientsField) {
  const std::string msgs = R"("messages": [{"role": "user", "content": "a"}])";
  OpenAiRequest r = ParseOk(kChat, "{" + msgs + R"(, "structured_outputs": {"choice": ["x", ""]}})");
  absl::Status door = ToClientFieldNames(
      FieldError("choice.choices[1]", " is empty"), r);
  EXPECT_EQ(door.message(), "structured_outputs.choice[1] is empty");
  EXPECT_EQ(Json::parse(ToHttpError(door).body)["error"]["param"], "structured_outputs.choice[1]");
  OpenAiRequest s = ParseOk(kChat, "{" + msgs + R"(, "response_format": {"type": "json_schema",
      "json_schema": {"name": "p", "schema": {"type": "array", "uniqueItems": true}}}})");
  absl::Status schema = ToClientFieldNames(
      FieldError("json_schema", ": at /uniqueItems: keyword \"uniqueItems\" is not enforced"), s);
  EXPECT_EQ(schema.message(),
            "response_format.json_schema.schema: at /uniqueItems: keyword \"uniqueItems\" is not "
            "enforced");
  OpenAiRequest b = ParseOk(kChat, "{" + msgs + R"(, "logit_bias": {"999999": 1}})");
  EXPECT_EQ(ToClientFieldNames(FieldError("sampling.logit_bias[999999]", ": token id"), b).message(),
            "logit_bias[999999]: token id");
}

TEST(ParseOpenAiRequest, AnotherModelIs404ModelNotFound) {
  absl::StatusOr<OpenAiRequest> r =
      ParseOpenAiRequest(kCompletions, R"({"model": "gpt-4", "prompt": "a"})", "m");
  ASSERT_FALSE(r.ok());
  HttpError e = ToHttpError(r.status());
  EXPECT_EQ(e.http_status, 404);
  Json body = Json::parse(e.body);
  EXPECT_EQ(body["error"]["code"], "model_not_found");
  EXPECT_EQ(body["error"]["param"], "model");
}

// The door's messages name proto paths; the client must see its own field names.
TEST(ToClientFieldNames, MapsProtoPathsToTheFieldsTheClientSent) {
  OpenAiRequest chat = ParseOk(kChat, R"({"messages": [{"role": "user", "content": "a"}],
                                          "max_tokens": 0, "stop": ["a", ""]})");
  OpenAiRequest chat_mct = ParseOk(kChat, R"({"messages": [{"role": "user", "content": "a"}],
                                              "max_completion_tokens": 0})");
  OpenAiRequest completion = ParseOk(kCompletions, R"({"prompt": "a", "stop": ""})");
  struct Case {
    const OpenAiRequest* request;
    std::string door_message;
    std::string message;
    std::string param;
  };
  const std::vector<Case> cases = {
      {&chat, "max_new_tokens = 0 is invalid: must be at least 1",
       "max_tokens = 0 is invalid: must be at least 1", "max_tokens"},
      {&chat_mct, "max_new_tokens = 0 is invalid: must be at least 1",
       "max_completion_tokens = 0 is invalid: must be at least 1", "max_completion_tokens"},
      {&chat, "sampling.temperature = 101 is out of range: must be 0 (greedy) or in (0, 100]",
       "temperature = 101 is out of range: must be 0 (greedy) or in (0, 100]", "temperature"},
      {&chat, "stop_sequences[1] = \"\" is invalid: must not be empty",
       "stop[1] = \"\" is invalid: must not be empty", "stop[1]"},
      {&completion, "stop_sequences[0] = \"\" is invalid: must not be empty",
       "stop = \"\" is invalid: must not be empty", "stop"},
      {&chat, "chat.messages[0].role = \"tool\" is invalid: must be ...",
       "messages[0].role = \"tool\" is invalid: must be ...", "messages[0].role"},
      {&completion, "token_ids.ids[2] = 999 is invalid: token ids must be in [0, 259)",
       "prompt[2] = 999 is invalid: token ids must be in [0, 259)", "prompt[2]"},
      {&completion, "sampling.top_logprobs = 50 is out of range: must be in [0, 20]",
       "logprobs = 50 is out of range: must be in [0, 20]", "logprobs"},
      {&chat, "sampling.top_logprobs = 50 is out of range: must be in [0, 20]",
       "top_logprobs = 50 is out of range: must be in [0, 20]", "top_logprobs"},
  };
  for (const Case& c : cases) {
    // The door's error as the door makes it: the path as data, the message opening with it.
    const size_t eq = c.door_message.find(" = ");
    const absl::Status door = FieldError(c.door_message.substr(0, eq), c.door_message.substr(eq));
    Json e = ErrorObject(ToClientFieldNames(door, *c.request))["error"];
    EXPECT_EQ(e["message"], c.message);
    EXPECT_EQ(e["param"], c.param) << c.door_message;
    // The same text without the path as data names no field: the message is not parsed.
    Json plain = ErrorObject(ToClientFieldNames(absl::InvalidArgumentError(c.door_message),
                                                *c.request))["error"];
    EXPECT_EQ(plain["message"], c.door_message);
    EXPECT_TRUE(plain["param"].is_null()) << c.door_message;
  }
  absl::Status window = ToClientFieldNames(
      WithErrorReason(absl::InvalidArgumentError(
                          "context_length_exceeded: prompt has 9 tokens and max_new_tokens is "
                          "300, together 309 > the context length of 256 tokens"),
                      kContextLengthExceeded),
      chat);
  Json e = ErrorObject(window)["error"];
  EXPECT_EQ(e["code"], "context_length_exceeded");
  EXPECT_EQ(e["param"], "messages");
  EXPECT_NE(e["message"].get<std::string>().find("max_tokens is 300"), std::string::npos);
  // Not a field error: unchanged.
  absl::Status busy = absl::ResourceExhaustedError("queue full");
  EXPECT_EQ(ToClientFieldNames(busy, chat), busy);
}

TEST(HttpStatusFor, OneMappingForEveryCode) {
  using C = absl::StatusCode;
  EXPECT_EQ(HttpStatusFor(C::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(C::kOutOfRange), 400);
  EXPECT_EQ(HttpStatusFor(C::kFailedPrecondition), 400);
  EXPECT_EQ(HttpStatusFor(C::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatusFor(C::kPermissionDenied), 403);
  EXPECT_EQ(HttpStatusFor(C::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(C::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusFor(C::kCancelled), 499);
  EXPECT_EQ(HttpStatusFor(C::kUnavailable), 503);
  EXPECT_EQ(HttpStatusFor(C::kDeadlineExceeded), 504);
  EXPECT_EQ(HttpStatusFor(C::kInternal), 500);
  EXPECT_EQ(HttpStatusFor(C::kUnknown), 500);

  Json auth = ErrorObject(absl::UnauthenticatedError("bad token"));
  EXPECT_EQ(auth, Json::parse(R"({"error": {"message": "bad token", "type": "invalid_request_error",
                                            "param": null, "code": "invalid_api_key"}})"));
  EXPECT_EQ(ErrorObject(absl::ResourceExhaustedError("x"))["error"]["code"], "rate_limit_exceeded");
  EXPECT_EQ(ErrorObject(absl::UnavailableError("x"))["error"]["type"], "server_error");
}

TEST(FinishReasons, NormalEndsAreStopOrLengthAndTheRestAreErrors) {
  EXPECT_STREQ(OpenAiFinishReason(FinishReason::kEos), "stop");
  EXPECT_STREQ(OpenAiFinishReason(FinishReason::kStopSequence), "stop");
  EXPECT_STREQ(OpenAiFinishReason(FinishReason::kLength), "length");
  EXPECT_EQ(OpenAiFinishReason(FinishReason::kCancelled), nullptr);
  EXPECT_EQ(OpenAiFinishReason(FinishReason::kDeadline), nullptr);
  EXPECT_EQ(OpenAiFinishReason(FinishReason::kError), nullptr);
}

class ResponseBuilderTest : public ::testing::Test {
 protected:
  GenerationEvent Event(const std::string& text, std::vector<int32_t> ids,
                        FinishReason finish = FinishReason::kNone) {
    GenerationEvent e;
    e.text = text;
    e.token_ids = ids;
    for (int32_t id : ids) {
      SampledToken t;
      t.id = id;
      t.logprob = -0.5f;
      t.top_logprobs = {{id, -0.5f}, {'z', -2.0f}};
      e.logprobs.push_back(t);
    }
    e.finish = finish;
    if (finish != FinishReason::kNone) e.usage = Usage{5, 4, 2, 0.1, 0.2};
    return e;
  }
  Tokenizer tokenizer_ = ByteTokenizer();
};

TEST_F(ResponseBuilderTest, ChatStreamRoleFirstThenContentThenFinishAndUsage) {
  OpenAiRequest r = ParseOk(kChat, R"({"messages": [{"role": "user", "content": "a"}],
      "stream": true, "stream_options": {"include_usage": true}})");
  ResponseBuilder b(r, "req-1", "m", 1700000000, &tokenizer_);
  // "안" is three byte tokens; the engine sends its text only once all three are in.
  std::vector<Json> first = b.StreamChunks(Event("", {0xEC}));
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0]["id"], "chatcmpl-req-1");
  EXPECT_EQ(first[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(first[0]["created"], 1700000000);
  EXPECT_EQ(first[0]["usage"], nullptr);
  EXPECT_EQ(first[0]["choices"][0]["delta"], Json::parse(R"({"role": "assistant", "content": ""})"));
  EXPECT_TRUE(b.StreamChunks(Event("", {0x95})).empty());  // nothing to show yet
  std::vector<Json> second = b.StreamChunks(Event("안", {0x88}));
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0]["choices"][0]["delta"], Json::parse(R"({"content": "안"})"));
  EXPECT_EQ(second[0]["choices"][0]["finish_reason"], nullptr);
  std::vector<Json> last = b.StreamChunks(Event("", {}, FinishReason::kStopSequence));
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0]["choices"][0]["delta"], Json::object());
  EXPECT_EQ(last[0]["choices"][0]["finish_reason"], "stop");
  Json usage = b.UsageChunk();
  EXPECT_EQ(usage["choices"], Json::array());
  EXPECT_EQ(usage["usage"], Json::parse(R"({"prompt_tokens": 5, "completion_tokens": 4,
      "total_tokens": 9, "prompt_tokens_details": {"cached_tokens": 2}})"));
  EXPECT_EQ(SseData(usage).rfind("data: {", 0), 0u);
  EXPECT_EQ(SseData(usage).substr(SseData(usage).size() - 2), "\n\n");
}

TEST_F(ResponseBuilderTest, EchoOpensTheTextWithThePrompt) {
  OpenAiRequest text = ParseOk(kCompletions, R"({"prompt": "Hi", "echo": true})");
  ResponseBuilder whole(text, "x", "m", 1, &tokenizer_);
  whole.Append(Event(" there", {' '}));
  whole.Append(Event("", {}, FinishReason::kLength));
  EXPECT_EQ(whole.Final()["choices"][0]["text"], "Hi there");
  // Streamed: the first chunk carries the prompt, even before any token.
  OpenAiRequest ids = ParseOk(kCompletions, R"({"prompt": [72, 105], "echo": true, "stream": true})");
  ResponseBuilder stream(ids, "x", "m", 1, &tokenizer_);
  std::vector<Json> first = stream.StreamChunks(Event("", {}));
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0]["choices"][0]["text"], "Hi");
  EXPECT_EQ(stream.StreamChunks(Event("!", {'!'}))[0]["choices"][0]["text"], "!");
  EXPECT_FALSE(ids.proto.prompt_logprobs());
}

TEST_F(ResponseBuilderTest, ChoicesNAndBestOfReachTheProto) {
  OpenAiRequest chat = ParseOk(kChat, R"({"messages": [{"role": "user", "content": "a"}], "n": 3})");
  EXPECT_EQ(chat.proto.n(), 3);
  EXPECT_EQ(chat.n, 3);
  EXPECT_FALSE(chat.proto.has_best_of());
  OpenAiRequest completions = ParseOk(kCompletions, R"({"prompt": "a", "n": 2, "best_of": 5})");
  EXPECT_EQ(completions.proto.n(), 2);
  EXPECT_EQ(completions.proto.best_of(), 5);
  // Out of the door's bounds, but not clamped into them: the door names the value.
  EXPECT_EQ(ParseOk(kChat, R"({"messages": [{"role": "user", "content": "a"}], "n": 1000})").proto.n(),
            1000);
  EXPECT_EQ(ParseOk(kCompletions, R"({"prompt": "a", "best_of": 99})").proto.best_of(), 99);
  EXPECT_EQ(ParseOk(kChat, R"({"messages": [{"role": "user", "content": "a"}], "n": 0})").proto.n(), 0);
}

// echo + logprobs: each choice's logprobs open with the prompt's tokens, the first one's
// logprob and alternatives null, the offsets running on through the completion.
TEST_F(ResponseBuilderTest, EchoWithLogprobsOpensEachChoiceWithThePromptsLogprobs) {
  OpenAiRequest r = ParseOk(kCompletions, R"({"prompt": "Hi", "echo": true, "logprobs": 1, "n": 2})");
  EXPECT_TRUE(r.proto.prompt_logprobs());
  ResponseBuilder b(r, "x", "m", 1, &tokenizer_);
  b.SetPromptIds({'H', 'i'});
  GenerationEvent first = Event("!", {'!'});
  first.prompt_logprobs = {SampledToken{'i', -3.0f, {{'o', -1.0f}}}};
  b.Append(first);
  GenerationEvent other = Event("?", {'?'}, FinishReason::kLength);
  other.index = 1;
  b.Append(other);
  EXPECT_FALSE(b.done());
  b.Append(Event("", {}, FinishReason::kEos));
  EXPECT_TRUE(b.done());
  Json out = b.Final();
  ASSERT_EQ(out["choices"].size(), 2u);
  EXPECT_EQ(out["choices"][0]["text"], "Hi!");
  EXPECT_EQ(out["choices"][1]["text"], "Hi?");
  EXPECT_EQ(out["choices"][1]["index"], 1);
  EXPECT_EQ(out["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(out["choices"][1]["finish_reason"], "length");
  for (int i : {0, 1}) {
    const Json& lp = out["choices"][i]["logprobs"];
    EXPECT_EQ(lp["tokens"], Json::parse(i == 0 ? R"(["H", "i", "!"])" : R"(["H", "i", "?"])"));
    EXPECT_EQ(lp["token_logprobs"], Json::parse("[null, -3.0, -0.5]"));
    EXPECT_EQ(lp["top_logprobs"][0], nullptr);
    EXPECT_EQ(lp["top_logprobs"][1], Json::parse(R"({"o": -1.0})"));
    EXPECT_EQ(lp["text_offset"], Json::parse("[0, 1, 2]"));
  }
  // The prompt once; the completion tokens of both choices.
  EXPECT_EQ(out["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(out["usage"]["completion_tokens"], 8);
}

TEST_F(ResponseBuilderTest, StreamedChoicesCarryTheirIndex) {
  OpenAiRequest r = ParseOk(kChat, R"({"messages": [{"role": "user", "content": "a"}], "n": 2,
                                       "stream": true})");
  ResponseBuilder b(r, "x", "m", 1, &tokenizer_);
  GenerationEvent one = Event("b", {'b'});
  one.index = 1;
  std::vector<Json> c1 = b.StreamChunks(one);
  ASSERT_EQ(c1.size(), 1u);
  EXPECT_EQ(c1[0]["choices"][0]["index"], 1);
  EXPECT_EQ(c1[0]["choices"][0]["delta"]["role"], "assistant");  // choice 1's first chunk
  std::vector<Json> c0 = b.StreamChunks(Event("a", {'a'}, FinishReason::kEos));
  EXPECT_EQ(c0[0]["choices"][0]["index"], 0);
  EXPECT_EQ(c0[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(c0[0]["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(b.done());
  one.finish = FinishReason::kLength;
  one.text.clear();
  one.token_ids.clear();
  one.logprobs.clear();
  std::vector<Json> end = b.StreamChunks(one);
  EXPECT_EQ(end[0]["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(end[0]["choices"][0]["delta"].contains("role"));
  EXPECT_TRUE(b.done());
}

TEST_F(ResponseBuilderTest, WithoutIncludeUsageThereIsNoUsageField) {
  OpenAiRequest r = ParseOk(kCompletions, R"({"prompt": "a", "stream": true})");
  ResponseBuilder b(r, "7", "m", 1, &tokenizer_);
  std::vector<Json> chunks = b.StreamChunks(Event("hi", {'h', 'i'}, FinishReason::kLength));
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_FALSE(chunks[0].contains("usage"));
  EXPECT_EQ(chunks[0]["id"], "cmpl-7");
  EXPECT_EQ(chunks[0]["object"], "text_completion");
  EXPECT_EQ(chunks[0]["choices"][0]["text"], "hi");
  EXPECT_EQ(chunks[0]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(b.UsageChunk(), nullptr);
}

TEST_F(ResponseBuilderTest, ChatLogprobsShapeWithBytesOfSplitCharacters) {
  OpenAiRequest r = ParseOk(kChat, R"({"messages": [{"role": "user", "content": "a"}],
                                       "logprobs": true, "top_logprobs": 2})");
  ResponseBuilder b(r, "x", "m", 1, &tokenizer_);
  b.Append(Event("", {0xEC, 0x95}));
  b.Append(Event("안", {0x88}));
  b.Append(Event("", {}, FinishReason::kEos));
  Json out = b.Final();
  EXPECT_EQ(out["object"], "chat.completion");
  EXPECT_EQ(out["choices"][0]["message"],
            Json::parse(R"({"role": "assistant", "content": "안", "refusal": null})"));
  EXPECT_EQ(out["choices"][0]["finish_reason"], "stop");
  const Json& content = out["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 3u);
  EXPECT_EQ(content[0]["token"], "\xEF\xBF\xBD");  // a lone lead byte shows as U+FFFD
  EXPECT_EQ(content[0]["bytes"], Json::array({0xEC}));
  EXPECT_FLOAT_EQ(content[0]["logprob"].get<float>(), -0.5f);
  ASSERT_EQ(content[2]["top_logprobs"].size(), 2u);
  EXPECT_EQ(content[2]["top_logprobs"][1],
            Json::parse(R"({"token": "z", "logprob": -2.0, "bytes": [122]})"));
  EXPECT_EQ(out["usage"]["total_tokens"], 9);
  EXPECT_TRUE(IsValidUtf8(DumpJson(out)));
}

TEST_F(ResponseBuilderTest, CompletionsLogprobsShape) {
  OpenAiRequest r = ParseOk(kCompletions, R"({"prompt": "a", "logprobs": 1})");
  ResponseBuilder b(r, "x", "m", 1, &tokenizer_);
  b.Append(Event("ab", {'a', 'b'}));
  b.Append(Event("c", {'c'}, FinishReason::kLength));
  Json out = b.Final();
  EXPECT_EQ(out["object"], "text_completion");
  EXPECT_EQ(out["choices"][0]["text"], "abc");
  const Json& lp = out["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], Json::parse(R"(["a", "b", "c"])"));
  EXPECT_EQ(lp["text_offset"], Json::parse("[0, 1, 2]"));
  EXPECT_EQ(lp["token_logprobs"].size(), 3u);
  EXPECT_EQ(lp["top_logprobs"][1], Json::parse(R"({"b": -0.5, "z": -2.0})"));
  EXPECT_EQ(out["choices"][0]["finish_reason"], "length");
}

TEST_F(ResponseBuilderTest, NoLogprobsRequestedMeansNull) {
  OpenAiRequest r = ParseOk(kChat, R"({"messages": [{"role": "user", "content": "a"}]})");
  ResponseBuilder b(r, "x", "m", 1, &tokenizer_);
  b.Append(Event("네", {0xEB, 0x84, 0xA4}, FinishReason::kEos));
  Json out = b.Final();
  EXPECT_EQ(out["choices"][0]["logprobs"], nullptr);
  EXPECT_EQ(out["choices"][0]["message"]["content"], "네");
}

}  // namespace
}  // namespace tpserve
