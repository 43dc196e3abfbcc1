// The forward pass on a synthetic tiny Llama against a naive f64 full-recompute reference
// (checkpoint/testing/tiny_llama.h): both checkpoint naming/RoPE schemes, F32 and quantized
// weights, prefill, chunked prefill, token-by-token decode, batched sequences, and errors.
#include "worker/llama_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <thread>

#include "checkpoint/testing/tiny_llama.h"
#include "comm/communicator.h"
#include "comm/in_process_communicator.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "worker/generate.h"

namespace tpserve {
namespace {

const std::vector<int32_t> kPrompt = {1, 17, 42, 5, 98, 0, 63, 63, 12, 77, 31, 8, 50};

float MaxAbs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// Tolerance relative to the largest reference logit. F32/BF16 weights: only f32-vs-f64
// rounding through 2 layers (observed 3e-7). Quantized weights: the reference uses the same
// dequantized weights but unquantized activations, and the 8-bit activation blocks cost
// observed 1.0-1.3% (Q8_0, Q4_0, Q4_1; a tied Q8_0 LM head alone 0.3%).
float Tolerance(DType linear) { return BlockElems(linear) == 1 ? 1e-5f : 3e-2f; }

class LlamaModelTest : public ::testing::Test {
 protected:
  void Build(const TinyLlamaOptions& options, int64_t max_tokens_per_step = 64) {
    config_ = TinyLlamaSpec();
    config_.tie_word_embeddings = !options.separate_lm_head;
    source_ = MakeTinyLlama(config_, options);
    auto model = LlamaModel::Load(config_, *source_, {0, 1}, &backend_, &comm_,
                                  LlamaLoadOptions{max_tokens_per_step});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    auto cache = KvCache::Create(model_->KvShape(/*num_blocks=*/32, /*block_size_tokens=*/4, DType::kF32),
                                 backend_);
    ASSERT_TRUE(cache.ok()) << cache.status();
    cache_ = std::move(*cache);
  }

  // Runs tokens at [start, start + n) of one sequence; returns [rows, vocab] logits.
  std::vector<float> Step(const std::vector<int32_t>& tokens, int64_t start,
                          const std::vector<int32_t>& table, bool all_logits) {
    StepBatch batch;
    batch.Add(/*seq_id=*/0, start, tokens, table, all_logits ? std::ssize(tokens) : 1);
    std::vector<float> logits(batch.num_logit_rows() * config_.vocab_size);
    const absl::Status s = model_->Forward(batch, cache_.get(), logits.data());
    EXPECT_TRUE(s.ok()) << s;
    return logits;
  }

  std::vector<int32_t> Table(int32_t first, int32_t count) const {
    std::vector<int32_t> t(count);
    std::iota(t.begin(), t.end(), first);
    std::reverse(t.begin(), t.end());  // non-contiguous, descending physical blocks
    return t;
  }

  ModelSpec config_;
  CpuBackend backend_{CpuBackendOptions{.num_threads = 2}};
  SingleRankCommunicator comm_;
  std::unique_ptr<InMemoryWeightSource> source_;
  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<KvCache> cache_;
};

TEST_F(LlamaModelTest, PrefillMatchesReferenceForEveryFormatAndType) {
  struct Case {
    CheckpointFormat format;
    DType linear, embedding;
    bool separate_head;
  };
  for (const Case& c : {Case{CheckpointFormat::kGguf, DType::kF32, DType::kF32, false},
                        Case{CheckpointFormat::kSafetensors, DType::kF32, DType::kF32, true},
                        Case{CheckpointFormat::kSafetensors, DType::kBF16, DType::kBF16, false},
                        Case{CheckpointFormat::kGguf, DType::kQ8_0, DType::kQ8_0, false},
                        Case{CheckpointFormat::kGguf, DType::kQ4_1, DType::kQ8_0, false},
                        Case{CheckpointFormat::kGguf, DType::kQ4_0, DType::kF16, true}}) {
    Build({.format = c.format, .linear = c.linear, .embedding = c.embedding,
           .separate_lm_head = c.separate_head});
    const std::vector<float> want = ReferenceLogits(config_, *source_, kPrompt);
    const std::vector<float> got = Step(kPrompt, 0, Table(0, 4), /*all_logits=*/true);
    const float tol = Tolerance(c.linear) * MaxAbs(want);
    EXPECT_LT(MaxAbsDiff(got, want), tol)
        << DTypeName(c.linear) << " format " << static_cast<int>(c.format);
  }
}

TEST_F(LlamaModelTest, RopeLayoutFollowsTheCheckpointFormat) {
  // The same tensors under HF names must give different logits than under GGUF names, since
  // the pairs RoPE rotates differ; each must match its own reference (checked above).
  Build({.format = CheckpointFormat::kGguf});
  const std::vector<float> gguf = Step(kPrompt, 0, Table(0, 4), true);
  Build({.format = CheckpointFormat::kSafetensors});
  const std::vector<float> hf = Step(kPrompt, 0, Table(0, 4), true);
  EXPECT_GT(MaxAbsDiff(gguf, hf), 1e-2f * MaxAbs(gguf));
}

TEST_F(LlamaModelTest, DecodeAndChunkedPrefillMatchFullRecompute) {
  for (DType linear : {DType::kF32, DType::kQ4_1}) {
    Build({.linear = linear, .embedding = DType::kQ8_0});
    const std::vector<float> want = ReferenceLogits(config_, *source_, kPrompt);
    const std::vector<float> one_shot = Step(kPrompt, 0, Table(10, 4), true);
    const int64_t vocab = config_.vocab_size;
    const std::vector<int32_t> table = Table(3, 4);
    // Chunks of 5, 3, then single tokens: every later piece reads the KV written before.
    std::vector<float> got = Step({kPrompt.begin(), kPrompt.begin() + 5}, 0, table, true);
    const std::vector<float> mid = Step({kPrompt.begin() + 5, kPrompt.begin() + 8}, 5, table, true);
    got.insert(got.end(), mid.begin(), mid.end());
    for (size_t p = 8; p < kPrompt.size(); ++p) {
      const std::vector<float> one = Step({kPrompt[p]}, p, table, false);
      got.insert(got.end(), one.begin(), one.end());
    }
    ASSERT_EQ(got.size(), kPrompt.size() * vocab);
    // The tied Q8_0 LM head quantizes its input, so the reference tolerance is the quantized one.
    EXPECT_LT(MaxAbsDiff(got, want), Tolerance(DType::kQ8_0) * MaxAbs(want)) << DTypeName(linear);
    // Against our own one-shot prefill: bit for bit. Per row the arithmetic is the same
    // (attention reads the same keys in the same order) and every dot kernel sums a row as its
    // one-row form does, whatever the number of rows in the call: batch invariance.
    EXPECT_EQ(got, one_shot) << DTypeName(linear);
  }
}

// A prompt chunk that wants no logits (num_logits = 0: the scheduler's chunks that do not end
// a prompt) still writes its KV: the chunk after it gives the one-shot prefill's last row.
TEST_F(LlamaModelTest, AChunkWithoutLogitsFillsTheCacheAndWritesNoRow) {
  Build({.linear = DType::kQ4_1, .embedding = DType::kQ8_0});
  const int64_t vocab = config_.vocab_size;
  const std::vector<float> one_shot = Step(kPrompt, 0, Table(10, 4), false);
  const std::vector<int32_t> table = Table(3, 4);
  StepBatch chunk;
  chunk.Add(/*seq_id=*/0, 0, absl::MakeConstSpan(kPrompt).first(6), table, /*num_logits=*/0);
  ASSERT_EQ(chunk.num_logit_rows(), 0);
  std::vector<float> untouched(vocab, -7.0f);
  ASSERT_TRUE(model_->Forward(chunk, cache_.get(), untouched.data()).ok());
  EXPECT_EQ(untouched, std::vector<float>(vocab, -7.0f));
  const std::vector<float> last =
      Step({kPrompt.begin() + 6, kPrompt.end()}, 6, table, /*all_logits=*/false);
  EXPECT_EQ(last, one_shot);
}

// Batch invariance: a sequence's logits are the same floats alone or among others, whatever
// its rows' place in the step (the step's rows reach the dot kernels in groups of up to 4).
TEST_F(LlamaModelTest, BatchOfThreeEqualsOneAtATime) {
  for (DType linear : {DType::kF32, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
  Build({.linear = linear, .embedding = DType::kQ8_0});
  const std::vector<int32_t> a(kPrompt.begin(), kPrompt.begin() + 7);
  const std::vector<int32_t> b(kPrompt.begin() + 2, kPrompt.end());
  const std::vector<int32_t> c = {9, 8};
  // Sequence c continues a 6-token history: it decodes while a and b prefill.
  const std::vector<int32_t> c_history = {4, 4, 3, 2, 1, 0};
  const std::vector<int32_t> ta = Table(0, 2), tb = Table(2, 3), tc = Table(5, 2);
  Step(c_history, 0, tc, false);
  const std::vector<float> solo_a = Step(a, 0, ta, true);
  const std::vector<float> solo_b = Step(b, 0, tb, false);
  const std::vector<float> solo_c = Step(c, 6, tc, true);

  StepBatch batch;
  batch.Add(/*seq_id=*/0, 0, a, ta, std::ssize(a));
  batch.Add(/*seq_id=*/0, 0, b, tb);
  batch.Add(/*seq_id=*/0, 6, c, tc, std::ssize(c));
  ASSERT_EQ(batch.num_logit_rows(), 7 + 1 + 2);
  std::vector<float> batched(batch.num_logit_rows() * config_.vocab_size);
  ASSERT_TRUE(model_->Forward(batch, cache_.get(), batched.data()).ok());
  std::vector<float> solo = solo_a;
  solo.insert(solo.end(), solo_b.begin(), solo_b.end());
  solo.insert(solo.end(), solo_c.begin(), solo_c.end());
  EXPECT_EQ(batched, solo) << DTypeName(linear);
  }
}

TEST_F(LlamaModelTest, GreedyGenerationMatchesReferenceArgmax) {
  Build({.linear = DType::kF32});
  absl::StatusOr<GenerateResult> r =
      GenerateGreedy(*model_, cache_.get(), kPrompt, {.max_new_tokens = 6});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->tokens.size(), 6u);
  std::vector<int32_t> seq = kPrompt;
  for (int32_t t : r->tokens) {
    const std::vector<float> ref = ReferenceLogits(config_, *source_, seq);
    const std::vector<float> last(ref.end() - config_.vocab_size, ref.end());
    EXPECT_EQ(t, ArgMax(last)) << "after " << seq.size() << " tokens";
    seq.push_back(t);
  }
}

TEST_F(LlamaModelTest, ForwardRejectsBadBatchesNamingTheField) {
  Build({}, /*max_tokens_per_step=*/16);
  std::vector<float> logits(32 * config_.vocab_size);
  auto run = [&](std::vector<int32_t> tokens, int64_t start, std::vector<int32_t> table) {
    StepBatch b;
    b.Add(/*seq_id=*/0, start, tokens, std::move(table));
    return model_->Forward(b, cache_.get(), logits.data());
  };
  auto expect = [](const absl::Status& s, const std::string& fragment) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(fragment), std::string::npos) << s;
  };
  expect(run({5, 99}, 0, {0}), "token id 99 is outside [0, 99)");
  expect(run({5, 6, 7, 8, 9}, 0, {0}), "block table has 1 blocks, positions up to 5 need 2");
  expect(run({5}, 0, {32}), "block_table[0] = 32 is outside the cache's [0, 32)");
  expect(run(std::vector<int32_t>(17, 3), 0, Table(0, 5)),
         "step has 17 tokens, more than max_tokens_per_step = 16");
  expect(run({}, 0, {0}), "sequence 0: num_tokens = 0, needs at least 1");
  expect(run({1}, 256, Table(0, 32)), "exceed max_context_tokens = 256");
  StepBatch too_many_logits;
  too_many_logits.Add(/*seq_id=*/0, 0, std::vector<int32_t>{1, 2}, {0}, /*num_logits=*/3);
  expect(model_->Forward(too_many_logits, cache_.get(), logits.data()),
         "sequence 0: num_logits = 3 is outside [0, num_tokens = 2]");
  KvCacheShape wrong = model_->KvShape(4, 4, DType::kF32);
  wrong.num_kv_heads = 2;
  auto other = KvCache::Create(wrong, backend_);
  StepBatch b;
  b.Add(/*seq_id=*/0, 0, std::vector<int32_t>{1}, {0});
  expect(model_->Forward(b, other->get(), logits.data()), "does not match this rank");
}

TEST_F(LlamaModelTest, LoadReportsMissingAndMisshapenTensors) {
  ModelSpec c = TinyLlamaSpec();
  auto src = MakeTinyLlama(c, {});
  c.intermediate_size = 128;  // the checkpoint has 256
  auto m = LlamaModel::Load(c, *src, {0, 1}, &backend_, &comm_);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("blk.0.ffn_gate.weight in in-memory checkpoint: shape "
                                      "[256, 128], expected [128, 128]"),
            std::string::npos)
      << m.status();
  c = TinyLlamaSpec();
  InMemoryWeightSource empty(CheckpointFormat::kSafetensors);
  m = LlamaModel::Load(c, empty, {0, 1}, &backend_, &comm_);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("model.embed_tokens.weight"), std::string::npos);
  // The MLP over 2 ranks: 32 columns are one Q4_1 block, which cannot be split.
  c.intermediate_size = 32;
  auto q = MakeTinyLlama(c, {.linear = DType::kQ4_1});
  SingleRankCommunicator solo;
  InProcessCommunicator rank1_of_2(std::make_shared<InProcessGroup>(2), 1);  // no collectives
  m = LlamaModel::Load(c, *q, {1, 2}, &backend_, &rank1_of_2);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("intermediate_size = 32 holds 1 unit of 32 values, fewer "
                                      "than tensor-parallel degree 2"),
            std::string::npos)
      << m.status();
  m = LlamaModel::Load(c, *q, {0, 2}, &backend_, &solo);
  EXPECT_NE(m.status().message().find("communicator is rank 0 of 1"), std::string::npos);
}

TEST_F(LlamaModelTest, FootprintCountsViewsCopiesAndWorkspace) {
  Build({.linear = DType::kQ8_0, .embedding = DType::kQ8_0}, 32);
  const ModelSpec& c = config_;
  const int64_t row = [](int64_t k) { return k / 32 * 34; }(c.hidden_size);
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const int64_t f = c.intermediate_size;
  // One rank holds whole rows of every matrix. The embedding, a table, is read in place; the
  // projections are held interleaved in row groups (the CPU backend's own form, the same
  // bytes: kernels/cpu/cpu_matmul.h), so copied, as are the norms (as f32).
  const int64_t viewed = c.vocab_size * row;
  const int64_t copied = c.num_layers * (q + 2 * kv + 2 * f) * row +
                         c.num_layers * (c.hidden_size * (q / 32 * 34) +
                                         c.hidden_size * (f / 32 * 34)) +
                         c.num_layers * 2 * c.hidden_size * 4 + c.hidden_size * 4;
  const MemoryFootprint fp = model_->footprint();
  EXPECT_EQ(fp.weight_bytes_copied, copied);
  EXPECT_EQ(fp.weight_bytes_resident, viewed + copied);
  // 32 tokens of f32: x, h, proj; q, attn; k, v; gate, up; 32 rows of logits. The default
  // all-reduce needs no row-parallel chunk sums (--deterministic_tp adds one per KV group).
  const int64_t t = 32, h = c.hidden_size;
  const int64_t workspace = 4 * t * (3 * h + 2 * q + 2 * kv + 2 * f) + 4 * 32 * c.vocab_size;
  EXPECT_EQ(fp.workspace_bytes, workspace);
}

// Forwards to an in-process communicator and counts the step's waits; `wait_error` replaces
// what the wait returns, as an asynchronous communicator (NCCL) reports a dead peer there.
class AwaitProbe final : public Communicator {
 public:
  AwaitProbe(Communicator* inner, absl::Status wait_error)
      : inner_(inner), wait_error_(std::move(wait_error)) {}
  using Communicator::AllGather;
  using Communicator::AllReduceSum;
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  absl::Status AllReduceSum(absl::Span<float> d) override { return inner_->AllReduceSum(d); }
  absl::Status AllGather(absl::Span<const float> in, absl::Span<float> out) override {
    return inner_->AllGather(in, out);
  }
  absl::Status AllToAll(const void* in, absl::Span<const int64_t> send_counts, void* out,
                        absl::Span<const int64_t> recv_counts, DType dtype) override {
    return inner_->AllToAll(in, send_counts, out, recv_counts, dtype);
  }
  absl::Status Broadcast(absl::Span<uint8_t> d, int root) override {
    return inner_->Broadcast(d, root);
  }
  absl::Status Barrier() override { return inner_->Barrier(); }
  absl::Status AwaitCollectives() override {
    ++waits;
    return wait_error_;
  }
  int waits = 0;

 private:
  Communicator* inner_;
  absl::Status wait_error_;
};

TEST(LlamaModelWait, ForwardAwaitsCollectivesOnceAndReturnsTheWaitError) {
  const ModelSpec config = TinyLlamaSpec();
  auto source = MakeTinyLlama(config, {});
  auto group = std::make_shared<InProcessGroup>(2);
  const absl::Status dead_peer = absl::UnavailableError("AllGather on nccl rank 1/2: peer died");
  std::vector<int> waits(2);
  std::vector<absl::Status> first(2), second(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      CpuBackend backend(CpuBackendOptions{.num_threads = 1});
      InProcessCommunicator inner(group, r);
      AwaitProbe comm(&inner, r == 1 ? dead_peer : absl::OkStatus());
      auto model = LlamaModel::Load(config, *source, {r, 2}, &backend, &comm);
      ASSERT_TRUE(model.ok()) << model.status();
      auto cache = KvCache::Create((*model)->KvShape(8, 4, DType::kF32), backend);
      ASSERT_TRUE(cache.ok()) << cache.status();
      StepBatch b;
      b.Add(/*seq_id=*/0, 0, std::vector<int32_t>{1, 2, 3}, {0});
      std::vector<float> logits(config.vocab_size);
      first[r] = (*model)->Forward(b, cache->get(), logits.data());
      b = StepBatch();
      b.Add(/*seq_id=*/0, 3, std::vector<int32_t>{4}, {0});
      second[r] = (*model)->Forward(b, cache->get(), logits.data());
      waits[r] = comm.waits;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(waits, (std::vector<int>{2, 2}));  // once per step, on every rank
  EXPECT_TRUE(first[0].ok()) << first[0];
  EXPECT_EQ(first[1], dead_peer);
  EXPECT_EQ(second[1], dead_peer);
}

// A backend that records steps (Backend::RunCaptured; here the CPU emulating one) gets decode
// batches padded to a power of two with padding rows: the real rows' logits, and the KV they
// leave for later steps, are those of unpadded steps. (A padding row writing KV would abort on
// its empty block table.)
TEST_F(LlamaModelTest, PaddedRecordedDecodeMatchesPlainDecode) {
  Build({.linear = DType::kQ4_1, .embedding = DType::kQ8_0});
  CpuBackend recorder(CpuBackendOptions{.num_threads = 2, .emulate_step_capture = true});
  ASSERT_TRUE(recorder.SupportsStepCapture());
  auto padded_model = LlamaModel::Load(config_, *source_, {0, 1}, &recorder, &comm_,
                                       LlamaLoadOptions{64});
  ASSERT_TRUE(padded_model.ok()) << padded_model.status();
  auto padded_cache = KvCache::Create((*padded_model)->KvShape(32, 4, DType::kF32), recorder);
  ASSERT_TRUE(padded_cache.ok()) << padded_cache.status();

  const std::vector<std::vector<int32_t>> prompts = {
      {1, 17, 42}, {5, 98, 0, 63, 63}, {12, 77}};
  const std::vector<std::vector<int32_t>> tables = {Table(0, 3), Table(3, 3), Table(6, 3)};
  std::vector<int64_t> length(3);
  for (int s = 0; s < 3; ++s) {  // prompts run unpadded on both (more than one token)
    StepBatch batch;
    batch.Add(/*seq_id=*/0, 0, prompts[s], tables[s]);
    std::vector<float> a(config_.vocab_size), b(config_.vocab_size);
    ASSERT_TRUE(model_->Forward(batch, cache_.get(), a.data()).ok());
    ASSERT_TRUE((*padded_model)->Forward(batch, padded_cache->get(), b.data()).ok());
    length[s] = static_cast<int64_t>(prompts[s].size());
  }
  for (int step = 0; step < 4; ++step) {  // 3 decode rows: padded to 4
    StepBatch batch;
    for (int s = 0; s < 3; ++s) {
      batch.Add(/*seq_id=*/s, length[s], std::vector<int32_t>{static_cast<int32_t>(7 * step + s)},
                tables[s]);
      ++length[s];
    }
    std::vector<float> plain(3 * config_.vocab_size), padded(3 * config_.vocab_size);
    ASSERT_TRUE(model_->Forward(batch, cache_.get(), plain.data()).ok());
    ASSERT_TRUE((*padded_model)->Forward(batch, padded_cache->get(), padded.data()).ok());
    EXPECT_LT(MaxAbsDiff(padded, plain), 1e-5f * MaxAbs(plain)) << "decode step " << step;
  }
}

}  // namespace
}  // namespace tpserve
