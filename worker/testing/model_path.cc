#include "worker/testing/model_path.h"

#include <cstdlib>
#include <filesystem>

#include "absl/status/status.h"

namespace tpserve {

absl::StatusOr<std::string> SmolLm2GgufPath() {
  std::string dir;
  if (const char* env = std::getenv("TPSERVE_MODEL_DIR"); env != nullptr && *env != '\0') {
    dir = env;
  } else if (const char* home = std::getenv("HOME"); home != nullptr) {
    dir = std::string(home) + "/.cache/tpserve";
  }
  const std::string path = dir + "/" + kSmolLm2GgufFile;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::NotFoundError("test model " + path +
                               " is missing: run scripts/setup.sh (or set TPSERVE_MODEL_DIR)");
  }
  return path;
}

}  // namespace tpserve
