#include "coordinator/sequence.h"

#include <algorithm>
#include <utility>

namespace tpserve {

namespace {

// Sequence `index` of a request draws from its own stream: seed + index when seeded.
SamplingParams ForSequence(SamplingParams params, int32_t index) {
  if (params.seed.has_value()) *params.seed += static_cast<uint64_t>(index);
  return params;
}

bool Contains(absl::Span<const int32_t> ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

double DraftAcceptanceRate(const Usage &u) {
  return u.draft_tokens > 0 ? static_cast<double>(u.accepted_draft_tokens) / u.draft_tokens : 0.0;
}

double MeanAcceptedLength(const Usage &u) {
  return u.speculative_steps > 0
             ? 1.0 + static_cast<double>(u.accepted_draft_tokens) / u.speculative_steps
             : 0.0;
}

Sequence::Sequence(int64_t id, int64_t request_id, int32_t index,
                   std::shared_ptr<const AdmittedRequest> request, EventCallback on_event,
                   const Tokenizer *tokenizer)
    : on_event(std::move(on_event)),
      sampler(ForSequence(request->sampling(), index)),
      id_(id),
      request_id_(request_id),
      index_(index),
      request_(std::move(request)),
      tokens_(request_->prompt_ids()),
      // Control tokens (<|im_end|>, BOS) are not part of the text a client reads, unless the
      // output is read for tool calls whose markers may be control tokens.
      detokenizer_(tokenizer, DecodeOptions{/*skip_control=*/!request_->keep_control_text()}),
      stops_(request_->stop().stop_sequences) {
  if (request_->constraint() != nullptr) {
    matcher.emplace(request_->constraint());
    mask.resize(TokenMaskWords(request_->constraint()->vocab_size()));
  }
}

void Sequence::Append(const SampledToken &token, const SequenceLimits &limits,
                      GenerationEvent &event) {
  const absl::Time now = absl::Now();
  if (num_generated_ == 0) first_token_ = now;
  last_token_ = now;
  ++num_generated_;
  cumulative_logprob_ += token.logprob;
  tokens_.push_back(token.id);

  const StopConditions &stop = request_->stop();
  // A constraint's stop token ends it even with ignore_eos: the grammar allows nothing after.
  const bool is_eos = (matcher.has_value() && matcher->terminated()) ||
                      (!stop.ignore_eos && Contains(limits.eos_token_ids, token.id));
  if (is_eos || Contains(stop.stop_token_ids, token.id)) {
    event.finish = FinishReason::kEos;
    return;
  }
  event.token_ids.push_back(token.id);
  if (request_->logprobs()) event.logprobs.push_back(token);
  absl::StatusOr<std::string> piece = detokenizer_.Push(token.id);
  if (!piece.ok()) {
    event.finish = FinishReason::kError;
    event.error = piece.status();
    return;
  }
  StopMatcher::Result r = stops_.Append(*piece);
  event.text += r.emit;
  if (r.matched.has_value()) {
    event.finish = FinishReason::kStopSequence;
    event.matched_stop_sequence = *r.matched;
  } else if (num_generated_ >= stop.max_new_tokens ||
             static_cast<int64_t>(tokens_.size()) >= limits.context_length) {
    event.finish = FinishReason::kLength;
  }
}

GenerationEvent Sequence::FinishEvent(FinishReason reason, absl::Status error,
                                      std::string matched_stop_sequence) {
  GenerationEvent event;
  event.index = index_;
  event.cumulative_logprob = cumulative_logprob_;
  event.finish = reason;
  event.error = std::move(error);
  event.matched_stop_sequence = std::move(matched_stop_sequence);
  if (reason != FinishReason::kError && reason != FinishReason::kStopSequence) {
    event.text = detokenizer_.Flush();
    event.text = stops_.Append(event.text).emit + stops_.Flush();
  }
  if (matcher.has_value()) {
    event.structured =
        StructuredOutcome{matcher->completed(), request_->constraint()->dropped_keywords(),
                          request_->constraint()->annotations()};
  }
  Usage &usage = event.usage;
  usage.prompt_tokens = static_cast<int32_t>(request_->prompt_ids().size());
  usage.completion_tokens = num_generated_;
  usage.cached_tokens = cached_tokens;
  usage.draft_tokens = spec.draft_tokens;
  usage.accepted_draft_tokens = spec.accepted_tokens;
  usage.speculative_steps = spec.verify_steps;
  if (moe_steps > 0) usage.expert_imbalance = expert_imbalance_sum / moe_steps;
  if (num_generated_ > 0) {
    usage.time_to_first_token_s = absl::ToDoubleSeconds(first_token_ - submitted_);
    usage.decode_time_s = absl::ToDoubleSeconds(last_token_ - first_token_);
  }
  return event;
}

}  // namespace tpserve
