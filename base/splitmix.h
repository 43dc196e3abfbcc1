// splitmix64's finalizer: a bijection of 64-bit values whose every output bit depends on every
// input bit. A fast, stable (same in every process and build) mixer for hash chains and
// seeded streams; not cryptographic.
#ifndef TPSERVE_BASE_SPLITMIX_H_
#define TPSERVE_BASE_SPLITMIX_H_

#include <cstdint>

namespace tpserve {

inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace tpserve

#endif  // TPSERVE_BASE_SPLITMIX_H_
