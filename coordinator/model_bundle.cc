#include "coordinator/model_bundle.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/file_text.h"
#include "base/status_macros.h"
#include "coordinator/chat/builtin_templates.h"
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
    // ChatML (Qwen, SmolLM2), Llama 3's, Gemma's: a GGUF need not name them (Gemma 3 270M's
    // has no eot_token_id), so they are found by their text, as llama.cpp does.
    for (const char* marker : {"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<end_of_turn>"}) {
      if (auto id = tokenizer->SpecialTokenId(marker)) add(*id);
    }
  }
  return ids;
}

absl::StatusOr<std::vector<int32_t>> ModelBundle::EncodeChat(
    const std::vector<std::pair<std::string, std::string>>& messages) const {
  if (!chat_template.has_value() || !tokenizer.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model ", files.path, " has no chat template"));
  }
  tpserve::v1::Chat chat;
  for (const auto& [role, content] : messages) {
    tpserve::v1::ChatMessage* m = chat.add_messages();
    m->set_role(role);
    m->set_content(content);
  }
  TP_ASSIGN_OR_RETURN(RenderedPrompt prompt, chat_template->Render(chat));
  return EncodeRenderedPrompt(*tokenizer, prompt);
}

Admitter ModelBundle::Door(int64_t context_length, KvCapacity kv,
                           const ConstraintCompiler* constraints) const {
  ModelLimits limits;
  limits.vocab_size = files.config.vocab_size;
  limits.context_length = context_length;
  return Admitter(&*tokenizer, chat_template.has_value() ? &*chat_template : nullptr, limits, kv,
                  constraints);
}

namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  std::optional<std::string> text = ReadFileText(path);
  if (!text.has_value()) {
    return absl::NotFoundError(absl::StrCat(what, " ", path, ": cannot read it"));
  }
  return *std::move(text);
}

}  // namespace

absl::StatusOr<ModelBundle> LoadModelBundle(const std::string& path,
                                            const ModelBundleOptions& options) {
  ModelBundle bundle;
  TP_ASSIGN_OR_RETURN(bundle.files, OpenModelFiles(path));
  std::optional<std::string> template_text;
  std::optional<std::string> tool_use_text;
  std::string template_origin;
  if (bundle.files.gguf != nullptr) {
    TP_ASSIGN_OR_RETURN(Tokenizer tok, TokenizerFromGguf(*bundle.files.gguf));
    bundle.tokenizer.emplace(std::move(tok));
    if (bundle.files.gguf->HasKey("tokenizer.chat_template")) {
      TP_ASSIGN_OR_RETURN(template_text, bundle.files.gguf->GetString("tokenizer.chat_template"));
      template_origin = absl::StrCat(path, " (tokenizer.chat_template)");
    }
  } else {
    const std::filesystem::path dir(bundle.files.hf_directory);
    TP_ASSIGN_OR_RETURN(Tokenizer tok, LoadHfTokenizerJson((dir / "tokenizer.json").string()));
    bundle.tokenizer.emplace(std::move(tok));
    const std::filesystem::path config = dir / "tokenizer_config.json";
    if (std::filesystem::exists(config)) {
      TP_ASSIGN_OR_RETURN(std::string text, ReadFile(config.string(), "tokenizer config"));
      absl::StatusOr<std::string> source = ChatTemplateFromTokenizerConfig(text, &tool_use_text);
      if (source.ok()) {
        template_text = *std::move(source);
        template_origin = absl::StrCat(config.string(), " (chat_template)");
      } else if (!absl::IsNotFound(source.status())) {
        return source.status();
      }
    }
  }
  if (!options.chat_template_file.empty()) {
    TP_ASSIGN_OR_RETURN(template_text, ReadFile(options.chat_template_file, "chat template file"));
    tool_use_text.reset();
    template_origin = options.chat_template_file;
  }
  // A file without a template (a base model's GGUF) gets its family's llama.cpp format.
  if (!template_text.has_value()) {
    const std::string& format = bundle.files.config.builtin_chat_format;
    if (std::optional<std::string_view> builtin = BuiltinChatTemplate(format)) {
      template_text = std::string(*builtin);
      template_origin =
          absl::StrCat("the built-in '", format, "' format (", path, " has no chat template)");
    }
  }
  if (template_text.has_value()) {
    absl::StatusOr<ChatTemplate> chat =
        ChatTemplate::Create(*template_text, ChatTemplateTokensOf(*bundle.tokenizer), {},
                             std::move(tool_use_text));
    if (!chat.ok()) {
      return absl::Status(chat.status().code(),
                          absl::StrCat(template_origin, ": ", chat.status().message(),
                                       " (--chat_template=FILE replaces it)"));
    }
    bundle.chat_template.emplace(*std::move(chat));
  }
  return bundle;
}

}  // namespace tpserve
