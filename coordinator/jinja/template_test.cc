// Differential test: every case of testdata/cases.json (rendered by Python's jinja2 in
// transformers' environment by testdata/make_cases.py) must render byte for byte the same, or
// fail with the same message and line.
#include "coordinator/jinja/template.h"

#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tpserve::jinja {
namespace {

using nlohmann::ordered_json;

ordered_json ReadCases() {
  std::ifstream file("coordinator/jinja/testdata/cases.json", std::ios::binary);
  EXPECT_TRUE(file) << "cannot open coordinator/jinja/testdata/cases.json";
  std::stringstream contents;
  contents << file.rdbuf();
  return ordered_json::parse(contents.str());
}

absl::Time CaseNow() {
  return absl::FromCivil(absl::CivilSecond(2026, 1, 2, 3, 4, 5), absl::UTCTimeZone());
}

TEST(TemplateCasesTest, MatchesJinja2) {
  const ordered_json cases = ReadCases();
  ASSERT_GT(cases.size(), 200u);
  int passed = 0;
  for (const ordered_json& c : cases) {
    const std::string name = c.at("name").get<std::string>();
    SCOPED_TRACE(name);
    const std::string source = c.at("template").get<std::string>();
    absl::StatusOr<std::string> rendered;
    absl::StatusOr<Template> parsed = Template::Parse(source);
    if (parsed.ok()) {
      rendered = parsed->RenderToString(c.at("input"), ordered_json::object(), CaseNow());
    } else {
      rendered = parsed.status();
    }
    if (c.contains("expected")) {
      const std::string expected = c.at("expected").get<std::string>();
      EXPECT_TRUE(rendered.ok()) << name << ": " << rendered.status();
      if (rendered.ok()) {
        EXPECT_EQ(*rendered, expected) << name;
        if (*rendered == expected) ++passed;
      }
      continue;
    }
    const std::string error = c.at("error_contains").get<std::string>();
    EXPECT_FALSE(rendered.ok()) << name << ": rendered " << *rendered;
    if (rendered.ok()) continue;
    const std::string message(rendered.status().message());
    bool ok = absl::StrContains(message, error);
    EXPECT_TRUE(ok) << name << ": " << message << "\n  should contain: " << error;
    if (c.contains("error_line") && !c.at("error_line").is_null()) {
      const std::string line = absl::StrCat("line ", c.at("error_line").get<int>(), ",");
      EXPECT_TRUE(absl::StartsWith(message, line))
          << name << ": " << message << "\n  should be at " << line;
      ok = ok && absl::StartsWith(message, line);
    }
    if (ok) ++passed;
  }
  std::cout << passed << " of " << cases.size() << " cases match jinja2\n";
}

// The contract of template.h: copies share one parsed tree and Render runs on many threads at
// once (the tsan configuration checks for races).
TEST(TemplateCasesTest, ConcurrentRendersOfOneTemplate) {
  const ordered_json cases = ReadCases();
  std::vector<std::pair<Template, ordered_json>> work;
  std::vector<std::string> expected;
  for (const ordered_json& c : cases) {
    if (!c.contains("expected")) continue;
    absl::StatusOr<Template> t = Template::Parse(c.at("template").get<std::string>());
    ASSERT_TRUE(t.ok());
    work.emplace_back(*t, c.at("input"));
    expected.push_back(c.at("expected").get<std::string>());
  }
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int round = 0; round < 3; ++round) {
        for (size_t i = 0; i < work.size(); ++i) {
          const Template copy = work[i].first;
          absl::StatusOr<std::string> out =
              copy.RenderToString(work[i].second, ordered_json::object(), CaseNow());
          if (!out.ok() || *out != expected[i]) ++mismatches[k];
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace tpserve::jinja
