// Code point decoding and Python's character classes over the generated tables.
#include "coordinator/jinja/unicode.h"

#include <algorithm>
#include <cstdint>

namespace tpserve::jinja {
namespace {

struct CodeRange {
  char32_t lo, hi;
};
// Code points lo, lo+step, ... <= hi map to cp + delta.
struct CaseRun {
  char32_t lo, hi;
  int step;
  int32_t delta;
};
struct SpecialCase {
  char32_t cp;
  const char* utf8;
};

#include "coordinator/jinja/unicode_tables.inc"

template <size_t N>
bool InRanges(const CodeRange (&table)[N], char32_t c) {
  const CodeRange* it = std::upper_bound(table, table + N, c,
                                         [](char32_t v, const CodeRange& r) { return v < r.lo; });
  return it != table && c <= (it - 1)->hi;
}

template <size_t N>
bool MapRun(const CaseRun (&table)[N], char32_t c, char32_t& mapped) {
  const CaseRun* it =
      std::upper_bound(table, table + N, c, [](char32_t v, const CaseRun& r) { return v < r.lo; });
  if (it == table) return false;
  const CaseRun& run = *(it - 1);
  if (c > run.hi || (c - run.lo) % run.step != 0) return false;
  mapped = static_cast<char32_t>(static_cast<int64_t>(c) + run.delta);
  return true;
}

template <size_t N>
const char* FindSpecial(const SpecialCase (&table)[N], char32_t c) {
  const SpecialCase* it = std::lower_bound(
      table, table + N, c, [](const SpecialCase& s, char32_t v) { return s.cp < v; });
  return it != table + N && it->cp == c ? it->utf8 : nullptr;
}

bool IsCaseIgnorable(char32_t c) { return InRanges(kCaseIgnorable, c); }

}  // namespace

char32_t DecodeUtf8(std::string_view s, size_t& pos) {
  const unsigned char b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) {
    ++pos;
    return b0;
  }
  int len = 0;
  char32_t c = 0;
  char32_t min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, c = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, c = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, c = b0 & 0x07, min = 0x10000;
  }
  if (len == 0 || pos + len > s.size()) {
    ++pos;
    return 0xDC00 + b0;
  }
  for (int i = 1; i < len; ++i) {
    const unsigned char b = static_cast<unsigned char>(s[pos + i]);
    if ((b & 0xC0) != 0x80) {
      ++pos;
      return 0xDC00 + b0;
    }
    c = (c << 6) | (b & 0x3F);
  }
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
    ++pos;
    return 0xDC00 + b0;
  }
  pos += len;
  return c;
}

void AppendUtf8(char32_t c, std::string& out) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c >= 0xDC80 && c <= 0xDCFF) {
    out.push_back(static_cast<char>(c - 0xDC00));  // an escaped invalid byte
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

bool IsAscii(std::string_view s) {
  for (char ch : s) {
    if (static_cast<unsigned char>(ch) >= 0x80) return false;
  }
  return true;
}

size_t CountCodePoints(std::string_view s) {
  size_t n = 0;
  for (size_t pos = 0; pos < s.size(); ++n) {
    if (static_cast<unsigned char>(s[pos]) < 0x80) {
      ++pos;
    } else {
      DecodeUtf8(s, pos);
    }
  }
  return n;
}

size_t ByteOffsetOfCodePoint(std::string_view s, size_t index) {
  size_t pos = 0;
  for (size_t i = 0; i < index && pos < s.size(); ++i) DecodeUtf8(s, pos);
  return pos;
}

bool IsPySpace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  return InRanges(kSpace, c);
}
bool IsPyPrintable(char32_t c) {
  if (c < 0x80) return c >= 0x20 && c < 0x7F;
  return !InRanges(kNonPrintable, c);
}
bool IsPyAlpha(char32_t c) { return InRanges(kAlpha, c); }
bool IsPyDecimal(char32_t c) { return InRanges(kDecimal, c); }
bool IsPyDigit(char32_t c) { return InRanges(kDigit, c); }
bool IsPyNumeric(char32_t c) { return InRanges(kNumeric, c); }
bool IsPyLower(char32_t c) { return InRanges(kLowercase, c); }
bool IsPyUpper(char32_t c) { return InRanges(kUppercase, c); }
bool IsPyTitle(char32_t c) { return InRanges(kTitlecase, c); }
bool IsPyCased(char32_t c) { return IsPyLower(c) || IsPyUpper(c) || IsPyTitle(c); }
bool IsPyLineBreak(char32_t c) { return InRanges(kLineBreak, c); }

void AppendUpper(char32_t c, std::string& out) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c));
    return;
  }
  if (const char* special = FindSpecial(kUpperSpecial, c)) {
    out += special;
    return;
  }
  char32_t mapped = c;
  MapRun(kToUpper, c, mapped);
  AppendUtf8(mapped, out);
}

void AppendLower(char32_t c, std::string& out) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
    return;
  }
  if (const char* special = FindSpecial(kLowerSpecial, c)) {
    out += special;
    return;
  }
  char32_t mapped = c;
  MapRun(kToLower, c, mapped);
  AppendUtf8(mapped, out);
}

void AppendTitle(char32_t c, std::string& out) {
  if (const char* special = FindSpecial(kTitleSpecial, c)) {
    out += special;
    return;
  }
  AppendUpper(c, out);
}

namespace {

// Python's Final_Sigma rule: capital sigma at `pos` (its bytes [pos, end)) lowers to final
// sigma when a cased letter precedes it and none follows it (case-ignorables skipped).
bool IsFinalSigma(std::string_view s, size_t pos, size_t end) {
  // Scan backwards over whole code points.
  bool cased_before = false;
  size_t i = pos;
  while (i > 0) {
    size_t start = i - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t p = start;
    const char32_t c = DecodeUtf8(s, p);
    if (p != i) {  // not a well-formed code point ending at i: treat as one byte
      start = i - 1;
    }
    if (IsCaseIgnorable(c)) {
      i = start;
      continue;
    }
    cased_before = IsPyCased(c);
    break;
  }
  if (!cased_before) return false;
  for (size_t j = end; j < s.size();) {
    const char32_t c = DecodeUtf8(s, j);
    if (IsCaseIgnorable(c)) continue;
    return !IsPyCased(c);
  }
  return true;
}

}  // namespace

std::string PyUpper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) AppendUpper(DecodeUtf8(s, pos), out);
  return out;
}

std::string PyLower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const char32_t c = DecodeUtf8(s, pos);
    if (c == 0x3A3 && IsFinalSigma(s, start, pos)) {
      AppendUtf8(0x3C2, out);
    } else {
      AppendLower(c, out);
    }
  }
  return out;
}

std::string PyCapitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool first = true;
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const char32_t c = DecodeUtf8(s, pos);
    if (first) {
      AppendTitle(c, out);
      first = false;
    } else if (c == 0x3A3 && IsFinalSigma(s, start, pos)) {
      AppendUtf8(0x3C2, out);
    } else {
      AppendLower(c, out);
    }
  }
  return out;
}

std::string PyTitle(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool previous_is_cased = false;
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const char32_t c = DecodeUtf8(s, pos);
    if (previous_is_cased) {
      if (c == 0x3A3 && IsFinalSigma(s, start, pos)) {
        AppendUtf8(0x3C2, out);
      } else {
        AppendLower(c, out);
      }
    } else {
      AppendTitle(c, out);
    }
    previous_is_cased = IsPyCased(c);
  }
  return out;
}

std::string PySwapCase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const char32_t c = DecodeUtf8(s, pos);
    if (IsPyUpper(c)) {
      if (c == 0x3A3 && IsFinalSigma(s, start, pos)) {
        AppendUtf8(0x3C2, out);
      } else {
        AppendLower(c, out);
      }
    } else if (IsPyLower(c)) {
      AppendUpper(c, out);
    } else {
      AppendUtf8(c, out);
    }
  }
  return out;
}

}  // namespace tpserve::jinja
