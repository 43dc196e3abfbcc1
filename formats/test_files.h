// Test-only access to golden files (the real model's path: model/bundled_model.h).
//
//   TP_ASSIGN_OR_RETURN(std::vector<float> want, ReadF32File(GoldenPath("quant_types.q4_1.f32")));
//
// Bazel runs tests from the workspace's runfiles root, so golden paths are relative to it.
// Thread-safe: pure functions reading files.
#ifndef TPSERVE_FORMATS_TEST_FILES_H_
#define TPSERVE_FORMATS_TEST_FILES_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tpserve {

// "tests/golden/formats/<leaf>".
std::string GoldenPath(std::string_view leaf);

absl::StatusOr<std::string> ReadFileBytes(const std::string& path);
// A raw little-endian float32 file; INVALID_ARGUMENT if its size is not a multiple of 4.
absl::StatusOr<std::vector<float>> ReadF32File(const std::string& path);

}  // namespace tpserve

#endif  // TPSERVE_FORMATS_TEST_FILES_H_
