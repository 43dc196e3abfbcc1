// A Hermes tool call as a structural tag on SmolLM2-135M-Instruct's real vocabulary (49152
// byte-level BPE tokens, from the bundled GGUF; see scripts/setup.sh): the ids the tokenizer
// gives a valid call each pass the mask and are accepted, then EOS; arguments that break the
// schema are refused at the token that breaks it; free text before the trigger is accepted
// only when the tag does not require a call.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/structured/compiler.h"
#include "coordinator/structured/matcher.h"
#include "coordinator/tokenizer/gguf_tokenizer.h"
#include "coordinator/tokenizer/tokenizer.h"
#include "formats/gguf.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/bundled_model.h"

namespace tpserve {
namespace {

constexpr char kCallBegin[] = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ";
constexpr char kCallEnd[] = "}\n</tool_call>";

std::string HermesTag(bool at_least_one) {
  return std::string(R"({"type": "structural_tag", "format": {"type": "triggered_tags",
      "triggers": ["<tool_call>"], "tags": [{"type": "tag",
      "begin": "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ",
      "content": {"type": "json_schema", "json_schema": {"type": "object",
        "properties": {"city": {"type": "string"}}, "required": ["city"],
        "additionalProperties": false}},
      "end": "}\n</tool_call>"}], "at_least_one": )") +
         (at_least_one ? "true" : "false") + "}}";
}

class StructuralTagSmolLm2Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::string> path = BundledModelPath();
    if (!path.ok()) {
      load_error_ = new std::string(path.status().message());
      return;
    }
    absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(*path);
    absl::StatusOr<Tokenizer> tok =
        gguf.ok() ? TokenizerFromGguf(**gguf) : absl::StatusOr<Tokenizer>(gguf.status());
    if (!tok.ok()) {
      load_error_ = new std::string(tok.status().message());
      return;
    }
    tokenizer_ = new Tokenizer(*std::move(tok));
  }

  void SetUp() override {
    ASSERT_EQ(load_error_, nullptr) << *load_error_;
    std::optional<int32_t> im_end = tokenizer_->SpecialTokenId("<|im_end|>");
    ASSERT_TRUE(im_end.has_value());
    eos_ = *im_end;
    absl::StatusOr<std::unique_ptr<ConstraintCompiler>> compiler =
        ConstraintCompiler::Create(*tokenizer_, tokenizer_->vocab_size(), {eos_});
    ASSERT_TRUE(compiler.ok()) << compiler.status();
    compiler_ = *std::move(compiler);
  }

  ConstraintMatcher Matcher(bool at_least_one) {
    ConstraintSpec spec;
    spec.kind = ConstraintKind::kStructuralTag;
    spec.text = HermesTag(at_least_one);
    spec.field = "tools";
    absl::StatusOr<std::shared_ptr<const CompiledConstraint>> c = compiler_->Compile(spec);
    EXPECT_TRUE(c.ok()) << c.status();
    return ConstraintMatcher(*c);
  }

  std::vector<int32_t> Encode(const std::string& text) {
    absl::StatusOr<std::vector<int32_t>> ids = tokenizer_->Encode(text);
    EXPECT_TRUE(ids.ok()) << ids.status();
    return ids.ok() ? *ids : std::vector<int32_t>{};
  }

  bool Allowed(ConstraintMatcher& m, int32_t id) {
    std::vector<int32_t> mask(TokenMaskWords(compiler_->vocab_size()));
    m.FillMask(absl::MakeSpan(mask));
    return (static_cast<uint32_t>(mask[id / 32]) >> (id % 32)) & 1u;
  }

  // Every id passes the mask and is accepted; on failure, says which.
  void Walk(ConstraintMatcher& m, const std::vector<int32_t>& ids) {
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSERT_TRUE(Allowed(m, ids[i]))
          << "token " << i << " (" << ids[i] << ", \"" << *tokenizer_->TokenBytes(ids[i])
          << "\") is masked out";
      ASSERT_TRUE(m.Accept(ids[i])) << "token " << i;
    }
  }

  void ExpectEndsHere(ConstraintMatcher& m) {
    EXPECT_TRUE(m.completed());
    EXPECT_TRUE(Allowed(m, eos_));
    EXPECT_TRUE(m.Accept(eos_));
    EXPECT_TRUE(m.terminated());
  }

  static Tokenizer* tokenizer_;
  static std::string* load_error_;
  int32_t eos_ = -1;
  std::unique_ptr<ConstraintCompiler> compiler_;
};

Tokenizer* StructuralTagSmolLm2Test::tokenizer_ = nullptr;
std::string* StructuralTagSmolLm2Test::load_error_ = nullptr;

TEST_F(StructuralTagSmolLm2Test, ARequiredCallWalksTokenByTokenThenEnds) {
  ConstraintMatcher m = Matcher(/*at_least_one=*/true);
  EXPECT_FALSE(Allowed(m, eos_));  // a call is required
  EXPECT_FALSE(Allowed(m, Encode("Sure")[0]));  // and comes first
  const std::vector<int32_t> ids =
      Encode(std::string(kCallBegin) + "{\"city\": \"Paris\"}" + kCallEnd);
  ASSERT_GT(ids.size(), 10u);
  Walk(m, ids);
  ExpectEndsHere(m);
}

TEST_F(StructuralTagSmolLm2Test, ArgumentsWithoutTheRequiredPropertyAreRefusedAtTheirToken) {
  ConstraintMatcher m = Matcher(/*at_least_one=*/true);
  const std::string valid_prefix = std::string(kCallBegin) + "{";  // then "}" breaks "required"
  const std::vector<int32_t> ids = Encode(valid_prefix + "}" + kCallEnd);
  // The first token that reaches past the valid prefix is the one to refuse.
  size_t bad = 0;
  size_t accepted_bytes = 0;  // of the tokens before `bad`
  for (; bad < ids.size(); ++bad) {
    const size_t end = accepted_bytes + tokenizer_->TokenBytes(ids[bad])->size();
    if (end > valid_prefix.size()) break;
    accepted_bytes = end;
  }
  ASSERT_LT(bad, ids.size());
  Walk(m, std::vector<int32_t>(ids.begin(), ids.begin() + bad));
  EXPECT_FALSE(Allowed(m, ids[bad])) << "\"" << *tokenizer_->TokenBytes(ids[bad]) << "\"";
  EXPECT_FALSE(m.Accept(ids[bad]));
  // The matcher is where it was: the call still goes on with the property it requires.
  Walk(m, Encode(valid_prefix.substr(accepted_bytes) + "\"city\": \"Rome\"}" + kCallEnd));
  ExpectEndsHere(m);
}

TEST_F(StructuralTagSmolLm2Test, FreeTextBeforeTheTriggerWhenNoCallIsRequired) {
  ConstraintMatcher m = Matcher(/*at_least_one=*/false);
  EXPECT_TRUE(Allowed(m, eos_));  // no call at all is a valid reply
  Walk(m, Encode(std::string("Sure, let me look up the weather in Paris.\n") + kCallBegin +
                 "{\"city\": \"Paris\"}" + kCallEnd));
  ExpectEndsHere(m);

  ConstraintMatcher required = Matcher(/*at_least_one=*/true);
  EXPECT_FALSE(Allowed(required, Encode("Sure")[0]));
}

}  // namespace
}  // namespace tpserve
