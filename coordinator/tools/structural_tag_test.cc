// The structural tags, checked three ways: their JSON has the shape XGrammar 0.2.8 reads
// (cpp/structural_tag.cc), XGrammar compiles them, and the outputs a compiled tag accepts are
// the ones the parser reads as the same calls (and what it refuses, the request forbids).
#include "coordinator/tools/structural_tag.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "coordinator/tools/output_parser.h"
#include "nlohmann/json.hpp"
#include "xgrammar/xgrammar.h"

namespace tpserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

const char kWeatherSchema[] =
    R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})";
const char kSearchSchema[] =
    R"({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})";

StructuralTagRequest Request(ToolCallFormat format, ToolChoiceMode mode = ToolChoiceMode::kAuto,
                             bool parallel = true) {
  StructuralTagRequest r;
  r.format = format;
  r.tools = {{"get_weather", kWeatherSchema}, {"search", kSearchSchema}};
  r.mode = mode;
  r.named = mode == ToolChoiceMode::kNamed ? "get_weather" : "";
  r.parallel_tool_calls = parallel;
  return r;
}

Json Tag(const StructuralTagRequest& r) {
  absl::StatusOr<std::string> tag = ToolCallStructuralTag(r);
  EXPECT_TRUE(tag.ok()) << tag.status();
  return tag.ok() ? Json::parse(*tag) : Json();
}

// A vocabulary of single bytes (and a stop token), so any text can be matched.
xgrammar::GrammarCompiler& Compiler() {
  static xgrammar::GrammarCompiler* compiler = [] {
    std::vector<std::string> vocab;
    for (int b = 1; b < 256; ++b) vocab.push_back(std::string(1, static_cast<char>(b)));
    vocab.push_back("</s>");
    xgrammar::TokenizerInfo info(vocab, xgrammar::VocabType::RAW, static_cast<int>(vocab.size()),
                                 std::vector<int32_t>{static_cast<int32_t>(vocab.size() - 1)});
    return new xgrammar::GrammarCompiler(info, /*max_threads=*/1, /*cache_enabled=*/false);
  }();
  return *compiler;
}

// Whether the tag's grammar accepts `output` as a whole generation.
bool Accepts(const StructuralTagRequest& r, const std::string& output) {
  xgrammar::GrammarMatcher matcher(Compiler().CompileStructuralTag(*ToolCallStructuralTag(r)));
  return matcher.AcceptString(output) && matcher.IsCompleted();
}

// The (name, arguments) the parser reads from `output`.
std::vector<std::pair<std::string, std::string>> ParsedCalls(const StructuralTagRequest& r,
                                                             const std::string& output) {
  OutputParser::Options o;
  o.tool_call_format = r.format;
  o.reasoning_format = r.reasoning;
  o.starts_in_reasoning = r.starts_in_reasoning;
  for (const ToolSpec& t : r.tools) o.tool_names.push_back(t.name);
  std::vector<std::pair<std::string, std::string>> calls;
  for (const ToolCall& c : ParseOutput(o, output).tool_calls)
    calls.emplace_back(c.name, c.arguments);
  return calls;
}

const std::pair<std::string, std::string> kWeatherCall = {"get_weather", R"({"city": "Paris"})"};
const std::pair<std::string, std::string> kSearchCall = {"search", R"({"q": "x"})"};

TEST(ToolCallSyntax, HermesIsQwensTemplate) {
  CallSyntax s = ToolCallSyntax(ToolCallFormat::kHermes);
  EXPECT_EQ(s.begin_prefix + "f" + s.begin_suffix + "{}" + s.end,
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>");
  s = ToolCallSyntax(ToolCallFormat::kDeepSeekV31);
  EXPECT_EQ(s.section_begin + s.begin_prefix + "f" + s.begin_suffix + "{}" + s.end + s.section_end,
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
            "<｜tool▁calls▁end｜>");
}

TEST(ToolCallStructuralTag, ShapeOfEachMode) {
  Json auto_tag = Tag(Request(ToolCallFormat::kHermes));
  EXPECT_EQ(auto_tag["type"], "structural_tag");
  const Json& f = auto_tag["format"];
  EXPECT_EQ(f["type"], "triggered_tags");
  EXPECT_EQ(f["triggers"], Json::array({"<tool_call>"}));
  EXPECT_EQ(f["at_least_one"], false);
  EXPECT_EQ(f["stop_after_first"], false);
  ASSERT_EQ(f["tags"].size(), 2u);
  EXPECT_EQ(f["tags"][0]["type"], "tag");
  EXPECT_EQ(f["tags"][0]["begin"], "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
  EXPECT_EQ(f["tags"][0]["content"]["type"], "json_schema");
  EXPECT_EQ(f["tags"][0]["content"]["json_schema"], Json::parse(kWeatherSchema));
  EXPECT_EQ(f["tags"][0]["end"], "}\n</tool_call>");

  Json required = Tag(Request(ToolCallFormat::kHermes, ToolChoiceMode::kRequired, false));
  EXPECT_EQ(required["format"]["type"], "tags_with_separator");
  EXPECT_EQ(required["format"]["separator"], "\n");
  EXPECT_EQ(required["format"]["at_least_one"], true);
  EXPECT_EQ(required["format"]["stop_after_first"], true);

  Json named = Tag(Request(ToolCallFormat::kHermes, ToolChoiceMode::kNamed));
  EXPECT_EQ(named["format"]["type"], "tag");
  EXPECT_EQ(named["format"]["begin"], "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
}

TEST(ToolCallStructuralTag, NamesAreEscapedInsideJson) {
  StructuralTagRequest r = Request(ToolCallFormat::kHermes, ToolChoiceMode::kNamed);
  r.tools = {{"a\"b", ""}};
  r.named = "a\"b";
  Json tag = Tag(r);
  EXPECT_EQ(tag["format"]["begin"], "<tool_call>\n{\"name\": \"a\\\"b\", \"arguments\": ");
  EXPECT_EQ(tag["format"]["content"]["json_schema"], Json::parse(R"({"type": "object"})"));
}

TEST(ToolCallStructuralTag, RefusesWhatCannotBeBuilt) {
  StructuralTagRequest r = Request(ToolCallFormat::kHermes);
  r.tools.clear();
  EXPECT_EQ(ToolCallStructuralTag(r).status().message(), "tools: no functions to call");
  r = Request(ToolCallFormat::kHermes);
  r.tools[1].parameters = "[1, 2]";
  EXPECT_EQ(ToolCallStructuralTag(r).status().message(),
            "tools[1].parameters: not a JSON Schema (a JSON object or boolean)");
  r.tools[1].parameters = "{not json";
  EXPECT_EQ(ToolCallStructuralTag(r).status().code(), absl::StatusCode::kInvalidArgument);
  r = Request(ToolCallFormat::kHermes, ToolChoiceMode::kNamed);
  r.named = "nope";
  EXPECT_EQ(ToolCallStructuralTag(r).status().message(),
            "tool_choice: function \"nope\" is not one of the request's tools");
}

TEST(ToolCallStructuralTag, XGrammarReadsEveryFormatModeAndOption) {
  for (ToolCallFormat format :
       {ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json, ToolCallFormat::kMistral,
        ToolCallFormat::kDeepSeekV3, ToolCallFormat::kDeepSeekV31}) {
    for (ToolChoiceMode mode :
         {ToolChoiceMode::kAuto, ToolChoiceMode::kRequired, ToolChoiceMode::kNamed}) {
      for (bool parallel : {true, false}) {
        for (int reasoning = 0; reasoning < 3; ++reasoning) {
          StructuralTagRequest r = Request(format, mode, parallel);
          if (reasoning > 0) r.reasoning = ReasoningFormat::kQwen3;
          r.starts_in_reasoning = reasoning == 2;
          const std::string tag = *ToolCallStructuralTag(r);
          auto grammar = xgrammar::Grammar::FromStructuralTag(tag);
          std::string error;
          if (grammar.index() != 0) {
            std::visit([&](const auto& e) { error = e.what(); },
                       std::get<xgrammar::StructuralTagError>(grammar));
          }
          EXPECT_EQ(error, "") << ToolCallFormatName(format) << " mode " << int(mode)
                               << " parallel " << parallel << " reasoning " << reasoning << "\n"
                               << tag;
        }
      }
    }
  }
}

// Outputs each grammar accepts, and the calls the parser must read from them.
struct Case {
  std::string output;
  std::vector<std::pair<std::string, std::string>> calls;
};

void ExpectAcceptedAndParsed(const StructuralTagRequest& r, const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    EXPECT_TRUE(Accepts(r, c.output)) << c.output;
    EXPECT_EQ(ParsedCalls(r, c.output), c.calls) << c.output;
  }
}

void ExpectRefused(const StructuralTagRequest& r, const std::vector<std::string>& outputs) {
  for (const std::string& o : outputs) EXPECT_FALSE(Accepts(r, o)) << o;
}

const std::string kHermesWeather =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
const std::string kHermesSearch =
    "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}}\n</tool_call>";

TEST(ToolCallStructuralTag, HermesAuto) {
  const StructuralTagRequest r = Request(ToolCallFormat::kHermes);
  ExpectAcceptedAndParsed(r,
                          {{"Just text.", {}},
                           {"Let me see. " + kHermesWeather, {kWeatherCall}},
                           {kHermesWeather + "\n" + kHermesSearch, {kWeatherCall, kSearchCall}}});
  ExpectRefused(r, {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": 3}}\n"
                    "</tool_call>",
                    "<tool_call>\n{\"name\": \"rm\", \"arguments\": {}}\n</tool_call>"});
  ExpectRefused(Request(ToolCallFormat::kHermes, ToolChoiceMode::kAuto, false),
                {kHermesWeather + "\n" + kHermesSearch});
}

TEST(ToolCallStructuralTag, HermesRequiredAndNamed) {
  StructuralTagRequest r = Request(ToolCallFormat::kHermes, ToolChoiceMode::kRequired);
  ExpectAcceptedAndParsed(r,
                          {{kHermesSearch, {kSearchCall}},
                           {kHermesWeather + "\n" + kHermesSearch, {kWeatherCall, kSearchCall}}});
  ExpectRefused(r, {"Just text.", "Hi " + kHermesSearch, ""});
  ExpectRefused(Request(ToolCallFormat::kHermes, ToolChoiceMode::kRequired, false),
                {kHermesWeather + "\n" + kHermesSearch});
  r = Request(ToolCallFormat::kHermes, ToolChoiceMode::kNamed);
  ExpectAcceptedAndParsed(r, {{kHermesWeather, {kWeatherCall}}});
  ExpectRefused(r, {kHermesSearch, kHermesWeather + "\n" + kHermesWeather});
}

TEST(ToolCallStructuralTag, HermesAfterReasoning) {
  StructuralTagRequest r = Request(ToolCallFormat::kHermes, ToolChoiceMode::kRequired);
  r.reasoning = ReasoningFormat::kQwen3;
  ExpectAcceptedAndParsed(
      r, {{"<think>\nWeather first.\n</think>\n\n" + kHermesWeather, {kWeatherCall}},
          {kHermesWeather, {kWeatherCall}}});
  r.starts_in_reasoning = true;
  ExpectAcceptedAndParsed(r, {{"Weather first.\n</think>\n\n" + kHermesWeather, {kWeatherCall}}});
  ExpectRefused(r, {kHermesWeather});
}

TEST(ToolCallStructuralTag, LlamaCallsOnlyAsTheWholeOutput) {
  const std::string weather = R"({"name": "get_weather", "parameters": {"city": "Paris"}})";
  const std::string search = R"({"name": "search", "parameters": {"q": "x"}})";
  StructuralTagRequest r = Request(ToolCallFormat::kLlama3Json);
  ExpectAcceptedAndParsed(r, {{"It is sunny.", {}},
                              {weather, {kWeatherCall}},
                              {weather + "; " + search, {kWeatherCall, kSearchCall}}});
  ExpectRefused(r, {"Calling: " + weather, R"({"name": "get_weather", "parameters": {}})"});
  r = Request(ToolCallFormat::kLlama3Json, ToolChoiceMode::kRequired, false);
  ExpectAcceptedAndParsed(r, {{search, {kSearchCall}}});
  ExpectRefused(r, {"It is sunny.", weather + "; " + search});
}

TEST(ToolCallStructuralTag, MistralEitherForm) {
  const std::string args_form =
      "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]search[ARGS]{\"q\": \"x\"}";
  const std::string list_form =
      "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, "
      "{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}}]";
  for (ToolChoiceMode mode : {ToolChoiceMode::kAuto, ToolChoiceMode::kRequired}) {
    ExpectAcceptedAndParsed(
        Request(ToolCallFormat::kMistral, mode),
        {{args_form, {kWeatherCall, kSearchCall}}, {list_form, {kWeatherCall, kSearchCall}}});
  }
  ExpectAcceptedAndParsed(Request(ToolCallFormat::kMistral),
                          {{"Sure.[TOOL_CALLS]search[ARGS]{\"q\": \"x\"}", {kSearchCall}}});
  ExpectRefused(Request(ToolCallFormat::kMistral, ToolChoiceMode::kRequired, false),
                {args_form, list_form, "Sure."});
  ExpectAcceptedAndParsed(Request(ToolCallFormat::kMistral, ToolChoiceMode::kNamed),
                          {{"[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}", {kWeatherCall}}});
}

TEST(ToolCallStructuralTag, DeepSeekSections) {
  const std::string v3 =
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
      "{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>"
      "search\n```json\n{\"q\": \"x\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  ExpectAcceptedAndParsed(Request(ToolCallFormat::kDeepSeekV3),
                          {{"Checking. " + v3, {kWeatherCall, kSearchCall}}, {"No calls.", {}}});
  ExpectAcceptedAndParsed(Request(ToolCallFormat::kDeepSeekV3, ToolChoiceMode::kRequired),
                          {{v3, {kWeatherCall, kSearchCall}}});
  const std::string v31 =
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}"
      "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  for (ToolChoiceMode mode :
       {ToolChoiceMode::kAuto, ToolChoiceMode::kRequired, ToolChoiceMode::kNamed}) {
    ExpectAcceptedAndParsed(Request(ToolCallFormat::kDeepSeekV31, mode, false),
                            {{v31, {kWeatherCall}}});
  }
  ExpectRefused(Request(ToolCallFormat::kDeepSeekV31, ToolChoiceMode::kNamed),
                {"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{\"q\": \"x\"}"
                 "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"});
}

}  // namespace
}  // namespace tpserve
