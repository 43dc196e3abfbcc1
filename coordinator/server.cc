#include "coordinator/server.h"

#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "coordinator/grpc_status.h"
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
    case FinishReason::kNone:
    case FinishReason::kError: break;
  }
  return pb::FINISH_REASON_UNSPECIFIED;
}

// Events of one stream, handed from the engine's step thread to the gRPC handler thread.
class EventQueue {
 public:
  void Push(GenerationEvent e) {
    absl::MutexLock lock(&mu_);
    events_.push_back(std::move(e));
  }
  // Waits up to `timeout` for an event.
  bool Pop(GenerationEvent* out, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !events_.empty(); };
    if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout)) return false;
    *out = std::move(events_.front());
    events_.pop_front();
    return true;
  }

 private:
  absl::Mutex mu_;
  std::deque<GenerationEvent> events_ ABSL_GUARDED_BY(mu_);
};

void FillResponse(const GenerationEvent& e, pb::GenerateResponse* r) {
  r->mutable_token_ids()->Add(e.token_ids.begin(), e.token_ids.end());
  r->set_text(e.text);
  for (const SampledToken& t : e.logprobs) {
    pb::TokenLogprob* lp = r->add_logprobs();
    lp->set_token_id(t.id);
    lp->set_logprob(t.logprob);
    for (const auto& [id, logprob] : t.top_logprobs) {
      pb::TopLogprob* top = lp->add_top();
      top->set_token_id(id);
      top->set_logprob(logprob);
    }
  }
  if (e.finish != FinishReason::kNone) {
    r->set_finish_reason(ToProto(e.finish));
    r->set_matched_stop_sequence(e.matched_stop_sequence);
    pb::Usage* u = r->mutable_usage();
    u->set_prompt_tokens(e.usage.prompt_tokens);
    u->set_completion_tokens(e.usage.completion_tokens);
    u->set_time_to_first_token_s(e.usage.time_to_first_token_s);
    u->set_decode_time_s(e.usage.decode_time_s);
  }
}

}  // namespace

TpServeService::TpServeService(Engine* engine, const Tokenizer* tokenizer,
                               const ChatTemplate* chat_template, ServedModelInfo info,
                               ModelLimits limits)
    : engine_(engine),
      tokenizer_(tokenizer),
      chat_template_(chat_template),
      info_(std::move(info)),
      limits_(limits) {}

absl::StatusOr<std::vector<int32_t>> TpServeService::BuildPrompt(const ValidatedInput& in) const {
  switch (in.kind) {
    case ValidatedInput::Kind::kTokenIds:
      return in.token_ids;
    case ValidatedInput::Kind::kText:
      return tokenizer_->Encode(in.text, EncodeOptions{in.allow_special_tokens,
                                                       tokenizer_->add_bos_by_default()});
    case ValidatedInput::Kind::kChat: {
      if (chat_template_ == nullptr) {
        return absl::FailedPreconditionError("chat input: this model has no chat template");
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

grpc::Status TpServeService::Generate(grpc::ServerContext* context,
                                      const pb::GenerateRequest* request,
                                      grpc::ServerWriter<pb::GenerateResponse>* writer) {
  absl::StatusOr<ValidatedInput> in = ValidateGenerateRequest(*request, limits_);
  if (!in.ok()) return ToGrpcStatus(in.status());
  absl::StatusOr<std::vector<int32_t>> prompt = BuildPrompt(*in);
  if (!prompt.ok()) return ToGrpcStatus(prompt.status());
  absl::StatusOr<int32_t> max_new =
      CheckContextWindow(static_cast<int64_t>(prompt->size()), in->max_new_tokens, limits_);
  if (!max_new.ok()) return ToGrpcStatus(max_new.status());

  GenerationRequest gen = std::move(in->request);
  gen.prompt_ids = *std::move(prompt);
  gen.stop.max_new_tokens = *max_new;
  gen.deadline = absl::FromChrono(context->deadline());

  auto queue = std::make_shared<EventQueue>();
  absl::StatusOr<int64_t> id =
      engine_->Submit(std::move(gen), [queue](GenerationEvent e) { queue->Push(std::move(e)); });
  if (!id.ok()) return ToGrpcStatus(id.status());

  bool cancel_sent = false;
  bool client_gone = false;
  GenerationEvent event;
  while (true) {
    if (!queue->Pop(&event, absl::Milliseconds(20))) {
      if (!cancel_sent && context->IsCancelled()) {
        engine_->Cancel(*id);  // frees the KV blocks before the next step
        cancel_sent = true;
      }
      continue;
    }
    const bool last = event.finish != FinishReason::kNone;
    if (last && event.finish == FinishReason::kError) return ToGrpcStatus(event.error);
    if (!client_gone) {
      pb::GenerateResponse response;
      FillResponse(event, &response);
      if (!writer->Write(response)) {
        client_gone = true;
        if (!cancel_sent) engine_->Cancel(*id);
        cancel_sent = true;
      }
    }
    if (!last) continue;
    if (event.finish == FinishReason::kCancelled) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "generation cancelled by the client");
    }
    if (event.finish == FinishReason::kDeadline) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline passed during generation");
    }
    return grpc::Status::OK;
  }
}

absl::StatusOr<std::vector<int32_t>> TpServeService::EncodeTokenizeRequest(
    const pb::TokenizeRequest& request) const {
  pb::GenerateRequest as_generate;
  if (request.has_chat()) {
    *as_generate.mutable_chat() = request.chat();
  } else {
    as_generate.set_text(request.text());
  }
  as_generate.set_allow_special_tokens(request.allow_special_tokens());
  TP_ASSIGN_OR_RETURN(ValidatedInput in, ValidateGenerateRequest(as_generate, limits_));
  return BuildPrompt(in);
}

grpc::Status TpServeService::Tokenize(grpc::ServerContext*, const pb::TokenizeRequest* request,
                                      pb::TokenizeResponse* response) {
  absl::StatusOr<std::vector<int32_t>> ids = EncodeTokenizeRequest(*request);
  if (!ids.ok()) return ToGrpcStatus(ids.status());
  for (int32_t id : *ids) {
    response->add_ids(id);
    absl::StatusOr<std::string> piece = tokenizer_->Decode({id});
    response->add_pieces(piece.ok() ? SanitizeUtf8(*piece) : "");
  }
  return grpc::Status::OK;
}

grpc::Status TpServeService::CountTokens(grpc::ServerContext*, const pb::TokenizeRequest* request,
                                         pb::CountTokensResponse* response) {
  absl::StatusOr<std::vector<int32_t>> ids = EncodeTokenizeRequest(*request);
  if (!ids.ok()) return ToGrpcStatus(ids.status());
  response->set_count(static_cast<int32_t>(ids->size()));
  response->set_context_length(static_cast<int32_t>(limits_.context_length));
  return grpc::Status::OK;
}

grpc::Status TpServeService::GetModelInfo(grpc::ServerContext*, const pb::GetModelInfoRequest*,
                                          pb::ModelInfo* response) {
  response->set_name(info_.name);
  response->set_architecture(info_.architecture);
  response->set_context_length(limits_.context_length);
  response->set_tensor_parallel_degree(info_.tensor_parallel_degree);
  response->set_weight_format(info_.weight_format);
  response->set_vocab_size(limits_.vocab_size);
  response->set_num_parameters(info_.num_parameters);
  response->set_kv_cache_tokens(info_.kv_cache_tokens);
  response->set_backend(info_.backend);
  return grpc::Status::OK;
}

}  // namespace tpserve
