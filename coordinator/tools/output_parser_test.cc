// The streaming promise over the sample corpus: every way of cutting each output into chunks
// (all 2- and 3-way cuts at character boundaries, one character at a time, random cuts) gives
// deltas that add up to the whole output's parse, which is the expected one.
#include "coordinator/tools/output_parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "coordinator/tokenizer/utf8.h"
#include "coordinator/tools/output_samples.h"
#include "nlohmann/json.hpp"

namespace tpserve {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Not;

// Character boundaries of `text` (UTF-8), 1 .. size-1.
std::vector<size_t> Cuts(const std::string& text) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) cuts.push_back(i);
  }
  return cuts;
}

struct Streamed {
  ParsedOutput output;
  bool saw_tool_calls = false;
  std::string problem;  // a delta that breaks the delta contract, if any
};

// Feeds the chunks text[cuts[i-1], cuts[i]) and finishes.
Streamed Stream(const OutputSample& s, const std::vector<size_t>& cuts) {
  OutputParser parser(s.options);
  Streamed r;
  int calls_seen = 0;
  auto add = [&](const ParsedDelta& d) {
    for (const ToolCallDelta& c : d.tool_calls) {
      const bool first = c.index == calls_seen;
      if (first != (!c.id.empty() && !c.name.empty())) r.problem = "id/name not on first delta";
      if (c.index > calls_seen) r.problem = "index skipped";
      if (first) ++calls_seen;
    }
    if (!IsValidUtf8(d.content) || !IsValidUtf8(d.reasoning)) r.problem = "split a character";
    AppendDelta(d, &r.output);
  };
  size_t from = 0;
  for (size_t cut : cuts) {
    add(parser.Feed(std::string_view(s.text).substr(from, cut - from)));
    from = cut;
  }
  add(parser.Feed(std::string_view(s.text).substr(from)));
  add(parser.Finish());
  r.saw_tool_calls = parser.saw_tool_calls();
  return r;
}

// Asserts that `got` equals `want` exactly (ids included).
::testing::AssertionResult Same(const ParsedOutput& got, const ParsedOutput& want) {
  if (got.content != want.content) {
    return ::testing::AssertionFailure()
           << "content \"" << got.content << "\" != \"" << want.content << "\"";
  }
  if (got.reasoning != want.reasoning) {
    return ::testing::AssertionFailure()
           << "reasoning \"" << got.reasoning << "\" != \"" << want.reasoning << "\"";
  }
  if (got.tool_calls.size() != want.tool_calls.size()) {
    return ::testing::AssertionFailure()
           << got.tool_calls.size() << " calls, want " << want.tool_calls.size();
  }
  for (size_t i = 0; i < got.tool_calls.size(); ++i) {
    const ToolCall& g = got.tool_calls[i];
    const ToolCall& w = want.tool_calls[i];
    if (g.id != w.id || g.name != w.name || g.arguments != w.arguments) {
      return ::testing::AssertionFailure()
             << "call " << i << ": " << g.id << " " << g.name << " " << g.arguments
             << " != " << w.id << " " << w.name << " " << w.arguments;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace

void PrintTo(const OutputSample& s, std::ostream* os) { *os << s.name; }

namespace {

class OutputSampleTest : public ::testing::TestWithParam<OutputSample> {};

TEST_P(OutputSampleTest, WholeOutputParsesAsExpected) {
  const OutputSample& s = GetParam();
  const ParsedOutput whole = ParseOutput(s.options, s.text);
  EXPECT_EQ(whole.content, s.content);
  EXPECT_EQ(whole.reasoning, s.reasoning);
  std::vector<std::pair<std::string, std::string>> calls;
  for (const ToolCall& c : whole.tool_calls) {
    calls.emplace_back(c.name, c.arguments);
    EXPECT_TRUE(nlohmann::json::accept(c.arguments)) << c.arguments;
    EXPECT_TRUE(nlohmann::json::parse(c.arguments).is_object()) << c.arguments;
  }
  EXPECT_THAT(calls, ElementsAreArray(s.calls));
  if (!s.calls.empty() && !s.malformed_call_too) {
    // Well-formed calls leave no marker behind.
    for (const char* marker : {"<tool_call>", "</tool_call>", "[TOOL_CALLS]", "<|python_tag|>",
                               "<｜tool▁call▁begin｜>", "<｜tool▁calls▁end｜>", "[ARGS]"}) {
      EXPECT_THAT(whole.content, Not(HasSubstr(marker)));
    }
  }
}

TEST_P(OutputSampleTest, EveryTwoAndThreeWayCutStreamsTheSame) {
  const OutputSample& s = GetParam();
  const ParsedOutput whole = ParseOutput(s.options, s.text);
  const std::vector<size_t> cuts = Cuts(s.text);
  int checked = 0;
  for (size_t i = 0; i < cuts.size(); ++i) {
    const Streamed two = Stream(s, {cuts[i]});
    ASSERT_TRUE(Same(two.output, whole)) << "cut at " << cuts[i];
    ASSERT_EQ(two.problem, "");
    ASSERT_EQ(two.saw_tool_calls, !whole.tool_calls.empty());
    for (size_t j = i + 1; j < cuts.size(); ++j) {
      const Streamed three = Stream(s, {cuts[i], cuts[j]});
      ASSERT_TRUE(Same(three.output, whole)) << "cuts at " << cuts[i] << ", " << cuts[j];
      ASSERT_EQ(three.problem, "");
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<int>(cuts.size() * (cuts.size() - 1) / 2));
}

TEST_P(OutputSampleTest, OneCharacterAtATimeAndRandomCutsStreamTheSame) {
  const OutputSample& s = GetParam();
  const ParsedOutput whole = ParseOutput(s.options, s.text);
  const std::vector<size_t> cuts = Cuts(s.text);
  const Streamed each = Stream(s, cuts);
  EXPECT_TRUE(Same(each.output, whole));
  EXPECT_EQ(each.problem, "");
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<size_t> some;
    for (size_t c : cuts) {
      if (rng() % 4 == 0) some.push_back(c);
    }
    const Streamed r = Stream(s, some);
    ASSERT_TRUE(Same(r.output, whole)) << "trial " << trial;
    ASSERT_EQ(r.problem, "");
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, OutputSampleTest, ::testing::ValuesIn(OutputSamples()),
                         [](const ::testing::TestParamInfo<OutputSample>& info) {
                           return info.param.name;
                         });

// Random outputs built from the pieces the parsers care about (markers whole and cut, call
// JSON whole and cut, names, whitespace, multi-byte text), for every format with and without
// reasoning: chunked at random, each parses as it does whole, and every call's arguments are
// a JSON object.
TEST(OutputParser, RandomOutputsStreamTheSame) {
  const std::vector<std::string> pieces = {
      "Hi", " ", "\n", "é東", "{", "}", "[", "]", "\"", ",", ":", ";", "1", "x", "<", ">",
      "<think>", "</think>", "</thi", "<tool_call>", "</tool_call>", "<tool_", "<|python_tag|>",
      "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "abc123XYZ", "search", "get_weather", "rm",
      "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>",
      "<｜tool▁calls▁end｜>", "function", "```json", "```", "{\"q\": \"x\"}",
      "{\"name\": \"search\", \"arguments\": {\"q\": \"}{\"}}",
      "{\"name\": \"search\", \"parameters\": {}}", "{\"name\": \"rm\"}", "{\"name\": "};
  // Whole calls of each format, which the generator also cuts and corrupts.
  const std::map<ToolCallFormat, std::vector<std::string>> calls = {
      {ToolCallFormat::kHermes,
       {"<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"é\"}}\n</tool_call>",
        "<tool_call>{\"name\": \"get_weather\"}</tool_call>"}},
      {ToolCallFormat::kLlama3Json,
       {"{\"name\": \"search\", \"parameters\": {\"q\": \"é\"}}", "; ",
        "<|python_tag|>{\"name\": \"get_weather\", \"arguments\": {}}"}},
      {ToolCallFormat::kMistral,
       {"[TOOL_CALLS]search[ARGS]{\"q\": \"é\"}",
        "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {}}]"}},
      {ToolCallFormat::kDeepSeekV3,
       {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>",
        "<｜tool▁call▁begin｜>function<｜tool▁sep｜>search\n```json\n{\"q\": "
        "\"é\"}\n```<｜tool▁call▁end｜>"}},
      {ToolCallFormat::kDeepSeekV31,
       {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>",
        "<｜tool▁call▁begin｜>search<｜tool▁sep｜>{\"q\": \"é\"}<｜tool▁call▁end｜>"}},
  };
  std::mt19937 rng(11);
  std::map<ToolCallFormat, int> calls_found;
  for (const auto& [format, format_calls] : calls) {
    for (int reasoning = 0; reasoning < 3; ++reasoning) {
      OutputSample s;
      s.options.tool_call_format = format;
      s.options.tool_names = {"get_weather", "search"};
      if (reasoning > 0) s.options.reasoning_format = ReasoningFormat::kDeepSeekR1;
      s.options.starts_in_reasoning = reasoning == 2;
      for (int trial = 0; trial < 300; ++trial) {
        s.text.clear();
        const int n = 1 + rng() % 8;
        for (int i = 0; i < n; ++i) {
          const int kind = rng() % 10;
          if (kind < 4) {
            std::string call = format_calls[rng() % format_calls.size()];
            if (kind == 0) call.erase(rng() % call.size(), 1);  // corrupt (may split a char)
            if (kind == 1) call.resize(rng() % call.size());    // cut
            if (!IsValidUtf8(call)) continue;
            s.text += call;
          } else {
            s.text += pieces[rng() % pieces.size()];
          }
        }
        const ParsedOutput whole = ParseOutput(s.options, s.text);
        calls_found[format] += whole.tool_calls.size();
        for (const ToolCall& c : whole.tool_calls) {
          ASSERT_TRUE(nlohmann::json::accept(c.arguments)) << s.text;
          ASSERT_TRUE(nlohmann::json::parse(c.arguments).is_object()) << s.text;
        }
        const std::vector<size_t> cuts = Cuts(s.text);
        for (int split = 0; split < 8; ++split) {
          std::vector<size_t> some;
          for (size_t c : cuts) {
            if (split == 0 || rng() % 3 == 0) some.push_back(c);
          }
          const Streamed r = Stream(s, some);
          ASSERT_TRUE(Same(r.output, whole)) << ToolCallFormatName(format) << " reasoning "
                                             << reasoning << ": " << s.text;
          ASSERT_EQ(r.problem, "") << s.text;
        }
      }
    }
  }
  for (const auto& [format, found] : calls_found) {
    EXPECT_GT(found, 10) << ToolCallFormatName(format);  // the pieces do make calls
  }
}

TEST(OutputParser, WithNeitherParserEverythingIsContentAtOnce) {
  OutputParser parser(OutputParser::Options{});
  EXPECT_EQ(parser.Feed("<tool_call> <think> ").content, "<tool_call> <think> ");
  EXPECT_TRUE(parser.Finish().empty());
  EXPECT_FALSE(parser.saw_tool_calls());
}

TEST(OutputParser, ReasoningStreamsBeforeItCloses) {
  OutputParser::Options o;
  o.reasoning_format = ReasoningFormat::kQwen3;
  OutputParser parser(o);
  EXPECT_TRUE(parser.Feed("<thi").empty());
  EXPECT_EQ(parser.Feed("nk>\nStep one. ").reasoning, "Step one.");
  EXPECT_EQ(parser.Feed("Step two.</").reasoning, " Step two.");
  ParsedDelta d = parser.Feed("think>\n\nAnswer");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "Answer");
}

TEST(ReasoningParser, PromptOpensReasoning) {
  EXPECT_TRUE(PromptOpensReasoning("<｜Assistant｜><think>\n"));
  EXPECT_TRUE(PromptOpensReasoning("<|im_start|>assistant\n<think>"));
  EXPECT_FALSE(PromptOpensReasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(PromptOpensReasoning("<｜Assistant｜></think>"));
  EXPECT_FALSE(PromptOpensReasoning(""));
}

TEST(AppendDelta, LaterDeltasOfACallAppendItsArguments) {
  ParsedOutput out;
  AppendDelta(ParsedDelta{"a", "", {{0, "call_1", "f", "{\"x\""}}}, &out);
  AppendDelta(ParsedDelta{"b", "r", {{0, "", "", ": 1}"}, {1, "call_2", "g", "{}"}}}, &out);
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.content, "ab");
  EXPECT_EQ(out.reasoning, "r");
  EXPECT_EQ(out.tool_calls[0].arguments, "{\"x\": 1}");
  EXPECT_EQ(out.tool_calls[1].name, "g");
}

}  // namespace
}  // namespace tpserve
