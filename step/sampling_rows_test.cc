// The device sampler's algorithm (kernels/cuda/row_sampling.h, run on the host by
// SampleRowsOnHost exactly as the CUDA kernel runs it, but for the order of its sums) over the
// rows ToSamplingRows makes, assembled by FromRowSamples, against the CPU sampler: SampleStep.
// Same tokens, logprobs, alternatives and draws, over every sampling feature and a verified
// draft.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/row_sampling.h"
#include "step/sampling.h"
#include "step/step_sampling.h"

namespace tpserve {
namespace {

absl::StatusOr<std::vector<SequenceSamples>> ByRows(const std::vector<float>& logits,
                                                    int64_t vocab, const StepSampling& sampling) {
  absl::StatusOr<SamplingRows> rows = ToSamplingRows(vocab, sampling);
  if (!rows.ok()) return rows.status();
  std::vector<RowSample> out(rows->rows.size());
  std::vector<float> work = logits;  // sampled in place
  SampleRowsOnHost(work.data(), vocab, *rows, out.data());
  return FromRowSamples(sampling, out);
}

void ExpectSame(const std::vector<SequenceSamples>& want, const std::vector<SequenceSamples>& got,
                const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  const auto same_tokens = [&](const std::vector<SampledToken>& a,
                               const std::vector<SampledToken>& b, const std::string& which) {
    ASSERT_EQ(a.size(), b.size()) << what << " " << which;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].id, b[i].id) << what << " " << which << "[" << i << "]";
      EXPECT_EQ(a[i].logprob, b[i].logprob) << what << " " << which << "[" << i << "]";
      EXPECT_EQ(a[i].top_logprobs, b[i].top_logprobs) << what << " " << which << "[" << i << "]";
    }
  };
  for (size_t k = 0; k < want.size(); ++k) {
    same_tokens(want[k].scored, got[k].scored, "sequence " + std::to_string(k) + " scored");
    same_tokens(want[k].sampled, got[k].sampled, "sequence " + std::to_string(k) + " sampled");
    EXPECT_EQ(want[k].draws, got[k].draws) << what << " sequence " << k;
  }
}

// A spread of logits with a few near-ties and a clear favourite, as a model's rows look.
std::vector<float> RandomRows(int64_t rows, int64_t vocab, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(static_cast<size_t>(rows * vocab));
  for (float& v : logits) v = normal(rng);
  for (int64_t r = 0; r < rows; ++r) {
    logits[static_cast<size_t>(r * vocab + (r * 7) % vocab)] += 6.0f;
    logits[static_cast<size_t>(r * vocab + 3)] = logits[static_cast<size_t>(r * vocab + 4)];
  }
  return logits;
}

// Every sampling feature, alone and together, with scored rows and drafts partly accepted.
TEST(SamplingRows, HostRunOfTheDeviceAlgorithmEqualsTheCpuSampler) {
  constexpr int64_t kVocab = 300;
  std::mt19937_64 rng(20261207);
  std::vector<SamplingParams> variants;
  const auto add = [&](auto edit) {
    SamplingParams p;
    p.temperature = 0.8f;
    p.seed = 5;
    edit(p);
    variants.push_back(p);
  };
  add([](SamplingParams& p) { p.temperature = 0.0f; });
  add([](SamplingParams&) {});
  add([](SamplingParams& p) { p.temperature = 1.7f; });
  add([](SamplingParams& p) { p.top_k = 5; });
  add([](SamplingParams& p) { p.top_k = 1; });
  add([](SamplingParams& p) { p.top_p = 0.6f; });
  add([](SamplingParams& p) { p.top_p = 0.05f; });
  add([](SamplingParams& p) { p.min_p = 0.2f; });
  add([](SamplingParams& p) {
    p.top_k = 40;
    p.top_p = 0.9f;
    p.min_p = 0.05f;
  });
  add([](SamplingParams& p) {
    p.repetition_penalty = 1.4f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.7f;
  });
  add([](SamplingParams& p) {
    p.temperature = 0.0f;
    p.repetition_penalty = 2.0f;
  });
  add([](SamplingParams& p) {
    p.logit_bias = {{17, 5.0f}, {17, 2.0f}, {250, -100.0f}, {3, 1.5f}};
    p.top_logprobs = 20;
  });
  add([](SamplingParams& p) {
    p.top_logprobs = 3;
    p.top_p = 0.8f;
    p.frequency_penalty = -1.0f;
  });
  for (size_t v = 0; v < variants.size(); ++v) {
    for (int trial = 0; trial < 12; ++trial) {
      const SamplingParams& p = variants[v];
      StepSampling sampling;
      SequenceSampling scored;  // a prompt chunk's scored rows
      scored.seq_id = 1;
      scored.scored_ids = {static_cast<int32_t>(trial * 11 % kVocab), 4};
      scored.top_logprobs = trial % 4;
      scored.num_rows = 2;
      sampling.sequences.push_back(scored);
      SequenceSampling s;
      s.seq_id = 2;
      s.samples = true;
      s.params = p;
      s.key = 1000 + trial;
      s.draws = trial;
      if (UsesHistory(p)) s.history = {7, 7, 42, 100, 3, static_cast<int32_t>(trial)};
      const int64_t draft_len = trial % 4;
      s.num_rows = 1 + draft_len;
      std::vector<float> logits = RandomRows(2 + s.num_rows, kVocab, rng);
      // The draft: the CPU's own picks for the first rows (accepted), then a miss on the trial's
      // parity, so drafts are verified whole, in part and not at all.
      {
        StepSampling probe = sampling;
        SequenceSampling alone = s;
        for (int64_t i = 0; i < draft_len; ++i) {
          alone.draft = s.draft;
          alone.num_rows = 1 + static_cast<int64_t>(s.draft.size());
          probe.sequences = {scored, alone};
          std::vector<float> prefix(logits.begin(),
                                    logits.begin() + (2 + alone.num_rows) * kVocab);
          absl::StatusOr<std::vector<SequenceSamples>> got = SampleStep(prefix, kVocab, probe);
          ASSERT_TRUE(got.ok()) << got.status();
          int32_t pick = (*got)[1].sampled.back().id;
          if (i == draft_len - 1 && trial % 2 == 1) pick = (pick + 1) % kVocab;
          s.draft.push_back(pick);
        }
      }
      if (v % 3 == 2) {  // structured output: a mask per sampling row, one of them empty
        for (int64_t i = 0; i < s.num_rows; ++i) {
          std::vector<int32_t> mask;
          if (i != 1) {
            mask.assign((kVocab + 31) / 32 - (i % 2), 0);  // a shorter one forbids the rest
            for (int32_t& w : mask) w = static_cast<int32_t>(rng());
            if (i < static_cast<int64_t>(s.draft.size())) {
              const int32_t d = s.draft[static_cast<size_t>(i)];
              if (d / 32 < static_cast<int32_t>(mask.size())) mask[d / 32] |= 1 << (d % 32);
            }
          }
          s.masks.push_back(mask);
        }
      }
      sampling.sequences.push_back(s);
      absl::StatusOr<std::vector<SequenceSamples>> want = SampleStep(logits, kVocab, sampling);
      ASSERT_TRUE(want.ok()) << want.status();
      absl::StatusOr<std::vector<SequenceSamples>> got = ByRows(logits, kVocab, sampling);
      ASSERT_TRUE(got.ok()) << got.status();
      ExpectSame(*want, *got, "variant " + std::to_string(v) + " trial " + std::to_string(trial));
    }
  }
}

// The drafts above do get accepted and rejected (the comparison covers both).
TEST(SamplingRows, AcceptsAVerifiedDraftUpToItsFirstMismatchAndCountsTheDraws) {
  constexpr int64_t kVocab = 64;
  std::vector<float> logits(3 * kVocab, 0.0f);
  logits[0 * kVocab + 9] = 8.0f;
  logits[1 * kVocab + 12] = 8.0f;
  logits[2 * kVocab + 30] = 8.0f;
  StepSampling sampling;
  SequenceSampling s;
  s.seq_id = 7;
  s.samples = true;
  s.params.temperature = 0.5f;
  s.key = 3;
  s.draws = 10;
  s.draft = {9, 13};
  s.num_rows = 3;
  sampling.sequences.push_back(s);
  absl::StatusOr<std::vector<SequenceSamples>> got = ByRows(logits, kVocab, sampling);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ((*got)[0].sampled.size(), 2u);
  EXPECT_EQ((*got)[0].sampled[0].id, 9);
  EXPECT_EQ((*got)[0].sampled[1].id, 12);  // the draft's 13 refused: the target's own token
  EXPECT_EQ((*got)[0].draws, 12u);         // two rows drawn
}

// A rank-0 gather leaves the rows as [world, rows, per_rank] vocabulary slices (the last one
// padded); RowView reads them in place, and the results are those of the rows stored whole.
TEST(SamplingRows, RowsLaidOutAsGatheredSlicesSampleAsRowsStoredWhole) {
  constexpr int64_t kVocab = 100, kWorld = 3, kPerRank = 34, kRows = 3;
  std::mt19937_64 rng(7);
  const std::vector<float> logits = RandomRows(kRows, kVocab, rng);
  std::vector<float> gathered(kWorld * kRows * kPerRank, 123.0f);  // padding never read
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t i = 0; i < kVocab; ++i) {
      gathered[((i / kPerRank) * kRows + r) * kPerRank + i % kPerRank] = logits[r * kVocab + i];
    }
  }
  StepSampling sampling;
  SequenceSampling s;
  s.seq_id = 1;
  s.samples = true;
  s.params.temperature = 0.7f;
  s.params.top_p = 0.9f;
  s.params.top_logprobs = 5;
  s.params.presence_penalty = 1.0f;
  s.history = {4, 50, 99};
  s.key = 11;
  s.draft = {static_cast<int32_t>(kVocab - 1), 2};
  s.num_rows = kRows;
  sampling.sequences.push_back(s);
  absl::StatusOr<SamplingRows> rows = ToSamplingRows(kVocab, sampling);
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::vector<RowSample> whole(kRows), sliced(kRows);
  std::vector<float> work = logits;
  SampleRowsOnHost(work.data(), kVocab, *rows, whole.data());
  const RowArrays arrays{rows->bias_ids.data(), rows->bias_values.data(),
                         rows->penalty_ids.data(), rows->penalty_counts.data(),
                         rows->mask_words.data()};
  std::vector<float> saved(rows->penalty_ids.size());
  HostRowReducer reducer(kVocab);
  for (int64_t r = 0; r < kRows; ++r) {
    SampleRow(reducer, rows->rows[r], arrays, RowView{gathered.data(), r, kRows, kPerRank},
              saved.data(), &sliced[r]);
  }
  for (int64_t r = 0; r < kRows; ++r) {
    EXPECT_EQ(whole[r].id, sliced[r].id) << r;
    EXPECT_EQ(whole[r].logprob, sliced[r].logprob) << r;
    ASSERT_EQ(whole[r].num_top, 5) << r;
    ASSERT_EQ(sliced[r].num_top, 5) << r;
    for (int n = 0; n < 5; ++n) EXPECT_EQ(whole[r].top_ids[n], sliced[r].top_ids[n]) << r;
  }
}

TEST(SamplingRows, MalformedSamplingIsRefusedAsSampleStepRefusesIt) {
  StepSampling sampling;
  SequenceSampling s;
  s.seq_id = 4;
  s.samples = true;
  s.params.temperature = 0.0f;
  s.draft = {1};
  s.num_rows = 1;  // a draft of one needs two rows
  sampling.sequences.push_back(s);
  absl::StatusOr<SamplingRows> rows = ToSamplingRows(16, sampling);
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().message(),
            "sampling: sequence 4: num_rows is 1 but its 0 scored ids and 2 sampling rows make 2");
  std::vector<RowSample> one(1);  // the draft's two rows need two results
  absl::StatusOr<std::vector<SequenceSamples>> assembled = FromRowSamples(sampling, one);
  ASSERT_FALSE(assembled.ok());
  EXPECT_EQ(assembled.status().message(), "sampling: 1 row results for a step of 2 rows");
}

}  // namespace
}  // namespace tpserve
