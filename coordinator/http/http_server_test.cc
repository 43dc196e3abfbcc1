#include "coordinator/http/http_server.h"

#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "coordinator/engine.h"
#include "coordinator/frontend.h"
#include "coordinator/test_support.h"
#include "coordinator/chat/chat_template.h"
#include "coordinator/tokenizer/utf8.h"

namespace tpserve {
namespace {

using Json = nlohmann::json;

// One parsed SSE stream: the JSON of each `data:` line, and whether it ended with [DONE].
struct Sse {
  std::vector<Json> events;
  bool done = false;
  int comments = 0;
};
Sse ParseSse(const std::string& body) {
  Sse out;
  for (absl::string_view block : absl::StrSplit(body, "\n\n", absl::SkipEmpty())) {
    if (absl::StartsWith(block, ":")) {
      ++out.comments;
      continue;
    }
    EXPECT_TRUE(absl::StartsWith(block, "data: ")) << block;
    absl::string_view data = block.substr(6);
    EXPECT_FALSE(out.done) << "an event after [DONE]";
    if (data == "[DONE]") {
      out.done = true;
      continue;
    }
    out.events.push_back(Json::parse(std::string(data)));
  }
  return out;
}

// Prometheus text: sample name with labels -> value.
std::map<std::string, double> ParseMetrics(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

constexpr char kAnswer[] = "네, 반갑습니다!";
const std::string kChatBody = R"({"model": "scripted", "messages": [{"role": "user", "content": "안녕?"}], "temperature": 0)";

class HttpServerTest : public ::testing::Test {
 protected:
  void Start(std::string answer = kAnswer, FrontendOptions frontend_options = {},
             HttpServerOptions http = {}) {
    auto exec = std::make_unique<ReplyExecutor>(std::move(answer));
    executor_ = exec.get();
    engine_ = StartTestEngine(std::move(exec), &tokenizer_, /*num_blocks=*/128);
    chat_ = std::make_unique<ChatTemplate>(ChatMlTemplate());
    log_ = std::tmpfile();
    frontend_options.request_log = log_;
    frontend_ = std::make_unique<Frontend>(engine_.get(), &tokenizer_, chat_.get(),
                                           ServedModelInfo{"scripted"}, TestModelLimits(),
                                           frontend_options);
    http.port = 0;
    if (!http.serving) http.serving = [this] { return serving_.load(); };
    absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(frontend_.get(), http);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(30, 0);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
    if (engine_) engine_->Stop();
    if (log_) std::fclose(log_);
  }

  httplib::Result Post(const std::string& path, const std::string& body,
                       httplib::Headers headers = {}) {
    return client_->Post(path.c_str(), headers, body, "application/json");
  }
  std::map<std::string, double> Metrics() {
    httplib::Result r = client_->Get("/metrics");
    EXPECT_TRUE(r) << httplib::to_string(r.error());
    if (!r) return {};
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
    return ParseMetrics(r->body);
  }
  bool WaitIdle() {
    for (int i = 0; i < 500 && frontend_->in_flight() > 0; ++i) absl::SleepFor(absl::Milliseconds(10));
    return frontend_->in_flight() == 0;
  }

  Tokenizer tokenizer_ = ByteTokenizer();
  ReplyExecutor* executor_ = nullptr;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ChatTemplate> chat_;
  std::FILE* log_ = nullptr;
  std::unique_ptr<Frontend> frontend_;
  std::atomic<bool> serving_{true};
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(HttpServerTest, NonStreamingChatAnswersOnceAndEchoesTheRequestId) {
  Start();
  httplib::Result r = Post("/v1/chat/completions", kChatBody + "}", {{"X-Request-Id", "req-42"}});
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("X-Request-Id"), "req-42");
  Json out = Json::parse(r->body);
  EXPECT_EQ(out["id"], "chatcmpl-req-42");
  EXPECT_EQ(out["object"], "chat.completion");
  EXPECT_EQ(out["model"], "scripted");
  EXPECT_EQ(out["choices"][0]["message"]["content"], kAnswer);
  EXPECT_EQ(out["choices"][0]["finish_reason"], "stop");
  const int answer_tokens = static_cast<int>(std::string(kAnswer).size());
  EXPECT_EQ(out["usage"]["completion_tokens"], answer_tokens + 1);  // + EOS
  // <|im_start|> "user\n안녕?" <|im_end|> "\n" <|im_start|> "assistant\n"
  EXPECT_EQ(out["usage"]["prompt_tokens"], 1 + 12 + 1 + 1 + 1 + 10);
  EXPECT_EQ(out["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

TEST_F(HttpServerTest, StreamedChatSendsWholeCharactersThenUsageThenDone) {
  Start();
  httplib::Result r = Post("/v1/chat/completions",
                           kChatBody + R"(, "stream": true, "stream_options": {"include_usage": true}})");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const std::string id = "chatcmpl-" + r->get_header_value("X-Request-Id");
  Sse sse = ParseSse(r->body);
  EXPECT_TRUE(sse.done);
  ASSERT_GE(sse.events.size(), 4u);
  EXPECT_EQ(sse.events[0]["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  int content_chunks = 0;
  for (size_t i = 0; i + 1 < sse.events.size(); ++i) {
    const Json& e = sse.events[i];
    EXPECT_EQ(e["id"], id);
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    EXPECT_TRUE(e["usage"].is_null());
    const std::string piece = e["choices"][0]["delta"].value("content", "");
    // Every byte of the answer is its own token; no delta may carry part of a character.
    EXPECT_TRUE(IsValidUtf8(piece));
    if (!piece.empty()) ++content_chunks;
    text += piece;
  }
  EXPECT_EQ(text, kAnswer);
  EXPECT_GT(content_chunks, 1);
  EXPECT_EQ(sse.events[sse.events.size() - 2]["choices"][0]["finish_reason"], "stop");
  const Json& usage = sse.events.back();
  EXPECT_EQ(usage["choices"], Json::array());
  EXPECT_EQ(usage["usage"]["completion_tokens"], static_cast<int>(std::string(kAnswer).size()) + 1);
}

// Tool calls over HTTP: the same output streamed and whole gives the same calls, byte for byte.
constexpr char kCallAnswer[] =
    "Checking.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"서울\"}}\n"
    "</tool_call>";
const std::string kToolsBody =
    R"({"messages": [{"role": "user", "content": "Weather?"}], "seed": 7,
        "tools": [{"type": "function", "function": {"name": "get_weather",
                   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])";

TEST_F(HttpServerTest, ToolCallsStreamedEqualNonStreamedWithFinishReasonToolCalls) {
  Start(kCallAnswer);
  httplib::Result whole = Post("/v1/chat/completions", kToolsBody + "}");
  ASSERT_TRUE(whole) << httplib::to_string(whole.error());
  ASSERT_EQ(whole->status, 200) << whole->body;
  const Json choice = Json::parse(whole->body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "Checking.");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << whole->body;
  const Json& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(call["function"]["arguments"], R"({"city": "서울"})");
  EXPECT_TRUE(absl::StartsWith(call["id"].get<std::string>(), "call_")) << call;

  httplib::Result streamed = Post("/v1/chat/completions", kToolsBody + R"(, "stream": true})");
  ASSERT_TRUE(streamed) << httplib::to_string(streamed.error());
  ASSERT_EQ(streamed->status, 200) << streamed->body;
  Sse sse = ParseSse(streamed->body);
  EXPECT_TRUE(sse.done);
  std::string content;
  std::map<int, Json> calls;  // by index: id, name, arguments concatenated
  Json finish;
  for (const Json& e : sse.events) {
    const Json& c = e["choices"][0];
    const Json& delta = c["delta"];
    content += delta.value("content", "");
    for (const Json& d : delta.value("tool_calls", Json::array())) {
      Json& into = calls[d["index"].get<int>()];
      if (d.contains("id")) into["id"] = d["id"];
      if (d["function"].contains("name")) into["name"] = d["function"]["name"];
      into["arguments"] =
          into.value("arguments", "") + d["function"].value("arguments", std::string());
    }
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_EQ(content, "Checking.");
  EXPECT_EQ(finish, "tool_calls");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["arguments"], call["function"]["arguments"]);
  EXPECT_EQ(calls[0]["name"], "get_weather");
  EXPECT_EQ(calls[0]["id"], call["id"]);  // the same seed, the same call id
}

TEST_F(HttpServerTest, TokenizeShowsTheRenderedPromptBesideItsIds) {
  Start();
  httplib::Result r = Post("/tokenize", R"({"messages": [{"role": "user", "content": "hi"}],
                                           "return_token_strs": true})");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  ASSERT_EQ(r->status, 200) << r->body;
  const Json out = Json::parse(r->body);
  EXPECT_EQ(out["prompt"], "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  // <|im_start|> and <|im_end|> are one token each, the rest one per byte.
  EXPECT_EQ(out["count"], 1 + 7 + 1 + 1 + 1 + 10);  // user\nhi, \n, assistant\n
  Json ids = Json::array({257});
  for (int32_t b : Bytes("user\nhi")) ids.push_back(b);
  for (int32_t id : {258, int32_t{'\n'}, 257}) ids.push_back(id);
  for (int32_t b : Bytes("assistant\n")) ids.push_back(b);
  EXPECT_EQ(out["tokens"], ids);
  EXPECT_EQ(out["token_strs"][0], "<|im_start|>");
  EXPECT_EQ(out["max_model_len"], kTestContextLength);

  httplib::Result no_prompt = Post("/tokenize", R"({"messages": [{"role": "user", "content": "hi"}],
                                                   "add_generation_prompt": false})");
  ASSERT_TRUE(no_prompt);
  EXPECT_EQ(Json::parse(no_prompt->body)["prompt"], "<|im_start|>user\nhi<|im_end|>\n");

  httplib::Result text = Post("/tokenize", R"({"prompt": "abc"})");
  ASSERT_TRUE(text);
  EXPECT_EQ(Json::parse(text->body)["tokens"], Json::array({'a', 'b', 'c'}));
  EXPECT_FALSE(Json::parse(text->body).contains("prompt"));

  httplib::Result bad = Post("/tokenize", R"({"messages": [{"role": "user", "content": 5}]})");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(Json::parse(bad->body)["error"]["param"], "messages[0].content") << bad->body;
}

TEST_F(HttpServerTest, StreamedCompletionFromTokenIdsEndsByLength) {
  Start("abcdefgh");
  httplib::Result r = Post("/v1/completions",
                           R"({"prompt": [1, 2, 3], "max_tokens": 5, "stream": true})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  Sse sse = ParseSse(r->body);
  EXPECT_TRUE(sse.done);
  std::string text;
  for (const Json& e : sse.events) {
    EXPECT_EQ(e["object"], "text_completion");
    EXPECT_FALSE(e.contains("usage"));
    text += e["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, "abcde");
  EXPECT_EQ(sse.events.back()["choices"][0]["finish_reason"], "length");
}

// n choices over HTTP: each with its own index and finish; streamed, [DONE] only after the last
// choice's finish, the usage counting every choice's tokens.
TEST_F(HttpServerTest, NChoicesEachEndAndTheStreamEndsAfterAll) {
  Start("abcdefgh");
  httplib::Result whole = Post("/v1/completions",
                               R"({"prompt": [1, 2, 3], "max_tokens": 4, "n": 3, "temperature": 0})");
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200) << whole->body;
  Json out = Json::parse(whole->body);
  ASSERT_EQ(out["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out["choices"][i]["index"], i);
    EXPECT_EQ(out["choices"][i]["text"], "abcd");
    EXPECT_EQ(out["choices"][i]["finish_reason"], "length");
  }
  EXPECT_EQ(out["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(out["usage"]["completion_tokens"], 12);

  httplib::Result r = Post("/v1/completions", R"({"prompt": [1, 2, 3], "max_tokens": 4, "n": 2,
      "temperature": 0, "stream": true, "stream_options": {"include_usage": true}})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  Sse sse = ParseSse(r->body);
  EXPECT_TRUE(sse.done);
  std::map<int, std::string> text;
  std::map<int, int> finishes;
  for (size_t i = 0; i + 1 < sse.events.size(); ++i) {
    const Json& c = sse.events[i]["choices"][0];
    text[c["index"].get<int>()] += c["text"].get<std::string>();
    if (!c["finish_reason"].is_null()) ++finishes[c["index"].get<int>()];
  }
  EXPECT_EQ(text, (std::map<int, std::string>{{0, "abcd"}, {1, "abcd"}}));
  EXPECT_EQ(finishes, (std::map<int, int>{{0, 1}, {1, 1}}));
  EXPECT_EQ(sse.events.back()["usage"]["completion_tokens"], 8);
}

TEST_F(HttpServerTest, InvalidRequestsAre400sNamingTheClientsField) {
  Start();
  const auto before = Metrics();
  struct Case {
    std::string body;
    std::string param;
    std::string message;
  };
  const std::string msgs = R"("messages": [{"role": "user", "content": "hi"}])";
  for (const Case& c : std::vector<Case>{
           {"{" + msgs + R"(, "max_tokens": 0})", "max_tokens",
            "max_tokens = 0 is invalid: must be at least 1"},
           {"{" + msgs + R"(, "top_p": 1.5})", "top_p",
            "top_p = 1.5 is out of range: must be in (0, 1]"},
           {"{" + msgs + R"(, "stop": ["ok", ""]})", "stop[1]",
            "stop[1] = \"\" is invalid: must not be empty"},
           {"{" + msgs + R"(, "n": 17})", "n", "n = 17 is invalid: must be in [1, 16]"},
           {"{" + msgs + R"(, "n": 1000})", "n", "n = 1000 is invalid: must be in [1, 16]"},
           {"{" + msgs + R"(, "max_tokens": "7"})", "max_tokens",
            "max_tokens has type string; expected an integer"},
       }) {
    httplib::Result r = Post("/v1/chat/completions", c.body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << c.body;
    Json e = Json::parse(r->body)["error"];
    EXPECT_EQ(e["type"], "invalid_request_error");
    EXPECT_EQ(e["param"], c.param) << r->body;
    EXPECT_EQ(e["message"], c.message);
  }
  httplib::Result bad_json = Post("/v1/completions", "{\"prompt\": ");
  ASSERT_TRUE(bad_json);
  EXPECT_EQ(bad_json->status, 400);
  httplib::Result bad_utf8 = Post("/v1/completions", "{\"prompt\": \"\xC3\"}");
  ASSERT_TRUE(bad_utf8);
  EXPECT_EQ(bad_utf8->status, 400);
  EXPECT_EQ(Json::parse(bad_utf8->body)["error"]["message"], "the request body is not valid UTF-8");
  httplib::Result wrong_model = Post("/v1/completions", R"({"model": "gpt-4", "prompt": "a"})");
  ASSERT_TRUE(wrong_model);
  EXPECT_EQ(wrong_model->status, 404);
  httplib::Result no_route = Post("/v1/embeddings", "{}");
  ASSERT_TRUE(no_route);
  EXPECT_EQ(no_route->status, 404);
  EXPECT_EQ(Json::parse(no_route->body)["error"]["message"], "no route POST /v1/embeddings");

  // Every refusal, before the door or by it, is counted once.
  const auto after = Metrics();
  const std::string key = R"(tpserve_request_errors_total{code="INVALID_ARGUMENT"})";
  EXPECT_EQ(after.at(key) - (before.count(key) ? before.at(key) : 0.0), 8.0);
}

TEST_F(HttpServerTest, BearerTokenIsRequiredExceptOnHealth) {
  FrontendOptions fo;
  fo.bearer_token = "s3cret";
  Start(kAnswer, fo);
  httplib::Result none = Post("/v1/chat/completions", kChatBody + "}");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  Json e = Json::parse(none->body)["error"];
  EXPECT_EQ(e["code"], "invalid_api_key");
  httplib::Result wrong =
      Post("/v1/chat/completions", kChatBody + "}", {{"Authorization", "Bearer nope"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  EXPECT_EQ(client_->Get("/v1/models")->status, 401);
  EXPECT_EQ(client_->Get("/metrics")->status, 401);
  EXPECT_EQ(client_->Get("/health")->status, 200);
  httplib::Result right =
      Post("/v1/chat/completions", kChatBody + "}", {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200) << right->body;
}

TEST_F(HttpServerTest, MetricsCountExactlyWhatTheRequestsUsed) {
  Start("abcdef");
  const auto before = Metrics();
  auto get = [](const std::map<std::string, double>& m, const std::string& k) {
    return m.count(k) ? m.at(k) : 0.0;
  };
  int prompt_tokens = 0, sent_tokens = 0, completion_tokens = 0;
  for (const std::string& body :
       {std::string(R"({"prompt": "hello", "max_tokens": 4})"),
        std::string(R"({"prompt": "안녕하세요"})")}) {
    httplib::Result r = Post("/v1/completions", body);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    Json out = Json::parse(r->body);
    prompt_tokens += out["usage"]["prompt_tokens"].get<int>();
    completion_tokens += out["usage"]["completion_tokens"].get<int>();
    // The byte tokenizer: one token per byte of text sent (EOS is counted in usage, not sent).
    sent_tokens += static_cast<int>(out["choices"][0]["text"].get<std::string>().size());
  }
  EXPECT_EQ(prompt_tokens, 5 + 15);
  EXPECT_EQ(sent_tokens, 4 + 6);
  EXPECT_EQ(completion_tokens, 4 + 6 + 1);  // the second ends in EOS: generated, not sent
  const auto after = Metrics();
  EXPECT_EQ(get(after, "tpserve_prompt_tokens_total") - get(before, "tpserve_prompt_tokens_total"),
            prompt_tokens);
  EXPECT_EQ(get(after, "tpserve_generation_tokens_total") -
                get(before, "tpserve_generation_tokens_total"),
            completion_tokens);
  EXPECT_EQ(get(after, R"(tpserve_requests_total{finish_reason="length"})") -
                get(before, R"(tpserve_requests_total{finish_reason="length"})"),
            1);
}

TEST_F(HttpServerTest, ModelsAndHealth) {
  Start();
  httplib::Result models = client_->Get("/v1/models");
  ASSERT_TRUE(models);
  Json list = Json::parse(models->body);
  EXPECT_EQ(list["object"], "list");
  ASSERT_EQ(list["data"].size(), 1u);
  EXPECT_EQ(list["data"][0]["id"], "scripted");
  EXPECT_EQ(list["data"][0]["owned_by"], "tpserve");
  EXPECT_EQ(list["data"][0]["context_length"], 256);
  EXPECT_EQ(client_->Get("/v1/models/scripted")->status, 200);
  EXPECT_EQ(client_->Get("/v1/models/other")->status, 404);

  httplib::Result ok = client_->Get("/health");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(Json::parse(ok->body), Json::parse(R"({"status": "ok"})"));
  serving_ = false;
  EXPECT_EQ(client_->Get("/health")->status, 503);
  serving_ = true;
  frontend_->BeginDrain();
  EXPECT_EQ(client_->Get("/health")->status, 503);
  httplib::Result refused = Post("/v1/chat/completions", kChatBody + "}");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_FALSE(refused->get_header_value("Retry-After").empty());
}

TEST_F(HttpServerTest, ABodyOverTheLimitIs413NamingTheLimit) {
  HttpServerOptions http;
  http.max_body_bytes = 64;
  Start(kAnswer, {}, http);
  httplib::Result r = Post("/v1/chat/completions", "{" + std::string(100, ' ') + "}");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(Json::parse(r->body)["error"]["message"],
            "the request body is over the limit of 64 bytes");
}

TEST_F(HttpServerTest, AFullQueueIs429WithRetryAfter) {
  FrontendOptions fo;
  fo.max_running = 1;
  fo.max_queued_requests = 0;
  Start(std::string(200, 'x'), fo);
  executor_->step_delay_ = absl::Milliseconds(5);
  std::thread slow([&] {
    httplib::Client c("127.0.0.1", server_->port());
    c.Post("/v1/completions", R"({"prompt": "a", "max_tokens": 100})", "application/json");
  });
  for (int i = 0; i < 200 && frontend_->in_flight() == 0; ++i) absl::SleepFor(absl::Milliseconds(5));
  httplib::Result r = Post("/v1/completions", R"({"prompt": "b"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429) << r->body;
  EXPECT_EQ(Json::parse(r->body)["error"]["code"], "rate_limit_exceeded");
  EXPECT_GE(std::stoi(r->get_header_value("Retry-After")), 1);
  slow.join();
}

TEST_F(HttpServerTest, ClientDisconnectMidStreamCancelsAndFreesTheKvCache) {
  Start(std::string(240, 'c'));
  executor_->step_delay_ = absl::Milliseconds(5);
  const auto before = Metrics();
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.set_header("Content-Type", "application/json");
  req.body = R"({"prompt": "go", "stream": true})";
  int chunks = 0;
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 3; };
  httplib::Result r = client_->send(req);
  EXPECT_EQ(r.error(), httplib::Error::Canceled);
  client_->stop();
  ASSERT_TRUE(WaitIdle()) << "the request is still in flight";
  const EngineStats s = engine_->stats();
  EXPECT_EQ(s.free_kv_blocks, s.total_kv_blocks);
  const auto after = Metrics();
  const std::string key = R"(tpserve_requests_total{finish_reason="cancelled"})";
  EXPECT_EQ(after.at(key) - (before.count(key) ? before.at(key) : 0.0), 1.0);
}

TEST_F(HttpServerTest, ShutdownEndsOpenStreamsWithAnErrorEventAndCancelsThem) {
  Start(std::string(240, 'c'));
  executor_->step_delay_ = absl::Milliseconds(20);
  std::string body;
  std::thread reader([&] {
    httplib::Client c("127.0.0.1", server_->port());
    httplib::Result r = c.Post("/v1/completions", R"({"prompt": "go", "stream": true})",
                               "application/json");
    if (r) body = r->body;
  });
  for (int i = 0; i < 200 && frontend_->in_flight() == 0; ++i) absl::SleepFor(absl::Milliseconds(5));
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time start = absl::Now();
  server_->Shutdown();
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  reader.join();
  EXPECT_TRUE(WaitIdle());
  Sse sse = ParseSse(body);
  EXPECT_FALSE(sse.done);
  ASSERT_FALSE(sse.events.empty()) << body;
  EXPECT_EQ(sse.events.back()["error"]["message"], "the HTTP server is shutting down");
}

// ---- TLS ----------------------------------------------------------------------------------

class TlsTest : public HttpServerTest {
 protected:
  void SetUp() override {
    if (std::system("openssl version > /dev/null 2>&1") != 0) {
      GTEST_SKIP() << "the openssl CLI is not installed";
    }
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = absl::StrCat(tmp ? tmp : "/tmp", "/tls_", ::testing::UnitTest::GetInstance()->random_seed(),
                        "_", getpid());
    const std::string script = absl::StrCat(
        "set -e; mkdir -p ", dir_, "; cd ", dir_, "; exec 2>openssl.log;",
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 "
        "  -subj /CN=test-ca;",
        "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext;",
        "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=localhost;",
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 "
        "  -extfile san.ext -out server.pem;",
        "openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=client;",
        "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 "
        "  -out client.pem");
    ASSERT_EQ(std::system(("bash -c \"" + script + "\"").c_str()), 0)
        << "openssl failed; see " << dir_ << "/openssl.log";
  }
  HttpServerOptions Tls(bool require_client_cert) {
    HttpServerOptions o;
    o.tls_cert_file = dir_ + "/server.pem";
    o.tls_key_file = dir_ + "/server.key";
    if (require_client_cert) o.tls_client_ca_file = dir_ + "/ca.pem";
    return o;
  }
  httplib::Result Health(bool trust_ca, bool present_cert) {
    std::unique_ptr<httplib::SSLClient> c =
        present_cert ? std::make_unique<httplib::SSLClient>("127.0.0.1", server_->port(),
                                                            dir_ + "/client.pem", dir_ + "/client.key")
                     : std::make_unique<httplib::SSLClient>("127.0.0.1", server_->port());
    c->enable_server_certificate_verification(true);
    if (trust_ca) c->set_ca_cert_path(dir_ + "/ca.pem");
    c->set_connection_timeout(5, 0);
    return c->Get("/health");
  }
  std::string dir_;
};

TEST_F(TlsTest, ServerCertificateIsVerifiedByClientsThatTrustTheCa) {
  Start(kAnswer, {}, Tls(/*require_client_cert=*/false));
  EXPECT_EQ(server_->base_url(), absl::StrCat("https://127.0.0.1:", server_->port()));
  httplib::Result trusted = Health(/*trust_ca=*/true, /*present_cert=*/false);
  ASSERT_TRUE(trusted) << httplib::to_string(trusted.error());
  EXPECT_EQ(trusted->status, 200);
  httplib::Result untrusted = Health(/*trust_ca=*/false, /*present_cert=*/false);
  EXPECT_FALSE(untrusted);
}

TEST_F(TlsTest, ClientCertificateRequiredWhenAClientCaIsSet) {
  Start(kAnswer, {}, Tls(/*require_client_cert=*/true));
  httplib::Result without = Health(/*trust_ca=*/true, /*present_cert=*/false);
  EXPECT_FALSE(without);
  httplib::Result with = Health(/*trust_ca=*/true, /*present_cert=*/true);
  ASSERT_TRUE(with) << httplib::to_string(with.error());
  EXPECT_EQ(with->status, 200);
}

TEST_F(TlsTest, BadTlsOptionsNameTheOptionAndFile) {
  HttpServerOptions o = Tls(false);
  o.tls_key_file = dir_ + "/missing.key";
  Tokenizer tok = ByteTokenizer();
  EngineOptions eo;
  eo.num_kv_blocks = 8;
  eo.context_length = 64;
  Engine engine(eo, std::make_unique<ReplyExecutor>("a"), &tok);
  ModelLimits limits;
  limits.vocab_size = kVocab;
  limits.context_length = 64;
  Frontend door(&engine, &tok, nullptr, ServedModelInfo{"m"}, limits, {});
  absl::StatusOr<std::unique_ptr<HttpServer>> s = HttpServer::Start(&door, o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(s.status().message(), "tls_key_file " + o.tls_key_file + ": "))
      << s.status();
  o = Tls(false);
  o.tls_cert_file.clear();
  s = HttpServer::Start(&door, o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "tls_cert_file is empty: HTTPS needs both tls_cert_file and tls_key_file");
}

}  // namespace
}  // namespace tpserve
