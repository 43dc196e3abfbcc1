#include "formats/test_files.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "base/str_cat.h"

namespace tpserve {

std::string GoldenPath(std::string_view leaf) { return StrCat("tests/golden/formats/", leaf); }

absl::StatusOr<std::string> ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(StrCat("cannot open ", path));
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

absl::StatusOr<std::vector<float>> ReadF32File(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFileBytes(path);
  if (!bytes.ok()) return bytes.status();
  if (bytes->size() % sizeof(float) != 0) {
    return absl::InvalidArgumentError(
        StrCat(path, ": ", bytes->size(), " bytes is not a whole number of float32s"));
  }
  std::vector<float> values(bytes->size() / sizeof(float));
  std::memcpy(values.data(), bytes->data(), bytes->size());
  return values;
}

}  // namespace tpserve
