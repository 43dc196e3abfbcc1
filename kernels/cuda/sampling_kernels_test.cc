// The device sampler on a GPU (skips without one) against its own algorithm run on the host
// (SampleRowsOnHost, which sampling_rows_test checks against the CPU sampler): every row kind
// and sampling feature, over a 128,256-id vocabulary stored whole and as the eight 16,032-id
// slices a TP-8 gather leaves on rank 0. The same ids; logprobs within the rounding of a sum
// taken in another order. Prints the kernel's time for 256 top-p rows (a figure for
// docs/PERFORMANCE.md, not a check).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/row_sampling.h"

namespace tpserve {
namespace {

constexpr int64_t kVocab = 128256, kWorld = 8, kPerRank = 16032;

std::vector<float> Logits(int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 2.5f);
  std::vector<float> v(rows * kVocab);
  for (float& x : v) x = d(rng);
  for (int64_t r = 0; r < rows; ++r) v[r * kVocab + (r * 977) % kVocab] += 9.0f;
  return v;
}

// Rows of every kind: greedy, temperature, top-k, top-p, min-p, the three together, penalties,
// logit bias, a structured-output mask, scored rows, alternatives.
SamplingRows Rows(int64_t n) {
  SamplingRows rows;
  for (int64_t r = 0; r < n; ++r) {
    SamplingRow row;
    row.key = 1000 + r;
    row.draw = r;
    row.temperature = 0.8f;
    row.top_n = r % 3 == 0 ? 5 : 0;
    switch (r % 10) {
      case 0: row.temperature = 0.0f; break;
      case 1: break;
      case 2: row.top_k = 50; break;
      case 3: row.top_p = 0.9f; break;
      case 4: row.min_p = 0.05f; break;
      case 5: row.top_k = 40; row.top_p = 0.8f; row.min_p = 0.02f; break;
      case 6:
        row.repetition_penalty = 1.3f;
        row.frequency_penalty = 0.5f;
        row.penalty_begin = static_cast<int32_t>(rows.penalty_ids.size());
        for (int32_t id = 0; id < 300; ++id) {
          rows.penalty_ids.push_back(id * 401 % kVocab);
          rows.penalty_counts.push_back(1 + id % 3);
        }
        row.penalty_end = static_cast<int32_t>(rows.penalty_ids.size());
        break;
      case 7:
        rows.bias_ids = {5, 77, 5};  // every such row shares these three (duplicates add)
        rows.bias_values = {4.0f, -100.0f, 3.0f};
        row.bias_begin = 0;
        row.bias_end = 3;
        break;
      case 8: {
        row.mask_begin = static_cast<int32_t>(rows.mask_words.size());
        row.mask_word_count = static_cast<int32_t>((kVocab + 31) / 32 - 7);
        std::mt19937 rng(static_cast<uint32_t>(r));
        for (int32_t w = 0; w < row.mask_word_count; ++w) {
          rows.mask_words.push_back(static_cast<int32_t>(rng() & rng()));
        }
        break;
      }
      case 9:
        row.kind = RowKind::kScore;
        row.scored_id = static_cast<int32_t>(r * 31 % kVocab);
        row.top_n = 20;
        break;
    }
    rows.rows.push_back(row);
  }
  return rows;
}

// The host's results for the rows laid out whole.
std::vector<RowSample> OnHost(const std::vector<float>& logits, const SamplingRows& rows) {
  std::vector<float> work = logits;
  std::vector<RowSample> out(rows.rows.size());
  SampleRowsOnHost(work.data(), kVocab, rows, out.data());
  return out;
}

void ExpectClose(const std::vector<RowSample>& want, const std::vector<RowSample>& got,
                 const char* layout) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t r = 0; r < want.size(); ++r) {
    EXPECT_EQ(want[r].id, got[r].id) << layout << " row " << r;
    EXPECT_NEAR(want[r].logprob, got[r].logprob, 1e-5f) << layout << " row " << r;
    ASSERT_EQ(want[r].num_top, got[r].num_top) << layout << " row " << r;
    for (int32_t n = 0; n < want[r].num_top; ++n) {
      EXPECT_EQ(want[r].top_ids[n], got[r].top_ids[n]) << layout << " row " << r << " alt " << n;
      EXPECT_NEAR(want[r].top_logprobs[n], got[r].top_logprobs[n], 1e-5f) << layout << " row " << r;
    }
  }
}

class SamplingKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::StatusOr<int> devices = CudaDeviceCount();
    if (!devices.ok() || *devices == 0) GTEST_SKIP() << "no CUDA device";
    absl::StatusOr<std::unique_ptr<Backend>> be = CreateCudaBackend(0, {});
    ASSERT_TRUE(be.ok()) << be.status();
    be_ = std::move(*be);
    ASSERT_TRUE(be_->PrefersSampleRows());
  }

  // Uploads `host` (laid out as given), samples `rows` on the device.
  std::vector<RowSample> OnDevice(const std::vector<float>& host, int64_t per_rank,
                                  int64_t layout_rows, const SamplingRows& rows) {
    absl::StatusOr<DeviceBuffer> buf = be_->Allocate(host.size() * sizeof(float), "logits");
    EXPECT_TRUE(buf.ok()) << buf.status();
    be_->CopyToDevice(buf->data(), host.data(), host.size() * sizeof(float));
    std::vector<RowSample> out(rows.rows.size());
    const absl::Status s = be_->SampleRows(buf->as<float>(), kVocab, per_rank, layout_rows, rows,
                                           absl::MakeSpan(out));
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }

  std::unique_ptr<Backend> be_;
};

TEST_F(SamplingKernelsTest, RowsStoredWholeSampleAsOnTheHost) {
  constexpr int64_t kRows = 40;
  const std::vector<float> logits = Logits(kRows, 1);
  const SamplingRows rows = Rows(kRows);
  ExpectClose(OnHost(logits, rows), OnDevice(logits, kVocab, kRows, rows), "whole");
}

TEST_F(SamplingKernelsTest, GatheredSlicesOfEightRanksSampleAsOnTheHost) {
  constexpr int64_t kRows = 20, kLayoutRows = 24;  // a bucket of 24 rows, 20 of them wanted
  const std::vector<float> logits = Logits(kRows, 2);
  std::vector<float> gathered(kWorld * kLayoutRows * kPerRank, 0.0f);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t i = 0; i < kVocab; ++i) {
      gathered[((i / kPerRank) * kLayoutRows + r) * kPerRank + i % kPerRank] =
          logits[r * kVocab + i];
    }
  }
  const SamplingRows rows = Rows(kRows);
  ExpectClose(OnHost(logits, rows), OnDevice(gathered, kPerRank, kLayoutRows, rows), "gathered");
}

TEST_F(SamplingKernelsTest, ReportsTheTimeOf256TopPRows) {
  constexpr int64_t kRows = 256;
  const std::vector<float> logits = Logits(kRows, 3);
  SamplingRows rows;
  for (int64_t r = 0; r < kRows; ++r) {
    SamplingRow row;
    row.temperature = 0.7f;
    row.top_p = 0.9f;
    row.key = r;
    rows.rows.push_back(row);
  }
  absl::StatusOr<DeviceBuffer> buf = be_->Allocate(logits.size() * sizeof(float), "logits");
  ASSERT_TRUE(buf.ok()) << buf.status();
  std::vector<RowSample> out(kRows);
  double best = 1e9;
  for (int i = 0; i < 5; ++i) {
    be_->CopyToDevice(buf->data(), logits.data(), logits.size() * sizeof(float));
    ASSERT_TRUE(be_->Synchronize().ok());
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(be_->SampleRows(buf->as<float>(), kVocab, kVocab, kRows, rows,
                                absl::MakeSpan(out)).ok());
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                              .count());
  }
  std::printf("sampling_kernels_test: 256 rows, top-p 0.9, vocab %lld: best of 5 %.3f ms "
              "(upload, kernel, results back)\n",
              static_cast<long long>(kVocab), best * 1e3);
  EXPECT_GE(out[0].id, 0);
}

}  // namespace
}  // namespace tpserve
