#include "coordinator/structured/schema_policy.h"

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

std::string Error(const std::string& schema, bool strict = true) {
  absl::StatusOr<SchemaPolicyResult> r = CheckSchema(schema, strict, "json_schema");
  EXPECT_FALSE(r.ok()) << schema;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorField(r.status()), "json_schema");
  return std::string(r.status().message());
}

TEST(SchemaPolicyTest, AcceptsTheKeywordsRealSchemasUse) {
  const std::string schema = R"({
    "$schema": "https://json-schema.org/draft/2020-12/schema", "title": "Person",
    "type": "object", "additionalProperties": false, "required": ["name", "age"],
    "properties": {
      "name": {"type": "string", "minLength": 1, "maxLength": 40, "description": "full name"},
      "age": {"type": "integer", "minimum": 0, "maximum": 150},
      "email": {"type": "string", "format": "email"},
      "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 3},
      "kind": {"const": "person", "type": "string"},
      "home": {"$ref": "#/$defs/address"},
      "nick": {"anyOf": [{"type": "string", "pattern": "^[a-z]+$"}, {"type": "null"}]},
      "score": {"type": ["number", "null"], "exclusiveMinimum": 0}
    },
    "$defs": {"address": {"type": "object", "properties": {"city": {"type": "string"}}}}
  })";
  absl::StatusOr<SchemaPolicyResult> r = CheckSchema(schema, /*strict=*/true, "json_schema");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->dropped, IsEmpty());
  EXPECT_EQ(nlohmann::json::parse(r->schema), nlohmann::json::parse(schema));
}

TEST(SchemaPolicyTest, StrictRejectsAnUnenforcedKeywordNamingItsPointer) {
  EXPECT_EQ(Error(R"({"type": "object", "properties": {"tags": {"type": "array",
               "uniqueItems": true}}})"),
            "json_schema: at /properties/tags/uniqueItems: keyword \"uniqueItems\" is not "
            "enforced by the grammar engine for this type; remove it, or send the schema with "
            "strict=false to have such keywords dropped and listed");
  EXPECT_THAT(Error(R"({"type": "object", "properties": {"a~b/c": {"type": "string",
                "not": {"const": "x"}}}})"),
              HasSubstr("at /properties/a~0b~1c/not: keyword \"not\""));
  EXPECT_THAT(Error(R"({"$ref": "#/$defs/a", "minimum": 3, "$defs": {"a": {"type": "integer"}}})"),
              HasSubstr("at /minimum: keyword \"minimum\" is not enforced beside \"$ref\""));
  EXPECT_THAT(Error(R"({"type": "string", "pattern": "a+", "maxLength": 4})"),
              HasSubstr("at /maxLength: keyword \"maxLength\" is not enforced together with "
                        "\"pattern\" or \"format\""));
  EXPECT_THAT(Error(R"({"type": "string", "format": "credit-card"})"),
              HasSubstr("at /format: keyword \"format\" is not enforced for the value "
                        "\"credit-card\""));
  EXPECT_THAT(Error(R"({"type": "number", "multipleOf": 0.5})"),
              HasSubstr("at /multipleOf: keyword \"multipleOf\" is not enforced except as a "
                        "whole number on an integer"));
  EXPECT_THAT(Error(R"({"minimum": 3})"),
              HasSubstr("at /minimum: keyword \"minimum\" is not enforced on a node without "
                        "\"type\""));
  EXPECT_EQ(Error(R"({"type": "object", "properties": {"a": {}}, "required": ["a", "b"]})"),
            "json_schema: at /required/1: required property \"b\" is not in \"properties\", so it "
            "would never be generated; list it there");
  EXPECT_THAT(Error(R"({"type": "object", "properties": {"a": {"type": "string",
                "nullable": true}}})"),
              HasSubstr("at /properties/a/nullable: keyword \"nullable\" is not enforced"));
  EXPECT_THAT(Error(R"({"type": "string", "enum": ["a", 1]})"),
              HasSubstr("at /type: keyword \"type\" is not enforced beside \"enum\""));
}

TEST(SchemaPolicyTest, NotStrictDropsAndListsWhatWouldNotBeEnforced) {
  absl::StatusOr<SchemaPolicyResult> r = CheckSchema(
      R"({"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"},
          "uniqueItems": true}, "n": {"type": "integer", "if": {}, "then": {}}}})",
      /*strict=*/false, "json_schema");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->dropped, ElementsAre("/properties/tags/uniqueItems", "/properties/n/if",
                                      "/properties/n/then"));
  EXPECT_EQ(nlohmann::json::parse(r->schema),
            nlohmann::json::parse(R"({"type": "object", "properties": {"tags": {"type": "array",
                "items": {"type": "string"}}, "n": {"type": "integer"}}})"));
}

TEST(SchemaPolicyTest, KeepsThePropertyOrderObjectsAreGeneratedIn) {
  absl::StatusOr<SchemaPolicyResult> r = CheckSchema(
      R"({"type": "object", "properties": {"zeta": {}, "alpha": {}, "mid": {}}})", true, "s");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->schema, R"({"type":"object","properties":{"zeta":{},"alpha":{},"mid":{}}})");
}

TEST(SchemaPolicyTest, RefsMustBeLocalAndResolve) {
  EXPECT_EQ(Error(R"({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}})"),
            "json_schema: at /properties/a/$ref: \"#/$defs/missing\" does not resolve in this "
            "schema");
  EXPECT_THAT(Error(R"({"$ref": "https://example.com/s.json"})"),
              HasSubstr("at /$ref: \"https://example.com/s.json\" is not a local reference"));
  // Recursive references resolve.
  EXPECT_TRUE(CheckSchema(R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
      "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}})",
                          true, "json_schema").ok());
}

TEST(SchemaPolicyTest, MalformedSchemasNameTheNodeOrTheByte) {
  EXPECT_EQ(Error(R"({"type": "object",)"), "json_schema: not valid JSON at byte 19 (counting from 1)");
  EXPECT_EQ(Error(R"([1, 2])"), "json_schema: at / is array, not a schema (an object or a boolean)");
  EXPECT_EQ(Error(R"({"type": "object", "properties": {"a": 3}})"),
            "json_schema: at /properties/a is number, not a schema (an object or a boolean)");
  EXPECT_EQ(Error(R"({"type": "strng"})"),
            "json_schema: at /type: \"strng\" is not a JSON Schema type");
  EXPECT_EQ(Error(R"({"anyOf": []})"), "json_schema: at /anyOf must be a non-empty array of schemas");
  EXPECT_EQ(Error(R"({"enum": []})"), "json_schema: at /enum must be a non-empty array");
}

}  // namespace
}  // namespace tpserve
