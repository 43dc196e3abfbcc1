#include "coordinator/structured/schema_policy.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/field_error.h"
#include "coordinator/structured/schema_normalize.h"
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
  EXPECT_THAT(r->annotations, IsEmpty());
  // The same schema, its reference pointing into the table of the targets reached.
  nlohmann::json expected = nlohmann::json::parse(schema);
  expected.erase("$schema");
  expected["properties"]["home"]["$ref"] = "#/$defs/ref0";
  // "type" beside const/enum: every value has it, so the values alone say it.
  expected["properties"]["kind"].erase("type");
  expected["properties"]["tags"]["items"].erase("type");
  expected["$defs"] = {{"ref0", expected["$defs"]["address"]}};
  EXPECT_EQ(nlohmann::json::parse(r->schema), expected);
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
  EXPECT_THAT(Error(R"({"enum": ["a", "b"], "pattern": "^a"})"),
              HasSubstr("at /pattern: keyword \"pattern\" is not enforced beside \"enum\""));
  EXPECT_THAT(Error(R"({"type": "string", "pattern": "(a|b)+", "maxLength": 4})"),
              HasSubstr("at /maxLength: keyword \"maxLength\" is not enforced together with "
                        "\"pattern\" or \"format\""));
  EXPECT_THAT(Error(R"({"type": "string", "pattern": "^(ab)+$", "maxLength": 4})"),
              HasSubstr("at /maxLength: keyword \"maxLength\" is not enforced together with "
                        "\"pattern\" or \"format\""));
  EXPECT_THAT(Error(R"({"type": "number", "multipleOf": 0.5})"),
              HasSubstr("at /multipleOf: keyword \"multipleOf\" is not enforced except as a "
                        "whole number on an integer"));
  EXPECT_THAT(Error(R"({"minimum": 3, "minLength": 2})"),
              HasSubstr("at /minimum: keyword \"minimum\" is not enforced on a node without "
                        "\"type\""));
  EXPECT_EQ(Error(R"({"type": "object", "properties": {"a": {}}, "required": ["a", "b"],
                      "patternProperties": {"^x": {}}})"),
            "json_schema: at /required/1: required property \"b\" is not in \"properties\", so it "
            "would never be generated; list it there");
  EXPECT_THAT(Error(R"({"type": "array", "items": {"type": "string"}, "uniqueItems": true})"),
              HasSubstr("at /uniqueItems: keyword \"uniqueItems\" is not enforced"));
  EXPECT_THAT(Error(R"({"type": "object", "dependentRequired": {"a": ["b"]}})"),
              HasSubstr("at /dependentRequired: keyword \"dependentRequired\" is not enforced"));
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

TEST(SchemaPolicyTest, RefsMustResolveInTheDocument) {
  EXPECT_EQ(Error(R"({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}})"),
            "json_schema: at /properties/a/$ref: \"#/$defs/missing\" does not resolve in this "
            "schema");
  EXPECT_EQ(Error(R"({"$ref": "https://example.com/s.json"})"),
            "json_schema: at /$ref: \"https://example.com/s.json\" does not resolve in this schema "
            "(it names https://example.com/s.json; only this document and the schemas in it that "
            "an \"$id\" names are resolved, nothing is fetched)");
  EXPECT_EQ(Error(R"({"$ref": "#nowhere"})"),
            "json_schema: at /$ref: \"#nowhere\" does not resolve in this schema (no anchor "
            "\"nowhere\")");
  // Recursive references resolve.
  EXPECT_TRUE(CheckSchema(R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
      "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}})",
                          true, "json_schema").ok());
}

SchemaPolicyResult Accepted(const std::string& schema, bool strict = true) {
  absl::StatusOr<SchemaPolicyResult> r = CheckSchema(schema, strict, "json_schema");
  EXPECT_TRUE(r.ok()) << r.status() << "\n" << schema;
  return r.ok() ? *std::move(r) : SchemaPolicyResult{};
}

nlohmann::json Compiled(const SchemaPolicyResult& r) {
  return r.schema.empty() ? nlohmann::json() : nlohmann::json::parse(r.schema);
}

// Annotations: keywords that are not assertions in the schema's draft are accepted strict or
// not, listed, and left out of what is compiled; the spec's own (title, ...) are not listed.
TEST(SchemaPolicyTest, KeywordsOutsideTheDraftsVocabularyAreListedAnnotations) {
  SchemaPolicyResult r = Accepted(R"({"type": "object", "title": "T", "example": {"a": 1},
      "links": [], "self": {"vendor": "com.acme"}, "x-order": 3, "properties": {
        "a": {"type": "integer", "readonly": true, "_format": "int", "description": "d"},
        "b": {"type": "string", "nullable": true}}})");
  EXPECT_THAT(r.annotations, ElementsAre("/example", "/links", "/self", "/x-order",
                                         "/properties/a/readonly", "/properties/a/_format",
                                         "/properties/b/nullable"));
  EXPECT_THAT(r.dropped, IsEmpty());
  EXPECT_EQ(Compiled(r), nlohmann::json::parse(R"({"type": "object", "title": "T",
      "properties": {"a": {"type": "integer", "description": "d"}, "b": {"type": "string"}}})"));
  // draft-04 spells $id "id" (the base URI, not listed); from draft-06 "id" is an annotation.
  EXPECT_THAT(Accepted(R"({"$schema": "http://json-schema.org/draft-04/schema#",
      "id": "https://x.test/a.json", "type": "string"})").annotations, IsEmpty());
  EXPECT_THAT(Accepted(R"({"$schema": "http://json-schema.org/draft-07/schema#",
      "id": "a", "type": "string"})").annotations, ElementsAre("/id"));
  // const entered the vocabulary in draft-06: in a draft-04 schema it constrains nothing.
  SchemaPolicyResult old = Accepted(R"({"$schema": "http://json-schema.org/draft-04/schema#",
      "type": "string", "const": "x"})");
  EXPECT_THAT(old.annotations, ElementsAre("/const"));
  EXPECT_EQ(Compiled(old), nlohmann::json::parse(R"({"type": "string"})"));
}

TEST(SchemaPolicyTest, UnknownFormatsAreAnnotationsUnlessTheSchemaAssertsFormats) {
  SchemaPolicyResult r = Accepted(R"({"type": "object", "properties": {
      "p": {"type": "string", "format": "path"}, "d": {"type": "string", "format": "date"},
      "b": {"type": "string", "format": "byte"}}})");
  EXPECT_THAT(r.annotations, ElementsAre("/properties/p/format", "/properties/b/format"));
  EXPECT_EQ(Compiled(r)["properties"]["d"]["format"], "date");  // known: enforced
  EXPECT_FALSE(Compiled(r)["properties"]["p"].contains("format"));
  EXPECT_THAT(Error(R"({"$schema": "https://json-schema.org/draft/2020-12/schema",
      "$vocabulary": {"https://json-schema.org/draft/2020-12/vocab/format-assertion": true},
      "type": "string", "format": "path"})"),
              HasSubstr("at /format: keyword \"format\" is not enforced for the value \"path\""));
}

TEST(SchemaPolicyTest, RefsResolveAgainstTheBaseUriThatIdSets) {
  SchemaPolicyResult r = Accepted(R"({"$id": "https://x.test/schemas/root.json",
      "type": "object", "properties": {
        "abs": {"$ref": "https://x.test/schemas/root.json#/$defs/n"},
        "rel": {"$ref": "item.json"},
        "anchored": {"$ref": "#name"},
        "inner": {"$ref": "item.json#/properties/q"}},
      "$defs": {
        "n": {"type": "integer"},
        "item": {"$id": "item.json", "type": "object", "properties": {"q": {"type": "boolean"}}},
        "a": {"$anchor": "name", "type": "string"}}})");
  const nlohmann::json c = Compiled(r);
  const nlohmann::json& defs = c["$defs"];
  auto target = [&](const char* property) {
    const std::string ref = c["properties"][property]["$ref"];
    return defs[ref.substr(std::string("#/$defs/").size())];
  };
  EXPECT_EQ(target("abs"), nlohmann::json::parse(R"({"type": "integer"})"));
  EXPECT_EQ(target("rel")["properties"]["q"], nlohmann::json::parse(R"({"type": "boolean"})"));
  EXPECT_EQ(target("anchored"), nlohmann::json::parse(R"({"type": "string"})"));
  EXPECT_EQ(target("inner"), nlohmann::json::parse(R"({"type": "boolean"})"));
  // draft-07's anchors are "$id": "#name"; a relative $ref that leaves the document is remote.
  EXPECT_TRUE(Accepted(R"({"$schema": "http://json-schema.org/draft-07/schema#",
      "properties": {"a": {"$ref": "#A"}}, "definitions": {"x": {"$id": "#A", "type": "null"}}})")
                  .annotations.empty());
  EXPECT_THAT(Error(R"({"$id": "https://x.test/root.json", "$ref": "other.json"})"),
              HasSubstr("it names https://x.test/other.json; only this document"));
  // Definitions nothing refers to constrain nothing and are not looked at.
  EXPECT_EQ(Compiled(Accepted(R"({"type": "string", "$defs": {"unused": {"not": {}}}})")),
            nlohmann::json::parse(R"({"type": "string"})"));
}

TEST(SchemaPolicyTest, SiblingsOfRefFollowTheDeclaredDraft) {
  // Up to draft-07 a $ref's siblings are ignored (by the spec and by Python jsonschema): listed.
  SchemaPolicyResult old = Accepted(R"({"$schema": "http://json-schema.org/draft-07/schema#",
      "$ref": "#/definitions/a", "minimum": 3, "description": "d",
      "definitions": {"a": {"type": "integer"}}})");
  EXPECT_THAT(old.annotations, ElementsAre("/minimum"));
  EXPECT_EQ(Compiled(old)["$ref"], "#/$defs/ref0");
  EXPECT_FALSE(Compiled(old).contains("minimum"));
  // From 2019-09 they are assertions beside it: merged with its target and enforced.
  for (const char* draft : {"https://json-schema.org/draft/2019-09/schema",
                            "https://json-schema.org/draft/2020-12/schema"}) {
    SchemaPolicyResult now = Accepted(absl::StrCat(R"({"$schema": ")", draft, R"(",
        "$ref": "#/$defs/a", "minimum": 3, "$defs": {"a": {"type": "integer"}}})"));
    EXPECT_THAT(now.annotations, IsEmpty());
    EXPECT_EQ(Compiled(now), nlohmann::json::parse(R"({"type": "integer", "minimum": 3})"))
        << draft;
  }
}

TEST(SchemaPolicyTest, AllOfAndTheSiblingsOfCombinatorsAreMergedWhereExact) {
  // A base object and a refinement: one object with both sides' properties and requirements.
  EXPECT_EQ(Compiled(Accepted(R"({"type": "object", "properties": {"a": {"type": "string"}},
      "required": ["a"], "allOf": [{"$ref": "#/$defs/base"},
        {"properties": {"b": {"type": "integer", "minimum": 0}}, "required": ["b"]}],
      "$defs": {"base": {"properties": {"b": {"maximum": 9}, "c": {"type": "boolean"}}}}})")),
            nlohmann::json::parse(R"({"type": "object", "properties": {"a": {"type": "string"},
      "b": {"maximum": 9, "type": "integer", "minimum": 0}, "c": {"type": "boolean"}},
      "required": ["a", "b"]})"));
  // A branch that closes the object still holds for the names the other side adds: `a` may not
  // appear, so {a, b} stays invalid (a naive merge would accept it).
  EXPECT_EQ(Compiled(Accepted(R"({"properties": {"a": {}},
      "allOf": [{"properties": {"b": {}}, "additionalProperties": false}]})")),
            nlohmann::json::parse(R"({"type": "object", "properties": {"b": {}},
      "additionalProperties": false})"));
  // Keywords beside anyOf go into every branch; branches that cannot hold are left out.
  EXPECT_EQ(Compiled(Accepted(R"({"type": "string", "maxLength": 5,
      "anyOf": [{"minLength": 2}, {"type": "integer"}, {"enum": ["abc", "toolong", 1]}]})")),
            nlohmann::json::parse(R"({"anyOf": [{"type": "string", "maxLength": 5,
      "minLength": 2}, {"enum": ["abc"]}]})"));
}

TEST(SchemaPolicyTest, MergesThatWouldChangeTheMeaningAreRefusedOrListed) {
  const std::string two_patterns = R"({"type": "string", "pattern": "^a", "properties": {},
      "allOf": [{"pattern": "b$"}]})";
  EXPECT_THAT(Error(two_patterns),
              HasSubstr("json_schema: at /: the keywords of its \"allOf\" / \"anyOf\" / \"oneOf\" "
                        "/ \"$ref\" and those beside it cannot be merged exactly (two different "
                        "\"pattern\")"));
  EXPECT_THAT(Accepted(two_patterns, /*strict=*/false).dropped, ElementsAre("/allOf/0/pattern"));
  EXPECT_THAT(Error(R"({"type": "object", "patternProperties": {"^x": {"type": "string"}},
      "allOf": [{"properties": {"xa": {"type": "integer"}}}]})"),
              HasSubstr("(which names the other side's properties match is a regex question)"));
  EXPECT_THAT(Error(R"({"properties": {"a": {}}, "unevaluatedProperties": false,
      "allOf": [{"properties": {"b": {}}}]})"),
              HasSubstr("(\"unevaluatedProperties\" depends on every keyword beside it)"));
  EXPECT_THAT(Error(R"({"$defs": {"n": {"allOf": [{"$ref": "#/$defs/n"}, {"type": "object"}]}},
      "$ref": "#/$defs/n"})"),
              HasSubstr("at /$defs/n: the merge reaches /$defs/n through references back to "
                        "itself; the result would be infinite"));
}

TEST(SchemaPolicyTest, ABoundOnWhatAMergeMakesRefusesNamingTheNode) {
  // 9 x 9 branches: over the bound of 64.
  std::string nine = "[";
  for (int i = 0; i < 9; ++i) nine += absl::StrCat(i ? "," : "", R"({"const": )", i, "}");
  nine += "]";
  EXPECT_EQ(Error(absl::StrCat(R"({"properties": {"p": {"anyOf": )", nine,
                               R"(, "allOf": [{"anyOf": )", nine, "}]}}}")),
            absl::StrCat("json_schema: at /properties/p: merging the keywords beside its \"anyOf\" "
                         "into the branches makes more than ", kMaxMergedBranches,
                         " branches, over the bound"));
}

TEST(SchemaPolicyTest, OneOfWhoseBranchesAreProvablyDisjointIsAnAnyOf) {
  SchemaPolicyResult r = Accepted(R"({"oneOf": [
      {"type": "object", "properties": {"kind": {"const": "a"}, "x": {}}, "required": ["kind"]},
      {"$ref": "#/$defs/b"}, {"type": "string"}, {"type": "number", "maximum": 0}],
      "$defs": {"b": {"type": "object", "properties": {"kind": {"enum": ["b", "c"]}},
                      "required": ["kind"]}}})");
  EXPECT_TRUE(Compiled(r).contains("anyOf")) << r.schema;
  EXPECT_THAT(r.one_of_pointers, IsEmpty());
  // integer and number overlap: left a oneOf (XGrammar's own proof decides; see compiler.h).
  SchemaPolicyResult overlap = Accepted(R"({"oneOf": [{"type": "integer"}, {"type": "number"}]})");
  EXPECT_THAT(overlap.one_of_pointers, ElementsAre("/oneOf"));
}

TEST(SchemaPolicyTest, AssertionsThatHoldForEveryInstanceOfTheNodeAreRemovedUnlisted) {
  SchemaPolicyResult r = Accepted(R"({"type": "object", "properties": {
      "n": {"type": "integer", "minLength": 3, "pattern": "x", "uniqueItems": false},
      "e": {"type": "string", "enum": ["a", 1, null, "bb"], "maxLength": 1},
      "s": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$", "maxLength": 63},
      "t": {"type": "string", "pattern": "[0-9]{10,10}", "minLength": 10, "maxLength": 10},
      "g": {"type": "string", "pattern": "^([a-z]+):(?:[0-9]+)?:([a-z-]*)$", "maxLength": 20},
      "m": {"type": "string", "pattern": "^[ab]*x[ab]*$", "minLength": 7},
      "z": {"type": "string", "pattern": "^/[^\u0000]+$"},
      "f": {"format": "date"}},
      "required": ["n", "id"]})");
  EXPECT_THAT(r.annotations, IsEmpty());
  EXPECT_THAT(r.dropped, IsEmpty());
  EXPECT_EQ(Compiled(r), nlohmann::json::parse(R"({"type": "object", "properties": {
      "n": {"type": "integer"}, "e": {"enum": ["a"]},
      "s": {"type": "string", "pattern": "^[a-z][a-z0-9-]{0,62}$"},
      "t": {"type": "string", "pattern": "^[0-9]{10}$"},
      "g": {"type": "string", "pattern": "^[a-z]{1,6}:[0-9]{0,5}:[a-z-]{0,5}$"},
      "m": {"type": "string", "pattern": "^[ab]{6,}x[ab]*$"},
      "z": {"type": "string", "pattern": "^/[^\\x00]+$"},
      "f": {"format": "date", "type": "string"}, "id": {}},
      "required": ["n", "id"]})"));
}

TEST(SchemaPolicyTest, BranchesThatCannotHoldAreLeftOutAndHugeIntegerBoundsNarrowed) {
  // The first branch requires a name the closed object beside it forbids.
  EXPECT_EQ(Compiled(Accepted(R"({"type": "object", "additionalProperties": false,
      "properties": {"b": {"type": "string"}},
      "anyOf": [{"required": ["a"]}, {"required": ["b"]}]})")),
            nlohmann::json::parse(R"({"anyOf": [{"type": "object", "additionalProperties": false,
      "properties": {"b": {"type": "string"}}, "required": ["b"]}]})"));
  // XGrammar refuses integer bounds past 2^53; they are brought to 2^53 (fewer values, all valid).
  EXPECT_EQ(Compiled(Accepted(R"({"type": "integer", "minimum": -1e300,
      "exclusiveMaximum": 18446744073709551615})")),
            nlohmann::json::parse(R"({"type": "integer", "minimum": -9007199254740992,
      "maximum": 9007199254740992})"));
}

TEST(SchemaPolicyTest, OlderSpellingsBecomeTheirCurrentOnes) {
  EXPECT_EQ(Compiled(Accepted(R"({"$schema": "http://json-schema.org/draft-04/schema#",
      "type": "object", "properties": {
        "x": {"type": "number", "minimum": 0, "exclusiveMinimum": true, "maximum": 5},
        "t": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}],
              "additionalItems": false}}})")),
            nlohmann::json::parse(R"({"type": "object", "properties": {
        "x": {"type": "number", "exclusiveMinimum": 0, "maximum": 5},
        "t": {"type": "array", "items": false,
              "prefixItems": [{"type": "string"}, {"type": "integer"}]}}})"));
}

TEST(SchemaPolicyTest, NotInShapesWithAPositiveSpellingIsEnforced) {
  // not {} admits nothing; not required [b] forbids b; not type [...] is the other types.
  EXPECT_EQ(Compiled(Accepted(R"({"type": "object", "additionalProperties": {"type": "string"},
      "properties": {"a": {"type": "integer"}, "gone": {"not": {}}}, "not": {"required": ["b"]},
      "oneOf": [{"required": ["a"], "not": {"required": ["c"]}},
                {"required": ["c"], "not": {"required": ["a"]}}]})")),
            nlohmann::json::parse(R"({"anyOf": [
      {"type": "object", "additionalProperties": false, "properties": {"a": {"type": "integer"}},
       "required": ["a"]},
      {"type": "object", "additionalProperties": false, "properties": {"c": {"type": "string"}},
       "required": ["c"]}]})"));
  EXPECT_EQ(Compiled(Accepted(R"({"not": {"type": ["string", "object", "array", "null"]}})")),
            nlohmann::json::parse(R"({"type": ["number", "boolean"]})"));
  // A definition that admits nothing, referred to as a property's and a pattern's schema.
  EXPECT_EQ(Compiled(Accepted(R"({"type": "object", "properties": {"x": {"$ref": "#/$defs/no"},
      "y": {"type": "boolean"}}, "patternProperties": {"^z": {"$ref": "#/$defs/no"}},
      "additionalProperties": false, "$defs": {"no": {"not": {}}}})")),
            nlohmann::json::parse(R"({"type": "object", "properties": {"y": {"type": "boolean"}},
      "additionalProperties": false})"));
  // "not" of anything else is still not enforced.
  EXPECT_THAT(Error(R"({"type": "string", "not": {"enum": ["a"]}})"),
              HasSubstr("at /not: keyword \"not\" is not enforced"));
}

// XGrammar reads an object schema with an empty "properties" otherwise than one without (in a
// structural tag, the latter admits any property): what the schema wrote is kept.
TEST(SchemaPolicyTest, AnEmptyPropertiesTheSchemaWroteStays) {
  EXPECT_EQ(Compiled(Accepted(R"({"type": "object", "properties": {}})")),
            nlohmann::json::parse(R"({"type": "object", "properties": {}})"));
  EXPECT_EQ(Compiled(Accepted(R"({"properties": {}, "allOf": [{"type": "object"}]})")),
            nlohmann::json::parse(R"({"type": "object", "properties": {}})"));
  EXPECT_EQ(Compiled(Accepted(R"({"type": "object"})")),
            nlohmann::json::parse(R"({"type": "object"})"));
}

TEST(SchemaPolicyTest, DataThatLooksLikeAReferenceIsData) {
  SchemaPolicyResult r = Accepted(R"({"type": "object", "properties": {
      "e": {"enum": [{"$ref": "#/$defs/ref99"}, {"$ref": "#/$defs/refx"}]},
      "d": {"type": "string", "default": {"$ref": "#/$defs/ref0"}}}})");
  EXPECT_FALSE(Compiled(r).contains("$defs"));
  EXPECT_EQ(Compiled(r)["properties"]["e"]["enum"][0]["$ref"], "#/$defs/ref99");
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
