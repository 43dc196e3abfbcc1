// When the tool-call parser decides, what it holds back, and its ids. (What it decides, over
// every chunking, is output_parser_test.cc's corpus.)
#include "coordinator/tools/tool_call_parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace tpserve {
namespace {

using ::testing::MatchesRegex;
using ::testing::SizeIs;

ToolCallParser Parser(ToolCallFormat format, uint64_t seed = 1) {
  return ToolCallParser({format, {"get_weather", "search"}, seed});
}

TEST(ToolCallParser, HermesCallIsEmittedWhenItsCloseTagArrives) {
  ToolCallParser p = Parser(ToolCallFormat::kHermes);
  EXPECT_EQ(p.Feed("Checking.\n<tool_").content, "Checking.");
  EXPECT_EQ(p.Feed("call>\n{\"name\": \"search\", ").content, "");
  ToolCallParser::Delta d = p.Feed("\"arguments\": {\"q\": \"x\"}}\n</tool_call");
  EXPECT_THAT(d.tool_calls, SizeIs(0));  // "</tool_call" could still be "</tool_callx"
  d = p.Feed(">");
  ASSERT_THAT(d.tool_calls, SizeIs(1));
  EXPECT_EQ(d.tool_calls[0].index, 0);
  EXPECT_EQ(d.tool_calls[0].name, "search");
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"q\": \"x\"}");
  EXPECT_TRUE(p.saw_tool_calls());
  EXPECT_EQ(p.Feed("\n\nMore text").content, "More text");
  EXPECT_EQ(p.Finish().content, "");
  EXPECT_EQ(p.Feed("after finish").content, "");
}

TEST(ToolCallParser, PlainTextIsNotHeldBackExceptTrailingWhitespaceAndMarkerPrefixes) {
  ToolCallParser p = Parser(ToolCallFormat::kHermes);
  EXPECT_EQ(p.Feed("The answer").content, "The answer");
  EXPECT_EQ(p.Feed(" is 4. ").content, " is 4.");
  EXPECT_EQ(p.Feed("<").content, "");
  EXPECT_EQ(p.Feed("b>bold</b>").content, " <b>bold</b>");
  EXPECT_EQ(p.Finish().content, "");
  EXPECT_FALSE(p.saw_tool_calls());
}

TEST(ToolCallParser, WhitespaceBeforeAMarkerThatTurnsOutNotACallIsKept) {
  ToolCallParser p = Parser(ToolCallFormat::kHermes);
  EXPECT_EQ(p.Feed("x \n<tool_call>").content, "x");
  EXPECT_EQ(p.Feed("not json").content, " \n<tool_call>not json");
}

TEST(ToolCallParser, MistralArgsCallIsEmittedAtItsClosingBrace) {
  ToolCallParser p = Parser(ToolCallFormat::kMistral);
  EXPECT_THAT(p.Feed("[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Pa").tool_calls, SizeIs(0));
  ToolCallParser::Delta d = p.Feed("ris\"}");
  ASSERT_THAT(d.tool_calls, SizeIs(1));
  EXPECT_THAT(d.tool_calls[0].id, MatchesRegex("[A-Za-z0-9]{9}"));
}

TEST(ToolCallParser, DeepSeekCallIsEmittedAtItsCallEndMarker) {
  ToolCallParser p = Parser(ToolCallFormat::kDeepSeekV31);
  EXPECT_THAT(
      p.Feed("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{}").tool_calls,
      SizeIs(0));
  EXPECT_THAT(p.Feed("<｜tool▁call▁end｜>").tool_calls, SizeIs(1));
  EXPECT_EQ(p.Feed("<｜tool▁calls▁end｜>").content, "");
}

TEST(ToolCallParser, LlamaCallsWaitForTheEndOfTheOutput) {
  // Text after the JSON would make all of it content, so nothing is certain before Finish.
  ToolCallParser p = Parser(ToolCallFormat::kLlama3Json);
  EXPECT_THAT(p.Feed("{\"name\": \"search\", \"parameters\": {}}").tool_calls, SizeIs(0));
  ToolCallParser::Delta d = p.Finish();
  ASSERT_THAT(d.tool_calls, SizeIs(1));
  EXPECT_EQ(d.tool_calls[0].arguments, "{}");
}

TEST(ToolCallParser, LlamaTextIsReleasedAsSoonAsItCannotBeACall) {
  ToolCallParser p = Parser(ToolCallFormat::kLlama3Json);
  EXPECT_EQ(p.Feed("  ").content, "");
  EXPECT_EQ(p.Feed("Sure").content, "  Sure");
  EXPECT_EQ(p.Feed(", {\"name\": \"search\"}").content, ", {\"name\": \"search\"}");
}

TEST(ToolCallParser, LlamaWithoutToolNamesHasNoCalls) {
  ToolCallParser p({ToolCallFormat::kLlama3Json, {}, 1});
  const std::string text = "{\"name\": \"search\", \"parameters\": {}}";
  EXPECT_EQ(p.Feed(text).content, text);
}

TEST(ToolCallParser, HermesWithoutToolNamesTakesAnyName) {
  ToolCallParser p({ToolCallFormat::kHermes, {}, 1});
  ToolCallParser::Delta d = p.Feed("<tool_call>{\"name\": \"anything\"}</tool_call>");
  ASSERT_THAT(d.tool_calls, SizeIs(1));
  EXPECT_EQ(d.tool_calls[0].name, "anything");
  EXPECT_EQ(d.tool_calls[0].arguments, "{}");
}

TEST(ToolCallParser, IdsAreSeededAndShapedLikeOpenAis) {
  const std::string two =
      "<tool_call>{\"name\": \"search\"}</tool_call>"
      "<tool_call>{\"name\": \"search\"}</tool_call>";
  ToolCallParser a = Parser(ToolCallFormat::kHermes, 5);
  ToolCallParser b = Parser(ToolCallFormat::kHermes, 5);
  ToolCallParser c = Parser(ToolCallFormat::kHermes, 6);
  ToolCallParser::Delta da = a.Feed(two), db = b.Feed(two), dc = c.Feed(two);
  ASSERT_THAT(da.tool_calls, SizeIs(2));
  EXPECT_THAT(da.tool_calls[0].id, MatchesRegex("call_[A-Za-z0-9]{24}"));
  EXPECT_NE(da.tool_calls[0].id, da.tool_calls[1].id);
  EXPECT_EQ(da.tool_calls[1].index, 1);
  EXPECT_EQ(da.tool_calls[0].id, db.tool_calls[0].id);
  EXPECT_NE(da.tool_calls[0].id, dc.tool_calls[0].id);
}

TEST(ToolCallParser, ALongCallFedAByteAtATimeIsScannedOnce) {
  // 200 KB of arguments one byte per Feed: rescanning from the call's start each time would
  // be 2e10 steps; scanning once is instant.
  std::string value(200000, 'a');
  const std::string text =
      "<tool_call>{\"name\": \"search\", \"arguments\": {\"q\": \"" + value + "\"}}</tool_call>";
  ToolCallParser p = Parser(ToolCallFormat::kHermes);
  const auto start = std::chrono::steady_clock::now();
  int calls = 0;
  for (char c : text) calls += p.Feed(std::string_view(&c, 1)).tool_calls.size();
  EXPECT_EQ(calls, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(ToolCallParser, ProseAfterAMarkerIsReleasedWithoutWaitingForTheEnd) {
  // A letter outside a string ends any hope of JSON: no need to hold the rest to Finish.
  ToolCallParser p = Parser(ToolCallFormat::kHermes);
  EXPECT_EQ(p.Feed("Use <tool_call> {like this").content, "Use <tool_call> {like this");
}

}  // namespace
}  // namespace tpserve
