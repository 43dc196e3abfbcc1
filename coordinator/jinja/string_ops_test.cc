// Python str algorithms on TString: search (both the short-needle and the linear-time long-
// needle paths), split/strip with provenance, code point slicing, case mapping and repr.
#include "coordinator/jinja/string_ops.h"

#include <string>

#include "coordinator/jinja/repr.h"
#include "coordinator/jinja/unicode.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpserve::jinja {
namespace {

using ::testing::ElementsAre;

TEST(FindBytesTest, ShortAndLongNeedlesAgreeWithNaiveSearch) {
  const std::string hay = std::string(100, 'a') + "b" + std::string(100, 'a') + "b";
  for (size_t n :
       {size_t{1}, size_t{5}, size_t{31}, size_t{32}, size_t{33}, size_t{64}, size_t{101}}) {
    const std::string needle = std::string(n - 1, 'a') + "b";
    for (size_t from : {size_t{0}, size_t{50}, size_t{101}, size_t{150}, size_t{202}}) {
      EXPECT_EQ(FindBytes(hay, needle, from), hay.find(needle, from)) << n << " " << from;
    }
    for (size_t end : {size_t{0}, size_t{101}, size_t{150}, size_t{202}, std::string::npos}) {
      const size_t limit = end == std::string::npos ? hay.size() : end;
      const size_t expected =
          limit < needle.size() ? std::string::npos : hay.rfind(needle, limit - needle.size());
      EXPECT_EQ(RFindBytes(hay, needle, end), expected) << n << " " << end;
    }
  }
  EXPECT_EQ(FindBytes("abc", "", 3), 3u);
  EXPECT_EQ(FindBytes("abc", "", 4), std::string::npos);
}

TEST(FindBytesTest, LongNeedleInHugeHaystackIsFast) {
  // Quadratic search would take ~10^10 steps here.
  const std::string hay(1 << 20, 'a');
  const std::string needle = std::string(1 << 14, 'a') + "b";
  EXPECT_EQ(FindBytes(hay, needle), std::string::npos);
  EXPECT_EQ(RFindBytes(hay, needle), std::string::npos);
}

TEST(StringOpsTest, SplitAndStripKeepProvenance) {
  TString s("[");
  s.Append(" a,b ", /*from_input=*/true);
  const std::vector<TString> parts = PySplit(s, std::string_view(","), -1);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].bytes(), "[ a");
  EXPECT_THAT(parts[0].input_spans(), ElementsAre(InputSpan{1, 3}));
  EXPECT_EQ(parts[1].bytes(), "b ");
  EXPECT_THAT(parts[1].input_spans(), ElementsAre(InputSpan{0, 2}));
  const TString stripped = PyStrip(s, std::nullopt, StripSide::kRight);
  EXPECT_EQ(stripped.bytes(), "[ a,b");
  EXPECT_THAT(stripped.input_spans(), ElementsAre(InputSpan{1, 5}));
}

TEST(StringOpsTest, WhitespaceSplitWithMaxsplitKeepsTheRest) {
  const TString s("  a b  c  ");
  std::vector<std::string> got;
  for (const TString& p : PySplit(s, std::nullopt, 1)) got.push_back(p.bytes());
  EXPECT_THAT(got, ElementsAre("a", "b  c  "));
  got.clear();
  for (const TString& p : PyRSplit(s, std::nullopt, 1)) got.push_back(p.bytes());
  EXPECT_THAT(got, ElementsAre("  a b", "c"));
}

TEST(StringOpsTest, CodePointSlicing) {
  const TString s("한국어😀");
  EXPECT_EQ(CodePointLength(s.view()), 4);
  EXPECT_EQ(PyStrSlice(s, 1, 3, 1).bytes(), "국어");
  EXPECT_EQ(PyStrSlice(s, std::nullopt, std::nullopt, -1).bytes(), "😀어국한");
  EXPECT_EQ(PyStrAt(s, 3).bytes(), "😀");
}

TEST(UnicodeTest, CaseMappingFollowsPython) {
  EXPECT_EQ(PyUpper("straße ﬁ"), "STRASSE FI");
  EXPECT_EQ(PyLower("İ"), "i\xcc\x87");
  EXPECT_EQ(PyLower("ΣΑΣ ΟΔΟΣ"), "σας οδος");
  EXPECT_EQ(PyCapitalize("ǆemal"), "ǅemal");
  EXPECT_EQ(PyTitle("hello123world it's"), "Hello123World It'S");
  EXPECT_TRUE(IsPySpace(0x3000));
  EXPECT_FALSE(IsPyPrintable(0x200B));
}

TEST(ReprTest, FloatsAndStringsLikePython) {
  EXPECT_EQ(FloatRepr(1.0), "1.0");
  EXPECT_EQ(FloatRepr(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(FloatRepr(1e16), "1e+16");
  EXPECT_EQ(FloatRepr(1e-5), "1e-05");
  EXPECT_EQ(FloatRepr(123456789012345678.0), "1.2345678901234568e+17");
  EXPECT_EQ(FloatRepr(-0.0), "-0.0");
  EXPECT_EQ(StrRepr("it's"), "\"it's\"");
  EXPECT_EQ(StrRepr("a'b\"c"), "'a\\'b\"c'");
  EXPECT_EQ(StrRepr("\x01\t\u00a0\u200b"), "'\\x01\\t\\xa0\\u200b'");
}

}  // namespace
}  // namespace tpserve::jinja
