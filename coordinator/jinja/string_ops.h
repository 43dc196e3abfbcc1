// Python's str methods over TString, keeping input provenance exact where the result is made
// of pieces of the input (slicing, strip, split, splitlines, partition, join, repeat) and
// marking the whole result as input otherwise (case changes, replace).
//
//   std::vector<TString> parts = PySplit(s, " ", -1);   // s.split(" ")
//   TString t = PyStrip(s, std::nullopt);               // s.strip()
//
// Indices are in code points, as in Python. Threading: pure functions.
#ifndef TPSERVE_COORDINATOR_JINJA_STRING_OPS_H_
#define TPSERVE_COORDINATOR_JINJA_STRING_OPS_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "coordinator/jinja/tainted_string.h"

namespace tpserve::jinja {

// Substring search in linear time whatever the needle (Python's str search is linear too; a
// naive search of a long needle would be quadratic): the first match at or after `from`, or
// the last match ending at or before `end`; npos when none.
size_t FindBytes(std::string_view haystack, std::string_view needle, size_t from = 0);
size_t RFindBytes(std::string_view haystack, std::string_view needle,
                  size_t end = std::string_view::npos);

// Byte offsets of the code point boundaries of s (size = code points + 1).
std::vector<size_t> CodePointOffsets(std::string_view s);
int64_t CodePointLength(std::string_view s);

// Python's slice.indices(length): adjusts start/stop for `step` (nonzero) and returns the
// number of elements.
int64_t AdjustSlice(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                    int64_t step, int64_t& out_start, int64_t& out_stop);

TString PyStrSlice(const TString& s, std::optional<int64_t> start, std::optional<int64_t> stop,
                   int64_t step);
// s[index] for 0 <= index < length.
TString PyStrAt(const TString& s, int64_t index);

enum class StripSide { kBoth, kLeft, kRight };
// chars: nullopt strips whitespace (str.isspace), otherwise the code points of *chars.
TString PyStrip(const TString& s, const std::optional<std::string_view>& chars, StripSide side);
// sep: nullopt splits on runs of whitespace. maxsplit < 0: no limit.
std::vector<TString> PySplit(const TString& s, const std::optional<std::string_view>& sep,
                             int64_t maxsplit);
std::vector<TString> PyRSplit(const TString& s, const std::optional<std::string_view>& sep,
                              int64_t maxsplit);
std::vector<TString> PySplitLines(const TString& s, bool keepends);
// str.partition / rpartition: three parts.
std::vector<TString> PyPartition(const TString& s, std::string_view sep, bool from_right);
TString PyJoin(const TString& separator, const std::vector<TString>& parts);
TString PyRepeat(const TString& s, int64_t times);
TString PyReplace(const TString& s, std::string_view old_text, const TString& new_text,
                  int64_t count);

// find/rfind in code points over s[start:end] (Python's clamping); -1 when absent.
int64_t PyFind(std::string_view s, std::string_view sub, std::optional<int64_t> start,
               std::optional<int64_t> end, bool from_right);
int64_t PyCount(std::string_view s, std::string_view sub, std::optional<int64_t> start,
                std::optional<int64_t> end);
bool PyStartsWith(std::string_view s, std::string_view prefix, std::optional<int64_t> start,
                  std::optional<int64_t> end, bool ends_with);

// center/ljust/rjust: padded with `fill` (one code point) to `width` code points.
TString PyPad(const TString& s, int64_t width, std::string_view fill, int align /* <0 left */);
TString PyZfill(const TString& s, int64_t width);

}  // namespace tpserve::jinja

#endif  // TPSERVE_COORDINATOR_JINJA_STRING_OPS_H_
