#include "coordinator/model_bundle.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "coordinator/tokenizer/gguf_tokenizer.h"
#include "coordinator/tokenizer/hf_tokenizer_json.h"

namespace tpserve {

std::vector<int32_t> ModelBundle::EosTokenIds() const {
  std::vector<int32_t> ids;
  auto add = [&ids](int64_t id) {
    if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) {
      ids.push_back(static_cast<int32_t>(id));
    }
  };
  add(files.config.eos_token_id);
  for (int64_t id : files.config.extra_eos_token_ids) add(id);
  if (tokenizer.has_value()) add(tokenizer->eos_id());
  // Chat models end a turn with their template's end marker.
  if (tokenizer.has_value()) {
    for (const char* marker : {"<|im_end|>", "<|eot_id|>", "<|eom_id|>"}) {
      if (auto id = tokenizer->SpecialTokenId(marker)) add(*id);
    }
  }
  return ids;
}

absl::StatusOr<std::vector<int32_t>> ModelBundle::EncodeChat(
    const std::vector<ChatMessage>& messages) const {
  if (!chat_template.has_value() || !tokenizer.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model ", files.path, " has no supported chat template"));
  }
  TP_ASSIGN_OR_RETURN(std::vector<PromptSegment> segments,
                      chat_template->Render(messages, /*add_generation_prompt=*/true));
  return EncodeSegments(*tokenizer, segments);
}

Admitter ModelBundle::Door(int64_t context_length, KvCapacity kv,
                           const ConstraintCompiler* constraints) const {
  ModelLimits limits;
  limits.vocab_size = files.config.vocab_size;
  limits.context_length = context_length;
  return Admitter(&*tokenizer, chat_template.has_value() ? &*chat_template : nullptr, limits, kv,
                  constraints);
}

absl::StatusOr<ModelBundle> LoadModelBundle(const std::string& path) {
  ModelBundle bundle;
  TP_ASSIGN_OR_RETURN(bundle.files, OpenModelFiles(path));
  std::optional<std::string> template_text;
  if (bundle.files.gguf != nullptr) {
    TP_ASSIGN_OR_RETURN(Tokenizer tok, TokenizerFromGguf(*bundle.files.gguf));
    bundle.tokenizer.emplace(std::move(tok));
    if (bundle.files.gguf->HasKey("tokenizer.chat_template")) {
      TP_ASSIGN_OR_RETURN(template_text, bundle.files.gguf->GetString("tokenizer.chat_template"));
    }
  } else {
    const std::filesystem::path dir(bundle.files.hf_directory);
    TP_ASSIGN_OR_RETURN(Tokenizer tok, LoadHfTokenizerJson((dir / "tokenizer.json").string()));
    bundle.tokenizer.emplace(std::move(tok));
    std::ifstream in(dir / "tokenizer_config.json");
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      template_text = ss.str();  // the markers are what FromJinja looks for
    }
  }
  if (template_text.has_value()) {
    absl::StatusOr<ChatTemplate> chat = ChatTemplate::FromJinja(*template_text);
    if (chat.ok()) bundle.chat_template.emplace(*std::move(chat));
  }
  return bundle;
}

}  // namespace tpserve
