#include "coordinator/tokenizer/byte_level.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace tpserve {
namespace {

TEST(ByteLevelTest, KnownGpt2Symbols) {
  EXPECT_EQ(ByteToCodePoint(' '), 0x120u);   // 'Ġ'
  EXPECT_EQ(ByteToCodePoint('\n'), 0x10Au);  // 'Ċ'
  EXPECT_EQ(ByteToCodePoint('A'), static_cast<uint32_t>('A'));
  EXPECT_EQ(ByteToCodePoint(0xAD), 0x143u);  // soft hyphen, the last remapped byte
  EXPECT_EQ(ByteLevelEncode(" the"), "\xC4\xA0the");
}

TEST(ByteLevelTest, AlphabetIsABijectionAndRoundTrips) {
  std::string all_bytes;
  std::set<uint32_t> code_points;
  for (int byte = 0; byte < 256; ++byte) {
    all_bytes.push_back(static_cast<char>(byte));
    code_points.insert(ByteToCodePoint(static_cast<uint8_t>(byte)));
  }
  EXPECT_EQ(code_points.size(), 256u);
  absl::StatusOr<std::string> decoded = ByteLevelDecode(ByteLevelEncode(all_bytes));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, all_bytes);
}

TEST(ByteLevelTest, DecodeRejectsCodePointsOutsideTheAlphabet) {
  absl::StatusOr<std::string> decoded = ByteLevelDecode("ab\xE2\x82\xAC");  // '€'
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(decoded.status().message().find("U+20AC at byte offset 2"), std::string::npos)
      << decoded.status();
  EXPECT_EQ(ByteLevelDecode("\xFF").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tpserve
