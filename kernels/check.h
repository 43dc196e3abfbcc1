// TP_CHECK: aborts with file, line and message when a programmer invariant fails. Only for
// contracts between our own modules (shapes the caller promised); input, files and config are
// checked with absl::Status instead. Debian's Abseil has no absl/log CHECK, hence this macro.
//
//   TP_CHECK(k % 32 == 0, "quantized matmul needs whole blocks");
//
// Thread-safe.
#ifndef TPSERVE_KERNELS_CHECK_H_
#define TPSERVE_KERNELS_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define TP_CHECK(cond, msg)                                                          \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "%s:%d: check failed: %s: %s\n", __FILE__, __LINE__, #cond, \
                   msg);                                                             \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)

#endif  // TPSERVE_KERNELS_CHECK_H_
