// Speculative decoding: where drafted tokens come from, and how many each sequence drafts.
//
// A Proposer fills the draft of each DraftSlot the scheduler hands out (coordinator/
// scheduler.h); the engine verifies the drafts by scoring them all in the next step and
// sampling each row in order with the sequence's own Sampler, keeping drafts up to the first
// one the target did not choose. So the tokens are the ones decoding without speculation gives
// (greedy, and sampled with the same noise: step/sampling.h): speculation changes how
// many steps they take, never what they are.
//
//   SpeculationPolicy policy(options, proposer.get());
//   int64_t k = policy.DraftLength(state, num_decoding, remaining);
//   ... the step ran ...  policy.ObserveStep(tokens, seconds);  policy.Observe(state, drafted, accepted);
//
// Threading: used from the engine's step thread only.
#ifndef TPSERVE_COORDINATOR_SPECULATIVE_SPECULATION_H_
#define TPSERVE_COORDINATOR_SPECULATIVE_SPECULATION_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "step/sampling.h"
#include "coordinator/scheduler.h"

namespace tpserve {

// kMtp: the target checkpoint's multi-token-prediction layer as the draft model
// (model/config.h's MtpDraftSpec), one token per step.
enum class SpeculativeMethod { kOff, kNgram, kDraft, kMtp };

// "off", "ngram", "draft" or "mtp"; INVALID_ARGUMENT naming --speculative otherwise.
absl::StatusOr<SpeculativeMethod> ParseSpeculativeMethod(absl::string_view name);
const char* SpeculativeMethodName(SpeculativeMethod method);

inline constexpr int32_t kMaxSpeculativeTokens = 16;

struct SpeculativeOptions {
  SpeculativeMethod method = SpeculativeMethod::kOff;
  // The most tokens a sequence drafts per step (K), in [1, kMaxSpeculativeTokens].
  int32_t num_speculative_tokens = 4;
  // Choose each sequence's K from its recent acceptance (else always the most that fits).
  bool adaptive = true;
  // No sequence drafts in a step where more than this many decode: the step is then bound by
  // compute, not by reading the weights, and verifying drafts costs what it saves (measured:
  // docs/PERFORMANCE.md). 0 = no limit.
  int32_t max_batch = 4;
  // What scoring one more token in a decode step costs, relative to the step (the target's
  // side of a draft), until the policy has measured it (StepCostModel); the proposer adds its
  // own (Proposer::SecondsPerDraftToken).
  double verify_cost_per_token = 0.1;
  // Prompt lookup: the longest and shortest suffix matched.
  int32_t ngram_max = 4;
  int32_t ngram_min = 1;
};

// INVALID_ARGUMENT naming the flag, the value and the bound.
absl::Status ValidateSpeculativeOptions(const SpeculativeOptions& options);

// A step's time as a function of its tokens, t = a + b * tokens, fit online by least squares
// with exponential forgetting (the last ~50 observations weigh most): what the policy prices a
// drafted token with, measured on this machine and model instead of assumed.
class StepCostModel {
 public:
  void Observe(double tokens, double seconds);
  // Nullopt before any observation; the mean time while only one size has been seen.
  std::optional<double> Seconds(double tokens) const;
  // The slope b (>= 0); nullopt until two sizes have been seen.
  std::optional<double> SecondsPerToken() const;

 private:
  static constexpr double kForget = 0.98;
  double w_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
};

// One sequence's view for its proposer: the sampler the target will draw its next tokens
// with (a draft model proposes with the same noise: its draw r ahead, DraftModelProposer).
struct DraftSampling {
  const Sampler* sampler = nullptr;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  // Fills slots[i].draft (at most max_tokens); sampling[i] belongs to slots[i].
  virtual void Propose(absl::Span<DraftSlot> slots, absl::Span<const DraftSampling> sampling) = 0;
  // The sequence ended, or its KV blocks were dropped (preempted) or replaced (admitted).
  virtual void Forget(int64_t seq_id) { (void)seq_id; }
  // Seconds one drafted token costs a sequence when `num_sequences` draft together (one draft
  // step's time over its sequences); 0 for a proposer that runs no model, nullopt until
  // measured.
  virtual std::optional<double> SecondsPerDraftToken(int64_t num_sequences) const = 0;
  // Until measured: a drafted token's cost relative to one decode step of the target.
  virtual double assumed_cost_per_token() const = 0;
  virtual std::string Describe() const = 0;
};

// Per sequence: how its drafts have fared lately.
struct SpeculationState {
  // Per-token acceptance: a moving average over its verifying steps of accepted / ruled-on
  // drafts (the target rules on drafts up to the first it rejects). Starts at 2/3: optimistic
  // enough to try a few.
  double acceptance = 2.0 / 3.0;
  int32_t idle_steps = 0; // decode steps since it last drafted
  // Steps between probes while its drafts do not pay: doubles after each probe that fails,
  // back to kProbeInterval after one that is accepted.
  int32_t probe_interval = 8;
  // For the request's usage.
  int32_t draft_tokens = 0;
  int32_t accepted_tokens = 0;
  int32_t verify_steps = 0;  // steps that verified at least one draft
};

class SpeculationPolicy {
 public:
  // `proposer` (not owned, may be null: then drafts cost nothing but their verification)
  // outlives the policy.
  SpeculationPolicy(const SpeculativeOptions& options, const Proposer* proposer);

  // Drafts the sequence should ask for: 0 when more than max_batch sequences decode, else
  // (adaptive) the K in [1, min(num_speculative_tokens, remaining)] that maximises expected
  // tokens per unit of step cost under its acceptance rate, or 0 when none beats plain
  // decoding. Where only the acceptance stands in the way, K = 1 is re-tried now and then
  // (text changes): after kProbeInterval steps, twice as long after each probe that fails, up
  // to kMaxProbeInterval. Where drafts would not pay even if all were accepted, never.
  int64_t DraftLength(SpeculationState& state, int64_t num_decoding, int64_t remaining) const;
  // A step of `num_decoding` decoding sequences only (with or without drafts) ran: `tokens`
  // in `seconds`.
  void ObserveStep(int64_t num_decoding, int64_t tokens, double seconds);
  // One more drafted token's cost, relative to a step where `num_decoding` sequences decode
  // and in the step's own currency: n x (verify + draft seconds per token) / step(n), since
  // its time delays every sequence of the step. Measured when the step model and the
  // proposer have data, else assumed.
  double CostPerDraftToken(int64_t num_decoding) const;
  // A step verified `drafted` drafts of the sequence and accepted the first `accepted`.
  void Observe(SpeculationState& state, int64_t drafted, int64_t accepted) const;
  // The per-token acceptance rate the policy believes.
  static double AcceptanceRate(const SpeculationState& state) { return state.acceptance; }

  static constexpr int32_t kProbeInterval = 8;
  static constexpr int32_t kMaxProbeInterval = 128;

 private:
  const SpeculativeOptions options_;
  const Proposer* const proposer_;
  // Step time against tokens for steps of 1, 2-3, 4-7, ... decoding sequences: a step's cost
  // per token is not one line across batch sizes (flat while memory-bound, then steep), so
  // each size range has its own fit, and all of them together the fallback.
  static constexpr int kSizeClasses = 16;
  static int SizeClass(int64_t num_decoding);
  StepCostModel by_size_[kSizeClasses];
  StepCostModel all_;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_SPECULATIVE_SPECULATION_H_
