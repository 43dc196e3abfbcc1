// CharBpeModel on hand-made vocabularies; the Hugging Face goldens are in
// hf_tokenizer_json_test.cc.
#include "coordinator/tokenizer/char_bpe_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tpserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// 0 <unk>, 1-3 "<0xC3>" "<0xA9>" "<0x41>", then characters and merges' results.
std::vector<std::string> Vocab() {
  return {"<unk>", "<0xC3>", "<0xA9>", "<0x41>", "a", "b", "c", "ab", "bc", "abc", "▁", "▁a"};
}

std::vector<int32_t> Encode(const CharBpeModel& model, std::string_view text) {
  std::vector<int32_t> ids;
  model.EncodePiece(text, &ids);
  return ids;
}

TEST(CharBpeModelTest, MergesByRankNotByLength) {
  // "bc" ranks before "ab", so "abc" is a + bc, and no merge makes "abc" from that.
  auto model = CharBpeModel::Create(Vocab(), {{"b", "c"}, {"a", "b"}, {"ab", "c"}}, {});
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_THAT(Encode(*model, "abc"), ElementsAre(4, 8));
  auto ab_first = CharBpeModel::Create(Vocab(), {{"a", "b"}, {"ab", "c"}, {"b", "c"}}, {});
  ASSERT_TRUE(ab_first.ok());
  EXPECT_THAT(Encode(*ab_first, "abc"), ElementsAre(9));
  EXPECT_THAT(Encode(*ab_first, "▁a"), ElementsAre(10, 4));  // no merge for it
}

TEST(CharBpeModelTest, ByteFallbackThenUnknown) {
  auto model = CharBpeModel::Create(Vocab(), {}, {.unk_id = 0, .fuse_unk = true});
  ASSERT_TRUE(model.ok());
  EXPECT_THAT(Encode(*model, "\xC3\xA9"), ElementsAre(1, 2));  // é: both bytes exist
  EXPECT_THAT(Encode(*model, "xyz"), ElementsAre(0));          // fused
  EXPECT_THAT(Encode(*model, "xaxy"), ElementsAre(0, 4, 0));
  // HF's order: byte-fallback tokens go out ahead of a still-pending unknown.
  EXPECT_THAT(Encode(*model, "x\xC3\xA9"), ElementsAre(1, 2, 0));
  EXPECT_THAT(Encode(*model, "\xFF"), ElementsAre(0));  // invalid byte, no <0xFF>
  auto unfused = CharBpeModel::Create(Vocab(), {}, {.unk_id = 0});
  EXPECT_THAT(Encode(*unfused, "xyz"), ElementsAre(0, 0, 0));
  auto no_unk = CharBpeModel::Create(Vocab(), {}, {});
  EXPECT_THAT(Encode(*no_unk, "xay"), ElementsAre(4));  // dropped, as HF without unk_token
  auto no_fallback = CharBpeModel::Create(Vocab(), {}, {.byte_fallback = false, .unk_id = 0});
  EXPECT_THAT(Encode(*no_fallback, "\xC3\xA9"), ElementsAre(0));
}

TEST(CharBpeModelTest, IgnoreMergesTakesWholeTokens) {
  auto model = CharBpeModel::Create(Vocab(), {{"b", "c"}}, {.ignore_merges = true});
  ASSERT_TRUE(model.ok());
  EXPECT_THAT(Encode(*model, "abc"), ElementsAre(9));
  EXPECT_THAT(Encode(*model, "abcb"), ElementsAre(4, 8, 5));
}

TEST(CharBpeModelTest, RefusesMergesOutsideTheVocabulary) {
  auto missing = CharBpeModel::Create(Vocab(), {{"c", "a"}}, {});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("merges[0] 'c a': 'ca' is not in"));
  auto bad_unk = CharBpeModel::Create(Vocab(), {}, {.unk_id = 12});
  EXPECT_THAT(bad_unk.status().message(), HasSubstr("unk_id = 12"));
}

}  // namespace
}  // namespace tpserve
