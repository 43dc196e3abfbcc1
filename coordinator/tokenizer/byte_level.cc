#include "coordinator/tokenizer/byte_level.h"

#include <array>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "coordinator/tokenizer/utf8.h"

namespace tpserve {
namespace {

// Printable Latin-1 bytes stand for themselves; the other 68 bytes (controls, space, DEL,
// NBSP, soft hyphen, ...) take U+0100, U+0101, ... in byte order, as in GPT-2's encoder.py.
bool IsSelfMapped(int byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

struct Tables {
  std::array<uint32_t, 256> byte_to_cp;
  std::array<int16_t, 324> cp_to_byte;  // every code point used is below 256 + 68
};

const Tables& GetTables() {
  static const Tables tables = [] {
    Tables t;
    t.cp_to_byte.fill(-1);
    uint32_t next_extra = 256;
    for (int byte = 0; byte < 256; ++byte) {
      const uint32_t cp = IsSelfMapped(byte) ? byte : next_extra++;
      t.byte_to_cp[byte] = cp;
      t.cp_to_byte[cp] = static_cast<int16_t>(byte);
    }
    return t;
  }();
  return tables;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  // The alphabet only uses code points below U+0800.
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint32_t DecodeCodePoint(std::string_view seq) {
  const auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(seq[i])); };
  switch (seq.size()) {
    case 1:
      return b(0);
    case 2:
      return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3:
      return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default:
      return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

}  // namespace

uint32_t ByteToCodePoint(uint8_t byte) { return GetTables().byte_to_cp[byte]; }

std::string ByteLevelEncode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) AppendUtf8(ByteToCodePoint(static_cast<uint8_t>(c)), &out);
  return out;
}

absl::StatusOr<std::string> ByteLevelDecode(std::string_view text) {
  const Tables& tables = GetTables();
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t n = Utf8SequenceLength(text, pos);
    if (n == 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("byte-level text has invalid UTF-8 at byte offset %d", pos));
    }
    const uint32_t cp = DecodeCodePoint(text.substr(pos, n));
    if (cp >= tables.cp_to_byte.size() || tables.cp_to_byte[cp] < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "code point U+%04X at byte offset %d is not in the 256-symbol byte-level alphabet", cp,
          pos));
    }
    out.push_back(static_cast<char>(tables.cp_to_byte[cp]));
    pos += n;
  }
  return out;
}

}  // namespace tpserve
