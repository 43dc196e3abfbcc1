#include "step/step_sampling_proto.h"

#include <vector>

#include "gtest/gtest.h"

namespace tpserve {
namespace {

// Every field of a sampling sequence and a scored-only one survives the round trip.
TEST(StepSamplingProto, RequestRoundTripsEveryField) {
  SequenceSampling a;
  a.seq_id = 12;
  a.num_rows = 4;
  a.scored_ids = {9};
  a.top_logprobs = 3;
  a.samples = true;
  a.params.temperature = 0.7f;
  a.params.top_k = 40;
  a.params.top_p = 0.9f;
  a.params.min_p = 0.05f;
  a.params.repetition_penalty = 1.2f;
  a.params.presence_penalty = 0.5f;
  a.params.frequency_penalty = -0.25f;
  a.params.top_logprobs = 3;
  a.params.logit_bias = {{5, -100.0f}, {7, 2.5f}};
  a.key = 0xfedcba9876543210ull;
  a.draws = 41;
  a.history = {1, 2, 3};
  a.draft = {4, 5};
  a.masks = {{-1, 3}, {}, {0, 1 << 30}};
  SequenceSampling b;
  b.seq_id = 13;
  b.num_rows = 2;
  b.scored_ids = {0, 1};
  const StepSampling in{{a, b}};
  absl::StatusOr<StepSampling> out = FromProto(ToProto(in));
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->sequences.size(), 2u);
  const SequenceSampling& x = out->sequences[0];
  EXPECT_EQ(x.seq_id, 12);
  EXPECT_EQ(x.num_rows, 4);
  EXPECT_EQ(x.scored_ids, a.scored_ids);
  EXPECT_EQ(x.top_logprobs, 3);
  EXPECT_TRUE(x.samples);
  EXPECT_EQ(x.params.temperature, 0.7f);
  EXPECT_EQ(x.params.top_k, 40);
  EXPECT_EQ(x.params.top_p, 0.9f);
  EXPECT_EQ(x.params.min_p, 0.05f);
  EXPECT_EQ(x.params.repetition_penalty, 1.2f);
  EXPECT_EQ(x.params.presence_penalty, 0.5f);
  EXPECT_EQ(x.params.frequency_penalty, -0.25f);
  EXPECT_EQ(x.params.top_logprobs, 3);
  EXPECT_EQ(x.params.logit_bias, a.params.logit_bias);
  EXPECT_EQ(x.key, a.key);
  EXPECT_EQ(x.draws, 41u);
  EXPECT_EQ(x.history, a.history);
  EXPECT_EQ(x.draft, a.draft);
  EXPECT_EQ(x.masks, a.masks);
  EXPECT_FALSE(out->sequences[1].samples);
  EXPECT_EQ(out->sequences[1].scored_ids, b.scored_ids);
}

TEST(StepSamplingProto, ResponseRoundTripsAndRejectsUnpairedAlternatives) {
  std::vector<SequenceSamples> in(2);
  in[0].scored.push_back({3, -1.5f, {{3, -1.5f}, {8, -2.0f}}});
  in[0].sampled.push_back({4, -0.25f, {}});
  in[0].sampled.push_back({6, -3.0f, {{1, -0.5f}}});
  in[0].draws = 9;
  in[1].draws = 2;
  absl::StatusOr<std::vector<SequenceSamples>> out = FromProto(ToProto(in));
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  ASSERT_EQ((*out)[0].scored.size(), 1u);
  EXPECT_EQ((*out)[0].scored[0].top_logprobs, in[0].scored[0].top_logprobs);
  ASSERT_EQ((*out)[0].sampled.size(), 2u);
  EXPECT_EQ((*out)[0].sampled[1].id, 6);
  EXPECT_EQ((*out)[0].sampled[1].logprob, -3.0f);
  EXPECT_EQ((*out)[0].sampled[1].top_logprobs, in[0].sampled[1].top_logprobs);
  EXPECT_EQ((*out)[0].draws, 9u);
  EXPECT_EQ((*out)[1].draws, 2u);

  tpserve::worker::v1::SampleResponse bad = ToProto(in);
  bad.mutable_sequences(0)->mutable_sampled(1)->add_top_ids(2);
  EXPECT_EQ(FromProto(bad).status().message(), "SampledToken 6: 2 top_ids but 1 top_logprobs");
  tpserve::worker::v1::SampleRequest bias;
  auto* s = bias.add_sequences();
  s->set_seq_id(5);
  s->set_samples(true);
  s->mutable_params()->add_logit_bias_ids(1);
  EXPECT_EQ(FromProto(bias).status().message(),
            "sampling: sequence 5: 1 logit_bias_ids but 0 logit_bias_values");
}

}  // namespace
}  // namespace tpserve
