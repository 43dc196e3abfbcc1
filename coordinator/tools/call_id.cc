#include "coordinator/tools/call_id.h"

#include "base/splitmix.h"

namespace tpserve {

std::string CallIdGenerator::Next() {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  static constexpr uint64_t kAlphabetSize = sizeof(kAlphabet) - 1;
  std::string id = style_ == CallIdStyle::kOpenAi ? "call_" : "";
  const int length = style_ == CallIdStyle::kOpenAi ? 24 : 9;
  for (int i = 0; i < length; ++i) {
    // A counter through splitmix64 is splitmix64's own stream. 2^64 mod 62 is tiny against
    // 2^64: the modulo's bias is below 1e-17.
    id.push_back(kAlphabet[SplitMix64(seed_ + drawn_++) % kAlphabetSize]);
  }
  return id;
}

}  // namespace tpserve
