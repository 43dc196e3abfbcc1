// A copy of a Hugging Face checkpoint directory with one thing changed, for tests of what the
// loader refuses: its safetensors' tensors (every dtype kept) through an edit, its config.json
// through another, written under `dir`.
//
//   TP_ASSIGN_OR_RETURN(std::string dir, EditedHfDir(golden, tmp + "/no_scale", [](auto& t) {
//     DropTensor(t, "model.layers.1.self_attn.q_b_proj.weight_scale_inv");
//   }));
//
// Thread-compatible; writes files.
#ifndef TPSERVE_CHECKPOINT_TESTING_EDITED_CHECKPOINT_H_
#define TPSERVE_CHECKPOINT_TESTING_EDITED_CHECKPOINT_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "formats/safetensors_test_builder.h"

namespace tpserve {

using TensorEdit = std::function<void(std::vector<SafetensorsTestBuilder::Tensor>&)>;
using ConfigEdit = std::function<void(std::string&)>;

// Writes `from`/config.json (through `edit_config` when given) and `from`/model.safetensors
// (through `edit`) into `dir`, created; returns `dir`. The status of a file that cannot be read
// or written.
absl::StatusOr<std::string> EditedHfDir(const std::string& from, const std::string& dir,
                                        const TensorEdit& edit,
                                        const ConfigEdit& edit_config = nullptr);

// Removes tensor `name`; INVALID_ARGUMENT when there is no such tensor, so that an edit cannot
// silently miss.
absl::Status DropTensor(std::vector<SafetensorsTestBuilder::Tensor>& tensors,
                        const std::string& name);

// Writes `bytes` to `path`, replacing it.
absl::Status WriteFileBytes(const std::string& path, const std::string& bytes);

}  // namespace tpserve

#endif  // TPSERVE_CHECKPOINT_TESTING_EDITED_CHECKPOINT_H_
