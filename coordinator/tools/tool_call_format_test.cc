#include "coordinator/tools/tool_call_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tpserve {
namespace {

using ::testing::HasSubstr;

TEST(ToolCallFormat, NamesRoundTrip) {
  for (ToolCallFormat f :
       {ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json, ToolCallFormat::kMistral,
        ToolCallFormat::kDeepSeekV3, ToolCallFormat::kDeepSeekV31}) {
    absl::StatusOr<ToolCallFormat> parsed = ParseToolCallFormatName(ToolCallFormatName(f));
    ASSERT_TRUE(parsed.ok()) << ToolCallFormatName(f);
    EXPECT_EQ(*parsed, f);
  }
  EXPECT_EQ(ToolCallFormatName(ToolCallFormat::kDeepSeekV31), "deepseek_v31");
  EXPECT_EQ(*ParseReasoningFormatName("deepseek_r1"), ReasoningFormat::kDeepSeekR1);
  EXPECT_EQ(ReasoningFormatName(ReasoningFormat::kQwen3), "qwen3");
}

TEST(ToolCallFormat, UnknownNameListsTheValidOnes) {
  absl::StatusOr<ToolCallFormat> f = ParseToolCallFormatName("qwen");
  ASSERT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.status().message(),
            "tool call parser \"qwen\" is not one of: hermes, llama3_json, mistral, deepseek_v3, "
            "deepseek_v31");
  absl::StatusOr<ReasoningFormat> r = ParseReasoningFormatName("");
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("deepseek_r1, qwen3"));
}

// The lines of real chat templates (llama.cpp's models/templates) that render calls.
TEST(DetectToolCallFormat, FromTheTemplatesOfEachFamily) {
  // Qwen2.5 / Qwen3 / QwQ / Hermes.
  EXPECT_EQ(DetectToolCallFormat(R"({{- '<tool_call>\n{"name": "' }}{{- tool_call.name }})"),
            ToolCallFormat::kHermes);
  // Llama 3.1 / 3.3.
  EXPECT_EQ(DetectToolCallFormat(
                R"({{- "<|python_tag|>" + tool_call.name + ".call(" }}{{- '"parameters": ' }})"),
            ToolCallFormat::kLlama3Json);
  // Llama 3.2: no python tag, but the ipython role and "parameters".
  EXPECT_EQ(DetectToolCallFormat(
                "{{- \"Environment: ipython\\n\" }}{{- 'Respond in the format {\"name\": function "
                "name, \"parameters\": dictionary of argument name and its value}.' }}"),
            ToolCallFormat::kLlama3Json);
  // Mistral Nemo, Small 3.2, Devstral.
  EXPECT_EQ(DetectToolCallFormat(R"({{- "[TOOL_CALLS][" }})"), ToolCallFormat::kMistral);
  EXPECT_EQ(DetectToolCallFormat(R"({{- '[TOOL_CALLS]' + tool_call.function.name }})"),
            ToolCallFormat::kMistral);
  // DeepSeek R1 (V3 format) and V3.1.
  EXPECT_EQ(DetectToolCallFormat(
                "{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + "
                "'<｜tool▁sep｜>' + tool['function']['name'] + '\\n' + '```json' + '\\n' + "
                "tool['function']['arguments'] + '\\n' + '```' + '<｜tool▁call▁end｜>'}}"),
            ToolCallFormat::kDeepSeekV3);
  EXPECT_EQ(DetectToolCallFormat(
                "{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>'+ tool['function']['name'] + "
                "'<｜tool▁sep｜>' + tool['function']['arguments'] + '<｜tool▁call▁end｜>'}}"),
            ToolCallFormat::kDeepSeekV31);
}

TEST(DetectToolCallFormat, TemplatesWithoutAFormatWeParse) {
  EXPECT_EQ(DetectToolCallFormat("{{ bos_token }}{% for m in messages %}{{ m.content }}"),
            std::nullopt);
  // Functionary v3.1 mentions <|python_tag|> but calls with <function=name>.
  EXPECT_EQ(DetectToolCallFormat("<|python_tag|> ... {{ '<function=' + name + '>' }}"),
            std::nullopt);
  // Command R: "parameters" without Llama's ipython role.
  EXPECT_EQ(DetectToolCallFormat(R"("parameters": {...} ```json)"), std::nullopt);
}

}  // namespace
}  // namespace tpserve
