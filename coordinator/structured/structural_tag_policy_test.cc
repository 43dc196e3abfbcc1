#include "coordinator/structured/structural_tag_policy.h"

#include <string>

#include "base/field_error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tpserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Schemas at three depths: a sequence's element, a tag's content inside triggered_tags, and a
// dispatch rule's format; an untyped json_schema format; a const_string with a "json_schema"
// that is not a format key (never walked).
constexpr char kTag[] = R"({"type": "structural_tag", "format": {"type": "sequence", "elements": [
  {"type": "json_schema", "json_schema": {"type": "array", "uniqueItems": true}},
  {"type": "triggered_tags", "triggers": ["<f>"], "tags": [{"begin": "<f>", "end": "</f>",
    "content": {"json_schema": {"type": "object", "properties": {
      "v": {"oneOf": [{"type": "integer"}, {"type": "number"}]}}, "not": {"enum": [1]}}}}]},
  {"type": "dispatch", "rules": [["<g>", {"type": "json_schema",
    "json_schema": {"type": "string", "format": "color"}}]]},
  {"type": "const_string", "value": "x", "json_schema": {"not": {}}}]}})";

TEST(StructuralTagPolicyTest, StrictRefusesTheFirstUnenforcedKeywordByItsPointer) {
  absl::StatusOr<SchemaPolicyResult> r = CheckStructuralTagSchemas(kTag, true, "tools");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorField(r.status()), "tools");
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("tools: at /format/elements/0/json_schema/uniqueItems: keyword "
                        "\"uniqueItems\" is not enforced"));
}

TEST(StructuralTagPolicyTest, NotStrictDropsFromEverySchemaAndListsThem) {
  absl::StatusOr<SchemaPolicyResult> r = CheckStructuralTagSchemas(kTag, false, "tools");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->dropped, ElementsAre("/format/elements/0/json_schema/uniqueItems",
                                      "/format/elements/1/tags/0/content/json_schema/not"));
  // An unknown format is an annotation, strict or not (schema_normalize.h).
  EXPECT_THAT(r->annotations, ElementsAre("/format/elements/2/rules/0/1/json_schema/format"));
  EXPECT_THAT(r->one_of_pointers,
              ElementsAre("/format/elements/1/tags/0/content/json_schema/properties/v/oneOf"));
  const nlohmann::json tag = nlohmann::json::parse(r->schema);
  const nlohmann::json& elements = tag["format"]["elements"];
  EXPECT_EQ(elements[0]["json_schema"], nlohmann::json::parse(R"({"type": "array"})"));
  EXPECT_FALSE(elements[1]["tags"][0]["content"]["json_schema"].contains("not"));
  EXPECT_EQ(elements[2]["rules"][0][1]["json_schema"],
            nlohmann::json::parse(R"({"type": "string"})"));
  EXPECT_TRUE(elements[3]["json_schema"].contains("not"));  // not a format XGrammar reads
}

TEST(StructuralTagPolicyTest, ATagWithoutSchemasPassesUnchangedAndBadJsonIsNamed) {
  const std::string text =
      R"({"type": "structural_tag", "format": {"type": "const_string", "value": "hi"}})";
  absl::StatusOr<SchemaPolicyResult> r = CheckStructuralTagSchemas(text, true, "tools");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(nlohmann::json::parse(r->schema), nlohmann::json::parse(text));
  EXPECT_THAT(r->dropped, IsEmpty());

  absl::StatusOr<SchemaPolicyResult> bad = CheckStructuralTagSchemas("{\"format\": [", true, "t");
  EXPECT_EQ(bad.status().message(), "t: not valid JSON at byte 13 (counting from 1)");
  // A schema that is not a schema is the policy's to name, from the tag's root.
  absl::StatusOr<SchemaPolicyResult> list = CheckStructuralTagSchemas(
      R"({"format": {"type": "json_schema", "json_schema": {"properties": {"a": 5}}}})",
      /*strict=*/true, "t");
  EXPECT_EQ(list.status().message(),
            "t: at /format/json_schema/properties/a is number, not a schema (an object or a "
            "boolean)");
}

}  // namespace
}  // namespace tpserve
