#include "coordinator/tokenizer/utf8.h"

#include <gtest/gtest.h>

namespace tpserve {
namespace {

TEST(Utf8Test, SequenceLengthOfEachWidth) {
  EXPECT_EQ(Utf8SequenceLength("a", 0), 1u);
  EXPECT_EQ(Utf8SequenceLength("\xC3\xA9", 0), 2u);          // é
  EXPECT_EQ(Utf8SequenceLength("\xEC\x95\x88", 0), 3u);      // 안
  EXPECT_EQ(Utf8SequenceLength("\xF0\x9F\x98\x80", 0), 4u);  // 😀
}

TEST(Utf8Test, RejectsIllFormedSequences) {
  EXPECT_EQ(Utf8SequenceLength("\x80", 0), 0u);              // lone continuation
  EXPECT_EQ(Utf8SequenceLength("\xC0\xAF", 0), 0u);          // overlong '/'
  EXPECT_EQ(Utf8SequenceLength("\xE0\x80\xAF", 0), 0u);      // overlong
  EXPECT_EQ(Utf8SequenceLength("\xED\xA0\x80", 0), 0u);      // surrogate U+D800
  EXPECT_EQ(Utf8SequenceLength("\xF4\x90\x80\x80", 0), 0u);  // above U+10FFFF
  EXPECT_EQ(Utf8SequenceLength("\xEC\x95", 0), 0u);          // cut short
  EXPECT_EQ(Utf8SequenceLength("\xFF", 0), 0u);
}

TEST(Utf8Test, IsValid) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("abc \xEC\x95\x88\xEB\x85\x95"));
  EXPECT_FALSE(IsValidUtf8("abc\xEC\x95"));
}

TEST(Utf8Test, IncompleteTailCountsOnlyCompletablePrefixes) {
  EXPECT_EQ(IncompleteUtf8TailLength("ab"), 0u);
  EXPECT_EQ(IncompleteUtf8TailLength("a\xEC"), 1u);
  EXPECT_EQ(IncompleteUtf8TailLength("a\xEC\x95"), 2u);
  EXPECT_EQ(IncompleteUtf8TailLength("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(IncompleteUtf8TailLength("\xEC\x95\x88"), 0u);  // complete
  EXPECT_EQ(IncompleteUtf8TailLength("a\xED\xA0"), 0u);     // surrogate can never complete
  EXPECT_EQ(IncompleteUtf8TailLength("a\xFF"), 0u);
  EXPECT_EQ(IncompleteUtf8TailLength("a\x80"), 0u);
}

TEST(Utf8Test, SanitizeReplacesMaximalSubparts) {
  EXPECT_EQ(SanitizeUtf8("ok"), "ok");
  EXPECT_EQ(SanitizeUtf8("a\xFF"
                         "b"),
            "a\xEF\xBF\xBD"
            "b");
  // A cut-short 3-byte prefix is one maximal subpart, so one U+FFFD.
  EXPECT_EQ(SanitizeUtf8("\xEC\x95z"), "\xEF\xBF\xBDz");
  EXPECT_EQ(SanitizeUtf8("\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

}  // namespace
}  // namespace tpserve
