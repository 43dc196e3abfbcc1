#include "step/step_sampling.h"

#include <cmath>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "step/sampling.h"

namespace tpserve {
namespace {

constexpr int64_t kVocab = 40;

// Rows whose largest logit is at argmax[r] (the rest a smooth, distinct spread).
std::vector<float> Rows(const std::vector<int32_t>& argmax) {
  std::vector<float> logits;
  for (size_t r = 0; r < argmax.size(); ++r) {
    for (int32_t id = 0; id < kVocab; ++id) {
      logits.push_back(id == argmax[r] ? 6.0f
                                       : static_cast<float>(std::sin(0.7 * id + 1.1 * r)));
    }
  }
  return logits;
}

std::vector<int32_t> Ids(const std::vector<SampledToken>& tokens) {
  std::vector<int32_t> ids;
  for (const SampledToken& t : tokens) ids.push_back(t.id);
  return ids;
}

SequenceSampling Greedy(int64_t seq_id, std::vector<int32_t> draft) {
  SequenceSampling s;
  s.seq_id = seq_id;
  s.samples = true;
  s.params.temperature = 0.0f;
  s.draft = std::move(draft);
  s.num_rows = 1 + static_cast<int64_t>(s.draft.size());
  return s;
}

TEST(SampleStep, ScoredRowsThenADraftVerifiedUpToItsFirstMismatch) {
  StepSampling sampling;
  SequenceSampling prompt;  // two prompt rows scored, no sampling (a chunk of a longer prompt)
  prompt.seq_id = 1;
  prompt.num_rows = 2;
  prompt.scored_ids = {3, 11};
  prompt.top_logprobs = 2;
  sampling.sequences.push_back(prompt);
  sampling.sequences.push_back(Greedy(2, {5, 7, 2}));  // the model picks 5, 7, then 9
  sampling.sequences.push_back(Greedy(3, {8}));        // all accepted: 8, then the bonus 4
  const std::vector<float> logits = Rows({0, 1, 5, 7, 9, 13, 8, 4});
  absl::StatusOr<std::vector<SequenceSamples>> out = SampleStep(logits, kVocab, sampling);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  ASSERT_EQ((*out)[0].scored.size(), 2u);
  const SampledToken want = ScoreToken(absl::MakeConstSpan(logits).subspan(kVocab, kVocab), 11, 2);
  EXPECT_EQ((*out)[0].scored[1].id, 11);
  EXPECT_EQ((*out)[0].scored[1].logprob, want.logprob);
  EXPECT_EQ((*out)[0].scored[1].top_logprobs, want.top_logprobs);
  EXPECT_TRUE((*out)[0].sampled.empty());
  EXPECT_EQ(Ids((*out)[1].sampled), (std::vector<int32_t>{5, 7, 9}));  // row 3 (13) unread
  EXPECT_EQ(Ids((*out)[2].sampled), (std::vector<int32_t>{8, 4}));
  EXPECT_EQ((*out)[1].draws, 0u);  // greedy rows draw nothing
}

// Verifying a draft in one step gives what sampling the same rows one at a time gives: the
// same tokens, logprobs and draws, penalties seeing each accepted token.
TEST(SampleStep, VerifiedRowsEqualOneAtATimeSamplingWithPenaltiesAndSeed) {
  SamplingParams params;
  params.temperature = 0.9f;
  params.top_p = 0.95f;
  params.frequency_penalty = 1.5f;
  params.repetition_penalty = 1.3f;
  params.seed = 77;
  const std::vector<float> logits = Rows({4, 4, 17, 4, 30});
  const std::vector<int32_t> prompt = {4, 9, 9};
  // One at a time.
  Sampler alone(params);
  std::vector<int32_t> history = prompt;
  std::vector<SampledToken> expected;
  for (int r = 0; r < 5; ++r) {
    expected.push_back(
        alone.Sample(absl::MakeConstSpan(logits).subspan(r * kVocab, kVocab), history));
    history.push_back(expected.back().id);
  }
  // The same rows as one verification step whose draft is the first four of those tokens.
  SequenceSampling s;
  s.seq_id = 9;
  s.samples = true;
  s.params = params;
  s.key = Sampler(params).key();
  s.draws = 0;
  s.history = prompt;
  for (int r = 0; r < 4; ++r) s.draft.push_back(expected[r].id);
  s.num_rows = 5;
  absl::StatusOr<std::vector<SequenceSamples>> out = SampleStep(logits, kVocab, {{s}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].sampled.size(), 5u);
  for (int r = 0; r < 5; ++r) {
    EXPECT_EQ((*out)[0].sampled[r].id, expected[r].id) << r;
    EXPECT_EQ((*out)[0].sampled[r].logprob, expected[r].logprob) << r;
  }
  EXPECT_EQ((*out)[0].draws, alone.draws());
  EXPECT_EQ((*out)[0].draws, 5u);
  // Without the history the penalties change the draw: the history is what was used.
  s.history.clear();
  out = SampleStep(logits, kVocab, {{s}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NE(Ids((*out)[0].sampled), Ids(expected));
}

TEST(SampleStep, EachRowDrawsThroughItsOwnMask) {
  SequenceSampling s = Greedy(4, {6});
  std::vector<int32_t> only3((kVocab + 31) / 32, 0), only6 = only3;
  only3[0] = 1 << 3;
  only6[0] = 1 << 6;
  s.masks = {only6, only3};  // row 0 may only say 6 (the draft), row 1 only 3
  absl::StatusOr<std::vector<SequenceSamples>> out = SampleStep(Rows({5, 5}), kVocab, {{s}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Ids((*out)[0].sampled), (std::vector<int32_t>{6, 3}));
}

TEST(SampleStep, MalformedRequestsNameTheSequenceAndField) {
  const std::vector<float> two = Rows({1, 2});
  const auto error = [&](const SequenceSampling& s, const std::vector<float>& logits) {
    return SampleStep(logits, kVocab, {{s}}).status();
  };
  SequenceSampling s = Greedy(7, {3});
  s.num_rows = 3;
  EXPECT_EQ(error(s, two).message(),
            "sampling: sequence 7: num_rows is 3 but its 0 scored ids and 2 sampling rows make 2");
  s = Greedy(7, {3});
  s.masks = {{}};
  EXPECT_EQ(error(s, two).message(),
            "sampling: sequence 7: masks has 1 entries, expected 0 or 2 (one per sampling row)");
  s.masks = {{}, std::vector<int32_t>(3, -1)};
  EXPECT_EQ(error(s, two).message(),
            "sampling: sequence 7: masks[1] has 3 words, at most 2 for a vocabulary of 40");
  s = Greedy(7, {40});
  EXPECT_EQ(error(s, two).message(), "sampling: sequence 7: draft[0] = 40 is outside [0, 40)");
  s = Greedy(7, {});
  EXPECT_EQ(error(s, two).message(),
            "sampling: the sequences ask for 1 rows of logits; the step has 2");
  s.params.temperature = -1.0f;
  EXPECT_EQ(error(s, Rows({1})).code(), absl::StatusCode::kInvalidArgument);
}

// A draft model's proposal for the position r tokens ahead is drawn with the sampler's draw r
// ahead (SequenceSampling::draws + r: DraftModelProposer), without taking it, so the target
// later draws the same token from the same logits (speculative decoding's coupling).
TEST(SampleStep, AProposalDrawnRDrawsAheadIsTheDrawTheSamplerMakesThen) {
  std::vector<float> logits(64);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = 0.05f * static_cast<float>(i % 17);
  SamplingParams p;
  p.temperature = 1.3f;
  p.top_k = 40;
  p.seed = 99;
  p.presence_penalty = 0.5f;
  p.logit_bias = {{3, 2.0f}};
  Sampler sampler(p);
  const std::vector<int32_t> history = {3, 5, 5};
  const auto propose = [&](const Sampler& s, uint64_t ahead) {
    StepSampling one;
    SequenceSampling& q = one.sequences.emplace_back();
    q.num_rows = 1;
    q.samples = true;
    q.params = s.params();
    q.key = s.key();
    q.draws = s.draws() + ahead;
    q.history = history;
    absl::StatusOr<std::vector<SequenceSamples>> out = SampleStep(logits, 64, one);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? (*out)[0].sampled.at(0).id : -1;
  };
  std::vector<int32_t> proposed;
  for (uint64_t ahead = 0; ahead < 6; ++ahead) proposed.push_back(propose(sampler, ahead));
  EXPECT_EQ(sampler.draws(), 0u);  // proposing took nothing from the sampler
  std::vector<int32_t> drawn;
  for (int i = 0; i < 6; ++i) drawn.push_back(sampler.Sample(logits, history).id);
  EXPECT_EQ(proposed, drawn);
  EXPECT_GT(std::set<int32_t>(drawn.begin(), drawn.end()).size(), 1u);  // really sampling
  // Greedy: the argmax after penalties, whatever the draw.
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  Sampler g(greedy);
  EXPECT_EQ(propose(g, 5), g.Sample(logits, history).id);
}

}  // namespace
}  // namespace tpserve
