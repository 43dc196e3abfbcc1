#include "formats/json_strict.h"

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/str_cat.h"

namespace tpserve {

absl::StatusOr<nlohmann::json> ParseJsonStrict(std::string_view text, std::string_view what) {
  using Json = nlohmann::json;
  // Valid JSON never holds a raw NUL, but nlohmann stops reading at one, which would let
  // anything after it through unchecked.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return absl::InvalidArgumentError(StrCat(what, " is not valid JSON: NUL byte at offset ", nul));
  }
  // One key set per open object; the parser reports keys in order, so a repeat is seen the
  // moment it is read.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  auto watch_keys = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case Json::parse_event_t::key:
        if (!open_objects.empty() && duplicate.empty() &&
            !open_objects.back().insert(parsed.get<std::string>()).second) {
          duplicate = parsed.get<std::string>();
        }
        break;
      case Json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      default:
        break;
    }
    return true;
  };
  Json parsed;
  try {
    parsed = Json::parse(text.begin(), text.end(), watch_keys);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(StrCat(what, " is not valid JSON: ", e.what()));
  }
  if (!duplicate.empty()) {
    return absl::InvalidArgumentError(StrCat(what, " has duplicate key '", duplicate, "'"));
  }
  return parsed;
}

}  // namespace tpserve
