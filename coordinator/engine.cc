#include "coordinator/engine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "step/sampling.h"
#include "step/step_sampling.h"
#include "coordinator/speculative/ngram.h"

namespace tpserve {

Engine::Engine(EngineOptions options, std::unique_ptr<ModelExecutor> executor,
               const Tokenizer* tokenizer, std::unique_ptr<Proposer> proposer)
    : options_(std::move(options)),
      executor_(std::move(executor)),
      tokenizer_(tokenizer),
      blocks_(options_.num_kv_blocks, options_.block_size_tokens,
              options_.enable_prefix_caching, options_.kv_partitions),
      scheduler_(options_.scheduler, &blocks_),
      proposer_(std::move(proposer)) {
  stats_.free_kv_blocks = stats_.total_kv_blocks = options_.num_kv_blocks;
  const SpeculativeOptions& spec = options_.speculative;
  if (proposer_ == nullptr && spec.method == SpeculativeMethod::kNgram) {
    proposer_ = std::make_unique<NgramProposer>(spec.ngram_min, spec.ngram_max);
  }
  if (proposer_ != nullptr) policy_.emplace(spec, proposer_.get());
}

Engine::~Engine() { Stop(); }

absl::StatusOr<int64_t> Engine::Submit(AdmittedRequest request, EventCallback on_event) {
  auto shared = std::make_shared<const AdmittedRequest>(std::move(request));
  absl::MutexLock lock(&mu_);
  if (!health_.ok()) return health_;
  const int64_t id = next_id_;
  next_id_ += shared->best_of();
  auto leader = std::make_unique<Sequence>(id, id, 0, shared, on_event, tokenizer_);
  for (int32_t i = 1; i < shared->best_of(); ++i) {
    leader->followers.push_back(
        std::make_unique<Sequence>(id + i, id, i, shared, on_event, tokenizer_));
  }
  inbox_.push_back(std::move(leader));
  return id;
}

void Engine::Cancel(int64_t request_id) {
  absl::MutexLock lock(&mu_);
  cancels_.push_back(request_id);
}

absl::Status Engine::health() const {
  absl::MutexLock lock(&mu_);
  return health_;
}

bool Engine::recovering() const {
  absl::MutexLock lock(&mu_);
  return recovering_ || recover_requested_;
}

void Engine::RecoverNow() {
  absl::MutexLock lock(&mu_);
  recover_requested_ = true;
}

void Engine::SetStepObserver(std::function<void(const StepTiming&)> observer) {
  absl::MutexLock lock(&mu_);
  step_observer_ = std::move(observer);
}

EngineStats Engine::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void Engine::DrainInbox() {
  std::vector<std::unique_ptr<Sequence>> inbox;
  std::vector<int64_t> cancels;
  {
    absl::MutexLock lock(&mu_);
    inbox.swap(inbox_);
    cancels.swap(cancels_);
  }
  for (auto& seq : inbox) {
    const int64_t id = seq->id();
    absl::Status added = scheduler_.Add(id, &seq->tokens(), seq->request().prompt_logprobs());
    seqs_[id] = std::move(seq);
    if (!added.ok()) Finish(*seqs_[id], FinishReason::kError, added);
  }
  for (int64_t request_id : cancels) {
    std::vector<int64_t> ids;
    for (const auto& [id, seq] : seqs_) {
      if (seq->request_id() == request_id) ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end());  // sequence 0 first: its followers end with it
    for (int64_t id : ids) {
      auto it = seqs_.find(id);
      if (it != seqs_.end()) Finish(*it->second, FinishReason::kCancelled);
    }
  }
  const absl::Time now = absl::Now();
  std::vector<int64_t> expired;
  for (const auto& [id, seq] : seqs_) {
    if (seq->request().deadline() <= now) expired.push_back(id);
  }
  std::sort(expired.begin(), expired.end());
  for (int64_t id : expired) {
    auto it = seqs_.find(id);
    if (it != seqs_.end()) Finish(*it->second, FinishReason::kDeadline);
  }
}

void Engine::ReleaseFollowers(Sequence& seq) {
  std::vector<std::unique_ptr<Sequence>> followers = std::move(seq.followers);
  seq.followers.clear();
  for (auto& f : followers) {
    const int64_t id = f->id();
    absl::Status added = scheduler_.Add(id, &f->tokens());
    seqs_[id] = std::move(f);
    if (!added.ok()) Finish(*seqs_[id], FinishReason::kError, added);
  }
}

void Engine::Finish(Sequence& seq, FinishReason reason, absl::Status error,
                    std::string matched_stop_sequence) {
  // Sequence 0 ended before its prompt was computed (cancelled, expired, failed; every normal
  // end comes after its first token, which released the others): so do the others.
  std::vector<std::unique_ptr<Sequence>> followers = std::move(seq.followers);
  seq.followers.clear();
  for (auto& f : followers) {
    const int64_t id = f->id();
    seqs_[id] = std::move(f);
    Finish(*seqs_[id], reason, error);
  }
  GenerationEvent event =
      seq.FinishEvent(reason, std::move(error), std::move(matched_stop_sequence));
  const int64_t id = seq.id();
  scheduler_.Remove(id);  // frees its KV blocks now
  if (proposer_ != nullptr) proposer_->Forget(id);
  EventCallback cb = std::move(seq.on_event);
  seqs_.erase(id);        // `seq` is gone after this line
  cb(std::move(event));
}

void Engine::FailAll(const absl::Status& error) {
  {
    absl::MutexLock lock(&mu_);
    health_ = error;
  }
  std::vector<int64_t> ids;
  for (const auto& [id, seq] : seqs_) ids.push_back(id);
  for (int64_t id : ids) Finish(*seqs_[id], FinishReason::kError, error);
}

bool Engine::RecoverOrFailAll(const absl::Status& error, bool asked, absl::Time since) {
  {
    absl::MutexLock lock(&mu_);
    recovering_ = true;
  }
  const absl::Status recovered = executor_->Recover(error);
  std::vector<int64_t> preempted;
  if (recovered.ok()) {
    // The ranks' KV is gone (a successor's is empty, the others' may hold half a step): every
    // sequence is recomputed from its tokens, and no cached prefix is matched again.
    preempted = scheduler_.PreemptAll();
    blocks_.ForgetCachedPrefixes();
    if (proposer_ != nullptr) {
      for (int64_t id : preempted) proposer_->Forget(id);
    }
  } else if (!asked || !(absl::IsFailedPrecondition(recovered) ||
                         absl::IsUnimplemented(recovered))) {
    // (Asked with every rank answering, or nothing to replace ranks: all stays as it was.)
    FailAll(absl::IsUnimplemented(recovered)
                ? error  // nothing replaces ranks here: the failure as it was
                : absl::UnavailableError(absl::StrCat(error.message(), "; ",
                                                      recovered.message())));
  }
  absl::MutexLock lock(&mu_);
  recovering_ = false;
  if (recovered.ok()) {
    ++stats_.rank_replacements;
    stats_.rank_replacement_s += absl::ToDoubleSeconds(absl::Now() - since);
    stats_.preemptions += static_cast<int64_t>(preempted.size());
  }
  return recovered.ok();
}

void Engine::Append(Sequence& seq, const SampledToken& token, GenerationEvent& event) {
  seq.Append(token, SequenceLimits{options_.eos_token_ids, options_.context_length}, event);
  scheduler_.TokenAppended(seq.id());
}

bool Engine::Step() {
  DrainInbox();
  bool recover = false;
  {
    absl::MutexLock lock(&mu_);
    recover = std::exchange(recover_requested_, false);
  }
  if (recover) {
    RecoverOrFailAll(absl::UnavailableError("model step failed: a rank is gone"), /*asked=*/true,
                     absl::Now());
  }
  ScheduledStep step = ScheduleStep();
  if (step.batch.empty()) {
    PublishStats();
    return false;
  }
  const absl::Time start = absl::Now();
  StartMasks(step.batch);  // overlaps the forward pass
  absl::StatusOr<StepResult> result = executor_->Execute(step.batch);
  bool recovered = false;  // the step failed, and the ranks were replaced: there is work
  const absl::Time executed = absl::Now();
  const double wall_s = absl::ToDoubleSeconds(executed - start);
  masks_.Wait();
  const double mask_wait_s = absl::ToDoubleSeconds(absl::Now() - executed);
  if (result.ok()) {
    if (policy_.has_value()) {
      // A step of decoding sequences only (drafts or not) prices the next drafts.
      bool decoding = true;
      for (const StepBatch::Sequence& s : step.batch.sequences) {
        decoding &= s.samples && s.num_tokens == 1 + s.num_drafts;
      }
      if (decoding) {
        policy_->ObserveStep(static_cast<int64_t>(step.batch.sequences.size()),
                             step.batch.num_tokens(), wall_s);
      }
    }
    scheduler_.Commit(step.batch);
    RecordStep(step, *result, wall_s, mask_wait_s);
    const StepSampling sampling = BuildSampling(step.batch);
    absl::StatusOr<std::vector<SequenceSamples>> samples = executor_->Sample(*result, sampling);
    if (samples.ok()) {
      Deliver(sampling, *samples);
    } else {
      recovered = RecoverOrFailAll(absl::UnavailableError(
                                       absl::StrCat("model step failed: sampling: ",
                                                    samples.status().message())),
                                   /*asked=*/false, start);
    }
  } else {
    recovered = RecoverOrFailAll(
        absl::UnavailableError(absl::StrCat("model step failed: ", result.status().message())),
        /*asked=*/false, start);
  }
  PublishStats();
  return result.ok() || recovered;
}

void Engine::RecordStep(const ScheduledStep& step, StepResult& result, double wall_s,
                        double mask_wait_s) {
  std::function<void(const StepTiming&)> observer;
  {
    absl::MutexLock lock(&mu_);
    ++stats_.steps;
    stats_.tokens_computed += step.batch.num_tokens();
    stats_.step_wall_s += wall_s;
    stats_.mask_wait_s += mask_wait_s;
    stats_.execute_s += result.compute_s;
    stats_.allreduce_s += result.allreduce_s;
    stats_.decoded_weight_bytes += result.decoded_weight_bytes;
    stats_.expert_load.Add(result.expert_load);
    if (!result.expert_load.empty()) {
      for (const StepBatch::Sequence& s : step.batch.sequences) {
        auto it = seqs_.find(s.seq_id);
        if (it == seqs_.end()) continue;
        it->second->expert_imbalance_sum += result.expert_load.Imbalance();
        ++it->second->moe_steps;
      }
    }
    stats_.preemptions += static_cast<int64_t>(step.preempted.size());
    // Their blocks were dropped or are new: a draft model's KV in them is not theirs.
    if (proposer_ != nullptr) {
      for (int64_t id : step.preempted) proposer_->Forget(id);
      for (const Admission& a : step.admitted) proposer_->Forget(a.seq_id);
    }
    for (const Admission& a : step.admitted) {
      Sequence& seq = *seqs_.at(a.seq_id);
      stats_.prefix_cache_hits_tokens += a.num_cached_tokens;
      stats_.prefix_cache_misses_tokens +=
          static_cast<int64_t>(seq.tokens().size()) - a.num_cached_tokens;
      if (!seq.admitted) seq.cached_tokens = static_cast<int32_t>(a.num_cached_tokens);
      seq.admitted = true;
    }
    observer = step_observer_;
  }
  if (observer) {
    observer(StepTiming{wall_s, std::move(result.rank_compute_s), step.batch.num_tokens(),
                        std::move(result.expert_load)});
  }
}

void Engine::StartMasks(const StepBatch& batch) {
  std::vector<MaskWorker::Job> jobs;
  for (const StepBatch::Sequence& s : batch.sequences) {
    if (!s.samples) continue;
    Sequence& seq = *seqs_.at(s.seq_id);
    if (seq.matcher.has_value()) jobs.emplace_back(&*seq.matcher, absl::MakeSpan(seq.mask));
  }
  masks_.Start(std::move(jobs));
}

void Engine::JumpForward(Sequence& seq, GenerationEvent& event) {
  const std::string forced = seq.matcher->JumpForwardString();
  if (forced.empty()) return;
  // The forced text's own tokenization, as far as the grammar takes it token by token (a
  // token that would cross into text the grammar leaves open ends the jump).
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer_->Encode(forced);
  if (!ids.ok()) return;
  int64_t appended = 0;
  for (int32_t id : *ids) {
    if (!seq.matcher->Accept(id)) break;
    Append(seq, SampledToken{id, 0.0f, {}}, event);
    ++appended;
    if (event.finish != FinishReason::kNone) break;
  }
  absl::MutexLock lock(&mu_);
  stats_.jump_forward_tokens += appended;
}

ScheduledStep Engine::ScheduleStep() {
  if (proposer_ == nullptr) return scheduler_.Schedule();
  PlannedStep plan = scheduler_.Plan();
  const int64_t num_decoding = static_cast<int64_t>(plan.decoding.size());
  std::vector<int64_t> wanted;
  wanted.reserve(plan.decoding.size());
  for (int64_t id : plan.decoding) wanted.push_back(WantedDraftTokens(id, num_decoding));
  std::vector<DraftSlot> slots = scheduler_.ReserveDrafts(plan, wanted);
  if (!slots.empty()) ProposeDrafts(absl::MakeSpan(slots));
  return scheduler_.Finish(std::move(plan), absl::MakeSpan(slots));
}

int64_t Engine::WantedDraftTokens(int64_t seq_id, int64_t num_decoding) {
  Sequence& seq = *seqs_.at(seq_id);
  if (!seq.request().speculative() || (seq.matcher.has_value() && seq.matcher->terminated())) {
    return 0;
  }
  // The step samples at least one token; drafts past max_new_tokens or the context are waste.
  const int64_t known = static_cast<int64_t>(seq.tokens().size());
  const int64_t remaining =
      std::min<int64_t>(seq.request().stop().max_new_tokens - seq.num_generated() - 1,
                        options_.context_length - known);
  return policy_->DraftLength(seq.spec, num_decoding, remaining);
}

void Engine::ProposeDrafts(absl::Span<DraftSlot> slots) {
  std::vector<DraftSampling> sampling;
  sampling.reserve(slots.size());
  for (const DraftSlot& slot : slots) sampling.push_back({&seqs_.at(slot.seq_id)->sampler});
  proposer_->Propose(slots, sampling);
  for (DraftSlot& slot : slots) {
    Sequence& seq = *seqs_.at(slot.seq_id);
    if (seq.matcher.has_value()) {
      // Drafts the constraint forbids could never be accepted: cut them here, unscored.
      int32_t allowed = 0;
      for (int32_t id : slot.draft) {
        if (seq.matcher->terminated() || !seq.matcher->Accept(id)) break;
        ++allowed;
      }
      seq.matcher->Rollback(allowed);
      slot.draft.resize(allowed);
    }
  }
}

// A sequence's rows are its last num_logits positions. Those before its last known token score
// the prompt token that follows them (prompt logprobs); the last one samples the next token
// (through the sequence's constraint's mask, if it has one), after the draft's rows.
StepSampling Engine::BuildSampling(const StepBatch& batch) {
  StepSampling sampling;
  for (const StepBatch::Sequence& s : batch.sequences) {
    if (s.num_logits == 0) continue;
    Sequence& seq = *seqs_.at(s.seq_id);
    SequenceSampling& q = sampling.sequences.emplace_back();
    q.seq_id = s.seq_id;
    q.num_rows = s.num_logits;
    q.samples = s.samples;
    if (q.samples) {  // the drafts are the sequence's last new tokens
      const absl::Span<const int32_t> tokens = batch.tokens(s);
      q.draft.assign(tokens.end() - s.num_drafts, tokens.end());
    }
    const int64_t sampled_rows = q.samples ? 1 + static_cast<int64_t>(q.draft.size()) : 0;
    const int64_t first_position = s.end_position() - s.num_logits;
    for (int64_t i = 0; i < s.num_logits - sampled_rows; ++i) {
      q.scored_ids.push_back(seq.tokens()[first_position + i + 1]);
    }
    q.top_logprobs = seq.request().sampling().top_logprobs;
    if (!q.samples) continue;
    q.params = seq.sampler.params();
    q.key = seq.sampler.key();
    q.draws = seq.sampler.draws();
    if (UsesHistory(q.params)) q.history = seq.tokens();
    if (!seq.matcher.has_value()) continue;
    // Row 0's mask was filled during the forward pass; row i's is the constraint's after the
    // draft's first i tokens (ProposeDrafts kept only drafts it accepts). A row past the
    // constraint's end is never used (its token ended the sequence): it gets no mask.
    q.masks.push_back(seq.mask);
    int32_t accepted = 0;
    bool reachable = true;  // every draft token before this row was accepted
    for (int32_t id : q.draft) {
      std::vector<int32_t>& mask = q.masks.emplace_back();
      reachable = reachable && seq.matcher->Accept(id);
      if (!reachable) continue;
      ++accepted;
      if (seq.matcher->terminated()) {
        reachable = false;
        continue;
      }
      mask.resize(seq.mask.size());
      seq.matcher->FillMask(absl::MakeSpan(mask));
    }
    seq.matcher->Rollback(accepted);
  }
  return sampling;
}

void Engine::Deliver(const StepSampling& sampling, const std::vector<SequenceSamples>& samples) {
  for (size_t k = 0; k < sampling.sequences.size(); ++k) {
    const SequenceSampling& q = sampling.sequences[k];
    Sequence& seq = *seqs_.at(q.seq_id);
    for (const SampledToken& scored : samples[k].scored) seq.prompt_logprobs.push_back(scored);
    if (!q.samples) continue;
    if (seq.num_generated() == 0) ReleaseFollowers(seq);  // its prompt's KV is in the cache now
    GenerationEvent event;
    event.index = seq.index();
    if (seq.num_generated() == 0) event.prompt_logprobs = std::move(seq.prompt_logprobs);
    ApplySampled(seq, q, samples[k], event);
    const FinishReason reason = event.finish;
    const absl::Status error = event.error;
    std::string matched = std::move(event.matched_stop_sequence);
    event.finish = FinishReason::kNone;
    // The prompt's scores go out at once, before any other sequence of the request has run.
    if (!event.token_ids.empty() || !event.text.empty() || !event.prompt_logprobs.empty()) {
      seq.on_event(std::move(event));
    }
    if (reason != FinishReason::kNone) Finish(seq, reason, error, std::move(matched));
  }
}

void Engine::ApplySampled(Sequence& seq, const SequenceSampling& asked,
                          const SequenceSamples& got, GenerationEvent& event) {
  const std::vector<int32_t>& draft = asked.draft;  // a copy: appending settles the scheduler's
  seq.sampler.set_draws(got.draws);
  int64_t accepted = 0;
  int64_t emitted = 0;
  for (size_t i = 0; i < got.sampled.size(); ++i) {
    const SampledToken& token = got.sampled[i];
    if (seq.matcher.has_value() && !seq.matcher->Accept(token.id)) {
      event.finish = FinishReason::kError;
      event.error = absl::InternalError(absl::StrCat(
          "sampled token ", token.id, " which the request's constraint does not allow"));
      break;
    }
    Append(seq, token, event);  // also settles the scheduler's pending draft
    ++emitted;
    const bool agreed = i < draft.size() && token.id == draft[i];
    if (agreed) ++accepted;
    if (event.finish != FinishReason::kNone || !agreed) break;
  }
  if (!draft.empty()) {
    policy_->Observe(seq.spec, static_cast<int64_t>(draft.size()), accepted);
    absl::MutexLock lock(&mu_);
    stats_.spec_draft_tokens += static_cast<int64_t>(draft.size());
    stats_.spec_accepted_tokens += accepted;
    stats_.spec_emitted_tokens += emitted;
    ++stats_.spec_verify_steps;
  }
  if (event.finish == FinishReason::kNone && seq.matcher.has_value() && options_.jump_forward) {
    JumpForward(seq, event);
  }
}

void Engine::PublishStats() {
  absl::MutexLock lock(&mu_);
  stats_.free_kv_blocks = blocks_.num_free_blocks();
  stats_.cached_kv_blocks = blocks_.num_cached_blocks();
  stats_.total_kv_blocks = blocks_.num_blocks();
  stats_.running = static_cast<int64_t>(scheduler_.num_running());
  stats_.waiting = static_cast<int64_t>(scheduler_.num_waiting());
}

void Engine::Start() {
  thread_ = std::thread([this] {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (stop_) break;
      }
      if (!Step()) {
        // Idle: sleep until work arrives or Stop.
        absl::MutexLock lock(&mu_);
        auto has_work = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
          return stop_ || !inbox_.empty() || !cancels_.empty() || recover_requested_;
        };
        if (seqs_.empty()) {
          mu_.Await(absl::Condition(&has_work));
        } else {
          mu_.AwaitWithTimeout(absl::Condition(&has_work), absl::Milliseconds(5));
        }
      }
    }
  });
}

void Engine::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  // Nobody may wait forever on a stream: whatever is still queued or running ends now.
  DrainInbox();
  FailAll(absl::UnavailableError("the engine is shutting down"));
}

}  // namespace tpserve
