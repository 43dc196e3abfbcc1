#include "formats/byte_source.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace tpserve {
namespace {

std::string WriteTempFile(const std::string& leaf, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + "/" + leaf;
  FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  EXPECT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
  return path;
}

TEST(MmapByteSourceTest, MapsTheWholeFile) {
  const std::string contents("GGUF\0\x01\x02", 7);
  const std::string path = WriteTempFile("mapped.bin", contents);
  absl::StatusOr<std::unique_ptr<MmapByteSource>> src = MmapByteSource::Open(path);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_EQ((*src)->name(), path);
  absl::Span<const uint8_t> bytes = (*src)->bytes();
  ASSERT_EQ(bytes.size(), contents.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()), contents);
}

TEST(MmapByteSourceTest, EmptyFileGivesAnEmptySpan) {
  const std::string path = WriteTempFile("empty.bin", "");
  absl::StatusOr<std::unique_ptr<MmapByteSource>> src = MmapByteSource::Open(path);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_TRUE((*src)->bytes().empty());
}

TEST(MmapByteSourceTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = ::testing::TempDir() + "/no_such_file.gguf";
  absl::Status s = MmapByteSource::Open(path).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find(path), absl::string_view::npos) << s;
}

TEST(MmapByteSourceTest, DirectoryIsRefused) {
  absl::Status s = MmapByteSource::Open(::testing::TempDir()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("is not a regular file"), absl::string_view::npos) << s;
}

TEST(MemoryByteSourceTest, OwnsItsBytes) {
  std::string bytes("a\0b", 3);
  MemoryByteSource src("label", bytes);
  bytes.clear();
  EXPECT_EQ(src.name(), "label");
  ASSERT_EQ(src.bytes().size(), 3u);
  EXPECT_EQ(src.bytes()[1], 0);
  EXPECT_EQ(src.bytes()[2], 'b');
}

}  // namespace
}  // namespace tpserve
