// NfcNormalize against Python's unicodedata.normalize("NFC", ...) (expected values computed
// there) on the cases NFC has: composition, reordering, exclusions, singletons, Hangul.
#include "coordinator/tokenizer/unicode_nfc.h"

#include <gtest/gtest.h>

namespace tpserve {
namespace {

TEST(UnicodeNfcTest, MatchesPythonUnicodedata) {
  const struct {
    const char* input;
    const char* expected;
  } cases[] = {
      {"", ""},
      {"plain ascii", "plain ascii"},
      {"cafe\u0301", "caf\u00e9"},                       // e + acute -> é
      {"e\u0301\u0302\u0303", "\u00e9\u0302\u0303"},     // only the first mark composes
      {"a\u0323\u0302", "\u1ead"},                       // dot below then circumflex
      {"a\u0302\u0323", "\u1ead"},                       // reordered by class, then composed
      {"\u212b", "\u00c5"},                              // ANGSTROM SIGN: singleton
      {"\u2126", "\u03a9"},                              // OHM SIGN: singleton
      {"\u0958", "\u0915\u093c"},                        // composition exclusion
      {"\u0344", "\u0308\u0301"},                        // non-starter decomposition
      {"\u1100\u1161\u11a8", "\uac01"},                  // Hangul L V T -> syllable
      {"\uac00\u11a8", "\uac01"},                        // LV + T
      {"\u0301a", "\u0301a"},                            // leading mark stays
      {"\ufb01 \u2163 \uff11", "\ufb01 \u2163 \uff11"},  // compatibility forms untouched
      {"\U0001d15e", "\U0001d157\U0001d165"},            // musical symbol: excluded
      {"\u0041\u030a\u0301", "\u01fa"},                  // A ring acute
      {"\u00c5\u0301", "\u01fa"},                        // precomposed + mark
  };
  for (const auto& c : cases) {
    EXPECT_EQ(NfcNormalize(c.input), c.expected) << c.input;
  }
}

TEST(UnicodeNfcTest, InvalidBytesAreKeptAndSplitRuns) {
  EXPECT_EQ(NfcNormalize("e\xff\xcc\x81"), "e\xff\xcc\x81");  // the mark is cut off from e
  EXPECT_EQ(NfcNormalize("e\xcc\x81\xff"), "\xc3\xa9\xff");
}

}  // namespace
}  // namespace tpserve
