#include "comm/shm_segment.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace tpserve {
namespace {

bool InDevShm(const std::string& name) {
  struct stat st {};
  return stat(("/dev/shm" + name).c_str(), &st) == 0;
}

TEST(ShmSegment, PeerSeesWritesAndUnlinkRemovesOnlyTheName) {
  const std::string prefix = "tpserve-test-" + std::to_string(getpid());
  absl::StatusOr<ShmSegment> created = ShmSegment::Create(prefix, 4096);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->name().rfind("/" + prefix + "-", 0), 0u) << created->name();
  EXPECT_EQ(created->name().size(), prefix.size() + 2 + 16);
  EXPECT_EQ(created->size(), 4096u);
  EXPECT_TRUE(InDevShm(created->name()));
  EXPECT_EQ(static_cast<const uint8_t*>(created->data())[4095], 0);  // zero-filled

  absl::StatusOr<ShmSegment> opened = ShmSegment::Open(created->name());
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(opened->size(), 4096u);
  std::memcpy(created->data(), "hello", 6);
  EXPECT_STREQ(static_cast<const char*>(opened->data()), "hello");

  ASSERT_TRUE(created->Unlink().ok());
  EXPECT_FALSE(InDevShm(created->name()));
  EXPECT_TRUE(opened->Unlink().ok());       // already gone: not an error
  std::memcpy(opened->data(), "still", 6);  // the mappings outlive the name
  EXPECT_STREQ(static_cast<const char*>(created->data()), "still");
  absl::StatusOr<ShmSegment> gone = ShmSegment::Open(created->name());
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound) << gone.status();
}

TEST(ShmSegment, NamesAreFreshAndPrefixesAreChecked) {
  absl::StatusOr<ShmSegment> a = ShmSegment::Create("tpserve-test", 64);
  absl::StatusOr<ShmSegment> b = ShmSegment::Create("tpserve-test", 64);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->name(), b->name());
  EXPECT_TRUE(a->Unlink().ok());
  EXPECT_TRUE(b->Unlink().ok());

  absl::StatusOr<ShmSegment> bad = ShmSegment::Create("run/7", 64);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "shm name prefix 'run/7' holds '/'; only [A-Za-z0-9_.-] are allowed");
  EXPECT_EQ(ShmNameSafe("run/7 x.y", 7), "run_7_x");
}

}  // namespace
}  // namespace tpserve
