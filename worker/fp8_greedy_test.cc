// An FP8 checkpoint served by the engine gives the same greedy tokens as the same weights
// dequantized to F32 and served unquantized, up to near-ties: each FP8 fixture of
// tests/golden/quant (Meta's fbgemm layout, compressed-tensors per channel and in 128x128
// tiles) is decoded greedily twice, once as stored (e4m3 codes times their scales inside the
// matmul) and once with its FP8 linears converted to F32 on load (code * scale, the exact
// dequantized weight). Where the two choose differently, the F32 model's top two logits must
// be within 1e-4 of its largest |logit|: rounding order may only decide a near-tie.
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "checkpoint/model_files.h"
#include "comm/communicator.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "worker/kv_cache.h"
#include "worker/llama_model.h"

namespace tpserve {
namespace {

constexpr float kNearTie = 1e-4f;  // of the largest |logit|
constexpr int kSteps = 24;

struct Decoder {
  CpuBackend backend{CpuBackendOptions{.num_threads = 1}};
  SingleRankCommunicator comm;
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<KvCache> cache;
  std::vector<int32_t> table;

  absl::Status Load(const ModelFiles& files, const WeightFormats& formats) {
    LlamaLoadOptions options;
    options.max_tokens_per_step = 64;
    options.formats = formats;
    options.scheme = files.scheme;
    absl::StatusOr<std::unique_ptr<LlamaModel>> m =
        LlamaModel::Load(files.config, *files.weights, {0, 1}, &backend, &comm, options);
    if (!m.ok()) return m.status();
    model = *std::move(m);
    absl::StatusOr<std::unique_ptr<KvCache>> c =
        KvCache::Create(model->KvShape(16, 4, DType::kF32), backend);
    if (!c.ok()) return c.status();
    cache = *std::move(c);
    table.resize(16);
    std::iota(table.begin(), table.end(), 0);
    return absl::OkStatus();
  }

  // Logits of the last of `tokens`, which start at `position`.
  std::vector<float> Step(const std::vector<int32_t>& tokens, int64_t position) {
    StepBatch batch;
    batch.Add(/*seq_id=*/0, position, tokens, table);
    std::vector<float> logits(model->config().vocab_size);
    EXPECT_TRUE(model->Forward(batch, cache.get(), logits.data()).ok());
    return logits;
  }
};

int32_t ArgMax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

class Fp8GreedyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(Fp8GreedyTest, SameTokensAsTheDequantizedF32ModelUpToNearTies) {
  absl::StatusOr<ModelFiles> files = OpenModelFiles("tests/golden/quant/" + GetParam());
  ASSERT_TRUE(files.ok()) << files.status();
  WeightFormats f32 = files->stored_formats;
  int fp8_roles = 0;
  for (TensorRole role : kAllTensorRoles) {
    const FormatKind k = f32[role].kind;
    if (k == FormatKind::kFp8PerChannel || k == FormatKind::kFp8Block128) {
      f32.Set(role, TensorFormat::Of(FormatKind::kF32));
      ++fp8_roles;
    }
  }
  ASSERT_GT(fp8_roles, 0) << "the fixture holds no fp8 linear";
  Decoder fp8, exact;
  ASSERT_TRUE(fp8.Load(*files, files->stored_formats).ok());
  ASSERT_TRUE(exact.Load(*files, f32).ok());
  int agreed = 0;
  for (const std::vector<int32_t>& prompt :
       {std::vector<int32_t>{1, 17, 42, 5}, std::vector<int32_t>{60, 3, 3, 29, 11, 48},
        std::vector<int32_t>{7}}) {
    std::vector<float> a = fp8.Step(prompt, 0), b = exact.Step(prompt, 0);
    int64_t position = static_cast<int64_t>(prompt.size());
    for (int step = 0; step < kSteps; ++step, ++position) {
      const int32_t ta = ArgMax(a), tb = ArgMax(b);
      if (ta != tb) {  // only a near-tie of the exact model may go either way
        float max_abs = 0;
        for (float x : b) max_abs = std::max(max_abs, std::fabs(x));
        EXPECT_LE(b[tb] - b[ta], kNearTie * max_abs)
            << GetParam() << ": step " << step << " chose " << ta << " over " << tb;
        break;
      }
      ++agreed;
      a = fp8.Step({ta}, position);
      b = exact.Step({tb}, position);
    }
  }
  EXPECT_GE(agreed, kSteps);  // at least one prompt's whole continuation agreed
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Fp8GreedyTest,
                         ::testing::Values("fp8_fbgemm", "fp8_ct_channel", "fp8_ct_block"));

}  // namespace
}  // namespace tpserve
