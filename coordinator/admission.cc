#include "coordinator/admission.h"

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/field_error.h"
#include "base/status_macros.h"

namespace tpserve {
namespace {

std::string NewRequestId() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrFormat("%016x", rng());
}

}  // namespace

Admitter::Admitter(const Tokenizer* tokenizer, const ChatTemplate* chat_template,
                   ModelLimits limits, KvCapacity kv, const ConstraintCompiler* constraints)
    : tokenizer_(tokenizer),
      chat_template_(chat_template),
      limits_(limits),
      kv_(kv),
      constraints_(constraints) {}

absl::StatusOr<std::vector<int32_t>> Admitter::BuildPrompt(const ValidatedInput& in) const {
  switch (in.kind) {
    case ValidatedInput::Kind::kTokenIds:
      return in.token_ids;
    case ValidatedInput::Kind::kText:
      return tokenizer_->Encode(in.text, EncodeOptions{in.allow_special_tokens,
                                                       tokenizer_->add_bos_by_default()});
    case ValidatedInput::Kind::kChat: {
      if (chat_template_ == nullptr) {
        return absl::FailedPreconditionError("chat: this model has no chat template");
      }
      std::vector<ChatMessage> messages;
      for (const auto& [role, content] : in.chat) messages.push_back({role, content});
      TP_ASSIGN_OR_RETURN(std::vector<PromptSegment> segments,
                          chat_template_->Render(messages, /*add_generation_prompt=*/true));
      return EncodeSegments(*tokenizer_, segments);
    }
  }
  return absl::InternalError("unknown input kind");
}

absl::StatusOr<AdmittedRequest> Admitter::Admit(const tpserve::v1::GenerateRequest& proto,
                                                absl::Time deadline) const {
  TP_ASSIGN_OR_RETURN(ValidatedInput in, ValidateGenerateRequest(proto, limits_));
  AdmittedRequest r;
  TP_ASSIGN_OR_RETURN(r.prompt_ids_, BuildPrompt(in));
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
  return r;
}

}  // namespace tpserve
