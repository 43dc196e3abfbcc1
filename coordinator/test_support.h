// Test doubles for the coordinator: a byte-level tokenizer and a scripted model executor.
#ifndef TPSERVE_COORDINATOR_TEST_SUPPORT_H_
#define TPSERVE_COORDINATOR_TEST_SUPPORT_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "coordinator/admission.h"
#include "coordinator/chat/chat_template.h"
#include "coordinator/engine.h"
#include "step/executor.h"
#include "coordinator/validation.h"
#include "coordinator/tokenizer/tokenizer.h"

namespace tpserve {

inline constexpr int32_t kEos = 256;
inline constexpr int32_t kVocab = 259;  // bytes, <eos>, <|im_start|>, <|im_end|>

// The classic ChatML template (as Hugging Face documents it), for ByteTokenizer's markers.
inline ChatTemplate ChatMlTemplate() {
  absl::StatusOr<ChatTemplate> chat = ChatTemplate::Create(
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
      "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
      "{{ '<|im_start|>assistant\n' }}{% endif %}",
      ChatTemplateTokens{});
  if (!chat.ok()) abort();
  return *std::move(chat);
}

// Byte tokens 0..255 plus one control token: enough to stream any text byte by byte, which
// splits every Korean syllable across three tokens.
inline Tokenizer ByteTokenizer() {
  TokenizerData data;
  for (int b = 0; b < 256; ++b) {
    data.tokens.push_back(absl::StrFormat("<0x%02X>", b));
    data.token_types.push_back(TokenType::kByte);
  }
  for (const char* control : {"<eos>", "<|im_start|>", "<|im_end|>"}) {
    data.tokens.push_back(control);
    data.token_types.push_back(TokenType::kControl);
  }
  data.eos_id = kEos;
  absl::StatusOr<Tokenizer> tok = Tokenizer::Create(std::move(data));
  if (!tok.ok()) abort();
  return *std::move(tok);
}

inline std::vector<int32_t> Bytes(std::string_view s) {
  return std::vector<int32_t>(reinterpret_cast<const uint8_t*>(s.data()),
                              reinterpret_cast<const uint8_t*>(s.data()) + s.size());
}

// A model whose token at position p is always script[p] (kEos past the end). It also keeps a
// fake paged KV store and checks that every step's block table still holds the tokens written
// earlier, so a scheduler or block-table bug shows up as a failed step.
class ScriptedExecutor : public ModelExecutor {
 public:
  explicit ScriptedExecutor(std::string script) : script_(std::move(script)) {}

  absl::StatusOr<StepResult> Execute(const StepBatch& batch) override {
    if (fail_at_step_ == steps_++) return absl::UnavailableError("rank 1 stopped answering");
    if (step_delay_ > absl::ZeroDuration()) absl::SleepFor(step_delay_);
    seen_steps.push_back(batch);
    StepResult r;
    r.vocab_size = kVocab;
    r.logits.assign(batch.num_logit_rows() * r.vocab_size, 0.0f);
    int64_t row = 0;
    for (const StepBatch::Sequence& c : batch.sequences) {
      const absl::Span<const int32_t> tokens = batch.tokens(c);
      const int64_t end = c.end_position();
      for (int64_t p = c.start_position; p < end; ++p) {
        kv_[Slot(c, p)] = tokens[p - c.start_position];
      }
      for (int64_t p = 0; p < end; ++p) {
        if (kv_[Slot(c, p)] != Expected(p)) {
          return absl::InternalError(absl::StrFormat(
              "seq %d position %d holds the wrong token (%d, expected %d); chunk at %d of %d "
              "tokens, block table [%s]",
              c.seq_id, p, kv_[Slot(c, p)], Expected(p), c.start_position, c.num_tokens,
              absl::StrJoin(c.block_table, ",")));
        }
      }
      // The rows it asked for: its last num_logits tokens, each predicting the next.
      for (int64_t p = end - c.num_logits; p < end; ++p) {
        r.logits[row++ * r.vocab_size + Expected(p + 1)] = 10.0f;
      }
    }
    r.expert_load = expert_load_per_step;
    r.decoded_weight_bytes = decoded_weight_bytes_per_step;
    return r;
  }
  int64_t vocab_size() const override { return kVocab; }
  std::string Describe() const override { return "scripted"; }
  // A lost rank replaced: with recover_result OK the KV store is wiped (the ranks' KV is gone),
  // so a sequence the engine did not recompute from its first token fails its next step.
  absl::Status Recover(const absl::Status& failure) override {
    ++recovers;
    recovered_after.push_back(std::string(failure.message()));
    if (recover_result.ok()) kv_.clear();
    return recover_result;
  }

  int fail_at_step_ = -1;
  absl::Status recover_result = absl::UnimplementedError("scripted: no ranks to replace");
  int recovers = 0;
  std::vector<std::string> recovered_after;  // the failures Recover was called with
  absl::Duration step_delay_ = absl::ZeroDuration();
  std::vector<StepBatch> seen_steps;  // every step, in order
  ExpertLoad expert_load_per_step;    // what every step reports (a mixture of experts')
  int64_t decoded_weight_bytes_per_step = 0;  // and its GEMM fallback's decoded bytes

 private:
  static int64_t Slot(const StepBatch::Sequence& c, int64_t p) {
    return c.block_table.at(p / kBlock) * kBlock + p % kBlock;
  }
  int32_t Expected(int64_t p) const {
    return p < static_cast<int64_t>(script_.size()) ? static_cast<uint8_t>(script_[p]) : kEos;
  }
  static constexpr int64_t kBlock = 4;
  std::string script_;
  std::map<int64_t, int32_t> kv_;
  int steps_ = 0;
};

// A model that answers any prompt with `reply` (then kEos): the token after the prompt is
// reply[0], whatever the prompt is (a chat's rendered template, with its control tokens, which a
// ScriptedExecutor's script cannot spell). A sequence's prompt is what its first step carried.
class ReplyExecutor : public ModelExecutor {
 public:
  explicit ReplyExecutor(std::string reply) : reply_(std::move(reply)) {}

  absl::StatusOr<StepResult> Execute(const StepBatch& batch) override {
    if (step_delay_ > absl::ZeroDuration()) absl::SleepFor(step_delay_);
    StepResult r;
    r.vocab_size = kVocab;
    r.logits.assign(batch.num_logit_rows() * r.vocab_size, 0.0f);
    int64_t row = 0;
    for (const StepBatch::Sequence& c : batch.sequences) {
      const int64_t prompt_end = prompt_end_.try_emplace(c.seq_id, c.end_position()).first->second;
      for (int64_t p = c.end_position() - c.num_logits; p < c.end_position(); ++p) {
        const int64_t k = p + 1 - prompt_end;
        const int32_t next = k >= 0 && k < static_cast<int64_t>(reply_.size())
                                 ? static_cast<uint8_t>(reply_[k])
                                 : kEos;
        r.logits[row++ * r.vocab_size + next] = 100.0f;  // certain even at temperature 1
      }
    }
    return r;
  }
  int64_t vocab_size() const override { return kVocab; }
  std::string Describe() const override { return "reply"; }

  absl::Duration step_delay_ = absl::ZeroDuration();

 private:
  std::string reply_;
  std::map<int64_t, int64_t> prompt_end_;  // by sequence id; step thread only
};

inline constexpr int64_t kTestContextLength = 256;

// A started engine over a test executor, in the shape the scripted models assume: blocks of 4
// tokens, a 256-token window, kEos as end of sequence.
inline std::unique_ptr<Engine> StartTestEngine(std::unique_ptr<ModelExecutor> executor,
                                               const Tokenizer* tokenizer,
                                               int32_t num_blocks = 64) {
  EngineOptions o;
  o.num_kv_blocks = num_blocks;
  o.block_size_tokens = 4;
  o.context_length = kTestContextLength;
  o.eos_token_ids = {kEos};
  auto engine = std::make_unique<Engine>(o, std::move(executor), tokenizer);
  engine->Start();
  return engine;
}

// The limits that go with it.
inline ModelLimits TestModelLimits() {
  ModelLimits limits;
  limits.vocab_size = kVocab;
  limits.context_length = kTestContextLength;
  return limits;
}

// What a test asks of one request, in the door's terms.
struct TestRequest {
  std::vector<int32_t> prompt_ids;
  int32_t max_new_tokens = 16;
  std::vector<std::string> stop_sequences;
  float temperature = 0.0f;
  absl::Time deadline = absl::InfiniteFuture();
  int32_t n = 1;  // choices (GenerateRequest.n)
};

// `r` through the door (Admitter::Admit) of `engine` over the byte tokenizer's vocabulary, as
// token ids: the only way a test gets a request the engine accepts.
inline absl::StatusOr<AdmittedRequest> AdmitForTest(const Engine& engine, const TestRequest& r,
                                                    int64_t context_length = 1 << 20) {
  tpserve::v1::GenerateRequest proto;
  proto.mutable_token_ids()->mutable_ids()->Add(r.prompt_ids.begin(), r.prompt_ids.end());
  proto.set_max_new_tokens(r.max_new_tokens);
  for (const std::string& s : r.stop_sequences) proto.add_stop_sequences(s);
  proto.mutable_sampling()->set_temperature(r.temperature);
  if (r.n != 1) proto.set_n(r.n);
  ModelLimits limits;
  limits.vocab_size = kVocab;
  limits.context_length = context_length;
  const Admitter door(/*tokenizer=*/nullptr, /*chat_template=*/nullptr, limits,
                      engine.kv_capacity());
  return door.Admit(proto, r.deadline);
}

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TEST_SUPPORT_H_
