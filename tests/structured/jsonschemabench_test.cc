// The schema policy on the whole of JSONSchemaBench (9,557 real-world schemas in ten sets; the
// data is not in this repository: scripts/test.sh passes where it is as
// TPSERVE_JSONSCHEMABENCH_DIR, and this test skips, saying so, without it). Each schema is
// judged as a request's json_schema is (CheckJsonSchemaConstraint: the policy, XGrammar's grammar
// and its warnings), strict and not:
//   - no set may accept fewer schemas than the floors below (docs/PERFORMANCE.md's coverage
//     table; raise a floor when coverage goes up);
//   - a schema accepted strict passes unchanged without strict, nothing dropped.
// Whether what is accepted is enforced is checked by generation: bench/jsonschemabench.cc and
// bench/jsonschemabench_peers.py validate.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "coordinator/structured/compiler.h"
#include "coordinator/structured/schema_policy.h"
#include "formats/test_files.h"
#include "gtest/gtest.h"

namespace tpserve {
namespace {

namespace fs = std::filesystem;

struct Floor {
  const char* set;
  int schemas, strict, loose;  // accepted at least
};

// Measured on 2026-12-06 (commit of this test's change).
constexpr Floor kFloors[] = {
    {"Github_easy", 1943, 1869, 1942},   {"Github_hard", 1240, 1029, 1236},
    {"Github_medium", 1976, 1791, 1974}, {"Github_trivial", 444, 418, 444},
    {"Github_ultra", 164, 112, 162},     {"Glaiveai2K", 1707, 1664, 1707},
    {"JsonSchemaStore", 491, 261, 483},  {"Kubernetes", 1064, 1064, 1064},
    {"Snowplow", 403, 380, 403},         {"WashingtonPost", 125, 97, 122},
};

class JsonSchemaBenchTest : public ::testing::TestWithParam<Floor> {};

TEST_P(JsonSchemaBenchTest, CoverageStaysAtItsFloorAndStrictMeansNothingDropped) {
  const char* dir = std::getenv("TPSERVE_JSONSCHEMABENCH_DIR");
  if (dir == nullptr || !fs::is_directory(dir)) {
    GTEST_SKIP() << "TPSERVE_JSONSCHEMABENCH_DIR is not a directory (scripts/test.sh sets it "
                    "to ../shared/jsonschemabench where that exists): JSONSchemaBench not checked";
  }
  const Floor& floor = GetParam();
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(fs::path(dir) / floor.set)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_EQ(static_cast<int>(files.size()), floor.schemas) << floor.set;
  int strict_ok = 0, loose_ok = 0;
  for (const fs::path& file : files) {
    absl::StatusOr<std::string> text = ReadFileBytes(file.string());
    ASSERT_TRUE(text.ok()) << text.status();
    ConstraintSpec spec;
    spec.kind = ConstraintKind::kJsonSchema;
    spec.text = *std::move(text);
    spec.field = "json_schema";
    spec.strict = true;
    const bool strict = CheckJsonSchemaConstraint(spec).ok();
    spec.strict = false;
    absl::StatusOr<SchemaCheck> loose = CheckJsonSchemaConstraint(spec);
    strict_ok += strict;
    loose_ok += loose.ok();
    if (strict) {
      ASSERT_TRUE(loose.ok()) << file;
      EXPECT_TRUE(loose->dropped.empty()) << file << ": " << loose->dropped.front();
    }
  }
  EXPECT_GE(strict_ok, floor.strict) << floor.set << " strict";
  EXPECT_GE(loose_ok, floor.loose) << floor.set << " not strict";
}

INSTANTIATE_TEST_SUITE_P(Sets, JsonSchemaBenchTest, ::testing::ValuesIn(kFloors),
                         [](const ::testing::TestParamInfo<Floor>& info) {
                           return std::string(info.param.set);
                         });

}  // namespace
}  // namespace tpserve
