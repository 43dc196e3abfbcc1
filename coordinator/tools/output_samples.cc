#include "coordinator/tools/output_samples.h"

#include <optional>

namespace tpserve {
namespace {

OutputParser::Options Tools(ToolCallFormat format) {
  OutputParser::Options o;
  o.tool_call_format = format;
  o.tool_names = {"get_weather", "search"};
  o.call_id_seed = 42;
  return o;
}

OutputParser::Options Reasoning(ReasoningFormat format, bool starts_in,
                                std::optional<ToolCallFormat> tools) {
  OutputParser::Options o = tools.has_value() ? Tools(*tools) : OutputParser::Options{};
  o.reasoning_format = format;
  o.starts_in_reasoning = starts_in;
  return o;
}

// DeepSeek's markers, spelled out once.
const std::string kCallsBegin = "<｜tool▁calls▁begin｜>";
const std::string kCallsEnd = "<｜tool▁calls▁end｜>";
const std::string kCallBegin = "<｜tool▁call▁begin｜>";
const std::string kCallEnd = "<｜tool▁call▁end｜>";
const std::string kSep = "<｜tool▁sep｜>";

std::vector<OutputSample> MakeSamples() {
  const auto H = ToolCallFormat::kHermes;
  const auto L = ToolCallFormat::kLlama3Json;
  const auto M = ToolCallFormat::kMistral;
  const auto D3 = ToolCallFormat::kDeepSeekV3;
  const auto D31 = ToolCallFormat::kDeepSeekV31;
  const std::string weather = R"({"name": "get_weather", "arguments": {"city": "Paris"}})";
  const std::string search = R"({"name": "search", "arguments": {"q": "x", "n": [1, 2]}})";
  const std::string hermes_weather = "<tool_call>\n" + weather + "\n</tool_call>";
  const std::string hermes_search = "<tool_call>\n" + search + "\n</tool_call>";
  const std::pair<std::string, std::string> weather_call = {"get_weather", R"({"city": "Paris"})"};
  const std::pair<std::string, std::string> search_call = {"search", R"({"q": "x", "n": [1, 2]})"};
  const std::string v3_weather = kCallBegin + "function" + kSep +
                                 "get_weather\n```json\n{\"city\": \"Paris\"}\n```" + kCallEnd;
  const std::string v3_search = kCallBegin + "function" + kSep +
                                "search\n```json\n{\"q\": \"x\", \"n\": [1, 2]}\n```" + kCallEnd;
  const std::string v31_weather =
      kCallBegin + "get_weather" + kSep + "{\"city\": \"Paris\"}" + kCallEnd;
  const std::string v31_search =
      kCallBegin + "search" + kSep + "{\"q\": \"x\", \"n\": [1, 2]}" + kCallEnd;

  return {
      // hermes
      {"hermes_plain", Tools(H), "Hello, world!\n  ", "Hello, world!\n  ", "", {}},
      {"hermes_one_call", Tools(H), hermes_weather, "", "", {weather_call}},
      {"hermes_text_then_two_calls",
       Tools(H),
       "Let me check.\n\n" + hermes_weather + "\n" + hermes_search + "\n",
       "Let me check.",
       "",
       {weather_call, search_call}},
      {"hermes_call_then_text",
       Tools(H),
       hermes_weather + "\n\nDone. ",
       "Done. ",
       "",
       {weather_call}},
      {"hermes_malformed_json",
       Tools(H),
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }}\n</tool_call>",
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }}\n</tool_call>",
       "",
       {}},
      {"hermes_unfinished",
       Tools(H),
       "Hi <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par",
       "Hi <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par",
       "",
       {}},
      {"hermes_unknown_function",
       Tools(H),
       "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>",
       "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>",
       "",
       {}},
      {"hermes_json_in_content",
       Tools(H),
       "As JSON: " + weather + "\n",
       "As JSON: " + weather + "\n",
       "",
       {}},
      {"hermes_no_close_tag_at_end",
       Tools(H),
       "<tool_call>\n" + search + "\n</tool_",
       "",
       "",
       {search_call}},
      {"hermes_text_after_json_is_not_a_call",
       Tools(H),
       "<tool_call>\n" + weather + "} oops</tool_call>",
       "<tool_call>\n" + weather + "} oops</tool_call>",
       "",
       {}},
      {"hermes_bad_then_good",
       Tools(H),
       "<tool_call>oops</tool_call> " + hermes_search,
       "<tool_call>oops</tool_call>",
       "",
       {search_call},
       true},
      {"hermes_unicode_and_braces_in_strings",
       Tools(H),
       "Voilà ☀ <tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"Zürich }{ "
       "\\\"東京\\\"\"}}\n</tool_call>",
       "Voilà ☀",
       "",
       {{"search", "{\"q\": \"Zürich }{ \\\"東京\\\"\"}"}}},
      {"hermes_arguments_as_string",
       Tools(H),
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": "
       "\\\"Paris\\\"}\"}\n</tool_call>",
       "",
       "",
       {weather_call}},
      {"hermes_marker_prefix_in_text",
       Tools(H),
       "a <tool b <tool_cal",
       "a <tool b <tool_cal",
       "",
       {}},
      // llama3_json
      {"llama_one_call",
       Tools(L),
       R"({"name": "get_weather", "parameters": {"city": "Paris"}})",
       "",
       "",
       {weather_call}},
      {"llama_python_tag", Tools(L), "<|python_tag|>" + search, "", "", {search_call}},
      {"llama_two_calls",
       Tools(L),
       "\n {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}; " + search + "\n",
       "",
       "",
       {weather_call, search_call}},
      {"llama_json_not_a_tool",
       Tools(L),
       R"({"name": "Alice", "age": 3})",
       R"({"name": "Alice", "age": 3})",
       "",
       {}},
      {"llama_plain", Tools(L), "The weather is {sunny}.", "The weather is {sunny}.", "", {}},
      {"llama_call_then_text",
       Tools(L),
       weather + " is how I would call it",
       weather + " is how I would call it",
       "",
       {}},
      {"llama_unfinished",
       Tools(L),
       R"({"name": "get_weather", "parameters": {"city": "Paris"})",
       R"({"name": "get_weather", "parameters": {"city": "Paris"})",
       "",
       {}},
      {"llama_second_call_bad",
       Tools(L),
       weather + "; {\"name\": \"nope\"}",
       weather + "; {\"name\": \"nope\"}",
       "",
       {}},
      // mistral
      {"mistral_list",
       Tools(M),
       "[TOOL_CALLS][" + weather + ", " +
           R"({"name": "search", "arguments": {"q": "x", "n": [1, 2]}, "id": "abc123XYZ"})" + "]",
       "",
       "",
       {weather_call, search_call}},
      {"mistral_args",
       Tools(M),
       "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}",
       "",
       "",
       {weather_call}},
      {"mistral_args_two_calls",
       Tools(M),
       "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]search[ARGS]{\"q\": \"x\", "
       "\"n\": [1, 2]}",
       "",
       "",
       {weather_call, search_call}},
      {"mistral_call_id",
       Tools(M),
       "Sure. [TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{\"city\": \"Paris\"}",
       "Sure.",
       "",
       {weather_call}},
      {"mistral_bad_name",
       Tools(M),
       "[TOOL_CALLS]get weather[ARGS]{}",
       "[TOOL_CALLS]get weather[ARGS]{}",
       "",
       {}},
      {"mistral_list_with_unknown",
       Tools(M),
       "[TOOL_CALLS][" + weather + R"(, {"name": "x", "arguments": {}}])",
       "[TOOL_CALLS][" + weather + R"(, {"name": "x", "arguments": {}}])",
       "",
       {}},
      // deepseek_v3
      {"deepseek_v3_two_calls",
       Tools(D3),
       "I'll look.\n" + kCallsBegin + v3_weather + "\n" + v3_search + kCallsEnd,
       "I'll look.",
       "",
       {weather_call, search_call}},
      {"deepseek_v3_second_malformed",
       Tools(D3),
       kCallsBegin + v3_weather + "\n" + kCallBegin + "function" + kSep +
           "search\n```json\n{bad}\n```" + kCallEnd + kCallsEnd,
       kCallBegin + "function" + kSep + "search\n```json\n{bad}\n```" + kCallEnd + kCallsEnd,
       "",
       {weather_call},
       true},
      {"deepseek_v3_stopped_before_end_markers",
       Tools(D3),
       kCallsBegin + kCallBegin + "function" + kSep +
           "get_weather\n```json\n{\"city\": \"Paris\"}\n``",
       "",
       "",
       {weather_call}},
      // deepseek_v31
      {"deepseek_v31_two_calls_then_text",
       Tools(D31),
       kCallsBegin + v31_weather + v31_search + kCallsEnd + "\nDone.",
       "Done.",
       "",
       {weather_call, search_call}},
      {"deepseek_v31_unfinished",
       Tools(D31),
       kCallsBegin + kCallBegin + "get_weather" + kSep + "{\"city\": ",
       kCallsBegin + kCallBegin + "get_weather" + kSep + "{\"city\": ",
       "",
       {}},
      // reasoning
      {"qwen3_think_then_call",
       Reasoning(ReasoningFormat::kQwen3, false, H),
       "<think>\nI need the weather.\n</think>\n\n" + hermes_weather,
       "",
       "I need the weather.",
       {weather_call}},
      {"qwen3_call_inside_think_is_reasoning",
       Reasoning(ReasoningFormat::kQwen3, false, H),
       "<think>maybe " + hermes_weather + "?</think>It is sunny.",
       "It is sunny.",
       "maybe " + hermes_weather + "?",
       {}},
      {"qwen3_no_think",
       Reasoning(ReasoningFormat::kQwen3, false, H),
       "  Hello <think>x</think>",
       "  Hello <think>x</think>",
       "",
       {}},
      {"r1_starts_inside",
       Reasoning(ReasoningFormat::kDeepSeekR1, true, std::nullopt),
       "Two plus two.\n</think>\n\nThe answer is 4.",
       "The answer is 4.",
       "Two plus two.",
       {}},
      {"r1_repeats_open_tag",
       Reasoning(ReasoningFormat::kDeepSeekR1, true, D3),
       "<think>\nHmm.\n</think>\n\n" + kCallsBegin + v3_search + kCallsEnd,
       "",
       "Hmm.",
       {search_call}},
      {"r1_never_closes",
       Reasoning(ReasoningFormat::kDeepSeekR1, true, std::nullopt),
       "Still thinking about </thi",
       "",
       "Still thinking about </thi",
       {}},
  };
}

}  // namespace

const std::vector<OutputSample>& OutputSamples() {
  static const std::vector<OutputSample>* samples = new std::vector<OutputSample>(MakeSamples());
  return *samples;
}

}  // namespace tpserve
