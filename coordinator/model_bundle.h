// Everything the coordinator needs from a model path: config and weights
// (checkpoint/model_files.h), the tokenizer and the chat template, whichever format the model
// came in.
//
//   TP_ASSIGN_OR_RETURN(ModelBundle bundle, LoadModelBundle(path));
//   TP_ASSIGN_OR_RETURN(std::vector<int32_t> ids, bundle.EncodeChat({{"user", "Hi"}}));
//
// The chat template comes from the GGUF key tokenizer.chat_template or tokenizer_config.json's
// chat_template (a "tool_use" variant too, when it names one), or from
// ModelBundleOptions::chat_template_file.
//
// Thread-safety: immutable after loading; safe to share.
#ifndef TPSERVE_COORDINATOR_MODEL_BUNDLE_H_
#define TPSERVE_COORDINATOR_MODEL_BUNDLE_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/model_files.h"
#include "coordinator/admission.h"
#include "coordinator/chat/chat_template.h"
#include "coordinator/tokenizer/tokenizer.h"

namespace tpserve {

struct ModelBundle {
  ModelFiles files;
  std::optional<Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat_template;  // absent when the model ships none

  // The config's EOS ids and the tokenizer's, deduplicated.
  std::vector<int32_t> EosTokenIds() const;
  // The prompt of a chat of (role, content) messages, with the generation prompt.
  // FAILED_PRECONDITION without a chat template; the template's errors otherwise.
  absl::StatusOr<std::vector<int32_t>> EncodeChat(
      const std::vector<std::pair<std::string, std::string>>& messages) const;
  // The door (coordinator/admission.h) over this model's tokenizer and chat template, for an
  // engine with this context window and KV cache (Engine::kv_capacity()), compiling
  // structured-output constraints with `constraints` (may be null). REQUIRES: tokenizer.
  Admitter Door(int64_t context_length, KvCapacity kv,
                const ConstraintCompiler* constraints = nullptr) const;
};

struct ModelBundleOptions {
  // A Jinja file that replaces the model's own chat template (--chat_template).
  std::string chat_template_file;
};

// The model's chat template is loaded with its tokenizer: a template that does not parse or
// cannot render a one-message chat fails the load (INVALID_ARGUMENT naming the template's
// source, with line and column), rather than the first request.
absl::StatusOr<ModelBundle> LoadModelBundle(const std::string& path,
                                            const ModelBundleOptions& options = {});

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_MODEL_BUNDLE_H_
