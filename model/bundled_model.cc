#include "model/bundled_model.h"

#include <cstdlib>
#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tpserve {

std::vector<std::string> BundledModelNames() { return {"smollm2", "gemma3-270m"}; }

std::optional<std::string> BundledModelFile(std::string_view name) {
  if (name == "smollm2" || name == "smollm2-135m") return kBundledModelFile;
  if (name == "gemma3-270m" || name == "gemma3") return kBundledGemma3File;
  return std::nullopt;
}

std::string BundledModelExpectedPath(std::string_view name) {
  std::string dir;
  if (const char* env = std::getenv("TPSERVE_MODEL_DIR"); env != nullptr && *env != '\0') {
    dir = env;
  } else if (const char* home = std::getenv("HOME"); home != nullptr) {
    dir = std::string(home) + "/.cache/tpserve";
  } else {
    dir = ".cache/tpserve";
  }
  return dir + "/" + BundledModelFile(name).value_or(kBundledModelFile);
}

absl::StatusOr<std::string> BundledModelPath(std::string_view name) {
  if (!BundledModelFile(name).has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("'", std::string(name), "' is not a bundled model (",
                                                   absl::StrJoin(BundledModelNames(), ", "), ")"));
  }
  const std::string path = BundledModelExpectedPath(name);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::NotFoundError("model file " + path +
                               " is missing: run scripts/setup.sh (or set TPSERVE_MODEL_DIR)");
  }
  return path;
}

}  // namespace tpserve
