#include "coordinator/server.h"

#include <memory>
#include <optional>
#include <map>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "coordinator/test_support.h"
#include "coordinator/tokenizer/utf8.h"

namespace tpserve {
namespace {

namespace pb = ::tpserve::v1;

// The call's retry-after trailer as seconds; nullopt when absent or not a number.
std::optional<std::string> Trailer(const grpc::ClientContext& ctx, const std::string& key) {
  const auto& trailers = ctx.GetServerTrailingMetadata();
  auto it = trailers.find(key);
  if (it == trailers.end()) return std::nullopt;
  return std::string(it->second.data(), it->second.size());
}

std::optional<int> RetryAfter(const grpc::ClientContext& ctx) {
  const auto& trailers = ctx.GetServerTrailingMetadata();
  auto it = trailers.find("retry-after");
  int seconds = 0;
  if (it == trailers.end() ||
      !absl::SimpleAtoi(std::string(it->second.data(), it->second.size()), &seconds)) {
    return std::nullopt;
  }
  return seconds;
}

class ServerTest : public ::testing::Test {
 protected:
  void Start(std::string script, int32_t num_blocks = 64) {
    auto exec = std::make_unique<ScriptedExecutor>(std::move(script));
    executor_ = exec.get();
    StartWith(std::move(exec), num_blocks);
  }
  void StartWith(std::unique_ptr<ModelExecutor> exec, int32_t num_blocks = 64) {
    engine_ = StartTestEngine(std::move(exec), &tokenizer_, num_blocks);
    chat_ = std::make_unique<ChatTemplate>(ChatMlTemplate());
    frontend_ = std::make_unique<Frontend>(engine_.get(), &tokenizer_, chat_.get(),
                                           ServedModelInfo{"scripted"}, TestModelLimits(),
                                           frontend_options_);
    service_ = std::make_unique<TpServeService>(frontend_.get());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = pb::TpServe::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                     grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
    if (engine_) engine_->Stop();
  }

  struct Result {
    std::vector<pb::GenerateResponse> messages;
    grpc::Status status;
    std::optional<std::string> error_field;   // the tpserve-error-field trailer
    std::optional<std::string> error_reason;  // the tpserve-error-reason trailer
    std::string text() const {
      std::string t;
      for (const auto& m : messages) t += m.text();
      return t;
    }
  };
  Result Generate(const pb::GenerateRequest& req, int cancel_after = -1,
                  absl::Duration deadline = absl::Seconds(30)) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    Result r;
    auto reader = stub_->Generate(&ctx, req);
    pb::GenerateResponse m;
    while (reader->Read(&m)) {
      r.messages.push_back(m);
      if (static_cast<int>(r.messages.size()) == cancel_after) ctx.TryCancel();
    }
    r.status = reader->Finish();
    r.error_field = Trailer(ctx, "tpserve-error-field");
    r.error_reason = Trailer(ctx, "tpserve-error-reason");
    return r;
  }

  Tokenizer tokenizer_ = ByteTokenizer();
  ScriptedExecutor* executor_ = nullptr;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ChatTemplate> chat_;
  FrontendOptions frontend_options_;
  std::unique_ptr<Frontend> frontend_;
  std::unique_ptr<TpServeService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<pb::TpServe::Stub> stub_;
};

TEST_F(ServerTest, StreamsKoreanAsWholeCharactersWithUsageOnTheLastMessage) {
  Start("질문: 안녕하세요? 답: 네, 반갑습니다!");
  pb::GenerateRequest req;
  req.set_text("질문: 안녕하세요? 답: ");
  req.mutable_sampling()->set_temperature(0.0f);
  Result r = Generate(req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_GE(r.messages.size(), 2u);
  std::vector<int32_t> ids;
  for (const auto& m : r.messages) {
    EXPECT_TRUE(IsValidUtf8(m.text()));
    ids.insert(ids.end(), m.token_ids().begin(), m.token_ids().end());
  }
  EXPECT_EQ(r.text(), "네, 반갑습니다!");
  EXPECT_EQ(*tokenizer_.Decode(ids), r.text());
  const pb::GenerateResponse& last = r.messages.back();
  EXPECT_EQ(last.finish_reason(), pb::FINISH_REASON_EOS);
  EXPECT_EQ(last.usage().prompt_tokens(), static_cast<int>(Bytes("질문: 안녕하세요? 답: ").size()));
  EXPECT_EQ(last.usage().completion_tokens(), static_cast<int>(ids.size()) + 1);  // + EOS
  for (size_t i = 0; i + 1 < r.messages.size(); ++i) {
    EXPECT_EQ(r.messages[i].finish_reason(), pb::FINISH_REASON_UNSPECIFIED);
  }
}

// n = 2 and prompt_logprobs on the stream: the prompt's logprobs on the first message (choice
// 0's), each choice's messages tagged with its index, one finishing message per choice, and
// the stream ends OK after both.
TEST_F(ServerTest, ChoicesAreTaggedAndThePromptIsScoredOnTheFirstMessage) {
  Start("Q: hi? A: hello!");
  pb::GenerateRequest req;
  req.set_text("Q: hi? A: ");
  req.mutable_sampling()->set_temperature(0.0f);
  req.set_n(2);
  req.set_prompt_logprobs(true);
  req.set_top_logprobs(1);
  Result r = Generate(req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_FALSE(r.messages.empty());
  const pb::GenerateResponse& first = r.messages.front();
  EXPECT_EQ(first.index(), 0);
  const std::vector<int32_t> prompt = Bytes("Q: hi? A: ");
  ASSERT_EQ(first.prompt_logprobs_size(), static_cast<int>(prompt.size()) - 1);
  // The script predicts every prompt byte with logit 10 against 0 for the rest of the vocabulary.
  const float expected = 10.0f - std::log(std::exp(10.0f) + (kVocab - 1));
  for (int p = 0; p < first.prompt_logprobs_size(); ++p) {
    EXPECT_EQ(first.prompt_logprobs(p).token_id(), prompt[p + 1]);
    EXPECT_NEAR(first.prompt_logprobs(p).logprob(), expected, 1e-5);
    ASSERT_EQ(first.prompt_logprobs(p).top_size(), 1);
    EXPECT_EQ(first.prompt_logprobs(p).top(0).token_id(), prompt[p + 1]);
  }
  std::map<int, std::string> text;
  std::map<int, int> finishes;
  for (size_t i = 0; i < r.messages.size(); ++i) {
    const pb::GenerateResponse& m = r.messages[i];
    text[m.index()] += m.text();
    if (m.finish_reason() != pb::FINISH_REASON_UNSPECIFIED) ++finishes[m.index()];
    if (i > 0) {
      EXPECT_EQ(m.prompt_logprobs_size(), 0);
    }
  }
  EXPECT_EQ(text, (std::map<int, std::string>{{0, "hello!"}, {1, "hello!"}}));
  EXPECT_EQ(finishes, (std::map<int, int>{{0, 1}, {1, 1}}));
  EXPECT_EQ(r.messages.back().finish_reason(), pb::FINISH_REASON_EOS);
}

TEST_F(ServerTest, InvalidRequestsNameFieldValueAndBound) {
  Start("abc");
  pb::GenerateRequest req;
  req.set_text("a");
  req.mutable_sampling()->set_top_p(1.5f);
  Result r = Generate(req);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.status.error_message(), "sampling.top_p = 1.5 is out of range: must be in (0, 1]");
  // The path the message opens with also comes as data, from the same status.
  EXPECT_EQ(r.error_field, "sampling.top_p");
  EXPECT_EQ(r.error_reason, std::nullopt);
  EXPECT_TRUE(r.messages.empty());

  pb::GenerateRequest too_long;
  too_long.set_text(std::string(200, 'x'));
  too_long.set_max_new_tokens(100);
  r = Generate(too_long);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.status.error_message(),
            "context_length_exceeded: prompt has 200 tokens and max_new_tokens is 100, together "
            "300 > the context length of 256 tokens");
  EXPECT_EQ(r.error_reason, "context_length_exceeded");
  EXPECT_EQ(r.error_field, std::nullopt);
}

TEST_F(ServerTest, ChatInputUsesTheTemplateAndKeepsMarkersInContentAsText) {
  Start("x");
  pb::TokenizeRequest req;
  auto* m = req.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("hi<|im_end|>");
  pb::TokenizeResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->Tokenize(&ctx, req, &resp).ok());
  // <|im_start|>user\nhi<|im_end|>(as 10 bytes)<|im_end|>\n<|im_start|>assistant\n
  std::vector<int32_t> expected = {257};
  for (int32_t b : Bytes("user\nhi<|im_end|>")) expected.push_back(b);
  expected.push_back(258);
  expected.push_back('\n');
  expected.push_back(257);
  for (int32_t b : Bytes("assistant\n")) expected.push_back(b);
  EXPECT_EQ(std::vector<int32_t>(resp.ids().begin(), resp.ids().end()), expected);
  EXPECT_EQ(resp.prompt_text(),
            "<|im_start|>user\nhi<|im_end|><|im_end|>\n<|im_start|>assistant\n");

  pb::CountTokensResponse count;
  grpc::ClientContext ctx2;
  ASSERT_TRUE(stub_->CountTokens(&ctx2, req, &count).ok());
  EXPECT_EQ(count.count(), static_cast<int>(expected.size()));
  EXPECT_EQ(count.context_length(), 256);
}

TEST_F(ServerTest, ToolCallsAndReasoningArriveInTheirOwnFields) {
  frontend_options_.output_formats.reasoning = ReasoningFormat::kDeepSeekR1;
  StartWith(std::make_unique<ReplyExecutor>(
      "<think>Use the tool.</think><tool_call>\n{\"name\": \"lookup\", \"arguments\": {\"q\": 1}}"
      "\n</tool_call>"));
  pb::GenerateRequest req;
  auto* m = req.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("find it");
  req.mutable_chat()->add_tools()->set_name("lookup");
  req.mutable_sampling()->set_temperature(0.0f);
  req.mutable_sampling()->set_seed(3);
  Result r = Generate(req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  std::string reasoning;
  std::vector<pb::ToolCall> calls;
  for (const pb::GenerateResponse& msg : r.messages) {
    reasoning += msg.reasoning_text();
    calls.insert(calls.end(), msg.tool_calls().begin(), msg.tool_calls().end());
  }
  EXPECT_EQ(reasoning, "Use the tool.");
  EXPECT_EQ(r.text(), "");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].index(), 0);
  EXPECT_EQ(calls[0].name(), "lookup");
  EXPECT_EQ(calls[0].arguments(), R"({"q": 1})");
  EXPECT_FALSE(calls[0].id().empty());
  EXPECT_EQ(r.messages.back().finish_reason(), pb::FINISH_REASON_TOOL_CALLS);
}

TEST_F(ServerTest, ClientCancelStopsGenerationAndFreesTheKvCache) {
  Start(std::string(250, 'c'));
  executor_->step_delay_ = absl::Milliseconds(5);
  pb::GenerateRequest req;
  req.set_text("cc");
  req.mutable_sampling()->set_temperature(0.0f);
  Result r = Generate(req, /*cancel_after=*/3);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(r.messages.size(), 100u);
  for (int i = 0; i < 200 && engine_->stats().running + engine_->stats().waiting > 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(engine_->stats().running, 0);
  EXPECT_EQ(engine_->stats().free_kv_blocks, 64);
}

TEST_F(ServerTest, DeadlineEndsTheStreamAndFreesTheKvCache) {
  Start(std::string(250, 'd'));
  executor_->step_delay_ = absl::Milliseconds(10);
  pb::GenerateRequest req;
  req.set_text("dd");
  req.mutable_sampling()->set_temperature(0.0f);  // the scripted model checks every token
  Result r = Generate(req, -1, absl::Milliseconds(300));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << r.status.error_message();
  for (int i = 0; i < 200 && engine_->stats().running > 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(engine_->stats().running, 0);
  EXPECT_EQ(engine_->stats().free_kv_blocks, 64);
}

TEST_F(ServerTest, AFailedRankEndsTheStreamWithUnavailable) {
  Start(std::string(250, 'e'));
  executor_->fail_at_step_ = 4;
  pb::GenerateRequest req;
  req.set_text("ee");
  req.mutable_sampling()->set_temperature(0.0f);
  Result r = Generate(req);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(r.status.error_message().find("rank 1 stopped answering"), std::string::npos);
  EXPECT_EQ(engine_->health().code(), absl::StatusCode::kUnavailable);
}

TEST_F(ServerTest, WhileDrainingRequestsGetUnavailableWithRetryAfterAsOverHttp) {
  Start("x");
  frontend_->BeginDrain();
  pb::GenerateRequest req;
  req.set_text("hi");
  grpc::ClientContext ctx;
  auto refused = stub_->Generate(&ctx, req);
  pb::GenerateResponse m;
  EXPECT_FALSE(refused->Read(&m));
  const grpc::Status s = refused->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(s.error_message(), "the server is draining: no new requests");
  const std::optional<int> retry = RetryAfter(ctx);
  ASSERT_TRUE(retry.has_value());
  EXPECT_EQ(*retry, frontend_->retry_after_s());
}

TEST_F(ServerTest, ModelInfo) {
  Start("x");
  pb::ModelInfo info;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->GetModelInfo(&ctx, pb::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.name(), "scripted");
  EXPECT_EQ(info.context_length(), 256);
  EXPECT_EQ(info.vocab_size(), kVocab);
}


TEST_F(ServerTest, InvalidUtf8IsInvalidArgumentNamingTheFieldByItsProtoPath) {
  Start("x");
  pb::GenerateRequest req;
  auto* chat = req.mutable_chat();
  chat->add_messages()->set_role("system");
  chat->mutable_messages(0)->set_content("fine");
  chat->add_messages()->set_role("user");
  chat->mutable_messages(1)->set_content("ab\xff");  // protobuf itself would say only "INTERNAL"
  Result r = Generate(req);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.status.error_message(),
            "chat.messages[1].content = 3 bytes is invalid: text must be valid UTF-8; the first "
            "bad byte is at offset 2");
  EXPECT_TRUE(r.messages.empty());

  pb::GenerateRequest stop;
  stop.set_text("ok");
  stop.add_stop_sequences("fine");
  stop.add_stop_sequences("\xc3(");
  r = Generate(stop);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.status.error_message(),
            "stop_sequences[1] = 2 bytes is invalid: text must be valid UTF-8; the first bad byte "
            "is at offset 0");
}

TEST_F(ServerTest, TopLogprobsIsNamedAsTheTopLevelFieldItIs) {
  Start("x");
  pb::GenerateRequest req;
  req.set_text("a");
  req.set_top_logprobs(21);
  Result r = Generate(req);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.status.error_message(), "top_logprobs = 21 is out of range: must be in [0, 20]");
}

TEST_F(ServerTest, EchoesTheRequestIdInMetadataAndTheFirstMessage) {
  Start("hello");
  pb::GenerateRequest req;
  req.set_text("h");
  req.mutable_sampling()->set_temperature(0.0f);  // the scripted model checks every token
  req.set_max_new_tokens(3);
  req.set_request_id("client-42");
  grpc::ClientContext ctx;
  auto reader = stub_->Generate(&ctx, req);
  pb::GenerateResponse m;
  std::vector<pb::GenerateResponse> messages;
  while (reader->Read(&m)) messages.push_back(m);
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_FALSE(messages.empty());
  EXPECT_EQ(messages[0].request_id(), "client-42");
  for (size_t i = 1; i < messages.size(); ++i) EXPECT_EQ(messages[i].request_id(), "");
  const auto& md = ctx.GetServerInitialMetadata();
  auto it = md.find("x-request-id");
  ASSERT_NE(it, md.end());
  EXPECT_EQ(std::string(it->second.data(), it->second.size()), "client-42");

  // Without one, the server makes one up and still echoes it.
  req.clear_request_id();
  Result r = Generate(req);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.messages[0].request_id().size(), 16u);
}

TEST_F(ServerTest, PastTheQueueBoundRequestsAreRefusedBeforeAnyToken) {
  frontend_options_.max_queued_requests = 1;
  Start(std::string(250, 'q'));
  executor_->step_delay_ = absl::Milliseconds(20);
  EXPECT_EQ(frontend_->in_flight(), 0);
  // max_running comes from the options (8 by default): 8 running + 1 queued fill the door.
  pb::GenerateRequest req;
  req.set_text("q");
  req.set_max_new_tokens(200);
  req.mutable_sampling()->set_temperature(0.0f);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<pb::GenerateResponse>>> streams;
  for (int i = 0; i < 9; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    streams.push_back(stub_->Generate(contexts.back().get(), req));
    pb::GenerateResponse first;
    if (i < 8) {
      ASSERT_TRUE(streams.back()->Read(&first));  // running: tokens flow
    }
  }
  for (int i = 0; i < 200 && frontend_->in_flight() < 9; ++i) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_EQ(frontend_->in_flight(), 9);

  grpc::ClientContext ctx;
  auto refused = stub_->Generate(&ctx, req);
  pb::GenerateResponse m;
  EXPECT_FALSE(refused->Read(&m));
  grpc::Status s = refused->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("max_queued_requests = 1"), std::string::npos)
      << s.error_message();
  const std::optional<int> retry = RetryAfter(ctx);
  ASSERT_TRUE(retry.has_value());
  EXPECT_GE(*retry, 1);
  const std::string metrics = frontend_->metrics().Render();
  EXPECT_NE(metrics.find("tpserve_request_errors_total{code=\"RESOURCE_EXHAUSTED\"} 1\n"),
            std::string::npos)
      << metrics;
  for (auto& c : contexts) c->TryCancel();
  for (auto& r : streams) r->Finish();
}

TEST_F(ServerTest, ABearerTokenIsCheckedOnEveryMethod) {
  frontend_options_.bearer_token = "s3cret";
  Start("ok");
  pb::GenerateRequest req;
  req.set_text("o");
  req.mutable_sampling()->set_temperature(0.0f);  // the scripted model checks every token
  req.set_max_new_tokens(2);
  Result r = Generate(req);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(r.status.error_message(),
            "authorization: a bearer token is required (\"Bearer <token>\")");

  for (const char* token : {"Bearer wrong!", "Bearer s3cret"}) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", token);
    auto reader = stub_->Generate(&ctx, req);
    pb::GenerateResponse m;
    while (reader->Read(&m)) {
    }
    grpc::Status s = reader->Finish();
    if (std::string(token) == "Bearer s3cret") {
      EXPECT_TRUE(s.ok()) << s.error_message();
    } else {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
      EXPECT_EQ(s.error_message(), "authorization: the bearer token is not valid");
    }
  }
  pb::ModelInfo info;
  grpc::ClientContext ctx;
  EXPECT_EQ(stub_->GetModelInfo(&ctx, pb::GetModelInfoRequest(), &info).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

}  // namespace
}  // namespace tpserve
