// Everything the coordinator needs from a model path: config and weights
// (checkpoint/model_files.h), the tokenizer and the chat template, whichever format the model
// came in.
//
//   TP_ASSIGN_OR_RETURN(ModelBundle bundle, LoadModelBundle(path));
//   TP_ASSIGN_OR_RETURN(std::vector<int32_t> ids, bundle.EncodeChat({{"user", "Hi"}}));
//
// Thread-safety: immutable after loading; safe to share.
#ifndef TPSERVE_COORDINATOR_MODEL_BUNDLE_H_
#define TPSERVE_COORDINATOR_MODEL_BUNDLE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/model_files.h"
#include "coordinator/admission.h"
#include "coordinator/tokenizer/chat_template.h"
#include "coordinator/tokenizer/tokenizer.h"

namespace tpserve {

struct ModelBundle {
  ModelFiles files;
  std::optional<Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat_template;  // absent when the model has none we support

  // The config's EOS ids and the tokenizer's, deduplicated.
  std::vector<int32_t> EosTokenIds() const;
  // FAILED_PRECONDITION without a chat template; the template's errors otherwise.
  absl::StatusOr<std::vector<int32_t>> EncodeChat(const std::vector<ChatMessage>& messages) const;
  // The door (coordinator/admission.h) over this model's tokenizer and chat template, for an
  // engine with this context window and KV cache (Engine::kv_capacity()), compiling
  // structured-output constraints with `constraints` (may be null). REQUIRES: tokenizer.
  Admitter Door(int64_t context_length, KvCapacity kv,
                const ConstraintCompiler* constraints = nullptr) const;
};

absl::StatusOr<ModelBundle> LoadModelBundle(const std::string& path);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_MODEL_BUNDLE_H_
