// Tool calls and reasoning through the door (Frontend), as both protocols receive them: the
// model's text split into content, reasoning and whole calls; finish_reason tool_calls; the
// calls constrained by their structural tag when tool_choice demands them.
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "coordinator/frontend.h"
#include "coordinator/structured/compiler.h"
#include "coordinator/test_support.h"
#include "nlohmann/json.hpp"

namespace tpserve {
namespace {

namespace pb = ::tpserve::v1;
using ::testing::HasSubstr;

constexpr char kWeatherSchema[] =
    R"({"type": "object", "properties": {"unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["unit"], "additionalProperties": false})";

// What a choice's events add up to.
struct Outcome {
  std::string content;
  std::string reasoning;
  std::vector<ToolCallDelta> calls;
  FinishReason finish = FinishReason::kNone;
  int events_with_calls = 0;
};

class ToolCallsTest : public ::testing::Test {
 protected:
  void Start(std::string reply, bool with_compiler) {
    engine_ = StartTestEngine(std::make_unique<ReplyExecutor>(std::move(reply)), &tokenizer_);
    if (with_compiler) {
      absl::StatusOr<std::unique_ptr<ConstraintCompiler>> compiler =
          ConstraintCompiler::Create(tokenizer_, kVocab, {kEos});
      ASSERT_TRUE(compiler.ok()) << compiler.status();
      compiler_ = *std::move(compiler);
      options_.constraints = compiler_.get();
    }
    options_.request_log = std::tmpfile();
    door_ = std::make_unique<Frontend>(engine_.get(), &tokenizer_, &chat_, ServedModelInfo{"t"},
                                       TestModelLimits(), options_);
  }
  void TearDown() override {
    if (engine_) engine_->Stop();
    if (options_.request_log != nullptr) std::fclose(options_.request_log);
  }

  // A weather question with one tool (or two, `second_tool`), greedy.
  static pb::GenerateRequest Ask(pb::ToolChoice::Mode mode, const std::string& named = "",
                                 bool second_tool = false) {
    pb::GenerateRequest req;
    pb::ChatMessage* m = req.mutable_chat()->add_messages();
    m->set_role("user");
    m->set_content("Weather in Paris?");
    pb::Tool* tool = req.mutable_chat()->add_tools();
    tool->set_name("get_weather");
    tool->set_parameters(kWeatherSchema);
    if (second_tool) {
      pb::Tool* other = req.mutable_chat()->add_tools();
      other->set_name("get_time");
      other->set_parameters(R"({"type": "object", "properties": {}})");
    }
    req.mutable_chat()->mutable_tool_choice()->set_mode(mode);
    req.mutable_chat()->mutable_tool_choice()->set_function_name(named);
    req.mutable_chat()->set_parallel_tool_calls(false);
    req.mutable_sampling()->set_temperature(0.0f);
    req.set_max_new_tokens(120);
    return req;
  }

  absl::StatusOr<Outcome> Run(const pb::GenerateRequest& req) {
    absl::Notification done;
    Outcome out;
    absl::StatusOr<Admitted> admitted =
        door_->Generate(req, absl::InfiniteFuture(), [&](GenerationEvent e) {
          out.content += e.text;
          out.reasoning += e.reasoning_text;
          if (!e.tool_calls.empty()) ++out.events_with_calls;
          for (ToolCallDelta& call : e.tool_calls) out.calls.push_back(std::move(call));
          if (e.finish != FinishReason::kNone) {
            out.finish = e.finish;
            done.Notify();
          }
        });
    if (!admitted.ok()) return admitted.status();
    done.WaitForNotification();
    return out;
  }

  Tokenizer tokenizer_ = ByteTokenizer();
  ChatTemplate chat_ = ChatMlTemplate();
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ConstraintCompiler> compiler_;
  FrontendOptions options_;
  std::unique_ptr<Frontend> door_;
};

TEST_F(ToolCallsTest, AHermesCallComesWholeAndEndsTheTurnWithToolCalls) {
  Start("Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
        "{\"unit\": \"celsius\"}}\n</tool_call>",
        /*with_compiler=*/false);
  absl::StatusOr<Outcome> out = Run(Ask(pb::ToolChoice::AUTO));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->content, "Let me check.");  // the whitespace next to the call is dropped
  ASSERT_EQ(out->calls.size(), 1u);
  EXPECT_EQ(out->events_with_calls, 1);  // whole, in one event
  EXPECT_EQ(out->calls[0].index, 0);
  EXPECT_EQ(out->calls[0].name, "get_weather");
  EXPECT_EQ(out->calls[0].arguments, R"({"unit": "celsius"})");
  EXPECT_THAT(out->calls[0].id, ::testing::StartsWith("call_"));
  EXPECT_EQ(out->finish, FinishReason::kToolCalls);
}

TEST_F(ToolCallsTest, JsonThatIsNotInTheModelsCallFormatStaysContent) {
  const std::string reply = R"({"name": "get_weather", "arguments": {"unit": "celsius"}})";
  Start(reply, /*with_compiler=*/false);
  absl::StatusOr<Outcome> out = Run(Ask(pb::ToolChoice::AUTO));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->content, reply);  // hermes calls are inside <tool_call>
  EXPECT_TRUE(out->calls.empty());
  EXPECT_EQ(out->finish, FinishReason::kEos);
}

TEST_F(ToolCallsTest, ACallToAFunctionTheRequestDoesNotHaveIsContent) {
  const std::string reply = "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>";
  Start(reply, /*with_compiler=*/false);
  absl::StatusOr<Outcome> out = Run(Ask(pb::ToolChoice::AUTO));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->content, reply);
  EXPECT_TRUE(out->calls.empty());
  EXPECT_EQ(out->finish, FinishReason::kEos);
}

TEST_F(ToolCallsTest, WithToolChoiceNoneTheOutputIsNotReadForCalls) {
  const std::string reply =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"celsius\"}}\n</tool_call>";
  Start(reply, /*with_compiler=*/true);
  absl::StatusOr<Outcome> out = Run(Ask(pb::ToolChoice::NONE));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->content, reply);
  EXPECT_TRUE(out->calls.empty());
  EXPECT_EQ(out->finish, FinishReason::kEos);
}

// The model says nothing useful (it would end at once): tool_choice=required makes it call, and
// the arguments follow the schema (the enum's first value, which greedy decoding reaches first).
TEST_F(ToolCallsTest, RequiredForcesAValidCallFromAModelThatWouldNotMakeOne) {
  Start("", /*with_compiler=*/true);
  absl::StatusOr<Outcome> out = Run(Ask(pb::ToolChoice::REQUIRED));
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->calls.size(), 1u) << "content: " << out->content;
  EXPECT_EQ(out->calls[0].name, "get_weather");
  const nlohmann::json args = nlohmann::json::parse(out->calls[0].arguments, nullptr, false);
  EXPECT_EQ(args, nlohmann::json({{"unit", "celsius"}})) << out->calls[0].arguments;
  EXPECT_EQ(out->content, "");
  EXPECT_EQ(out->finish, FinishReason::kToolCalls);
}

TEST_F(ToolCallsTest, ANamedFunctionIsTheOneCalled) {
  Start("", /*with_compiler=*/true);
  absl::StatusOr<Outcome> out =
      Run(Ask(pb::ToolChoice::FUNCTION, "get_time", /*second_tool=*/true));
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->calls.size(), 1u) << "content: " << out->content;
  EXPECT_EQ(out->calls[0].name, "get_time");
  EXPECT_TRUE(nlohmann::json::parse(out->calls[0].arguments, nullptr, false).is_object())
      << out->calls[0].arguments;
  EXPECT_EQ(out->finish, FinishReason::kToolCalls);
}

TEST_F(ToolCallsTest, RequiredWithoutStructuredOutputIsAFailedPrecondition) {
  Start("", /*with_compiler=*/false);
  absl::StatusOr<Outcome> out = Run(Ask(pb::ToolChoice::REQUIRED));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("chat.tool_choice: required needs the calls to be constrained, but "
                        "structured output is not enabled on this server"));
}

TEST_F(ToolCallsTest, ToolsCannotBeCombinedWithAnotherConstraint) {
  Start("", /*with_compiler=*/true);
  pb::GenerateRequest req = Ask(pb::ToolChoice::AUTO);
  req.mutable_json_object();
  absl::StatusOr<Outcome> out = Run(req);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("chat.tools: a request with tools"));
}

TEST_F(ToolCallsTest, ReasoningIsSplitOffWhenTheServerNamesAFormat) {
  options_.output_formats.reasoning = ReasoningFormat::kQwen3;
  Start("<think>It is Paris.</think>Sunny.", /*with_compiler=*/false);
  pb::GenerateRequest req = Ask(pb::ToolChoice::NONE);
  absl::StatusOr<Outcome> out = Run(req);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->reasoning, "It is Paris.");
  EXPECT_EQ(out->content, "Sunny.");
  EXPECT_EQ(out->finish, FinishReason::kEos);
}

TEST_F(ToolCallsTest, WithoutAReasoningFormatThinkingStaysInTheContent) {
  Start("<think>It is Paris.</think>Sunny.", /*with_compiler=*/false);
  absl::StatusOr<Outcome> out = Run(Ask(pb::ToolChoice::NONE));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->reasoning, "");
  EXPECT_EQ(out->content, "<think>It is Paris.</think>Sunny.");
}

}  // namespace
}  // namespace tpserve
