// JSON parsing for untrusted checkpoint headers and index files: parse errors become
// INVALID_ARGUMENT values (nlohmann throws), and a key repeated inside one object is an error
// instead of silently keeping the last value.
//
//   TP_ASSIGN_OR_RETURN(nlohmann::json header, ParseJsonStrict(text, "model.safetensors header"));
//   if (!header.is_object()) ...
//
// Thread-safe: a pure function.
#ifndef TPSERVE_FORMATS_JSON_STRICT_H_
#define TPSERVE_FORMATS_JSON_STRICT_H_

#include <nlohmann/json.hpp>
#include <string_view>

#include "absl/status/statusor.h"

namespace tpserve {

// INVALID_ARGUMENT starting with `what`: "<what> is not valid JSON: <parser message>" or
// "<what> has duplicate key '<key>'".
absl::StatusOr<nlohmann::json> ParseJsonStrict(std::string_view text, std::string_view what);

}  // namespace tpserve

#endif  // TPSERVE_FORMATS_JSON_STRICT_H_
