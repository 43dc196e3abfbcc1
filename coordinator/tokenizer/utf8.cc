#include "coordinator/tokenizer/utf8.h"

#include <cstdint>

namespace tpserve {
namespace {

// Allowed range of the second byte for a lead byte (Unicode Table 3-7); the rest of the
// continuation bytes are always 0x80..0xBF. Returns false for bytes that cannot lead.
bool LeadInfo(uint8_t lead, size_t* length, uint8_t* second_lo, uint8_t* second_hi) {
  *second_lo = 0x80;
  *second_hi = 0xBF;
  if (lead < 0x80) {
    *length = 1;
  } else if (lead >= 0xC2 && lead <= 0xDF) {
    *length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    *length = 3;
    if (lead == 0xE0) *second_lo = 0xA0;  // no overlong forms
    if (lead == 0xED) *second_hi = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    *length = 4;
    if (lead == 0xF0) *second_lo = 0x90;  // no overlong forms
    if (lead == 0xF4) *second_hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return false;
  }
  return true;
}

// Number of bytes from `pos` (at most the sequence length) that are a valid prefix of the
// sequence the lead byte announces; sets *length to that sequence length (0 if bad lead).
size_t ValidPrefix(std::string_view text, size_t pos, size_t* length) {
  uint8_t lo, hi;
  if (!LeadInfo(static_cast<uint8_t>(text[pos]), length, &lo, &hi)) {
    *length = 0;
    return 0;
  }
  size_t matched = 1;
  while (matched < *length && pos + matched < text.size()) {
    const uint8_t byte = static_cast<uint8_t>(text[pos + matched]);
    if (matched > 1) {
      lo = 0x80;
      hi = 0xBF;
    }
    if (byte < lo || byte > hi) break;
    ++matched;
  }
  return matched;
}

}  // namespace

size_t Utf8SequenceLength(std::string_view text, size_t pos) {
  size_t length;
  const size_t matched = ValidPrefix(text, pos, &length);
  return (length != 0 && matched == length) ? length : 0;
}

bool IsValidUtf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t n = Utf8SequenceLength(text, pos);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

size_t IncompleteUtf8TailLength(std::string_view text) {
  // A sequence is at most 4 bytes, so only the last 3 bytes can hold an unfinished one.
  const size_t first = text.size() > 3 ? text.size() - 3 : 0;
  for (size_t pos = first; pos < text.size(); ++pos) {
    size_t length;
    const size_t matched = ValidPrefix(text, pos, &length);
    if (length > 1 && pos + matched == text.size() && matched < length) {
      return text.size() - pos;
    }
  }
  return 0;
}

std::string SanitizeUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    size_t length;
    const size_t matched = ValidPrefix(text, pos, &length);
    if (length != 0 && matched == length) {
      out.append(text.substr(pos, length));
      pos += length;
    } else {
      // A maximal subpart: a valid prefix that was cut short, or one bad byte.
      out.append(kUtf8Replacement);
      pos += matched == 0 ? 1 : matched;
    }
  }
  return out;
}

}  // namespace tpserve
