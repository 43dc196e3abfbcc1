#include "coordinator/server.h"

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/field_error.h"
#include "base/grpc_status.h"
#include "base/status_macros.h"
#include "coordinator/tokenizer/utf8.h"

namespace tpserve {
namespace {

namespace pb = ::tpserve::v1;

pb::FinishReason ToProto(FinishReason r) {
  switch (r) {
    case FinishReason::kEos: return pb::FINISH_REASON_EOS;
    case FinishReason::kLength: return pb::FINISH_REASON_LENGTH;
    case FinishReason::kStopSequence: return pb::FINISH_REASON_STOP_SEQUENCE;
    case FinishReason::kCancelled: return pb::FINISH_REASON_CANCELLED;
    case FinishReason::kDeadline: return pb::FINISH_REASON_DEADLINE;
    case FinishReason::kToolCalls: return pb::FINISH_REASON_TOOL_CALLS;
    case FinishReason::kNone:
    case FinishReason::kError: break;
  }
  return pb::FINISH_REASON_UNSPECIFIED;
}

void FillLogprob(const SampledToken& t, pb::TokenLogprob* lp) {
  lp->set_token_id(t.id);
  lp->set_logprob(t.logprob);
  for (const auto& [id, logprob] : t.top_logprobs) {
    pb::TopLogprob* top = lp->add_top();
    top->set_token_id(id);
    top->set_logprob(logprob);
  }
}

void FillResponse(const GenerationEvent& e, pb::GenerateResponse* r) {
  r->set_index(e.index);
  r->mutable_token_ids()->Add(e.token_ids.begin(), e.token_ids.end());
  r->set_text(e.text);
  r->set_reasoning_text(e.reasoning_text);
  for (const ToolCallDelta& call : e.tool_calls) {
    pb::ToolCall* out = r->add_tool_calls();
    out->set_index(call.index);
    out->set_id(call.id);
    out->set_name(call.name);
    out->set_arguments(call.arguments);
  }
  for (const SampledToken& t : e.logprobs) FillLogprob(t, r->add_logprobs());
  for (const SampledToken& t : e.prompt_logprobs) FillLogprob(t, r->add_prompt_logprobs());
  if (e.finish != FinishReason::kNone) {
    r->set_finish_reason(ToProto(e.finish));
    r->set_matched_stop_sequence(e.matched_stop_sequence);
    pb::Usage* u = r->mutable_usage();
    u->set_prompt_tokens(e.usage.prompt_tokens);
    u->set_completion_tokens(e.usage.completion_tokens);
    u->set_cached_tokens(e.usage.cached_tokens);
    u->set_draft_tokens(e.usage.draft_tokens);
    u->set_accepted_draft_tokens(e.usage.accepted_draft_tokens);
    u->set_speculative_steps(e.usage.speculative_steps);
    u->set_time_to_first_token_s(e.usage.time_to_first_token_s);
    u->set_decode_time_s(e.usage.decode_time_s);
    if (e.structured.has_value()) {
      pb::StructuredOutput* so = r->mutable_structured();
      so->set_completed(e.structured->completed);
      for (const std::string& k : e.structured->dropped_keywords) so->add_dropped_keywords(k);
      for (const std::string& k : e.structured->annotations) so->add_annotations(k);
    }
  }
}

absl::Status ParseByteBuffer(const grpc::ByteBuffer& buffer, google::protobuf::Message* out) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return absl::InvalidArgumentError("request: unreadable bytes");
  std::string wire;
  for (const grpc::Slice& s : slices) {
    wire.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return ParseRequestBytes(wire, out);
}

grpc::ByteBuffer Serialize(const google::protobuf::Message& message) {
  grpc::ByteBuffer buffer;
  bool own = false;
  grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::Message>(message, &buffer,
                                                                            &own);
  return buffer;
}

// The door's structured error detail (base/field_error.h) as trailing metadata, beside the
// message that opens with the same path: "tpserve-error-field" (the proto path of the field
// at fault) and "tpserve-error-reason" (e.g. context_length_exceeded).
void AttachErrorDetail(grpc::CallbackServerContext& context, const absl::Status& s) {
  if (std::optional<std::string> field = ErrorField(s)) {
    context.AddTrailingMetadata("tpserve-error-field", *field);
  }
  if (std::optional<std::string> reason = ErrorReason(s)) {
    context.AddTrailingMetadata("tpserve-error-reason", *reason);
  }
}

absl::Status Authenticate(const Frontend& frontend, const grpc::CallbackServerContext& context) {
  const auto& md = context.client_metadata();
  auto it = md.find("authorization");
  const std::string_view value =
      it == md.end() ? std::string_view() : std::string_view(it->second.data(), it->second.size());
  return frontend.CheckAuth(value);
}

// One Generate stream. Events come from the engine's step thread and are queued here; at most
// one write is in flight, and the next starts from OnWriteDone. StartWrite and Finish are
// called without holding mu_, and nothing touches the reactor after Finish on that thread:
// gRPC calls OnDone (which deletes it) only after Finish, i.e. after the request's last event,
// so the engine never calls into a deleted reactor.
class GenerateReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  GenerateReactor(Frontend* frontend, grpc::CallbackServerContext* context,
                  const grpc::ByteBuffer& request)
      : frontend_(frontend) {
    absl::Status s = Authenticate(*frontend, *context);
    if (s.ok()) s = ParseByteBuffer(request, &request_);
    if (!s.ok()) {
      frontend->RecordRejected(s);
      AttachErrorDetail(*context, s);
      FinishWith(ToGrpcStatus(s));
      return;
    }
    {
      // Holding mu_: an event that arrives before Generate returns waits until id_ and the
      // request id header are in place.
      absl::MutexLock lock(&mu_);
      absl::StatusOr<Admitted> admitted = frontend->Generate(
          request_, absl::FromChrono(context->deadline()),
          [this](GenerationEvent e) { OnEvent(std::move(e)); });
      if (admitted.ok()) {
        id_ = admitted->id;
        request_id_ = admitted->request_id;
        choices_left_ = admitted->n;
        context->AddInitialMetadata("x-request-id", request_id_);
        admitted_ = true;
        refs_ = 2;  // the engine's, until its final event has been handled
      } else {
        s = admitted.status();
      }
    }
    if (!s.ok()) {
      // As HTTP's Retry-After: a full queue, or a server draining or unable to step.
      if (absl::IsResourceExhausted(s) || absl::IsUnavailable(s)) {
        context->AddTrailingMetadata("retry-after", std::to_string(frontend->retry_after_s()));
      }
      AttachErrorDetail(*context, s);
      FinishWith(ToGrpcStatus(s));
    }
    HandToGrpc();  // gRPC may call OnCancel or OnDone as soon as Generate returns
  }

  void OnWriteDone(bool ok) override {
    TakeFromGrpc();
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok && !client_gone_) {
        client_gone_ = true;  // keep taking events until the engine's final one
        pending_.clear();
        frontend_->Cancel(id_);
      }
    }
    Pump();
  }

  void OnCancel() override {
    TakeFromGrpc();
    absl::MutexLock lock(&mu_);
    if (admitted_ && !final_status_.has_value()) frontend_->Cancel(id_);  // frees the KV blocks
  }

  void OnDone() override {
    TakeFromGrpc();
    Unref();
  }

 private:
  // gRPC core orders an operation's start (StartWrite, Finish, or Generate returning the
  // reactor) before the callback it leads to (OnWriteDone, OnDone; OnCancel), through its
  // completion queue. Debian builds gRPC core without ThreadSanitizer, so TSan cannot see that
  // order, and the callback's first touch of the reactor (locking mu_, whose word the
  // constructor wrote on another thread) looked unordered (a CI report on OnWriteDone). This
  // pair restates the order gRPC gives, in code TSan sees: one atomic add per hand-over and one
  // load per callback. It orders only the hand-over itself; the reactor's state stays under mu_
  // and is checked as before.
  void HandToGrpc() { handoffs_.fetch_add(1, std::memory_order_acq_rel); }
  void TakeFromGrpc() { handoffs_.load(std::memory_order_acquire); }

  // Each of the request's n choices ends with one finishing event; the last of them is the
  // engine's last call. The stream ends with the last choice, or with the first choice that
  // ends abnormally (the frontend cancels the others; their events are dropped).
  void OnEvent(GenerationEvent event) {
    const bool finishing = event.finish != FinishReason::kNone;
    bool last = false;
    {
      absl::MutexLock lock(&mu_);
      if (finishing) last = --choices_left_ == 0;
      const absl::Status status = FinishStatus(event.finish, event.error);
      if (final_status_.has_value()) {
        // The stream has already ended.
      } else if (event.finish == FinishReason::kError) {
        final_status_ = ToGrpcStatus(status);
      } else {
        if (!client_gone_) {
          pb::GenerateResponse response;
          if (first_) response.set_request_id(request_id_);
          first_ = false;
          FillResponse(event, &response);
          pending_.push_back(Serialize(response));
        }
        if (last || (finishing && !status.ok())) final_status_ = ToGrpcStatus(status);
      }
    }
    Pump();
    // Once the final event is in, a write completing on a gRPC thread can Finish the call and
    // OnDone can run before this thread is back here, so gRPC's reference alone must not
    // delete the reactor under it.
    if (last) Unref();
  }

  // The reactor is gRPC's until OnDone and, once admitted, the engine's until its final event
  // has been handled; the last of the two deletes it.
  void Unref() {
    bool gone;
    {
      absl::MutexLock lock(&mu_);
      gone = --refs_ == 0;
    }
    if (gone) delete this;
  }

  // Starts the next write, or finishes once everything is written and the status is known.
  void Pump() {
    grpc::ByteBuffer* write = nullptr;
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock lock(&mu_);
      if (writing_ || finished_) return;
      if (!pending_.empty()) {
        current_ = std::move(pending_.front());
        pending_.pop_front();
        writing_ = true;
        write = &current_;
      } else if (final_status_.has_value()) {
        finished_ = true;
        finish = final_status_;
      }
    }
    if (write == nullptr && !finish.has_value()) return;
    HandToGrpc();
    if (write != nullptr) StartWrite(write);
    if (finish.has_value()) Finish(*finish);  // OnDone may follow at once, on another thread
  }

  void FinishWith(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      finished_ = true;
    }
    HandToGrpc();
    Finish(status);
  }

  Frontend* const frontend_;
  std::atomic<uint64_t> handoffs_{0};  // see HandToGrpc
  absl::Mutex mu_;
  pb::GenerateRequest request_;
  int64_t id_ ABSL_GUARDED_BY(mu_) = 0;
  std::string request_id_ ABSL_GUARDED_BY(mu_);
  int32_t choices_left_ ABSL_GUARDED_BY(mu_) = 1;  // choices whose finishing event is to come
  bool admitted_ ABSL_GUARDED_BY(mu_) = false;
  bool first_ ABSL_GUARDED_BY(mu_) = true;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  int refs_ ABSL_GUARDED_BY(mu_) = 1;  // gRPC's, until OnDone
  std::deque<grpc::ByteBuffer> pending_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer current_;  // the write in flight; touched only by the thread that starts it
  std::optional<grpc::Status> final_status_ ABSL_GUARDED_BY(mu_);
};

// Tokenize and CountTokens: the prompt a GenerateRequest with the same input would get.
absl::StatusOr<BuiltPrompt> EncodeTokenizeRequest(const Frontend& frontend,
                                                  const grpc::CallbackServerContext& ctx,
                                                  const grpc::ByteBuffer& bytes) {
  TP_RETURN_IF_ERROR(Authenticate(frontend, ctx));
  pb::TokenizeRequest request;
  TP_RETURN_IF_ERROR(ParseByteBuffer(bytes, &request));
  pb::GenerateRequest as_generate;
  if (request.has_chat()) {
    *as_generate.mutable_chat() = request.chat();
  } else {
    as_generate.set_text(request.text());
  }
  as_generate.set_allow_special_tokens(request.allow_special_tokens());
  TP_ASSIGN_OR_RETURN(ValidatedInput in, ValidateGenerateRequest(as_generate, frontend.limits()));
  return frontend.admitter().BuildPrompt(in);
}

// Finishes a raw unary call with `result`'s message, or with its error.
template <typename Message>
grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context,
                                const absl::StatusOr<Message>& result, grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (result.ok()) *response = Serialize(*result);
  AttachErrorDetail(*context, result.status());
  reactor->Finish(ToGrpcStatus(result.status()));
  return reactor;
}

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* TpServeService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return new GenerateReactor(frontend_, context, *request);
}

grpc::ServerUnaryReactor* TpServeService::Tokenize(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request,
                                                   grpc::ByteBuffer* response) {
  absl::StatusOr<pb::TokenizeResponse> out = [&]() -> absl::StatusOr<pb::TokenizeResponse> {
    TP_ASSIGN_OR_RETURN(BuiltPrompt prompt, EncodeTokenizeRequest(*frontend_, *context, *request));
    pb::TokenizeResponse r;
    r.set_prompt_text(prompt.text);
    for (int32_t id : prompt.ids) {
      r.add_ids(id);
      absl::StatusOr<std::string> piece = frontend_->tokenizer().Decode({id});
      r.add_pieces(piece.ok() ? SanitizeUtf8(*piece) : "");
    }
    return r;
  }();
  return Reply(context, out, response);
}

grpc::ServerUnaryReactor* TpServeService::CountTokens(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  absl::StatusOr<pb::CountTokensResponse> out = [&]() -> absl::StatusOr<pb::CountTokensResponse> {
    TP_ASSIGN_OR_RETURN(BuiltPrompt prompt, EncodeTokenizeRequest(*frontend_, *context, *request));
    pb::CountTokensResponse r;
    r.set_count(static_cast<int32_t>(prompt.ids.size()));
    r.set_context_length(static_cast<int32_t>(frontend_->limits().context_length));
    return r;
  }();
  return Reply(context, out, response);
}

grpc::ServerUnaryReactor* TpServeService::GetModelInfo(grpc::CallbackServerContext* context,
                                                       const pb::GetModelInfoRequest*,
                                                       pb::ModelInfo* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status s = Authenticate(*frontend_, *context); !s.ok()) {
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  const ServedModelInfo& info = frontend_->info();
  response->set_name(info.name);
  response->set_architecture(info.architecture);
  response->set_context_length(frontend_->limits().context_length);
  response->set_tensor_parallel_degree(info.tensor_parallel_degree);
  response->set_weight_format(info.weight_format);
  response->set_vocab_size(frontend_->limits().vocab_size);
  response->set_num_parameters(info.num_parameters);
  response->set_kv_cache_tokens(info.kv_cache_tokens);
  response->set_backend(info.backend);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace tpserve
