// What the engine streams back for each sequence of a request: a GenerationEvent per step that
// produced text or tokens, the last one with `finish` set and the request's usage.
#ifndef TPSERVE_COORDINATOR_GENERATION_EVENT_H_
#define TPSERVE_COORDINATOR_GENERATION_EVENT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/request.h"
#include "coordinator/tools/tool_call_parser.h"
#include "step/sampling.h"

namespace tpserve {

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;  // of prompt_tokens, served from the prefix cache when first admitted
  double time_to_first_token_s = 0.0;
  double decode_time_s = 0.0;  // first token to last
  // Speculative decoding: tokens drafted, drafts accepted, steps that verified drafts.
  int32_t draft_tokens = 0;
  int32_t accepted_draft_tokens = 0;
  int32_t speculative_steps = 0;
  // Mixtures of experts: the mean over the request's steps of the step's expert imbalance
  // (ExpertLoad::Imbalance, step/executor.h: the busiest expert's slots over the mean, 1 =
  // even); 0 for a dense model.
  double expert_imbalance = 0.0;
};

// Speculative decoding's per-request figures: accepted / drafted tokens, and tokens per
// verifying step (1 + accepted / steps); 0 without drafts.
double DraftAcceptanceRate(const Usage& usage);
double MeanAcceptedLength(const Usage& usage);

// How a constrained request's output stands against its constraint (on the finishing event).
struct StructuredOutcome {
  bool completed = false;  // a whole sentence of the grammar (a JSON value ended, ...)
  std::vector<std::string> dropped_keywords;  // strict=false: what was not enforced
  std::vector<std::string> annotations;       // schema keywords taken as annotations
};

struct GenerationEvent {
  int32_t index = 0;               // the sequence of the request (0 .. best_of - 1)
  std::vector<int32_t> token_ids;  // new since the previous event
  std::string text;                // whole UTF-8 characters only
  // A chat whose output is parsed (AdmittedRequest::output_parsing, filled in by the
  // frontend): `text` is then the content only, the reasoning goes here, and each tool call
  // arrives whole in one ToolCallDelta (coordinator/tools/tool_call_parser.h).
  std::string reasoning_text;
  std::vector<ToolCallDelta> tool_calls;
  std::vector<SampledToken> logprobs;  // one per token id when the request asked for them
  FinishReason finish = FinishReason::kNone;
  std::string matched_stop_sequence;
  absl::Status error;                           // set with finish == kError
  Usage usage;                                  // set on the finishing event
  std::optional<StructuredOutcome> structured;  // the finishing event of a constrained request
  // The finishing event: the sum of the sampled tokens' logprobs (SampledToken::logprob; EOS
  // included, forced tokens count 0), what best_of ranks candidates by.
  double cumulative_logprob = 0.0;
  // prompt_logprobs: sequence 0's first event, one entry per prompt token after the first.
  std::vector<SampledToken> prompt_logprobs;
};

using EventCallback = std::function<void(GenerationEvent)>;

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_GENERATION_EVENT_H_
