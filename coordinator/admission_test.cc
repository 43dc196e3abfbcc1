#include "coordinator/admission.h"

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/field_error.h"
#include "coordinator/test_support.h"

namespace tpserve {
namespace {

class AdmissionTest : public ::testing::Test {
 protected:
  Admitter Door(int64_t context_length = 64, KvCapacity kv = {64, 4}) {
    ModelLimits limits = TestModelLimits();
    limits.context_length = context_length;
    return Admitter(&tokenizer_, /*chat_template=*/nullptr, limits, kv);
  }
  Tokenizer tokenizer_ = ByteTokenizer();
};

TEST_F(AdmissionTest, AdmitsACompleteRequest) {
  tpserve::v1::GenerateRequest proto;
  proto.set_text("hi!");
  proto.set_max_new_tokens(5);
  proto.add_stop_sequences("\n");
  proto.add_stop_token_ids(7);
  proto.mutable_sampling()->set_temperature(0.5f);
  proto.set_request_id("req-1");
  proto.set_logprobs(true);
  const absl::Time deadline = absl::FromUnixSeconds(2000000000);
  absl::StatusOr<AdmittedRequest> r = Door().Admit(proto, deadline);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompt_ids(), Bytes("hi!"));
  EXPECT_EQ(r->stop().max_new_tokens, 5);
  EXPECT_EQ(r->stop().stop_sequences, std::vector<std::string>{"\n"});
  EXPECT_EQ(r->stop().stop_token_ids, std::vector<int32_t>{7});
  EXPECT_FLOAT_EQ(r->sampling().temperature, 0.5f);
  EXPECT_EQ(r->request_id(), "req-1");
  EXPECT_TRUE(r->logprobs());
  EXPECT_EQ(r->deadline(), deadline);
}

TEST_F(AdmissionTest, FillsTheWindowAndMakesARequestId) {
  tpserve::v1::GenerateRequest proto;
  proto.mutable_token_ids()->add_ids(10);
  proto.mutable_token_ids()->add_ids(11);
  absl::StatusOr<AdmittedRequest> r = Door(/*context_length=*/40).Admit(proto);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop().max_new_tokens, 40 - 2);
  EXPECT_EQ(r->request_id().size(), 16u);  // 64 random bits in hex
  absl::StatusOr<AdmittedRequest> again = Door(40).Admit(proto);
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->request_id(), r->request_id());
}

// Not RESOURCE_EXHAUSTED: no retry can succeed; the request must ask for less.
TEST_F(AdmissionTest, ARequestLargerThanTheWholeCacheNamesMaxNewTokens) {
  tpserve::v1::GenerateRequest proto;
  proto.set_text("abcdefgh");
  proto.set_max_new_tokens(4);
  absl::Status s = Door(/*context_length=*/64, KvCapacity{2, 4}).Admit(proto).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "max_new_tokens = 4 is invalid: with the prompt's 8 tokens it needs 3 KV blocks; the "
            "whole cache has 2 blocks of 4 tokens");
  EXPECT_EQ(ErrorField(s), "max_new_tokens");
  proto.set_max_new_tokens(0);  // refused by validation before the cache is asked
  EXPECT_EQ(ErrorField(Door(64, KvCapacity{2, 4}).Admit(proto).status()), "max_new_tokens");
}

TEST_F(AdmissionTest, TheWindowErrorCarriesItsReason) {
  tpserve::v1::GenerateRequest proto;
  proto.set_text("abcdef");
  proto.set_max_new_tokens(5);
  absl::Status s = Door(/*context_length=*/10).Admit(proto).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorReason(s), kContextLengthExceeded);
  EXPECT_EQ(ErrorField(s), std::nullopt);
  EXPECT_EQ(s.message(),
            "context_length_exceeded: prompt has 6 tokens and max_new_tokens is 5, together 11 > "
            "the context length of 10 tokens");
}

// The field travels as data, and the message opens with the same path.
TEST_F(AdmissionTest, FieldErrorsCarryTheirProtoPath) {
  struct Case {
    std::function<void(tpserve::v1::GenerateRequest&)> set;
    std::string path;
  };
  const std::vector<Case> cases = {
      {[](auto& p) { p.mutable_sampling()->set_temperature(-1.0f); }, "sampling.temperature"},
      {[](auto& p) { p.mutable_sampling()->set_top_p(2.0f); }, "sampling.top_p"},
      {[](auto& p) { p.add_stop_sequences(""); }, "stop_sequences[0]"},
      {[](auto& p) { p.add_stop_token_ids(9999); }, "stop_token_ids[0]"},
      {[](auto& p) { p.set_request_id(std::string(200, 'x')); }, "request_id"},
      {[](auto& p) { p.clear_text(); p.mutable_token_ids()->add_ids(-3); }, "token_ids.ids[0]"},
  };
  for (const Case& c : cases) {
    tpserve::v1::GenerateRequest proto;
    proto.set_text("ok");
    c.set(proto);
    absl::Status s = Door().Admit(proto).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.path;
    EXPECT_EQ(ErrorField(s), c.path) << s;
    EXPECT_EQ(s.message().substr(0, c.path.size() + 3), c.path + " = ") << s;
  }
}

TEST_F(AdmissionTest, ChatWithoutATemplateIsAFailedPrecondition) {
  tpserve::v1::GenerateRequest proto;
  auto* m = proto.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("hi");
  absl::Status s = Door().Admit(proto).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "chat: this model has no chat template");
}

}  // namespace
}  // namespace tpserve
