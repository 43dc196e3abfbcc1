// DeepSeek-V3's multi-token-prediction layer as a speculative draft (--speculative=mtp), against
// a float64 numpy reference (tests/golden/families/make_mtp_golden.py): the tiny deepseek2
// checkpoint with an MTP layer (deepseek2_mtp_hf), the target prefilled with a prompt and its
// greedy continuation, then the draft over the same tokens, its logits at every row within the
// bound of the reference's at TP 1 and 2, in one step or two. And a model without an MTP layer
// refused by name.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <thread>

#include "checkpoint/model_files.h"
#include "comm/in_process_communicator.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "nlohmann/json.hpp"
#include "worker/generate.h"
#include "worker/kv_cache.h"
#include "worker/llama_model.h"

namespace tpserve {
namespace {

constexpr char kDir[] = "tests/golden/families/";
// Of max|logit|: an f32 model against a float64 reference, one MLA + MoE layer on top of three
// (the target's own goldens are within 1.8e-6).
constexpr double kMaxDiff = 1e-4;

struct MtpGolden {
  std::string name;
  std::vector<int32_t> ids;     // a prompt and its greedy continuation
  std::vector<float> logits;    // [ids.size() - 1, vocab]: the draft at MTP positions 0..
  std::vector<float> gaps;      // the reference's top-1 over top-2 gap per row
};

std::vector<MtpGolden> LoadGoldens(int64_t vocab) {
  std::ifstream in(std::string(kDir) + "deepseek2_mtp_goldens.json");
  EXPECT_TRUE(in.good());
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<MtpGolden> out;
  for (const auto& [name, p] : j["prompts"].items()) {
    const nlohmann::json& g = p["greedy"];
    MtpGolden m;
    m.name = name;
    m.ids = g["ids"].get<std::vector<int32_t>>();
    m.gaps = g["mtp_gaps"].get<std::vector<float>>();
    m.logits.resize((m.ids.size() - 1) * vocab);
    std::ifstream f(std::string(kDir) + g["mtp_logits_file"].get<std::string>(),
                    std::ios::binary);
    f.read(reinterpret_cast<char*>(m.logits.data()), m.logits.size() * sizeof(float));
    EXPECT_TRUE(f.good()) << name;
    out.push_back(std::move(m));
  }
  return out;
}

constexpr float kUntouched = -12345.0f;  // a logits buffer before Forward

// On `world` ranks (threads): the target prefills `ids`, then the draft steps over them, in
// one step or (split > 0) two, the second from position `split`. Rank 0's draft logits.
std::vector<float> RunDraft(const ModelFiles& target, const ModelFiles& draft, int world,
                            const std::vector<int32_t>& ids, int64_t split) {
  auto group = std::make_shared<InProcessGroup>(world);
  auto draft_group = std::make_shared<InProcessGroup>(world);
  const int64_t vocab = target.config.vocab_size, n = std::ssize(ids);
  std::vector<std::vector<float>> outs(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      CpuBackend backend(CpuBackendOptions{.num_threads = 1});
      InProcessCommunicator comm(group, r), draft_comm(draft_group, r);
      auto model = LlamaModel::Load(target.config, *target.weights, {r, world}, &backend, &comm,
                                    {.max_tokens_per_step = 64, .scheme = target.scheme});
      ASSERT_TRUE(model.ok()) << model.status();
      auto mtp = LlamaModel::Load(draft.config, *draft.weights, {r, world}, &backend,
                                  &draft_comm, {.max_tokens_per_step = 64, .scheme = draft.scheme});
      ASSERT_TRUE(mtp.ok()) << mtp.status();
      auto cache = KvCache::Create((*model)->KvShape(8, 8, DType::kF32), backend);
      auto draft_cache = KvCache::Create((*mtp)->KvShape(8, 8, DType::kF32), backend);
      auto store = KvCache::Create(
          HiddenStoreShape(target.config, 8, 8, backend.activation_dtype()), backend);
      ASSERT_TRUE(cache.ok() && draft_cache.ok() && store.ok());
      ASSERT_TRUE((*model)->SetHiddenStore(store->get()).ok());
      ASSERT_TRUE((*mtp)->SetHiddenStore(store->get()).ok());
      std::vector<int32_t> table(8);
      std::iota(table.begin(), table.end(), 0);
      StepBatch prefill;
      prefill.Add(0, 0, ids, table, 1);
      std::vector<float> last(vocab);
      ASSERT_TRUE((*model)->Forward(prefill, cache->get(), last.data()).ok());
      // The draft's rows: the token at p is MTP position p - 1's, so n tokens give n - 1 rows.
      const std::vector<std::pair<int64_t, int64_t>> steps =
          split > 0 ? std::vector<std::pair<int64_t, int64_t>>{{0, split}, {split, n - split}}
                    : std::vector<std::pair<int64_t, int64_t>>{{0, n}};
      for (const auto& [start, count] : steps) {
        StepBatch step;
        step.Add(0, start, absl::MakeConstSpan(ids).subspan(start, count), table,
                 start == 0 ? count - 1 : count);
        std::vector<float> logits(step.num_logit_rows() * vocab, kUntouched);
        const absl::Status s = (*mtp)->Forward(step, draft_cache->get(), logits.data());
        ASSERT_TRUE(s.ok()) << s;
        outs[r].insert(outs[r].end(), logits.begin(), logits.end());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < world; ++r) {  // only the sampling rank receives logits
    if (r == kSamplingRank) continue;
    EXPECT_TRUE(std::all_of(outs[r].begin(), outs[r].end(),
                            [](float v) { return v == kUntouched; }))
        << "rank " << r;
  }
  return outs[kSamplingRank];
}

TEST(MtpDraftTest, DraftLogitsMatchTheReferenceAtEveryRow) {
  absl::StatusOr<ModelFiles> target = OpenModelFiles(std::string(kDir) + "deepseek2_mtp_hf");
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(target->config.num_mtp_layers, 1);
  absl::StatusOr<ModelFiles> draft = MtpDraftFiles(*target);
  ASSERT_TRUE(draft.ok()) << draft.status();
  EXPECT_TRUE(draft->config.is_mtp_draft());
  EXPECT_EQ(draft->config.num_layers, 1);
  EXPECT_EQ(draft->config.mtp_checkpoint_layer, 3);
  const int64_t vocab = target->config.vocab_size;
  for (const MtpGolden& g : LoadGoldens(vocab)) {
    const std::vector<float> one = RunDraft(*target, *draft, 1, g.ids, 0);
    ASSERT_EQ(one.size(), g.logits.size()) << g.name;
    double max_abs = 0, max_diff = 0;
    for (size_t i = 0; i < one.size(); ++i) {
      max_abs = std::max(max_abs, std::abs(double{g.logits[i]}));
      max_diff = std::max(max_diff, std::abs(double{one[i]} - g.logits[i]));
    }
    EXPECT_LT(max_diff, kMaxDiff * max_abs) << g.name;
    std::printf("mtp %-6s rows %zu max|diff| %.2e of max|logit| %.1f\n", g.name.c_str(),
                g.ids.size() - 1, max_diff / max_abs, max_abs);
    for (size_t row = 0; row + 1 < g.ids.size(); ++row) {
      if (g.gaps[row] < 1e-3 * max_abs) continue;  // a near-tie either pick is right
      const auto want = absl::MakeConstSpan(g.logits).subspan(row * vocab, vocab);
      EXPECT_EQ(ArgMax(absl::MakeConstSpan(one).subspan(row * vocab, vocab)), ArgMax(want))
          << g.name << " row " << row;
    }
    // Two steps (the catch-up of a later draft call starts past position 0): the same floats.
    EXPECT_EQ(RunDraft(*target, *draft, 1, g.ids, 5), one) << g.name << " in two steps";
    // Two ranks, the draft's heads and experts split as the target's: within the bound.
    const std::vector<float> two = RunDraft(*target, *draft, 2, g.ids, 0);
    ASSERT_EQ(two.size(), one.size());
    double tp_diff = 0;
    for (size_t i = 0; i < one.size(); ++i) {
      tp_diff = std::max(tp_diff, std::abs(double{two[i]} - one[i]));
    }
    EXPECT_LT(tp_diff, kMaxDiff * max_abs) << g.name << " at TP 2";
  }
}

// --speculative=mtp on a checkpoint without the layer: refused, naming the model and the key.
TEST(MtpDraftTest, AModelWithoutAnMtpLayerIsRefusedByName) {
  absl::StatusOr<ModelFiles> plain = OpenModelFiles(std::string(kDir) + "deepseek2_hf");
  ASSERT_TRUE(plain.ok()) << plain.status();
  const absl::Status s = MtpDraftFiles(*plain).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("has no multi-token-prediction layer (its num_nextn_predict_layers "
                             "is 0)"),
            std::string::npos)
      << s;
  // And a draft stepped without the target's hidden states says so.
  absl::StatusOr<ModelFiles> target = OpenModelFiles(std::string(kDir) + "deepseek2_mtp_hf");
  ASSERT_TRUE(target.ok());
  absl::StatusOr<ModelFiles> draft = MtpDraftFiles(*target);
  ASSERT_TRUE(draft.ok());
  CpuBackend backend(CpuBackendOptions{.num_threads = 1});
  SingleRankCommunicator comm;
  auto mtp = LlamaModel::Load(draft->config, *draft->weights, {0, 1}, &backend, &comm,
                              {.max_tokens_per_step = 16, .scheme = draft->scheme});
  ASSERT_TRUE(mtp.ok()) << mtp.status();
  auto cache = KvCache::Create((*mtp)->KvShape(2, 8, DType::kF32), backend);
  ASSERT_TRUE(cache.ok());
  StepBatch step;
  step.Add(0, 0, std::vector<int32_t>{1, 2, 3}, {0}, 1);
  std::vector<float> logits(target->config.vocab_size);
  const absl::Status none = (*mtp)->Forward(step, cache->get(), logits.data());
  EXPECT_EQ(none.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(none.message().find("no store set"), std::string::npos) << none;
}

}  // namespace
}  // namespace tpserve
