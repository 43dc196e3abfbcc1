// Tensor-parallel equivalence: W ranks as threads of this process (each with its own CPU
// backend, KV cache and in-process communicator) must produce the TP=1 logits on the sampling
// rank, and the other ranks must receive none (the LM head gathers to that rank alone). With --deterministic_tp (TpReduction::kDeterministic) the logits
// equal TP=1's bit for bit; with the default all-reduce they differ by summation order only.
// Synthetic model at W = 1, 2, 4; SmolLM2 at W = 3 (9 heads, 3 KV heads) must generate the
// same greedy tokens as W = 1.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "checkpoint/testing/tiny_llama.h"
#include "comm/in_process_communicator.h"
#include "formats/gguf.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/config.h"
#include "step/step_batch.h"
#include "step/step_sampling.h"
#include "worker/generate.h"
#include "worker/llama_model.h"
#include "model/bundled_model.h"

namespace tpserve {
namespace {

// Runs `body(rank, model, cache)` on `world` x `stages` threads, one rank each: rank r is
// tensor-parallel rank r % world of pipeline stage r / world, each stage's ranks one group,
// each pair of neighbouring stages' rank t a two-rank link (`chunks`: the deterministic
// reduction's count, 0 for the default).
void RunRanks(int world, const ModelSpec& config, const WeightSource& source,
              TpReduction reduction, int64_t num_blocks, int64_t block_size_tokens,
              const std::function<void(int, LlamaModel&, KvCache&)>& body, int64_t chunks = 0,
              int stages = 1) {
  std::vector<std::shared_ptr<InProcessGroup>> groups, links;
  for (int s = 0; s < stages; ++s) groups.push_back(std::make_shared<InProcessGroup>(world));
  for (int l = 0; l < (stages - 1) * world; ++l) {  // link s, rank t: (stages - 1) x world
    links.push_back(std::make_shared<InProcessGroup>(2));
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < world * stages; ++r) {
    threads.emplace_back([&, r] {
      const int stage = r / world, t = r % world;
      CpuBackend backend(CpuBackendOptions{.num_threads = 1});
      InProcessCommunicator comm(groups[stage], t);
      std::optional<InProcessCommunicator> from_prev, to_next;
      if (stage > 0) from_prev.emplace(links[(stage - 1) * world + t], 1);
      if (stage < stages - 1) to_next.emplace(links[stage * world + t], 0);
      LlamaLoadOptions options{.reduction = reduction, .reduction_chunks = chunks};
      options.pipeline = {from_prev ? &*from_prev : nullptr, to_next ? &*to_next : nullptr};
      auto model = LlamaModel::Load(config, source,
                                    {t, world, false, false, stage, stages}, &backend, &comm,
                                    options);
      ASSERT_TRUE(model.ok()) << "rank " << r << ": " << model.status();
      auto cache =
          KvCache::Create((*model)->KvShape(num_blocks, block_size_tokens, DType::kF32), backend);
      ASSERT_TRUE(cache.ok()) << cache.status();
      body(r, **model, **cache);
    });
  }
  for (std::thread& t : threads) t.join();
}

constexpr float kUntouched = -12345.0f;

// Every rank but the sampling rank (the last stage's first) left its logits buffers as they
// were.
void ExpectOnlySamplingRankReceived(const std::vector<std::vector<float>>& ranks,
                                    int sampling = kSamplingRank) {
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (static_cast<int>(r) == sampling) continue;
    ASSERT_EQ(ranks[r].size(), ranks[sampling].size());
    EXPECT_TRUE(std::all_of(ranks[r].begin(), ranks[r].end(),
                            [](float v) { return v == kUntouched; }))
        << "rank " << r << " received logits";
  }
}

// Three steps on two sequences: a prompt chunk that wants no logits, a batched prefill (all
// logits for one, the last for the other), then a batched decode. Returns every rank's
// concatenated logits buffers, each filled with kUntouched before its step.
std::vector<std::vector<float>> TwoSteps(int world, const ModelSpec& config,
                                         const WeightSource& source, TpReduction reduction,
                                         int stages = 1) {
  std::vector<std::vector<float>> per_rank(world * stages);
  RunRanks(world, config, source, reduction, 16, 4, [&](int rank, LlamaModel& model, KvCache& cache) {
    // A chunk of the second prompt that wants no logits: a step with no LM head at all.
    StepBatch chunk;
    chunk.Add(/*seq_id=*/2, 0, std::vector<int32_t>{7, 6, 5}, {5, 4}, /*num_logits=*/0);
    StepBatch prefill;
    prefill.Add(/*seq_id=*/1, 0, std::vector<int32_t>{1, 5, 9, 33, 70, 98, 2, 2, 41}, {0, 1, 2},
                /*num_logits=*/9);
    prefill.Add(/*seq_id=*/2, 3, std::vector<int32_t>{4, 3}, {5, 4});
    StepBatch decode;
    decode.Add(/*seq_id=*/1, 9, std::vector<int32_t>{11}, {0, 1, 2});
    decode.Add(/*seq_id=*/2, 5, std::vector<int32_t>{12}, {5, 4});
    for (const StepBatch* b : {&chunk, &prefill, &decode}) {
      std::vector<float> logits(b->num_logit_rows() * config.vocab_size, kUntouched);
      const absl::Status s = model.Forward(*b, &cache, logits.data());
      ASSERT_TRUE(s.ok()) << s;
      per_rank[rank].insert(per_rank[rank].end(), logits.begin(), logits.end());
    }
  }, /*chunks=*/0, stages);
  return per_rank;
}

TEST(LlamaModelTpTest, SyntheticModelLogitsAreBitwiseEqualAtTp1Tp2AndTp4) {
  for (DType linear : {DType::kF32, DType::kQ4_1}) {
    const ModelSpec config = TinyLlamaSpec();
    auto source = MakeTinyLlama(config, {.linear = linear, .embedding = DType::kQ8_0});
    const TpReduction mode = TpReduction::kDeterministic;
    const std::vector<float> tp1 = TwoSteps(1, config, *source, mode)[0];
    ASSERT_FALSE(tp1.empty());
    float max_abs = 0;
    for (float v : tp1) max_abs = std::max(max_abs, std::fabs(v));
    ASSERT_GT(max_abs, 0.1f);
    for (int world : {2, 4}) {
      const std::vector<std::vector<float>> ranks = TwoSteps(world, config, *source, mode);
      ExpectOnlySamplingRankReceived(ranks);
      // Bitwise: row-parallel reductions are cut into the same per-KV-group chunks at every
      // degree and summed in chunk order, and attention computes each head alone, so no sum
      // is associated differently (before that, Q4_1 logits moved by ~0.4% of max|logit|: an
      // ulp flipped an 8-bit activation rounding in the next layer). 
      EXPECT_EQ(ranks[kSamplingRank], tp1) << DTypeName(linear) << " TP=" << world << ", max|logit| "
                               << max_abs;
    }
  }
}

// Pipeline stages (issue 40): the tiny model's 2 layers as 2 stages of one layer, at one rank and
// at 2 ranks a stage. A step's two sequences go stage to stage as two micro-batches; the last
// stage's sampling rank ends with TP 1's logits bit for bit, and no other rank receives any.
TEST(LlamaModelTpTest, SyntheticModelLogitsAreBitwiseEqualInTwoPipelineStages) {
  for (DType linear : {DType::kF32, DType::kQ4_1}) {
    const ModelSpec config = TinyLlamaSpec();
    ASSERT_EQ(config.num_layers, 2);
    auto source = MakeTinyLlama(config, {.linear = linear, .embedding = DType::kQ8_0});
    const TpReduction mode = TpReduction::kDeterministic;
    const std::vector<float> tp1 = TwoSteps(1, config, *source, mode)[0];
    for (int world : {1, 2}) {
      const std::vector<std::vector<float>> ranks = TwoSteps(world, config, *source, mode, 2);
      const int sampling = world;  // stage 1's rank 0
      ExpectOnlySamplingRankReceived(ranks, sampling);
      EXPECT_EQ(ranks[sampling], tp1) << DTypeName(linear) << " TP " << world << " x PP 2";
    }
  }
}

// A stage's links are two-rank groups in which it has its place; anything else is refused at
// load, naming the stage and the link.
TEST(LlamaModelTpTest, PipelineStageRefusesMissingOrMisplacedLinks) {
  const ModelSpec config = TinyLlamaSpec();
  auto source = MakeTinyLlama(config, {});
  CpuBackend backend(CpuBackendOptions{.num_threads = 1});
  SingleRankCommunicator comm;
  auto missing = LlamaModel::Load(config, *source, {0, 1, false, false, 1, 2}, &backend, &comm);
  EXPECT_EQ(missing.status().message(), "stage 1 of 2: pipeline link from_prev is missing");
  auto pair = std::make_shared<InProcessGroup>(2);
  InProcessCommunicator rank0(pair, 0);
  LlamaLoadOptions options;
  options.pipeline.from_prev = &rank0;  // the earlier stage's place
  auto misplaced =
      LlamaModel::Load(config, *source, {0, 1, false, false, 1, 2}, &backend, &comm, options);
  EXPECT_EQ(misplaced.status().message(),
            "stage 1: pipeline link from_prev is rank 0 of 2; it must be rank 1 of 2");
  auto stages = LlamaModel::Load(config, *source, {0, 1, false, false, 0, 3}, &backend, &comm);
  EXPECT_EQ(stages.status().message(),
            "pipeline stages = 3 must be >= 1 and divide num_layers = 2");
}

// The default reduction: one all-reduce per row-parallel layer. Every rank still ends with the
// same floats (the all-reduce gives all ranks one sum); against TP=1 only the association of
// the sums differs. F32 weights stay within 1e-5 of max|logit|; Q4_1 re-quantizes activations
// to 8 bits after each layer, where an ulp can flip a rounding, so within 1%.
TEST(LlamaModelTpTest, AllReduceLogitsMatchTp1UpToSummationOrder) {
  for (DType linear : {DType::kF32, DType::kQ4_1}) {
    const ModelSpec config = TinyLlamaSpec();
    auto source = MakeTinyLlama(config, {.linear = linear, .embedding = DType::kQ8_0});
    const std::vector<float> tp1 = TwoSteps(1, config, *source, TpReduction::kAllReduce)[0];
    float max_abs = 0;
    for (float v : tp1) max_abs = std::max(max_abs, std::fabs(v));
    ASSERT_GT(max_abs, 0.1f);
    const float bound = (linear == DType::kF32 ? 1e-5f : 1e-2f) * max_abs;
    for (int world : {2, 4}) {
      const std::vector<std::vector<float>> ranks =
          TwoSteps(world, config, *source, TpReduction::kAllReduce);
      ExpectOnlySamplingRankReceived(ranks);
      const std::vector<float>& sampled = ranks[kSamplingRank];
      ASSERT_EQ(sampled.size(), tp1.size());
      float max_diff = 0;
      for (size_t i = 0; i < tp1.size(); ++i) {
        max_diff = std::max(max_diff, std::fabs(sampled[i] - tp1[i]));
      }
      EXPECT_LE(max_diff, bound) << DTypeName(linear) << " TP=" << world;
    }
  }
}

// What a step's logit rows are for: the prefill's sequence 1 scores its first eight rows and
// samples the ninth; each other sequence samples its one row (nucleus, penalties, alternatives).
StepSampling SamplingFor(const StepBatch& batch) {
  StepSampling sampling;
  for (const StepBatch::Sequence& q : batch.sequences) {
    if (q.num_logits == 0) continue;
    SequenceSampling s;
    s.seq_id = q.seq_id;
    s.num_rows = q.num_logits;
    for (int64_t i = 0; i + 1 < q.num_logits; ++i) s.scored_ids.push_back(static_cast<int32_t>(i + 3));
    s.top_logprobs = 2;
    s.samples = true;
    s.params.temperature = 0.8f;
    s.params.top_p = 0.9f;
    s.params.presence_penalty = 0.5f;
    s.params.top_logprobs = 3;
    s.history = {1, 5, 9};
    s.key = 77 + static_cast<uint64_t>(q.seq_id);
    sampling.sequences.push_back(s);
  }
  return sampling;
}

// The sampling rank keeps a step's logits where the step left them (Forward with no host
// buffer: at TP > 1 as the gather's [world, rows, per_rank] slices) and samples them there
// (SampleHeld, Backend::SampleRows): the tokens, logprobs and alternatives SampleStep gives on
// the logits copied to the host, at TP 1, 2 and 4. The GPU rank's path, run on CPU ranks.
TEST(LlamaModelTpTest, LogitsSampledWhereTheStepLeftThemEqualTheHostSampler) {
  const ModelSpec config = TinyLlamaSpec();
  auto source = MakeTinyLlama(config, {.linear = DType::kF32, .embedding = DType::kQ8_0});
  StepBatch prefill;
  prefill.Add(/*seq_id=*/1, 0, std::vector<int32_t>{1, 5, 9, 33, 70, 98, 2, 2, 41}, {0, 1, 2},
              /*num_logits=*/9);
  prefill.Add(/*seq_id=*/2, 0, std::vector<int32_t>{4, 3}, {5, 4});
  StepBatch decode;
  decode.Add(/*seq_id=*/1, 9, std::vector<int32_t>{11}, {0, 1, 2});
  decode.Add(/*seq_id=*/2, 2, std::vector<int32_t>{12}, {5, 4});
  for (int world : {1, 2, 4}) {
    std::vector<std::vector<SequenceSamples>> host, held;
    RunRanks(world, config, *source, TpReduction::kDeterministic, 16, 4,
             [&](int rank, LlamaModel& model, KvCache& cache) {
               for (const StepBatch* b : {&prefill, &decode}) {
                 std::vector<float> logits(b->num_logit_rows() * config.vocab_size);
                 ASSERT_TRUE(model.Forward(*b, &cache, logits.data()).ok());
                 if (rank != kSamplingRank) continue;
                 auto out = SampleStep(logits, config.vocab_size, SamplingFor(*b));
                 ASSERT_TRUE(out.ok()) << out.status();
                 host.push_back(*out);
               }
             });
    RunRanks(world, config, *source, TpReduction::kDeterministic, 16, 4,
             [&](int rank, LlamaModel& model, KvCache& cache) {
               for (const StepBatch* b : {&prefill, &decode}) {
                 ASSERT_TRUE(model.Forward(*b, &cache, nullptr).ok());
                 const StepSampling sampling = SamplingFor(*b);
                 absl::StatusOr<SamplingRows> rows = ToSamplingRows(config.vocab_size, sampling);
                 ASSERT_TRUE(rows.ok()) << rows.status();
                 std::vector<RowSample> out(rows->rows.size());
                 const absl::Status s = model.SampleHeld(*rows, absl::MakeSpan(out));
                 if (rank != kSamplingRank) {
                   EXPECT_EQ(s.message(), "rank " + std::to_string(rank) +
                                              " of stage 0 holds no logits: only the sampling "
                                              "rank (0 of the last stage) samples");
                   continue;
                 }
                 ASSERT_TRUE(s.ok()) << s;
                 auto assembled = FromRowSamples(sampling, out);
                 ASSERT_TRUE(assembled.ok()) << assembled.status();
                 held.push_back(*assembled);
                 EXPECT_EQ(model.SampleHeld(*rows, absl::MakeSpan(out)).message(),
                           "no step's logits are held (a Forward with logits = nullptr keeps them)");
               }
             });
    ASSERT_EQ(host.size(), 2u);
    ASSERT_EQ(held.size(), 2u);
    for (size_t step = 0; step < 2; ++step) {
      ASSERT_EQ(host[step].size(), held[step].size());
      for (size_t q = 0; q < host[step].size(); ++q) {
        const SequenceSamples& a = host[step][q];
        const SequenceSamples& b = held[step][q];
        ASSERT_EQ(a.scored.size(), b.scored.size());
        for (size_t i = 0; i < a.scored.size(); ++i) {
          EXPECT_EQ(a.scored[i].logprob, b.scored[i].logprob) << "TP " << world;
          EXPECT_EQ(a.scored[i].top_logprobs, b.scored[i].top_logprobs) << "TP " << world;
        }
        ASSERT_EQ(a.sampled.size(), 1u);
        ASSERT_EQ(b.sampled.size(), 1u);
        EXPECT_EQ(a.sampled[0].id, b.sampled[0].id) << "TP " << world << " step " << step;
        EXPECT_EQ(a.sampled[0].logprob, b.sampled[0].logprob) << "TP " << world;
        EXPECT_EQ(a.sampled[0].top_logprobs, b.sampled[0].top_logprobs) << "TP " << world;
        EXPECT_EQ(a.draws, b.draws);
      }
    }
  }
}

std::vector<int32_t> EnglishPromptIds() {
  // The golden English prompt's ids (tests/golden/model/golden.json), as llama.cpp tokenized it.
  return {504, 1463, 282, 260, 7510, 1757, 5634, 281, 260, 35561, 2070, 28, 645};
}

// The bundled SmolLM2 file and the description read from it.
struct BundledSmolLm2 {
  std::unique_ptr<GgufFile> file;
  ModelSpec config;
};

absl::StatusOr<BundledSmolLm2> OpenBundledSmolLm2() {
  absl::StatusOr<std::string> path = BundledModelPath();
  if (!path.ok()) return path.status();
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(*path);
  if (!file.ok()) return file.status();
  absl::StatusOr<ModelSpec> config = ModelSpecFromGguf(**file);
  if (!config.ok()) return config.status();
  return BundledSmolLm2{*std::move(file), *std::move(config)};
}

// SmolLM2 at TP 3 and at TP 9 (issue 40: one query head a rank, each of the 3 KV heads copied
// to 3 ranks, the MLP's 48 blocks of 32 split 6 / 5): the same 16 greedy tokens as one rank.
TEST(LlamaModelTpTest, SmolLm2GreedyTokensIdenticalAtTp3AndTp9) {
  absl::StatusOr<BundledSmolLm2> smol = OpenBundledSmolLm2();
  ASSERT_TRUE(smol.ok()) << smol.status();
  const GgufFile& gguf = *smol->file;
  const ModelSpec* config = &smol->config;
  const std::vector<int32_t> prompt = EnglishPromptIds();
  std::vector<std::vector<int32_t>> tokens(10);
  std::vector<int64_t> resident_bytes(10, 0);  // the largest rank's, per world size
  for (int world : {1, 3, 9}) {
    std::vector<std::vector<int32_t>> per_rank(world);
    RunRanks(world, *config, gguf, TpReduction::kAllReduce, 4, 16, [&](int rank, LlamaModel& model, KvCache& cache) {
      auto r = GenerateGreedy(model, &cache, prompt, {.max_new_tokens = 16});
      ASSERT_TRUE(r.ok()) << r.status();
      per_rank[rank] = r->tokens;
      static std::mutex mu;
      std::lock_guard<std::mutex> lock(mu);
      resident_bytes[world] =
          std::max(resident_bytes[world], model.footprint().weight_bytes_resident);
    });
    for (int r = 1; r < world; ++r) EXPECT_EQ(per_rank[r], per_rank[0]);
    tokens[world] = per_rank[0];
  }
  ASSERT_EQ(tokens[1].size(), 16u);
  EXPECT_EQ(tokens[3], tokens[1]);
  EXPECT_EQ(tokens[9], tokens[1]);
  // Every weight is sharded except the small norm vectors: each rank reads about a third.
  EXPECT_LT(resident_bytes[3], resident_bytes[1] * 0.34) << resident_bytes[1];
  EXPECT_GT(resident_bytes[3], resident_bytes[1] * 0.33) << resident_bytes[1];
  // At TP 9 rank 0, the largest, holds a ninth of q, o and the embedding, an eighth of the MLP
  // (6 of its 48 blocks) and a third of k and v (its KV head): 12.9% of the whole measured,
  // about 1.7 points over a ninth, of which the MLP's extra block is 0.7 and k and v 1.0.
  EXPECT_GT(resident_bytes[9], resident_bytes[1] / 9) << resident_bytes[1];
  EXPECT_LT(resident_bytes[9], resident_bytes[1] * 0.135) << resident_bytes[1];
}

// --deterministic_tp with 9 chunks on SmolLM2: o in 9 chunks of one head, down in its 48 units
// of 32 (9 equal chunks would split a Q4_1 block), so TP 1, 3 and 9 give the same floats
// bit for bit, TP 9 with 6 units on ranks 0-2 and 5 (and a zero chunk) on ranks 3-8.
TEST(LlamaModelTpTest, SmolLm2DeterministicLogitsAreBitwiseEqualAtTp1Tp3AndTp9) {
  absl::StatusOr<BundledSmolLm2> smol = OpenBundledSmolLm2();
  ASSERT_TRUE(smol.ok()) << smol.status();
  const GgufFile& gguf = *smol->file;
  const ModelSpec* config = &smol->config;
  std::vector<int32_t> prompt = EnglishPromptIds();
  prompt.resize(std::min<size_t>(prompt.size(), 12));
  const int64_t vocab = config->vocab_size;
  std::vector<std::vector<float>> logits(10);
  for (int world : {1, 3, 9}) {
    RunRanks(
        world, *config, gguf, TpReduction::kDeterministic, 8, 16,
        [&](int rank, LlamaModel& model, KvCache& cache) {
          StepBatch prefill;
          prefill.Add(/*seq_id=*/1, 0, prompt, {0}, static_cast<int64_t>(prompt.size()));
          StepBatch decode;
          decode.Add(/*seq_id=*/1, static_cast<int64_t>(prompt.size()), std::vector<int32_t>{42},
                     {0, 1});
          std::vector<float> all;
          for (const StepBatch* b : {&prefill, &decode}) {
            std::vector<float> out(b->num_logit_rows() * vocab, kUntouched);
            const absl::Status s = model.Forward(*b, &cache, out.data());
            ASSERT_TRUE(s.ok()) << s;
            all.insert(all.end(), out.begin(), out.end());
          }
          if (rank == kSamplingRank) logits[world] = std::move(all);
        },
        /*chunks=*/9);
  }
  ASSERT_EQ(logits[1].size(), (prompt.size() + 1) * vocab);
  for (int world : {3, 9}) {
    ASSERT_EQ(logits[world].size(), logits[1].size());
    EXPECT_EQ(std::memcmp(logits[world].data(), logits[1].data(),
                          logits[1].size() * sizeof(float)),
              0)
        << "TP " << world;
  }
}

// SmolLM2's 30 layers in pipeline stages (issue 40) under --deterministic_tp at 3 chunks: PP 2,
// PP 2 x TP 3 (six ranks) and PP 3 give one rank's logits bit for bit, over a prefill and a
// decode of two sequences (two micro-batches each, the first a whole 12-token prompt).
TEST(LlamaModelTpTest, SmolLm2DeterministicLogitsAreBitwiseEqualInPipelineStages) {
  absl::StatusOr<BundledSmolLm2> smol = OpenBundledSmolLm2();
  ASSERT_TRUE(smol.ok()) << smol.status();
  const int64_t vocab = smol->config.vocab_size;
  std::vector<int32_t> prompt = EnglishPromptIds();
  prompt.resize(12);
  const std::vector<int32_t> other = {1, 330, 4401, 9, 2000, 17, 300};
  const auto run = [&](int world, int stages) {
    std::vector<float> logits;
    RunRanks(
        world, smol->config, *smol->file, TpReduction::kDeterministic, 8, 16,
        [&](int rank, LlamaModel& model, KvCache& cache) {
          StepBatch prefill;
          prefill.Add(/*seq_id=*/1, 0, prompt, {0}, static_cast<int64_t>(prompt.size()));
          prefill.Add(/*seq_id=*/2, 0, other, {2}, 1);
          StepBatch decode;
          decode.Add(/*seq_id=*/1, 12, std::vector<int32_t>{42}, {0, 1});
          decode.Add(/*seq_id=*/2, 7, std::vector<int32_t>{7}, {2});
          std::vector<float> all;
          for (const StepBatch* b : {&prefill, &decode}) {
            std::vector<float> out(b->num_logit_rows() * vocab, kUntouched);
            const absl::Status s = model.Forward(*b, &cache, out.data());
            ASSERT_TRUE(s.ok()) << "rank " << rank << ": " << s;
            all.insert(all.end(), out.begin(), out.end());
          }
          if (model.plan().samples()) logits = std::move(all);
        },
        /*chunks=*/3, stages);
    return logits;
  };
  const std::vector<float> one = run(1, 1);
  ASSERT_EQ(one.size(), (prompt.size() + 1 + 2) * vocab);
  for (const auto& [world, stages] : {std::pair{1, 2}, std::pair{3, 2}, std::pair{1, 3}}) {
    const std::vector<float> staged = run(world, stages);
    ASSERT_EQ(staged.size(), one.size()) << "TP " << world << " x PP " << stages;
    EXPECT_EQ(std::memcmp(staged.data(), one.data(), one.size() * sizeof(float)), 0)
        << "TP " << world << " x PP " << stages;
  }
}

}  // namespace
}  // namespace tpserve
