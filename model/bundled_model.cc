#include "model/bundled_model.h"

#include <cstdlib>
#include <filesystem>

#include "absl/status/status.h"

namespace tpserve {

std::string BundledModelExpectedPath() {
  std::string dir;
  if (const char* env = std::getenv("TPSERVE_MODEL_DIR"); env != nullptr && *env != '\0') {
    dir = env;
  } else if (const char* home = std::getenv("HOME"); home != nullptr) {
    dir = std::string(home) + "/.cache/tpserve";
  } else {
    dir = ".cache/tpserve";
  }
  return dir + "/" + kBundledModelFile;
}

absl::StatusOr<std::string> BundledModelPath() {
  const std::string path = BundledModelExpectedPath();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::NotFoundError("model file " + path +
                               " is missing: run scripts/setup.sh (or set TPSERVE_MODEL_DIR)");
  }
  return path;
}

}  // namespace tpserve
