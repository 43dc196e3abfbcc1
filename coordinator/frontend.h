// The single door in front of the engine, shared by the gRPC service and the OpenAI-compatible
// HTTP server: every generation request of either protocol comes in through Generate(), which
// admits it (coordinator/admission.h: validation, the prompt, the context window, the KV bound),
// applies the queue bound and submits it. The door also
// keeps what every request is measured by: Prometheus metrics, one structured log line per
// request, the request id, the bearer token check, and the drain state.
//
//   Frontend door(&engine, &tokenizer, chat_template, info, limits, options);
//   TP_ASSIGN_OR_RETURN(Admitted a, door.Generate(proto, deadline, on_event));
//   ...  door.Cancel(a.id);
//
// Threading: thread-safe. `on_event` runs on the engine's step thread and must not block.
#ifndef TPSERVE_COORDINATOR_FRONTEND_H_
#define TPSERVE_COORDINATOR_FRONTEND_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/admission.h"
#include "coordinator/engine.h"
#include "coordinator/structured/compiler.h"
#include "coordinator/metrics.h"
#include "coordinator/chat/chat_template.h"
#include "coordinator/tokenizer/tokenizer.h"
#include "coordinator/validation.h"
#include "proto/tpserve.pb.h"

namespace tpserve {

struct ServedModelInfo {
  std::string name;
  std::string architecture = "llama";
  std::string weight_format;
  std::string backend = "cpu";
  int32_t tensor_parallel_degree = 1;
  int64_t num_parameters = 0;
  int64_t kv_cache_tokens = 0;
};

struct FrontendOptions {
  // Requests admitted but not yet running (beyond the engine's batch of `max_running`). Past
  // this bound a request is refused with RESOURCE_EXHAUSTED before any token is sent.
  int32_t max_queued_requests = 256;
  int32_t max_running = 8;  // the engine's SchedulerOptions::max_num_seqs
  // Empty: no authentication. Otherwise every request must carry "Bearer <token>".
  std::string bearer_token;
  // Where the per-request log lines go; null: stderr.
  std::FILE* request_log = nullptr;
  // Compiles structured-output constraints; null: constrained requests are FAILED_PRECONDITION.
  // Must outlive the frontend.
  const ConstraintCompiler* constraints = nullptr;
  // How the model writes tool calls and reasoning (--tool_call_parser, --reasoning_parser).
  OutputFormats output_formats;
};

struct Admitted {
  int64_t id = 0;          // the engine's id, for Cancel
  std::string request_id;  // the client's, or one made here; echoed back and logged
  int32_t prompt_tokens = 0;
  int32_t n = 1;           // choices: the request's events end after n finishing events
  std::vector<int32_t> prompt_ids;  // what the prompt became (chat template, tokenizer)
};

class Frontend {
 public:
  // All pointers must outlive the frontend. `chat_template` may be null (chat input is then
  // FAILED_PRECONDITION).
  Frontend(Engine* engine, const Tokenizer* tokenizer, const ChatTemplate* chat_template,
           ServedModelInfo info, ModelLimits limits, FrontendOptions options);
  ~Frontend();

  // Admits the request (Admitter::Admit), checks the queue bound, then submits.
  // `on_event` receives every event of the request's n choices (GenerationEvent::index), in
  // order for each choice, each choice's last one with `finish` set; the request is over after
  // n of those. A chat whose output is parsed (tools, a reasoning format) gets its events'
  // text split into content, reasoning_text and whole tool_calls; a choice that called a tool
  // and then ended at EOS finishes with kToolCalls.
  // With best_of > n the best n candidates' events (by mean logprob per token)
  // come only once every candidate has finished, renumbered best first. One choice ending
  // abnormally (cancelled, deadline, error) cancels the others. Errors:
  // Admit's (INVALID_ARGUMENT naming the field by its proto path, ...), RESOURCE_EXHAUSTED when
  // the queue is full (retry after retry_after_s()), UNAVAILABLE while draining or after a
  // failed step.
  absl::StatusOr<Admitted> Generate(const tpserve::v1::GenerateRequest& request,
                                    absl::Time deadline, EventCallback on_event);
  // Ends a request with kCancelled; unknown or finished ids are a no-op.
  void Cancel(int64_t id);

  const Admitter& admitter() const { return admitter_; }

  // OK, or UNAUTHENTICATED when a token is configured and `authorization` is not
  // "Bearer <token>". Compared in constant time.
  absl::Status CheckAuth(std::string_view authorization) const;

  // Counts a request refused before Generate (e.g. malformed HTTP JSON, a failed auth check)
  // under its status code, like the refusals Generate counts itself.
  void RecordRejected(const absl::Status& status);

  // Drain: new requests get UNAVAILABLE; in-flight ones keep running.
  void BeginDrain();
  bool draining() const;
  // Waits until no request is in flight; false on timeout.
  bool WaitIdle(absl::Duration timeout);
  // Cancels every request in flight (the end of a drain).
  void CancelAll();
  int64_t in_flight() const;
  // Seconds a refused client should wait before retrying (>= 1).
  int32_t retry_after_s() const;

  MetricsRegistry& metrics() { return metrics_; }
  const ModelLimits& limits() const { return admitter_.limits(); }
  const ServedModelInfo& info() const { return info_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  struct Tracked;
  void OnEvent(Tracked& t, GenerationEvent& event);
  std::vector<GenerationEvent> BestOf(Tracked& t);
  void RegisterMetrics();
  int32_t RetryAfterLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Engine* const engine_;
  const Tokenizer* const tokenizer_;
  const Admitter admitter_;
  const ServedModelInfo info_;
  const FrontendOptions options_;

  MetricsRegistry metrics_;
  Histogram* ttft_;
  Histogram* inter_token_;
  Histogram* e2e_;
  Counter* prompt_tokens_;
  Counter* generation_tokens_;
  Counter* cached_prompt_tokens_;

  mutable absl::Mutex mu_;
  std::unordered_set<int64_t> in_flight_ ABSL_GUARDED_BY(mu_);
  int64_t in_flight_sequences_ ABSL_GUARDED_BY(mu_) = 0;  // best_of summed over in_flight_
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  int64_t next_request_number_ ABSL_GUARDED_BY(mu_) = 1;
  double mean_e2e_s_ ABSL_GUARDED_BY(mu_) = 0.0;  // moving average, for retry_after_s
};

// The log line's and the HTTP API's name of a finish reason: "stop", "length", ...
const char* FinishReasonName(FinishReason reason);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_FRONTEND_H_
