#include "coordinator/chat/chat_template.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"

namespace tpserve {
namespace {

using Json = nlohmann::ordered_json;

// Names the engine sets; a template kwarg may not replace them.
constexpr const char* kReservedNames[] = {
    "messages", "tools", "documents", "add_generation_prompt", "bos_token", "eos_token",
    "unk_token", "pad_token", "raise_exception", "strftime_now", "range", "namespace", "dict"};

absl::Status Prefixed(const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("chat template: ", status.message()));
}

absl::StatusOr<Json> ParseJsonField(const std::string& text, const std::string& field) {
  Json value = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": not valid JSON"));
  }
  return value;
}

absl::StatusOr<Json> MessageJson(const tpserve::v1::ChatMessage& m, int index) {
  Json out = Json::object();
  out["role"] = m.role();
  if (m.content().empty() && m.tool_calls_size() > 0) {
    out["content"] = nullptr;
  } else {
    out["content"] = m.content();
  }
  if (!m.reasoning_content().empty()) out["reasoning_content"] = m.reasoning_content();
  if (m.tool_calls_size() > 0) {
    Json calls = Json::array();
    for (int j = 0; j < m.tool_calls_size(); ++j) {
      const tpserve::v1::ToolCall& call = m.tool_calls(j);
      Json arguments = Json::object();
      if (!call.arguments().empty()) {
        TP_ASSIGN_OR_RETURN(arguments, ParseJsonField(call.arguments(),
                                                      absl::StrCat("chat.messages[", index,
                                                                   "].tool_calls[", j,
                                                                   "].arguments")));
      }
      Json function = Json::object();
      function["name"] = call.name();
      function["arguments"] = std::move(arguments);
      Json entry = Json::object();
      entry["id"] = call.id();
      entry["type"] = "function";
      entry["function"] = std::move(function);
      calls.push_back(std::move(entry));
    }
    out["tool_calls"] = std::move(calls);
  }
  if (!m.tool_call_id().empty()) out["tool_call_id"] = m.tool_call_id();
  if (!m.name().empty()) out["name"] = m.name();
  return out;
}

absl::StatusOr<Json> ToolsJson(const tpserve::v1::Chat& chat) {
  if (chat.tools_size() == 0) return Json(nullptr);
  Json tools = Json::array();
  for (int i = 0; i < chat.tools_size(); ++i) {
    const tpserve::v1::Tool& tool = chat.tools(i);
    Json function = Json::object();
    function["name"] = tool.name();
    if (!tool.description().empty()) function["description"] = tool.description();
    if (!tool.parameters().empty()) {
      TP_ASSIGN_OR_RETURN(function["parameters"],
                          ParseJsonField(tool.parameters(),
                                         absl::StrCat("chat.tools[", i, "].parameters")));
    }
    Json entry = Json::object();
    entry["type"] = "function";
    entry["function"] = std::move(function);
    tools.push_back(std::move(entry));
  }
  return tools;
}

}  // namespace

ChatTemplateTokens ChatTemplateTokensOf(const Tokenizer& tokenizer) {
  auto text = [&tokenizer](int32_t id) -> std::string {
    if (id < 0) return "";
    absl::StatusOr<std::string_view> bytes = tokenizer.TokenBytes(id);
    return bytes.ok() ? std::string(*bytes) : std::string();
  };
  return ChatTemplateTokens{text(tokenizer.bos_id()), text(tokenizer.eos_id()),
                            text(tokenizer.unk_id()), text(tokenizer.pad_id())};
}

std::string RenderedPrompt::Text() const {
  std::string text;
  for (const jinja::OutputRun& run : runs) text += run.text;
  return text;
}

ChatTemplate::ChatTemplate(std::string source, jinja::Template main,
                           std::optional<std::string> tool_use_source,
                           std::optional<jinja::Template> tool_use, ChatTemplateTokens tokens,
                           ChatTemplateOptions options)
    : source_(std::move(source)),
      tool_use_source_(std::move(tool_use_source)),
      main_(std::move(main)),
      tool_use_(std::move(tool_use)),
      tokens_(std::move(tokens)),
      options_(std::move(options)) {}

absl::StatusOr<ChatTemplate> ChatTemplate::Create(std::string_view source,
                                                  ChatTemplateTokens tokens,
                                                  ChatTemplateOptions options,
                                                  std::optional<std::string> tool_use_source) {
  jinja::Options jinja_options = jinja::TransformersOptions();
  jinja_options.limits = options.limits;
  absl::StatusOr<jinja::Template> main = jinja::Template::Parse(source, jinja_options);
  if (!main.ok()) return Prefixed(main.status());
  std::optional<jinja::Template> tool_use;
  if (tool_use_source.has_value()) {
    absl::StatusOr<jinja::Template> parsed = jinja::Template::Parse(*tool_use_source, jinja_options);
    if (!parsed.ok()) {
      return absl::Status(parsed.status().code(),
                          absl::StrCat("chat template (tool_use): ", parsed.status().message()));
    }
    tool_use.emplace(*std::move(parsed));
  }
  ChatTemplate chat(std::string(source), *std::move(main), std::move(tool_use_source),
                    std::move(tool_use), std::move(tokens), std::move(options));
  // The probe: a template that cannot render one user message is refused now, not at the first
  // request.
  tpserve::v1::Chat probe;
  tpserve::v1::ChatMessage* m = probe.add_messages();
  m->set_role("user");
  m->set_content("Hello");
  absl::StatusOr<RenderedPrompt> rendered = chat.Render(probe);
  if (!rendered.ok()) {
    // Render's errors already begin "chat template: ".
    absl::string_view why = rendered.status().message();
    absl::ConsumePrefix(&why, "chat template: ");
    return absl::InvalidArgumentError(
        absl::StrCat("chat template: cannot render a one-message conversation: ", why));
  }
  return chat;
}

absl::StatusOr<RenderedPrompt> ChatTemplate::Render(const tpserve::v1::Chat& chat) const {
  const jinja::Template& tmpl =
      chat.tools_size() > 0 && tool_use_.has_value() ? *tool_use_ : main_;
  return RenderWith(tmpl, chat);
}

absl::StatusOr<RenderedPrompt> ChatTemplate::RenderWith(const jinja::Template& tmpl,
                                                        const tpserve::v1::Chat& chat) const {
  Json input = Json::object();
  if (!chat.template_kwargs().empty()) {
    TP_ASSIGN_OR_RETURN(input, ParseJsonField(chat.template_kwargs(), "chat.template_kwargs"));
    if (!input.is_object()) {
      return absl::InvalidArgumentError("chat.template_kwargs: must be a JSON object");
    }
    for (const char* reserved : kReservedNames) {
      if (input.contains(reserved)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "chat.template_kwargs: \"", reserved, "\" is set by the server and cannot be given"));
      }
    }
  }
  Json messages = Json::array();
  for (int i = 0; i < chat.messages_size(); ++i) {
    TP_ASSIGN_OR_RETURN(Json message, MessageJson(chat.messages(i), i));
    messages.push_back(std::move(message));
  }
  input["messages"] = std::move(messages);
  TP_ASSIGN_OR_RETURN(input["tools"], ToolsJson(chat));
  input["documents"] = nullptr;

  Json trusted = Json::object();
  trusted["add_generation_prompt"] =
      chat.has_add_generation_prompt() ? chat.add_generation_prompt() : true;
  for (const auto& [name, value] :
       {std::pair<const char*, const std::string*>{"bos_token", &tokens_.bos_token},
        {"eos_token", &tokens_.eos_token},
        {"unk_token", &tokens_.unk_token},
        {"pad_token", &tokens_.pad_token}}) {
    if (!value->empty()) trusted[name] = *value;
  }
  absl::StatusOr<std::vector<jinja::OutputRun>> runs =
      tmpl.Render(input, trusted, options_.now());
  if (!runs.ok()) return Prefixed(runs.status());
  return RenderedPrompt{*std::move(runs)};
}

absl::StatusOr<std::vector<int32_t>> EncodeRenderedPrompt(const Tokenizer& tokenizer,
                                                          const RenderedPrompt& prompt) {
  std::vector<int32_t> ids;
  std::string text;  // plain text since the last special token
  auto flush = [&]() -> absl::Status {
    if (text.empty()) return absl::OkStatus();
    TP_ASSIGN_OR_RETURN(std::vector<int32_t> text_ids,
                        tokenizer.Encode(text, EncodeOptions{.allow_special = false}));
    ids.insert(ids.end(), text_ids.begin(), text_ids.end());
    text.clear();
    return absl::OkStatus();
  };
  for (const jinja::OutputRun& run : prompt.runs) {
    if (run.from_input) {
      text += run.text;
      continue;
    }
    for (const SpecialTokenSplitter::Fragment& fragment : tokenizer.SplitSpecialTokens(run.text)) {
      if (fragment.special_id < 0) {
        text += fragment.text;
        continue;
      }
      TP_RETURN_IF_ERROR(flush());
      ids.push_back(fragment.special_id);
    }
  }
  TP_RETURN_IF_ERROR(flush());
  return ids;
}

absl::StatusOr<std::string> ChatTemplateFromTokenizerConfig(std::string_view config_json,
                                                            std::optional<std::string>* tool_use) {
  const Json config = Json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    return absl::InvalidArgumentError("tokenizer_config.json: not a JSON object");
  }
  if (!config.contains("chat_template")) {
    return absl::NotFoundError("tokenizer_config.json has no chat_template");
  }
  const Json& field = config["chat_template"];
  if (field.is_string()) return field.get<std::string>();
  if (!field.is_array()) {
    return absl::InvalidArgumentError(
        "tokenizer_config.json: chat_template must be a string or a list of {name, template}");
  }
  std::optional<std::string> main;
  for (size_t i = 0; i < field.size(); ++i) {
    const Json& entry = field[i];
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
        !entry.contains("template") || !entry["template"].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokenizer_config.json: chat_template[", i, "] must be {\"name\": ..., \"template\": ...}"));
    }
    const std::string name = entry["name"].get<std::string>();
    if (name == "default") main = entry["template"].get<std::string>();
    if (name == "tool_use" && tool_use != nullptr) *tool_use = entry["template"].get<std::string>();
  }
  if (!main.has_value()) {
    return absl::NotFoundError("tokenizer_config.json: chat_template has no \"default\" entry");
  }
  return *main;
}

}  // namespace tpserve
