// The bundled models, SmolLM2-135M-Instruct (Q4_1 GGUF, Llama) and Gemma 3 270M (Q4_K_M GGUF:
// sliding-window layers, QK-norm, GeGLU, sandwich norms), against llama.cpp on the same token
// ids: last-prompt logits, teacher-forced next-token choices along llama.cpp's 32-token greedy
// continuation, and our own free-running greedy continuation. Golden data: tests/golden/model/
// (and gemma3/) from make_logits_golden.py (llama-cpp-python, f32 KV cache, no flash attention).
// The tolerances below were measured on SmolLM2; Gemma 3 has its own, measured the same way
// (see kGemma3).
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
// rms diff < 2.5% of max|logit| (3% since the Q4_1 row-group kernels, see below). What that
// can and cannot see: RoPE theta 1e4 instead of 1e5 gives 33% / 15% on the long prompt (but only 7.9% / 2.6% on the 13-token English one);
// theta off by 10% stays inside the noise (2.8% / 0.9%). Errors that small are the job of the
// synthetic-model tests against the exact f64 reference (llama_model_test.cc).
// The row-group Q4_1 kernels (2026-12-07) sum each block's exact integer dot once, where the
// earlier ones (and llama.cpp) sum 8 partial lanes: a different rounding pattern, not a worse
// one. The English prompt went to 5.3% / 2.51% (long 2.2/0.55, Korean 3.0/0.66, code 3.1/0.71),
// while against the exact F32 forward pass of the same weights (bench/accuracy_main.cc, 2
// windows of English and Korean) the mean KL went from 0.002883 / 0.005389 to 0.002804 /
// 0.005067, beside llama.cpp's 0.002770 / 0.005257 on the same Q4_1 file. One 13-token
// prompt's logits follow the rounding pattern; so the rms bound is 3%.
// Greedy choices are compared where they are decidable: when llama.cpp's top-2 gap is below
// kNearTieLogits (the size of the disagreement above), either token is a correct greedy pick
// and we only require llama.cpp's token to be within kNearTieLogits of our best. Observed:
// llama.cpp itself (f16 KV, or flash attention) leaves its f32-KV continuation at the same
// near-ties (English step 19, gap 0.07; Korean step 2, gap 0.003).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <numeric>
#include <sstream>

#include "comm/communicator.h"
#include "formats/dtype.h"
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

constexpr float kMaxDiffTolerance = 6e-2f;  // of max|logit|
constexpr float kRmsDiffTolerance = 3e-2f;  // of max|logit| (2.5% before the row-group kernels)
constexpr float kNearTieLogits = 0.5f;

struct Bundled {
  const char* name;        // BundledModelPath's
  const char* golden_dir;  // with golden.json
  float max_diff = kMaxDiffTolerance;  // of max|logit|
  float rms_diff = kRmsDiffTolerance;
};

// Gemma 3 270M: llama.cpp's own variants differ from its golden run (f32 KV, 2 threads) by up
// to max 9.2% / rms 3.9% of max|logit| (default f16 KV, code prompt) and 7.0% / 1.8% (flash
// attention), measured 2026-12-06 with llama-cpp-python 0.3.36; we differ by up to 6.3% / 1.6%
// (code prompt; English 3.6/0.8, Korean 3.7/1.1, long 3.6/0.9). So the same rule as SmolLM2's
// (what llama.cpp's variants satisfy among themselves): 10% / 4%.
constexpr Bundled kSmolLM2{"smollm2", "tests/golden/model/"};
constexpr Bundled kGemma3{"gemma3-270m", "tests/golden/model/gemma3/", 0.10f, 0.04f};

struct GoldenPrompt {
  std::string name;
  std::vector<int32_t> token_ids;
  std::vector<float> last_logits;
  std::vector<int32_t> continuation;
  std::vector<float> top2_gaps;
};

std::vector<GoldenPrompt> LoadGolden(const std::string& dir) {
  std::ifstream in(dir + "golden.json");
  EXPECT_TRUE(in.good()) << "missing " << dir << "golden.json";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    ADD_FAILURE() << "golden.json: " << e.what();
    return {};
  }
  std::vector<GoldenPrompt> out;
  const bool f16 = j.value("logits_dtype", "f32") == "f16";  // Gemma 3's 262,144 logits
  for (const auto& p : j["prompts"]) {
    GoldenPrompt g;
    g.name = p["name"].get<std::string>();
    g.token_ids = p["token_ids"].get<std::vector<int32_t>>();
    g.continuation = p["greedy_continuation"].get<std::vector<int32_t>>();
    g.top2_gaps = p["greedy_top2_gaps"].get<std::vector<float>>();
    std::ifstream f(dir + p["logits_file"].get<std::string>(), std::ios::binary);
    g.last_logits.resize(j["vocab_size"].get<int64_t>());
    if (f16) {
      std::vector<uint16_t> half(g.last_logits.size());
      f.read(reinterpret_cast<char*>(half.data()), half.size() * sizeof(uint16_t));
      for (size_t i = 0; i < half.size(); ++i) g.last_logits[i] = F16ToF32(half[i]);
    } else {
      f.read(reinterpret_cast<char*>(g.last_logits.data()),
             g.last_logits.size() * sizeof(float));
    }
    EXPECT_TRUE(f.good()) << "short logits file for " << g.name;
    out.push_back(std::move(g));
  }
  return out;
}

class LlamaGoldenTest : public ::testing::TestWithParam<Bundled> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> path = BundledModelPath(GetParam().name);
    ASSERT_TRUE(path.ok()) << path.status();
    auto gguf = GgufFile::Open(*path);
    ASSERT_TRUE(gguf.ok()) << gguf.status();
    gguf_ = *std::move(gguf);
    auto config = ModelSpecFromGguf(*gguf_);
    ASSERT_TRUE(config.ok()) << config.status();
    backend_ = std::make_unique<CpuBackend>(CpuBackendOptions{.num_threads = 2});
    comm_ = std::make_unique<SingleRankCommunicator>();
    auto model = LlamaModel::Load(*config, *gguf_, {0, 1}, backend_.get(), comm_.get());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
  }
  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<CpuBackend> backend_;
  std::unique_ptr<SingleRankCommunicator> comm_;
  std::unique_ptr<LlamaModel> model_;
};

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
  for (int64_t begin = 0; begin < n; begin += model.max_tokens_per_step()) {
    const int64_t end = std::min(n, begin + model.max_tokens_per_step());
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

void CheckLastLogits(const Bundled& b, const GoldenPrompt& g, const std::vector<float>& ours) {
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
  EXPECT_LT(max_diff, b.max_diff * max_abs) << g.name;
  EXPECT_LT(rms, b.rms_diff * max_abs) << g.name;
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

TEST_P(LlamaGoldenTest, LogitsAndGreedyChoicesMatchLlamaCpp) {
  ASSERT_NE(model_, nullptr);
  const std::vector<GoldenPrompt> golden = LoadGolden(GetParam().golden_dir);
  ASSERT_EQ(golden.size(), 4u);
  for (const GoldenPrompt& g : golden) {
    const std::vector<int32_t> forced(g.continuation.begin(), g.continuation.end() - 1);
    const std::vector<std::vector<float>> rows = ForcedLogits(*model_, *backend_, g.token_ids, forced);
    ASSERT_EQ(rows.size(), g.continuation.size());
    CheckLastLogits(GetParam(), g, rows[0]);
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

// Batch invariance on the real models: each golden prompt's last logits and its decode step
// are the same floats alone as prefilled and decoded in one step with the others.
TEST_P(LlamaGoldenTest, PromptsBatchedEqualPromptsAlone) {
  ASSERT_NE(model_, nullptr);
  std::vector<GoldenPrompt> golden = LoadGolden(GetParam().golden_dir);
  golden.erase(std::remove_if(golden.begin(), golden.end(),
                              [](const GoldenPrompt& g) { return g.token_ids.size() > 100; }),
               golden.end());  // the 1,000-token prompt is left to the test above
  ASSERT_GE(golden.size(), 3u);
  auto cache = KvCache::Create(model_->KvShape(/*num_blocks=*/48, /*block_size_tokens=*/16,
                                               DType::kF32),
                               *backend_);
  ASSERT_TRUE(cache.ok()) << cache.status();
  const int64_t vocab = model_->config().vocab_size;
  auto table = [](size_t i) {
    std::vector<int32_t> t(4);
    std::iota(t.begin(), t.end(), static_cast<int32_t>(4 * i));
    return t;
  };
  auto run = [&](const StepBatch& step) {
    std::vector<float> logits(step.num_logit_rows() * vocab);
    const absl::Status s = model_->Forward(step, cache->get(), logits.data());
    EXPECT_TRUE(s.ok()) << s;
    return logits;
  };
  std::vector<float> alone;
  for (size_t i = 0; i < golden.size(); ++i) {
    StepBatch prefill;
    prefill.Add(static_cast<int64_t>(i), 0, golden[i].token_ids, table(i));
    const std::vector<float> last = run(prefill);
    StepBatch decode;
    decode.Add(static_cast<int64_t>(i), std::ssize(golden[i].token_ids),
               std::vector<int32_t>{golden[i].continuation[0]}, table(i));
    const std::vector<float> next = run(decode);
    alone.insert(alone.end(), last.begin(), last.end());
    alone.insert(alone.end(), next.begin(), next.end());
  }
  StepBatch prefill, decode;
  for (size_t i = 0; i < golden.size(); ++i) {
    prefill.Add(static_cast<int64_t>(i), 0, golden[i].token_ids, table(i));
    decode.Add(static_cast<int64_t>(i), std::ssize(golden[i].token_ids),
               std::vector<int32_t>{golden[i].continuation[0]}, table(i));
  }
  const std::vector<float> last = run(prefill), next = run(decode);
  std::vector<float> together;
  for (size_t i = 0; i < golden.size(); ++i) {
    together.insert(together.end(), last.begin() + i * vocab, last.begin() + (i + 1) * vocab);
    together.insert(together.end(), next.begin() + i * vocab, next.begin() + (i + 1) * vocab);
  }
  EXPECT_EQ(together, alone) << GetParam().name;
}

INSTANTIATE_TEST_SUITE_P(
    Bundled, LlamaGoldenTest,
    ::testing::Values(kSmolLM2, kGemma3),
    [](const ::testing::TestParamInfo<Bundled>& info) {
      return std::string(info.param.name == std::string("smollm2") ? "SmolLM2" : "Gemma3");
    });

}  // namespace
}  // namespace tpserve
