#include "coordinator/tools/json_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace tpserve {
namespace {

using ::testing::ElementsAre;

JsonExtentScanner::State ScanWhole(std::string_view text, size_t* end = nullptr) {
  JsonExtentScanner s;
  JsonExtentScanner::State st = s.Scan(text);
  if (end != nullptr) *end = s.end();
  return st;
}

TEST(JsonExtentScanner, FindsTheEndPastBracketsInStrings) {
  size_t end = 0;
  const std::string text = R"({"a": "}]\"{", "b": [1, {"c": null}]} tail)";
  ASSERT_EQ(ScanWhole(text, &end), JsonExtentScanner::kComplete);
  EXPECT_EQ(text.substr(end), " tail");
  EXPECT_EQ(ScanWhole("[true, false, -1.5e+3]", &end), JsonExtentScanner::kComplete);
}

TEST(JsonExtentScanner, ResumesAcrossGrowingText) {
  const std::string text = R"({"k": "v\\", "n": {"m": [1]}})";
  JsonExtentScanner s;
  for (size_t n = 1; n < text.size(); ++n) {
    ASSERT_EQ(s.Scan(std::string_view(text).substr(0, n)), JsonExtentScanner::kIncomplete) << n;
  }
  ASSERT_EQ(s.Scan(text), JsonExtentScanner::kComplete);
  EXPECT_EQ(s.end(), text.size());
}

TEST(JsonExtentScanner, RefusesWhatNoJsonHolds) {
  EXPECT_EQ(ScanWhole("{like this"), JsonExtentScanner::kInvalid);    // 'i' outside a string
  EXPECT_EQ(ScanWhole("{\"a\": [1}"), JsonExtentScanner::kInvalid);   // mismatched bracket
  EXPECT_EQ(ScanWhole("{\"a\n\": 1}"), JsonExtentScanner::kInvalid);  // raw newline in string
  EXPECT_EQ(ScanWhole(std::string(300, '[')), JsonExtentScanner::kInvalid);  // too deep
  // Bracket-balanced but not JSON: complete here, refused by IsValidJson.
  EXPECT_EQ(ScanWhole("{\"a\" 1}"), JsonExtentScanner::kComplete);
  EXPECT_FALSE(IsValidJson("{\"a\" 1}"));
}

TEST(IsValidJson, StrictJson) {
  EXPECT_TRUE(IsValidJson(R"( {"a": [1, 2.5, "x", null]} )"));
  EXPECT_FALSE(IsValidJson("{'a': 1}"));
  EXPECT_FALSE(IsValidJson("{\"a\": 1,}"));
  EXPECT_FALSE(IsValidJson("{\"a\": 1} x"));
}

TEST(ObjectMembers, ValuesAreTheExactBytes) {
  const std::vector<JsonMember> members =
      ObjectMembers("{ \"n\\u0061me\" : \"f\" ,\"args\":{\"x\" : [1,  2]}\n, \"z\": -0.50 }");
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(members[0].key, "name");
  EXPECT_EQ(members[0].value, "\"f\"");
  EXPECT_EQ(members[1].value, "{\"x\" : [1,  2]}");
  EXPECT_EQ(members[2].value, "-0.50");
  EXPECT_THAT(ArrayElements("[ {\"a\": 1} , 2,\"]\"]"), ElementsAre("{\"a\": 1}", "2", "\"]\""));
  EXPECT_TRUE(ArrayElements("[ ]").empty());
}

TEST(DecodeJsonCall, TheShapesModelsWrite) {
  std::optional<JsonCall> c = DecodeJsonCall(R"({"name": "f", "arguments": {"a": 1.0}})");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->name, "f");
  EXPECT_EQ(c->arguments, R"({"a": 1.0})");  // not re-serialised as 1
  EXPECT_EQ(DecodeJsonCall(R"({"name": "f", "parameters": {}})")->arguments, "{}");
  EXPECT_EQ(DecodeJsonCall(R"({"name": "f"})")->arguments, "{}");
  EXPECT_EQ(DecodeJsonCall(R"({"name": "f", "arguments": null})")->arguments, "{}");
  EXPECT_EQ(DecodeJsonCall(R"({"name": "f", "arguments": "{\"a\": 1}"})")->arguments,
            R"({"a": 1})");
  EXPECT_EQ(DecodeJsonCall(R"({"arguments": {}, "id": "x", "name": "f"})")->name, "f");
}

TEST(DecodeJsonCall, WhatIsNotACall) {
  EXPECT_FALSE(DecodeJsonCall(R"({"arguments": {}})").has_value());           // no name
  EXPECT_FALSE(DecodeJsonCall(R"({"name": 3})").has_value());                 // not a string
  EXPECT_FALSE(DecodeJsonCall(R"({"name": ""})").has_value());                // empty
  EXPECT_FALSE(DecodeJsonCall(R"({"name": "f", "name": "g"})").has_value());  // two names
  EXPECT_FALSE(DecodeJsonCall(R"({"name": "f", "arguments": [1]})").has_value());
  EXPECT_FALSE(DecodeJsonCall(R"({"name": "f", "arguments": "not json"})").has_value());
  EXPECT_FALSE(DecodeJsonCall(R"({"name": "f", "arguments": {}, "parameters": {}})").has_value());
  EXPECT_FALSE(DecodeJsonCall(R"({"name": "f", "arguments": {}})"
                              "x")
                   .has_value());
}

}  // namespace
}  // namespace tpserve
