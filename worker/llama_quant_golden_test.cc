// Quantized Hugging Face checkpoints end to end (tests/golden/quant): each fixture directory,
// opened as an operator would (OpenModelFiles) and loaded on the CPU backend, gives the
// logits of the same model whose quantized linears are replaced by the fixture's
// expect.safetensors weights as F32; and each malformed variant in malformed/manifest.json
// is refused with a message naming what its manifest says.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/model_files.h"
#include "checkpoint/testing/in_memory_weight_source.h"
#include "comm/communicator.h"
#include "formats/safetensors.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "nlohmann/json.hpp"
#include "worker/kv_cache.h"
#include "worker/llama_model.h"

namespace tpserve {
namespace {

const std::string kRoot = "tests/golden/quant/";
const std::vector<int32_t> kPrompt = {1, 17, 42, 5, 66, 0, 63, 63, 12, 30, 31, 8, 50};

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Loads `source` at TP 1 on `backend` and returns the logits of every prompt token.
absl::StatusOr<std::vector<float>> PromptLogits(const ModelSpec& config,
                                                const WeightSource& source,
                                                const LlamaLoadOptions& options,
                                                CpuBackend& backend) {
  SingleRankCommunicator comm;
  absl::StatusOr<std::unique_ptr<LlamaModel>> model =
      LlamaModel::Load(config, source, {0, 1}, &backend, &comm, options);
  if (!model.ok()) return model.status();
  absl::StatusOr<std::unique_ptr<KvCache>> cache =
      KvCache::Create((*model)->KvShape(8, 4, DType::kF32), backend);
  if (!cache.ok()) return cache.status();
  StepBatch batch;
  std::vector<int32_t> table(4);
  std::iota(table.begin(), table.end(), 0);
  batch.Add(/*seq_id=*/0, 0, kPrompt, table, std::ssize(kPrompt));
  std::vector<float> logits(batch.num_logit_rows() * config.vocab_size);
  absl::Status s = (*model)->Forward(batch, cache->get(), logits.data());
  if (!s.ok()) return s;
  return logits;
}

// The fixture with every quantized linear replaced by its expected f32 weight: the other
// tensors copied as stored, the linears' tensors (qweight, scales, ...) left out.
std::unique_ptr<InMemoryWeightSource> Dequantized(const WeightSource& stored,
                                                  const SafetensorsFile& expect) {
  auto out = std::make_unique<InMemoryWeightSource>(CheckpointFormat::kSafetensors);
  std::vector<std::string> modules;
  for (const std::string& name : expect.TensorNames()) {
    const TensorView t = *expect.Find(name);
    out->AddRaw(name, t.shape, t.dtype, std::vector<uint8_t>(t.data, t.data + t.nbytes));
    modules.push_back(name.substr(0, name.size() - std::string(".weight").size()) + ".");
  }
  for (const std::string& name : stored.TensorNames()) {
    const bool quantized = std::any_of(modules.begin(), modules.end(),
                                       [&](const auto& m) { return name.starts_with(m); });
    if (quantized) continue;
    const TensorView t = *stored.Find(name);
    out->AddRaw(name, t.shape, t.dtype, std::vector<uint8_t>(t.data, t.data + t.nbytes));
  }
  return out;
}

class QuantGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantGoldenTest, LogitsMatchTheDequantizedReference) {
  const std::string dir = kRoot + GetParam();
  absl::StatusOr<ModelFiles> files = OpenModelFiles(dir);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_NE(files->scheme.method, QuantMethod::kNone);
  EXPECT_TRUE(files->weight_format.starts_with(
      "safetensors:" + std::string(QuantMethodName(files->scheme.method)) + " "))
      << files->weight_format;
  CpuBackend backend(CpuBackendOptions{.num_threads = 2});
  LlamaLoadOptions options{.max_tokens_per_step = 16};
  options.formats = files->stored_formats;
  options.scheme = files->scheme;
  absl::StatusOr<std::vector<float>> got =
      PromptLogits(files->config, *files->weights, options, backend);
  ASSERT_TRUE(got.ok()) << got.status();

  auto expect = SafetensorsFile::Open(dir + "/expect.safetensors");
  ASSERT_TRUE(expect.ok()) << expect.status();
  const std::unique_ptr<InMemoryWeightSource> reference = Dequantized(*files->weights, **expect);
  absl::StatusOr<std::vector<float>> want =
      PromptLogits(files->config, *reference, LlamaLoadOptions{.max_tokens_per_step = 16}, backend);
  ASSERT_TRUE(want.ok()) << want.status();

  ASSERT_EQ(got->size(), want->size());
  float max_diff = 0, max_logit = 0;
  for (size_t i = 0; i < got->size(); ++i) {
    ASSERT_TRUE(std::isfinite((*got)[i]) && std::isfinite((*want)[i])) << i;
    max_diff = std::max(max_diff, std::fabs((*got)[i] - (*want)[i]));
    max_logit = std::max(max_logit, std::fabs((*want)[i]));
  }
  // The same weights either way. FP8 multiplies f32 activations (W8A32): only the order of f32
  // sums differs, so the bound is f32 rounding. INT4 multiplies 8-bit activation blocks, as the
  // GGML types do (kernels/cpu/cpu_kernels.h), so its bound is that rounding: observed 0.7-1.0%
  // of the largest logit here, 1.0-1.3% for Q4_0/Q4_1 in llama_model_test.
  const bool int4 = files->stored_formats[TensorRole::kQ].kind == FormatKind::kInt4Group;
  EXPECT_GT(max_logit, 0.0f);
  EXPECT_LE(max_diff, (int4 ? 3e-2f : 1e-4f) * max_logit) << "max |logit| " << max_logit;
  std::printf("%s: max |logit| %g, max |diff| %g\n", GetParam().c_str(), max_logit, max_diff);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, QuantGoldenTest,
                         ::testing::Values("awq_g32", "awq_g64", "gptq_g32_sym", "gptq_g64_asym",
                                           "gptq_g32_asym_descact", "fp8_fbgemm", "fp8_ct_channel",
                                           "fp8_ct_block"));

// Opening and loading as the server does: the first error on the way.
absl::Status OpenAndLoad(const std::string& dir) {
  absl::StatusOr<ModelFiles> files = OpenModelFiles(dir);
  if (!files.ok()) return files.status();
  CpuBackend backend(CpuBackendOptions{.num_threads = 1});
  LlamaLoadOptions options{.max_tokens_per_step = 16};
  options.formats = files->stored_formats;
  options.scheme = files->scheme;
  return PromptLogits(files->config, *files->weights, options, backend).status();
}

TEST(QuantMalformedTest, EveryManifestCaseIsRefusedNamingWhatItSays) {
  const nlohmann::json manifest =
      nlohmann::json::parse(ReadText(kRoot + "malformed/manifest.json"), nullptr, false);
  ASSERT_TRUE(manifest.is_object() && manifest["cases"].is_array());
  // The code each known case must get; a case added to the manifest later need only fail.
  const std::map<std::string, absl::StatusCode> codes = {
      {"awq_qweight_shape", absl::StatusCode::kInvalidArgument},
      {"awq_missing_qzeros", absl::StatusCode::kNotFound},
      {"gptq_scales_groups", absl::StatusCode::kInvalidArgument},
      {"gptq_qzeros_dtype", absl::StatusCode::kUnimplemented},  // I64: no reader decodes it
      {"gptq_g_idx_out_of_range", absl::StatusCode::kInvalidArgument},
      {"fp8_weight_scale_shape", absl::StatusCode::kInvalidArgument},
      {"extra_tensor", absl::StatusCode::kInvalidArgument},
      {"unknown_quant_method", absl::StatusCode::kUnimplemented},
      {"bits_3", absl::StatusCode::kUnimplemented},
      {"model_type_phi3", absl::StatusCode::kUnimplemented},
  };
  int checked = 0;
  for (const nlohmann::json& c : manifest["cases"]) {
    const std::string dir = c["dir"].get<std::string>();
    SCOPED_TRACE(dir);
    const absl::Status s = OpenAndLoad(kRoot + "malformed/" + dir);
    ASSERT_FALSE(s.ok()) << "accepted: " << c["defect"];
    if (codes.count(dir)) {
      EXPECT_EQ(s.code(), codes.at(dir)) << s;
    }
    ASSERT_FALSE(c["message_must_name"].empty());
    for (const nlohmann::json& name : c["message_must_name"]) {
      EXPECT_NE(s.message().find(name.get<std::string>()), std::string::npos)
          << "must name " << name << ": " << s;
    }
    ++checked;
  }
  EXPECT_GE(checked, static_cast<int>(codes.size()));
}

}  // namespace
}  // namespace tpserve
