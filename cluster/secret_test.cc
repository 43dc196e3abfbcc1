// The cluster secret: fresh ones differ and are 64 hex characters; files round-trip with mode
// 0600 and short secrets are refused; the comparison is exact.
#include "cluster/secret.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace tpserve {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name + std::to_string(getpid());
}

TEST(ClusterSecretTest, FreshSecretsAre64HexCharactersAndDiffer) {
  const std::string a = NewClusterSecret();
  const std::string b = NewClusterSecret();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
}

TEST(ClusterSecretTest, FileRoundTripsWithMode0600) {
  const std::string path = TempPath("secret");
  const std::string secret = NewClusterSecret();
  ASSERT_TRUE(WriteClusterSecretFile(path, secret).ok());
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  absl::StatusOr<std::string> read = ReadClusterSecretFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, secret);
  // Never overwrites: another launch's secret stays.
  EXPECT_EQ(WriteClusterSecretFile(path, "x").code(), absl::StatusCode::kAlreadyExists);
  unlink(path.c_str());
}

TEST(ClusterSecretTest, ShortOrMissingSecretFilesAreRefused) {
  const std::string path = TempPath("short");
  std::ofstream(path) << "too-short\n";
  absl::StatusOr<std::string> read = ReadClusterSecretFile(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(read.status().message().find("has 9 characters; use at least 32"), std::string::npos)
      << read.status();
  unlink(path.c_str());
  EXPECT_EQ(ReadClusterSecretFile(path).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ClusterSecretTest, ConstantTimeEqualsIsExact) {
  EXPECT_TRUE(ConstantTimeEquals("abcdef", "abcdef"));
  EXPECT_FALSE(ConstantTimeEquals("abcdeg", "abcdef"));
  EXPECT_FALSE(ConstantTimeEquals("abcde", "abcdef"));
  EXPECT_FALSE(ConstantTimeEquals("abcdefg", "abcdef"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

}  // namespace
}  // namespace tpserve
