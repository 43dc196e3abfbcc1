#include "coordinator/validation.h"

#include <string>

#include <gtest/gtest.h>

namespace tpserve {
namespace {

using tpserve::v1::GenerateRequest;

ModelLimits Limits() {
  ModelLimits l;
  l.vocab_size = 100;
  l.context_length = 64;
  return l;
}

void ExpectInvalid(const GenerateRequest& req, const std::string& message) {
  absl::StatusOr<ValidatedInput> in = ValidateGenerateRequest(req, Limits());
  ASSERT_FALSE(in.ok()) << "accepted: " << req.ShortDebugString();
  EXPECT_EQ(in.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(in.status().message(), message);
}

TEST(ValidateGenerateRequest, AcceptsEachInputKindWithDefaults) {
  GenerateRequest req;
  req.set_text("hello");
  absl::StatusOr<ValidatedInput> in = ValidateGenerateRequest(req, Limits());
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->kind, ValidatedInput::Kind::kText);
  EXPECT_EQ(in->sampling.temperature, 1.0f);
  EXPECT_FALSE(in->max_new_tokens.has_value());

  req.mutable_chat()->add_messages()->set_role("user");
  ASSERT_TRUE(ValidateGenerateRequest(req, Limits()).ok());
  req.mutable_token_ids()->add_ids(5);
  in = ValidateGenerateRequest(req, Limits());
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(in->token_ids, std::vector<int32_t>({5}));
}

TEST(ValidateGenerateRequest, NamesFieldValueAndBound) {
  GenerateRequest none;
  ExpectInvalid(none, "input is missing: set exactly one of text, chat or token_ids");

  GenerateRequest req;
  req.set_text("hi");
  GenerateRequest r = req;
  r.mutable_sampling()->set_temperature(-1.0f);
  ExpectInvalid(r, "sampling.temperature = -1 is out of range: must be 0 (greedy) or in (0, 100]");
  r = req;
  r.mutable_sampling()->set_top_p(0.0f);
  ExpectInvalid(r, "sampling.top_p = 0 is out of range: must be in (0, 1]");
  r = req;
  r.mutable_sampling()->set_top_k(-3);
  ExpectInvalid(r, "sampling.top_k = -3 is out of range: must be in [0, 100] (0 = off)");
  r = req;
  r.set_max_new_tokens(0);
  ExpectInvalid(r, "max_new_tokens = 0 is invalid: must be at least 1");
  r = req;
  r.set_top_logprobs(50);
  ExpectInvalid(r, "top_logprobs = 50 is out of range: must be in [0, 20]");
  r = req;
  r.add_stop_sequences("");
  ExpectInvalid(r, "stop_sequences[0] = \"\" is invalid: must not be empty");
  r = req;
  r.add_stop_token_ids(100);
  ExpectInvalid(r, "stop_token_ids[0] = 100 is invalid: token ids must be in [0, 100)");

  GenerateRequest ids;
  ids.mutable_token_ids()->add_ids(3);
  ids.mutable_token_ids()->add_ids(-1);
  ExpectInvalid(ids, "token_ids.ids[1] = -1 is invalid: token ids must be in [0, 100)");

  GenerateRequest chat;
  auto* m = chat.mutable_chat()->add_messages();
  m->set_role("user");
  m = chat.mutable_chat()->add_messages();
  m->set_role("wiz ard");
  ExpectInvalid(chat, "chat.messages[1].role = \"wiz ard\" is invalid: must be 1 to 32 characters of [A-Za-z0-9_.-]");

  GenerateRequest empty;
  empty.set_text("");
  ExpectInvalid(empty, "text = \"\" is invalid: the prompt must not be empty");
}

TEST(ValidateGenerateRequest, ChatToolsCallsAndChoiceEachNamedWhenWrong) {
  GenerateRequest base;
  tpserve::v1::Chat* chat = base.mutable_chat();
  auto* user = chat->add_messages();
  user->set_role("user");
  user->set_content("weather?");
  tpserve::v1::Tool* tool = chat->add_tools();
  tool->set_name("get_weather");
  tool->set_parameters(R"({"type": "object", "properties": {"city": {"type": "string"}}})");
  ASSERT_TRUE(ValidateGenerateRequest(base, Limits()).ok());

  GenerateRequest r = base;
  r.mutable_chat()->mutable_tools(0)->set_parameters("[1, 2]");
  ExpectInvalid(r, "chat.tools[0].parameters = 6 bytes is invalid: must be a JSON object");
  r.mutable_chat()->mutable_tools(0)->set_parameters(R"({"type": "array"})");
  ExpectInvalid(r, "chat.tools[0].parameters.type = \"array\" is invalid: must be \"object\" (a "
                   "function's arguments are a JSON object)");
  r = base;
  r.mutable_chat()->add_tools()->set_name("get_weather");
  ExpectInvalid(r, "chat.tools[1].name = \"get_weather\" is invalid: tool names must be unique; "
                   "chat.tools[0] has it too");
  r = base;
  r.mutable_chat()->mutable_tools(0)->set_name("get weather");
  ExpectInvalid(r, "chat.tools[0].name = \"get weather\" is invalid: must be 1 to 64 characters "
                   "of [A-Za-z0-9_.-]");
  r = base;
  r.mutable_chat()->mutable_tool_choice()->set_mode(tpserve::v1::ToolChoice::FUNCTION);
  r.mutable_chat()->mutable_tool_choice()->set_function_name("get_time");
  ExpectInvalid(r, "chat.tool_choice.function_name = \"get_time\" is invalid: must name one of "
                   "chat.tools");
  r = base;
  r.mutable_chat()->clear_tools();
  r.mutable_chat()->mutable_tool_choice()->set_mode(tpserve::v1::ToolChoice::REQUIRED);
  ExpectInvalid(r, "chat.tool_choice.mode = REQUIRED is invalid: a call is required but "
                   "chat.tools is empty");
  r = base;
  auto* assistant = r.mutable_chat()->add_messages();
  assistant->set_role("assistant");
  auto* call = assistant->add_tool_calls();
  call->set_id("call_1");
  call->set_name("get_weather");
  call->set_arguments(R"({"city": "Paris")");
  ExpectInvalid(r, "chat.messages[1].tool_calls[0].arguments = 16 bytes is invalid: must be a "
                   "JSON object");
  call->set_arguments(R"({"city": "Paris"})");
  ASSERT_TRUE(ValidateGenerateRequest(r, Limits()).ok());
  r.mutable_chat()->mutable_messages(0)->add_tool_calls()->set_name("get_weather");
  ExpectInvalid(r, "chat.messages[0].tool_calls = 1 calls is invalid: only an assistant message "
                   "has tool calls, not \"user\"");
  r = base;
  r.mutable_chat()->set_template_kwargs("true");
  ExpectInvalid(r, "chat.template_kwargs = 4 bytes is invalid: must be a JSON object");
}

TEST(ValidateGenerateRequest, ChoicesAndCandidatesWithinTheirBounds) {
  GenerateRequest r;
  r.set_text("x");
  absl::StatusOr<ValidatedInput> in = ValidateGenerateRequest(r, Limits());
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(in->n, 1);
  EXPECT_EQ(in->best_of, 1);
  EXPECT_FALSE(in->prompt_logprobs);
  r.set_n(4);
  r.set_prompt_logprobs(true);
  in = ValidateGenerateRequest(r, Limits());
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(in->n, 4);
  EXPECT_EQ(in->best_of, 4);  // best_of defaults to n
  EXPECT_TRUE(in->prompt_logprobs);
  r.set_best_of(16);
  ASSERT_TRUE(ValidateGenerateRequest(r, Limits()).ok());
  r.set_best_of(3);
  ExpectInvalid(r, "best_of = 3 is invalid: must be in [n = 4, 16]");
  r.set_best_of(17);
  ExpectInvalid(r, "best_of = 17 is invalid: must be in [n = 4, 16]");
  r.clear_best_of();
  r.set_n(0);
  ExpectInvalid(r, "n = 0 is invalid: must be in [1, 16]");
  r.set_n(17);
  ExpectInvalid(r, "n = 17 is invalid: must be in [1, 16]");
}

TEST(CheckContextWindow, NeverTruncatesAndGivesBothNumbers) {
  absl::StatusOr<int32_t> n = CheckContextWindow(60, 4, Limits());
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 4);
  EXPECT_EQ(*CheckContextWindow(60, std::nullopt, Limits()), 4);  // fills the window
  absl::StatusOr<int32_t> over = CheckContextWindow(60, 5, Limits());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(over.status().message(),
            "context_length_exceeded: prompt has 60 tokens and max_new_tokens is 5, together 65 > "
            "the context length of 64 tokens");
  EXPECT_EQ(CheckContextWindow(64, std::nullopt, Limits()).status().message(),
            "context_length_exceeded: prompt has 64 tokens and max_new_tokens is at least 1, "
            "together 65 > the context length of 64 tokens");
}

}  // namespace
}  // namespace tpserve
