#include "coordinator/tools/structural_tag.h"

#include <utility>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "base/str_cat.h"
#include "nlohmann/json.hpp"

namespace tpserve {
namespace {

// Ordered: XGrammar generates object properties in the order the schema declares them.
using Json = nlohmann::ordered_json;
namespace m = tool_markers;

struct Tool {
  std::string name;
  Json schema;
};

std::string NameText(const CallSyntax& syntax, const std::string& name) {
  if (!syntax.name_is_json) return name;
  const std::string quoted = Json(name).dump();
  return quoted.substr(1, quoted.size() - 2);
}

// XGrammar compiles a tag's schemas with free whitespace between JSON tokens; a model that
// starts emitting blanks could then go on until max_tokens. At most this many in a row.
constexpr int kMaxWhitespaceRun = 2;

Json CallTag(const CallSyntax& syntax, const Tool& tool, std::string_view before = "",
             std::string_view after = "") {
  return Json{{"type", "tag"},
              {"begin", StrCat(before, syntax.begin_prefix, NameText(syntax, tool.name),
                               syntax.begin_suffix)},
              {"content", Json{{"type", "json_schema"},
                                {"json_schema", tool.schema},
                                {"max_whitespace_cnt", kMaxWhitespaceRun}}},
              {"end", StrCat(syntax.end, after)}};
}

Json Calls(Json tags, std::string_view separator, bool parallel) {
  return Json{{"type", "tags_with_separator"},
              {"tags", std::move(tags)},
              {"separator", separator},
              {"at_least_one", true},
              {"stop_after_first", !parallel}};
}

Json Or(Json a, Json b) { return Json{{"type", "or"}, {"elements", Json::array({a, b})}}; }

// Mistral's older form: [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...].
Json MistralList(const std::vector<Tool>& tools, bool parallel) {
  CallSyntax element;
  element.begin_prefix = "{\"name\": \"";
  element.begin_suffix = "\", \"arguments\": ";
  element.end = "}";
  element.name_is_json = true;
  Json tags = Json::array();
  for (const Tool& t : tools) tags.push_back(CallTag(element, t));
  return Json{{"type", "tag"},
              {"begin", StrCat(m::kMistralCalls, "[")},
              {"content", Calls(std::move(tags), ", ", parallel)},
              {"end", "]"}};
}

// The calls the request allows, after any reasoning.
Json CallsFormat(const StructuralTagRequest& r, const std::vector<Tool>& tools) {
  const CallSyntax s = ToolCallSyntax(r.format);
  const bool sectioned = !s.section_begin.empty();
  if (r.mode == ToolChoiceMode::kNamed) {
    Json tag = CallTag(s, tools.front(), s.section_begin, s.section_end);
    if (r.format == ToolCallFormat::kMistral) tag = Or(tag, MistralList(tools, false));
    return tag;
  }
  Json tags = Json::array();
  for (const Tool& t : tools) tags.push_back(CallTag(s, t));
  Json calls = Calls(std::move(tags), s.separator, r.parallel_tool_calls);
  if (sectioned) {
    calls = Json{{"type", "tag"},
                 {"begin", s.section_begin},
                 {"content", std::move(calls)},
                 {"end", s.section_end}};
  }
  if (r.mode == ToolChoiceMode::kRequired) {
    if (r.format == ToolCallFormat::kMistral) {
      calls = Or(std::move(calls), MistralList(tools, r.parallel_tool_calls));
    }
    return calls;
  }
  // kAuto.
  if (r.format == ToolCallFormat::kLlama3Json) {
    // Calls are the whole output or none of it: text may not write one later on.
    return Or(std::move(calls), Json{{"type", "any_text"}, {"excludes", Json::array({s.trigger})}});
  }
  Json triggered_tags = sectioned ? Json::array({calls}) : calls["tags"];
  if (r.format == ToolCallFormat::kMistral) {
    triggered_tags.push_back(MistralList(tools, r.parallel_tool_calls));
  }
  return Json{{"type", "triggered_tags"},
              {"triggers", Json::array({s.trigger})},
              {"tags", std::move(triggered_tags)},
              {"at_least_one", false},
              {"stop_after_first", !r.parallel_tool_calls}};
}

absl::StatusOr<std::vector<Tool>> ParseTools(const StructuralTagRequest& r) {
  if (r.tools.empty()) return absl::InvalidArgumentError("tools: no functions to call");
  std::vector<Tool> tools;
  for (size_t i = 0; i < r.tools.size(); ++i) {
    const ToolSpec& spec = r.tools[i];
    if (r.mode == ToolChoiceMode::kNamed && spec.name != r.named) continue;
    Tool tool{spec.name, Json{{"type", "object"}}};
    if (!spec.parameters.empty()) {
      tool.schema = Json::parse(spec.parameters, nullptr, /*allow_exceptions=*/false);
      if (!tool.schema.is_object() && !tool.schema.is_boolean()) {
        return absl::InvalidArgumentError(
            StrCat("tools[", i, "].parameters: not a JSON Schema (a JSON object or boolean)"));
      }
    }
    tools.push_back(std::move(tool));
  }
  if (tools.empty()) {
    return absl::InvalidArgumentError(
        StrCat("tool_choice: function \"", r.named, "\" is not one of the request's tools"));
  }
  return tools;
}

}  // namespace

CallSyntax ToolCallSyntax(ToolCallFormat format) {
  CallSyntax s;
  switch (format) {
    case ToolCallFormat::kHermes:
      s.trigger = m::kHermesBegin;
      s.begin_prefix = StrCat(m::kHermesBegin, "\n{\"name\": \"");
      s.begin_suffix = "\", \"arguments\": ";
      s.end = StrCat("}\n", m::kHermesEnd);
      s.separator = "\n";
      s.name_is_json = true;
      break;
    case ToolCallFormat::kLlama3Json:
      s.trigger = "{\"name\": ";
      s.begin_prefix = "{\"name\": \"";
      s.begin_suffix = "\", \"parameters\": ";
      s.end = "}";
      s.separator = "; ";
      s.name_is_json = true;
      break;
    case ToolCallFormat::kMistral:
      s.trigger = m::kMistralCalls;
      s.begin_prefix = m::kMistralCalls;
      s.begin_suffix = m::kMistralArgs;
      break;
    case ToolCallFormat::kDeepSeekV3:
      s.trigger = s.section_begin = m::kDeepSeekCallsBegin;
      s.section_end = m::kDeepSeekCallsEnd;
      s.begin_prefix = StrCat(m::kDeepSeekCallBegin, "function", m::kDeepSeekSep);
      s.begin_suffix = "\n```json\n";
      s.end = StrCat("\n```", m::kDeepSeekCallEnd);
      s.separator = "\n";
      break;
    case ToolCallFormat::kDeepSeekV31:
      s.trigger = s.section_begin = m::kDeepSeekCallsBegin;
      s.section_end = m::kDeepSeekCallsEnd;
      s.begin_prefix = m::kDeepSeekCallBegin;
      s.begin_suffix = m::kDeepSeekSep;
      s.end = m::kDeepSeekCallEnd;
      break;
  }
  return s;
}

absl::StatusOr<std::string> ToolCallStructuralTag(const StructuralTagRequest& r) {
  TP_ASSIGN_OR_RETURN(std::vector<Tool> tools, ParseTools(r));
  Json format = CallsFormat(r, tools);
  if (r.reasoning.has_value()) {
    // A think block first, then the blank line models write after it (XGrammar's own
    // reasoning prefix); optional unless the prompt already opened it.
    Json think =
        Json{{"type", "sequence"},
             {"elements",
              Json::array({Json{{"type", "tag"},
                                {"begin", r.starts_in_reasoning ? "" : std::string(m::kThinkBegin)},
                                {"content", Json{{"type", "any_text"}}},
                                {"end", m::kThinkEnd}},
                           Json{{"type", "const_string"}, {"value", "\n\n"}}})}};
    if (!r.starts_in_reasoning) think = Json{{"type", "optional"}, {"content", std::move(think)}};
    format = Json{{"type", "sequence"},
                  {"elements", Json::array({std::move(think), std::move(format)})}};
  }
  return Json{{"type", "structural_tag"}, {"format", std::move(format)}}.dump();
}

}  // namespace tpserve
