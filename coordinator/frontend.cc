#include "coordinator/frontend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/constant_time.h"
#include "base/status_macros.h"
#include "coordinator/tools/output_parser.h"
#include "nlohmann/json.hpp"

namespace tpserve {

// What the door remembers of one request while it runs, for its metrics and its log line.
struct Frontend::Tracked {
  int64_t id = 0;
  std::string request_id;
  int32_t prompt_tokens = 0;
  int32_t n = 1;        // choices delivered
  int32_t best_of = 1;  // sequences the engine runs
  absl::Time submitted;
  absl::Time last_token = absl::InfinitePast();
  std::vector<int32_t> sent;           // tokens sent, by sequence
  int32_t finished = 0;                // sequences finished
  // How the request ended, for its log line and metrics: the first abnormal end (cancelled,
  // deadline, error), else sequence 0's; the completion tokens of every sequence.
  GenerationEvent end;
  int32_t completion_tokens = 0;
  // best_of > n: every candidate's events, held until all have finished.
  std::vector<std::vector<GenerationEvent>> held;
  // A parsed chat output (AdmittedRequest::output_parsing): one parser per sequence.
  std::vector<OutputParser> parsers;
  EventCallback on_event;
};

namespace {

bool Abnormal(FinishReason r) {
  return r == FinishReason::kCancelled || r == FinishReason::kDeadline || r == FinishReason::kError;
}

}  // namespace

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kEos: return "stop";
    case FinishReason::kStopSequence: return "stop_sequence";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kDeadline: return "deadline";
    case FinishReason::kError: return "error";
    case FinishReason::kToolCalls: return "tool_calls";
    case FinishReason::kNone: break;
  }
  return "none";
}

namespace {

// Status codes by their canonical upper-case names, as gRPC clients print them.
std::string CodeName(absl::StatusCode code) {
  std::string name = absl::StatusCodeToString(code);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) {
    return c == ' ' ? '_' : static_cast<char>(std::toupper(c));
  });
  return name;
}

}  // namespace

Frontend::Frontend(Engine* engine, const Tokenizer* tokenizer, const ChatTemplate* chat_template,
                   ServedModelInfo info, ModelLimits limits, FrontendOptions options)
    : engine_(engine),
      tokenizer_(tokenizer),
      admitter_(tokenizer, chat_template, limits, engine->kv_capacity(), options.constraints,
                options.output_formats),
      info_(std::move(info)),
      options_(std::move(options)) {
  RegisterMetrics();
  Histogram* step = metrics_.GetHistogram("tpserve_step_duration_seconds",
                                          "Model step time seen by the coordinator.",
                                          LatencyBuckets());
  engine_->SetStepObserver([this, step](const StepTiming& t) {
    step->Observe(t.wall_s);
    for (size_t r = 0; r < t.rank_compute_s.size(); ++r) {
      metrics_
          .GetHistogram("tpserve_rank_step_compute_seconds",
                        "Model time of one step on each rank (without the control plane).",
                        LatencyBuckets(), {{"rank", std::to_string(r)}})
          ->Observe(t.rank_compute_s[r]);
    }
    if (t.expert_load.empty()) return;
    // What expert-parallel deployments tune against: which experts the tokens choose, and how
    // far the busiest expert of a layer is above the mean (ExpertLoad, step/executor.h).
    for (size_t e = 0; e < t.expert_load.tokens.size(); ++e) {
      metrics_
          .GetCounter("tpserve_expert_routed_tokens_total",
                      "Token slots routed to each expert, over every MoE layer.",
                      {{"expert", std::to_string(e)}})
          ->Add(static_cast<double>(t.expert_load.tokens[e]));
    }
    metrics_
        .GetHistogram("tpserve_expert_imbalance_ratio",
                      "Per step: the busiest expert's slots over the mean per expert, averaged "
                      "over the MoE layers (1 = even).",
                      {1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0})
        ->Observe(t.expert_load.Imbalance());
  });
}

Frontend::~Frontend() { engine_->SetStepObserver(nullptr); }

void Frontend::RegisterMetrics() {
  ttft_ = metrics_.GetHistogram("tpserve_time_to_first_token_seconds",
                                "Time from admission to the first generated token.",
                                LatencyBuckets());
  inter_token_ = metrics_.GetHistogram("tpserve_inter_token_latency_seconds",
                                       "Time between consecutive generated tokens of a request.",
                                       LatencyBuckets());
  e2e_ = metrics_.GetHistogram("tpserve_request_duration_seconds",
                               "Time from admission to the last event of a request.",
                               LatencyBuckets());
  prompt_tokens_ = metrics_.GetCounter("tpserve_prompt_tokens_total",
                                       "Prompt tokens of admitted requests.");
  generation_tokens_ = metrics_.GetCounter("tpserve_generation_tokens_total",
                                           "Tokens generated (as usage.completion_tokens counts them).");
  Engine* engine = engine_;
  metrics_.AddGaugeFunction("tpserve_requests_running", "Requests in the running batch.",
                            [engine] { return static_cast<double>(engine->stats().running); });
  metrics_.AddGaugeFunction("tpserve_requests_queued",
                            "Requests admitted and waiting for a place in the batch.",
                            [engine] { return static_cast<double>(engine->stats().waiting); });
  metrics_.AddGaugeFunction("tpserve_kv_cache_blocks_used",
                            "KV cache blocks held by running or preempted requests.", [engine] {
                              const EngineStats s = engine->stats();
                              return static_cast<double>(s.total_kv_blocks - s.free_kv_blocks);
                            });
  metrics_.AddGaugeFunction(
      "tpserve_kv_cache_blocks_free",
      "KV cache blocks free to allocate (including cached prefix blocks nobody uses).",
      [engine] { return static_cast<double>(engine->stats().free_kv_blocks); });
  metrics_.AddGaugeFunction(
      "tpserve_kv_cache_blocks_cached",
      "Free KV cache blocks that still hold a cached prompt prefix (evicted least recently used).",
      [engine] { return static_cast<double>(engine->stats().cached_kv_blocks); });
  metrics_.AddCounterFunction(
      "tpserve_prefix_cache_hits_tokens_total",
      "Prompt tokens found in the prefix cache at admission (not recomputed).",
      [engine] { return static_cast<double>(engine->stats().prefix_cache_hits_tokens); });
  metrics_.AddCounterFunction(
      "tpserve_prefix_cache_misses_tokens_total",
      "Prompt tokens looked up in the prefix cache and not found (computed).",
      [engine] { return static_cast<double>(engine->stats().prefix_cache_misses_tokens); });
  metrics_.AddCounterFunction(
      "tpserve_preemptions_total", "Sequences whose KV cache was dropped to make room.",
      [engine] { return static_cast<double>(engine->stats().preemptions); });
  metrics_.AddCounterFunction(
      "tpserve_rank_replacements_total",
      "Failed steps after which the lost ranks were replaced in place and every sequence "
      "recomputed from its tokens.",
      [engine] { return static_cast<double>(engine->stats().rank_replacements); });
  metrics_.AddCounterFunction(
      "tpserve_rank_replacement_seconds_total",
      "Seconds without service: from each failed step to its group re-formed with the "
      "replacements (the recomputation follows).",
      [engine] { return engine->stats().rank_replacement_s; });
  metrics_.AddCounterFunction(
      "tpserve_decoded_weight_bytes_total",
      "Weight bytes rank 0 decoded whole to multiply them because its GEMM library refused "
      "their format (a fallback each rank names at load; 0 normally).",
      [engine] { return static_cast<double>(engine->stats().decoded_weight_bytes); });
  // Speculative decoding, named as vLLM's spec_decode counters are.
  metrics_.AddCounterFunction(
      "tpserve_spec_decode_num_drafts_total", "Steps that verified a sequence's drafted tokens.",
      [engine] { return static_cast<double>(engine->stats().spec_verify_steps); });
  metrics_.AddCounterFunction(
      "tpserve_spec_decode_num_draft_tokens_total", "Tokens drafted (speculative decoding).",
      [engine] { return static_cast<double>(engine->stats().spec_draft_tokens); });
  metrics_.AddCounterFunction(
      "tpserve_spec_decode_num_accepted_tokens_total",
      "Drafted tokens the model accepted (it chose the same token).",
      [engine] { return static_cast<double>(engine->stats().spec_accepted_tokens); });
  metrics_.AddCounterFunction(
      "tpserve_spec_decode_num_emitted_tokens_total",
      "Tokens produced by steps that verified drafts: the accepted ones and one after them.",
      [engine] { return static_cast<double>(engine->stats().spec_emitted_tokens); });
  metrics_.AddCounterFunction("tpserve_engine_steps_total", "Model steps run.",
                              [engine] { return static_cast<double>(engine->stats().steps); });
  for (FinishReason r : {FinishReason::kEos, FinishReason::kStopSequence, FinishReason::kLength,
                         FinishReason::kToolCalls, FinishReason::kCancelled,
                         FinishReason::kDeadline, FinishReason::kError}) {
    metrics_.GetCounter("tpserve_requests_total", "Requests finished, by finish reason.",
                        {{"finish_reason", FinishReasonName(r)}});
  }
}

absl::StatusOr<Admitted> Frontend::Generate(const tpserve::v1::GenerateRequest& proto,
                                            absl::Time deadline, EventCallback on_event) {
  auto refuse = [this](absl::Status s) {
    RecordRejected(s);
    return s;
  };
  absl::StatusOr<AdmittedRequest> request = admitter_.Admit(proto, deadline);
  if (!request.ok()) return refuse(request.status());

  auto tracked = std::make_shared<Tracked>();
  tracked->request_id = request->request_id();
  tracked->prompt_tokens = static_cast<int32_t>(request->prompt_ids().size());
  tracked->n = request->n();
  tracked->best_of = request->best_of();
  tracked->sent.assign(tracked->best_of, 0);
  if (tracked->best_of > tracked->n) tracked->held.resize(tracked->best_of);
  if (request->output_parsing().has_value()) {
    tracked->parsers.assign(tracked->best_of, OutputParser(*request->output_parsing()));
  }
  tracked->on_event = std::move(on_event);

  // Under the lock, so that the request is in flight before its first event can arrive.
  absl::MutexLock lock(&mu_);
  if (draining_) {
    return refuse(absl::UnavailableError("the server is draining: no new requests"));
  }
  // Sequences are what wait for a place in a batch: a request with best_of = k counts k (and
  // is admitted into an empty queue even when k alone exceeds the bound).
  const int64_t limit = int64_t{options_.max_running} + options_.max_queued_requests;
  if (in_flight_sequences_ > 0 && in_flight_sequences_ + tracked->best_of > limit) {
    return refuse(absl::ResourceExhaustedError(absl::StrCat(
        "the request queue is full: ", std::max<int64_t>(0, in_flight_sequences_ - options_.max_running),
        " requests wait for a place in a batch of ", options_.max_running,
        " (max_queued_requests = ", options_.max_queued_requests, "); retry after ",
        RetryAfterLocked(), " s")));
  }
  tracked->submitted = absl::Now();
  std::vector<int32_t> prompt_ids = request->prompt_ids();
  absl::StatusOr<int64_t> id = engine_->Submit(
      *std::move(request), [this, tracked](GenerationEvent e) { OnEvent(*tracked, e); });
  if (!id.ok()) return refuse(id.status());
  tracked->id = *id;
  in_flight_.insert(*id);
  in_flight_sequences_ += tracked->best_of;
  prompt_tokens_->Add(tracked->prompt_tokens);
  return Admitted{*id, tracked->request_id, tracked->prompt_tokens, tracked->n,
                  std::move(prompt_ids)};
}

namespace {

// The event's text read by its choice's parser: content stays in `text`, reasoning and whole
// tool calls move to their fields. The last event flushes what the parser held back.
void ParseEventText(OutputParser& parser, GenerationEvent& event) {
  ParsedDelta delta = parser.Feed(event.text);
  if (event.finish != FinishReason::kNone) {
    ParsedDelta rest = parser.Finish();
    delta.content += rest.content;
    delta.reasoning += rest.reasoning;
    for (ToolCallDelta& call : rest.tool_calls) delta.tool_calls.push_back(std::move(call));
    // OpenAI's finish_reason for a turn that ends by calling tools.
    if (event.finish == FinishReason::kEos && parser.saw_tool_calls()) {
      event.finish = FinishReason::kToolCalls;
    }
  }
  event.text = std::move(delta.content);
  event.reasoning_text = std::move(delta.reasoning);
  event.tool_calls = std::move(delta.tool_calls);
}

}  // namespace

void Frontend::OnEvent(Tracked& t, GenerationEvent& event) {
  if (!t.parsers.empty()) ParseEventText(t.parsers[event.index], event);
  const absl::Time now = absl::Now();
  const int32_t n = static_cast<int32_t>(event.token_ids.size());
  if (n > 0) {
    if (t.last_token == absl::InfinitePast()) {  // the request's first token
      ttft_->Observe(absl::ToDoubleSeconds(now - t.submitted));
    } else {
      const double gap = absl::ToDoubleSeconds(now - t.last_token) / n;
      for (int32_t i = 0; i < n; ++i) inter_token_->Observe(gap);
    }
    t.sent[event.index] += n;
    t.last_token = now;
    generation_tokens_->Add(n);
  }
  if (event.finish == FinishReason::kNone) {
    if (t.held.empty()) {
      t.on_event(std::move(event));
    } else {
      t.held[event.index].push_back(std::move(event));
    }
    return;
  }

  // The engine counts tokens it generated but did not send (EOS, a stop token id): so does the
  // counter, which then sums to the requests' usage.completion_tokens.
  generation_tokens_->Add(std::max(0, event.usage.completion_tokens - t.sent[event.index]));
  t.completion_tokens += event.usage.completion_tokens;
  if (event.index == 0) {
    t.end.usage = event.usage;
    t.end.structured = event.structured;
  }
  if (Abnormal(event.finish)) {
    if (!Abnormal(t.end.finish)) {
      t.end.finish = event.finish;
      t.end.error = event.error;
      // One sequence failed or ran out of time: the request has, so the others stop too.
      // (t.id is set under mu_ after Submit, which may already be delivering events.)
      if (t.finished + 1 < t.best_of) {
        int64_t id;
        {
          absl::MutexLock lock(&mu_);
          id = t.id;
        }
        engine_->Cancel(id);
      }
    }
  } else if (event.index == 0 && !Abnormal(t.end.finish)) {
    t.end.finish = event.finish;
  }
  ++t.finished;
  const bool last = t.finished == t.best_of;
  if (!t.held.empty()) {
    t.held[event.index].push_back(std::move(event));
  } else if (!last) {
    t.on_event(std::move(event));
  }
  if (!last) return;

  const double e2e_s = absl::ToDoubleSeconds(now - t.submitted);
  e2e_->Observe(e2e_s);
  metrics_
      .GetCounter("tpserve_requests_total", "Requests finished, by finish reason.",
                  {{"finish_reason", FinishReasonName(t.end.finish)}})
      ->Add();
  if (!t.end.error.ok()) RecordRejected(t.end.error);
  const Usage& u = t.end.usage;
  nlohmann::json line = {
      {"event", "request"},
      {"request_id", t.request_id},
      {"prompt_tokens", u.prompt_tokens},
      {"cached_tokens", u.cached_tokens},
      {"output_tokens", t.completion_tokens},
      {"ttft_s", u.time_to_first_token_s},
      {"e2e_s", e2e_s},
      {"finish_reason", FinishReasonName(t.end.finish)},
      {"status", CodeName(t.end.error.code())},
  };
  if (u.speculative_steps > 0) {
    line["draft_tokens"] = u.draft_tokens;
    line["accepted_draft_tokens"] = u.accepted_draft_tokens;
    line["draft_acceptance_rate"] = DraftAcceptanceRate(u);
    line["mean_accepted_length"] = MeanAcceptedLength(u);
  }
  if (u.expert_imbalance > 0) line["expert_imbalance"] = u.expert_imbalance;
  if (t.best_of > 1) {
    line["n"] = t.n;
    line["best_of"] = t.best_of;
  }
  if (!t.end.error.ok()) line["error"] = std::string(t.end.error.message());
  // What of the request's schema was not enforced: dropped (strict=false) or an annotation.
  if (t.end.structured.has_value()) {
    if (!t.end.structured->dropped_keywords.empty()) {
      line["dropped_keywords"] = t.end.structured->dropped_keywords;
    }
    if (!t.end.structured->annotations.empty()) {
      line["annotations"] = t.end.structured->annotations;
    }
  }
  const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::fprintf(options_.request_log != nullptr ? options_.request_log : stderr, "%s\n",
               text.c_str());
  {
    absl::MutexLock lock(&mu_);
    in_flight_.erase(t.id);
    in_flight_sequences_ -= t.best_of;
    mean_e2e_s_ = mean_e2e_s_ == 0 ? e2e_s : 0.9 * mean_e2e_s_ + 0.1 * e2e_s;
  }
  EventCallback cb = std::move(t.on_event);
  if (t.held.empty()) {
    cb(std::move(event));
    return;
  }
  for (GenerationEvent& e : BestOf(t)) cb(std::move(e));
}

// best_of > n, every candidate finished: the n with the highest mean logprob per token, best
// first, renumbered 0 .. n-1; the prompt's scores (sequence 0's) open the first. A request that
// ended abnormally ends each of its n choices so.
std::vector<GenerationEvent> Frontend::BestOf(Tracked& t) {
  std::vector<GenerationEvent> out;
  if (Abnormal(t.end.finish)) {
    for (int32_t i = 0; i < t.n; ++i) {
      GenerationEvent e;
      e.index = i;
      e.finish = t.end.finish;
      e.error = t.end.error;
      e.usage = t.end.usage;
      out.push_back(std::move(e));
    }
    return out;
  }
  std::vector<SampledToken> prompt_logprobs;
  std::vector<std::pair<double, int32_t>> ranked;  // (mean logprob, candidate)
  for (int32_t i = 0; i < t.best_of; ++i) {
    for (GenerationEvent& e : t.held[i]) {
      if (!e.prompt_logprobs.empty()) prompt_logprobs = std::move(e.prompt_logprobs);
    }
    const GenerationEvent& end = t.held[i].back();
    ranked.emplace_back(end.cumulative_logprob / std::max(1, end.usage.completion_tokens), i);
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (int32_t rank = 0; rank < t.n; ++rank) {
    for (GenerationEvent& e : t.held[ranked[rank].second]) {
      e.index = rank;
      out.push_back(std::move(e));
    }
  }
  out.front().prompt_logprobs = std::move(prompt_logprobs);
  return out;
}

void Frontend::Cancel(int64_t id) { engine_->Cancel(id); }

absl::Status Frontend::CheckAuth(std::string_view authorization) const {
  if (options_.bearer_token.empty()) return absl::OkStatus();
  if (ConstantTimeEquals(authorization, absl::StrCat("Bearer ", options_.bearer_token))) {
    return absl::OkStatus();
  }
  return absl::UnauthenticatedError(
      authorization.empty() ? "authorization: a bearer token is required (\"Bearer <token>\")"
                            : "authorization: the bearer token is not valid");
}

void Frontend::RecordRejected(const absl::Status& status) {
  metrics_
      .GetCounter("tpserve_request_errors_total", "Requests that ended in an error, by status code.",
                  {{"code", CodeName(status.code())}})
      ->Add();
}

void Frontend::BeginDrain() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
}

bool Frontend::draining() const {
  absl::MutexLock lock(&mu_);
  return draining_;
}

bool Frontend::WaitIdle(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return in_flight_.empty(); };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

void Frontend::CancelAll() {
  std::vector<int64_t> ids;
  {
    absl::MutexLock lock(&mu_);
    ids.assign(in_flight_.begin(), in_flight_.end());
  }
  for (int64_t id : ids) engine_->Cancel(id);
}

int64_t Frontend::in_flight() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(in_flight_.size());
}

int32_t Frontend::retry_after_s() const {
  absl::MutexLock lock(&mu_);
  return RetryAfterLocked();
}

int32_t Frontend::RetryAfterLocked() const {
  const int64_t queued =
      std::max<int64_t>(0, in_flight_sequences_ - options_.max_running);
  // Roughly: the queue ahead drains one batch per mean request duration.
  const double s = mean_e2e_s_ * static_cast<double>(queued + 1) / std::max(1, options_.max_running);
  return static_cast<int32_t>(std::clamp(std::ceil(s), 1.0, 60.0));
}

}  // namespace tpserve
