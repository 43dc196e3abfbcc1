// The tokenizer.json loader against HF `tokenizers` on small tokenizers trained in the shapes
// the families ship: SmolLM2 and Llama 3 (tests/golden/tokenizer/make_tokenizer_golden.py),
// Qwen2, Gemma, Llama 2 legacy, Mistral v0.3 Metaspace and Metaspace split with missing byte
// tokens (make_hf_tokenizer_golden.py).
#include "coordinator/tokenizer/hf_tokenizer_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "coordinator/tokenizer/golden_corpus.h"
#include "coordinator/tokenizer/incremental_detokenizer.h"
#include "coordinator/tokenizer/utf8.h"

namespace tpserve {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

Json LoadJson(const std::string& name) {
  absl::StatusOr<std::string> text = ReadFileToString(GoldenPath(name));
  EXPECT_TRUE(text.ok()) << text.status();
  return Json::parse(text.ok() ? *text : "{}");
}

absl::StatusOr<Tokenizer> FromJson(const Json& json) {
  absl::StatusOr<TokenizerData> data = TokenizerDataFromHfJson(json.dump());
  if (!data.ok()) return data.status();
  return Tokenizer::Create(*std::move(data));
}

// Every golden row: ids as HF gives them, and Decode gives the text back.
void ExpectMatchesGolden(const Tokenizer& tok, const std::string& ids_file) {
  absl::StatusOr<std::vector<GoldenRow>> rows = ReadGoldenRows(GoldenPath(ids_file));
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_GE(rows->size(), 200u);
  for (const GoldenRow& row : *rows) {
    absl::StatusOr<std::vector<int32_t>> ids = tok.Encode(row.text, {.add_bos = row.add_bos});
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, row.ids) << ids_file << " text: " << row.text;
    if (row.ids_special.has_value()) {
      EXPECT_EQ(*tok.Encode(row.text, {.allow_special = true}), *row.ids_special)
          << ids_file << " text (special parsed): " << row.text;
    }
    if (!row.add_bos) {
      EXPECT_EQ(*tok.Decode(row.ids), row.decoded.value_or(row.text)) << ids_file;
    }
  }
}

class HfTokenizerJsonTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HfTokenizerJsonTest, IdsMatchHfTokenizers) {
  absl::StatusOr<Tokenizer> tok =
      LoadHfTokenizerJson(GoldenPath("tiny_" + GetParam() + "_tokenizer.json"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  ExpectMatchesGolden(*tok, "tiny_" + GetParam() + "_ids.jsonl");
}

TEST_P(HfTokenizerJsonTest, MergesAsStringsLoadTheSame) {
  Json json = LoadJson("tiny_" + GetParam() + "_tokenizer.json");
  Json merges = Json::array();
  for (const Json& pair : json["model"]["merges"]) {
    merges.push_back(pair[0].get<std::string>() + " " + pair[1].get<std::string>());
  }
  json["model"]["merges"] = merges;
  absl::StatusOr<Tokenizer> tok = FromJson(json);
  ASSERT_TRUE(tok.ok()) << tok.status();
  ExpectMatchesGolden(*tok, "tiny_" + GetParam() + "_ids.jsonl");
}

TEST_P(HfTokenizerJsonTest, StreamingEqualsDecodeOnTheCorpus) {
  absl::StatusOr<Tokenizer> tok =
      LoadHfTokenizerJson(GoldenPath("tiny_" + GetParam() + "_tokenizer.json"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  absl::StatusOr<std::vector<GoldenRow>> rows =
      ReadGoldenRows(GoldenPath("tiny_" + GetParam() + "_ids.jsonl"));
  ASSERT_TRUE(rows.ok()) << rows.status();
  for (const GoldenRow& row : *rows) {
    absl::StatusOr<std::string> streamed = StreamIds(*tok, row.ids);
    ASSERT_TRUE(streamed.ok()) << streamed.status() << " text: " << row.text;
    EXPECT_EQ(*streamed, *tok->Decode(row.ids));
  }
}

TEST_P(HfTokenizerJsonTest, LongInputsWithoutSpacesRoundTrip) {
  // Finishing inside the small-test timeout is the check that encoding is not quadratic.
  absl::StatusOr<Tokenizer> tok =
      LoadHfTokenizerJson(GoldenPath("tiny_" + GetParam() + "_tokenizer.json"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  std::string letters, cjk;
  while (letters.size() < 200 * 1024) letters += "abracadabrasimsalabim";
  while (cjk.size() < 200 * 1024) cjk += "日本語中文한국어테스트";
  for (const std::string& text : {letters, cjk}) {
    absl::StatusOr<std::vector<int32_t>> ids = tok->Encode(text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_LE(ids->size(), text.size());  // byte fallback: one id per byte at worst
    EXPECT_EQ(*tok->Decode(*ids), text);
  }
}

INSTANTIATE_TEST_SUITE_P(TinyTokenizers, HfTokenizerJsonTest,
                         ::testing::Values("smollm", "llama3", "qwen2", "gemma", "llama2",
                                           "mistral", "spmsplit"));

TEST(HfTokenizerJsonMetadataTest, KindsAndBos) {
  absl::StatusOr<TokenizerData> smollm =
      TokenizerDataFromHfJson(LoadJson("tiny_smollm_tokenizer.json").dump());
  ASSERT_TRUE(smollm.ok()) << smollm.status();
  EXPECT_EQ(smollm->pre_tokenizer, PreTokenizerKind::kSmolLm);
  EXPECT_FALSE(smollm->add_bos_by_default);
  EXPECT_EQ(smollm->token_types[1], TokenType::kControl);  // <|im_start|>
  absl::StatusOr<TokenizerData> llama3 =
      TokenizerDataFromHfJson(LoadJson("tiny_llama3_tokenizer.json").dump());
  ASSERT_TRUE(llama3.ok()) << llama3.status();
  EXPECT_EQ(llama3->pre_tokenizer, PreTokenizerKind::kLlama3);
  EXPECT_TRUE(llama3->ignore_merges);
  EXPECT_TRUE(llama3->add_bos_by_default);
  EXPECT_EQ(llama3->bos_id, 0);
}

absl::StatusOr<TokenizerData> TinyData(const std::string& name) {
  return TokenizerDataFromHfJson(LoadJson("tiny_" + name + "_tokenizer.json").dump());
}

TEST(HfTokenizerJsonMetadataTest, NewFamilyShapes) {
  absl::StatusOr<TokenizerData> qwen2 = TinyData("qwen2");
  ASSERT_TRUE(qwen2.ok()) << qwen2.status();
  EXPECT_EQ(qwen2->model, TokenizerModel::kBpe);
  EXPECT_EQ(qwen2->pre_tokenizer, PreTokenizerKind::kQwen2);
  EXPECT_TRUE(qwen2->nfc);

  absl::StatusOr<TokenizerData> gemma = TinyData("gemma");
  ASSERT_TRUE(gemma.ok()) << gemma.status();
  EXPECT_EQ(gemma->model, TokenizerModel::kCharBpe);
  EXPECT_EQ(gemma->space_prefix, SpacePrefix::kNone);
  EXPECT_FALSE(gemma->decode_strips_leading_space);
  EXPECT_TRUE(gemma->fuse_unk);
  EXPECT_EQ(gemma->unk_id, 3);
  EXPECT_EQ(gemma->bos_id, 2);
  EXPECT_EQ(gemma->token_types[7 + 0x41], TokenType::kByte);    // <0x41>
  EXPECT_EQ(gemma->token_types[7 + 0x09], TokenType::kNormal);  // "\t" in its place
  EXPECT_EQ(gemma->tokens[7 + 256], "<table>");
  EXPECT_EQ(gemma->token_types[7 + 256], TokenType::kUserDefined);

  const struct {
    std::string name;
    SpacePrefix prefix;
    bool split;
  } spm_like[] = {{"llama2", SpacePrefix::kEveryFragment, false},
                  {"mistral", SpacePrefix::kFirstFragmentUnlessSpace, false},
                  {"spmsplit", SpacePrefix::kEveryFragmentUnlessSpace, true}};
  for (const auto& c : spm_like) {
    absl::StatusOr<TokenizerData> data = TinyData(c.name);
    ASSERT_TRUE(data.ok()) << c.name << ": " << data.status();
    EXPECT_EQ(data->model, TokenizerModel::kCharBpe) << c.name;
    EXPECT_EQ(data->space_prefix, c.prefix) << c.name;
    EXPECT_EQ(data->split_at_spaces, c.split) << c.name;
    EXPECT_TRUE(data->decode_strips_leading_space) << c.name;
  }
}

TEST(HfTokenizerJsonMetadataTest, SpmLikeDecodesBytesAndAddedTokensAsHf) {
  absl::StatusOr<Tokenizer> gemma = LoadHfTokenizerJson(GoldenPath("tiny_gemma_tokenizer.json"));
  ASSERT_TRUE(gemma.ok()) << gemma.status();
  // Bytes of one character spread over tokens come back whole; "▁" of an added token is a space.
  const int32_t four_spaces = *gemma->SpecialTokenId("▁▁▁▁");
  EXPECT_EQ(*gemma->Decode({7 + 0xE2, 7 + 0x82, 7 + 0xAC, four_spaces}), "€    ");
  std::vector<int32_t> expected = *gemma->Encode("x");
  expected.push_back(four_spaces);
  EXPECT_EQ(*gemma->Encode("x▁▁▁▁"), expected);
}

// Applies `edit` to the SmolLM-style tokenizer.json and returns the load status.
absl::Status LoadEdited(const std::function<void(Json&)>& edit) {
  Json json = LoadJson("tiny_smollm_tokenizer.json");
  edit(json);
  return TokenizerDataFromHfJson(json.dump()).status();
}

TEST(HfTokenizerJsonErrorsTest, UnsupportedStructureIsUnimplementedAndNamed) {
  const struct {
    std::function<void(Json&)> edit;
    std::string expected;
  } cases[] = {
      {[](Json& j) {
         j["normalizer"] = {{"type", "NFKC"}};
       },
       "normalizer = {\"type\":\"NFKC\"} is not supported"},
      {[](Json& j) { j["model"]["type"] = "WordPiece"; }, "model.type 'WordPiece'"},
      // byte_fallback selects the character shape, whose pre-tokenizers are not byte-level.
      {[](Json& j) { j["model"]["byte_fallback"] = true; }, "pre_tokenizer = {\"pretokenizers\""},
      {[](Json& j) {
         j["decoder"] = {{"type", "Metaspace"}};
       },
       "decoder = {\"type\":\"Metaspace\"}"},
      {[](Json& j) {
         j["pre_tokenizer"] = {{"type", "Metaspace"}};
       },
       "pre_tokenizer Metaspace"},
      {[](Json& j) { j["pre_tokenizer"]["pretokenizers"][0]["individual_digits"] = false; },
       "pre_tokenizer Sequence[Digits,ByteLevel]"},
      {[](Json& j) { j["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true; },
       "pre_tokenizer Sequence[Digits,ByteLevel]"},
      {[](Json& j) { j["added_tokens"][1]["lstrip"] = true; },
       "added token '<|im_start|>' sets lstrip=true"},
      {[](Json& j) {
         j["post_processor"] = {{"type", "RobertaProcessing"}};
       },
       "post_processor {\"type\":\"RobertaProcessing\"}"},
  };
  for (const auto& c : cases) {
    const absl::Status status = LoadEdited(c.edit);
    EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << c.expected << ": " << status;
    EXPECT_THAT(status.message(), HasSubstr(c.expected));
  }
}

// Applies `edit` to tiny_<name>_tokenizer.json and returns the load status.
absl::Status LoadEditedFrom(const std::string& name, const std::function<void(Json&)>& edit) {
  Json json = LoadJson("tiny_" + name + "_tokenizer.json");
  edit(json);
  absl::StatusOr<TokenizerData> data = TokenizerDataFromHfJson(json.dump());
  if (!data.ok()) return data.status();
  return Tokenizer::Create(*std::move(data)).status();
}

TEST(HfTokenizerJsonErrorsTest, UnsupportedNewShapesAreNamedByPath) {
  const struct {
    std::string name;
    std::function<void(Json&)> edit;
    std::string expected;
  } cases[] = {
      {"qwen2",
       [](Json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+"; },
       "pre_tokenizer.pretokenizers[0].pattern = {\"Regex\":\"\\\\w+\"} is not supported"},
      {"qwen2",
       [](Json& j) {
         j["normalizer"] = {{"type", "NFKC"}};
       },
       "normalizer = {"},
      {"llama2",
       [](Json& j) {
         j["normalizer"]["normalizers"][0] = {{"type", "NFKC"}};
       },
       "normalizer.normalizers[0] = {\"type\":\"NFKC\"}"},
      {"llama2", [](Json& j) { j["normalizer"] = nullptr; }, "normalizer = null"},
      {"llama2", [](Json& j) { j["decoder"]["decoders"][3]["start"] = 2; },
       "decoder.decoders[3] = {"},
      {"llama2", [](Json& j) { j["decoder"]["decoders"].erase(1); }, "decoder.decoders[1] = {"},
      {"llama2",
       [](Json& j) {
         j["decoder"] = {{"type", "Metaspace"}, {"replacement", "▁"}};
       },
       "decoder = {"},
      {"llama2", [](Json& j) { j["added_tokens"][1]["normalized"] = true; },
       "added_tokens[1] '<s>' has normalized=true"},
      {"gemma", [](Json& j) { j["added_tokens"][9]["normalized"] = true; },
       "added_tokens[9] '▁▁▁▁' has normalized=true"},
      {"gemma", [](Json& j) { j["pre_tokenizer"]["pattern"]["String"] = "x"; },
       "pre_tokenizer = {"},
      {"mistral", [](Json& j) { j["pre_tokenizer"]["replacement"] = "_"; },
       "pre_tokenizer.replacement = \"_\""},
      {"mistral", [](Json& j) { j["pre_tokenizer"]["prepend_scheme"] = "sometimes"; },
       "pre_tokenizer.prepend_scheme = \"sometimes\""},
      {"mistral",
       [](Json& j) {
         j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}};
       },
       "pre_tokenizer = {\"prepend_scheme\""},
      {"mistral", [](Json& j) { j["model"]["dropout"] = 0.1; }, "model.dropout"},
  };
  for (const auto& c : cases) {
    const absl::Status status = LoadEditedFrom(c.name, c.edit);
    EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << c.expected << ": " << status;
    EXPECT_THAT(status.message(), HasSubstr(c.expected)) << c.name;
  }
  // Gemma's added tokens without a space or "▁" may be matched in normalized text: the same.
  EXPECT_TRUE(
      LoadEditedFrom("gemma", [](Json& j) { j["added_tokens"][6]["normalized"] = true; }).ok());
  const absl::Status merge = LoadEditedFrom("gemma", [](Json& j) {
    j["model"]["merges"][0] = Json::array({"<0x41>", "zzz"});
  });
  EXPECT_EQ(merge.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(merge.message(), HasSubstr("CharBpe: merges[0] '<0x41> zzz': 'zzz' is not in"));
}

TEST(HfTokenizerJsonErrorsTest, MalformedInputIsInvalidArgument) {
  EXPECT_THAT(TokenizerDataFromHfJson("{not json").status().message(),
              HasSubstr("tokenizer.json does not parse"));
  absl::Status merge = LoadEdited([](Json& j) { j["model"]["merges"][3] = "abc"; });
  EXPECT_EQ(merge.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(merge.message(), HasSubstr("model.merges[3] 'abc'"));
  absl::Status vocab = LoadEdited([](Json& j) { j["model"]["vocab"]["!"] = -4; });
  EXPECT_THAT(vocab.message(), HasSubstr("model.vocab['!'] = -4"));
  absl::Status duplicate = LoadEdited([](Json& j) { j["model"]["vocab"]["zz-new"] = 5; });
  EXPECT_THAT(duplicate.message(), HasSubstr("gives id 5 to both"));
  EXPECT_EQ(LoadHfTokenizerJson("/nonexistent/tokenizer.json").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tpserve
