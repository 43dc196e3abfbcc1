// absl::StrCat that also accepts std::string_view, for building error messages.
//
//   return absl::NotFoundError(StrCat("tensor '", name, "' not found in ", path));
//
// Debian's Abseil 20220623 is built with its own absl::string_view
// (ABSL_OPTION_USE_STD_STRING_VIEW 0), so absl::AlphaNum rejects std::string_view; this shim
// converts those arguments and forwards everything else unchanged. Thread-safe.
#ifndef TPSERVE_BASE_STR_CAT_H_
#define TPSERVE_BASE_STR_CAT_H_

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tpserve {
namespace str_cat_internal {

inline absl::string_view Piece(std::string_view s) { return {s.data(), s.size()}; }
template <typename T>
const T& Piece(const T& v) {
  return v;
}

}  // namespace str_cat_internal

template <typename... Args>
std::string StrCat(const Args&... args) {
  return absl::StrCat(str_cat_internal::Piece(args)...);
}

}  // namespace tpserve

#endif  // TPSERVE_BASE_STR_CAT_H_
