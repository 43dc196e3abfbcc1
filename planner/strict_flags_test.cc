#include "planner/strict_flags.h"

#include "absl/flags/flag.h"
#include "gtest/gtest.h"

ABSL_FLAG(int64_t, strict_count, 1, "a number");
ABSL_FLAG(bool, strict_switch, false, "a switch");
ABSL_FLAG(std::string, strict_name, "", "a name");

namespace tpserve {
namespace {

absl::StatusOr<std::vector<std::string>> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "prog");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseFlagsStrict(static_cast<int>(argv.size()), argv.data());
}

TEST(StrictFlagsTest, AcceptsTheUsualForms) {
  absl::StatusOr<std::vector<std::string>> rest =
      Parse({"--strict_count=5", "--strict-name", "x", "--strict_switch", "file"});
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_EQ(absl::GetFlag(FLAGS_strict_count), 5);
  EXPECT_EQ(absl::GetFlag(FLAGS_strict_name), "x");
  EXPECT_TRUE(absl::GetFlag(FLAGS_strict_switch));
  EXPECT_EQ(*rest, std::vector<std::string>{"file"});

  ASSERT_TRUE(Parse({"--nostrict_switch", "--strict-count", "7", "--", "--strict_count=9"}).ok());
  EXPECT_FALSE(absl::GetFlag(FLAGS_strict_switch));
  EXPECT_EQ(absl::GetFlag(FLAGS_strict_count), 7);
}

TEST(StrictFlagsTest, ErrorsNameTheFlagAndValue) {
  absl::Status bad = Parse({"--strict_count=abc"}).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message().rfind("--strict_count=abc: ", 0), 0u) << bad;
  EXPECT_EQ(Parse({"--strict_bogus=1"}).status().message(),
            "--strict_bogus: unknown flag (see --help)");
  EXPECT_EQ(Parse({"--strict_count"}).status().message(), "--strict_count: missing value");
  EXPECT_EQ(Parse({"--help"}).status().code(), absl::StatusCode::kNotFound);
}

TEST(StrictFlagsTest, UsageListsFlagsOfOneFile) {
  const std::string usage = FlagsUsage("strict_flags_test.cc");
  EXPECT_NE(usage.find("--strict_count (default: \"1\")\n      a number"), std::string::npos)
      << usage;
  EXPECT_EQ(usage.find("--help"), std::string::npos);
}

}  // namespace
}  // namespace tpserve
