// Speculative decoding on the real SmolLM2 (coordinator/speculative), through the engine. Two
// targets run this file: speculative_test (every build, sanitizers included) and
// speculative_sweep_test (the sweeps and the distribution test; not under the sanitizers,
// which would take minutes over them to check the same code paths):
//   - greedy tokens are bit-identical with speculation on and off, for prompt lookup and for a
//     draft model (the Q4_1 file drafting for the same model held as bf16), at K = 1..8, alone
//     and eight at once, at TP 1 and 3: verifying K drafts in one step gives the logits one
//     token at a time gives;
//   - seeded sampled tokens are identical too (drafts are checked by sampling each row with
//     the request's own noise), and unseeded ones have the same distribution: a chi-square
//     test over many requests, with a control that the test does tell distributions apart;
//   - the KV cache stays exact through rejections: every running sequence holds the blocks its
//     tokens need, counted from its block table, and the prefix cache serves blocks written
//     across rollbacks with the right KV;
//   - stop sequences, max_new_tokens, logprobs, a JSON schema, cancellation and the per-request
//     switch behave as without speculation.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/admission.h"
#include "coordinator/engine.h"
#include "coordinator/model_bundle.h"
#include "coordinator/speculative/draft_model.h"
#include "coordinator/structured/compiler.h"
#include "model/bundled_model.h"
#include "model/weight_formats.h"
#include "worker/local_executor.h"

namespace tpserve {
namespace {

constexpr int32_t kBlockTokens = 16;
constexpr int32_t kKvBlocks = 256;
constexpr int32_t kMaxSeqs = 8;

// Every K at TP 1; the ends and the middle at TP 3.
std::vector<int32_t> DraftLengths(int tp) {
  if (tp > 1) return {1, 4, 8};
  return {1, 2, 3, 4, 5, 6, 7, 8};
}

struct Output {
  std::vector<int32_t> ids;
  std::vector<SampledToken> logprobs;
  std::string text;
  FinishReason finish = FinishReason::kNone;
  int finishes = 0;
  Usage usage;
  std::string matched_stop;
  std::optional<StructuredOutcome> structured;
};

struct SpecSetup {
  SpeculativeMethod method = SpeculativeMethod::kOff;
  int32_t k = 4;
  int tp = 1;
  bool adaptive = false;  // a fixed K: every step drafts as much as it can
  int32_t max_batch = 0;  // 0: speculate at any batch size
  int32_t max_seqs = kMaxSeqs;
  // With a draft model, the target is held as bf16 (so that the Q4_1 draft differs from it);
  // false: the file as stored for both (cheap, for the sanitizer builds).
  bool wide_target = true;
};

class SpeculativeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (bundle_ != nullptr) return;  // loaded by the other suite (SpeculativeTpTest) already
    absl::StatusOr<std::string> path = BundledModelPath();
    ASSERT_TRUE(path.ok()) << path.status();
    absl::StatusOr<ModelBundle> bundle = LoadModelBundle(*path);
    ASSERT_TRUE(bundle.ok()) << bundle.status();
    bundle_ = new ModelBundle(*std::move(bundle));
    auto compiler = ConstraintCompiler::Create(
        *bundle_->tokenizer, static_cast<int32_t>(bundle_->files.config.vocab_size),
        bundle_->EosTokenIds());
    ASSERT_TRUE(compiler.ok()) << compiler.status();
    compiler_ = compiler->release();
  }

  static std::unique_ptr<LocalExecutor> MakeExecutor(int tp, const char* preset, int64_t rows) {
    RankLoad load;
    load.world_size = tp;
    load.num_kv_blocks = kKvBlocks;
    load.block_size_tokens = kBlockTokens;
    load.max_tokens_per_step = 512;
    load.model.max_logit_rows = static_cast<int32_t>(rows);
    load.model.weights = preset != nullptr ? preset : "";
    load.deterministic_tp = true;
    auto exec = LocalExecutor::Create(bundle_->files, load);
    EXPECT_TRUE(exec.ok()) << exec.status();
    return exec.ok() ? *std::move(exec) : nullptr;
  }

  // The target is held as bf16 when a draft model drafts (the Q4_1 file, as stored), and for
  // its baseline; prompt lookup runs on the file as stored.
  void MakeEngine(const SpecSetup& setup, bool bf16_target = false) {
    const int64_t rows = int64_t{setup.max_seqs} * (1 + setup.k);
    EngineOptions eo;
    eo.num_kv_blocks = kKvBlocks;
    eo.block_size_tokens = kBlockTokens;
    eo.context_length = 1024;
    eo.scheduler.max_num_seqs = setup.max_seqs;
    eo.scheduler.max_tokens_per_step = 512;
    eo.scheduler.max_logit_rows = static_cast<int32_t>(rows);
    eo.eos_token_ids = bundle_->EosTokenIds();
    eo.speculative.method = setup.method;
    eo.speculative.num_speculative_tokens = setup.k;
    eo.speculative.adaptive = setup.adaptive;
    eo.speculative.max_batch = setup.max_batch;
    std::unique_ptr<Proposer> proposer;
    if (setup.method == SpeculativeMethod::kDraft) {
      DraftModelOptions d;
      d.max_logit_rows = setup.max_seqs;
      proposer = std::make_unique<DraftModelProposer>(
          MakeExecutor(setup.tp, nullptr, setup.max_seqs), d);
    }
    const bool bf16 =
        bf16_target || (setup.method == SpeculativeMethod::kDraft && setup.wide_target);
    engine_ = std::make_unique<Engine>(eo, MakeExecutor(setup.tp, bf16 ? "bf16" : nullptr, rows),
                                       &*bundle_->tokenizer, std::move(proposer));
    door_ = std::make_unique<Admitter>(
        bundle_->Door(eo.context_length, engine_->kv_capacity(), compiler_));
  }

  static tpserve::v1::GenerateRequest Chat(const std::string& question, int max_new_tokens) {
    tpserve::v1::GenerateRequest proto;
    tpserve::v1::ChatMessage* m = proto.mutable_chat()->add_messages();
    m->set_role("user");
    m->set_content(question);
    proto.mutable_sampling()->set_temperature(0.0f);
    proto.set_max_new_tokens(max_new_tokens);
    return proto;
  }

  // Prompts of several kinds: input-grounded ones (where prompt lookup finds its drafts) and
  // open-ended ones (where it mostly does not).
  static std::vector<tpserve::v1::GenerateRequest> Prompts(int max_new_tokens) {
    return {
        Chat("Repeat this sentence exactly, twice: The quick brown fox jumps over the lazy dog "
             "near the quiet river bank.", max_new_tokens),
        Chat("Fix the bug in this Python function and print the whole function:\n"
             "def total(xs):\n    s = 0\n    for x in xs:\n        s = x\n    return s\n",
             max_new_tokens),
        Chat("Tell me a short story about a dragon who learns to cook.", max_new_tokens),
        Chat("List the planets of the solar system, one per line.", max_new_tokens),
    };
  }

  static EventCallback Collect(Output& out) {
    return [&out](GenerationEvent e) {
      EXPECT_EQ(out.finishes, 0) << "an event after the finish";
      out.ids.insert(out.ids.end(), e.token_ids.begin(), e.token_ids.end());
      out.logprobs.insert(out.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
      out.text += e.text;
      if (e.finish != FinishReason::kNone) {
        out.finish = e.finish;
        ++out.finishes;
        out.usage = e.usage;
        out.matched_stop = e.matched_stop_sequence;
        out.structured = e.structured;
      }
    };
  }

  // Submits every request and runs the engine dry, checking the KV accounting after every
  // step; cancels them all after `cancel_after_steps` steps when >= 1.
  std::vector<Output> Run(const std::vector<tpserve::v1::GenerateRequest>& protos,
                          int cancel_after_steps = -1) {
    std::vector<Output> out(protos.size());
    std::vector<int64_t> ids;
    for (size_t i = 0; i < protos.size(); ++i) {
      absl::StatusOr<AdmittedRequest> r = door_->Admit(protos[i]);
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) return std::vector<Output>(protos.size());
      absl::StatusOr<int64_t> id = engine_->Submit(*std::move(r), Collect(out[i]));
      EXPECT_TRUE(id.ok());
      ids.push_back(*id);
    }
    for (int step = 1; engine_->Step(); ++step) {
      absl::Status kv = engine_->CheckKvAccounting();
      EXPECT_TRUE(kv.ok()) << "after step " << step << ": " << kv;
      if (step == cancel_after_steps) {
        for (int64_t id : ids) engine_->Cancel(id);
      }
    }
    const EngineStats stats = engine_->stats();
    EXPECT_EQ(stats.free_kv_blocks, stats.total_kv_blocks) << "KV blocks leaked";
    for (const Output& o : out) EXPECT_EQ(o.finishes, 1);
    return out;
  }

  // An input-grounded and an open-ended prompt alone, then all of them at once (cycled to
  // kMaxSeqs requests).
  std::vector<std::vector<int32_t>> RunAloneAndBatched(
      const std::vector<tpserve::v1::GenerateRequest>& prompts) {
    std::vector<std::vector<int32_t>> ids;
    for (size_t i : {0, 2}) ids.push_back(Run({prompts[i]})[0].ids);
    std::vector<tpserve::v1::GenerateRequest> batch;
    for (int i = 0; i < kMaxSeqs; ++i) batch.push_back(prompts[i % prompts.size()]);
    for (const Output& o : Run(batch)) ids.push_back(o.ids);
    return ids;
  }

  static ModelBundle* bundle_;
  static ConstraintCompiler* compiler_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Admitter> door_;
};

ModelBundle* SpeculativeTest::bundle_ = nullptr;
ConstraintCompiler* SpeculativeTest::compiler_ = nullptr;

// The sweeps, one test case per TP degree so that their shards (speculative_sweep_test) take
// a core each.
class SpeculativeTpTest : public SpeculativeTest, public ::testing::WithParamInterface<int> {};

INSTANTIATE_TEST_SUITE_P(Tp, SpeculativeTpTest, ::testing::Values(1, 3),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "tp" + std::to_string(info.param);
                         });

TEST_P(SpeculativeTpTest, PromptLookupGreedyTokensAreBitIdenticalAtEveryKBatchAndTp) {
  const auto prompts = Prompts(32);
  const int tp = GetParam();
  MakeEngine({});
  const auto expected = RunAloneAndBatched(prompts);
  for (int32_t k : DraftLengths(tp)) {
    MakeEngine({SpeculativeMethod::kNgram, k, tp});
    EXPECT_EQ(RunAloneAndBatched(prompts), expected) << "K=" << k << " TP=" << tp;
    const EngineStats stats = engine_->stats();
    EXPECT_GT(stats.spec_draft_tokens, 0) << "K=" << k;
    EXPECT_GT(stats.spec_accepted_tokens, 0) << "K=" << k;
    EXPECT_LE(stats.spec_accepted_tokens, stats.spec_draft_tokens);
    // Each verifying step samples one token after its accepted drafts, unless the request
    // ended on an accepted draft (at most once per request: 2 alone + 8 batched).
    EXPECT_LE(stats.spec_emitted_tokens - stats.spec_accepted_tokens, stats.spec_verify_steps);
    EXPECT_GE(stats.spec_emitted_tokens - stats.spec_accepted_tokens,
              stats.spec_verify_steps - 10);
  }
}

TEST_P(SpeculativeTpTest, DraftModelGreedyTokensAreBitIdenticalAtEveryKBatchAndTp) {
  const auto prompts = Prompts(24);
  const int tp = GetParam();
  MakeEngine({.tp = tp}, /*bf16_target=*/true);
  const auto expected = RunAloneAndBatched(prompts);
  for (int32_t k : DraftLengths(tp)) {
    MakeEngine({SpeculativeMethod::kDraft, k, tp});
    EXPECT_EQ(RunAloneAndBatched(prompts), expected) << "K=" << k << " TP=" << tp;
    const EngineStats stats = engine_->stats();
    // Q4_1 and bf16 of one model agree on most greedy tokens.
    EXPECT_GT(stats.spec_accepted_tokens * 2, stats.spec_draft_tokens) << "K=" << k;
  }
}

TEST_F(SpeculativeTest, SeededSamplesAreIdenticalWithEitherMethod) {
  std::vector<tpserve::v1::GenerateRequest> prompts = Prompts(24);
  for (size_t i = 0; i < prompts.size(); ++i) {
    prompts[i].mutable_sampling()->set_temperature(0.8f);
    prompts[i].mutable_sampling()->set_top_p(0.95f);
    prompts[i].mutable_sampling()->set_seed(1000 + i);
  }
  MakeEngine({}, /*bf16_target=*/true);
  const auto expected = RunAloneAndBatched(prompts);
  MakeEngine({SpeculativeMethod::kDraft, 5});
  EXPECT_EQ(RunAloneAndBatched(prompts), expected);
  EXPECT_GT(engine_->stats().spec_accepted_tokens, 0);
  MakeEngine({});
  const auto expected_q4 = RunAloneAndBatched(prompts);
  MakeEngine({SpeculativeMethod::kNgram, 6});
  EXPECT_EQ(RunAloneAndBatched(prompts), expected_q4);
}

// Pearson's chi-square statistic of two samples over the same categories, pooling categories
// with fewer than 5 expected draws (the usual rule); `df` gets the degrees of freedom.
double TwoSampleChiSquare(const std::map<int32_t, int>& a, const std::map<int32_t, int>& b,
                          int* df) {
  double na = 0, nb = 0;
  std::map<int32_t, std::pair<double, double>> cells;
  for (const auto& [k, v] : a) { cells[k].first += v; na += v; }
  for (const auto& [k, v] : b) { cells[k].second += v; nb += v; }
  std::vector<std::pair<double, double>> pooled;
  std::pair<double, double> rest{0, 0};
  for (const auto& [k, c] : cells) {
    if ((c.first + c.second) * std::min(na, nb) / (na + nb) < 5) {
      rest.first += c.first;
      rest.second += c.second;
    } else {
      pooled.push_back(c);
    }
  }
  if (rest.first + rest.second > 0) pooled.push_back(rest);
  double chi2 = 0;
  for (const auto& [x, y] : pooled) {
    const double total = x + y;
    const double ex = total * na / (na + nb), ey = total * nb / (na + nb);
    chi2 += (x - ex) * (x - ex) / ex + (y - ey) * (y - ey) / ey;
  }
  *df = static_cast<int>(pooled.size()) - 1;
  return chi2;
}

// The chi-square value with p = 0.001 at `df` degrees of freedom (Wilson-Hilferty).
double Critical(int df) {
  const double z = 3.090;
  const double t = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - t + z * std::sqrt(t), 3.0);
}

TEST_F(SpeculativeTest, SampledDistributionIsTheTargetsChiSquare) {
  // The second and third tokens are the first ones verified from drafts. Spec off and spec on
  // draw with disjoint seed ranges (independent noise), so this tests distributions, not the
  // per-seed identity above; seeds rather than random keys keep the verdict reproducible (an
  // unseeded run once pooled to too few categories on CI).
  const int kRequests = 240;
  auto sample = [&](SpecSetup setup, float temperature, uint64_t first_seed) {
    setup.max_seqs = 32;
    MakeEngine(setup, /*bf16_target=*/true);
    std::vector<tpserve::v1::GenerateRequest> protos;
    for (int i = 0; i < kRequests; ++i) {
      tpserve::v1::GenerateRequest p = Chat("Write one sentence about any animal.", 3);
      p.mutable_sampling()->set_temperature(temperature);
      p.mutable_sampling()->set_seed(first_seed + i);
      protos.push_back(p);
    }
    std::map<int32_t, int> second, third;
    for (const Output& o : Run(protos)) {
      if (o.ids.size() > 1) ++second[o.ids[1]];
      if (o.ids.size() > 2) ++third[o.ids[2]];
    }
    return std::make_pair(second, third);
  };
  const auto off = sample({}, 1.0f, /*first_seed=*/1);
  const auto on = sample({SpeculativeMethod::kDraft, 4}, 1.0f, /*first_seed=*/1'000'001);
  auto show = [](const std::map<int32_t, int>& m) {
    std::string out;
    for (const auto& [id, n] : m) out += std::to_string(id) + ":" + std::to_string(n) + " ";
    return out;
  };
  SCOPED_TRACE("off, second token: " + show(off.first) + "\non, second token: " + show(on.first));
  EXPECT_GT(engine_->stats().spec_accepted_tokens, 0);
  int df = 0;
  double chi2 = TwoSampleChiSquare(off.first, on.first, &df);
  std::printf("second token: chi2 %.2f, df %d, critical %.2f\n", chi2, df, Critical(df));
  ASSERT_GE(df, 3);
  EXPECT_LT(chi2, Critical(df)) << "second token, df=" << df;
  chi2 = TwoSampleChiSquare(off.second, on.second, &df);
  std::printf("third token: chi2 %.2f, df %d, critical %.2f\n", chi2, df, Critical(df));
  ASSERT_GE(df, 3);
  EXPECT_LT(chi2, Critical(df)) << "third token, df=" << df;
  // The control: the same test does see a different distribution (a cooler one).
  const auto cool = sample({}, 0.6f, /*first_seed=*/2'000'001);
  chi2 = TwoSampleChiSquare(off.first, cool.first, &df);
  std::printf("control, second token at T=0.6: chi2 %.2f, df %d, critical %.2f\n", chi2, df,
              Critical(df));
  ASSERT_GE(df, 2);
  EXPECT_GT(chi2, Critical(df)) << "the test cannot tell T=1 from T=0.6";
}

// The sweeps' quick version (every build, sanitizers included): one K, both methods, the file
// as stored for target and draft (the bf16 target is the sweep's: minutes under ASan).
TEST_F(SpeculativeTest, BothMethodsGiveTheSameGreedyTokens) {
  const auto prompts = Prompts(16);
  MakeEngine({});
  const auto expected = RunAloneAndBatched(prompts);
  MakeEngine({SpeculativeMethod::kNgram, 4});
  EXPECT_EQ(RunAloneAndBatched(prompts), expected);
  SpecSetup draft{SpeculativeMethod::kDraft, 4};
  draft.wide_target = false;
  MakeEngine(draft);
  EXPECT_EQ(RunAloneAndBatched(prompts), expected);
  EXPECT_GT(engine_->stats().spec_accepted_tokens, 0);
}

TEST_F(SpeculativeTest, RolledBackBlocksServeThePrefixCacheCorrectly) {
  // A request whose drafts were partly rejected registers the blocks of its known tokens; a
  // second request that starts with its prompt and output takes those blocks from the cache
  // and must decode exactly what it decodes from a cold cache.
  const tpserve::v1::GenerateRequest first = Prompts(64)[1];
  MakeEngine({SpeculativeMethod::kNgram, 8});
  const Output a = Run({first})[0];
  ASSERT_GT(engine_->stats().spec_draft_tokens, engine_->stats().spec_accepted_tokens)
      << "no draft was rejected: nothing rolled back";
  absl::StatusOr<AdmittedRequest> admitted = door_->Admit(first);
  ASSERT_TRUE(admitted.ok());
  std::vector<int32_t> ids = admitted->prompt_ids();
  ids.insert(ids.end(), a.ids.begin(), a.ids.end());
  tpserve::v1::GenerateRequest second;
  second.mutable_token_ids()->mutable_ids()->Add(ids.begin(), ids.end());
  second.mutable_sampling()->set_temperature(0.0f);
  second.set_max_new_tokens(24);
  const Output warm = Run({second})[0];
  // Every full block of the first request's computed tokens (all but its last) is cached.
  EXPECT_EQ(warm.usage.cached_tokens, (ids.size() - 1) / kBlockTokens * kBlockTokens);
  MakeEngine({});
  const Output cold = Run({second})[0];
  EXPECT_EQ(cold.usage.cached_tokens, 0);
  EXPECT_EQ(warm.ids, cold.ids);
}

TEST_F(SpeculativeTest, MaxTokensStopSequencesAndLogprobsAreAsWithout) {
  std::vector<tpserve::v1::GenerateRequest> protos;
  tpserve::v1::GenerateRequest p = Prompts(5)[0];  // max_new_tokens 5 under K = 8
  protos.push_back(p);
  p = Prompts(48)[0];
  p.set_logprobs(true);
  p.set_top_logprobs(3);
  protos.push_back(p);
  MakeEngine({});
  const std::vector<Output> off = Run(protos);
  ASSERT_EQ(off[0].ids.size(), 5u);
  // A stop sequence in the middle of the greedy text.
  const std::string stop = off[1].text.substr(off[1].text.size() / 2, 6);
  p.add_stop_sequences(stop);
  protos.push_back(p);
  const Output off_stop = Run({p})[0];
  ASSERT_EQ(off_stop.finish, FinishReason::kStopSequence);

  MakeEngine({SpeculativeMethod::kNgram, 8});
  const std::vector<Output> on = Run(protos);
  EXPECT_EQ(on[0].ids, off[0].ids);
  EXPECT_EQ(on[0].usage.completion_tokens, 5);
  EXPECT_EQ(on[0].finish, FinishReason::kLength);
  EXPECT_EQ(on[1].ids, off[1].ids);
  ASSERT_EQ(on[1].logprobs.size(), off[1].logprobs.size());
  for (size_t i = 0; i < on[1].logprobs.size(); ++i) {
    EXPECT_EQ(on[1].logprobs[i].logprob, off[1].logprobs[i].logprob) << i;
    EXPECT_EQ(on[1].logprobs[i].top_logprobs, off[1].logprobs[i].top_logprobs) << i;
  }
  EXPECT_GT(on[1].usage.accepted_draft_tokens, 0);
  EXPECT_EQ(on[2].text, off_stop.text);
  EXPECT_EQ(on[2].ids, off_stop.ids);
  EXPECT_EQ(on[2].finish, FinishReason::kStopSequence);
  EXPECT_EQ(on[2].matched_stop, stop);
}

TEST_F(SpeculativeTest, SchemaConstrainedOutputIsTheSame) {
  tpserve::v1::GenerateRequest p = Chat(
      "Give the name and age of a person as JSON, then repeat the name in a list of three.", 60);
  p.set_json_schema(R"({"type": "object", "properties": {"name": {"type": "string"},
      "age": {"type": "integer"}, "names": {"type": "array", "items": {"type": "string"}}},
      "required": ["name", "age", "names"], "additionalProperties": false})");
  MakeEngine({});
  const Output off = Run({p})[0];
  MakeEngine({SpeculativeMethod::kNgram, 6});
  const Output on = Run({p})[0];
  EXPECT_EQ(on.ids, off.ids);
  ASSERT_TRUE(on.structured.has_value());
  EXPECT_EQ(on.structured->completed, off.structured->completed);
  EXPECT_GT(on.usage.draft_tokens, 0);
}

TEST_F(SpeculativeTest, CancellationFreesEveryBlockAndTheSwitchTurnsItOff) {
  MakeEngine({SpeculativeMethod::kNgram, 8});
  std::vector<tpserve::v1::GenerateRequest> protos = Prompts(64);
  for (auto& p : protos) p.set_ignore_eos(true);
  for (const Output& o : Run(protos, /*cancel_after_steps=*/4)) {
    EXPECT_EQ(o.finish, FinishReason::kCancelled);
  }
  tpserve::v1::GenerateRequest p = Prompts(24)[0];
  p.set_speculative(false);
  const Output off = Run({p})[0];
  EXPECT_EQ(off.usage.draft_tokens, 0);
  EXPECT_EQ(off.usage.speculative_steps, 0);
  p.clear_speculative();
  const Output on = Run({p})[0];
  EXPECT_EQ(on.ids, off.ids);
  EXPECT_GT(on.usage.draft_tokens, 0);
  EXPECT_GE(on.usage.draft_tokens, on.usage.accepted_draft_tokens);
  EXPECT_GT(on.usage.speculative_steps, 0);
}

TEST_F(SpeculativeTest, ManyStreamsDoNotDraft) {
  // A fixed K, so that only the batch limit decides (the adaptive policy may also stop drafting
  // once it has measured a compute-bound step, which is the policy's own test).
  MakeEngine({SpeculativeMethod::kNgram, 4, 1, /*adaptive=*/false, /*max_batch=*/2});
  // Four streams that decode together to the end: more than max_batch, so none drafts.
  std::vector<tpserve::v1::GenerateRequest> protos = Prompts(16);
  for (auto& p : protos) p.set_ignore_eos(true);
  for (const Output& o : Run(protos)) EXPECT_EQ(o.ids.size(), 16u);
  EXPECT_EQ(engine_->stats().spec_draft_tokens, 0);
  MakeEngine({SpeculativeMethod::kNgram, 4, 1, false, /*max_batch=*/4});
  Run(protos);
  EXPECT_GT(engine_->stats().spec_draft_tokens, 0);
}

}  // namespace
}  // namespace tpserve
