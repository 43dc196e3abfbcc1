#include "coordinator/stop_matcher.h"

#include <gtest/gtest.h>

namespace tpserve {
namespace {

TEST(StopMatcher, HoldsBackAPossibleStartAndDropsTheMatch) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.Append("abc E").emit, "abc ");
  EXPECT_EQ(m.Append("N").emit, "");
  StopMatcher::Result r = m.Append("Dxyz");
  EXPECT_EQ(r.emit, "");
  ASSERT_TRUE(r.matched.has_value());
  EXPECT_EQ(*r.matched, "END");
  EXPECT_EQ(m.Append("more").emit, "");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcher, ReleasesAHeldTailThatDidNotMatch) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.Append("EN").emit, "");
  EXPECT_EQ(m.Append("Z").emit, "ENZ");
  EXPECT_EQ(m.Append("E").emit, "");
  EXPECT_EQ(m.Flush(), "E");
}

TEST(StopMatcher, EarliestMatchWinsAndTextBeforeItIsEmitted) {
  StopMatcher m({"cd", "bcdef"});
  StopMatcher::Result r = m.Append("abcdefg");
  EXPECT_EQ(r.emit, "a");
  EXPECT_EQ(*r.matched, "bcdef");
}

TEST(StopMatcher, KoreanStopSequenceNeverSplitsACharacter) {
  StopMatcher m({"안녕히"});
  StopMatcher::Result r = m.Append("네, 안녕");
  EXPECT_EQ(r.emit, "네, ");
  r = m.Append("히 가세요");
  EXPECT_EQ(r.emit, "");
  EXPECT_EQ(*r.matched, "안녕히");
}

TEST(StopMatcher, NoStopsPassesEverythingThrough) {
  StopMatcher m({});
  EXPECT_EQ(m.Append("hello").emit, "hello");
  EXPECT_EQ(m.Flush(), "");
}

}  // namespace
}  // namespace tpserve
