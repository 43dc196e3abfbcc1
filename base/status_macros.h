// Status propagation helpers. Debian's Abseil (20220623) ships neither absl/log nor
// ABSL_RETURN_IF_ERROR, so the two macros every boundary needs live here.
//
//   TP_RETURN_IF_ERROR(file.Read(offset, n, buf));
//   TP_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::Open(path));
#ifndef TPSERVE_BASE_STATUS_MACROS_H_
#define TPSERVE_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TP_STATUS_CONCAT_INNER_(a, b) a##b
#define TP_STATUS_CONCAT_(a, b) TP_STATUS_CONCAT_INNER_(a, b)

#define TP_RETURN_IF_ERROR(expr)                     \
  do {                                               \
    ::absl::Status tp_status_ = (expr);              \
    if (!tp_status_.ok()) return tp_status_;         \
  } while (0)

#define TP_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(*tmp)

#define TP_ASSIGN_OR_RETURN(lhs, expr) \
  TP_ASSIGN_OR_RETURN_IMPL_(TP_STATUS_CONCAT_(tp_statusor_, __LINE__), lhs, expr)

#endif  // TPSERVE_BASE_STATUS_MACROS_H_
