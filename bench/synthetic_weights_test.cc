// The synthetic checkpoint: its random values, its tensors, and the benchmark's timing path
// through the real loader on the CPU backend (quantize on load to fp8 included).
#include "bench/synthetic_weights.h"

#include <cmath>
#include <set>

#include "bench/model_timings.h"
#include "comm/communicator.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "worker/llama_model.h"

namespace tpserve {
namespace {

ModelSpec Tiny() {
  ModelSpec c = *ModelSpecPreset("llama-3.1-8b");
  c.num_layers = 2;
  c.hidden_size = 128;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 32;
  c.intermediate_size = 256;
  c.vocab_size = 300;
  c.bos_token_id = c.eos_token_id = -1;
  c.extra_eos_token_ids.clear();
  return c;
}

TEST(SyntheticWeights, ValuesAreFiniteSmallSignedAndIndependentOfChunking) {
  constexpr int64_t kN = 1 << 16;
  std::vector<uint16_t> whole(kN), pieces(kN);
  FillRandomBf16(7, 0, whole.data(), kN);
  FillRandomBf16(7, 0, pieces.data(), 1001);  // odd split points, as threads cut the pool
  FillRandomBf16(7, 1001, pieces.data() + 1001, kN - 1001);
  EXPECT_EQ(whole, pieces);
  int negative = 0;
  std::set<uint16_t> distinct;
  for (uint16_t b : whole) {
    const float v = BF16ToF32(b);
    ASSERT_TRUE(std::isfinite(v));
    ASSERT_GE(std::fabs(v), std::ldexp(1.0f, -8));
    ASSERT_LT(std::fabs(v), std::ldexp(1.0f, -4));
    negative += v < 0;
    distinct.insert(b);
  }
  EXPECT_NEAR(negative, kN / 2, kN / 50);
  EXPECT_EQ(distinct.size(), 2u * 4 * 128);  // every sign, exponent and mantissa shows up
  std::vector<uint16_t> other(kN);
  FillRandomBf16(8, 0, other.data(), kN);
  EXPECT_NE(other, whole);
}

TEST(SyntheticWeights, HoldsEveryTensorOfTheShapeInHuggingFaceNames) {
  const ModelSpec c = Tiny();
  auto src = SyntheticLlamaSource::Create(c, {.num_threads = 3});
  EXPECT_EQ(src->TensorNames().size(), 3u + 9u * 2);  // embed, head, norm; 9 per layer
  absl::StatusOr<TensorView> q0 = src->Find("model.layers.0.self_attn.q_proj.weight");
  absl::StatusOr<TensorView> q1 = src->Find("model.layers.1.self_attn.q_proj.weight");
  ASSERT_TRUE(q0.ok() && q1.ok());
  EXPECT_EQ(q0->shape, (std::vector<int64_t>{128, 128}));
  EXPECT_EQ(q0->dtype, DType::kBF16);
  EXPECT_NE(q0->data, q1->data);  // different windows of the pool
  absl::StatusOr<TensorView> down = src->Find("model.layers.1.mlp.down_proj.weight");
  ASSERT_TRUE(down.ok());
  EXPECT_EQ(down->shape, (std::vector<int64_t>{128, 256}));
  absl::StatusOr<TensorView> norm = src->Find("model.norm.weight");
  ASSERT_TRUE(norm.ok());
  EXPECT_EQ(BF16ToF32(reinterpret_cast<const uint16_t*>(norm->data)[127]), 1.0f);
  EXPECT_TRUE(src->Find("lm_head.weight").ok());
  EXPECT_EQ(src->Find("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST(SyntheticWeights, LoadsAsFp8AndBf16AndTimesEveryStepWithFiniteLogits) {
  const ModelSpec c = Tiny();
  auto src = SyntheticLlamaSource::Create(c, {});
  const TimingOptions t{.prefill_tokens = 40,
                        .context_tokens = 20,
                        .batch = 3,
                        .decode_steps = 2,
                        .warmup = 1,
                        .runs = 2,
                        .block_size_tokens = 16};
  for (const char* preset : {"fp8", "bf16"}) {
    SCOPED_TRACE(preset);
    CpuBackend backend(CpuBackendOptions{.num_threads = 2});
    SingleRankCommunicator comm;
    LlamaLoadOptions load;
    load.formats = *WeightFormatsPreset(preset);
    load.max_tokens_per_step = TimingMaxStepTokens(t);
    load.max_logit_rows = TimingMaxLogitRows(t);
    auto model = LlamaModel::Load(c, *src, {0, 1}, &backend, &comm, load);
    ASSERT_TRUE(model.ok()) << model.status();
    auto cache = KvCache::Create((*model)->KvShape(TimingKvBlocks(t), 16, DType::kBF16), backend);
    ASSERT_TRUE(cache.ok()) << cache.status();
    ASSERT_TRUE(FillKvCache(backend, **cache, 3).ok());
    absl::StatusOr<ModelTimings> times = TimeModel(**model, backend, **cache, t);
    ASSERT_TRUE(times.ok()) << times.status();
    EXPECT_EQ(times->prefill.seconds.size(), 2u);
    EXPECT_EQ(times->decode_one.seconds.size(), 4u);
    EXPECT_EQ(times->decode_batch.seconds.size(), 4u);
    EXPECT_GT(times->decode_batch.Median(), 0);
    EXPECT_TRUE(times->logits_finite);
  }
}

TEST(ModelTimings, RefusesACacheTooSmallForTheRuns) {
  const ModelSpec c = Tiny();
  auto src = SyntheticLlamaSource::Create(c, {});
  CpuBackend backend(CpuBackendOptions{.num_threads = 1});
  SingleRankCommunicator comm;
  auto model = LlamaModel::Load(c, *src, {0, 1}, &backend, &comm, {.max_tokens_per_step = 64});
  ASSERT_TRUE(model.ok()) << model.status();
  auto cache = KvCache::Create((*model)->KvShape(4, 16, DType::kF32), backend);
  ASSERT_TRUE(cache.ok());
  const TimingOptions t{.prefill_tokens = 40, .context_tokens = 20, .batch = 3};
  absl::StatusOr<ModelTimings> times = TimeModel(**model, backend, **cache, t);
  EXPECT_EQ(times.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(times.status().message(),
            "KV cache has 4 blocks of 16 tokens; the timings need 15 of 16");
}

}  // namespace
}  // namespace tpserve
