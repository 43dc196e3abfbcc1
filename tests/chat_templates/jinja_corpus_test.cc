// Our Jinja engine against Hugging Face transformers on real model chat templates.
//
// tests/golden/chat_templates/golden.json (made by make_golden.py with transformers' own
// render_jinja_template) holds, per template and conversation, with and without the generation
// prompt: the template globals split into user `input` and server-set `kwargs`, and either the
// rendering ("expected", compared byte for byte), the template's raise_exception message
// ("error_contains", which our error must contain), or a Python runtime error ("error_python":
// transformers failed inside the template; we must fail too, in our own words).
// One test per template (TemplateCorpusTest/<template>), so a failure names the template; each
// mismatch reports the conversation and the first differing byte with context.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "coordinator/jinja/template.h"

namespace tpserve {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kCorpusDir[] = "tests/golden/chat_templates/";

// Every template in the corpus (templates/<name>.jinja); SOURCES.md says where each came from.
// CorpusTest.ListNamesEveryGoldenTemplate keeps this list and golden.json in step.
const std::vector<std::string>& TemplateNames() {
  static const auto* const kNames = new std::vector<std::string>{
      "CohereForAI-c4ai-command-r-plus-tool_use",
      "CohereForAI-c4ai-command-r7b-12-2024-tool_use",
      "HuggingFaceTB-SmolLM2-135M-Instruct",
      "Mistral-Small-3.2-24B-Instruct-2506",
      "NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
      "Qwen-QwQ-32B",
      "Qwen-Qwen2.5-7B-Instruct",
      "Qwen-Qwen3-0.6B",
      "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
      "deepseek-ai-DeepSeek-V3.1",
      "fireworks-ai-llama-3-firefunction-v2",
      "glm_4_5",
      "google-gemma-2-2b-it",
      "ibm-granite-granite-3.3-2B-Instruct",
      "llama-cpp-deepseek-r1",
      "llama-cpp-microsoft-Phi-4-mini-instruct",
      "meetkai-functionary-medium-v3.1",
      "meetkai-functionary-medium-v3.2",
      "meta-llama-Llama-3.1-8B-Instruct",
      "meta-llama-Llama-3.2-3B-Instruct",
      "microsoft-Phi-3.5-mini-instruct",
      "mistralai-Mistral-Nemo-Instruct-2407",
      "mistralai-Mistral-Small-3.1-24B-Instruct-2503",
      "moonshotai-Kimi-K2",
      "openai-gpt-oss-120b",
      "unsloth-mistral-Devstral-Small-2507",
  };
  return *kNames;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

std::string TemplatePath(const std::string& name) {
  return absl::StrCat(kCorpusDir, "templates/", name, ".jinja");
}

// golden.json, parsed once; ordered so that tojson sees keys in the order transformers did.
const Json& Golden() {
  static const auto* const kGolden = [] {
    absl::StatusOr<std::string> text = ReadFile(absl::StrCat(kCorpusDir, "golden.json"));
    return new Json(text.ok() ? Json::parse(*text) : Json());
  }();
  return *kGolden;
}

absl::Time GoldenNow() {
  absl::Time now;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, Golden().value("now", ""), &now, &error)) {
    ADD_FAILURE() << "golden.json \"now\": " << error;
  }
  return now;
}

// Where `actual` first departs from `expected`, with up to 40 bytes either side, escaped.
std::string FirstDifference(const std::string& expected, const std::string& actual) {
  const size_t limit = std::min(expected.size(), actual.size());
  size_t at = 0;
  while (at < limit && expected[at] == actual[at]) ++at;
  const size_t from = at > 40 ? at - 40 : 0;
  const auto window = [&](const std::string& s) {
    return absl::Utf8SafeCEscape(s.substr(from, at + 40 - from));
  };
  return absl::StrCat("first difference at byte ", at, " (expected ", expected.size(),
                      " bytes, got ", actual.size(), "); bytes ", from, "..", at + 40,
                      ":\n  expected: \"", window(expected), "\"\n  actual:   \"",
                      window(actual), "\"");
}

std::string CaseLabel(const Json& c) {
  return absl::StrCat(c.at("template").get<std::string>(), " / ",
                      c.at("conversation").get<std::string>(),
                      " / add_generation_prompt=", c.at("add_generation_prompt").get<bool>());
}

// Checks one golden case; returns true when it matches.
bool CheckCase(const jinja::Template& chat, const Json& c, absl::Time now) {
  const std::string label = CaseLabel(c);
  absl::StatusOr<std::string> rendered = chat.RenderToString(c.at("input"), c.at("kwargs"), now);
  if (c.contains("expected")) {
    const std::string expected = c["expected"].get<std::string>();
    if (!rendered.ok()) {
      ADD_FAILURE() << label << ": transformers rendered " << expected.size()
                    << " bytes, we failed: " << rendered.status();
      return false;
    }
    if (*rendered != expected) {
      ADD_FAILURE() << label << ": " << FirstDifference(expected, *rendered);
      return false;
    }
    return true;
  }
  if (rendered.ok()) {
    ADD_FAILURE() << label << ": transformers failed ("
                  << c.value("error_contains", c.value("error_python", "")) << "), we rendered \""
                  << absl::Utf8SafeCEscape(rendered->substr(0, 200)) << "\"";
    return false;
  }
  if (c.contains("error_contains")) {
    const std::string message = c["error_contains"].get<std::string>();
    if (!absl::StrContains(rendered.status().message(), message)) {
      ADD_FAILURE() << label << ": error should contain \"" << message
                    << "\", got: " << rendered.status();
      return false;
    }
  }
  return true;  // error_python: any error will do
}

TEST(CorpusTest, ListNamesEveryGoldenTemplate) {
  ASSERT_TRUE(Golden().contains("cases")) << "golden.json missing or unreadable";
  std::set<std::string> in_golden;
  for (const Json& c : Golden()["cases"]) in_golden.insert(c.at("template").get<std::string>());
  const std::set<std::string> listed(TemplateNames().begin(), TemplateNames().end());
  EXPECT_EQ(listed, in_golden);
  EXPECT_GE(listed.size(), 15u);
  EXPECT_FALSE(Golden().value("transformers_version", "").empty());
}

TEST(CorpusTest, EveryCorpusTemplateParses) {
  for (const std::string& name : TemplateNames()) {
    absl::StatusOr<std::string> source = ReadFile(TemplatePath(name));
    ASSERT_TRUE(source.ok()) << source.status();
    absl::StatusOr<jinja::Template> chat = jinja::Template::Parse(*source);
    EXPECT_TRUE(chat.ok()) << name << ": " << chat.status();
  }
}

class TemplateCorpusTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TemplateCorpusTest, RendersAsTransformers) {
  const std::string& name = GetParam();
  absl::StatusOr<std::string> source = ReadFile(TemplatePath(name));
  ASSERT_TRUE(source.ok()) << source.status();
  absl::StatusOr<jinja::Template> chat = jinja::Template::Parse(*source);
  ASSERT_TRUE(chat.ok()) << name << " does not parse: " << chat.status();
  const absl::Time now = GoldenNow();
  int cases = 0;
  int matched = 0;
  for (const Json& c : Golden()["cases"]) {
    if (c.at("template") != name) continue;
    ++cases;
    matched += CheckCase(*chat, c, now) ? 1 : 0;
  }
  EXPECT_GE(cases, 8) << "too few golden cases for " << name;
  std::cout << "[corpus] " << name << ": " << matched << "/" << cases << " cases match\n";
  RecordProperty("cases", cases);
  RecordProperty("matched", matched);
}

// gtest names allow only [A-Za-z0-9_].
std::string ParamName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Corpus, TemplateCorpusTest, ::testing::ValuesIn(TemplateNames()),
                         ParamName);

}  // namespace
}  // namespace tpserve
