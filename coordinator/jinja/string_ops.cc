// Python str algorithms (Objects/unicodeobject.c semantics) over UTF-8 with provenance.
#include "coordinator/jinja/string_ops.h"

#include <algorithm>

#include "coordinator/jinja/unicode.h"

namespace tpserve::jinja {

namespace {

// Needles shorter than this use std::string_view::find (worst case len(needle) per byte).
constexpr size_t kShortNeedle = 32;

// Knuth-Morris-Pratt over `text` for `pattern`; the first match at or after `from`.
size_t KmpFind(std::string_view text, std::string_view pattern, size_t from) {
  std::vector<size_t> fail(pattern.size(), 0);
  for (size_t i = 1, k = 0; i < pattern.size(); ++i) {
    while (k > 0 && pattern[i] != pattern[k]) k = fail[k - 1];
    if (pattern[i] == pattern[k]) ++k;
    fail[i] = k;
  }
  for (size_t i = from, k = 0; i < text.size(); ++i) {
    while (k > 0 && text[i] != pattern[k]) k = fail[k - 1];
    if (text[i] == pattern[k]) ++k;
    if (k == pattern.size()) return i + 1 - pattern.size();
  }
  return std::string_view::npos;
}

}  // namespace

size_t FindBytes(std::string_view haystack, std::string_view needle, size_t from) {
  if (from > haystack.size()) return std::string_view::npos;
  if (needle.size() < kShortNeedle) return haystack.find(needle, from);
  return KmpFind(haystack, needle, from);
}

size_t RFindBytes(std::string_view haystack, std::string_view needle, size_t end) {
  if (end > haystack.size()) end = haystack.size();
  haystack = haystack.substr(0, end);
  if (needle.size() < kShortNeedle) return haystack.rfind(needle);
  if (needle.size() > haystack.size()) return std::string_view::npos;
  const std::string reversed_haystack(haystack.rbegin(), haystack.rend());
  const std::string reversed_needle(needle.rbegin(), needle.rend());
  const size_t found = KmpFind(reversed_haystack, reversed_needle, 0);
  if (found == std::string_view::npos) return found;
  return haystack.size() - found - needle.size();
}

std::vector<size_t> CodePointOffsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  for (size_t pos = 0; pos < s.size();) {
    offsets.push_back(pos);
    if (static_cast<unsigned char>(s[pos]) < 0x80) {
      ++pos;
    } else {
      DecodeUtf8(s, pos);
    }
  }
  offsets.push_back(s.size());
  return offsets;
}

int64_t CodePointLength(std::string_view s) { return static_cast<int64_t>(CountCodePoints(s)); }

int64_t AdjustSlice(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                    int64_t step, int64_t& out_start, int64_t& out_stop) {
  auto adjust = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += length;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= length) {
      x = step < 0 ? length - 1 : length;
    }
    return x;
  };
  out_start = adjust(start, step < 0 ? length - 1 : 0);
  out_stop = adjust(stop, step < 0 ? -1 : length);
  if (step < 0) {
    return out_stop < out_start ? (out_start - out_stop - 1) / (-step) + 1 : 0;
  }
  return out_start < out_stop ? (out_stop - out_start - 1) / step + 1 : 0;
}

TString PyStrSlice(const TString& s, std::optional<int64_t> start, std::optional<int64_t> stop,
                   int64_t step) {
  const bool ascii = IsAscii(s.view());
  std::vector<size_t> offsets;
  if (!ascii) offsets = CodePointOffsets(s.view());
  const int64_t length =
      ascii ? static_cast<int64_t>(s.size()) : static_cast<int64_t>(offsets.size()) - 1;
  auto byte_at = [&](int64_t i) { return ascii ? static_cast<size_t>(i) : offsets[i]; };
  int64_t begin, end;
  const int64_t n = AdjustSlice(length, start, stop, step, begin, end);
  if (step == 1) return n == 0 ? TString() : s.Substr(byte_at(begin), byte_at(begin + n));
  TString out;
  for (int64_t k = 0, i = begin; k < n; ++k, i += step) {
    out.Append(s.Substr(byte_at(i), byte_at(i + 1)));
  }
  return out;
}

TString PyStrAt(const TString& s, int64_t index) {
  if (IsAscii(s.view())) return s.Substr(index, index + 1);
  const size_t begin = ByteOffsetOfCodePoint(s.view(), index);
  size_t end = begin;
  DecodeUtf8(s.view(), end);
  return s.Substr(begin, end);
}

namespace {

bool InChars(char32_t c, const std::optional<std::string_view>& chars) {
  if (!chars) return IsPySpace(c);
  for (size_t pos = 0; pos < chars->size();) {
    if (DecodeUtf8(*chars, pos) == c) return true;
  }
  return false;
}

// [begin, end) byte ranges of the whitespace-separated words of s.
std::vector<std::pair<size_t, size_t>> Words(std::string_view s) {
  std::vector<std::pair<size_t, size_t>> words;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t next = pos;
    if (IsPySpace(DecodeUtf8(s, next))) {
      pos = next;
      continue;
    }
    const size_t begin = pos;
    while (pos < s.size()) {
      next = pos;
      if (IsPySpace(DecodeUtf8(s, next))) break;
      pos = next;
    }
    words.emplace_back(begin, pos);
  }
  return words;
}

// The start of the code point that ends at byte `end`.
size_t PrevCodePoint(std::string_view s, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80 && end - start < 4) {
    --start;
  }
  size_t p = start;
  DecodeUtf8(s, p);
  return p == end ? start : end - 1;
}

}  // namespace

TString PyStrip(const TString& s, const std::optional<std::string_view>& chars, StripSide side) {
  const std::string_view v = s.view();
  size_t begin = 0, end = v.size();
  if (side != StripSide::kRight) {
    while (begin < end) {
      size_t next = begin;
      if (!InChars(DecodeUtf8(v, next), chars)) break;
      begin = next;
    }
  }
  if (side != StripSide::kLeft) {
    while (end > begin) {
      const size_t start = PrevCodePoint(v, end);
      size_t p = start;
      if (!InChars(DecodeUtf8(v, p), chars)) break;
      end = start;
    }
  }
  return s.Substr(begin, end);
}

std::vector<TString> PySplit(const TString& s, const std::optional<std::string_view>& sep,
                             int64_t maxsplit) {
  std::vector<TString> out;
  const std::string_view v = s.view();
  if (!sep) {
    const auto words = Words(v);
    for (size_t i = 0; i < words.size(); ++i) {
      if (maxsplit >= 0 && static_cast<int64_t>(i) == maxsplit) {
        out.push_back(s.Substr(words[i].first, v.size()));  // the rest, as it is
        return out;
      }
      out.push_back(s.Substr(words[i].first, words[i].second));
    }
    return out;
  }
  size_t pos = 0;
  int64_t splits = 0;
  while (maxsplit < 0 || splits < maxsplit) {
    const size_t found = FindBytes(v, *sep, pos);
    if (found == std::string_view::npos) break;
    out.push_back(s.Substr(pos, found));
    pos = found + sep->size();
    ++splits;
  }
  out.push_back(s.Substr(pos, v.size()));
  return out;
}

std::vector<TString> PyRSplit(const TString& s, const std::optional<std::string_view>& sep,
                              int64_t maxsplit) {
  std::vector<TString> out;
  const std::string_view v = s.view();
  if (!sep) {
    const auto words = Words(v);
    int64_t taken = 0;
    size_t i = words.size();
    while (i > 0) {
      if (maxsplit >= 0 && taken == maxsplit) {
        out.push_back(s.Substr(0, words[i - 1].second));
        break;
      }
      --i;
      out.push_back(s.Substr(words[i].first, words[i].second));
      ++taken;
    }
    std::reverse(out.begin(), out.end());
    return out;
  }
  size_t end = v.size();
  int64_t splits = 0;
  while (maxsplit < 0 || splits < maxsplit) {
    if (end < sep->size()) break;
    const size_t found = RFindBytes(v, *sep, end);
    if (found == std::string_view::npos) break;
    out.push_back(s.Substr(found + sep->size(), end));
    end = found;
    ++splits;
  }
  out.push_back(s.Substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<TString> PySplitLines(const TString& s, bool keepends) {
  std::vector<TString> out;
  const std::string_view v = s.view();
  size_t line_start = 0;
  size_t pos = 0;
  while (pos < v.size()) {
    const size_t start = pos;
    const char32_t c = DecodeUtf8(v, pos);
    if (!IsPyLineBreak(c)) continue;
    size_t eol = pos;
    if (c == '\r' && eol < v.size() && v[eol] == '\n') ++eol;
    out.push_back(s.Substr(line_start, keepends ? eol : start));
    line_start = pos = eol;
  }
  if (line_start < v.size()) out.push_back(s.Substr(line_start, v.size()));
  return out;
}

std::vector<TString> PyPartition(const TString& s, std::string_view sep, bool from_right) {
  const std::string_view v = s.view();
  const size_t found = from_right ? RFindBytes(v, sep) : FindBytes(v, sep);
  if (found == std::string_view::npos) {
    if (from_right) return {TString(), TString(), s};
    return {s, TString(), TString()};
  }
  return {s.Substr(0, found), s.Substr(found, found + sep.size()),
          s.Substr(found + sep.size(), v.size())};
}

TString PyJoin(const TString& separator, const std::vector<TString>& parts) {
  TString out;
  size_t total = 0;
  for (const TString& p : parts) total += p.size() + separator.size();
  out.Reserve(total);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out.Append(separator);
    out.Append(parts[i]);
  }
  return out;
}

TString PyRepeat(const TString& s, int64_t times) {
  TString out;
  if (times <= 0 || s.empty()) return out;
  out.Reserve(s.size() * times);
  for (int64_t i = 0; i < times; ++i) out.Append(s);
  return out;
}

TString PyReplace(const TString& s, std::string_view old_text, const TString& new_text,
                  int64_t count) {
  const std::string_view v = s.view();
  std::string out;
  int64_t done = 0;
  if (old_text.empty()) {
    // Python inserts `new` before every code point and at the end.
    size_t pos = 0;
    while (count < 0 || done < count) {
      out += new_text.bytes();
      ++done;
      if (pos >= v.size()) break;
      const size_t start = pos;
      DecodeUtf8(v, pos);
      out.append(v.substr(start, pos - start));
    }
    out.append(v.substr(std::min(pos, v.size())));
  } else {
    size_t pos = 0;
    while (count < 0 || done < count) {
      const size_t found = FindBytes(v, old_text, pos);
      if (found == std::string_view::npos) break;
      out.append(v.substr(pos, found - pos));
      out += new_text.bytes();
      pos = found + old_text.size();
      ++done;
    }
    out.append(v.substr(pos));
  }
  if (done == 0) return s;
  return TString::Derived(std::move(out), s.any_input() || new_text.any_input());
}

namespace {

// s[start:end] as byte offsets, with Python's clamping of code point indices.
std::pair<size_t, size_t> ClampRange(std::string_view s, std::optional<int64_t> start,
                                     std::optional<int64_t> end, int64_t& cp_begin) {
  const std::vector<size_t> offsets = CodePointOffsets(s);
  const int64_t length = static_cast<int64_t>(offsets.size()) - 1;
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) x = std::max<int64_t>(0, x + length);
    return std::min(x, length);
  };
  const int64_t b = clamp(start, 0);
  const int64_t e = clamp(end, length);
  cp_begin = b;
  if (b > e) return {std::string_view::npos, std::string_view::npos};
  return {offsets[b], offsets[e]};
}

}  // namespace

int64_t PyFind(std::string_view s, std::string_view sub, std::optional<int64_t> start,
               std::optional<int64_t> end, bool from_right) {
  int64_t cp_begin = 0;
  const auto [b, e] = ClampRange(s, start, end, cp_begin);
  if (b == std::string_view::npos) return -1;
  const std::string_view window = s.substr(b, e - b);
  const size_t found = from_right ? RFindBytes(window, sub) : FindBytes(window, sub);
  if (found == std::string_view::npos) return -1;
  return cp_begin + static_cast<int64_t>(CountCodePoints(window.substr(0, found)));
}

int64_t PyCount(std::string_view s, std::string_view sub, std::optional<int64_t> start,
                std::optional<int64_t> end) {
  int64_t cp_begin = 0;
  const auto [b, e] = ClampRange(s, start, end, cp_begin);
  if (b == std::string_view::npos) return 0;
  const std::string_view window = s.substr(b, e - b);
  if (sub.empty()) return static_cast<int64_t>(CountCodePoints(window)) + 1;
  int64_t n = 0;
  for (size_t pos = FindBytes(window, sub); pos != std::string_view::npos;
       pos = FindBytes(window, sub, pos + sub.size())) {
    ++n;
  }
  return n;
}

bool PyStartsWith(std::string_view s, std::string_view prefix, std::optional<int64_t> start,
                  std::optional<int64_t> end, bool ends_with) {
  int64_t cp_begin = 0;
  const auto [b, e] = ClampRange(s, start, end, cp_begin);
  if (b == std::string_view::npos) return false;
  const std::string_view window = s.substr(b, e - b);
  if (prefix.size() > window.size()) return false;
  return ends_with ? window.substr(window.size() - prefix.size()) == prefix
                   : window.substr(0, prefix.size()) == prefix;
}

TString PyPad(const TString& s, int64_t width, std::string_view fill, int align) {
  const int64_t length = CodePointLength(s.view());
  if (width <= length) return s;
  const int64_t total = width - length;
  int64_t left = 0;
  if (align > 0) {
    left = total;
  } else if (align == 0) {
    // Python's center: the extra space goes left when both total and width are odd.
    left = total / 2 + (total & width & 1);
  }
  const int64_t right = total - left;
  TString out;
  TString pad{std::string(fill)};
  out.Append(PyRepeat(pad, left));
  out.Append(s);
  out.Append(PyRepeat(pad, right));
  return out;
}

TString PyZfill(const TString& s, int64_t width) {
  const int64_t length = CodePointLength(s.view());
  if (width <= length) return s;
  TString out;
  size_t sign = 0;
  if (!s.empty() && (s.view()[0] == '+' || s.view()[0] == '-')) {
    out.Append(s.Substr(0, 1));
    sign = 1;
  }
  out.Append(std::string(width - length, '0'));
  out.Append(s.Substr(sign, s.size()));
  return out;
}

}  // namespace tpserve::jinja
