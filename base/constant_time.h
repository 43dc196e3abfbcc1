// Comparing secrets (bearer tokens, the cluster secret) without a timing side channel.
#ifndef TPSERVE_BASE_CONSTANT_TIME_H_
#define TPSERVE_BASE_CONSTANT_TIME_H_

#include <cstddef>
#include <string_view>

namespace tpserve {

// True when a == b. Every byte of `b` (the secret) is compared whatever the lengths, so the
// time taken says nothing about where the values differ.
inline bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < b.size(); ++i) {
    const unsigned char ai = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    diff |= ai ^ static_cast<unsigned char>(b[i]);
  }
  return diff == 0;
}

}  // namespace tpserve

#endif  // TPSERVE_BASE_CONSTANT_TIME_H_
