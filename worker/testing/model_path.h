// Where tests find the real SmolLM2-135M-Instruct GGUF: $TPSERVE_MODEL_DIR (default
// $HOME/.cache/tpserve). A missing file is an error that says how to fetch it, so tests that
// need the model fail loudly instead of skipping.
//
//   absl::StatusOr<std::string> path = SmolLm2GgufPath();
//   ASSERT_TRUE(path.ok()) << path.status();
//
// Thread-safe.
#ifndef TPSERVE_WORKER_TESTING_MODEL_PATH_H_
#define TPSERVE_WORKER_TESTING_MODEL_PATH_H_

#include <string>

#include "absl/status/statusor.h"

namespace tpserve {

inline constexpr char kSmolLm2GgufFile[] = "SmolLM2-135M-Instruct.Q4_1.gguf";

// NOT_FOUND naming the path and "run scripts/setup.sh" when the file does not exist.
absl::StatusOr<std::string> SmolLm2GgufPath();

}  // namespace tpserve

#endif  // TPSERVE_WORKER_TESTING_MODEL_PATH_H_
