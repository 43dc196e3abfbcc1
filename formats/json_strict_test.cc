#include "formats/json_strict.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tpserve {
namespace {

using ::testing::HasSubstr;

TEST(ParseJsonStrictTest, ParsesValidJson) {
  absl::StatusOr<nlohmann::json> j = ParseJsonStrict(R"({"a": [1, 2], "b": {"a": 3}})", "hdr");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["a"][1].get<int>(), 2);
  // The same key in different objects is not a duplicate.
  EXPECT_EQ((*j)["b"]["a"].get<int>(), 3);
}

TEST(ParseJsonStrictTest, SyntaxErrorIsInvalidArgumentNamingTheInput) {
  absl::Status s = ParseJsonStrict(R"({"a": )", "x.safetensors header").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("x.safetensors header is not valid JSON: "));
  EXPECT_THAT(s.message(), HasSubstr("parse error"));
}

TEST(ParseJsonStrictTest, DuplicateKeysAreRefusedAtAnyDepth) {
  absl::Status s = ParseJsonStrict(R"({"w": 1, "w": 2})", "idx").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "idx has duplicate key 'w'");
  s = ParseJsonStrict(R"({"weight_map": {"t": "a", "u": "b", "t": "c"}})", "idx").status();
  EXPECT_EQ(s.message(), "idx has duplicate key 't'");
  // Sibling objects in an array keep separate key sets.
  EXPECT_TRUE(ParseJsonStrict(R"([{"k": 1}, {"k": 2}])", "idx").ok());
}

TEST(ParseJsonStrictTest, EmbeddedNulAndTrailingGarbageAreErrors) {
  absl::Status s = ParseJsonStrict(std::string_view("{}\0{", 4), "h").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "h is not valid JSON: NUL byte at offset 2");
  EXPECT_FALSE(ParseJsonStrict("{} {}", "h").ok());
}

}  // namespace
}  // namespace tpserve
