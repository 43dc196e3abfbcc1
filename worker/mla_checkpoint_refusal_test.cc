// Bad multi-head latent attention checkpoints are refused at load, naming what is wrong, never
// computed otherwise: each is a golden DeepSeek-V3-shaped model (tests/golden/families) with one
// thing changed, written to a file and opened as an operator opens a model (OpenModelFiles).
//   - DeepSeek's FP8 checkpoint without one tile scale (weight_scale_inv);
//   - FP8 tiles at a degree that would cut them (the tiny model's single tiles at TP 2);
//   - an MLA width that cannot be (an odd RoPE width), and YaRN factors MLA cannot apply;
//   - the opt-in expanded prefill on a backend without PrefillAttention (CUDA's today).
#include <cstdlib>
#include <string>

#include "checkpoint/model_files.h"
#include "checkpoint/testing/edited_checkpoint.h"
#include "comm/in_process_communicator.h"
#include "formats/test_files.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/config.h"
#include "worker/llama_model.h"

namespace tpserve {
namespace {

constexpr char kFp8Dir[] = "tests/golden/families/deepseek2_fp8_hf";
constexpr char kHfDir[] = "tests/golden/families/deepseek2_hf";

std::string TempPath(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

absl::Status LoadRank0(const ModelFiles& files, int world) {
  auto group = std::make_shared<InProcessGroup>(world);
  CpuBackend backend(CpuBackendOptions{.num_threads = 1});
  InProcessCommunicator comm(group, 0);
  return LlamaModel::Load(files.config, *files.weights, {0, world}, &backend, &comm,
                          {.max_tokens_per_step = 16, .scheme = files.scheme})
      .status();
}

// A backend with latent attention but no expanded-form prefill, as the CUDA backend is.
class NoPrefillBackend : public CpuBackend {
 public:
  NoPrefillBackend() : CpuBackend(CpuBackendOptions{.num_threads = 1}) {}
  bool SupportsPrefillAttention() const override { return false; }
};

TEST(MlaCheckpointRefusalTest, TheExpandedPrefillIsRefusedWhereTheBackendLacksIt) {
  absl::StatusOr<ModelFiles> files = OpenModelFiles(kHfDir);
  ASSERT_TRUE(files.ok()) << files.status();
  NoPrefillBackend backend;
  SingleRankCommunicator comm;
  const absl::Status asked =
      LlamaModel::Load(files->config, *files->weights, {0, 1}, &backend, &comm,
                       {.max_tokens_per_step = 16, .scheme = files->scheme,
                        .mla_expand_fresh_prefill = true})
          .status();
  EXPECT_EQ(asked.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(asked.message().find("mla_expand_fresh_prefill: the cpu-"), std::string::npos)
      << asked;
  EXPECT_NE(asked.message().find(" backend has no expanded-form prefill attention"),
            std::string::npos)
      << asked;
  // The default, the absorbed form for every step, loads there.
  EXPECT_TRUE(LlamaModel::Load(files->config, *files->weights, {0, 1}, &backend, &comm,
                               {.max_tokens_per_step = 16, .scheme = files->scheme})
                  .ok());
}

TEST(MlaCheckpointRefusalTest, TheFp8GoldenLoadsAsStored) {
  absl::StatusOr<ModelFiles> files = OpenModelFiles(kFp8Dir);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->stored_formats[TensorRole::kQB].kind, FormatKind::kFp8Block128);
  EXPECT_EQ(files->stored_formats[TensorRole::kExpertDown].kind, FormatKind::kFp8Block128);
  // The router is kept in bf16 beside the tiles; kv_b_proj's tiles are widened to f32 (as
  // W_UK^T and W_UV per head, cut from it).
  EXPECT_EQ(files->stored_formats[TensorRole::kRouter].kind, FormatKind::kBF16);
  EXPECT_EQ(files->stored_formats[TensorRole::kKB].kind, FormatKind::kF32);
  EXPECT_EQ(files->stored_formats[TensorRole::kVB].kind, FormatKind::kF32);
  EXPECT_TRUE(LoadRank0(*files, 1).ok());
}

TEST(MlaCheckpointRefusalTest, AMissingTileScaleIsNamed) {
  absl::StatusOr<std::string> dir =
      EditedHfDir(kFp8Dir, TempPath("no_scale_inv"), [](auto& tensors) {
        EXPECT_TRUE(
            DropTensor(tensors, "model.layers.1.self_attn.q_b_proj.weight_scale_inv").ok());
      });
  ASSERT_TRUE(dir.ok()) << dir.status();
  // Opening reads every layer's format (StoredWeightFormats): refused there, before any load.
  absl::StatusOr<ModelFiles> files = OpenModelFiles(*dir);
  EXPECT_EQ(files.status().code(), absl::StatusCode::kNotFound) << files.status();
  EXPECT_EQ(files.status().message().rfind(
                "tensor 'model.layers.1.self_attn.q_b_proj.weight_scale_inv' not found in ", 0),
            0u)
      << files.status();
}

TEST(MlaCheckpointRefusalTest, TilesADegreeWouldCutAreRefusedWithTheNumbers) {
  absl::StatusOr<ModelFiles> files = OpenModelFiles(kFp8Dir);
  ASSERT_TRUE(files.ok()) << files.status();
  const absl::Status s = LoadRank0(*files, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("tensor-parallel degrees that keep every block on one rank: 1"),
            std::string::npos)
      << s;
}

TEST(MlaCheckpointRefusalTest, MlaWidthsAndYarnFactorsThatCannotBeAreNamed) {
  const auto config_with = [](const std::string& from, const std::string& to) {
    absl::StatusOr<std::string> config = ReadFileBytes(std::string(kHfDir) + "/config.json");
    EXPECT_TRUE(config.ok()) << config.status();
    const size_t at = config->find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? *config : config->replace(at, from.size(), to);
  };
  absl::StatusOr<ModelSpec> odd =
      ModelSpecFromHfJson(config_with("\"qk_rope_head_dim\": 8", "\"qk_rope_head_dim\": 7"));
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kInvalidArgument) << odd.status();
  EXPECT_NE(odd.status().message().find("ModelSpec.head_dim 23 must be even"), std::string::npos)
      << odd.status();
  absl::StatusOr<ModelSpec> mscale =
      ModelSpecFromHfJson(config_with("\"mscale\": 1.0", "\"mscale\": 0.707"));
  EXPECT_EQ(mscale.status().code(), absl::StatusCode::kUnimplemented) << mscale.status();
  EXPECT_NE(mscale.status().message().find("mscale 0.707 and mscale_all_dim 1 differ"),
            std::string::npos)
      << mscale.status();
  absl::StatusOr<ModelSpec> scoring = ModelSpecFromHfJson(
      config_with("\"scoring_func\": \"sigmoid\"", "\"scoring_func\": \"softmax\""));
  EXPECT_EQ(scoring.status().code(), absl::StatusCode::kUnimplemented) << scoring.status();
  EXPECT_NE(scoring.status().message().find("config.json key 'scoring_func' = \"softmax\""),
            std::string::npos)
      << scoring.status();
}

}  // namespace
}  // namespace tpserve
