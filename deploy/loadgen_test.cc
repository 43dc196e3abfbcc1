// Statistics, workload and report of the load generator, against hand-computed values.
#include "deploy/loadgen.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "deploy/loadgen_report.h"
#include "deploy/loadgen_workload.h"

namespace tpserve {
namespace {

constexpr double kTol = 1e-9;

TEST(PercentileTest, InterpolatesLinearlyBetweenClosestRanks) {
  const std::vector<double> v = {40, 15, 50, 35, 20};  // sorted: 15 20 35 40 50
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 15);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 35);     // rank 2
  EXPECT_NEAR(Percentile(v, 90), 46.0, kTol);  // rank 3.6: 40 + 0.6 * 10
  EXPECT_NEAR(Percentile(v, 99), 49.6, kTol);  // rank 3.96: 40 + 0.96 * 10
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 50);
  EXPECT_DOUBLE_EQ(Percentile({1, 2}, 50), 1.5);
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
  EXPECT_TRUE(std::isnan(Percentile({}, 50)));
}

TEST(RecordMessageTest, SplitsAMultiTokenGapEvenlyAndIgnoresTokenlessMessages) {
  RequestRecord r;
  RecordMessage(0.10, 1, &r);
  RecordMessage(0.15, 1, &r);
  RecordMessage(0.25, 2, &r);  // two tokens after 0.10 s: two gaps of 0.05 s
  RecordMessage(0.30, 0, &r);  // the closing message with usage only
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.10);
  ASSERT_EQ(r.itl_s.size(), 3u);
  for (double gap : r.itl_s) EXPECT_NEAR(gap, 0.05, kTol);
  EXPECT_EQ(r.output_tokens, 4);
  EXPECT_EQ(r.multi_token_messages, 1);
  EXPECT_DOUBLE_EQ(r.last_token_s, 0.25);
}

TEST(RecordMessageTest, ExtraTokensOfTheFirstMessageGiveNoItlSample) {
  RequestRecord r;
  RecordMessage(0.2, 3, &r);
  RecordMessage(0.3, 1, &r);
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.2);
  ASSERT_EQ(r.itl_s.size(), 1u);
  EXPECT_NEAR(r.itl_s[0], 0.1, kTol);
  EXPECT_EQ(r.output_tokens, 4);
  EXPECT_EQ(r.multi_token_messages, 1);
}

RequestRecord Ok(double ttft_s, std::vector<double> itl_s, double e2e_s, int out, int wanted,
                 int prompt) {
  RequestRecord r;
  r.ttft_s = ttft_s;
  r.itl_s = std::move(itl_s);
  r.e2e_s = e2e_s;
  r.output_tokens = out;
  r.wanted_output_tokens = wanted;
  r.prompt_tokens = prompt;
  return r;
}

RequestRecord Failed(const std::string& code) {
  RequestRecord r;
  r.status = code;
  r.e2e_s = 9.0;  // must not count
  return r;
}

// Three successes and three failures over a 4 s window.
std::vector<RequestRecord> Records() {
  return {Ok(0.5, {0.05, 0.05, 0.20}, 1.0, 4, 4, 10),  // ITL mean 100 ms, p90 170 ms
          Ok(1.5, {0.1}, 2.0, 2, 4, 20),               // TTFT too slow; short
          Failed("UNAVAILABLE"),
          Ok(0.2, {}, 0.3, 1, 1, 5),  // one token: no ITL sample
          Failed("DEADLINE_EXCEEDED"),
          Failed("UNAVAILABLE")};
}

TEST(SummarizeTest, LatenciesThroughputAndFailuresByCode) {
  const LoadSummary s = Summarize(Records(), 4.0, Slo{1000, 120, ItlStat::kMean});
  EXPECT_EQ(s.requests, 6);
  EXPECT_EQ(s.requests_ok, 3);
  EXPECT_EQ(s.requests_failed, 3);
  EXPECT_EQ(s.failures,
            (std::map<std::string, int64_t>{{"DEADLINE_EXCEEDED", 1}, {"UNAVAILABLE", 2}}));
  EXPECT_EQ(s.prompt_tokens, 35);
  EXPECT_EQ(s.output_tokens, 7);
  EXPECT_EQ(s.short_requests, 1);
  EXPECT_NEAR(s.requests_per_s, 0.75, kTol);
  EXPECT_NEAR(s.output_tokens_per_s, 1.75, kTol);
  // TTFT ms {200, 500, 1500}
  EXPECT_EQ(s.ttft_ms.count, 3);
  EXPECT_NEAR(s.ttft_ms.mean, 2200.0 / 3, kTol);
  EXPECT_NEAR(s.ttft_ms.p50, 500, kTol);
  EXPECT_NEAR(s.ttft_ms.p90, 1300, kTol);  // rank 1.8
  EXPECT_NEAR(s.ttft_ms.p99, 1480, kTol);  // rank 1.98
  // ITL ms pooled {50, 50, 100, 200}
  EXPECT_EQ(s.itl_ms.count, 4);
  EXPECT_NEAR(s.itl_ms.mean, 100, kTol);
  EXPECT_NEAR(s.itl_ms.p50, 75, kTol);   // rank 1.5
  EXPECT_NEAR(s.itl_ms.p90, 170, kTol);  // rank 2.7
  EXPECT_NEAR(s.itl_ms.p99, 197, kTol);  // rank 2.97
  // E2E ms {300, 1000, 2000}: failures are not in it
  EXPECT_NEAR(s.e2e_ms.mean, 1100, kTol);
  EXPECT_NEAR(s.e2e_ms.p50, 1000, kTol);
  EXPECT_NEAR(s.e2e_ms.p90, 1800, kTol);
}

TEST(GoodputTest, MeanItlSlo) {
  // Good: request 0 (TTFT 500, mean ITL 100 <= 120) and 3 (no ITL sample); 1 has TTFT 1500.
  const LoadSummary s = Summarize(Records(), 4.0, Slo{1000, 120, ItlStat::kMean});
  EXPECT_EQ(s.good_requests, 2);
  EXPECT_NEAR(s.goodput_requests_per_s, 0.5, kTol);
}

TEST(GoodputTest, P90ItlSlo) {
  // Request 0's p90 ITL is 170 ms > 150: only request 3 is good.
  const LoadSummary s = Summarize(Records(), 4.0, Slo{1000, 150, ItlStat::kP90});
  EXPECT_EQ(s.good_requests, 1);
  EXPECT_NEAR(s.goodput_requests_per_s, 0.25, kTol);
  EXPECT_NEAR(RequestItl(Records()[0], ItlStat::kP90), 0.17, kTol);
}

TEST(GoodputTest, LimitsOfZeroAreNotCheckedButFailuresNeverCount) {
  const LoadSummary s = Summarize(Records(), 4.0, Slo{0, 0, ItlStat::kMean});
  EXPECT_EQ(s.good_requests, 3);
  RequestRecord no_token = Ok(-1, {}, 1.0, 0, 4, 3);
  EXPECT_FALSE(IsGood(no_token, Slo{}));
}

TEST(GoodputTest, ItlStatNames) {
  EXPECT_EQ(*ParseItlStat("p90"), ItlStat::kP90);
  EXPECT_EQ(ParseItlStat("p99").status().message(),
            "--slo_itl_stat = \"p99\" must be \"mean\" or \"p90\"");
}

TEST(WorkloadTest, SplitMix64MatchesTheReferenceSequence) {
  SplitMix64 rng(0);
  EXPECT_EQ(rng.Next(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(rng.Next(), 0x6E789E6AA1B965F4ull);
}

TEST(WorkloadTest, ParsesLengthMixesAndNamesTheFlagOnErrors) {
  absl::StatusOr<LengthMix> one = ParseLengthMix("200", "--prompt_tokens");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->buckets, (std::vector<std::pair<int32_t, double>>{{200, 1.0}}));
  absl::StatusOr<LengthMix> mix = ParseLengthMix("64:1,512:3", "--prompt_tokens");
  ASSERT_TRUE(mix.ok());
  EXPECT_EQ(mix->Pick(0.0), 64);
  EXPECT_EQ(mix->Pick(0.2499), 64);
  EXPECT_EQ(mix->Pick(0.25), 512);  // cumulative share 1/4 is the first bucket's end
  EXPECT_EQ(mix->Max(), 512);
  EXPECT_EQ(ParseLengthMix("64:abc", "--output_tokens").status().message(),
            "--output_tokens = \"64:abc\": weight \"abc\" is not a number > 0 (want TOKENS or "
            "TOKENS:WEIGHT,TOKENS:WEIGHT,...)");
  EXPECT_EQ(ParseLengthMix("0", "--prompt_tokens").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParseLengthMix("", "--prompt_tokens").ok());
  EXPECT_FALSE(ParseLengthMix("64:-1", "--prompt_tokens").ok());
}

// The same goldens as selftest() in bench/llama_cpp_loadgen.py: both sides send one workload.
TEST(WorkloadTest, SameRequestsAsThePythonPeer) {
  Workload plain(*ParseLengthMix("200", "p"), *ParseLengthMix("128", "o"), 0.0, 1);
  WorkloadRequest first = plain.Next();
  EXPECT_EQ(first.index, 0);
  EXPECT_EQ(first.prompt_tokens, 200);
  EXPECT_EQ(first.output_tokens, 128);
  EXPECT_EQ(first.arrival_gap_s, 0.0);
  std::vector<std::string> words = absl::StrSplit(first.prompt, ' ');
  ASSERT_EQ(words.size(), 200u);
  EXPECT_EQ(std::vector<std::string>(words.begin(), words.begin() + 6),
            (std::vector<std::string>{"as", "during", "the", "more", "most", "first"}));

  Workload mixed(*ParseLengthMix("64:0.5,512:0.5", "p"), *ParseLengthMix("32:1,128:3", "o"), 2.0,
                 7);
  const int want[4][2] = {{64, 32}, {512, 128}, {512, 32}, {64, 32}};
  const double gaps[4] = {1.155110489, 1.54048939, 0.259015696, 0.042028695};
  for (int i = 0; i < 4; ++i) {
    WorkloadRequest r = mixed.Next();
    EXPECT_EQ(r.prompt_tokens, want[i][0]) << i;
    EXPECT_EQ(r.output_tokens, want[i][1]) << i;
    EXPECT_NEAR(r.arrival_gap_s, gaps[i], 1e-9) << i;
  }
}

TEST(ReportTest, TableAndJsonCarryTheSameFigures) {
  const std::vector<RequestRecord> records = Records();
  const LoadSummary s = Summarize(records, 4.0, Slo{1000, 120, ItlStat::kMean});
  RunInfo info;
  info.tool = "tpserve";
  info.target = "127.0.0.1:1";
  info.concurrency = 2;
  info.prompt_tokens = "200";
  info.output_tokens = "4";
  const std::string table = RenderTable(info, s);
  EXPECT_NE(table.find("requests 6: 3 ok, 3 failed; window 4.000 s\n"), std::string::npos) << table;
  EXPECT_NE(table.find("TTFT       733.3     500.0    1300.0    1480.0         3\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("failures: DEADLINE_EXCEEDED 1, UNAVAILABLE 2\n"), std::string::npos);
  EXPECT_NE(table.find("goodput: 2 of 6 requests good, 0.500 requests/s (TTFT <= 1000 ms and "
                       "per-request mean ITL <= 120 ms)"),
            std::string::npos)
      << table;

  const nlohmann::json j = nlohmann::json::parse(RunToJson(info, s, records).dump());
  EXPECT_EQ(j["summary"]["requests_failed"], 3);
  EXPECT_EQ(j["summary"]["failures"]["UNAVAILABLE"], 2);
  EXPECT_NEAR(j["summary"]["itl_ms"]["p90"].get<double>(), 170, kTol);
  EXPECT_EQ(j["requests"].size(), 6u);
  EXPECT_TRUE(j["requests"][3]["itl_mean_ms"].is_null());  // one token, no ITL
  EXPECT_TRUE(j["requests"][2]["ttft_ms"].is_null());      // failed before a token
  EXPECT_EQ(j["requests"][0]["good"], true);
  EXPECT_EQ(j["config"]["slo_itl_stat"], "mean");
}

}  // namespace
}  // namespace tpserve
