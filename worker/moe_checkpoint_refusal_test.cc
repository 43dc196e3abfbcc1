// Bad mixture-of-experts checkpoints are refused at load, naming the tensor or key and the
// numbers, never a crash: each is the Qwen3-MoE golden model (tests/golden/families/qwen3moe:
// 8 experts of 32, top-2, 2 layers) with one thing changed, written to a file, opened as an
// operator opens a model (OpenModelFiles) and loaded (LlamaModel::Load) on every rank at TP 1,
// TP 2 and expert-parallel 2 (rank 0 holds experts 0-3 whole, rank 1 experts 4-7).
//   - a router of the wrong shape (GGUF ffn_gate_inp, Hugging Face mlp.gate);
//   - a GGUF stacked expert tensor (ffn_down_exps) holding 7 experts where expert_count says 8;
//   - a Hugging Face checkpoint without one expert's tensor (experts.5.down_proj): refused by
//     every rank that reads it, and with expert parallelism by rank 1, which owns expert 5;
//   - counts the file cannot satisfy: GGUF expert_used_count 9 > expert_count 8, a count past
//     int32 (which would wrap into another number), config.json num_experts 16 for 8 experts.
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/model_files.h"
#include "checkpoint/testing/edited_checkpoint.h"
#include "comm/in_process_communicator.h"
#include "formats/gguf.h"
#include "formats/gguf_test_builder.h"
#include "formats/safetensors.h"
#include "formats/safetensors_test_builder.h"
#include "formats/test_files.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/config.h"
#include "worker/llama_model.h"

namespace tpserve {
namespace {

constexpr char kGguf[] = "tests/golden/families/qwen3moe.gguf";
constexpr char kHfDir[] = "tests/golden/families/qwen3moe_hf";

std::string TempPath(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

// Where `name`'s header entry (a GGUF string: u64 length, bytes) ends in `bytes`.
size_t AfterGgufName(const std::string& bytes, const std::string& name) {
  const std::string encoded = GgufString(name);
  const size_t at = bytes.find(encoded);
  EXPECT_NE(at, std::string::npos) << name;
  EXPECT_EQ(bytes.find(encoded, at + 1), std::string::npos) << name << " is not unique";
  return at == std::string::npos ? 0 : at + encoded.size();
}

// Sets dimension `dim` (ggml order: innermost first) of tensor `name` in a GGUF's header. A
// smaller dimension leaves the tensor's bytes where they were, fewer of them read.
void PatchGgufDim(std::string& bytes, const std::string& name, int dim, uint64_t value) {
  const size_t info = AfterGgufName(bytes, name);  // u32 n_dims, u64 dims[n_dims], ...
  uint32_t n_dims = 0;
  std::memcpy(&n_dims, bytes.data() + info, sizeof(n_dims));
  ASSERT_LT(static_cast<uint32_t>(dim), n_dims) << name;
  PatchLe(bytes, info + 4 + 8 * dim, value);
}

// Sets the u32 value of metadata key `key`.
void PatchGgufU32(std::string& bytes, const std::string& key, uint32_t value) {
  const size_t kv = AfterGgufName(bytes, key);  // u32 type, then the value
  uint32_t type = 0;
  std::memcpy(&type, bytes.data() + kv, sizeof(type));
  ASSERT_EQ(type, static_cast<uint32_t>(GgufValueType::kU32)) << key;
  PatchLe(bytes, kv + 4, value);
}

// The golden GGUF with `edit` applied, as a file; returns its path.
std::string BadGguf(const std::string& name, const std::function<void(std::string&)>& edit) {
  absl::StatusOr<std::string> bytes = ReadFileBytes(kGguf);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  edit(*bytes);
  const std::string path = TempPath(name + ".gguf");
  EXPECT_TRUE(WriteFileBytes(path, *bytes).ok()) << path;
  return path;
}

// A copy of the golden Hugging Face directory whose safetensors went through `edit` (a tensor
// dropped, or reshaped: its shape and bytes) and whose config.json through `edit_config`;
// returns the directory.
std::string BadHfDir(const std::string& name, const TensorEdit& edit,
                     const ConfigEdit& edit_config = nullptr) {
  absl::StatusOr<std::string> dir = EditedHfDir(kHfDir, TempPath(name), edit, edit_config);
  EXPECT_TRUE(dir.ok()) << dir.status();
  return dir.value_or("");
}

void Drop(std::vector<SafetensorsTestBuilder::Tensor>& tensors, const std::string& name) {
  const absl::Status s = DropTensor(tensors, name);
  ASSERT_TRUE(s.ok()) << s;
}

// The model at `path` opened as a worker opens it (OpenModelFiles, which also reads the
// format of every role's first tensor), and each rank's LlamaModel::Load of its description over
// its tensors opened without that check, so that Load's own checks are the ones seen (ranks
// load one after another: loading has no collective).
struct Loads {
  absl::Status open;
  absl::Status describe;  // reading the description (config.json or the GGUF's keys)
  std::vector<absl::Status> ranks;
};

Loads LoadEveryRank(const std::string& path, int world, bool expert_parallel) {
  Loads out;
  out.open = OpenModelFiles(path).status();
  absl::StatusOr<ModelSpec> spec;
  std::unique_ptr<WeightSource> weights;
  if (path.ends_with(".gguf")) {
    absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(path);
    EXPECT_TRUE(gguf.ok()) << gguf.status();
    spec = ModelSpecFromGguf(**gguf);
    weights = *std::move(gguf);
  } else {
    absl::StatusOr<std::string> config = ReadFileBytes(path + "/config.json");
    EXPECT_TRUE(config.ok()) << config.status();
    spec = ModelSpecFromHfJson(*config);
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> st =
        SafetensorsFile::Open(path + "/model.safetensors");
    EXPECT_TRUE(st.ok()) << st.status();
    weights = *std::move(st);
  }
  out.describe = spec.status();
  if (!spec.ok()) return out;
  auto group = std::make_shared<InProcessGroup>(world);
  for (int r = 0; r < world; ++r) {
    CpuBackend backend(CpuBackendOptions{.num_threads = 1});
    InProcessCommunicator comm(group, r);
    absl::StatusOr<std::unique_ptr<LlamaModel>> model = LlamaModel::Load(
        *spec, *weights, {r, world, expert_parallel}, &backend, &comm, {.max_tokens_per_step = 16});
    out.ranks.push_back(model.status());
  }
  return out;
}

struct Layout {
  int world;
  bool expert_parallel;
  std::string Name() const { return absl::StrCat(expert_parallel ? "ep" : "tp", world); }
};
constexpr Layout kLayouts[] = {{1, false}, {2, false}, {2, true}};

// Opening `path` refuses it with `code` and the message `want`, and so does every rank's Load
// in every layout.
void ExpectEveryRankRefuses(const std::string& path, absl::StatusCode code,
                            const std::string& want) {
  for (const Layout& layout : kLayouts) {
    const Loads loads = LoadEveryRank(path, layout.world, layout.expert_parallel);
    EXPECT_EQ(loads.open.code(), code) << loads.open;
    EXPECT_EQ(loads.open.message(), want);
    ASSERT_TRUE(loads.describe.ok()) << layout.Name() << ": " << loads.describe;
    ASSERT_EQ(loads.ranks.size(), static_cast<size_t>(layout.world));
    for (int r = 0; r < layout.world; ++r) {
      const absl::Status& s = loads.ranks[r];
      EXPECT_EQ(s.code(), code) << layout.Name() << " rank " << r << ": " << s;
      EXPECT_EQ(s.message(), want) << layout.Name() << " rank " << r;
    }
  }
}

TEST(MoeCheckpointRefusalTest, TheGoldenItselfLoadsInEveryLayout) {
  for (const std::string& path : {std::string(kGguf), std::string(kHfDir)}) {
    for (const Layout& layout : kLayouts) {
      const Loads loads = LoadEveryRank(path, layout.world, layout.expert_parallel);
      ASSERT_TRUE(loads.open.ok()) << path << ": " << loads.open;
      ASSERT_EQ(loads.ranks.size(), static_cast<size_t>(layout.world));
      for (const absl::Status& s : loads.ranks) EXPECT_TRUE(s.ok()) << path << " " << s;
    }
  }
}

TEST(MoeCheckpointRefusalTest, ARouterOfTheWrongShapeIsNamedWithBothShapes) {
  const std::string gguf = BadGguf("router_rows", [](std::string& bytes) {
    PatchGgufDim(bytes, "blk.0.ffn_gate_inp.weight", 1, 7);  // ggml {64, 8} -> {64, 7}
  });
  ExpectEveryRankRefuses(gguf, absl::StatusCode::kInvalidArgument,
                         absl::StrCat("tensor blk.0.ffn_gate_inp.weight in ", gguf,
                                      ": shape [7, 64], expected [8, 64] from the model "
                                      "config"));
  const std::string hf = BadHfDir("router_cols_hf", [](auto& tensors) {
    for (SafetensorsTestBuilder::Tensor& t : tensors) {
      if (t.name != "model.layers.1.mlp.gate.weight") continue;
      t.shape = {8, 32};  // the bytes of [8, 64] cut to their first half
      t.data.resize(8 * 32 * sizeof(float));
    }
  });
  ExpectEveryRankRefuses(hf, absl::StatusCode::kInvalidArgument,
                         absl::StrCat("tensor model.layers.1.mlp.gate.weight in ", hf,
                                      "/model.safetensors: shape [8, 32], expected [8, 64] from "
                                      "the model config"));
}

TEST(MoeCheckpointRefusalTest, AStackedExpertTensorWithTooFewExpertsIsNamed) {
  const std::string gguf = BadGguf("seven_experts", [](std::string& bytes) {
    PatchGgufDim(bytes, "blk.1.ffn_down_exps.weight", 2, 7);  // ggml {32, 64, 8} -> {.., 7}
  });
  ExpectEveryRankRefuses(gguf, absl::StatusCode::kInvalidArgument,
                         absl::StrCat("tensor blk.1.ffn_down_exps.weight in ", gguf,
                                      ": shape [7, 64, 32], expected [8, 64, 32] (experts, rows, "
                                      "cols) from the model config"));
}

// Without expert parallelism every rank holds a slice of every expert, so each reads the
// missing tensor; with it only expert 5's owner does (the other rank excuses the tensors of
// experts it does not hold), and that rank refuses.
TEST(MoeCheckpointRefusalTest, AMissingExpertIsRefusedByEveryRankThatHoldsIt) {
  const std::string hf = BadHfDir("no_expert_5_hf", [](auto& tensors) {
    Drop(tensors, "model.layers.1.mlp.experts.5.down_proj.weight");
  });
  const std::string missing = absl::StrCat(
      "tensor 'model.layers.1.mlp.experts.5.down_proj.weight' not found in ", hf,
      "/model.safetensors (expert 5 of 8 in layer 1");
  for (int world : {1, 2}) {
    const Loads loads = LoadEveryRank(hf, world, false);
    ASSERT_TRUE(loads.open.ok()) << loads.open;
    for (int r = 0; r < world; ++r) {
      const absl::Status& s = loads.ranks[r];
      EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << "tp" << world << " rank " << r << s;
      EXPECT_NE(s.message().find(absl::StrCat(missing, "; this rank holds every expert)")),
                std::string::npos)
          << "tp" << world << " rank " << r << ": " << s;
    }
  }
  const Loads ep = LoadEveryRank(hf, 2, true);
  ASSERT_TRUE(ep.open.ok()) << ep.open;
  EXPECT_TRUE(ep.ranks[0].ok()) << "rank 0 holds experts 0-3 only: " << ep.ranks[0];
  EXPECT_EQ(ep.ranks[1].code(), absl::StatusCode::kNotFound) << ep.ranks[1];
  EXPECT_EQ(ep.ranks[1].message(),
            absl::StrCat(missing, "; this rank holds experts 4-7)"))
      << ep.ranks[1];
}

// An expert tensor beyond the count the config gives is applied by no rank: refused.
TEST(MoeCheckpointRefusalTest, AnExpertPastTheCountIsRefusedByEveryRank) {
  const std::string hf = BadHfDir("ninth_expert_hf", [](auto& tensors) {
    SafetensorsTestBuilder::Tensor extra;
    for (const SafetensorsTestBuilder::Tensor& t : tensors) {
      if (t.name == "model.layers.0.mlp.experts.7.up_proj.weight") extra = t;
    }
    extra.name = "model.layers.0.mlp.experts.8.up_proj.weight";
    tensors.push_back(extra);
  });
  const std::string unused = "tensor model.layers.0.mlp.experts.8.up_proj.weight in " + hf +
                             "/model.safetensors is not used by the model";
  for (const Layout& layout : kLayouts) {
    const Loads loads = LoadEveryRank(hf, layout.world, layout.expert_parallel);
    ASSERT_TRUE(loads.open.ok()) << loads.open;  // opening reads each role's first tensor only
    ASSERT_EQ(loads.ranks.size(), static_cast<size_t>(layout.world));
    for (int r = 0; r < layout.world; ++r) {
      const absl::Status& s = loads.ranks[r];
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << layout.Name() << " rank " << r;
      EXPECT_EQ(s.message().rfind(unused, 0), 0u) << layout.Name() << " rank " << r << ": " << s;
    }
  }
}

TEST(MoeCheckpointRefusalTest, CountsTheFileCannotSatisfyAreRefusedNamingTheKeys) {
  // GGUF: top-9 of 8 experts.
  const std::string used9 = BadGguf("used9", [](std::string& bytes) {
    PatchGgufU32(bytes, "qwen3moe.expert_used_count", 9);
  });
  Loads loads = LoadEveryRank(used9, 1, false);
  EXPECT_EQ(loads.open.code(), absl::StatusCode::kInvalidArgument) << loads.open;
  EXPECT_EQ(loads.open.message(),
            absl::StrCat(used9, ": qwen3moe.expert_count 8 and qwen3moe.expert_used_count 9: "
                                "top_k 9 is outside [1, num_experts 8]"));
  EXPECT_EQ(loads.describe, loads.open);
  // The same description handed to Load directly is refused there too.
  absl::StatusOr<ModelFiles> golden = OpenModelFiles(kGguf);
  ASSERT_TRUE(golden.ok()) << golden.status();
  ModelSpec spec = golden->config;
  spec.moe.routing.top_k = 9;
  CpuBackend backend(CpuBackendOptions{.num_threads = 1});
  SingleRankCommunicator solo;
  absl::StatusOr<std::unique_ptr<LlamaModel>> model =
      LlamaModel::Load(spec, *golden->weights, {0, 1}, &backend, &solo);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model.status().message(),
            "ModelSpec.moe.routing: top_k 9 is outside [1, num_experts 8]");

  // GGUF: 2^31 + 8 experts, which as an int32 would be -2147483640.
  const std::string huge = BadGguf("experts_past_int32", [](std::string& bytes) {
    PatchGgufU32(bytes, "qwen3moe.expert_count", 0x80000008u);
  });
  loads = LoadEveryRank(huge, 1, false);
  EXPECT_EQ(loads.open.code(), absl::StatusCode::kInvalidArgument) << loads.open;
  EXPECT_EQ(loads.open.message(),
            absl::StrCat(huge, ": qwen3moe.expert_count is 2147483656; a count in [0, "
                               "2147483647] was expected"));
  EXPECT_EQ(loads.describe, loads.open);

  // config.json: 2^32 + 8 experts, which as an int32 would be 8 and load.
  const auto set_experts = [](std::string value) {
    return [value](std::string& config) {
      const std::string key = "\"num_experts\": 8";
      const size_t at = config.find(key);
      ASSERT_NE(at, std::string::npos) << config;
      config.replace(at, key.size(), "\"num_experts\": " + value);
    };
  };
  const auto unchanged = [](auto&) {};
  const std::string wraps = BadHfDir("experts_2_32_plus_8_hf", unchanged, set_experts("4294967304"));
  loads = LoadEveryRank(wraps, 1, false);
  EXPECT_EQ(loads.open.code(), absl::StatusCode::kInvalidArgument) << loads.open;
  EXPECT_EQ(loads.open.message(),
            "config.json key 'num_experts' is 4294967304; a count in [0, 2147483647] was "
            "expected");
  EXPECT_EQ(loads.describe, loads.open);
  // config.json: 16 experts, the file's routers and experts are 8: the router is the first
  // tensor that disagrees.
  const std::string sixteen = BadHfDir("experts_16_hf", unchanged, set_experts("16"));
  ExpectEveryRankRefuses(sixteen, absl::StatusCode::kInvalidArgument,
                         absl::StrCat("tensor model.layers.0.mlp.gate.weight in ", sixteen,
                                      "/model.safetensors: shape [8, 64], expected [16, 64] "
                                      "from the model config"));
}

}  // namespace
}  // namespace tpserve
