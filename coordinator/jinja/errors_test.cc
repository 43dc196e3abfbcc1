// Error reports: Parse refuses everything jinja2 would not compile (and what this interpreter
// cannot run) with "line L, column C: <what>"; Render reports runtime errors with the line and
// column of the expression that failed and jinja2's message.
#include <string>

#include "absl/time/time.h"
#include "coordinator/jinja/template.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tpserve::jinja {
namespace {

using nlohmann::ordered_json;

absl::Status ParseError(std::string_view source) {
  absl::StatusOr<Template> t = Template::Parse(source);
  return t.ok() ? absl::OkStatus() : t.status();
}

absl::Status RenderError(std::string_view source,
                         const ordered_json& input = ordered_json::object()) {
  absl::StatusOr<Template> t = Template::Parse(source);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return t.status();
  return t->RenderToString(input, ordered_json::object(), absl::UnixEpoch()).status();
}

void ExpectError(const absl::Status& status, std::string_view message) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(std::string(status.message()), std::string(message));
}

TEST(ParseErrorsTest, UnclosedBlockPointsAtTheEnd) {
  ExpectError(ParseError("{% if true %}\nx"),
              "line 2, column 2: Unexpected end of template. Jinja was looking for the following "
              "tags: 'elif' or 'else' or 'endif'. The innermost block that needs to be closed is "
              "'if'.");
}

TEST(ParseErrorsTest, UnknownFilterAndTest) {
  ExpectError(ParseError("a\n  {{ x|frobnicate }}"),
              "line 2, column 8: No filter named 'frobnicate'.");
  ExpectError(ParseError("{{ x is frobnicated }}"),
              "line 1, column 9: No test named 'frobnicated'.");
  ExpectError(ParseError("{{ x|pprint }}"), "line 1, column 6: filter 'pprint' is not supported");
}

TEST(ParseErrorsTest, BadTokens) {
  ExpectError(ParseError("{{ a ! b }}"), "line 1, column 6: unexpected char '!' at 5");
  ExpectError(ParseError("héllo {{ a ! b }}"), "line 1, column 12: unexpected char '!' at 11");
  ExpectError(ParseError("{{ (a }}"), "line 1, column 7: unexpected '}', expected ')'");
  ExpectError(ParseError("{{ 'abc }}"), "line 1, column 4: unexpected char \"'\" at 3");
  ExpectError(ParseError("{{ }}"),
              "line 1, column 4: Expected an expression, got 'end of print statement'");
  ExpectError(ParseError("{{ x"),
              "line 1, column 5: unexpected end of template, expected 'end of print statement'.");
  ExpectError(ParseError("\n\n{# open"), "line 3, column 3: Missing end of comment tag");
}

TEST(ParseErrorsTest, UnknownAndUnsupportedTags) {
  ExpectError(ParseError("{% frobnicate %}"),
              "line 1, column 4: Encountered unknown tag 'frobnicate'.");
  ExpectError(ParseError("{% do x.append(1) %}"),
              "line 1, column 4: Encountered unknown tag 'do'.");
  ExpectError(ParseError("{% include 'x.j2' %}"),
              "line 1, column 4: 'include' is not supported: chat templates have no loader for "
              "other templates");
  ExpectError(ParseError("{% extends 'base' %}"),
              "line 1, column 4: 'extends' is not supported: chat templates have no loader for "
              "other templates");
  ExpectError(ParseError("{% for x in y %}{% if x %}{% endfor %}"),
              "line 1, column 30: Encountered unknown tag 'endfor'. You probably made a nesting "
              "mistake. Jinja is expecting this tag, but currently looking for 'elif' or 'else' or "
              "'endif'. The innermost block that needs to be closed is 'if'.");
}

TEST(ParseErrorsTest, CompileTimeChecks) {
  ExpectError(ParseError("{% break %}"), "line 1, column 4: 'break' outside loop");
  ExpectError(ParseError("{% for x in y %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}"),
              "line 1, column 35: 'continue' outside loop");
  ExpectError(ParseError("{% for loop in y %}{% endfor %}"),
              "line 1, column 8: Can't assign to special loop variable in for-loop target");
  ExpectError(ParseError("{% set 1 = 2 %}"), "line 1, column 8: can't assign to 'const'");
  ExpectError(ParseError("{% macro m(a=1, b) %}{% endmacro %}"),
              "line 1, column 18: non-default argument follows default argument");
}

TEST(ParseErrorsTest, TemplateMustBeValidBeforeAnyRender) {
  // Code that never runs is still checked.
  EXPECT_FALSE(Template::Parse("{% if false %}{{ x|nope }}{% endif %}").ok());
  EXPECT_TRUE(Template::Parse("{% if false %}{{ x.nope() }}{% endif %}").ok());
}

TEST(RenderErrorsTest, UndefinedAccessNamesWhatWasMissing) {
  ExpectError(RenderError("line1\n{% for x in [1] %}\n  {{ x.y.z }}\n{% endfor %}"),
              "line 3, column 9: 'int object' has no attribute 'y'");
  ExpectError(RenderError("{{ nothing.attr }}"), "line 1, column 11: 'nothing' is undefined");
  ExpectError(RenderError("{{ messages[3].content }}", {{"messages", ordered_json::array()}}),
              "line 1, column 15: list object has no element 3");
}

TEST(RenderErrorsTest, TypeErrorsHavePythonsMessages) {
  ExpectError(RenderError("\n\n  {{ 'a' + 1 }}"),
              "line 3, column 6: can only concatenate str (not \"int\") to str");
  ExpectError(RenderError("{{ 1 / 0 }}"), "line 1, column 4: division by zero");
  ExpectError(RenderError("{{ [1, 'a']|sort }}"),
              "line 1, column 13: '<' not supported between instances of 'str' and 'int'");
}

TEST(RenderErrorsTest, RaiseExceptionMessageIsVerbatim) {
  ExpectError(
      RenderError("{% if messages|length == 0 %}\n{{ raise_exception('No messages: \"x\" <y>') }}"
                  "{% endif %}",
                  {{"messages", ordered_json::array()}}),
      "line 2, column 4: No messages: \"x\" <y>");
}

TEST(RenderErrorsTest, SandboxRefusesMutation) {
  ExpectError(RenderError("{% set l = [] %}{{ l.append(1) }}"),
              "line 1, column 21: access to attribute 'append' of 'list' object is unsafe.");
}

}  // namespace
}  // namespace tpserve::jinja
