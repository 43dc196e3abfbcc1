// The compiler and the matcher over a small byte-level vocabulary (test_vocab.h: every byte is a
// token, plus a few merges and control tokens).
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/field_error.h"
#include "base/str_cat.h"
#include "coordinator/structured/compiler.h"
#include "coordinator/structured/mask_worker.h"
#include "coordinator/structured/matcher.h"
#include "coordinator/tokenizer/test_vocab.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class StructuredTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = std::make_unique<Tokenizer>(*Tokenizer::Create(MakeTestTokenizerData()));
    compiler_ = *ConstraintCompiler::Create(*tokenizer_, kTestVocabSize + 9, {kTestImEnd});
  }

  std::shared_ptr<const CompiledConstraint> MustCompile(const ConstraintSpec& spec) {
    absl::StatusOr<std::shared_ptr<const CompiledConstraint>> c = compiler_->Compile(spec);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : nullptr;
  }

  std::vector<bool> Allowed(ConstraintMatcher& m) {
    std::vector<int32_t> mask(TokenMaskWords(compiler_->vocab_size()));
    m.FillMask(absl::MakeSpan(mask));
    std::vector<bool> allowed(compiler_->vocab_size());
    for (int32_t id = 0; id < compiler_->vocab_size(); ++id) {
      allowed[id] = (static_cast<uint32_t>(mask[id / 32]) >> (id % 32)) & 1u;
    }
    return allowed;
  }

  // Feeds `text` byte by byte; false at the first byte the grammar refuses.
  bool AcceptBytes(ConstraintMatcher& m, const std::string& text) {
    for (unsigned char c : text) {
      if (!Allowed(m)[ByteId(c)] || !m.Accept(ByteId(c))) return false;
    }
    return true;
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ConstraintCompiler> compiler_;
};

ConstraintSpec Spec(ConstraintKind kind, std::string text, std::string field) {
  ConstraintSpec s;
  s.kind = kind;
  s.text = std::move(text);
  s.field = std::move(field);
  return s;
}

TEST_F(StructuredTest, ChoiceAllowsExactlyTheListAndEosAtTheEnd) {
  ConstraintSpec spec;
  spec.kind = ConstraintKind::kChoice;
  spec.choices = {"yes", "no", "say \"hi\"\n"};
  spec.field = "choice.choices";
  ConstraintMatcher m(MustCompile(spec));
  std::vector<bool> first = Allowed(m);
  EXPECT_TRUE(first[ByteId('y')]);
  EXPECT_TRUE(first[ByteId('n')]);
  EXPECT_TRUE(first[ByteId('s')]);
  EXPECT_FALSE(first[ByteId('x')]);
  EXPECT_FALSE(first[kTestImEnd]);   // EOS only where the grammar may end
  EXPECT_FALSE(first[kTestImStart]);  // control tokens never
  EXPECT_FALSE(first[kTestVocabSize + 3]);  // padding ids of the model's vocabulary never
  ASSERT_TRUE(AcceptBytes(m, "say \"hi\""));
  EXPECT_FALSE(m.completed());
  EXPECT_EQ(m.JumpForwardString(), "\n");
  ASSERT_TRUE(AcceptBytes(m, "\n"));
  EXPECT_TRUE(m.completed());
  EXPECT_FALSE(m.terminated());
  std::vector<bool> end = Allowed(m);
  EXPECT_TRUE(end[kTestImEnd]);
  EXPECT_EQ(std::count(end.begin(), end.end(), true), 1);
  EXPECT_TRUE(m.Accept(kTestImEnd));
  EXPECT_TRUE(m.terminated());
  EXPECT_EQ(m.JumpForwardString(), "");  // XGrammar itself would refuse (the fuzzer found it)
}

TEST_F(StructuredTest, JsonSchemaForcesKeysAndValidatesValues) {
  ConstraintMatcher m(MustCompile(Spec(ConstraintKind::kJsonSchema,
      R"({"type": "object", "properties": {"age": {"type": "integer", "minimum": 0,
          "maximum": 99}}, "required": ["age"], "additionalProperties": false})",
      "json_schema")));
  EXPECT_EQ(m.JumpForwardString(), "{\"age\": ");
  ASSERT_TRUE(AcceptBytes(m, "{\"age\": "));
  EXPECT_FALSE(Allowed(m)[ByteId('-')]);  // minimum 0
  ASSERT_TRUE(AcceptBytes(m, "42"));
  EXPECT_FALSE(Allowed(m)[ByteId('1')]);  // maximum 99
  ASSERT_TRUE(AcceptBytes(m, "}"));
  EXPECT_TRUE(m.completed());
}

TEST_F(StructuredTest, RegexAndGrammarAndJsonObject) {
  ConstraintMatcher date(MustCompile(Spec(ConstraintKind::kRegex, R"(\d{4}-\d{2})", "regex")));
  EXPECT_TRUE(AcceptBytes(date, "2026-12"));
  EXPECT_TRUE(date.completed());
  ConstraintMatcher bad(MustCompile(Spec(ConstraintKind::kRegex, R"(\d{4}-\d{2})", "regex")));
  EXPECT_FALSE(AcceptBytes(bad, "20x"));

  ConstraintMatcher g(MustCompile(Spec(ConstraintKind::kGrammar,
      "root ::= \"(\" num (\"+\" num)* \")\"\nnum ::= [0-9]+", "grammar")));
  EXPECT_TRUE(AcceptBytes(g, "(1+23)"));
  EXPECT_TRUE(g.completed());

  ConstraintMatcher obj(MustCompile(Spec(ConstraintKind::kJsonObject, "", "json_object")));
  EXPECT_FALSE(Allowed(obj)[ByteId('[')]);
  EXPECT_TRUE(AcceptBytes(obj, R"({"any": [1, {"x": null}]})"));
  EXPECT_TRUE(obj.completed());
}

TEST_F(StructuredTest, ErrorsNameTheFieldAndWhere) {
  absl::Status regex = compiler_->Compile(Spec(ConstraintKind::kRegex, "ab(c", "regex")).status();
  EXPECT_EQ(regex.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorField(regex), "regex");
  EXPECT_THAT(std::string(regex.message()), StartsWith("regex: Regex parsing error at position "));

  absl::Status grammar =
      compiler_->Compile(Spec(ConstraintKind::kGrammar, "root ::= \"a\" |", "grammar")).status();
  EXPECT_EQ(ErrorField(grammar), "grammar");
  EXPECT_THAT(std::string(grammar.message()), HasSubstr("line 1"));
  // A hex escape past U+10FFFF (this one overflowed XGrammar's int32 before our patch, which
  // the sanitizer passes catch) is an invalid escape.
  absl::Status escape = compiler_->Compile(
      Spec(ConstraintKind::kGrammar, R"(root ::= "\x7fffffff0")", "grammar")).status();
  EXPECT_EQ(escape.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorField(escape), "grammar");
  EXPECT_THAT(std::string(escape.message()), HasSubstr("escape")) << escape;

  absl::Status schema = compiler_->Compile(Spec(ConstraintKind::kJsonSchema,
      R"({"type": "array", "contains": {"type": "integer"}})", "json_schema")).status();
  EXPECT_EQ(schema.message(),
            "json_schema: at /contains: keyword \"contains\" is not enforced by the grammar "
            "engine for this type; remove it, or send the schema with strict=false to have "
            "such keywords dropped and listed");

  // oneOf branches XGrammar cannot prove disjoint would be enforced as anyOf: strict refuses.
  absl::Status one_of = compiler_->Compile(Spec(ConstraintKind::kJsonSchema,
      R"({"type": "object", "properties": {"v": {"oneOf": [{"type": "integer"},
          {"type": "number"}]}}})", "json_schema")).status();
  EXPECT_THAT(std::string(one_of.message()), HasSubstr("would not be enforced exactly: oneOf"));
  EXPECT_THAT(std::string(one_of.message()), HasSubstr("(oneOf at /properties/v/oneOf)"));
}

TEST_F(StructuredTest, NotStrictReportsWhatItDropped) {
  ConstraintSpec spec = Spec(ConstraintKind::kJsonSchema,
      R"({"type": "object", "properties": {"v": {"oneOf": [{"type": "integer"},
          {"type": "number"}]}, "t": {"type": "array", "uniqueItems": true}}})", "json_schema");
  spec.strict = false;
  std::shared_ptr<const CompiledConstraint> c = MustCompile(spec);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->dropped_keywords().size(), 2);
  EXPECT_EQ(c->dropped_keywords()[0], "/properties/t/uniqueItems");
  EXPECT_THAT(c->dropped_keywords()[1], HasSubstr("(oneOf at /properties/v/oneOf)"));
}

TEST_F(StructuredTest, BoundsNameTheLimit) {
  ConstraintLimits limits;
  limits.max_text_bytes = 16;
  limits.max_choices = 2;
  limits.max_compiled_bytes = 1;
  auto small = *ConstraintCompiler::Create(*tokenizer_, kTestVocabSize, {kTestImEnd}, limits);
  EXPECT_EQ(small->Compile(Spec(ConstraintKind::kRegex, std::string(17, 'a'), "regex"))
                .status().message(),
            "regex is 17 bytes, over the limit of 16 (--structured_max_constraint_bytes)");
  ConstraintSpec choice;
  choice.kind = ConstraintKind::kChoice;
  choice.choices = {"a", "b", "c"};
  choice.field = "choice.choices";
  EXPECT_EQ(small->Compile(choice).status().message(),
            "choice.choices has 3 choices, over the limit of 2");
  choice.choices = {"a", ""};
  EXPECT_EQ(small->Compile(choice).status().message(), "choice.choices[1] is empty");
  EXPECT_THAT(std::string(small->Compile(Spec(ConstraintKind::kRegex, "a+", "regex")).status().message()),
              HasSubstr("bytes, over the limit of 1 (--structured_max_grammar_bytes)"));

  limits = ConstraintLimits{};
  limits.compile_timeout = absl::ZeroDuration();
  auto hasty = *ConstraintCompiler::Create(*tokenizer_, kTestVocabSize, {kTestImEnd}, limits);
  absl::Status slow = hasty->Compile(Spec(ConstraintKind::kRegex, "a+b", "regex")).status();
  EXPECT_EQ(slow.message(), "regex: compiling it took longer than the limit of 0 s "
                            "(--structured_compile_timeout_ms); simplify the constraint");
  EXPECT_EQ(hasty->stats().timeouts, 1);
}

TEST_F(StructuredTest, CompiledGrammarsAreCachedByContent) {
  ConstraintSpec a = Spec(ConstraintKind::kRegex, "[a-z]+", "regex");
  std::shared_ptr<const CompiledConstraint> first = MustCompile(a);
  std::shared_ptr<const CompiledConstraint> again = MustCompile(a);
  EXPECT_EQ(first.get(), again.get());
  MustCompile(Spec(ConstraintKind::kGrammar, "root ::= [a-z]+", "grammar"));  // another kind
  ConstraintCompilerStats stats = compiler_->stats();
  EXPECT_EQ(stats.cache_hits, 1);
  EXPECT_EQ(stats.cache_misses, 2);
  EXPECT_EQ(stats.cached_grammars, 2);
  EXPECT_GT(stats.cached_bytes, 0);

  // A byte bound smaller than two grammars keeps the most recently used one.
  ConstraintLimits limits;
  limits.cache_bytes = stats.cached_bytes / 2 + 1;
  auto lru = *ConstraintCompiler::Create(*tokenizer_, kTestVocabSize + 9, {kTestImEnd}, limits);
  std::shared_ptr<const CompiledConstraint> one = *lru->Compile(a);
  (void)*lru->Compile(Spec(ConstraintKind::kRegex, "[0-9]+", "regex"));
  EXPECT_EQ(lru->stats().cached_grammars, 1);
  EXPECT_NE(lru->Compile(a)->get(), one.get());  // evicted, compiled again
}

TEST_F(StructuredTest, MaskWorkerFillsMasksOffThreadAndHandsThemBack) {
  std::shared_ptr<const CompiledConstraint> c =
      MustCompile(Spec(ConstraintKind::kRegex, "(ab)+", "regex"));
  ConstraintMatcher a(c), b(c);
  ASSERT_TRUE(a.Accept(ByteId('a')));
  const int32_t words = TokenMaskWords(compiler_->vocab_size());
  std::vector<int32_t> mask_a(words, 0), mask_b(words, 0);
  MaskWorker worker;
  for (int round = 0; round < 3; ++round) {
    worker.Start({{&a, absl::MakeSpan(mask_a)}, {&b, absl::MakeSpan(mask_b)}});
    worker.Wait();
    auto allowed = [](const std::vector<int32_t>& m, int32_t id) {
      return ((static_cast<uint32_t>(m[id / 32]) >> (id % 32)) & 1u) != 0;
    };
    EXPECT_TRUE(allowed(mask_a, ByteId('b')));  // after "a": only "b"
    EXPECT_FALSE(allowed(mask_a, ByteId('a')));
    EXPECT_TRUE(allowed(mask_b, ByteId('a')));  // at the start: only "a"
    EXPECT_FALSE(allowed(mask_b, ByteId('b')));
  }
  worker.Start({});  // nothing to do: returns, and Wait does not block
  worker.Wait();
}

TEST_F(StructuredTest, ConcurrentRequestsForOneConstraintShareOneCompilation) {
  const ConstraintSpec spec = Spec(ConstraintKind::kGrammar, "root ::= [a-z]+ \"!\"", "grammar");
  std::vector<std::shared_ptr<const CompiledConstraint>> got(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] { got[i] = *compiler_->Compile(spec); });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 1; i < 4; ++i) EXPECT_EQ(got[i].get(), got[0].get());
  EXPECT_EQ(compiler_->stats().cache_misses, 1);
  EXPECT_EQ(compiler_->stats().cache_hits, 3);
}

// A Hermes-style tool call (Qwen, Hermes): free text; "<tool_call>" opens a call of
// get_weather whose arguments must match its parameters schema.
constexpr char kCallBegin[] = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ";
constexpr char kCallEnd[] = "}\n</tool_call>";

std::string HermesTag(bool at_least_one, const std::string& parameters =
    R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
        "additionalProperties": false})") {
  return StrCat(R"({"type": "structural_tag", "format": {"type": "triggered_tags",
      "triggers": ["<tool_call>"], "tags": [{"type": "tag",
      "begin": "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ",
      "content": {"type": "json_schema", "json_schema": )", parameters, R"(},
      "end": "}\n</tool_call>"}], "at_least_one": )", at_least_one ? "true" : "false", "}}");
}

TEST_F(StructuredTest, StructuralTagLeavesTextFreeUntilTheTriggerThenConstrainsTheCall) {
  ConstraintMatcher m(MustCompile(
      Spec(ConstraintKind::kStructuralTag, HermesTag(/*at_least_one=*/false), "structural_tag")));
  EXPECT_FALSE(Allowed(m)[kTestImStart]);  // control tokens never, even in free text
  ASSERT_TRUE(AcceptBytes(m, "Let me check. "));
  EXPECT_TRUE(Allowed(m)[kTestImEnd]);  // a reply without a call may end
  ASSERT_TRUE(AcceptBytes(m, "<tool_call>"));
  // The trigger commits to the call: the rest of its opening is forced, and no EOS.
  EXPECT_THAT(m.JumpForwardString(), StartsWith("\n{\"name\": \"get_weather\", \"arguments\": {"));
  EXPECT_FALSE(Allowed(m)[kTestImEnd]);
  ASSERT_TRUE(AcceptBytes(m, "\n{\"name\": \"get_weather\", \"arguments\": {"));
  EXPECT_FALSE(Allowed(m)[ByteId('}')]);  // "city" is required
  EXPECT_FALSE(m.Accept(ByteId('}')));
  EXPECT_FALSE(AcceptBytes(m, "\"town"));  // only "city" is listed (refused at the 't')
  ASSERT_TRUE(AcceptBytes(m, "city\": \"Paris\"}"));
  EXPECT_EQ(m.JumpForwardString(), kCallEnd);
  ASSERT_TRUE(AcceptBytes(m, kCallEnd));
  ASSERT_TRUE(AcceptBytes(m, " Done."));  // free text again after the call
  EXPECT_TRUE(m.Accept(kTestImEnd));
  EXPECT_TRUE(m.terminated());
}

TEST_F(StructuredTest, StructuralTagAtLeastOneStartsWithTheCall) {
  ConstraintMatcher m(MustCompile(
      Spec(ConstraintKind::kStructuralTag, HermesTag(/*at_least_one=*/true), "structural_tag")));
  std::vector<bool> first = Allowed(m);
  EXPECT_FALSE(first[ByteId('L')]);  // no text before the first call
  EXPECT_TRUE(first[ByteId('<')]);
  EXPECT_FALSE(first[kTestImEnd]);
  EXPECT_EQ(m.JumpForwardString(), StrCat(kCallBegin, "{"));
  ASSERT_TRUE(AcceptBytes(m, StrCat(kCallBegin, "{\"city\": \"Oslo\"}", kCallEnd)));
  EXPECT_TRUE(Allowed(m)[kTestImEnd]);
}

// A trigger that is one user-defined token ("<tool>" here, as "<tool_call>" is in Qwen's
// vocabulary) fires by that token as well as by its bytes.
TEST_F(StructuredTest, StructuralTagTriggerFiresOnAUserDefinedToken) {
  const std::string tag = R"({"type": "structural_tag", "format": {"type": "triggered_tags",
      "triggers": ["<tool>"], "tags": [{"begin": "<tool>", "content": {"type": "json_schema",
      "json_schema": {"type": "integer"}}, "end": "</tool>"}]}})";
  ConstraintMatcher m(MustCompile(Spec(ConstraintKind::kStructuralTag, tag, "structural_tag")));
  ASSERT_TRUE(AcceptBytes(m, "x "));
  EXPECT_TRUE(Allowed(m)[kTestTool]);
  ASSERT_TRUE(m.Accept(kTestTool));
  EXPECT_FALSE(Allowed(m)[ByteId('a')]);  // inside the tag: an integer
  EXPECT_TRUE(AcceptBytes(m, "42</tool>"));
}

TEST_F(StructuredTest, StructuralTagErrorsNameTheFieldAndThePointer) {
  absl::Status no_end = compiler_->Compile(Spec(ConstraintKind::kStructuralTag,
      R"({"type": "structural_tag", "format": {"type": "tag", "begin": "<a>",
          "content": {"type": "any_text"}}})", "structural_tag")).status();
  EXPECT_EQ(no_end.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorField(no_end), "structural_tag");
  EXPECT_EQ(no_end.message(),
            "structural_tag: Invalid structural tag error: Tag format must have an end field");

  absl::Status not_json = compiler_->Compile(
      Spec(ConstraintKind::kStructuralTag, R"({"format": )", "structural_tag")).status();
  EXPECT_EQ(ErrorField(not_json), "structural_tag");
  EXPECT_THAT(std::string(not_json.message()),
              StartsWith("structural_tag: not valid JSON at byte"));

  // Each schema inside passes the schema policy, named by its pointer from the tag's root.
  const std::string unique_days = HermesTag(false,
      R"({"type": "object", "properties": {"days": {"type": "array", "uniqueItems": true}}})");
  absl::Status strict =
      compiler_->Compile(Spec(ConstraintKind::kStructuralTag, unique_days, "tools")).status();
  EXPECT_EQ(ErrorField(strict), "tools");
  EXPECT_THAT(std::string(strict.message()),
              StartsWith("tools: at /format/tags/0/content/json_schema/properties/days/"
                         "uniqueItems: keyword \"uniqueItems\" is not enforced"));
  ConstraintSpec lax = Spec(ConstraintKind::kStructuralTag, unique_days, "tools");
  lax.strict = false;
  std::shared_ptr<const CompiledConstraint> c = MustCompile(lax);
  ASSERT_NE(c, nullptr);
  EXPECT_THAT(c->dropped_keywords(),
              ElementsAre("/format/tags/0/content/json_schema/properties/days/uniqueItems"));

  ConstraintLimits limits;
  limits.max_text_bytes = 16;
  auto small = *ConstraintCompiler::Create(*tokenizer_, kTestVocabSize, {kTestImEnd}, limits);
  EXPECT_EQ(small->Compile(Spec(ConstraintKind::kStructuralTag, HermesTag(true), "tools"))
                .status().message(),
            StrCat("tools is ", HermesTag(true).size(),
                   " bytes, over the limit of 16 (--structured_max_constraint_bytes)"));
}

TEST_F(StructuredTest, StructuralTagsAreCachedByContent) {
  const ConstraintSpec spec = Spec(ConstraintKind::kStructuralTag, HermesTag(true), "tools");
  std::shared_ptr<const CompiledConstraint> first = MustCompile(spec);
  std::shared_ptr<const CompiledConstraint> again = MustCompile(spec);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first.get(), again.get());
  EXPECT_NE(MustCompile(Spec(ConstraintKind::kStructuralTag, HermesTag(false), "tools")).get(),
            first.get());
  ConstraintCompilerStats stats = compiler_->stats();
  EXPECT_EQ(stats.cache_hits, 1);
  EXPECT_EQ(stats.cache_misses, 2);
}

TEST(ChoiceGrammarTest, EscapesQuotesBackslashesAndControlBytes) {
  EXPECT_EQ(ChoiceGrammar({"a\"b", "c\\d", "e\nf", "안녕"}),
            "root ::= \"a\\\"b\" | \"c\\\\d\" | \"e\\x0af\" | \"안녕\"");
}

}  // namespace
}  // namespace tpserve
