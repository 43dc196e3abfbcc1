#include "planner/vram_cli.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/version.h"
#include "checkpoint/testing/multimodal_checkpoint.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tpserve {
namespace {

struct Result {
  int code;
  std::string out;
  std::string err;
};

Result RunWith(const VramRequest& r) {
  std::ostringstream out, err;
  const int code = RunVram(r, out, err);
  return {code, out.str(), err.str()};
}

VramRequest Request405B() {
  VramRequest r;
  r.model = "405b";
  r.weights = {"fp8"};
  r.gpus = {"8"};
  r.gpu = "h100-80g";
  r.context = 8192;
  r.users = 10;
  return r;
}

// Each case changes Request405B() one way; vram must exit 2 printing exactly the message.
void ExpectFlagErrors(
    const std::vector<std::pair<void (*)(VramRequest&), std::string>>& cases) {
  for (const auto& [mutate, expected] : cases) {
    VramRequest r = Request405B();
    mutate(r);
    const Result run = RunWith(r);
    EXPECT_EQ(run.code, 2) << expected;
    EXPECT_EQ(run.err, expected);
    EXPECT_EQ(run.out, "");
  }
}

std::string TempFile(const std::string& name, const std::string& text) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(VramCliTest, FittingPlanExitsZeroWithTable) {
  const Result run = RunWith(Request405B());
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("VERDICT   FITS: "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("ROOFLINE"), std::string::npos);
  EXPECT_EQ(run.err, "");
}

TEST(VramCliTest, JsonParsesAndHasThePlan) {
  VramRequest r = Request405B();
  r.json = true;
  const Result run = RunWith(r);
  ASSERT_EQ(run.code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["plan"]["inputs"]["tp"], 8);
  EXPECT_EQ(j["plan"]["inputs"]["model"]["num_layers"], 126);
  EXPECT_EQ(j["plan"]["stages"][0]["kv_bytes_per_token"], 64512);
  EXPECT_TRUE(j["suggestions"].empty());
}

// The step budget is launch's (base/step_budget.h): 2048 tokens per step on GPUs and 512 on a
// CPU host when --max_tokens_per_step is left at 0, and the flag's value when given.
TEST(VramCliTest, StepBudgetDefaultsToLaunchsForTheDevice) {
  VramRequest gpu = Request405B();
  gpu.json = true;
  nlohmann::json j = nlohmann::json::parse(RunWith(gpu).out);
  EXPECT_EQ(j["plan"]["inputs"]["max_tokens_per_step"], 2048);
  gpu.max_tokens_per_step = 1024;
  j = nlohmann::json::parse(RunWith(gpu).out);
  EXPECT_EQ(j["plan"]["inputs"]["max_tokens_per_step"], 1024);

  VramRequest host;
  host.model = "smollm2";
  host.gpu = "cpu-host";
  host.context = 2048;
  host.host_bandwidth_gbs = 20;
  host.meminfo = TempFile("meminfo_budget", "MemTotal:        8388608 kB\n");
  host.json = true;
  const Result run = RunWith(host);
  ASSERT_EQ(run.code, 0) << run.err;
  j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["plan"]["inputs"]["max_tokens_per_step"], 512);
}

// --draft_model: the table shows the draft's lines and what it takes from the KV cache; the
// JSON's block counts with and without it are the plans with and without it.
TEST(VramCliTest, DraftModelShowsItsCostAndWhatItTakesFromTheCache) {
  VramRequest r = Request405B();
  r.gpu = "h200";
  r.json = true;
  const Result without = RunWith(r);
  ASSERT_EQ(without.code, 0) << without.err;
  r.draft_model = "8b";
  r.draft_weights = "fp8";
  const Result with = RunWith(r);
  ASSERT_EQ(with.code, 0) << with.err;
  const nlohmann::json a = nlohmann::json::parse(without.out)["plan"];
  const nlohmann::json b = nlohmann::json::parse(with.out)["plan"];
  EXPECT_TRUE(a["inputs"]["draft"].is_null());
  EXPECT_EQ(b["inputs"]["draft"]["model"], "llama-3.1-8b");
  EXPECT_EQ(b["num_kv_blocks_without_draft"], a["num_kv_blocks"]);
  EXPECT_LT(b["num_kv_blocks"], a["num_kv_blocks"]);
  // 8B's KV per rank of 8: 32 layers x 1 KV head x 128 x 2 (K, V) x 2 bytes.
  EXPECT_EQ(b["stages"][0]["draft_kv_bytes_per_token"], 16384);
  EXPECT_EQ(b["stages"][0]["kv_bytes_per_token"], 64512 + 16384);
  r.json = false;
  const Result table = RunWith(r);
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("draft model weights llama-3.1-8b as fp8"), std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("DRAFT     llama-3.1-8b costs "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(absl::StrCat("the pool holds ", b["num_kv_blocks"].get<int64_t>(),
                                        " blocks instead of ",
                                        a["num_kv_blocks"].get<int64_t>())),
            std::string::npos)
      << table.out;
  // A draft format without a draft; a draft with another vocabulary.
  r = Request405B();
  r.draft_weights = "fp8";
  EXPECT_EQ(RunWith(r).err, "vram: --draft_weights=fp8: needs --draft_model\n");
  EXPECT_EQ(RunWith(r).code, 2);
  r.draft_weights = "";
  r.draft_model = "smollm2";
  const Result other = RunWith(r);
  EXPECT_EQ(other.code, 2);
  EXPECT_NE(other.err.find("draft.model.vocab_size=49152: a draft model must share the target's "
                           "vocabulary of 128256 tokens"),
            std::string::npos)
      << other.err;
}

// --deterministic_tp plans the engine's chunked reduction: one f32 chunk sum per KV group
// (8 for 405B) for 2048 tokens, on the rank and gathered (1,207,959,552 B more step buffers),
// and row-parallel collectives of 8 x 10 users x 16384 x 4 bytes instead of 10 x 16384 x 2.
TEST(VramCliTest, DeterministicTpPlansItsChunkSumsAndCollectives) {
  VramRequest r = Request405B();
  r.json = true;
  const nlohmann::json fast = nlohmann::json::parse(RunWith(r).out);
  r.deterministic_tp = true;
  const nlohmann::json det = nlohmann::json::parse(RunWith(r).out);
  EXPECT_EQ(fast["plan"]["roofline"]["reduction"], "all-reduce");
  EXPECT_EQ(det["plan"]["roofline"]["reduction"], "chunked all-gather");
  EXPECT_EQ(fast["plan"]["roofline"]["row_parallel_bytes"], 10 * 16384 * 2);
  EXPECT_EQ(det["plan"]["roofline"]["row_parallel_bytes"], 8 * 10 * 16384 * 4);
  const auto activations = [](const nlohmann::json& j, const char* line) {
    return j["plan"]["stages"][0]["activations"][line].get<int64_t>();
  };
  EXPECT_EQ(activations(det, "chunk_sum_bytes") - activations(fast, "chunk_sum_bytes"),
            (1 + 8) * 2048 * 16384 * 4);
  // Deterministic attention splits every query row's keys on its own (attention_workspace.h).
  EXPECT_GT(activations(det, "attention_bytes"), activations(fast, "attention_bytes"));
  // And no recorded decode steps (the CUDA backend does not record in deterministic mode):
  // 54 recordings (9 batch x 6 context buckets) of (126 x 24 + 8) x 4096 B fewer.
  EXPECT_EQ(activations(fast, "cuda_graph_bytes"), 54 * 12'419'072);
  EXPECT_EQ(activations(det, "cuda_graph_bytes"), 0);
  EXPECT_EQ(activations(det, "total_bytes") - activations(fast, "total_bytes"),
            (1 + 8) * 2048 * 16384 * 4 + activations(det, "attention_bytes") -
                activations(fast, "attention_bytes") - activations(fast, "cuda_graph_bytes"));
  EXPECT_GT(det["plan"]["roofline"]["decode_step_s"].get<double>(),
            fast["plan"]["roofline"]["decode_step_s"].get<double>());
}

// --enforce_eager plans no recorded decode steps: the CUDA-graph line goes and the KV cache
// gets its bytes. On the old code there was no such flag or line.
TEST(VramCliTest, EnforceEagerPlansNoCudaGraphs) {
  VramRequest r = Request405B();
  r.json = true;
  const nlohmann::json recorded = nlohmann::json::parse(RunWith(r).out);
  r.enforce_eager = true;
  const nlohmann::json eager = nlohmann::json::parse(RunWith(r).out);
  const auto stage = [](const nlohmann::json& j, const char* a, const char* b) {
    return b == nullptr ? j["plan"]["stages"][0][a].get<int64_t>()
                        : j["plan"]["stages"][0][a][b].get<int64_t>();
  };
  EXPECT_EQ(stage(recorded, "activations", "cuda_graph_recordings"), 54);
  EXPECT_EQ(stage(recorded, "activations", "cuda_graph_bytes"), 54 * 12'419'072);
  EXPECT_EQ(stage(eager, "activations", "cuda_graph_bytes"), 0);
  EXPECT_EQ(stage(eager, "available_for_kv_bytes", nullptr) -
                stage(recorded, "available_for_kv_bytes", nullptr),
            54 * 12'419'072);
}

// --expert_parallel plans the engine's placement: each GPU holds 32 of Qwen3-30B-A3B's 128
// experts whole (kind "expert") where tensor parallelism holds a quarter of each of them:
// about the same weight bytes, plus the all-to-all's buffers (every slot of a 2048-token step
// may be a rank's: 2048 x 8 slots x 2048 hidden f32 sent, 512 x 8 of them received).
TEST(VramCliTest, ExpertParallelPlacesWholeExpertsAndPlansTheAllToAll) {
  VramRequest r = Request405B();
  r.model = "qwen3-30b-a3b";
  r.gpus = {"4"};
  r.json = true;
  const Result tp_run = RunWith(r);
  ASSERT_EQ(tp_run.code, 0) << tp_run.err;
  r.expert_parallel = true;
  const Result ep_run = RunWith(r);
  ASSERT_EQ(ep_run.code, 0) << ep_run.err;
  const nlohmann::json tp = nlohmann::json::parse(tp_run.out);
  const nlohmann::json ep = nlohmann::json::parse(ep_run.out);
  EXPECT_EQ(ep["plan"]["inputs"]["expert_parallel"], true);
  const auto stage = [](const nlohmann::json& j) { return j["plan"]["stages"][0]; };
  EXPECT_EQ(stage(tp)["weights"]["expert_up"]["shard"], "column");
  EXPECT_EQ(stage(tp)["weights"]["expert_up"]["num_tensors"], 48 * 128);
  EXPECT_EQ(stage(ep)["weights"]["expert_up"]["shard"], "expert");
  EXPECT_EQ(stage(ep)["weights"]["expert_up"]["num_tensors"], 48 * 32);
  EXPECT_EQ(stage(ep)["weights"]["expert_up"]["local_shape"], nlohmann::json({768, 2048}));
  // The same fp8 values; the per-row scales and the CUDA backend's form differ with the
  // shapes (a whole expert's 2048 down scales on one GPU, not every expert's on each).
  EXPECT_NEAR(stage(ep)["weight_bytes"].get<double>(), stage(tp)["weight_bytes"].get<double>(),
              0.01 * stage(tp)["weight_bytes"].get<double>());
  EXPECT_EQ(stage(tp)["activations"]["expert_all_to_all_bytes"], 0);
  const int64_t send = int64_t{2048} * 8 * 2048 * 4, recv = int64_t{512} * 8 * 2048 * 4;
  EXPECT_EQ(stage(ep)["activations"]["expert_all_to_all_bytes"],
            send + recv + 2048 * 8 * 4 + 512 * 8 * 4 + 5 * 512 * 2048 * 2);
  r.json = false;
  const Result table = RunWith(r);
  EXPECT_NE(table.out.find("(tp=4, pp=1, experts placed whole)"), std::string::npos)
      << table.out;
  // A dense model has no experts to place.
  VramRequest dense = Request405B();
  dense.expert_parallel = true;
  const Result refused = RunWith(dense);
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("expert parallelism needs a mixture-of-experts model"),
            std::string::npos)
      << refused.err;
}

// Issue 36's command: Qwen3-235B-A22B (4 KV heads) on 8 GPUs answers as 405B does, each KV head
// on two ranks: one head of 128 per rank, 94 layers x 2 x 128 x 2 B = 48,128 B of KV per token.
TEST(VramCliTest, Qwen3_235BOnEightGpusCopiesItsKvHeads) {
  VramRequest r = Request405B();
  r.model = "qwen3-235b-a22b";
  r.context = 40960;
  r.users = 1;
  const Result table = RunWith(r);
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("(tp=8, pp=1)"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("    k                column x2  [128 x 4096]      fp8       x94"),
            std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("(48,128 B/token)"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("VERDICT   FITS"), std::string::npos) << table.out;
  r.json = true;
  const nlohmann::json j = nlohmann::json::parse(RunWith(r).out);
  EXPECT_EQ(j["plan"]["stages"][0]["weights"]["k"]["copies"], 2);
  EXPECT_EQ(j["plan"]["stages"][0]["weights"]["q"]["copies"], 1);
}

// --deterministic_tp_chunks sets the chunk count the plan sizes (16 at tp 8: 2 chunks per
// rank), and a count the ranks do not divide is refused naming the flag.
TEST(VramCliTest, DeterministicTpChunksSizesTheChunkSums) {
  VramRequest r = Request405B();
  r.json = true;
  r.deterministic_tp = true;
  const nlohmann::json eight = nlohmann::json::parse(RunWith(r).out);
  r.deterministic_tp_chunks = 16;
  const Result run = RunWith(r);
  ASSERT_EQ(run.code, 0) << run.err;
  const nlohmann::json sixteen = nlohmann::json::parse(run.out);
  EXPECT_EQ(eight["plan"]["roofline"]["reduction_chunks"], 8);
  EXPECT_EQ(sixteen["plan"]["roofline"]["reduction_chunks"], 16);
  const auto chunk_sums = [](const nlohmann::json& j) {
    return j["plan"]["stages"][0]["activations"]["chunk_sum_bytes"].get<int64_t>();
  };
  EXPECT_EQ(chunk_sums(sixteen) - chunk_sums(eight), (2 - 1 + 16 - 8) * 2048 * 16384 * 4);
  r.json = false;
  r.deterministic_tp_chunks = 12;
  const Result refused = RunWith(r);
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("deterministic_tp_chunks = 12 must be a positive multiple of the 8 "
                             "tensor-parallel ranks"),
            std::string::npos)
      << refused.err;
  r.deterministic_tp = false;
  r.deterministic_tp_chunks = 16;
  const Result without = RunWith(r);
  EXPECT_EQ(without.code, 2);
  EXPECT_NE(without.err.find("deterministic_tp_chunks=16: must be 0 without deterministic_tp"),
            std::string::npos)
      << without.err;
}

TEST(VramCliTest, InvalidTpExitsTwoWithValidDegreesAndCapacityCheck) {
  VramRequest r = Request405B();
  r.gpus = {"6"};
  const Result run = RunWith(r);
  EXPECT_EQ(run.code, 2);
  EXPECT_NE(run.err.find("--gpus=6 --pp=1 --weights=fp8: tensor-parallel degree 6 does not divide"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("are: 1, 2, 4, 8"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("capacity check: 6 x h100-80g could hold the weights alone"),
            std::string::npos)
      << run.err;
}

TEST(VramCliTest, NotFittingExitsOneWithSuggestions) {
  VramRequest r = Request405B();
  r.weights = {"bf16"};
  const Result run = RunWith(r);
  EXPECT_EQ(run.code, 1) << run.err;
  EXPECT_NE(run.out.find("DOES NOT FIT: weights need"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("SUGGESTIONS (each re-planned)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("int4-g128 projection weights"), std::string::npos) << run.out;
}

TEST(VramCliTest, FitModeFindsEightH100s) {
  VramRequest r = Request405B();
  r.gpus = {"1"};
  r.fit = true;
  r.json = true;
  const Result run = RunWith(r);
  ASSERT_EQ(run.code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["fit"]["found"], true);
  EXPECT_EQ(j["fit"]["plan"]["num_ranks"], 8);
  EXPECT_EQ(j["fit"]["weights_only_min_gpus"], 6);
}

// --gpus and --weights lists: every count with every format, planned and printed in turn.
TEST(VramCliTest, SeveralLayoutsArePlannedInTurn) {
  VramRequest r = Request405B();
  r.gpus = {"4", "8", "8x2"};
  r.json = true;
  Result run = RunWith(r);
  EXPECT_EQ(run.code, 1) << run.err;  // 4 x H100 cannot hold 405B in fp8
  const nlohmann::json j = nlohmann::json::parse(run.out);
  ASSERT_EQ(j["layouts"].size(), 3u);
  const std::vector<std::pair<int, int>> want = {{4, 1}, {8, 1}, {8, 2}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(j["layouts"][i]["plan"]["inputs"]["tp"], want[i].first);
    EXPECT_EQ(j["layouts"][i]["plan"]["inputs"]["pp"], want[i].second);
  }
  EXPECT_FALSE(j["layouts"][0]["plan"]["meets_target"].get<bool>());
  EXPECT_FALSE(j["layouts"][0]["suggestions"].empty());
  EXPECT_TRUE(j["layouts"][2]["plan"]["meets_target"].get<bool>());
  r.json = false;
  run = RunWith(r);
  size_t verdicts = 0;
  for (size_t at = run.out.find("VERDICT   "); at != std::string::npos;
       at = run.out.find("VERDICT   ", at + 1)) {
    ++verdicts;
  }
  EXPECT_EQ(verdicts, 3u) << run.out;
  // Formats compared on one count; all fit: exit 0.
  r = Request405B();
  r.weights = {"fp8", "int4"};
  r.json = true;
  run = RunWith(r);
  EXPECT_EQ(run.code, 0) << run.err;
  const nlohmann::json f = nlohmann::json::parse(run.out);
  ASSERT_EQ(f["layouts"].size(), 2u);
  EXPECT_EQ(f["layouts"][0]["plan"]["inputs"]["weights_preset"], "fp8");
  EXPECT_EQ(f["layouts"][1]["plan"]["inputs"]["weights_preset"], "int4");
  EXPECT_LT(f["layouts"][1]["plan"]["stages"][0]["weight_bytes"].get<int64_t>(),
            f["layouts"][0]["plan"]["stages"][0]["weight_bytes"].get<int64_t>());
}

TEST(VramCliTest, BadLayoutsAndCombinationsNameTheFlag) {
  const std::vector<std::pair<void (*)(VramRequest&), std::string>> cases = {
      {[](VramRequest& r) { r.gpus = {"8x"}; },
       "vram: --gpus=8x: must be a device count (8) or tp x pp (8x2), comma-separated\n"},
      {[](VramRequest& r) { r.gpus = {"8", "eight"}; },
       "vram: --gpus=eight: must be a device count (8) or tp x pp (8x2), comma-separated\n"},
      {[](VramRequest& r) { r.gpus = {"0x2"}; }, "vram: --gpus=0x2: tp and pp must be >= 1\n"},
      {[](VramRequest& r) { r.gpus = {}; }, "vram: --gpus=\"\": needs a device count\n"},
      {[](VramRequest& r) {
         r.fit = true;
         r.gpus = {"4", "8"};
       },
       "vram: --fit=true: searches the GPU count itself: give one --gpus and one --weights\n"},
      {[](VramRequest& r) {
         r.fit = true;
         r.report = "x.html";
       },
       "vram: --fit=true: --report and --svg draw the --gpus layouts: run --fit, then --report "
       "with the layout it finds\n"},
  };
  ExpectFlagErrors(cases);
  // An unrunnable layout among several fails the request before anything is printed.
  VramRequest r = Request405B();
  r.gpus = {"8", "12"};  // 12 does not divide 128 query heads
  const Result run = RunWith(r);
  EXPECT_EQ(run.code, 2);
  EXPECT_EQ(run.out, "");
  EXPECT_NE(run.err.find("--gpus=12 --pp=1 --weights=fp8: tensor-parallel degree 12"),
            std::string::npos)
      << run.err;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(VramCliTest, ReportAndSvgAreWrittenBesideTheTable) {
  VramRequest r = Request405B();
  r.gpus = {"8", "8x2"};
  r.report = std::string(std::getenv("TEST_TMPDIR")) + "/report.html";
  r.svg = std::string(std::getenv("TEST_TMPDIR")) + "/memory.svg";
  r.command_line = "vram --model=405b --gpus=8,8x2";
  const Result run = RunWith(r);
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("VERDICT   FITS: "), std::string::npos);
  const std::string page = Slurp(r.report);
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(page.find(std::string("tpserve ") + kTpserveVersion), std::string::npos);
  EXPECT_NE(page.find("<code class=\"command\">vram --model=405b --gpus=8,8x2</code>"),
            std::string::npos);
  EXPECT_NE(page.find("data-layout=\"16 x h100-80g (tp=8, pp=2), fp8\""), std::string::npos);
  const std::string svg = Slurp(r.svg);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(page.find(svg), std::string::npos);  // the page's memory chart, the same bytes
  r.report = std::string(std::getenv("TEST_TMPDIR")) + "/absent/report.html";
  const Result bad = RunWith(r);
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.err, "vram: --report=" + r.report + ": cannot write: No such file or directory\n");
}

TEST(VramCliTest, BadFlagValuesNameFlagValueAndBound) {
  const std::vector<std::pair<void (*)(VramRequest&), std::string>> cases = {
      {[](VramRequest& r) { r.users = 0; }, "vram: --users=0: must be >= 1\n"},
      {[](VramRequest& r) { r.gpus = {"0"}; }, "vram: --gpus=0: must be >= 1\n"},
      {[](VramRequest& r) { r.pp = 3; }, "vram: --pp=3: must be >= 1 and divide --gpus=8\n"},
      {[](VramRequest& r) { r.context = 200000; },
       "vram: --context=200000: must be <= 131072, the model's context length\n"},
      {[](VramRequest& r) { r.max_seqs_per_step = 4096; },
       "vram: --max_seqs_per_step=4096: must be in [1, --max_tokens_per_step=2048]\n"},
      {[](VramRequest& r) { r.max_tokens_per_step = -1; },
       "vram: --max_tokens_per_step=-1: must be >= 1 (or 0: the engine's default for the "
       "device)\n"},
      {[](VramRequest& r) { r.kv_dtype = "q4_0"; },
       "vram: --kv_dtype=q4_0: must be one of auto, f32, f16, bf16, fp8\n"},
      {[](VramRequest& r) { r.safety = 1.5; }, "vram: --safety=1.5: must be in [0, 1)\n"},
  };
  ExpectFlagErrors(cases);
}

TEST(VramCliTest, UnknownNamesListWhatIsKnown) {
  VramRequest r = Request405B();
  r.gpu = "h900";
  Result run = RunWith(r);
  EXPECT_EQ(run.code, 2);
  EXPECT_EQ(run.err.rfind("vram: --gpu=h900: unknown GPU \"h900\"; known: a100-40g", 0), 0u)
      << run.err;
  r = Request405B();
  r.weights = {"int3"};
  run = RunWith(r);
  EXPECT_EQ(run.err.rfind("vram: --weights=int3: unknown weight format", 0), 0u) << run.err;
  r = Request405B();
  r.role_formats = "embeding=q8_0";
  run = RunWith(r);
  EXPECT_EQ(run.err.rfind("vram: --role_formats=embeding=q8_0: unknown role", 0), 0u) << run.err;
  r = Request405B();
  r.model = "";
  EXPECT_EQ(RunWith(r).code, 2);
}

TEST(VramCliTest, RoleFormatsOverrideOneRole) {
  VramRequest r = Request405B();
  r.role_formats = "embedding=fp8,lm_head=fp8";
  r.json = true;
  const Result run = RunWith(r);
  ASSERT_EQ(run.code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["plan"]["inputs"]["weight_formats"]["lm_head"], "fp8");
  EXPECT_EQ(j["plan"]["inputs"]["weight_formats"]["q"], "fp8");
  EXPECT_EQ(j["plan"]["inputs"]["weight_formats"]["attn_norm"], "bf16");
}

TEST(VramCliTest, CpuHostNeedsBandwidthAndReadsMeminfo) {
  VramRequest r;
  r.model = "smollm2";
  r.gpu = "cpu-host";
  r.context = 2048;
  r.users = 4;
  Result run = RunWith(r);
  EXPECT_EQ(run.code, 2);
  EXPECT_EQ(run.err.rfind("vram: --host_bandwidth_gbs=0: must be > 0 with --gpu=cpu-host", 0), 0u)
      << run.err;

  r.host_bandwidth_gbs = 20;
  r.meminfo = TempFile("meminfo", "MemTotal:        8388608 kB\n");
  r.json = true;
  run = RunWith(r);
  ASSERT_EQ(run.code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["plan"]["device"]["memory_bytes"], int64_t{8} << 30);
  EXPECT_EQ(j["plan"]["device"]["runtime_reserve_bytes"], 0);
  // The engine's defaults on a CPU host: f16 KV cache, f32 activations.
  EXPECT_EQ(j["plan"]["inputs"]["kv_cache_dtype"], "f16");
  EXPECT_EQ(j["plan"]["inputs"]["activation_dtype"], "f32");
  EXPECT_EQ(j["plan"]["stages"][0]["kv_bytes_per_token"], 2 * 30 * 3 * 64 * 2);
  EXPECT_DOUBLE_EQ(j["plan"]["roofline"]["memory_bandwidth_bytes_per_s"].get<double>(), 20e9);
}

// Three CPU ranks share the host: each plans against a third of its memory and bandwidth, so
// tensor parallelism cannot promise more bandwidth than the host has; shared memory between
// them still runs at the host's speed. A measured decode efficiency scales the memory time.
TEST(VramCliTest, CpuHostRanksShareMemoryAndBandwidth) {
  VramRequest r;
  r.model = "smollm2";
  r.gpu = "cpu-host";
  r.gpus = {"3"};
  r.context = 2048;
  r.host_bandwidth_gbs = 12;
  r.meminfo = TempFile("meminfo3", "MemTotal:        3145728 kB\n");
  r.json = true;
  Result run = RunWith(r);
  ASSERT_EQ(run.code, 0) << run.err;
  nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["plan"]["device"]["memory_bytes"], int64_t{1} << 30);
  EXPECT_DOUBLE_EQ(j["plan"]["roofline"]["memory_bandwidth_bytes_per_s"].get<double>(), 4e9);
  EXPECT_DOUBLE_EQ(j["plan"]["roofline"]["link_bandwidth_bytes_per_s"].get<double>(), 6e9);
  const double full = j["plan"]["roofline"]["memory_time_s"].get<double>();
  r.decode_efficiency = 0.5;
  j = nlohmann::json::parse(RunWith(r).out);
  EXPECT_DOUBLE_EQ(j["plan"]["roofline"]["memory_time_s"].get<double>(), 2 * full);
  r.decode_efficiency = 1.5;
  run = RunWith(r);
  EXPECT_EQ(run.code, 2);
  EXPECT_EQ(run.err.rfind("vram: --decode_efficiency=1.5: must be in (0, 1]", 0), 0u) << run.err;
}

TEST(VramCliTest, ModelFromConfigJson) {
  // meta-llama/Llama-3.1-8B config.json.
  const std::string path = TempFile("config.json", R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "bos_token_id": 128000, "eos_token_id": 128001,
    "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
    "max_position_embeddings": 131072, "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 128256})");
  VramRequest r;
  r.model = path;
  r.gpu = "l40s";
  r.context = 8192;
  r.json = true;
  const Result run = RunWith(r);
  ASSERT_EQ(run.code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["plan"]["totals"]["checkpoint_bytes"], 2 * int64_t{8'030'261'248});

  r.model = TempFile("broken.json", "{\"hidden_size\": 4096}");
  EXPECT_EQ(RunWith(r).code, 2);
  r.model = std::string(std::getenv("TEST_TMPDIR")) + "/absent.json";
  EXPECT_NE(RunWith(r).err.find("cannot read"), std::string::npos);
}

// Llama 4 as published (Llama4ForConditionalGeneration: the golden text model's directory
// rewritten by checkpoint/testing/multimodal_checkpoint.h): the vision tower is not planned, so
// the file's tensor bytes checked against the plan are the text model's, as from its own
// directory.
TEST(VramCliTest, MultimodalCheckpointPlansItsTextModel) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/llama4_multimodal";
  std::filesystem::create_directories(dir);
  const std::string text_dir = "tests/golden/families/llama4_hf";
  ASSERT_TRUE(WriteMultimodalCheckpoint(text_dir, dir, "llama4", "language_model.").ok());
  VramRequest r;
  r.gpu = "l40s";
  r.context = 128;
  const auto check_line = [&](const std::string& model) {
    r.model = model;
    const Result run = RunWith(r);
    EXPECT_EQ(run.code, 0) << run.err;
    const size_t at = run.out.find("CHECK     tensor bytes in the file: ");
    EXPECT_NE(at, std::string::npos) << run.out;
    return at == std::string::npos ? "" : run.out.substr(at, run.out.find('\n', at) - at);
  };
  const std::string wrapped = check_line(dir);
  EXPECT_NE(wrapped.find("(equal)"), std::string::npos) << wrapped;
  EXPECT_EQ(wrapped, check_line(text_dir));
}

}  // namespace
}  // namespace tpserve
