#include "formats/byte_reader.h"

#include <gtest/gtest.h>

#include <string>

namespace tpserve {
namespace {

absl::Span<const uint8_t> Span(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(ByteReaderTest, ReadsLittleEndianAndAdvances) {
  const std::string bytes("\x01\x02\x03\x04\xff\xee", 6);
  ByteReader r(Span(bytes), "f.bin");
  EXPECT_EQ(*r.Read<uint32_t>("word"), 0x04030201u);
  EXPECT_EQ(r.position(), 4u);
  EXPECT_EQ(r.remaining(), 2u);
  EXPECT_EQ(*r.Read<int16_t>("half"), static_cast<int16_t>(0xEEFF));
  EXPECT_EQ(r.remaining(), 0u);
}

TEST(ByteReaderTest, ShortReadNamesFieldOffsetAndBound) {
  const std::string bytes("\x01\x02\x03", 3);
  ByteReader r(Span(bytes), "f.bin");
  ASSERT_TRUE(r.Skip(1, "pad").ok());
  absl::StatusOr<uint64_t> v = r.Read<uint64_t>("tensor_count");
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(v.status().message(),
            "f.bin: truncated reading tensor_count at offset 1: needs 8 bytes, only 2 left");
  EXPECT_EQ(r.position(), 1u);  // a failed read does not move the cursor
}

TEST(ByteReaderTest, HugeLengthsAreRefusedWithoutOverflow) {
  const std::string bytes = "abcdef";
  ByteReader r(Span(bytes), "f.bin");
  absl::StatusOr<std::string_view> s = r.ReadBytes(~uint64_t{0}, "name");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("needs 18446744073709551615 bytes, only 6 left"),
            absl::string_view::npos);
  EXPECT_FALSE(r.Skip(7, "gap").ok());
  EXPECT_EQ(*r.ReadBytes(3, "name"), "abc");
  EXPECT_EQ(r.Slice(1, 4), "bcd");
}

TEST(ByteReaderTest, SeekStaysInsideTheSpan) {
  const std::string bytes = "abcd";
  ByteReader r(Span(bytes), "f.bin");
  EXPECT_TRUE(r.Seek(4, "end").ok());
  EXPECT_EQ(r.remaining(), 0u);
  absl::Status s = r.Seek(5, "data");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "f.bin: data offset 5 is past the end of the file (4 bytes)");
}

TEST(ByteReaderTest, EmptySpanIsSafe) {
  ByteReader r(absl::Span<const uint8_t>(), "empty");
  EXPECT_EQ(r.size(), 0u);
  EXPECT_FALSE(r.Read<uint8_t>("magic").ok());
  EXPECT_EQ(*r.ReadBytes(0, "nothing"), "");
}

}  // namespace
}  // namespace tpserve
