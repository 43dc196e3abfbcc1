// Every limit of Options::limits, hit on purpose: the render stops with RESOURCE_EXHAUSTED (or
// Parse with INVALID_ARGUMENT) naming the limit and its value, and just under the limit the
// same template renders.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "coordinator/jinja/template.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tpserve::jinja {
namespace {

using nlohmann::ordered_json;
using ::testing::HasSubstr;

absl::StatusOr<std::string> RenderWith(std::string_view source,
                                       const Options& options = TransformersOptions(),
                                       const ordered_json& input = ordered_json::object()) {
  absl::StatusOr<Template> t = Template::Parse(source, options);
  if (!t.ok()) return t.status();
  return t->RenderToString(input, ordered_json::object(), absl::UnixEpoch());
}

void ExpectExhausted(const absl::StatusOr<std::string>& result, std::string_view limit) {
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted) << result.status();
  EXPECT_THAT(std::string(result.status().message()), HasSubstr(std::string(limit)));
}

TEST(LimitsTest, DefaultsAreTransformersOptions) {
  const Options options = TransformersOptions();
  EXPECT_TRUE(options.trim_blocks);
  EXPECT_TRUE(options.lstrip_blocks);
  EXPECT_FALSE(options.keep_trailing_newline);
  EXPECT_EQ(options.limits.max_output_bytes, 8 << 20);
  EXPECT_EQ(options.limits.max_loop_iterations, 1 << 20);
}

TEST(LimitsTest, HugeRangeIsRefusedAsTheSandboxDoes) {
  // jinja2's sandbox refuses ranges over MAX_RANGE before any iteration.
  ExpectExhausted(RenderWith("{% for i in range(10**9) %}{{ i }}{% endfor %}"),
                  "MAX_RANGE (100000)");
}

TEST(LimitsTest, LoopIterationsCountAcrossLoops) {
  ExpectExhausted(RenderWith("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                             "{% endfor %}"),
                  "max_loop_iterations (1048576)");
  Options options;
  options.limits.max_loop_iterations = 20;
  // range(10) materializes 10 elements and the loop runs 10 times: 20 units.
  EXPECT_TRUE(RenderWith("{% for i in range(10) %}{% endfor %}", options).ok());
  ExpectExhausted(
      RenderWith("{% for i in range(10) %}{% endfor %}{% for i in [1] %}{% endfor %}", options),
      "max_loop_iterations (20)");
}

TEST(LimitsTest, ListDoublingIsBounded) {
  ExpectExhausted(RenderWith("{% set ns = namespace(l=[1]) %}{% for i in range(100) %}"
                             "{% set ns.l = ns.l + ns.l %}{% endfor %}"),
                  "max_loop_iterations (1048576)");
  ExpectExhausted(RenderWith("{{ [1, 2] * 10**9 }}"), "max_loop_iterations (1048576)");
}

TEST(LimitsTest, MacroRecursion) {
  ExpectExhausted(RenderWith("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
                  "max_call_depth (64)");
  Options options;
  options.limits.max_call_depth = 3;
  const std::string source =
      "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(DEPTH) }}";
  // f(2) -> f(1) -> f(0): three nested calls.
  EXPECT_EQ(*RenderWith(absl::StrReplaceAll(source, {{"DEPTH", "2"}}), options), "21");
  ExpectExhausted(RenderWith(absl::StrReplaceAll(source, {{"DEPTH", "3"}}), options),
                  "max_call_depth (3)");
}

TEST(LimitsTest, CallerAndRecursiveLoopsCountAsCalls) {
  Options options;
  options.limits.max_call_depth = 2;
  ExpectExhausted(RenderWith("{% for x in tree recursive %}{{ loop(x.c) }}{% endfor %}", options,
                             {{"tree", {{{"c", {{{"c", {{{"c", ordered_json::array()}}}}}}}}}}}),
                  "max_call_depth (2)");
}

TEST(LimitsTest, DeepRecursionWithAHighCallLimitStillStops) {
  Options options;
  options.limits.max_call_depth = 1 << 20;
  // Bounded by the interpreter's frame limit (stack safety) instead of crashing.
  const absl::StatusOr<std::string> result =
      RenderWith("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(LimitsTest, OutputBlowUpByRepetition) {
  ExpectExhausted(RenderWith("{{ 'x' * 10**9 }}"), "max_output_bytes (8388608)");
  ExpectExhausted(RenderWith("{{ 'x' * 9223372036854775807 }}"), "max_output_bytes (8388608)");
}

TEST(LimitsTest, OutputSizeIsExact) {
  Options options;
  options.limits.max_output_bytes = 10;
  EXPECT_EQ(*RenderWith("0123456789", options), "0123456789");
  ExpectExhausted(RenderWith("0123456789{{ 'x' }}", options), "max_output_bytes (10)");
  ExpectExhausted(RenderWith("{% for i in range(11) %}x{% endfor %}", options),
                  "max_output_bytes (10)");
  ExpectExhausted(
      RenderWith("{% set s %}{% for i in range(11) %}x{% endfor %}{% endset %}", options),
      "max_output_bytes (10)");
}

TEST(LimitsTest, StringGrowthInsideValuesIsBounded) {
  ExpectExhausted(RenderWith("{% set ns = namespace(s='x') %}{% for i in range(64) %}"
                             "{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
                  "max_output_bytes (8388608)");
  ExpectExhausted(RenderWith("{{ ('x' * 1000)|replace('x', 'y' * 100000) }}"),
                  "max_output_bytes (8388608)");
  ExpectExhausted(RenderWith("{{ '%999999999d' % 1 }}"), "max_output_bytes (8388608)");
  ExpectExhausted(RenderWith("{{ '{:>999999999}'.format(1) }}"), "max_output_bytes (8388608)");
  ExpectExhausted(RenderWith("{{ 'x'|center(999999999) }}"), "max_output_bytes (8388608)");
  ExpectExhausted(RenderWith("{{ [1]|tojson(indent=999999999) }}"), "max_output_bytes (8388608)");
}

TEST(LimitsTest, HugeTemplateIsRefusedAtParse) {
  const std::string source(2 << 20, 'x');
  const absl::StatusOr<std::string> result = RenderWith(source);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("max_template_bytes (1048576)"));
  Options options;
  options.limits.max_template_bytes = 5;
  EXPECT_TRUE(RenderWith("12345", options).ok());
  EXPECT_FALSE(RenderWith("123456", options).ok());
}

TEST(LimitsTest, NestingDepthIsRefusedAtParse) {
  const std::string parens = std::string(200, '(') + "1" + std::string(200, ')');
  absl::StatusOr<std::string> result = RenderWith("{{ " + parens + " }}");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("max_nesting_depth (128)"));

  std::string ifs;
  for (int i = 0; i < 200; ++i) ifs += "{% if true %}";
  for (int i = 0; i < 200; ++i) ifs += "{% endif %}";
  result = RenderWith(ifs);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("max_nesting_depth (128)"));

  // A long chain of filters or operators nests the tree as deeply as parentheses do.
  std::string chain = "{{ 'x'";
  for (int i = 0; i < 200; ++i) chain += "|upper";
  result = RenderWith(chain + " }}");
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("max_nesting_depth (128)"));

  std::string sum = "{{ 1";
  for (int i = 0; i < 100; ++i) sum += " + 1";
  EXPECT_EQ(*RenderWith(sum + " }}"), "101");
}

TEST(LimitsTest, DeeplyNestedValuesAreRefused) {
  const absl::StatusOr<std::string> result = RenderWith(
      "{% set ns = namespace(v=[]) %}{% for i in range(1000) %}{% set ns.v = [ns.v] %}"
      "{% endfor %}{{ ns.v|length }}");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("nested deeper than 512"));
}

TEST(LimitsTest, DeeplyNestedInputIsRefused) {
  ordered_json deep = 1;
  for (int i = 0; i < 1000; ++i) deep = ordered_json::array({deep});
  absl::StatusOr<Template> t = Template::Parse("{{ x }}");
  ASSERT_TRUE(t.ok());
  const absl::StatusOr<std::string> result =
      t->RenderToString({{"x", deep}}, ordered_json::object(), absl::UnixEpoch());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LimitsTest, NamespaceCyclesDoNotLeakOrLoop) {
  // A namespace holding itself prints like Python's recursive repr and is freed after the
  // render (the sanitizer builds check the leak).
  EXPECT_EQ(*RenderWith("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"),
            "<Namespace {'me': <Namespace {...}>}>");
  EXPECT_TRUE(
      RenderWith("{% macro m() %}{% endmacro %}{% set ns = namespace(f=m) %}{% set ns.ns = ns %}"
                 "{{ m() }}")
          .ok());
}

}  // namespace
}  // namespace tpserve::jinja
