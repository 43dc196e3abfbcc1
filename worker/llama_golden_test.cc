// SmolLM2-135M-Instruct (Q4_1 GGUF) against llama.cpp on the same token ids: last-prompt
// logits, teacher-forced next-token choices along llama.cpp's 32-token greedy continuation, and
// our own free-running greedy continuation. Golden data: tests/golden/model/
// make_logits_golden.py (llama-cpp-python, f32 KV cache, no flash attention).
//
// Why these tolerances. Both engines quantize activations to 8-bit blocks before every
// Q4_1/Q8_0 product, and a last-ulp difference anywhere (summation order, exp, RoPE angles)
// flips some of those roundings, which 30 layers amplify. Measured on the English prompt
// against an exact f64 numpy forward pass on the same dequantized weights: llama.cpp (f32 KV)
// is off by max 0.90 / rms 0.42 logits, llama.cpp with its default f16 KV by 0.57 / 0.12,
// llama.cpp with flash attention by 0.54 / 0.14, and we by 0.62 / 0.14 (max|logit| 24.9).
// Relative to max|logit|, llama.cpp's own variants differ from the golden run by up to
// max 4.5% / rms 2.2% (f16 KV: 3.2% / 1.5%; flash attention: 4.5% / 2.2%), and we by up to
// 4.6% / 1.6% (English 3.1/1.3, Korean 4.6/1.6, code 2.8/0.7, long 2.3/0.6). So we require
// what llama.cpp's variants satisfy among themselves: the same argmax, max|diff| < 6% and
// rms diff < 2.5% of max|logit|. What that can and cannot see: RoPE theta 1e4 instead of 1e5
// gives 33% / 15% on the long prompt (but only 7.9% / 2.6% on the 13-token English one);
// theta off by 10% stays inside the noise (2.8% / 0.9%). Errors that small are the job of the
// synthetic-model tests against the exact f64 reference (llama_model_test.cc).
// Greedy choices are compared where they are decidable: when llama.cpp's top-2 gap is below
// kNearTieLogits (the size of the disagreement above), either token is a correct greedy pick
// and we only require llama.cpp's token to be within kNearTieLogits of our best. Observed:
// llama.cpp itself (f16 KV, or flash attention) leaves its f32-KV continuation at the same
// near-ties (English step 19, gap 0.07; Korean step 2, gap 0.003).
#include <cmath>
#include <fstream>
#include <iostream>
#include <numeric>
#include <sstream>

#include "comm/communicator.h"
#include "formats/gguf.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/config.h"
#include "nlohmann/json.hpp"
#include "worker/generate.h"
#include "worker/llama_model.h"
#include "model/bundled_model.h"

namespace tpserve {
namespace {

constexpr char kGoldenDir[] = "tests/golden/model/";
constexpr float kMaxDiffTolerance = 6e-2f;  // of max|logit|
constexpr float kRmsDiffTolerance = 2.5e-2f;  // of max|logit|
constexpr float kNearTieLogits = 0.5f;

struct GoldenPrompt {
  std::string name;
  std::vector<int32_t> token_ids;
  std::vector<float> last_logits;
  std::vector<int32_t> continuation;
  std::vector<float> top2_gaps;
};

std::vector<GoldenPrompt> LoadGolden() {
  std::ifstream in(std::string(kGoldenDir) + "golden.json");
  EXPECT_TRUE(in.good()) << "missing " << kGoldenDir << "golden.json";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    ADD_FAILURE() << "golden.json: " << e.what();
    return {};
  }
  std::vector<GoldenPrompt> out;
  for (const auto& p : j["prompts"]) {
    GoldenPrompt g;
    g.name = p["name"].get<std::string>();
    g.token_ids = p["token_ids"].get<std::vector<int32_t>>();
    g.continuation = p["greedy_continuation"].get<std::vector<int32_t>>();
    g.top2_gaps = p["greedy_top2_gaps"].get<std::vector<float>>();
    std::ifstream f(std::string(kGoldenDir) + p["logits_file"].get<std::string>(),
                    std::ios::binary);
    g.last_logits.resize(j["vocab_size"].get<int64_t>());
    f.read(reinterpret_cast<char*>(g.last_logits.data()), g.last_logits.size() * sizeof(float));
    EXPECT_TRUE(f.good()) << "short logits file for " << g.name;
    out.push_back(std::move(g));
  }
  return out;
}

class LlamaGoldenTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::string> path = BundledModelPath();
    ASSERT_TRUE(path.ok()) << path.status();
    auto gguf = GgufFile::Open(*path);
    ASSERT_TRUE(gguf.ok()) << gguf.status();
    gguf_ = gguf->release();
    auto config = ModelSpecFromGguf(*gguf_);
    ASSERT_TRUE(config.ok()) << config.status();
    backend_ = new CpuBackend(CpuBackendOptions{.num_threads = 2});
    comm_ = new SingleRankCommunicator();
    auto model = LlamaModel::Load(*config, *gguf_, {0, 1}, backend_, comm_);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = model->release();
  }
  static void TearDownTestSuite() {
    delete model_;
    delete comm_;
    delete backend_;
    delete gguf_;
  }
  static GgufFile* gguf_;
  static CpuBackend* backend_;
  static SingleRankCommunicator* comm_;
  static LlamaModel* model_;
};

GgufFile* LlamaGoldenTest::gguf_ = nullptr;
CpuBackend* LlamaGoldenTest::backend_ = nullptr;
SingleRankCommunicator* LlamaGoldenTest::comm_ = nullptr;
LlamaModel* LlamaGoldenTest::model_ = nullptr;

// Logits after `prompt` then after each of `forced` (teacher forcing): [1 + forced, vocab].
std::vector<std::vector<float>> ForcedLogits(LlamaModel& model, Backend& backend,
                                             const std::vector<int32_t>& prompt,
                                             const std::vector<int32_t>& forced) {
  auto cache = KvCache::Create(
      model.KvShape(/*num_blocks=*/72, /*block_size_tokens=*/16, DType::kF32), backend);
  EXPECT_TRUE(cache.ok()) << cache.status();
  std::vector<int32_t> table(72);
  std::iota(table.begin(), table.end(), 0);
  const int64_t vocab = model.config().vocab_size;
  std::vector<std::vector<float>> rows;
  std::vector<float> logits;
  const int64_t n = static_cast<int64_t>(prompt.size());
  for (int64_t begin = 0; begin < n; begin += model.max_step_tokens()) {
    const int64_t end = std::min(n, begin + model.max_step_tokens());
    StepBatch step;
    step.Add(/*seq_id=*/0, begin, absl::MakeConstSpan(prompt).subspan(begin, end - begin), table);
    logits.resize(vocab);
    EXPECT_TRUE(model.Forward(step, cache->get(), logits.data()).ok());
  }
  rows.push_back(logits);
  StepBatch step;
  step.Add(/*seq_id=*/0, n, forced, table, std::ssize(forced));
  logits.resize(forced.size() * vocab);
  EXPECT_TRUE(model.Forward(step, cache->get(), logits.data()).ok());
  for (size_t i = 0; i < forced.size(); ++i) {
    rows.emplace_back(logits.begin() + i * vocab, logits.begin() + (i + 1) * vocab);
  }
  return rows;
}

void CheckLastLogits(const GoldenPrompt& g, const std::vector<float>& ours) {
  double max_abs = 0, max_diff = 0, sum_sq = 0;
  for (size_t i = 0; i < g.last_logits.size(); ++i) {
    const double d = std::fabs(g.last_logits[i] - ours[i]);
    max_abs = std::max(max_abs, std::fabs(double{g.last_logits[i]}));
    max_diff = std::max(max_diff, d);
    sum_sq += d * d;
  }
  const double rms = std::sqrt(sum_sq / g.last_logits.size());
  std::cout << g.name << ": " << g.token_ids.size() << " tokens, max|logit| " << max_abs
            << ", vs llama.cpp max|diff| " << max_diff << " (" << max_diff / max_abs
            << "), rms diff " << rms << " (" << rms / max_abs << ")\n";
  EXPECT_LT(max_diff, kMaxDiffTolerance * max_abs) << g.name;
  EXPECT_LT(rms, kRmsDiffTolerance * max_abs) << g.name;
  EXPECT_EQ(ArgMax(ours), ArgMax(g.last_logits)) << g.name;
}

// Along llama.cpp's continuation, our next-token choice must equal llama.cpp's wherever that
// choice was decidable (top-2 gap >= kNearTieLogits), and be a near-tie for us otherwise.
void CheckTeacherForced(const GoldenPrompt& g, const std::vector<std::vector<float>>& rows) {
  for (size_t i = 0; i < g.continuation.size(); ++i) {
    const std::vector<float>& ours = rows[i];
    const int32_t best = ArgMax(ours);
    if (best == g.continuation[i]) continue;
    const float our_gap = ours[best] - ours[g.continuation[i]];
    std::cout << g.name << " step " << i << ": we prefer " << best << " over llama.cpp's "
              << g.continuation[i] << " by " << our_gap << "; llama.cpp's own top-2 gap "
              << g.top2_gaps[i] << "\n";
    EXPECT_LT(g.top2_gaps[i], kNearTieLogits) << g.name << " step " << i;
    EXPECT_LT(our_gap, kNearTieLogits) << g.name << " step " << i;
  }
}

// Free-running greedy must reproduce llama.cpp's tokens up to its first near-tie.
void CheckFreeRunning(const GoldenPrompt& g, const std::vector<int32_t>& ours) {
  size_t decidable = 0;
  while (decidable < g.continuation.size() && g.top2_gaps[decidable] >= kNearTieLogits) {
    ++decidable;
  }
  size_t same = 0;
  while (same < ours.size() && ours[same] == g.continuation[same]) ++same;
  std::cout << g.name << ": free-running greedy equals llama.cpp for " << same << " of "
            << g.continuation.size() << " tokens (first near-tie at " << decidable << ")\n";
  EXPECT_GE(same, decidable) << g.name;
}

TEST_F(LlamaGoldenTest, LogitsAndGreedyChoicesMatchLlamaCpp) {
  ASSERT_NE(model_, nullptr);
  const std::vector<GoldenPrompt> golden = LoadGolden();
  ASSERT_EQ(golden.size(), 4u);
  for (const GoldenPrompt& g : golden) {
    const std::vector<int32_t> forced(g.continuation.begin(), g.continuation.end() - 1);
    const std::vector<std::vector<float>> rows = ForcedLogits(*model_, *backend_, g.token_ids, forced);
    ASSERT_EQ(rows.size(), g.continuation.size());
    CheckLastLogits(g, rows[0]);
    CheckTeacherForced(g, rows);

    auto cache = KvCache::Create(
        model_->KvShape(/*num_blocks=*/72, /*block_size_tokens=*/16, DType::kF32), *backend_);
    ASSERT_TRUE(cache.ok()) << cache.status();
    absl::StatusOr<GenerateResult> r = GenerateGreedy(
        *model_, cache->get(), g.token_ids,
        {.max_new_tokens = static_cast<int64_t>(g.continuation.size())});
    ASSERT_TRUE(r.ok()) << r.status();
    CheckFreeRunning(g, r->tokens);
  }
}

}  // namespace
}  // namespace tpserve
