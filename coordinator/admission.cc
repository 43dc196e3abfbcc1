#include "coordinator/admission.h"

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/field_error.h"
#include "base/status_macros.h"
#include "coordinator/tools/reasoning_parser.h"
#include "coordinator/tools/structural_tag.h"

namespace tpserve {
namespace {

// Per-thread: std::random_device is a system call, not something to ask once per request.
uint64_t RandomU64() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng();
}

std::string NewRequestId() { return absl::StrFormat("%016x", RandomU64()); }

}  // namespace

Admitter::Admitter(const Tokenizer* tokenizer, const ChatTemplate* chat_template,
                   ModelLimits limits, KvCapacity kv, const ConstraintCompiler* constraints,
                   OutputFormats formats)
    : tokenizer_(tokenizer),
      chat_template_(chat_template),
      limits_(limits),
      kv_(kv),
      constraints_(constraints),
      formats_(formats) {}

absl::StatusOr<BuiltPrompt> Admitter::BuildPrompt(const ValidatedInput& in) const {
  BuiltPrompt prompt;
  switch (in.kind) {
    case ValidatedInput::Kind::kTokenIds:
      prompt.ids = in.token_ids;
      return prompt;
    case ValidatedInput::Kind::kText: {
      TP_ASSIGN_OR_RETURN(prompt.ids,
                          tokenizer_->Encode(in.text, EncodeOptions{in.allow_special_tokens,
                                                                    tokenizer_->add_bos_by_default()}));
      return prompt;
    }
    case ValidatedInput::Kind::kChat: {
      if (chat_template_ == nullptr) {
        return absl::FailedPreconditionError("chat: this model has no chat template");
      }
      TP_ASSIGN_OR_RETURN(RenderedPrompt rendered, chat_template_->Render(in.chat));
      TP_ASSIGN_OR_RETURN(prompt.ids, EncodeRenderedPrompt(*tokenizer_, rendered));
      prompt.text = rendered.Text();
      return prompt;
    }
  }
  return absl::InternalError("unknown input kind");
}

absl::StatusOr<AdmittedRequest> Admitter::Admit(const tpserve::v1::GenerateRequest& proto,
                                                absl::Time deadline) const {
  TP_ASSIGN_OR_RETURN(ValidatedInput in, ValidateGenerateRequest(proto, limits_));
  AdmittedRequest r;
  TP_ASSIGN_OR_RETURN(BuiltPrompt prompt, BuildPrompt(in));
  r.prompt_ids_ = std::move(prompt.ids);  // prompt.text stays, for AdmitChatOutput
  const int64_t prompt_tokens = static_cast<int64_t>(r.prompt_ids_.size());
  TP_ASSIGN_OR_RETURN(r.stop_.max_new_tokens,
                      CheckContextWindow(prompt_tokens, in.max_new_tokens, limits_));
  const int64_t blocks = kv_.BlocksFor(prompt_tokens + r.stop_.max_new_tokens);
  if (blocks > kv_.num_blocks) {
    return FieldError("max_new_tokens", absl::StrCat(
        " = ", r.stop_.max_new_tokens, " is invalid: with the prompt's ", prompt_tokens,
        " tokens it needs ", blocks, " KV blocks; the whole cache has ", kv_.num_blocks,
        " blocks of ", kv_.block_size_tokens, " tokens"));
  }
  r.request_id_ = in.request_id.empty() ? NewRequestId() : std::move(in.request_id);
  r.sampling_ = in.sampling;
  r.stop_.stop_sequences = std::move(in.stop_sequences);
  r.stop_.stop_token_ids = std::move(in.stop_token_ids);
  r.stop_.ignore_eos = in.ignore_eos;
  r.logprobs_ = in.logprobs;
  r.prompt_logprobs_ = in.prompt_logprobs;
  r.speculative_ = in.speculative;
  r.n_ = in.n;
  r.best_of_ = in.best_of;
  r.deadline_ = deadline;
  if (!in.constraint.empty()) {
    if (constraints_ == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(in.constraint.field, ": structured output is not enabled on this server"));
    }
    TP_ASSIGN_OR_RETURN(r.constraint_, constraints_->Compile(in.constraint, deadline));
  }
  if (in.kind == ValidatedInput::Kind::kChat) {
    TP_RETURN_IF_ERROR(AdmitChatOutput(in, prompt.text, deadline, r));
  }
  return r;
}

absl::Status Admitter::AdmitChatOutput(const ValidatedInput& in, const std::string& prompt_text,
                                       absl::Time deadline, AdmittedRequest& r) const {
  using Choice = tpserve::v1::ToolChoice;
  const tpserve::v1::Chat& chat = in.chat;
  const Choice::Mode mode =
      chat.tool_choice().mode();  // AUTO when unset
  const bool calls = chat.tools_size() > 0 && mode != Choice::NONE;
  if (!calls && !formats_.reasoning.has_value()) return absl::OkStatus();

  OutputParser::Options parsing;
  parsing.reasoning_format = formats_.reasoning;
  parsing.starts_in_reasoning =
      formats_.reasoning.has_value() && PromptOpensReasoning(prompt_text);
  if (calls) {
    parsing.tool_call_format = formats_.tool_calls;
    for (const tpserve::v1::Tool& tool : chat.tools()) parsing.tool_names.push_back(tool.name());
    // Call ids follow the seed when there is one, so a seeded request repeats exactly.
    parsing.call_id_seed = r.sampling_.seed.value_or(RandomU64());
    r.keep_control_text_ = true;
  }
  r.output_parsing_ = parsing;
  if (!calls) return absl::OkStatus();

  // The calls' constraint: `required` and a named function always (or refused), `auto` where it
  // can be had (free text until the model opens a call, then the call's syntax and schema).
  const bool must = mode == Choice::REQUIRED || mode == Choice::FUNCTION;
  auto cannot_enforce = [&](const std::string& why) -> absl::Status {
    if (!must) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "chat.tool_choice: ", mode == Choice::REQUIRED ? "required" : "a named function",
        " needs the calls to be constrained, but ", why));
  };
  if (!in.constraint.empty()) {
    return FieldError("chat.tools", absl::StrCat(
        ": a request with tools (tool_choice other than none) cannot also carry a structured-"
        "output constraint (", in.constraint.field, "); the calls' arguments follow the tools' "
        "parameters schemas"));
  }
  if (constraints_ == nullptr) {
    return cannot_enforce("structured output is not enabled on this server");
  }
  const CallSyntax syntax = ToolCallSyntax(formats_.tool_calls);
  for (const std::string& marker : {syntax.trigger, syntax.section_begin}) {
    if (marker.empty()) continue;
    const std::optional<int32_t> id = tokenizer_->SpecialTokenId(marker);
    if (id.has_value() && tokenizer_->GetTokenType(*id).value_or(TokenType::kNormal) ==
                              TokenType::kControl) {
      const std::string format(ToolCallFormatName(formats_.tool_calls));
      return cannot_enforce(absl::StrCat("the ", format, " call marker ", marker,
                                         " is a control token, which grammars cannot produce"));
    }
  }
  StructuralTagRequest tag;
  tag.format = formats_.tool_calls;
  for (const tpserve::v1::Tool& tool : chat.tools()) {
    tag.tools.push_back(ToolSpec{tool.name(), tool.parameters()});
  }
  tag.mode = mode == Choice::REQUIRED   ? ToolChoiceMode::kRequired
             : mode == Choice::FUNCTION ? ToolChoiceMode::kNamed
                                        : ToolChoiceMode::kAuto;
  tag.named = chat.tool_choice().function_name();
  tag.parallel_tool_calls = !chat.has_parallel_tool_calls() || chat.parallel_tool_calls();
  tag.reasoning = formats_.reasoning;
  tag.starts_in_reasoning = parsing.starts_in_reasoning;
  absl::StatusOr<std::string> text = ToolCallStructuralTag(tag);
  if (!text.ok()) return FieldError("chat.tools", absl::StrCat(": ", text.status().message()));
  ConstraintSpec spec;
  spec.kind = ConstraintKind::kStructuralTag;
  spec.text = *std::move(text);
  // Keywords a tool's schema uses that the grammar cannot enforce are dropped (and reported),
  // as OpenAI's non-strict functions are treated.
  spec.strict = false;
  spec.field = "chat.tools";
  TP_ASSIGN_OR_RETURN(r.constraint_, constraints_->Compile(spec, deadline));
  return absl::OkStatus();
}

}  // namespace tpserve
