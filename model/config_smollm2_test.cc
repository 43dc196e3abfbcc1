// ModelSpecFromGguf on the real SmolLM2-135M checkpoint (scripts/setup.sh installs it).
#include <gtest/gtest.h>

#include "formats/gguf.h"
#include "model/bundled_model.h"
#include "model/config.h"

namespace tpserve {
namespace {

TEST(ModelSpecFromGgufTest, RealSmolLM2MatchesThePresetAndItsTensors) {
  absl::StatusOr<std::string> path = BundledModelPath();
  ASSERT_TRUE(path.ok()) << path.status();
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(*path);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<ModelSpec> c = ModelSpecFromGguf(**file);
  ASSERT_TRUE(c.ok()) << c.status();
  const ModelSpec preset = *ModelSpecPreset("smollm2-135m");
  EXPECT_EQ(c->vocab_size, preset.vocab_size);
  EXPECT_EQ(c->hidden_size, preset.hidden_size);
  EXPECT_EQ(c->intermediate_size, preset.intermediate_size);
  EXPECT_EQ(c->num_layers, preset.num_layers);
  EXPECT_EQ(c->num_heads, preset.num_heads);
  EXPECT_EQ(c->num_kv_heads, preset.num_kv_heads);
  EXPECT_EQ(c->head_dim, preset.head_dim);
  EXPECT_EQ(c->max_context_tokens, preset.max_context_tokens);
  EXPECT_EQ(c->rope_theta, preset.rope_theta);
  EXPECT_FALSE(c->rope_scaling.enabled());
  EXPECT_FLOAT_EQ(static_cast<float>(c->rms_norm_eps), 1e-5f);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->bos_token_id, 1);
  EXPECT_EQ(c->eos_token_id, 2);
  // The parameter formula must count exactly the elements the file holds.
  int64_t elements_in_file = 0;
  for (const std::string& name : (*file)->TensorNames()) {
    elements_in_file += (*file)->Find(name)->num_elements();
  }
  EXPECT_EQ(c->NumParameters(), elements_in_file);
  EXPECT_EQ(c->NumParameters(), 134515008);
}

}  // namespace
}  // namespace tpserve
