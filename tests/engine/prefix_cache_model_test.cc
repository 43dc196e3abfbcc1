// The prefix cache on the real SmolLM2: requests that share a long system prompt give the same
// greedy tokens with the cache on as with it off, sequentially and concurrently, at TP=1 and
// TP=3 (the block tables that share blocks go to every rank, so every rank's KV slice is
// shared), and the cache does serve their shared prompt blocks.
//
// Why the tokens can be identical, not just close: a reused block holds exactly the bytes the
// sequence would have written itself, and every kernel computes each token's row alone
// (attention walks a row's keys block by block from position 0 and reads them from the KV
// cache, never from the chunk's fresh values; the CPU dot kernels sum a row the same way
// whether it shares the call with 0 or 3 others). So neither the cache nor the batch a request
// lands in (which other requests share its steps, how its prompt is chunked) changes its
// tokens: batch invariance, checked here on the real model.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/admission.h"
#include "coordinator/engine.h"
#include "coordinator/model_bundle.h"
#include "model/bundled_model.h"
#include "worker/local_executor.h"

namespace tpserve {
namespace {

constexpr int32_t kBlockTokens = 16;
constexpr int32_t kNumBlocks = 256;

struct Served {
  std::vector<std::vector<int32_t>> ids;  // per request
  std::vector<Usage> usage;
  EngineStats stats;
};

enum class Order {
  kOneByOne,           // each request runs to completion before the next is submitted
  kFirstThenTogether,  // the first alone, then all the others submitted at once
  kAllTogether,        // all submitted at once
};

// Serves `prompts` greedily.
Served Serve(const ModelBundle& bundle, const std::vector<std::vector<int32_t>>& prompts,
             bool prefix_caching, Order order, int tp, int64_t step_tokens) {
  Served out;
  out.ids.resize(prompts.size());
  out.usage.resize(prompts.size());
  RankLoad load;
  load.world_size = tp;
  load.num_kv_blocks = kNumBlocks;
  load.block_size_tokens = kBlockTokens;
  load.max_tokens_per_step = step_tokens;
  load.model.max_logit_rows = static_cast<int32_t>(prompts.size());
  load.deterministic_tp = true;
  auto exec = LocalExecutor::Create(bundle.files, load);
  EXPECT_TRUE(exec.ok()) << exec.status();
  if (!exec.ok()) return out;
  EngineOptions eo;
  eo.num_kv_blocks = kNumBlocks;
  eo.block_size_tokens = kBlockTokens;
  eo.context_length = 2048;
  eo.scheduler.max_num_seqs = static_cast<int32_t>(prompts.size());
  eo.scheduler.max_tokens_per_step = static_cast<int32_t>(step_tokens);
  eo.eos_token_ids = bundle.EosTokenIds();
  eo.enable_prefix_caching = prefix_caching;
  Engine engine(eo, *std::move(exec), &*bundle.tokenizer);
  for (size_t i = 0; i < prompts.size(); ++i) {
    tpserve::v1::GenerateRequest proto;
    proto.mutable_token_ids()->mutable_ids()->Add(prompts[i].begin(), prompts[i].end());
    proto.mutable_sampling()->set_temperature(0.0f);
    proto.set_max_new_tokens(12);
    absl::StatusOr<AdmittedRequest> r =
        bundle.Door(eo.context_length, engine.kv_capacity()).Admit(proto);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return out;
    EXPECT_TRUE(engine
                    .Submit(*std::move(r),
                            [&out, i](GenerationEvent e) {
                              out.ids[i].insert(out.ids[i].end(), e.token_ids.begin(),
                                                e.token_ids.end());
                              if (e.finish != FinishReason::kNone) out.usage[i] = e.usage;
                            })
                    .ok());
    if (order == Order::kOneByOne || (order == Order::kFirstThenTogether && i == 0)) {
      while (engine.Step()) {
      }
    }
  }
  while (engine.Step()) {
  }
  out.stats = engine.stats();
  return out;
}

size_t CommonPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  return std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin();
}

class PrefixCacheModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> path = BundledModelPath();
    ASSERT_TRUE(path.ok()) << path.status();
    absl::StatusOr<ModelBundle> bundle = LoadModelBundle(*path);
    ASSERT_TRUE(bundle.ok()) << bundle.status();
    bundle_.emplace(*std::move(bundle));
    std::string system = "You are a careful assistant for a small bookshop.";
    for (const char* rule :
         {" Answer in one short sentence.", " Never invent a title that is not in stock.",
          " Prices are in euros and include tax.", " The shop opens at nine and closes at six.",
          " Orders ship within two working days.", " Be polite, brief and concrete."}) {
      for (int i = 0; i < 4; ++i) system += rule;  // ~240 tokens in all
    }
    for (const char* q : {"Do you have any books about the sea?", "When do you open?",
                          "How much is shipping?", "Name three colors."}) {
      absl::StatusOr<std::vector<int32_t>> ids =
          bundle_->EncodeChat({{"system", system}, {"user", q}});
      ASSERT_TRUE(ids.ok()) << ids.status();
      prompts_.push_back(*std::move(ids));
    }
  }

  // Full blocks of the longest prefix request i shares with an earlier prompt, capped so that at
  // least one token is computed; the earlier requests' generated tokens share nothing here.
  int64_t ExpectedCachedTokens(size_t i) const {
    size_t shared = 0;
    for (size_t j = 0; j < i; ++j) shared = std::max(shared, CommonPrefix(prompts_[i], prompts_[j]));
    const int64_t expected = std::min<int64_t>(
        shared / kBlockTokens * kBlockTokens,
        (static_cast<int64_t>(prompts_[i].size()) - 1) / kBlockTokens * kBlockTokens);
    if (i > 0) {
      EXPECT_GE(expected, 200) << "the shared system prompt should be long";
    }
    return expected;
  }

  std::optional<ModelBundle> bundle_;
  std::vector<std::vector<int32_t>> prompts_;
};

// Chunks of 48 tokens: the cold prompt is cut off block boundaries, the warm ones start at one.
TEST_F(PrefixCacheModelTest, SequentialRequestsHitAndGiveTheSameGreedyTokens) {
  const Served off = Serve(*bundle_, prompts_, false, Order::kOneByOne, 1, 48);
  const Served on = Serve(*bundle_, prompts_, true, Order::kOneByOne, 1, 48);
  ASSERT_EQ(on.ids.size(), prompts_.size());
  for (size_t i = 0; i < prompts_.size(); ++i) {
    ASSERT_FALSE(off.ids[i].empty()) << i;
    EXPECT_EQ(on.ids[i], off.ids[i]) << "request " << i << ": on \""
                                     << *bundle_->tokenizer->Decode(on.ids[i]) << "\" off \""
                                     << *bundle_->tokenizer->Decode(off.ids[i]) << "\"";
    EXPECT_EQ(off.usage[i].cached_tokens, 0);
    EXPECT_EQ(on.usage[i].cached_tokens, ExpectedCachedTokens(i)) << "request " << i;
  }
  EXPECT_EQ(off.stats.prefix_cache_hits_tokens, 0);
  EXPECT_EQ(on.stats.prefix_cache_hits_tokens,
            ExpectedCachedTokens(1) + ExpectedCachedTokens(2) + ExpectedCachedTokens(3));
}

TEST_F(PrefixCacheModelTest, ConcurrentWarmRequestsGiveTheSameTokensOnEveryRank) {
  const Served off = Serve(*bundle_, prompts_, false, Order::kFirstThenTogether, 1, 1024);
  for (int tp : {1, 3}) {
    const Served on = Serve(*bundle_, prompts_, true, Order::kFirstThenTogether, tp, 1024);
    for (size_t i = 0; i < prompts_.size(); ++i) {
      ASSERT_FALSE(off.ids[i].empty()) << i;
      EXPECT_EQ(on.ids[i], off.ids[i])
          << "TP=" << tp << " request " << i << ": \"" << *bundle_->tokenizer->Decode(on.ids[i])
          << "\" vs \"" << *bundle_->tokenizer->Decode(off.ids[i]) << "\"";
      EXPECT_EQ(on.usage[i].cached_tokens, ExpectedCachedTokens(i)) << "TP=" << tp << " " << i;
    }
  }
}

// Batch invariance without the cache: each request alone, in 48-token prefill chunks, gives the
// same greedy tokens as all four at once in one 1024-token step and then batched decodes.
// (Greedy tokens survive small float differences; the bitwise check of the logits is
// //worker:llama_model_test's BatchOfThreeEqualsOneAtATime.)
TEST_F(PrefixCacheModelTest, GreedyTokensAreTheSameAloneOrAmongOtherRequests) {
  const Served alone = Serve(*bundle_, prompts_, false, Order::kOneByOne, 1, 48);
  const Served together = Serve(*bundle_, prompts_, false, Order::kAllTogether, 1, 1024);
  const Served cached_together = Serve(*bundle_, prompts_, true, Order::kAllTogether, 1, 100);
  for (size_t i = 0; i < prompts_.size(); ++i) {
    ASSERT_FALSE(alone.ids[i].empty()) << i;
    EXPECT_EQ(together.ids[i], alone.ids[i]) << "request " << i;
    EXPECT_EQ(cached_together.ids[i], alone.ids[i]) << "request " << i;
  }
}

}  // namespace
}  // namespace tpserve
