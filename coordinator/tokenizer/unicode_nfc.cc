#include "coordinator/tokenizer/unicode_nfc.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "coordinator/tokenizer/utf8.h"

namespace tpserve {
namespace {

struct CombiningClassRange {
  char32_t first;
  char32_t last;
  uint8_t ccc;
};
struct Decomposition {
  char32_t code_point;
  uint16_t offset;  // into kDecompositionPool
  uint8_t length;
};
struct Composition {
  char32_t first;
  char32_t second;
  char32_t composite;
};

#include "coordinator/tokenizer/unicode_nfc_tables.inc"

// Hangul syllables decompose and compose algorithmically (Unicode 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

// Below U+0300 nothing decomposes into or combines with anything (lead byte 0xCC and up).
constexpr unsigned char kFirstLeadThatMayChange = 0xCC;

uint8_t CombiningClass(char32_t cp) {
  const auto* it = std::upper_bound(
      std::begin(kCombiningClasses), std::end(kCombiningClasses), cp,
      [](char32_t value, const CombiningClassRange& range) { return value < range.first; });
  if (it == std::begin(kCombiningClasses)) return 0;
  --it;
  return cp <= it->last ? it->ccc : 0;
}

void Decompose(char32_t cp, std::vector<char32_t>* out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t index = cp - kSBase;
    out->push_back(kLBase + index / kNCount);
    out->push_back(kVBase + (index % kNCount) / kTCount);
    if (index % kTCount != 0) out->push_back(kTBase + index % kTCount);
    return;
  }
  const auto* it =
      std::lower_bound(std::begin(kDecompositions), std::end(kDecompositions), cp,
                       [](const Decomposition& d, char32_t value) { return d.code_point < value; });
  if (it == std::end(kDecompositions) || it->code_point != cp) {
    out->push_back(cp);
    return;
  }
  out->insert(out->end(), kDecompositionPool + it->offset,
              kDecompositionPool + it->offset + it->length);
}

// The primary composite of (first, second), or 0.
char32_t Compose(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase &&
      second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 &&
      second > kTBase && second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  const auto* it = std::lower_bound(
      std::begin(kCompositions), std::end(kCompositions), std::make_pair(first, second),
      [](const Composition& c, const std::pair<char32_t, char32_t>& key) {
        return c.first != key.first ? c.first < key.first : c.second < key.second;
      });
  return it != std::end(kCompositions) && it->first == first && it->second == second ? it->composite
                                                                                     : 0;
}

char32_t DecodeOne(std::string_view text, size_t at, size_t length) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[at + i]); };
  switch (length) {
    case 1:
      return byte(0);
    case 2:
      return ((byte(0) & 0x1F) << 6) | (byte(1) & 0x3F);
    case 3:
      return ((byte(0) & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
    default:
      return ((byte(0) & 0x07) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) |
             (byte(3) & 0x3F);
  }
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// NFC of a run of code points, in place.
void NormalizeRun(std::vector<char32_t>* run) {
  std::vector<char32_t> decomposed;
  decomposed.reserve(run->size());
  for (const char32_t cp : *run) Decompose(cp, &decomposed);
  // Canonical ordering: a stable sort of each maximal run of non-starters by class.
  for (size_t begin = 0; begin < decomposed.size();) {
    if (CombiningClass(decomposed[begin]) == 0) {
      ++begin;
      continue;
    }
    size_t end = begin;
    while (end < decomposed.size() && CombiningClass(decomposed[end]) != 0) ++end;
    std::stable_sort(decomposed.begin() + begin, decomposed.begin() + end,
                     [](char32_t a, char32_t b) { return CombiningClass(a) < CombiningClass(b); });
    begin = end;
  }
  // Canonical composition (the Unicode sample algorithm): a mark composes with the last
  // starter unless a character between them has class 0 or a class >= its own.
  run->clear();
  int64_t starter = -1;
  int last_class = 256;
  for (const char32_t cp : decomposed) {
    const int cp_class = CombiningClass(cp);
    if (starter >= 0 && (last_class < cp_class || last_class == 0)) {
      const char32_t composite = Compose((*run)[starter], cp);
      if (composite != 0) {
        (*run)[starter] = composite;
        continue;
      }
    }
    if (cp_class == 0) starter = static_cast<int64_t>(run->size());
    last_class = cp_class;
    run->push_back(cp);
  }
}

}  // namespace

std::string NfcNormalize(std::string_view text) {
  if (std::none_of(text.begin(), text.end(), [](char c) {
        return static_cast<unsigned char>(c) >= kFirstLeadThatMayChange;
      })) {
    return std::string(text);
  }
  std::string out;
  out.reserve(text.size());
  std::vector<char32_t> run;
  const auto flush = [&] {
    NormalizeRun(&run);
    for (const char32_t cp : run) AppendUtf8(cp, &out);
    run.clear();
  };
  for (size_t at = 0; at < text.size();) {
    const size_t length = Utf8SequenceLength(text, at);
    if (length == 0) {
      flush();
      out.push_back(text[at++]);
      continue;
    }
    run.push_back(DecodeOne(text, at, length));
    at += length;
  }
  flush();
  return out;
}

}  // namespace tpserve
