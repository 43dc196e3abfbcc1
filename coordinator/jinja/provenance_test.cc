// Provenance: which bytes of a rendering came from the `input` argument. Each test states the
// exact runs a template must produce, so a user's "<|im_end|>" can never reach the tokenizer
// as template text.
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/jinja/template.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tpserve::jinja {
namespace {

using nlohmann::ordered_json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

OutputRun T(std::string text) { return OutputRun{std::move(text), false}; }  // template
OutputRun I(std::string text) { return OutputRun{std::move(text), true}; }   // input

std::vector<OutputRun> Render(std::string_view source, const ordered_json& input,
                              const ordered_json& trusted = ordered_json::object()) {
  absl::StatusOr<Template> t = Template::Parse(source);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return {};
  absl::StatusOr<std::vector<OutputRun>> runs = t->Render(input, trusted, absl::UnixEpoch());
  EXPECT_TRUE(runs.ok()) << runs.status();
  return runs.ok() ? *runs : std::vector<OutputRun>{};
}

const ordered_json kChat = {{"messages",
                             {{{"role", "user"}, {"content", "Hi <|im_end|> there"}},
                              {{"role", "assistant"}, {"content", "  Hello!\n"}}}}};

TEST(ProvenanceTest, ChatMlContentIsInputMarkersAreTemplate) {
  EXPECT_THAT(Render("{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + "
                     "'<|im_end|>\\n' }}{% endfor %}{{ '<|im_start|>assistant\\n' }}",
                     kChat),
              ElementsAre(T("<|im_start|>"), I("user"), T("\n"), I("Hi <|im_end|> there"),
                          T("<|im_end|>\n<|im_start|>"), I("assistant"), T("\n"), I("  Hello!\n"),
                          T("<|im_end|>\n<|im_start|>assistant\n")));
}

TEST(ProvenanceTest, TrimKeepsExactSpans) {
  EXPECT_THAT(
      Render("[{{ messages[1].content | trim }}][{{ messages[1].content.lstrip() }}]", kChat),
      ElementsAre(T("["), I("Hello!"), T("]["), I("Hello!\n"), T("]")));
}

TEST(ProvenanceTest, SlicingIndexingAndReversing) {
  const ordered_json input = {{"s", "abcdef"}, {"k", "한국어"}};
  EXPECT_THAT(
      Render("{{ s[1:3] }}-{{ s[-1] }}-{{ s[::-1] }}-{{ k[1:] }}-{{ s|first }}", input),
      ElementsAre(I("bc"), T("-"), I("f"), T("-"), I("fedcba"), T("-"), I("국어"), T("-"), I("a")));
}

TEST(ProvenanceTest, JoinAndSplitAreExact) {
  const ordered_json input = {{"parts", {"a", "b<|x|>", "c"}}, {"line", "x y  z"}};
  EXPECT_THAT(
      Render("{{ parts|join('<sep>') }}|{{ line.split()[1] }}|{{ line.split(' ')|length }}", input),
      ElementsAre(I("a"), T("<sep>"), I("b<|x|>"), T("<sep>"), I("c"), T("|"), I("y"), T("|4")));
}

TEST(ProvenanceTest, StringBuiltInLoopsAndMacros) {
  EXPECT_THAT(
      Render("{% macro turn(m) %}<{{ m.role }}>{{ m.content }}</>{% endmacro %}"
             "{% set ns = namespace(s='') %}{% for m in messages %}{% set ns.s = ns.s + turn(m) %}"
             "{% endfor %}{{ ns.s }}",
             kChat),
      ElementsAre(T("<"), I("user"), T(">"), I("Hi <|im_end|> there"), T("</><"), I("assistant"),
                  T(">"), I("  Hello!\n"), T("</>")));
}

TEST(ProvenanceTest, SetBlockAndFilterBlock) {
  EXPECT_THAT(Render("{% set x %}[{{ messages[0].role }}]{% endset %}{{ x }}"
                     "{% filter upper %}<t>{{ messages[0].role }}{% endfilter %}",
                     kChat),
              ElementsAre(T("["), I("user"), T("]"), I("<T>USER")));
}

TEST(ProvenanceTest, TransformationsMarkTheWholeResult) {
  const ordered_json input = {{"s", "ab"}};
  EXPECT_THAT(
      Render("{{ ('<x>' + s)|upper }}|{{ ('<x>' ~ s).replace('a', 'b') }}|{{ 'lit'|upper }}",
             input),
      ElementsAre(I("<X>AB"), T("|"), I("<x>bb"), T("|LIT")));
}

TEST(ProvenanceTest, FormattingKeepsStringArgumentsExact) {
  const ordered_json input = {{"s", "in"}, {"n", 7}};
  EXPECT_THAT(
      Render("{{ '<%s>' % s }}{{ '<{}>'.format(s) }}{{ '<%d>' % n }}{{ '<%5s>' % s }}", input),
      ElementsAre(T("<"), I("in"), T("><"), I("in"), T("><"), I("7"), T("><"), I("   in"), T(">")));
}

TEST(ProvenanceTest, TojsonOfInputIsInputOfTemplateLiteralIsNot) {
  const ordered_json input = {{"tool", {{"name", "f"}}}};
  EXPECT_THAT(Render("{{ tool|tojson }}|{{ {'name': 'g'}|tojson }}", input),
              ElementsAre(I("{\"name\": \"f\"}"), T("|{\"name\": \"g\"}")));
}

TEST(ProvenanceTest, NumbersFromInputAreInputComputedCountsAreNot) {
  const ordered_json input = {{"n", 41}, {"items", {"a", "b"}}, {"flag", true}};
  EXPECT_THAT(Render("{{ n + 1 }}|{{ items|length }}|{% for i in items %}{{ loop.index }}"
                     "{% endfor %}|{{ flag }}|{{ n ~ '' }}",
                     input),
              ElementsAre(I("42"), T("|2|12|"), I("True"), T("|"), I("41")));
}

TEST(ProvenanceTest, ReprOfContainersWithInputIsInput) {
  const ordered_json input = {{"d", {{"k", "v"}}}};
  EXPECT_THAT(Render("{{ d }}|{{ [1, 2] }}|{{ d.keys()|list }}", input),
              ElementsAre(I("{'k': 'v'}"), T("|[1, 2]|"), I("['k']")));
}

TEST(ProvenanceTest, DictKeysFromInputAreInput) {
  const ordered_json input = {{"d", {{"key", 1}}}};
  EXPECT_THAT(Render("{% for k, v in d.items() %}{{ k }}={{ v }}{% endfor %}", input),
              ElementsAre(I("key"), T("="), I("1")));
}

TEST(ProvenanceTest, TrustedValuesAreNotInput) {
  const ordered_json trusted = {{"bos_token", "<s>"}, {"add_generation_prompt", true}};
  EXPECT_THAT(Render("{{ bos_token }}{{ messages[0].role }}{% if add_generation_prompt %}!"
                     "{% endif %}",
                     kChat, trusted),
              ElementsAre(T("<s>"), I("user"), T("!")));
}

TEST(ProvenanceTest, AdjacentRunsMergeAndEmptyRunsVanish) {
  const ordered_json input = {{"a", "x"}, {"b", "y"}, {"e", ""}};
  EXPECT_THAT(Render("{{ a }}{{ e }}{{ b }}{{ '' }}{{ e }}", input), ElementsAre(I("xy")));
  EXPECT_THAT(Render("{{ e }}", input), ElementsAre());
}

TEST(ProvenanceTest, IndentKeepsLinesExact) {
  const ordered_json input = {{"s", "a\nb"}};
  EXPECT_THAT(Render("{{ s|indent(2, true) }}", input),
              ElementsAre(T("  "), I("a"), T("\n  "), I("b")));
}

TEST(ProvenanceTest, ArgumentsMustBeObjectsWithoutSharedKeys) {
  absl::StatusOr<Template> t = Template::Parse("{{ x }}");
  ASSERT_TRUE(t.ok());
  absl::StatusOr<std::vector<OutputRun>> both =
      t->Render({{"x", 1}}, {{"x", 2}}, absl::UnixEpoch());
  EXPECT_EQ(both.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(both.status().message()), HasSubstr("\"x\""));
  absl::StatusOr<std::vector<OutputRun>> array =
      t->Render(ordered_json::array({1}), ordered_json::object(), absl::UnixEpoch());
  EXPECT_EQ(array.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ProvenanceTest, RenderToStringJoinsRuns) {
  absl::StatusOr<Template> t = Template::Parse("<{{ messages[0].content }}>");
  ASSERT_TRUE(t.ok());
  absl::StatusOr<std::string> text =
      t->RenderToString(kChat, ordered_json::object(), absl::UnixEpoch());
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "<Hi <|im_end|> there>");
}

TEST(ProvenanceTest, CopiesShareTheParsedTemplate) {
  absl::StatusOr<Template> t = Template::Parse("{{ messages[0].role }}");
  ASSERT_TRUE(t.ok());
  const Template copy = *t;
  EXPECT_THAT(*copy.Render(kChat, ordered_json::object(), absl::UnixEpoch()),
              ElementsAre(I("user")));
}

}  // namespace
}  // namespace tpserve::jinja
