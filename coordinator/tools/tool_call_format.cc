#include "coordinator/tools/tool_call_format.h"

#include <array>
#include <utility>

#include "absl/status/status.h"
#include "base/str_cat.h"

namespace tpserve {
namespace {

constexpr std::array<std::pair<std::string_view, ToolCallFormat>, 5> kToolCallFormats = {{
    {"hermes", ToolCallFormat::kHermes},
    {"llama3_json", ToolCallFormat::kLlama3Json},
    {"mistral", ToolCallFormat::kMistral},
    {"deepseek_v3", ToolCallFormat::kDeepSeekV3},
    {"deepseek_v31", ToolCallFormat::kDeepSeekV31},
}};

constexpr std::array<std::pair<std::string_view, ReasoningFormat>, 2> kReasoningFormats = {{
    {"deepseek_r1", ReasoningFormat::kDeepSeekR1},
    {"qwen3", ReasoningFormat::kQwen3},
}};

template <typename Table>
std::string ValidNames(const Table& table) {
  std::string names;
  for (const auto& [name, value] : table) {
    if (!names.empty()) names += ", ";
    names += name;
  }
  return names;
}

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

}  // namespace

std::string_view ToolCallFormatName(ToolCallFormat format) {
  for (const auto& [name, value] : kToolCallFormats) {
    if (value == format) return name;
  }
  return "unknown";
}

absl::StatusOr<ToolCallFormat> ParseToolCallFormatName(std::string_view name) {
  for (const auto& [n, value] : kToolCallFormats) {
    if (n == name) return value;
  }
  return absl::InvalidArgumentError(
      StrCat("tool call parser \"", name, "\" is not one of: ", ValidNames(kToolCallFormats)));
}

std::string_view ReasoningFormatName(ReasoningFormat format) {
  for (const auto& [name, value] : kReasoningFormats) {
    if (value == format) return name;
  }
  return "unknown";
}

absl::StatusOr<ReasoningFormat> ParseReasoningFormatName(std::string_view name) {
  for (const auto& [n, value] : kReasoningFormats) {
    if (n == name) return value;
  }
  return absl::InvalidArgumentError(
      StrCat("reasoning parser \"", name, "\" is not one of: ", ValidNames(kReasoningFormats)));
}

std::optional<ToolCallFormat> DetectToolCallFormat(std::string_view source) {
  namespace m = tool_markers;
  if (Contains(source, m::kDeepSeekCallsBegin) || Contains(source, m::kDeepSeekCallBegin)) {
    // V3/R1 render "function<sep>name\n```json\n{args}\n```"; V3.1 "name<sep>{args}".
    return Contains(source, "```json") ? ToolCallFormat::kDeepSeekV3 : ToolCallFormat::kDeepSeekV31;
  }
  if (Contains(source, m::kMistralCalls)) return ToolCallFormat::kMistral;
  if (Contains(source, m::kHermesBegin)) return ToolCallFormat::kHermes;
  // Functionary v3.1 also says <|python_tag|>, but its calls are <function=name>{...}.
  if (Contains(source, "<function=")) return std::nullopt;
  if (Contains(source, m::kPythonTag) ||
      (Contains(source, "ipython") && Contains(source, "\"parameters\""))) {
    return ToolCallFormat::kLlama3Json;
  }
  return std::nullopt;
}

}  // namespace tpserve
