// Backend::SampleRows on a host-memory backend (the default: the device sampler's passes on the
// host): a TP gather's slice layout read in place gives what the rows stored whole give, and
// malformed arguments are refused naming the value and the bound.
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/row_sampling.h"

namespace tpserve {
namespace {

constexpr int64_t kVocab = 70, kPerRank = 24, kWorld = 3, kRows = 4, kLayoutRows = 5;

SamplingRows Rows() {
  SamplingRows rows;
  rows.bias_ids = {1, 69};
  rows.bias_values = {2.0f, 3.0f};
  rows.penalty_ids = {4, 9};
  rows.penalty_counts = {2, 1};
  for (int64_t r = 0; r < kRows; ++r) {
    SamplingRow row;
    row.temperature = r == 0 ? 0.0f : 0.9f;
    row.top_p = r == 2 ? 0.7f : 1.0f;
    row.key = 9;
    row.draw = r;
    row.top_n = 3;
    row.bias_end = 2;
    row.penalty_end = r == 3 ? 2 : 0;
    row.presence_penalty = 1.0f;
    rows.rows.push_back(row);
  }
  return rows;
}

TEST(SampleRows, AGatheredLayoutOnTheCpuBackendSamplesAsRowsStoredWhole) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> whole(kRows * kVocab);
  for (float& v : whole) v = d(rng);
  std::vector<float> gathered(kWorld * kLayoutRows * kPerRank, 0.0f);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t i = 0; i < kVocab; ++i) {
      gathered[((i / kPerRank) * kLayoutRows + r) * kPerRank + i % kPerRank] = whole[r * kVocab + i];
    }
  }
  const SamplingRows rows = Rows();
  std::vector<RowSample> want(kRows), got(kRows);
  SampleRowsOnHost(whole.data(), kVocab, rows, want.data());
  CpuBackend be(CpuBackendOptions{.num_threads = 1});
  EXPECT_FALSE(be.PrefersSampleRows());  // SampleStep is quicker where logits are on the host
  ASSERT_TRUE(
      be.SampleRows(gathered.data(), kVocab, kPerRank, kLayoutRows, rows, absl::MakeSpan(got))
          .ok());
  for (int64_t r = 0; r < kRows; ++r) {
    EXPECT_EQ(want[r].id, got[r].id) << r;
    EXPECT_EQ(want[r].logprob, got[r].logprob) << r;
    ASSERT_EQ(got[r].num_top, 3) << r;
    for (int n = 0; n < 3; ++n) EXPECT_EQ(want[r].top_ids[n], got[r].top_ids[n]) << r;
  }
}

TEST(SampleRows, MalformedArgumentsAreRefusedNamingTheValueAndTheBound) {
  CpuBackend be(CpuBackendOptions{.num_threads = 1});
  std::vector<float> logits(kLayoutRows * kVocab, 0.0f);
  SamplingRows rows = Rows();
  std::vector<RowSample> out(kRows - 1);
  absl::Status s = be.SampleRows(logits.data(), kVocab, kVocab, kLayoutRows, rows,
                                 absl::MakeSpan(out));
  EXPECT_EQ(s.message(), "SampleRows: 3 results for 4 rows");
  out.resize(kRows);
  s = be.SampleRows(logits.data(), kVocab, kVocab, 2, rows, absl::MakeSpan(out));
  EXPECT_EQ(s.message(),
            "SampleRows: 4 rows of vocab 70 in a layout of 2 rows and slices of 70 ids");
  rows.rows[2].mask_begin = 0;
  rows.rows[2].mask_word_count = 3;  // no mask words at all
  s = be.SampleRows(logits.data(), kVocab, kVocab, kLayoutRows, rows, absl::MakeSpan(out));
  EXPECT_EQ(s.message(),
            "SampleRows: row 2 (bias [0, 2), penalties [0, 0), mask 0 + 3, top_n 3, scored id -1) "
            "reaches outside its arrays (2 biases, 2 penalties, 0 mask words, vocab 70)");
}

}  // namespace
}  // namespace tpserve
